//! HBase's retry accounting (hbase-common `RetryCounter`, `RetryCounter.RetryConfig`,
//! the backoff policies, `RetryCounterFactory`), as `RecoverableZooKeeper` uses it.
//!
//! [`RetryCounter`]'s docs say how the counts compare with HBase's.

use std::time::Duration;

/// HBase's `RetryCounter.BackoffPolicy` and its subclasses: how long to sleep
/// before a retry.
///
/// For retry number `attempt` (counted from 0, see [`RetryCounter`]):
///
/// | policy | HBase class | sleep |
/// |---|---|---|
/// | [`Fixed`](BackoffPolicy::Fixed) | `BackoffPolicy` | `sleep_interval` |
/// | [`Exponential`](BackoffPolicy::Exponential) | `ExponentialBackoffPolicy` | `sleep_interval * 2^attempt` |
/// | [`ExponentialWithLimit`](BackoffPolicy::ExponentialWithLimit) | `ExponentialBackoffPolicyWithLimit` | `min(sleep_interval * 2^attempt, max_sleep_time)` |
///
/// The arithmetic saturates at [`Duration::MAX`]: no attempt count overflows.
/// `ExponentialWithLimit` without a `max_sleep_time` is `Exponential`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use zklock::{BackoffPolicy, RetryConfig};
///
/// let config = RetryConfig::default()
///     .with_sleep_interval(Duration::from_millis(100))
///     .with_max_sleep_time(Some(Duration::from_millis(500)));
/// let sleeps: Vec<u128> = (0..5)
///     .map(|attempt| BackoffPolicy::ExponentialWithLimit.backoff_time(&config, attempt).as_millis())
///     .collect();
/// assert_eq!(sleeps, [100, 200, 400, 500, 500]);
/// assert_eq!(BackoffPolicy::Fixed.backoff_time(&config, 4), Duration::from_millis(100));
/// assert_eq!(BackoffPolicy::Exponential.backoff_time(&config, 4), Duration::from_millis(1600));
/// assert_eq!(BackoffPolicy::Exponential.backoff_time(&config, u32::MAX), Duration::MAX);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BackoffPolicy {
    /// HBase's base `BackoffPolicy`: always `sleep_interval`.
    Fixed,
    /// HBase's `ExponentialBackoffPolicy`: `sleep_interval * 2^attempt`.
    Exponential,
    /// HBase's `ExponentialBackoffPolicyWithLimit`: the exponential sleep, capped at
    /// `max_sleep_time` when one is set.
    ExponentialWithLimit,
}

impl BackoffPolicy {
    /// HBase's `BackoffPolicy.getBackoffTime(config, attempts)`: the sleep before
    /// retry number `attempt` (from 0). Saturates at [`Duration::MAX`].
    pub fn backoff_time(self, config: &RetryConfig, attempt: u32) -> Duration {
        match self {
            BackoffPolicy::Fixed => config.sleep_interval,
            BackoffPolicy::Exponential => exponential(config.sleep_interval, attempt),
            BackoffPolicy::ExponentialWithLimit => {
                let sleep = exponential(config.sleep_interval, attempt);
                match config.max_sleep_time {
                    Some(limit) => sleep.min(limit),
                    None => sleep,
                }
            }
        }
    }
}

/// `interval * 2^attempt`, saturating at `Duration::MAX`.
fn exponential(interval: Duration, attempt: u32) -> Duration {
    const NANOS_PER_SEC: u128 = 1_000_000_000;
    let nanos = interval.as_nanos();
    if nanos == 0 {
        return Duration::ZERO;
    }
    // `nanos << attempt` fits in a u128 iff it loses no set bit.
    if attempt >= nanos.leading_zeros() {
        return Duration::MAX;
    }
    let nanos = nanos << attempt;
    match u64::try_from(nanos / NANOS_PER_SEC) {
        // The remainder is below 10^9, so it fits in a u32.
        Ok(secs) => Duration::new(secs, (nanos % NANOS_PER_SEC) as u32),
        Err(_) => Duration::MAX,
    }
}

