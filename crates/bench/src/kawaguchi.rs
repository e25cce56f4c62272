//! Kawaguchi et al. 1995, §3, on the flashfs block device (FTL).
//!
//! Each write row formats a fresh simulated `28f008sa` array (8 banks x 8 segments of
//! 256 KiB, erase 1 s, write 400 KB/s, read 4 MB/s), fills the "initial data" region
//! sequentially in 4 KB writes, then measures while writing a given amount (192 MB in the
//! paper) of one [`Pattern`] over that region. Each read row fills 12.6 MB and reads it back
//! in 4 KB reads, in order and at random.
//!
//! Everything is measured in device time (the simulator's [`DeviceClock`]), from counters of
//! the log ([`flashfs::LogStats`]) and of the simulated flash ([`Simulated`]), so numbers are repeatable
//! and comparable with the paper's, which are printed beside them and labelled as the paper's.
//!
//! Units: 1 MB = 2^20 bytes and 1 KB = 1024 bytes throughout (the paper's 15.75 MB array is
//! 64 x 504 x 512 bytes).

use std::time::{Duration, Instant};

use flash::preset::{self, Preset};
use flash::{DeviceClock, DeviceSpec, ImageMeta, NorSim, NorSpec, Simulated};
use flashfs::log::policy::Policy;
use flashfs::log::segment::SegState;
use flashfs::{BlockDevice, Ftl, FtlConfig, LogConfig, NorSegments, Segments};
use serde::{Serialize, Serializer};

use crate::error::{BenchError, Context, Result};
use crate::workers;
use crate::workload::{Pattern, Workload, CHUNK_BYTES, CHUNK_SECTORS, SECTOR_SIZE};

/// Bytes in a MB (the paper's Mbytes are binary: its 15.75 MB array is 16,515,072 bytes).
pub const MB: u64 = 1 << 20;
/// Bytes in a KB, the unit of the throughputs reported.
pub const KB: f64 = 1024.0;
/// User data written per write row in the paper.
pub const FULL_MB: f64 = 192.0;
/// User data written per write row in quick mode: enough for the cleaner to reach its steady
/// state at every utilization, far too little for the paper's totals (erases and copies are
/// then not comparable with the paper's; throughput and write amplification roughly are).
pub const QUICK_MB: f64 = 24.0;
/// Data the read rows read back (the paper's "4 Kbyte blocks from 12.6 Mbytes of data").
pub const READ_MB: f64 = 12.6;
/// The paper's file-system capacity: it calls 4.2, 8.4 and 12.6 MB of initial data 30%, 60%
/// and 90%, so its 100% is 14 MB (of the array's 15.75 MB raw).
pub const PAPER_CAPACITY_MB: f64 = 14.0;
/// The preset the paper measured.
pub const PRESET: &str = "28f008sa";
/// Bins of the segment-utilization histogram.
pub const HISTOGRAM_BINS: usize = 10;

/// The paper's initial-data levels for the sequential and random tests (Tables 4 and 5).
pub const SEQ_RANDOM_UTILIZATIONS: [f64; 3] = [0.3, 0.6, 0.9];
/// The paper's initial-data levels for the hot-and-cold tests (Tables 6 and 7).
pub const HOT_COLD_UTILIZATIONS: [f64; 5] = [0.3, 0.6, 0.7, 0.8, 0.9];

/// What "X% initial data" is a percentage of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Basis {
    /// The flash's raw data capacity: segments x slots x 512 B (for the 28F008SA preset,
    /// 64 x 500 x 512 B = 15.625 MB; the paper's array held 64 x 504 blocks = 15.75 MB).
    Raw,
    /// The paper's own file-system capacity, 14 MB: 30%, 60% and 90% are the paper's 4.2,
    /// 8.4 and 12.6 MB of initial data.
    Paper,
}

impl Basis {
    /// Name used in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Basis::Raw => "raw",
            Basis::Paper => "paper",
        }
    }

    /// Parses a name.
    pub fn from_name(s: &str) -> Option<Basis> {
        [Basis::Raw, Basis::Paper]
            .into_iter()
            .find(|b| b.name() == s)
    }
}

/// One of the paper's measurements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Experiment {
    /// 4 KB overwrites of the initial data in a pattern (Tables 4-7).
    Write(Pattern),
    /// 4 KB reads of 12.6 MB in order.
    SequentialRead,
    /// 4 KB reads of 12.6 MB at random.
    RandomRead,
}

impl Experiment {
    /// Name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Experiment::Write(p) => p.name(),
            Experiment::SequentialRead => "read-sequential",
            Experiment::RandomRead => "read-random",
        }
    }
}

