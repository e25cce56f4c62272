//! `flashfs mount`: serve a volume through FUSE.
//!
//! A volume type ([`Volume`]) gives the session its `fuser::Filesystem` and closes the volume
//! once the session ends (flushing the device and writing the image back). The native file
//! system is one such volume ([`native`]: files, directories, links, extended attributes);
//! the block device another ([`blockfile`]: one file as long as the device).
//!
//! In the background (the default) the command starts itself again in the foreground, in a
//! process group of its own, and returns once that process reports the mount live (or why it
//! failed). The mount ends on `fusermount3 -u MOUNTPOINT`, or on SIGINT, SIGTERM or SIGHUP
//! to the serving process: either way the device is flushed and the image closed.
//!
//! While no request comes, a writable mount gives the volume the wall-clock time that
//! passes as idle device time, for its background work ([`idle`]).

pub mod blockfile;
pub mod idle;
pub mod native;

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{anyhow, Context};
use flashfs::log::policy::Policy;
use flashfs::{FsConfig, FtlConfig, LogConfig};

use crate::device;
use crate::native::AnyFs;
use crate::volume::{self, AnyFtl, Format, Media};

/// Examples shown by `flashfs mount --help`.
pub const EXAMPLES: &str = "\
Examples:
  flashfs mkfs dev.img --preset nand-128m
  flashfs mount dev.img mnt/                 in the background; returns once mounted
  cp -r ~/notes mnt/ && ls -l mnt/notes      the native file system: any tool works on it
  fusermount3 -u mnt/                        unmount: everything committed, the image closed
  flashfs mount dev.img mnt/ -f -o ro        in the foreground, read-only; Ctrl-C unmounts
  flashfs mkfs blk.img --preset nand-128m --ftl && flashfs mount blk.img mnt/
  mkfs.fat mnt/disk.img                      a block device shows as one file

A volume on two devices (`mkfs --nvram`) is mounted by its flash image: the NVRAM image
beside it, IMAGE.nvram, is opened with it.
Options for -o (comma-separated): ro, rw, allow_other, allow_root.
Unmounting needs `fusermount3` (Debian package fuse3) unless run as root.";

/// Options of `flashfs mount`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The image file to mount.
    pub image: PathBuf,
    /// An existing directory to mount it on.
    pub mountpoint: PathBuf,
    /// Stay in the foreground until unmounted (SIGINT or SIGTERM unmount).
    #[arg(short, long)]
    pub foreground: bool,
    /// Mount options, comma-separated: ro, rw, allow_other, allow_root.
    #[arg(short = 'o', value_name = "OPTIONS")]
    pub options: Vec<String>,
    /// The cleaner's victim choice: greedy, cost-benefit or adaptive.
    #[arg(long, value_name = "POLICY", default_value = "adaptive")]
    pub policy: String,
    /// RAM for the volume's caches and buffers, in KiB, shared out over them (the native
    /// file system: `FsConfig::ram_budget`; a block device: its sector-map cache). Default:
    /// each cache's own setting.
    #[arg(long, value_name = "KIB")]
    pub ram_budget: Option<usize>,
    /// Where a background mount writes what happens after it is live (unmount, errors).
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Report readiness on stdout (`ready`, or `error: ...`): set when the command starts
    /// itself in the background.
    #[arg(long, hide = true)]
    pub notify_ready: bool,
}

/// Mount options, parsed.
#[derive(Debug, Clone, Default, PartialEq)]
struct Options {
    read_only: bool,
    allow_other: bool,
    allow_root: bool,
}

impl Options {
    fn parse(list: &[String]) -> anyhow::Result<Self> {
        let mut o = Options::default();
        for opt in list
            .iter()
            .flat_map(|l| l.split(','))
            .filter(|s| !s.is_empty())
        {
            match opt {
                "ro" => o.read_only = true,
                "rw" => o.read_only = false,
                "allow_other" => o.allow_other = true,
                "allow_root" => o.allow_root = true,
                other => {
                    return Err(anyhow!(
                        "unknown mount option '{other}' (known: ro, rw, allow_other, allow_root)"
                    ))
                }
            }
        }
        Ok(o)
    }

    fn config(&self, fsname: &str) -> fuser::Config {
        use fuser::MountOption as M;
        let mut config = fuser::Config::default();
        config.mount_options = vec![
            M::FSName(fsname.into()),
            M::Subtype("flashfs".into()),
            M::NoDev,
            M::NoSuid,
            M::DefaultPermissions,
            if self.read_only { M::RO } else { M::RW },
        ];
        config.acl = if self.allow_other {
            fuser::SessionACL::All
        } else if self.allow_root {
            fuser::SessionACL::RootAndOwner
        } else {
            fuser::SessionACL::Owner
        };
        config
    }
}

