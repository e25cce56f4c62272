//! `flashfs bench`: the papers' experiments, measured in device time on simulated parts.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use flashfs::log::policy::Policy;
use flashfs_bench::flexfs::{self, run_flexfs, FlexfsOptions};
use flashfs_bench::frash::{self, run_frash, FrashOptions};
use flashfs_bench::integrity::{run_integrity, IntegrityOptions};
use flashfs_bench::kawaguchi::{run_kawaguchi, Basis, KawaguchiOptions};
use flashfs_bench::mount::{run_mount, Experiment, FileSet, Mode, MountOptions, Part};
use flashfs_bench::peers::{run_littlefs_cuts, run_peers, FlashfsConfig, PeerDevice, PeersOptions};
use flashfs_bench::scale::{run_scale, ScaleOptions};
use flashfs_bench::small_writes::{
    run_small_writes, Pattern as WritePattern, SmallWritesOptions, SyncEvery,
};
use flashfs_bench::tffs::{self, run_tffs, DeviceKind, TffsOptions, Variant, WorkloadKind};
use flashfs_bench::workload::Pattern;
use flashfs_bench::{plot, report};

use crate::Global;

pub const EXAMPLES: &str = "Examples:
  flashfs bench kawaguchi --quick               every row, a short run each (under a minute)
  flashfs bench kawaguchi --plot out/           the full run (192 MB per row), with plots
  flashfs bench kawaguchi --pattern hot-cold --util 90 --policy adaptive --json
  flashfs bench scale --quick                   lookups and seeks as a directory and a file grow
  flashfs bench scale                           100,000 files, a 1 GiB file, on the 1 GiB NAND
  flashfs bench tffs --quick                    TFFS's fax, phone and recorder workloads (seconds)
  flashfs bench tffs --plot out/                the full run (minutes), with Figs 6, 8 and 10
  flashfs bench tffs --workload fax --device 448/2 --config 2-4-nsp --json
  flashfs bench peers --quick                   flashfs and littlefs on the same parts (seconds)
  flashfs bench peers --flashfs-config small-ram --device w25q64jv
  flashfs bench peers --device w25n01gv --json  littlefs's benchmark workloads, one JSON row per phase
  flashfs bench peers --cuts 200                littlefs under clean and torn power cuts instead
  flashfs bench peers --plot out/               also the throughput and latency plots per part
  flashfs bench peers --half-full               mount + first write on half-full parts, beside the floor
  flashfs bench mount --quick                   mount from the checkpoint beside the full scan (seconds)
  flashfs bench mount --json                    Ryu & Park, FRASH and the flat-cost rows (minutes)
  flashfs bench mount --experiment frash        FRASH's partitions of 10 to 100 MiB only
  flashfs bench small-writes --quick            16- to 1,024-byte writes, with and without write-back (seconds)
  flashfs bench small-writes --json             1 MiB appends and random writes on three parts (minutes)
  flashfs bench small-writes --device w25n01gv --sync end --write-buffer-bytes 8192
  flashfs bench integrity --quick               fsck and scrub of a half-full 128 MiB NAND (seconds)
  flashfs bench integrity --json                fsck and scrub of the 1 GiB NAND 90% full (minutes)
  flashfs bench flexfs --quick                  SLC/MLC regions on a 16 MiB MLC part (seconds)
  flashfs bench flexfs --plot out/              FlexFS's experiments on 64 MiB (and 120 MiB)
  flashfs bench frash --quick                   FRAM beside NAND against the NAND alone (seconds)
  flashfs bench frash --plot out/               FRASH's mount and file operations, with plots (minutes)
  flashfs bench frash --experiment ops --json   create, delete, read, write; one JSON row per phase
  flashfs bench fuse                            FUSE mount of a native image vs. bindfs on tmpfs
  flashfs bench fuse --json --mib 16            one JSON object per metric";