impl Serialize for Experiment {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub struct KawaguchiOptions {
    /// Preset to simulate (a NOR preset; the paper's is [`PRESET`]).
    pub preset: String,
    /// User data written per write row, in MB ([`FULL_MB`], or [`QUICK_MB`] in quick mode).
    pub mb_written: f64,
    /// Whether this is the quick mode (recorded in the report).
    pub quick: bool,
    /// Interval of the throughput samples, in MB written.
    pub sample_mb: f64,
    /// Data the read rows read, in MB.
    pub read_mb: f64,
    /// What the utilizations are a percentage of.
    pub basis: Basis,
    /// Write patterns to run.
    pub patterns: Vec<Pattern>,
    /// Utilizations for each pattern; `None` runs the paper's (30/60/90%, and 30/60/70/80/90%
    /// for hot-and-cold).
    pub utilizations: Option<Vec<f64>>,
    /// Cleaning policies to run.
    pub policies: Vec<Policy>,
    /// Separate-cleaning-head settings to run.
    pub separate_heads: Vec<bool>,
    /// Whether the log splits user writes into hot and warm heads (with a separate cleaning
    /// head); `None` keeps the log's default. `Some(false)` with a separate head is the
    /// paper's modified driver: one segment for data, one for cleaning.
    pub hot_cold: Option<bool>,
    /// Whether to run the read rows.
    pub reads: bool,
    /// Seed of the workloads.
    pub seed: u64,
    /// Worker threads (0: one per CPU). Results do not depend on it.
    pub threads: usize,
    /// Read every chunk back after each row and compare (host time only; the measured
    /// figures are taken before).
    pub verify: bool,
}

impl Default for KawaguchiOptions {
    /// The full experiment: every pattern, utilization, policy and head setting, 192 MB each.
    fn default() -> Self {
        KawaguchiOptions {
            preset: PRESET.to_string(),
            mb_written: FULL_MB,
            quick: false,
            sample_mb: 1.0,
            read_mb: READ_MB,
            basis: Basis::Paper,
            patterns: Pattern::ALL.to_vec(),
            utilizations: None,
            policies: Policy::ALL.to_vec(),
            separate_heads: vec![false, true],
            hot_cold: None,
            reads: true,
            seed: 1995,
            threads: 0,
            verify: false,
        }
    }
}

impl KawaguchiOptions {
    /// The quick mode: every row, [`QUICK_MB`] written each.
    pub fn quick() -> Self {
        KawaguchiOptions {
            mb_written: QUICK_MB,
            quick: true,
            ..Self::default()
        }
    }

    /// The utilizations run for `pattern`.
    pub fn utilizations_for(&self, pattern: Pattern) -> Vec<f64> {
        match (&self.utilizations, pattern) {
            (Some(u), _) => u.clone(),
            (None, Pattern::HotCold) => HOT_COLD_UTILIZATIONS.to_vec(),
            (None, _) => SEQ_RANDOM_UTILIZATIONS.to_vec(),
        }
    }

    fn check(&self) -> Result<NorSpec> {
        let bad = |why: String| Err(BenchError::InvalidOptions(why));
        let p: Preset = preset::lookup(&self.preset)
            .map_err(|e| BenchError::InvalidOptions(format!("preset {:?}: {e}", self.preset)))?;
        let DeviceSpec::Nor(spec) = p.spec else {
            return bad(format!(
                "preset {:?} is not NOR flash; the experiment needs a NOR array",
                self.preset
            ));
        };
        if !(self.mb_written.is_finite() && self.mb_written > 0.0) {
            return bad(format!(
                "MB written must be positive, not {}",
                self.mb_written
            ));
        }
        if !(self.sample_mb.is_finite() && self.sample_mb > 0.0) {
            return bad(format!(
                "sample interval must be positive, not {}",
                self.sample_mb
            ));
        }
        if self.reads && !(self.read_mb.is_finite() && self.read_mb > 0.0) {
            return bad(format!("MB read must be positive, not {}", self.read_mb));
        }
        for p in &self.patterns {
            for u in self.utilizations_for(*p) {
                if !(u > 0.0 && u < 1.0) {
                    return bad(format!("utilization {u} is not between 0 and 1"));
                }
            }
        }
        Ok(spec)
    }
}

/// One throughput sample: the throughput over the last interval, at a cumulative amount
/// written.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Sample {
    /// User data written in the measured phase so far, MB.
    pub mb: f64,
    /// Throughput over the interval ending here, KB/s of device time.
    pub kbps: f64,
}

/// A figure from the paper, to print beside ours.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PaperFigure {
    /// Where it comes from.
    pub source: &'static str,
    /// Average throughput, KB/s.
    pub kbps: f64,
    /// Segments erased.
    pub erased: Option<u64>,
    /// Blocks copied by the cleaner.
    pub copied: Option<u64>,
}

