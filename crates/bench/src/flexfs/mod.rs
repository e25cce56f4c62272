//! FlexFS (Lee et al., USENIX ATC 2009) on the simulated MLC part: the native file system
//! with the log's regions ([`Regions`]) beside SLC-only and MLC-only, in the same run.
//!
//! - The paper's synthetic experiments ([`synthetic`]): **idle**, **busy**, **locality**,
//!   and a **burst** run of our own, throughput against utilization.
//! - **response** ([`response`]): the response time of single writes arriving in idle
//!   time while the migrator uses 100%, 50% or 10% of it, or does not run (Fig 13).
//! - **endurance** ([`endurance`]): Table 4's arrivals against a lifetime of 4,000 s on a
//!   part rated for 10 cycles, with and without wear management (Figs 14–15).
//! - **trace** ([`trace`]): a seeded synthetic mobile workload (§5.2), read and write
//!   response times and throughput.
//!
//! All in device time, on `mlc-flexfs` cut to the size the paper used.

pub mod endurance;
pub mod plot;
pub mod response;
pub mod synthetic;
pub mod trace;

use flash::{DeviceSpec, ImageMeta, NandFlash, NandSim};
use flashfs::{Fs, FsConfig, NandSegments, Regions, Segments};
use serde::Serialize;
use std::time::Duration;

use crate::error::{BenchError, Context, Result};

/// One of the experiments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Experiment {
    /// A chunk every 25 s.
    Idle,
    /// A chunk every 10 s.
    Busy,
    /// Busy, with a quarter of each chunk rewriting the same places.
    Locality,
    /// A chunk every 2 s: on this part less idle time than migrating a chunk takes (not
    /// one of the paper's runs; its busy run was that on its device).
    Burst,
    /// Single writes at random idle gaps after a bulk write (Fig 13).
    Response,
    /// Table 4's arrivals against a lifetime guarantee (Figs 14–15).
    Endurance,
    /// A synthetic mobile trace (§5.2).
    Trace,
}

impl Experiment {
    /// Every experiment, in the order the paper gives them.
    pub const ALL: [Experiment; 7] = [
        Experiment::Idle,
        Experiment::Busy,
        Experiment::Locality,
        Experiment::Burst,
        Experiment::Response,
        Experiment::Endurance,
        Experiment::Trace,
    ];

