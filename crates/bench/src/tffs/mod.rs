//! Gal & Toledo 2005 (TFFS), §5, on the native file system: capacity, endurance, erasures
//! per unit of user data, reclamation efficiency and RAM, for the fax, phone and
//! event-recorder workloads of §5.1 ([`workload`]) on the paper's devices ([`DeviceKind`]:
//! "8192/64", "448/64", "448/2") and file-system configurations ([`Variant`]: node fan-outs
//! of 7–14 and 2–4, with and without spare pointers, and more).
//!
//! Each row is one (workload, device, configuration) and runs twice on a fresh device:
//!
//! - **capacity** (§5.2, Fig 6): add data until the file system reports `ENOSPC`; the user
//!   data durable at that point, as a share of the device's bytes;
//! - **endurance** (§5.3, Fig 8): keep the device two-thirds full (of the file system's
//!   blocks), half of it static data and half changing, until one erase unit reaches the
//!   cycle limit; the user data written by then, as a share of the ideal (every unit erased
//!   to the limit, holding only user data). The same run gives the erasures per unit of user
//!   data (§5.4), the reclamation efficiency (Fig 10: user data / data written in block
//!   writes, including the cleaner's copies, excluding segment headers, tags and spare
//!   pointers), the commits' index writes, and the device time.
//!
//! The parts are rated for 100,000 cycles; simulating that many is out of reach, so the
//! cycle limit is scaled down ([`TffsOptions::cycles`]) and the wear leveller's trigger (a
//! spread of 1,000 erases between units by default, 1% of the rated cycles) with it. A
//! second limit ([`TffsOptions::check_cycles`]) reruns the endurance of one configuration
//! per workload to show the ratio does not depend on the limit.
//!
//! Heap: a [`HeapMeter`] runs over each run on its own thread, from just after the simulated
//! part is built (its own memory is not counted, see [`Uncounted`]) to the end; the figure
//! is the larger of the two runs. It needs [`crate::heap::CountingAlloc`] installed as the
//! global allocator (the `flashfs` binary does); otherwise it is `None`.

pub mod device;
pub mod workload;

use std::path::{Path, PathBuf};
use std::sync::mpsc::Sender;
use std::time::Instant;

use flashfs::fs::{Atime, Timespec};
use flashfs::{Fs, FsConfig};
use serde::Serialize;

pub use device::{Dev, DeviceKind, Uncounted, NOR_BLOCK_BYTES};
pub use workload::{Env, Mode, Stop, Workload, WorkloadKind};

use crate::error::{BenchError, Result};
use crate::heap::{uncounted, CountingAlloc, HeapMeter};
use crate::plot::{grouped_bar_chart, BarPanel};
use crate::report::{columns, group};
use crate::workers;

/// Erase cycles the parts are rated for (§5.1), the paper's endurance limit.
pub const PAPER_CYCLES: u32 = 100_000;
/// The cycle limit of the full run.
pub const FULL_CYCLES: u32 = 100;
/// The second limit of the full run, for the check that the limit does not change the ratio
/// (run on the smallest device, where it is cheap).
pub const FULL_CHECK_CYCLES: u32 = 400;
/// The cycle limit of the quick run.
pub const QUICK_CYCLES: u32 = 24;
/// The second limit of the quick run.
pub const QUICK_CHECK_CYCLES: u32 = 96;
/// Share of the file system's blocks kept in use in endurance runs (§5.3: "roughly
/// two-thirds full").
pub const FULLNESS: f64 = 2.0 / 3.0;
/// Share of the data in use that is static in endurance runs (§5.3: "half of the data
/// static").
pub const STATIC_SHARE: f64 = 0.5;

/// A file-system configuration (the bars of Figs 6, 8 and 10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Variant {
    /// The file system's defaults: nodes as full as they fit, spare pointers on.
    #[serde(rename = "default")]
    Default,
    /// Index nodes of 7–14 entries, spare pointers (the paper's "7–14").
    #[serde(rename = "7-14")]
    Wide,
    /// Index nodes of 2–4 entries, spare pointers ("2–4").
    #[serde(rename = "2-4")]
    Narrow,
    /// Index nodes of 2–4 entries, no spare pointers ("2–4 NSP").
    #[serde(rename = "2-4 NSP")]
    NarrowNsp,
    /// `FsConfig::small_ram`, the microcontroller profile: 8 KiB of cached index nodes, a commit
    /// every 32 dirty nodes, no extent maps, 4 KiB of write buffer and of sector-map pages.
    #[serde(rename = "small-RAM")]
    SmallRam,
    /// The defaults without the journal: every commit writes the index and a superblock.
    #[serde(rename = "no-journal")]
    NoJournal,
}

impl Variant {
    /// Every configuration, in the order of the tables.
    pub const ALL: [Variant; 6] = [
        Variant::Default,
        Variant::Wide,
        Variant::Narrow,
        Variant::NarrowNsp,
        Variant::SmallRam,
        Variant::NoJournal,
    ];

