//! Watch operations: persistent and recursive watches (`add_watch`) and
//! `remove_watches`.

use super::*;

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
        validate_path(path, false)?;
        let removed = self.shared().watches.lock().remove(path, watcher_type);
        if removed.is_empty() {
            return Err(Error::zk(ZkError::NoWatcher, path));
        }
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
        match self
            .shared()
            .call_remove_watches(w.finish(), path, self.deadline)
        {
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
        Ok(())
    }
}
