//! flashfs for C firmware.
//!
//! The C caller describes its flash in a `flashfs_config` (geometry and read, program and
//! erase callbacks, as littlefs users are used to), formats and mounts it, and works with
//! files through handles it allocates itself (`flashfs_file_t`, `flashfs_dir_t`): the
//! library's heap holds the mounted volume, nothing per open file. Every function returns 0
//! or a count on success and a negative errno (`FLASHFS_ERR_*`) on failure; none panics
//! across the boundary (on hosts a panic inside is caught, returned as
//! `FLASHFS_ERR_IO`, and the volume refuses all but `flashfs_unmount` after it).
//!
//! Pointer arguments are null (refused with `FLASHFS_ERR_INVAL`) or valid for the call; a
//! volume's handle is used by one thread at a time. Operations run inside the volume's
//! current transaction, if one was begun (`flashfs_tx_begin`).
//!
//! The header, `include/flashfs.h`, is generated from this crate by cbindgen.
//!
//! ```c
//! flashfs_t *fs;
//! flashfs_file_t f;
//! flashfs_format(&cfg);
//! flashfs_mount(&cfg, &fs);
//! flashfs_file_open(fs, &f, "/log", FLASHFS_O_WRONLY | FLASHFS_O_CREAT | FLASHFS_O_APPEND);
//! flashfs_file_write(fs, &f, "hello", 5);
//! flashfs_file_close(fs, &f);            /* close syncs */
//! flashfs_unmount(fs);
//! ```
#![cfg_attr(not(feature = "std"), no_std)]
#![deny(missing_docs)]
// The C names are the API.
#![allow(non_camel_case_types)]
// The entry points are for C, where nothing is `unsafe`: the pointer contract (null or
// valid for the call; a handle from `flashfs_mount`, used by one thread at a time) is the
// API's, stated here once, and every entry point checks for null.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

extern crate alloc;

mod config;
mod device;
mod dir;
mod error;
mod file;
#[cfg(all(feature = "firmware", not(feature = "std")))]
mod firmware;
mod record;
mod txn;
mod volume;

pub use config::*;
pub use dir::*;
pub use error::*;
pub use file::*;
pub use record::*;
pub use txn::*;
pub use volume::*;
