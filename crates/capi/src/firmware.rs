//! What a firmware build of the C library brings along (`--no-default-features --features
//! firmware`, with `panic = "abort"`): its heap is the firmware's C heap (`malloc`, `free`,
//! `aligned_alloc`, which newlib and picolibc provide), and a panic calls `abort`.

use core::alloc::{GlobalAlloc, Layout};
use core::ffi::c_void;

extern "C" {
    fn malloc(size: usize) -> *mut c_void;
    fn aligned_alloc(align: usize, size: usize) -> *mut c_void;
    fn free(ptr: *mut c_void);
    fn abort() -> !;
}

/// Alignment every `malloc` gives on the 32-bit targets (two words).
const MALLOC_ALIGN: usize = 8;

/// The C library's heap as Rust's.
struct CHeap;

// SAFETY: `malloc` and `aligned_alloc` return blocks of at least the size asked for, aligned
// as asked (malloc to `MALLOC_ALIGN`), or null; `free` takes what they returned.
unsafe impl GlobalAlloc for CHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= MALLOC_ALIGN {
            malloc(layout.size()).cast()
        } else {
            // C11: the size must be a multiple of the alignment.
            let size = layout.size().next_multiple_of(layout.align());
            aligned_alloc(layout.align(), size).cast()
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _: Layout) {
        free(ptr.cast());
    }
}

#[global_allocator]
static HEAP: CHeap = CHeap;

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `abort` takes nothing and does not return.
    unsafe { abort() }
}
