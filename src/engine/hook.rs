//! The test-hook seam: where a test holds a thread at a step, free at the call
//! site when the feature `testing` is off (as [`metric!`](crate::metrics) is
//! without `metrics`).
//!
//! | piece | with `testing` | without |
//! |---|---|---|
//! | [`Hook<S>`]: a step hook, `Fn(S, &str)` | a settable hook | a zero-sized no-op |
//! | [`OnceHook`]: run once at the next point | a settable `FnOnce` | a zero-sized no-op |
//! | [`Counter`]: a count a test reads | a count | nothing |
//! | [`Kept<T>`]: a value computed for a hook only | the value | nothing computed |
//! | [`Hold<R>`]: a reply held until its path is released | the held reply | hands every reply on |
//! | [`note_wake_up`]: the wait engine's wake-up count | a per-thread count | nothing |
//!
//! Call sites use [`hook!`](hook) and carry no `cfg`: `hook!(self.hook,
//! Step::Created, &path)` tells the hook (if one is set) with `testing`, and
//! evaluates nothing without it (its arguments stay checked, inside a closure
//! that is never called, so a step only a hook names is no dead code). Only
//! the public `with_step_hook`-style builders that set a hook carry
//! `#[cfg(feature = "testing")]`. The `…Step` enums a hook is told are in the
//! documented API with `testing` only (`doc(hidden)` without it).

#[cfg(feature = "testing")]
mod on {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    use parking_lot::Mutex;

    /// A test hook told a step and the path it concerns.
    pub(crate) type StepFn<S> = Arc<dyn Fn(S, &str) + Send + Sync>;

    /// A step hook (feature `testing`): told each step `S` with its path.
    pub(crate) struct Hook<S>(Mutex<Option<StepFn<S>>>);

    impl<S> Default for Hook<S> {
        fn default() -> Self {
            Hook(Mutex::new(None))
        }
    }

    impl<S> Clone for Hook<S> {
        fn clone(&self) -> Self {
            Hook(Mutex::new(self.get()))
        }
    }

    impl<S> Hook<S> {
        /// Calls `hook` at each step from now on.
        pub(crate) fn set(&self, hook: impl Fn(S, &str) + Send + Sync + 'static) {
            *self.0.lock() = Some(Arc::new(hook));
        }

        /// The hook set, if any (to pass on to an inner instance).
        pub(crate) fn get(&self) -> Option<StepFn<S>> {
            self.0.lock().clone()
        }

        /// A hook for an inner instance whose steps are told to this one's
        /// hook as `into(step)` (none when none is set).
        pub(crate) fn map<T: 'static>(&self, into: fn(T) -> S) -> Hook<T>
        where
            S: 'static,
        {
            let inner = Hook::default();
            if let Some(hook) = self.get() {
                inner.set(move |step, path| hook(into(step), path));
            }
            inner
        }

        /// Tells the hook (if any) of `step` on `path` (no lock held while
        /// it runs).
        pub(crate) fn call(&self, step: S, path: &str) {
            let hook = self.0.lock().clone();
            if let Some(hook) = hook {
                hook(step, path);
            }
        }
    }

    /// A hook run once, at the next point it is given (feature `testing`).
    #[derive(Default)]
    pub(crate) struct OnceHook(Mutex<Option<Box<dyn FnOnce() + Send>>>);

    impl OnceHook {
        /// Runs `hook` at the next point.
        pub(crate) fn set(&self, hook: impl FnOnce() + Send + 'static) {
            *self.0.lock() = Some(Box::new(hook));
        }

        /// Runs the hook set, if any, once (no lock held while it runs).
        pub(crate) fn run(&self) {
            let hook = self.0.lock().take();
            if let Some(hook) = hook {
                hook();
            }
        }
    }

    /// A count a test reads (feature `testing`).
    #[derive(Debug, Default)]
    pub(crate) struct Counter(AtomicU64);

