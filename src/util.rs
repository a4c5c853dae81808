//! Small shared helpers.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

/// A random `u64` (not cryptographic): std's per-process random hash keys over a
/// counter and the clock. Enough for jitter, host order, salts and tags.
pub(crate) fn random_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    if let Ok(t) = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    h.write_u32(std::process::id());
    h.finish()
}

/// A random duration in `[d/2, d]`.
pub(crate) fn jitter(d: Duration) -> Duration {
    let half = d / 2;
    let nanos = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX);
    if nanos == 0 {
        return d;
    }
    half + Duration::from_nanos(random_u64() % (nanos + 1))
}

/// Shuffles a slice (Fisher–Yates).
pub(crate) fn shuffle<T>(v: &mut [T]) {
    for i in (1..v.len()).rev() {
        let j = (random_u64() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_values_differ_and_jitter_is_bounded() {
        let a: Vec<u64> = (0..100).map(|_| random_u64()).collect();
        let mut b = a.clone();
        b.sort_unstable();
        b.dedup();
        assert_eq!(b.len(), 100);
        for _ in 0..1000 {
            let j = jitter(Duration::from_millis(100));
            assert!(j >= Duration::from_millis(50) && j <= Duration::from_millis(100));
        }
        assert_eq!(jitter(Duration::ZERO), Duration::ZERO);
        let mut v: Vec<u32> = (0..50).collect();
        shuffle(&mut v);
        v.sort_unstable();
        assert_eq!(v, (0..50).collect::<Vec<_>>());
    }
}
