//! Heap accounting: a global allocator that counts, per thread, the bytes in use and their
//! high-water mark.
//!
//! [`CountingAlloc`] wraps the system allocator. A program installs it with
//! `#[global_allocator]` (the `flashfs` binary does); without it every figure here reads 0
//! and [`CountingAlloc::installed`] is false. A [`HeapMeter`] started on a thread measures
//! the most heap that thread held above the level at its start: run one piece of code on
//! its own thread (or alone on the current one) and the meter gives that code's heap
//! high-water mark. Code that must not count — a simulated device's own storage, say — runs
//! inside [`uncounted`]: what it allocates and frees there is invisible to every meter.
//!
//! ```no_run
//! use flashfs_bench::heap::{CountingAlloc, HeapMeter};
//! #[global_allocator]
//! static ALLOC: CountingAlloc = CountingAlloc;
//!
//! let meter = HeapMeter::start();
//! let v = vec![0u8; 4096];
//! assert!(meter.peak() >= 4096);
//! drop(v);
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The system allocator, counting. See the module documentation.
#[derive(Debug, Default, Clone, Copy)]
pub struct CountingAlloc;

static INSTALLED: AtomicBool = AtomicBool::new(false);
/// Meters running, on any thread: without one nothing is counted, so that a program that
/// installs the allocator pays two relaxed loads per allocation and no more.
static METERS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Bytes this thread allocated less what it freed (counted allocations only).
    static THREAD_CURRENT: Cell<i64> = const { Cell::new(0) };
    /// Highest `THREAD_CURRENT` since the last reset.
    static THREAD_PEAK: Cell<i64> = const { Cell::new(0) };
    /// Nesting depth of [`uncounted`] on this thread.
    static PAUSED: Cell<u32> = const { Cell::new(0) };
}

/// Counts `delta` bytes allocated (negative: freed) on this thread, unless paused. Only
/// thread-local state is written (no shared counter for threads to contend on).
fn note(delta: i64) {
    if !INSTALLED.load(Ordering::Relaxed) {
        INSTALLED.store(true, Ordering::Relaxed);
    }
    if METERS.load(Ordering::Relaxed) == 0 {
        return;
    }
    // `try_with`: during a thread's teardown its locals may be gone; that memory is not
    // measured anyway.
    if PAUSED.try_with(Cell::get).unwrap_or(0) > 0 {
        return;
    }
    let _ = THREAD_CURRENT.try_with(|c| {
        let v = c.get() + delta;
        c.set(v);
        let _ = THREAD_PEAK.try_with(|p| {
            if v > p.get() {
                p.set(v);
            }
        });
    });
}

// SAFETY: every call is passed to `System` unchanged; the counting only reads the layout.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is `System`'s.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            note(layout.size() as i64);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            note(layout.size() as i64);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with this layout (every allocation goes there).
        unsafe { System.dealloc(ptr, layout) };
        note(-(layout.size() as i64));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as `dealloc`, and `new_size` is the caller's valid size.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            note(new_size as i64 - layout.size() as i64);
        }
        p
    }
}

impl CountingAlloc {
    /// Whether the counting allocator is the process's allocator (it has counted anything).
    pub fn installed() -> bool {
        INSTALLED.load(Ordering::Relaxed)
    }

    /// Counted bytes this thread allocated and has not freed, while meters ran (memory freed
    /// by another thread than the one that allocated it moves between the two threads'
    /// counts).
    pub fn thread_current() -> i64 {
        THREAD_CURRENT.with(Cell::get)
    }
}

/// Runs `f` without counting what it allocates or frees, on this thread.
pub fn uncounted<R>(f: impl FnOnce() -> R) -> R {
    struct Resume;
    impl Drop for Resume {
        fn drop(&mut self) {
            PAUSED.with(|p| p.set(p.get().saturating_sub(1)));
        }
    }
    PAUSED.with(|p| p.set(p.get() + 1));
    let _resume = Resume;
    f()
}

/// The heap high-water mark of this thread from a starting point on (it stays on the thread
/// that started it).
#[derive(Debug)]
pub struct HeapMeter {
    base: i64,
    _thread: PhantomData<*const ()>,
}

impl HeapMeter {
    /// Starts measuring on this thread: the level now is the baseline, and the thread's
    /// high-water mark restarts from it. One meter per thread at a time.
    pub fn start() -> HeapMeter {
        METERS.fetch_add(1, Ordering::Relaxed);
        let base = CountingAlloc::thread_current();
        THREAD_PEAK.with(|p| p.set(base));
        HeapMeter {
            base,
            _thread: PhantomData,
        }
    }

    /// Most bytes this thread held above the baseline at once since [`HeapMeter::start`]
    /// (0 when the counting allocator is not installed).
    pub fn peak(&self) -> u64 {
        (THREAD_PEAK.with(Cell::get) - self.base).max(0) as u64
    }

    /// Bytes this thread holds above the baseline now (negative if it freed memory it held
    /// before the start).
    pub fn current(&self) -> i64 {
        CountingAlloc::thread_current() - self.base
    }
}

impl Drop for HeapMeter {
    fn drop(&mut self) {
        METERS.fetch_sub(1, Ordering::Relaxed);
    }
}