/// The paper's figure for a row, if it has one. The paper's Tables 4-6 ran greedy (Table 6
/// also cost-benefit) with one segment for writes and cleaning (no separate head); Table 7
/// adds the separate cleaning segment with cost-benefit. Utilizations are the paper's labels
/// (30/60/90% of its 14 MB).
pub fn paper_figure(
    experiment: Experiment,
    utilization: f64,
    policy: Policy,
    separate: bool,
) -> Option<PaperFigure> {
    let at = |u: f64| (utilization - u).abs() < 1e-9;
    let f = |source, kbps, erased, copied| {
        Some(PaperFigure {
            source,
            kbps,
            erased: Some(erased),
            copied: Some(copied),
        })
    };
    match (experiment, policy, separate) {
        (Experiment::SequentialRead, _, _) => Some(PaperFigure {
            source: "§3 text",
            kbps: 644.0,
            erased: None,
            copied: None,
        }),
        (Experiment::RandomRead, _, _) => Some(PaperFigure {
            source: "§3 text",
            kbps: 707.0,
            erased: None,
            copied: None,
        }),
        (Experiment::Write(Pattern::Sequential), Policy::Greedy, false) => {
            if at(0.3) {
                f("Table 4", 231.0, 749, 0)
            } else if at(0.6) {
                f("Table 4", 230.0, 766, 0)
            } else if at(0.9) {
                f("Table 4", 199.0, 889, 57_266)
            } else {
                None
            }
        }
        (Experiment::Write(Pattern::Random), Policy::Greedy, false) => {
            if at(0.3) {
                f("Table 5", 222.0, 801, 26_383)
            } else if at(0.6) {
                f("Table 5", 147.0, 1_066, 155_856)
            } else if at(0.9) {
                f("Table 5", 40.0, 2_634, 938_294)
            } else {
                None
            }
        }
        (Experiment::Write(Pattern::HotCold), Policy::Greedy, false) if at(0.9) => {
            f("Table 6", 51.0, 2_617, 925_193)
        }
        (Experiment::Write(Pattern::HotCold), Policy::CostBenefit, false) if at(0.9) => {
            f("Table 6", 43.0, 3_085, 1_161_090)
        }
        // Table 7's 90% column with the separate cleaning segment. Its 30-80% columns are
        // not legible in the text of the paper available here.
        (Experiment::Write(Pattern::HotCold), Policy::CostBenefit, true) if at(0.9) => {
            f("Table 7", 60.0, 2_218, 723_582)
        }
        _ => None,
    }
}

/// One row of the table: a configuration and what it measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// What was measured.
    pub experiment: Experiment,
    /// Initial data as a fraction of the [`Basis`] (the row label, e.g. 0.9).
    pub utilization: f64,
    /// What `utilization` is a fraction of.
    pub basis: Basis,
    /// Initial data as a fraction of the flash's raw data capacity.
    pub raw_utilization: f64,
    /// Initial data, MB.
    pub initial_mb: f64,
    /// Cleaning policy.
    pub policy: &'static str,
    /// Whether cleaning survivors had a write head of their own.
    pub separate_head: bool,
    /// Whether user writes were split into hot and warm heads (only with a separate head).
    pub hot_cold: bool,
    /// Free segments only the cleaner may use (the log's reserve; lowered from the default
    /// only where the initial data would not fit otherwise).
    pub reserve: u32,
    /// Simulated preset.
    pub preset: String,
    /// User data written (or read) in the measured phase, MB.
    pub mb_written: f64,
    /// Device time of the measured phase, seconds.
    pub device_seconds: f64,
    /// User KB (1024 B) written (or read) per device second.
    pub throughput_kbps: f64,
    /// The paper's throughput for this configuration, if it has one.
    pub paper_kbps: Option<f64>,
    /// The paper's segments erased.
    pub paper_erased: Option<u64>,
    /// The paper's blocks copied.
    pub paper_copied: Option<u64>,
    /// Where the paper's figures come from.
    pub paper_source: Option<&'static str>,
    /// Segments erased by the log during the measured phase.
    pub erased_segments: u64,
    /// Blocks (slots of 512 B) the cleaner copied during the measured phase.
    pub copied_blocks: u64,
    /// Blocks written for the user during the measured phase.
    pub user_blocks: u64,
    /// Segment headers written during the measured phase.
    pub header_slots: u64,
    /// Segments cleaned (victims) during the measured phase.
    pub cleaned_segments: u64,
    /// Segments cleaned to level wear during the measured phase.
    pub wear_moves: u64,
    /// Slots the log programmed (user + copied + headers) per user slot.
    pub waf: f64,
    /// Device seconds of the measured phase spent programming (the part's program time for
    /// the bytes programmed, without waits).
    pub program_seconds: f64,
    /// Device seconds of the measured phase spent reading (without waits).
    pub read_seconds: f64,
    /// Device seconds of the measured phase the host waited on busy banks (erases in
    /// progress): the device time less the program and read time.
    pub wait_seconds: f64,
    /// Bytes the flash programmed (data, tags, headers) per user byte.
    pub flash_waf: f64,
    /// Largest minus smallest erase count of the flash's units at the end.
    pub erase_spread: u32,
    /// Smallest erase count at the end.
    pub erase_min: u32,
    /// Largest erase count at the end.
    pub erase_max: u32,
    /// Standard deviation of the erase counts at the end.
    pub erase_stddev: f64,
    /// Free segments at the end.
    pub free_segments: u32,
    /// Throughput over each `sample_mb` of the measured phase.
    pub samples: Vec<Sample>,
    /// Segments in use (open or full) at the end, by live fraction in tenths (the last bin
    /// includes completely live segments).
    pub utilization_histogram: [u32; HISTOGRAM_BINS],
    /// Host (wall-clock) seconds the row took, including the fill.
    pub host_seconds: f64,
    /// The failure that ended the row early, if any (its figures cover what was done).
    pub error: Option<String>,
}

