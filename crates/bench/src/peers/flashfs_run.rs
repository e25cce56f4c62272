//! The phases on flashfs's native file system: formatted with its default configuration or
//! its small-RAM one ([`FlashfsConfig`]; access times off, as littlefs keeps none), files
//! created and written in 64-byte writes (fsync after each where the run says), the volume
//! synced at the end of each phase.

use flash::{DeviceClock, Simulated};
use flashfs::fs::{Atime, ROOT_INO};
use flashfs::{Fs, FsConfig};

use super::meter::{PeerRow, Phase, Probe, RowKey, SimSegments};
use super::plan::{Plan, Workload, CHUNK, TINY_READ};
use crate::error::{BenchError, Context, Result};
use crate::heap::HeapMeter;

/// A configuration of flashfs the peers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlashfsConfig {
    /// [`FsConfig::default`]: large caches.
    Default,
    /// [`FsConfig::small_ram`]: the microcontroller profile.
    SmallRam,
}

impl FlashfsConfig {
    /// Both, the default first.
    pub const ALL: [FlashfsConfig; 2] = [FlashfsConfig::Default, FlashfsConfig::SmallRam];

    /// Its name in rows and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            FlashfsConfig::Default => "default",
            FlashfsConfig::SmallRam => "small-ram",
        }
    }

    /// Parses a name.
    pub fn from_name(s: &str) -> Option<FlashfsConfig> {
        Self::ALL.into_iter().find(|c| c.name() == s)
    }

    /// The configuration flashfs runs with here: access times off.
    pub fn config(self) -> FsConfig {
        let base = match self {
            FlashfsConfig::Default => FsConfig::default(),
            FlashfsConfig::SmallRam => FsConfig::small_ram(),
        };
        FsConfig {
            atime: Atime::Never,
            ..base
        }
    }
}

/// The default configuration flashfs runs with here (access times off).
pub fn config() -> FsConfig {
    FlashfsConfig::Default.config()
}

fn used<D: SimSegments>(fs: &Fs<D>) -> u64 {
    let s = fs.statfs();
    s.blocks.saturating_sub(s.blocks_free) * u64::from(s.block_size)
}

/// Ends a writing phase with a checkpoint rather than a sync: a sync of small writes may be
/// a journal entry that leaves their blocks in RAM for the next checkpoint, whose programs
/// belong to this phase, not the next.
fn end_phase<D: SimSegments>(fs: &mut Fs<D>) -> Result<()> {
    fs.checkpoint().context(|| "checkpoint".into())
}

