//! `flashfs torture`: power cuts at device operations, checked after every remount.

use std::io::Write;

use anyhow::{bail, Result};
use clap::Args as ClapArgs;
use flashfs_bench::torture::{self, Fault, TortureOptions, Workload, DEFAULT_OPS};

use crate::Global;

pub const EXAMPLES: &str = "Examples:
  flashfs torture                               default presets x every fault x every workload
  flashfs torture --preset nand-128m --workload database --cuts 500
  flashfs torture --preset nand-128m --fault ecc-beyond --fault wear-out --cuts 200
  flashfs torture --preset w25q64jv --fault power-cut --workload mixed --ops 60 --exhaustive
  flashfs torture --preset 28f008sa --fault mount-cut --workload append-log --seed 7 --cut 412 --torn
                                                replay one case (as a violation prints it)
  flashfs torture --json                        one JSON object per preset, fault and workload

Each case runs a workload on the block device, cuts the power after a device operation
(cleanly, or tearing that operation), reboots, mounts, reads every sector and checks it
holds its value at the last acknowledged flush or one written since; then continues the
workload with a second cut, writes a little more and remounts. The fault kinds add to that:
  power-cut    nothing more
  mount-cut    the power goes again while mounting after the first cut (or in its first writes)
  ecc-within   stuck bit errors the ECC corrects: must be invisible (NAND)
  ecc-beyond   bit errors beyond the ECC: reads may fail with EIO, never return wrong bytes (NAND)
  silent       programs and erases that report success and do nothing
  wear-out     blocks that fail program and erase part-way through the run
  bad-blocks   a part with 10% factory bad blocks (NAND)
Typed errors under ecc-beyond, silent and wear-out are media damage, counted (column media),
not violations. Large presets run with fewer and smaller erase blocks (listed above the
table) so the cleaner works within one workload. The torture covers the block device (ftl).";

/// Options of `flashfs torture`.
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// Presets to run on, NOR or NAND (repeatable) [default: 28f008sa, nand-128m, w25q64jv,
    /// mlc-flexfs].
    #[arg(long, value_name = "NAME")]
    preset: Vec<String>,
    /// Fault kinds: power-cut, mount-cut, ecc-within, ecc-beyond, silent, wear-out, bad-blocks
    /// (repeatable) [default: every kind that applies to each preset's medium].
    #[arg(long, value_name = "KIND", value_parser = ["power-cut", "mount-cut", "ecc-within", "ecc-beyond", "silent", "wear-out", "bad-blocks"])]
    fault: Vec<String>,
    /// Workloads: mixed, append-log, database, kawaguchi-random (repeatable) [default: all].
    #[arg(long, value_name = "W", value_parser = ["mixed", "append-log", "database", "kawaguchi-random"])]
    workload: Vec<String>,
    /// Random cases per preset, fault kind and workload, each with a first and a chained
    /// second cut.
    #[arg(long, value_name = "N", default_value_t = 100)]
    cuts: u64,
    /// Seed: random case i runs the workload of seed S+i; --exhaustive and --cut use S.
    #[arg(long, value_name = "S", default_value_t = 1)]
    seed: u64,
    /// Operations per workload.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_OPS)]
    ops: usize,
    /// Cut at every device operation of the workload, clean and torn.
    #[arg(long, conflicts_with = "cut")]
    exhaustive: bool,
    /// Replay one case: the first cut after K device operations.
    #[arg(long, value_name = "K")]
    cut: Option<u64>,
    /// With --cut: the operation at the cut is torn (left half done).
    #[arg(long, requires = "cut")]
    torn: bool,
    /// One JSON object per preset, fault kind and workload instead of the table.
    #[arg(long)]
    json: bool,
}

/// Violations printed in full; the rest are counted.
const SHOWN: usize = 20;

/// Runs the torture and prints what it measured.
pub fn run(args: &Args, global: Global, out: &mut dyn Write) -> Result<()> {
    let mut opts = TortureOptions {
        cuts: args.cuts,
        seed: args.seed,
        ops: args.ops,
        exhaustive: args.exhaustive,
        cut: args.cut,
        torn: args.torn,
        ..TortureOptions::default()
    };
    if !args.preset.is_empty() {
        opts.presets.clone_from(&args.preset);
    }
    if !args.fault.is_empty() {
        opts.faults = args
            .fault
            .iter()
            .filter_map(|f| Fault::from_name(f))
            .collect();
    }
    if !args.workload.is_empty() {
        opts.workloads = args
            .workload
            .iter()
            .filter_map(|w| Workload::from_name(w))
            .collect();
    }
    let bar = global.progress_bar(1, "{msg:>39} [{bar:40}] {pos}/{len} cases {eta}");
    let outcome = torture::run(&opts, &mut |label, done, total| {
        bar.set_length(total);
        bar.set_position(done);
        bar.set_message(label.to_string());
    })?;
    bar.finish_and_clear();

    if args.json {
        for r in &outcome.reports {
            let mut v = serde_json::to_value(r)?;
            let repro: Vec<String> = outcome
                .violations
                .iter()
                .filter(|x| {
                    x.preset == r.preset && x.case.fault == r.kind && x.workload == r.workload
                })
                .take(SHOWN)
                .map(|x| x.reproducer())
                .collect();
            v["reproducers"] = serde_json::json!(repro);
            writeln!(out, "{v}")?;
        }
        for v in outcome.violations.iter().take(SHOWN) {
            eprintln!("violation: {v}");
            eprintln!("  reproduce: {}", v.reproducer());
        }
    } else {
        for d in &outcome.devices {
            let note = if d.note.is_empty() {
                String::new()
            } else {
                format!(" ({})", d.note)
            };
            writeln!(out, "{}: {}{note}", d.preset, d.geometry())?;
        }
        for s in &outcome.skipped {
            writeln!(out, "{}: {} does not apply: {}", s.preset, s.fault, s.why)?;
        }
        writeln!(out)?;
        writeln!(
            out,
            "{:<12} {:<10} {:<17} {:>8} {:>6} {:>6} {:>8} {:>12} {:>6} {:>10}",
            "preset",
            "kind",
            "workload",
            "sectors",
            "cases",
            "cuts",
            "remounts",
            "MB verified",
            "media",
            "violations"
        )?;
        for r in &outcome.reports {
            writeln!(
                out,
                "{:<12} {:<10} {:<17} {:>8} {:>6} {:>6} {:>8} {:>12.1} {:>6} {:>10}",
                r.preset,
                r.kind.name(),
                r.workload.name(),
                format!("{}x{}", r.sectors, r.sector_size),
                r.cases,
                r.cuts,
                r.remounts,
                r.bytes_verified as f64 / 1e6,
                r.media_damage(),
                r.violations
            )?;
        }
        for v in outcome.violations.iter().take(SHOWN) {
            writeln!(out, "violation: {v}")?;
            writeln!(out, "  reproduce: {}", v.reproducer())?;
        }
    }
    let n = outcome.violations.len();
    if n > SHOWN {
        eprintln!("... and {} more violations", n - SHOWN);
    }
    if let Some(first) = outcome.violations.first() {
        out.flush()?;
        bail!(
            "{n} case(s) broke rule 3 (power-loss atomicity); the first: {}",
            first.reproducer()
        );
    }
    Ok(())
}
