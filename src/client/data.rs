//! Operations on nodes: create, delete, exists, data, children, ACLs, sync,
//! ephemerals (blocking and asynchronous forms).

use super::*;

/// [`ZooKeeper::exists_then_create_each`]'s outcomes: the parent's `Stat`,
/// then each create's path.
pub(crate) type ExistsThenCreated = (Result<Option<Stat>>, Vec<Result<String>>);

impl ZooKeeper {
    /// A create's request: its opcode (create, create2, createContainer or
    /// createTTL) and frame.
    fn create_request(
        &self,
        path: &str,
        data: &[u8],
        acl: &[Acl],
        mode: CreateMode,
        ttl: Option<Duration>,
        want_stat: bool,
    ) -> Result<(i32, Writer)> {
        validate_path(path, mode.is_sequential())?;
        if acl.is_empty() {
            return Err(Error::zk(ZkError::InvalidAcl, path));
        }
        let ttl_ms = match (mode.is_ttl(), ttl) {
            (true, Some(t)) => Some(crate::types::ttl_millis(t).ok_or_else(|| {
                Error::BadArguments(format!("ttl {t:?} out of range (1 ms to 2^40 ms)"))
            })?),
            (true, None) => {
                return Err(Error::BadArguments(format!(
                    "{mode:?} needs a ttl: use create_ttl"
                )))
            }
            (false, Some(_)) => {
                return Err(Error::BadArguments(format!("{mode:?} takes no ttl")));
            }
            (false, None) => None,
        };
        let opcode = if ttl_ms.is_some() {
            op::CREATE_TTL
        } else if mode == CreateMode::Container {
            op::CREATE_CONTAINER
        } else if want_stat {
            op::CREATE2
        } else {
            op::CREATE
        };
        let mut w = Writer::request(0, opcode);
        w.string(&self.server_path(path))
            .buffer(data)
            .acl(acl)
            .i32(mode.flags());
        if let Some(ms) = ttl_ms {
            w.i64(ms);
        }
        Ok((opcode, w))
    }

    fn create_impl(
        &self,
        path: &str,
        data: &[u8],
        acl: &[Acl],
        mode: CreateMode,
        ttl: Option<Duration>,
        want_stat: bool,
    ) -> Result<(String, Option<Stat>)> {
        let (opcode, w) = self.create_request(path, data, acl, mode, ttl, want_stat)?;
        let body = self.call(opcode, w, None, path)?;
        created(opcode, &body, path, self.chroot())
    }

    /// [`create2`](Self::create2) and a [`get_children`](Self::get_children) of
    /// `parent` sent together, without waiting between them: the server answers
    /// a session's requests in order, so the listing is made after the create
    /// took effect, and the pair costs one round trip. The lock's first step.
    ///
    /// The create's outcome is as `create2`'s; the listing's is its own: the
    /// caller decides what a failed listing means (the lock's acquire counts
    /// it as the first attempt of its listing).
    pub(crate) fn create2_and_get_children(
        &self,
        path: &str,
        data: &[u8],
        acl: &[Acl],
        mode: CreateMode,
        parent: &str,
    ) -> Result<(String, Stat, Result<Vec<String>>)> {
        validate_path(parent, false)?;
        let (opcode, create) = self.create_request(path, data, acl, mode, None, true)?;
        self.check_size(&create, path)?;
        let mut list = Writer::request(0, op::GET_CHILDREN);
        list.string(&self.server_path(parent)).bool(false);
        let replies = self
            .shared()
            .call_batch(
                vec![(opcode, create.finish()), (op::GET_CHILDREN, list.finish())],
                self.deadline,
            )
            .map_err(|e| with_path(e, path))?;
        let mut replies = replies.into_iter();
        let created = replies
            .next()
            .unwrap_or_else(|| Err(Error::zk_code(ZkError::ConnectionLoss)))
            .map_err(|e| with_path(unsupported(opcode, e), path))
            .and_then(|body| created(opcode, &body, path, self.chroot()))?;
        let listed = replies
            .next()
            .unwrap_or_else(|| Err(Error::zk_code(ZkError::ConnectionLoss)))
            .map_err(|e| no_read(op::GET_CHILDREN, with_path(e, parent)))
            .and_then(|body| {
                Reader::new(&body)
                    .strings()
                    .map_err(|_| marshalling(parent))
            });
        if let Err(e) = &listed {
            log::debug!("listing {parent} after creating {}: {e}", created.0);
        }
        Ok((created.0, created.1.unwrap_or_default(), listed))
    }

