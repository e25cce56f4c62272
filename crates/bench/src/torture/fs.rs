//! The native file system ([`flashfs::Fs`]) as a torture target: the file-system workloads of
//! [`crate::fswork`], their model ([`Durable`]) as the oracle, and after every remount a
//! clean `fsck` and a walk over the whole namespace compared with every state the volume may
//! show. At the end of a case everything is deleted and the free space must be back to what
//! the empty volume had.

use std::rc::Rc;

use flash::{DeviceSpec, FlashError, NandSpec, NorSpec, NvramSpec};
use flashfs::fs::Timespec;
use flashfs::{BlockDevice, Error, Fs, FsConfig, Segments};

use super::{
    nand_part, nor_part, nvram_part, torture_device, Cuts, Failure, Fault, Interruptible, Oracle,
    SimSegments, Striker, Target, TargetKind, Tolerated, TortureDevice,
};
use crate::error::{BenchError, Context, Result};
use crate::fswork::{
    accepts, apply_fs, apply_model, removal, snapshot, Durable, FsOp, FsWorkload, Tree,
};

/// Free blocks a file-system torture device has at least once formatted: room for the
/// workloads' files ([`fs_ops`] sizes them to a fraction of it) and the index nodes.
pub const FS_MIN_FREE_BLOCKS: u64 = 128;

/// The time every torture volume sees: timestamps do not depend on when a case runs, so a
/// replayed case writes the very same bytes.
fn fixed_clock() -> Timespec {
    Timespec {
        sec: 1_700_000_000,
        nsec: 0,
    }
}

/// The file system's settings for a fault kind: a fixed clock, and for silent failures the
/// log reads back every program ([`flashfs::LogConfig::verify_programs`]). The torture's
/// small devices keep checkpoints, as larger ones do by default, so that a mount after a
/// cut rolls forward from the last one — but not the smallest (seven units of 64 KiB),
/// which their anchors and room would leave too small for the file system. MLC parts run
/// with regions ([`super::TORTURE_REGIONS`]); every part with the torture's wear spread
/// ([`super::TORTURE_WEAR_SPREAD`]); on two devices a file's first block on the NVRAM
/// ([`super::TORTURE_FAST_FILE_BYTES`]). `journal_blocks`
/// as [`FsConfig::journal_blocks`] (`None`: the medium's default).
pub fn fs_config(fault: Fault, journal_blocks: Option<u16>) -> FsConfig {
    let mut c = FsConfig {
        clock: fixed_clock,
        ..FsConfig::default()
    };
    c.ftl.log.regions = Some(super::TORTURE_REGIONS);
    c.ftl.log.wear_spread = super::TORTURE_WEAR_SPREAD;
    c.ftl.log.verify_programs |= fault.verifies_programs();
    c.ftl.log.checkpoint_min_segments = flashfs::log::SEPARATE_HEADS_MIN_SEGMENTS;
    c.ftl.map_cache = super::SMALL_MAP_CACHE;
    c.fast_tier_file_bytes = super::TORTURE_FAST_FILE_BYTES;
    c.journal_blocks = journal_blocks;
    c
}

/// An empty file system formatted on `seg` with `journal_blocks` ([`fs_config`]); gives the
/// device back.
pub fn format_fs<D: Segments>(
    dev: &TortureDevice,
    seg: D,
    journal_blocks: Option<u16>,
) -> Result<D> {
    let what = || format!("formatting the file system on {}", dev.preset);
    Fs::format(seg, fs_config(Fault::PowerCut, journal_blocks))
        .context(what)?
        .unmount()
        .context(what)
}

/// Free blocks of an empty file system formatted on the device, or the error formatting met.
fn free_blocks_of(dev: &TortureDevice) -> std::result::Result<u64, Error> {
    let config = fs_config(Fault::PowerCut, None);
    let free = match dev.spec {
        DeviceSpec::Nor(_) if dev.nvram.is_some() => {
            let seg = super::hybrid_nor_part(dev)
                .map_err(|_| Error::InvalidArgument("no volume on two devices"))?;
            Fs::format(seg, config)?.statfs().blocks_free
        }
        _ if dev.nvram.is_some() => {
            let seg = super::hybrid_part(dev, 1)
                .map_err(|_| Error::InvalidArgument("no volume on two devices"))?;
            Fs::format(seg, config)?.statfs().blocks_free
        }
        DeviceSpec::Nor(_) => {
            let seg = nor_part(dev).map_err(|_| Error::InvalidArgument("no NOR part"))?;
            Fs::format(seg, config)?.statfs().blocks_free
        }
        DeviceSpec::Nvram(_) => {
            let seg = nvram_part(dev).map_err(|_| Error::InvalidArgument("no NVRAM part"))?;
            Fs::format(seg, config)?.statfs().blocks_free
        }
        DeviceSpec::Nand(_) => {
            let seg = nand_part(dev, 1).map_err(|_| Error::InvalidArgument("no NAND part"))?;
            Fs::format(seg, config)?.statfs().blocks_free
        }
    };
    Ok(free)
}