/// HBase's `RetryCounter.RetryConfig`: how many retries, and how long to sleep
/// between them.
///
/// The [`Default`] is what HBase 1.3's `RecoverableZooKeeper` gets from its
/// configuration defaults (`ZKUtil.connect`): 3 retries
/// (`zookeeper.recovery.retry`), 1000 ms interval
/// (`zookeeper.recovery.retry.intervalmill`), 60 s maximum sleep
/// (`zookeeper.recovery.retry.maxsleeptime`), exponential backoff with that limit.
/// (HBase's no-argument `new RetryConfig()` is different: 1 attempt, no limit,
/// exponential; nothing in the ZooKeeper code uses it.) Unlike HBase's
/// `RecoverableZooKeeper`, zklock does not add one retry to the configured count:
/// see [`RetryCounter`].
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use zklock::{BackoffPolicy, RetryConfig};
///
/// let config = RetryConfig::default()
///     .with_max_attempts(5)
///     .with_sleep_interval(Duration::from_millis(10))
///     .with_max_sleep_time(None)
///     .with_backoff_policy(BackoffPolicy::Fixed);
/// assert_eq!(config.max_attempts(), 5);
/// assert_eq!(config.backoff_time(4), Duration::from_millis(10));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RetryConfig {
    max_attempts: u32,
    sleep_interval: Duration,
    max_sleep_time: Option<Duration>,
    backoff_policy: BackoffPolicy,
}

impl RetryConfig {
    /// HBase's `RetryConfig(maxAttempts, sleepInterval, maxSleepTime, timeUnit,
    /// backoffPolicy)`: every field at once.
    pub const fn new(
        max_attempts: u32,
        sleep_interval: Duration,
        max_sleep_time: Option<Duration>,
        backoff_policy: BackoffPolicy,
    ) -> RetryConfig {
        RetryConfig {
            max_attempts,
            sleep_interval,
            max_sleep_time,
            backoff_policy,
        }
    }

    /// HBase's `RetryConfig.setMaxAttempts`: how many retries after the first call
    /// (`zookeeper.recovery.retry`). Default: 3 (4 calls in all). 0 means never
    /// retry.
    #[must_use]
    pub const fn with_max_attempts(mut self, max_attempts: u32) -> RetryConfig {
        self.max_attempts = max_attempts;
        self
    }

    /// HBase's `RetryConfig.setSleepInterval`: the base sleep between retries
    /// (`zookeeper.recovery.retry.intervalmill`). Default: 1 s.
    #[must_use]
    pub const fn with_sleep_interval(mut self, sleep_interval: Duration) -> RetryConfig {
        self.sleep_interval = sleep_interval;
        self
    }

    /// HBase's `RetryConfig.setMaxSleepTime`: the cap used by
    /// [`BackoffPolicy::ExponentialWithLimit`]
    /// (`zookeeper.recovery.retry.maxsleeptime`); `None` is no cap. Default:
    /// `Some(60 s)`.
    ///
    /// HBase treats a value `<= 0` as no cap; here `None` means no cap and
    /// `Some(Duration::ZERO)` caps every sleep at zero.
    #[must_use]
    pub const fn with_max_sleep_time(mut self, max_sleep_time: Option<Duration>) -> RetryConfig {
        self.max_sleep_time = max_sleep_time;
        self
    }

    /// HBase's `RetryConfig.setBackoffPolicy`. Default:
    /// [`BackoffPolicy::ExponentialWithLimit`] (what `RecoverableZooKeeper` uses).
    #[must_use]
    pub const fn with_backoff_policy(mut self, backoff_policy: BackoffPolicy) -> RetryConfig {
        self.backoff_policy = backoff_policy;
        self
    }

    /// HBase's `RetryConfig.getMaxAttempts`: the number of retries allowed.
    pub const fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// HBase's `RetryConfig.getSleepInterval`.
    pub const fn sleep_interval(&self) -> Duration {
        self.sleep_interval
    }

