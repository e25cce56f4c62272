//! Peers: littlefs beside flashfs on the very same simulated part, with the workloads of
//! littlefs's own benchmarks, both measured by the simulator's clock and counters.
//!
//! Each device runs twice (without and with a sync after every write); in each run a fresh
//! part is simulated for each system, which then goes through every [`Workload`] in order:
//! 64-byte writes to one file, random 64-byte writes inside a 32 KiB file, many small
//! files, the reads of the same, a mount of what they left, and a mount followed by one
//! durable write. Every read is checked against what was written.
//!
//! - [`littlefs`]: the driver that gives littlefs read, prog, erase and sync callbacks on a
//!   simulator, one storage type per preset.
//! - [`plan`]: the workloads as concrete operations, the same for both systems.
//! - [`meter`]: a phase's device time, counters and per-operation latency, and its row.
//! - [`littlefs_run`], [`flashfs_run`]: the phases on each system.
//! - [`table`]: the side-by-side table.
//! - [`plot`]: throughput and write-latency plots per device.
//! - [`cuts`]: littlefs under the torture's power cuts (clean and torn).
//! - [`half`]: mount and first write on a half-full part, beside the floor.
//!
//! On the FRAM part flashfs's native file system is laid out as on reprogrammable NOR
//! ([`flash::NvramNor`]), littlefs as its benchmarks configure it for FRAM.

pub mod cuts;
pub mod flashfs_run;
pub mod half;
pub mod littlefs;
pub mod littlefs_run;
pub mod meter;
pub mod plan;
pub mod plot;
pub mod table;

use flash::{DeviceSpec, ImageMeta, NandSim, NorSim, NvramNor, NvramSim};
use flashfs::{NandSegments, NorSegments};

use crate::error::{BenchError, Context, Result};
use crate::tffs::device::{Uncounted, NOR_BLOCK_BYTES};
pub use flashfs_run::FlashfsConfig;
pub use littlefs::LfsGeometry;
use littlefs::{shared, Cy15b102q, LfsDevice, Nand1g, W25n01gv, W25q64jv};
pub use meter::PeerRow;
pub use plan::{Plan, Workload};

/// A part both systems run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerDevice {
    /// Winbond W25Q64JV SPI NOR, 8 MiB.
    W25q64jv,
    /// Winbond W25N01GV SPI NAND, 128 MiB.
    W25n01gv,
    /// Cypress CY15B102Q SPI FRAM, 256 KiB.
    Cy15b102q,
    /// 1 GiB SLC NAND, for scale.
    Nand1g,
}

impl PeerDevice {
    /// The three parts of littlefs's benchmarks.
    pub const DEFAULT: [PeerDevice; 3] = [
        PeerDevice::W25q64jv,
        PeerDevice::W25n01gv,
        PeerDevice::Cy15b102q,
    ];

    /// Every device.
    pub const ALL: [PeerDevice; 4] = [
        PeerDevice::W25q64jv,
        PeerDevice::W25n01gv,
        PeerDevice::Cy15b102q,
        PeerDevice::Nand1g,
    ];