    /// An `exists` of `parent` and one create of `path` per item of `datas`,
    /// sent together in one write, without waiting between them (see
    /// [`create2_and_get_children`](Self::create2_and_get_children)): the
    /// server applies a session's requests in order, so `parent`'s `Stat` is
    /// read before the first create (a sequential create's number is its
    /// parent's `cversion` then), and the batch costs one round trip. A
    /// queue's `offer_all`.
    ///
    /// The outcomes: `parent`'s `Stat` (`None`: missing), and each create's
    /// path, in order; a lost connection answers `ConnectionLoss` to every
    /// request not answered yet. `Err` when nothing was sent (an invalid path
    /// or ACL, a request over the packet limit, no connection).
    pub(crate) fn exists_then_create_each(
        &self,
        parent: &str,
        path: &str,
        datas: &[&[u8]],
        acl: &[Acl],
        mode: CreateMode,
    ) -> Result<ExistsThenCreated> {
        validate_path(parent, false)?;
        let mut reqs = Vec::with_capacity(datas.len() + 1);
        let mut exists = Writer::request(0, op::EXISTS);
        exists.string(&self.server_path(parent)).bool(false);
        reqs.push((op::EXISTS, exists.finish()));
        let mut opcode = op::CREATE;
        for data in datas {
            let (o, create) = self.create_request(path, data, acl, mode, None, false)?;
            self.check_size(&create, path)?;
            opcode = o;
            reqs.push((o, create.finish()));
        }
        let mut replies = self
            .shared()
            .call_batch(reqs, self.deadline)
            .map_err(|e| with_path(e, path))?
            .into_iter();
        let stat = match replies.next() {
            Some(Ok(body)) => Reader::new(&body)
                .stat()
                .map(Some)
                .map_err(|_| marshalling(parent)),
            Some(Err(e)) if e.is(ZkError::NoNode) => Ok(None),
            Some(Err(e)) => Err(no_read(op::EXISTS, with_path(e, parent))),
            None => Err(Error::zk(ZkError::ConnectionLoss, parent)),
        };
        let created = replies
            .map(|reply| {
                reply
                    .map_err(|e| with_path(e, path))
                    .and_then(|body| created(opcode, &body, path, self.chroot()))
                    .map(|(p, _)| p)
            })
            .collect();
        Ok((stat, created))
    }

    /// Creates a node; returns its path (with the sequence number for sequential
    /// modes). Java's `create(path, data, acl, mode)`.
    ///
    /// # Errors
    /// `NodeExists`, `NoNode` (no parent), `NoChildrenForEphemerals`, `NoAuth`,
    /// `InvalidAcl`; `BadArguments` for a bad path, a TTL mode (use
    /// [`create_ttl`](Self::create_ttl)) or data over the packet limit.
    pub fn create(&self, path: &str, data: &[u8], acl: &[Acl], mode: CreateMode) -> Result<String> {
        self.create_impl(path, data, acl, mode, None, false)
            .map(|(p, _)| p)
    }

    /// Creates a node and returns its path and `Stat` (Java's `create(.., stat)`,
    /// opcode create2).
    ///
    /// # Errors
    /// As [`create`](Self::create).
    pub fn create2(
        &self,
        path: &str,
        data: &[u8],
        acl: &[Acl],
        mode: CreateMode,
    ) -> Result<(String, Stat)> {
        let (p, stat) = self.create_impl(path, data, acl, mode, None, true)?;
        Ok((p, stat.unwrap_or_default()))
    }