    /// Its name in rows and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Experiment::Idle => "idle",
            Experiment::Busy => "busy",
            Experiment::Locality => "locality",
            Experiment::Burst => "burst",
            Experiment::Response => "response",
            Experiment::Endurance => "endurance",
            Experiment::Trace => "trace",
        }
    }

    /// The experiment named `name`.
    pub fn parse(name: &str) -> Option<Experiment> {
        Experiment::ALL.into_iter().find(|e| e.name() == name)
    }

    /// Whether it is one of the throughput-against-utilization runs, under every setting.
    pub fn is_synthetic(self) -> bool {
        matches!(
            self,
            Experiment::Idle | Experiment::Busy | Experiment::Locality | Experiment::Burst
        )
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct FlexfsOptions {
    /// MLC NAND preset.
    pub preset: String,
    /// MiB of the part used (its first blocks) by every experiment but endurance.
    pub mib: u64,
    /// MiB per chunk.
    pub chunk_mib: u64,
    /// Percent of the volume at which a synthetic run stops.
    pub fill_pct: f64,
    /// Settings compared in the synthetic runs and the trace.
    pub configs: Vec<Regions>,
    /// Experiments run.
    pub experiments: Vec<Experiment>,
    /// MiB of the part the endurance run uses (the paper's C_total: 120 MB); its arrivals
    /// scale with it.
    pub endurance_mib: u64,
    /// Writes timed in the response run.
    pub requests: u32,
    /// Operations of the trace.
    pub trace_ops: u32,
    /// Seed of the response run's gaps and of the trace.
    pub seed: u64,
}

impl Default for FlexfsOptions {
    fn default() -> Self {
        FlexfsOptions {
            preset: "mlc-flexfs".into(),
            mib: 64,
            chunk_mib: 4,
            fill_pct: 95.0,
            configs: Regions::ALL.to_vec(),
            experiments: Experiment::ALL.to_vec(),
            endurance_mib: 120,
            requests: 1000,
            trace_ops: 3000,
            seed: 1,
        }
    }
}

impl FlexfsOptions {
    /// A run of seconds: 16 MiB in 1 MiB chunks, the endurance run on 24 MiB.
    pub fn quick() -> Self {
        FlexfsOptions {
            mib: 16,
            chunk_mib: 1,
            endurance_mib: 24,
            requests: 200,
            trace_ops: 600,
            ..FlexfsOptions::default()
        }
    }
}

/// One run: an experiment under one setting. Fields an experiment does not measure are
/// left out of its JSON row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlexfsRow {
    /// `idle`, `busy`, `locality`, `burst`, `response`, `endurance` or `trace`.
    pub experiment: &'static str,
    /// The regions setting (`mlc-only`, `slc-only`, `baseline`, `bm`, `da`, `la`), with
    /// what the experiment varies: `bm-50` (the migrator's share of idle time), `opt` (no
    /// migration), `da+wm` (wear management).
    pub config: String,
    /// Device preset.
    pub preset: String,
    /// MiB of the part used.
    pub device_mib: u64,
    /// Bytes a volume of MLC segments holds for files on the part (the 100% of
    /// `utilization_pct`, whatever the setting).
    pub volume_bytes: u64,
    /// How full the volume was when the run stopped, percent.
    pub utilization_pct: f64,
    /// User bytes written per second of device time spent writing, over the whole run,
    /// KB/s.
    pub write_kbps: f64,
    /// User bytes read per second of device time spent reading, KB/s (trace).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_kbps: Option<f64>,
    /// Chunks (synthetic runs), writes (response) or operations (trace) done.
    pub chunks: u64,
    /// Whether the run stopped because space ran out.
    pub out_of_space: bool,
    /// MiB the cleaner moved from SLC to MLC segments.
    pub migrated_mib: f64,
    /// MiB the cleaner copied in all (migration included).
    pub copied_mib: f64,
    /// Segments erased.
    pub erases: u64,
    /// Segments in SLC and in MLC mode holding data at the end.
    pub slc_segments: u32,
    /// See `slc_segments`.
    pub mlc_segments: u32,
    /// The share of new data going to SLC segments at the end (FlexFS's α; 1 except under
    /// `da` and `la`).
    pub slc_share: f64,
    /// Write response time (response, trace): mean and percentiles, µs of device time
    /// from the request's arrival to its end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write_us: Option<f64>,
    /// See `write_us`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50_us: Option<f64>,
    /// See `write_us`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_us: Option<f64>,
    /// See `write_us`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p999_us: Option<f64>,
    /// See `write_us`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_us: Option<f64>,
    /// Mean read response time, µs (trace).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_us: Option<f64>,
    /// Erases per block at the end: mean and standard deviation (endurance).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub erase_mean: Option<f64>,
    /// See `erase_mean`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub erase_sigma: Option<f64>,
    /// Whether no block passed its rated cycles within the lifetime (endurance).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lifetime_met: Option<bool>,
    /// What the plot draws: utilization (%) and throughput (KB/s) per chunk (synthetic);
    /// response time (µs) and the share of writes done by then (response); time (s) and
    /// mean erases per block (endurance).
    pub curve: Vec<(f64, f64)>,
}