impl Row {
    /// A short label: experiment, utilization, policy, head.
    pub fn label(&self) -> String {
        match self.experiment {
            Experiment::Write(_) => format!(
                "{} {:.0}% {} {}",
                self.experiment.name(),
                self.utilization * 100.0,
                self.policy,
                if self.separate_head {
                    "separate-head"
                } else {
                    "one-head"
                }
            ),
            _ => format!("{} {:.1} MB", self.experiment.name(), self.initial_mb),
        }
    }
}

/// A row to run.
#[derive(Debug, Clone, Copy)]
struct Job {
    experiment: Experiment,
    utilization: f64,
    policy: Policy,
    separate: bool,
}

impl Job {
    fn label(&self) -> String {
        format!(
            "{} {:.0}% {} {}",
            self.experiment.name(),
            self.utilization * 100.0,
            self.policy.name(),
            if self.separate {
                "separate-head"
            } else {
                "one-head"
            }
        )
    }
}

type Dev = NorSegments<NorSim>;

/// Everything fixed for a run.
struct Setup<'a> {
    opts: &'a KawaguchiOptions,
    spec: NorSpec,
    /// Sectors of the raw data capacity (segments x slots).
    raw_sectors: u64,
}

impl Setup<'_> {
    /// Chunks of initial data for a utilization.
    fn chunks(&self, utilization: f64) -> u64 {
        let bytes = match self.opts.basis {
            Basis::Raw => utilization * (self.raw_sectors * SECTOR_SIZE as u64) as f64,
            Basis::Paper => utilization * PAPER_CAPACITY_MB * MB as f64,
        };
        (bytes / CHUNK_BYTES as f64).floor() as u64
    }

    fn new_device(&self) -> Result<Dev> {
        let sim = NorSim::new(self.spec, ImageMeta::new(&self.opts.preset, self.opts.seed))
            .context(|| format!("creating a simulated {}", self.opts.preset))?;
        NorSegments::new(sim, SECTOR_SIZE as u32).context(|| "segmenting the flash".to_string())
    }

    /// Formats a fresh device as a block device holding at least `sectors`, lowering the
    /// reserve below the default only when it must.
    fn format(&self, config: LogConfig, sectors: u64, what: &str) -> Result<Ftl<Dev>> {
        let mut log = config;
        loop {
            let ftl = Ftl::format(
                self.new_device()?,
                FtlConfig {
                    log,
                    ..FtlConfig::default()
                },
            )
            .context(|| format!("{what}: formatting"))?;
            if ftl.sectors() >= sectors {
                return Ok(ftl);
            }
            if log.reserve <= 1 {
                return Err(BenchError::InvalidOptions(format!(
                    "{what}: {sectors} sectors of initial data do not fit: the block device \
                     exports at most {} sectors even with a reserve of 1 segment",
                    ftl.sectors()
                )));
            }
            log.reserve -= 1;
        }
    }
}

/// A 4 KB chunk's content for a version: chunk and version stamped in every sector.
fn fill_chunk(buf: &mut [u8], chunk: u64, version: u32) {
    for (i, sector) in buf.chunks_exact_mut(SECTOR_SIZE).enumerate() {
        sector[0..8].copy_from_slice(&chunk.to_le_bytes());
        sector[8..12].copy_from_slice(&version.to_le_bytes());
        sector[12] = i as u8;
    }
}

fn check_chunk(buf: &[u8], chunk: u64, version: u32) -> bool {
    buf.chunks_exact(SECTOR_SIZE).enumerate().all(|(i, s)| {
        s[0..8] == chunk.to_le_bytes() && s[8..12] == version.to_le_bytes() && s[12] == i as u8
    })
}

fn now(ftl: &Ftl<Dev>) -> Duration {
    ftl.log().device().flash().now()
}