    /// Name in reports and on the command line.
    pub fn label(self) -> &'static str {
        match self {
            Variant::Default => "default",
            Variant::Wide => "7-14",
            Variant::Narrow => "2-4",
            Variant::NarrowNsp => "2-4 NSP",
            Variant::SmallRam => "small-RAM",
            Variant::NoJournal => "no-journal",
        }
    }

    /// Parses a name (`2-4-nsp` and `small-ram` too, for command lines).
    pub fn from_label(s: &str) -> Option<Variant> {
        let norm = |x: &str| x.to_ascii_lowercase().replace(' ', "-");
        Variant::ALL
            .into_iter()
            .find(|v| norm(v.label()) == norm(s))
    }

    /// Entries per index node, as the paper writes it.
    pub fn fanout(self) -> &'static str {
        match self {
            Variant::Default | Variant::SmallRam | Variant::NoJournal => "as many as fit",
            Variant::Wide => "7-14",
            Variant::Narrow | Variant::NarrowNsp => "2-4",
        }
    }

    /// Whether commits set spare pointers.
    pub fn spare_pointers(self) -> bool {
        self != Variant::NarrowNsp
    }

    /// What it sets, in a line.
    pub fn describe(self) -> &'static str {
        match self {
            Variant::Default => {
                "FsConfig defaults: nodes as full as 512 B allow, spare pointers, a journal"
            }
            Variant::Wide => "tree.max_entries 14 (merge below 7), spare pointers",
            Variant::Narrow => "tree.max_entries 4 (merge below 2), spare pointers",
            Variant::NarrowNsp => "tree.max_entries 4 (merge below 2), no spare pointers",
            Variant::SmallRam => {
                "FsConfig::small_ram: tree.cache_bytes 8 KiB (4 nodes at least), dirty_limit 32, \
                 extent_maps 0, write_buffer_bytes 4 KiB, ftl.map_cache 4 KiB"
            }
            Variant::NoJournal => "defaults but journal_blocks 0: every commit a checkpoint",
        }
    }

    /// The file system's configuration, with the wear leveller's trigger at `wear_spread`
    /// and the part rated for `cycles` (0: unknown).
    pub fn config(self, wear_spread: u32, cycles: u32) -> FsConfig {
        let base = match self {
            Variant::SmallRam => FsConfig::small_ram(),
            _ => FsConfig::default(),
        };
        let mut c = FsConfig {
            atime: Atime::Never,
            clock: fixed_clock,
            spare_pointers: Some(self.spare_pointers()),
            ..base
        };
        c.ftl.log.wear_spread = wear_spread;
        c.ftl.log.rated_cycles = cycles;
        match self {
            Variant::Default => {}
            Variant::Wide => c.tree.max_entries = Some(14),
            Variant::Narrow | Variant::NarrowNsp => c.tree.max_entries = Some(4),
            Variant::SmallRam => {}
            Variant::NoJournal => c.journal_blocks = Some(0),
        }
        c
    }
}

/// The wear leveller's trigger for a cycle limit: a tenth of the limit, at least 1.
///
/// The default, a spread of 1,000 erases, is 1% of the parts' rated 100,000 cycles. Scaled
/// to 1% of a limit of 100 it would be 1: the leveller would move static data nearly every
/// cycle, copying far more than on the real part, where it moves each static unit about
/// once per 1,000 cycles. Unscaled it would never run, and the static units would never
/// wear. A tenth of the limit keeps the moves rarer at the price of a less even wear (the
/// least-worn unit may trail by up to a tenth of the limit); the cycle-limit check shows
/// what is left of the difference.
pub fn wear_spread(cycles: u32) -> u32 {
    (cycles / 10).max(1)
}

/// Timestamps of the runs: fixed, so runs repeat exactly.
fn fixed_clock() -> Timespec {
    Timespec {
        sec: 1_120_000_000,
        nsec: 0,
    }
}

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub struct TffsOptions {
    /// Workloads.
    pub workloads: Vec<WorkloadKind>,
    /// Devices.
    pub devices: Vec<DeviceKind>,
    /// File-system configurations.
    pub variants: Vec<Variant>,
    /// Erase cycles after which a unit is worn out, in endurance runs.
    pub cycles: u32,
    /// A second cycle limit for the check rows (the default configuration, every workload,
    /// on 448/2 or else the last device, at both limits); `None`: no check.
    pub check_cycles: Option<u32>,
    /// Measure capacity.
    pub capacity: bool,
    /// Measure endurance.
    pub endurance: bool,
    /// Share of the blocks kept in use in endurance runs.
    pub fullness: f64,
    /// Share of the data in use that is static.
    pub static_share: f64,
    /// Seed of the workloads and the parts.
    pub seed: u64,
    /// Worker threads (0: one per CPU). Results do not depend on it.
    pub threads: usize,
    /// Whether this is the quick run (printed).
    pub quick: bool,
    /// Configurations run on the 8192/64 part (`None`: all of `variants`); its rows take
    /// most of the time.
    pub large_variants: Option<Vec<Variant>>,
    /// The wear leveller's trigger (erase-count spread); `None`: [`wear_spread`] of the
    /// cycle limit.
    pub wear_spread: Option<u32>,
}

impl Default for TffsOptions {
    /// The full run: every workload, device and configuration, a cycle limit of
    /// [`FULL_CYCLES`], checked at [`FULL_CHECK_CYCLES`].
    fn default() -> Self {
        TffsOptions {
            workloads: WorkloadKind::ALL.to_vec(),
            devices: DeviceKind::ALL.to_vec(),
            variants: Variant::ALL.to_vec(),
            cycles: FULL_CYCLES,
            check_cycles: Some(FULL_CHECK_CYCLES),
            capacity: true,
            endurance: true,
            fullness: FULLNESS,
            static_share: STATIC_SHARE,
            seed: 2005,
            threads: 0,
            quick: false,
            large_variants: None,
            wear_spread: None,
        }
    }
}

impl TffsOptions {
    /// The quick run: a cycle limit of [`QUICK_CYCLES`], checked at [`QUICK_CHECK_CYCLES`],
    /// and only the default configuration on the 8192/64 part.
    pub fn quick() -> Self {
        TffsOptions {
            cycles: QUICK_CYCLES,
            check_cycles: Some(QUICK_CHECK_CYCLES),
            quick: true,
            large_variants: Some(vec![Variant::Default]),
            ..TffsOptions::default()
        }
    }