/// The device a preset's file system is tortured on: the block device's torture geometry
/// ([`torture_device`]) where an empty file system has [`FS_MIN_FREE_BLOCKS`] free on it;
/// otherwise that geometry with the number of erase blocks doubled until it does (then, on a
/// NOR part of few units, their size), never beyond the preset's own, and the note says so.
pub fn fs_torture_device(preset: &str) -> Result<TortureDevice> {
    let small = torture_device(preset)?;
    // A volume on two devices grows its flash, the preset named first.
    let flash = preset.split_once('+').map_or(preset, |(flash, _)| flash);
    let full = flash::preset::lookup(flash).context(|| format!("preset {flash:?}"))?;
    let mut dev = TortureDevice {
        target: TargetKind::Fs,
        ..small
    };
    let mut grown = false;
    loop {
        match free_blocks_of(&dev) {
            Ok(free) if free >= FS_MIN_FREE_BLOCKS => break,
            Ok(_) | Err(Error::InvalidArgument(_)) => {}
            Err(e) => {
                return Err(BenchError::InvalidOptions(format!(
                    "{preset}: formatting the file system on its torture geometry: {e}"
                )))
            }
        }
        let spec = match (dev.spec, full.spec) {
            (DeviceSpec::Nor(s), DeviceSpec::Nor(f)) if s.units < f.units => {
                DeviceSpec::Nor(NorSpec {
                    units: (s.units * 2).min(f.units),
                    ..s
                })
            }
            // A part of few units: larger units, up to the preset's.
            (DeviceSpec::Nor(s), DeviceSpec::Nor(f)) if s.unit_size < f.unit_size => {
                DeviceSpec::Nor(NorSpec {
                    unit_size: (s.unit_size * 2).min(f.unit_size),
                    ..s
                })
            }
            (DeviceSpec::Nvram(s), DeviceSpec::Nvram(f)) if s.size < f.size => {
                DeviceSpec::Nvram(NvramSpec {
                    size: (s.size * 2).min(f.size),
                    ..s
                })
            }
            (DeviceSpec::Nand(s), DeviceSpec::Nand(f)) if s.blocks < f.blocks => {
                DeviceSpec::Nand(NandSpec {
                    blocks: (s.blocks * 2).min(f.blocks),
                    ..s
                })
            }
            _ => {
                return Err(BenchError::InvalidOptions(format!(
                    "{preset}: even the whole part is too small for the file system's torture"
                )))
            }
        };
        spec.validate()
            .context(|| format!("the file-system torture geometry of {preset}"))?;
        dev.spec = spec;
        grown = true;
    }
    if grown {
        dev.note = if small.note.is_empty() {
            "more erase blocks than the block device's torture geometry, so the file system fits"
        } else {
            "fewer and smaller erase blocks than the preset, but more than the block device's \
             torture geometry, so the file system fits"
        };
    }
    Ok(dev)
}

/// The workload `w` of `seed`, `n` operations, sized for the volume of `target`: what its
/// files hold at most stays well within the free space, so no operation meets a full
/// volume unless media damage took space away.
pub fn fs_ops<D: SimSegments>(
    w: FsWorkload,
    seed: u64,
    n: usize,
    target: &FsTarget<D>,
) -> Vec<FsOp> {
    let bs = u64::from(target.block_size());
    let free = target.empty_free * bs;
    let (max_write, max_file) = match w {
        // Up to 18 files of at most max_file bytes each.
        FsWorkload::Mixed => {
            let f = (free / 80).clamp(bs, 16 * 1024);
            (f / 2, f)
        }
        // Messages of 200 bytes and more, about half of them deleted again.
        FsWorkload::MailSpool => ((free / 256).clamp(64, 2 * bs), 0),
        // Two log files of up to 40 appends each.
        FsWorkload::AppendLog => ((free / 100).clamp(40, 4 * bs), 0),
        // One file overwritten in place.
        FsWorkload::Database => {
            let f = (free / 8).clamp(4096, 64 * 1024);
            (f.min(4096), f)
        }
        // Records of up to 160 bytes, about 120 of them kept at most.
        FsWorkload::Records => ((free / 150).clamp(20, 160), 0),
        // Three files of at most max_file bytes, written 256 bytes at most at a time.
        FsWorkload::SmallWrites => (256, (free / 40).clamp(2 * bs, 16 * 1024)),
    };
    w.ops(seed, n, max_write.max(1) as u32, max_file)
}

