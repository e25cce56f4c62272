//! `flashfs`: the command line of the flashfs project.
//!
//! Every failure ends the process with one line on stderr (`flashfs: <message>`) and a
//! non-zero exit code: 1 for a failed command, 2 for a command line that does not parse
//! (`fsck` has e2fsck's codes instead: 8 when it cannot check, 16 for its command line;
//! `fsck` and `scrub` exit with 4 when data is lost).

mod cmd;
mod device;
mod mount;
mod native;
mod units;
mod volume;

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Counts heap use, for `flashfs bench tffs`'s heap figures; otherwise the system allocator.
#[global_allocator]
static ALLOC: flashfs_bench::heap::CountingAlloc = flashfs_bench::heap::CountingAlloc;

/// What `flashfs --help` shows after the list of commands.
const EXAMPLES: &str = "\
Examples:
  flashfs demo                                  exercise a simulated 1 GiB NAND end to end
  flashfs presets                               list the simulated devices
  flashfs sim create dev.img --preset nand-128m create a sparse simulated-device image
  flashfs sim info dev.img                      show its geometry and wear
  flashfs mkfs dev.img --preset nand-128m       create an image holding the native file system
  flashfs mount dev.img mnt/                    serve it through FUSE (fusermount3 -u mnt/ ends it)
  flashfs put dev.img notes.txt /               copy a file in without mounting (also ls, cat,
                                                get, rm, mkdir, mv)
  flashfs mkfs blk.img --preset nand-128m --ftl create an image holding a block device
  flashfs info dev.img                          space, wear and segment utilization
  flashfs fsck dev.img                          check it (exit codes as e2fsck)
  flashfs torture                               power cuts at random device operations, checked";

/// A file system for raw flash memory (NOR, NAND, MLC NAND) and NVRAM, with faithful
/// simulators of the parts the flash file system literature measured.
#[derive(Debug, Parser)]
#[command(name = "flashfs", version, after_help = EXAMPLES, propagate_version = true)]
struct Cli {
    /// Hide progress bars (they are also hidden when stderr is not a terminal).
    #[arg(short, long, global = true)]
    quiet: bool,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List the simulated devices (presets) with geometry, timings and sources.
    #[command(after_help = cmd::presets::EXAMPLES)]
    Presets(cmd::presets::Args),
    /// Create and inspect simulated-device image files.
    #[command(subcommand, after_help = cmd::sim::EXAMPLES)]
    Sim(cmd::sim::Command),
    /// Exercise a simulated device end to end: writes, wear, power cuts, bit flips.
    #[command(after_help = cmd::demo::EXAMPLES)]
    Demo(cmd::demo::Args),
    /// Reproduce the papers' experiments on simulated devices, in device time.
    #[command(subcommand, after_help = cmd::bench::EXAMPLES)]
    Bench(cmd::bench::Command),
    /// Cut the power at device operations of workloads and check every remount.
    #[command(after_help = cmd::torture::EXAMPLES)]
    Torture(cmd::torture::Args),
    /// Create an image of a simulated device and format a volume on it.
    #[command(after_help = cmd::mkfs::EXAMPLES)]
    Mkfs(cmd::mkfs::Args),
    /// Show what an image holds: space, wear, segment utilization (it is only read).
    #[command(after_help = cmd::info::EXAMPLES)]
    Info(cmd::info::Args),
    /// Check a volume and, with --repair, fix it (exit codes as e2fsck).
    #[command(after_help = cmd::fsck::EXAMPLES)]
    Fsck(cmd::fsck::Args),
    /// Read back every live byte of a volume, move wearing data, report what was lost.
    #[command(after_help = cmd::scrub::EXAMPLES)]
    Scrub(cmd::scrub::Args),
    /// Serve a volume through FUSE: the native file system, or a block device as one file.
    #[command(after_help = mount::EXAMPLES)]
    Mount(mount::Args),
    /// List a directory of the native file system on an image (no mount needed).
    #[command(after_help = cmd::files::EXAMPLES)]
    Ls(cmd::files::LsArgs),
    /// Print a file of the native file system on an image.
    #[command(after_help = cmd::files::EXAMPLES)]
    Cat(cmd::files::CatArgs),
    /// Copy a file or tree (-r) from the image to the host.
    #[command(after_help = cmd::files::EXAMPLES)]
    Get(cmd::files::GetArgs),
    /// Copy a file or tree (-r) from the host into the image.
    #[command(after_help = cmd::files::EXAMPLES)]
    Put(cmd::files::PutArgs),
    /// Remove a file, or a tree with -r, from the image.
    #[command(after_help = cmd::files::EXAMPLES)]
    Rm(cmd::files::RmArgs),
    /// Make a directory on the image (-p: with its parents).
    #[command(after_help = cmd::files::EXAMPLES)]
    Mkdir(cmd::files::MkdirArgs),
    /// Rename or move a file or directory on the image.
    #[command(after_help = cmd::files::EXAMPLES)]
    Mv(cmd::files::MvArgs),
    /// Run transactions on the image from a script (all of each, or none).
    #[command(after_help = cmd::tx::EXAMPLES)]
    Tx(cmd::tx::Args),
}

