//! A power cut's cost over the checkpoint cycle.
//!
//! After a power cut the mount rolls forward through the segments opened since the last
//! checkpoint (SPEC.md §3.5): right after a checkpoint that is nothing, just before the next
//! one it is half the checkpoint's set, a page read per tag. One cut per fill level measures
//! wherever in that cycle the fill happened to end; here the volume is walked through one
//! whole cycle instead, its own data rewritten with the same bytes (so it holds the same
//! files, or sectors, and the same amount), synced after every unit, and cut at points
//! spread evenly over the cycle: each cut a copy of the device as the sync left it, mounted
//! without the close checkpoint.
//!
//! The walk finds the cycle on the log's checkpoint counter ([`flashfs::LogStats`]): it
//! rewrites until a checkpoint is written (a cycle's start) and counts the units to the
//! next (the cycle's length, by the same procedure, syncs and all), then from that
//! checkpoint cuts at even steps of that length and at every unit around where the next
//! checkpoint is expected, until it comes. Cycles are not all as long (the heads' segments
//! fill at their own pace; on a nearly full part the cleaner, once it has to run, leaves
//! the next checkpoint's set fewer free segments and the cycles shorten): if the checkpoint
//! comes further from where it was expected than the cuts around it reach, the walk cuts
//! the next cycle too, expecting the length just seen, until one is cut near its end, and
//! the row counts the cuts of every cycle cut.

use flashfs::fs::ROOT_INO;
use flashfs::{BlockDevice, Fs, Ftl};

use super::device::Dev;
use super::fill::{file_name, FileDone, Pattern, CHUNK};
use super::probe::Measured;
use crate::error::{BenchError, Context, Result};

/// Slots' worth of data rewritten per unit of the walk (then a sync): a sixty-fourth of the
/// 1,024 slots a checkpoint cycle takes with the default set (`LogConfig::checkpoint_set`).
const UNIT_SLOTS: u64 = 16;

/// Units the walk writes at most while it waits for a checkpoint: 16 cycles of the default
/// set.
const MAX_UNITS: u32 = 1024;

/// Units either side of where the next checkpoint is expected that are all cut: at least
/// this many, and a sixteenth of the cycle ([`TAIL_SHARE`]). A cycle whose last cut falls
/// further from its end is followed by another (at most [`MAX_CYCLES`]), expecting the
/// length it took.
const TAIL_UNITS: u32 = 3;

/// The share of the expected cycle, as a divisor, cut at every unit either side of its
/// expected end.
const TAIL_SHARE: u32 = 16;

/// Cycles the walk cuts at most, looking for one whose end it meets.
const MAX_CYCLES: u32 = 4;

/// A volume the walk rewrites.
pub trait Churn {
    /// Rewrites the next `bytes` of the data the volume holds with the same bytes, then
    /// syncs.
    fn rewrite(&mut self, bytes: u64) -> Result<()>;
    /// Checkpoints the log has written this session.
    fn checkpoints(&self) -> u64 {
        self.stats().checkpoints
    }
    /// What the log has done this session.
    fn stats(&self) -> flashfs::LogStats;
    /// Whether the volume keeps checkpoints at all.
    fn keeps_checkpoints(&self) -> bool;
    /// Data bytes per slot of the log.
    fn slot_size(&self) -> u32;
    /// The device as the last sync left it.
    fn device(&self) -> &Dev;
}

/// The native file system's files rewritten in order, from the first, wrapping.
pub struct FsChurn<'a> {
    fs: &'a mut Fs<Dev>,
    pat: &'a Pattern,
    files: &'a [FileDone],
    /// The file being rewritten, its inode, and where in it.
    file: usize,
    ino: Option<u64>,
    off: u64,
}

impl<'a> FsChurn<'a> {
    /// From the first of `files` (written with `pat`).
    pub fn new(fs: &'a mut Fs<Dev>, pat: &'a Pattern, files: &'a [FileDone]) -> Self {
        FsChurn {
            fs,
            pat,
            files,
            file: 0,
            ino: None,
            off: 0,
        }
    }
}

