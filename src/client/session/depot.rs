//! The depot of requests: xids, the pending queue (one reply slot per request,
//! answered in order), the deferred queue (asynchronous requests that found the
//! writer taken), writing a caller's frame, waiting for its reply, and failing
//! what is pending or deferred when the connection or the session ends.

use super::*;
use std::cell::RefCell;

/// The name of a failed reply's error, for the `code` label: the ZooKeeper
/// code's name (`NoNode`), else the error's kind (`Closed`).
#[cfg(feature = "metrics")]
fn error_label(reply: &Reply) -> Option<&'static str> {
    let e = reply.as_ref().err()?;
    Some(match e.code() {
        Some(code) => code.name(),
        None => match e {
            Error::Closed => "Closed",
            Error::BadArguments(_) => "BadArguments",
            Error::Io(_) => "Io",
            _ => "Other",
        },
    })
}

/// `callback`, measured when it gets its reply (feature `metrics`).
#[cfg(feature = "metrics")]
fn measured(opcode: i32, callback: Callback) -> Callback {
    let started = Timer::start();
    Box::new(move |reply: Reply| {
        metric!(request(op::name(opcode), started, error_label(&reply)));
        callback(reply)
    })
}

/// A request frame on its way out, with what its reply needs.
pub(super) struct Outgoing {
    pub(super) opcode: i32,
    pub(super) frame: Vec<u8>,
    pub(super) reg: Option<WatchReg>,
    pub(super) rewatch: Option<String>,
}

/// Where a reply goes: a blocked caller, or a callback on the event thread.
pub(super) enum ReplyTo {
    Caller(Arc<Slot>),
    Callback(Callback),
}

/// Requests on their way out, in order, with where their replies go.
type Batch = Vec<(Outgoing, ReplyTo)>;

thread_local! {
    /// This thread's asynchronous requests held by
    /// [`SessionShared::in_one_write`], per session (its address, alive while
    /// held: `in_one_write` holds an `Arc` of it), in the order sent.
    static HELD: RefCell<Vec<(usize, Batch)>> = const { RefCell::new(Vec::new()) };
}

/// A blocked caller's reply: filled once by whichever thread reads the reply
/// (the caller itself, another caller, or the connection thread; see
/// [`SessionShared::await_reply`]), which then unparks the caller's thread.
pub(super) struct Slot {
    reply: Mutex<Option<Reply>>,
    thread: thread::Thread,
    /// Whether its caller is in [`SessionShared::await_reply`] (one that
    /// gave up, say at its deadline, is not woken to read).
    waiting: AtomicBool,
}

impl Slot {
    /// A slot for the calling thread.
    pub(super) fn new() -> Arc<Slot> {
        Arc::new(Slot {
            reply: Mutex::new(None),
            thread: thread::current(),
            waiting: AtomicBool::new(false),
        })
    }

    fn fill(&self, reply: Reply) {
        *self.reply.lock() = Some(reply);
        // A caller that read its own reply needs no wake-up (and a stale
        // unpark token would only cut its next park short).
        if self.thread.id() != thread::current().id() {
            self.thread.unpark();
        }
    }

    fn take(&self) -> Option<Reply> {
        self.reply.lock().take()
    }

    fn is_filled(&self) -> bool {
        self.reply.lock().is_some()
    }

    fn wake(&self) {
        self.thread.unpark();
    }
}

pub(super) struct Pending {
    pub(super) xid: i32,
    pub(super) opcode: i32,
    pub(super) to: ReplyTo,
    pub(super) reg: Option<WatchReg>,
    /// removeWatches: the client path whose remaining watches are set again
    /// when the reply arrives (see [`SessionShared::call_remove_watches`]).
    pub(super) rewatch: Option<String>,
}

pub(super) fn auth_frame(scheme: &str, auth: &[u8]) -> Vec<u8> {
    let mut w = Writer::request(xid::AUTH, op::AUTH);
    w.i32(0).string(scheme).buffer(auth);
    w.finish()
}