    /// HBase's `RetryConfig.getMaxSleepTime`; `None` is no cap.
    pub const fn max_sleep_time(&self) -> Option<Duration> {
        self.max_sleep_time
    }

    /// HBase's `RetryConfig.getBackoffPolicy`.
    pub const fn backoff_policy(&self) -> BackoffPolicy {
        self.backoff_policy
    }

    /// `getBackoffPolicy().getBackoffTime(this, attempt)`: the sleep before retry
    /// number `attempt` (from 0) under this configuration's policy.
    pub fn backoff_time(&self, attempt: u32) -> Duration {
        self.backoff_policy.backoff_time(self, attempt)
    }
}

impl Default for RetryConfig {
    /// HBase 1.3 `RecoverableZooKeeper`'s defaults: 3 retries, 1 s interval, 60 s
    /// cap, [`BackoffPolicy::ExponentialWithLimit`].
    fn default() -> RetryConfig {
        RetryConfig::new(
            3,
            Duration::from_millis(1000),
            Some(Duration::from_secs(60)),
            BackoffPolicy::ExponentialWithLimit,
        )
    }
}

/// HBase's `RetryCounter`: the retries of one operation.
///
/// Make one per operation (usually with [`RetryCounterFactory::create`]); it is
/// not shared between threads.
///
/// # Calls, retries, and HBase's off-by-one
///
/// In `RetryCounter`'s vocabulary an *attempt* is a **retry**: the first call is
/// not counted. [`RetryCounter::should_retry`] is `attempt_times < max_attempts`,
/// and [`RetryCounter::sleep_until_next_retry`] counts one attempt. The retry loop
/// (HBase's and zklock's) is
///
/// ```text
/// loop {
///     match op() {
///         Err(e) if e.is_retryable() => {
///             if !counter.should_retry() { return Err(e) }
///             counter.sleep_until_next_retry();
///         }
///         result => return result,
///     }
/// }
/// ```
///
/// so it makes at most `max_attempts + 1` calls, sleeping `backoff_time(0)`, ...,
/// `backoff_time(max_attempts - 1)` in between.
///
/// zklock's [`RetryConfig::max_attempts`] is the number of retries:
/// `zookeeper.recovery.retry = 3` is `with_max_attempts(3)` and gives **4 calls**,
/// with sleeps of 1 s, 2 s and 4 s at the default 1000 ms interval.
///
/// HBase 1.3's `RecoverableZooKeeper` builds its factory with
/// `new RetryCounterFactory(maxRetries + 1, retryIntervalMillis, maxSleepTime)`, so
/// with `zookeeper.recovery.retry = 3` it makes **5 calls** (1 + 4 retries), sleeping
/// 1 s, 2 s, 4 s and 8 s (15 s in all), and when the budget is spent it logs
/// `"ZooKeeper <op> failed after 4 attempts"` (`getMaxAttempts()`, which is 4) after
/// 5 calls: the count in the log is one less than the calls made, and one more
/// than the configured retries. zklock does not add the `+ 1`: a configured count
/// of retries is exactly the number of retries, and the calls are one more.
/// (HBase's trace line `"Sleeping <n>ms before retry #<k>..."` numbers the retries
/// from 0.)
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use zklock::{RetryConfig, RetryCounter};
///
/// let mut counter = RetryCounter::new(RetryConfig::default());
/// let mut sleeps = Vec::new();
/// let mut calls = 0;
/// loop {
///     calls += 1; // the operation fails with ConnectionLoss every time
///     if !counter.should_retry() {
///         break;
///     }
///     // What `sleep_until_next_retry()` sleeps, without sleeping.
///     sleeps.push(counter.backoff_time_and_increment_attempts());
/// }
/// assert_eq!(calls, 4);
/// assert_eq!(sleeps, [1, 2, 4].map(Duration::from_secs));
/// ```
#[derive(Debug, Clone)]
pub struct RetryCounter {
    config: RetryConfig,
    attempts: u32,
}