    /// The wear leveller's trigger for a cycle limit.
    pub fn spread_for(&self, cycles: u32) -> u32 {
        self.wear_spread.unwrap_or_else(|| wear_spread(cycles))
    }

    fn check(&self) -> Result<()> {
        let bad = |why: &str| Err(BenchError::InvalidOptions(why.to_string()));
        if self.workloads.is_empty() || self.devices.is_empty() || self.variants.is_empty() {
            return bad("no workload, device or configuration to run");
        }
        if !self.capacity && !self.endurance {
            return bad("neither capacity nor endurance to measure");
        }
        if self.cycles == 0 || self.check_cycles == Some(0) {
            return bad("a cycle limit must be at least 1");
        }
        if !(self.fullness > 0.0 && self.fullness < 1.0) {
            return bad("the fullness must be between 0 and 1");
        }
        if !(self.static_share >= 0.0 && self.static_share < 1.0) {
            return bad("the static share must be at least 0 and below 1");
        }
        Ok(())
    }
}

/// One row: a workload on a device with a configuration, and what it measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TffsRow {
    /// Workload.
    pub workload: WorkloadKind,
    /// Device, as the paper labels it.
    pub device: DeviceKind,
    /// Simulator preset.
    pub preset: &'static str,
    /// Erase units.
    pub units: u32,
    /// Bytes per erase unit.
    pub unit_bytes: u32,
    /// Bytes of the device.
    pub device_bytes: u64,
    /// File-system configuration.
    pub config: Variant,
    /// Entries per index node.
    pub fanout: &'static str,
    /// Spare pointers.
    pub spare_pointers: bool,
    /// When the workload commits.
    pub durability: &'static str,
    /// Erases per unit after which a unit is worn out.
    pub cycle_limit: u32,
    /// Whether this row only checks the cycle limit (endurance of one configuration at a
    /// second limit).
    pub limit_check: bool,
    /// Blocks of the file system, and bytes per block.
    pub fs_blocks: u64,
    /// Bytes per block.
    pub block_bytes: u32,
    /// User data durable at the first `ENOSPC`, % of the device's bytes.
    pub capacity_pct: Option<f64>,
    /// User data durable at the first `ENOSPC`, bytes.
    pub capacity_bytes: Option<u64>,
    /// User data written before an erase unit reached the cycle limit, % of the ideal
    /// (units x unit bytes x cycle limit).
    pub endurance_pct: Option<f64>,
    /// User data written before an erase unit reached the cycle limit, bytes.
    pub endurance_bytes: Option<u64>,
    /// Erases per unit's worth of user data written (the same run and counts as
    /// `endurance_pct`).
    pub erasures_per_unit: Option<f64>,
    /// Erases of the whole device by the end of the endurance run.
    pub erases: Option<u64>,
    /// Mean erases per unit at the end, / the cycle limit: how evenly the device wore
    /// (`endurance_pct` x `erasures_per_unit` / 100 is the same figure).
    pub wear_evenness: Option<f64>,
    /// User data / data written in block writes (the file system's blocks: data, index
    /// nodes, superblocks; and the cleaner's copies). Headers, tags and spare pointers
    /// excluded.
    pub reclaim_eff: Option<f64>,
    /// Heap high-water mark of the file system, bytes (`None` without the counting
    /// allocator).
    pub heap_bytes: Option<u64>,
    /// TFFS's RAM on this device (§5.1).
    pub paper_ram_bytes: u64,
    /// TFFS's endurance on this workload (§5.3 text; Fig 8 is not legible).
    pub paper_endurance: &'static str,
    /// Share of the file system's blocks in use at the end of the endurance run.
    pub fullness: Option<f64>,
    /// Blocks written in the endurance run: file data.
    pub data_blocks: Option<u64>,
    /// Index nodes.
    pub node_blocks: Option<u64>,
    /// Superblocks written as whole blocks (one per checkpoint, or fewer where they append
    /// their superblock in place).
    pub superblocks: Option<u64>,
    /// Blocks the cleaner copied.
    pub copied_blocks: Option<u64>,
    /// Of `copied_blocks`, those copied to level wear.
    pub wear_copied_blocks: Option<u64>,
    /// Spare pointers set (patches in place, not block writes).
    pub node_patches: Option<u64>,
    /// Segments the wear leveller moved (their live blocks are among the copies).
    pub wear_moves: Option<u64>,
    /// Journal blocks written (their entries are programmed into them in place).
    pub journal_blocks: Option<u64>,
    /// Commits.
    pub commits: Option<u64>,
    /// Commits that were journal entries.
    pub journal_entries: Option<u64>,
    /// Commits whose every add committed itself by its frame: no entry, no index (the
    /// commits neither these nor entries wrote the index and a superblock).
    pub frame_commits: Option<u64>,
    /// Index nodes written per commit.
    pub node_writes_per_commit: Option<f64>,
    /// Spare pointers set per commit.
    pub node_patches_per_commit: Option<f64>,
    /// Device seconds of the endurance run.
    pub device_seconds: Option<f64>,
    /// Host seconds of the row.
    pub host_seconds: f64,
    /// Why the row could not run (the configuration does not fit the device), if so.
    pub skipped: Option<String>,
    /// The failure that ended a run, if any.
    pub error: Option<String>,
}

impl TffsRow {
    /// A short label: workload, device, configuration, limit.
    pub fn label(&self) -> String {
        format!(
            "{} {} {}{}",
            self.workload.name(),
            self.device.label(),
            self.config.label(),
            if self.limit_check {
                format!(" @{}", self.cycle_limit)
            } else {
                String::new()
            }
        )
    }
}

