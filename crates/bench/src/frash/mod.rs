//! FRASH (Kim et al.): metadata on FRAM beside NAND against the NAND alone, in the same run,
//! on the paper's parts — FRASH's small-page NAND (`nand-128m`: 512+16-byte pages, 32 pages
//! a block, read 16 µs, program 200 µs, erase 2 ms) and its 8 MiB FRAM (`fram-8m`, 85 ns
//! per 16-bit access, the paper's Table 1).
//!
//! Three configurations ([`Config`]): `nand-scan`, the NAND alone without checkpoints and
//! mounted by a scan of every segment (YAFFS's mount, the paper's baseline);
//! `nand-checkpoint`, the NAND alone with the default configuration (a mount from the
//! checkpoint); `frash`, the FRAM beside the NAND (`Tiered::nvram_beside_nand`: metadata on
//! the FRAM, data on the NAND).
//!
//! Two experiments ([`Experiment`]):
//!
//! - **mount** (the paper's Figs 7 and 8): partitions of 10 … 100 MiB (the NAND's pages
//!   and timing, that many blocks) holding 2 MiB, then full, with files of 10 KiB and with files of 10 MiB; at each step a mount after
//!   a clean unmount and one after a power cut where the fill's last sync left the device.
//!   Device time of the mount, ms and ms per MiB of partition, the NAND pages and NVRAM
//!   bytes it read, its heap, the first write after it; the NVRAM the volume uses, per file
//!   and per MiB of data. Every configuration holds the same data: "full" is 90% of the
//!   NAND-only volume's capacity.
//! - **ops** (the paper's Figs 9–11): on the whole 128 MiB part, files of 0, 1, 4 and 10 KiB
//!   created, overwritten, read back after a remount and deleted (lmbench's `lat_fs`), one
//!   sync after every operation (as YAFFS's writes are durable when they return) and one at
//!   the end of each phase; a 10 MiB file written in 64 KiB writes and read back after a
//!   remount (`lmdd`, IOZone). Operations per second and KiB per second of device time.
//!
//! Every time is device time (the simulators' clocks; on the FRASH volume the NAND's clock,
//! to which every FRAM operation's time is added), never wall time.

mod mounts;
mod ops;
pub mod plot;
pub mod table;
mod volume;

use serde::Serialize;

pub use volume::{fast_tier_bytes, hybrid, nvram_spec, Config, Hybrid, Volume};

use crate::error::{BenchError, Result};
use crate::mount::{Part, Pattern};

/// An experiment of this benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Experiment {
    /// Mount time against partition size and fill.
    Mount,
    /// Create, delete, read and write of small and large files.
    Ops,
}

impl Experiment {
    /// Both, in the paper's order.
    pub const ALL: [Experiment; 2] = [Experiment::Mount, Experiment::Ops];

