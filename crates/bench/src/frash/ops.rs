//! The ops experiment: lmbench's `lat_fs` (files created, then deleted; here also
//! overwritten and read back) and `lmdd`/IOZone's sequential write and read of a large
//! file, each phase timed in device time on a fresh volume of each configuration.

use std::time::Duration;

use flash::stats::Stats;
use flashfs::fs::{Ino, ROOT_INO};
use flashfs::Fs;

use super::volume::{hybrid, nvram_spec, Config, Volume};
use super::{Experiment, FrashOptions, FrashRow, MIB};
use crate::error::{BenchError, Context, Result};
use crate::mount::{discard, fs_mount_with, in_series, now, Part, Pattern, CHUNK};

/// When the phases sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sync {
    /// After every operation: each is durable when it returns, as YAFFS's are.
    Each,
    /// Once, at the end of the phase.
    End,
}

impl Sync {
    fn name(self) -> &'static str {
        match self {
            Sync::Each => "each",
            Sync::End => "end",
        }
    }
}

/// Runs the experiment on each configuration.
pub(super) fn run(
    opts: &FrashOptions,
    pat: &Pattern,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<Vec<FrashRow>> {
    let part = opts.partition(opts.ops_partition_mib)?;
    let nvram = nvram_spec(&opts.nvram_preset, opts.nvram_access_ns)?;
    let mut rows = Vec::new();
    for &config in &opts.configs {
        let label = format!("ops {} {}", config.name(), part.label());
        let mut p = |done, total| progress(&label, done, total);
        let run = Run {
            opts,
            part: &part,
            config,
            pat,
        };
        let got = match config {
            Config::Frash => run.all(&|| hybrid(&part, &nvram, opts.seed), &mut p),
            _ => run.all(&|| part.build(opts.seed), &mut p),
        };
        rows.extend(got.map_err(|e| in_series(&label, e))?);
    }
    Ok(rows)
}

/// The name of small file `i`.
/// The inode of the phase's file `i` in directory `dir` (`dir_name` for messages).
fn file_ino<D: Volume>(fs: &mut Fs<D>, dir: Ino, dir_name: &str, i: u64) -> Result<Ino> {
    Ok(fs
        .lookup(dir, &name(i))
        .context(|| format!("lookup {dir_name}/{i}"))?
        .ino)
}

fn name(i: u64) -> Vec<u8> {
    format!("f{i:05}").into_bytes()
}

/// The pattern's file number of small file `i`'s contents: as created, or as overwritten.
fn content(i: u64, overwritten: bool) -> u64 {
    if overwritten {
        i + (1 << 32)
    } else {
        i
    }
}

/// What the simulators say at the start of a phase.
struct Phase {
    t0: Duration,
    nand: Stats,
    nvram: Option<Stats>,
    nvram_t0: Option<Duration>,
}

impl Phase {
    fn start<D: Volume>(fs: &Fs<D>) -> Phase {
        let dev = fs.ftl().log().device();
        Phase {
            t0: now(dev),
            nand: dev.nand_stats(),
            nvram: dev.nvram_stats(),
            nvram_t0: dev.nvram_now(),
        }
    }

    /// The phase's row: `ops` operations on files of `bytes` each.
    fn end<D: Volume>(
        self,
        fs: &Fs<D>,
        mut row: FrashRow,
        op: &'static str,
        ops: u64,
        bytes: u64,
    ) -> FrashRow {
        let dev = fs.ftl().log().device();
        let time = now(dev) - self.t0;
        let secs = time.as_secs_f64().max(f64::MIN_POSITIVE);
        let nand = dev.nand_stats().since(&self.nand);
        let per = |v: u64| v as f64 / ops as f64;
        row.op = Some(op);
        row.files = ops;
        row.file_kb = bytes as f64 / 1024.0;
        row.stored_mb = (ops * bytes) as f64 / MIB;
        row.device_ms = Some(time.as_secs_f64() * 1e3);
        row.ops_per_s = Some(ops as f64 / secs);
        row.kbps = (bytes > 0).then(|| (ops * bytes) as f64 / 1024.0 / secs);
        row.nand_reads_per_op = Some(per(nand.reads));
        row.nand_programs_per_op = Some(per(nand.programs));
        row.nand_erases_per_op = Some(per(nand.erases));
        if let (Some(before), Some(after)) = (self.nvram, dev.nvram_stats()) {
            let nv = after.since(&before);
            row.nvram_bytes_written_per_op = Some(per(nv.bytes_programmed));
            row.nvram_bytes_read_per_op = Some(per(nv.bytes_read));
        }
        if let (Some(t0), Some(t1)) = (self.nvram_t0, dev.nvram_now()) {
            row.nvram_time_pct = Some((t1 - t0).as_secs_f64() * 100.0 / secs);
        }
        row
    }
}

/// One configuration's run.
struct Run<'a> {
    opts: &'a FrashOptions,
    part: &'a Part,
    config: Config,
    pat: &'a Pattern,
}