    /// Creates a node with a TTL (`PersistentWithTtl` or
    /// `PersistentSequentialWithTtl`; the server needs
    /// `zookeeper.extendedTypesEnabled=true`).
    ///
    /// # Errors
    /// As [`create`](Self::create); [`Error::Unsupported`] (`code()`
    /// `Unimplemented`) naming `extendedTypesEnabled` when the server has
    /// TTLs disabled (the connection stays); `BadArguments` for a non-TTL
    /// mode or a TTL out of range.
    pub fn create_ttl(
        &self,
        path: &str,
        data: &[u8],
        acl: &[Acl],
        mode: CreateMode,
        ttl: Duration,
    ) -> Result<(String, Stat)> {
        let (p, stat) = self.create_impl(path, data, acl, mode, Some(ttl), true)?;
        Ok((p, stat.unwrap_or_default()))
    }

    /// Deletes a node, at `version` or any version (`None`).
    ///
    /// # Errors
    /// `NoNode`, `BadVersion`, `NotEmpty`, `NoAuth`.
    pub fn delete(&self, path: &str, version: Option<i32>) -> Result<()> {
        validate_path(path, false)?;
        let mut w = Writer::request(0, op::DELETE);
        w.string(&self.server_path(path)).i32(version.unwrap_or(-1));
        self.call(op::DELETE, w, None, path).map(drop)
    }

    /// [`delete`](Self::delete) without waiting (Java's `delete(path, version,
    /// VoidCallback, ctx)`): `callback` gets the outcome on the event thread —
    /// `ConnectionLoss` at once when not connected, or when the connection is lost
    /// before the reply: then, as in Java, before the `Disconnected` event, in
    /// the order the requests were sent (see the [module docs](crate::client)
    /// on event order). Keep callbacks short, as watchers.
    pub fn delete_async(
        &self,
        path: &str,
        version: Option<i32>,
        callback: impl FnOnce(Result<()>) + Send + 'static,
    ) {
        if let Err(e) = validate_path(path, false) {
            return callback(Err(e));
        }
        let mut w = Writer::request(0, op::DELETE);
        w.string(&self.server_path(path)).i32(version.unwrap_or(-1));
        let p = path.to_string();
        self.shared().call_async(
            op::DELETE,
            w.finish(),
            None,
            Box::new(move |reply| callback(reply.map(drop).map_err(|e| with_path(e, &p)))),
        );
    }

    /// [`sync`](Self::sync) without waiting (Java's `sync(path, VoidCallback,
    /// ctx)`): `callback` gets the outcome on the event thread (see
    /// [`delete_async`](Self::delete_async)). A read sent on this handle after
    /// the callback ran sees everything the leader had committed when the sync
    /// reached it.
    pub fn sync_async(&self, path: &str, callback: impl FnOnce(Result<()>) + Send + 'static) {
        if let Err(e) = validate_path(path, false) {
            return callback(Err(e));
        }
        let mut w = Writer::request(0, op::SYNC);
        w.string(&self.server_path(path));
        let p = path.to_string();
        self.shared().call_async(
            op::SYNC,
            w.finish(),
            None,
            Box::new(move |reply| callback(reply.map(drop).map_err(|e| with_path(e, &p)))),
        );
    }

    /// [`create2`](Self::create2) without waiting (Java's `create(path, data,
    /// acl, mode, Create2Callback, ctx)`): `callback` gets the created path and
    /// `Stat` on the event thread (see [`delete_async`](Self::delete_async)). A
    /// request sent after it on this handle is answered after it, and sees
    /// the node: `create_async` then a blocking `get_children` of the parent
    /// lists the new node in one round trip.
    ///
    /// A lost connection answers `ConnectionLoss` without saying whether the
    /// node was made; [`RecoverableZooKeeper`](crate::RecoverableZooKeeper)'s
    /// blocking creates settle that, this call does not.
    pub fn create_async(
        &self,
        path: &str,
        data: &[u8],
        acl: &[Acl],
        mode: CreateMode,
        callback: impl FnOnce(Result<(String, Stat)>) + Send + 'static,
    ) {
        let (opcode, w) = match self
            .create_request(path, data, acl, mode, None, true)
            .and_then(|(opcode, w)| self.check_size(&w, path).map(|()| (opcode, w)))
        {
            Ok(request) => request,
            Err(e) => return callback(Err(e)),
        };
        let p = path.to_string();
        let chroot = self.chroot().map(str::to_string);
        self.shared().call_async(
            opcode,
            w.finish(),
            None,
            Box::new(move |reply| {
                callback(
                    reply
                        .map_err(|e| with_path(unsupported(opcode, e), &p))
                        .and_then(|body| created(opcode, &body, &p, chroot.as_deref()))
                        .map(|(path, stat)| (path, stat.unwrap_or_default())),
                )
            }),
        );
    }

