//! Project tasks, run as `cargo xtask <task>` (the alias is in `.cargo/config.toml`).
//!
//! `cargo xtask size` builds the example firmware (`firmware/`) for microcontrollers, each
//! target in three builds (the file system's full use, a read-only use, and the same board
//! without the file system as a baseline), and the C library (`firmware/clib`), and
//! measures the ELFs: text, static RAM, the
//! heap, the file system's share of the text and the biggest symbols. It needs the Thumb
//! toolchain of docs/firmware.md (`scripts/setup-thumb` installs it on Debian).
#![deny(missing_docs)]

mod elf;
mod toolchain;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use serde::Serialize;

use elf::{CrateSize, Measure, Symbol};
use toolchain::Toolchain;

/// Project tasks.
#[derive(Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Builds the example firmware for microcontrollers and measures its code and RAM.
    ///
    /// Each target is built three ways: `full` (format, mount, files, records, a
    /// transaction, unmount), `read-only` (mount and reads) and `baseline` (the same board
    /// without the file system); the file system's share of the text is a build's text
    /// minus its target's baseline. `c-library` is the C library: what its API reaches. Needs the Thumb toolchain (scripts/setup-thumb).
    Size(SizeArgs),
}

#[derive(clap::Args)]
struct SizeArgs {
    /// One JSON array, one object per build, instead of the table.
    #[arg(long)]
    json: bool,
    /// Targets to build (all by default).
    #[arg(long = "target", value_enum)]
    targets: Vec<Target>,
    /// Builds to make (all by default; the file system's share needs `baseline`).
    #[arg(long = "build", value_enum)]
    builds: Vec<Build>,
    /// Largest symbols and crates listed per build.
    #[arg(long, default_value_t = 15)]
    top: usize,
}

/// A microcontroller target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Target {
    /// Cortex-M4F and M7 (ARMv7E-M, hard float).
    #[value(name = "thumbv7em-none-eabihf")]
    Thumbv7em,
    /// Cortex-M0 and M0+ (ARMv6-M: no compare-and-swap, no division instruction).
    #[value(name = "thumbv6m-none-eabi")]
    Thumbv6m,
}

impl Target {
    const ALL: [Target; 2] = [Target::Thumbv7em, Target::Thumbv6m];

    fn triple(self) -> &'static str {
        match self {
            Target::Thumbv7em => "thumbv7em-none-eabihf",
            Target::Thumbv6m => "thumbv6m-none-eabi",
        }
    }
}

/// One build of the firmware.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Build {
    /// The board without the file system.
    Baseline,
    /// The whole API: format, mount, write, read, records, transactions, unmount.
    Full,
    /// Mount and read only.
    ReadOnly,
    /// The C library (crates/capi, as firmware/clib builds it): everything its API reaches,
    /// linked as a firmware's link keeps it; the C heap and `abort` are the firmware's.
    CLibrary,
}

impl Build {
    const ALL: [Build; 4] = [
        Build::Baseline,
        Build::Full,
        Build::ReadOnly,
        Build::CLibrary,
    ];

    fn name(self) -> &'static str {
        match self {
            Build::Baseline => "baseline",
            Build::Full => "full",
            Build::ReadOnly => "read-only",
            Build::CLibrary => "c-library",
        }
    }

    /// The firmware's cargo features.
    fn features(self) -> &'static str {
        match self {
            Build::Baseline => "baseline",
            Build::Full | Build::CLibrary => "",
            Build::ReadOnly => "read-only",
        }
    }
}