/// TFFS's endurance for a workload, as §5.3 states it.
pub fn paper_endurance(w: WorkloadKind, d: DeviceKind) -> &'static str {
    match (w, d) {
        (WorkloadKind::Fax, DeviceKind::St10f280Small) => "> 75% mostly; poorer on 448/2",
        (WorkloadKind::Fax, _) => "> 75%, some > 90%",
        _ => "< 50%",
    }
}

/// What §5.2 says of TFFS's capacity for a workload and device (Fig 6's bars are not
/// legible in the text).
pub fn paper_capacity(w: WorkloadKind, d: DeviceKind) -> &'static str {
    match (w, d) {
        (WorkloadKind::Fax, DeviceKind::St10f280Small) => "lower: 1 KB extents fragment 2 KB units",
        (WorkloadKind::Fax, _) => "highest of the workloads (large extents)",
        (_, DeviceKind::St10f280) => "low: few erase units",
        (_, DeviceKind::St10f280Small) => "small units help",
        _ => "below fax (small records); wide nodes help",
    }
}

/// A row to run.
#[derive(Debug, Clone, Copy)]
struct Job {
    workload: WorkloadKind,
    device: DeviceKind,
    variant: Variant,
    cycles: u32,
    wear_spread: u32,
    check: bool,
}

impl Job {
    fn label(&self) -> String {
        format!(
            "{} {} {}{}",
            self.workload.name(),
            self.device.label(),
            self.variant.label(),
            if self.check {
                format!(" @{}", self.cycles)
            } else {
                String::new()
            }
        )
    }
}

fn empty_row(job: &Job) -> Result<TffsRow> {
    let spec = job.device.spec()?;
    Ok(TffsRow {
        workload: job.workload,
        device: job.device,
        preset: job.device.preset(),
        units: spec.units,
        unit_bytes: spec.unit_size,
        device_bytes: spec.capacity(),
        config: job.variant,
        fanout: job.variant.fanout(),
        spare_pointers: job.variant.spare_pointers(),
        durability: job.workload.durability(),
        cycle_limit: job.cycles,
        limit_check: job.check,
        fs_blocks: 0,
        block_bytes: NOR_BLOCK_BYTES,
        capacity_pct: None,
        capacity_bytes: None,
        endurance_pct: None,
        endurance_bytes: None,
        erasures_per_unit: None,
        erases: None,
        wear_evenness: None,
        reclaim_eff: None,
        heap_bytes: None,
        paper_ram_bytes: job.device.paper_ram_bytes(),
        paper_endurance: paper_endurance(job.workload, job.device),
        fullness: None,
        data_blocks: None,
        node_blocks: None,
        superblocks: None,
        copied_blocks: None,
        wear_copied_blocks: None,
        node_patches: None,
        wear_moves: None,
        journal_blocks: None,
        commits: None,
        journal_entries: None,
        frame_commits: None,
        node_writes_per_commit: None,
        node_patches_per_commit: None,
        device_seconds: None,
        host_seconds: 0.0,
        skipped: None,
        error: None,
    })
}

/// Formats a file system for a run on `dev`, or says why the configuration does not fit.
fn format(job: &Job, dev: Dev) -> std::result::Result<Fs<Dev>, String> {
    Fs::format(dev, job.variant.config(job.wear_spread, job.cycles)).map_err(|e| {
        format!(
            "the file system does not fit the {} ({} units of {} B) in this configuration: {e}",
            job.device.preset(),
            dev_units(job.device),
            dev_unit_bytes(job.device)
        )
    })
}

fn dev_units(d: DeviceKind) -> u32 {
    d.spec().map_or(0, |s| s.units)
}

fn dev_unit_bytes(d: DeviceKind) -> u32 {
    d.spec().map_or(0, |s| s.unit_size)
}

/// What a run's end means for the row: (why it could not run, why it failed).
fn stop_error(s: Stop, expected: &str) -> (Option<String>, Option<String>) {
    let e = match s {
        Stop::Infeasible(why) => return (Some(why), None),
        Stop::Failed(e) => Some(e.to_string()),
        Stop::Full if expected == "full" => None,
        Stop::WornOut if expected == "worn out" => None,
        Stop::Full => Some("the file system filled up (ENOSPC) during the endurance run".into()),
        Stop::WornOut => Some("the device wore out during the capacity run".into()),
    };
    (None, e)
}

