//! Shared counters in Curator's and kazoo's layouts: [`SharedCount`]
//! (Curator's `SharedCount`: a 4-byte big-endian `int`, compare-and-set on the
//! node's version), [`DistributedAtomicLong`] (Curator's
//! `DistributedAtomicLong`: an 8-byte big-endian `long`, optimistic retries,
//! optionally promoted to a lock) and [`Counter`] (kazoo's `Counter`: the
//! value as text, or with `support_curator` as `SharedCount`'s 4 bytes).
//! Curator and kazoo participants on the same path read and write the same
//! values.
//!
//! Writes go to the node as they are (no HBase metadata prefix, which would
//! break Curator's layout), so a write whose reply is lost cannot be told
//! from another participant's: such a call returns `ConnectionLoss` (the
//! outcome is in doubt) instead of retrying blind. A deliberate difference
//! from Curator, whose retry of a lost `setData` can apply an increment twice.

use std::time::Duration;

use log::debug;

use crate::client::CreateMode;
use crate::engine::owned::{with_parents, Parents};
use crate::error::{Error, Result, ZkError};
use crate::lock::{InterProcessLock, ZkInterProcessWriteLock};
use crate::types::Stat;
use crate::watcher::ZooKeeperWatcher;

use crate::shared_count::create_if_missing;
pub use crate::shared_count::{SharedCount, VersionedValue};

/// The outcome of a [`DistributedAtomicLong`] operation (Curator's
/// `AtomicValue`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtomicValue {
    /// Whether the operation was applied.
    pub succeeded: bool,
    /// The value before.
    pub pre_value: i64,
    /// The value after (when it succeeded).
    pub post_value: i64,
    /// Optimistic tries made.
    pub optimistic_tries: u32,
    /// Whether it was applied holding the promotion lock.
    pub promoted: bool,
}

/// A shared `i64` (Curator's `DistributedAtomicLong`: 8 bytes, big-endian; a
/// missing node reads 0 and is created by the first write).
#[derive(Debug, Clone)]
pub struct DistributedAtomicLong {
    zkw: ZooKeeperWatcher,
    path: String,
    tries: u32,
    promoted: Option<(String, Duration)>,
}

impl DistributedAtomicLong {
    /// The long at `path`, with up to `tries` optimistic tries per operation
    /// (Curator's retry policy; at least 1).
    ///
    /// # Errors
    /// `BadArguments` for an invalid path.
    pub fn new(zkw: &ZooKeeperWatcher, path: &str, tries: u32) -> Result<DistributedAtomicLong> {
        crate::path::validate(path)?;
        Ok(DistributedAtomicLong {
            zkw: zkw.clone(),
            path: path.to_string(),
            tries: tries.max(1),
            promoted: None,
        })
    }

    /// When the optimistic tries fail, takes zklock's write lock at
    /// `lock_path` (waiting up to `wait`) and applies the operation holding
    /// it (Curator's `PromotedToLock`).
    ///
    /// # Errors
    /// `BadArguments` for an invalid lock path.
    pub fn promoted_to_lock(mut self, lock_path: &str, wait: Duration) -> Result<Self> {
        crate::path::validate(lock_path)?;
        self.promoted = Some((lock_path.to_string(), wait));
        Ok(self)
    }

    /// The value now (0 when the node is missing).
    ///
    /// # Errors
    /// `BadArguments` when the node's data is not 8 bytes; the session's errors.
    pub fn get(&self) -> Result<i64> {
        self.read().map(|(v, _)| v)
    }

    fn read(&self) -> Result<(i64, Option<Stat>)> {
        match self.zkw.zookeeper().get_data(&self.path, false) {
            Ok((data, stat)) => Ok((decode_long(&self.path, &data)?, Some(stat))),
            Err(e) if e.is(ZkError::NoNode) => Ok((0, None)),
            Err(e) => Err(e),
        }
    }

