//! The paper's synthetic experiments (Figs 10–12): chunks of 4 MiB arrive every 25 s
//! (**idle**) or every 10 s (**busy**); in **locality** a quarter of each chunk rewrites the
//! same places of the first file; **burst** (ours) sends one every 2 s. Each chunk is a
//! file written in 64 KiB writes and made durable with `fsync`; between chunks the device
//! is idle until the next arrival (`Fs::idle`, where the log may clean and migrate). Runs
//! go until the volume is 95% full or space runs out (SLC-only holds half). Throughput is
//! user bytes per second of device time spent writing; idle time does not count.

use std::time::Duration;

use flashfs::fs::ROOT_INO;
use flashfs::{Error, Fs, Regions};

use super::{config, device, now, write_synced, Dev, Experiment, FlexfsOptions, FlexfsRow};
use crate::error::{Context, Result};

impl Experiment {
    fn period(self) -> Duration {
        match self {
            Experiment::Idle => Duration::from_secs(25),
            Experiment::Burst => Duration::from_secs(2),
            _ => Duration::from_secs(10),
        }
    }
}

/// Runs synthetic experiment `e` under `r`; `volume_bytes` is what a volume of MLC segments
/// holds on the part, against which utilization is counted.
pub fn run(
    opts: &FlexfsOptions,
    e: Experiment,
    r: Regions,
    volume_bytes: u64,
) -> Result<FlexfsRow> {
    let what = || format!("{} {}", e.name(), r.name());
    let mut fs = Fs::format(device(&opts.preset, opts.mib)?, config(r)).context(what)?;
    let used_pct = |fs: &Fs<Dev>| {
        let st = fs.statfs();
        (st.blocks - st.blocks_free) as f64 * f64::from(st.block_size) * 100.0 / volume_bytes as f64
    };
    let chunk = (opts.chunk_mib << 20) as usize;
    let data: Vec<u8> = (0..64 << 10).map(|i| (i * 7 + 3) as u8).collect();
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
    while used_pct(&fs) < opts.fill_pct {
        let t0 = now(&fs);
        let name = format!("chunk{chunks:05}");
        let step = (|| -> flashfs::Result<()> {
            let ino = fs.create(ROOT_INO, name.as_bytes(), 0o644, 0, 0)?.ino;
            let fresh = if first.is_some() { chunk - hot } else { chunk };
            write_synced(&mut fs, ino, 0, fresh, &data)?;
            if let (Some(f), true) = (first, hot > 0) {
                write_synced(&mut fs, f, 0, hot, &data)?;
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
    let mut row = FlexfsRow::new(e, r.name().into(), opts, &fs, volume_bytes);
    row.write_kbps = written as f64 / 1e3 / busy.as_secs_f64().max(1e-9);
    row.chunks = chunks;
    row.out_of_space = out_of_space;
    row.curve = curve;
    Ok(row)
}

/// The synthetic runs as a table, with throughput at each tenth of utilization.
pub fn table(rows: &[&FlexfsRow]) -> String {
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
    use super::super::run_flexfs;
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
        assert_eq!(rows.len(), Regions::ALL.len());
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
        assert!(super::super::table(&rows).contains("baseline"));
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