/// Which experiment.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Kawaguchi et al. 1995, section 3: sequential, random and hot-and-cold 4 KB overwrites
    /// on the block device over the 28F008SA array, per cleaning policy and head setting,
    /// with the paper's figures beside ours.
    #[command(after_help = EXAMPLES)]
    Kawaguchi(KawaguchiArgs),
    /// The native file system at scale: cold lookups in a directory of up to 100,000 files,
    /// cold random 4 KiB reads of a 1 GiB file and of a file fragmented into tens of
    /// thousands of extents; page reads and device time per operation.
    #[command(after_help = EXAMPLES)]
    Scale(ScaleArgs),
    /// Gal & Toledo 2005 (TFFS), section 5: the fax, phone and event-recorder workloads on
    /// the native file system over the paper's NOR parts (8192/64, 448/64, 448/2) and
    /// configurations (fan-out 7-14 and 2-4, with and without spare pointers, small RAM):
    /// capacity, endurance, erasures per unit, reclamation efficiency and heap, with the
    /// paper's figures beside ours.
    #[command(after_help = EXAMPLES)]
    Tffs(TffsArgs),
    /// flashfs beside littlefs on the very same simulated parts (w25q64jv, w25n01gv,
    /// cy15b102q; nand-1g on request), with littlefs's benchmark workloads: 64-byte writes
    /// to one file, random 64-byte writes in a 32 KiB file, many small files, the same read
    /// back, mount, mount and first write; without and with a sync per write. Device time,
    /// bytes programmed, erases, latency percentiles, RAM and used space, side by side.
    #[command(after_help = EXAMPLES)]
    Peers(PeersArgs),
    /// What checking every live byte costs: fsck and a scrub over a volume filled with files,
    /// and a scrub after bit errors the ECC corrects were planted (the segments it moves);
    /// device time, page reads, MiB verified per second.
    #[command(after_help = EXAMPLES)]
    Integrity(IntegrityArgs),
    /// Mount time, page reads and heap of a mount from the checkpoint beside the full scan
    /// (the baseline), after a clean unmount and after a power cut, with the first write
    /// after it: Ryu & Park (the 1 GiB NAND 10 to 90% full, files of 359.5 KiB and of
    /// 5.9 MiB, and the block device), FRASH (partitions of 10 to 100 MiB of the 128 MiB
    /// NAND) and the same fill on parts of growing size.
    #[command(after_help = EXAMPLES)]
    Mount(MountArgs),
    /// Writes much smaller than a block on the native file system: 16, 64, 256 and
    /// 1,024 bytes appended to a 1 MiB file and at random places in a 32 KiB file, synced
    /// at the end, every 4 KiB or after each write, with write-back of partial blocks on
    /// (the default bound) and off, on the w25q64jv, w25n01gv and nand-1g: bytes programmed
    /// per user byte, programs per sync, device time, p99 write latency and heap.
    #[command(after_help = EXAMPLES)]
    SmallWrites(SmallWritesArgs),
    /// Lee et al. 2009 (FlexFS): MLC NAND with SLC and MLC regions. Chunks of 4 MiB every
    /// 25 s (idle), every 10 s (busy), and busy with a quarter rewritten in place (locality),
    /// on the native file system over 64 MiB of the mlc-flexfs part until it is 95% full:
    /// write throughput against utilization for the baseline (writes to SLC, the cleaner
    /// migrates to MLC), background migration, dynamic allocation, locality-aware
    /// migration, SLC-only and MLC-only; the response time of writes arriving while the
    /// migrator works; erases per block against a lifetime, with and without wear
    /// management; a synthetic mobile trace. All in device time.
    #[command(after_help = EXAMPLES)]
    Flexfs(FlexfsArgs),
    /// Kim et al. (FRASH): metadata on FRAM beside NAND (fram-8m beside nand-128m) against
    /// the NAND alone mounted by a full scan and from its checkpoint, in the same run. Mount
    /// time against partition size (10 to 100 MiB) holding 2 MiB and full, with files of
    /// 10 KiB and of 10 MiB; create, delete, read and write of small files (lmbench's
    /// lat_fs) and of a 10 MiB file; heap, and NVRAM used per file and per MiB. All in
    /// device time, with the paper's figures beside ours.
    #[command(after_help = EXAMPLES)]
    Frash(FrashArgs),
    /// Host-side speed through FUSE: sequential and random 4 KiB I/O and file creation and
    /// deletion on a mounted native image (on tmpfs) against a FUSE passthrough of tmpfs
    /// (bindfs), in the same run, with the ratio per metric. Needs bindfs and fusermount3.
    #[command(after_help = EXAMPLES)]
    Fuse(super::fusebench::FuseArgs),
}

/// Options of `flashfs bench peers`.
#[derive(Debug, Args)]
pub struct PeersArgs {
    /// A 16 KiB linear file, 32 random writes and 8 small files (seconds).
    #[arg(long)]
    quick: bool,
    /// One JSON object per phase and system instead of the table.
    #[arg(long)]
    json: bool,
    /// Only these parts (repeatable; default: w25q64jv, w25n01gv, cy15b102q).
    #[arg(long, value_parser = ["w25q64jv", "w25n01gv", "cy15b102q", "nand-1g"])]
    device: Vec<String>,
    /// Only the runs without (`off`) or with (`on`) a sync after every write.
    #[arg(long, value_parser = ["off", "on"])]
    sync: Option<String>,
    /// Random 64-byte writes per run.
    #[arg(long, value_name = "N")]
    random_writes: Option<u64>,
    /// flashfs's configuration: `default` (FsConfig::default, large caches), `small-ram`
    /// (FsConfig::small_ram, the microcontroller profile) or `both`, each beside littlefs.
    #[arg(long, value_parser = ["default", "small-ram", "both"], default_value = "both")]
    flashfs_config: String,
    /// Instead of the benchmark: cut the power this many times (clean, then torn) over
    /// littlefs's synced random writes on each part, and report what it mounts afterwards.
    #[arg(long, value_name = "N")]
    cuts: Option<u64>,
    /// Seed of the random offsets and of the simulated parts.
    #[arg(long, default_value_t = 2019)]
    seed: u64,
    /// Write the plots (PNG and SVG: throughput per phase and the write-latency distribution,
    /// per device) into this directory.
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,
    /// Instead of the benchmark: fill half of each part (w25q64jv and w25n01gv, or those of
    /// --device but the FRAM), then time a mount and the first write, beside the floor.
    #[arg(long)]
    half_full: bool,
}

/// Options of `flashfs bench small-writes`.
#[derive(Debug, Args)]
pub struct SmallWritesArgs {
    /// The two SPI parts, 64- and 1,024-byte writes, 16 KiB per run (seconds).
    #[arg(long)]
    quick: bool,
    /// One JSON object per run instead of the table.
    #[arg(long)]
    json: bool,
    /// Only these parts (repeatable; default: w25q64jv, w25n01gv, nand-1g).
    #[arg(long, value_parser = ["w25q64jv", "w25n01gv", "nand-1g"])]
    device: Vec<String>,
    /// Only this pattern.
    #[arg(long, value_parser = ["append", "random"])]
    pattern: Option<String>,
    /// Only this sync setting.
    #[arg(long, value_parser = ["end", "4k", "each"])]
    sync: Option<String>,
    /// Only writes of these sizes, bytes (repeatable).
    #[arg(long, value_name = "BYTES")]
    write_bytes: Vec<usize>,
    /// Only this write-back budget (bytes of RAM; 0: off) instead of the default and 0.
    #[arg(long, value_name = "BYTES")]
    write_buffer_bytes: Option<usize>,
    /// The microcontroller profile (FsConfig::small_ram: 8 KiB of cached index nodes, 32 dirty
    /// nodes, 4 KiB of write buffer and of map pages) instead of the defaults.
    #[arg(long)]
    small_ram: bool,
    /// Seed of the random offsets and of the simulated parts.
    #[arg(long, default_value_t = 2019)]
    seed: u64,
}