fn kbps(bytes: u64, d: Duration) -> f64 {
    let s = d.as_secs_f64();
    if s > 0.0 {
        bytes as f64 / KB / s
    } else {
        0.0
    }
}

/// Splits the device time of a phase into programming, reading and waiting, from the work
/// the simulated part counted and its timing.
fn split_time(row: &mut Row, spec: &NorSpec, work: &flash::stats::Stats, elapsed: Duration) {
    let t = &spec.timing;
    let word = spec.word_size.max(1) as u64;
    let program_ns = work.programs * t.program_cmd_ns
        + work.bytes_programmed / word * t.program_word_ns
        + work.bytes_programmed * t.bus_byte_ns;
    let read_ns = work.bytes_read / word * t.read_word_ns + work.bytes_read * t.bus_byte_ns;
    row.program_seconds = program_ns as f64 / 1e9;
    row.read_seconds = read_ns as f64 / 1e9;
    row.wait_seconds = (elapsed.as_secs_f64() - row.program_seconds - row.read_seconds).max(0.0);
}

/// Progress messages from the workers: a job's label and the bytes it just did.
type Progress = std::sync::mpsc::Sender<workers::Report>;

/// The final wear and segment state of a device.
fn finish_row(row: &mut Row, ftl: &Ftl<Dev>) {
    let w = flash::stats::WearSpread::of(&ftl.log().device().flash().erase_counts());
    row.erase_min = w.min;
    row.erase_max = w.max;
    row.erase_spread = w.max - w.min;
    row.erase_stddev = w.stddev;
    let slots = ftl.log().geometry().slots.max(1);
    let mut hist = [0u32; HISTOGRAM_BINS];
    for s in ftl.log().segments() {
        if matches!(s.state, SegState::Open | SegState::Full | SegState::Failing) {
            let bin = (s.live() as usize * HISTOGRAM_BINS / slots as usize).min(HISTOGRAM_BINS - 1);
            hist[bin] += 1;
        }
    }
    row.utilization_histogram = hist;
    row.free_segments = ftl.log().free_segments();
}

fn empty_row(setup: &Setup, job: &Job, chunks: u64, config: &LogConfig) -> Row {
    let paper = paper_figure(job.experiment, job.utilization, job.policy, job.separate);
    let initial = chunks * CHUNK_BYTES as u64;
    Row {
        experiment: job.experiment,
        utilization: job.utilization,
        basis: setup.opts.basis,
        raw_utilization: initial as f64 / (setup.raw_sectors * SECTOR_SIZE as u64) as f64,
        initial_mb: initial as f64 / MB as f64,
        policy: job.policy.name(),
        separate_head: job.separate,
        hot_cold: config.hot_cold,
        reserve: config.reserve,
        preset: setup.opts.preset.clone(),
        mb_written: 0.0,
        device_seconds: 0.0,
        throughput_kbps: 0.0,
        paper_kbps: paper.map(|p| p.kbps),
        paper_erased: paper.and_then(|p| p.erased),
        paper_copied: paper.and_then(|p| p.copied),
        paper_source: paper.map(|p| p.source),
        erased_segments: 0,
        copied_blocks: 0,
        user_blocks: 0,
        header_slots: 0,
        cleaned_segments: 0,
        wear_moves: 0,
        waf: 0.0,
        program_seconds: 0.0,
        read_seconds: 0.0,
        wait_seconds: 0.0,
        flash_waf: 0.0,
        erase_spread: 0,
        erase_min: 0,
        erase_max: 0,
        erase_stddev: 0.0,
        free_segments: 0,
        samples: Vec::new(),
        utilization_histogram: [0; HISTOGRAM_BINS],
        host_seconds: 0.0,
        error: None,
    }
}

/// Fills `chunks` chunks in order (version 0), reporting progress every MB.
fn fill(ftl: &mut Ftl<Dev>, chunks: u64, label: &str, tx: &Progress) -> Result<()> {
    let mut buf = vec![0u8; CHUNK_BYTES];
    let per_mb = MB / CHUNK_BYTES as u64;
    for c in 0..chunks {
        fill_chunk(&mut buf, c, 0);
        ftl.write(c * CHUNK_SECTORS, &buf)
            .context(|| format!("{label}: filling chunk {c} of {chunks}"))?;
        if (c + 1) % per_mb == 0 {
            let _ = tx.send((label.to_string(), MB));
        }
    }
    let _ = tx.send((label.to_string(), (chunks % per_mb) * CHUNK_BYTES as u64));
    Ok(())
}