    /// The name in JSON and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Experiment::Mount => "mount",
            Experiment::Ops => "ops",
        }
    }

    /// Parses a name.
    pub fn from_name(s: &str) -> Option<Experiment> {
        Experiment::ALL.into_iter().find(|e| e.name() == s)
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct FrashOptions {
    /// The experiments, in this order.
    pub experiments: Vec<Experiment>,
    /// The configurations, in this order.
    pub configs: Vec<Config>,
    /// The NAND preset whose pages and timing the partitions have.
    pub nand_preset: String,
    /// The NVRAM preset beside it (`frash`).
    pub nvram_preset: String,
    /// The NVRAM's time per access, ns, if not the preset's (the paper's board ran its
    /// FRAM at 110–180 ns cycles).
    pub nvram_access_ns: Option<u64>,
    /// Partition sizes of the mount experiment, MiB.
    pub partitions_mib: Vec<u64>,
    /// What a partition holds at its first step, MiB.
    pub stored_mib: u64,
    /// What "full" means, percent of the NAND-only volume's capacity (every configuration
    /// then holds the same data).
    pub full_pct: u32,
    /// File sizes of the mount experiment's fills, KiB.
    pub file_kib: Vec<u64>,
    /// The ops experiment's partition, MiB (`None`: the whole part).
    pub ops_partition_mib: Option<u64>,
    /// Files per small-file phase.
    pub ops_files: u64,
    /// Sizes of the small files, bytes.
    pub ops_small_bytes: Vec<u64>,
    /// The large file, KiB.
    pub ops_large_kib: u64,
    /// Whether the ops experiment's groups (a file size and sync setting each, then the
    /// large file) run in turn on one volume, each on what the ones before left, rather
    /// than each on a fresh volume.
    pub ops_one_volume: bool,
    /// Bytes at the start of each file the `frash` configuration writes to the NVRAM
    /// (`FsConfig::fast_tier_file_bytes`), if not the default's.
    pub nvram_file_bytes: Option<u64>,
    /// Seed of the data and of the simulated parts.
    pub seed: u64,
}

impl Default for FrashOptions {
    fn default() -> Self {
        FrashOptions {
            experiments: Experiment::ALL.to_vec(),
            configs: Config::ALL.to_vec(),
            nand_preset: "nand-128m".into(),
            nvram_preset: "fram-8m".into(),
            nvram_access_ns: None,
            partitions_mib: vec![10, 20, 30, 40, 50, 60, 70, 80, 90, 100],
            stored_mib: 2,
            full_pct: 90,
            file_kib: vec![10, 10 * 1024],
            ops_partition_mib: None,
            ops_files: 1000,
            ops_small_bytes: vec![0, 1024, 4096, 10 * 1024],
            ops_large_kib: 10 * 1024,
            ops_one_volume: false,
            nvram_file_bytes: None,
            seed: 2008,
        }
    }
}

impl FrashOptions {
    /// Partitions of 8 and 16 MiB holding 1 MiB and full, files of 10 KiB and 1 MiB; 20
    /// files per phase and a 1 MiB file on a 16 MiB partition: seconds.
    pub fn quick() -> Self {
        FrashOptions {
            partitions_mib: vec![8, 16],
            stored_mib: 1,
            file_kib: vec![10, 1024],
            ops_partition_mib: Some(16),
            ops_files: 20,
            ops_small_bytes: vec![0, 4096],
            ops_large_kib: 1024,
            ..FrashOptions::default()
        }
    }

    /// The NAND partition of `mib` MiB, or the whole part.
    fn partition(&self, mib: Option<u64>) -> Result<Part> {
        match mib {
            Some(m) => Part::partition_mib(&self.nand_preset, m),
            None => Ok(Part::preset(&self.nand_preset)),
        }
    }
}

/// One measurement: a mount (experiment `mount`) or a phase of operations (`ops`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FrashRow {
    /// `mount` or `ops`.
    pub experiment: &'static str,
    /// `nand-scan`, `nand-checkpoint` or `frash`.
    pub config: &'static str,
    /// The NAND preset whose pages and timing the partition has.
    pub nand_preset: String,
    /// The NVRAM preset beside it (`frash` rows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvram_preset: Option<String>,
    /// The NVRAM's time per access, ns (`frash` rows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvram_access_ns: Option<u64>,
    /// Bytes at the start of each file written to the NVRAM while data takes under half of
    /// it (`FsConfig::fast_tier_file_bytes`; `frash` rows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvram_file_bytes: Option<u64>,
    /// Erase blocks of the partition.
    pub blocks: u32,
    /// MiB of the partition (pages only).
    pub partition_mb: f64,
    /// `mount`: the file data the volume holds, MiB. `ops`: the data of the phase's files.
    pub stored_mb: f64,
    /// Files the volume holds (`mount`), or files of the phase (`ops`).
    pub files: u64,
    /// Size of the files, KiB (the last file of a fill may be shorter).
    pub file_kb: f64,
    /// `mount`: the data stored, percent of the volume's capacity.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fill_pct: Option<f64>,
    /// `mount`: whether the volume is full (its second step: `full_pct` of what the NAND
    /// alone holds, the same data in every configuration), or holds the first step's few
    /// MiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full: Option<bool>,
    /// `mount`: `clean` (after an unmount) or `cut` (the device as the fill's last sync
    /// left it, without the unmount's checkpoint).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ending: Option<&'static str>,
    /// Device time of the mount, ms (`ops`: the clean mount of the volume the phases of
    /// its group left, before their files were read back).
    pub mount_ms: f64,
    /// `mount`: mount time per MiB of partition, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ms_per_mb: Option<f64>,
    /// `mount`: NAND pages the mount read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mount_nand_reads: Option<u64>,
    /// `mount`: bytes the mount read from the NVRAM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mount_nvram_bytes: Option<u64>,
    /// `mount`: whether the mount restored from a checkpoint rather than scanning.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restored: Option<bool>,
    /// `mount`: device time of the first write after it (a 4 KiB file created, written and
    /// synced), ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_write_ms: Option<f64>,
    /// `mount`: heap high-water mark of the mount, bytes (0 unless the counting allocator
    /// is installed, as the `flashfs` binary does).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heap_bytes: Option<u64>,
    /// `mount`: heap the mounted volume holds when the mount returns, bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heap_held_bytes: Option<u64>,
    /// `mount`, `frash`: bytes of live slots on the NVRAM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvram_live_bytes: Option<u64>,
    /// `mount`, `frash`: bytes of slots written on the NVRAM (live or not yet cleaned).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvram_used_bytes: Option<u64>,
    /// `mount`, `frash`: live NVRAM bytes per file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvram_bytes_per_file: Option<f64>,
    /// `mount`, `frash`: live NVRAM bytes per MiB of file data.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvram_bytes_per_mb: Option<f64>,
    /// `ops`: `create`, `delete`, `read` or `write`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub op: Option<&'static str>,
    /// `ops`: `each` (a sync after every operation) or `end` (one at the end of the
    /// phase); reads never sync, their row names the writes' group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync: Option<&'static str>,
    /// `ops`: device time of the phase, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_ms: Option<f64>,
    /// `ops`: operations (files) per second of device time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ops_per_s: Option<f64>,
    /// `ops`: KiB of file data per second of device time (not for files of 0 bytes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kbps: Option<f64>,
    /// `ops`: NAND pages read per operation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nand_reads_per_op: Option<f64>,
    /// `ops`: NAND pages programmed per operation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nand_programs_per_op: Option<f64>,
    /// `ops`: NAND blocks erased per operation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nand_erases_per_op: Option<f64>,
    /// `ops`, `frash`: NVRAM bytes written per operation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvram_bytes_written_per_op: Option<f64>,
    /// `ops`, `frash`: NVRAM bytes read per operation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvram_bytes_read_per_op: Option<f64>,
    /// `ops`, `frash`: the share of the phase's device time spent on the NVRAM, percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvram_time_pct: Option<f64>,
}