/// Options of `flashfs bench mount`.
#[derive(Debug, Args)]
pub struct MountArgs {
    /// Parts of 8 and 16 MiB and two fill levels (seconds instead of minutes).
    #[arg(long)]
    quick: bool,
    /// One JSON object per mount instead of the table.
    #[arg(long)]
    json: bool,
    /// Also write the JSON rows to this file (beside the table or the JSON printed).
    #[arg(long, value_name = "FILE")]
    json_out: Option<PathBuf>,
    /// Write the plots (PNG and SVG: mount time against data stored and against partition
    /// size) into this directory.
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,
    /// Only these experiments (repeatable; default: all).
    #[arg(long, value_parser = ["ryu-park", "frash", "flat", "seek"])]
    experiment: Vec<String>,
    /// Ryu & Park's fill levels, percent of the volume (repeatable; default 10, 30, 50, 70,
    /// 90).
    #[arg(long, value_name = "PERCENT")]
    fill: Vec<u32>,
    /// Only these file sets (repeatable): 359.5k (files of 359.5 KiB on average) or 5.9m.
    #[arg(long, value_parser = ["359.5k", "5.9m"])]
    file_set: Vec<String>,
    /// Only this layer: fs (the native file system) or ftl (the block device).
    #[arg(long, value_parser = ["fs", "ftl"])]
    mode: Option<String>,
    /// Ryu & Park's part (a NAND preset; default nand-1g, or a 8 MiB part with --quick).
    #[arg(long)]
    preset: Option<String>,
    /// Blocks of the larger part of the flat-cost rows (the 1 GiB NAND's pages and timing;
    /// default 32768, 4 GiB); 0 for none. Skipped with a note if the host's RAM would not
    /// hold its image twice.
    #[arg(long, value_name = "BLOCKS")]
    large_blocks: Option<u32>,
    /// A part of the flat-cost rows that holds the same data as the flat part of its preset,
    /// as PRESET:BLOCKS (that preset's pages and timing, that many blocks; repeatable;
    /// default nand-128m:32768 and nand-1g:131072, 512 MiB and 16 GiB), or `none`. Each
    /// skipped with a note if the host's RAM would not hold its image twice.
    #[arg(long, value_name = "PRESET:BLOCKS")]
    same_data: Vec<String>,
    /// Cuts per power-cut row of the checkpoint mount, spread over one checkpoint cycle
    /// (default 8, or 3 with --quick; 1: one cut where the fill ended); the row is the
    /// worst, beside the mean.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    cut_points: Option<u32>,
    /// Seed of the file sizes, the data and the simulated parts.
    #[arg(long, default_value_t = 2006)]
    seed: u64,
}

/// Options of `flashfs bench integrity`.
#[derive(Debug, Args)]
pub struct IntegrityArgs {
    /// The 128 MiB NAND half full (seconds instead of minutes).
    #[arg(long)]
    quick: bool,
    /// One JSON object per row instead of the table.
    #[arg(long)]
    json: bool,
    /// Device preset (NAND).
    #[arg(long)]
    preset: Option<String>,
    /// How full the volume is, percent of its capacity.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=95))]
    fill: Option<u64>,
    /// Pages given bit errors within the ECC before the last scrub.
    #[arg(long)]
    worn_pages: Option<u32>,
}

/// Options of `flashfs bench flexfs`.
#[derive(Debug, Args)]
pub struct FlexfsArgs {
    /// 16 MiB in chunks of 1 MiB (seconds).
    #[arg(long)]
    quick: bool,
    /// One JSON object per run instead of the table.
    #[arg(long)]
    json: bool,
    /// MLC NAND preset.
    #[arg(long)]
    preset: Option<String>,
    /// MiB of the part used.
    #[arg(long)]
    mib: Option<u64>,
    /// Only these experiments (idle, busy, locality, burst, response, endurance, trace;
    /// repeatable).
    #[arg(long = "experiment")]
    experiments: Vec<String>,
    /// Only these settings in the synthetic runs and the trace (mlc-only, slc-only,
    /// baseline, bm, da, la; repeatable).
    #[arg(long = "config")]
    configs: Vec<String>,
    /// Seed of the response run's idle gaps and of the trace.
    #[arg(long)]
    seed: Option<u64>,
    /// Write the throughput-against-utilization plots (PNG and SVG) into this directory.
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,
}