    /// One compare-and-set try: `Ok(false)` when another write came first.
    fn try_once(&self, stat: Option<Stat>, value: i64) -> Result<bool> {
        let zk = self.zkw.zookeeper();
        let acl = self.zkw.recoverable_zookeeper().acl_for(&self.path);
        let data = value.to_be_bytes();
        let r = match stat {
            Some(stat) => zk.set_data(&self.path, &data, Some(stat.version)).map(drop),
            None => with_parents(
                self.zkw.recoverable_zookeeper(),
                &self.path,
                Parents::Persistent,
                || zk.create(&self.path, &data, acl, CreateMode::Persistent),
            )
            .map(drop),
        };
        match r {
            Ok(()) => Ok(true),
            Err(e) if e.is(ZkError::BadVersion) || e.is(ZkError::NodeExists) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Applies `f` (the new value from the current one; `None` leaves it):
    /// optimistic tries, then the promotion lock when configured.
    fn apply(&self, f: impl Fn(i64) -> Option<i64>) -> Result<AtomicValue> {
        let mut result = AtomicValue {
            succeeded: false,
            pre_value: 0,
            post_value: 0,
            optimistic_tries: 0,
            promoted: false,
        };
        for _ in 0..self.tries {
            result.optimistic_tries += 1;
            if self.attempt(&f, &mut result)? {
                return Ok(result);
            }
        }
        let Some((lock_path, wait)) = &self.promoted else {
            return Ok(result);
        };
        let lock = ZkInterProcessWriteLock::new(&self.zkw, lock_path, &[], None)?;
        if !lock.try_acquire(*wait)? {
            return Ok(result);
        }
        result.promoted = true;
        // Holding the lock, only optimistic writers not promoted compete.
        let outcome = loop {
            match self.attempt(&f, &mut result) {
                Ok(true) => break Ok(result),
                Ok(false) => continue,
                Err(e) => break Err(e),
            }
        };
        if let Err(e) = lock.release() {
            debug!("releasing {lock_path}: {e}");
        }
        outcome
    }

    /// One read and compare-and-set into `result`: `Ok(true)` when done
    /// (applied, or `f` left the value), `Ok(false)` when another write came
    /// first.
    fn attempt(&self, f: &impl Fn(i64) -> Option<i64>, result: &mut AtomicValue) -> Result<bool> {
        let (pre, stat) = self.read()?;
        result.pre_value = pre;
        let Some(new) = f(pre) else {
            return Ok(true);
        };
        if self.try_once(stat, new)? {
            result.succeeded = true;
            result.post_value = new;
            return Ok(true);
        }
        Ok(false)
    }

    /// Adds `delta` (Curator's `add`).
    ///
    /// # Errors
    /// `ConnectionLoss` when a write's reply was lost (the outcome is in
    /// doubt); the session's errors; the lock's errors when promoted.
    pub fn add(&self, delta: i64) -> Result<AtomicValue> {
        self.apply(|v| Some(v.wrapping_add(delta)))
    }

    /// Adds 1.
    ///
    /// # Errors
    /// As [`add`](Self::add).
    pub fn increment(&self) -> Result<AtomicValue> {
        self.add(1)
    }

    /// Subtracts 1.
    ///
    /// # Errors
    /// As [`add`](Self::add).
    pub fn decrement(&self) -> Result<AtomicValue> {
        self.add(-1)
    }

    /// Sets `new` when the value is `expected` (Curator's `compareAndSet`).
    ///
    /// # Errors
    /// As [`add`](Self::add).
    pub fn compare_and_set(&self, expected: i64, new: i64) -> Result<AtomicValue> {
        self.apply(|v| (v == expected).then_some(new))
    }

    /// Sets `value` (Curator's `trySet`: optimistic, then promoted).
    ///
    /// # Errors
    /// As [`add`](Self::add).
    pub fn try_set(&self, value: i64) -> Result<AtomicValue> {
        self.apply(|_| Some(value))
    }
}

/// A value kazoo's [`Counter`] keeps: `i64` (Python's `int`) or `f64`
/// (`float`), written as Python's `repr` writes it.
pub trait CounterValue: Copy + PartialEq + std::fmt::Debug + Send + Sync + 'static {
    /// Python's `repr(value)` (the node's ASCII text).
    fn to_text(self) -> String;
    /// Python's `type(default)(text)`; `None` when `text` is not one.
    fn from_text(text: &str) -> Option<Self>;
    /// `self + delta`; `None` on overflow.
    fn plus(self, delta: Self) -> Option<Self>;
    /// `-self`; `None` on overflow.
    fn negated(self) -> Option<Self>;
    /// The value as the 4-byte `int` of kazoo's `support_curator` mode
    /// (`None` when it does not fit, or is not an integer).
    fn to_curator(self) -> Option<i32>;
    /// A value read in `support_curator` mode.
    fn from_curator(v: i32) -> Self;
}

impl CounterValue for i64 {
    fn to_text(self) -> String {
        self.to_string()
    }
    fn from_text(text: &str) -> Option<Self> {
        text.trim().replace('_', "").parse().ok()
    }
    fn plus(self, delta: Self) -> Option<Self> {
        self.checked_add(delta)
    }
    fn negated(self) -> Option<Self> {
        self.checked_neg()
    }
    fn to_curator(self) -> Option<i32> {
        i32::try_from(self).ok()
    }
    fn from_curator(v: i32) -> Self {
        v.into()
    }
}

impl CounterValue for f64 {
    fn to_text(self) -> String {
        python_float_repr(self)
    }
    fn from_text(text: &str) -> Option<Self> {
        text.trim().replace('_', "").parse().ok()
    }
    fn plus(self, delta: Self) -> Option<Self> {
        Some(self + delta)
    }
    fn negated(self) -> Option<Self> {
        Some(-self)
    }
    fn to_curator(self) -> Option<i32> {
        None // kazoo: "when support_curator is enabled the default type must be an int"
    }
    fn from_curator(v: i32) -> Self {
        v.into()
    }
}

/// Python's `repr(float)`: the shortest text that reads back the same value
/// (`1.0`, `0.1`, `1e+16`, `1e-05`, `inf`, `nan`), scientific when the
/// decimal exponent is below -4 or at least 16 (CPython's
/// `float_repr_style = 'short'`).
fn python_float_repr(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "-1.2345e-7".
    let sci = format!("{v:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    // The value is 0.<digits> x 10^decpt.
    let decpt = exp + 1;
    if !(-4 < decpt && decpt <= 16) {
        let rest = &digits[1..];
        let dot = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{}{dot}e{esign}{:02}", &digits[..1], exp.abs());
    }
    let n = digits.len() as i32;
    let body = if decpt <= 0 {
        format!("0.{}{digits}", "0".repeat((-decpt) as usize))
    } else if decpt >= n {
        format!("{digits}{}.0", "0".repeat((decpt - n) as usize))
    } else {
        format!(
            "{}.{}",
            &digits[..decpt as usize],
            &digits[decpt as usize..]
        )
    };
    format!("{sign}{body}")
}

/// How a [`Counter`] writes its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CounterLayout {
    /// kazoo's default: `repr(value)` in ASCII.
    Text,
    /// kazoo's `support_curator=True`: Curator's `SharedCount`, a 4-byte
    /// big-endian `int`.
    Curator,
}

/// A change made by [`Counter::add`] (kazoo's `pre_value` / `post_value`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CounterChange<T> {
    /// The value the change was applied to.
    pub pre_value: T,
    /// The value written.
    pub post_value: T,
}

