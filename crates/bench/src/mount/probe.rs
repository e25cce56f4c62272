//! One measured mount: a copy of a volume's state mounted with a configuration, the mount
//! timed on the device clock with its page reads and heap high-water mark, then the first
//! write timed, then what the volume held read back.

use std::time::Duration;

use flashfs::fs::ROOT_INO;
use flashfs::{BlockDevice, Fs, FsConfig, Ftl, FtlConfig};

use super::device::{copy, discard, now, reads, Dev, SimVolume};
use super::fill::{check_files, check_sectors, FileDone, Pattern};
use crate::error::{Context, Result};
use crate::heap::HeapMeter;

/// Bytes of the file the first write creates.
pub const FIRST_WRITE_BYTES: usize = 4096;

/// What one mount cost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    /// Device time of the mount.
    pub mount: Duration,
    /// Device time of the first write after it (with its sync).
    pub first_write: Duration,
    /// Device time of the rest of the sweep after the first write: the look for data of
    /// free blocks a power cut left, which a mount from a checkpoint leaves to the commits
    /// after it (the native file system; zero where none was under way).
    pub sweep: Duration,
    /// Page reads of that sweep.
    pub sweep_reads: u64,
    /// Page reads of the mount.
    pub page_reads: u64,
    /// Heap high-water mark of the mount, bytes.
    pub heap: u64,
    /// Heap the mounted volume holds once the mount returned, bytes.
    pub heap_held: u64,
    /// Bytes the mount read from the volume's NVRAM (0 without one).
    pub nvram_bytes_read: u64,
    /// Whether the mount restored the log from a checkpoint.
    pub restored: bool,
}

/// The file system's configuration: the default, scanning at mount if `scan`.
pub fn fs_config(scan: bool) -> FsConfig {
    let mut c = FsConfig::default();
    c.ftl.log.scan_mount = scan;
    c
}

/// The block device's configuration: the default, scanning at mount if `scan`.
pub fn ftl_config(scan: bool) -> FtlConfig {
    let mut c = FtlConfig::default();
    c.log.scan_mount = scan;
    c
}

/// Mounts a copy of `state` as the native file system, creates and writes a small file
/// and syncs, then checks the first and last of `files`.
pub fn fs_mount<D: SimVolume>(
    state: &D,
    scan: bool,
    pat: &Pattern,
    files: &[FileDone],
) -> Result<Measured> {
    fs_mount_checked(state, fs_config(scan), pat, files)
}

/// As [`fs_mount`], with `config`.
pub fn fs_mount_checked<D: SimVolume>(
    state: &D,
    config: FsConfig,
    pat: &Pattern,
    files: &[FileDone],
) -> Result<Measured> {
    let (mut fs, m) = fs_mount_with(state, config)?;

    let t1 = now(fs.ftl().log().device());
    let ino = fs
        .create(ROOT_INO, b"first-write", 0o644, 0, 0)
        .context(|| "first write: create".into())?
        .ino;
    fs.write(ino, 0, pat.file(u64::MAX, 0, FIRST_WRITE_BYTES))
        .context(|| "first write".into())?;
    fs.sync().context(|| "first write: sync".into())?;
    let first_write = now(fs.ftl().log().device()) - t1;

    let dev = fs.ftl().log().device();
    let (t2, r2) = (now(dev), reads(dev));
    fs.sweep().context(|| "sweep".into())?;
    let dev = fs.ftl().log().device();
    let (sweep, sweep_reads) = (now(dev) - t2, reads(dev) - r2);

    check_files(&mut fs, pat, files)?;
    discard(fs);
    Ok(Measured {
        first_write,
        sweep,
        sweep_reads,
        ..m
    })
}

/// Mounts a copy of `state` as the native file system and measures the mount alone (its
/// `first_write` is zero).
pub fn fs_mount_only<D: SimVolume>(state: &D, scan: bool) -> Result<(Fs<D>, Measured)> {
    fs_mount_with(state, fs_config(scan))
}

/// Mounts a copy of `state` as the native file system with `config` and measures the mount
/// alone (its `first_write` is zero).
pub fn fs_mount_with<D: SimVolume>(state: &D, config: FsConfig) -> Result<(Fs<D>, Measured)> {
    let scan = config.ftl.log.scan_mount;
    let dev = copy(state);
    let (t0, r0, n0) = (now(&dev), reads(&dev), dev.fast_bytes_read());
    let meter = HeapMeter::start();
    let mounted = Fs::mount(dev, config);
    let heap = meter.peak();
    let heap_held = meter.current().max(0) as u64;
    drop(meter);
    let fs = mounted.context(|| format!("mount (scan {scan})"))?;
    let dev = fs.ftl().log().device();
    let m = Measured {
        mount: now(dev) - t0,
        first_write: Duration::ZERO,
        sweep: Duration::ZERO,
        sweep_reads: 0,
        page_reads: reads(dev) - r0,
        heap,
        heap_held,
        nvram_bytes_read: dev.fast_bytes_read() - n0,
        restored: fs.ftl().log().restored(),
    };
    Ok((fs, m))
}

/// Mounts a copy of `state` as the block device, writes one sector (the one after those
/// written, or sector 0 if they fill it) and flushes, then checks the first and last of
/// the `sectors` written.
pub fn ftl_mount(state: &Dev, scan: bool, pat: &Pattern, sectors: u64) -> Result<Measured> {
    let dev = copy(state);
    let (t0, r0) = (now(&dev), reads(&dev));
    let meter = HeapMeter::start();
    let mounted = Ftl::mount(dev, ftl_config(scan));
    let heap = meter.peak();
    drop(meter);
    let mut ftl = mounted.context(|| format!("mount (scan {scan})"))?;
    let dev = ftl.log().device();
    let (mount, page_reads) = (now(dev) - t0, reads(dev) - r0);
    let restored = ftl.log().restored();

    let t1 = now(ftl.log().device());
    let ss = ftl.sector_size();
    let at = if sectors < ftl.sectors() { sectors } else { 0 };
    let data = pat.file(u64::MAX, 0, ss).to_vec();
    ftl.write(at, &data).context(|| "first write".into())?;
    ftl.flush().context(|| "first write: flush".into())?;
    let first_write = now(ftl.log().device()) - t1;

    // The first and last sectors written, but the one the first write replaced.
    let check: Vec<u64> = [0, sectors.saturating_sub(1)]
        .into_iter()
        .filter(|&s| s < sectors && s != at)
        .collect();
    check_sectors(&mut ftl, pat, &check)?;
    discard(ftl);
    Ok(Measured {
        mount,
        first_write,
        sweep: Duration::ZERO,
        sweep_reads: 0,
        page_reads,
        heap,
        heap_held: 0,
        nvram_bytes_read: 0,
        restored,
    })
}
