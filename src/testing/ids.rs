//! ZooKeeper server ids (`myid`) unique among the live ensembles of this
//! machine, across processes.
//!
//! Ensembles on one machine share the loopback ports: a member that stops
//! frees its quorum and election ports, and a member of another live
//! ensemble (another test binary of `make test`'s lanes, or another test of
//! the same binary) may bind them. The stopped member's peers still list
//! that address and reach the newcomer. Were its id one of theirs (every
//! ensemble used `1..=n` before), leader election would count its votes:
//! two ensembles cross-talk (`tests/read_only.rs` once saw a second leader).
//! A server whose id is not in the receiver's configuration is a non-voter
//! there, whose votes leader election ignores; and a member's ports are
//! reserved as its id is ([`super::process::free_ports`]), so that no other
//! ensemble's server binds them at all.
//!
//! So each member's id is reserved for the life of its ensemble, machine-wide
//! ([`super::reserve`]: the one way the harness holds a name), and freed
//! when the [`ServerId`] is dropped (after the ensemble killed its members)
//! or the process dies.

use std::io;

use super::reserve::{self, Hold, Name};

/// The highest id handed out. ZooKeeper puts the server id in the top byte
/// of every session id (`SessionTrackerImpl.initializeNextSessionId`:
/// `id << 56`) and, with extended types enabled as the harness's servers
/// are (TTL nodes), refuses ids above 254 (`EphemeralType.validateServerId`:
/// an owner whose top byte is `0xff` is a TTL node's). Ids up to 127 also
/// keep every session id positive, as with the ids `1..=9` the harness used
/// before; so tests see the same sessions whichever ids they get.
pub(crate) const MAX_SERVER_ID: u64 = 127;

/// One server id, reserved machine-wide while this value lives.
#[derive(Debug)]
pub(crate) struct ServerId {
    id: u64,
    _hold: Hold,
}

impl ServerId {
    /// The id (`myid`, the `N` of `server.N`).
    pub(crate) fn get(&self) -> u64 {
        self.id
    }
}

/// Reserves `count` ids of `1..=MAX_SERVER_ID` no other live ensemble of
/// the machine holds, in ascending order (so that members keep leader
/// election's tie-break order, the highest id winning, by index).
///
/// # Errors
/// `AddrInUse` when fewer than `count` ids are free; the error of the
/// operating system when a name cannot be bound for another reason.
pub(crate) fn reserve(count: usize) -> io::Result<Vec<ServerId>> {
    let start = crate::util::random_u64();
    let held = reserve_with(count, start, MAX_SERVER_ID, hold)?;
    Ok(held
        .into_iter()
        .map(|(id, hold)| ServerId { id, _hold: hold })
        .collect())
}

/// The allocator's logic: tries the ids of `1..=max` in turn, from the one
/// `start` picks (at random, so that an id just let go, whose server a
/// crashed process's watchdog may still be killing, is seldom the next one
/// taken) and around, with `take` (`Ok(None)`: held elsewhere), until
/// `count` are taken; returns them sorted. The ones taken are let go when
/// fewer than `count` are free.
fn reserve_with<T>(
    count: usize,
    start: u64,
    max: u64,
    mut take: impl FnMut(u64) -> io::Result<Option<T>>,
) -> io::Result<Vec<(u64, T)>> {
    let mut taken = Vec::with_capacity(count);
    if max == 0 {
        return Err(free_ids_error(count, 0, max));
    }
    let first = start % max;
    for k in 0..max {
        if taken.len() == count {
            break;
        }
        let id = (first + k) % max + 1;
        if let Some(held) = take(id)? {
            taken.push((id, held));
        }
    }
    if taken.len() < count {
        return Err(free_ids_error(count, taken.len(), max));
    }
    taken.sort_by_key(|(id, _)| *id);
    Ok(taken)
}

fn free_ids_error(count: usize, free: usize, max: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::AddrInUse,
        format!(
            "no {count} free ZooKeeper server ids: {free} of 1..={max} are free \
             (the others belong to live ensembles on this machine)"
        ),
    )
}