/// kazoo's `Counter`: a shared `int` or `float` at `path`, changed by
/// compare-and-set on the node's version, retried when another write came
/// first.
///
/// # Layout (kazoo 2.11's)
/// `path` (created with its parents, persistent, with no data, on first use:
/// kazoo's `ensure_path`) holds `repr(value)` in ASCII; empty data reads as
/// the counter's default. With [`curator`](Counter::curator) (kazoo's
/// `support_curator=True`) it holds a 4-byte big-endian `int`, the layout of
/// Curator's `SharedCount`, so kazoo, Curator and zklock participants share
/// it.
///
/// # zklock differs here
/// - A write whose reply is lost returns `ConnectionLoss` (the change is in
///   doubt) instead of being retried blind: kazoo's retry of a lost `set` can
///   apply a change twice.
/// - Values are `i64` or `f64` (Python's `int` is unbounded): a result out of
///   range is a `BadArguments` error, never a wrapped value.
/// - A change is tried at most [`with_max_tries`](Self::with_max_tries) times
///   (default 100; kazoo's `client.retry`), then fails with `BadVersion`
///   (kazoo's `BadVersionError`).
#[derive(Debug)]
pub struct Counter<T: CounterValue = i64> {
    zkw: ZooKeeperWatcher,
    path: String,
    default: T,
    layout: CounterLayout,
    tries: u32,
    ensured: std::sync::atomic::AtomicBool,
}