/// A volume a FUSE session can serve.
pub trait Volume {
    /// The file system the session dispatches to (it shares the volume's state).
    type Fs: fuser::Filesystem;
    /// The file system to serve.
    fn filesystem(&self) -> Self::Fs;
    /// Starts the thread that gives the volume idle time while the session serves, if the
    /// volume takes it (a read-only mount changes nothing, so it does not).
    fn idle_thread(&self) -> std::io::Result<Option<idle::IdleThread>>;
    /// Called once the session has ended and dropped its file system: makes everything
    /// durable and closes the image. Returns a few words on the final state.
    fn close(self) -> anyhow::Result<String>;
}

/// Runs `flashfs mount`.
pub fn run(a: &Args, out: &mut dyn Write) -> anyhow::Result<()> {
    let options = Options::parse(&a.options)?;
    let policy = Policy::from_name(&a.policy).ok_or_else(|| {
        anyhow!(
            "unknown policy '{}' (greedy, cost-benefit or adaptive)",
            a.policy
        )
    })?;
    check_mountpoint(&a.mountpoint)?;
    if !a.foreground {
        return spawn_background(a, out);
    }
    let mut ready = false;
    let result = serve(a, &options, policy, out, &mut ready);
    if let Err(e) = &result {
        if a.notify_ready && !ready {
            let _ = writeln!(out, "error: {}", crate::one_line(&format!("{e:#}")));
            let _ = out.flush();
        }
    }
    result
}

fn check_mountpoint(dir: &Path) -> anyhow::Result<()> {
    let shown = device::shown(dir);
    let meta = std::fs::metadata(dir)
        .map_err(device::io_error)
        .with_context(|| shown.clone())?;
    if !meta.is_dir() {
        return Err(anyhow!("{shown}: not a directory"));
    }
    Ok(())
}

/// Starts this command again in the foreground, detached, and waits until it reports the
/// mount live or failed.
fn spawn_background(a: &Args, out: &mut dyn Write) -> anyhow::Result<()> {
    // Absolute but not resolved: an NVRAM image is looked for beside the path given, which
    // a symbolic link's target may not have beside it.
    std::fs::metadata(&a.image)
        .map_err(device::io_error)
        .with_context(|| device::shown(&a.image))?;
    let image = absolute(&a.image)?;
    let mountpoint = std::fs::canonicalize(&a.mountpoint)
        .map_err(device::io_error)
        .with_context(|| device::shown(&a.mountpoint))?;
    let exe = std::env::current_exe()
        .map_err(device::io_error)
        .context("cannot find the flashfs executable")?;
    let mut cmd = Command::new(exe);
    cmd.arg("mount")
        .arg(&image)
        .arg(&mountpoint)
        .arg("--foreground")
        .arg("--notify-ready")
        .arg("--policy")
        .arg(&a.policy);
    if let Some(kib) = a.ram_budget {
        cmd.arg("--ram-budget").arg(kib.to_string());
    }
    for o in &a.options {
        cmd.arg("-o").arg(o);
    }
    let stderr = match &a.log {
        Some(log) => {
            let path = absolute(log)?;
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(device::io_error)
                .with_context(|| device::shown(log))?;
            cmd.arg("--log").arg(&path);
            Stdio::from(file)
        }
        None => Stdio::null(),
    };
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .process_group(0);
    let mut child = cmd
        .spawn()
        .map_err(device::io_error)
        .context("cannot start the mount process")?;
    let mut line = String::new();
    if let Some(stdout) = child.stdout.take() {
        BufReader::new(stdout)
            .read_line(&mut line)
            .map_err(device::io_error)
            .context("the mount process")?;
    }
    if line.trim_end() == "ready" {
        writeln!(
            out,
            "mounted {} on {} (process {}); `fusermount3 -u {}` unmounts it",
            device::shown(&a.image),
            device::shown(&a.mountpoint),
            child.id(),
            device::shown(&a.mountpoint)
        )?;
        return Ok(());
    }
    let status = child.wait().ok();
    match line.trim_end().strip_prefix("error: ") {
        Some(msg) => Err(anyhow!("{msg}")),
        None => Err(anyhow!(
            "the mount process ended before the mount was live ({})",
            status.map_or("status unknown".into(), |s| s.to_string())
        )),
    }
}

fn absolute(path: &Path) -> anyhow::Result<PathBuf> {
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    Ok(std::env::current_dir()
        .map_err(device::io_error)
        .context("the current directory")?
        .join(path))
}

/// Where messages go once the mount is live: stdout in the foreground, the log file (or
/// nowhere) in the background.
struct Messages<'a> {
    out: Option<&'a mut dyn Write>,
    log: Option<std::fs::File>,
    /// Where `ready` goes, in the background.
    notify: Option<&'a mut dyn Write>,
}

impl Messages<'_> {
    /// Tells the process that started this one that the mount is live.
    fn ready(&mut self) {
        if let Some(n) = self.notify.take() {
            let _ = writeln!(n, "ready");
            let _ = n.flush();
        }
    }

    fn line(&mut self, text: &str) {
        if let Some(out) = self.out.as_deref_mut() {
            let _ = writeln!(out, "{text}");
            let _ = out.flush();
        }
        if let Some(log) = &mut self.log {
            let _ = writeln!(log, "flashfs: {text}");
        }
    }
}

