//! Runs Kawaguchi §3 on the flashfs block device and prints the table.
//!
//! ```text
//! cargo run --release -p flashfs-bench --example kawaguchi -- [--quick] [--json]
//!     [--plot DIR] [--basis raw|paper] [--mb N] [--threads N] [--verify]
//!     [--pattern sequential|random|hot-cold]... [--util 0.9]... [--policy NAME]...
//!     [--separate-head yes|no] [--hot-cold yes|no] [--no-reads]
//! ```

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use flashfs::log::policy::Policy;
use flashfs_bench::kawaguchi::{run_kawaguchi, Basis, KawaguchiOptions};
use flashfs_bench::workload::Pattern;
use flashfs_bench::{plot, report};

fn usage() -> ExitCode {
    eprintln!(
        "usage: kawaguchi [--quick] [--json] [--plot DIR] [--basis raw|paper] [--mb N] \
         [--threads N] [--verify] [--pattern P]... [--util U]... [--policy NAME]... \
         [--separate-head yes|no] [--hot-cold yes|no] [--no-reads]"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut opts = KawaguchiOptions::default();
    let (mut json, mut plot_dir, mut mb) = (false, None::<PathBuf>, None::<f64>);
    let (mut patterns, mut utils, mut policies, mut heads) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    while let Some(a) = args.next() {
        let mut val = || args.next();
        match a.as_str() {
            "--quick" => {
                let q = KawaguchiOptions::quick();
                opts.quick = true;
                opts.mb_written = q.mb_written;
            }
            "--json" => json = true,
            "--verify" => opts.verify = true,
            "--no-reads" => opts.reads = false,
            "--hot-cold" => match val().as_deref() {
                Some("yes") => opts.hot_cold = Some(true),
                Some("no") => opts.hot_cold = Some(false),
                _ => return usage(),
            },
            "--plot" => match val() {
                Some(d) => plot_dir = Some(d.into()),
                None => return usage(),
            },
            "--basis" => match val().as_deref().and_then(Basis::from_name) {
                Some(b) => opts.basis = b,
                None => return usage(),
            },
            "--mb" => match val().and_then(|v| v.parse().ok()) {
                Some(v) => mb = Some(v),
                None => return usage(),
            },
            "--threads" => match val().and_then(|v| v.parse().ok()) {
                Some(v) => opts.threads = v,
                None => return usage(),
            },
            "--pattern" => match val().as_deref().and_then(Pattern::from_name) {
                Some(p) => patterns.push(p),
                None => return usage(),
            },
            "--util" => match val().and_then(|v| v.parse().ok()) {
                Some(u) => utils.push(u),
                None => return usage(),
            },
            "--policy" => match val().as_deref().and_then(Policy::from_name) {
                Some(p) => policies.push(p),
                None => return usage(),
            },
            "--separate-head" => match val().as_deref() {
                Some("yes") => heads.push(true),
                Some("no") => heads.push(false),
                _ => return usage(),
            },
            _ => return usage(),
        }
    }
    if let Some(mb) = mb {
        opts.mb_written = mb;
    }
    if !patterns.is_empty() {
        opts.patterns = patterns;
    }
    if !utils.is_empty() {
        opts.utilizations = Some(utils);
    }
    if !policies.is_empty() {
        opts.policies = policies;
    }
    if !heads.is_empty() {
        opts.separate_heads = heads;
    }

    let started = Instant::now();
    let mut last = Instant::now();
    let mut progress = |label: &str, done: u64, total: u64| {
        if last.elapsed().as_millis() >= 500 || done == total {
            last = Instant::now();
            eprint!(
                "\r{:5.1}% {:<48}",
                done as f64 * 100.0 / total.max(1) as f64,
                label
            );
            let _ = std::io::stderr().flush();
        }
    };
    let rows = match run_kawaguchi(&opts, &mut progress) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("\nerror: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!(
        "\rdone in {:.1} s{:50}",
        started.elapsed().as_secs_f64(),
        ""
    );
    let out = if json {
        report::json_lines(&rows)
    } else {
        report::table(&opts, &rows)
    };
    match out {
        Ok(s) => print!("{s}"),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    }
    if let Some(dir) = plot_dir {
        match plot::plot_all(&rows, &dir) {
            Ok(files) => {
                for f in files {
                    eprintln!("wrote {}", f.display());
                }
            }
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
