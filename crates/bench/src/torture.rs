//! Power-loss torture: run a workload on a target that lives on simulated flash, cut the power
//! at a device operation (cleanly, or tearing that operation), reboot, remount and check that
//! what the target shows is a state that existed (rule 3 of the design): every sector holds
//! the value it had at the last acknowledged flush, or a value written to it since — never
//! torn data, never something older, never a mount error.
//!
//! The pieces:
//!
//! - [`Op`], [`Workload`] and [`workload`]: reproducible block-device workloads, with idle
//!   time among their operations ([`idle_steps`]) for the log's background work.
//! - [`Model`]: what each sector may hold after a cut ([`Oracle`] in general).
//! - [`Target`]: a system under test. [`FtlTarget`] is the block device ([`flashfs::Ftl`]) on
//!   a simulated NOR or NAND part; a file-system target plugs in the same way, with its own
//!   operations and model.
//! - [`Fault`]: what a case injects besides its power cut — a second cut during the recovery
//!   mount, bit errors within and beyond the ECC, silent program and erase failures, blocks
//!   wearing out mid-run, factory bad blocks.
//! - [`run_case`]: one case — a workload, a first cut, a chained second cut during the
//!   continued run, a little more writing and a final remount — checked after each remount.
//! - [`run`]: cases over presets, fault kinds and workloads, exhaustively over every cut
//!   point or at random ones, summed up as [`Report`]s, with every [`Violation`] and the
//!   command line that replays it.
//!
//! Under faults that damage the medium ([`Fault::damages_media`]) a typed error is not a
//! violation but media damage, counted: a sector read failing with EIO, an operation or a
//! mount failing with a typed error, a sector whose newest copy the damage destroyed coming
//! back with an older value. Bytes no write put there are always a violation.
//!
//! ```
//! use flashfs_bench::torture::{run, TortureOptions, Workload};
//! let opts = TortureOptions {
//!     presets: vec!["nand-128m".into()],
//!     workloads: vec![Workload::Database],
//!     cuts: 4,
//!     ..TortureOptions::default()
//! };
//! let outcome = run(&opts, &mut |_, _, _| {})?;
//! assert!(outcome.violations.is_empty());
//! # Ok::<(), flashfs_bench::BenchError>(())
//! ```

use std::collections::HashSet;
use std::fmt;
use std::rc::Rc;
use std::time::Duration;

use flash::{
    AgeReport, DeviceSpec, FaultConfig, FlashError, ImageMeta, NandFlash, NandSim, NandSpec,
    NorSim, NorSpec, NvramNor, NvramSim, NvramSpec, Timebomb,
};
use flashfs::media::tag::{Kind, TagState};
use flashfs::media::tiered::{NvramBesideNor, NvramNand, Tiered};
use flashfs::media::HeaderState;
use flashfs::{BlockDevice, Error, Ftl, FtlConfig, NandSegments, NorSegments, Segments};
use serde::Serialize;

use crate::error::{BenchError, Context, Result};

mod fault;
mod fs;
pub(crate) mod sim;

pub use fault::{Cuts, Fault, Interruptible};
pub use fs::{
    format_fs, fs_config, fs_ops, fs_torture_device, FsModel, FsSeen, FsTarget, FS_MIN_FREE_BLOCKS,
};
pub use sim::{SimSegments, Supply};

use crate::fswork::{FsOp, FsWorkload};

/// One block-device operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Write `count` sectors from `sector`, each with the content of version `version`.
    Write {
        /// First sector.
        sector: u64,
        /// Sectors written.
        count: u64,
        /// Content version (unique per write of a workload; see [`pattern`]).
        version: u32,
    },
    /// Trim `count` sectors from `sector`.
    Trim {
        /// First sector.
        sector: u64,
        /// Sectors trimmed.
        count: u64,
    },
    /// Flush: once acknowledged, everything before it must survive any cut.
    Flush,
    /// A checkpoint ([`BlockDevice::checkpoint`]): a flush that also lets the next mount
    /// skip its scan, if nothing is written after it.
    Checkpoint,
    /// Leave the device idle for `ms` milliseconds of device time ([`Ftl::idle`]): the log
    /// cleans ahead of need and, on MLC NAND, migrates. No sector changes.
    Idle {
        /// Milliseconds of device time.
        ms: u32,
    },
}

impl Op {
    /// Whether everything before the operation is durable once it is acknowledged.
    pub fn is_barrier(self) -> bool {
        matches!(self, Op::Flush | Op::Checkpoint)
    }
}

/// Deterministic sector content: sector number and version, spread over the whole sector, so
/// content written to one sector never matches another sector or version.
pub fn pattern(sector: u64, version: u32, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    let seed = (sector as u32).wrapping_mul(0x9E37_79B9) ^ version.wrapping_mul(0x85EB_CA6B);
    let mut x = seed | 1;
    for _ in 0..len {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        v.push(x as u8);
    }
    v
}

/// A small seeded generator (xorshift64), the same on every machine.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    /// A value below `n` (0 when `n` is 0).
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// Idle steps among a workload's `ops` ([`TortureOptions::idle`]): after about one barrier
/// in six (`is_barrier`: a flush, a sync — the idle time after one is what a device mostly
/// sees) and one other operation in 100, the device idles (`idle`) for 0.1 to 0.5 s of
/// device time or, one step in three, for 1.1 to 3 s, longer than
/// [`MIGRATION_WAIT`](flashfs::log::region::MIGRATION_WAIT), so that an MLC part migrates.
/// The steps are drawn from `seed` on a stream of their own, so the other operations stay
/// those of the workload; the first `n` operations are kept.
pub fn idle_steps<T>(
    ops: Vec<T>,
    seed: u64,
    n: usize,
    is_barrier: impl Fn(&T) -> bool,
    idle: impl Fn(u32) -> T,
) -> Vec<T> {
    let mut rng = Rng::new(mix(seed, 0x1D1E));
    let mut out = Vec::with_capacity(ops.len() + ops.len() / 8);
    for op in ops {
        let one_in = if is_barrier(&op) { 6 } else { 100 };
        out.push(op);
        if rng.below(one_in) == 0 {
            let tenths = if rng.below(3) != 0 {
                1 + rng.below(5)
            } else {
                11 + rng.below(20)
            };
            out.push(idle(100 * tenths as u32));
        }
    }
    out.truncate(n);
    out
}

/// Mixes numbers into one seed (splitmix64 finalizer).
fn mix(a: u64, b: u64) -> u64 {
    let mut z = a ^ b
        .wrapping_add(0x9E37_79B9_7F4A_7C15)
        .wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The reproducible mixed workload over `sectors` sectors: 80% writes of 1–4 sectors, 8%
/// trims, 11% flushes and 1% checkpoints, at uniformly random places.
pub fn workload(seed: u64, sectors: u64, ops: usize) -> Vec<Op> {
    let mut rng = Rng::new(seed);
    let mut v = Vec::with_capacity(ops);
    for i in 0..ops {
        let r = rng.below(100);
        let sector = rng.below(sectors);
        let count = 1 + rng.below(4.min(sectors - sector));
        v.push(match r {
            0..=79 => Op::Write {
                sector,
                count,
                version: i as u32 + 1,
            },
            80..=87 => Op::Trim { sector, count },
            99 => Op::Checkpoint,
            _ => Op::Flush,
        });
    }
    v
}

/// A block-device workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// Writes, trims and flushes at random places ([`workload`]).
    Mixed,
    /// Sequential appends of 1–4 sectors, wrapping at the end, flushed every 4–11 appends;
    /// the region just ahead of the head is trimmed when the log wraps.
    AppendLog,
    /// Transactions of 1–4 single-sector in-place overwrites at random places, each followed
    /// by a flush.
    Database,
    /// Kawaguchi's random 4 KB overwrites (4 KB-aligned), a flush after about one in 16.
    KawaguchiRandom,
}

impl Workload {
    /// Every workload.
    pub const ALL: [Workload; 4] = [
        Workload::Mixed,
        Workload::AppendLog,
        Workload::Database,
        Workload::KawaguchiRandom,
    ];

    /// Name in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Mixed => "mixed",
            Workload::AppendLog => "append-log",
            Workload::Database => "database",
            Workload::KawaguchiRandom => "kawaguchi-random",
        }
    }

    /// Parses a name.
    pub fn from_name(s: &str) -> Option<Workload> {
        Workload::ALL.into_iter().find(|w| w.name() == s)
    }

    /// `ops` operations over `sectors` sectors of `sector_size` bytes, from `seed`. Every
    /// write has its own version, so what a sector holds says which write put it there.
    pub fn ops(self, seed: u64, sectors: u64, sector_size: usize, ops: usize) -> Vec<Op> {
        let sectors = sectors.max(1);
        let mut rng = Rng::new(seed);
        let mut v = Vec::with_capacity(ops);
        let mut version = 0u32;
        let mut next_version = || {
            version += 1;
            version
        };
        match self {
            Workload::Mixed => return workload(seed, sectors, ops),
            Workload::AppendLog => {
                let mut head = 0u64;
                let mut until_flush = 4 + rng.below(8);
                while v.len() < ops {
                    let count = (1 + rng.below(4)).min(sectors - head);
                    v.push(Op::Write {
                        sector: head,
                        count,
                        version: next_version(),
                    });
                    head += count;
                    if head == sectors {
                        head = 0;
                        let n = 4.min(sectors);
                        v.push(Op::Trim {
                            sector: 0,
                            count: n,
                        });
                    }
                    until_flush -= 1;
                    if until_flush == 0 {
                        v.push(Op::Flush);
                        until_flush = 4 + rng.below(8);
                    }
                }
            }
            Workload::Database => {
                while v.len() < ops {
                    for _ in 0..1 + rng.below(4) {
                        v.push(Op::Write {
                            sector: rng.below(sectors),
                            count: 1,
                            version: next_version(),
                        });
                    }
                    v.push(Op::Flush);
                }
            }
            Workload::KawaguchiRandom => {
                let chunk = (4096 / sector_size.max(1) as u64).clamp(1, sectors);
                let chunks = sectors / chunk;
                while v.len() < ops {
                    v.push(Op::Write {
                        sector: rng.below(chunks) * chunk,
                        count: chunk,
                        version: next_version(),
                    });
                    if rng.below(16) == 0 {
                        v.push(Op::Flush);
                    }
                }
            }
        }
        v.truncate(ops);
        v
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Every version ever written to each sector by `ops`.
pub fn versions(ops: &[Op], sectors: u64) -> Vec<Vec<u32>> {
    let mut v = vec![Vec::new(); sectors as usize];
    for op in ops {
        if let Op::Write {
            sector,
            count,
            version,
        } = *op
        {
            for k in sector..sector + count {
                v[k as usize].push(version);
            }
        }
    }
    v
}

/// Content a sector holds: `None` for zeros (never written, or trimmed), else the version
/// ([`UNREADABLE`] when the read failed with EIO).
pub type Content = Option<u32>;

/// What a sector whose read failed with a typed I/O error (EIO) is observed as.
pub const UNREADABLE: Content = Some(u32::MAX);

/// Media damage an observation shows and the model tolerates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tolerated {
    /// Units (sectors) whose read failed with a typed error.
    pub unreadable: u64,
    /// Units whose newest copy the damage destroyed and that show an older value.
    pub rolled_back: u64,
}

/// What a target may show after a power cut, given what was issued and acknowledged.
pub trait Oracle {
    /// Operations of the workload.
    type Op;
    /// What is read back from the target.
    type Observation;
    /// Records that `op` was issued (before knowing whether it completes).
    fn issue(&mut self, op: &Self::Op);
    /// Records that `op` completed and was acknowledged.
    fn acknowledge(&mut self, op: &Self::Op);
    /// Checks an observation made after a cut or a remount.
    fn check(&self, seen: &Self::Observation) -> std::result::Result<(), String>;
    /// Pins the model to what was observed: the target's state is now that.
    fn settle(&mut self, seen: &Self::Observation);
    /// Records that media damage destroyed stored copies of these units (sectors, for the
    /// block device): they may fail to read or come back older until written again.
    fn damaged(&mut self, units: &[u64]) {
        let _ = units;
    }
    /// The media damage an observation shows (that [`check`](Oracle::check) accepted).
    fn tolerated(&self, seen: &Self::Observation) -> Tolerated {
        let _ = seen;
        Tolerated::default()
    }
}

/// What each sector of a block device may hold: the value at the last acknowledged flush, or
/// any value written to it since.
#[derive(Debug, Clone)]
pub struct Model {
    /// Value at the last acknowledged flush.
    flushed: Vec<Content>,
    /// Values written since (including the one in flight).
    since: Vec<Vec<Content>>,
    /// Every version ever issued to each sector (to recognise what is read back).
    history: Vec<Vec<u32>>,
    /// The value if nothing is lost.
    pub current: Vec<Content>,
    /// Sectors whose newest copy media damage may have destroyed since they were last
    /// written and flushed: any value once written to them, zeros, or EIO.
    lenient: Vec<bool>,
    /// Sectors written or trimmed since damage made them lenient.
    rewritten: Vec<bool>,
    /// What a sector read as EIO at a mount may show again at a later one: what it could
    /// show before. EIO says only that the content was not found — a checkpoint's map page
    /// that does not read fails every sector it maps, until a scan rebuilds the map from the
    /// slots — not that it was destroyed. Cleared once the sector shows a content again, or
    /// a write to it is flushed.
    unknown: Vec<Vec<Content>>,
    /// Whether a read failing with EIO is media damage rather than a violation.
    unreadable_ok: bool,
}

