//! Small writes on the native file system: what each user byte costs on flash when writes
//! are much smaller than a block, with and without write-back of partial blocks
//! ([`FsConfig::write_buffer_bytes`]).
//!
//! Each run formats a fresh simulated part and makes one file, then measures one pattern:
//! `append` writes the file from 0 to its size in writes of `write_bytes`; `random` first
//! writes a 32 KiB file whole and syncs (not measured), then writes `write_bytes` at random
//! offsets, aligned to the write size, until as many bytes as `random_bytes` were written.
//! Syncs: one at the end (`end`), one after every 4 KiB written and at the end (`4k`), or
//! one after every write (`each`). Every figure is the simulator's: bytes programmed per user
//! byte, program operations per sync, device time, the 99th percentile of the device time
//! of a write (with the sync after it where there is one), and the heap high-water mark
//! from the format to the end (the simulator's own storage left out). The file is read
//! back and checked after the run.

use std::time::Duration;

use flash::stats::{Histogram, Stats};
use flash::{DeviceClock, DeviceSpec, ImageMeta, NandSim, NorSim, Simulated};
use flashfs::fs::{Atime, ROOT_INO};
use flashfs::{Fs, FsConfig, NandSegments, NorSegments};
use serde::Serialize;

use crate::error::{BenchError, Context, Result};
use crate::heap::{uncounted, HeapMeter};
use crate::peers::meter::SimSegments;
use crate::tffs::device::{Uncounted, NOR_BLOCK_BYTES};
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// The parts of the benchmark.
pub const DEVICES: [&str; 3] = ["w25q64jv", "w25n01gv", "nand-1g"];
/// Bytes per write.
pub const WRITE_SIZES: [usize; 4] = [16, 64, 256, 1024];
/// User bytes between syncs in the `4k` setting.
pub const SYNC_EVERY_BYTES: u64 = 4096;

/// Where the writes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// From the start of the file to its end, each write after the last.
    Append,
    /// At random aligned offsets of a file written whole before.
    Random,
}

impl Pattern {
    /// Both.
    pub const ALL: [Pattern; 2] = [Pattern::Append, Pattern::Random];

    /// The name in rows and options.
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Append => "append",
            Pattern::Random => "random",
        }
    }
}

/// When the runs sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SyncEvery {
    /// Once, at the end.
    End,
    /// After every 4 KiB written, and at the end.
    #[serde(rename = "4k")]
    FourK,
    /// After every write.
    Each,
}

impl SyncEvery {
    /// All three.
    pub const ALL: [SyncEvery; 3] = [SyncEvery::End, SyncEvery::FourK, SyncEvery::Each];

