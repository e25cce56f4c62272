//! Power-loss torture: run a workload on a target that lives on simulated flash, cut the power
//! at a device operation (cleanly, or tearing that operation), reboot, remount and check that
//! what the target shows is a state that existed (rule 3 of the design): every sector holds
//! the value it had at the last acknowledged flush, or a value written to it since — never
//! torn data, never something older, never a mount error.
//!
//! The pieces:
//!
//! - [`Op`], [`Workload`] and [`workload`]: reproducible block-device workloads.
//! - [`Model`]: what each sector may hold after a cut ([`Oracle`] in general).
//! - [`Target`]: a system under test. [`FtlTarget`] is the block device ([`flashfs::Ftl`]) on
//!   a simulated NOR or NAND part; a file-system target plugs in the same way, with its own
//!   operations and model.
//! - [`run_case`]: one case — a workload, a first cut, a chained second cut during the
//!   continued run, a little more writing and a final remount — checked after each remount.
//! - [`run`]: cases over presets and workloads, exhaustively over every cut point or at random
//!   ones, summed up as [`Report`]s, with every [`Violation`] and the command line that
//!   replays it.
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

use std::fmt;

use flash::{DeviceSpec, FlashError, ImageMeta, NandSim, NandSpec, NorSim, NorSpec, Simulated};
use flashfs::{BlockDevice, Error, Ftl, FtlConfig, NandSegments, NorSegments, Segments};
use serde::Serialize;

use crate::error::{BenchError, Context, Result};

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
/// trims, 12% flushes, at uniformly random places.
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

/// Content a sector holds: `None` for zeros (never written, or trimmed), else the version.
pub type Content = Option<u32>;

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
        }
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
                    self.since[k as usize].push(Some(version));
                    self.history[k as usize].push(version);
                    self.current[k as usize] = Some(version);
                }
            }
            Op::Trim { sector, count } => {
                for k in sector..sector + count {
                    self.since[k as usize].push(None);
                    self.current[k as usize] = None;
                }
            }
            Op::Flush => {}
        }
    }

    /// Records that a flush was acknowledged.
    pub fn flushed(&mut self) {
        self.flushed.clone_from(&self.current);
        self.since.iter_mut().for_each(Vec::clear);
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
            if *got != self.flushed[k] && !self.since[k].contains(got) {
                return Err(format!(
                    "sector {k}: read {got:?}, flushed {:?}, written since {:?}",
                    self.flushed[k], self.since[k]
                ));
            }
        }
        Ok(())
    }

    /// Pins the model to what was found after a cut (the device's state is now that).
    pub fn settle(&mut self, read: &[Content]) {
        self.current = read.to_vec();
        self.flushed();
    }
}

impl Oracle for Model {
    type Op = Op;
    type Observation = Vec<Content>;
    fn issue(&mut self, op: &Op) {
        Model::issue(self, *op);
    }
    fn acknowledge(&mut self, op: &Op) {
        if *op == Op::Flush {
            self.flushed();
        }
    }
    fn check(&self, seen: &Vec<Content>) -> std::result::Result<(), String> {
        self.check_after_cut(seen)
    }
    fn settle(&mut self, seen: &Vec<Content>) {
        Model::settle(self, seen);
    }
}

/// Applies an operation to a block device.
pub fn apply<B: BlockDevice>(dev: &mut B, op: Op) -> flashfs::Result<()> {
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
    }
}

/// Reads every sector and says which version it holds (`Err` if a read fails or a sector
/// holds content no write in `versions` put there).
pub fn read_all<B: BlockDevice>(
    dev: &mut B,
    versions: &[Vec<u32>],
) -> std::result::Result<Vec<Content>, String> {
    let ss = dev.sector_size();
    let mut buf = vec![0u8; ss];
    let mut out = Vec::new();
    for k in 0..dev.sectors() {
        dev.read(k, &mut buf)
            .map_err(|e| format!("read of sector {k}: {e}"))?;
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
    /// Any other error, as text.
    Error(String),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::PowerLoss => f.write_str("power loss"),
            Failure::Error(e) => f.write_str(e),
        }
    }
}