impl Model {
    /// A device of `sectors` zeroed sectors.
    pub fn new(sectors: u64) -> Self {
        let n = sectors as usize;
        Model {
            flushed: vec![None; n],
            since: vec![Vec::new(); n],
            history: vec![Vec::new(); n],
            current: vec![None; n],
            lenient: vec![false; n],
            rewritten: vec![false; n],
            unknown: vec![Vec::new(); n],
            unreadable_ok: false,
        }
    }

    /// Accepts reads failing with EIO as media damage (for faults that damage the medium).
    pub fn tolerate_unreadable(&mut self) {
        self.unreadable_ok = true;
    }

    /// Records that media damage destroyed a stored copy of each of `sectors`.
    pub fn damaged(&mut self, sectors: &[u64]) {
        for &k in sectors {
            if let Some(l) = self.lenient.get_mut(k as usize) {
                *l = true;
                self.rewritten[k as usize] = false;
            }
        }
    }

    /// Counts the sectors of `read` that show media damage: EIO, or an older value of a
    /// damaged sector.
    pub fn tolerated(&self, read: &[Content]) -> Tolerated {
        let mut t = Tolerated::default();
        for (k, got) in read.iter().enumerate() {
            if *got == UNREADABLE {
                t.unreadable += 1;
            } else if self.lenient.get(k) == Some(&true) && !self.strictly_ok(k, got) {
                t.rolled_back += 1;
            }
        }
        t
    }

    fn strictly_ok(&self, k: usize, got: &Content) -> bool {
        *got == self.flushed[k] || self.since[k].contains(got) || self.unknown[k].contains(got)
    }

    /// Records that `op` was issued (before knowing whether it completed).
    pub fn issue(&mut self, op: Op) {
        match op {
            Op::Write {
                sector,
                count,
                version,
            } => {
                for k in sector..sector + count {
                    self.rewritten[k as usize] = true;
                    self.since[k as usize].push(Some(version));
                    self.history[k as usize].push(version);
                    self.current[k as usize] = Some(version);
                }
            }
            Op::Trim { sector, count } => {
                for k in sector..sector + count {
                    self.rewritten[k as usize] = true;
                    self.since[k as usize].push(None);
                    self.current[k as usize] = None;
                }
            }
            Op::Flush | Op::Checkpoint | Op::Idle { .. } => {}
        }
    }

    /// Records that a flush was acknowledged.
    pub fn flushed(&mut self) {
        self.flushed.clone_from(&self.current);
        // What a sector read as EIO held is superseded by a write now durable.
        for (unknown, since) in self.unknown.iter_mut().zip(&self.since) {
            if !since.is_empty() {
                unknown.clear();
            }
        }
        self.since.iter_mut().for_each(Vec::clear);
        // A write issued after the damage and now durable supersedes the destroyed copy.
        for (lenient, rewritten) in self.lenient.iter_mut().zip(&self.rewritten) {
            if *rewritten {
                *lenient = false;
            }
        }
    }

    /// Every version issued to each sector so far.
    pub fn history(&self) -> &[Vec<u32>] {
        &self.history
    }

    /// Checks what was read back from every sector after a cut.
    pub fn check_after_cut(&self, read: &[Content]) -> std::result::Result<(), String> {
        if read.len() != self.flushed.len() {
            return Err(format!(
                "read {} sectors, the device has {}",
                read.len(),
                self.flushed.len()
            ));
        }
        for (k, got) in read.iter().enumerate() {
            if *got == UNREADABLE {
                if self.unreadable_ok || self.lenient[k] {
                    continue;
                }
                return Err(format!(
                    "sector {k}: read failed with EIO, and no media damage explains it"
                ));
            }
            // A damaged sector may show any value once written to it: the content itself was
            // recognised when it was read, so it is not torn or misplaced.
            if !self.lenient[k] && !self.strictly_ok(k, got) {
                return Err(format!(
                    "sector {k}: read {got:?}, flushed {:?}, written since {:?}",
                    self.flushed[k], self.since[k]
                ));
            }
        }
        Ok(())
    }

    /// Pins the model to what was found after a cut (the device's state is now that).
    /// Damaged sectors stay lenient until written again: what a mount showed of one does not
    /// say what the next will, since a copy the damage destroyed may matter to one way of
    /// mounting and not the other (a trim record a checkpoint names, lost to a later scan
    /// mount, lets an older version back).
    ///
    /// A sector read as EIO keeps what it could show before as well (see `unknown`): a
    /// loss it recorded keeps it EIO, but a map page lost to damage fails it only until a
    /// scan finds its slots again.
    pub fn settle(&mut self, read: &[Content]) {
        let mut before = Vec::new();
        for (k, got) in read.iter().enumerate() {
            if *got != UNREADABLE {
                self.unknown[k].clear();
                continue;
            }
            let mut could = std::mem::take(&mut self.unknown[k]);
            for c in std::iter::once(&self.flushed[k]).chain(&self.since[k]) {
                if *c != UNREADABLE && !could.contains(c) {
                    could.push(*c);
                }
            }
            before.push((k, could));
        }
        self.current = read.to_vec();
        self.flushed();
        for (k, could) in before {
            self.unknown[k] = could;
        }
    }
}

impl Oracle for Model {
    type Op = Op;
    type Observation = Vec<Content>;
    fn issue(&mut self, op: &Op) {
        Model::issue(self, *op);
    }
    fn acknowledge(&mut self, op: &Op) {
        if op.is_barrier() {
            self.flushed();
        }
    }
    fn check(&self, seen: &Vec<Content>) -> std::result::Result<(), String> {
        self.check_after_cut(seen)
    }
    fn settle(&mut self, seen: &Vec<Content>) {
        Model::settle(self, seen);
    }
    fn damaged(&mut self, units: &[u64]) {
        Model::damaged(self, units);
    }
    fn tolerated(&self, seen: &Vec<Content>) -> Tolerated {
        Model::tolerated(self, seen)
    }
}

/// Applies an operation to the block device.
pub fn apply<D: Segments>(dev: &mut Ftl<D>, op: Op) -> flashfs::Result<()> {
    let ss = dev.sector_size();
    match op {
        Op::Write {
            sector,
            count,
            version,
        } => {
            let mut data = Vec::with_capacity(ss * count as usize);
            for k in sector..sector + count {
                data.extend(pattern(k, version, ss));
            }
            dev.write(sector, &data)
        }
        Op::Trim { sector, count } => dev.trim(sector, count),
        Op::Flush => dev.flush(),
        // The block device's checkpoint, a flush with it: `Ftl::checkpoint` alone writes
        // one but syncs nothing when there is nothing to write (a volume without anchors),
        // and slots whose tag entries wait in RAM (SPI NOR) would then not be durable.
        Op::Checkpoint => BlockDevice::checkpoint(dev),
        Op::Idle { ms } => dev.idle(Duration::from_millis(u64::from(ms))).map(drop),
    }
}

/// Reads every sector and says which version it holds (`Err` if a read fails or a sector
/// holds content no write in `versions` put there).
pub fn read_all<B: BlockDevice>(
    dev: &mut B,
    versions: &[Vec<u32>],
) -> std::result::Result<Vec<Content>, String> {
    read_sectors(dev, versions, false)
}

/// [`read_all`], but with `eio_ok` a read failing with EIO is [`UNREADABLE`] rather than an
/// error.
pub fn read_sectors<B: BlockDevice>(
    dev: &mut B,
    versions: &[Vec<u32>],
    eio_ok: bool,
) -> std::result::Result<Vec<Content>, String> {
    let ss = dev.sector_size();
    let mut buf = vec![0u8; ss];
    let mut out = Vec::new();
    for k in 0..dev.sectors() {
        match dev.read(k, &mut buf) {
            Ok(()) => {}
            Err(e) if eio_ok && e.is_unreadable() => {
                out.push(UNREADABLE);
                continue;
            }
            Err(e) => return Err(format!("read of sector {k}: {e}")),
        }
        if buf.iter().all(|&b| b == 0) {
            out.push(None);
            continue;
        }
        let v = versions
            .get(k as usize)
            .into_iter()
            .flatten()
            .copied()
            .find(|&v| pattern(k, v, ss) == buf);
        match v {
            Some(v) => out.push(Some(v)),
            None => {
                return Err(format!(
                    "sector {k} holds data no write put there (torn or misplaced)"
                ))
            }
        }
    }
    Ok(out)
}

/// Why an operation on a target did not complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The power went (the cut fired).
    PowerLoss,
    /// A typed error that damage done to the medium explains (EIO, a worn-out device, no
    /// space left once blocks retired): media damage, counted, not a violation.
    Media(String),
    /// Any other error, as text.
    Error(String),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::PowerLoss => f.write_str("power loss"),
            Failure::Media(e) | Failure::Error(e) => f.write_str(e),
        }
    }
}

/// A system under test, mounted on a simulated device whose power can be cut.
///
/// Only the power-cut methods are required; the fault methods have defaults for targets that
/// inject nothing but power cuts.
pub trait Target {
    /// Operations of its workloads.
    type Op: Clone + fmt::Debug;
    /// The model of what it may show after a cut.
    type Model: Oracle<Op = Self::Op>;
    /// What reports call it ("ftl"; a file system would be "fs").
    fn kind(&self) -> &'static str;
    /// A model of the freshly formatted target (and of the fault it was armed with).
    fn model(&self) -> Self::Model;
    /// Mutating device operations so far: the unit of cut points.
    fn device_ops(&self) -> u64;
    /// Cuts the power once `ops` more device operations have completed; with `torn`, the next
    /// one is left half done.
    fn schedule_cut(&mut self, ops: u64, torn: bool);
    /// Forgets a scheduled cut that has not fired.
    fn cancel_cut(&mut self);
    /// Whether the device has power.
    fn powered(&self) -> bool;
    /// Applies one operation.
    fn apply(&mut self, op: Self::Op) -> std::result::Result<(), Failure>;
    /// Restores power if it was cut, and mounts again from the media alone.
    fn remount(&mut self) -> std::result::Result<(), Failure>;
    /// Reads back the whole visible state; also says how many bytes were read and compared.
    fn observe(
        &mut self,
        model: &Self::Model,
    ) -> std::result::Result<(<Self::Model as Oracle>::Observation, u64), String>;
    /// A few operations for after a recovery, ending with what makes them durable; `round`
    /// makes their content differ from everything written before.
    fn more_ops(&self, round: u32) -> Vec<Self::Op>;
    /// Whether `op` is an idle step, whose cuts are counted apart
    /// ([`CaseResult::idle_cuts`]). By default none is.
    fn is_idle(&self, op: &Self::Op) -> bool {
        let _ = op;
        false
    }
    /// Whether the last cut fell on an operation of the NVRAM of a volume on two devices
    /// ([`CaseResult::nvram_cuts`]). By default it never does.
    fn cut_on_nvram(&self) -> bool {
        false
    }
    /// Times the log began to move its checkpoint anchors so far this mount
    /// ([`flashfs::LogStats::anchor_moves`]): a cut in an operation that raised it is counted
    /// apart ([`CaseResult::move_cuts`]). By default 0.
    fn anchor_moves(&self) -> u64 {
        0
    }

    /// Arms a fault for the rest of the case, its random choices drawn from `seed`; `ops` is
    /// the length of the workload. Returns whether the target can inject it (by default only
    /// the power-cut kinds, which need nothing armed).
    fn arm(&mut self, fault: Fault, seed: u64, ops: usize) -> bool {
        let _ = (seed, ops);
        matches!(fault, Fault::PowerCut | Fault::MountCut)
    }
    /// Units (sectors) whose stored copies the armed fault destroyed since the last call.
    fn damaged(&mut self) -> Vec<u64> {
        Vec::new()
    }
    /// Like [`remount`](Target::remount), but the power goes again `at` device accesses into
    /// the mount (torn: the next mutating operation from there is torn). `Err(PowerLoss)`
    /// when it did; `Ok` when the mount finished first (the cut is then dropped). The default
    /// cannot cut a mount and simply remounts.
    fn remount_cut(&mut self, at: u64, torn: bool) -> std::result::Result<(), Failure> {
        let _ = (at, torn);
        self.remount()
    }
    /// Device accesses a mount takes, about: the range [`remount_cut`](Target::remount_cut)
    /// points are drawn from.
    fn mount_accesses(&self) -> u64 {
        1
    }
    /// Checks made once at the end of a case that ran to its end, after the last remount
    /// and check (the file system: deleting everything gives all the space back). By
    /// default none.
    fn finish(&mut self, model: &Self::Model) -> std::result::Result<(), Failure> {
        let _ = model;
        Ok(())
    }
}