    /// The name in rows and options.
    pub fn name(self) -> &'static str {
        match self {
            SyncEvery::End => "end",
            SyncEvery::FourK => "4k",
            SyncEvery::Each => "each",
        }
    }

    /// Parses a name.
    pub fn from_name(s: &str) -> Option<SyncEvery> {
        SyncEvery::ALL.into_iter().find(|x| x.name() == s)
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct SmallWritesOptions {
    /// Device presets (NOR or NAND).
    pub devices: Vec<String>,
    /// Bytes per write.
    pub write_sizes: Vec<usize>,
    /// Patterns.
    pub patterns: Vec<Pattern>,
    /// Sync settings.
    pub syncs: Vec<SyncEvery>,
    /// Size the `append` pattern writes the file to.
    pub append_bytes: u64,
    /// Size of the `random` pattern's file.
    pub random_file: u64,
    /// Bytes the `random` pattern writes.
    pub random_bytes: u64,
    /// The [`FsConfig::write_buffer_bytes`] settings each combination runs with.
    pub write_buffer_bytes: Vec<usize>,
    /// Run the microcontroller profile ([`FsConfig::small_ram`]) instead of the defaults
    /// (its write buffer replaced by each of `write_buffer_bytes`).
    pub small_ram: bool,
    /// Seed of the random offsets and of the simulated parts.
    pub seed: u64,
}

impl Default for SmallWritesOptions {
    fn default() -> Self {
        SmallWritesOptions {
            devices: DEVICES.iter().map(|s| s.to_string()).collect(),
            write_sizes: WRITE_SIZES.to_vec(),
            patterns: Pattern::ALL.to_vec(),
            syncs: SyncEvery::ALL.to_vec(),
            append_bytes: 1 << 20,
            random_file: 32 << 10,
            random_bytes: 256 << 10,
            write_buffer_bytes: vec![FsConfig::default().write_buffer_bytes, 0],
            small_ram: false,
            seed: 2019,
        }
    }
}

impl SmallWritesOptions {
    /// A short run (seconds): the two SPI parts, 64- and 1,024-byte writes, a 16 KiB
    /// append, 16 KiB of random writes in an 8 KiB file.
    pub fn quick() -> Self {
        SmallWritesOptions {
            devices: vec!["w25q64jv".into(), "w25n01gv".into()],
            write_sizes: vec![64, 1024],
            append_bytes: 16 << 10,
            random_file: 8 << 10,
            random_bytes: 16 << 10,
            ..SmallWritesOptions::default()
        }
    }

    fn check(&self) -> Result<()> {
        if self.devices.is_empty()
            || self.write_sizes.is_empty()
            || self.patterns.is_empty()
            || self.syncs.is_empty()
            || self.write_buffer_bytes.is_empty()
        {
            return Err(BenchError::InvalidOptions("nothing to run".into()));
        }
        for &w in &self.write_sizes {
            if w == 0
                || !self.append_bytes.is_multiple_of(w as u64)
                || !self.random_file.is_multiple_of(w as u64)
                || !self.random_bytes.is_multiple_of(w as u64)
            {
                return Err(BenchError::InvalidOptions(format!(
                    "writes of {w} bytes must divide the file sizes and the bytes written"
                )));
            }
        }
        Ok(())
    }
}

/// One measured run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SmallWritesRow {
    /// Device preset.
    pub device: String,
    /// Where the writes go.
    pub pattern: Pattern,
    /// Bytes per write.
    pub write_bytes: usize,
    /// When the run syncs.
    pub sync: SyncEvery,
    /// [`FsConfig::write_buffer_bytes`] of the run (0: write-back off).
    pub write_buffer_bytes: usize,
    /// The configuration: `default` or `small-ram` ([`FsConfig::small_ram`]).
    pub config: &'static str,
    /// Bytes per file-system block on this part.
    pub block_bytes: u32,
    /// Writes made.
    pub writes: u64,
    /// Syncs made.
    pub syncs: u64,
    /// User bytes written.
    pub user_bytes: u64,
    /// Bytes the part programmed.
    pub bytes_programmed: u64,
    /// Bytes programmed per user byte.
    pub prog_per_user_byte: f64,
    /// Program operations of the part.
    pub programs: u64,
    /// Program operations per sync.
    pub programs_per_sync: f64,
    /// Erases of the part.
    pub erases: u64,
    /// Device time of the whole run, seconds.
    pub device_s: f64,
    /// 99th percentile of the device time of a write (with its sync, if one follows it),
    /// microseconds.
    pub p99_write_us: f64,
    /// Slowest write, microseconds.
    pub max_write_us: f64,
    /// Heap high-water mark from the format to the end, bytes (0 where the counting
    /// allocator is not installed).
    pub heap_bytes: u64,
    /// The most bytes the write-back buffers held at once.
    pub buffer_bytes: u64,
    /// Commits the file system made (those of the syncs and those it made on its own).
    pub commits: u64,
    /// Of those, commits written as journal entries (SPEC.md §8.5b): small writes and
    /// their sync in one entry, no index.
    pub journal_entries: u64,
    /// Index nodes the commits wrote.
    pub index_nodes: u64,
    /// Superblocks written as a whole block (others were appended in place).
    pub superblocks: u64,
    /// Slots the log wrote for the block device: data blocks, index nodes, whole
    /// superblocks and journal blocks started.
    pub log_slots: u64,
    /// Slots the log wrote for its own checkpoints (the block device's map).
    pub checkpoint_slots: u64,
}

