//! `flashfs bench`: the papers' experiments, measured in device time on simulated parts.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use flashfs::log::policy::Policy;
use flashfs_bench::kawaguchi::{run_kawaguchi, Basis, KawaguchiOptions};
use flashfs_bench::scale::{run_scale, ScaleOptions};
use flashfs_bench::workload::Pattern;
use flashfs_bench::{plot, report};

use crate::Global;

pub const EXAMPLES: &str = "Examples:
  flashfs bench kawaguchi --quick               every row, a short run each (under a minute)
  flashfs bench kawaguchi --plot out/           the full run (192 MB per row), with plots
  flashfs bench kawaguchi --pattern hot-cold --util 90 --policy adaptive --json
  flashfs bench scale --quick                   lookups and seeks as a directory and a file grow
  flashfs bench scale                           100,000 files, a 1 GiB file, on the 1 GiB NAND
  flashfs bench fuse                            FUSE mount of a native image vs. bindfs on tmpfs
  flashfs bench fuse --json --mib 16            one JSON object per metric";

/// Which experiment.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Kawaguchi et al. 1995, section 3: sequential, random and hot-and-cold 4 KB overwrites
    /// on the block device over the 28F008SA array, per cleaning policy and head setting,
    /// with the paper's figures beside ours.
    #[command(after_help = EXAMPLES)]
    Kawaguchi(KawaguchiArgs),
    /// The native file system at scale: cold lookups in a directory of up to 100,000 files,
    /// cold random 4 KiB reads of a 1 GiB file and of a file fragmented into tens of
    /// thousands of extents; page reads and device time per operation.
    #[command(after_help = EXAMPLES)]
    Scale(ScaleArgs),
    /// Host-side speed through FUSE: sequential and random 4 KiB I/O and file creation and
    /// deletion on a mounted native image (on tmpfs) against a FUSE passthrough of tmpfs
    /// (bindfs), in the same run, with the ratio per metric. Needs bindfs and fusermount3.
    #[command(after_help = EXAMPLES)]
    Fuse(super::fusebench::FuseArgs),
}

/// Options of `flashfs bench scale`.
#[derive(Debug, Args)]
pub struct ScaleArgs {
    /// Smaller sizes on the 128 MiB NAND (seconds instead of minutes).
    #[arg(long)]
    quick: bool,
    /// One JSON object per row instead of the table.
    #[arg(long)]
    json: bool,
    /// Device preset (NAND).
    #[arg(long)]
    preset: Option<String>,
    /// Cold operations measured per row.
    #[arg(long)]
    samples: Option<u64>,
}

/// Options of `flashfs bench kawaguchi`.
#[derive(Debug, Args)]
pub struct KawaguchiArgs {
    /// Write 24 MB per row instead of the paper's 192 MB.
    #[arg(long)]
    quick: bool,
    /// One JSON object per row instead of the table.
    #[arg(long)]
    json: bool,
    /// Write the plots (PNG and SVG) into this directory.
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,
    /// What "X% initial data" is a percentage of: `paper` (14 MB, the paper's own: 90% is
    /// its 12.6 MB) or `raw` (the array's whole data capacity).
    #[arg(long, default_value = "paper", value_parser = ["paper", "raw"])]
    basis: String,
    /// MB written per row (overrides --quick's and the full run's amount).
    #[arg(long, value_name = "MB")]
    mb: Option<f64>,
    /// Only these patterns: sequential, random, hot-cold (repeatable).
    #[arg(long, value_parser = ["sequential", "random", "hot-cold"])]
    pattern: Vec<String>,
    /// Only these utilizations, in percent (repeatable).
    #[arg(long, value_name = "PERCENT")]
    util: Vec<f64>,
    /// Only these cleaning policies: greedy, cost-benefit, adaptive (repeatable).
    #[arg(long, value_parser = ["greedy", "cost-benefit", "adaptive"])]
    policy: Vec<String>,
    /// Seed of the workloads.
    #[arg(long, default_value_t = 1995)]
    seed: u64,
}

/// Runs a benchmark and prints what it measured.
pub fn run(cmd: &Command, global: Global, out: &mut dyn Write) -> Result<()> {
    match cmd {
        Command::Kawaguchi(args) => kawaguchi(args, global, out),
        Command::Scale(args) => scale(args, global, out),
        Command::Fuse(args) => super::fusebench::run(args, global, out),
    }
}

fn scale(args: &ScaleArgs, global: Global, out: &mut dyn Write) -> Result<()> {
    let mut opts = if args.quick {
        ScaleOptions::quick()
    } else {
        ScaleOptions::default()
    };
    if let Some(p) = &args.preset {
        opts.preset = p.clone();
    }
    if let Some(n) = args.samples {
        if n == 0 {
            bail!("--samples must be at least 1");
        }
        opts.samples = n;
    }
    let bar = global.progress_bar(1, "{msg:>16} [{bar:40}] {pos}/{len} {eta}");
    let rows = run_scale(&opts, &mut |label, done, total| {
        bar.set_length(total);
        bar.set_position(done);
        bar.set_message(label.to_string());
    })?;
    bar.finish_and_clear();
    if args.json {
        for r in &rows {
            writeln!(out, "{}", serde_json::to_string(r)?)?;
        }
    } else {
        writeln!(
            out,
            "preset {}, native file system, default configuration but access times off; {} cold \
             operations per row (index cache emptied before each); device time",
            opts.preset, opts.samples
        )?;
        out.write_all(flashfs_bench::scale::table(&rows).as_bytes())?;
    }
    Ok(())
}

fn kawaguchi(args: &KawaguchiArgs, global: Global, out: &mut dyn Write) -> Result<()> {
    let mut opts = if args.quick {
        KawaguchiOptions::quick()
    } else {
        KawaguchiOptions::default()
    };
    opts.basis = Basis::from_name(&args.basis).context("unknown utilization basis")?;
    opts.seed = args.seed;
    if let Some(mb) = args.mb {
        if !(mb > 0.0 && mb.is_finite()) {
            bail!("--mb must be a positive number of megabytes");
        }
        opts.mb_written = mb;
    }
    if !args.pattern.is_empty() {
        opts.patterns = args
            .pattern
            .iter()
            .filter_map(|p| Pattern::from_name(p))
            .collect();
    }
    if !args.util.is_empty() {
        if args.util.iter().any(|u| !(*u > 0.0 && *u < 100.0)) {
            bail!("--util takes percentages between 0 and 100");
        }
        opts.utilizations = Some(args.util.iter().map(|u| u / 100.0).collect());
    }
    if !args.policy.is_empty() {
        opts.policies = args
            .policy
            .iter()
            .filter_map(|p| Policy::from_name(p))
            .collect();
    }
    let bar = global.progress_bar(1, "{msg:>24} [{bar:40}] {bytes}/{total_bytes} {eta}");
    let rows = run_kawaguchi(&opts, &mut |label, done, total| {
        bar.set_length(total);
        bar.set_position(done);
        bar.set_message(label.to_string());
    })?;
    bar.finish_and_clear();
    if args.json {
        out.write_all(report::json_lines(&rows)?.as_bytes())?;
    } else {
        out.write_all(report::table(&opts, &rows)?.as_bytes())?;
    }
    if let Some(dir) = &args.plot {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let files = plot::plot_all(&rows, dir)?;
        eprintln!("wrote {} plot files to {}", files.len(), dir.display());
    }
    let failed: Vec<&str> = rows.iter().filter_map(|r| r.error.as_deref()).collect();
    if let Some(first) = failed.first() {
        bail!("{} row(s) failed; the first: {first}", failed.len());
    }
    Ok(())
}