/// Version base of the writes [`FtlTarget::more_ops`] makes (above any workload's).
pub const MORE_VERSION: u32 = 1 << 30;

/// The block device on simulated flash.
#[derive(Debug)]
pub struct FtlTarget<D: SimSegments> {
    /// `None` once a mount failed.
    ftl: Option<Ftl<Interruptible<D>>>,
    /// The device after a mount that the power cut: the next remount uses it.
    parked: Option<Interruptible<D>>,
    /// What [`Interruptible`] tells of its cuts: the device a cut mount leaves, where the
    /// last cut fell.
    kept: Rc<Cuts<D>>,
    config: FtlConfig,
    sectors: u64,
    sector_size: usize,
    /// Device accesses of the last mount.
    mount_accesses: u64,
    /// The fault armed and its strikes.
    striker: Striker,
    /// Sectors whose copies damage destroyed, not yet reported.
    damaged: Vec<u64>,
}

impl<D: SimSegments> FtlTarget<D> {
    /// Mounts the block device formatted on `dev`.
    pub fn mount(dev: D, config: FtlConfig) -> Result<Self> {
        let kept = Cuts::new();
        let ftl = Ftl::mount(Interruptible::new(dev, kept.clone()), config)
            .context(|| "mounting the formatted device".into())?;
        Ok(FtlTarget {
            sectors: ftl.sectors(),
            sector_size: ftl.sector_size(),
            mount_accesses: ftl.log().device().accesses(),
            ftl: Some(ftl),
            parked: None,
            kept,
            config,
            striker: Striker::default(),
            damaged: Vec::new(),
        })
    }

    /// Sectors the block device exports.
    pub fn sectors(&self) -> u64 {
        self.sectors
    }

    /// Bytes per sector.
    pub fn sector_size(&self) -> usize {
        self.sector_size
    }

    /// The block device, while mounted.
    pub fn ftl_mut(&mut self) -> Option<&mut Ftl<Interruptible<D>>> {
        self.ftl.as_mut()
    }

    /// The device, mounted or not.
    fn device(&self) -> Option<&Interruptible<D>> {
        match &self.ftl {
            Some(f) => Some(f.log().device()),
            None => self.parked.as_ref(),
        }
    }

    fn device_mut(&mut self) -> Option<&mut Interruptible<D>> {
        match &mut self.ftl {
            Some(f) => Some(f.log_mut().device_mut()),
            None => self.parked.as_mut(),
        }
    }

    fn gone() -> Failure {
        Failure::Error("the device is not mounted (an earlier mount failed)".into())
    }

    /// Turns an error into a failure: typed errors are media damage under faults that
    /// damage the medium.
    fn failure(&self, e: Error) -> Failure {
        match e {
            Error::Flash(FlashError::PowerLoss) => Failure::PowerLoss,
            Error::InvalidArgument(_) | Error::NotFormatted(_) => Failure::Error(e.to_string()),
            e if self.striker.fault().damages_media() => {
                Failure::Media(format!("{e} (errno {})", e.errno()))
            }
            e => Failure::Error(e.to_string()),
        }
    }

    /// Strikes with the armed fault before an operation, now and then.
    fn strike(&mut self) {
        let sectors = self.sectors;
        if let Some(f) = self.ftl.as_mut() {
            let hit = self
                .striker
                .strike(f.log_mut().device_mut().inner_mut(), sectors);
            self.damaged.extend(hit);
        }
    }
}

/// The fault a case armed, and the damage it does to the medium now and then (bit errors
/// within or beyond the ECC), the same for every target on the log.
#[derive(Debug, Clone)]
pub struct Striker {
    fault: Fault,
    rng: Rng,
    /// One operation in so many is struck.
    every: u64,
    /// Pages given stuck bit errors within the ECC: (segment, slot, erase count).
    stuck: HashSet<(u32, u32, u32)>,
    /// What damage at rest did.
    aged: AgeReport,
    /// Segments whose header damage at rest destroyed, with their erase count then.
    tainted: Vec<(u32, u32)>,
}

impl Default for Striker {
    fn default() -> Self {
        Striker {
            fault: Fault::PowerCut,
            rng: Rng::new(0),
            every: 1,
            stuck: HashSet::new(),
            aged: AgeReport::default(),
            tainted: Vec::new(),
        }
    }
}

impl Striker {
    /// The fault armed.
    pub fn fault(&self) -> Fault {
        self.fault
    }

    /// Arms `fault` on `dev` for a workload of `ops` operations, its random choices drawn
    /// from `seed`: sets the simulator's faults (silent failures, timebombs). Returns whether
    /// the medium can take the fault.
    pub fn arm<D: SimSegments>(
        &mut self,
        dev: &mut D,
        fault: Fault,
        seed: u64,
        ops: usize,
    ) -> bool {
        self.fault = fault;
        self.rng = Rng::new(mix(seed, 0xFA17));
        // About two strikes per workload.
        self.every = (ops as u64 / 2).max(1);
        self.stuck.clear();
        self.tainted.clear();
        if matches!(fault, Fault::EccWithin | Fault::EccBeyond) && dev.ecc_correctable().is_none() {
            return false;
        }
        // Each part draws from a seed of its own; silent failures strike every part (NVRAM's
        // writes too), the other faults only the part whose blocks wear.
        let mut part = 0;
        dev.each_sim_mut(&mut |sim| {
            let mut faults = FaultConfig {
                seed: mix(seed, 0x5EED + part),
                ..sim.faults().clone()
            };
            part += 1;
            if matches!(fault, Fault::Silent | Fault::SilentUnverified) {
                // About one silent program and one silent erase per workload (a write of a
                // few sectors takes a few programs).
                faults.silent_program_rate = 1.0 / (ops as f64 * 2.0).max(1.0);
                faults.silent_erase_rate = 0.05;
            }
            sim.set_faults(faults);
        });
        if fault == Fault::WearOut {
            // Two blocks fail within their next few erases.
            let sim = dev.sim_mut();
            let mut faults = sim.faults().clone();
            let counts = sim.erase_counts();
            let n = counts.len() as u64;
            let mut rng = Rng::new(mix(seed, 0xB0B));
            for _ in 0..2 {
                let block = rng.below(n) as u32;
                let at = counts.get(block as usize).copied().unwrap_or(0);
                faults.timebombs.push(Timebomb {
                    block,
                    at_erases: at + 1 + rng.below(3) as u32,
                });
            }
            sim.set_faults(faults);
        }
        true
    }

    /// Strikes `dev` (whose log exports `sectors` sectors) with the armed fault before an
    /// operation, now and then; returns the sectors whose stored copy it destroyed.
    pub fn strike<D: SimSegments>(&mut self, dev: &mut D, sectors: u64) -> Vec<u64> {
        if self.fault == Fault::AtRest {
            return self.strike_at_rest(dev, sectors);
        }
        if !matches!(self.fault, Fault::EccWithin | Fault::EccBeyond)
            || self.rng.below(self.every) != 0
        {
            return Vec::new();
        }
        let Some(t) = dev.ecc_correctable() else {
            return Vec::new();
        };
        if self.fault == Fault::EccWithin {
            if t == 0 {
                return Vec::new();
            }
            // A few pages get stuck errors, each page at most once per erase, so that no
            // codeword ever holds more than the ECC corrects.
            for _ in 0..4 {
                let pick = self.rng.below(1 << 32);
                let Some((seg, slot, _)) = pick_slot(dev, pick, sectors) else {
                    continue;
                };
                let bits = 1 + self.rng.below(t as u64) as u8;
                let erases = dev.segment_erases(seg);
                if self.stuck.insert((seg, slot, erases)) {
                    dev.inject_bit_errors(seg, slot, bits);
                }
            }
            Vec::new()
        } else {
            let pick = self.rng.below(1 << 32);
            let Some((seg, slot, touched)) = pick_slot(dev, pick, sectors) else {
                return Vec::new();
            };
            let bits = (t as u64 + 1 + self.rng.below(4)).min(u8::MAX as u64) as u8;
            if dev.inject_bit_errors(seg, slot, bits) {
                touched
            } else {
                Vec::new()
            }
        }
    }
}

impl Striker {
    /// Damage at rest on two segments, now and then: the sectors their slots hold (read
    /// before the damage) are the ones it may destroy, if it did more than the ECC hides.
    ///
    /// A segment whose header the damage made unreadable loses every slot at the next mount
    /// (a mount cannot trust tags under a header it cannot read, SPEC.md §2.2a), those
    /// written into it afterwards too: until its next erase, its sectors are reported before
    /// every operation and every remount ([`Striker::tainted_sectors`]).
    fn strike_at_rest<D: SimSegments>(&mut self, dev: &mut D, sectors: u64) -> Vec<u64> {
        let mut touched = self.tainted_sectors(dev, sectors);
        if self.rng.below(self.every) != 0 {
            return touched;
        }
        let cfg = dev.at_rest();
        let segs = dev.flash_segments();
        if segs.is_empty() {
            return touched;
        }
        for _ in 0..2 {
            let seg = segs.start + self.rng.below(u64::from(segs.end - segs.start)) as u32;
            let header_was = matches!(dev.read_header(seg), Ok(HeaderState::Valid(_)));
            let held = segment_sectors(dev, seg, sectors);
            let rep = dev.age(seg, &cfg);
            self.aged.add(&rep);
            if rep.visible() {
                touched.extend(held);
            }
            if header_was && !matches!(dev.read_header(seg), Ok(HeaderState::Valid(_))) {
                let at = dev.segment_erases(seg);
                self.tainted.push((seg, at));
            }
        }
        touched
    }

    /// The sectors the segments whose header damage at rest destroyed hold now, and which
    /// the next mount loses with them: those written into them since the damage too, until
    /// their next erase. A target reports them before every operation and again before a
    /// remount, for what the last operation wrote there (the cleaner's copies too).
    pub fn tainted_sectors<D: SimSegments>(&mut self, dev: &mut D, sectors: u64) -> Vec<u64> {
        let mut touched = Vec::new();
        let tainted = std::mem::take(&mut self.tainted);
        for (seg, at) in tainted {
            if dev.segment_erases(seg) == at {
                touched.extend(segment_sectors(dev, seg, sectors));
                self.tainted.push((seg, at));
            }
        }
        touched
    }

    /// What damage at rest did so far.
    pub fn aged(&self) -> AgeReport {
        self.aged
    }
}

/// Every sector a segment's valid tags vouch for (a sector's slot, a record's ranges).
fn segment_sectors<D: SimSegments>(dev: &mut D, seg: u32, sectors: u64) -> Vec<u64> {
    let geo = dev.geometry();
    let mut tags = vec![TagState::Erased; geo.slots as usize];
    if dev.read_tags(seg, &mut tags).is_err() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut buf = vec![0u8; geo.slot_size as usize];
    for (slot, t) in tags.iter().enumerate() {
        let TagState::Valid(t) = t else { continue };
        match t.kind {
            Kind::Sector => out.push(t.key as u64),
            Kind::Trim | Kind::Lost => {
                if dev.read_slot(seg, slot as u32, &mut buf).is_ok() {
                    out.extend(fault::record_sectors(&buf, sectors));
                }
            }
            Kind::Counters | Kind::Page | Kind::Root => {}
        }
    }
    out
}

/// A slot of the log holding a valid tag on a segment the faults of a flash part can strike
/// ([`SimSegments::flash_segments`]), chosen by `pick`, with the sectors (of a log exporting
/// `sectors`) its loss would touch.
fn pick_slot<D: SimSegments>(dev: &mut D, pick: u64, sectors: u64) -> Option<(u32, u32, Vec<u64>)> {
    let geo = dev.geometry();
    let segs = dev.flash_segments();
    let seg = segs.start + (pick % u64::from(segs.end - segs.start).max(1)) as u32;
    if !segs.contains(&seg) {
        return None;
    }
    let mut tags = vec![TagState::Erased; geo.slots as usize];
    dev.read_tags(seg, &mut tags).ok()?;
    let valid: Vec<(u32, flashfs::media::tag::Tag)> = tags
        .iter()
        .enumerate()
        .filter_map(|(i, t)| match t {
            TagState::Valid(t) => Some((i as u32, *t)),
            _ => None,
        })
        .collect();
    if valid.is_empty() {
        return None;
    }
    let (slot, tag) = valid[(pick >> 8) as usize % valid.len()];
    let touched = match tag.kind {
        Kind::Sector => vec![tag.key as u64],
        Kind::Trim | Kind::Lost => {
            let mut buf = vec![0u8; geo.slot_size as usize];
            dev.read_slot(seg, slot, &mut buf).ok()?;
            fault::record_sectors(&buf, sectors)
        }
        // Statistics only: no sector depends on it.
        Kind::Counters => Vec::new(),
        // No sector's data: a damaged root sends the mount to a scan, and a damaged map page
        // fails the sectors it maps with EIO until a scan rebuilds the map, which the
        // model allows of any sector (`Model::settle`).
        Kind::Page | Kind::Root => Vec::new(),
    };
    Some((seg, slot, touched))
}

