//! `Deadline`: the point in time by which a call must end, passed down the layers
//! (lock → `RecoverableZooKeeper` → client) as a value.

use std::fmt;
use std::time::{Duration, Instant};

/// The point in time by which a call must end, or [`Deadline::never`].
///
/// A handle bounded by a deadline ([`ZooKeeper::with_deadline`],
/// [`RecoverableZooKeeper::with_deadline`]) ends every call it makes by then: the
/// wait for a connection fails with `ConnectionLoss`, the wait for a reply with
/// `OperationTimeout`, and `RecoverableZooKeeper` stops retrying when its next
/// sleep would pass it. The deadline belongs to the handle it was given to, never
/// to a thread: a call made elsewhere on the same thread is not affected.
///
/// [`ZooKeeper::with_deadline`]: crate::client::ZooKeeper::with_deadline
/// [`RecoverableZooKeeper::with_deadline`]: crate::RecoverableZooKeeper::with_deadline
///
/// ```
/// use std::time::Duration;
/// use zklock::Deadline;
///
/// let d = Deadline::after(Duration::from_millis(200));
/// assert!(d.remaining().unwrap() <= Duration::from_millis(200));
/// assert!(!d.is_past());
/// assert_eq!(Deadline::never().remaining(), None);
/// assert_eq!(d.min(Deadline::never()), d);
/// assert!(Deadline::after(Duration::ZERO).is_past());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Deadline(Option<Instant>);

impl Deadline {
    /// No deadline: calls are bounded only by the client's own timeouts.
    pub const fn never() -> Deadline {
        Deadline(None)
    }

    /// The deadline `instant`.
    pub const fn at(instant: Instant) -> Deadline {
        Deadline(Some(instant))
    }

    /// `timeout` from now; a timeout too large for an `Instant` is
    /// [`never`](Self::never).
    pub fn after(timeout: Duration) -> Deadline {
        Deadline(Instant::now().checked_add(timeout))
    }

    /// `Some(timeout)` as [`after`](Self::after), `None` as
    /// [`never`](Self::never).
    pub fn from_timeout(timeout: Option<Duration>) -> Deadline {
        timeout.map_or(Deadline::never(), Deadline::after)
    }

    /// The instant, or `None` for no deadline.
    pub const fn instant(self) -> Option<Instant> {
        self.0
    }

    /// Whether this is [`never`](Self::never).
    pub const fn is_never(self) -> bool {
        self.0.is_none()
    }

    /// The time left (zero once past), or `None` for no deadline.
    pub fn remaining(self) -> Option<Duration> {
        self.0.map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// Whether the deadline has come.
    pub fn is_past(self) -> bool {
        self.0.is_some_and(|d| d <= Instant::now())
    }

    /// The earlier of the two.
    #[must_use]
    pub fn min(self, other: Deadline) -> Deadline {
        match (self.0, other.0) {
            (Some(a), Some(b)) => Deadline(Some(a.min(b))),
            (a, b) => Deadline(a.or(b)),
        }
    }

    /// `wait`, cut to the time left.
    pub fn cap(self, wait: Duration) -> Duration {
        self.remaining().map_or(wait, |left| left.min(wait))
    }

    /// The deadline `wait` from now, or this one if earlier (saturating: a
    /// `Duration::MAX` wait is no deadline of its own).
    pub fn min_after(self, wait: Duration) -> Instant {
        let now = Instant::now();
        let own = now
            .checked_add(wait)
            .unwrap_or_else(|| now + Duration::from_secs(86400 * 365));
        match self.0 {
            Some(d) => d.min(own),
            None => own,
        }
    }
}

impl From<Instant> for Deadline {
    fn from(i: Instant) -> Deadline {
        Deadline::at(i)
    }
}

impl fmt::Debug for Deadline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.remaining() {
            None => f.write_str("Deadline(never)"),
            Some(left) => write!(f, "Deadline(in {left:?})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_and_min() {
        let n = Deadline::never();
        assert!(n.is_never() && !n.is_past());
        assert_eq!(n.cap(Duration::from_secs(3)), Duration::from_secs(3));
        let soon = Deadline::after(Duration::from_millis(50));
        let later = Deadline::after(Duration::from_secs(50));
        assert_eq!(soon.min(later), soon);
        assert_eq!(later.min(soon), soon);
        assert_eq!(n.min(soon), soon);
        assert!(soon.cap(Duration::from_secs(1)) <= Duration::from_millis(50));
    }

    #[test]
    fn huge_timeouts_saturate() {
        assert!(Deadline::after(Duration::MAX).is_never());
        assert!(
            Deadline::never().min_after(Duration::MAX)
                > Instant::now() + Duration::from_secs(86400)
        );
        assert!(Deadline::never().min_after(Duration::ZERO) <= Instant::now());
        let past = Deadline::after(Duration::ZERO);
        assert!(past.is_past());
        assert_eq!(past.remaining(), Some(Duration::ZERO));
        assert!(past.min_after(Duration::MAX) <= Instant::now());
    }
}