impl SessionShared {
    pub(super) fn xid(&self) -> i32 {
        loop {
            let x = self.next_xid.fetch_add(1, Ordering::Relaxed);
            if x > 0 {
                return x;
            }
            // Wrapped: start again at 1 (negative xids are reserved).
            let _ = self.next_xid.compare_exchange(
                x.wrapping_add(1),
                1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
    }

    /// Writes a request frame on the current connection and queues its reply
    /// slot; not connected: gives the request back, unsent. The reply is
    /// waited for with [`await_reply`](Self::await_reply).
    pub(super) fn send(&self, req: Outgoing) -> Result<Arc<Slot>, Outgoing> {
        let slot = Slot::new();
        match self.send_to(req, ReplyTo::Caller(slot.clone())) {
            Ok(()) => Ok(slot),
            Err(back) => Err(back.0),
        }
    }

    /// Where an asynchronous call's reply goes: counted until answered, so
    /// that the connection thread reads while any is in flight (no caller
    /// waits for it; see [`must_listen`](Self::must_listen)).
    fn callback_to(&self, callback: Callback) -> ReplyTo {
        self.async_in_flight.fetch_add(1, Ordering::SeqCst);
        self.poke_conn();
        ReplyTo::Callback(callback)
    }

    /// Waits for the reply in `slot` until `until`; `OperationTimeout` then.
    ///
    /// The caller reads it itself when nobody else is reading: it takes the
    /// reader (the connection's read side, one holder at a time), reads and
    /// handles every frame that arrives (other callers' replies, which wake
    /// them, and notifications) until its own reply is in, then lets the
    /// reader go and wakes the next caller still waiting, which reads on.
    /// That saves a thread switch per call: the server's reply wakes the
    /// caller itself, not the connection thread, which would then wake the
    /// caller. Meanwhile the connection thread keeps its timers and reads only
    /// when no caller is, or when it must (see [`serve`](Self::serve)): then
    /// callers leave the reader to it. A caller that finds the reader taken
    /// sleeps until its reply is handed to it or the reader is free again.
    pub(super) fn await_reply(&self, slot: &Slot, until: Instant) -> Reply {
        self.last_call_nanos
            .store(self.now_nanos(), Ordering::Relaxed);
        slot.waiting.store(true, Ordering::SeqCst);
        let reply = self.await_reply_inner(slot, until);
        slot.waiting.store(false, Ordering::SeqCst);
        reply.unwrap_or_else(|| Err(Error::zk_code(ZkError::OperationTimeout)))
    }

    fn await_reply_inner(&self, slot: &Slot, until: Instant) -> Option<Reply> {
        loop {
            if let Some(reply) = slot.take() {
                return Some(reply);
            }
            let now = Instant::now();
            if now >= until {
                return None;
            }
            // Whether this caller read until its reply came or its time ran out
            // (else it sleeps).
            let mut read = false;
            // While the connection thread reads for everyone (a watch is set,
            // say), competing with it would only add thread switches: it
            // hands the reply over, or wakes this caller when it steps aside.
            let reader = if self.must_listen() {
                None
            } else {
                self.reader.try_lock()
            };
            if let Some(mut guard) = reader {
                // A failed read side is left alone: the disconnect answers
                // every caller (reading it again would only spin).
                if let Some(side) = guard.as_mut().filter(|side| !side.failed()) {
                    read = true;
                    #[cfg(feature = "testing")]
                    if let Some(hook) = self.caller_read_hook.lock().take() {
                        hook();
                    }
                    loop {
                        if slot.is_filled() {
                            break;
                        }
                        let left = until.saturating_duration_since(Instant::now());
                        if left.is_zero() {
                            break;
                        }
                        if let Err(end) = side.read_within(self, left) {
                            self.reader_failed(side, end);
                            read = false;
                            break;
                        }
                    }
                }
                drop(guard);
                if read {
                    self.wake_next_reader();
                }
            }
            if !read && !slot.is_filled() {
                // The reader is taken, or there is no connection (the
                // reply is handed over, or the disconnect answers it).
                thread::park_timeout((until - now).min(self.read_tick()));
            }
        }
    }

    /// Wakes the first other caller waiting for its reply (if any), to read
    /// on: the reader was let go.
    pub(super) fn wake_next_reader(&self) {
        let me = thread::current().id();
        let next = self.pending.lock().iter().find_map(|p| match &p.to {
            ReplyTo::Caller(slot)
                if slot.thread.id() != me && slot.waiting.load(Ordering::SeqCst) =>
            {
                Some(slot.clone())
            }
            _ => None,
        });
        if let Some(slot) = next {
            slot.wake();
        }
    }

    /// Answers a reply slot: wakes the caller, or queues the callback.
    pub(super) fn answer(&self, to: ReplyTo, reply: Reply) {
        match to {
            ReplyTo::Caller(slot) => slot.fill(reply),
            ReplyTo::Callback(callback) => {
                self.async_in_flight.fetch_sub(1, Ordering::SeqCst);
                // The event thread has ended (the handle is dead): answer here.
                if let Err(crossbeam_channel::SendError(EventMsg::Answer(callback, reply))) =
                    self.enqueue(EventMsg::Answer(callback, reply))
                {
                    callback(reply);
                }
            }
        }
    }

    /// Sends a request without waiting (Java's async calls): `callback` gets the
    /// reply on the event thread, or `ConnectionLoss` at once when not connected
    /// (and when the connection is lost before the reply), or the session's end.
    ///
    /// Never waits for the writer lock: when another caller holds it (perhaps
    /// blocked writing into a full socket), the request joins the deferred
    /// queue, which the writer's holder writes before letting it go (see
    /// [`release_writer`](Self::release_writer)). A `Drop`'s background release
    /// and the event thread's re-reads stay non-blocking that way.
    pub(crate) fn call_async(
        &self,
        opcode: i32,
        frame: Vec<u8>,
        reg: Option<WatchReg>,
        callback: Callback,
    ) {
        self.call_async_inner(opcode, frame, reg, None, callback)
    }

    /// A removeWatches request (its frame) on `path`, sent as
    /// [`call_async`](Self::call_async): when the reply arrives, the watches
    /// this client still holds on `path` are set again, as after
    /// [`call_remove_watches`](Self::call_remove_watches).
    pub(crate) fn call_remove_watches_async(&self, frame: Vec<u8>, path: &str, callback: Callback) {
        let rewatch = Some(path.to_string());
        self.call_async_inner(op::REMOVE_WATCHES, frame, None, rewatch, callback)
    }

    fn call_async_inner(
        &self,
        opcode: i32,
        frame: Vec<u8>,
        reg: Option<WatchReg>,
        rewatch: Option<String>,
        callback: Callback,
    ) {
        #[cfg(feature = "metrics")]
        let callback = measured(opcode, callback);
        let state = self.state();
        if let Some(e) = Error::for_ended_session(state) {
            // No event thread to answer on any more: answer here, never drop it.
            return callback(Err(e));
        }
        if state != State::Connected {
            return self.answer(
                self.callback_to(callback),
                Err(Error::zk_code(ZkError::ConnectionLoss)),
            );
        }
        let req = Outgoing {
            opcode,
            frame,
            reg,
            rewatch,
        };
        let to = self.callback_to(callback);
        let Some((req, to)) = self.hold((req, to)) else {
            return;
        };
        self.write_without_waiting(vec![(req, to)]);
    }

    /// Writes asynchronous requests, in order and in one write, without
    /// waiting for the writer lock: when another caller holds it (perhaps
    /// blocked writing into a full socket), they join the deferred queue
    /// together, which the writer's holder writes in one write before letting
    /// it go (see [`release_writer`](Self::release_writer)). Not connected:
    /// they are answered as unsent.
    fn write_without_waiting(&self, batch: Vec<(Outgoing, ReplyTo)>) {
        match self.writer.try_lock() {
            Some(mut w) => {
                // What waits in the deferred queue was asked for first.
                self.flush_deferred(&mut w);
                if let Err(back) = self.write_batch_locked(&mut w, batch) {
                    for (_, to) in back {
                        self.answer(to, Err(self.unsent_error()));
                    }
                }
                self.release_writer(w);
            }
            None => {
                self.deferred.lock().extend(batch);
                // The holder may have let the writer go meanwhile, after its
                // last look at the queue: then it is this caller's to flush.
                if let Some(w) = self.writer.try_lock() {
                    self.release_writer(w);
                }
            }
        }
    }

    /// This session's key in [`HELD`].
    fn held_key(&self) -> usize {
        self as *const SessionShared as usize
    }

    /// Runs `f`, holding the asynchronous requests this thread sends on this
    /// session meanwhile; when `f` returns (or unwinds) they are written
    /// together, in the order sent and in one socket write, without waiting
    /// for the writer lock (as [`call_async`](Self::call_async)). A blocking
    /// request this thread sends inside `f` takes the ones held before it
    /// along, in its own write. Nested: the outermost call writes.
    pub(crate) fn in_one_write<T>(&self, f: impl FnOnce() -> T) -> T {
        let key = self.held_key();
        let nested = HELD.with(|h| {
            let mut h = h.borrow_mut();
            if h.iter().any(|(k, _)| *k == key) {
                return true;
            }
            h.push((key, Vec::new()));
            false
        });
        if nested {
            return f();
        }
        /// Writes what was held when `f` is done, whichever way it ends.
        struct Release<'a>(&'a SessionShared);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                let key = self.0.held_key();
                let held = HELD
                    .try_with(|h| {
                        let mut h = h.borrow_mut();
                        let at = h.iter().position(|(k, _)| *k == key)?;
                        Some(h.swap_remove(at).1)
                    })
                    .ok()
                    .flatten()
                    .unwrap_or_default();
                if !held.is_empty() {
                    self.0.write_without_waiting(held);
                }
            }
        }
        let _release = Release(self);
        f()
    }

    /// Keeps `request` for [`in_one_write`](Self::in_one_write)'s write when
    /// this thread holds this session's requests; hands it back otherwise.
    fn hold(&self, request: (Outgoing, ReplyTo)) -> Option<(Outgoing, ReplyTo)> {
        let key = self.held_key();
        let mut request = Some(request);
        let _ = HELD.try_with(|h| {
            if let Some((_, held)) = h.borrow_mut().iter_mut().find(|(k, _)| *k == key) {
                held.extend(request.take());
            }
        });
        request
    }

    /// The requests this thread holds on this session (see
    /// [`in_one_write`](Self::in_one_write)), taken to go out now.
    fn take_held(&self) -> Vec<(Outgoing, ReplyTo)> {
        let key = self.held_key();
        HELD.try_with(|h| {
            h.borrow_mut()
                .iter_mut()
                .find(|(k, _)| *k == key)
                .map(|(_, held)| std::mem::take(held))
        })
        .ok()
        .flatten()
        .unwrap_or_default()
    }

    /// Releases the writer lock after writing the deferred requests; what
    /// every holder of the writer does. Once the lock is released, a request
    /// deferred meanwhile (its caller found the lock taken) is written by this
    /// thread if the lock is free, else by its next holder: none stays behind.
    pub(super) fn release_writer<'a>(&'a self, mut w: MutexGuard<'a, Option<Link>>) {
        loop {
            // A connection shut down by the connection thread goes now: its
            // socket closes with the last clone.
            if w.as_ref().is_some_and(Link::is_shut) {
                w.take();
            }
            self.flush_deferred(&mut w);
            drop(w);
            if self.deferred.lock().is_empty() {
                return;
            }
            match self.writer.try_lock() {
                Some(again) => w = again,
                // Its holder flushes the queue before releasing it.
                None => return,
            }
        }
    }

    /// Writes the deferred requests, in the order they were asked for and in
    /// one write (the writer lock is held): requests deferred together (see
    /// [`in_one_write`](Self::in_one_write)) stay together. Not connected (or
    /// the connection fails on the way): they are answered as pending ones
    /// would be.
    pub(super) fn flush_deferred(&self, w: &mut Option<Link>) {
        loop {
            let batch: Vec<_> = self.deferred.lock().drain(..).collect();
            if batch.is_empty() {
                return;
            }
            if let Err(back) = self.write_batch_locked(w, batch) {
                for (_, to) in back {
                    self.answer(to, Err(self.unsent_error()));
                }
            }
        }
    }

    /// What a request that could not be sent is answered with: the session's
    /// end, else `ConnectionLoss`.
    fn unsent_error(&self) -> Error {
        Error::for_ended_session(self.state())
            .unwrap_or_else(|| Error::zk_code(ZkError::ConnectionLoss))
    }

    /// Writes a request frame on the current connection and queues where its
    /// reply goes. Not connected: hands the request and `to` back, unsent.
    /// Waits for the writer lock (a caller's thread); what was deferred is
    /// written first.
    pub(super) fn send_to(
        &self,
        req: Outgoing,
        to: ReplyTo,
    ) -> Result<(), Box<(Outgoing, ReplyTo)>> {
        let mut w = self.writer.lock();
        self.flush_deferred(&mut w);
        let sent = self.write_locked(&mut w, req, to);
        self.release_writer(w);
        sent
    }

    /// Writes a request frame on the connection in `slot` (the writer lock is
    /// held): see [`write_batch_locked`](Self::write_batch_locked). No
    /// connection: hands the request and `to` back, unsent.
    fn write_locked(
        &self,
        slot: &mut Option<Link>,
        req: Outgoing,
        to: ReplyTo,
    ) -> Result<(), Box<(Outgoing, ReplyTo)>> {
        self.write_own_locked(slot, vec![(req, to)])
            .map_err(|mut back| match back.pop() {
                Some(one) => Box::new(one),
                None => unreachable!("a batch of one comes back whole"),
            })
    }

    /// A caller's requests written as by
    /// [`write_batch_locked`](Self::write_batch_locked), after the ones this
    /// thread holds on this session (see [`in_one_write`](Self::in_one_write)),
    /// in the same write: they were sent first. No connection: hands the
    /// caller's back, unsent (the held ones stay held).
    fn write_own_locked(
        &self,
        slot: &mut Option<Link>,
        batch: Vec<(Outgoing, ReplyTo)>,
    ) -> Result<(), Vec<(Outgoing, ReplyTo)>> {
        if slot.is_none() {
            return Err(batch);
        }
        let held = self.take_held();
        if held.is_empty() {
            return self.write_batch_locked(slot, batch);
        }
        let n = held.len();
        self.write_batch_locked(slot, held.into_iter().chain(batch).collect())
            .map_err(|mut back| back.split_off(n))
    }

    /// A write on the connection in `slot` failed (the writer lock is held): shut
    /// the socket down, forget it, and stop calling the session connected.
    pub(super) fn write_failed(&self, slot: &mut Option<Link>) {
        if let Some(s) = slot.take() {
            s.shutdown();
        }
        self.leave_connected();
        self.poke_conn();
    }

    /// The connection is ending (found by a caller, or a fatal refusal read):
    /// stop calling the session connected at once, so that the next call waits
    /// for the connection thread's verdict (a reconnect, or the session's end)
    /// instead of writing into the dead connection.
    pub(super) fn leave_connected(&self) {
        let mut s = self.session.lock();
        if s.state == State::Connected {
            s.state = State::Connecting;
        }
    }

    /// Sends a request and waits for its reply: waits for a connection first
    /// (up to `connect_wait`), then for the reply (up to `request_timeout`).
    pub(crate) fn call(
        &self,
        opcode: i32,
        frame: Vec<u8>,
        reg: Option<WatchReg>,
        deadline: Deadline,
    ) -> Reply {
        self.call_inner(opcode, frame, reg, None, deadline)
    }

    /// Sends `reqs` together, in order and in one write, and waits for every
    /// reply: ZooKeeper answers a session's requests in the order sent, each
    /// after the earlier ones took effect, so a read placed after a write sees
    /// it and the batch costs one round trip. Waits for a connection first, as
    /// [`call`](Self::call); the replies are waited for up to `request_timeout`
    /// (capped by `deadline`) from the send. `Err` when nothing could be sent
    /// (no connection by then, or the session ended); otherwise one reply per
    /// request, a lost connection answering `ConnectionLoss` to every request
    /// not yet answered, as for single calls.
    /// The requests are `(opcode, frame)`, without watches.
    pub(crate) fn call_batch(
        &self,
        reqs: Vec<(i32, Vec<u8>)>,
        deadline: Deadline,
    ) -> Result<Vec<Reply>, Error> {
        let _started = Timer::start();
        let connect_by = deadline.min_after(self.connect_wait());
        let mut reqs: Vec<Outgoing> = reqs
            .into_iter()
            .map(|(opcode, frame)| Outgoing {
                opcode,
                frame,
                reg: None,
                rewatch: None,
            })
            .collect();
        let receivers = loop {
            self.wait_connected(connect_by)?;
            let mut batch = Vec::with_capacity(reqs.len());
            let mut receivers = Vec::with_capacity(reqs.len());
            for req in reqs {
                let slot = Slot::new();
                receivers.push((slot.clone(), req.opcode));
                batch.push((req, ReplyTo::Caller(slot)));
            }
            let mut w = self.writer.lock();
            self.flush_deferred(&mut w);
            let sent = self.write_own_locked(&mut w, batch);
            self.release_writer(w);
            match sent {
                Ok(()) => break receivers,
                // The connection went between the two steps: wait for the next.
                Err(back) => reqs = back.into_iter().map(|(req, _)| req).collect(),
            }
        };
        let until = deadline.min_after(self.request_timeout());
        Ok(receivers
            .into_iter()
            .map(|(slot, _opcode)| {
                let reply = self.await_reply(&slot, until);
                metric!(request(op::name(_opcode), _started, error_label(&reply)));
                reply
            })
            .collect())
    }

    /// Writes request frames, in order and in one write, on the connection in
    /// `slot` (the writer lock is held): their xids are given and their reply
    /// slots queued before the bytes go out, so the pending queue stays in
    /// write order. No connection: hands them back, unsent.
    ///
    /// A failed write is a disconnect at once: the socket is shut down (the
    /// connection thread's read fails promptly and it reconnects), the state
    /// becomes `Connecting` before the writer lock is released (so the next
    /// callers wait for the reconnect instead of failing in a hot loop), and
    /// these requests are answered with `ConnectionLoss`, after the ones
    /// written before them on the same connection (all lost with it) and
    /// before the connection thread tells `Disconnected`.
    fn write_batch_locked(
        &self,
        slot: &mut Option<Link>,
        batch: Vec<(Outgoing, ReplyTo)>,
    ) -> Result<(), Vec<(Outgoing, ReplyTo)>> {
        let Some(stream) = slot.as_mut() else {
            return Err(batch);
        };
        let mut frames = Vec::with_capacity(batch.len());
        {
            let mut pending = self.pending.lock();
            for (req, to) in batch {
                let Outgoing {
                    opcode,
                    mut frame,
                    reg,
                    rewatch,
                } = req;
                let xid = self.xid();
                proto::set_xid(&mut frame, xid);
                frames.push(frame);
                pending.push_back(Pending {
                    xid,
                    opcode,
                    to,
                    reg,
                    rewatch,
                });
            }
        }
        let written = match frames.as_slice() {
            [one] => stream.write_all(one),
            many => stream.write_all(&many.concat()),
        };
        if let Err(e) = written {
            debug!("write failed: {e}; dropping the connection");
            self.write_failed(slot);
            // The connection is dead: everything pending on it is answered
            // now, this batch with the requests written before it, in the
            // order sent, before the connection thread tells Disconnected
            // (Java's cleanup; see `on_disconnected`). Unless the connection
            // thread's drain has answered them already.
            self.fail_pending(|| Error::zk_code(ZkError::ConnectionLoss));
            return Ok(());
        }
        self.touch_send();
        #[cfg(feature = "testing")]
        {
            let pause = *self.write_pause.lock();
            if !pause.is_zero() {
                thread::sleep(pause);
            }
        }
        Ok(())
    }

    /// A removeWatches request for the client path `path`. ZooKeeper 3.8 keeps one
    /// entry per path and connection in each of its two watch tables, whatever the
    /// watch's mode, and knows only the types Children, Data and Any: a removal
    /// also drops server-side the watches this client still holds on `path` (a
    /// persistent watch lives in both tables). So when the reply arrives, the
    /// connection thread sets those again with SetWatches from the reply's zxid:
    /// a change after the removal still fires them, none fires twice.
    pub(crate) fn call_remove_watches(
        &self,
        frame: Vec<u8>,
        path: &str,
        deadline: Deadline,
    ) -> Reply {
        self.call_inner(
            op::REMOVE_WATCHES,
            frame,
            None,
            Some(path.to_string()),
            deadline,
        )
    }

    /// Every blocking call's one path: sends the request and waits for its
    /// reply ([`send_and_await`](Self::send_and_await)), measured (feature
    /// `metrics`: count, error code, latency by operation).
    pub(super) fn call_inner(
        &self,
        opcode: i32,
        frame: Vec<u8>,
        reg: Option<WatchReg>,
        rewatch: Option<String>,
        deadline: Deadline,
    ) -> Reply {
        let _started = Timer::start();
        let reply = self.send_and_await(opcode, frame, reg, rewatch, deadline);
        metric!(request(op::name(opcode), _started, error_label(&reply)));
        reply
    }

    fn send_and_await(
        &self,
        opcode: i32,
        frame: Vec<u8>,
        reg: Option<WatchReg>,
        rewatch: Option<String>,
        deadline: Deadline,
    ) -> Reply {
        // The caller's deadline caps both waits.
        let connect_by = deadline.min_after(self.connect_wait());
        let mut req = Outgoing {
            opcode,
            frame,
            reg,
            rewatch,
        };
        let slot = loop {
            self.wait_connected(connect_by)?;
            match self.send(req) {
                Ok(slot) => break slot,
                // The connection went between the two steps: wait for the next.
                Err(back) => req = back,
            }
        };
        let until = deadline.min_after(self.request_timeout());
        self.await_reply(&slot, until)
    }

    /// Whether an `add_auth` gave the session an authenticated id: any
    /// scheme but `ip`, whose ids ZooKeeper does not count as authenticated
    /// (`isAuthenticated`: they are not given to `CREATOR_ALL_ACL`). A
    /// refused one ends the handle.
    pub(crate) fn has_auth_identity(&self) -> bool {
        self.auth.lock().iter().any(|(scheme, _)| scheme != "ip")
    }

    /// `add_auth`: remembered for reconnects; waits for the server's answer.
    pub(crate) fn add_auth(&self, scheme: &str, auth: &[u8]) -> Result<(), Error> {
        self.auth.lock().push((scheme.to_string(), auth.to_vec()));
        self.wait_connected(Deadline::never().min_after(self.connect_wait()))?;
        let (tx, rx) = crossbeam_channel::bounded(1);
        let mut w = self.writer.lock();
        let written = match w.as_mut() {
            Some(stream) => {
                self.auth_waiters.lock().push_back(Some(tx));
                // The connection thread reads the answer.
                self.poke_conn();
                if stream.write_all(&auth_frame(scheme, auth)).is_err() {
                    self.write_failed(&mut w);
                }
                self.touch_send();
                true
            }
            None => false,
        };
        self.release_writer(w);
        if !written {
            // Replayed on the next connection.
            return Ok(());
        }
        match rx.recv_timeout(self.request_timeout()) {
            Ok(Ok(_)) => Ok(()),
            // The packet is replayed after the reconnect.
            Ok(Err(e)) if e.is_retryable() => Ok(()),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(Error::zk_code(ZkError::OperationTimeout)),
        }
    }

    /// Answers every request written and not answered, then every deferred
    /// one (never written), with `error`, in the order they were sent (Java's
    /// `cleanup`: the pending queue, then the outgoing one); and the auth
    /// waiters. Under the `answering` lock, which the connection thread holds
    /// until it has told `Disconnected`: those answers come first.
    pub(super) fn fail_pending(&self, error: impl Fn() -> Error) {
        let _order = self.answering.lock();
        let drained: Vec<Pending> = self.pending.lock().drain(..).collect();
        for p in drained {
            self.answer(p.to, Err(error()));
        }
        let deferred: Vec<(Outgoing, ReplyTo)> = self.deferred.lock().drain(..).collect();
        for (_, to) in deferred {
            self.answer(to, Err(error()));
        }
        let waiters: Vec<_> = self.auth_waiters.lock().drain(..).collect();
        for tx in waiters.into_iter().flatten() {
            let _ = tx.send(Err(error()));
        }
    }
}