/// Runs every combination; `progress` hears the label and the count of runs done and to do.
pub fn run_small_writes(
    opts: &SmallWritesOptions,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<Vec<SmallWritesRow>> {
    opts.check()?;
    let total = (opts.devices.len()
        * opts.patterns.len()
        * opts.write_sizes.len()
        * opts.syncs.len()
        * opts.write_buffer_bytes.len()) as u64;
    let mut rows = Vec::new();
    let mut done = 0;
    for device in &opts.devices {
        let spec = flash::preset::lookup(device)
            .map(|p| p.spec)
            .context(|| format!("preset {device}"))?;
        for &pattern in &opts.patterns {
            for &write_bytes in &opts.write_sizes {
                for &sync in &opts.syncs {
                    for &buffers in &opts.write_buffer_bytes {
                        let run = Run {
                            device,
                            pattern,
                            write_bytes,
                            sync,
                            buffers,
                        };
                        let label = run.label();
                        progress(&label, done, total);
                        let row = run
                            .on(spec, opts)
                            .map_err(|e| BenchError::Report(format!("{label}: {e}")))?;
                        rows.push(row);
                        done += 1;
                        progress(&label, done, total);
                    }
                }
            }
        }
    }
    Ok(rows)
}

/// One combination.
struct Run<'a> {
    device: &'a str,
    pattern: Pattern,
    write_bytes: usize,
    sync: SyncEvery,
    buffers: usize,
}