/// Mounts, serves until unmounted, closes. `ready` turns true once the mount is live.
fn serve(
    a: &Args,
    options: &Options,
    policy: Policy,
    out: &mut dyn Write,
    ready: &mut bool,
) -> anyhow::Result<()> {
    let path = a.image.as_path();
    let shown = device::shown(path);
    let images = volume::open_images(path, !options.read_only)?;
    let meta = std::fs::metadata(path)
        .map_err(device::io_error)
        .with_context(|| shown.clone())?;
    let (media, format) = Media::open_probed(images).with_context(|| shown.clone())?;
    let log = match &a.log {
        Some(p) => Some(
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(device::io_error)
                .with_context(|| device::shown(p))?,
        ),
        None => None,
    };
    let messages = if a.notify_ready {
        Messages {
            out: None,
            log,
            notify: Some(out),
        }
    } else {
        Messages {
            out: Some(out),
            log,
            notify: None,
        }
    };
    let budget = a.ram_budget.map(|kib| kib.saturating_mul(1024));
    match format {
        Format::Unformatted => Err(anyhow!(
            "{shown}: no flashfs volume on the image (`flashfs mkfs` formats one)"
        )),
        Format::BlockDevice { .. } => {
            let mut config = FtlConfig {
                log: LogConfig {
                    policy,
                    ..LogConfig::default()
                },
                ..FtlConfig::default()
            };
            if let Some(b) = budget {
                config.map_cache = b;
            }
            let ftl = AnyFtl::mount(media, config)
                .with_context(|| format!("{shown}: cannot mount the block device"))?;
            let mtime = meta
                .modified()
                .unwrap_or_else(|_| std::time::SystemTime::now());
            let volume =
                blockfile::BlockVolume::new(ftl, options.read_only, meta.uid(), meta.gid(), mtime);
            session(volume, a, options, messages, ready)
        }
        Format::Native { .. } => {
            let config = FsConfig {
                ram_budget: budget,
                ..crate::native::config(Some(policy), None)
            };
            let fs = AnyFs::mount(media, config)
                .with_context(|| format!("{shown}: cannot mount the file system"))?;
            crate::with_fs!(fs, fs => session(
                native::NativeVolume::new(fs, options.read_only),
                a,
                options,
                messages,
                ready,
            ))
        }
    }
}

/// Serves `volume` on the mountpoint until it is unmounted, then closes it.
fn session<V: Volume>(
    volume: V,
    a: &Args,
    options: &Options,
    mut messages: Messages<'_>,
    ready: &mut bool,
) -> anyhow::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mountpoint = device::shown(&a.mountpoint);
    let fsname = std::fs::canonicalize(&a.image)
        .unwrap_or_else(|_| a.image.clone())
        .display()
        .to_string()
        .replace(',', "_");
    let session = fuser::Session::new(volume.filesystem(), &a.mountpoint, &options.config(&fsname));
    let mut session = match session {
        Ok(s) => s,
        Err(e) => {
            let why = fuse_error(e);
            volume.close()?;
            return Err(why.context(format!("cannot mount on {mountpoint}")));
        }
    };
    // Signals unmount; the session then ends like on `fusermount3 -u`.
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
        .map_err(device::io_error)
        .context("cannot catch signals")?;
    let handle = signals.handle();
    let mut unmounter = session.unmount_callable();
    let target = a.mountpoint.clone();
    let watcher = std::thread::spawn(move || {
        if signals.forever().next().is_some() && unmounter.unmount().is_err() {
            // Busy (a file still open): detach now, the kernel finishes when it is closed.
            let _ = Command::new("fusermount3")
                .arg("-u")
                .arg("-z")
                .arg(&target)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    });
    *ready = true;
    messages.ready();
    messages.line(&format!("mounted {} on {mountpoint}", a.image.display()));
    let idling = volume.idle_thread().unwrap_or_else(|e| {
        messages.line(&format!("no background work in idle time: {e}"));
        None
    });
    let served = session.run();
    handle.close();
    let _ = watcher.join();
    if let Some(t) = idling {
        t.stop();
    }
    let closed = volume.close();
    match (&served, &closed) {
        (Ok(()), Ok(state)) => {
            messages.line(&format!(
                "unmounted {mountpoint}; {} flushed and closed ({state})",
                a.image.display()
            ));
        }
        (Err(e), _) => messages.line(&format!("the session failed: {e}")),
        (_, Err(e)) => messages.line(&format!("closing failed: {e:#}")),
    }
    served.map_err(fuse_error)?;
    closed.map(|_| ())
}

/// A FUSE error in words, with a hint when FUSE is missing.
fn fuse_error(e: std::io::Error) -> anyhow::Error {
    if e.kind() == std::io::ErrorKind::NotFound {
        return anyhow!("FUSE is not available (no /dev/fuse, or no fusermount3: install fuse3)");
    }
    device::io_error(e)
}