    /// [`get_children`](Self::get_children) without waiting; `callback` gets the
    /// outcome on the event thread (see [`delete_async`](Self::delete_async)).
    /// With `watcher`, a child watch is set for it, registered on the connection
    /// thread together with the reply: an event for it can only come after the
    /// callback has run.
    pub fn get_children_async(
        &self,
        path: &str,
        watcher: Option<Arc<dyn Watcher>>,
        callback: impl FnOnce(Result<Vec<String>>) + Send + 'static,
    ) {
        let watch = watch_reg(false, Kind::Child, path, watcher);
        self.read_async(op::GET_CHILDREN, path, watch, callback, |reply, p| {
            reply
                .map_err(|e| no_read(op::GET_CHILDREN, with_path(e, p)))
                .and_then(|body| Reader::new(&body).strings().map_err(|_| marshalling(p)))
        });
    }

    /// [`exists`](Self::exists) without waiting: `callback` gets the node's
    /// `Stat` or `None` on the event thread (see
    /// [`delete_async`](Self::delete_async)). With `watcher`, a watch is set as by
    /// [`exists_watch`](Self::exists_watch), registered together with the reply.
    pub fn exists_async(
        &self,
        path: &str,
        watcher: Option<Arc<dyn Watcher>>,
        callback: impl FnOnce(Result<Option<Stat>>) + Send + 'static,
    ) {
        let watch = watch_reg(true, Kind::Data, path, watcher);
        self.read_async(op::EXISTS, path, watch, callback, |reply, p| match reply {
            Ok(body) => Reader::new(&body)
                .stat()
                .map(Some)
                .map_err(|_| marshalling(p)),
            Err(e) if e.is(ZkError::NoNode) => Ok(None),
            Err(e) => Err(no_read(op::EXISTS, with_path(e, p))),
        });
    }

    /// [`get_data`](Self::get_data) without waiting: `callback` gets the data and
    /// `Stat` on the event thread (see [`delete_async`](Self::delete_async)). With
    /// `watcher`, a data watch is set as by [`get_data_watch`](Self::get_data_watch)
    /// (none when the node is missing), registered together with the reply.
    pub fn get_data_async(
        &self,
        path: &str,
        watcher: Option<Arc<dyn Watcher>>,
        callback: impl FnOnce(Result<(Vec<u8>, Stat)>) + Send + 'static,
    ) {
        let watch = watch_reg(false, Kind::Data, path, watcher);
        self.read_async(op::GET_DATA, path, watch, callback, |reply, p| {
            reply
                .map_err(|e| no_read(op::GET_DATA, with_path(e, p)))
                .and_then(|body| read_data(&body).map_err(|_| marshalling(p)))
        });
    }

    /// Runs `f` and sends the asynchronous requests it makes on this
    /// handle's session, from this thread (through this handle or a clone of
    /// it), together: in the order made and in one socket write, when `f`
    /// returns. The server reads them at once, so requests sent together cost
    /// one round trip by construction (the server answers a session's
    /// requests in order: a request sees the ones before it take effect),
    /// where two writes may cost two on a loaded machine (the server answers
    /// the first before it has read the second). Returns what `f` returns.
    ///
    /// Nothing waits: the requests are written as
    /// [`delete_async`](Self::delete_async) writes one (when another thread
    /// is writing, they are queued together and written together by it), and
    /// their callbacks run as theirs do. A blocking call made inside `f`
    /// takes the requests made before it along, in its own write. Nested
    /// calls write once, when the outermost returns. Requests on another
    /// session, or from another thread, are not held.
    ///
    /// ```no_run
    /// # use zklock::client::ZooKeeper;
    /// # fn pair(zk: &ZooKeeper) {
    /// // The successor's listing and the watch on its own node: one write.
    /// zk.in_one_write(|| {
    ///     zk.get_children_async("/lock", None, |children| { let _ = children; });
    ///     zk.exists_async("/lock/write-0000000001", None, |stat| { let _ = stat; });
    /// });
    /// # }
    /// ```
    pub fn in_one_write<T>(&self, f: impl FnOnce() -> T) -> T {
        self.shared().in_one_write(f)
    }