impl RetryCounter {
    /// HBase's `new RetryCounter(retryConfig)`: no attempt made yet.
    pub const fn new(config: RetryConfig) -> RetryCounter {
        RetryCounter {
            config,
            attempts: 0,
        }
    }

    /// HBase's `RetryCounter.shouldRetry()`: `attempt_times() < max_attempts()`.
    pub const fn should_retry(&self) -> bool {
        self.attempts < self.config.max_attempts
    }

    /// HBase's `RetryCounter.sleepUntilNextRetry()`: sleeps
    /// [`backoff_time(attempt_times())`](RetryCounter::backoff_time), then counts the
    /// attempt.
    ///
    /// Blocks the calling thread; the sleep is bounded by the configuration (use
    /// [`BackoffPolicy::ExponentialWithLimit`] with a cap to bound it for any
    /// attempt count).
    pub fn sleep_until_next_retry(&mut self) {
        let sleep = self.backoff_time(self.attempts);
        log::trace!("sleeping {sleep:?} before retry #{}", self.attempts);
        std::thread::sleep(sleep);
        self.use_retry();
    }

    /// HBase's `RetryCounter.getBackoffTimeAndIncrementAttempts()`: the sleep
    /// `sleep_until_next_retry` would take, counting the attempt without sleeping
    /// (for callers that wait some other way, e.g. with a deadline).
    pub fn backoff_time_and_increment_attempts(&mut self) -> Duration {
        let sleep = self.backoff_time(self.attempts);
        self.use_retry();
        sleep
    }

    /// HBase's `RetryCounter.useRetry()`: counts one attempt without sleeping.
    /// Saturates at `u32::MAX`.
    pub fn use_retry(&mut self) {
        self.attempts = self.attempts.saturating_add(1);
    }

    /// HBase's `RetryCounter.isRetry()`: whether an attempt was counted, i.e. the
    /// next call is a retry (`RecoverableZooKeeper`'s "NoNode on a retry" rules).
    pub const fn is_retry(&self) -> bool {
        self.attempts > 0
    }

    /// HBase's `RetryCounter.getAttemptTimes()`: the attempts (retries) counted so
    /// far.
    pub const fn attempt_times(&self) -> u32 {
        self.attempts
    }

    /// HBase's `RetryCounter.getMaxAttempts()`: the retries allowed.
    pub const fn max_attempts(&self) -> u32 {
        self.config.max_attempts
    }

    /// HBase's `BackoffPolicy.getBackoffTime(config, attempt)` for this counter's
    /// configuration: the sleep before retry number `attempt` (from 0). Pure; does
    /// not look at or change the count.
    pub fn backoff_time(&self, attempt: u32) -> Duration {
        self.config.backoff_time(attempt)
    }

    /// The configuration this counter was made with.
    pub const fn config(&self) -> &RetryConfig {
        &self.config
    }
}

/// HBase's `RetryCounterFactory`: makes a fresh [`RetryCounter`] per operation
/// from one [`RetryConfig`].
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use zklock::RetryCounterFactory;
///
/// let factory = RetryCounterFactory::with_max_sleep(3, Duration::from_secs(1), Duration::from_secs(3));
/// let counter = factory.create();
/// assert_eq!(counter.max_attempts(), 3);
/// assert_eq!(counter.backoff_time(2), Duration::from_secs(3)); // 4 s, capped
/// ```
#[derive(Debug, Clone)]
pub struct RetryCounterFactory {
    config: RetryConfig,
}

impl RetryCounterFactory {
    /// HBase's `new RetryCounterFactory(maxAttempts, sleepIntervalMillis)`:
    /// exponential backoff without a cap.
    pub const fn new(max_attempts: u32, sleep_interval: Duration) -> RetryCounterFactory {
        RetryCounterFactory::from_config(RetryConfig::new(
            max_attempts,
            sleep_interval,
            None,
            BackoffPolicy::Exponential,
        ))
    }