/// Runs one row; `progress` hears the share done (0 to 1).
fn run_job(opts: &TffsOptions, job: &Job, progress: &mut dyn FnMut(f64)) -> Result<TffsRow> {
    let started = Instant::now();
    let mut row = empty_row(job)?;
    let counting = CountingAlloc::installed();
    let mut heap = 0u64;
    let capacity = opts.capacity && !job.check;
    let cap_share = if capacity && opts.endurance { 0.2 } else { 1.0 };
    if capacity {
        // The baseline is taken once the part is built: its image is not the file system's.
        let dev = job.device.build(opts.seed)?;
        let meter = HeapMeter::start();
        let fs = match format(job, dev) {
            Ok(fs) => fs,
            Err(why) => {
                row.skipped = Some(why);
                row.host_seconds = started.elapsed().as_secs_f64();
                return Ok(row);
            }
        };
        row.fs_blocks = fs.statfs().blocks;
        let mut env = Env::new(fs, Mode::Capacity);
        let mut w = Workload::new(job.workload, opts.seed);
        let stop = w.run(&mut env, &mut |f| progress(f * cap_share));
        (row.skipped, row.error) = stop_error(stop, "full");
        row.capacity_bytes = Some(env.durable_bytes);
        row.capacity_pct = Some(100.0 * env.durable_bytes as f64 / row.device_bytes as f64);
        heap = heap.max(meter.peak());
        uncounted(|| drop(env));
    }
    if opts.endurance && row.error.is_none() && row.skipped.is_none() {
        let dev = job.device.build(opts.seed)?;
        let meter = HeapMeter::start();
        let fs = match format(job, dev) {
            Ok(fs) => fs,
            Err(why) => {
                row.skipped = Some(why);
                row.host_seconds = started.elapsed().as_secs_f64();
                return Ok(row);
            }
        };
        row.fs_blocks = fs.statfs().blocks;
        let mode = Mode::Endurance {
            cycles: job.cycles,
            fullness: opts.fullness,
            static_share: opts.static_share,
        };
        let mut env = Env::new(fs, mode);
        let mut w = Workload::new(job.workload, opts.seed);
        let base = if capacity { cap_share } else { 0.0 };
        let stop = w.run(&mut env, &mut |f| {
            progress(base + f.min(1.0) * (1.0 - base));
        });
        heap = heap.max(meter.peak());
        let (skipped, error) = stop_error(stop, "worn out");
        row.error = error;
        match skipped {
            Some(why) => row.skipped = Some(format!("endurance: {why}")),
            None if row.error.is_none() => row.error = endurance_figures(&mut row, &env),
            None => {}
        }
        uncounted(|| drop(env));
    }
    if counting && !job.check {
        row.heap_bytes = Some(heap);
    }
    progress(1.0);
    row.host_seconds = started.elapsed().as_secs_f64();
    Ok(row)
}

/// The endurance run's figures: from the steady state (the device first at its target
/// fullness) to the moment a unit reached the cycle limit, from the log's and the file
/// system's counters.
fn endurance_figures(row: &mut TffsRow, env: &Env<Dev>) -> Option<String> {
    let (Some(a), Some(b)) = (env.steady, env.worn) else {
        return Some(format!(
            "a unit reached {} erases before the device first reached its target fullness \
             (raise the cycle limit)",
            row.cycle_limit
        ));
    };
    let unit = u64::from(row.unit_bytes);
    let user = b.user_bytes - a.user_bytes;
    let erases = b.erases - a.erases;
    // The erase budget left when the steady state began: every unit up to the limit.
    let budget = (u64::from(row.units) * u64::from(row.cycle_limit)).saturating_sub(a.erases);
    row.endurance_bytes = Some(user);
    row.erases = Some(erases);
    if budget > 0 {
        row.endurance_pct = Some(100.0 * user as f64 / (budget * unit) as f64);
        row.wear_evenness = Some(erases as f64 / budget as f64);
    }
    if user > 0 {
        row.erasures_per_unit = Some(erases as f64 * unit as f64 / user as f64);
    }
    let slot = u64::from(row.block_bytes);
    let user_slots = b.log.user_slots - a.log.user_slots;
    let copied = b.log.copied_slots - a.log.copied_slots;
    if user_slots + copied > 0 {
        row.reclaim_eff = Some(user as f64 / ((user_slots + copied) * slot) as f64);
    }
    let nodes = b.fs.node_writes - a.fs.node_writes;
    let commits = b.fs.commits - a.fs.commits;
    let superblocks = b.fs.superblock_writes - a.fs.superblock_writes;
    let patches = b.fs.node_patches - a.fs.node_patches;
    row.fullness = Some(env.used_fraction());
    row.node_blocks = Some(nodes);
    row.superblocks = Some(superblocks);
    let journal = b.fs.journal_blocks - a.fs.journal_blocks;
    row.journal_blocks = Some(journal);
    row.journal_entries = Some(b.fs.journal_entries - a.fs.journal_entries);
    row.frame_commits = Some(b.fs.frame_commits - a.fs.frame_commits);
    row.data_blocks = Some(user_slots.saturating_sub(nodes + superblocks + journal));
    row.copied_blocks = Some(copied);
    row.wear_copied_blocks = Some(b.log.wear_copied_slots - a.log.wear_copied_slots);
    row.node_patches = Some(patches);
    row.wear_moves = Some(b.log.wear_moves - a.log.wear_moves);
    row.commits = Some(commits);
    if commits > 0 {
        row.node_writes_per_commit = Some(nodes as f64 / commits as f64);
        row.node_patches_per_commit = Some(patches as f64 / commits as f64);
    }
    row.device_seconds = Some((b.device_time - a.device_time).as_secs_f64());
    None
}