/// Options of `flashfs bench frash`.
#[derive(Debug, Args)]
pub struct FrashArgs {
    /// Partitions of 8 and 16 MiB, 20 files per phase (seconds instead of minutes).
    #[arg(long)]
    quick: bool,
    /// One JSON object per mount or phase instead of the tables.
    #[arg(long)]
    json: bool,
    /// Also write the JSON rows to this file (beside the tables or the JSON printed).
    #[arg(long, value_name = "FILE")]
    json_out: Option<PathBuf>,
    /// Write the plots (PNG and SVG: mount time against partition size, and the operations
    /// as bars) into this directory.
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,
    /// Only these experiments (repeatable; default both).
    #[arg(long, value_parser = ["mount", "ops"])]
    experiment: Vec<String>,
    /// Only these configurations (repeatable; default all three).
    #[arg(long = "config", value_parser = ["nand-scan", "nand-checkpoint", "frash"])]
    configs: Vec<String>,
    /// Partition sizes of the mount experiment, MiB (repeatable; default 10, 20, ... 100).
    #[arg(long = "partition", value_name = "MIB")]
    partitions: Vec<u64>,
    /// File sizes of the mount experiment's fills, KiB (repeatable; default 10 and 10240).
    #[arg(long = "file-kib", value_name = "KIB")]
    file_kib: Vec<u64>,
    /// The FRAM's time per access, ns, instead of the preset's 85 (the paper's board ran
    /// 110 to 180 ns cycles).
    #[arg(long, value_name = "NS")]
    nvram_access_ns: Option<u64>,
    /// Files per small-file phase of the ops experiment (default 1000, or 20 with --quick).
    #[arg(long, value_name = "N")]
    ops_files: Option<u64>,
    /// Run the ops experiment's groups (a file size and sync setting each, then the large
    /// file) in turn on one volume instead of each on a fresh one.
    #[arg(long)]
    ops_one_volume: bool,
    /// Bytes at the start of each file the frash configuration writes to the NVRAM while
    /// data takes less than half of it, instead of the default 16 KiB (0: metadata only).
    #[arg(long, value_name = "BYTES")]
    nvram_file_bytes: Option<u64>,
    /// Seed of the data and of the simulated parts.
    #[arg(long)]
    seed: Option<u64>,
}

/// Options of `flashfs bench scale`.
#[derive(Debug, Args)]
pub struct ScaleArgs {
    /// Smaller sizes on the 128 MiB NAND (seconds instead of minutes).
    #[arg(long)]
    quick: bool,
    /// One JSON object per row instead of the table.
    #[arg(long)]
    json: bool,
    /// Device preset (NAND).
    #[arg(long)]
    preset: Option<String>,
    /// Cold operations measured per row.
    #[arg(long)]
    samples: Option<u64>,
    /// KiB of the block device's map pages kept in RAM (default 512): a read whose block's
    /// map page is not cached reads the page from flash.
    #[arg(long, value_name = "KIB")]
    map_cache_kib: Option<usize>,
}

/// Options of `flashfs bench tffs`.
#[derive(Debug, Args)]
pub struct TffsArgs {
    /// A lower cycle limit (24 erases per unit, checked at 96) and only the default
    /// configuration on the 8 MB part: seconds instead of minutes.
    #[arg(long)]
    quick: bool,
    /// One JSON object per row instead of the tables.
    #[arg(long)]
    json: bool,
    /// Write the bar charts (PNG and SVG) into this directory.
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,
    /// Only these workloads: fax, phone, recorder (repeatable).
    #[arg(long, value_parser = ["fax", "phone", "recorder"])]
    workload: Vec<String>,
    /// Only these devices: 8192/64, 448/64, 448/2 (repeatable).
    #[arg(long, value_parser = ["8192/64", "448/64", "448/2"])]
    device: Vec<String>,
    /// Only these configurations: default, 7-14, 2-4, 2-4-nsp, small-ram, no-journal
    /// (repeatable).
    #[arg(
        long = "config",
        value_parser = ["default", "7-14", "2-4", "2-4-nsp", "small-ram", "no-journal"]
    )]
    configs: Vec<String>,
    /// Erases per unit at which the device counts as worn out (the parts are rated 100,000).
    #[arg(long, value_name = "N")]
    cycles: Option<u32>,
    /// A second limit for the cycle-limit check rows; 0 for none.
    #[arg(long, value_name = "N")]
    check_cycles: Option<u32>,
    /// The wear leveller's trigger: the erase-count spread between units that makes it move
    /// static data (default: a tenth of the cycle limit, at least 1; the parts' own 1,000 is
    /// 1% of their rated 100,000, but 1% of a scaled limit moves static data every cycle or
    /// two).
    #[arg(long, value_name = "N")]
    wear_spread: Option<u32>,
    /// Measure only capacity or only endurance.
    #[arg(long, value_parser = ["capacity", "endurance"])]
    only: Option<String>,
    /// Seed of the workloads.
    #[arg(long, default_value_t = 2005)]
    seed: u64,
}

/// Options of `flashfs bench kawaguchi`.
#[derive(Debug, Args)]
pub struct KawaguchiArgs {
    /// Write 24 MB per row instead of the paper's 192 MB.
    #[arg(long)]
    quick: bool,
    /// One JSON object per row instead of the table.
    #[arg(long)]
    json: bool,
    /// Write the plots (PNG and SVG) into this directory.
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,
    /// What "X% initial data" is a percentage of: `paper` (14 MB, the paper's own: 90% is
    /// its 12.6 MB) or `raw` (the array's whole data capacity).
    #[arg(long, default_value = "paper", value_parser = ["paper", "raw"])]
    basis: String,
    /// MB written per row (overrides --quick's and the full run's amount).
    #[arg(long, value_name = "MB")]
    mb: Option<f64>,
    /// Only these patterns: sequential, random, hot-cold (repeatable).
    #[arg(long, value_parser = ["sequential", "random", "hot-cold"])]
    pattern: Vec<String>,
    /// Only these utilizations, in percent (repeatable).
    #[arg(long, value_name = "PERCENT")]
    util: Vec<f64>,
    /// Only these cleaning policies: greedy, cost-benefit, adaptive (repeatable).
    #[arg(long, value_parser = ["greedy", "cost-benefit", "adaptive"])]
    policy: Vec<String>,
    /// Seed of the workloads.
    #[arg(long, default_value_t = 1995)]
    seed: u64,
}

