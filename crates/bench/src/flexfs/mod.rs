//! FlexFS (Lee et al., USENIX ATC 2009) on the simulated MLC part: the native file system
//! with the log's regions ([`Regions`]) beside SLC-only and MLC-only, in the same run.
//!
//! The paper's synthetic experiments, on `mlc-flexfs` cut to 64 MiB as the paper's were:
//! chunks of 4 MiB arrive every 25 s (**idle**) or every 10 s (**busy**); in **locality**
//! a quarter of each chunk rewrites the same places of the first file. Each chunk is a
//! file written in 64 KiB writes and made durable with `fsync`; between chunks the device
//! is idle until the next arrival (`Fs::idle`, where the log may clean). Runs go until the
//! volume is 95% full or space runs out (SLC-only holds half). Throughput is user bytes per
//! second of device time spent writing; idle time does not count.

pub mod plot;

use flash::{DeviceSpec, ImageMeta, NandFlash, NandSim};
use flashfs::fs::ROOT_INO;
use flashfs::{Error, Fs, FsConfig, NandSegments, Regions, Segments};
use serde::Serialize;
use std::time::Duration;

use crate::error::{BenchError, Context, Result};

/// One of the paper's synthetic experiments.
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
}

impl Experiment {
    /// Every experiment, in the order the paper gives them.
    pub const ALL: [Experiment; 4] = [
        Experiment::Idle,
        Experiment::Busy,
        Experiment::Locality,
        Experiment::Burst,
    ];

    /// Its name in rows and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Experiment::Idle => "idle",
            Experiment::Busy => "busy",
            Experiment::Locality => "locality",
            Experiment::Burst => "burst",
        }
    }

    fn period(self) -> Duration {
        match self {
            Experiment::Idle => Duration::from_secs(25),
            Experiment::Busy | Experiment::Locality => Duration::from_secs(10),
            Experiment::Burst => Duration::from_secs(2),
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct FlexfsOptions {
    /// MLC NAND preset.
    pub preset: String,
    /// MiB of the part used (its first blocks).
    pub mib: u64,
    /// MiB per chunk.
    pub chunk_mib: u64,
    /// Percent of the volume at which a run stops.
    pub fill_pct: f64,
    /// Settings compared.
    pub configs: Vec<Regions>,
    /// Experiments run.
    pub experiments: Vec<Experiment>,
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
        }
    }
}

impl FlexfsOptions {
    /// A run of seconds: 16 MiB in 1 MiB chunks.
    pub fn quick() -> Self {
        FlexfsOptions {
            mib: 16,
            chunk_mib: 1,
            ..FlexfsOptions::default()
        }
    }
}

/// One run: an experiment under one setting.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlexfsRow {
    /// `idle`, `busy`, `locality` or `burst`.
    pub experiment: &'static str,
    /// `mlc-only`, `slc-only`, `baseline`, `bm` or `da`.
    pub config: &'static str,
    /// Device preset.
    pub preset: String,
    /// MiB of the part used.
    pub device_mib: u64,
    /// Bytes a volume of MLC segments holds for files on the part (the 100% of
    /// `utilization_pct`, whatever the setting).
    pub volume_bytes: u64,
    /// How full the volume was when the run stopped, percent.
    pub utilization_pct: f64,
    /// User bytes per second of device time spent writing, over the whole run, KB/s.
    pub write_kbps: f64,
    /// Chunks written whole.
    pub chunks: u64,
    /// Whether the run stopped because space ran out before `fill_pct`.
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
    /// `da`).
    pub slc_share: f64,
    /// Per chunk: utilization after it (percent) and its throughput (KB/s).
    pub curve: Vec<(f64, f64)>,
}

type Dev = NandSegments<NandSim>;

fn device(opts: &FlexfsOptions) -> Result<Dev> {
    let p = flash::preset::lookup(&opts.preset).context(|| format!("preset {:?}", opts.preset))?;
    let DeviceSpec::Nand(mut spec) = p.spec else {
        return Err(BenchError::InvalidOptions(format!(
            "preset {:?} is not NAND flash",
            opts.preset
        )));
    };
    if !spec.is_mlc() {
        return Err(BenchError::InvalidOptions(format!(
            "preset {:?} is not MLC NAND: it has no SLC mode",
            opts.preset
        )));
    }
    let block = u64::from(spec.page_size) * u64::from(spec.pages_per_block);
    spec.blocks = ((opts.mib << 20) / block).clamp(16, u64::from(spec.blocks)) as u32;
    spec.factory_bad_permille = 0;
    let sim =
        NandSim::new(spec, ImageMeta::new(&opts.preset, 1)).context(|| "simulating".into())?;
    NandSegments::new(sim).context(|| "segmenting".into())
}