    /// HBase's `new RetryCounterFactory(maxAttempts, sleepIntervalMillis,
    /// maxSleepTime)`: exponential backoff capped at `max_sleep_time`.
    pub const fn with_max_sleep(
        max_attempts: u32,
        sleep_interval: Duration,
        max_sleep_time: Duration,
    ) -> RetryCounterFactory {
        RetryCounterFactory::from_config(RetryConfig::new(
            max_attempts,
            sleep_interval,
            Some(max_sleep_time),
            BackoffPolicy::ExponentialWithLimit,
        ))
    }

    /// HBase's `new RetryCounterFactory(retryConfig)`.
    pub const fn from_config(config: RetryConfig) -> RetryCounterFactory {
        RetryCounterFactory { config }
    }

    /// HBase's `RetryCounterFactory.create()`: a counter with no attempt made.
    pub const fn create(&self) -> RetryCounter {
        RetryCounter::new(self.config)
    }

    /// The configuration every counter gets.
    pub const fn config(&self) -> &RetryConfig {
        &self.config
    }
}

impl Default for RetryCounterFactory {
    /// A factory for [`RetryConfig::default`].
    fn default() -> RetryCounterFactory {
        RetryCounterFactory::from_config(RetryConfig::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Runs the retry loop against an operation that always fails retryably,
    /// without sleeping; returns the calls made and the sleeps taken.
    fn exhaust(mut counter: RetryCounter) -> (u32, Vec<Duration>) {
        let mut calls = 0;
        let mut sleeps = Vec::new();
        loop {
            calls += 1;
            if !counter.should_retry() {
                return (calls, sleeps);
            }
            assert_eq!(counter.is_retry(), calls > 1);
            sleeps.push(counter.backoff_time_and_increment_attempts());
        }
    }

    #[test]
    fn defaults_are_recoverable_zookeepers() {
        let config = RetryConfig::default();
        assert_eq!(config.max_attempts(), 3);
        assert_eq!(config.sleep_interval(), ms(1000));
        assert_eq!(config.max_sleep_time(), Some(Duration::from_secs(60)));
        assert_eq!(config.backoff_policy(), BackoffPolicy::ExponentialWithLimit);
        assert_eq!(RetryCounterFactory::default().config(), &config);
    }

    #[test]
    fn zklock_default_makes_four_calls_sleeping_1_2_4_seconds() {
        let (calls, sleeps) = exhaust(RetryCounterFactory::default().create());
        assert_eq!(calls, 4);
        assert_eq!(sleeps, [ms(1000), ms(2000), ms(4000)]);
    }

    #[test]
    fn hbase_default_makes_five_calls_sleeping_1_2_4_8_seconds() {
        // HBase 1.3: new RetryCounterFactory(maxRetries + 1, 1000, 60000), retry = 3.
        let retries = 3;
        let factory = RetryCounterFactory::with_max_sleep(retries + 1, ms(1000), ms(60_000));
        let (calls, sleeps) = exhaust(factory.create());
        assert_eq!(calls, 5);
        assert_eq!(sleeps, [ms(1000), ms(2000), ms(4000), ms(8000)]);
        assert_eq!(sleeps.iter().sum::<Duration>(), ms(15_000));
        // Its "failed after N attempts" log line prints getMaxAttempts():
        assert_eq!(factory.create().max_attempts(), calls - 1);
    }

    #[test]
    fn zero_attempts_means_one_call() {
        let (calls, sleeps) = exhaust(RetryCounterFactory::new(0, ms(5)).create());
        assert_eq!((calls, sleeps.len()), (1, 0));
    }

    #[test]
    fn policies_exactly() {
        let config = RetryConfig::default()
            .with_sleep_interval(ms(100))
            .with_max_sleep_time(Some(ms(1000)));
        let times = |policy: BackoffPolicy| -> Vec<Duration> {
            (0..7).map(|a| policy.backoff_time(&config, a)).collect()
        };
        assert_eq!(times(BackoffPolicy::Fixed), vec![ms(100); 7]);
        assert_eq!(
            times(BackoffPolicy::Exponential),
            [100, 200, 400, 800, 1600, 3200, 6400].map(ms)
        );
        assert_eq!(
            times(BackoffPolicy::ExponentialWithLimit),
            [100, 200, 400, 800, 1000, 1000, 1000].map(ms)
        );
        // Without a limit, "with limit" is exponential.
        let unlimited = config.with_max_sleep_time(None);
        assert_eq!(
            BackoffPolicy::ExponentialWithLimit.backoff_time(&unlimited, 6),
            ms(6400)
        );
        // A zero limit caps at zero.
        let zero = config.with_max_sleep_time(Some(Duration::ZERO));
        assert_eq!(
            BackoffPolicy::ExponentialWithLimit.backoff_time(&zero, 3),
            Duration::ZERO
        );
        // Sub-millisecond precision is kept.
        let fine = config.with_sleep_interval(Duration::from_nanos(3));
        assert_eq!(
            BackoffPolicy::Exponential.backoff_time(&fine, 10),
            Duration::from_nanos(3072)
        );
    }

    #[test]
    fn counter_backoff_uses_its_config() {
        let counter = RetryCounterFactory::with_max_sleep(10, ms(1000), ms(60_000)).create();
        let expected = [1, 2, 4, 8, 16, 32, 60, 60, 60, 60].map(Duration::from_secs);
        let actual: Vec<_> = (0..10).map(|a| counter.backoff_time(a)).collect();
        assert_eq!(actual, expected);
        assert_eq!(counter.attempt_times(), 0);
    }

    #[test]
    fn saturates_at_huge_attempt_counts() {
        let exp = RetryConfig::default()
            .with_backoff_policy(BackoffPolicy::Exponential)
            .with_sleep_interval(ms(1000));
        for attempt in [64, 100, 127, 128, 1000, u32::MAX] {
            assert_eq!(exp.backoff_time(attempt), Duration::MAX, "{attempt}");
        }
        // The last attempt that still fits: 1 s * 2^63 s.
        assert_eq!(exp.backoff_time(63), Duration::from_secs(1 << 63));
        assert_eq!(exp.backoff_time(64), Duration::MAX);
        // Duration::MAX itself as the interval.
        let max = exp.with_sleep_interval(Duration::MAX);
        assert_eq!(max.backoff_time(0), Duration::MAX);
        assert_eq!(max.backoff_time(1), Duration::MAX);
        // Zero interval stays zero.
        assert_eq!(
            exp.with_sleep_interval(Duration::ZERO)
                .backoff_time(u32::MAX),
            Duration::ZERO
        );
        // With a limit: the limit.
        let limited = RetryConfig::default();
        for attempt in [31, 32, 63, 64, 1000, u32::MAX] {
            assert_eq!(limited.backoff_time(attempt), Duration::from_secs(60));
        }
        // The count itself saturates.
        let mut counter = RetryCounterFactory::new(u32::MAX, ms(1)).create();
        counter.attempts = u32::MAX - 1;
        counter.use_retry();
        counter.use_retry();
        assert_eq!(counter.attempt_times(), u32::MAX);
        assert!(!counter.should_retry());
        assert_eq!(counter.backoff_time_and_increment_attempts(), Duration::MAX);
    }

    #[test]
    fn sleep_until_next_retry_sleeps_then_counts() {
        let mut counter = RetryCounterFactory::new(2, ms(5)).create();
        assert!(!counter.is_retry());
        let started = Instant::now();
        counter.sleep_until_next_retry();
        assert_eq!(counter.attempt_times(), 1);
        assert!(counter.is_retry());
        counter.sleep_until_next_retry();
        assert_eq!(counter.attempt_times(), 2);
        assert!(started.elapsed() >= ms(5 + 10));
        assert!(!counter.should_retry());
    }
}