/// Runs the rows and returns them: for every workload, device and configuration one row
/// (capacity and endurance), then the check rows (endurance at the second cycle limit, the
/// default configuration or the first one asked for, the first device).
///
/// `progress(label, done, total)` is called on the calling thread as rows advance: `label`
/// names the row that advanced, `done` of `total` counts thousandths of rows.
///
/// A configuration that does not fit its device is returned with [`TffsRow::skipped`]
/// set; a run that fails part way with [`TffsRow::error`] and the figures of what it did.
/// Bad options and worker panics are errors.
pub fn run_tffs(
    opts: &TffsOptions,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<Vec<TffsRow>> {
    opts.check()?;
    let mut jobs = Vec::new();
    for &workload in &opts.workloads {
        for &device in &opts.devices {
            for &variant in &opts.variants {
                let large = device == DeviceKind::M29dw640d;
                if large
                    && opts
                        .large_variants
                        .as_ref()
                        .is_some_and(|v| !v.contains(&variant))
                {
                    continue;
                }
                jobs.push(Job {
                    workload,
                    device,
                    variant,
                    cycles: opts.cycles,
                    wear_spread: opts.spread_for(opts.cycles),
                    check: false,
                });
            }
        }
    }
    if let (Some(c), true) = (opts.check_cycles, opts.endurance) {
        let variant = if opts.variants.contains(&Variant::Default) {
            Variant::Default
        } else {
            opts.variants[0]
        };
        let device = if opts.devices.contains(&DeviceKind::St10f280Small) {
            DeviceKind::St10f280Small
        } else {
            opts.devices[opts.devices.len() - 1]
        };
        for &workload in &opts.workloads {
            for cycles in [opts.cycles, c] {
                jobs.push(Job {
                    workload,
                    device,
                    variant,
                    cycles,
                    wear_spread: opts.spread_for(cycles),
                    check: true,
                });
            }
        }
    }
    // Longest first: the 8 MB rows, so the small ones fill the gaps at the end.
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&i| {
        let j = &jobs[i];
        std::cmp::Reverse(u64::from(dev_units(j.device)) * u64::from(dev_unit_bytes(j.device)))
    });
    let total = jobs.len() as u64 * 1000;
    let labels: Vec<String> = jobs.iter().map(|j| j.label()).collect();
    let work = |i: usize, tx: &Sender<workers::Report>| {
        // Thousandths of the job reported so far. Progress messages are the benchmark's,
        // not the file system's heap.
        let mut last = 0u64;
        let mut report = |p: u64| {
            if p > last {
                let _ = uncounted(|| tx.send((labels[i].clone(), p - last)));
                last = p;
            }
        };
        let r = run_job(opts, &jobs[i], &mut |f| {
            report((f.clamp(0.0, 1.0) * 1000.0) as u64)
        });
        report(1000);
        r
    };
    workers::run(&order, opts.threads, total, &work, progress)
}

/// The settings every row shares, for printing above the tables.
pub fn describe(opts: &TffsOptions) -> Result<Vec<String>> {
    opts.check()?;
    let mut lines = vec![format!(
        "TFFS §5 (Gal & Toledo 2005) on the native file system{}; seed {}",
        if opts.quick { ", quick run" } else { "" },
        opts.seed
    )];
    for &d in &opts.devices {
        let s = d.spec()?;
        lines.push(format!(
            "device {}: preset {}, {} erase units x {} KiB = {} KiB; read {} ns/word, program {} \
             us/word of {} B, erase {} ms; file-system blocks of {} B (the index's smallest \
             node), {} per unit after the unit's header and tags",
            d.label(),
            d.preset(),
            s.units,
            s.unit_size / 1024,
            s.capacity() / 1024,
            s.timing.read_word_ns,
            s.timing.program_word_ns / 1000,
            s.word_size,
            s.timing.erase_ns / 1_000_000,
            NOR_BLOCK_BYTES,
            slots_per_unit(d).map_or("?".into(), |n| n.to_string())
        ));
    }
    for &v in &opts.variants {
        lines.push(format!("config {}: {}", v.label(), v.describe()));
    }
    if let Some(large) = &opts.large_variants {
        let names: Vec<&str> = large.iter().map(|v| v.label()).collect();
        lines.push(format!(
            "on 8192/64 only: {} (the other configurations there take minutes)",
            names.join(", ")
        ));
    }
    lines.push(
        "every config: access times off, fixed clock, cleaner and log defaults (adaptive \
         policy, separate cleaning and metadata heads, 2 reserve segments)"
            .to_string(),
    );
    for &w in &opts.workloads {
        lines.push(format!("durability, {}: {}", w.name(), w.durability()));
    }
    lines.push(
        "choices the paper leaves open: fax history records 32 B; SMS 20-160 B, appointments \
         16-64 B, address-book entries 24-96 B; the recorder's rare-event log keeps 100 records"
            .to_string(),
    );
    if opts.capacity {
        lines.push(
            "capacity: fresh device; add faxes / simulate days (SMS never deleted) / record \
             events (logs not cyclic) until ENOSPC; user data durable then / device bytes"
                .to_string(),
        );
    }
    if opts.endurance {
        lines.push(format!(
            "endurance: fresh device kept {:.0}% full (of the file system's blocks), {:.0}% of \
             that static (fax: kept faxes; phone: saved SMS; recorder: an event archive) and \
             the rest changing (oldest faxes / SMS deleted; the recorder's event log cyclic, \
             sized to the target) until a unit reaches {} erases (the parts are rated {}; the \
             wear leveller's spread trigger scaled to {}); user data written by then / (units \
             x unit bytes x {})",
            opts.fullness * 100.0,
            opts.static_share * 100.0,
            opts.cycles,
            group(u64::from(PAPER_CYCLES)),
            opts.spread_for(opts.cycles),
            opts.cycles
        ));
        if let Some(c) = opts.check_cycles {
            lines.push(format!(
                "cycle-limit check: the endurance of one configuration per workload again at \
                 {c} erases"
            ));
        }
    }
    lines.push(
        "reclamation efficiency: user data / bytes of the file system's blocks written \
         (data, index nodes, superblocks) and copied by the cleaner; segment headers, tags \
         and spare pointers excluded, as the paper does"
            .to_string(),
    );
    lines.push(format!(
        "heap: high-water mark of the thread running the file system, from just after the \
         simulated part is built to the end of each run (the part's own memory not counted){}",
        if CountingAlloc::installed() {
            ""
        } else {
            "; NOT MEASURED: the counting allocator is not installed"
        }
    ));
    Ok(lines)
}

/// Slots of file-system blocks per erase unit of a device.
fn slots_per_unit(d: DeviceKind) -> Option<u32> {
    use flashfs::Segments;
    d.build(0).ok().map(|dev| dev.geometry().slots)
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.1}"))
}

fn frac(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.3}"))
}

