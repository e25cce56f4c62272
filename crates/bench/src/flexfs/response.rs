//! FlexFS's Fig 13: what background migration costs the requests that arrive while it
//! runs. A bulk write of 30 MiB (in 64 KiB writes and an fsync) goes to the SLC region of
//! a 128 MiB part (twice the synthetic runs' size, so that without migration SLC holds it
//! all and `opt` is the ideal the paper means),
//! then single 4 KiB writes, each made durable with `fsync`, arrive after seeded random
//! idle gaps of 0.5–3 s. Under `bm` the migrator starts after 1 s of idle time and works
//! a cleaning step at a time, resting after each so as to use 100%, 50% or 10% of the idle
//! time; a write arriving during a step waits for it. `opt` is the baseline (no
//! migration): no write ever waits. A write's response time is device time from its
//! arrival to the end of its `fsync`.

use std::time::Duration;

use flash::stats::Histogram;
use flashfs::fs::ROOT_INO;
use flashfs::{Fs, Regions};
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::{
    config, device, mlc_volume_bytes, now, response_us, write_synced, Experiment, FlexfsOptions,
    FlexfsRow,
};
use crate::error::{Context, Result};

/// The migrator's shares of idle time compared, percent; 0 is `opt`.
const SHARES: [u8; 4] = [100, 50, 10, 0];

/// Bytes of each timed write.
const PAGE: usize = 4096;

/// Runs the response experiment under every share.
pub fn run(opts: &FlexfsOptions) -> Result<Vec<FlexfsRow>> {
    let volume_bytes = mlc_volume_bytes(&opts.preset, 2 * opts.mib)?;
    SHARES
        .iter()
        .map(|&share| run_one(opts, share, volume_bytes))
        .collect()
}

fn run_one(opts: &FlexfsOptions, share: u8, volume_bytes: u64) -> Result<FlexfsRow> {
    let name = match share {
        0 => "opt".to_string(),
        s => format!("bm-{s}"),
    };
    let what = || format!("response {name}");
    let mut c = config(if share == 0 {
        Regions::Baseline
    } else {
        Regions::Background
    });
    c.ftl.log.migration_share = share.max(1);
    let mut fs = Fs::format(device(&opts.preset, 2 * opts.mib)?, c).context(what)?;
    let bulk = ((opts.mib << 20) * 30 / 64) as usize;
    let data: Vec<u8> = (0..64 << 10).map(|i| (i * 13 + 1) as u8).collect();
    let target = 1 << 20;
    let setup = (|| -> flashfs::Result<u64> {
        let ino = fs.create(ROOT_INO, b"bulk", 0o644, 0, 0)?.ino;
        write_synced(&mut fs, ino, 0, bulk, &data)?;
        let small = fs.create(ROOT_INO, b"small", 0o644, 0, 0)?.ino;
        write_synced(&mut fs, small, 0, target, &data)?;
        Ok(small)
    })();
    let small = setup.context(what)?;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(opts.seed ^ 0xF13);
    let mut times = Histogram::default();
    let mut all = Vec::with_capacity(opts.requests as usize);
    for _ in 0..opts.requests {
        let gap = Duration::from_millis(500 + rng.next_u64() % 2500);
        let arrival = now(&fs) + gap;
        fs.idle(gap).context(what)?;
        let off = (rng.next_u64() % (target / PAGE) as u64) * PAGE as u64;
        fs.write(small, off, &data[..PAGE]).context(what)?;
        fs.fsync(small, false).context(what)?;
        let took = now(&fs).saturating_sub(arrival);
        times.record(took);
        all.push(took);
    }
    all.sort();
    let n = all.len().max(1);
    let mut row = FlexfsRow::new(Experiment::Response, name, opts, &fs, volume_bytes);
    let [mean, p50, p99, p999, max] = response_us(&times);
    row.write_kbps = PAGE as f64 / 1e3 / (mean / 1e6).max(1e-9);
    row.chunks = u64::from(opts.requests);
    row.write_us = Some(mean);
    row.p50_us = Some(p50);
    row.p99_us = Some(p99);
    row.p999_us = Some(p999);
    row.max_us = Some(max);
    row.curve = all
        .iter()
        .enumerate()
        .map(|(i, d)| (d.as_secs_f64() * 1e6, (i + 1) as f64 / n as f64))
        .collect();
    Ok(row)
}

/// The response runs as a table.
pub fn table(rows: &[&FlexfsRow]) -> String {
    let mut s = String::from(
        "RESPONSE    CONFIG     WRITES  MEAN us   P50 us   P99 us  P99.9 us   MAX us  MIGRATED MiB\n",
    );
    let f = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0}"));
    for r in rows {
        s.push_str(&format!(
            "{:<11} {:<10} {:>6}  {:>7}  {:>7}  {:>7}  {:>8}  {:>7}  {:>12.1}\n",
            r.experiment,
            r.config,
            r.chunks,
            f(r.write_us),
            f(r.p50_us),
            f(r.p99_us),
            f(r.p999_us),
            f(r.max_us),
            r.migrated_mib
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes wait for the migrator's steps in proportion to the idle time it takes; with
    /// no migration none waits.
    #[test]
    fn a_smaller_share_of_idle_time_delays_fewer_writes() {
        let opts = FlexfsOptions {
            requests: 400,
            ..FlexfsOptions::default()
        };
        let rows = run(&opts).unwrap();
        let row = |c: &str| rows.iter().find(|r| r.config == c).unwrap();
        let (full, tenth, opt) = (row("bm-100"), row("bm-10"), row("opt"));
        assert!(full.migrated_mib > 0.0 && opt.migrated_mib == 0.0);
        assert!(full.p99_us > tenth.p99_us, "{full:?}\n{tenth:?}");
        assert!(tenth.p99_us > opt.p99_us, "{tenth:?}\n{opt:?}");
        assert!(full.write_us > opt.write_us);
    }
}