fn verify(ftl: &mut Ftl<Dev>, versions: &[u32], label: &str) -> Result<()> {
    let mut buf = vec![0u8; CHUNK_BYTES];
    for (c, &v) in versions.iter().enumerate() {
        let c = c as u64;
        ftl.read(c * CHUNK_SECTORS, &mut buf)
            .context(|| format!("{label}: verifying chunk {c}"))?;
        if !check_chunk(&buf, c, v) {
            return Err(BenchError::Mismatch(format!(
                "{label}: chunk {c} does not hold version {v}"
            )));
        }
    }
    Ok(())
}

/// Bytes a write job does: fill plus measured phase.
fn write_job_bytes(setup: &Setup, job: &Job) -> u64 {
    setup.chunks(job.utilization) * CHUNK_BYTES as u64 + measured_writes(setup) * CHUNK_BYTES as u64
}

fn measured_writes(setup: &Setup) -> u64 {
    (setup.opts.mb_written * MB as f64 / CHUNK_BYTES as f64).round() as u64
}

fn run_write(setup: &Setup, job: &Job, pattern: Pattern, tx: &Progress) -> Result<Row> {
    let started = Instant::now();
    let label = job.label();
    let chunks = setup.chunks(job.utilization);
    let mut workload = Workload::new(pattern, chunks, setup.opts.seed).ok_or_else(|| {
        BenchError::InvalidOptions(format!(
            "{label}: {chunks} chunks of initial data are too few"
        ))
    })?;
    let defaults = LogConfig::default();
    let config = LogConfig {
        policy: job.policy,
        separate_cleaning_head: job.separate,
        hot_cold: setup.opts.hot_cold.unwrap_or(defaults.hot_cold),
        ..defaults
    };
    let mut ftl = setup.format(config, chunks * CHUNK_SECTORS, &label)?;
    let mut row = empty_row(setup, job, chunks, ftl.log().config());
    let writes = measured_writes(setup);
    if let Err(e) = fill(&mut ftl, chunks, &label, tx) {
        // The log failed before the measurement began: a row with nothing measured.
        row.error = Some(e.to_string());
        finish_row(&mut row, &ftl);
        let _ = tx.send((label, writes * CHUNK_BYTES as u64));
        row.host_seconds = started.elapsed().as_secs_f64();
        return Ok(row);
    }

    let stats0 = *ftl.log().stats();
    let work0 = ftl.log().device().flash().stats().clone();
    let t0 = now(&ftl);
    let per_sample =
        ((setup.opts.sample_mb * MB as f64 / CHUNK_BYTES as f64).round() as u64).max(1);
    let mut versions = vec![0u32; chunks as usize];
    let mut buf = vec![0u8; CHUNK_BYTES];
    let mut done = 0u64;
    let mut t_sample = t0;
    let mut in_sample = 0u64;
    let mut failure = None;
    while done < writes {
        let c = workload.next_chunk();
        let v = versions[c as usize] + 1;
        fill_chunk(&mut buf, c, v);
        if let Err(e) = ftl.write(c * CHUNK_SECTORS, &buf) {
            failure = Some(format!(
                "{e} after {:.2} MB of the measured phase (free segments {})",
                (done * CHUNK_BYTES as u64) as f64 / MB as f64,
                ftl.log().free_segments()
            ));
            break;
        }
        versions[c as usize] = v;
        done += 1;
        in_sample += 1;
        if in_sample == per_sample || done == writes {
            let t = now(&ftl);
            row.samples.push(Sample {
                mb: (done * CHUNK_BYTES as u64) as f64 / MB as f64,
                kbps: kbps(in_sample * CHUNK_BYTES as u64, t - t_sample),
            });
            let _ = tx.send((label.clone(), in_sample * CHUNK_BYTES as u64));
            t_sample = t;
            in_sample = 0;
        }
    }
    let elapsed = now(&ftl) - t0;
    let stats = *ftl.log().stats();
    let work = ftl.log().device().flash().stats().since(&work0);
    let programmed = work.bytes_programmed;
    split_time(&mut row, &setup.spec, &work, elapsed);
    let user_bytes = done * CHUNK_BYTES as u64;
    row.mb_written = user_bytes as f64 / MB as f64;
    row.device_seconds = elapsed.as_secs_f64();
    row.throughput_kbps = kbps(user_bytes, elapsed);
    row.erased_segments = stats.erases - stats0.erases;
    row.copied_blocks = stats.copied_slots - stats0.copied_slots;
    row.user_blocks = stats.user_slots - stats0.user_slots;
    row.header_slots = stats.headers - stats0.headers;
    row.cleaned_segments = stats.cleaned - stats0.cleaned;
    row.wear_moves = stats.wear_moves - stats0.wear_moves;
    if row.user_blocks > 0 {
        row.waf = (row.user_blocks + row.copied_blocks + row.header_slots) as f64
            / row.user_blocks as f64;
    }
    if user_bytes > 0 {
        row.flash_waf = programmed as f64 / user_bytes as f64;
    }
    finish_row(&mut row, &ftl);
    if let Some(f) = &failure {
        row.error = Some(f.clone());
        // Account the progress the failed row will not do.
        let _ = tx.send((label.clone(), (writes - done) * CHUNK_BYTES as u64));
    } else if setup.opts.verify {
        verify(&mut ftl, &versions, &label)?;
    }
    row.host_seconds = started.elapsed().as_secs_f64();
    Ok(row)
}

