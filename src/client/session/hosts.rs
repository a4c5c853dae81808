//! The servers a session connects to, and in which order (Java's
//! `StaticHostProvider`): a shuffled list tried round-robin, or the listed
//! order with the first servers preferred ([`ServerOrder`]); replaced while
//! the session lives by [`HostList::update`] with Java's load-balancing rule
//! (ZOOKEEPER-1355).
//!
//! Names are kept as written (`host:port`) and resolved on every attempt
//! (see `handshake`): a DNS name that moves to new addresses is followed.

use crate::util::{random_u64, shuffle};

/// In which order a client tries the servers of its connect string
/// ([`ZooKeeperBuilder::with_server_order`](crate::client::ZooKeeperBuilder::with_server_order)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ServerOrder {
    /// Shuffled once, then round-robin (Java's `StaticHostProvider`): the
    /// clients of a connect string spread over its servers. The default.
    #[default]
    Random,
    /// As listed, the first preferred: every reconnect starts again from
    /// the first server and goes down the list, so the later ones are only
    /// a fallback (say the servers of the client's own zone first). A
    /// client on a fallback server stays there until its connection ends;
    /// it returns to a preferred server at its next reconnect.
    Listed,
}

/// Java's "reconfig mode": after an update that moves this client, the
/// servers to try first, new ones with probability `p_new`.
#[derive(Debug, Clone)]
struct Moving {
    old: Vec<String>,
    new: Vec<String>,
    next_old: usize,
    next_new: usize,
    p_new: f64,
}

/// The session's server list (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct HostList {
    hosts: Vec<String>,
    order: ServerOrder,
    /// The index of the next server to try in the ordinary round.
    next: usize,
    /// The server of the live connection, or of the last one.
    current: Option<String>,
    moving: Option<Moving>,
    /// Counts the updates: a connection made to a server picked before the
    /// last update that moves this client must move too.
    generation: u64,
    /// Tried next, once (see [`prefer`](Self::prefer)).
    preferred: Option<String>,
}

/// A uniform random number in `[0, 1)`.
pub(crate) fn unit_random() -> f64 {
    (random_u64() >> 11) as f64 / (1u64 << 53) as f64
}

impl HostList {
    pub(crate) fn new(mut hosts: Vec<String>, order: ServerOrder) -> HostList {
        if order == ServerOrder::Random {
            shuffle(&mut hosts);
        }
        HostList {
            hosts,
            order,
            next: 0,
            current: None,
            moving: None,
            generation: 0,
            preferred: None,
        }
    }

    /// The number of updates so far (see [`connected`](Self::connected)).
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    pub(crate) fn len(&self) -> usize {
        self.hosts.len()
    }

    /// The servers, in the order they are tried.
    pub(crate) fn hosts(&self) -> &[String] {
        &self.hosts
    }

    /// The server of the live connection (or the last one).
    pub(crate) fn current(&self) -> Option<&str> {
        self.current.as_deref()
    }

    /// Makes `host` the next server tried, once (a read-write server found
    /// while connected read-only); the round goes on after it as before.
    pub(crate) fn prefer(&mut self, host: &str) {
        self.preferred = Some(host.to_string());
    }

    /// The next server to try.
    pub(crate) fn next(&mut self, random: &mut dyn FnMut() -> f64) -> String {
        if let Some(host) = self.preferred.take() {
            return host;
        }
        if let Some(m) = &mut self.moving {
            let take_new = random() < m.p_new;
            let new_left = m.next_new < m.new.len();
            let old_left = m.next_old < m.old.len();
            if new_left && (take_new || !old_left) {
                m.next_new += 1;
                return m.new[m.next_new - 1].clone();
            }
            if old_left {
                m.next_old += 1;
                return m.old[m.next_old - 1].clone();
            }
            // Tried them all: the ordinary round again.
            self.moving = None;
        }
        let host = self.hosts[self.next % self.hosts.len()].clone();
        self.next = (self.next + 1) % self.hosts.len();
        host
    }