/// What the torture reads back from a remounted file system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FsSeen {
    /// The whole namespace, `fsck` clean.
    Tree(Tree),
    /// Media damage made the volume unreadable in part (a read or `fsck` found it): why.
    Unreadable(String),
}

/// What a file system may show after a cut: the state at its last acknowledged `sync` with
/// any prefix of the operations acknowledged since, each whole — and the operation in flight
/// when the power went, whole, if it was the next.
#[derive(Debug, Clone, Default)]
pub struct FsModel {
    durable: Durable,
    in_flight: Option<FsOp>,
    /// Media damage destroyed stored copies since the last state read back: any state is
    /// accepted (counted) until the next one is read whole.
    lenient: bool,
    /// The last check could not read the volume whole: its state is unknown.
    lost: bool,
}

impl FsModel {
    /// A volume whose whole state `base` is durable.
    pub fn new(base: Tree) -> Self {
        FsModel {
            durable: Durable::new(base),
            ..FsModel::default()
        }
    }

    /// Whether media damage may have changed what the volume shows.
    pub fn lenient(&self) -> bool {
        self.lenient || self.lost
    }

    /// Which state `found` is, or how it differs from the durable one.
    fn matches(&self, found: &Tree) -> std::result::Result<(), String> {
        match self.durable.check(found) {
            Ok(_) => Ok(()),
            Err(why) => match &self.in_flight {
                Some(op) => {
                    let mut d = self.durable.clone();
                    d.since.push(op.clone());
                    d.check(found).map(drop).map_err(|_| why)
                }
                None => Err(why),
            },
        }
    }
}

impl Oracle for FsModel {
    type Op = FsOp;
    type Observation = FsSeen;
    fn issue(&mut self, op: &FsOp) {
        self.in_flight = Some(op.clone());
    }
    fn acknowledge(&mut self, op: &FsOp) {
        self.in_flight = None;
        self.durable.acknowledged(op);
    }
    fn check(&self, seen: &FsSeen) -> std::result::Result<(), String> {
        match seen {
            FsSeen::Unreadable(_) if self.lenient() => Ok(()),
            FsSeen::Unreadable(why) => Err(why.clone()),
            FsSeen::Tree(_) if self.lenient() => Ok(()),
            FsSeen::Tree(t) => self.matches(t),
        }
    }
    fn settle(&mut self, seen: &FsSeen) {
        self.in_flight = None;
        match seen {
            FsSeen::Tree(t) => *self = FsModel::new(t.clone()),
            FsSeen::Unreadable(_) => self.lost = true,
        }
    }
    fn damaged(&mut self, units: &[u64]) {
        if !units.is_empty() {
            self.lenient = true;
        }
    }
    fn tolerated(&self, seen: &FsSeen) -> Tolerated {
        match seen {
            FsSeen::Unreadable(_) => Tolerated {
                unreadable: 1,
                rolled_back: 0,
            },
            FsSeen::Tree(t) if self.lenient() && self.matches(t).is_err() => Tolerated {
                unreadable: 0,
                rolled_back: 1,
            },
            FsSeen::Tree(_) => Tolerated::default(),
        }
    }
}

/// Content seed base of the files [`FsTarget::more_ops`] writes.
const MORE_SEED: u32 = 0x4D4F_5245;