    impl Counter {
        /// Counts one.
        #[inline]
        pub(crate) fn bump(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }

        /// The count so far.
        pub(crate) fn get(&self) -> u64 {
            self.0.load(Ordering::SeqCst)
        }
    }

    /// A value computed for a hook only (feature `testing`).
    #[derive(Debug)]
    pub(crate) struct Kept<T>(T);

    impl<T> Kept<T> {
        /// Computes the value.
        #[inline]
        pub(crate) fn new(f: impl FnOnce() -> T) -> Self {
            Kept(f())
        }

        /// The value.
        #[inline]
        pub(crate) fn get(self) -> Option<T> {
            Some(self.0)
        }
    }

    /// A reply held until its path is released (feature `testing`): the
    /// next reply for the armed path is kept, not handled, until
    /// [`release`](Self::release) is given that path.
    pub(crate) struct Hold<R>(Mutex<Held<R>>);

    struct Held<R> {
        /// The path whose next reply is to be held.
        armed: Option<String>,
        /// The reply held, with its path.
        reply: Option<(String, R)>,
    }

    impl<R> Default for Hold<R> {
        fn default() -> Self {
            Hold(Mutex::new(Held {
                armed: None,
                reply: None,
            }))
        }
    }

    impl<R> Hold<R> {
        /// Holds the next reply for `path`.
        pub(crate) fn arm(&self, path: &str) {
            self.0.lock().armed = Some(path.to_string());
        }

        /// `r` back when it is not to be held; `None` when it is now held.
        pub(crate) fn hold(&self, path: &str, r: R) -> Option<R> {
            let mut h = self.0.lock();
            if h.armed.as_deref() != Some(path) {
                return Some(r);
            }
            h.armed = None;
            h.reply = Some((path.to_string(), r));
            None
        }

        /// The reply held for `path`, taken.
        pub(crate) fn release(&self, path: &str) -> Option<(String, R)> {
            let mut h = self.0.lock();
            match &h.reply {
                Some((p, _)) if p == path => h.reply.take(),
                _ => None,
            }
        }
    }

    thread_local! {
        /// See [`wake_ups_on_this_thread`].
        static WAKE_UPS: Cell<u64> = const { Cell::new(0) };
    }

    /// Counts one return of the wait engine from blocking on this thread.
    #[inline]
    pub(crate) fn note_wake_up() {
        WAKE_UPS.with(|n| n.set(n.get() + 1));
    }

    /// How many times the calling thread has come back from blocking in a
    /// [`Wake::wait`](crate::engine::wake::Wake::wait) (feature `testing`): each
    /// wake-up, deadline or spurious return of the condition variable counts
    /// one; a wait that finds its wake-up already there, without blocking,
    /// counts none. Exposed as `zklock::testing::engine_wake_ups`.
    pub(crate) fn wake_ups_on_this_thread() -> u64 {
        WAKE_UPS.with(Cell::get)
    }

    /// `hook!(h, step, path)`: tells the step hook `h` of `step` on `path`;
    /// `hook!(once h)`: runs the one-shot hook `h`.
    macro_rules! hook {
        (once $hook:expr) => {
            $hook.run()
        };
        ($hook:expr, $step:expr, $path:expr) => {
            $hook.call($step, $path)
        };
    }
    pub(crate) use hook;

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn a_hook_is_told_each_step() {
            let told = Arc::new(Mutex::new(Vec::new()));
            let hook: Hook<u64> = Hook::default();
            hook!(hook, 1, "/before");
            let t = told.clone();
            hook.set(move |step, path| t.lock().push((step, path.to_string())));
            hook!(hook, 2, "/p");
            let inner: Hook<u32> = hook.map(u64::from);
            hook!(inner, 3, "/inner");
            assert_eq!(
                *told.lock(),
                vec![(2, "/p".to_string()), (3, "/inner".to_string())]
            );
        }