impl Run<'_> {
    fn label(&self) -> String {
        format!(
            "{} {} {} B sync {} buffers {} B",
            self.device,
            self.pattern.name(),
            self.write_bytes,
            self.sync.name(),
            self.buffers
        )
    }

    fn on(&self, spec: DeviceSpec, opts: &SmallWritesOptions) -> Result<SmallWritesRow> {
        let what = || format!("simulating the {}", self.device);
        let meta = ImageMeta::new(self.device, opts.seed);
        match spec {
            DeviceSpec::Nor(s) => {
                let sim = Uncounted(NorSim::new(s, meta).context(what)?);
                self.measure(NorSegments::new(sim, NOR_BLOCK_BYTES).context(what)?, opts)
            }
            DeviceSpec::Nand(s) => {
                let sim = Uncounted(NandSim::new(s, meta).context(what)?);
                self.measure(NandSegments::new(sim).context(what)?, opts)
            }
            DeviceSpec::Nvram(_) => Err(BenchError::InvalidOptions(format!(
                "{}: the native file system runs on NOR and NAND only",
                self.device
            ))),
        }
    }

    fn measure<D: SimSegments>(&self, dev: D, opts: &SmallWritesOptions) -> Result<SmallWritesRow> {
        let base = if opts.small_ram {
            FsConfig::small_ram()
        } else {
            FsConfig::default()
        };
        let config = FsConfig {
            atime: Atime::Never,
            write_buffer_bytes: self.buffers,
            ..base
        };
        let w = self.write_bytes as u64;
        // The bench's own bookkeeping (the writes, what the file must hold, the latencies,
        // the simulator's counters) stays out of the heap figure: made before the meter
        // starts, or made inside `uncounted`.
        let (mut model, offsets): (Vec<u8>, Vec<u64>) = match self.pattern {
            Pattern::Append => (
                Vec::with_capacity(opts.append_bytes as usize),
                (0..opts.append_bytes / w).map(|i| i * w).collect(),
            ),
            Pattern::Random => {
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(opts.seed ^ w);
                let slots = opts.random_file / w;
                let offsets = (0..opts.random_bytes / w)
                    .map(|_| ((u128::from(rng.next_u64()) * u128::from(slots)) >> 64) as u64 * w)
                    .collect();
                (chunk(0, opts.random_file as usize, 0), offsets)
            }
        };
        let mut data = vec![0u8; self.write_bytes];
        let mut latency = Histogram::default();
        let heap = HeapMeter::start();
        let mut fs = Fs::format(dev, config).context(|| "format".into())?;
        let ino = fs
            .create(ROOT_INO, b"file", 0o644, 0, 0)
            .context(|| "create".into())?
            .ino;
        if self.pattern == Pattern::Random {
            fs.write(ino, 0, &model)
                .context(|| "the random file's first writing".into())?;
        }
        fs.sync().context(|| "sync".into())?;
        let t0 = now(&fs);
        let (s0, f0, l0) = (
            uncounted(|| stats(&fs)),
            fs.stats(),
            *fs.ftl().log().stats(),
        );
        let (mut syncs, mut since_sync) = (0u64, 0u64);
        for (i, &off) in offsets.iter().enumerate() {
            fill_chunk(&mut data, off, i as u64 + 1);
            let t = now(&fs);
            fs.write(ino, off, &data)
                .context(|| format!("write at {off}"))?;
            since_sync += w;
            let due = match self.sync {
                SyncEvery::End => false,
                SyncEvery::FourK => since_sync >= SYNC_EVERY_BYTES,
                SyncEvery::Each => true,
            };
            if due {
                fs.fsync(ino, false).context(|| "fsync".into())?;
                syncs += 1;
                since_sync = 0;
            }
            let took = now(&fs).saturating_sub(t);
            uncounted(|| {
                latency.record(took);
                let end = (off + w) as usize;
                if model.len() < end {
                    model.resize(end, 0);
                }
                model[off as usize..end].copy_from_slice(&data);
            });
        }
        if since_sync > 0 {
            fs.fsync(ino, false).context(|| "fsync".into())?;
            syncs += 1;
        }
        let elapsed = now(&fs).saturating_sub(t0);
        let heap_bytes = heap.peak();
        drop(heap);
        let work = stats(&fs).since(&s0);
        let (f1, l1) = (fs.stats(), *fs.ftl().log().stats());
        let buffer_bytes = fs.write_back_stats().high_water as u64;
        let block_bytes = fs.block_size();
        // What a mount after the last sync finds: all of it.
        let dev = fs.into_device();
        let mut fs = Fs::mount(dev, config).context(|| "mount".into())?;
        let mut back = vec![0; model.len() + 1];
        let n = fs.read(ino, 0, &mut back).context(|| "read".into())?;
        if back[..n] != model[..] {
            return Err(BenchError::Mismatch(format!(
                "{}: the file after the last sync",
                self.label()
            )));
        }
        let user_bytes = offsets.len() as u64 * w;
        Ok(SmallWritesRow {
            device: self.device.to_string(),
            pattern: self.pattern,
            write_bytes: self.write_bytes,
            sync: self.sync,
            write_buffer_bytes: self.buffers,
            config: if opts.small_ram {
                "small-ram"
            } else {
                "default"
            },
            block_bytes,
            writes: offsets.len() as u64,
            syncs,
            user_bytes,
            bytes_programmed: work.bytes_programmed,
            prog_per_user_byte: work.bytes_programmed as f64 / user_bytes as f64,
            programs: work.programs,
            programs_per_sync: work.programs as f64 / syncs.max(1) as f64,
            erases: work.erases,
            device_s: elapsed.as_secs_f64(),
            p99_write_us: us(latency.percentile(99.0)),
            max_write_us: us(latency.max()),
            heap_bytes,
            buffer_bytes,
            commits: f1.commits - f0.commits,
            journal_entries: f1.journal_entries - f0.journal_entries,
            index_nodes: f1.node_writes - f0.node_writes,
            superblocks: f1.superblock_writes - f0.superblock_writes,
            log_slots: l1.user_slots - l0.user_slots,
            checkpoint_slots: l1.checkpoint_slots - l0.checkpoint_slots,
        })
    }
}

fn now<D: SimSegments>(fs: &Fs<D>) -> Duration {
    fs.ftl().log().device().sim().now()
}