    /// A read (`path` and a watch flag) sent without waiting: `decode` turns the
    /// reply into `callback`'s answer on the event thread; the watch is
    /// registered together with the reply.
    fn read_async<T: 'static>(
        &self,
        opcode: i32,
        path: &str,
        watch: Option<WatchReg>,
        callback: impl FnOnce(Result<T>) + Send + 'static,
        decode: fn(session::Reply, &str) -> Result<T>,
    ) {
        if let Err(e) = validate_path(path, false) {
            return callback(Err(e));
        }
        let mut w = Writer::request(0, opcode);
        w.string(&self.server_path(path)).bool(watch.is_some());
        let p = path.to_string();
        self.shared().call_async(
            opcode,
            w.finish(),
            watch,
            Box::new(move |reply| callback(decode(reply, &p))),
        );
    }

    fn exists_impl(&self, path: &str, watcher: Option<WatcherRef>) -> Result<Option<Stat>> {
        validate_path(path, false)?;
        let mut w = Writer::request(0, op::EXISTS);
        w.string(&self.server_path(path)).bool(watcher.is_some());
        let reg = watch_reg(true, Kind::Data, path, watcher);
        match self.call(op::EXISTS, w, reg, path) {
            Ok(body) => Ok(Some(
                Reader::new(&body).stat().map_err(|_| marshalling(path))?,
            )),
            Err(e) if e.is(ZkError::NoNode) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The node's `Stat`, or `None` if it does not exist. With `watch`, the
    /// default watcher is told when the node is created, deleted or changed (a
    /// watch is set even when the node does not exist).
    ///
    /// # Errors
    /// [`Error::NoReadPermission`] (`code()` `NoAuth`) from ZooKeeper 3.8.4+
    /// and 3.9.2+ when the node exists and its ACL gives this session no
    /// `READ` (ZOOKEEPER-2590; older servers answer its `Stat`, and from 3.7
    /// on do not deliver its events to such a session).
    pub fn exists(&self, path: &str, watch: bool) -> Result<Option<Stat>> {
        self.exists_impl(path, watch.then(|| self.default_watcher()))
    }

    /// [`exists`](Self::exists) with its own watcher.
    pub fn exists_w(&self, path: &str, watcher: impl Watcher + 'static) -> Result<Option<Stat>> {
        self.exists_impl(path, Some(Arc::new(watcher)))
    }

    /// [`exists`](Self::exists) with a shared watcher (registered once per path
    /// however often it is passed).
    pub fn exists_watch(&self, path: &str, watcher: Arc<dyn Watcher>) -> Result<Option<Stat>> {
        self.exists_impl(path, Some(watcher))
    }

    fn get_data_impl(&self, path: &str, watcher: Option<WatcherRef>) -> Result<(Vec<u8>, Stat)> {
        validate_path(path, false)?;
        let mut w = Writer::request(0, op::GET_DATA);
        w.string(&self.server_path(path)).bool(watcher.is_some());
        let reg = watch_reg(false, Kind::Data, path, watcher);
        let body = self.call(op::GET_DATA, w, reg, path)?;
        read_data(&body).map_err(|_| marshalling(path))
    }

    /// The node's data and `Stat`. With `watch`, the default watcher is told of
    /// the next change or deletion (no watch is left when the node is missing).
    ///
    /// # Errors
    /// `NoNode`; [`Error::NoReadPermission`] (`code()` `NoAuth`) when its
    /// ACL gives this session no `READ`.
    pub fn get_data(&self, path: &str, watch: bool) -> Result<(Vec<u8>, Stat)> {
        self.get_data_impl(path, watch.then(|| self.default_watcher()))
    }

    /// [`get_data`](Self::get_data) with its own watcher.
    pub fn get_data_w(
        &self,
        path: &str,
        watcher: impl Watcher + 'static,
    ) -> Result<(Vec<u8>, Stat)> {
        self.get_data_impl(path, Some(Arc::new(watcher)))
    }

    /// [`get_data`](Self::get_data) with a shared watcher.
    pub fn get_data_watch(&self, path: &str, watcher: Arc<dyn Watcher>) -> Result<(Vec<u8>, Stat)> {
        self.get_data_impl(path, Some(watcher))
    }

    /// Sets the node's data, at `version` or any version (`None`); returns the new
    /// `Stat`.
    ///
    /// # Errors
    /// `NoNode`, `BadVersion`, `NoAuth`; `BadArguments` over the packet limit.
    pub fn set_data(&self, path: &str, data: &[u8], version: Option<i32>) -> Result<Stat> {
        validate_path(path, false)?;
        let mut w = Writer::request(0, op::SET_DATA);
        w.string(&self.server_path(path))
            .buffer(data)
            .i32(version.unwrap_or(-1));
        let body = self.call(op::SET_DATA, w, None, path)?;
        Reader::new(&body).stat().map_err(|_| marshalling(path))
    }

    fn children_impl(
        &self,
        path: &str,
        watcher: Option<WatcherRef>,
        with_stat: bool,
    ) -> Result<(Vec<String>, Option<Stat>)> {
        validate_path(path, false)?;
        let opcode = if with_stat {
            op::GET_CHILDREN2
        } else {
            op::GET_CHILDREN
        };
        let mut w = Writer::request(0, opcode);
        w.string(&self.server_path(path)).bool(watcher.is_some());
        let reg = watch_reg(false, Kind::Child, path, watcher);
        let body = self.call(opcode, w, reg, path)?;
        let mut r = Reader::new(&body);
        let children = r.strings().map_err(|_| marshalling(path))?;
        let stat = if with_stat {
            Some(r.stat().map_err(|_| marshalling(path))?)
        } else {
            None
        };
        Ok((children, stat))
    }

    /// The names of the node's children (unordered). With `watch`, the default
    /// watcher is told when the children change or the node is deleted.
    ///
    /// # Errors
    /// `NoNode`; [`Error::NoReadPermission`] (`code()` `NoAuth`) when its
    /// ACL gives this session no `READ`.
    pub fn get_children(&self, path: &str, watch: bool) -> Result<Vec<String>> {
        self.children_impl(path, watch.then(|| self.default_watcher()), false)
            .map(|(c, _)| c)
    }

    /// [`get_children`](Self::get_children) with its own watcher.
    pub fn get_children_w(
        &self,
        path: &str,
        watcher: impl Watcher + 'static,
    ) -> Result<Vec<String>> {
        self.children_impl(path, Some(Arc::new(watcher)), false)
            .map(|(c, _)| c)
    }

    /// [`get_children`](Self::get_children) with a shared watcher.
    pub fn get_children_watch(&self, path: &str, watcher: Arc<dyn Watcher>) -> Result<Vec<String>> {
        self.children_impl(path, Some(watcher), false)
            .map(|(c, _)| c)
    }

    /// The children and the node's `Stat` (opcode getChildren2).
    ///
    /// # Errors
    /// `NoNode`, `NoAuth`.
    pub fn get_children2(&self, path: &str, watch: bool) -> Result<(Vec<String>, Stat)> {
        let (c, s) = self.children_impl(path, watch.then(|| self.default_watcher()), true)?;
        Ok((c, s.unwrap_or_default()))
    }

    /// The node's ACL and `Stat`.
    ///
    /// # Errors
    /// `NoNode`.
    pub fn get_acl(&self, path: &str) -> Result<(Vec<Acl>, Stat)> {
        validate_path(path, false)?;
        let mut w = Writer::request(0, op::GET_ACL);
        w.string(&self.server_path(path));
        let body = self.call(op::GET_ACL, w, None, path)?;
        let mut r = Reader::new(&body);
        let acl = r.acl().map_err(|_| marshalling(path))?;
        let stat = r.stat().map_err(|_| marshalling(path))?;
        Ok((acl, stat))
    }

    /// Sets the node's ACL at ACL `version` (or any, `None`).
    ///
    /// # Errors
    /// `NoNode`, `BadVersion`, `InvalidAcl`, `NoAuth`.
    pub fn set_acl(&self, path: &str, acl: &[Acl], version: Option<i32>) -> Result<Stat> {
        validate_path(path, false)?;
        if acl.is_empty() {
            return Err(Error::zk(ZkError::InvalidAcl, path));
        }
        let mut w = Writer::request(0, op::SET_ACL);
        w.string(&self.server_path(path))
            .acl(acl)
            .i32(version.unwrap_or(-1));
        let body = self.call(op::SET_ACL, w, None, path)?;
        Reader::new(&body).stat().map_err(|_| marshalling(path))
    }

    /// Waits until the connected server has caught up with the leader for `path`
    /// (Java's `sync`, made blocking).
    pub fn sync(&self, path: &str) -> Result<()> {
        validate_path(path, false)?;
        let mut w = Writer::request(0, op::SYNC);
        w.string(&self.server_path(path));
        self.call(op::SYNC, w, None, path).map(drop)
    }

    /// The session's ephemeral nodes whose path starts with `prefix` (`/` for all).
    pub fn get_ephemerals(&self, prefix: &str) -> Result<Vec<String>> {
        if !prefix.starts_with('/') || prefix.contains('\0') {
            return Err(Error::BadArguments(format!("invalid prefix {prefix:?}")));
        }
        let mut w = Writer::request(0, op::GET_EPHEMERALS);
        w.string(&self.server_path(prefix));
        let body = self.call(op::GET_EPHEMERALS, w, None, prefix)?;
        let list = Reader::new(&body)
            .strings()
            .map_err(|_| marshalling(prefix))?;
        Ok(list.iter().map(|p| self.client_path(p)).collect())
    }
}

impl ZooKeeper {
    /// The number of `path`'s descendants, at every depth (`path` itself not
    /// counted): Java's `getAllChildrenNumber` (ZooKeeper 3.6). Sets no watch.
    ///
    /// # Errors
    /// `NoNode`; `NoAuth` without read permission on `path`;
    /// [`Error::Unsupported`] (`code()` `Unimplemented`) naming ZooKeeper 3.6
    /// from an older server, which also closes the connection (the client
    /// reconnects, the session lives on; no 3.5 server is tested, the error
    /// mapping is unit-tested); `BadArguments` for a bad path.
    pub fn get_all_children_number(&self, path: &str) -> Result<i32> {
        validate_path(path, false)?;
        let mut w = Writer::request(0, op::GET_ALL_CHILDREN_NUMBER);
        w.string(&self.server_path(path));
        let body = self.call(op::GET_ALL_CHILDREN_NUMBER, w, None, path)?;
        Reader::new(&body).i32().map_err(|_| marshalling(path))
    }
}

/// What [`ZooKeeper::create2_and_get_children`] and the lock's create return:
/// the created node and, when it could be made, the parent's listing that
/// followed the create.
#[derive(Debug)]
pub(crate) struct CreatedAndListed {
    pub(crate) path: String,
    pub(crate) stat: Stat,
    /// The parent's children after the create; `None` when not listed.
    pub(crate) listed: Option<Vec<String>>,
}

/// A create's reply: the created path (client side of the chroot), and its
/// `Stat` unless the opcode was plain create.
fn created(
    opcode: i32,
    body: &[u8],
    path: &str,
    chroot: Option<&str>,
) -> Result<(String, Option<Stat>)> {
    let mut r = Reader::new(body);
    let created = r.string().map_err(|_| marshalling(path))?;
    let stat = if opcode == op::CREATE {
        None
    } else {
        Some(r.stat().map_err(|_| marshalling(path))?)
    };
    Ok((strip_chroot(chroot, &created), stat))
}
