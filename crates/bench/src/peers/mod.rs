//! Peers: littlefs beside flashfs on the very same simulated part, with the workloads of
//! littlefs's own benchmarks, both measured by the simulator's clock and counters.
//!
//! - [`littlefs`]: the driver that gives littlefs read, prog, erase and sync callbacks on a
//!   simulator, one storage type per preset.

pub mod littlefs;