/// The native file system on simulated flash.
#[derive(Debug)]
pub struct FsTarget<D: SimSegments> {
    /// `None` once a mount failed.
    fs: Option<Fs<Interruptible<D>>>,
    /// The device after a mount that the power cut: the next remount uses it.
    parked: Option<Interruptible<D>>,
    /// What [`Interruptible`] tells of its cuts: the device a cut mount leaves, where the
    /// last cut fell.
    kept: Rc<Cuts<D>>,
    config: FsConfig,
    /// Device accesses of the last mount.
    mount_accesses: u64,
    striker: Striker,
    /// Sectors (of the block device under the file system) whose copies damage destroyed.
    damaged: Vec<u64>,
    /// Sectors of the block device under the file system.
    sectors: u64,
    /// Free blocks of the empty volume.
    empty_free: u64,
    /// Blocks and their size.
    blocks: u64,
    block_size: u32,
    /// What the volume holds if every operation since the last check took effect: tells
    /// which operations the file system must refuse.
    expect: Tree,
    /// The last check could not read the volume whole (media damage).
    lost: bool,
}

impl<D: SimSegments> FsTarget<D> {
    /// Mounts the empty file system formatted on `dev`.
    pub fn mount(dev: D, config: FsConfig) -> Result<Self> {
        let kept = Cuts::new();
        let fs = Fs::mount(Interruptible::new(dev, kept.clone()), config)
            .context(|| "mounting the formatted file system".into())?;
        let st = fs.statfs();
        let sectors = fs.ftl().sectors();
        Ok(FsTarget {
            sectors,
            mount_accesses: fs.ftl().log().device().accesses(),
            empty_free: st.blocks_free,
            blocks: st.blocks,
            block_size: st.block_size,
            fs: Some(fs),
            parked: None,
            kept,
            config,
            striker: Striker::default(),
            damaged: Vec::new(),
            expect: Tree::new(),
            lost: false,
        })
    }

    /// Blocks for files and metadata.
    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    /// Bytes per block.
    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    /// Free blocks of the empty volume.
    pub fn empty_free(&self) -> u64 {
        self.empty_free
    }

    /// The file system, while mounted.
    pub fn fs_mut(&mut self) -> Option<&mut Fs<Interruptible<D>>> {
        self.fs.as_mut()
    }

    fn device(&self) -> Option<&Interruptible<D>> {
        match &self.fs {
            Some(f) => Some(f.ftl().log().device()),
            None => self.parked.as_ref(),
        }
    }

    fn device_mut(&mut self) -> Option<&mut Interruptible<D>> {
        match &mut self.fs {
            Some(f) => Some(f.ftl_mut().log_mut().device_mut()),
            None => self.parked.as_mut(),
        }
    }

    fn gone() -> Failure {
        Failure::Error("the volume is not mounted (an earlier mount failed)".into())
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
            e => Failure::Error(format!("{e} (errno {})", e.errno())),
        }
    }

    /// What a check could not read: media damage when the model expects some, else a
    /// violation.
    fn unreadable(
        &mut self,
        lenient: bool,
        e: Error,
        what: &str,
    ) -> std::result::Result<(FsSeen, u64), String> {
        let why = format!("{what}: {e}");
        if lenient && !matches!(e, Error::Flash(FlashError::PowerLoss)) {
            self.lost = true;
            Ok((FsSeen::Unreadable(why), 0))
        } else {
            Err(why)
        }
    }

    fn strike(&mut self) {
        let Some(f) = self.fs.as_mut() else { return };
        let sectors = f.ftl().sectors();
        let dev = f.ftl_mut().log_mut().device_mut().inner_mut();
        let hit = self.striker.strike(dev, sectors);
        self.damaged.extend(hit);
    }
}

/// Whether an error is the file system refusing an operation the model refuses too.
fn refusal(e: &Error) -> bool {
    matches!(
        e,
        Error::NotFound | Error::Exists | Error::NotDir | Error::IsDir | Error::NotEmpty
    )
}

impl<D: SimSegments> Target for FsTarget<D> {
    type Op = FsOp;
    type Model = FsModel;

