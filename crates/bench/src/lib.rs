//! Benchmarks of flashfs that reproduce the papers' experiments on simulated flash.
//!
//! - [`workload`]: deterministic generators of the papers' access patterns.
//! - [`fswork`]: file-system workloads, their model, and the check of what survives a
//!   power cut.
//! - [`fs_cuts`]: a file-system workload run under power cuts against that model.
//! - [`kawaguchi`]: Kawaguchi et al. 1995 §3 on the block device (FTL): sequential, random
//!   and hot-and-cold overwrites at several utilizations, every cleaning policy, with and
//!   without a separate cleaning head, and 4 KB reads; measured in device time.
//! - [`report`]: the results as a table in the paper's form, or as JSON lines.
//! - [`plot`]: the results as PNG and SVG figures.
//! - [`scale`]: directory lookups and random file reads as a directory and a file grow
//!   on the native file system (cold cache, device time).
//! - [`tffs`]: Gal & Toledo 2005 §5 on the native file system: the fax, phone and
//!   event-recorder workloads, capacity, endurance, erasures per unit of user data,
//!   reclamation efficiency and heap, on the paper's NOR devices and configurations.
//! - [`peers`]: littlefs beside flashfs on the very same simulated part, with littlefs's
//!   own benchmark workloads.
//! - [`mount`]: mount time, page reads and heap from the checkpoint beside the full scan,
//!   as the volume fills and the device grows (Ryu & Park, FRASH).
//! - [`small_writes`]: writes much smaller than a block on the native file system, appended
//!   or at random places, synced at the end, every 4 KiB or after each write, with and
//!   without write-back of partial blocks: bytes programmed per user byte, programs per
//!   sync, device time, latency and heap.
//! - [`frash`]: FRASH's metadata on FRAM beside NAND against the NAND alone (mounted by a
//!   scan or from the checkpoint): mount time against partition size and fill, file
//!   create, delete, read and write, heap and NVRAM use.
//! - [`heap`]: a counting global allocator, for the heap figures.
//! - [`torture`]: power cuts at device operations of block-device workloads, checked after
//!   every remount against a model of what may survive.
//!
//! ```no_run
//! use flashfs_bench::kawaguchi::{run_kawaguchi, KawaguchiOptions};
//! let opts = KawaguchiOptions::quick();
//! let rows = run_kawaguchi(&opts, &mut |_, _, _| {})?;
//! print!("{}", flashfs_bench::report::table(&opts, &rows)?);
//! # Ok::<(), flashfs_bench::BenchError>(())
//! ```
#![deny(missing_docs)]

mod error;
pub mod flexfs;
pub mod frash;
pub mod fs_cuts;
pub mod fswork;
pub mod heap;
pub mod integrity;
pub mod kawaguchi;
pub mod mount;
pub mod peers;
pub mod plot;
pub mod report;
pub mod scale;
pub mod small_writes;
pub mod tffs;
pub mod torture;
mod workers;
pub mod workload;

pub use error::{BenchError, Result};
pub use kawaguchi::{run_kawaguchi, KawaguchiOptions, Row};