/// One measured build, as `--json` prints it.
#[derive(Debug, Serialize)]
struct Row {
    target: &'static str,
    build: &'static str,
    /// Code and read-only data (what `size` reports as text).
    text_bytes: u64,
    /// Initialized static data (in RAM; its image also takes flash).
    data_bytes: u64,
    /// Static RAM (data and bss) without the heap's array.
    ram_bytes: u64,
    /// The heap's array (static, in bss), not counted in `ram_bytes`.
    heap_bytes: u64,
    /// Text minus the same target's baseline (the C library: its text); absent for the
    /// baseline itself or when it was not built.
    fs_text_bytes: Option<u64>,
    /// The ELF measured.
    elf: String,
    /// Text by crate, largest first.
    crates: Vec<CrateSize>,
    /// The largest symbols of the text.
    symbols: Vec<Symbol>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.task {
        Task::Size(args) => size(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The repository's root (this crate is `crates/xtask`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/xtask is two levels below the root")
        .to_path_buf()
}

fn size(args: SizeArgs) -> Result<()> {
    let targets = if args.targets.is_empty() {
        Target::ALL.to_vec()
    } else {
        args.targets
    };
    let mut builds = if args.builds.is_empty() {
        Build::ALL.to_vec()
    } else {
        args.builds
    };
    builds.sort_by_key(|b| Build::ALL.iter().position(|a| a == b));
    builds.dedup();
    let tc = Toolchain::find()?;
    let firmware = root().join("firmware");
    let mut rows = Vec::new();
    for &t in &targets {
        let mut baseline = None;
        for &b in &builds {
            eprintln!("building {} {}", t.triple(), b.name());
            let elf = match b {
                Build::CLibrary => tc.build_c_library(&firmware, t.triple())?,
                _ => tc.build_firmware(&firmware, t.triple(), b.name(), b.features())?,
            };
            let m = elf::measure(&elf)?;
            if b == Build::Baseline {
                baseline = Some(m.text);
            }
            rows.push(row(t, b, &m, baseline, &elf, args.top));
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print_table(&rows, args.top);
    }
    Ok(())
}

fn row(t: Target, b: Build, m: &Measure, baseline: Option<u64>, elf: &Path, top: usize) -> Row {
    let mut crates = m.crates();
    crates.truncate(top);
    Row {
        target: t.triple(),
        build: b.name(),
        text_bytes: m.text,
        data_bytes: m.data,
        ram_bytes: m.ram_without_heap(),
        heap_bytes: m.heap,
        fs_text_bytes: match b {
            Build::Baseline => None,
            // No board: all of it is the file system's.
            Build::CLibrary => Some(m.text),
            _ => baseline.map(|base| m.text.saturating_sub(base)),
        },
        elf: elf.display().to_string(),
        crates,
        symbols: m.symbols.iter().take(top).cloned().collect(),
    }
}

/// Bytes as KiB with one decimal.
fn kib(n: u64) -> String {
    format!("{:.1} KiB", n as f64 / 1024.0)
}

fn print_table(rows: &[Row], top: usize) {
    println!(
        "{:<22} {:<10} {:>10} {:>10} {:>10} {:>10}   fs text (text - baseline)",
        "target", "build", "text", "data", "ram", "heap"
    );
    for r in rows {
        println!(
            "{:<22} {:<10} {:>10} {:>10} {:>10} {:>10}   {}",
            r.target,
            r.build,
            r.text_bytes,
            r.data_bytes,
            r.ram_bytes,
            r.heap_bytes,
            r.fs_text_bytes
                .map(|n| format!("{n} ({})", kib(n)))
                .unwrap_or_else(|| "-".into())
        );
    }
    println!(
        "\ntext: code and read-only data (as `size` counts it); ram: static data and bss \
         without the heap; heap: the static heap array the file system allocates from."
    );
    for r in rows.iter().filter(|r| r.build != "baseline") {
        println!("\n{} {}: text by crate (top {top})", r.target, r.build);
        for c in &r.crates {
            println!("  {:>8}  {}", c.bytes, c.krate);
        }
        println!("{} {}: largest symbols (top {top})", r.target, r.build);
        for s in &r.symbols {
            println!("  {:>8}  {}", s.bytes, shorten(&s.name, 110));
        }
    }
}

/// The name cut to `max` characters, generic arguments first.
fn shorten(name: &str, max: usize) -> String {
    let short = name
        .replace(
            "flashfs::media::NorSegments<flash::adapter::EmbeddedNor<flashfs_firmware::nor::Nor>>",
            "Dev",
        )
        .replace("alloc::boxed::Box<dyn flashfs::media::Segments>", "Dev");
    if short.chars().count() <= max {
        return short;
    }
    let cut: String = short.chars().take(max - 1).collect();
    format!("{cut}…")
}

/// Fails when `path` is not there, with what to do.
fn need(path: &Path, what: &str) -> Result<()> {
    if !path.exists() {
        bail!(
            "the Thumb toolchain is missing: no {what} at {} (run scripts/setup-thumb, or as root: \
             apt-get install rustc-web cargo-web rust-web-src lld)",
            path.display()
        );
    }
    Ok(())
}

/// Reads a command's standard output as text.
fn output_of(cmd: &mut std::process::Command) -> Result<String> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}