fn config(regions: Regions) -> FsConfig {
    let mut c = FsConfig::default();
    c.ftl.log.regions = Some(regions);
    c
}

/// Runs every experiment under every setting.
pub fn run_flexfs(
    opts: &FlexfsOptions,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<Vec<FlexfsRow>> {
    if opts.chunk_mib == 0 || opts.mib < 4 * opts.chunk_mib {
        return Err(BenchError::InvalidOptions(
            "the part must hold at least four chunks".into(),
        ));
    }
    // Utilization is counted against the part's MLC capacity whatever the setting, as the
    // paper's figures count it: SLC-only runs out near half.
    let st = Fs::format(device(opts)?, config(Regions::MlcOnly))
        .context(|| "formatting the MLC-only volume".into())?
        .statfs();
    let volume_bytes = st.blocks * u64::from(st.block_size);
    let total = (opts.experiments.len() * opts.configs.len()) as u64;
    let mut rows = Vec::new();
    for &e in &opts.experiments {
        for &r in &opts.configs {
            progress(
                &format!("{} {}", e.name(), r.name()),
                rows.len() as u64,
                total,
            );
            rows.push(run_one(opts, e, r, volume_bytes)?);
        }
    }
    progress("done", total, total);
    Ok(rows)
}

/// Runs experiment `e` under `r`; `volume_bytes` is what a volume of MLC segments holds on
/// the part, against which utilization is counted.
fn run_one(
    opts: &FlexfsOptions,
    e: Experiment,
    r: Regions,
    volume_bytes: u64,
) -> Result<FlexfsRow> {
    let what = || format!("{} {}", e.name(), r.name());
    let mut fs = Fs::format(device(opts)?, config(r)).context(what)?;
    let used_pct = |fs: &Fs<Dev>| {
        let st = fs.statfs();
        (st.blocks - st.blocks_free) as f64 * f64::from(st.block_size) * 100.0 / volume_bytes as f64
    };
    let chunk = (opts.chunk_mib << 20) as usize;
    let write = 64 << 10;
    let data: Vec<u8> = (0..write).map(|i| (i * 7 + 3) as u8).collect();
    // Locality rewrites this much of each chunk in the first file, at the same places.
    let hot = if e == Experiment::Locality {
        chunk / 4
    } else {
        0
    };
    let mut busy = Duration::ZERO;
    let mut written = 0u64;
    let mut curve = Vec::new();
    let mut chunks = 0;
    let mut out_of_space = false;
    let mut first = None;
    let now = |fs: &Fs<Dev>| fs.ftl().log().device().now();
    while used_pct(&fs) < opts.fill_pct {
        let t0 = now(&fs);
        let name = format!("chunk{chunks:05}");
        let step = (|| -> flashfs::Result<()> {
            let ino = fs.create(ROOT_INO, name.as_bytes(), 0o644, 0, 0)?.ino;
            let fresh = if first.is_some() { chunk - hot } else { chunk };
            for off in (0..fresh).step_by(write) {
                fs.write(ino, off as u64, &data[..write.min(fresh - off)])?;
            }
            fs.fsync(ino, false)?;
            if let (Some(f), true) = (first, hot > 0) {
                for off in (0..hot).step_by(write) {
                    fs.write(f, off as u64, &data[..write.min(hot - off)])?;
                }
                fs.fsync(f, false)?;
            }
            first.get_or_insert(ino);
            Ok(())
        })();
        match step {
            Ok(()) => {}
            Err(Error::NoSpace) => {
                out_of_space = true;
                break;
            }
            Err(err) => return Err(err).context(what),
        }
        let took = now(&fs) - t0;
        busy += took;
        written += chunk as u64;
        chunks += 1;
        curve.push((
            used_pct(&fs),
            chunk as f64 / 1e3 / took.as_secs_f64().max(1e-9),
        ));
        if let Some(rest) = e.period().checked_sub(took) {
            fs.idle(rest).context(what)?;
        }
    }
    let utilization_pct = used_pct(&fs);
    let log = fs.ftl().log();
    let stats = *log.stats();
    let slot = f64::from(log.geometry().slot_size);
    let (slc_segments, mlc_segments) = log.region_segments();
    Ok(FlexfsRow {
        experiment: e.name(),
        config: r.name(),
        preset: opts.preset.clone(),
        device_mib: {
            let s = log.device().flash().spec();
            (u64::from(s.blocks) * u64::from(s.pages_per_block) * u64::from(s.page_size)) >> 20
        },
        volume_bytes,
        utilization_pct,
        write_kbps: written as f64 / 1e3 / busy.as_secs_f64().max(1e-9),
        chunks,
        out_of_space,
        migrated_mib: stats.migrated_slots as f64 * slot / f64::from(1 << 20),
        copied_mib: stats.copied_slots as f64 * slot / f64::from(1 << 20),
        erases: stats.erases,
        slc_segments,
        mlc_segments,
        slc_share: if r == Regions::Dynamic {
            log.slc_share()
        } else {
            1.0
        },
        curve,
    })
}

/// The rows as a table, with throughput at each tenth of utilization.
pub fn table(rows: &[FlexfsRow]) -> String {
    let mut s = String::from(
        "EXPERIMENT  CONFIG     UTIL %  WRITE KB/s  CHUNKS  MIGRATED MiB  COPIED MiB  ERASES  SLC/MLC SEGS  ALPHA  KB/s AT 10..90% UTIL\n",
    );
    for r in rows {
        let at = (1..10)
            .map(|d| {
                r.curve
                    .iter()
                    .find(|(u, _)| *u >= f64::from(d) * 10.0)
                    .map_or("-".to_string(), |(_, k)| format!("{k:.0}"))
            })
            .collect::<Vec<_>>()
            .join(" ");
        s.push_str(&format!(
            "{:<11} {:<10} {:>6.1}  {:>10.0}  {:>6}  {:>12.1}  {:>10.1}  {:>6}  {:>5}/{:<6}  {:>5.2}  {}\n",
            r.experiment,
            r.config,
            r.utilization_pct,
            r.write_kbps,
            r.chunks,
            r.migrated_mib,
            r.copied_mib,
            r.erases,
            r.slc_segments,
            r.mlc_segments,
            r.slc_share,
            at
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The harness on a small part: every setting runs, SLC-only runs out of space first,
    /// the baseline migrates and MLC-only does not.
    #[test]
    fn a_quick_run_compares_the_settings() {
        // 32 MiB: on a smaller part free segments are always short, so the cleaner
        // migrates in idle time under the baseline too, and the two settings meet.
        let opts = FlexfsOptions {
            mib: 32,
            experiments: vec![Experiment::Busy],
            ..FlexfsOptions::default()
        };
        let rows = run_flexfs(&opts, &mut |_, _, _| {}).unwrap();
        assert_eq!(rows.len(), 5);
        let row = |c: &str| rows.iter().find(|r| r.config == c).unwrap();
        assert!(row("slc-only").out_of_space, "{:?}", row("slc-only"));
        assert!(row("slc-only").utilization_pct < 60.0);
        assert!(row("mlc-only").utilization_pct >= 90.0);
        assert!(row("baseline").utilization_pct >= 90.0);
        assert!(row("baseline").migrated_mib > 0.0);
        assert_eq!(row("mlc-only").migrated_mib, 0.0);
        // Idle time spent migrating leaves SLC space for the next chunk.
        assert!(row("bm").migrated_mib > 0.0);
        assert!(row("bm").write_kbps > row("baseline").write_kbps);
        assert!(rows
            .iter()
            .all(|r| r.write_kbps > 0.0 && !r.curve.is_empty()));
        assert!(table(&rows).contains("baseline"));
        // With idle time enough to migrate everything, dynamic allocation puts all in SLC.
        assert_eq!(row("da").write_kbps, row("bm").write_kbps);
    }

    /// With less idle time than migrating a chunk takes, dynamic allocation sends part of
    /// each chunk straight to MLC and beats background migration, which falls back to
    /// migrating in the foreground.
    #[test]
    fn dynamic_allocation_wins_when_idle_time_runs_short() {
        let opts = FlexfsOptions {
            mib: 32,
            experiments: vec![Experiment::Burst],
            configs: vec![Regions::Background, Regions::Dynamic],
            ..FlexfsOptions::default()
        };
        let rows = run_flexfs(&opts, &mut |_, _, _| {}).unwrap();
        let (bm, da) = (&rows[0], &rows[1]);
        assert!(da.write_kbps > 1.5 * bm.write_kbps, "{bm:?}\n{da:?}");
        assert!(da.migrated_mib < bm.migrated_mib);
    }
}