/// A system under test, mounted on a simulated device whose power can be cut.
pub trait Target {
    /// Operations of its workloads.
    type Op: Copy + fmt::Debug;
    /// The model of what it may show after a cut.
    type Model: Oracle<Op = Self::Op>;
    /// What reports call it ("ftl"; a file system would be "fs").
    fn kind(&self) -> &'static str;
    /// A model of the freshly formatted target.
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
}

/// Segments on a simulated part: what [`FtlTarget`] needs for fault control.
pub trait SimSegments: Segments + Clone {
    /// The simulator underneath.
    fn sim(&self) -> &dyn Simulated;
    /// The simulator underneath, mutably.
    fn sim_mut(&mut self) -> &mut dyn Simulated;
}

impl SimSegments for NorSegments<NorSim> {
    fn sim(&self) -> &dyn Simulated {
        self.flash()
    }
    fn sim_mut(&mut self) -> &mut dyn Simulated {
        self.flash_mut()
    }
}

impl SimSegments for NandSegments<NandSim> {
    fn sim(&self) -> &dyn Simulated {
        self.flash()
    }
    fn sim_mut(&mut self) -> &mut dyn Simulated {
        self.flash_mut()
    }
}

/// Version base of the writes [`FtlTarget::more_ops`] makes (above any workload's).
pub const MORE_VERSION: u32 = 1 << 30;

/// The block device on simulated flash.
#[derive(Debug)]
pub struct FtlTarget<D: SimSegments> {
    /// `None` once a mount failed: the device is gone with it.
    ftl: Option<Ftl<D>>,
    config: FtlConfig,
    sectors: u64,
    sector_size: usize,
}