impl<D: SimSegments> Target for FtlTarget<D> {
    type Op = Op;
    type Model = Model;

    fn kind(&self) -> &'static str {
        "ftl"
    }

    fn model(&self) -> Model {
        let mut m = Model::new(self.sectors);
        if self.striker.fault().damages_media() {
            m.tolerate_unreadable();
        }
        m
    }

    fn device_ops(&self) -> u64 {
        self.device().map_or(0, Interruptible::device_ops)
    }

    fn schedule_cut(&mut self, ops: u64, torn: bool) {
        if let Some(d) = self.device_mut() {
            d.schedule_cut(ops, torn);
        }
    }

    fn cancel_cut(&mut self) {
        if let Some(d) = self.device_mut() {
            d.cancel_cut();
        }
    }

    fn powered(&self) -> bool {
        self.ftl.is_some() && self.device().is_some_and(Interruptible::powered)
    }

    fn apply(&mut self, op: Op) -> std::result::Result<(), Failure> {
        self.strike();
        let ftl = self.ftl.as_mut().ok_or_else(Self::gone)?;
        apply(ftl, op).map_err(|e| self.failure(e))
    }

    fn remount(&mut self) -> std::result::Result<(), Failure> {
        self.remount_cut(u64::MAX, false)
    }

    fn observe(&mut self, model: &Model) -> std::result::Result<(Vec<Content>, u64), String> {
        let eio_ok = self.striker.fault().damages_media();
        let ftl = self.ftl.as_mut().ok_or_else(|| Self::gone().to_string())?;
        // The live counts checkpoints carry from mount to mount: a count too low would let a
        // later mount erase live data.
        match ftl.miscounted_segments() {
            Ok(m) if m.is_empty() => {}
            Ok(m) => return Err(format!("the log counts segments {m:?} wrong")),
            Err(e) if eio_ok && e.is_unreadable() => {}
            Err(e) => return Err(format!("counting the live slots: {e}")),
        }
        let read = read_sectors(ftl, model.history(), eio_ok)?;
        Ok((read, self.sectors * self.sector_size as u64))
    }

    fn more_ops(&self, round: u32) -> Vec<Op> {
        let mut v: Vec<Op> = (0..self.sectors)
            .step_by(7)
            .map(|s| Op::Write {
                sector: s,
                count: 1,
                version: MORE_VERSION + round,
            })
            .collect();
        v.push(Op::Flush);
        v
    }

    fn is_idle(&self, op: &Op) -> bool {
        matches!(op, Op::Idle { .. })
    }

    fn cut_on_nvram(&self) -> bool {
        self.kept.on_nvram()
    }

    fn anchor_moves(&self) -> u64 {
        self.ftl
            .as_ref()
            .map_or(0, |f| f.log().stats().anchor_moves)
    }

    fn arm(&mut self, fault: Fault, seed: u64, ops: usize) -> bool {
        let Some(f) = self.ftl.as_mut() else {
            return false;
        };
        let dev = f.log_mut().device_mut().inner_mut();
        self.striker.arm(dev, fault, seed, ops)
    }

    fn damaged(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.damaged)
    }

    fn remount_cut(&mut self, at: u64, torn: bool) -> std::result::Result<(), Failure> {
        let mut dev = match self.ftl.take() {
            Some(f) => f.into_device(),
            None => self.parked.take().ok_or_else(Self::gone)?,
        };
        dev.reboot();
        let hit = self.striker.tainted_sectors(dev.inner_mut(), self.sectors);
        self.damaged.extend(hit);
        let start = dev.accesses();
        if at != u64::MAX {
            dev.arm(at, torn);
        }
        match Ftl::mount(dev, self.config) {
            Ok(mut ftl) => {
                let d = ftl.log_mut().device_mut();
                self.mount_accesses = d.accesses() - start;
                d.disarm();
                // A torn cut waiting for a mutating operation the mount never made.
                if d.cut_pending() && at != u64::MAX {
                    d.cancel_cut();
                }
                if ftl.sectors() != self.sectors || ftl.sector_size() != self.sector_size {
                    return Err(Failure::Error(format!(
                        "mount: the device now has {} sectors of {} bytes, not {} of {}",
                        ftl.sectors(),
                        ftl.sector_size(),
                        self.sectors,
                        self.sector_size
                    )));
                }
                self.ftl = Some(ftl);
                Ok(())
            }
            Err(e) => {
                if let Some(d) = self.kept.take_kept() {
                    self.parked = Some(Interruptible::new(d, self.kept.clone()));
                }
                match self.failure(e) {
                    Failure::PowerLoss if self.parked.is_some() => Err(Failure::PowerLoss),
                    Failure::PowerLoss => Err(Failure::Error(
                        "mount: power loss with no cut scheduled".into(),
                    )),
                    Failure::Media(e) => Err(Failure::Media(format!("mount: {e}"))),
                    Failure::Error(e) => Err(Failure::Error(format!("mount: {e}"))),
                }
            }
        }
    }

    fn mount_accesses(&self) -> u64 {
        self.mount_accesses
    }
}

/// One case: a workload seed, the first cut and whether it tears its operation, and the
/// fault injected besides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Case {
    /// Seed of the workload (and of the chained second cut and the fault's choices).
    pub seed: u64,
    /// Device operations that complete before the first cut.
    pub cut: u64,
    /// Whether the operation at the cut is torn (left half done) rather than not started.
    pub torn: bool,
    /// The fault injected besides the cut.
    pub fault: Fault,
}

/// What one case measured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CaseResult {
    /// Power cuts that fired (0–3).
    pub cuts: u64,
    /// Of those, the cuts that fired during an idle step (the log cleaning or migrating).
    pub idle_cuts: u64,
    /// Of those, the cuts that fired during an operation that moved the checkpoint anchors.
    pub move_cuts: u64,
    /// Of those, the cuts that fell on an operation of the NVRAM of a volume on two devices
    /// (the others on its flash, or on an access of a mount).
    pub nvram_cuts: u64,
    /// Mounts after a cut or a clean unmount.
    pub remounts: u64,
    /// Bytes read back and checked against the model.
    pub bytes_verified: u64,
    /// Media damage: sector reads that failed with EIO, over every check.
    pub media_errors: u64,
    /// Media damage: sectors whose newest copy was destroyed that came back older.
    pub rolled_back: u64,
    /// Media damage: workload operations that failed with a typed error (the case then stops
    /// writing, remounts and checks).
    pub typed_errors: u64,
    /// Media damage: mounts that failed with a typed error (the case ends there).
    pub mount_errors: u64,
    /// The first violation of rule 3, if any (the case stops there).
    pub violation: Option<String>,
}

/// How a run of operations ended.
enum Stop {
    /// Every operation ran.
    Done,
    /// The power went.
    PowerLoss,
    /// An operation failed with a typed error that media damage explains.
    Media,
}

/// Runs `ops` on `target` from `*at` until they end, the power goes or the damaged medium
/// fails an operation with a typed error.
fn run_ops<T: Target>(
    target: &mut T,
    model: &mut T::Model,
    ops: &[T::Op],
    at: &mut usize,
    res: &mut CaseResult,
) -> std::result::Result<Stop, String> {
    while *at < ops.len() {
        let op = ops[*at].clone();
        model.issue(&op);
        *at += 1;
        let moves = target.anchor_moves();
        let r = target.apply(op.clone());
        let damaged = target.damaged();
        if !damaged.is_empty() {
            model.damaged(&damaged);
        }
        let idle = target.is_idle(&op);
        let moved = target.anchor_moves() > moves;
        match r {
            Ok(()) => model.acknowledge(&op),
            Err(Failure::PowerLoss) => {
                res.idle_cuts += u64::from(idle);
                res.move_cuts += u64::from(moved);
                return Ok(Stop::PowerLoss);
            }
            Err(Failure::Media(_)) => {
                res.typed_errors += 1;
                return Ok(Stop::Media);
            }
            Err(Failure::Error(e)) => {
                return Err(format!("operation {} ({op:?}) failed: {e}", *at - 1))
            }
        }
        if !target.powered() {
            res.idle_cuts += u64::from(idle);
            res.move_cuts += u64::from(moved);
            return Ok(Stop::PowerLoss);
        }
    }
    Ok(Stop::Done)
}

/// Counts a cut that fired, and where it fell.
fn count_cut<T: Target>(target: &T, res: &mut CaseResult) {
    res.cuts += 1;
    res.nvram_cuts += u64::from(target.cut_on_nvram());
}

/// Checks what the target shows against the model, then pins the model.
fn check_and_settle<T: Target>(
    target: &mut T,
    model: &mut T::Model,
    res: &mut CaseResult,
    when: &str,
) -> std::result::Result<(), String> {
    // Damage found since the last operation (at the remount).
    let damaged = target.damaged();
    if !damaged.is_empty() {
        model.damaged(&damaged);
    }
    let (seen, bytes) = target.observe(model).map_err(|e| format!("{when}: {e}"))?;
    model.check(&seen).map_err(|e| format!("{when}: {e}"))?;
    let t = model.tolerated(&seen);
    res.media_errors += t.unreadable;
    res.rolled_back += t.rolled_back;
    res.bytes_verified += bytes;
    model.settle(&seen);
    Ok(())
}

/// Remounts, reads everything back and checks it against the model, then pins the model.
/// `Ok(false)` when the mount failed with a typed error that media damage explains.
fn remount_and_check<T: Target>(
    target: &mut T,
    model: &mut T::Model,
    res: &mut CaseResult,
    when: &str,
) -> std::result::Result<bool, String> {
    match target.remount() {
        Ok(()) => {}
        Err(Failure::Media(_)) => {
            res.mount_errors += 1;
            return Ok(false);
        }
        Err(e) => return Err(format!("{when}: {e}")),
    }
    res.remounts += 1;
    check_and_settle(target, model, res, when)?;
    Ok(true)
}

/// Runs one case on a freshly mounted `target`: arm the case's fault; `ops` with the power
/// cut after `case.cut` device operations (torn or clean); remount and check (for
/// [`Fault::MountCut`], first a mount cut again part-way, or the first writes after it);
/// continue the workload with a second cut at a point drawn from the case; remount and
/// check; write a little more, remount cleanly and check that it all reads back. Under a
/// fault that damages the medium, an operation or a mount failing with a typed error ends
/// the case (after a remount and check, for an operation), counted as media damage.
pub fn run_case<T: Target>(mut target: T, ops: &[T::Op], case: Case) -> CaseResult {
    let mut res = CaseResult::default();
    res.violation = case_steps(&mut target, ops, case, &mut res).err();
    res
}

/// The steps of [`run_case`]; `Err` is the first violation.
fn case_steps<T: Target>(
    target: &mut T,
    ops: &[T::Op],
    case: Case,
    res: &mut CaseResult,
) -> std::result::Result<(), String> {
    let mut rng = Rng::new(mix(mix(case.seed, case.cut), case.torn as u64));
    let fault_seed = mix(
        mix(case.seed, case.cut),
        case.fault.code() << 1 | case.torn as u64,
    );
    if !target.arm(case.fault, fault_seed, ops.len()) {
        return Err(format!(
            "the {} target cannot inject {}",
            target.kind(),
            case.fault
        ));
    }
    let mut model = target.model();
    let start = target.device_ops();
    let mut at = 0;
    // After an operation failed with a typed error: remount, check, and end the case.
    let media_stop = |target: &mut T, model: &mut T::Model, res: &mut CaseResult, when: &str| {
        target.cancel_cut();
        remount_and_check(target, model, res, &format!("remount after {when}")).map(|_| ())
    };
    target.schedule_cut(case.cut, case.torn);
    match run_ops(target, &mut model, ops, &mut at, res)? {
        Stop::PowerLoss => count_cut(target, res),
        Stop::Media => return media_stop(target, &mut model, res, "a typed error"),
        Stop::Done => {}
    }
    target.cancel_cut();
    let first = format!("remount after the cut at {}", case.cut);
    if case.fault == Fault::MountCut {
        // The recovery is cut again: somewhere in the mount, or in its first writes (where
        // the deferred erases of a recovery happen).
        let span = 2 * target.mount_accesses() + 4;
        let (k, torn) = (rng.below(span), rng.below(2) == 1);
        let when = format!("{first}, cut again {k} device accesses into the mount (torn {torn})");
        match target.remount_cut(k, torn) {
            Err(Failure::PowerLoss) => count_cut(target, res),
            Err(Failure::Media(_)) => {
                res.mount_errors += 1;
                return Ok(());
            }
            Err(e) => return Err(format!("{when}: {e}")),
            Ok(()) => {
                res.remounts += 1;
                check_and_settle(target, &mut model, res, &when)?;
                let more = target.more_ops(0);
                let mut i = 0;
                let (k, torn) = (rng.below(8), rng.below(2) == 1);
                target.schedule_cut(k, torn);
                match run_ops(target, &mut model, &more, &mut i, res)
                    .map_err(|e| format!("{when}, writing: {e}"))?
                {
                    Stop::PowerLoss => count_cut(target, res),
                    Stop::Media => return media_stop(target, &mut model, res, "a typed error"),
                    Stop::Done => {}
                }
                target.cancel_cut();
            }
        }
        let again = "remount after the cut during the recovery";
        if !remount_and_check(target, &mut model, res, again)? {
            return Ok(());
        }
    } else if !remount_and_check(target, &mut model, res, &first)? {
        return Ok(());
    }
    if at < ops.len() {
        // The chained cut: somewhere in what the rest of the workload should take.
        let spent = target.device_ops().saturating_sub(start).max(1);
        let left = (spent * (ops.len() - at) as u64 / at.max(1) as u64).max(1);
        let (k, torn) = (rng.below(left), rng.below(2) == 1);
        target.schedule_cut(k, torn);
        match run_ops(target, &mut model, ops, &mut at, res)
            .map_err(|e| format!("after the first cut: {e}"))?
        {
            Stop::PowerLoss => count_cut(target, res),
            Stop::Media => return media_stop(target, &mut model, res, "a typed error"),
            Stop::Done => {}
        }
        target.cancel_cut();
        let second = format!("remount after the chained cut {k} operations later (torn {torn})");
        if !remount_and_check(target, &mut model, res, &second)? {
            return Ok(());
        }
    }
    let more = target.more_ops(1);
    let mut at = 0;
    match run_ops(target, &mut model, &more, &mut at, res)
        .map_err(|e| format!("writing after recovery: {e}"))?
    {
        Stop::PowerLoss => return Err("the power went with no cut scheduled".into()),
        Stop::Media => return media_stop(target, &mut model, res, "a typed error"),
        Stop::Done => {}
    }
    if !remount_and_check(target, &mut model, res, "clean remount after writing more")? {
        return Ok(());
    }
    match target.finish(&model) {
        Ok(()) => Ok(()),
        Err(Failure::Media(_)) => {
            res.typed_errors += 1;
            Ok(())
        }
        Err(e) => Err(format!("at the end of the case: {e}")),
    }
}