fn bytes(v: Option<u64>) -> String {
    v.map_or_else(|| "-".into(), group)
}

/// Configurations in the rows, in order.
fn variants_of(rows: &[TffsRow]) -> Vec<Variant> {
    let mut v: Vec<Variant> = Vec::new();
    for r in rows.iter().filter(|r| !r.limit_check) {
        if !v.contains(&r.config) {
            v.push(r.config);
        }
    }
    v
}

/// (workload, device) pairs in the rows, in order.
fn pairs_of(rows: &[TffsRow]) -> Vec<(WorkloadKind, DeviceKind)> {
    let mut v = Vec::new();
    for r in rows.iter().filter(|r| !r.limit_check) {
        if !v.contains(&(r.workload, r.device)) {
            v.push((r.workload, r.device));
        }
    }
    v
}

/// One table: a line per (workload, device), a column per configuration, and the paper's
/// column.
fn pivot(
    rows: &[TffsRow],
    cell: &dyn Fn(&TffsRow) -> String,
    paper_header: &str,
    paper: &dyn Fn(WorkloadKind, DeviceKind) -> String,
) -> String {
    let variants = variants_of(rows);
    let mut header: Vec<&str> = vec!["workload", "device"];
    header.extend(variants.iter().map(|v| v.label()));
    header.push(paper_header);
    let mut lines = Vec::new();
    for (w, d) in pairs_of(rows) {
        let mut line = vec![w.name().to_string(), d.label().to_string()];
        for v in &variants {
            let r = rows
                .iter()
                .find(|r| !r.limit_check && r.workload == w && r.device == d && r.config == *v);
            line.push(match r {
                Some(r) => match cell(r) {
                    c if c == "-" && r.skipped.is_some() => "n/a".into(),
                    c => c,
                },
                None => "-".into(),
            });
        }
        line.push(paper(w, d));
        lines.push(line);
    }
    let last = header.len() - 1;
    columns(&header, &lines, &[0, 1, last])
}

/// The tables: the settings, then capacity, endurance, erasures per unit, reclamation
/// efficiency, heap, where the writes go, the cycle-limit check, and notes on skipped and
/// failed rows.
pub fn table(opts: &TffsOptions, rows: &[TffsRow]) -> Result<String> {
    let mut out = String::new();
    for l in describe(opts)? {
        out.push_str(&l);
        out.push('\n');
    }
    let mut section = |title: &str, body: String| {
        out.push('\n');
        out.push_str(title);
        out.push('\n');
        out.push_str(&body);
    };
    if opts.capacity {
        section(
            "Capacity, % of the device's bytes held as user data at the first ENOSPC (TFFS Fig 6; \
             its bars are not legible in the text, §5.2 says)",
            pivot(rows, &|r| pct(r.capacity_pct), "TFFS (§5.2)", &|w, d| {
                paper_capacity(w, d).into()
            }),
        );
    }
    if opts.endurance {
        section(
            &format!(
                "Endurance, % of the ideal: user data written before a unit reached {} erases \
                 (TFFS Fig 8, two-thirds full, half static)",
                opts.cycles
            ),
            pivot(rows, &|r| pct(r.endurance_pct), "TFFS (§5.3)", &|w, d| {
                paper_endurance(w, d).into()
            }),
        );
        section(
            "Erasures per erase unit's worth of user data written (TFFS §5.4: almost exactly \
             the inverse of endurance); in brackets, mean erases / limit at the end",
            pivot(
                rows,
                &|r| match (r.erasures_per_unit, r.wear_evenness) {
                    (Some(e), Some(w)) => format!("{e:.2} ({w:.2})"),
                    (e, _) => frac(e),
                },
                "TFFS",
                &|_, _| "1 / endurance".into(),
            ),
        );
        section(
            "Reclamation efficiency: user data / data written in block writes, cleaner copies \
             included (TFFS Fig 10)",
            pivot(rows, &|r| frac(r.reclaim_eff), "TFFS", &|_, _| {
                "spare pointers help".into()
            }),
        );
    }
    section(
        "Heap high-water mark of the file system, bytes (TFFS §5.1: 466 B for 8 MB, 109 B for \
         0.5 MB)",
        pivot(rows, &|r| bytes(r.heap_bytes), "TFFS", &|_, d| {
            format!("{} B", d.paper_ram_bytes())
        }),
    );
    if opts.endurance {
        let mut lines = Vec::new();
        for r in rows
            .iter()
            .filter(|r| r.skipped.is_none() && r.endurance_bytes.is_some())
        {
            let user = r.endurance_bytes.unwrap_or(0).max(1) as f64;
            let per = |n: Option<u64>| {
                n.map_or("-".into(), |n| {
                    format!("{:.2}", n as f64 * f64::from(r.block_bytes) / user)
                })
            };
            lines.push(vec![
                r.label(),
                per(r.data_blocks),
                per(r.node_blocks),
                per(r.superblocks),
                per(r.journal_blocks),
                per(r.copied_blocks),
                r.wear_moves.map_or("-".into(), group),
                r.commits.map_or("-".into(), group),
                r.journal_entries.map_or("-".into(), group),
                r.frame_commits.map_or("-".into(), group),
                frac(r.node_writes_per_commit),
                frac(r.node_patches_per_commit),
                pct(r.fullness.map(|f| f * 100.0)),
                r.device_seconds.map_or("-".into(), |s| format!("{s:.0}")),
            ]);
        }
        section(
            "Where the endurance runs' writes went: bytes per byte of user data, by kind of \
             block",
            columns(
                &[
                    "row",
                    "data",
                    "index",
                    "superblocks",
                    "journal",
                    "copies",
                    "wear moves",
                    "commits",
                    "entries",
                    "frames",
                    "nodes/commit",
                    "patches/commit",
                    "full %",
                    "device s",
                ],
                &lines,
                &[0],
            ),
        );
    }
    let checks: Vec<&TffsRow> = rows.iter().filter(|r| r.limit_check).collect();
    if let (false, Some(second)) = (checks.is_empty(), opts.check_cycles) {
        let mut lines = Vec::new();
        let mut seen = Vec::new();
        for c in &checks {
            if seen.contains(&c.workload) {
                continue;
            }
            seen.push(c.workload);
            let at = |l: u32| {
                checks
                    .iter()
                    .find(|r| r.workload == c.workload && r.cycle_limit == l)
            };
            let (a, b) = (at(opts.cycles), at(second));
            let e = |r: Option<&&TffsRow>| pct(r.and_then(|r| r.endurance_pct));
            let u = |r: Option<&&TffsRow>| {
                r.and_then(|r| r.erasures_per_unit)
                    .map_or("-".into(), |e| format!("{e:.2}"))
            };
            let w = |r: Option<&&TffsRow>| frac(r.and_then(|r| r.wear_evenness));
            lines.push(vec![
                c.workload.name().to_string(),
                c.device.label().to_string(),
                c.config.label().to_string(),
                e(a),
                e(b),
                u(a),
                u(b),
                w(a),
                w(b),
            ]);
        }
        let h = |what: &str, l: u32| format!("{what} @{l}/{}", opts.spread_for(l));
        let heads = [
            h("endurance", opts.cycles),
            h("endurance", second),
            h("erasures/unit", opts.cycles),
            h("erasures/unit", second),
            h("evenness", opts.cycles),
            h("evenness", second),
        ];
        let mut header = vec!["workload", "device", "config"];
        header.extend(heads.iter().map(String::as_str));
        section(
            "Cycle-limit check: the same rows worn out at two limits (@limit/leveller trigger); \
             evenness = erases in the measured phase / the erase budget left at its start",
            columns(&header, &lines, &[0, 1, 2]),
        );
    }
    let notes: Vec<String> = rows
        .iter()
        .filter_map(|r| {
            r.skipped
                .as_ref()
                .map(|s| format!("n/a {}: {s}", r.label()))
                .or_else(|| {
                    r.error
                        .as_ref()
                        .map(|e| format!("FAILED {}: {e}", r.label()))
                })
        })
        .collect();
    if !notes.is_empty() {
        section("Notes", notes.join("\n") + "\n");
    }
    Ok(out)
}

