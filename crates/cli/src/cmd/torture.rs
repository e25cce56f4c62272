//! `flashfs torture`: power cuts at device operations, checked after every remount.

use std::io::Write;

use anyhow::{bail, Result};
use clap::Args as ClapArgs;
use flashfs_bench::fswork::FsWorkload;
use flashfs_bench::torture::{
    self, Fault, Outcome, Report, TargetKind, TortureOptions, Workload, ALL_PRESETS, DEFAULT_OPS,
};

use crate::Global;

pub const EXAMPLES: &str = "Examples:
  flashfs torture                               default presets x both targets x every fault x every workload
  flashfs torture --target fs --preset st10f280 --workload mail-spool --cuts 200
  flashfs torture --preset nand-128m --workload database --cuts 500
  flashfs torture --preset nand-128m --fault ecc-beyond --fault wear-out --cuts 200
  flashfs torture --preset w25q64jv --fault power-cut --workload mixed --ops 60 --exhaustive
  flashfs torture --preset nand-128m+fram-8m --cuts 200
                                                NVRAM beside NAND as one volume: the metadata on
                                                the NVRAM, the data on the NAND, one power supply
  flashfs torture --preset 28f008sa --fault mount-cut --workload append-log --seed 7 --cut 412 --torn
                                                replay one case (as a violation prints it)
  flashfs torture --json                        one JSON object per preset, target, fault and workload
  flashfs torture --campaign 1000000            every preset, target, fault and workload until
                                                a million power cuts have been made

Each case runs a workload on a target (with idle steps, in which the log cleans ahead of
need and an MLC part migrates, unless --no-idle), cuts the power after a device operation
(cleanly, or tearing that operation), reboots, mounts and checks what it finds; then
continues the workload with a second cut, writes a little more and remounts. The block
device (ftl) must show in each sector its value at the last acknowledged flush or one
written since; the file system (fs) must mount, pass fsck, and hold the state of its last
sync plus whole operations since, in order; at the end deleting everything must give back
all the space. The fault kinds add to that:
  power-cut    nothing more
  mount-cut    the power goes again while mounting after the first cut (or in its first writes)
  ecc-within   stuck bit errors the ECC corrects: must be invisible (NAND)
  ecc-beyond   bit errors beyond the ECC: reads may fail with EIO, never return wrong bytes (NAND)
  silent       programs and erases that report success and do nothing (the log then reads
               back every program: LogConfig::verify_programs, off by default)
  silent-unverified  the same with the read-back off (only when asked for): shows the
               acknowledged data such failures lose without it
  wear-out     blocks that fail program and erase part-way through the run
  bad-blocks   a part with 10% factory bad blocks (NAND)
  at-rest      now and then two segments are damaged at rest: retention loss (worse on worn
               blocks) and read disturb, NAND's ECC applied (corrected, uncorrectable, now
               and then miscorrected into wrong data it passes), pages that read as erased;
               every read returns bytes a write put there or a typed error, never others
Typed errors under ecc-beyond, silent, wear-out and at-rest are media damage, counted (column media),
not violations. Large presets run with fewer and smaller erase blocks (listed above the
table) so the cleaner works within one workload; the file system gets more of them where it
would not fit. On a volume on two devices (nand-128m+fram-8m, w25q64jv+cy15b102q) a cut
counts the operations of both parts and falls on whichever makes the operation at its
count, torn as that part tears (a prefix of an NVRAM write); both parts lose power and
reboot together. Silent failures strike both parts, the other faults of the medium the
flash.";

