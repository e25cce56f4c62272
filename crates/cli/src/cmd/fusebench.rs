//! `flashfs bench fuse`: host-side speed of the native file system served through FUSE,
//! against a FUSE passthrough of tmpfs (bindfs) in the same run.
//!
//! Both file systems run the same workload through the kernel: sequential 4 KiB writes and
//! reads of one file, random 4 KiB writes and reads in it, and creating then deleting many
//! small files. The flashfs image lives on tmpfs, so both sides measure the cost of the
//! code and the FUSE round trips, not of a disk.
//!
//! Both are mounted with the same kernel caching: buffered I/O, write-back caching of
//! writes, and no page cache kept across opens (neither asks for `FOPEN_KEEP_CACHE`), so
//! each read phase starts with an empty page cache for the file and every read that misses
//! it is a FUSE request. The workload runs several rounds, alternating between the two file
//! systems, and each figure is the median of its rounds, so that a burst of other load on
//! the host does not fall on one side only.

use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use serde::Serialize;

use crate::device;
use crate::units;
use crate::Global;

/// Options of `flashfs bench fuse`.
#[derive(Debug, Args)]
pub struct FuseArgs {
    /// Device preset of the flashfs image.
    #[arg(long, default_value = "nand-1g")]
    preset: String,
    /// MiB written and read sequentially.
    #[arg(long, default_value_t = 64)]
    mib: u64,
    /// Random 4 KiB writes and reads, each.
    #[arg(long, default_value_t = 8192)]
    ops: u64,
    /// Files created, then deleted.
    #[arg(long, default_value_t = 2000)]
    files: u64,
    /// Rounds of the workload on each file system, alternating; figures are medians.
    #[arg(long, default_value_t = 5)]
    rounds: u64,
    /// A directory on tmpfs for the image, the passthrough's files and the mountpoints.
    #[arg(long, value_name = "DIR", default_value = "/dev/shm")]
    dir: PathBuf,
    /// One JSON object per metric instead of the table.
    #[arg(long)]
    json: bool,
}

/// One metric of both file systems.
#[derive(Debug, Serialize)]
struct Row {
    metric: &'static str,
    unit: &'static str,
    flashfs: f64,
    passthrough: f64,
    ratio: f64,
    preset: String,
}

/// The results of one workload run.
struct Figures {
    seq_write: f64,
    seq_read: f64,
    rand_write: f64,
    rand_read: f64,
    create: f64,
    delete: f64,
}

const IO: usize = 4096;

/// Runs `flashfs bench fuse`.
pub fn run(a: &FuseArgs, global: Global, out: &mut dyn Write) -> Result<()> {
    if a.mib == 0 || a.ops == 0 || a.files == 0 || a.rounds == 0 {
        bail!("--mib, --ops, --files and --rounds must be at least 1");
    }
    for tool in ["bindfs", "fusermount3"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            bail!("`{tool}` is missing: the FUSE benchmark needs the Debian packages bindfs and fuse3");
        }
    }
    let work = tempfile_dir(&a.dir)?;
    let result = measure(a, global, &work);
    let _ = std::fs::remove_dir_all(&work);
    let (ours, theirs) = result?;
    let rows = rows(a, &ours, &theirs);
    if a.json {
        for r in &rows {
            writeln!(out, "{}", serde_json::to_string(r)?)?;
        }
        return Ok(());
    }
    writeln!(
        out,
        "flashfs (native file system on {}, image on tmpfs, through FUSE) vs. bindfs over \
         tmpfs (FUSE passthrough); {} MiB sequential, {} random 4 KiB operations, {} files; \
         buffered I/O, page cache dropped at each open on both sides; median of {} \
         alternating rounds",
        a.preset, a.mib, a.ops, a.files, a.rounds
    )?;
    let mut table = vec![vec![
        "metric".to_string(),
        "flashfs".into(),
        "passthrough".into(),
        "ratio".into(),
    ]];
    for r in &rows {
        table.push(vec![
            r.metric.to_string(),
            format!("{} {}", units::significant(r.flashfs), r.unit),
            format!("{} {}", units::significant(r.passthrough), r.unit),
            format!("{:.0}%", r.ratio * 100.0),
        ]);
    }
    for l in units::table(&table) {
        writeln!(out, "{}", l.trim_end())?;
    }
    Ok(())
}

fn rows(a: &FuseArgs, ours: &Figures, theirs: &Figures) -> Vec<Row> {
    let row = |metric, unit, f: f64, p: f64| Row {
        metric,
        unit,
        flashfs: f,
        passthrough: p,
        ratio: if p > 0.0 { f / p } else { 0.0 },
        preset: a.preset.clone(),
    };
    vec![
        row(
            "sequential write 4 KiB",
            "MiB/s",
            ours.seq_write,
            theirs.seq_write,
        ),
        row(
            "sequential read 4 KiB",
            "MiB/s",
            ours.seq_read,
            theirs.seq_read,
        ),
        row(
            "random write 4 KiB",
            "ops/s",
            ours.rand_write,
            theirs.rand_write,
        ),
        row(
            "random read 4 KiB",
            "ops/s",
            ours.rand_read,
            theirs.rand_read,
        ),
        row("file create", "files/s", ours.create, theirs.create),
        row("file delete", "files/s", ours.delete, theirs.delete),
    ]
}