impl Churn for FsChurn<'_> {
    fn rewrite(&mut self, mut bytes: u64) -> Result<()> {
        if self.files.is_empty() {
            return Err(BenchError::Mismatch("no file to rewrite".into()));
        }
        while bytes > 0 {
            let f = self.files[self.file];
            if self.off >= f.size {
                self.file = (self.file + 1) % self.files.len();
                self.ino = None;
                self.off = 0;
                continue;
            }
            let ino = match self.ino {
                Some(ino) => ino,
                None => {
                    let ino = self
                        .fs
                        .lookup(ROOT_INO, &file_name(f.n))
                        .context(|| format!("looking up file {} to rewrite it", f.n))?
                        .ino;
                    self.ino = Some(ino);
                    ino
                }
            };
            let len = bytes.min(f.size - self.off).min(CHUNK as u64) as usize;
            self.fs
                .write(ino, self.off, self.pat.file(f.n, self.off, len))
                .context(|| format!("rewriting file {} at {}", f.n, self.off))?;
            self.off += len as u64;
            bytes -= len as u64;
        }
        self.fs.sync().context(|| "sync".into())
    }

    fn stats(&self) -> flashfs::LogStats {
        *self.fs.ftl().log().stats()
    }

    fn keeps_checkpoints(&self) -> bool {
        self.fs.ftl().log().keeps_checkpoints()
    }

    fn slot_size(&self) -> u32 {
        self.fs.ftl().log().geometry().slot_size
    }

    fn device(&self) -> &Dev {
        self.fs.ftl().log().device()
    }
}

/// The block device's sectors rewritten in order, from sector 0, wrapping.
pub struct FtlChurn<'a> {
    ftl: &'a mut Ftl<Dev>,
    pat: &'a Pattern,
    sectors: u64,
    next: u64,
}

impl<'a> FtlChurn<'a> {
    /// Of the `sectors` written in order (with `pat`) from sector 0.
    pub fn new(ftl: &'a mut Ftl<Dev>, pat: &'a Pattern, sectors: u64) -> Self {
        FtlChurn {
            ftl,
            pat,
            sectors,
            next: 0,
        }
    }
}

impl Churn for FtlChurn<'_> {
    fn rewrite(&mut self, bytes: u64) -> Result<()> {
        if self.sectors == 0 {
            return Err(BenchError::Mismatch("no sector to rewrite".into()));
        }
        let ss = self.ftl.sector_size();
        let mut left = bytes.div_ceil(ss as u64);
        let batch = (CHUNK / ss).max(1) as u64;
        while left > 0 {
            if self.next >= self.sectors {
                self.next = 0;
            }
            let n = left.min(batch).min(self.sectors - self.next);
            self.ftl
                .write(self.next, self.pat.sectors(self.next, ss, n as usize * ss))
                .context(|| format!("rewriting sector {}", self.next))?;
            self.next += n;
            left -= n;
        }
        self.ftl.flush().context(|| "flush".into())
    }

    fn stats(&self) -> flashfs::LogStats {
        *self.ftl.log().stats()
    }

    fn keeps_checkpoints(&self) -> bool {
        self.ftl.log().keeps_checkpoints()
    }

    fn slot_size(&self) -> u32 {
        self.ftl.log().geometry().slot_size
    }

    fn device(&self) -> &Dev {
        self.ftl.log().device()
    }
}

/// One cut of the walk.
#[derive(Debug, Clone, Copy)]
pub struct CutPoint {
    /// Where in its cycle: the share of the cycle's units rewritten since its checkpoint.
    pub share: f64,
    /// The mount after the cut.
    pub measured: Measured,
}

/// The cuts of one walk.
#[derive(Debug, Clone)]
pub struct Cycle {
    /// The cuts, in the cycle's order.
    pub points: Vec<CutPoint>,
    /// Bytes rewritten per unit.
    pub unit_bytes: u64,
    /// Units the last cycle cut took (0: the volume keeps no checkpoint, or one point was
    /// asked).
    pub units: u32,
    /// Cycles cut (0 as for `units`): more than one when a cycle ended further from where
    /// it was expected to than its cuts reached.
    pub cycles: u32,
}

impl Cycle {
    /// The point whose mount took longest.
    pub fn worst(&self) -> &CutPoint {
        self.points
            .iter()
            .reduce(|a, b| {
                if b.measured.mount > a.measured.mount {
                    b
                } else {
                    a
                }
            })
            .expect("a walk measures at least one point")
    }

    /// Mean of `f` over the points.
    pub fn mean(&self, f: impl Fn(&Measured) -> f64) -> f64 {
        self.points.iter().map(|p| f(&p.measured)).sum::<f64>() / self.points.len() as f64
    }