impl FlexfsRow {
    /// A row of `experiment` under `config` with what the log of `fs` says; the caller
    /// fills in what it measured.
    fn new(
        experiment: Experiment,
        config: String,
        opts: &FlexfsOptions,
        fs: &Fs<Dev>,
        volume_bytes: u64,
    ) -> Self {
        let log = fs.ftl().log();
        let stats = *log.stats();
        let slot = f64::from(log.geometry().slot_size);
        let (slc_segments, mlc_segments) = log.region_segments();
        let s = log.device().flash().spec();
        let st = fs.statfs();
        FlexfsRow {
            experiment: experiment.name(),
            config,
            preset: opts.preset.clone(),
            device_mib: (u64::from(s.blocks)
                * u64::from(s.pages_per_block)
                * u64::from(s.page_size))
                >> 20,
            volume_bytes,
            utilization_pct: (st.blocks - st.blocks_free) as f64 * f64::from(st.block_size) * 100.0
                / volume_bytes.max(1) as f64,
            write_kbps: 0.0,
            read_kbps: None,
            chunks: 0,
            out_of_space: false,
            migrated_mib: stats.migrated_slots as f64 * slot / f64::from(1 << 20),
            copied_mib: stats.copied_slots as f64 * slot / f64::from(1 << 20),
            erases: stats.erases,
            slc_segments,
            mlc_segments,
            slc_share: if log.regions().allocates() {
                log.slc_share()
            } else {
                1.0
            },
            write_us: None,
            p50_us: None,
            p99_us: None,
            p999_us: None,
            max_us: None,
            read_us: None,
            erase_mean: None,
            erase_sigma: None,
            lifetime_met: None,
            curve: Vec::new(),
        }
    }
}

type Dev = NandSegments<NandSim>;

/// The first `mib` MiB of the MLC preset `preset`, without factory bad blocks.
fn device(preset: &str, mib: u64) -> Result<Dev> {
    let p = flash::preset::lookup(preset).context(|| format!("preset {preset:?}"))?;
    let DeviceSpec::Nand(mut spec) = p.spec else {
        return Err(BenchError::InvalidOptions(format!(
            "preset {preset:?} is not NAND flash"
        )));
    };
    if !spec.is_mlc() {
        return Err(BenchError::InvalidOptions(format!(
            "preset {preset:?} is not MLC NAND: it has no SLC mode"
        )));
    }
    let block = u64::from(spec.page_size) * u64::from(spec.pages_per_block);
    spec.blocks = ((mib << 20) / block).clamp(16, u64::from(spec.blocks)) as u32;
    spec.factory_bad_permille = 0;
    let sim = NandSim::new(spec, ImageMeta::new(preset, 1)).context(|| "simulating".into())?;
    NandSegments::new(sim).context(|| "segmenting".into())
}

/// The default file-system configuration with the regions `regions`.
fn config(regions: Regions) -> FsConfig {
    let mut c = FsConfig::default();
    c.ftl.log.regions = Some(regions);
    c
}

/// Bytes an MLC-only volume holds for files on the first `mib` MiB: utilization counts
/// against it whatever the setting, as the paper's figures do (SLC-only runs out near
/// half).
fn mlc_volume_bytes(preset: &str, mib: u64) -> Result<u64> {
    let st = Fs::format(device(preset, mib)?, config(Regions::MlcOnly))
        .context(|| "formatting the MLC-only volume".into())?
        .statfs();
    Ok(st.blocks * u64::from(st.block_size))
}

/// Writes `len` bytes at `off` of file `ino` in calls of at most `data.len()` bytes (of
/// `data`), then makes them durable with `fsync`.
fn write_synced(
    fs: &mut Fs<Dev>,
    ino: u64,
    off: u64,
    len: usize,
    data: &[u8],
) -> flashfs::Result<()> {
    for at in (0..len).step_by(data.len()) {
        fs.write(ino, off + at as u64, &data[..data.len().min(len - at)])?;
    }
    fs.fsync(ino, false)
}

/// The device clock of `fs`.
fn now(fs: &Fs<Dev>) -> Duration {
    fs.ftl().log().device().now()
}