impl<D: SimSegments> FtlTarget<D> {
    /// Mounts the block device formatted on `dev`.
    pub fn mount(dev: D, config: FtlConfig) -> Result<Self> {
        let ftl = Ftl::mount(dev, config).context(|| "mounting the formatted device".into())?;
        Ok(FtlTarget {
            sectors: ftl.sectors(),
            sector_size: ftl.sector_size(),
            ftl: Some(ftl),
            config,
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
    pub fn ftl_mut(&mut self) -> Option<&mut Ftl<D>> {
        self.ftl.as_mut()
    }

    fn gone() -> Failure {
        Failure::Error("the device is not mounted (an earlier mount failed)".into())
    }
}

fn failure(e: Error) -> Failure {
    match e {
        Error::Flash(FlashError::PowerLoss) => Failure::PowerLoss,
        e => Failure::Error(e.to_string()),
    }
}

impl<D: SimSegments> Target for FtlTarget<D> {
    type Op = Op;
    type Model = Model;

    fn kind(&self) -> &'static str {
        "ftl"
    }

    fn model(&self) -> Model {
        Model::new(self.sectors)
    }

    fn device_ops(&self) -> u64 {
        self.ftl
            .as_ref()
            .map_or(0, |f| f.log().device().sim().ops())
    }

    fn schedule_cut(&mut self, ops: u64, torn: bool) {
        if let Some(f) = self.ftl.as_mut() {
            f.log_mut().device_mut().sim_mut().schedule_cut(ops, torn);
        }
    }

    fn cancel_cut(&mut self) {
        if let Some(f) = self.ftl.as_mut() {
            let sim = f.log_mut().device_mut().sim_mut();
            let mut faults = sim.faults().clone();
            faults.cut = None;
            sim.set_faults(faults);
        }
    }

    fn powered(&self) -> bool {
        self.ftl
            .as_ref()
            .is_some_and(|f| f.log().device().sim().is_powered())
    }

    fn apply(&mut self, op: Op) -> std::result::Result<(), Failure> {
        let ftl = self.ftl.as_mut().ok_or_else(Self::gone)?;
        apply(ftl, op).map_err(failure)
    }

    fn remount(&mut self) -> std::result::Result<(), Failure> {
        let mut dev = self.ftl.take().ok_or_else(Self::gone)?.into_device();
        dev.sim_mut().reboot();
        let ftl =
            Ftl::mount(dev, self.config).map_err(|e| Failure::Error(format!("mount: {e}")))?;
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

    fn observe(&mut self, model: &Model) -> std::result::Result<(Vec<Content>, u64), String> {
        let ftl = self.ftl.as_mut().ok_or_else(|| Self::gone().to_string())?;
        let read = read_all(ftl, model.history())?;
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
}

/// One case: a workload seed, the first cut and whether it tears its operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Case {
    /// Seed of the workload (and of the chained second cut).
    pub seed: u64,
    /// Device operations that complete before the first cut.
    pub cut: u64,
    /// Whether the operation at the cut is torn (left half done) rather than not started.
    pub torn: bool,
}

/// What one case measured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CaseResult {
    /// Power cuts that fired (0–2).
    pub cuts: u64,
    /// Mounts after a cut or a clean unmount.
    pub remounts: u64,
    /// Bytes read back and checked against the model.
    pub bytes_verified: u64,
    /// The first violation of rule 3, if any (the case stops there).
    pub violation: Option<String>,
}

/// Runs `ops` on `target` from `*at` until they end or the power goes; `Ok(true)` when the
/// power went.
fn run_ops<T: Target>(
    target: &mut T,
    model: &mut T::Model,
    ops: &[T::Op],
    at: &mut usize,
) -> std::result::Result<bool, String> {
    while *at < ops.len() {
        let op = ops[*at];
        model.issue(&op);
        *at += 1;
        match target.apply(op) {
            Ok(()) => model.acknowledge(&op),
            Err(Failure::PowerLoss) => return Ok(true),
            Err(Failure::Error(e)) => {
                return Err(format!("operation {} ({op:?}) failed: {e}", *at - 1))
            }
        }
        if !target.powered() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Remounts, reads everything back and checks it against the model, then pins the model.
fn remount_and_check<T: Target>(
    target: &mut T,
    model: &mut T::Model,
    res: &mut CaseResult,
    when: &str,
) -> std::result::Result<(), String> {
    target.remount().map_err(|e| format!("{when}: {e}"))?;
    res.remounts += 1;
    let (seen, bytes) = target.observe(model).map_err(|e| format!("{when}: {e}"))?;
    model.check(&seen).map_err(|e| format!("{when}: {e}"))?;
    res.bytes_verified += bytes;
    model.settle(&seen);
    Ok(())
}

/// Runs one case on a freshly mounted `target`: `ops` with the power cut after `case.cut`
/// device operations (torn or clean); remount and check; continue the workload with a second
/// cut at a point drawn from the case; remount and check; write a little more, remount
/// cleanly and check that it all reads back.
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
    let mut model = target.model();
    let mut rng = Rng::new(mix(mix(case.seed, case.cut), case.torn as u64));
    let start = target.device_ops();
    let mut at = 0;
    target.schedule_cut(case.cut, case.torn);
    if run_ops(target, &mut model, ops, &mut at)? {
        res.cuts += 1;
    }
    target.cancel_cut();
    let first = format!("remount after the cut at {}", case.cut);
    remount_and_check(target, &mut model, res, &first)?;
    if at < ops.len() {
        // The chained cut: somewhere in what the rest of the workload should take.
        let spent = target.device_ops().saturating_sub(start).max(1);
        let left = (spent * (ops.len() - at) as u64 / at.max(1) as u64).max(1);
        let (k, torn) = (rng.below(left), rng.below(2) == 1);
        target.schedule_cut(k, torn);
        if run_ops(target, &mut model, ops, &mut at)
            .map_err(|e| format!("after the first cut: {e}"))?
        {
            res.cuts += 1;
        }
        target.cancel_cut();
        let second = format!("remount after the chained cut {k} operations later (torn {torn})");
        remount_and_check(target, &mut model, res, &second)?;
    }
    let more = target.more_ops(1);
    let mut at = 0;
    if run_ops(target, &mut model, &more, &mut at)
        .map_err(|e| format!("writing after recovery: {e}"))?
    {
        return Err("the power went with no cut scheduled".into());
    }
    remount_and_check(target, &mut model, res, "clean remount after writing more")
}

/// The derived, smaller geometry the torture runs a preset with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TortureDevice {
    /// The preset's name.
    pub preset: &'static str,
    /// The device actually simulated.
    pub spec: DeviceSpec,
    /// How it differs from the preset, in words (empty when it is the preset itself).
    pub note: &'static str,
}

/// Erase units (NOR) a torture device keeps at most.
pub const MAX_UNITS: u32 = 16;
/// NOR erase-unit size a torture device keeps at most, in bytes.
pub const MAX_UNIT_BYTES: u32 = 8 * 1024;
/// NAND blocks a torture device keeps at most.
pub const MAX_BLOCKS: u32 = 24;
/// NAND pages per block a torture device keeps at most.
pub const MAX_PAGES_PER_BLOCK: u32 = 16;

/// Bytes per sector (slot) of the block device on NOR.
pub const NOR_SECTOR: u32 = 512;

/// The device a preset is tortured on: its word size, program page, banks, reprogramming,
/// page size, spare area, ECC, cells and timings, but only [`MAX_UNITS`] erase units of at
/// most [`MAX_UNIT_BYTES`] (NOR) or [`MAX_BLOCKS`] blocks of at most [`MAX_PAGES_PER_BLOCK`]
/// pages (NAND), so that the workloads wrap the log and the cleaner runs within a short
/// workload, and each check reads little.
pub fn torture_device(preset: &str) -> Result<TortureDevice> {
    let p = flash::preset::lookup(preset).context(|| format!("preset {preset:?}"))?;
    let (spec, shrunk) = match p.spec {
        DeviceSpec::Nor(s) => {
            let unit = s.unit_size.min(MAX_UNIT_BYTES);
            let per_bank = (MAX_UNITS / s.banks).max(1);
            let units = s.units.min(per_bank * s.banks);
            let d = NorSpec {
                unit_size: unit,
                units,
                ..s
            };
            (DeviceSpec::Nor(d), d != s)
        }
        DeviceSpec::Nand(s) => {
            let per_bank = (MAX_BLOCKS / s.banks).max(1);
            let d = NandSpec {
                blocks: s.blocks.min(per_bank * s.banks),
                pages_per_block: s.pages_per_block.min(MAX_PAGES_PER_BLOCK),
                ..s
            };
            (DeviceSpec::Nand(d), d != s)
        }
        DeviceSpec::Nvram(_) => {
            return Err(BenchError::InvalidOptions(format!(
                "{preset} is NVRAM: the block device needs NOR or NAND flash"
            )))
        }
    };
    spec.validate()
        .context(|| format!("the torture geometry of {preset}"))?;
    Ok(TortureDevice {
        preset: p.name,
        spec,
        note: if shrunk {
            "fewer and smaller erase blocks than the preset"
        } else {
            ""
        },
    })
}

impl TortureDevice {
    /// The geometry in words, e.g. "16 units x 8 KiB, 8 banks".
    pub fn geometry(&self) -> String {
        match self.spec {
            DeviceSpec::Nor(s) => format!(
                "NOR {} units x {} KiB, {} bank(s), {}-byte words",
                s.units,
                s.unit_size / 1024,
                s.banks,
                s.word_size
            ),
            DeviceSpec::Nand(s) => format!(
                "{} {} blocks x {} pages x {} B",
                if s.is_mlc() { "MLC NAND" } else { "NAND" },
                s.blocks,
                s.pages_per_block,
                s.page_size
            ),
            DeviceSpec::Nvram(s) => format!("NVRAM {} B", s.size),
        }
    }
}

/// Options of a torture run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TortureOptions {
    /// Presets to run on (NOR or NAND).
    pub presets: Vec<String>,
    /// Workloads to run.
    pub workloads: Vec<Workload>,
    /// Random cases per preset and workload (each with a first and a chained cut).
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
}

/// Presets a default run covers: a banked parallel NOR, small-page NAND, SPI NOR, MLC NAND.
pub const DEFAULT_PRESETS: [&str; 4] = ["28f008sa", "nand-128m", "w25q64jv", "mlc-flexfs"];

/// Operations per workload unless told otherwise.
pub const DEFAULT_OPS: usize = 200;

impl Default for TortureOptions {
    fn default() -> Self {
        TortureOptions {
            presets: DEFAULT_PRESETS.iter().map(|s| s.to_string()).collect(),
            workloads: Workload::ALL.to_vec(),
            cuts: 100,
            seed: 1,
            ops: DEFAULT_OPS,
            exhaustive: false,
            cut: None,
            torn: false,
        }
    }
}

/// Totals per preset, kind and workload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// Preset.
    pub preset: String,
    /// Target kind ("ftl").
    pub kind: String,
    /// Workload.
    pub workload: Workload,
    /// The geometry actually simulated.
    pub device: String,
    /// Sectors exported and their size.
    pub sectors: u64,
    /// Bytes per sector.
    pub sector_size: usize,
    /// Cases run.
    pub cases: u64,
    /// Power cuts that fired.
    pub cuts: u64,
    /// Mounts after cuts and clean unmounts.
    pub remounts: u64,
    /// Bytes read back and checked against the model.
    pub bytes_verified: u64,
    /// Cases that broke rule 3.
    pub violations: u64,
    /// Device operations the whole workload takes without a cut.
    pub workload_device_ops: u64,
}