    /// Largest of `f` over the points.
    pub fn max(&self, f: impl Fn(&Measured) -> f64) -> f64 {
        self.points
            .iter()
            .map(|p| f(&p.measured))
            .fold(f64::MIN, f64::max)
    }
}

/// Walks `vol` through a checkpoint cycle and cuts it at points spread over it, measuring
/// each with `measure` (given the device and the cut's index): about `points` evenly spaced
/// from the cycle's checkpoint on, and every unit around where the next checkpoint is
/// expected, where the roll-forward is longest; through up to `MAX_CYCLES` (4) cycles if one
/// ends out of the cuts' reach. With one point, or on a volume that keeps no checkpoint,
/// measures where it stands, once.
pub fn walk(
    vol: &mut dyn Churn,
    points: u32,
    measure: &mut dyn FnMut(&Dev, usize) -> Result<Measured>,
) -> Result<Cycle> {
    let unit_bytes = (u64::from(vol.slot_size()) * UNIT_SLOTS).next_multiple_of(4096);
    if points <= 1 || !vol.keeps_checkpoints() {
        let measured = measure(vol.device(), 0)?;
        return Ok(Cycle {
            points: vec![CutPoint {
                share: 0.0,
                measured,
            }],
            unit_bytes,
            units: 0,
            cycles: 0,
        });
    }
    let to_checkpoint = |vol: &mut dyn Churn| -> Result<u32> {
        let c0 = vol.checkpoints();
        let mut n = 0;
        while vol.checkpoints() == c0 {
            if n == MAX_UNITS {
                return Err(no_checkpoint(n, unit_bytes));
            }
            vol.rewrite(unit_bytes)?;
            n += 1;
        }
        Ok(n)
    };
    // To the start of a cycle, then through one to learn its length.
    to_checkpoint(vol)?;
    let mut expected = to_checkpoint(vol)?;
    // Cycles cut at even steps and around their expected end, until one is cut within a
    // few units of its end; the cuts of every cycle cut count.
    let mut calls = 0;
    let mut points_at = Vec::new();
    let mut cycles = 0;
    loop {
        let tail = (expected / TAIL_SHARE).max(TAIL_UNITS);
        let (at, units) = cut_cycle(vol, points, expected, tail, unit_bytes, &mut |dev| {
            calls += 1;
            measure(dev, calls - 1)
        })?;
        cycles += 1;
        let last = at.last().map_or(0, |p| p.0);
        points_at.extend(at.into_iter().map(|(u, measured)| CutPoint {
            share: f64::from(u) / f64::from(units),
            measured,
        }));
        if units - last <= tail || cycles == MAX_CYCLES {
            return Ok(Cycle {
                points: points_at,
                unit_bytes,
                units,
                cycles,
            });
        }
        expected = units;
    }
}

/// Rewrites `vol` from a checkpoint to the next, cutting it at even steps of about
/// `expected / points` units and at every unit within `tail` of `expected`; returns the
/// cuts (units rewritten before each) and the units the cycle took.
fn cut_cycle(
    vol: &mut dyn Churn,
    points: u32,
    expected: u32,
    tail: u32,
    unit_bytes: u64,
    measure: &mut dyn FnMut(&Dev) -> Result<Measured>,
) -> Result<(Vec<(u32, Measured)>, u32)> {
    // Even steps, thinned out if the cycle runs on past twice the points.
    let mut step = (expected / points).max(1);
    let mut stepped = 0;
    let tail = expected.saturating_sub(tail)..expected + tail;
    let start = vol.checkpoints();
    let mut done = 0;
    let mut at = Vec::new();
    loop {
        let on_step = done % step == 0;
        if on_step || tail.contains(&done) {
            at.push((done, measure(vol.device())?));
        }
        if on_step {
            stepped += 1;
            if stepped == 2 * points {
                step *= 2;
                stepped = points;
            }
        }
        if done == MAX_UNITS {
            return Err(no_checkpoint(done, unit_bytes));
        }
        vol.rewrite(unit_bytes)?;
        done += 1;
        if vol.checkpoints() != start {
            return Ok((at, done));
        }
    }
}

fn no_checkpoint(units: u32, unit_bytes: u64) -> BenchError {
    BenchError::Mismatch(format!(
        "no checkpoint after {} KiB rewritten",
        u64::from(units) * unit_bytes / 1024
    ))
}