fn stats<D: SimSegments>(fs: &Fs<D>) -> Stats {
    fs.ftl().log().device().sim().stats().clone()
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// `len` bytes written at `off` by write number `version` (0: the first writing).
fn chunk(off: u64, len: usize, version: u64) -> Vec<u8> {
    let mut v = vec![0; len];
    fill_chunk(&mut v, off, version);
    v
}

/// Fills `buf` with the bytes write number `version` puts at `off`: every write's bytes
/// differ from the ones before.
fn fill_chunk(buf: &mut [u8], off: u64, version: u64) {
    for (i, b) in buf.iter_mut().enumerate() {
        let x = (off + i as u64)
            .wrapping_mul(0x9E37_79B9)
            .wrapping_add(version.wrapping_mul(0x85EB_CA6B));
        *b = (x >> 7) as u8;
    }
}

/// The rows as a table.
pub fn table(rows: &[SmallWritesRow]) -> String {
    let mut out = String::from(
        "DEVICE     PATTERN  WRITE B  SYNC  WB KiB  BLOCK B  PROG/USER B  PROGS/SYNC  \
         DEVICE s  P99 WRITE us  HEAP KiB  BUFFERS KiB\n",
    );
    for r in rows {
        out.push_str(&format!(
            "{:<10} {:<8} {:>7}  {:<4}  {:>6}  {:>7}  {:>11.2}  {:>10.1}  {:>8.3}  {:>12.0}  {:>8.1}  {:>11.1}\n",
            r.device,
            r.pattern.name(),
            r.write_bytes,
            r.sync.name(),
            r.write_buffer_bytes / 1024,
            r.block_bytes,
            r.prog_per_user_byte,
            r.programs_per_sync,
            r.device_s,
            r.p99_write_us,
            r.heap_bytes as f64 / 1024.0,
            r.buffer_bytes as f64 / 1024.0,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(
        rows: &[SmallWritesRow],
        pattern: Pattern,
        w: usize,
        sync: SyncEvery,
        buffers: usize,
        device: &str,
    ) -> SmallWritesRow {
        rows.iter()
            .find(|r| {
                r.device == device
                    && r.pattern == pattern
                    && r.write_bytes == w
                    && r.sync == sync
                    && r.write_buffer_bytes == buffers
            })
            .cloned()
            .unwrap_or_else(|| panic!("no row {device} {pattern:?} {w} {sync:?} {buffers}"))
    }

    #[test]
    fn the_quick_run_gives_sane_rows_and_buffering_saves_programs() {
        let opts = SmallWritesOptions::quick();
        let rows = run_small_writes(&opts, &mut |_, _, _| {}).unwrap();
        assert_eq!(rows.len(), 2 * 2 * 2 * 3 * 2);
        for r in &rows {
            assert!(r.user_bytes > 0 && r.writes > 0 && r.syncs >= 1, "{r:?}");
            assert!(r.prog_per_user_byte > 0.0 && r.device_s > 0.0, "{r:?}");
            assert!(r.programs_per_sync > 0.0, "{r:?}");
            if r.sync == SyncEvery::Each {
                assert_eq!(r.syncs, r.writes, "{r:?}");
            }
            if r.write_buffer_bytes == 0 {
                assert_eq!(r.buffer_bytes, 0, "{r:?}");
            }
        }
        for device in ["w25q64jv", "w25n01gv"] {
            let on = find(
                &rows,
                Pattern::Append,
                64,
                SyncEvery::End,
                FsConfig::default().write_buffer_bytes,
                device,
            );
            let off = find(&rows, Pattern::Append, 64, SyncEvery::End, 0, device);
            // Without the buffers every 64-byte append programs its block again: on NAND a
            // whole page, on NOR the block up to the file's end (half of it on average: the
            // bytes past the end are left erased).
            let block = f64::from(on.block_bytes);
            let again = if device == "w25q64jv" {
                block / 2.0
            } else {
                block
            };
            assert!(off.prog_per_user_byte >= again / 64.0 * 0.9, "{off:?}");
            // 16 KiB in the quick run: the checkpoint's index node and superblock, and the
            // trim of the journal block the file's create took (record and copy), are a
            // large part of it (a few per mille of the full run's 1 MiB).
            assert!(
                on.prog_per_user_byte < 1.6 && on.prog_per_user_byte * 3.0 < off.prog_per_user_byte,
                "with buffers {on:?}, without {off:?}"
            );
            assert!(on.buffer_bytes > 0);
        }
    }
}