/// A fresh directory under `base`.
fn tempfile_dir(base: &Path) -> Result<PathBuf> {
    let dir = base.join(format!("flashfs-bench-fuse-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(device::io_error)
        .with_context(|| device::shown(&dir))?;
    Ok(dir)
}

fn measure(a: &FuseArgs, global: Global, work: &Path) -> Result<(Figures, Figures)> {
    let exe = std::env::current_exe().context("cannot find the flashfs executable")?;
    let img = work.join("dev.img");
    let mnt = work.join("flashfs");
    let base = work.join("base");
    let bind = work.join("bind");
    for d in [&mnt, &base, &bind] {
        std::fs::create_dir_all(d).map_err(device::io_error)?;
    }
    let bar = global.progress_bar(2 * a.rounds, "{msg:>12} [{bar:40}] {pos}/{len}");
    checked(
        Command::new(&exe)
            .args(["mkfs", "--preset", &a.preset])
            .arg(&img),
    )?;
    checked(Command::new(&exe).arg("mount").arg(&img).arg(&mnt))?;
    if let Err(e) = checked(Command::new("bindfs").arg(&base).arg(&bind)) {
        unmount(&mnt);
        return Err(e);
    }
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    let mut rounds = || -> Result<()> {
        for _ in 0..a.rounds {
            bar.set_message("flashfs");
            ours.push(workload(a, &mnt)?);
            bar.inc(1);
            bar.set_message("passthrough");
            theirs.push(workload(a, &bind)?);
            bar.inc(1);
        }
        Ok(())
    };
    let result = rounds();
    unmount(&mnt);
    unmount(&bind);
    bar.finish_and_clear();
    result?;
    Ok((median(&ours), median(&theirs)))
}

/// The median of each metric over the rounds.
fn median(rounds: &[Figures]) -> Figures {
    let m = |f: fn(&Figures) -> f64| {
        let mut v: Vec<f64> = rounds.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    Figures {
        seq_write: m(|f| f.seq_write),
        seq_read: m(|f| f.seq_read),
        rand_write: m(|f| f.rand_write),
        rand_read: m(|f| f.rand_read),
        create: m(|f| f.create),
        delete: m(|f| f.delete),
    }
}

fn checked(cmd: &mut Command) -> Result<()> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(device::io_error)
        .with_context(|| format!("cannot run {:?}", cmd.get_program()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(anyhow!(
            "{:?} failed: {}",
            cmd.get_program(),
            crate::one_line(&err)
        ));
    }
    Ok(())
}

/// Unmounts and waits until the mount is gone.
fn unmount(dir: &Path) {
    let _ = Command::new("fusermount3")
        .arg("-u")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let deadline = Instant::now() + Duration::from_secs(30);
    while is_mounted(dir) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn is_mounted(dir: &Path) -> bool {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(1) == dir.to_str())
}

fn per_sec(n: f64, d: Duration) -> f64 {
    n / d.as_secs_f64().max(1e-9)
}

/// The workload on the file system mounted at `dir`.
fn workload(a: &FuseArgs, dir: &Path) -> Result<Figures> {
    let io = |e: std::io::Error| device::io_error(e).context(device::shown(dir));
    let path = dir.join("seq.bin");
    let blocks = a.mib * (1 << 20) / IO as u64;
    let mut buf = vec![0u8; IO];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for b in buf.iter_mut() {
        *b = next() as u8;
    }

    let t = Instant::now();
    let mut f = std::fs::File::create(&path).map_err(io)?;
    for _ in 0..blocks {
        f.write_all(&buf).map_err(io)?;
    }
    f.sync_all().map_err(io)?;
    drop(f);
    let seq_write = per_sec(a.mib as f64, t.elapsed());

    let t = Instant::now();
    let mut f = std::fs::File::open(&path).map_err(io)?;
    let mut total = 0u64;
    loop {
        let n = f.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    drop(f);
    if total != a.mib << 20 {
        bail!("{}: read {total} bytes back", device::shown(&path));
    }
    let seq_read = per_sec(a.mib as f64, t.elapsed());

    let t = Instant::now();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .map_err(io)?;
    for _ in 0..a.ops {
        let off = next() % blocks * IO as u64;
        f.write_all_at(&buf, off).map_err(io)?;
    }
    f.sync_all().map_err(io)?;
    drop(f);
    let rand_write = per_sec(a.ops as f64, t.elapsed());

    let t = Instant::now();
    let f = std::fs::File::open(&path).map_err(io)?;
    for _ in 0..a.ops {
        let off = next() % blocks * IO as u64;
        f.read_exact_at(&mut buf, off).map_err(io)?;
    }
    drop(f);
    let rand_read = per_sec(a.ops as f64, t.elapsed());

    let files = dir.join("files");
    std::fs::create_dir(&files).map_err(io)?;
    let t = Instant::now();
    for i in 0..a.files {
        let mut f = std::fs::File::create(files.join(format!("f{i}"))).map_err(io)?;
        f.write_all(&buf[..100]).map_err(io)?;
    }
    let create = per_sec(a.files as f64, t.elapsed());
    let t = Instant::now();
    for i in 0..a.files {
        std::fs::remove_file(files.join(format!("f{i}"))).map_err(io)?;
    }
    let delete = per_sec(a.files as f64, t.elapsed());
    std::fs::remove_dir(&files).map_err(io)?;
    std::fs::remove_file(&path).map_err(io)?;
    Ok(Figures {
        seq_write,
        seq_read,
        rand_write,
        rand_read,
        create,
        delete,
    })
}
