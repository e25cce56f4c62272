//! The three volumes of the run: the NAND partition alone, formatted without checkpoints
//! and mounted by a full scan (`nand-scan`) or with the default configuration
//! (`nand-checkpoint`), and the same partition beside the FRAM
//! ([`flashfs::media::tiered::NvramNand`], `frash`), each simulator's own storage kept out
//! of the heap figures.

use std::time::Duration;

use flash::stats::Stats;
use flash::{preset, DeviceSpec, ImageMeta, NandSim, NvramSim, NvramSpec, Simulated};
use flashfs::media::tiered::{NvramNand, Tiered};
use flashfs::media::Tier;
use flashfs::{Fs, FsConfig, Segments};
use serde::Serialize;

use crate::error::{BenchError, Context, Result};
use crate::heap::uncounted;
use crate::mount::{Dev, Part, SimVolume};
use crate::tffs::device::Uncounted;

/// NVRAM beside NAND, both simulated: the FRASH volume.
pub type Hybrid = NvramNand<Uncounted<NvramSim>, Uncounted<NandSim>>;

impl SimVolume for Hybrid {
    fn page_reads(&self) -> u64 {
        self.bulk().flash().inner().stats().reads
    }

    fn fast_bytes_read(&self) -> u64 {
        self.fast().flash().nvram().inner().stats().bytes_read
    }
}

/// A volume of the run: what the figures read off its simulators.
pub trait Volume: SimVolume {
    /// The NAND simulator's counters.
    fn nand_stats(&self) -> Stats;
    /// The NVRAM simulator's counters, if the volume has one.
    fn nvram_stats(&self) -> Option<Stats>;
    /// The NVRAM's own clock (the time its operations took), if the volume has one.
    fn nvram_now(&self) -> Option<Duration>;
}

impl Volume for Dev {
    fn nand_stats(&self) -> Stats {
        self.flash().inner().stats().clone()
    }

    fn nvram_stats(&self) -> Option<Stats> {
        None
    }

    fn nvram_now(&self) -> Option<Duration> {
        None
    }
}

impl Volume for Hybrid {
    fn nand_stats(&self) -> Stats {
        self.bulk().flash().inner().stats().clone()
    }

    fn nvram_stats(&self) -> Option<Stats> {
        Some(self.fast().flash().nvram().inner().stats().clone())
    }

    fn nvram_now(&self) -> Option<Duration> {
        Some(uncounted(|| self.fast().now()))
    }
}

/// The configurations compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Config {
    /// The NAND alone, without checkpoints (`LogConfig::checkpoints` off), mounted by a
    /// scan of every segment's header and tags (`LogConfig::scan_mount`): YAFFS's way.
    NandScan,
    /// The NAND alone, the default configuration: checkpoints, a mount from the newest.
    NandCheckpoint,
    /// The FRAM beside the NAND (`Tiered::nvram_beside_nand`), the default
    /// configuration: metadata on the FRAM, data on the NAND.
    Frash,
}

impl Config {
    /// Every configuration, the baseline first.
    pub const ALL: [Config; 3] = [Config::NandScan, Config::NandCheckpoint, Config::Frash];

    /// The name in JSON, tables and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Config::NandScan => "nand-scan",
            Config::NandCheckpoint => "nand-checkpoint",
            Config::Frash => "frash",
        }
    }

    /// Parses a name.
    pub fn from_name(s: &str) -> Option<Config> {
        Config::ALL.into_iter().find(|c| c.name() == s)
    }

    /// The file system's configuration, at format and at every mount: the default, but a
    /// full scan at every mount for `nand-scan`, and the NVRAM's share of file data
    /// (`nvram_file_bytes`, if given) for `frash`.
    pub fn fs_config(self, nvram_file_bytes: Option<u64>) -> FsConfig {
        let mut c = FsConfig::default();
        if self == Config::NandScan {
            c.ftl.log.checkpoints = false;
            c.ftl.log.scan_mount = true;
        }
        if let (Config::Frash, Some(bytes)) = (self, nvram_file_bytes) {
            c.fast_tier_file_bytes = bytes;
        }
        c
    }
}

/// The FRAM part: `preset`'s timing, at `access_ns` per access if given.
pub fn nvram_spec(preset_name: &str, access_ns: Option<u64>) -> Result<NvramSpec> {
    let p = preset::lookup(preset_name).context(|| format!("preset {preset_name:?}"))?;
    let DeviceSpec::Nvram(mut spec) = p.spec else {
        return Err(BenchError::InvalidOptions(format!(
            "preset {preset_name:?} is not NVRAM"
        )));
    };
    if let Some(ns) = access_ns {
        spec.access_ns = ns;
    }
    Ok(spec)
}

/// A fresh FRASH volume: `part` beside an NVRAM part of `nvram`.
pub fn hybrid(part: &Part, nvram: &NvramSpec, seed: u64) -> Result<Hybrid> {
    let nand = part.simulate(seed)?;
    let label = part.label();
    uncounted(|| {
        let sim = NvramSim::new(*nvram, ImageMeta::new("fram", seed))
            .context(|| "simulating the FRAM".to_string())?;
        Tiered::nvram_beside_nand(Uncounted(sim), nand)
            .context(|| format!("the FRAM beside {label}"))
    })
}

/// What the volume keeps on its fast tier (the NVRAM), bytes: the live slots, and the
/// slots written (live or dead, until the cleaner takes their segment back). Zero on one
/// device.
pub fn fast_tier_bytes<D: Segments>(fs: &Fs<D>) -> (u64, u64) {
    let log = fs.ftl().log();
    let slot = u64::from(log.geometry().slot_size);
    let dev = log.device();
    let (mut live, mut used) = (0, 0);
    for (s, info) in log.segments().iter().enumerate() {
        if dev.tier(s as u32) == Tier::Fast {
            live += u64::from(info.live()) * slot;
            used += u64::from(info.used()) * slot;
        }
    }
    (live, used)
}