        #[test]
        fn a_held_reply_waits_for_its_release() {
            let held: Hold<u8> = Hold::default();
            assert_eq!(held.hold("/a", 1), Some(1));
            held.arm("/a");
            assert_eq!(held.hold("/a", 2), None);
            assert_eq!(held.release("/b"), None);
            assert_eq!(held.release("/a"), Some(("/a".to_string(), 2)));
        }
    }
}

#[cfg(not(feature = "testing"))]
mod off {
    use std::marker::PhantomData;

    /// A step hook: nothing without the feature `testing`.
    pub(crate) struct Hook<S>(PhantomData<fn(S)>);

    impl<S> Clone for Hook<S> {
        #[inline]
        fn clone(&self) -> Self {
            Hook(PhantomData)
        }
    }

    impl<S> Default for Hook<S> {
        #[inline]
        fn default() -> Self {
            Hook(PhantomData)
        }
    }

    impl<S> Hook<S> {
        /// Nothing to pass on.
        #[inline(always)]
        pub(crate) fn map<T>(&self, _: fn(T) -> S) -> Hook<T> {
            Hook(PhantomData)
        }
    }

    /// A one-shot hook: nothing without the feature `testing`.
    #[derive(Default)]
    pub(crate) struct OnceHook(PhantomData<()>);

    /// A count: nothing without the feature `testing`.
    #[derive(Debug, Default)]
    pub(crate) struct Counter(PhantomData<()>);

    impl Counter {
        /// Nothing.
        #[inline(always)]
        pub(crate) fn bump(&self) {}
    }

    /// A value for a hook: never computed without the feature `testing`.
    #[derive(Debug)]
    pub(crate) struct Kept<T>(PhantomData<T>);

    impl<T> Kept<T> {
        /// Computes nothing.
        #[inline(always)]
        pub(crate) fn new(_: impl FnOnce() -> T) -> Self {
            Kept(PhantomData)
        }

        /// Nothing.
        #[inline(always)]
        pub(crate) fn get(self) -> Option<T> {
            None
        }
    }

    /// A reply hold: hands every reply on without the feature `testing`.
    pub(crate) struct Hold<R>(PhantomData<fn(R)>);

    impl<R> Default for Hold<R> {
        #[inline]
        fn default() -> Self {
            Hold(PhantomData)
        }
    }

    impl<R> Hold<R> {
        /// `r` back: never held.
        #[inline(always)]
        pub(crate) fn hold(&self, _: &str, r: R) -> Option<R> {
            Some(r)
        }

        /// Nothing held.
        #[inline(always)]
        pub(crate) fn release(&self, _: &str) -> Option<(String, R)> {
            None
        }
    }

    /// Nothing without the feature `testing`.
    #[inline(always)]
    pub(crate) fn note_wake_up() {}

    /// Without the feature `testing`: nothing is evaluated (the arguments
    /// are type-checked in a closure never called).
    macro_rules! hook {
        (once $hook:expr) => {{
            let _ = &$hook;
        }};
        ($hook:expr, $step:expr, $path:expr) => {{
            let _ = || (&$hook, $step, $path);
        }};
    }
    pub(crate) use hook;

    // The seam costs nothing: checked by every build without the feature
    // (`cargo build --lib`, the CLI's build; the tests turn `testing` on).
    const _: () = {
        assert!(std::mem::size_of::<Hook<u64>>() == 0);
        assert!(std::mem::size_of::<OnceHook>() == 0);
        assert!(std::mem::size_of::<Counter>() == 0);
        assert!(std::mem::size_of::<Hold<Vec<u8>>>() == 0);
        assert!(std::mem::size_of::<Kept<String>>() == 0);
    };
}

#[cfg(feature = "testing")]
pub(crate) use on::*;

#[cfg(not(feature = "testing"))]
pub(crate) use off::*;

impl<S> std::fmt::Debug for Hook<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hook")
    }
}

impl std::fmt::Debug for OnceHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnceHook")
    }
}

impl<R> std::fmt::Debug for Hold<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hold")
    }
}