    /// A connection to `host` is up (Java's `onConnected`): the move, if
    /// any, is over, unless `host` was picked at an earlier `generation`
    /// than an update that moves this client: then `true`, the connection
    /// must end too (the update came during its handshake). With
    /// [`ServerOrder::Listed`] the next reconnect starts again from the
    /// first server.
    pub(crate) fn connected(&mut self, host: &str, generation: u64) -> bool {
        if generation != self.generation && self.moving.is_some() {
            return true;
        }
        self.current = Some(host.to_string());
        self.moving = None;
        if self.order == ServerOrder::Listed {
            self.next = 0;
        }
        false
    }

    /// The connection is lost: a reconnect under [`ServerOrder::Listed`]
    /// starts from the most preferred server.
    pub(crate) fn disconnected(&mut self) {
        if self.order == ServerOrder::Listed && self.moving.is_none() {
            self.next = 0;
        }
    }

    /// Replaces the list with `hosts` (Java's
    /// `StaticHostProvider.updateServerList`, ZOOKEEPER-1355); `true` when
    /// this client must move to another server, with the probability that
    /// evens the load:
    ///
    /// - more servers, the current one among them: move, to a new server,
    ///   with probability `1 - old_count / new_count`; else stay;
    /// - the current server gone, more servers: move to a new one;
    /// - as many servers or fewer, the current one among them: stay;
    /// - the current server gone, as many or fewer: move, to a server of
    ///   the old list with probability
    ///   `p_old = kept * (old_count - new_count) / (new_count * (old_count - kept))`,
    ///   else to a new one.
    ///
    /// With [`ServerOrder::Listed`] there is no balancing: the client moves
    /// only when its server left the list, and then down the new list.
    pub(crate) fn update(&mut self, hosts: Vec<String>, random: &mut dyn FnMut() -> f64) -> bool {
        let mut shuffled = hosts;
        if self.order == ServerOrder::Random {
            shuffle(&mut shuffled);
        }
        let mine = match (&self.moving, &self.current) {
            // Still moving from an earlier update: where the move would go.
            (Some(_), _) => Some(self.next(random)),
            (None, Some(c)) => Some(c.clone()),
            (None, None) => self.hosts.first().cloned(),
        };
        let mine_stays = mine.as_ref().is_some_and(|m| shuffled.contains(m));
        let old_count = self.hosts.len();
        let new_count = shuffled.len();
        let (old, new): (Vec<String>, Vec<String>) = shuffled
            .iter()
            .cloned()
            .partition(|h| self.hosts.contains(h));
        let p_new = if self.order == ServerOrder::Listed {
            (!mine_stays).then_some(0.5)
        } else if new_count > old_count {
            if mine_stays {
                let p_move = 1.0 - old_count as f64 / new_count as f64;
                (random() < p_move).then_some(1.0)
            } else {
                Some(1.0)
            }
        } else if mine_stays {
            None
        } else {
            let kept = old.len();
            let p_old = if old_count == kept {
                0.0
            } else {
                (kept * (old_count - new_count)) as f64 / (new_count * (old_count - kept)) as f64
            };
            Some(1.0 - p_old)
        };
        self.moving = match p_new {
            // Listed: down the new list in its order.
            Some(_) if self.order == ServerOrder::Listed => Some(Moving {
                old: Vec::new(),
                new: shuffled.clone(),
                next_old: 0,
                next_new: 0,
                p_new: 1.0,
            }),
            Some(p_new) => Some(Moving {
                old,
                new,
                next_old: 0,
                next_new: 0,
                p_new,
            }),
            None => None,
        };
        // The ordinary round goes on after the current server.
        self.next = match (&self.moving, &mine) {
            (None, Some(m)) if self.order == ServerOrder::Random => shuffled
                .iter()
                .position(|h| h == m)
                .map_or(0, |i| (i + 1) % new_count.max(1)),
            _ => 0,
        };
        self.hosts = shuffled;
        self.generation += 1;
        if self.moving.is_some() {
            // Not on a listed server until the move is done.
            self.current = None;
        }
        self.moving.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(n: std::ops::Range<u16>) -> Vec<String> {
        n.map(|i| format!("h{i}:2181")).collect()
    }

    /// Updates `clients` clients spread evenly over `from` to `to` and counts
    /// where they end.
    fn rebalance(
        from: &[String],
        to: &[String],
        clients: usize,
    ) -> std::collections::HashMap<String, usize> {
        let mut at = std::collections::HashMap::new();
        for c in 0..clients {
            let mut list = HostList::new(from.to_vec(), ServerOrder::Random);
            let mine = from[c % from.len()].clone();
            assert!(!list.connected(&mine, 0));
            let mut rnd = unit_random;
            let host = if list.update(to.to_vec(), &mut rnd) {
                list.next(&mut rnd)
            } else {
                mine
            };
            assert!(to.contains(&host), "{host} not in the new list");
            *at.entry(host).or_insert(0) += 1;
        }
        at
    }

    #[test]
    fn growing_moves_the_expected_fraction_to_the_new_servers() {
        // 3 → 5 servers, 3,000 clients: each server should end with ~600.
        let at = rebalance(&hosts(0..3), &hosts(0..5), 3000);
        for (h, n) in &at {
            assert!((480..=720).contains(n), "{h}: {n} clients ({at:?})");
        }
    }

    #[test]
    fn shrinking_spreads_the_orphans_evenly() {
        // 5 → 3 servers (2 gone), 3,000 clients: ~1,000 each, and the
        // clients of the kept servers never move.
        let at = rebalance(&hosts(0..5), &hosts(0..3), 3000);
        for (h, n) in &at {
            assert!((850..=1150).contains(n), "{h}: {n} clients ({at:?})");
        }
        let mut list = HostList::new(hosts(0..5), ServerOrder::Random);
        list.connected("h1:2181", 0);
        assert!(!list.update(hosts(0..3), &mut unit_random));
    }

    #[test]
    fn replacing_a_server_moves_only_its_clients() {
        // h2 is replaced by h3: a client of h2 moves (p_old = 0: to h3 first),
        // the others stay.
        let mut list = HostList::new(hosts(0..3), ServerOrder::Random);
        list.connected("h2:2181", 0);
        let to = vec!["h0:2181".to_string(), "h1:2181".into(), "h3:2181".into()];
        assert!(list.update(to.clone(), &mut unit_random));
        assert_eq!(list.current(), None, "moving");
        // A connection whose handshake began before the update must move.
        assert!(list.connected("h2:2181", 0));
        assert_eq!(list.next(&mut unit_random), "h3:2181");
        // Then the old servers, then the ordinary round.
        let mut rest: Vec<String> = (0..2).map(|_| list.next(&mut unit_random)).collect();
        rest.sort();
        assert_eq!(rest, ["h0:2181", "h1:2181"]);
        assert!(to.contains(&list.next(&mut unit_random)));
        let mut list = HostList::new(hosts(0..3), ServerOrder::Random);
        list.connected("h0:2181", 0);
        assert!(!list.update(to, &mut unit_random));
        assert_eq!(list.current(), Some("h0:2181"));
    }

    #[test]
    fn listed_order_prefers_the_first_servers() {
        let mut list = HostList::new(hosts(0..3), ServerOrder::Listed);
        let tried: Vec<String> = (0..4).map(|_| list.next(&mut unit_random)).collect();
        assert_eq!(tried, ["h0:2181", "h1:2181", "h2:2181", "h0:2181"]);
        // Connected to the fallback h1: a reconnect starts from h0 again.
        list.next(&mut unit_random);
        list.connected("h1:2181", 0);
        list.disconnected();
        assert_eq!(list.next(&mut unit_random), "h0:2181");
        // An update keeps a client whose server stays, never balancing...
        list.connected("h1:2181", 0);
        assert!(!list.update(hosts(0..6), &mut || 0.0));
        // ...and moves one whose server left, down the new list in order.
        assert!(list.update(hosts(2..5), &mut || 0.0));
        let tried: Vec<String> = (0..4).map(|_| list.next(&mut unit_random)).collect();
        assert_eq!(tried, ["h2:2181", "h3:2181", "h4:2181", "h2:2181"]);
    }
}