/// Takes id `id`: `Ok(None)` when another ensemble holds it.
fn hold(id: u64) -> io::Result<Option<Hold>> {
    reserve::hold(Name::ServerId(id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// `take` over a set of ids held elsewhere.
    fn taker(held: &HashSet<u64>) -> impl FnMut(u64) -> io::Result<Option<()>> + '_ {
        move |id| Ok((!held.contains(&id)).then_some(()))
    }

    fn ids(v: &[(u64, ())]) -> Vec<u64> {
        v.iter().map(|(id, ())| *id).collect()
    }

    #[test]
    fn takes_free_ids_from_the_start_around_and_sorts_them() {
        let held: HashSet<u64> = [9, 1].into_iter().collect();
        // From id 8 (start 7): 8, 9 held, 10, then around to 1 held, 2.
        let got = reserve_with(3, 7, 10, taker(&held)).unwrap();
        assert_eq!(ids(&got), [2, 8, 10]);
        // Every id stays in 1..=max, whatever the start.
        for start in [0, 9, 10, u64::MAX] {
            let got = reserve_with(8, start, 10, taker(&held)).unwrap();
            let got = ids(&got);
            assert!(got
                .iter()
                .all(|id| (1..=10).contains(id) && !held.contains(id)));
            assert_eq!(got.len(), 8, "{got:?}");
            assert!(got.windows(2).all(|w| w[0] < w[1]), "{got:?}");
        }
    }

    #[test]
    fn too_few_free_ids_is_an_error_and_lets_the_taken_ones_go() {
        let held: HashSet<u64> = (1..=8).collect();
        let mut tried = Vec::new();
        let e = reserve_with(3, 0, 10, |id| {
            tried.push(id);
            taker(&held)(id)
        })
        .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
        assert!(e.to_string().contains("2 of 1..=10"), "{e}");
        tried.sort_unstable();
        assert_eq!(tried, (1..=10).collect::<Vec<_>>(), "each id tried once");
        assert!(reserve_with(1, 0, 0, taker(&held)).is_err());
    }

    #[test]
    fn a_bind_error_other_than_in_use_is_returned() {
        let e = reserve_with::<()>(1, 0, 10, |_| Err(io::Error::other("boom"))).unwrap_err();
        assert_eq!(e.to_string(), "boom");
    }

    /// The real names: an id held here is not handed out again until its
    /// holder is dropped, in this process or another.
    #[test]
    fn a_reserved_id_is_held_until_dropped() {
        let a = reserve(3).unwrap();
        let b = reserve(3).unwrap();
        let ids_a: HashSet<u64> = a.iter().map(ServerId::get).collect();
        let ids_b: HashSet<u64> = b.iter().map(ServerId::get).collect();
        assert!(ids_a.is_disjoint(&ids_b), "{ids_a:?} {ids_b:?}");
        assert!(ids_a
            .iter()
            .chain(&ids_b)
            .all(|id| (1..=MAX_SERVER_ID).contains(id)));
        for id in &ids_a {
            assert!(hold(*id).unwrap().is_none(), "id {id} is held");
        }
    }

    /// Another process cannot bind the name of an id held here (Python's
    /// `bind` of the same abstract name fails with `EADDRINUSE`): the
    /// reservation is machine-wide, not the process's.
    #[cfg(target_os = "linux")]
    #[test]
    fn another_process_cannot_take_a_reserved_id() {
        const SCRIPT: &str = "import socket, sys\n\
            for id in sys.argv[1:]:\n\
            \x20   s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n\
            \x20   try:\n\
            \x20       s.bind('\\0zklock-zk-server-id-' + id)\n\
            \x20       print(id, 'bound')\n\
            \x20   except OSError as e:\n\
            \x20       print(id, 'in-use' if e.errno == 98 else e)\n";
        let held = reserve(2).unwrap();
        let out = std::process::Command::new("python3")
            .arg("-c")
            .arg(SCRIPT)
            .args(held.iter().map(|id| id.get().to_string()))
            .output()
            .expect("python3");
        let text = String::from_utf8_lossy(&out.stdout);
        let expected: String = held
            .iter()
            .map(|id| format!("{} in-use\n", id.get()))
            .collect();
        assert_eq!(text, expected, "{out:?}");
    }
}
