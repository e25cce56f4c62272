//! FlexFS's endurance experiment (Table 4, Figs 14–15): a part of C_total = 120 MB rated
//! for E_cycles = 10 erases per block must last L_min = 4,000 s, in windows of 400 s.
//! Data arrives at 40, 40, 40, 80, 80, 20, 20, 40, 40 MB per window (the paper's tenth
//! window is illegible: we take 40 MB), in chunks spread evenly over each window, with the
//! device idle between them (where migration runs). Each chunk is a new file; the oldest
//! files are deleted first to keep the volume about half full.
//!
//! Dynamic allocation sends what idle time can migrate to SLC — here all of it, which
//! wears the part three times as fast as writing MLC; with wear management (`+wm`,
//! [`flashfs::Lifetime`]) the share is held to what the erases left allow. Both runs
//! level wear to the part's rating, within one erase (`wear_spread` 1). Reported: erases
//! per block at the end (mean and σ over the part's blocks, formatting included) and
//! whether the lifetime was met (no block past its rated cycles at 4,000 s).

use std::time::Duration;

use flash::stats::WearSpread;
use flash::Simulated;
use flashfs::fs::ROOT_INO;
use flashfs::{Error, Fs, Lifetime, Regions};

use super::{
    config, device, mlc_volume_bytes, now, write_synced, Experiment, FlexfsOptions, FlexfsRow,
};
use crate::error::{Context, Result};

/// MB arriving in each window (Table 4; the tenth chosen).
const ARRIVALS_MB: [u64; 10] = [40, 40, 40, 80, 80, 20, 20, 40, 40, 40];

/// The window (T_s) and the lifetime (L_min).
const WINDOW: Duration = Duration::from_secs(400);
const LIFETIME: Duration = Duration::from_secs(4000);

/// Rated erase cycles per block (E_cycles).
const CYCLES: u32 = 10;

/// C_total of the paper, MB: arrivals scale with the part's size against it.
const PAPER_MB: u64 = 120;

/// Runs dynamic allocation without and with wear management.
pub fn run(opts: &FlexfsOptions) -> Result<Vec<FlexfsRow>> {
    let volume_bytes = mlc_volume_bytes(&opts.preset, opts.endurance_mib)?;
    [false, true]
        .into_iter()
        .map(|wm| run_one(opts, wm, volume_bytes))
        .collect()
}

fn run_one(opts: &FlexfsOptions, wm: bool, volume_bytes: u64) -> Result<FlexfsRow> {
    let name = if wm { "da+wm" } else { "da" };
    let what = || format!("endurance {name}");
    let mut c = config(Regions::Dynamic);
    // A part rated for 10 cycles cannot spare any: the leveller keeps every block within
    // one erase of the others.
    c.ftl.log.rated_cycles = CYCLES;
    c.ftl.log.wear_spread = 1;
    if wm {
        c.ftl.log.lifetime = Some(Lifetime {
            min: LIFETIME,
            window: WINDOW,
        });
    }
    let mut fs = Fs::format(device(&opts.preset, opts.endurance_mib)?, c).context(what)?;
    let chunk = (opts.chunk_mib << 20) as usize;
    let data: Vec<u8> = (0..64 << 10).map(|i| (i * 5 + 11) as u8).collect();
    let start = now(&fs);
    let mut files = std::collections::VecDeque::new();
    let (mut busy, mut written, mut made) = (Duration::ZERO, 0u64, 0u64);
    let mut curve = Vec::new();
    let mut out_of_space = false;
    let mean_erases =
        |fs: &Fs<super::Dev>| WearSpread::of(&fs.ftl().log().device().flash().erase_counts()).mean;
    for (w, mb) in ARRIVALS_MB.iter().enumerate() {
        let bytes = (mb << 20) * opts.endurance_mib / PAPER_MB;
        let n = (bytes / chunk as u64).max(1);
        let window_start = start + WINDOW * w as u32;
        for k in 0..n {
            let arrival = window_start + WINDOW * k as u32 / n as u32;
            if let Some(gap) = arrival.checked_sub(now(&fs)) {
                fs.idle(gap).context(what)?;
            }
            let t0 = now(&fs);
            let step = (|| -> flashfs::Result<()> {
                // Half full: the oldest files make room.
                loop {
                    let st = fs.statfs();
                    let used = (st.blocks - st.blocks_free) * u64::from(st.block_size);
                    if used + chunk as u64 <= st.blocks * u64::from(st.block_size) / 2 {
                        break;
                    }
                    let Some(old) = files.pop_front() else { break };
                    fs.unlink(ROOT_INO, format!("f{old:06}").as_bytes())?;
                }
                let ino = fs
                    .create(ROOT_INO, format!("f{made:06}").as_bytes(), 0o644, 0, 0)?
                    .ino;
                write_synced(&mut fs, ino, 0, chunk, &data)
            })();
            match step {
                Ok(()) => {}
                Err(Error::NoSpace) => {
                    out_of_space = true;
                    break;
                }
                Err(e) => return Err(e).context(what),
            }
            files.push_back(made);
            made += 1;
            written += chunk as u64;
            busy += now(&fs) - t0;
        }
        let end = window_start + WINDOW;
        if let Some(gap) = end.checked_sub(now(&fs)) {
            fs.idle(gap).context(what)?;
        }
        curve.push(((now(&fs) - start).as_secs_f64(), mean_erases(&fs)));
    }
    let spread = WearSpread::of(&fs.ftl().log().device().flash().erase_counts());
    let mut row = FlexfsRow::new(Experiment::Endurance, name.into(), opts, &fs, volume_bytes);
    row.write_kbps = written as f64 / 1e3 / busy.as_secs_f64().max(1e-9);
    row.chunks = made;
    row.out_of_space = out_of_space;
    row.erase_mean = Some(spread.mean);
    row.erase_sigma = Some(spread.stddev);
    row.lifetime_met = Some(spread.max <= CYCLES && now(&fs) - start >= LIFETIME);
    row.curve = curve;
    Ok(row)
}

/// The endurance runs as a table.
pub fn table(rows: &[&FlexfsRow]) -> String {
    let mut s = String::from(
        "ENDURANCE   CONFIG     CHUNKS  WRITE KB/s  MIGRATED MiB  ERASES  ERASES/BLOCK  SIGMA  LIFETIME MET\n",
    );
    for r in rows {
        s.push_str(&format!(
            "{:<11} {:<10} {:>6}  {:>10.0}  {:>12.1}  {:>6}  {:>12.2}  {:>5.2}  {}\n",
            r.experiment,
            r.config,
            r.chunks,
            r.write_kbps,
            r.migrated_mib,
            r.erases,
            r.erase_mean.unwrap_or(0.0),
            r.erase_sigma.unwrap_or(0.0),
            match r.lifetime_met {
                Some(true) => "yes",
                _ => "no",
            }
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Wear management spends fewer erases than sending everything to SLC, and keeps
    /// every block within its rated cycles.
    #[test]
    fn wear_management_keeps_the_part_within_its_cycles() {
        let rows = run(&FlexfsOptions::quick()).unwrap();
        let (da, wm) = (&rows[0], &rows[1]);
        assert_eq!((da.config.as_str(), wm.config.as_str()), ("da", "da+wm"));
        assert!(wm.erase_mean < da.erase_mean, "{da:?}\n{wm:?}");
        assert!(wm.migrated_mib < da.migrated_mib);
        assert_eq!(wm.lifetime_met, Some(true), "{wm:?}");
        assert_eq!(wm.curve.len(), ARRIVALS_MB.len());
    }
}
