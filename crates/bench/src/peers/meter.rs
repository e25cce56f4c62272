//! Measuring a phase: device time, the simulator's counters and the latency of each
//! operation, read from the simulator under either system.

use std::time::Duration;

use flash::stats::{Histogram, Stats};
use flash::{DeviceClock, NandSim, NorSim, NvramNor, NvramSim, Simulated};
use flashfs::{Fs, NandSegments, NorSegments, Segments};
use serde::Serialize;

use super::littlefs::Shared;
use super::plan::Workload;
use crate::tffs::device::Uncounted;

/// The simulator's clock and counters, wherever the simulator is held.
pub trait Probe {
    /// Device time now.
    fn now(&self) -> Duration;
    /// The simulator's counters now.
    fn stats(&self) -> Stats;
}

impl<S: Simulated + DeviceClock> Probe for Shared<S> {
    fn now(&self) -> Duration {
        self.borrow().now()
    }

    fn stats(&self) -> Stats {
        self.borrow().stats().clone()
    }
}

/// Segments over a simulator.
pub trait SimSegments: Segments {
    /// The simulator.
    type Sim: Simulated + DeviceClock;
    /// The simulator underneath.
    fn sim(&self) -> &Self::Sim;
}

impl SimSegments for NorSegments<Uncounted<NorSim>> {
    type Sim = NorSim;
    fn sim(&self) -> &NorSim {
        self.flash().inner()
    }
}

impl SimSegments for NorSegments<Uncounted<NvramNor<NvramSim>>> {
    type Sim = NvramSim;
    fn sim(&self) -> &NvramSim {
        self.flash().inner().nvram()
    }
}

impl SimSegments for NandSegments<Uncounted<NandSim>> {
    type Sim = NandSim;
    fn sim(&self) -> &NandSim {
        self.flash().inner()
    }
}

impl<D: SimSegments> Probe for Fs<D> {
    fn now(&self) -> Duration {
        self.ftl().log().device().sim().now()
    }

    fn stats(&self) -> Stats {
        self.ftl().log().device().sim().stats().clone()
    }
}

/// One measured phase of one system on one device.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeerRow {
    /// Device preset.
    pub device: String,
    /// The phase.
    pub workload: Workload,
    /// `flashfs` or `littlefs`.
    pub system: &'static str,
    /// flashfs: its configuration, `default` ([`flashfs::FsConfig::default`]) or
    /// `small-ram` ([`flashfs::FsConfig::small_ram`]), access times off in both. littlefs:
    /// `default`, its one configuration per part ([`super::LfsGeometry`]).
    pub config: &'static str,
    /// Whether every write was followed by a sync (fsync) in this run.
    pub sync: bool,
    /// User bytes written or read in the phase.
    pub user_bytes: u64,
    /// Operations timed (writes, reads, files, or 1 for a mount).
    pub ops: u64,
    /// Device time of the whole phase, milliseconds.
    pub device_ms: f64,
    /// User bytes per second of device time (0 for a mount).
    pub throughput_bps: f64,
    /// Bytes programmed per user byte (0 when no user bytes).
    pub prog_per_user_byte: f64,
    /// Bytes programmed in the phase.
    pub bytes_programmed: u64,
    /// Erases in the phase.
    pub erases: u64,
    /// Device reads in the phase.
    pub reads: u64,
    /// Device time of the mount (mount phases only), milliseconds.
    pub mount_ms: Option<f64>,
    /// Median device time per operation, microseconds.
    pub p50_us: f64,
    /// 99th percentile, microseconds.
    pub p99_us: f64,
    /// 99.9th percentile, microseconds.
    pub p999_us: f64,
    /// Slowest operation, microseconds.
    pub max_us: f64,
    /// flashfs: the heap high-water mark from the format to the end of the phase (0 where
    /// the counting allocator is not installed). littlefs: its buffers (the file system's
    /// caches and lookahead, and one open file's cache), which it holds outside the heap.
    pub heap_bytes: u64,
    /// Space the volume uses at the end of the phase, bytes, as the system reports it.
    pub used_bytes: u64,
    /// The distribution of device time per operation: (microseconds, share of operations
    /// that took at most that), at [`CDF_PERCENTILES`] (for the plots; not in the JSON).
    #[serde(skip)]
    pub latency_cdf: Vec<(f64, f64)>,
}

/// The percentiles a row's latency distribution is sampled at.
pub const CDF_PERCENTILES: [f64; 16] = [
    0.0, 1.0, 5.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99, 99.999,
    100.0,
];

/// Which system on which device, in which run.
#[derive(Debug, Clone)]
pub struct RowKey {
    /// Device preset.
    pub device: String,
    /// `flashfs` or `littlefs`.
    pub system: &'static str,
    /// The system's configuration (see [`PeerRow::config`]).
    pub config: &'static str,
    /// Sync after every write.
    pub sync: bool,
}

/// A phase being measured.
#[derive(Debug)]
pub struct Phase {
    workload: Workload,
    t0: Duration,
    s0: Stats,
    latency: Histogram,
    ops: u64,
    user_bytes: u64,
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

impl Phase {
    /// Starts measuring `workload` now.
    pub fn start(workload: Workload, p: &impl Probe) -> Phase {
        Phase {
            workload,
            t0: p.now(),
            s0: p.stats(),
            latency: Histogram::default(),
            ops: 0,
            user_bytes: 0,
        }
    }

    /// Starts measuring `workload` from an earlier reading of the clock and counters (for a
    /// mount, before the file system that gives the probe exists).
    pub fn start_at(workload: Workload, t0: Duration, s0: Stats) -> Phase {
        Phase {
            workload,
            t0,
            s0,
            latency: Histogram::default(),
            ops: 0,
            user_bytes: 0,
        }
    }

    /// Counts one operation of `bytes` user bytes that started at device time `since`.
    pub fn op(&mut self, since: Duration, p: &impl Probe, bytes: u64) {
        self.latency.record(p.now().saturating_sub(since));
        self.ops += 1;
        self.user_bytes += bytes;
    }

    /// The row: what the phase cost from its start to now.
    pub fn finish(self, p: &impl Probe, key: &RowKey, heap_bytes: u64, used_bytes: u64) -> PeerRow {
        let elapsed = p.now().saturating_sub(self.t0);
        let work = p.stats().since(&self.s0);
        let secs = elapsed.as_secs_f64();
        let mount = matches!(self.workload, Workload::Mount | Workload::MountFirstWrite);
        let bytes = self.user_bytes;
        PeerRow {
            device: key.device.clone(),
            workload: self.workload,
            system: key.system,
            config: key.config,
            sync: key.sync,
            user_bytes: bytes,
            ops: self.ops,
            device_ms: secs * 1e3,
            throughput_bps: if bytes > 0 && secs > 0.0 {
                bytes as f64 / secs
            } else {
                0.0
            },
            prog_per_user_byte: if bytes > 0 {
                work.bytes_programmed as f64 / bytes as f64
            } else {
                0.0
            },
            bytes_programmed: work.bytes_programmed,
            erases: work.erases,
            reads: work.reads,
            mount_ms: mount.then_some(secs * 1e3),
            p50_us: us(self.latency.percentile(50.0)),
            p99_us: us(self.latency.percentile(99.0)),
            p999_us: us(self.latency.percentile(99.9)),
            max_us: us(self.latency.max()),
            heap_bytes,
            used_bytes,
            latency_cdf: CDF_PERCENTILES
                .iter()
                .map(|&q| (us(self.latency.percentile(q)), q / 100.0))
                .collect(),
        }
    }
}