/// The derived, smaller geometry the torture runs a preset with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TortureDevice {
    /// The preset's name.
    pub preset: &'static str,
    /// The device actually simulated (on a volume on two devices, the flash).
    pub spec: DeviceSpec,
    /// On a volume on two devices ([`HYBRID_PRESETS`]), the NVRAM beside the flash.
    pub nvram: Option<NvramSpec>,
    /// Blocks per segment on NAND: the full part's (SPEC.md §2.1), kept on the smaller
    /// device so that its segments are laid out as the preset's are.
    pub nand_blocks_per_segment: u32,
    /// How it differs from the preset, in words (empty when it is the preset itself).
    pub note: &'static str,
    /// The target it is shaped for.
    pub target: TargetKind,
}

/// Segments (NOR: erase units, or groups of small ones) a torture device keeps at most.
pub const MAX_SEGMENTS: u32 = 16;
/// NOR erase-unit size a torture device keeps at most, in bytes.
pub const MAX_UNIT_BYTES: u32 = 8 * 1024;
/// NAND segments a torture device keeps at most (blocks, or groups of blocks where the
/// full part has more than [`flashfs::media::NAND_MAX_SEGMENTS`]).
pub const MAX_BLOCKS: u32 = 24;
/// NAND pages per block a torture device keeps at most.
pub const MAX_PAGES_PER_BLOCK: u32 = 16;

/// Bytes per sector (slot) of the block device on NOR.
pub const NOR_SECTOR: u32 = 512;

/// The device a preset is tortured on: its word size, program page, banks, reprogramming,
/// page size, spare area, ECC, cells and timings, but only [`MAX_SEGMENTS`] segments of
/// erase units of at most [`MAX_UNIT_BYTES`] (NOR) or [`MAX_BLOCKS`] blocks of at most
/// [`MAX_PAGES_PER_BLOCK`] pages (NAND), so that the workloads wrap the log and the cleaner
/// runs within a short workload, and each check reads little.
pub fn torture_device(preset: &str) -> Result<TortureDevice> {
    if let Some(&name) = HYBRID_PRESETS.iter().find(|&&p| p == preset) {
        return hybrid_device(name);
    }
    if preset.contains('+') {
        return Err(BenchError::InvalidOptions(format!(
            "{preset}: the volumes on two devices the torture runs are {}",
            HYBRID_PRESETS.join(", ")
        )));
    }
    let p = flash::preset::lookup(preset).context(|| format!("preset {preset:?}"))?;
    let (spec, shrunk) = match p.spec {
        DeviceSpec::Nor(s) => {
            let unit = s.unit_size.min(MAX_UNIT_BYTES);
            // Small units are erased several at a time: keep as many segments, not units.
            let grouped = flashfs::media::units_per_segment(&NorSpec {
                unit_size: unit,
                ..s
            });
            let per_bank = (MAX_SEGMENTS / s.banks).max(1) * grouped;
            let units = s.units.min(per_bank * s.banks);
            let d = NorSpec {
                unit_size: unit,
                units,
                ..s
            };
            (DeviceSpec::Nor(d), d != s)
        }
        DeviceSpec::Nand(s) => {
            // Segments of as many blocks as the full part's (SPEC.md §2.1): keep as many
            // segments, not blocks.
            let grouped = flashfs::media::nand_blocks_per_segment(&s);
            let per_bank = (MAX_BLOCKS / s.banks).max(1) * grouped;
            let d = NandSpec {
                blocks: s.blocks.min(per_bank * s.banks),
                pages_per_block: s.pages_per_block.min(MAX_PAGES_PER_BLOCK),
                ..s
            };
            (DeviceSpec::Nand(d), d != s)
        }
        DeviceSpec::Nvram(s) => {
            // As many segments as a NOR torture device keeps, of the smallest unit.
            let most = u64::from(MAX_SEGMENTS) * u64::from(flash::nvram_nor::MIN_UNIT);
            let d = NvramSpec {
                size: s.size.min(most),
                ..s
            };
            (DeviceSpec::Nvram(d), d != s)
        }
    };
    spec.validate()
        .context(|| format!("the torture geometry of {preset}"))?;
    Ok(TortureDevice {
        preset: p.name,
        nvram: None,
        nand_blocks_per_segment: match p.spec {
            DeviceSpec::Nand(s) => flashfs::media::nand_blocks_per_segment(&s),
            _ => 1,
        },
        spec,
        note: if shrunk {
            "fewer and smaller erase blocks than the preset"
        } else {
            ""
        },
        target: TargetKind::Ftl,
    })
}

impl TortureDevice {
    /// The geometry in words, e.g. "16 units x 8 KiB, 8 banks".
    pub fn geometry(&self) -> String {
        let part = match self.spec {
            DeviceSpec::Nor(s) => format!(
                "NOR {} units x {} KiB, {} bank(s), {}-byte words",
                s.units,
                s.unit_size / 1024,
                s.banks,
                s.word_size
            ),
            DeviceSpec::Nand(s) => format!(
                "{} {} blocks x {} pages x {} B{}",
                if s.is_mlc() { "MLC NAND" } else { "NAND" },
                s.blocks,
                s.pages_per_block,
                s.page_size,
                match self.nand_blocks_per_segment {
                    1 => String::new(),
                    n => format!(", {n} blocks per segment"),
                }
            ),
            DeviceSpec::Nvram(s) => nvram_geometry(&s),
        };
        let Some(nvram) = self.nvram else {
            return part;
        };
        let segments = nvram_segments(self);
        format!(
            "{part}, beside {} in {segments} segments",
            nvram_geometry(&nvram)
        )
    }
}

/// An NVRAM part's size and the units it is laid out in, in words.
fn nvram_geometry(s: &NvramSpec) -> String {
    format!(
        "NVRAM {} KiB as {} units x {} KiB",
        s.size / 1024,
        s.size / u64::from(flash::nvram_nor::unit_size(s.size)),
        flash::nvram_nor::unit_size(s.size) / 1024
    )
}

/// Volumes on two devices the torture runs: a flash preset (SLC NAND or NOR) and an NVRAM
/// preset joined by `+`, the NVRAM beside the flash as one volume
/// ([`flashfs::media::tiered`]): the metadata on the NVRAM, the data on the flash.
pub const HYBRID_PRESETS: [&str; 2] = ["nand-128m+fram-8m", "w25q64jv+cy15b102q"];

/// Segments of the NVRAM of a volume on two devices on its torture device: the two anchors
/// and room for the metadata head beyond them, which its workloads fill, so that the NVRAM's
/// segments are cleaned and erased under the cuts and the metadata spills to the NAND now
/// and then.
pub const HYBRID_NVRAM_SEGMENTS: u32 = 8;

/// The torture device of a volume on two devices (`name` from [`HYBRID_PRESETS`]): the flash
/// preset's torture device ([`torture_device`]), and beside it [`HYBRID_NVRAM_SEGMENTS`]
/// segments of the NVRAM preset's part, each holding as many slots as a flash segment.
fn hybrid_device(name: &'static str) -> Result<TortureDevice> {
    let Some((flash_name, nvram_name)) = name.split_once('+') else {
        return Err(BenchError::InvalidOptions(format!(
            "{name} does not name two presets"
        )));
    };
    let flash = torture_device(flash_name)?;
    // The units one NVRAM segment takes follow from the flash's segments.
    let g = match flash.spec {
        DeviceSpec::Nand(s) if !s.is_mlc() => nand_part(&flash, 1)?.geometry(),
        DeviceSpec::Nor(_) => nor_part(&flash)?.geometry(),
        _ => {
            return Err(BenchError::InvalidOptions(format!(
                "{name}: the flash of a volume on two devices is SLC NAND or NOR"
            )))
        }
    };
    let p = flash::preset::lookup(nvram_name).context(|| format!("preset {nvram_name:?}"))?;
    let DeviceSpec::Nvram(part) = p.spec else {
        return Err(BenchError::InvalidOptions(format!(
            "{name}: {nvram_name} is not NVRAM"
        )));
    };
    // Found on a part of many units of the smallest size.
    let unit = flash::nvram_nor::MIN_UNIT;
    let probe = NvramSpec {
        size: 64 * u64::from(unit),
        ..part
    };
    let what = || format!("the NVRAM of {name}");
    let sim = NvramSim::new(probe, ImageMeta::new(name, 1)).context(what)?;
    let nor = NvramNor::new(sim).context(what)?;
    let units = NorSegments::with_slots(nor, g.slot_size, g.slots)
        .context(what)?
        .units_per_segment();
    let spec = NvramSpec {
        size: (u64::from(HYBRID_NVRAM_SEGMENTS * units) * u64::from(unit)).min(part.size),
        ..part
    };
    DeviceSpec::Nvram(spec).validate().context(what)?;
    Ok(TortureDevice {
        preset: name,
        nvram: Some(spec),
        note: "the flash's torture device, and beside it a small part of the NVRAM",
        ..flash
    })
}

/// A system the torture runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TargetKind {
    /// The block device ([`flashfs::Ftl`]): [`FtlTarget`].
    Ftl,
    /// The native file system ([`flashfs::Fs`]): [`FsTarget`].
    Fs,
}

impl TargetKind {
    /// Both, in report order.
    pub const ALL: [TargetKind; 2] = [TargetKind::Ftl, TargetKind::Fs];

    /// Name in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            TargetKind::Ftl => "ftl",
            TargetKind::Fs => "fs",
        }
    }

    /// Parses a name.
    pub fn from_name(s: &str) -> Option<TargetKind> {
        TargetKind::ALL.into_iter().find(|t| t.name() == s)
    }
}

impl fmt::Display for TargetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Options of a torture run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TortureOptions {
    /// Presets to run on (NOR or NAND).
    pub presets: Vec<String>,
    /// Targets to run: the block device, the file system or both.
    pub targets: Vec<TargetKind>,
    /// Fault kinds to inject (each where it applies to the preset's medium).
    pub faults: Vec<Fault>,
    /// Block-device workloads to run (on the `ftl` target).
    pub workloads: Vec<Workload>,
    /// File-system workloads to run (on the `fs` target).
    pub fs_workloads: Vec<FsWorkload>,
    /// Random cases per preset, target, fault kind and workload (each with a first and a
    /// chained cut).
    pub cuts: u64,
    /// Base seed: random case `i` uses workload seed `seed + i`; exhaustive runs use `seed`.
    pub seed: u64,
    /// Operations per workload.
    pub ops: usize,
    /// Cut at every device operation of the workload, clean and torn, instead of at random.
    pub exhaustive: bool,
    /// Replay exactly one case: the first cut after this many device operations.
    pub cut: Option<u64>,
    /// With `cut`: whether that cut tears its operation.
    pub torn: bool,
    /// The file system's journal blocks ([`flashfs::FsConfig::journal_blocks`]; `None`:
    /// the medium's default).
    pub journal_blocks: Option<u16>,
    /// Idle steps among the workloads' operations ([`idle_steps`]); without them a case
    /// found before the workloads had them replays as it was found.
    pub idle: bool,
}

