//! Watch operations: persistent and recursive watches (`add_watch`) and
//! `remove_watches`.

use super::*;

/// Watchers removed here, each with the event it is to be told.
type Removed = Vec<(WatcherRef, EventType)>;

impl ZooKeeper {
    fn add_watch_impl(&self, path: &str, mode: AddWatchMode, watcher: WatcherRef) -> Result<()> {
        validate_path(path, false)?;
        let mut w = Writer::request(0, op::ADD_WATCH);
        w.string(&self.server_path(path)).i32(mode.code());
        let kind = match mode {
            AddWatchMode::Persistent => Kind::Persistent,
            AddWatchMode::PersistentRecursive => Kind::Recursive,
        };
        let reg = WatchReg {
            exists: false,
            kind,
            path: path.to_string(),
            watcher,
        };
        self.call(op::ADD_WATCH, w, Some(reg), path).map(drop)
    }

    /// Adds a persistent (optionally recursive) watch for the default watcher;
    /// it stays until removed (and survives reconnects).
    ///
    /// # Errors
    /// `BadArguments` for a bad path; [`Error::Unsupported`] (`code()`
    /// `Unimplemented`) naming ZooKeeper 3.6 from an older server, which also
    /// closes the connection after answering: the client reconnects and the
    /// session lives on, as with Java's client. (No 3.5 server is at hand for
    /// the tests; the error mapping is unit-tested.) The session's errors.
    pub fn add_watch(&self, path: &str, mode: AddWatchMode) -> Result<()> {
        self.add_watch_impl(path, mode, self.default_watcher())
    }

    /// [`add_watch`](Self::add_watch) with its own watcher.
    pub fn add_watch_w(
        &self,
        path: &str,
        mode: AddWatchMode,
        watcher: impl Watcher + 'static,
    ) -> Result<()> {
        self.add_watch_impl(path, mode, Arc::new(watcher))
    }

    /// Removes every watch of `watcher_type` on `path`, here and on the server
    /// (Java's `removeAllWatches`); each removed watcher is told with a
    /// `DataWatchRemoved` / `ChildWatchRemoved` / `PersistentWatchRemoved` event.
    ///
    /// # Errors
    /// `NoWatcher` when this client has no such watch on `path`.
    pub fn remove_watches(&self, path: &str, watcher_type: WatcherType) -> Result<()> {
        let (removed, frame) = self.remove_watches_locally(path, watcher_type)?;
        let reply = self
            .shared()
            .call_remove_watches(frame, path, self.deadline);
        self.removed_watches(path, removed, reply);
        Ok(())
    }

    /// Removes one watcher's watches of `watcher_type` on `path`, leaving
    /// the other watchers' (Java's `removeWatches(path, watcher, type,
    /// local = false)`): `watcher` is the `Arc` given to
    /// [`get_data_watch`](Self::get_data_watch),
    /// [`exists_watch`](Self::exists_watch) or
    /// [`get_children_watch`](Self::get_children_watch) (the `*_w` forms
    /// wrap theirs, which no caller holds). It is told the
    /// `DataWatchRemoved` / `ChildWatchRemoved` / `PersistentWatchRemoved`
    /// event; the others hear nothing and keep firing. When it was the last
    /// watcher of those types on `path`, the server's watch is removed too
    /// (one round trip); otherwise nothing is sent.
    ///
    /// # Errors
    /// `NoWatcher` when `watcher` has no such watch on `path` here.
    #[doc(alias = "removeWatches")]
    pub fn remove_watcher(
        &self,
        path: &str,
        watcher: &Arc<dyn Watcher>,
        watcher_type: WatcherType,
    ) -> Result<()> {
        validate_path(path, false)?;
        let (removed, last) = self
            .shared()
            .watches
            .lock()
            .remove_one(path, watcher_type, watcher);
        if removed.is_empty() {
            return Err(Error::zk(ZkError::NoWatcher, path));
        }
        let reply = if last {
            let wire = match watcher_type {
                WatcherType::Persistent | WatcherType::PersistentRecursive => WatcherType::Any,
                t => t,
            };
            let mut w = Writer::request(0, op::REMOVE_WATCHES);
            w.string(&self.server_path(path)).i32(wire.code());
            self.shared()
                .call_remove_watches(w.finish(), path, self.deadline)
        } else {
            Ok(Vec::new())
        };
        self.removed_watches(path, removed, reply);
        Ok(())
    }

    /// [`remove_watches`](Self::remove_watches) without waiting (Java's
    /// `removeAllWatches(path, type, local, VoidCallback, ctx)`, `local`
    /// false): the watches are removed here at once and the request sent;
    /// `callback` gets the outcome on the event thread (see
    /// [`delete_async`](Self::delete_async)), `Ok` also when the server no
    /// longer held them (fired meanwhile), as the blocking form. ZooKeeper
    /// answers a session's requests in the order sent: a request sent on this
    /// handle after this call reaches the server once the watches are gone
    /// there (a `delete` of the node then notifies no removed watch), at no
    /// round trip of its own.
    pub fn remove_watches_async(
        &self,
        path: &str,
        watcher_type: WatcherType,
        callback: impl FnOnce(Result<()>) + Send + 'static,
    ) {
        let (removed, frame) = match self.remove_watches_locally(path, watcher_type) {
            Ok(r) => r,
            Err(e) => return callback(Err(e)),
        };
        let (me, p) = (self.clone(), path.to_string());
        self.shared().call_remove_watches_async(
            frame,
            path,
            Box::new(move |reply| {
                me.removed_watches(&p, removed, reply);
                callback(Ok(()))
            }),
        );
    }

    /// The first half of [`remove_watches`](Self::remove_watches): removes the
    /// watches here; returns them with the request's frame.
    fn remove_watches_locally(
        &self,
        path: &str,
        watcher_type: WatcherType,
    ) -> Result<(Removed, Vec<u8>)> {
        validate_path(path, false)?;
        // ZooKeeper 3.8 knows the types Children, Data and Any only; a persistent
        // watch sits in both of its tables, so Any removes it (the connection
        // thread sets again whatever else this client still watches on `path`).
        let wire = match watcher_type {
            WatcherType::Persistent | WatcherType::PersistentRecursive => WatcherType::Any,
            t => t,
        };
        let mut w = Writer::request(0, op::REMOVE_WATCHES);
        w.string(&self.server_path(path)).i32(wire.code());
        if w.body_len() > MAX_PACKET {
            return Err(Error::BadArguments(format!("path too long: {path}")));
        }
        let removed = self.shared().watches.lock().remove(path, watcher_type);
        if removed.is_empty() {
            return Err(Error::zk(ZkError::NoWatcher, path));
        }
        Ok((removed, w.finish()))
    }

    /// The second half of [`remove_watches`](Self::remove_watches): the
    /// server's `reply` logged, the removed watchers told.
    fn removed_watches(&self, path: &str, removed: Removed, reply: session::Reply) {
        match reply {
            Ok(_) => {}
            // Fired or gone server-side meanwhile: removed all the same.
            Err(e) if e.is(ZkError::NoWatcher) => {}
            Err(e) => log::debug!("removeWatches {path}: {e}; removed locally"),
        }
        // Told on the event thread, like every other event.
        for event_type in [
            EventType::DataWatchRemoved,
            EventType::ChildWatchRemoved,
            EventType::PersistentWatchRemoved,
        ] {
            let watchers: Vec<WatcherRef> = removed
                .iter()
                .filter(|(_, t)| *t == event_type)
                .map(|(w, _)| w.clone())
                .collect();
            self.shared()
                .deliver(watchers, WatchedEvent::node(event_type, path));
        }
    }
}
