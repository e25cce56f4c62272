//! Mount: how long a volume takes to mount, and how much heap the mount needs, as the
//! volume fills and as the device grows, from the checkpoint (SPEC.md §3.5) beside the full
//! scan (`LogConfig::scan_mount`), the baseline, in the same run.
//!
//! Three experiments, each on the native file system (`fs`) and, where the paper's setting
//! allows, on the block device (`ftl`):
//!
//! - **ryu-park** (Ryu & Park, on the 1 GiB NAND): the volume filled to 10 … 90% of its
//!   capacity with files of 359.5 KiB on average (sizes drawn from a seeded generator) or
//!   of 5.9 MiB, or with sectors written in order on the block device; at every step a
//!   mount after a clean unmount and one after a power cut (the device taken away after a
//!   final sync, without the unmount's checkpoint).
//! - **frash** (FRASH's mount experiment, on the 128 MiB NAND): partitions of 10 … 100 MiB
//!   (the part's pages and timing, that many blocks) holding 2 MiB, and full; milliseconds
//!   per MiB of partition.
//! - **flat**: the volume 90% full on parts of growing size (128 MiB, 1 GiB and, if the
//!   host's RAM holds its image twice, a 4 GiB part of the 1 GiB part's family), and larger
//!   parts of each family holding the same data: 512 MiB of the 128 MiB part's pages,
//!   16 GiB of the 1 GiB part's.
//! - **seek** (Ryu & Park's seek test, on Ryu & Park's part): one 321 MiB file, 1-byte
//!   reads at 0, 90, 20, 70, 40, 50, 60, 30, 80, 10 and 100% of it, their device time
//!   summed right after a mount (`unloaded`) and again (`loaded`).
//!
//! Every row is one mount of a copy of the volume's state: its device time
//! (`mount_ms`), the device's page reads during it, the heap high-water mark of the mount
//! (the simulator's own storage not counted; 0 unless the counting allocator is
//! installed, as the `flashfs` binary does), whether it restored from a checkpoint, then
//! the first write after it (a 4 KiB file created, written and synced, or one sector
//! written and flushed) timed, and the first and last files or sectors read back. A
//! checkpoint mount after a power cut is measured at points spread over one checkpoint
//! cycle ([`cycle`]) and its row is the worst of them, with their mean beside it.

pub mod cycle;
mod device;
mod fill;
pub mod plot;
mod probe;
pub mod seek;
pub mod table;

use serde::Serialize;

pub use device::{copy, discard, image_bytes, now, reads, too_big_for_ram, Dev, Part, SimVolume};
pub use fill::{check_files, file_name, FileDone, FileSet, FsFill, Pattern, CHUNK};
pub use probe::{
    fs_config, fs_mount, fs_mount_checked, fs_mount_only, fs_mount_with, ftl_config, Measured,
    FIRST_WRITE_BYTES,
};

use crate::error::{BenchError, Context, Result};
use cycle::Cycle;
use fill::FtlFill;
use flashfs::{BlockDevice, Fs, Ftl};

/// An experiment of this benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Experiment {
    /// Ryu & Park: mount time and heap vs data stored.
    RyuPark,
    /// FRASH: mount time per MiB of partition.
    Frash,
    /// The same fill on parts of growing size.
    Flat,
    /// Ryu & Park's seek test.
    Seek,
}

impl Experiment {
    /// Every experiment.
    pub const ALL: [Experiment; 4] = [
        Experiment::RyuPark,
        Experiment::Frash,
        Experiment::Flat,
        Experiment::Seek,
    ];

    /// The name in JSON and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Experiment::RyuPark => "ryu-park",
            Experiment::Frash => "frash",
            Experiment::Flat => "flat",
            Experiment::Seek => "seek",
        }
    }

    /// Parses a name.
    pub fn from_name(s: &str) -> Option<Experiment> {
        Experiment::ALL.into_iter().find(|e| e.name() == s)
    }
}

/// The layer mounted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The native file system ([`Fs`]).
    Fs,
    /// The block device ([`Ftl`]).
    Ftl,
}

impl Mode {
    /// The name in JSON and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Fs => "fs",
            Mode::Ftl => "ftl",
        }
    }
}

/// How the volume was left before the mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Ending {
    /// Unmounted (the block device closed: a checkpoint written).
    Clean,
    /// A power cut after a final sync (no close checkpoint).
    Cut,
}