impl FrashRow {
    /// A row of `experiment` and `config` with nothing measured yet.
    fn new(
        experiment: Experiment,
        config: Config,
        opts: &FrashOptions,
        part: &Part,
    ) -> Result<FrashRow> {
        let spec = part.spec()?;
        let frash = config == Config::Frash;
        Ok(FrashRow {
            experiment: experiment.name(),
            config: config.name(),
            nand_preset: part.preset.clone(),
            nvram_preset: frash.then(|| opts.nvram_preset.clone()),
            nvram_access_ns: if frash {
                Some(nvram_spec(&opts.nvram_preset, opts.nvram_access_ns)?.access_ns)
            } else {
                None
            },
            nvram_file_bytes: frash
                .then(|| config.fs_config(opts.nvram_file_bytes).fast_tier_file_bytes),
            blocks: spec.blocks,
            partition_mb: spec.capacity() as f64 / MIB,
            stored_mb: 0.0,
            files: 0,
            file_kb: 0.0,
            fill_pct: None,
            full: None,
            ending: None,
            mount_ms: 0.0,
            ms_per_mb: None,
            mount_nand_reads: None,
            mount_nvram_bytes: None,
            restored: None,
            first_write_ms: None,
            heap_bytes: None,
            heap_held_bytes: None,
            nvram_live_bytes: None,
            nvram_used_bytes: None,
            nvram_bytes_per_file: None,
            nvram_bytes_per_mb: None,
            op: None,
            sync: None,
            device_ms: None,
            ops_per_s: None,
            kbps: None,
            nand_reads_per_op: None,
            nand_programs_per_op: None,
            nand_erases_per_op: None,
            nvram_bytes_written_per_op: None,
            nvram_bytes_read_per_op: None,
            nvram_time_pct: None,
        })
    }
}

/// Bytes per MiB, as a float.
const MIB: f64 = (1u64 << 20) as f64;

fn validate(opts: &FrashOptions) -> Result<()> {
    let bad = |why: String| Err(BenchError::InvalidOptions(why));
    if opts.configs.is_empty() || opts.experiments.is_empty() {
        return bad("no configuration or no experiment to run".into());
    }
    if opts.experiments.contains(&Experiment::Mount) {
        if opts.partitions_mib.is_empty() || opts.file_kib.is_empty() {
            return bad("the mount experiment needs partitions and file sizes".into());
        }
        if opts.file_kib.contains(&0) || opts.stored_mib == 0 {
            return bad("files and the first fill must hold data".into());
        }
        if !(1..=95).contains(&opts.full_pct) {
            return bad(format!("full at {}% of the volume", opts.full_pct));
        }
        for &m in &opts.partitions_mib {
            if m.saturating_mul(opts.full_pct.into()) / 100 <= opts.stored_mib {
                return bad(format!(
                    "a partition of {m} MiB full at {}% holds no more than {} MiB",
                    opts.full_pct, opts.stored_mib
                ));
            }
        }
    }
    if opts.experiments.contains(&Experiment::Ops)
        && (opts.ops_files == 0 || opts.ops_large_kib == 0)
    {
        return bad("the ops experiment needs files and a large file".into());
    }
    opts.partition(opts.ops_partition_mib)?.spec()?;
    nvram_spec(&opts.nvram_preset, opts.nvram_access_ns)?;
    Ok(())
}

/// Runs the experiments; `progress` hears (what, done, total).
pub fn run_frash(
    opts: &FrashOptions,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<Vec<FrashRow>> {
    validate(opts)?;
    let pat = Pattern::new(opts.seed);
    let mut rows = Vec::new();
    for &exp in &opts.experiments {
        match exp {
            Experiment::Mount => rows.extend(mounts::run(opts, &pat, progress)?),
            Experiment::Ops => rows.extend(ops::run(opts, &pat, progress)?),
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_options_are_refused() {
        let mut opts = FrashOptions::quick();
        opts.full_pct = 100;
        assert!(matches!(
            run_frash(&opts, &mut |_, _, _| {}),
            Err(BenchError::InvalidOptions(_))
        ));
        let mut opts = FrashOptions::quick();
        opts.nvram_preset = "nand-128m".into();
        assert!(matches!(
            run_frash(&opts, &mut |_, _, _| {}),
            Err(BenchError::InvalidOptions(_))
        ));
        let mut opts = FrashOptions::quick();
        opts.partitions_mib = vec![1];
        assert!(matches!(
            run_frash(&opts, &mut |_, _, _| {}),
            Err(BenchError::InvalidOptions(_))
        ));
    }
}
