//! Idle time for a mounted volume. The log does its background work — cleaning ahead of
//! need and, on MLC NAND under regions `bm`, `da` or `la`, moving data from SLC to MLC
//! segments once the device has been idle for [`MIGRATION_WAIT`] — only in the idle time
//! it is given ([`flashfs::Fs::idle`], [`flashfs::Ftl::idle`]). FUSE has no idle callback,
//! so a thread of the mount gives it: every [`SLICE`] it looks whether a request came
//! since its last look, and if none did, it gives the volume the wall-clock time since then
//! (at most a slice) as idle device time. Slices with nothing done on the device between
//! them make one idle window for the log, so migration starts once the quiet adds up to
//! [`MIGRATION_WAIT`].
//!
//! The volume's state is behind one lock ([`Shared`]) that every request takes and counts:
//! a request arriving while a slice is worked waits for that slice at most, and the next
//! look sees it and gives nothing, so the quiet starts again from there. An error from the
//! work ends the idle time for the rest of the mount (the requests then meet the volume's
//! trouble themselves); the mount goes on serving.
//!
//! [`MIGRATION_WAIT`]: flashfs::log::region::MIGRATION_WAIT

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the mount looks whether the volume is quiet, and the most idle time one look
/// gives: the longest a request waits for background work.
pub const SLICE: Duration = Duration::from_millis(200);

/// A volume that takes idle time.
pub trait Idle {
    /// Uses `d` of idle device time for background work; returns the device time the work
    /// took.
    fn idle(&mut self, d: Duration) -> flashfs::Result<Duration>;
}

/// A volume's state as the session's requests and the idle thread share it: one lock, and
/// a count of the requests that took it.
pub struct Shared<S> {
    inner: Arc<Inner<S>>,
}

struct Inner<S> {
    state: Mutex<S>,
    requests: AtomicU64,
}