/// Fills the read data once, then reads it in order and at random: two rows.
fn run_reads(setup: &Setup, tx: &Progress) -> Result<Vec<Row>> {
    let started = Instant::now();
    let label = "reads".to_string();
    let chunks = (setup.opts.read_mb * MB as f64 / CHUNK_BYTES as f64).floor() as u64;
    if chunks == 0 {
        return Err(BenchError::InvalidOptions("nothing to read".to_string()));
    }
    let config = LogConfig::default();
    let mut ftl = setup.format(config, chunks * CHUNK_SECTORS, &label)?;
    fill(&mut ftl, chunks, &label, tx)?;
    let bytes = chunks * CHUNK_BYTES as u64;
    let utilization = match setup.opts.basis {
        Basis::Raw => bytes as f64 / (setup.raw_sectors * SECTOR_SIZE as u64) as f64,
        Basis::Paper => bytes as f64 / (PAPER_CAPACITY_MB * MB as f64),
    };
    let mut rows = Vec::new();
    let mut buf = vec![0u8; CHUNK_BYTES];
    for (experiment, pattern) in [
        (Experiment::SequentialRead, Pattern::Sequential),
        (Experiment::RandomRead, Pattern::Random),
    ] {
        let job = Job {
            experiment,
            utilization,
            policy: config.policy,
            separate: config.separate_cleaning_head,
        };
        let mut row = empty_row(setup, &job, chunks, ftl.log().config());
        let mut workload = Workload::new(pattern, chunks, setup.opts.seed)
            .ok_or_else(|| BenchError::InvalidOptions("nothing to read".to_string()))?;
        let t0 = now(&ftl);
        let work0 = ftl.log().device().flash().stats().clone();
        for _ in 0..chunks {
            let c = workload.next_chunk();
            ftl.read(c * CHUNK_SECTORS, &mut buf)
                .context(|| format!("{}: reading chunk {c}", experiment.name()))?;
            if setup.opts.verify && !check_chunk(&buf, c, 0) {
                return Err(BenchError::Mismatch(format!(
                    "{}: chunk {c} does not hold what was written",
                    experiment.name()
                )));
            }
        }
        let elapsed = now(&ftl) - t0;
        let work = ftl.log().device().flash().stats().since(&work0);
        split_time(&mut row, &setup.spec, &work, elapsed);
        row.mb_written = bytes as f64 / MB as f64;
        row.device_seconds = elapsed.as_secs_f64();
        row.throughput_kbps = kbps(bytes, elapsed);
        finish_row(&mut row, &ftl);
        row.host_seconds = started.elapsed().as_secs_f64();
        rows.push(row);
    }
    Ok(rows)
}