/// A case that broke rule 3.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// Preset.
    pub preset: String,
    /// Target kind.
    pub kind: String,
    /// Workload.
    pub workload: Workload,
    /// Operations per workload.
    pub ops: usize,
    /// The case.
    pub case: Case,
    /// What went wrong.
    pub message: String,
}

impl Violation {
    /// The command line that replays exactly this case.
    pub fn reproducer(&self) -> String {
        let mut s = format!(
            "flashfs torture --preset {} --workload {} --seed {} --cut {}",
            self.preset, self.workload, self.case.seed, self.case.cut
        );
        if self.case.torn {
            s.push_str(" --torn");
        }
        if self.ops != DEFAULT_OPS {
            s.push_str(&format!(" --ops {}", self.ops));
        }
        s
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {} seed {} cut {} torn {}: {}",
            self.preset,
            self.kind,
            self.workload,
            self.case.seed,
            self.case.cut,
            self.case.torn,
            self.message
        )
    }
}

/// The whole run.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// One per preset and workload, in the order run.
    pub reports: Vec<Report>,
    /// The devices run on, one per preset.
    pub devices: Vec<TortureDevice>,
    /// Every violation found.
    pub violations: Vec<Violation>,
}

/// Runs cases on any target: `fresh` mounts a new copy of the formatted target.
pub fn torture<T: Target>(
    fresh: &dyn Fn() -> Result<T>,
    ops: &[T::Op],
    cases: &[Case],
    progress: &mut dyn FnMut(u64),
) -> Result<(Vec<CaseResult>, u64)> {
    // Device operations the workload takes without a cut.
    let mut dry = fresh()?;
    let start = dry.device_ops();
    let mut model = dry.model();
    let mut at = 0;
    let _ = run_ops(&mut dry, &mut model, ops, &mut at);
    let total = dry.device_ops() - start;
    let mut out = Vec::with_capacity(cases.len());
    for (i, &case) in cases.iter().enumerate() {
        out.push(run_case(fresh()?, ops, case));
        progress(i as u64 + 1);
    }
    Ok((out, total))
}

