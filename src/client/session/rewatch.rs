//! Re-setting watches: SetWatches / SetWatches2 packets (chunked as Java's
//! client does) after a reconnect, a removeWatches, or a one-shot registration
//! that turned a persistent watch one-shot server-side.

use super::*;

/// The most a single SetWatches packet carries (the Java client's limit).
pub(super) const SET_WATCHES_MAX: usize = 128 * 1024;

/// Which watches [`SessionShared::set_watches_frames`] sends again.
#[derive(Debug, Clone, Copy)]
pub(super) enum Resend<'a> {
    /// Every watch (after a reconnect).
    All,
    /// Every watch on one client path (after a removeWatches).
    Path(&'a str),
    /// The persistent watches on one client path (after a one-shot registration
    /// on it turned them one-shot server-side).
    PersistentOf(&'a str),
}

/// SetWatches (or SetWatches2 when there are persistent paths) packets for the
/// server paths `tables` (data, exist, child, persistent, recursive), each at most
/// ~128 KB.
pub(super) fn set_watches_packets(tables: &[Vec<String>; 5], zxid: i64) -> Vec<Vec<u8>> {
    let persistent = !tables[3].is_empty() || !tables[4].is_empty();
    let mut frames = Vec::new();
    let mut cursor = [0usize; 5];
    loop {
        let mut chunk: [Vec<&str>; 5] = Default::default();
        let mut size = 0usize;
        for (t, paths) in tables.iter().enumerate() {
            while cursor[t] < paths.len() && size < SET_WATCHES_MAX {
                let p = &paths[cursor[t]];
                size += p.len() + 4;
                chunk[t].push(p);
                cursor[t] += 1;
            }
        }
        if chunk.iter().all(Vec::is_empty) {
            break;
        }
        let opcode = if persistent {
            op::SET_WATCHES2
        } else {
            op::SET_WATCHES
        };
        let mut w = Writer::request(xid::SET_WATCHES, opcode);
        w.i64(zxid)
            .strings(&chunk[0])
            .strings(&chunk[1])
            .strings(&chunk[2]);
        if persistent {
            w.strings(&chunk[3]).strings(&chunk[4]);
        }
        frames.push(w.finish());
    }
    frames
}

impl SessionShared {
    /// SetWatches / SetWatches2 frames for the registered watches `which`,
    /// relative to `zxid`, each at most ~128 KB.
    ///
    /// ZooKeeper 3.8 keeps one mode per path and connection in each of its data
    /// and child tables, and sets a persistent-recursive watch in both: in one
    /// packet (data, exist, child, persistent, recursive, in that order) the last
    /// write wins. So one-shot data and child watches go before the persistent
    /// ones (which then serve them), and a one-shot child watch on the root of a
    /// recursive watch goes in a second packet, after it (a recursive mode in the
    /// child table swallows children events).
    pub(super) fn set_watches_frames(&self, which: Resend<'_>, zxid: i64) -> Vec<Vec<u8>> {
        let (path, one_shots) = match which {
            Resend::All => (None, true),
            Resend::Path(p) => (Some(p), true),
            Resend::PersistentOf(p) => (Some(p), false),
        };
        let [data, exist, child, persistent, recursive] = self.watches.lock().paths(path);
        let chroot = self.settings.chroot.as_deref();
        let pick = |t: &[String], one_shot: bool, f: &dyn Fn(&str) -> bool| -> Vec<String> {
            t.iter()
                .filter(|p| path.map_or(true, |o| o == p.as_str()))
                .filter(|_| one_shots || !one_shot)
                .filter(|p| f(p))
                .map(|p| crate::client::connect::prepend_chroot(chroot, p))
                .collect()
        };
        let recursive_set: HashSet<&str> = recursive.iter().map(String::as_str).collect();
        let persistent_set: HashSet<&str> = persistent.iter().map(String::as_str).collect();
        let after_recursive = |p: &str| recursive_set.contains(p) && !persistent_set.contains(p);
        let any = |_: &str| true;
        let mut data_paths = pick(&data, true, &any);
        // The configuration's watch, on its server path (no chroot), with
        // every full resend.
        if path.is_none() && self.watches.lock().config_watched() {
            data_paths.push(CONFIG_NODE.to_string());
        }
        let first: [Vec<String>; 5] = [
            data_paths,
            pick(&exist, true, &any),
            pick(&child, true, &|p| !after_recursive(p)),
            pick(&persistent, false, &any),
            pick(&recursive, false, &any),
        ];
        let second: [Vec<String>; 5] = [
            Vec::new(),
            Vec::new(),
            child
                .iter()
                .filter(|p| path.map_or(true, |o| o == p.as_str()) && after_recursive(p))
                .map(|p| crate::client::connect::prepend_chroot(chroot, p))
                .collect(),
            Vec::new(),
            Vec::new(),
        ];
        let mut frames = set_watches_packets(&first, zxid);
        frames.extend(set_watches_packets(&second, zxid));
        if !frames.is_empty() {
            debug!(
                "re-setting watches in {} packet(s) from zxid {zxid:#x}",
                frames.len()
            );
        }
        frames
    }

    /// Sets again, relative to `zxid`, watches this client holds.
    pub(super) fn rewatch(&self, which: Resend<'_>, zxid: i64) -> Result<(), ConnEnd> {
        let frames = self.set_watches_frames(which, zxid);
        if frames.is_empty() {
            return Ok(());
        }
        let mut w = self.writer.lock();
        if let Some(s) = w.as_mut() {
            for frame in &frames {
                if let Err(e) = s.write_all(frame) {
                    // The connection ends: what is deferred is answered then.
                    return Err(ConnEnd::Io(e));
                }
            }
            self.touch_send();
        }
        self.release_writer(w);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes a SetWatches(2) frame: (opcode, zxid, tables).
    fn decode(frame: &[u8]) -> (i32, i64, Vec<Vec<String>>) {
        let mut r = Reader::new(&frame[4..]);
        assert_eq!(r.i32().unwrap(), xid::SET_WATCHES);
        let opcode = r.i32().unwrap();
        let zxid = r.i64().unwrap();
        let n = if opcode == op::SET_WATCHES2 { 5 } else { 3 };
        let tables = (0..n).map(|_| r.strings().unwrap()).collect();
        assert_eq!(r.remaining(), 0);
        (opcode, zxid, tables)
    }

    #[test]
    fn set_watches_packets_are_chunked_and_keep_every_path_in_order() {
        let paths = |p: &str, n: usize| -> Vec<String> {
            (0..n)
                .map(|i| format!("/{p}/{i:06}-{}", "x".repeat(200)))
                .collect()
        };
        let tables = [
            paths("d", 1500),
            paths("e", 10),
            paths("c", 700),
            vec![],
            vec![],
        ];
        let frames = set_watches_packets(&tables, 42);
        assert!(frames.len() >= 3, "{} frames", frames.len());
        let mut seen: [Vec<String>; 5] = Default::default();
        for f in &frames {
            assert!(
                f.len() <= SET_WATCHES_MAX + 1024,
                "a {} byte packet",
                f.len()
            );
            let (opcode, zxid, t) = decode(f);
            assert_eq!((opcode, zxid), (op::SET_WATCHES, 42));
            for (i, v) in t.into_iter().enumerate() {
                seen[i].extend(v);
            }
        }
        assert_eq!(seen, tables);

        let persistent = [
            vec![],
            vec![],
            vec!["/c".to_string()],
            vec!["/p".into()],
            vec!["/r".into()],
        ];
        let frames = set_watches_packets(&persistent, 7);
        assert_eq!(frames.len(), 1);
        let (opcode, _, t) = decode(&frames[0]);
        assert_eq!(opcode, op::SET_WATCHES2);
        assert_eq!(t, persistent.to_vec());
        assert!(set_watches_packets(&Default::default(), 1).is_empty());
    }
}