/// Presets a default run covers: a banked parallel NOR, small-page NAND, SPI NOR, MLC NAND,
/// and NVRAM beside small-page NAND and beside SPI NOR, each as one volume.
pub const DEFAULT_PRESETS: [&str; 6] = [
    "28f008sa",
    "nand-128m",
    "w25q64jv",
    "mlc-flexfs",
    "nand-128m+fram-8m",
    "w25q64jv+cy15b102q",
];

/// Every NOR, NAND and NVRAM preset, and the volumes on two devices ([`HYBRID_PRESETS`]):
/// what the campaign covers.
pub const ALL_PRESETS: [&str; 12] = [
    "28f008sa",
    "m29dw640d",
    "st10f280",
    "w25q64jv",
    "nand-128m",
    "nand-1g",
    "w25n01gv",
    "mlc-flexfs",
    "cy15b102q",
    "fram-8m",
    "nand-128m+fram-8m",
    "w25q64jv+cy15b102q",
];

/// Operations per workload unless told otherwise.
pub const DEFAULT_OPS: usize = 200;

impl Default for TortureOptions {
    fn default() -> Self {
        TortureOptions {
            presets: DEFAULT_PRESETS.iter().map(|s| s.to_string()).collect(),
            targets: TargetKind::ALL.to_vec(),
            faults: Fault::ALL.to_vec(),
            workloads: Workload::ALL.to_vec(),
            fs_workloads: FsWorkload::ALL.to_vec(),
            cuts: 100,
            seed: 1,
            ops: DEFAULT_OPS,
            exhaustive: false,
            cut: None,
            torn: false,
            journal_blocks: None,
            idle: true,
        }
    }
}

/// Totals per preset, target, fault kind and workload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// Preset.
    pub preset: String,
    /// Target ("ftl" or "fs").
    pub target: String,
    /// Fault kind injected.
    pub kind: Fault,
    /// Workload (a block-device or a file-system workload, per the target).
    pub workload: String,
    /// The geometry actually simulated.
    pub device: String,
    /// Sectors the block device exports, or blocks of the file system.
    pub sectors: u64,
    /// Bytes per sector (block).
    pub sector_size: usize,
    /// Cases run.
    pub cases: u64,
    /// Power cuts that fired.
    pub cuts: u64,
    /// Of those, the cuts that fired during an idle step (the log cleaning or migrating).
    pub idle_cuts: u64,
    /// Of those, the cuts that fired during an operation that moved the checkpoint anchors.
    pub move_cuts: u64,
    /// Of those, the cuts that fell on an operation of the NVRAM of a volume on two devices.
    pub nvram_cuts: u64,
    /// Mounts after cuts and clean unmounts.
    pub remounts: u64,
    /// Bytes read back and checked against the model.
    pub bytes_verified: u64,
    /// Media damage: reads that failed with EIO (sectors; for the file system, checks whose
    /// walk over the volume met one).
    pub media_errors: u64,
    /// Media damage: sectors (file-system states) whose newest copy was destroyed that came
    /// back older.
    pub rolled_back: u64,
    /// Media damage: workload operations that failed with a typed error.
    pub typed_errors: u64,
    /// Media damage: mounts that failed with a typed error.
    pub mount_errors: u64,
    /// Cases that broke rule 3.
    pub violations: u64,
    /// Device operations the whole workload takes without a cut.
    pub workload_device_ops: u64,
    /// Whether the log read back every program (on for the `silent` kind).
    pub verify_programs: bool,
}

impl Report {
    /// Every count of media damage together.
    pub fn media_damage(&self) -> u64 {
        self.media_errors + self.rolled_back + self.typed_errors + self.mount_errors
    }
}

/// A case that broke rule 3.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// Preset.
    pub preset: String,
    /// Target.
    pub target: String,
    /// Workload.
    pub workload: String,
    /// Operations per workload.
    pub ops: usize,
    /// The file system's journal blocks where asked for.
    pub journal_blocks: Option<u16>,
    /// Whether the workload had its idle steps ([`TortureOptions::idle`]).
    pub idle: bool,
    /// The case (with its fault kind).
    pub case: Case,
    /// What went wrong.
    pub message: String,
}

impl Violation {
    /// The command line that replays exactly this case.
    pub fn reproducer(&self) -> String {
        let mut s = format!(
            "flashfs torture --preset {} --target {} --fault {} --workload {} --seed {} --cut {}",
            self.preset, self.target, self.case.fault, self.workload, self.case.seed, self.case.cut
        );
        if self.case.torn {
            s.push_str(" --torn");
        }
        if self.ops != DEFAULT_OPS {
            s.push_str(&format!(" --ops {}", self.ops));
        }
        if let Some(n) = self.journal_blocks {
            s.push_str(&format!(" --journal-blocks {n}"));
        }
        if !self.idle {
            s.push_str(" --no-idle");
        }
        s
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {} {} seed {} cut {} torn {}: {}",
            self.preset,
            self.target,
            self.case.fault,
            self.workload,
            self.case.seed,
            self.case.cut,
            self.case.torn,
            self.message
        )
    }
}

/// A fault kind left out for a preset because it does not apply to its medium.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Preset.
    pub preset: String,
    /// Fault kind.
    pub fault: Fault,
    /// Why not.
    pub why: &'static str,
}

/// The whole run.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// One per preset, target, fault kind and workload, in the order run.
    pub reports: Vec<Report>,
    /// The devices run on, one per preset and target.
    pub devices: Vec<TortureDevice>,
    /// Fault kinds that do not apply to a preset's medium.
    pub skipped: Vec<Skipped>,
    /// Every violation found.
    pub violations: Vec<Violation>,
}

/// Device operations `ops` take on `target` without a cut.
fn dry_run<T: Target>(mut target: T, ops: &[T::Op]) -> u64 {
    let start = target.device_ops();
    let mut model = target.model();
    let mut at = 0;
    let _ = run_ops(
        &mut target,
        &mut model,
        ops,
        &mut at,
        &mut CaseResult::default(),
    );
    target.device_ops() - start
}

/// Runs cases on any target: `fresh` mounts a new copy of the formatted target. Also returns
/// the device operations the workload takes without a cut.
pub fn torture<T: Target>(
    fresh: &dyn Fn() -> Result<T>,
    ops: &[T::Op],
    cases: &[Case],
    progress: &mut dyn FnMut(u64),
) -> Result<(Vec<CaseResult>, u64)> {
    let total = dry_run(fresh()?, ops);
    let mut out = Vec::with_capacity(cases.len());
    for (i, &case) in cases.iter().enumerate() {
        out.push(run_case(fresh()?, ops, case));
        progress(i as u64 + 1);
    }
    Ok((out, total))
}

/// The simulated NOR part of a torture device, as segments of [`NOR_SECTOR`] bytes.
pub fn nor_part(dev: &TortureDevice) -> Result<NorSegments<NorSim>> {
    let DeviceSpec::Nor(spec) = dev.spec else {
        return Err(BenchError::InvalidOptions(format!(
            "{} is not NOR",
            dev.preset
        )));
    };
    let what = || format!("the NOR part of {}", dev.preset);
    let sim = NorSim::new(spec, ImageMeta::new(dev.preset, 1)).context(what)?;
    NorSegments::new(sim, NOR_SECTOR).context(what)
}

/// The simulated NVRAM part of a torture device, laid out as NOR ([`NvramNor`]), as segments
/// of [`NOR_SECTOR`] bytes.
pub fn nvram_part(dev: &TortureDevice) -> Result<NorSegments<NvramNor<NvramSim>>> {
    let DeviceSpec::Nvram(spec) = dev.spec else {
        return Err(BenchError::InvalidOptions(format!(
            "{} is not NVRAM",
            dev.preset
        )));
    };
    let what = || format!("the NVRAM part of {}", dev.preset);
    let sim = NvramSim::new(spec, ImageMeta::new(dev.preset, 1)).context(what)?;
    NorSegments::new(NvramNor::new(sim).context(what)?, NOR_SECTOR).context(what)
}

/// A volume on two devices: NVRAM beside NAND, as the torture's hybrid presets run it.
pub type Hybrid = NvramNand<NvramSim, NandSim>;

/// A volume on two devices: NVRAM beside NOR.
pub type HybridNor = NvramBesideNor<NvramSim, NorSim>;

/// The volume on two devices of a torture device of [`HYBRID_PRESETS`] whose flash is NAND:
/// its NVRAM beside its NAND part, whose factory bad blocks (if its spec has any) follow
/// from `meta_seed`.
pub fn hybrid_part(dev: &TortureDevice, meta_seed: u64) -> Result<Hybrid> {
    nvram_beside(dev, nand_part(dev, meta_seed)?)
}

/// The volume on two devices of a torture device of [`HYBRID_PRESETS`] whose flash is NOR:
/// its NVRAM beside its NOR part.
pub fn hybrid_nor_part(dev: &TortureDevice) -> Result<HybridNor> {
    nvram_beside(dev, nor_part(dev)?)
}

/// Segments of the NVRAM of a torture device of [`HYBRID_PRESETS`] (0 for another device).
pub fn nvram_segments(dev: &TortureDevice) -> u32 {
    match dev.spec {
        DeviceSpec::Nor(_) => hybrid_nor_part(dev).map_or(0, |h| h.fast_segments()),
        _ => hybrid_part(dev, 1).map_or(0, |h| h.fast_segments()),
    }
}

/// The NVRAM of a torture device of [`HYBRID_PRESETS`] beside `flash` (its flash part), in
/// segments of as many slots as the flash's, as one volume.
fn nvram_beside<B: Segments>(
    dev: &TortureDevice,
    flash: B,
) -> Result<Tiered<NorSegments<NvramNor<NvramSim>>, B>> {
    let Some(spec) = dev.nvram else {
        return Err(BenchError::InvalidOptions(format!(
            "{} is not a volume on two devices",
            dev.preset
        )));
    };
    let what = || format!("the NVRAM of {}", dev.preset);
    let g = flash.geometry();
    let sim = NvramSim::new(spec, ImageMeta::new(dev.preset, 1)).context(what)?;
    let nvram = NorSegments::with_slots(NvramNor::new(sim).context(what)?, g.slot_size, g.slots)
        .context(what)?;
    Tiered::new(nvram, flash).context(|| format!("joining the two devices of {}", dev.preset))
}

/// The simulated NAND part of a torture device, its factory bad blocks (if its spec has
/// any) following from `meta_seed`.
pub fn nand_part(dev: &TortureDevice, meta_seed: u64) -> Result<NandSegments<NandSim>> {
    nand_part_of(dev, spec_nand(dev)?, meta_seed)
}

fn spec_nand(dev: &TortureDevice) -> Result<NandSpec> {
    match dev.spec {
        DeviceSpec::Nand(s) => Ok(s),
        _ => Err(BenchError::InvalidOptions(format!(
            "{} is not NAND",
            dev.preset
        ))),
    }
}

fn nand_part_of(
    dev: &TortureDevice,
    spec: NandSpec,
    meta_seed: u64,
) -> Result<NandSegments<NandSim>> {
    let what = || format!("the NAND part of {}", dev.preset);
    let sim = NandSim::new(spec, ImageMeta::new(dev.preset, meta_seed)).context(what)?;
    NandSegments::with_blocks_per_segment(sim, dev.nand_blocks_per_segment).context(what)
}

/// The block device formatted on `seg` and closed, as `mkfs` leaves it (and as the file
/// system's torture device is left, unmounted): a case's first mount finds the close's
/// root, which on a volume on two devices it trusts without reading the flash, and its
/// first program appends that root again, open — cut points fall there too.
fn format_ftl<D: Segments>(dev: &TortureDevice, seg: D) -> Result<D> {
    let what = || format!("formatting the block device on {}", dev.preset);
    Ftl::format(seg, ftl_config(Fault::PowerCut))
        .context(what)?
        .close()
        .context(what)
}

/// Factory bad blocks per thousand on the parts of [`Fault::BadBlocks`] (the most a
/// specification allows).
pub const BAD_BLOCK_PERMILLE: u32 = 100;

/// The unformatted NAND part of [`Fault::BadBlocks`] for a case seed: a tenth of its blocks
/// (never block 0) left the factory bad, at least one; the same seed gives the same blocks.
/// Where segments take several blocks, each bad block retires its segment, so the part has
/// that many times fewer bad blocks: about a tenth of its segments are lost either way.
pub fn bad_block_part(dev: &TortureDevice, seed: u64) -> Result<(NandSegments<NandSim>, Vec<u32>)> {
    let DeviceSpec::Nand(spec) = dev.spec else {
        return Err(BenchError::InvalidOptions(format!(
            "{}: {}",
            dev.preset,
            Fault::BadBlocks
                .not_applicable(&dev.spec)
                .unwrap_or("no bad blocks")
        )));
    };
    let spec = NandSpec {
        factory_bad_permille: BAD_BLOCK_PERMILLE / dev.nand_blocks_per_segment.max(1),
        ..spec
    };
    let mut last = Vec::new();
    for i in 0..64 {
        let meta_seed = mix(seed, 0xBAD0 + i);
        let mut seg = nand_part_of(dev, spec, meta_seed)?;
        last = (0..spec.blocks)
            .filter(|&b| seg.flash_mut().is_bad(b).unwrap_or(false))
            .collect();
        if !last.is_empty() {
            return Ok((seg, last));
        }
    }
    // Cannot happen with a tenth of the blocks bad; a part without any is still a part.
    Ok((nand_part_of(dev, spec, mix(seed, 0xBAD0))?, last))
}

