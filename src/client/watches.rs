//! Client-side watch registry (Java's `ZKWatchManager`).
//!
//! Paths are client paths (chroot removed). A watcher registered twice on the same
//! path and kind is kept once (identity of the `Arc`), so each trigger calls it once.

use std::collections::HashMap;
use std::sync::Arc;

use crate::types::{EventType, Watcher, WatcherType};

pub(crate) type WatcherRef = Arc<dyn Watcher>;

/// Which table a registration goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Data,
    Exist,
    Child,
    Persistent,
    Recursive,
    /// The ensemble's configuration (`get_config`'s watch): a one-shot data
    /// watch on the server path `/zookeeper/config`, whatever the chroot
    /// (Java's `ServerDataWatchRegistration`). Kept apart from the client
    /// paths, so that a chroot never makes it collide with a node of the
    /// same client path, nor adds itself in front of it on SetWatches.
    Config,
}

pub(crate) use crate::util::same_arc as same;

fn push_unique(out: &mut Vec<WatcherRef>, w: WatcherRef) {
    if !out.iter().any(|x| same(x, &w)) {
        out.push(w);
    }
}

#[derive(Default)]
pub(crate) struct WatchManager {
    data: HashMap<String, Vec<WatcherRef>>,
    exist: HashMap<String, Vec<WatcherRef>>,
    child: HashMap<String, Vec<WatcherRef>>,
    persistent: HashMap<String, Vec<WatcherRef>>,
    recursive: HashMap<String, Vec<WatcherRef>>,
    /// [`Kind::Config`]'s table: one key at most, the server path
    /// `/zookeeper/config`.
    config: HashMap<String, Vec<WatcherRef>>,
}

impl std::fmt::Debug for WatchManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchManager")
            .field("data", &self.data.len())
            .field("exist", &self.exist.len())
            .field("child", &self.child.len())
            .field("persistent", &self.persistent.len())
            .field("recursive", &self.recursive.len())
            .field("config", &self.config.len())
            .finish()
    }
}

impl WatchManager {
    fn table(&mut self, kind: Kind) -> &mut HashMap<String, Vec<WatcherRef>> {
        match kind {
            Kind::Data => &mut self.data,
            Kind::Exist => &mut self.exist,
            Kind::Child => &mut self.child,
            Kind::Persistent => &mut self.persistent,
            Kind::Recursive => &mut self.recursive,
            Kind::Config => &mut self.config,
        }
    }

    /// The watchers of [`Kind::Config`] an event on the server path
    /// `/zookeeper/config` triggers (one-shot: removed).
    pub(crate) fn materialize_config(&mut self, event_type: EventType) -> Vec<WatcherRef> {
        let mut out = Vec::new();
        if matches!(
            event_type,
            EventType::NodeCreated | EventType::NodeDataChanged | EventType::NodeDeleted
        ) {
            for (_, ws) in self.config.drain() {
                for w in ws {
                    push_unique(&mut out, w);
                }
            }
        }
        out
    }

    /// Whether a [`Kind::Config`] watch is set (SetWatches sets it again).
    pub(crate) fn config_watched(&self) -> bool {
        self.config.values().any(|ws| !ws.is_empty())
    }

    pub(crate) fn add(&mut self, kind: Kind, path: &str, watcher: WatcherRef) {
        let list = self.table(kind).entry(path.to_string()).or_default();
        push_unique(list, watcher);
    }

    /// The watchers a node event triggers; one-shot watches are removed.
    pub(crate) fn materialize(&mut self, event_type: EventType, path: &str) -> Vec<WatcherRef> {
        let mut out = Vec::new();
        let take = |table: &mut HashMap<String, Vec<WatcherRef>>, out: &mut Vec<WatcherRef>| {
            if let Some(ws) = table.remove(path) {
                for w in ws {
                    push_unique(out, w);
                }
            }
        };
        match event_type {
            EventType::NodeCreated | EventType::NodeDataChanged => {
                take(&mut self.data, &mut out);
                take(&mut self.exist, &mut out);
            }
            EventType::NodeChildrenChanged => take(&mut self.child, &mut out),
            EventType::NodeDeleted => {
                take(&mut self.data, &mut out);
                take(&mut self.exist, &mut out);
                take(&mut self.child, &mut out);
            }
            _ => {}
        }
        if matches!(
            event_type,
            EventType::NodeCreated
                | EventType::NodeDataChanged
                | EventType::NodeDeleted
                | EventType::NodeChildrenChanged
        ) {
            if let Some(ws) = self.persistent.get(path) {
                for w in ws {
                    push_unique(&mut out, w.clone());
                }
            }
            // Recursive watches see every event but children changes, on the path
            // and all its descendants.
            if event_type != EventType::NodeChildrenChanged && !self.recursive.is_empty() {
                let mut p = path;
                loop {
                    if let Some(ws) = self.recursive.get(p) {
                        for w in ws {
                            push_unique(&mut out, w.clone());
                        }
                    }
                    if p == "/" {
                        break;
                    }
                    p = match p.rfind('/') {
                        Some(0) => "/",
                        Some(i) => &p[..i],
                        None => break,
                    };
                }
            }
        }
        out
    }