/// Runs every phase of `plan` on a fresh flashfs on `dev`, pushing one row per phase.
pub fn run<D: SimSegments>(
    dev: D,
    plan: &Plan,
    key: &RowKey,
    rows: &mut Vec<PeerRow>,
) -> Result<()> {
    let cfg = FlashfsConfig::from_name(key.config)
        .ok_or_else(|| BenchError::InvalidOptions(format!("flashfs config {}", key.config)))?
        .config();
    let random_after = plan.random_file_after();
    let smalls: Vec<Vec<u8>> = (0..plan.small_files).map(|i| plan.small_file(i)).collect();
    let mut buf = vec![0u8; plan.small_bytes.max(CHUNK)];
    let names: Vec<Vec<u8>> = (0..plan.small_files)
        .map(|i| format!("f{i:05}").into_bytes())
        .collect();
    let mut inos = Vec::with_capacity(names.len());
    let heap = HeapMeter::start();
    let mut fs = Fs::format(dev, cfg).context(|| "format".into())?;

    let mut ph = Phase::start(Workload::LinearWrite, &fs);
    let linear = fs
        .create(ROOT_INO, b"linear", 0o644, 0, 0)
        .context(|| "create".into())?
        .ino;
    for off in (0..plan.linear_bytes).step_by(CHUNK) {
        let t = fs.now();
        fs.write(linear, off, &Plan::chunk(off, 0))
            .context(|| "linear write".into())?;
        if plan.sync {
            fs.fsync(linear, false).context(|| "fsync".into())?;
        }
        ph.op(t, &fs, CHUNK as u64);
    }
    end_phase(&mut fs)?;
    rows.push(ph.finish(&fs, key, heap.peak(), used(&fs)));

    let random = fs
        .create(ROOT_INO, b"random", 0o644, 0, 0)
        .context(|| "create".into())?
        .ino;
    for off in (0..plan.random_file).step_by(CHUNK) {
        fs.write(random, off, &Plan::chunk(off, 0))
            .context(|| "random file's first writing".into())?;
    }
    fs.sync().context(|| "sync".into())?;
    let mut ph = Phase::start(Workload::RandomWrite, &fs);
    for (i, &off) in plan.random_offsets.iter().enumerate() {
        let t = fs.now();
        fs.write(random, off, &Plan::chunk(off, i as u64 + 1))
            .context(|| "random write".into())?;
        if plan.sync {
            fs.fsync(random, false).context(|| "fsync".into())?;
        }
        ph.op(t, &fs, CHUNK as u64);
    }
    end_phase(&mut fs)?;
    rows.push(ph.finish(&fs, key, heap.peak(), used(&fs)));

    let dir = fs
        .mkdir(ROOT_INO, b"small", 0o755, 0, 0)
        .context(|| "mkdir".into())?
        .ino;
    let mut ph = Phase::start(Workload::SmallFiles, &fs);
    for (name, data) in names.iter().zip(&smalls) {
        let t = fs.now();
        let ino = fs
            .create(dir, name, 0o644, 0, 0)
            .context(|| "small file".into())?
            .ino;
        fs.write(ino, 0, data).context(|| "small file".into())?;
        if plan.sync {
            fs.fsync(ino, false).context(|| "fsync".into())?;
        }
        ph.op(t, &fs, data.len() as u64);
        inos.push(ino);
    }
    end_phase(&mut fs)?;
    rows.push(ph.finish(&fs, key, heap.peak(), used(&fs)));

    let mut ph = Phase::start(Workload::LinearRead, &fs);
    for off in (0..plan.linear_bytes).step_by(CHUNK) {
        let t = fs.now();
        let n = fs
            .read(linear, off, &mut buf[..CHUNK])
            .context(|| "linear read".into())?;
        ph.op(t, &fs, n as u64);
        if n != CHUNK || buf[..CHUNK] != Plan::chunk(off, 0) {
            return Err(BenchError::Mismatch(format!(
                "flashfs linear file at {off}"
            )));
        }
    }
    rows.push(ph.finish(&fs, key, heap.peak(), used(&fs)));

    let mut ph = Phase::start(Workload::RandomRead, &fs);
    for &off in &plan.random_offsets {
        let t = fs.now();
        let n = fs
            .read(random, off, &mut buf[..CHUNK])
            .context(|| "random read".into())?;
        ph.op(t, &fs, n as u64);
        if buf[..CHUNK] != random_after[off as usize..off as usize + CHUNK] {
            return Err(BenchError::Mismatch(format!(
                "flashfs random file at {off}"
            )));
        }
    }
    rows.push(ph.finish(&fs, key, heap.peak(), used(&fs)));

    let mut ph = Phase::start(Workload::SmallRead, &fs);
    for (i, (&ino, data)) in inos.iter().zip(&smalls).enumerate() {
        let t = fs.now();
        let n = fs
            .read(ino, 0, &mut buf[..plan.small_bytes])
            .context(|| "small read".into())?;
        ph.op(t, &fs, n as u64);
        if buf[..n] != data[..] {
            return Err(BenchError::Mismatch(format!("flashfs small file {i}")));
        }
    }
    rows.push(ph.finish(&fs, key, heap.peak(), used(&fs)));

    let mut ph = Phase::start(Workload::TinyRead, &fs);
    for off in (0..plan.tiny_read_bytes).step_by(TINY_READ) {
        let t = fs.now();
        let n = fs
            .read(linear, off, &mut buf[..TINY_READ])
            .context(|| "tiny read".into())?;
        ph.op(t, &fs, n as u64);
        let at = (off % CHUNK as u64) as usize;
        if n != TINY_READ || buf[..n] != Plan::chunk(off - at as u64, 0)[at..at + n] {
            return Err(BenchError::Mismatch(format!(
                "flashfs linear file at {off}"
            )));
        }
    }
    rows.push(ph.finish(&fs, key, heap.peak(), used(&fs)));

    let mut ph = Phase::start(Workload::HeadOverwrite, &fs);
    for n in 1..=plan.head_overwrites {
        let t = fs.now();
        fs.write(linear, 0, &Plan::head_after(n))
            .context(|| "head overwrite".into())?;
        if plan.sync {
            fs.fsync(linear, false).context(|| "fsync".into())?;
        }
        ph.op(t, &fs, CHUNK as u64);
    }
    end_phase(&mut fs)?;
    rows.push(ph.finish(&fs, key, heap.peak(), used(&fs)));
    fs.read(linear, 0, &mut buf[..CHUNK])
        .context(|| "head read".into())?;
    if buf[..CHUNK] != Plan::head_after(plan.head_overwrites) {
        return Err(BenchError::Mismatch("flashfs linear file's head".into()));
    }

    let dev = fs.unmount().context(|| "unmount".into())?;
    let (t0, s0) = (dev.sim().now(), dev.sim().stats().clone());
    let fs = Fs::mount(dev, cfg).context(|| "mount".into())?;
    let mut ph = Phase::start_at(Workload::Mount, t0, s0);
    ph.op(t0, &fs, 0);
    rows.push(ph.finish(&fs, key, heap.peak(), used(&fs)));

    let dev = fs.unmount().context(|| "unmount".into())?;
    let (t0, s0) = (dev.sim().now(), dev.sim().stats().clone());
    let mut fs = Fs::mount(dev, cfg).context(|| "mount".into())?;
    fs.write(random, 0, &Plan::chunk(0, u64::MAX))
        .context(|| "first write".into())?;
    fs.fsync(random, false).context(|| "fsync".into())?;
    let mut ph = Phase::start_at(Workload::MountFirstWrite, t0, s0);
    ph.op(t0, &fs, CHUNK as u64);
    rows.push(ph.finish(&fs, key, heap.peak(), used(&fs)));
    Ok(())
}