/// Runs a benchmark and prints what it measured.
pub fn run(cmd: &Command, global: Global, out: &mut dyn Write) -> Result<()> {
    match cmd {
        Command::Kawaguchi(args) => kawaguchi(args, global, out),
        Command::Scale(args) => scale(args, global, out),
        Command::Flexfs(args) => flexfs_bench(args, global, out),
        Command::Integrity(args) => integrity(args, global, out),
        Command::Tffs(args) => tffs_bench(args, global, out),
        Command::Peers(args) => peers(args, global, out),
        Command::Mount(args) => mount(args, global, out),
        Command::Frash(args) => frash_bench(args, global, out),
        Command::SmallWrites(args) => small_writes(args, global, out),
        Command::Fuse(args) => super::fusebench::run(args, global, out),
    }
}

/// Runs a benchmark under a progress bar that its progress reports move.
fn with_progress<T, E>(
    global: Global,
    template: &str,
    run: impl FnOnce(&mut dyn FnMut(&str, u64, u64)) -> std::result::Result<T, E>,
) -> Result<T>
where
    anyhow::Error: From<E>,
{
    let bar = global.progress_bar(1, template);
    let r = run(&mut |label, done, total| {
        bar.set_length(total);
        bar.set_position(done);
        bar.set_message(label.to_string());
    });
    bar.finish_and_clear();
    Ok(r?)
}

/// Creates `dir`, draws the plots into it and says how many files it wrote.
fn write_plots(
    dir: &std::path::Path,
    draw: impl FnOnce(&std::path::Path) -> Result<Vec<std::path::PathBuf>>,
) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let files = draw(dir)?;
    eprintln!("wrote {} plot files to {}", files.len(), dir.display());
    Ok(())
}

fn integrity(args: &IntegrityArgs, global: Global, out: &mut dyn Write) -> Result<()> {
    let mut opts = if args.quick {
        IntegrityOptions::quick()
    } else {
        IntegrityOptions::default()
    };
    if let Some(p) = &args.preset {
        opts.preset = p.clone();
    }
    if let Some(f) = args.fill {
        opts.fill_percent = f;
    }
    if let Some(n) = args.worn_pages {
        opts.worn_pages = n;
    }
    let rows = with_progress(global, "filling [{bar:40}] {pos}/{len} {eta}", |p| {
        run_integrity(&opts, &mut |done, total| p("filling", done, total))
    })?;
    if args.json {
        for r in &rows {
            writeln!(out, "{}", serde_json::to_string(r)?)?;
        }
    } else {
        writeln!(
            out,
            "preset {}, native file system {}% full of files of {} on average, default \
             configuration; device time of each operation on a copy of the same state \
             (scrub-worn: after {} written pages were given the bit errors the ECC corrects)",
            opts.preset,
            opts.fill_percent,
            opts.file_set.label(),
            opts.worn_pages
        )?;
        out.write_all(flashfs_bench::integrity::table(&rows).as_bytes())?;
    }
    Ok(())
}

fn flexfs_bench(args: &FlexfsArgs, global: Global, out: &mut dyn Write) -> Result<()> {
    let mut opts = if args.quick {
        FlexfsOptions::quick()
    } else {
        FlexfsOptions::default()
    };
    if let Some(p) = &args.preset {
        opts.preset = p.clone();
    }
    if let Some(m) = args.mib {
        opts.mib = m;
    }
    if !args.experiments.is_empty() {
        opts.experiments = args
            .experiments
            .iter()
            .map(|e| {
                flexfs::Experiment::parse(e).with_context(|| {
                    format!(
                        "no experiment {e:?} (idle, busy, locality, burst, response, endurance, trace)"
                    )
                })
            })
            .collect::<Result<_>>()?;
    }
    if !args.configs.is_empty() {
        opts.configs = args
            .configs
            .iter()
            .map(|c| {
                flashfs::Regions::parse(c).with_context(|| {
                    format!("no setting {c:?} (mlc-only, slc-only, baseline, bm, da, la)")
                })
            })
            .collect::<Result<_>>()?;
    }
    if let Some(s) = args.seed {
        opts.seed = s;
    }
    let rows = with_progress(global, "{msg:>20} [{bar:40}] {pos}/{len} {eta}", |p| {
        run_flexfs(&opts, p)
    })?;
    if args.json {
        for r in &rows {
            writeln!(out, "{}", serde_json::to_string(r)?)?;
        }
    } else {
        writeln!(
            out,
            "preset {} cut to {} MiB ({} MiB for endurance), native file system (default \
             configuration but the regions), chunks of {} MiB in 64 KiB writes and an fsync \
             until {}% full; {} timed writes (response), {} operations (trace), seed {}; \
             device time",
            opts.preset,
            opts.mib,
            opts.endurance_mib,
            opts.chunk_mib,
            opts.fill_pct,
            opts.requests,
            opts.trace_ops,
            opts.seed
        )?;
        out.write_all(flexfs::table(&rows).as_bytes())?;
    }
    if let Some(dir) = &args.plot {
        write_plots(dir, |dir| Ok(flexfs::plot::plot(&rows, dir)?))?;
    }
    Ok(())
}