/// Options of `flashfs torture`.
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// Presets to run on: NOR, NAND, NVRAM, or NVRAM beside NAND or NOR as one volume
    /// (nand-128m+fram-8m, w25q64jv+cy15b102q) (repeatable) [default: 28f008sa, nand-128m,
    /// w25q64jv, mlc-flexfs, nand-128m+fram-8m, w25q64jv+cy15b102q].
    #[arg(long, value_name = "NAME")]
    preset: Vec<String>,
    /// Fault kinds: power-cut, mount-cut, ecc-within, ecc-beyond, silent, wear-out,
    /// bad-blocks, at-rest, silent-unverified (repeatable) [default: every kind that applies
    /// to each preset's medium, but silent-unverified].
    #[arg(long, value_name = "KIND", value_parser = ["power-cut", "mount-cut", "ecc-within", "ecc-beyond", "silent", "wear-out", "bad-blocks", "at-rest", "silent-unverified"])]
    fault: Vec<String>,
    /// Targets: ftl (the block device), fs (the file system) (repeatable) [default: both].
    #[arg(long, value_name = "T", value_parser = ["ftl", "fs"])]
    target: Vec<String>,
    /// Workloads: mixed, append-log, database, kawaguchi-random on the block device;
    /// fs-mixed, mail-spool, fs-append-log, fs-database, fs-records, fs-small-writes on the file system (repeatable)
    /// [default: all of the selected targets'].
    #[arg(long, value_name = "W", value_parser = ["mixed", "append-log", "database", "kawaguchi-random", "fs-mixed", "mail-spool", "fs-append-log", "fs-database", "fs-records", "fs-small-writes"])]
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
    /// The file system's journal blocks (fs target): 0 for none [default: the medium's, a
    /// 32nd of the volume: 8 to 256 blocks on reprogrammable NOR, 8 to 128 elsewhere]. A
    /// case whose volume it passes a quarter of fails to format.
    #[arg(long, value_name = "N")]
    journal_blocks: Option<u16>,
    /// Run the workloads without their idle steps (a case found without them replays only
    /// so; a violation's reproducer says when).
    #[arg(long)]
    no_idle: bool,
    /// One JSON object per preset, target, fault kind and workload instead of the table.
    #[arg(long)]
    json: bool,
    /// Run every preset, target, fault kind and workload (unless selected) in rounds of
    /// --cuts cases each until N power cuts have been made; print the totals.
    #[arg(long, value_name = "N", conflicts_with_all = ["cut", "exhaustive"])]
    campaign: Option<u64>,
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
        journal_blocks: args.journal_blocks,
        idle: !args.no_idle,
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
    if !args.target.is_empty() {
        opts.targets = args
            .target
            .iter()
            .filter_map(|t| TargetKind::from_name(t))
            .collect();
    }
    if !args.workload.is_empty() {
        opts.workloads = args
            .workload
            .iter()
            .filter_map(|w| Workload::from_name(w))
            .collect();
        opts.fs_workloads = args
            .workload
            .iter()
            .filter_map(|w| FsWorkload::from_name(w))
            .collect();
        // A target none of whose workloads was named does not run.
        opts.targets.retain(|t| match t {
            TargetKind::Ftl => !opts.workloads.is_empty(),
            TargetKind::Fs => !opts.fs_workloads.is_empty(),
        });
    }
    let bar = global.progress_bar(1, "{msg:>42} [{bar:40}] {pos}/{len} cases {eta}");
    let started = std::time::Instant::now();
    let outcome = match args.campaign {
        None => torture::run(&opts, &mut |label, done, total| {
            bar.set_length(total);
            bar.set_position(done);
            bar.set_message(label.to_string());
        })?,
        Some(goal) => {
            if args.preset.is_empty() {
                opts.presets = ALL_PRESETS.iter().map(|s| s.to_string()).collect();
            }
            campaign(&mut opts, goal, &mut |label, done, total| {
                bar.set_length(total);
                bar.set_position(done);
                bar.set_message(label.to_string());
            })?
        }
    };
    bar.finish_and_clear();
    let wall = started.elapsed();

    if args.json {
        for r in &outcome.reports {
            let mut v = serde_json::to_value(r)?;
            let repro: Vec<String> = outcome
                .violations
                .iter()
                .filter(|x| {
                    x.preset == r.preset
                        && x.target == r.target
                        && x.case.fault == r.kind
                        && x.workload == r.workload
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
            writeln!(out, "{} {}: {}{note}", d.preset, d.target, d.geometry())?;
        }
        if let Some(n) = opts.journal_blocks {
            writeln!(
                out,
                "fs: a journal of {n} blocks asked for at format (the medium's default otherwise)"
            )?;
        }
        if outcome.reports.iter().any(|r| r.verify_programs) {
            writeln!(
                out,
                "silent: the log reads back every program (verify_programs on; off by default)"
            )?;
        }
        for s in &outcome.skipped {
            writeln!(out, "{}: {} does not apply: {}", s.preset, s.fault, s.why)?;
        }
        writeln!(out)?;
        // As wide as the longest preset's name (a volume on two devices names two).
        let pw = outcome
            .reports
            .iter()
            .map(|r| r.preset.len())
            .max()
            .unwrap_or(0)
            .max(12);
        writeln!(
            out,
            "{:<pw$} {:<4} {:<10} {:<17} {:>9} {:>6} {:>6} {:>8} {:>12} {:>6} {:>10}",
            "preset",
            "tgt",
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
                "{:<pw$} {:<4} {:<10} {:<17} {:>9} {:>6} {:>6} {:>8} {:>12.1} {:>6} {:>10}",
                r.preset,
                r.target,
                r.kind.name(),
                r.workload,
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
    if args.campaign.is_some() || !args.json {
        let sum = |f: fn(&Report) -> u64| outcome.reports.iter().map(f).sum::<u64>();
        // Where a volume on two devices ran, how many cuts fell on its NVRAM.
        let nvram = if outcome.devices.iter().any(|d| d.nvram.is_some()) {
            format!(", {} on an NVRAM beside the flash", sum(|r| r.nvram_cuts))
        } else {
            String::new()
        };
        let line = format!(
            "total: {} cases, {} cuts ({} in idle time, {} while the anchors moved{nvram}), {} remounts, {:.1} MB verified, {} media damage, {} violations ({:.0} s)",
            sum(|r| r.cases),
            sum(|r| r.cuts),
            sum(|r| r.idle_cuts),
            sum(|r| r.move_cuts),
            sum(|r| r.remounts),
            sum(|r| r.bytes_verified) as f64 / 1e6,
            sum(Report::media_damage),
            sum(|r| r.violations),
            wall.as_secs_f64()
        );
        if args.json {
            eprintln!("{line}");
        } else {
            writeln!(out, "{line}")?;
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

/// Runs rounds of `opts.cuts` cases per preset, target, fault kind and workload, each round
/// with fresh seeds, until `goal` power cuts have been made; sums the rounds.
fn campaign(
    opts: &mut TortureOptions,
    goal: u64,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<Outcome> {
    if opts.cuts == 0 {
        bail!("--campaign needs --cuts above 0 (cases per round)");
    }
    let mut total = Outcome::default();
    let mut cuts = 0;
    let mut round = 0u64;
    while cuts < goal {
        let o = torture::run(opts, &mut |label, done, n| {
            progress(&format!("round {} {label}", round + 1), done, n)
        })?;
        cuts += o.reports.iter().map(|r| r.cuts).sum::<u64>();
        if round == 0 {
            total = o;
        } else {
            for r in o.reports {
                let same = total.reports.iter_mut().find(|t| {
                    t.preset == r.preset
                        && t.target == r.target
                        && t.kind == r.kind
                        && t.workload == r.workload
                });
                match same {
                    Some(t) => {
                        t.cases += r.cases;
                        t.cuts += r.cuts;
                        t.idle_cuts += r.idle_cuts;
                        t.move_cuts += r.move_cuts;
                        t.nvram_cuts += r.nvram_cuts;
                        t.remounts += r.remounts;
                        t.bytes_verified += r.bytes_verified;
                        t.media_errors += r.media_errors;
                        t.rolled_back += r.rolled_back;
                        t.typed_errors += r.typed_errors;
                        t.mount_errors += r.mount_errors;
                        t.violations += r.violations;
                    }
                    None => total.reports.push(r),
                }
            }
            total.violations.extend(o.violations);
        }
        round += 1;
        opts.seed = opts.seed.wrapping_add(opts.cuts);
    }
    Ok(total)
}