    fn kind(&self) -> &'static str {
        "fs"
    }

    fn model(&self) -> FsModel {
        FsModel::new(self.expect.clone())
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
        self.fs.is_some() && self.device().is_some_and(Interruptible::powered)
    }

    fn apply(&mut self, op: FsOp) -> std::result::Result<(), Failure> {
        self.strike();
        let must = accepts(&self.expect, &op);
        let lost = self.lost;
        let fs = self.fs.as_mut().ok_or_else(Self::gone)?;
        match apply_fs(fs, &op) {
            Ok(()) if must || lost => {
                apply_model(&mut self.expect, &op);
                Ok(())
            }
            Ok(()) => Err(Failure::Error(
                "it succeeded, but the file system must refuse it".into(),
            )),
            Err(e) if (!must || lost) && refusal(&e) => Ok(()),
            Err(e) => Err(self.failure(e)),
        }
    }

    fn remount(&mut self) -> std::result::Result<(), Failure> {
        self.remount_cut(u64::MAX, false)
    }

    fn observe(&mut self, model: &FsModel) -> std::result::Result<(FsSeen, u64), String> {
        let lenient = model.lenient() || self.lost;
        let Some(fs) = self.fs.as_mut() else {
            return Err(Self::gone().to_string());
        };
        let report = match fs.check(false) {
            Ok(r) => r,
            Err(e) => return self.unreadable(lenient, e, "fsck"),
        };
        if !report.is_clean() {
            let what: Vec<&str> = report.problems.iter().take(3).map(|p| &*p.what).collect();
            let why = format!(
                "fsck finds {} problem(s): {}",
                report.problems.len(),
                what.join("; ")
            );
            if lenient {
                self.lost = true;
                return Ok((FsSeen::Unreadable(why), 0));
            }
            return Err(why);
        }
        match snapshot(fs) {
            Ok((tree, bytes)) => {
                self.expect.clone_from(&tree);
                self.lost = false;
                Ok((FsSeen::Tree(tree), bytes))
            }
            Err(e) => self.unreadable(lenient, e, "reading the namespace back"),
        }
    }

    fn more_ops(&self, round: u32) -> Vec<FsOp> {
        vec![
            FsOp::Write {
                path: format!("more{round}"),
                off: 0,
                len: 2 * self.block_size,
                seed: MORE_SEED.wrapping_add(round),
            },
            FsOp::Sync,
        ]
    }

    fn is_idle(&self, op: &FsOp) -> bool {
        matches!(op, FsOp::Idle { .. })
    }

    fn cut_on_nvram(&self) -> bool {
        self.kept.on_nvram()
    }

    fn anchor_moves(&self) -> u64 {
        self.fs
            .as_ref()
            .map_or(0, |f| f.ftl().log().stats().anchor_moves)
    }

    fn arm(&mut self, fault: Fault, seed: u64, ops: usize) -> bool {
        let Some(f) = self.fs.as_mut() else {
            return false;
        };
        let dev = f.ftl_mut().log_mut().device_mut().inner_mut();
        self.striker.arm(dev, fault, seed, ops)
    }

    fn damaged(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.damaged)
    }

    fn remount_cut(&mut self, at: u64, torn: bool) -> std::result::Result<(), Failure> {
        let mut dev = match self.fs.take() {
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
        match Fs::mount(dev, self.config) {
            Ok(mut fs) => {
                let d = fs.ftl_mut().log_mut().device_mut();
                self.mount_accesses = d.accesses() - start;
                d.disarm();
                // A torn cut waiting for a mutating operation the mount never made.
                if d.cut_pending() && at != u64::MAX {
                    d.cancel_cut();
                }
                let st = fs.statfs();
                if st.blocks != self.blocks || st.block_size != self.block_size {
                    return Err(Failure::Error(format!(
                        "mount: the volume now has {} blocks of {} bytes, not {} of {}",
                        st.blocks, st.block_size, self.blocks, self.block_size
                    )));
                }
                self.fs = Some(fs);
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

    fn finish(&mut self, model: &FsModel) -> std::result::Result<(), Failure> {
        // After media damage the volume's content is not known exactly: nothing to delete.
        if model.lenient() || self.lost {
            return Ok(());
        }
        let paths: Vec<FsOp> = self
            .expect
            .iter()
            .rev()
            .map(|(p, n)| removal(p, n))
            .collect();
        let fs = self.fs.as_mut().ok_or_else(Self::gone)?;
        let mut r = paths.iter().try_for_each(|op| apply_fs(fs, op));
        if r.is_ok() {
            r = fs.sync();
        }
        let free = fs.statfs().blocks_free;
        if let Err(e) = r {
            return Err(match self.failure(e) {
                Failure::Media(e) => Failure::Media(e),
                e => Failure::Error(format!("deleting everything: {e}")),
            });
        }
        self.expect.clear();
        if free != self.empty_free {
            return Err(Failure::Error(format!(
                "space leak: {free} blocks free after deleting everything, {} when empty",
                self.empty_free
            )));
        }
        Ok(())
    }
}