fn scale(args: &ScaleArgs, global: Global, out: &mut dyn Write) -> Result<()> {
    let mut opts = if args.quick {
        ScaleOptions::quick()
    } else {
        ScaleOptions::default()
    };
    if let Some(p) = &args.preset {
        opts.preset = p.clone();
    }
    if let Some(n) = args.samples {
        if n == 0 {
            bail!("--samples must be at least 1");
        }
        opts.samples = n;
    }
    if let Some(kib) = args.map_cache_kib {
        opts.map_cache = Some(kib.saturating_mul(1024));
    }
    let rows = with_progress(global, "{msg:>16} [{bar:40}] {pos}/{len} {eta}", |p| {
        run_scale(&opts, p)
    })?;
    if args.json {
        for r in &rows {
            writeln!(out, "{}", serde_json::to_string(r)?)?;
        }
    } else {
        writeln!(
            out,
            "preset {}, native file system, default configuration but access times off{}; {} \
             cold operations per row (index cache emptied before each); device time",
            opts.preset,
            match opts.map_cache {
                Some(b) => format!(", block device's map cache {} KiB", b / 1024),
                None => String::new(),
            },
            opts.samples
        )?;
        out.write_all(flashfs_bench::scale::table(&rows).as_bytes())?;
    }
    Ok(())
}

fn mount(args: &MountArgs, global: Global, out: &mut dyn Write) -> Result<()> {
    let mut opts = if args.quick {
        MountOptions::quick()
    } else {
        MountOptions::default()
    };
    opts.seed = args.seed;
    if !args.experiment.is_empty() {
        opts.experiments = args
            .experiment
            .iter()
            .filter_map(|e| Experiment::from_name(e))
            .collect();
    }
    if !args.fill.is_empty() {
        let mut fill = args.fill.clone();
        fill.sort_unstable();
        fill.dedup();
        if fill.iter().any(|&p| p == 0 || p > 95) {
            bail!("--fill takes percentages from 1 to 95");
        }
        opts.fill_pct = fill;
    }
    if !args.file_set.is_empty() {
        opts.file_sets = args
            .file_set
            .iter()
            .filter_map(|f| FileSet::from_name(f))
            .collect();
    }
    match args.mode.as_deref() {
        Some("fs") => opts.modes = vec![Mode::Fs],
        Some("ftl") => opts.modes = vec![Mode::Ftl],
        _ => {}
    }
    if let Some(p) = &args.preset {
        opts.ryu_park_part = Part::preset(p);
        opts.ryu_park_part.spec()?;
    }
    if let Some(b) = args.large_blocks {
        opts.flat_large = (b > 0).then(|| Part::with_blocks("nand-1g", b));
    }
    if !args.same_data.is_empty() {
        opts.flat_same_data = same_data_parts(&args.same_data)?;
    }
    if let Some(n) = args.cut_points {
        opts.cut_points = n;
    }
    let report = with_progress(
        global,
        "{msg:>32} [{bar:40}] {bytes}/{total_bytes} {eta}",
        |p| run_mount(&opts, p),
    )?;
    for note in &report.notes {
        eprintln!("note: {note}");
    }
    let json = report::json_lines(&report.rows)?;
    if let Some(path) = &args.json_out {
        std::fs::write(path, &json).with_context(|| format!("writing {}", path.display()))?;
    }
    if args.json {
        out.write_all(json.as_bytes())?;
    } else {
        let heap = flashfs_bench::heap::CountingAlloc::installed();
        out.write_all(flashfs_bench::mount::table::table(&report, heap).as_bytes())?;
    }
    if let Some(dir) = &args.plot {
        write_plots(dir, |dir| {
            Ok(flashfs_bench::mount::plot::plot(&report.rows, dir)?)
        })?;
    }
    Ok(())
}

fn frash_bench(args: &FrashArgs, global: Global, out: &mut dyn Write) -> Result<()> {
    let mut opts = if args.quick {
        FrashOptions::quick()
    } else {
        FrashOptions::default()
    };
    if !args.experiment.is_empty() {
        opts.experiments = args
            .experiment
            .iter()
            .filter_map(|e| frash::Experiment::from_name(e))
            .collect();
    }
    if !args.configs.is_empty() {
        opts.configs = args
            .configs
            .iter()
            .filter_map(|c| frash::Config::from_name(c))
            .collect();
    }
    if !args.partitions.is_empty() {
        let mut p = args.partitions.clone();
        p.sort_unstable();
        p.dedup();
        opts.partitions_mib = p;
    }
    if !args.file_kib.is_empty() {
        opts.file_kib = args.file_kib.clone();
    }
    if let Some(ns) = args.nvram_access_ns {
        if ns == 0 {
            bail!("--nvram-access-ns must be at least 1");
        }
        opts.nvram_access_ns = Some(ns);
    }
    if let Some(n) = args.ops_files {
        opts.ops_files = n;
    }
    opts.ops_one_volume = args.ops_one_volume;
    opts.nvram_file_bytes = args.nvram_file_bytes;
    if let Some(s) = args.seed {
        opts.seed = s;
    }
    let rows = with_progress(global, "{msg:>40} [{bar:40}] {pos}/{len} {eta}", |p| {
        run_frash(&opts, p)
    })?;
    let json = report::json_lines(&rows)?;
    if let Some(path) = &args.json_out {
        std::fs::write(path, &json).with_context(|| format!("writing {}", path.display()))?;
    }
    if args.json {
        out.write_all(json.as_bytes())?;
    } else {
        let heap = flashfs_bench::heap::CountingAlloc::installed();
        out.write_all(frash::table::table(&opts, &rows, heap).as_bytes())?;
    }
    if let Some(dir) = &args.plot {
        write_plots(dir, |dir| Ok(frash::plot::plot(&rows, dir)?))?;
    }
    Ok(())
}