impl Ending {
    /// The name in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Ending::Clean => "clean",
            Ending::Cut => "cut",
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct MountOptions {
    /// The experiments, in this order.
    pub experiments: Vec<Experiment>,
    /// Ryu & Park's part.
    pub ryu_park_part: Part,
    /// Ryu & Park's fill levels, percent of the volume's capacity, increasing.
    pub fill_pct: Vec<u32>,
    /// Ryu & Park's file sets (native file system).
    pub file_sets: Vec<FileSet>,
    /// The layers Ryu & Park's experiment mounts.
    pub modes: Vec<Mode>,
    /// FRASH's part (its partitions are of its geometry and timing).
    pub frash_preset: String,
    /// FRASH's partition sizes, MiB.
    pub frash_partitions_mib: Vec<u64>,
    /// The data a FRASH partition holds in its first row, MiB.
    pub frash_stored_mib: u64,
    /// What "full" means for a FRASH partition, percent of the volume's capacity.
    pub frash_full_pct: u32,
    /// The parts of the flat-cost rows, smallest first.
    pub flat_parts: Vec<Part>,
    /// A larger part for the flat-cost rows, run only if the host's RAM holds it.
    pub flat_large: Option<Part>,
    /// The flat-cost rows' fill, percent.
    pub flat_pct: u32,
    /// Parts, larger still, each holding the same data as the last of `flat_parts` of its
    /// preset (at `flat_pct`), so that only the device grows; each run only if the host's
    /// RAM holds it.
    pub flat_same_data: Vec<Part>,
    /// Cuts per power-cut measurement of the checkpoint mount, spread evenly over a
    /// checkpoint cycle, besides those around its end ([`cycle::walk`]; 1: one cut where
    /// the fill ended).
    pub cut_points: u32,
    /// The seek test's file, MiB (on Ryu & Park's part).
    pub seek_file_mib: u64,
    /// Seed of the file sizes, the data and the simulated parts.
    pub seed: u64,
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            experiments: Experiment::ALL.to_vec(),
            ryu_park_part: Part::preset("nand-1g"),
            fill_pct: vec![10, 30, 50, 70, 90],
            file_sets: FileSet::ALL.to_vec(),
            modes: vec![Mode::Fs, Mode::Ftl],
            frash_preset: "nand-128m".into(),
            frash_partitions_mib: vec![10, 20, 40, 60, 80, 100],
            frash_stored_mib: 2,
            frash_full_pct: 90,
            flat_parts: vec![Part::preset("nand-128m"), Part::preset("nand-1g")],
            // The 1 GiB part's pages and timing, four times the blocks: 4 GiB.
            flat_large: Some(Part::with_blocks("nand-1g", 4 * 8192)),
            flat_pct: 90,
            // Larger parts of each part's pages and timing, holding what the part holds at
            // 90%: four times the 128 MiB part's blocks, 512 MiB (a part of 512-byte pages
            // twice that size keeps no checkpoint: its root cannot name the directory,
            // SPEC.md §3.5), and sixteen times the 1 GiB part's, 16 GiB.
            flat_same_data: vec![
                Part::with_blocks("nand-128m", 4 * 8192),
                Part::with_blocks("nand-1g", 16 * 8192),
            ],
            cut_points: 8,
            seek_file_mib: 321,
            seed: 2006,
        }
    }
}

impl MountOptions {
    /// Small parts of the 128 MiB NAND's family (8 and 16 MiB, and 32 MiB holding the
    /// 16 MiB part's data), two fill levels and three cuts per cycle: seconds.
    pub fn quick() -> Self {
        MountOptions {
            ryu_park_part: Part::with_blocks("nand-128m", 512),
            fill_pct: vec![30, 90],
            frash_partitions_mib: vec![8, 16],
            frash_stored_mib: 2,
            flat_parts: vec![
                Part::with_blocks("nand-128m", 512),
                Part::with_blocks("nand-128m", 1024),
            ],
            flat_large: None,
            flat_same_data: vec![Part::with_blocks("nand-128m", 2048)],
            cut_points: 3,
            seek_file_mib: 4,
            ..MountOptions::default()
        }
    }
}