    /// The preset's name.
    pub fn preset(self) -> &'static str {
        match self {
            PeerDevice::W25q64jv => W25q64jv::PRESET,
            PeerDevice::W25n01gv => W25n01gv::PRESET,
            PeerDevice::Cy15b102q => Cy15b102q::PRESET,
            PeerDevice::Nand1g => Nand1g::PRESET,
        }
    }

    /// Parses a preset name.
    pub fn from_name(s: &str) -> Option<PeerDevice> {
        PeerDevice::ALL.into_iter().find(|d| d.preset() == s)
    }

    /// littlefs's configuration on this part.
    pub fn littlefs_geometry(self) -> LfsGeometry {
        match self {
            PeerDevice::W25q64jv => W25q64jv::geometry(),
            PeerDevice::W25n01gv => W25n01gv::geometry(),
            PeerDevice::Cy15b102q => Cy15b102q::geometry(),
            PeerDevice::Nand1g => Nand1g::geometry(),
        }
    }

    /// Bytes of littlefs's buffers on this part.
    pub fn littlefs_buffers(self) -> u64 {
        match self {
            PeerDevice::W25q64jv => littlefs_run::buffer_bytes::<W25q64jv>(),
            PeerDevice::W25n01gv => littlefs_run::buffer_bytes::<W25n01gv>(),
            PeerDevice::Cy15b102q => littlefs_run::buffer_bytes::<Cy15b102q>(),
            PeerDevice::Nand1g => littlefs_run::buffer_bytes::<Nand1g>(),
        }
    }

    fn spec(self) -> Result<DeviceSpec> {
        flash::preset::lookup(self.preset())
            .map(|p| p.spec)
            .context(|| format!("preset {}", self.preset()))
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct PeersOptions {
    /// The devices.
    pub devices: Vec<PeerDevice>,
    /// Size of the linear file (at most an eighth of the device).
    pub linear_bytes: u64,
    /// Size of the file of the random writes.
    pub random_file: u64,
    /// Random writes.
    pub random_writes: u64,
    /// Small files (at most as many as 512-byte blocks make an eighth of the device).
    pub small_files: u32,
    /// Bytes per small file.
    pub small_bytes: usize,
    /// Bytes of the linear file read in 16-byte reads (flashfs-hostile).
    pub tiny_read_bytes: u64,
    /// 64-byte overwrites at the start of the linear file (littlefs-hostile).
    pub head_overwrites: u64,
    /// Runs without a sync per write (false) and with (true).
    pub syncs: Vec<bool>,
    /// Seed of the random offsets and of the simulated parts.
    pub seed: u64,
    /// flashfs's configurations, each run beside littlefs (both by default: the default's
    /// large caches and the microcontroller profile, whose RAM is the one to set beside
    /// littlefs's buffers).
    pub flashfs_configs: Vec<FlashfsConfig>,
}

impl Default for PeersOptions {
    fn default() -> Self {
        PeersOptions {
            devices: PeerDevice::DEFAULT.to_vec(),
            linear_bytes: 1 << 20,
            random_file: 32 << 10,
            random_writes: 2048,
            small_files: 128,
            small_bytes: 256,
            tiny_read_bytes: 64 << 10,
            head_overwrites: 16,
            syncs: vec![false, true],
            seed: 2019,
            flashfs_configs: FlashfsConfig::ALL.to_vec(),
        }
    }
}

impl PeersOptions {
    /// A short run (seconds): 16 KiB linear file, 32 random writes, 8 small files, 1 KiB of
    /// tiny reads, 2 head overwrites.
    pub fn quick() -> Self {
        PeersOptions {
            linear_bytes: 16 << 10,
            random_writes: 32,
            small_files: 8,
            tiny_read_bytes: 1 << 10,
            head_overwrites: 2,
            ..PeersOptions::default()
        }
    }

    /// The plan on a device of `capacity` bytes.
    pub fn plan(&self, capacity: u64, sync: bool) -> Plan {
        let linear = self.linear_bytes.min(capacity / 8) / plan::CHUNK as u64 * plan::CHUNK as u64;
        Plan {
            linear_bytes: linear,
            random_file: self.random_file,
            random_offsets: Plan::offsets(self.random_file, self.random_writes, self.seed),
            // A block each at least (512 bytes on NOR and NVRAM): on the 256 KiB FRAM
            // 128 of them and their metadata would fill flashfs's room beside the other
            // files; an eighth of the part, as for the linear file.
            small_files: self
                .small_files
                .min(u32::try_from(capacity / 8 / 512).unwrap_or(u32::MAX))
                .max(1),
            small_bytes: self.small_bytes,
            tiny_read_bytes: self.tiny_read_bytes.min(linear) / plan::TINY_READ as u64
                * plan::TINY_READ as u64,
            head_overwrites: self.head_overwrites,
            sync,
        }
    }

    fn check(&self) -> Result<()> {
        let chunk = plan::CHUNK as u64;
        if self.random_file < chunk || !self.random_file.is_multiple_of(chunk) {
            return Err(BenchError::InvalidOptions(format!(
                "the random file must be a positive multiple of {chunk} bytes"
            )));
        }
        if self.devices.is_empty() || self.syncs.is_empty() || self.flashfs_configs.is_empty() {
            return Err(BenchError::InvalidOptions("nothing to run".into()));
        }
        Ok(())
    }
}

/// Runs every device, both systems (flashfs in each of its configurations), every sync
/// setting; `progress` hears the label and the count of runs done and to do. A run that
/// fails stops the benchmark with its error.
pub fn run_peers(
    opts: &PeersOptions,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<Vec<PeerRow>> {
    opts.check()?;
    let runs: Vec<(&'static str, &'static str)> = core::iter::once(("littlefs", "default"))
        .chain(opts.flashfs_configs.iter().map(|c| ("flashfs", c.name())))
        .collect();
    let total = (opts.devices.len() * opts.syncs.len() * runs.len()) as u64;
    let mut done = 0;
    let mut rows = Vec::new();
    for &dev in &opts.devices {
        let spec = dev.spec()?;
        for &sync in &opts.syncs {
            let plan = opts.plan(spec.capacity(), sync);
            for &(system, config) in &runs {
                let label = format!(
                    "{} {system}{}{}",
                    dev.preset(),
                    if system == "flashfs" && config != "default" {
                        format!(" {config}")
                    } else {
                        String::new()
                    },
                    if sync { " sync" } else { "" }
                );
                progress(&label, done, total);
                let key = meter::RowKey {
                    device: dev.preset().to_string(),
                    system,
                    config,
                    sync,
                };
                let r = if system == "littlefs" {
                    run_littlefs(dev, spec, opts.seed, &plan, &key, &mut rows)
                } else {
                    run_flashfs(dev, spec, opts.seed, &plan, &key, &mut rows)
                };
                r.map_err(|e| BenchError::Report(format!("{label}: {e}")))?;
                done += 1;
                progress(&label, done, total);
            }
        }
    }
    Ok(rows)
}

fn meta(dev: PeerDevice, seed: u64) -> ImageMeta {
    ImageMeta::new(dev.preset(), seed)
}

fn run_littlefs(
    dev: PeerDevice,
    spec: DeviceSpec,
    seed: u64,
    plan: &Plan,
    key: &meter::RowKey,
    rows: &mut Vec<PeerRow>,
) -> Result<()> {
    let what = || format!("simulating the {}", dev.preset());
    match (dev, spec) {
        (PeerDevice::W25q64jv, DeviceSpec::Nor(s)) => {
            let sim = shared(NorSim::new(s, meta(dev, seed)).context(what)?);
            littlefs_run::run::<W25q64jv>(&sim, plan, key, rows)
        }
        (PeerDevice::W25n01gv, DeviceSpec::Nand(s)) => {
            let sim = shared(NandSim::new(s, meta(dev, seed)).context(what)?);
            littlefs_run::run::<W25n01gv>(&sim, plan, key, rows)
        }
        (PeerDevice::Nand1g, DeviceSpec::Nand(s)) => {
            let sim = shared(NandSim::new(s, meta(dev, seed)).context(what)?);
            littlefs_run::run::<Nand1g>(&sim, plan, key, rows)
        }
        (PeerDevice::Cy15b102q, DeviceSpec::Nvram(s)) => {
            let sim = shared(NvramSim::new(s, meta(dev, seed)).context(what)?);
            littlefs_run::run::<Cy15b102q>(&sim, plan, key, rows)
        }
        _ => Err(BenchError::InvalidOptions(format!(
            "preset {} is not the kind of part littlefs is configured for",
            dev.preset()
        ))),
    }
}

fn run_flashfs(
    dev: PeerDevice,
    spec: DeviceSpec,
    seed: u64,
    plan: &Plan,
    key: &meter::RowKey,
    rows: &mut Vec<PeerRow>,
) -> Result<()> {
    let what = || format!("simulating the {}", dev.preset());
    match spec {
        DeviceSpec::Nor(s) => {
            let sim = Uncounted(NorSim::new(s, meta(dev, seed)).context(what)?);
            let segs = NorSegments::new(sim, NOR_BLOCK_BYTES).context(what)?;
            flashfs_run::run(segs, plan, key, rows)
        }
        DeviceSpec::Nand(s) => {
            let sim = Uncounted(NandSim::new(s, meta(dev, seed)).context(what)?);
            let segs = NandSegments::new(sim).context(what)?;
            flashfs_run::run(segs, plan, key, rows)
        }
        DeviceSpec::Nvram(s) => {
            let sim = NvramSim::new(s, meta(dev, seed)).context(what)?;
            let part = Uncounted(NvramNor::new(sim).context(what)?);
            let segs = NorSegments::new(part, NOR_BLOCK_BYTES).context(what)?;
            flashfs_run::run(segs, plan, key, rows)
        }
    }
}

/// Cuts the power `cuts` times over the synced random writes of littlefs on `dev`, clean
/// and torn (see [`cuts`]).
pub fn run_littlefs_cuts(
    opts: &PeersOptions,
    dev: PeerDevice,
    cuts: u64,
) -> Result<Vec<cuts::CutReport>> {
    opts.check()?;
    let spec = dev.spec()?;
    let plan = opts.plan(spec.capacity(), true);
    let seed = opts.seed;
    let what = || format!("simulating the {}", dev.preset());
    let mut out = Vec::new();
    for torn in [false, true] {
        let r = match (dev, spec) {
            (PeerDevice::W25q64jv, DeviceSpec::Nor(s)) => cuts::run_cuts::<W25q64jv>(
                dev.preset(),
                &|| Ok(shared(NorSim::new(s, meta(dev, seed)).context(what)?)),
                &plan,
                cuts,
                torn,
            ),
            (PeerDevice::W25n01gv, DeviceSpec::Nand(s)) => cuts::run_cuts::<W25n01gv>(
                dev.preset(),
                &|| Ok(shared(NandSim::new(s, meta(dev, seed)).context(what)?)),
                &plan,
                cuts,
                torn,
            ),
            (PeerDevice::Nand1g, DeviceSpec::Nand(s)) => cuts::run_cuts::<Nand1g>(
                dev.preset(),
                &|| Ok(shared(NandSim::new(s, meta(dev, seed)).context(what)?)),
                &plan,
                cuts,
                torn,
            ),
            (PeerDevice::Cy15b102q, DeviceSpec::Nvram(s)) => cuts::run_cuts::<Cy15b102q>(
                dev.preset(),
                &|| Ok(shared(NvramSim::new(s, meta(dev, seed)).context(what)?)),
                &plan,
                cuts,
                torn,
            ),
            _ => Err(BenchError::InvalidOptions(format!(
                "preset {} is not the kind of part littlefs is configured for",
                dev.preset()
            ))),
        }?;
        out.push(r);
    }
    Ok(out)
}