/// Draws the bar charts of Figs 6, 8 and 10 into `dir`: `tffs-capacity`, `tffs-endurance`
/// and `tffs-reclamation` (PNG and SVG), a panel per workload, a group of bars per device,
/// a bar per configuration, TFFS's stated endurance as reference lines. Returns the files.
pub fn plot(rows: &[TffsRow], dir: &Path) -> Result<Vec<PathBuf>> {
    let variants = variants_of(rows);
    let mut workloads: Vec<WorkloadKind> = Vec::new();
    let mut devices: Vec<DeviceKind> = Vec::new();
    for r in rows.iter().filter(|r| !r.limit_check) {
        if !workloads.contains(&r.workload) {
            workloads.push(r.workload);
        }
        if !devices.contains(&r.device) {
            devices.push(r.device);
        }
    }
    let panels = |metric: &dyn Fn(&TffsRow) -> Option<f64>,
                  refs: &dyn Fn(WorkloadKind) -> Vec<(String, f64)>| {
        workloads
            .iter()
            .map(|&w| BarPanel {
                title: w.name().to_string(),
                groups: devices.iter().map(|d| d.label().to_string()).collect(),
                series: variants
                    .iter()
                    .map(|&v| {
                        let values = devices
                            .iter()
                            .map(|&d| {
                                rows.iter()
                                    .find(|r| {
                                        !r.limit_check
                                            && r.workload == w
                                            && r.device == d
                                            && r.config == v
                                    })
                                    .and_then(metric)
                            })
                            .collect();
                        (v.label().to_string(), values)
                    })
                    .collect(),
                references: refs(w),
            })
            .collect::<Vec<_>>()
    };
    let mut files = Vec::new();
    let none = |_: WorkloadKind| -> Vec<(String, f64)> { Vec::new() };
    let any = |ps: &[BarPanel]| {
        ps.iter()
            .any(|p| p.series.iter().any(|s| s.1.iter().any(Option::is_some)))
    };
    let cap = panels(&|r| r.capacity_pct, &none);
    if any(&cap) {
        files.extend(grouped_bar_chart(
            dir,
            "tffs-capacity",
            "Capacity: user data stored when full (cf. TFFS Fig 6)",
            "% of device bytes",
            Some(100.0),
            &cap,
        )?);
    }
    let end = panels(&|r| r.endurance_pct, &|w| match w {
        WorkloadKind::Fax => vec![("TFFS fax: > 75%".into(), 75.0)],
        _ => vec![("TFFS: < 50%".into(), 50.0)],
    });
    if !any(&end) {
        return Ok(files);
    }
    files.extend(grouped_bar_chart(
        dir,
        "tffs-endurance",
        "Endurance: user data written before wear-out (cf. TFFS Fig 8)",
        "% of the ideal",
        Some(100.0),
        &end,
    )?);
    let rec = panels(&|r| r.reclaim_eff.map(|e| e * 100.0), &none);
    files.extend(grouped_bar_chart(
        dir,
        "tffs-reclamation",
        "Reclamation efficiency: user data / data written (cf. TFFS Fig 10)",
        "%",
        Some(100.0),
        &rec,
    )?);
    Ok(files)
}