/// One mount.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MountRow {
    /// `ryu-park`, `frash` or `flat`.
    pub experiment: &'static str,
    /// Device preset whose pages and timing the part has.
    pub preset: String,
    /// Erase blocks of the part.
    pub blocks: u32,
    /// MiB of the part (pages only).
    pub partition_mib: f64,
    /// `checkpoint` (the default configuration) or `scan` (`scan_mount`).
    pub config: &'static str,
    /// `fs` or `ftl`.
    pub mode: Mode,
    /// `clean` or `cut`.
    pub ending: Ending,
    /// The file set (native file system), or none (block device).
    pub file_set: Option<FileSet>,
    /// Data stored, percent of the volume's capacity.
    pub fill_pct: f64,
    /// Data stored, MiB.
    pub stored_mib: f64,
    /// Files stored (sectors on the block device).
    pub files: u64,
    /// Device time of the mount, ms.
    pub mount_ms: f64,
    /// Device time of the first write after the mount, ms.
    pub first_write_ms: f64,
    /// The two together, ms (on a checkpoint `cut` row: the largest sum of the cycle's
    /// points).
    pub mount_first_write_ms: f64,
    /// The native file system: device time of the sweep the mount left (the look for
    /// data of free blocks a power cut left, a map page per commit), finished at once
    /// after the first write, ms (on a checkpoint `cut` row: the largest of the cycle's
    /// points).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sweep_ms: Option<f64>,
    /// Page reads of that sweep (on a checkpoint `cut` row: the largest).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sweep_reads: Option<u64>,
    /// Mount time per MiB of the part, ms.
    pub ms_per_mib: f64,
    /// Device page reads during the mount.
    pub page_reads: u64,
    /// Heap high-water mark of the mount, bytes (on a checkpoint `cut` row: the largest of
    /// the cycle's points).
    pub heap_bytes: u64,
    /// Whether the mount restored from a checkpoint (on a `cut` row: every point's did).
    pub restored: bool,
    /// `cut` rows: the cuts measured, spread over a checkpoint cycle (over `cut_cycles`
    /// of them); the scan's: 1, at the first, as its cost does not depend on the cycle. A
    /// checkpoint row's `mount_ms`, `first_write_ms` and `page_reads` are its worst cut's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut_points: Option<u32>,
    /// `cut` rows: the mean mount time over the cuts, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mount_ms_mean: Option<f64>,
    /// `cut` rows: the shortest mount of the cuts, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mount_ms_min: Option<f64>,
    /// `cut` rows: the mean page reads over the cuts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_reads_mean: Option<f64>,
    /// `cut` rows: the checkpoint cycles cut (more than one when a cycle ended further
    /// from where it was expected than its cuts reached: the cuts of all count).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut_cycles: Option<u32>,
    /// `cut` rows: where in its cycle the worst cut fell, percent of the cycle's writes
    /// since its checkpoint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worst_at_pct: Option<f64>,
    /// `cut` rows: the data rewritten over the (last) checkpoint cycle cut (synced every
    /// `cycle_unit_kib`), MiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cycle_mib: Option<f64>,
    /// `cut` rows: the data rewritten between two syncs of the cycle's walk, KiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cycle_unit_kib: Option<f64>,
    /// The part whose data this part holds (the `flat` experiment's largest part), if not
    /// a share of its own capacity.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub same_data_as: Option<String>,
    /// The seek test: device time of its reads, seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seek_s: Option<f64>,
    /// The seek test: `unloaded` (the reads right after the mount) or `loaded` (again).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mapping: Option<&'static str>,
}

/// The rows, and what was skipped and why.
#[derive(Debug, Clone, Default)]
pub struct MountReport {
    /// Every mount measured.
    pub rows: Vec<MountRow>,
    /// Parts skipped, with the reason.
    pub notes: Vec<String>,
}

/// How full to make the volume.
#[derive(Debug, Clone, Copy)]
enum Target {
    /// Percent of the volume's capacity.
    Pct(u32),
    /// Bytes.
    Bytes(u64),
}

impl Target {
    fn bytes(self, capacity: u64) -> u64 {
        match self {
            Target::Pct(p) => capacity / 100 * u64::from(p),
            Target::Bytes(b) => b.min(capacity),
        }
    }
}

/// One volume filled step by step, measured at every step.
struct Series<'a> {
    experiment: Experiment,
    part: &'a Part,
    mode: Mode,
    file_set: FileSet,
    targets: Vec<Target>,
    /// Cuts per cycle ([`MountOptions::cut_points`]).
    cut_points: u32,
    /// The part whose data the targets copy, if they do.
    same_data_as: Option<String>,
}