impl Run<'_> {
    fn base(&self, sync: Sync) -> Result<FrashRow> {
        let mut r = FrashRow::new(Experiment::Ops, self.config, self.opts, self.part)?;
        r.sync = Some(sync.name());
        Ok(r)
    }

    /// Every phase: each group (a file size and sync setting, and the large file) on a
    /// fresh volume, or all in turn on one ([`FrashOptions::ops_one_volume`]).
    fn all<D: Volume>(
        &self,
        build: &dyn Fn() -> Result<D>,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Vec<FrashRow>> {
        let format = || -> Result<Fs<D>> {
            Fs::format(build()?, self.config.fs_config(self.opts.nvram_file_bytes))
                .context(|| "mkfs".into())
        };
        let mut fs = format()?;
        let mut rows = Vec::new();
        let groups = 2 * self.opts.ops_small_bytes.len() as u64 + 1;
        let mut done = 0;
        for sync in [Sync::Each, Sync::End] {
            for &bytes in &self.opts.ops_small_bytes {
                if done > 0 && !self.opts.ops_one_volume {
                    discard(fs);
                    fs = format()?;
                }
                fs = self.small(fs, sync, bytes, &mut rows)?;
                done += 1;
                progress(done, groups);
            }
        }
        if !self.opts.ops_one_volume {
            discard(fs);
            fs = format()?;
        }
        fs = self.large(fs, &mut rows)?;
        progress(groups, groups);
        discard(fs);
        Ok(rows)
    }

    /// Unmounts and mounts again, timed: what a read then finds comes from flash.
    fn remount<D: Volume>(&self, fs: Fs<D>) -> Result<(Fs<D>, f64)> {
        let state = fs.unmount().context(|| "unmount".into())?;
        let (fs, m) = fs_mount_with(&state, self.config.fs_config(self.opts.nvram_file_bytes))?;
        discard(state);
        Ok((fs, m.mount.as_secs_f64() * 1e3))
    }

    /// `lat_fs`'s files of `bytes` each, in a directory of their own: created, overwritten,
    /// read back after a remount, deleted.
    fn small<D: Volume>(
        &self,
        mut fs: Fs<D>,
        sync: Sync,
        bytes: u64,
        rows: &mut Vec<FrashRow>,
    ) -> Result<Fs<D>> {
        let n = self.opts.ops_files;
        let len = bytes as usize;
        let each = sync == Sync::Each;
        let dir_name = format!("{bytes}-{}", sync.name());
        let dir = fs
            .mkdir(ROOT_INO, dir_name.as_bytes(), 0o755, 0, 0)
            .context(|| format!("mkdir {dir_name}"))?
            .ino;
        fs.sync().context(|| "sync".into())?;
        let mut group = Vec::new();

        let ph = Phase::start(&fs);
        for i in 0..n {
            let ino = fs
                .create(dir, &name(i), 0o644, 0, 0)
                .context(|| format!("create {dir_name}/{i}"))?
                .ino;
            let data = self.pat.file(content(i, false), 0, len);
            write_whole(&mut fs, ino, data, each).context(|| format!("write {dir_name}/{i}"))?;
        }
        if !each {
            fs.sync().context(|| "sync".into())?;
        }
        group.push(ph.end(&fs, self.base(sync)?, "create", n, bytes));

        if len > 0 {
            let ph = Phase::start(&fs);
            for i in 0..n {
                let ino = file_ino(&mut fs, dir, &dir_name, i)?;
                let data = self.pat.file(content(i, true), 0, len);
                write_whole(&mut fs, ino, data, each)
                    .context(|| format!("overwrite {dir_name}/{i}"))?;
            }
            if !each {
                fs.sync().context(|| "sync".into())?;
            }
            group.push(ph.end(&fs, self.base(sync)?, "write", n, bytes));
        }

        let (mut fs, mount_ms) = self.remount(fs)?;
        if len > 0 {
            let mut buf = vec![0u8; len];
            let ph = Phase::start(&fs);
            for i in 0..n {
                let ino = file_ino(&mut fs, dir, &dir_name, i)?;
                fs.open(ino).context(|| "open".into())?;
                let got = fs
                    .read(ino, 0, &mut buf)
                    .context(|| format!("read {dir_name}/{i}"))?;
                fs.release(ino).context(|| "close".into())?;
                if got != len || buf != self.pat.file(content(i, true), 0, len) {
                    return Err(BenchError::Mismatch(format!("{dir_name}/{i}")));
                }
            }
            group.push(ph.end(&fs, self.base(sync)?, "read", n, bytes));
        }

        let ph = Phase::start(&fs);
        for i in 0..n {
            fs.unlink(dir, &name(i))
                .context(|| format!("unlink {dir_name}/{i}"))?;
            if each {
                fs.sync().context(|| "sync".into())?;
            }
        }
        if !each {
            fs.sync().context(|| "sync".into())?;
        }
        group.push(ph.end(&fs, self.base(sync)?, "delete", n, bytes));

        for mut r in group {
            r.mount_ms = mount_ms;
            rows.push(r);
        }
        Ok(fs)
    }

    /// `lmdd`'s large file: written in 64 KiB writes and synced, read back after a remount.
    fn large<D: Volume>(&self, mut fs: Fs<D>, rows: &mut Vec<FrashRow>) -> Result<Fs<D>> {
        let size = self.opts.ops_large_kib * 1024;
        let file = u64::MAX - 1;
        let ph = Phase::start(&fs);
        let ino = fs
            .create(ROOT_INO, b"large", 0o644, 0, 0)
            .context(|| "create the large file".into())?
            .ino;
        fs.open(ino).context(|| "open".into())?;
        let mut off = 0;
        while off < size {
            let len = (size - off).min(CHUNK as u64) as usize;
            fs.write(ino, off, self.pat.file(file, off, len))
                .context(|| format!("write the large file at {off}"))?;
            off += len as u64;
        }
        fs.release(ino).context(|| "close".into())?;
        fs.sync().context(|| "sync".into())?;
        let mut write = ph.end(&fs, self.base(Sync::End)?, "write", 1, size);

        let (mut fs, mount_ms) = self.remount(fs)?;
        let mut buf = vec![0u8; CHUNK];
        let ph = Phase::start(&fs);
        let ino = fs
            .lookup(ROOT_INO, b"large")
            .context(|| "lookup the large file".into())?
            .ino;
        fs.open(ino).context(|| "open".into())?;
        let mut off = 0;
        while off < size {
            let len = (size - off).min(CHUNK as u64) as usize;
            let got = fs
                .read(ino, off, &mut buf[..len])
                .context(|| format!("read the large file at {off}"))?;
            if got != len || buf[..len] != *self.pat.file(file, off, len) {
                return Err(BenchError::Mismatch(format!("the large file at {off}")));
            }
            off += len as u64;
        }
        fs.release(ino).context(|| "close".into())?;
        let mut read = ph.end(&fs, self.base(Sync::End)?, "read", 1, size);
        write.mount_ms = mount_ms;
        read.mount_ms = mount_ms;
        rows.push(write);
        rows.push(read);
        Ok(fs)
    }
}

/// Opens file `ino`, writes `data` at its start (nothing when empty), closes it, and with
/// `each` syncs it: one `lat_fs` file operation.
fn write_whole<D: Volume>(
    fs: &mut Fs<D>,
    ino: Ino,
    data: &[u8],
    each: bool,
) -> flashfs::Result<()> {
    fs.open(ino)?;
    if !data.is_empty() {
        fs.write(ino, 0, data)?;
    }
    fs.release(ino)?;
    if each {
        fs.fsync(ino, false)?;
    }
    Ok(())
}