/// The NAND part of [`Fault::BadBlocks`] for a case seed, formatted by `format`. A draw whose
/// bad blocks leave too little room for the volume (a file system needs more than a block
/// device) is drawn again from the next seed, the same way for the same case seed: a
/// campaign that met one stopped (`flashfs torture --campaign 1000000`, file system on
/// nand-128m).
fn formatted_bad_block_part<T>(
    dev: &TortureDevice,
    seed: u64,
    format: &dyn Fn(NandSegments<NandSim>) -> Result<T>,
) -> Result<T> {
    let mut draw = seed;
    for _ in 0..16 {
        match format(bad_block_part(dev, draw)?.0) {
            Err(BenchError::Fs {
                error: Error::InvalidArgument(_) | Error::NoSpace,
                ..
            }) => draw = mix(draw, 1),
            r => return r,
        }
    }
    format(bad_block_part(dev, draw)?.0)
}

/// The NAND part of [`Fault::BadBlocks`] for a case seed with the block device formatted on
/// it, and its factory bad blocks (see [`bad_block_part`]).
pub fn bad_block_device(
    dev: &TortureDevice,
    seed: u64,
) -> Result<(NandSegments<NandSim>, Vec<u32>)> {
    let (seg, bad) = bad_block_part(dev, seed)?;
    Ok((format_ftl(dev, seg)?, bad))
}

/// The cases of one preset, fault kind and workload, given the device operations the
/// workload takes.
fn cases(opts: &TortureOptions, fault: Fault, total: u64) -> Vec<Case> {
    if let Some(cut) = opts.cut {
        return vec![Case {
            seed: opts.seed,
            cut,
            torn: opts.torn,
            fault,
        }];
    }
    if opts.exhaustive {
        return (0..total)
            .flat_map(|cut| {
                [false, true].map(|torn| Case {
                    seed: opts.seed,
                    cut,
                    torn,
                    fault,
                })
            })
            .collect();
    }
    (0..opts.cuts)
        .map(|i| {
            let seed = opts.seed.wrapping_add(i);
            let mut rng = Rng::new(mix(seed, 0x7047));
            Case {
                seed,
                cut: rng.below(total),
                torn: rng.below(2) == 1,
                fault,
            }
        })
        .collect()
}

/// What one (preset, target, fault, workload) runs: how to build its devices and targets.
struct Combo<'a, D, T: Target> {
    dev: &'a TortureDevice,
    fault: Fault,
    workload: String,
    /// The formatted device for a workload seed.
    base: &'a dyn Fn(u64) -> Result<D>,
    /// The target mounted on a formatted device.
    mount: &'a dyn Fn(D) -> Result<T>,
    /// The workload of a seed, sized for a mounted target.
    ops_of: &'a dyn Fn(u64, &T) -> Vec<T::Op>,
    /// Units (sectors, blocks) the target has, and their size.
    shape: &'a dyn Fn(&T) -> (u64, usize),
    verify_programs: bool,
}