/// The parts `--same-data` names: `none`, or PRESET:BLOCKS each.
fn same_data_parts(args: &[String]) -> Result<Vec<Part>> {
    if args.iter().any(|a| a == "none") {
        return Ok(Vec::new());
    }
    args.iter()
        .map(|a| {
            let (preset, blocks) = a
                .split_once(':')
                .with_context(|| format!("--same-data {a:?}: PRESET:BLOCKS or none"))?;
            let blocks: u32 = blocks
                .parse()
                .with_context(|| format!("--same-data {a:?}: blocks are a number"))?;
            let part = Part::with_blocks(preset, blocks);
            part.spec()?;
            Ok(part)
        })
        .collect()
}

fn tffs_bench(args: &TffsArgs, global: Global, out: &mut dyn Write) -> Result<()> {
    let mut opts = if args.quick {
        TffsOptions::quick()
    } else {
        TffsOptions::default()
    };
    opts.seed = args.seed;
    if !args.workload.is_empty() {
        opts.workloads = args
            .workload
            .iter()
            .filter_map(|w| WorkloadKind::from_name(w))
            .collect();
    }
    if !args.device.is_empty() {
        opts.devices = args
            .device
            .iter()
            .filter_map(|d| DeviceKind::from_label(d))
            .collect();
    }
    if !args.configs.is_empty() {
        opts.large_variants = None;
        opts.variants = args
            .configs
            .iter()
            .filter_map(|c| Variant::from_label(c))
            .collect();
    }
    if let Some(c) = args.cycles {
        if c == 0 {
            bail!("--cycles must be at least 1");
        }
        opts.cycles = c;
    }
    if let Some(c) = args.check_cycles {
        opts.check_cycles = (c > 0).then_some(c);
    }
    if let Some(w) = args.wear_spread {
        opts.wear_spread = Some(w);
    }
    match args.only.as_deref() {
        Some("capacity") => opts.endurance = false,
        Some("endurance") => opts.capacity = false,
        _ => {}
    }
    let rows = with_progress(global, "{msg:>28} [{bar:40}] {percent}% {eta}", |p| {
        run_tffs(&opts, p)
    })?;
    if args.json {
        out.write_all(report::json_lines(&rows)?.as_bytes())?;
    } else {
        out.write_all(tffs::table(&opts, &rows)?.as_bytes())?;
    }
    if let Some(dir) = &args.plot {
        write_plots(dir, |dir| Ok(tffs::plot(&rows, dir)?))?;
    }
    let failed: Vec<String> = rows
        .iter()
        .filter_map(|r| r.error.as_ref().map(|e| format!("{}: {e}", r.label())))
        .collect();
    if let Some(first) = failed.first() {
        bail!("{} row(s) failed; the first: {first}", failed.len());
    }
    Ok(())
}

fn kawaguchi(args: &KawaguchiArgs, global: Global, out: &mut dyn Write) -> Result<()> {
    let mut opts = if args.quick {
        KawaguchiOptions::quick()
    } else {
        KawaguchiOptions::default()
    };
    opts.basis = Basis::from_name(&args.basis).context("unknown utilization basis")?;
    opts.seed = args.seed;
    if let Some(mb) = args.mb {
        if !(mb > 0.0 && mb.is_finite()) {
            bail!("--mb must be a positive number of megabytes");
        }
        opts.mb_written = mb;
    }
    if !args.pattern.is_empty() {
        opts.patterns = args
            .pattern
            .iter()
            .filter_map(|p| Pattern::from_name(p))
            .collect();
    }
    if !args.util.is_empty() {
        if args.util.iter().any(|u| !(*u > 0.0 && *u < 100.0)) {
            bail!("--util takes percentages between 0 and 100");
        }
        opts.utilizations = Some(args.util.iter().map(|u| u / 100.0).collect());
    }
    if !args.policy.is_empty() {
        opts.policies = args
            .policy
            .iter()
            .filter_map(|p| Policy::from_name(p))
            .collect();
    }
    let rows = with_progress(
        global,
        "{msg:>24} [{bar:40}] {bytes}/{total_bytes} {eta}",
        |p| run_kawaguchi(&opts, p),
    )?;
    if args.json {
        out.write_all(report::json_lines(&rows)?.as_bytes())?;
    } else {
        out.write_all(report::table(&opts, &rows)?.as_bytes())?;
    }
    if let Some(dir) = &args.plot {
        write_plots(dir, |dir| Ok(plot::plot_all(&rows, dir)?))?;
    }
    let failed: Vec<&str> = rows.iter().filter_map(|r| r.error.as_deref()).collect();
    if let Some(first) = failed.first() {
        bail!("{} row(s) failed; the first: {first}", failed.len());
    }
    Ok(())
}

