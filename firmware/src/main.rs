//! An example firmware on flashfs: a Cortex-M program that keeps its files on an external
//! NOR part, built to measure what the file system costs in code and RAM
//! (`cargo xtask size`, docs/firmware.md).
//!
//! Three builds of one program: by default the full use of the file system (mount, or
//! format a blank part, then files, directories, records, a transaction, the cleaner,
//! unmount); with the feature `read-only` a mount and reads only; with `baseline` the same
//! board without the file system (the driver used directly, and the heap), whose size the
//! others' are compared with.
#![no_std]
#![no_main]
#![deny(missing_docs)]

extern crate alloc;

mod app;
mod nor;

use core::mem::MaybeUninit;

use cortex_m_rt::entry;
use embedded_alloc::LlffHeap;
use panic_halt as _;

/// Bytes of RAM given to the heap (the file system allocates its caches and buffers there).
pub const HEAP_BYTES: usize = 64 * 1024;

/// The heap's memory. Unmangled so that `cargo xtask size` finds it in the ELF and reports
/// it apart from the rest of the static RAM.
#[no_mangle]
static mut FLASHFS_HEAP: [MaybeUninit<u8>; HEAP_BYTES] = [MaybeUninit::uninit(); HEAP_BYTES];

#[global_allocator]
static ALLOCATOR: LlffHeap = LlffHeap::empty();

#[entry]
fn main() -> ! {
    // SAFETY: called once, before any allocation; the array is used by nothing else.
    unsafe { ALLOCATOR.init(&raw mut FLASHFS_HEAP as usize, HEAP_BYTES) }
    let code = match app::run() {
        Ok(()) => 0,
        Err(e) => app::error_code(&e),
    };
    nor::report(code);
    loop {
        cortex_m::asm::wfi();
    }
}