/// A formatted block device on the torture geometry of `dev`.
enum Formatted {
    Nor(NorSegments<NorSim>),
    Nand(NandSegments<NandSim>),
}

fn format(dev: &TortureDevice) -> Result<Formatted> {
    let meta = ImageMeta::new(dev.preset, 1);
    let what = || format!("formatting the block device on {}", dev.preset);
    Ok(match dev.spec {
        DeviceSpec::Nor(s) => {
            let sim = NorSim::new(s, meta).context(what)?;
            let seg = NorSegments::new(sim, NOR_SECTOR).context(what)?;
            Formatted::Nor(
                Ftl::format(seg, FtlConfig::default())
                    .context(what)?
                    .into_device(),
            )
        }
        DeviceSpec::Nand(s) => {
            let sim = NandSim::new(s, meta).context(what)?;
            let seg = NandSegments::new(sim).context(what)?;
            Formatted::Nand(
                Ftl::format(seg, FtlConfig::default())
                    .context(what)?
                    .into_device(),
            )
        }
        DeviceSpec::Nvram(_) => {
            return Err(BenchError::InvalidOptions(format!(
                "{} is NVRAM: the block device needs NOR or NAND flash",
                dev.preset
            )))
        }
    })
}

/// The cases of one preset and workload, given the device operations the workload takes.
fn cases(opts: &TortureOptions, total: u64) -> Vec<Case> {
    if let Some(cut) = opts.cut {
        return vec![Case {
            seed: opts.seed,
            cut,
            torn: opts.torn,
        }];
    }
    if opts.exhaustive {
        return (0..total)
            .flat_map(|cut| {
                [false, true].map(|torn| Case {
                    seed: opts.seed,
                    cut,
                    torn,
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
            }
        })
        .collect()
}

/// Runs one preset and workload on the block device.
fn run_ftl<D: SimSegments>(
    base: &D,
    dev: &TortureDevice,
    workload: Workload,
    opts: &TortureOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(Report, Vec<Violation>)> {
    let fresh = || FtlTarget::mount(base.clone(), FtlConfig::default());
    let probe = fresh()?;
    let (sectors, ss) = (probe.sectors(), probe.sector_size());
    let ops_of = |seed| workload.ops(seed, sectors, ss, opts.ops);
    // Device operations of the base seed's workload: the range random cuts are drawn from.
    let (_, total) = torture(&fresh, &ops_of(opts.seed), &[], &mut |_| {})?;
    let cases = cases(opts, total);
    let mut report = Report {
        preset: dev.preset.to_string(),
        kind: probe.kind().to_string(),
        workload,
        device: dev.geometry(),
        sectors,
        sector_size: ss,
        cases: cases.len() as u64,
        cuts: 0,
        remounts: 0,
        bytes_verified: 0,
        violations: 0,
        workload_device_ops: total,
    };
    let mut violations = Vec::new();
    let n = cases.len() as u64;
    let mut done = 0;
    // Cases that share a seed share a workload: generate each once.
    let mut i = 0;
    while i < cases.len() {
        let seed = cases[i].seed;
        let j = i + cases[i..].iter().take_while(|c| c.seed == seed).count();
        let ops = ops_of(seed);
        let (results, _) = torture(&fresh, &ops, &cases[i..j], &mut |k| {
            progress(done + k, n);
        })?;
        for (case, r) in cases[i..j].iter().zip(results) {
            report.cuts += r.cuts;
            report.remounts += r.remounts;
            report.bytes_verified += r.bytes_verified;
            if let Some(message) = r.violation {
                report.violations += 1;
                violations.push(Violation {
                    preset: dev.preset.to_string(),
                    kind: report.kind.clone(),
                    workload,
                    ops: opts.ops,
                    case: *case,
                    message,
                });
            }
        }
        done += (j - i) as u64;
        i = j;
    }
    Ok((report, violations))
}

/// Runs the torture over every preset and workload of `opts`. `progress` hears the label of
/// the (preset, workload) running, cases done and cases in it.
pub fn run(opts: &TortureOptions, progress: &mut dyn FnMut(&str, u64, u64)) -> Result<Outcome> {
    if opts.presets.is_empty() || opts.workloads.is_empty() {
        return Err(BenchError::InvalidOptions(
            "no preset or no workload to run".into(),
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
        let dev = torture_device(preset)?;
        let formatted = format(&dev)?;
        outcome.devices.push(dev);
        for &w in &opts.workloads {
            let label = format!("{} {}", dev.preset, w);
            let mut tick = |done, total| progress(&label, done, total);
            let (report, violations) = match &formatted {
                Formatted::Nor(base) => run_ftl(base, &dev, w, opts, &mut tick)?,
                Formatted::Nand(base) => run_ftl(base, &dev, w, opts, &mut tick)?,
            };
            outcome.reports.push(report);
            outcome.violations.extend(violations);
        }
    }
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

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
                        Op::Flush => {}
                    }
                }
            }
            assert_eq!(Workload::from_name(w.name()), Some(w));
        }
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
}