fn small_writes(args: &SmallWritesArgs, global: Global, out: &mut dyn Write) -> Result<()> {
    let mut opts = if args.quick {
        SmallWritesOptions::quick()
    } else {
        SmallWritesOptions::default()
    };
    opts.seed = args.seed;
    if !args.device.is_empty() {
        opts.devices = args.device.clone();
    }
    match args.pattern.as_deref() {
        Some("append") => opts.patterns = vec![WritePattern::Append],
        Some("random") => opts.patterns = vec![WritePattern::Random],
        _ => {}
    }
    if let Some(s) = args.sync.as_deref().and_then(SyncEvery::from_name) {
        opts.syncs = vec![s];
    }
    if !args.write_bytes.is_empty() {
        opts.write_sizes = args.write_bytes.clone();
    }
    if args.small_ram {
        opts.small_ram = true;
        opts.write_buffer_bytes = vec![flashfs::FsConfig::small_ram().write_buffer_bytes, 0];
    }
    if let Some(n) = args.write_buffer_bytes {
        opts.write_buffer_bytes = vec![n];
    }
    let rows = with_progress(global, "{msg:>40} [{bar:40}] {pos}/{len} {eta}", |p| {
        run_small_writes(&opts, p)
    })?;
    if args.json {
        out.write_all(report::json_lines(&rows)?.as_bytes())?;
    } else {
        out.write_all(flashfs_bench::small_writes::table(&rows).as_bytes())?;
    }
    Ok(())
}

fn peers(args: &PeersArgs, global: Global, out: &mut dyn Write) -> Result<()> {
    let mut opts = if args.quick {
        PeersOptions::quick()
    } else {
        PeersOptions::default()
    };
    opts.seed = args.seed;
    if !args.device.is_empty() {
        opts.devices = args
            .device
            .iter()
            .filter_map(|d| PeerDevice::from_name(d))
            .collect();
    }
    match args.sync.as_deref() {
        Some("off") => opts.syncs = vec![false],
        Some("on") => opts.syncs = vec![true],
        _ => {}
    }
    if let Some(n) = args.random_writes {
        if n == 0 {
            bail!("--random-writes must be at least 1");
        }
        opts.random_writes = n;
    }
    if let Some(c) = FlashfsConfig::from_name(&args.flashfs_config) {
        opts.flashfs_configs = vec![c];
    }
    if let Some(cuts) = args.cuts {
        if cuts == 0 {
            bail!("--cuts must be at least 1");
        }
        return peer_cuts(&opts, cuts, args.json, out);
    }
    if args.half_full {
        return peers_half_full(&opts, args.json, out);
    }
    let rows = with_progress(global, "{msg:>24} [{bar:40}] {pos}/{len} {eta}", |p| {
        run_peers(&opts, p)
    })?;
    if args.json {
        out.write_all(report::json_lines(&rows)?.as_bytes())?;
    } else {
        out.write_all(flashfs_bench::peers::table::table(&opts, &rows)?.as_bytes())?;
    }
    if let Some(dir) = &args.plot {
        write_plots(dir, |dir| Ok(flashfs_bench::peers::plot::plot(&rows, dir)?))?;
    }
    Ok(())
}

fn peers_half_full(opts: &PeersOptions, json: bool, out: &mut dyn Write) -> Result<()> {
    let mut rows = Vec::new();
    for &dev in opts.devices.iter().filter(|&&d| d != PeerDevice::Cy15b102q) {
        rows.extend(flashfs_bench::peers::half::run_half(dev, opts.seed)?);
    }
    if json {
        out.write_all(report::json_lines(&rows)?.as_bytes())?;
        return Ok(());
    }
    writeln!(
        out,
        "mount and first write on a half-full part: one file written in 64 KiB writes to half \
         the part, unmounted; then a mount and a new 64 B file, synced; device time. floor \
         (flashfs from its checkpoint): reading the checkpoint's slots and programming one, on \
         the same part model"
    )?;
    writeln!(
        out,
        "{:<10} {:<13} {:>11} {:>10} {:>13} {:>10} {:>11} {:>9} {:>8}",
        "DEVICE",
        "SYSTEM",
        "STORED MiB",
        "MOUNT ms",
        "1ST WRITE ms",
        "TOTAL ms",
        "PAGE READS",
        "FLOOR ms",
        "/FLOOR"
    )?;
    for r in &rows {
        let floor = r.floor_ms;
        writeln!(
            out,
            "{:<10} {:<13} {:>11.1} {:>10.2} {:>13.2} {:>10.2} {:>11} {:>9} {:>8}",
            r.device,
            r.system,
            r.stored_bytes as f64 / (1 << 20) as f64,
            r.mount_ms,
            r.first_write_ms,
            r.mount_first_write_ms,
            r.page_reads,
            floor.map_or("-".into(), |f| format!("{f:.2}")),
            floor.map_or("-".into(), |f| format!("{:.1}", r.mount_first_write_ms / f)),
        )?;
    }
    Ok(())
}

fn peer_cuts(opts: &PeersOptions, cuts: u64, json: bool, out: &mut dyn Write) -> Result<()> {
    let mut reports = Vec::new();
    for &dev in &opts.devices {
        reports.extend(run_littlefs_cuts(opts, dev, cuts)?);
    }
    if json {
        out.write_all(report::json_lines(&reports)?.as_bytes())?;
        return Ok(());
    }
    writeln!(
        out,
        "littlefs under power cuts: a {} KiB file written and synced, then {} random 64 B writes \
         each synced; cut points spread over the writes' device operations; after each cut a \
         mount, and the file must hold every acknowledged write and at most the one in flight",
        opts.random_file >> 10,
        opts.random_writes
    )?;
    for r in &reports {
        writeln!(
            out,
            "{} {}: {} ops, {} cuts: {} survived, {} mount failed, {} unreadable, {} wrong content{}",
            r.device,
            if r.torn { "torn" } else { "clean" },
            r.workload_ops,
            r.cuts,
            r.survived,
            r.mount_failed,
            r.unreadable,
            r.wrong_content,
            r.first_failure
                .as_ref()
                .map_or(String::new(), |f| format!("; first: {f}"))
        )?;
    }
    Ok(())
}
