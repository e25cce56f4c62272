//! flashfs: a file system for raw flash.
//!
//! Layers, bottom up: [`media`] views a flash device as segments of slots; [`log`] is the
//! log-structured store with its cleaner and wear leveling; [`ftl`] is a block device on the
//! log, for conventional file systems; [`index`] holds copy-on-write B+trees; [`fs`] is the
//! native file system, its index and data on the log's sectors.
#![cfg_attr(not(feature = "std"), no_std)]
#![deny(missing_docs)]

extern crate alloc;

mod error;
pub mod fs;
pub mod ftl;
pub mod index;
pub mod log;
pub mod media;
#[cfg(feature = "std")]
pub mod stream;

pub use error::{Damage, Error, Result};
pub use fs::{Fs, FsConfig};
pub use ftl::{BlockDevice, Ftl, FtlConfig};
pub use log::{
    Head, Lifetime, Liveness, Log, LogConfig, LogStats, Owner, PageSource, Regions, Shares,
    SlotAddr,
};
pub use media::{NandSegments, NorSegments, SegGeometry, Segments};