impl<S> Clone for Shared<S> {
    fn clone(&self) -> Self {
        Shared {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<S> Shared<S> {
    /// Shares `state`.
    pub fn new(state: S) -> Self {
        Shared {
            inner: Arc::new(Inner {
                state: Mutex::new(state),
                requests: AtomicU64::new(0),
            }),
        }
    }

    /// The state, for a request: counted before the lock is taken, so that the idle thread
    /// gives no more time once the slice it may be working is done.
    pub fn lock(&self) -> MutexGuard<'_, S> {
        self.inner.requests.fetch_add(1, Ordering::SeqCst);
        self.lock_uncounted()
    }

    /// The state, once nothing else shares it (the session and the idle thread have ended).
    pub fn into_inner(self) -> Option<S> {
        let inner = Arc::try_unwrap(self.inner).ok()?;
        Some(
            inner
                .state
                .into_inner()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    /// The state, for the idle thread.
    fn lock_uncounted(&self) -> MutexGuard<'_, S> {
        // A panic while holding the lock leaves at worst an uncommitted working version or
        // a device in the state of a power cut, which the volume survives: keep serving.
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Requests that took the lock so far.
    fn requests(&self) -> u64 {
        self.inner.requests.load(Ordering::SeqCst)
    }
}

/// What the idle thread decides at each look, apart from the clock and the lock: the idle
/// time to give, if the volume was quiet since the last look.
#[derive(Debug, Clone, Copy)]
struct Pacer {
    /// When the last look was.
    last: Instant,
    /// Requests counted at the last look.
    seen: u64,
}

impl Pacer {
    fn new(now: Instant, requests: u64) -> Self {
        Pacer {
            last: now,
            seen: requests,
        }
    }

    /// A look at `now`, with `requests` counted so far: the time since the last look, at
    /// most a [`SLICE`], if no request came in between.
    fn look(&mut self, now: Instant, requests: u64) -> Option<Duration> {
        let since = now.saturating_duration_since(self.last);
        self.last = now;
        if requests != self.seen {
            self.seen = requests;
            return None;
        }
        Some(since.min(SLICE)).filter(|d| !d.is_zero())
    }
}

/// One look, under the volume's lock (the time read once the lock is held, so that a
/// request holding it meanwhile is seen): gives the idle time due, if any.
fn step<S: Idle>(
    shared: &Shared<S>,
    pacer: &mut Pacer,
    now: &mut dyn FnMut() -> Instant,
) -> flashfs::Result<()> {
    let mut state = shared.lock_uncounted();
    if let Some(d) = pacer.look(now(), shared.requests()) {
        state.idle(d)?;
    }
    Ok(())
}

/// Looks each time `wait` says to go on (it returns `false` once the mount ends), with the
/// time from `now`. Returns the error that ended the idle time, if one did.
fn run<S: Idle>(
    shared: &Shared<S>,
    wait: &mut dyn FnMut() -> bool,
    now: &mut dyn FnMut() -> Instant,
) -> Option<flashfs::Error> {
    let mut pacer = Pacer::new(now(), shared.requests());
    while wait() {
        if let Err(e) = step(shared, &mut pacer, now) {
            return Some(e);
        }
    }
    None
}

/// The thread that gives a volume its idle time while the session serves.
pub struct IdleThread {
    stop: mpsc::Sender<()>,
    handle: JoinHandle<()>,
}

impl IdleThread {
    /// Starts giving `shared` idle time. An error from the work is reported once on stderr
    /// (the log file of a mount in the background) and ends the idle time.
    pub fn start<S: Idle + Send + 'static>(shared: Shared<S>) -> std::io::Result<Self> {
        let (stop, stopped) = mpsc::channel::<()>();
        let handle = std::thread::Builder::new()
            .name("idle".into())
            .spawn(move || {
                let mut wait =
                    || matches!(stopped.recv_timeout(SLICE), Err(RecvTimeoutError::Timeout));
                if let Some(e) = run(&shared, &mut wait, &mut Instant::now) {
                    eprintln!(
                        "flashfs: background work in idle time failed ({e}); \
                         none until the next mount"
                    );
                }
            })?;
        Ok(IdleThread { stop, handle })
    }

    /// Stops the thread, once the slice it may be working is done.
    pub fn stop(self) {
        let _ = self.stop.send(());
        // A panic in the thread has been reported on stderr already.
        let _ = self.handle.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A volume that records the idle time it is given, and fails when told to.
    #[derive(Default)]
    struct Recorder {
        given: Vec<Duration>,
        fail: bool,
    }

    impl Idle for Recorder {
        fn idle(&mut self, d: Duration) -> flashfs::Result<Duration> {
            self.given.push(d);
            if self.fail {
                return Err(flashfs::Error::Io);
            }
            Ok(d / 2)
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn quiet_time_is_given_as_it_passes_and_a_request_stops_it() {
        let t0 = Instant::now();
        let mut p = Pacer::new(t0, 0);
        assert_eq!(p.look(t0 + ms(200), 0), Some(ms(200)));
        assert_eq!(p.look(t0 + ms(350), 0), Some(ms(150)));
        // A request since the last look: nothing, and the quiet starts again at this look.
        assert_eq!(p.look(t0 + ms(550), 1), None);
        assert_eq!(p.look(t0 + ms(750), 1), Some(ms(200)));
        assert_eq!(p.look(t0 + ms(760), 3), None);
        assert_eq!(p.look(t0 + ms(760), 3), None, "no time has passed");
        // Held up (a slow slice, a suspended host): at most a slice at a time.
        assert_eq!(p.look(t0 + ms(5000), 3), Some(SLICE));
        assert_eq!(p.look(t0 + ms(5100), 3), Some(ms(100)));
    }

    #[test]
    fn the_thread_gives_quiet_slices_and_nothing_across_requests() {
        let shared = Shared::new(Recorder::default());
        let t0 = Instant::now();
        let mut t = t0;
        let mut pacer = Pacer::new(t0, shared.requests());
        let mut look_at = |after: u64, pacer: &mut Pacer| {
            t += ms(after);
            let at = t;
            step(&shared, pacer, &mut || at).unwrap();
        };
        look_at(200, &mut pacer);
        look_at(200, &mut pacer);
        drop(shared.lock());
        look_at(200, &mut pacer);
        look_at(210, &mut pacer);
        assert_eq!(shared.lock().given, vec![ms(200), ms(200), ms(200)]);
        // The lock the assertion took was a request too.
        look_at(200, &mut pacer);
        assert_eq!(shared.lock_uncounted().given.len(), 3);
    }

    #[test]
    fn an_error_ends_the_idle_time_after_one_try() {
        let shared = Shared::new(Recorder {
            fail: true,
            ..Recorder::default()
        });
        let t0 = Instant::now();
        let (mut looks, mut t) = (0, t0);
        let mut wait = || {
            looks += 1;
            looks <= 10
        };
        let mut now = || {
            t += ms(200);
            t
        };
        let e = run(&shared, &mut wait, &mut now);
        assert!(matches!(e, Some(flashfs::Error::Io)), "{e:?}");
        assert_eq!(looks, 1, "it stopped looking");
        assert_eq!(shared.lock_uncounted().given, vec![ms(200)]);
    }

    #[test]
    fn the_thread_ends_when_told_and_gives_the_state_back() {
        let shared = Shared::new(Recorder::default());
        let thread = IdleThread::start(shared.clone()).unwrap();
        assert!(
            shared.clone().into_inner().is_none(),
            "the thread shares it"
        );
        thread.stop();
        assert!(shared.into_inner().is_some());
    }
}