/// Runs Kawaguchi's §3 experiments on the flashfs block device and returns one row per
/// configuration: write rows in the order pattern, utilization, policy, head setting; then
/// the two read rows.
///
/// `progress(label, done, total)` is called on the calling thread as work completes: `label`
/// names the row that advanced, `done` and `total` count bytes of user data written or read
/// across the whole run (fills included).
///
/// A row whose workload fails part way (e.g. the log reports `NoSpace`) is returned with its
/// [`Row::error`] set and the figures of what it did; errors that make the run meaningless
/// (bad options, a worker panic, data read back wrong when verifying) are returned as `Err`.
pub fn run_kawaguchi(
    opts: &KawaguchiOptions,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<Vec<Row>> {
    let spec = opts.check()?;
    let geo = {
        let sim = NorSim::new(spec, ImageMeta::new(&opts.preset, opts.seed))
            .context(|| format!("creating a simulated {}", opts.preset))?;
        NorSegments::new(sim, SECTOR_SIZE as u32)
            .context(|| "segmenting the flash".to_string())?
            .geometry()
    };
    let setup = Setup {
        opts,
        spec,
        raw_sectors: geo.segments as u64 * geo.slots as u64,
    };

    let mut jobs = Vec::new();
    for &pattern in &opts.patterns {
        for u in opts.utilizations_for(pattern) {
            for &policy in &opts.policies {
                for &separate in &opts.separate_heads {
                    jobs.push(Job {
                        experiment: Experiment::Write(pattern),
                        utilization: u,
                        policy,
                        separate,
                    });
                }
            }
        }
    }
    let mut total: u64 = jobs.iter().map(|j| write_job_bytes(&setup, j)).sum();
    if opts.reads {
        let chunks = (opts.read_mb * MB as f64 / CHUNK_BYTES as f64).floor() as u64;
        total += 3 * chunks * CHUNK_BYTES as u64;
    }
    // Tasks: the write jobs, then the reads (index jobs.len()).
    let tasks = jobs.len() + usize::from(opts.reads);
    let order: Vec<usize> = (0..tasks).collect();
    let work = |i: usize, tx: &Progress| {
        if let Some(job) = jobs.get(i) {
            match job.experiment {
                Experiment::Write(p) => run_write(&setup, job, p, tx).map(|r| vec![r]),
                _ => Err(BenchError::InvalidOptions("not a write job".to_string())),
            }
        } else {
            run_reads(&setup, tx).inspect(|rows| {
                // The reads count as progress once done.
                let read: u64 = rows.iter().map(|r| (r.mb_written * MB as f64) as u64).sum();
                let _ = tx.send(("reads".to_string(), read));
            })
        }
    };
    let rows = workers::run(&order, opts.threads, total, &work, progress)?;
    Ok(rows.into_iter().flatten().collect())
}

/// The settings every write row shares, for printing above the table.
pub fn describe_config(opts: &KawaguchiOptions) -> Result<Vec<String>> {
    let spec = opts.check()?;
    let p = preset::lookup(&opts.preset)
        .map_err(|e| BenchError::InvalidOptions(format!("preset {:?}: {e}", opts.preset)))?;
    let sim = NorSim::new(spec, ImageMeta::new(&opts.preset, opts.seed))
        .context(|| format!("creating a simulated {}", opts.preset))?;
    let geo = NorSegments::new(sim, SECTOR_SIZE as u32)
        .context(|| "segmenting the flash".to_string())?
        .geometry();
    let raw = geo.segments as u64 * geo.slots as u64 * SECTOR_SIZE as u64;
    let log = LogConfig {
        hot_cold: opts.hot_cold.unwrap_or(LogConfig::default().hot_cold),
        ..LogConfig::default()
    };
    let ftl = FtlConfig::default();
    Ok(vec![
        format!("preset: {} — {}", p.name, p.summary),
        format!("  source: {}", p.source),
        format!(
            "  timing: program {} ns/word of {} B, read {} ns/word, erase {} ms, {} banks{}",
            spec.timing.program_word_ns,
            spec.word_size,
            spec.timing.read_word_ns,
            spec.timing.erase_ns / 1_000_000,
            spec.banks,
            if spec.timing.erase_suspend_ns.is_some() {
                ", erase suspend"
            } else {
                ""
            }
        ),
        format!(
            "geometry: {} segments x {} slots of {} B = {:.3} MB raw data capacity (the paper: 64 x 504 x 512 B = 15.75 MB)",
            geo.segments,
            geo.slots,
            geo.slot_size,
            raw as f64 / MB as f64
        ),
        format!(
            "utilization basis: {} ({})",
            opts.basis.name(),
            match opts.basis {
                Basis::Raw => "initial data / raw data capacity".to_string(),
                Basis::Paper => format!(
                    "initial data / {PAPER_CAPACITY_MB} MB, the paper's capacity: 90% = 12.6 MB"
                ),
            }
        ),
        format!(
            "workload: fill sequentially in 4 KB writes, then {} MB of 4 KB overwrites per row{}; seed {}",
            opts.mb_written,
            if opts.quick { " (quick mode)" } else { "" },
            opts.seed
        ),
        format!("log (policy and separate head vary by row): {log:?}"),
        format!("ftl: hot when rewritten within {} x the average rewrite interval, sectors: all the log can hold", ftl.hot_factor),
        "units: MB = 2^20 B, KB/s = 1024 B per second of device time; erased/copied count the measured phase"
            .to_string(),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_figures_are_where_the_paper_has_them() {
        let w = |p| Experiment::Write(p);
        assert_eq!(
            paper_figure(w(Pattern::Random), 0.9, Policy::Greedy, false).map(|f| f.kbps),
            Some(40.0)
        );
        assert!(paper_figure(w(Pattern::Random), 0.9, Policy::Greedy, true).is_none());
        assert!(paper_figure(w(Pattern::HotCold), 0.8, Policy::Greedy, false).is_none());
        assert_eq!(
            paper_figure(w(Pattern::HotCold), 0.9, Policy::CostBenefit, true).map(|f| f.kbps),
            Some(60.0)
        );
        assert!(paper_figure(w(Pattern::Sequential), 0.3, Policy::Adaptive, false).is_none());
    }

    #[test]
    fn chunks_stamp_and_check() {
        let mut b = vec![0u8; CHUNK_BYTES];
        fill_chunk(&mut b, 7, 3);
        assert!(check_chunk(&b, 7, 3));
        assert!(!check_chunk(&b, 7, 2));
        assert!(!check_chunk(&b, 6, 3));
    }
}
