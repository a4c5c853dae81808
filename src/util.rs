//! Small shared helpers.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// `N` bytes from the operating system's CSPRNG (`getrandom`): nonces and
/// owner marks, which another party must not guess. Should the OS refuse
/// (it does not on any supported platform), the bytes come from std's
/// per-process random hash keys mixed with the time, with a warning.
pub(crate) fn os_random<const N: usize>() -> [u8; N] {
    let mut out = [0u8; N];
    if let Err(e) = getrandom::getrandom(&mut out) {
        log::warn!("the OS random source failed ({e}); using std's random hash keys");
        for chunk in out.chunks_mut(8) {
            let bytes = random_u64().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }
    out
}

/// A process-random, never-repeating 64-bit value: a bijective mix of a random
/// per-process seed (from the OS's CSPRNG) plus a counter. For tags and
/// jitter; a secret comes from [`os_random`].
pub(crate) fn random_u64() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let seed = *SEED.get_or_init(|| {
        let mut seed = [0u8; 8];
        if getrandom::getrandom(&mut seed).is_ok() {
            return u64::from_le_bytes(seed);
        }
        // RandomState's keys come from the OS's random source too.
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        if let Ok(since_epoch) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)
        {
            hasher.write_u128(since_epoch.as_nanos());
        }
        hasher.finish()
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    // Odd multiplier and splitmix64's finalizer are both bijections on u64, so
    // distinct counters give distinct values.
    mix(seed.wrapping_add(n.wrapping_mul(0x9E37_79B9_7F4A_7C15)))
}

/// splitmix64's finalizer (a bijection on `u64`).
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Whether two `Arc`s point at the same value (data pointers only: two `Arc<dyn
/// Trait>` of one value may carry different vtable pointers).
pub(crate) fn same_arc<T: ?Sized>(a: &Arc<T>, b: &Arc<T>) -> bool {
    std::ptr::eq(Arc::as_ptr(a).cast::<u8>(), Arc::as_ptr(b).cast::<u8>())
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

/// A random (version 4) UUID, as Java's `UUID.randomUUID().toString()` and
/// Python's `str(uuid.uuid4())` write it (Curator's protected names, kazoo's
/// lock nodes).
pub(crate) fn random_uuid() -> String {
    let bytes = os_random::<16>();
    let (hi, lo) = bytes.split_at(8);
    let hi = u64::from_le_bytes(hi.try_into().unwrap_or_default());
    let lo = u64::from_le_bytes(lo.try_into().unwrap_or_default());
    let hi = (hi & !0xF000) | 0x4000;
    let lo = (lo & !(0xC000 << 48)) | (0x8000 << 48);
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        hi >> 32,
        (hi >> 16) & 0xFFFF,
        hi & 0xFFFF,
        lo >> 48,
        lo & 0xFFFF_FFFF_FFFF
    )
}

/// Runs `f` on a short-lived thread named `name`: how a dropped session closes
/// (closeSession waits up to 2 s for the server's answer, and `Drop` never waits
/// on the network). When no thread can be spawned, `f` runs here.
pub(crate) fn run_in_background(name: &str, f: impl FnOnce() + Send + 'static) {
    // Taken back to run here if the spawn fails.
    let slot = Arc::new(parking_lot::Mutex::new(Some(f)));
    let mine = slot.clone();
    let spawned = std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            if let Some(f) = mine.lock().take() {
                f();
            }
        });
    if let Err(e) = spawned {
        log::warn!("could not start {name} ({e}); running it on this thread");
        if let Some(f) = slot.lock().take() {
            f();
        }
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
    #[test]
    fn mix_is_a_bijection_on_a_sample() {
        let outputs: std::collections::HashSet<u64> = (0..10_000u64).map(mix).collect();
        assert_eq!(outputs.len(), 10_000);
    }
}