/// What a series ends holding: bytes stored.
type Stored = u64;

/// Runs the experiments; `progress` hears (what, done, total).
pub fn run_mount(
    opts: &MountOptions,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<MountReport> {
    validate(opts)?;
    let pat = Pattern::new(opts.seed);
    let mut report = MountReport::default();
    for &exp in &opts.experiments {
        let mut series = Vec::new();
        let frash_parts: Vec<Part> = opts
            .frash_partitions_mib
            .iter()
            .map(|&m| Part::partition_mib(&opts.frash_preset, m))
            .collect::<Result<_>>()?;
        let mut flat_parts = opts.flat_parts.clone();
        match exp {
            Experiment::RyuPark => {
                let targets: Vec<Target> = opts.fill_pct.iter().map(|&p| Target::Pct(p)).collect();
                for &mode in &opts.modes {
                    let sets = match mode {
                        Mode::Fs => opts.file_sets.clone(),
                        Mode::Ftl => vec![FileSet::Small],
                    };
                    for file_set in sets {
                        series.push((mode, file_set, targets.clone(), &opts.ryu_park_part));
                    }
                }
            }
            Experiment::Frash => {
                let targets = vec![
                    Target::Bytes(opts.frash_stored_mib << 20),
                    Target::Pct(opts.frash_full_pct),
                ];
                for part in &frash_parts {
                    series.push((Mode::Fs, FileSet::Small, targets.clone(), part));
                }
            }
            Experiment::Seek => {
                report.rows.extend(run_seek(opts, &pat, progress)?);
            }
            Experiment::Flat => {
                if let Some(large) = &opts.flat_large {
                    let stored = large.capacity()? / 100 * u64::from(opts.flat_pct);
                    match too_big_for_ram(large, stored)? {
                        None => flat_parts.push(large.clone()),
                        Some(note) => report.notes.push(note),
                    }
                }
                for part in &flat_parts {
                    for &mode in &opts.modes {
                        series.push((mode, FileSet::Small, vec![Target::Pct(opts.flat_pct)], part));
                    }
                }
            }
        }
        // What each of the flat experiment's parts held at the end, per layer.
        let mut ended: Vec<(&Part, Mode, Stored)> = Vec::new();
        for (mode, file_set, targets, part) in series {
            let s = Series {
                experiment: exp,
                part,
                mode,
                file_set,
                targets,
                cut_points: opts.cut_points,
                same_data_as: None,
            };
            let (rows, stored) = run_series(&s, opts.seed, &pat, progress)?;
            report.rows.extend(rows);
            ended.push((part, mode, stored));
        }
        if exp == Experiment::Flat {
            for big in &opts.flat_same_data {
                // `validate` saw that every such part has a flat part of its preset.
                let like = opts
                    .flat_parts
                    .iter()
                    .rev()
                    .find(|p| p.preset == big.preset);
                if let Some(like) = like {
                    report.rows.extend(run_same_data(
                        opts,
                        big,
                        like,
                        &ended,
                        &pat,
                        &mut report.notes,
                        progress,
                    )?);
                }
            }
        }
    }
    Ok(report)
}

/// The flat experiment's part `big` holding what its part `like` held (`ended`), per
/// layer: the same data on a larger device.
fn run_same_data(
    opts: &MountOptions,
    big: &Part,
    like: &Part,
    ended: &[(&Part, Mode, Stored)],
    pat: &Pattern,
    notes: &mut Vec<String>,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<Vec<MountRow>> {
    let mut rows = Vec::new();
    let held: Vec<(Mode, Stored)> = ended
        .iter()
        .filter(|(p, _, _)| *p == like)
        .map(|&(_, mode, stored)| (mode, stored))
        .collect();
    let Some(most) = held.iter().map(|h| h.1).max() else {
        return Ok(rows);
    };
    if let Some(note) = too_big_for_ram(big, most)? {
        notes.push(note);
        return Ok(rows);
    }
    for (mode, stored) in held {
        let s = Series {
            experiment: Experiment::Flat,
            part: big,
            mode,
            file_set: FileSet::Small,
            targets: vec![Target::Bytes(stored)],
            cut_points: opts.cut_points,
            same_data_as: Some(like.label()),
        };
        rows.extend(run_series(&s, opts.seed, pat, progress)?.0);
    }
    Ok(rows)
}

fn validate(opts: &MountOptions) -> Result<()> {
    let bad = |why: &str| Err(BenchError::InvalidOptions(why.into()));
    if opts.fill_pct.iter().any(|&p| p == 0 || p > 95) {
        return bad("fill levels are percentages from 1 to 95");
    }
    if opts.fill_pct.windows(2).any(|w| w[0] >= w[1]) {
        return bad("fill levels must increase");
    }
    if opts.frash_full_pct == 0
        || opts.frash_full_pct > 95
        || opts.flat_pct == 0
        || opts.flat_pct > 95
    {
        return bad("fill levels are percentages from 1 to 95");
    }
    if opts.frash_partitions_mib.contains(&0) {
        return bad("a partition of 0 MiB");
    }
    if opts.cut_points == 0 {
        return bad("at least one cut per cycle");
    }
    // A part holds the data of the flat part of its preset: without one it would hold
    // nothing to compare.
    if let Some(big) = opts
        .flat_same_data
        .iter()
        .find(|b| !opts.flat_parts.iter().any(|p| p.preset == b.preset))
    {
        return Err(BenchError::InvalidOptions(format!(
            "{} holds the same data as a flat part of {}, and the flat rows have none",
            big.label(),
            big.preset
        )));
    }
    Ok(())
}

/// The rows of one measurement, scan and checkpoint, at one step.
struct Step<'a> {
    series: &'a Series<'a>,
    capacity: u64,
    stored: u64,
    files: u64,
    ending: Ending,
}

impl Step<'_> {
    fn row(&self, scan: bool, m: Measured) -> Result<MountRow> {
        let s = self.series;
        let spec = s.part.spec()?;
        let partition_mib = spec.capacity() as f64 / f64::from(1 << 20);
        let mount_ms = m.mount.as_secs_f64() * 1e3;
        let first_write_ms = m.first_write.as_secs_f64() * 1e3;
        Ok(MountRow {
            experiment: s.experiment.name(),
            preset: s.part.preset.clone(),
            blocks: spec.blocks,
            partition_mib,
            config: if scan { "scan" } else { "checkpoint" },
            mode: s.mode,
            ending: self.ending,
            file_set: (s.mode == Mode::Fs).then_some(s.file_set),
            fill_pct: self.stored as f64 * 100.0 / self.capacity.max(1) as f64,
            stored_mib: self.stored as f64 / f64::from(1 << 20),
            files: self.files,
            mount_ms,
            first_write_ms,
            mount_first_write_ms: mount_ms + first_write_ms,
            sweep_ms: (s.mode == Mode::Fs).then_some(m.sweep.as_secs_f64() * 1e3),
            sweep_reads: (s.mode == Mode::Fs).then_some(m.sweep_reads),
            ms_per_mib: mount_ms / partition_mib,
            page_reads: m.page_reads,
            heap_bytes: m.heap,
            restored: m.restored,
            cut_points: (self.ending == Ending::Cut).then_some(1),
            mount_ms_mean: None,
            mount_ms_min: None,
            page_reads_mean: None,
            cut_cycles: None,
            worst_at_pct: None,
            cycle_mib: None,
            cycle_unit_kib: None,
            same_data_as: s.same_data_as.clone(),
            seek_s: None,
            mapping: None,
        })
    }

    /// The checkpoint's row of the cuts over a cycle: the worst cut's figures, the heap and
    /// the mount with the first write at their largest, the mean and the best beside them.
    fn cut_row(&self, cycle: &Cycle) -> Result<MountRow> {
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        let worst = cycle.worst();
        let mut r = self.row(false, worst.measured)?;
        r.heap_bytes = cycle.max(|m| m.heap as f64) as u64;
        r.mount_first_write_ms = cycle.max(|m| ms(m.mount + m.first_write));
        if r.sweep_ms.is_some() {
            r.sweep_ms = Some(cycle.max(|m| ms(m.sweep)));
            r.sweep_reads = Some(cycle.max(|m| m.sweep_reads as f64) as u64);
        }
        r.restored = cycle.points.iter().all(|p| p.measured.restored);
        r.cut_points = Some(cycle.points.len() as u32);
        r.mount_ms_mean = Some(cycle.mean(|m| ms(m.mount)));
        r.mount_ms_min = Some(-cycle.max(|m| -ms(m.mount)));
        r.page_reads_mean = Some(cycle.mean(|m| m.page_reads as f64));
        if cycle.units > 0 {
            let mib = f64::from(1 << 20);
            r.cut_cycles = Some(cycle.cycles);
            r.worst_at_pct = Some(worst.share * 100.0);
            r.cycle_mib = Some(f64::from(cycle.units) * cycle.unit_bytes as f64 / mib);
            r.cycle_unit_kib = Some(cycle.unit_bytes as f64 / 1024.0);
        }
        Ok(r)
    }
}