/// Runs the experiments asked for.
pub fn run_flexfs(
    opts: &FlexfsOptions,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<Vec<FlexfsRow>> {
    if opts.chunk_mib == 0 || opts.mib < 4 * opts.chunk_mib {
        return Err(BenchError::InvalidOptions(
            "the part must hold at least four chunks".into(),
        ));
    }
    let synthetic = opts.experiments.iter().filter(|e| e.is_synthetic()).count();
    let trace = usize::from(opts.experiments.contains(&Experiment::Trace));
    let total = ((synthetic + trace) * opts.configs.len()
        + opts
            .experiments
            .iter()
            .filter(|e| !e.is_synthetic())
            .count()) as u64;
    // The synthetic runs and the trace count utilization on the 64 MiB part; the response
    // and endurance runs measure their own parts.
    let volume_bytes = if synthetic + trace > 0 {
        mlc_volume_bytes(&opts.preset, opts.mib)?
    } else {
        0
    };
    let mut rows = Vec::new();
    for &e in &opts.experiments {
        let mut step = |what: &str, rows: &[FlexfsRow]| progress(what, rows.len() as u64, total);
        match e {
            Experiment::Response => {
                step("response", &rows);
                rows.extend(response::run(opts)?);
            }
            Experiment::Endurance => {
                step("endurance", &rows);
                rows.extend(endurance::run(opts)?);
            }
            Experiment::Trace => {
                for &r in &opts.configs {
                    step(&format!("trace {}", r.name()), &rows);
                    rows.push(trace::run(opts, r, volume_bytes)?);
                }
            }
            _ => {
                for &r in &opts.configs {
                    step(&format!("{} {}", e.name(), r.name()), &rows);
                    rows.push(synthetic::run(opts, e, r, volume_bytes)?);
                }
            }
        }
    }
    progress("done", total, total);
    Ok(rows)
}

/// The paper's figures beside each experiment's table.
const PAPER: [(&str, &str); 4] = [
    (
        "synthetic",
        "paper: baseline near 100 KB/s by 50%; BM at SLC speed to 94% (idle); \
         DA flat under busy; LA 2.66 MB/s vs DA 2.45 MB/s (locality)",
    ),
    (
        "response",
        "paper (Fig 13): the less idle time the migrator takes, the closer to OPT",
    ),
    (
        "endurance",
        "paper (Table 4): erases per block 9.23 σ 1.20 with wear management, \
         10.73 σ 2.43 without; lifetime met only with it",
    ),
    (
        "trace",
        "paper: FlexFS 37 µs read / 345 µs write, 2.93 MB/s; SLC-only 34 / 334, 3.02 MB/s",
    ),
];

fn paper(kind: &str) -> &'static str {
    PAPER.iter().find(|p| p.0 == kind).map_or("", |p| p.1)
}

/// The rows as tables, one per kind of experiment, each with the paper's figures.
pub fn table(rows: &[FlexfsRow]) -> String {
    let kind = |r: &FlexfsRow| match Experiment::parse(r.experiment) {
        Some(e) if e.is_synthetic() => "synthetic",
        _ => r.experiment,
    };
    let mut s = String::new();
    for k in ["synthetic", "response", "endurance", "trace"] {
        let these: Vec<&FlexfsRow> = rows.iter().filter(|r| kind(r) == k).collect();
        if these.is_empty() {
            continue;
        }
        if !s.is_empty() {
            s.push('\n');
        }
        s.push_str(&match k {
            "synthetic" => synthetic::table(&these),
            "response" => response::table(&these),
            "endurance" => endurance::table(&these),
            _ => trace::table(&these),
        });
        s.push_str(paper(k));
        s.push('\n');
    }
    s
}

/// Mean and percentiles of a histogram of response times, µs.
fn response_us(h: &flash::stats::Histogram) -> [f64; 5] {
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    [
        us(h.mean()),
        us(h.percentile(50.0)),
        us(h.percentile(99.0)),
        us(h.percentile(99.9)),
        us(h.max()),
    ]
}