    /// Removes the watches of `watcher_type` on `path`; returns each removed
    /// watcher with the event type it must be told.
    pub(crate) fn remove(
        &mut self,
        path: &str,
        watcher_type: WatcherType,
    ) -> Vec<(WatcherRef, EventType)> {
        let kinds = kinds_of(watcher_type);
        let mut out: Vec<(WatcherRef, EventType)> = Vec::new();
        for &kind in kinds {
            let ev = removed_event(kind);
            if let Some(ws) = self.table(kind).remove(path) {
                for w in ws {
                    if !out.iter().any(|(x, e)| *e == ev && same(x, &w)) {
                        out.push((w, ev));
                    }
                }
            }
        }
        out
    }

    /// Removes `watcher`'s watches of `watcher_type` on `path`, leaving the
    /// other watchers' (Java's `removeWatches(path, watcher, type, local)`);
    /// returns each removal with the event it is to be told, and whether the
    /// removal left no watch of those tables on `path` (then the server's
    /// watch can go too).
    pub(crate) fn remove_one(
        &mut self,
        path: &str,
        watcher_type: WatcherType,
        watcher: &WatcherRef,
    ) -> (Vec<(WatcherRef, EventType)>, bool) {
        let kinds = kinds_of(watcher_type);
        let mut out: Vec<(WatcherRef, EventType)> = Vec::new();
        let mut last = true;
        for &kind in kinds {
            let ev = removed_event(kind);
            let table = self.table(kind);
            if let Some(ws) = table.get_mut(path) {
                if let Some(i) = ws.iter().position(|w| same(w, watcher)) {
                    let w = ws.remove(i);
                    if !out.iter().any(|(x, e)| *e == ev && same(x, &w)) {
                        out.push((w, ev));
                    }
                }
                if ws.is_empty() {
                    table.remove(path);
                } else {
                    last = false;
                }
            }
        }
        (out, last)
    }

    /// Whether a persistent and a persistent-recursive watch is set on `path`
    /// itself.
    pub(crate) fn persistent_on(&self, path: &str) -> (bool, bool) {
        (
            self.persistent.contains_key(path),
            self.recursive.contains_key(path),
        )
    }

    /// Every watched path (or only `only`), by table, for SetWatches.
    pub(crate) fn paths(&self, only: Option<&str>) -> [Vec<String>; 5] {
        let keys = |t: &HashMap<String, Vec<WatcherRef>>| match only {
            None => t.keys().cloned().collect::<Vec<_>>(),
            Some(p) if t.contains_key(p) => vec![p.to_string()],
            Some(_) => Vec::new(),
        };
        [
            keys(&self.data),
            keys(&self.exist),
            keys(&self.child),
            keys(&self.persistent),
            keys(&self.recursive),
        ]
    }

    /// Every distinct watcher registered in any table (data, exist, child,
    /// persistent, recursive), each once: who hears a connection-state change
    /// (Java's `materialize(state, None, path)`).
    pub(crate) fn all_watchers(&self) -> Vec<WatcherRef> {
        let mut out = Vec::new();
        // By address: linear in the number of registrations, however many.
        let mut seen = std::collections::HashSet::new();
        for table in self.tables() {
            for ws in table.values() {
                for w in ws {
                    if seen.insert(Arc::as_ptr(w).cast::<u8>() as usize) {
                        out.push(w.clone());
                    }
                }
            }
        }
        out
    }

    /// Forgets every registration (the session has ended).
    pub(crate) fn clear(&mut self) {
        *self = WatchManager::default();
    }

    /// The six tables.
    fn tables(&self) -> [&HashMap<String, Vec<WatcherRef>>; 6] {
        [
            &self.data,
            &self.exist,
            &self.child,
            &self.persistent,
            &self.recursive,
            &self.config,
        ]
    }

    /// Whether no watch is registered.
    pub(crate) fn is_empty(&self) -> bool {
        self.tables().iter().all(|t| t.values().all(Vec::is_empty))
    }

    /// Total registrations (for tests and leak checks).
    pub(crate) fn len(&self) -> usize {
        self.tables()
            .iter()
            .map(|t| t.values().map(Vec::len).sum::<usize>())
            .sum()
    }
}

/// The tables a removal of `watcher_type` clears.
fn kinds_of(watcher_type: WatcherType) -> &'static [Kind] {
    match watcher_type {
        WatcherType::Children => &[Kind::Child],
        WatcherType::Data => &[Kind::Data, Kind::Exist],
        WatcherType::Any => &[
            Kind::Data,
            Kind::Exist,
            Kind::Child,
            Kind::Persistent,
            Kind::Recursive,
        ],
        WatcherType::Persistent => &[Kind::Persistent],
        WatcherType::PersistentRecursive => &[Kind::Recursive],
    }
}