impl<T: CounterValue> Counter<T> {
    /// kazoo's `Counter(client, path, default)`: values as text; the node is
    /// made on first use.
    ///
    /// # Errors
    /// `BadArguments` for an invalid path.
    pub fn new(zkw: &ZooKeeperWatcher, path: &str, default: T) -> Result<Counter<T>> {
        crate::path::validate(path)?;
        Ok(Counter {
            zkw: zkw.clone(),
            path: path.to_string(),
            default,
            layout: CounterLayout::Text,
            tries: 100,
            ensured: Default::default(),
        })
    }

    /// Tries a change at most `tries` times (at least 1).
    #[must_use]
    pub fn with_max_tries(mut self, tries: u32) -> Self {
        self.tries = tries.max(1);
        self
    }

    /// The counter's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    fn ensure_node(&self) -> Result<()> {
        use std::sync::atomic::Ordering;
        if !self.ensured.load(Ordering::Relaxed) {
            create_if_missing(self.zkw.zookeeper(), &self.zkw, &self.path, &[])?;
            self.ensured.store(true, Ordering::Relaxed);
        }
        Ok(())
    }

    fn decode(&self, data: &[u8]) -> Result<T> {
        if data.is_empty() {
            return Ok(self.default);
        }
        let bad = |what: &str| Error::BadArguments(format!("{}: {what}", self.path));
        match self.layout {
            CounterLayout::Text => std::str::from_utf8(data)
                .ok()
                .filter(|t| t.is_ascii())
                .and_then(T::from_text)
                .ok_or_else(|| bad("not a kazoo Counter's value")),
            CounterLayout::Curator => {
                let bytes: [u8; 4] = data.try_into().map_err(|_| bad("not 4 bytes"))?;
                Ok(T::from_curator(i32::from_be_bytes(bytes)))
            }
        }
    }

    fn encode(&self, value: T) -> Result<Vec<u8>> {
        match self.layout {
            CounterLayout::Text => Ok(value.to_text().into_bytes()),
            CounterLayout::Curator => value
                .to_curator()
                .map(|v| v.to_be_bytes().to_vec())
                .ok_or_else(|| {
                    Error::BadArguments(format!("{}: {value:?} is not a 4-byte int", self.path))
                }),
        }
    }

    /// The value and the version it was read at (the node is made first when
    /// missing).
    ///
    /// # Errors
    /// `BadArguments` when the node's data is not a value of this layout;
    /// the session's errors.
    pub fn get(&self) -> Result<VersionedValue<T>> {
        self.ensure_node()?;
        let (data, stat) = self.zkw.recoverable_zookeeper().get_raw_data(&self.path)?;
        Ok(VersionedValue {
            version: stat.version,
            value: self.decode(&data)?,
        })
    }

    /// kazoo's `counter.value`.
    ///
    /// # Errors
    /// As [`get`](Self::get).
    pub fn value(&self) -> Result<T> {
        self.get().map(|v| v.value)
    }

    /// Writes `value` when the node is still at `previous`'s version:
    /// `Ok(false)` when another write came first.
    ///
    /// # Errors
    /// `ConnectionLoss` when the reply was lost (the outcome is in doubt);
    /// `BadArguments` when `value` does not fit the layout; the session's
    /// errors.
    #[must_use = "`Ok(false)` means the value was not set (it changed meanwhile)"]
    pub fn try_set(&self, previous: VersionedValue<T>, value: T) -> Result<bool> {
        let data = self.encode(value)?;
        match self
            .zkw
            .zookeeper()
            .set_data(&self.path, &data, Some(previous.version))
        {
            Ok(_) => Ok(true),
            Err(e) if e.is(ZkError::BadVersion) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// kazoo's `counter += delta`: reads, writes the sum at the version read,
    /// again when another write came first.
    ///
    /// # Errors
    /// `BadVersion` when every try lost to another write; `BadArguments` on
    /// overflow; as [`try_set`](Self::try_set).
    pub fn add(&self, delta: T) -> Result<CounterChange<T>> {
        for _ in 0..self.tries {
            let pre = self.get()?;
            let post = pre.value.plus(delta).ok_or_else(|| {
                Error::BadArguments(format!(
                    "{}: {:?} + {delta:?} overflows",
                    self.path, pre.value
                ))
            })?;
            if self.try_set(pre, post)? {
                return Ok(CounterChange {
                    pre_value: pre.value,
                    post_value: post,
                });
            }
        }
        Err(Error::zk(ZkError::BadVersion, self.path.clone()))
    }

    /// kazoo's `counter -= delta`.
    ///
    /// # Errors
    /// As [`add`](Self::add).
    pub fn sub(&self, delta: T) -> Result<CounterChange<T>> {
        let negated = delta
            .negated()
            .ok_or_else(|| Error::BadArguments(format!("{}: -{delta:?} overflows", self.path)))?;
        self.add(negated)
    }
}

impl Counter<i64> {
    /// kazoo's `Counter(client, path, default, support_curator=True)`: the
    /// value as Curator's `SharedCount` writes it (4 bytes, big-endian), so
    /// Curator's `SharedCount` on `path` shares it.
    ///
    /// # Errors
    /// `BadArguments` for an invalid path or a `default` beyond 32 bits.
    pub fn curator(zkw: &ZooKeeperWatcher, path: &str, default: i64) -> Result<Counter<i64>> {
        if default.to_curator().is_none() {
            return Err(Error::BadArguments(format!(
                "{path}: default {default} is not a 4-byte int"
            )));
        }
        let mut c = Counter::new(zkw, path, default)?;
        c.layout = CounterLayout::Curator;
        Ok(c)
    }
}

/// Curator's `bytesToValue`: empty data is 0.
fn decode_long(path: &str, data: &[u8]) -> Result<i64> {
    if data.is_empty() {
        return Ok(0);
    }
    let bytes: [u8; 8] = data.try_into().map_err(|_| {
        Error::BadArguments(format!(
            "{path}: {} bytes, not a DistributedAtomicLong's 8",
            data.len()
        ))
    })?;
    Ok(i64::from_be_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_are_written_as_python_repr() {
        let cases = [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (-2.5, "-2.5"),
            (3.0e-5, "3e-05"),
            (0.0001, "0.0001"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (123456.789, "123456.789"),
            (1.5e300, "1.5e+300"),
            (-0.0, "-0.0"),
            (f64::INFINITY, "inf"),
        ];
        for (v, text) in cases {
            assert_eq!(python_float_repr(v), text, "{v}");
            assert_eq!(f64::from_text(text), Some(v));
        }
        assert_eq!(i64::from_text("42"), Some(42));
        assert_eq!(i64::from_text("4.0"), None);
    }

    #[test]
    fn a_long_is_eight_big_endian_bytes() {
        assert_eq!(decode_long("/x", &[0, 0, 0, 0, 0, 0, 1, 2]).unwrap(), 258);
        assert_eq!(decode_long("/x", &[]).unwrap(), 0);
        assert!(matches!(
            decode_long("/x", &[1, 2]),
            Err(Error::BadArguments(_))
        ));
    }
}
