//! flashfs's C API (`crates/capi`, header `crates/capi/include/flashfs.h`) as a static
//! library for microcontrollers, built with the firmware's size profile. It allocates with
//! the firmware's `malloc`/`aligned_alloc`/`free` and calls `abort` on a panic.
#![no_std]

pub use flashfs_c::*;