/// Runs the cases of one preset, target, fault kind and workload.
fn run_combo<D: Clone, T: Target>(
    c: Combo<'_, D, T>,
    opts: &TortureOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(Report, Vec<Violation>)> {
    let probe = (c.mount)((c.base)(opts.seed)?)?;
    let (sectors, ss) = (c.shape)(&probe);
    let target = probe.kind().to_string();
    // Device operations of the base seed's workload: the range random cuts are drawn from.
    let ops = (c.ops_of)(opts.seed, &probe);
    let total = dry_run(probe, &ops);
    let cases = cases(opts, c.fault, total);
    let mut report = Report {
        preset: c.dev.preset.to_string(),
        target,
        kind: c.fault,
        workload: c.workload.clone(),
        device: c.dev.geometry(),
        sectors,
        sector_size: ss,
        cases: cases.len() as u64,
        cuts: 0,
        idle_cuts: 0,
        move_cuts: 0,
        nvram_cuts: 0,
        remounts: 0,
        bytes_verified: 0,
        media_errors: 0,
        rolled_back: 0,
        typed_errors: 0,
        mount_errors: 0,
        violations: 0,
        workload_device_ops: total,
        verify_programs: c.verify_programs,
    };
    let mut violations = Vec::new();
    let n = cases.len() as u64;
    let mut done = 0;
    // Cases that share a seed share a workload (and device): generate each once.
    let mut i = 0;
    while i < cases.len() {
        let seed = cases[i].seed;
        let j = i + cases[i..].iter().take_while(|c| c.seed == seed).count();
        let dev_of_seed = (c.base)(seed)?;
        // Parts with factory bad blocks differ in capacity from seed to seed.
        let mut first = Some((c.mount)(dev_of_seed.clone())?);
        let ops = match &first {
            Some(t) => (c.ops_of)(seed, t),
            None => Vec::new(),
        };
        for case in &cases[i..j] {
            let t = match first.take() {
                Some(t) => t,
                None => (c.mount)(dev_of_seed.clone())?,
            };
            let r = run_case(t, &ops, *case);
            report.cuts += r.cuts;
            report.idle_cuts += r.idle_cuts;
            report.move_cuts += r.move_cuts;
            report.nvram_cuts += r.nvram_cuts;
            report.remounts += r.remounts;
            report.bytes_verified += r.bytes_verified;
            report.media_errors += r.media_errors;
            report.rolled_back += r.rolled_back;
            report.typed_errors += r.typed_errors;
            report.mount_errors += r.mount_errors;
            if let Some(message) = r.violation {
                report.violations += 1;
                violations.push(Violation {
                    preset: c.dev.preset.to_string(),
                    target: report.target.clone(),
                    workload: c.workload.clone(),
                    ops: opts.ops,
                    journal_blocks: opts
                        .journal_blocks
                        .filter(|_| report.target == TargetKind::Fs.name()),
                    idle: opts.idle,
                    case: *case,
                    message,
                });
            }
            done += 1;
            progress(done, n);
        }
        i = j;
    }
    Ok((report, violations))
}

/// The block device's settings for a fault kind: silent failures need programs read back.
/// The torture's small devices keep checkpoints (which only larger ones do by default), so
/// that the workloads' checkpoints, the marks after them and the anchors' turns are cut;
/// their map cache holds one page, so that map pages are read back and force checkpoints.
/// MLC parts run with SLC and MLC regions ([`TORTURE_REGIONS`]), and every part with the
/// wear spread [`TORTURE_WEAR_SPREAD`].
pub fn ftl_config(fault: Fault) -> FtlConfig {
    let mut c = FtlConfig::default();
    c.log.regions = Some(TORTURE_REGIONS);
    c.log.wear_spread = TORTURE_WEAR_SPREAD;
    c.log.verify_programs |= fault.verifies_programs();
    c.log.checkpoint_min_segments = 0;
    c.map_cache = SMALL_MAP_CACHE;
    c
}

/// The regions the torture's MLC parts run with (locality-aware migration, which is
/// dynamic allocation and more): writes to SLC segments (or, once idle steps have
/// migrated, the share of them dynamic allocation gives SLC; the file system's rewrites to
/// SLC segments of their own), the cleaner's survivors and the idle steps' migrations to
/// MLC ones, so that cuts fall inside migrations and both modes' segments are remounted.
/// Other media have no SLC mode and ignore it.
pub const TORTURE_REGIONS: flashfs::Regions = flashfs::Regions::Locality;

/// The torture's wear spread: two erases, so that within a case's few hundred operations
/// the leveller moves static data and the checkpoint anchors move to less worn segments
/// (SPEC.md §3.5), and cuts fall inside both.
pub const TORTURE_WEAR_SPREAD: u32 = 2;

/// Bytes at the start of each file the torture's file system puts on the NVRAM of a volume
/// on two devices ([`flashfs::FsConfig::fast_tier_file_bytes`]): one 512-byte block, so
/// that every case writes file data to both parts (its small files would otherwise fit on
/// the NVRAM whole, and no cut fall on the NAND) and writes across the boundary split.
pub const TORTURE_FAST_FILE_BYTES: u64 = 512;

/// The torture's map cache: none beyond the one page it always holds, so that on devices
/// of a few map pages every other page is read back and changed pages force checkpoints.
pub const SMALL_MAP_CACHE: usize = 0;

/// Runs one preset, fault kind and workload on the block device; `base` gives the formatted
/// device for a workload seed.
fn run_ftl<D: SimSegments>(
    base: &dyn Fn(u64) -> Result<D>,
    dev: &TortureDevice,
    fault: Fault,
    workload: Workload,
    opts: &TortureOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(Report, Vec<Violation>)> {
    let config = ftl_config(fault);
    let ops = opts.ops;
    run_combo(
        Combo {
            dev,
            fault,
            workload: workload.name().to_string(),
            base,
            mount: &|d| FtlTarget::mount(d, config),
            ops_of: &|seed, t: &FtlTarget<D>| {
                let w = workload.ops(seed, t.sectors(), t.sector_size(), ops);
                if !opts.idle {
                    return w;
                }
                idle_steps(w, seed, ops, |op| op.is_barrier(), |ms| Op::Idle { ms })
            },
            shape: &|t: &FtlTarget<D>| (t.sectors(), t.sector_size()),
            verify_programs: config.log.verify_programs,
        },
        opts,
        progress,
    )
}

/// Runs one preset, fault kind and workload on the file system; `base` gives the device
/// holding a freshly formatted file system for a workload seed.
fn run_fs<D: SimSegments>(
    base: &dyn Fn(u64) -> Result<D>,
    dev: &TortureDevice,
    fault: Fault,
    workload: FsWorkload,
    opts: &TortureOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(Report, Vec<Violation>)> {
    let config = fs::fs_config(fault, opts.journal_blocks);
    let ops = opts.ops;
    run_combo(
        Combo {
            dev,
            fault,
            workload: workload.name().to_string(),
            base,
            mount: &|d| FsTarget::mount(d, config),
            ops_of: &|seed, t: &FsTarget<D>| {
                let w = fs::fs_ops(workload, seed, ops, t);
                if !opts.idle {
                    return w;
                }
                idle_steps(w, seed, ops, |op| *op == FsOp::Sync, |ms| FsOp::Idle { ms })
            },
            shape: &|t: &FsTarget<D>| (t.blocks(), t.block_size() as usize),
            verify_programs: config.ftl.log.verify_programs,
        },
        opts,
        progress,
    )
}

/// Runs the torture over every preset, target, fault kind and workload of `opts` (fault
/// kinds that do not apply to a preset's medium are skipped and listed). `progress` hears
/// the label of the (preset, target, fault, workload) running, cases done and cases in it.
pub fn run(opts: &TortureOptions, progress: &mut dyn FnMut(&str, u64, u64)) -> Result<Outcome> {
    let wants_ftl = opts.targets.contains(&TargetKind::Ftl) && !opts.workloads.is_empty();
    let wants_fs = opts.targets.contains(&TargetKind::Fs) && !opts.fs_workloads.is_empty();
    if opts.presets.is_empty() || opts.faults.is_empty() || !(wants_ftl || wants_fs) {
        return Err(BenchError::InvalidOptions(
            "no preset, no fault kind, or no workload for a selected target to run".into(),
        ));
    }
    if opts.ops == 0 {
        return Err(BenchError::InvalidOptions(
            "zero operations per workload".into(),
        ));
    }
    if opts.torn && opts.cut.is_none() {
        return Err(BenchError::InvalidOptions(
            "--torn describes a replayed cut: give --cut too".into(),
        ));
    }
    if opts.exhaustive && opts.cut.is_some() {
        return Err(BenchError::InvalidOptions(
            "--exhaustive and --cut exclude each other".into(),
        ));
    }
    let mut outcome = Outcome::default();
    for preset in &opts.presets {
        for &target in &TargetKind::ALL {
            let wanted = match target {
                TargetKind::Ftl => wants_ftl,
                TargetKind::Fs => wants_fs,
            };
            if !wanted {
                continue;
            }
            let dev = match target {
                TargetKind::Ftl => torture_device(preset)?,
                TargetKind::Fs => fs::fs_torture_device(preset)?,
            };
            outcome.devices.push(dev);
            run_preset(&dev, opts, &mut outcome, progress)?;
        }
    }
    if outcome.reports.is_empty() {
        let why: Vec<String> = outcome
            .skipped
            .iter()
            .map(|s| format!("{} {}: {}", s.preset, s.fault, s.why))
            .collect();
        return Err(BenchError::InvalidOptions(format!(
            "no selected fault kind applies to the selected presets ({})",
            why.join("; ")
        )));
    }
    Ok(outcome)
}

/// `seg` formatted for the device's target: the block device, or the file system.
fn format_for<D: Segments>(dev: &TortureDevice, opts: &TortureOptions, seg: D) -> Result<D> {
    match dev.target {
        TargetKind::Ftl => format_ftl(dev, seg),
        TargetKind::Fs => fs::format_fs(dev, seg, opts.journal_blocks),
    }
}

/// A copy of the formatted part kept in `base`, formatted by `format` the first time: every
/// case of a preset starts from the same image.
fn formatted_once<D: Clone>(base: &mut Option<D>, format: impl FnOnce() -> Result<D>) -> Result<D> {
    match base {
        Some(d) => Ok(d.clone()),
        None => Ok(base.insert(format()?).clone()),
    }
}

fn unknown_workload(name: &str) -> BenchError {
    BenchError::InvalidOptions(format!("no workload of this target is called {name}"))
}

/// Runs the workload called `name` on copies of the formatted part `base`.
fn run_copies<D: SimSegments>(
    base: D,
    dev: &TortureDevice,
    fault: Fault,
    name: &str,
    opts: &TortureOptions,
    tick: &mut dyn FnMut(u64, u64),
) -> Result<(Report, Vec<Violation>)> {
    run_named(&move |_| Ok(base.clone()), dev, fault, name, opts, tick)
}

/// Runs the workload called `name` (the target's kind of workload) under `fault`.
fn run_named<D: SimSegments>(
    base: &dyn Fn(u64) -> Result<D>,
    dev: &TortureDevice,
    fault: Fault,
    name: &str,
    opts: &TortureOptions,
    tick: &mut dyn FnMut(u64, u64),
) -> Result<(Report, Vec<Violation>)> {
    match dev.target {
        TargetKind::Ftl => {
            let w = Workload::from_name(name).ok_or_else(|| unknown_workload(name))?;
            run_ftl(base, dev, fault, w, opts, tick)
        }
        TargetKind::Fs => {
            let w = FsWorkload::from_name(name).ok_or_else(|| unknown_workload(name))?;
            run_fs(base, dev, fault, w, opts, tick)
        }
    }
}

/// Runs every fault kind and workload of `opts` on one torture device (one target).
fn run_preset(
    dev: &TortureDevice,
    opts: &TortureOptions,
    outcome: &mut Outcome,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<()> {
    let target = dev.target;
    let mut nor_base = None;
    let mut nand_base = None;
    let mut nvram_base = None;
    let mut hybrid_base = None;
    let mut hybrid_nor_base = None;
    let formatted_nand = |seg| format_for(dev, opts, seg);
    let formatted_hybrid = |nand| format_for(dev, opts, nvram_beside(dev, nand)?);
    for &fault in &opts.faults {
        if let Some(why) = fault.not_applicable(&dev.spec) {
            let s = Skipped {
                preset: dev.preset.to_string(),
                fault,
                why,
            };
            if !outcome.skipped.contains(&s) {
                outcome.skipped.push(s);
            }
            continue;
        }
        let names: Vec<String> = match target {
            TargetKind::Ftl => opts.workloads.iter().map(|w| w.name().into()).collect(),
            TargetKind::Fs => opts.fs_workloads.iter().map(|w| w.name().into()).collect(),
        };
        for name in names {
            let label = format!("{} {} {} {}", dev.preset, target, fault, name);
            let mut tick = |done, total| progress(&label, done, total);
            let (report, violations) = match dev.spec {
                // A volume on two devices: the factory bad blocks on its NAND.
                _ if dev.nvram.is_some() && fault == Fault::BadBlocks => {
                    let base = |seed| formatted_bad_block_part(dev, seed, &formatted_hybrid);
                    run_named(&base, dev, fault, &name, opts, &mut tick)?
                }
                DeviceSpec::Nor(_) if dev.nvram.is_some() => {
                    let base = formatted_once(&mut hybrid_nor_base, || {
                        format_for(dev, opts, hybrid_nor_part(dev)?)
                    })?;
                    run_copies(base, dev, fault, &name, opts, &mut tick)?
                }
                _ if dev.nvram.is_some() => {
                    let base = formatted_once(&mut hybrid_base, || {
                        format_for(dev, opts, hybrid_part(dev, 1)?)
                    })?;
                    run_copies(base, dev, fault, &name, opts, &mut tick)?
                }
                DeviceSpec::Nor(_) => {
                    let base =
                        formatted_once(&mut nor_base, || format_for(dev, opts, nor_part(dev)?))?;
                    run_copies(base, dev, fault, &name, opts, &mut tick)?
                }
                DeviceSpec::Nand(_) if fault == Fault::BadBlocks => {
                    let base = |seed| formatted_bad_block_part(dev, seed, &formatted_nand);
                    run_named(&base, dev, fault, &name, opts, &mut tick)?
                }
                DeviceSpec::Nand(_) => {
                    let base =
                        formatted_once(&mut nand_base, || formatted_nand(nand_part(dev, 1)?))?;
                    run_copies(base, dev, fault, &name, opts, &mut tick)?
                }
                DeviceSpec::Nvram(_) => {
                    let base = formatted_once(&mut nvram_base, || {
                        format_for(dev, opts, nvram_part(dev)?)
                    })?;
                    run_copies(base, dev, fault, &name, opts, &mut tick)?
                }
            };
            outcome.reports.push(report);
            outcome.violations.extend(violations);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    /// A draw of bad blocks that leaves no room for the volume is drawn again, the same way
    /// for the same seed; other errors stop as before.
    #[test]
    fn a_bad_block_draw_too_small_for_the_volume_is_drawn_again() {
        let dev = torture_device("nand-128m").unwrap();
        let DeviceSpec::Nand(spec) = dev.spec else {
            panic!("nand-128m is NAND")
        };
        let draws = RefCell::new(Vec::new());
        let format = |seg: NandSegments<NandSim>| -> Result<Vec<u32>> {
            let mut seg = seg;
            let bad: Vec<u32> = (0..spec.blocks)
                .filter(|&b| seg.flash_mut().is_bad(b).unwrap_or(false))
                .collect();
            draws.borrow_mut().push(bad.clone());
            if draws.borrow().len() < 3 {
                return Err(Error::InvalidArgument("device too small for a file system"))
                    .context(|| "formatting".into());
            }
            Ok(bad)
        };
        let got = formatted_bad_block_part(&dev, 5, &format).unwrap();
        let tried = draws.take();
        assert_eq!(tried.len(), 3);
        assert_ne!(tried[0], tried[1], "the next draw differs");
        assert_eq!(formatted_bad_block_part(&dev, 5, &format).unwrap(), got);
        let io = |_| -> Result<()> { Err(Error::Io).context(|| "formatting".into()) };
        assert!(matches!(
            formatted_bad_block_part(&dev, 5, &io),
            Err(BenchError::Fs {
                error: Error::Io,
                ..
            })
        ));
    }

    #[test]
    fn workloads_stay_in_range_and_version_each_write_once() {
        for w in Workload::ALL {
            for (sectors, ss) in [(1, 512), (5, 512), (100, 512), (37, 4096)] {
                let ops = w.ops(3, sectors, ss, 150);
                assert_eq!(ops.len(), 150, "{w} {sectors}");
                let mut seen = std::collections::HashSet::new();
                for op in ops {
                    match op {
                        Op::Write {
                            sector,
                            count,
                            version,
                        } => {
                            assert!(count >= 1 && sector + count <= sectors, "{w} {op:?}");
                            assert!(seen.insert(version), "{w}: version {version} twice");
                        }
                        Op::Trim { sector, count } => {
                            assert!(count >= 1 && sector + count <= sectors, "{w} {op:?}")
                        }
                        Op::Flush | Op::Checkpoint | Op::Idle { .. } => {}
                    }
                }
            }
            assert_eq!(Workload::from_name(w.name()), Some(w));
        }
    }

    #[test]
    fn idle_steps_leave_the_workload_as_it_was_and_follow_barriers_mostly() {
        let wait = flashfs::log::region::MIGRATION_WAIT.as_millis() as u32;
        let (mut after_barrier, mut after_other, mut long, mut short) = (0, 0, 0, 0);
        for w in Workload::ALL {
            let plain = w.ops(9, 100, 512, 400);
            let idle = |ms| Op::Idle { ms };
            let ops = idle_steps(plain.clone(), 9, 400, |op| op.is_barrier(), idle);
            assert_eq!(ops.len(), 400, "{w}");
            assert_eq!(
                idle_steps(plain.clone(), 9, 400, |op| op.is_barrier(), idle),
                ops
            );
            let rest: Vec<Op> = ops
                .iter()
                .copied()
                .filter(|op| !matches!(op, Op::Idle { .. }))
                .collect();
            assert!(rest.len() < 400, "{w}: no idle step");
            assert_eq!(rest[..], plain[..rest.len()], "{w}");
            for (i, op) in ops.iter().enumerate() {
                let Op::Idle { ms } = *op else { continue };
                assert!((100..=3000).contains(&ms), "{w}: {ms} ms");
                if ms > wait {
                    long += 1;
                } else {
                    short += 1;
                }
                match i.checked_sub(1).map(|j| ops[j]) {
                    Some(Op::Idle { .. }) | None => panic!("{w}: an idle step at {i} follows none"),
                    Some(before) if before.is_barrier() => after_barrier += 1,
                    Some(_) => after_other += 1,
                }
            }
        }
        assert!(after_barrier > after_other, "{after_barrier} {after_other}");
        assert!(long > 0 && short > long, "{long} {short}");
    }

    #[test]
    fn the_model_accepts_flushed_or_later_and_rejects_older() {
        let mut m = Model::new(2);
        let w = |version| Op::Write {
            sector: 0,
            count: 1,
            version,
        };
        m.issue(w(1));
        m.issue(Op::Flush);
        m.flushed();
        m.issue(w(2));
        assert!(m.check_after_cut(&[Some(1), None]).is_ok());
        assert!(m.check_after_cut(&[Some(2), None]).is_ok());
        assert!(m.check_after_cut(&[None, None]).is_err());
        assert!(m.check_after_cut(&[Some(1), Some(1)]).is_err());
    }

    /// A read failing with EIO says the content was not found, not that it is gone: a map
    /// page of a checkpoint lost to damage fails every sector it maps until a scan rebuilds
    /// the map. A later mount may show what the sector could show before, or EIO, never
    /// anything else (a written sector never as never written).
    #[test]
    fn a_sector_read_as_eio_may_show_what_it_held_at_a_later_mount() {
        let mut m = Model::new(3);
        m.tolerate_unreadable();
        let w = |sector, version| Op::Write {
            sector,
            count: 1,
            version,
        };
        for op in [w(0, 1), w(2, 1), w(2, 2)] {
            m.issue(op);
        }
        m.flushed();
        m.settle(&[UNREADABLE, UNREADABLE, UNREADABLE]);
        assert!(m.check_after_cut(&[Some(1), None, Some(2)]).is_ok());
        assert!(m.check_after_cut(&[UNREADABLE; 3]).is_ok());
        assert!(m.check_after_cut(&[None, None, Some(2)]).is_err());
        assert!(m.check_after_cut(&[Some(1), None, Some(1)]).is_err());
        // Still not found at the next mount: what it held before stays possible.
        m.settle(&[UNREADABLE, None, UNREADABLE]);
        assert!(m.check_after_cut(&[Some(1), None, Some(2)]).is_ok());
        // Found again: strict again.
        m.settle(&[Some(1), None, Some(2)]);
        assert!(m.check_after_cut(&[Some(1), None, Some(2)]).is_ok());
        assert!(m.check_after_cut(&[UNREADABLE; 3]).is_ok());
        assert!(m.check_after_cut(&[None, None, Some(2)]).is_err());
        // A write flushed since supersedes what it held before the EIO.
        m.settle(&[UNREADABLE, None, Some(2)]);
        m.issue(w(0, 3));
        m.flushed();
        assert!(m.check_after_cut(&[Some(3), None, Some(2)]).is_ok());
        assert!(m.check_after_cut(&[Some(1), None, Some(2)]).is_err());
    }

    #[test]
    fn a_damaged_sector_stays_lenient_until_written_again() {
        let mut m = Model::new(2);
        let w = |sector, version| Op::Write {
            sector,
            count: 1,
            version,
        };
        for op in [w(0, 1), w(1, 1), w(0, 2), w(1, 2)] {
            m.issue(op);
        }
        m.flushed();
        m.damaged(&[0]);
        // A mount showed the damaged sector intact: a later one may still show it older.
        m.settle(&[Some(2), Some(2)]);
        assert!(m.check_after_cut(&[Some(1), Some(2)]).is_ok());
        assert!(m.check_after_cut(&[Some(2), Some(1)]).is_err());
        // Written again and flushed: strict again.
        m.issue(w(0, 3));
        m.flushed();
        assert!(m.check_after_cut(&[Some(3), Some(2)]).is_ok());
        assert!(m.check_after_cut(&[Some(2), Some(2)]).is_err());
    }
}