/// The configurations measured at every step, the baseline first.
const SCAN_THEN_CHECKPOINT: [bool; 2] = [true, false];

fn run_series(
    s: &Series,
    seed: u64,
    pat: &Pattern,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<(Vec<MountRow>, Stored)> {
    let label = format!(
        "{} {} {}{}",
        s.experiment.name(),
        s.part.label(),
        s.mode.name(),
        if s.mode == Mode::Fs {
            format!(" {}", s.file_set.label())
        } else {
            String::new()
        }
    );
    let dev = s.part.build(seed)?;
    let mut rows = Vec::new();
    let mut stored = 0;
    match s.mode {
        Mode::Fs => {
            let mut fs = Fs::format(dev, fs_config(false)).context(|| format!("{label}: mkfs"))?;
            let st = fs.statfs();
            let capacity = st.blocks * u64::from(st.block_size);
            let total = s.targets.last().map_or(0, |t| t.bytes(capacity));
            let mut fill = FsFill::new(s.file_set, seed);
            for &t in &s.targets {
                fill.to(&mut fs, pat, t.bytes(capacity), &mut |done| {
                    progress(&label, done, total)
                })
                .map_err(|e| in_series(&label, e))?;
                stored = fill.stored;
                let mut step = Step {
                    series: s,
                    capacity,
                    stored: fill.stored,
                    files: fill.files.len() as u64,
                    ending: Ending::Cut,
                };
                // The cuts over a checkpoint cycle; the scan at the first only, as its cost
                // does not depend on where in the cycle the cut fell.
                let mut scanned = None;
                let cycle = cycle::walk(
                    &mut cycle::FsChurn::new(&mut fs, pat, &fill.files),
                    s.cut_points,
                    &mut |dev, i| {
                        if i == 0 {
                            scanned = Some(probe::fs_mount(dev, true, pat, &fill.files)?);
                        }
                        probe::fs_mount(dev, false, pat, &fill.files)
                    },
                )
                .map_err(|e| in_series(&label, e))?;
                if let Some(m) = scanned {
                    rows.push(step.row(true, m)?);
                }
                rows.push(step.cut_row(&cycle)?);
                let state = fs.unmount().context(|| format!("{label}: unmount"))?;
                step.ending = Ending::Clean;
                for scan in SCAN_THEN_CHECKPOINT {
                    let m = probe::fs_mount(&state, scan, pat, &fill.files)
                        .map_err(|e| in_series(&label, e))?;
                    rows.push(step.row(scan, m)?);
                }
                fs = Fs::mount(state, fs_config(false)).context(|| format!("{label}: mount"))?;
            }
            discard(fs);
        }
        Mode::Ftl => {
            let mut ftl =
                Ftl::format(dev, ftl_config(false)).context(|| format!("{label}: format"))?;
            let ss = ftl.sector_size() as u64;
            let capacity = ftl.sectors() * ss;
            let total = s.targets.last().map_or(0, |t| t.bytes(capacity));
            let mut fill = FtlFill::default();
            for &t in &s.targets {
                fill.to(&mut ftl, pat, t.bytes(capacity) / ss, &mut |done| {
                    progress(&label, done, total)
                })
                .map_err(|e| in_series(&label, e))?;
                stored = fill.sectors * ss;
                let mut step = Step {
                    series: s,
                    capacity,
                    stored: fill.sectors * ss,
                    files: fill.sectors,
                    ending: Ending::Cut,
                };
                let sectors = fill.sectors;
                let mut scanned = None;
                let cycle = cycle::walk(
                    &mut cycle::FtlChurn::new(&mut ftl, pat, sectors),
                    s.cut_points,
                    &mut |dev, i| {
                        if i == 0 {
                            scanned = Some(probe::ftl_mount(dev, true, pat, sectors)?);
                        }
                        probe::ftl_mount(dev, false, pat, sectors)
                    },
                )
                .map_err(|e| in_series(&label, e))?;
                if let Some(m) = scanned {
                    rows.push(step.row(true, m)?);
                }
                rows.push(step.cut_row(&cycle)?);
                let state = ftl.close().context(|| format!("{label}: close"))?;
                step.ending = Ending::Clean;
                for scan in SCAN_THEN_CHECKPOINT {
                    let m = probe::ftl_mount(&state, scan, pat, fill.sectors)
                        .map_err(|e| in_series(&label, e))?;
                    rows.push(step.row(scan, m)?);
                }
                ftl = Ftl::mount(state, ftl_config(false)).context(|| format!("{label}: mount"))?;
            }
            discard(ftl);
        }
    }
    Ok((rows, stored))
}

/// The seek test on Ryu & Park's part: a row per configuration and mapping state.
fn run_seek(
    opts: &MountOptions,
    pat: &Pattern,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<Vec<MountRow>> {
    let part = &opts.ryu_park_part;
    let label = format!("seek {}", part.label());
    let bytes = opts.seek_file_mib << 20;
    let dev = part.build(opts.seed)?;
    let state = seek::prepare(dev, bytes, pat, &mut |done| progress(&label, done, bytes))
        .map_err(|e| in_series(&label, e))?;
    let series = Series {
        experiment: Experiment::Seek,
        part,
        mode: Mode::Fs,
        file_set: FileSet::Large,
        targets: Vec::new(),
        cut_points: 1,
        same_data_as: None,
    };
    let capacity = {
        let (fs, _) = probe::fs_mount_only(&state, false)?;
        let st = fs.statfs();
        discard(fs);
        st.blocks * u64::from(st.block_size)
    };
    let step = Step {
        series: &series,
        capacity,
        stored: bytes,
        files: 1,
        ending: Ending::Clean,
    };
    let mut rows = Vec::new();
    for scan in SCAN_THEN_CHECKPOINT {
        let s = seek::measure(&state, scan, bytes, pat).map_err(|e| in_series(&label, e))?;
        for (mapping, t) in [("unloaded", s.unloaded), ("loaded", s.loaded)] {
            let mut r = step.row(scan, s.mount)?;
            r.file_set = None;
            r.seek_s = Some(t.as_secs_f64());
            r.mapping = Some(mapping);
            rows.push(r);
        }
    }
    discard(state);
    Ok(rows)
}

/// Labels an error with the series it stopped.
pub(crate) fn in_series(label: &str, e: BenchError) -> BenchError {
    match e {
        BenchError::Fs { context, error } => BenchError::Fs {
            context: format!("{label}: {context}"),
            error,
        },
        BenchError::Flash { context, error } => BenchError::Flash {
            context: format!("{label}: {context}"),
            error,
        },
        BenchError::Mismatch(why) => BenchError::Mismatch(format!("{label}: {why}")),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The quick options cut down further: one 8 MiB part for every experiment, and a
    /// 16 MiB one holding its flat data.
    fn small() -> MountOptions {
        MountOptions {
            frash_partitions_mib: vec![8],
            flat_parts: vec![Part::with_blocks("nand-128m", 512)],
            flat_same_data: vec![Part::with_blocks("nand-128m", 1024)],
            ..MountOptions::quick()
        }
    }

    #[test]
    fn the_checkpoint_mounts_with_fewer_reads_than_the_scan_and_restores() {
        let opts = small();
        let report = run_mount(&opts, &mut |_, _, _| {}).unwrap();
        assert!(report.notes.is_empty());
        // The seek test: both mappings, both configurations, reads that cost device time.
        let seeks: Vec<&MountRow> = report
            .rows
            .iter()
            .filter(|r| r.experiment == "seek")
            .collect();
        assert_eq!(seeks.len(), 4);
        for r in &seeks {
            assert!(r.seek_s.is_some() && r.mapping.is_some(), "{r:?}");
            if r.mapping == Some("unloaded") {
                assert!(r.seek_s.is_some_and(|s| s > 0.0), "{r:?}");
            }
            assert_eq!(r.restored, r.config == "checkpoint", "{r:?}");
        }
        let rows: Vec<MountRow> = report
            .rows
            .iter()
            .filter(|r| r.experiment != "seek")
            .cloned()
            .collect();
        let rows = &rows;
        // Every experiment, layer, ending and configuration has rows.
        for exp in ["ryu-park", "frash", "flat"] {
            for config in ["scan", "checkpoint"] {
                for ending in [Ending::Clean, Ending::Cut] {
                    assert!(
                        rows.iter().any(|r| r.experiment == exp
                            && r.config == config
                            && r.ending == ending),
                        "no {exp} {config} {ending:?} row"
                    );
                }
            }
        }
        for mode in [Mode::Fs, Mode::Ftl] {
            assert!(rows
                .iter()
                .any(|r| r.experiment == "ryu-park" && r.mode == mode));
        }
        for set in FileSet::ALL {
            assert!(rows.iter().any(|r| r.file_set == Some(set)));
        }
        // 2 layers' series (3 with the two file sets) x 2 levels x 2 endings x 2 configs,
        // FRASH 1 partition x 2 fills x 4, flat 1 part and the larger one x 2 layers x 4.
        assert_eq!(rows.len(), 3 * 2 * 4 + 2 * 4 + 2 * 2 * 4);
        for r in rows {
            assert_eq!(r.restored, r.config == "checkpoint", "{r:?}");
            assert!(r.mount_ms > 0.0 && r.first_write_ms > 0.0, "{r:?}");
            assert!(r.stored_mib > 0.0 && r.files > 0, "{r:?}");
            // A checkpoint mount after a cut: the worst of cuts over a whole cycle.
            match (r.ending, r.config) {
                (Ending::Clean, _) => assert_eq!(r.cut_points, None, "{r:?}"),
                (Ending::Cut, "scan") => assert_eq!(r.cut_points, Some(1), "{r:?}"),
                (Ending::Cut, _) => {
                    assert!(r.cut_points.is_some_and(|n| n >= 2), "{r:?}");
                    let (mean, min) = (r.mount_ms_mean.unwrap(), r.mount_ms_min.unwrap());
                    assert!(min <= mean && mean <= r.mount_ms, "{r:?}");
                    assert!(r.worst_at_pct.is_some_and(|p| (0.0..100.0).contains(&p)));
                    assert!(r.cycle_mib.is_some_and(|m| m > 0.0), "{r:?}");
                }
            }
            // The larger flat part holds what the smaller one does.
            if let Some(like) = &r.same_data_as {
                assert_eq!(like, "nand-128m[512 blocks]");
                assert!(rows.iter().any(|o| o.experiment == "flat"
                    && o.same_data_as.is_none()
                    && o.mode == r.mode
                    && o.stored_mib == r.stored_mib
                    && o.blocks == 512));
                assert_eq!(r.blocks, 1024);
            }
            if r.config == "checkpoint" {
                // The same state, scanned.
                let scan = rows
                    .iter()
                    .find(|s| {
                        s.config == "scan"
                            && s.experiment == r.experiment
                            && s.mode == r.mode
                            && s.file_set == r.file_set
                            && s.ending == r.ending
                            && s.blocks == r.blocks
                            && s.stored_mib == r.stored_mib
                    })
                    .unwrap();
                assert!(
                    r.page_reads * 5 < scan.page_reads,
                    "checkpoint {} reads, scan {}",
                    r.page_reads,
                    scan.page_reads
                );
                assert!(r.mount_ms < scan.mount_ms);
            }
        }
        // The fill levels are what was asked (of the volume's capacity).
        assert!(rows
            .iter()
            .filter(|r| r.experiment == "ryu-park")
            .all(|r| (r.fill_pct - 30.0).abs() < 0.5 || (r.fill_pct - 90.0).abs() < 0.5));
        let text = table::table(&report, false);
        assert!(text.contains("8.11 ms per MB"));
        assert!(text.contains("checkpoint"));
        assert!(text.contains("with the same data (fs cut, the worst of each cycle)"));
    }

    #[test]
    fn bad_options_are_refused() {
        let mut opts = small();
        opts.fill_pct = vec![50, 30];
        assert!(matches!(
            run_mount(&opts, &mut |_, _, _| {}),
            Err(BenchError::InvalidOptions(_))
        ));
        opts.fill_pct = vec![100];
        assert!(run_mount(&opts, &mut |_, _, _| {}).is_err());
        let mut opts = small();
        opts.cut_points = 0;
        assert!(matches!(
            run_mount(&opts, &mut |_, _, _| {}),
            Err(BenchError::InvalidOptions(_))
        ));
        let mut opts = small();
        opts.ryu_park_part = Part::preset("28f008sa");
        assert!(matches!(
            run_mount(&opts, &mut |_, _, _| {}),
            Err(BenchError::InvalidOptions(_))
        ));
    }
}