/// The event a watcher removed from a `kind` table is told.
fn removed_event(kind: Kind) -> EventType {
    match kind {
        Kind::Data | Kind::Exist | Kind::Config => EventType::DataWatchRemoved,
        Kind::Child => EventType::ChildWatchRemoved,
        Kind::Persistent | Kind::Recursive => EventType::PersistentWatchRemoved,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::WatchedEvent;

    fn w() -> WatcherRef {
        Arc::new(|_e: WatchedEvent| {})
    }

    #[test]
    fn one_call_per_trigger_and_one_shot() {
        let mut m = WatchManager::default();
        let a = w();
        m.add(Kind::Data, "/x", a.clone());
        m.add(Kind::Data, "/x", a.clone());
        m.add(Kind::Exist, "/x", a.clone());
        let b = w();
        m.add(Kind::Child, "/x", b.clone());
        assert_eq!(m.materialize(EventType::NodeDataChanged, "/x").len(), 1);
        assert!(m.materialize(EventType::NodeDataChanged, "/x").is_empty());
        assert_eq!(m.materialize(EventType::NodeDeleted, "/x").len(), 1);
        assert_eq!(m.len(), 0);
    }

    #[test]
    fn all_watchers_are_distinct() {
        let mut m = WatchManager::default();
        let a = w();
        let b = w();
        m.add(Kind::Data, "/x", a.clone());
        m.add(Kind::Exist, "/y", a.clone());
        m.add(Kind::Child, "/x", b.clone());
        m.add(Kind::Recursive, "/", b.clone());
        m.add(Kind::Persistent, "/z", a.clone());
        let all = m.all_watchers();
        assert_eq!(all.len(), 2);
        assert!(same(&all[0], &a) || same(&all[1], &a));
        m.clear();
        assert_eq!(m.len(), 0);
    }

    #[test]
    fn persistent_and_recursive() {
        let mut m = WatchManager::default();
        let p = w();
        let r = w();
        m.add(Kind::Persistent, "/a", p.clone());
        m.add(Kind::Recursive, "/", r.clone());
        assert_eq!(m.materialize(EventType::NodeChildrenChanged, "/a").len(), 1);
        assert_eq!(m.materialize(EventType::NodeDataChanged, "/a/b/c").len(), 1);
        assert_eq!(m.materialize(EventType::NodeDeleted, "/a").len(), 2);
        assert_eq!(m.len(), 2, "persistent watches stay");
        let removed = m.remove("/a", WatcherType::Any);
        assert_eq!(removed.len(), 1);
        assert_eq!(removed[0].1, EventType::PersistentWatchRemoved);
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn one_watcher_is_removed_and_the_others_stay() {
        let mut m = WatchManager::default();
        let (a, b) = (w(), w());
        m.add(Kind::Data, "/x", a.clone());
        m.add(Kind::Exist, "/x", a.clone());
        m.add(Kind::Data, "/x", b.clone());
        m.add(Kind::Child, "/x", a.clone());
        let (removed, last) = m.remove_one("/x", WatcherType::Data, &a);
        assert_eq!(removed.len(), 1, "told once");
        assert_eq!(removed[0].1, EventType::DataWatchRemoved);
        assert!(!last, "b still watches the data");
        let fired = m.materialize(EventType::NodeDataChanged, "/x");
        assert_eq!(fired.len(), 1);
        assert!(same(&fired[0], &b));
        // The child watch of `a` was of another type: still there.
        let (removed, last) = m.remove_one("/x", WatcherType::Children, &a);
        assert_eq!((removed.len(), last), (1, true));
        let (removed, _) = m.remove_one("/x", WatcherType::Any, &a);
        assert!(removed.is_empty());
        assert_eq!(m.len(), 0);
    }

    #[test]
    fn the_config_watch_lives_apart() {
        let mut m = WatchManager::default();
        let d = w();
        m.add(Kind::Data, "/zookeeper/config", d.clone());
        // The configuration's watch lives apart: a node of the same client
        // path (under a chroot) neither fires nor removes it.
        let c = w();
        m.add(Kind::Config, "/zookeeper/config", c.clone());
        assert!(m.config_watched());
        assert_eq!(m.all_watchers().len(), 2);
        assert_eq!(
            m.materialize(EventType::NodeDataChanged, "/zookeeper/config")
                .len(),
            1,
            "the client path's watch only"
        );
        assert!(m
            .materialize_config(EventType::NodeChildrenChanged)
            .is_empty());
        assert_eq!(m.all_watchers().len(), 1);
        assert_eq!(m.materialize_config(EventType::NodeDataChanged).len(), 1);
        assert!(!m.config_watched());
        assert_eq!(m.len(), 0);
    }
}