/// Options every command sees.
#[derive(Debug, Clone, Copy)]
pub struct Global {
    /// Whether progress bars may be drawn.
    pub progress: bool,
}

impl Global {
    /// A progress bar on stderr in the house style (hidden when progress is off), showing
    /// `template` (an indicatif template) for `len` steps.
    pub fn progress_bar(&self, len: u64, template: &str) -> indicatif::ProgressBar {
        use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
        if !self.progress {
            return ProgressBar::hidden();
        }
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template(template)
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar
    }
}

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!("flashfs: internal error: {}{at}", one_line(&msg));
    }));

    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    let global = Global {
        progress: !cli.quiet && io::stderr().is_terminal(),
    };
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let mut failure = 1;
    let done = |()| 0u8;
    let result = match cli.command {
        Command::Presets(args) => cmd::presets::run(&args, &mut out).map(done),
        Command::Sim(c) => cmd::sim::run(&c, &mut out).map(done),
        Command::Demo(args) => cmd::demo::run(&args, global, &mut out).map(done),
        Command::Bench(c) => cmd::bench::run(&c, global, &mut out).map(done),
        Command::Torture(args) => cmd::torture::run(&args, global, &mut out).map(done),
        Command::Mkfs(args) => cmd::mkfs::run(&args, &mut out).map(done),
        Command::Info(args) => cmd::info::run(&args, &mut out).map(done),
        Command::Fsck(args) => {
            failure = cmd::fsck::OPERATIONAL;
            cmd::fsck::run(&args, global, &mut out)
        }
        Command::Scrub(args) => cmd::scrub::run(&args, &mut out),
        Command::Mount(args) => mount::run(&args, &mut out).map(done),
        Command::Ls(args) => cmd::files::ls(&args, &mut out).map(done),
        Command::Cat(args) => cmd::files::cat(&args, &mut out).map(done),
        Command::Get(args) => cmd::files::get(&args, global, &mut out).map(done),
        Command::Put(args) => cmd::files::put(&args, global, &mut out).map(done),
        Command::Rm(args) => cmd::files::rm(&args, &mut out).map(done),
        Command::Mkdir(args) => cmd::files::mkdir(&args, &mut out).map(done),
        Command::Mv(args) => cmd::files::mv(&args, &mut out).map(done),
        Command::Tx(args) => cmd::tx::run(&args, &mut out).map(done),
    }
    .and_then(|code| Ok(out.flush().map(|()| code)?));
    match result {
        Ok(code) => ExitCode::from(code),
        // The reader went away (`flashfs presets | head`): not an error of ours.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("flashfs: {}", one_line(&format!("{e:#}")));
            ExitCode::from(failure)
        }
    }
}

/// Help and version go to stdout with success; parse errors become one line.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        kind => {
            let text = e.render().to_string();
            // The command the error is about, from clap's usage line.
            let command = text
                .lines()
                .find_map(|l| l.trim().strip_prefix("Usage:"))
                .map(|usage| {
                    usage
                        .split_whitespace()
                        .take_while(|w| !w.starts_with(['[', '<', '-']))
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .filter(|c| !c.is_empty())
                .unwrap_or_else(|| "flashfs".into());
            let msg = if kind == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                "a command is required".to_string()
            } else {
                let lines: Vec<&str> = text
                    .lines()
                    .map(str::trim)
                    .take_while(|l| !l.starts_with("Usage:"))
                    .filter(|l| !l.is_empty() && !l.starts_with("tip:"))
                    .collect();
                let msg = lines.join(" ");
                msg.strip_prefix("error: ").unwrap_or(&msg).to_string()
            };
            eprintln!("flashfs: {} (see `{command} --help`)", one_line(&msg));
            if command == "flashfs fsck" {
                ExitCode::from(cmd::fsck::USAGE)
            } else {
                ExitCode::from(2)
            }
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}

/// Collapses a message onto one line, without the operating system's error numbers.
fn one_line(s: &str) -> String {
    let mut text = s.split_whitespace().collect::<Vec<_>>().join(" ");
    while let Some(at) = text.find(" (os error ") {
        match text[at..].find(')') {
            Some(end) => text.replace_range(at..at + end + 1, ""),
            None => break,
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn messages_are_one_line() {
        assert_eq!(one_line("a\n  b\tc "), "a b c");
        assert_eq!(
            one_line("x: No space left on device (os error 28)"),
            "x: No space left on device"
        );
        assert_eq!(one_line("unclosed (os error 5"), "unclosed (os error 5");
    }
}
