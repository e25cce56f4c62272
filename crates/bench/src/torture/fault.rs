//! The faults the torture injects besides plain power cuts, and the device wrapper that cuts
//! the power in the middle of a mount.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::rc::Rc;
use std::time::Duration;

use flash::{DeviceSpec, FlashError};
use flashfs::media::tag::{SegHeader, Tag, TagLayout, TagState};
use flashfs::media::{HeaderState, Tier};
use flashfs::{Error, SegGeometry, Segments};
use serde::Serialize;

use super::sim::Supply;
use super::SimSegments;

/// A kind of fault a torture case injects. Every case cuts the power at least once; the
/// kinds other than [`Fault::PowerCut`] add a fault of the medium or of the recovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fault {
    /// A power cut at a device operation (clean or torn), then a chained second cut.
    PowerCut,
    /// A power cut, then another one while mounting after it (at any device access of the
    /// mount, reads included) or in the first writes of the recovery; then mount again.
    MountCut,
    /// Stuck bit errors within what the ECC corrects, on pages the log holds: invisible.
    EccWithin,
    /// Bit errors beyond what the ECC corrects, on pages the log holds: reads may fail with
    /// EIO, a sector whose newest copy was destroyed may come back older; never wrong bytes.
    EccBeyond,
    /// Programs and erases that report success and do nothing; the log reads every
    /// program back ([`flashfs::LogConfig::verify_programs`]).
    Silent,
    /// The same silent failures with the read-back off: not in the default set, since it
    /// shows what the read-back is for — acknowledged data lost.
    SilentUnverified,
    /// Blocks that wear out during the run (program and erase fail from then on).
    WearOut,
    /// A part with factory bad blocks (10%): they must never be used.
    BadBlocks,
    /// Damage at rest ([`flash::AtRest`]): now and then a few segments lose charge
    /// (retention, worse on worn blocks) and take read disturb, with NAND's ECC applied —
    /// corrected, uncorrectable, or miscorrected into wrong data it passes — and pages that
    /// read as erased. Every read returns bytes a write put there, or a typed error.
    AtRest,
}

impl Fault {
    /// Every kind, in report order.
    pub const ALL: [Fault; 8] = [
        Fault::PowerCut,
        Fault::MountCut,
        Fault::EccWithin,
        Fault::EccBeyond,
        Fault::Silent,
        Fault::WearOut,
        Fault::BadBlocks,
        Fault::AtRest,
    ];

    /// Name in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Fault::PowerCut => "power-cut",
            Fault::MountCut => "mount-cut",
            Fault::EccWithin => "ecc-within",
            Fault::EccBeyond => "ecc-beyond",
            Fault::Silent => "silent",
            Fault::SilentUnverified => "silent-unverified",
            Fault::WearOut => "wear-out",
            Fault::BadBlocks => "bad-blocks",
            Fault::AtRest => "at-rest",
        }
    }

    /// Parses a name.
    pub fn from_name(s: &str) -> Option<Fault> {
        Fault::ALL
            .into_iter()
            .chain([Fault::SilentUnverified])
            .find(|f| f.name() == s)
    }

    /// Whether the log reads back every program under this fault.
    pub fn verifies_programs(self) -> bool {
        self == Fault::Silent
    }

    /// Why the fault does not apply to a medium, or `None` when it does.
    pub fn not_applicable(self, spec: &DeviceSpec) -> Option<&'static str> {
        match (self, spec) {
            (Fault::EccWithin | Fault::EccBeyond, DeviceSpec::Nor(_)) => {
                Some("NOR has no ECC: the simulator models no bit errors it would correct")
            }
            (Fault::BadBlocks, DeviceSpec::Nor(_)) => Some("NOR has no factory bad blocks"),
            (Fault::EccWithin | Fault::EccBeyond, DeviceSpec::Nvram(_)) => {
                Some("NVRAM has no ECC: the simulator models no bit errors it would correct")
            }
            (Fault::BadBlocks, DeviceSpec::Nvram(_)) => Some("NVRAM has no bad blocks"),
            (Fault::WearOut, DeviceSpec::Nvram(_)) => {
                Some("NVRAM is rated for 10^14 writes or more: nothing wears out in a run")
            }
            (Fault::AtRest, DeviceSpec::Nvram(_)) => {
                Some("the simulator models no damage at rest on NVRAM")
            }
            _ => None,
        }
    }

    /// Whether the fault damages the medium, so that typed errors (EIO, a worn-out device,
    /// no space left once blocks retire) are expected and counted rather than violations.
    pub fn damages_media(self) -> bool {
        matches!(
            self,
            Fault::EccBeyond
                | Fault::Silent
                | Fault::SilentUnverified
                | Fault::WearOut
                | Fault::AtRest
        )
    }

    /// A small number identifying the kind in seeds.
    pub(super) fn code(self) -> u64 {
        Fault::ALL
            .iter()
            .position(|&f| f == self)
            .unwrap_or(Fault::ALL.len()) as u64
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What an [`Interruptible`] tells its owner of the cuts it made, through a handle both
/// keep: a copy of the device as a cut during a mount left it (a failed mount consumes the
/// device it was given), and where the last cut fell.
#[derive(Debug)]
pub struct Cuts<D> {
    kept: RefCell<Option<D>>,
    on_nvram: Cell<bool>,
}

impl<D> Cuts<D> {
    /// A handle for a new device.
    pub fn new() -> Rc<Self> {
        Rc::new(Cuts {
            kept: RefCell::new(None),
            on_nvram: Cell::new(false),
        })
    }

    /// The device a cut during a mount left, once.
    pub fn take_kept(&self) -> Option<D> {
        self.kept.borrow_mut().take()
    }

    /// Whether the last cut fell on an operation of the NVRAM of a volume on two devices
    /// (not on its flash, nor on an access of a mount that programs nothing).
    pub fn on_nvram(&self) -> bool {
        self.on_nvram.get()
    }
}

/// Segments whose power can be cut at any device access, reads included, so that a mount
/// (which only reads) can be interrupted. A clean cut goes at the access itself; a torn one
/// tears the next mutating operation from there. When the power goes while `keep` is set,
/// a copy of the device as the cut left it is kept, because a failed mount consumes the
/// device it was given.
///
/// Every method of the device is forwarded, defaults included, so that the log meets the
/// medium's own reads, limits and tiers as it would without the wrapper.
///
/// Every part of the device hangs on one [`Supply`]: cuts scheduled in mutating operations
/// count those of every part, and a cut takes the power of all.
#[derive(Debug)]
pub struct Interruptible<D> {
    inner: D,
    accesses: u64,
    cut: Option<(u64, bool)>,
    keep: bool,
    kept: Rc<Cuts<D>>,
    supply: Supply,
}

impl<D: SimSegments> Interruptible<D> {
    /// Wraps `inner`; a device kept at a cut, and where each cut fell, go to `kept`.
    pub fn new(inner: D, kept: Rc<Cuts<D>>) -> Self {
        Interruptible {
            inner,
            accesses: 0,
            cut: None,
            keep: false,
            kept,
            supply: Supply::default(),
        }
    }

    /// The device underneath.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The device underneath, mutably.
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// Device accesses so far.
    pub fn accesses(&self) -> u64 {
        self.accesses
    }

    /// Cuts the power once `after` more accesses have been made (torn: tears the next
    /// mutating operation instead), keeping a copy of the device when it goes.
    pub fn arm(&mut self, after: u64, torn: bool) {
        self.cut = Some((self.accesses + after, torn));
        self.keep = true;
    }

    /// Forgets an armed cut that has not fired.
    pub fn disarm(&mut self) {
        self.cut = None;
        self.keep = false;
    }

    /// Mutating operations the simulated parts have made, together.
    pub fn device_ops(&self) -> u64 {
        Supply::ops(&self.inner)
    }

    /// Whether the device has power.
    pub fn powered(&self) -> bool {
        Supply::powered(&self.inner)
    }

    /// Restores the power after a cut.
    pub fn reboot(&mut self) {
        self.supply.reboot(&mut self.inner);
    }

    /// Cuts the power at the `ops`-th mutating operation from now, of whichever part makes
    /// it (torn: tearing it).
    pub fn schedule_cut(&mut self, ops: u64, torn: bool) {
        self.supply.schedule_cut(&mut self.inner, ops, torn);
    }

    /// Whether a cut in mutating operations is scheduled and has not fired.
    pub fn cut_pending(&self) -> bool {
        self.supply.pending()
    }

    /// Forgets every cut scheduled, here and in the parts.
    pub fn cancel_cut(&mut self) {
        self.disarm();
        self.supply.cancel_cut(&mut self.inner);
    }

    fn tick(&mut self) -> flashfs::Result<()> {
        self.accesses += 1;
        match self.cut {
            Some((at, torn)) if self.accesses > at => {
                self.cut = None;
                if torn {
                    self.supply.schedule_cut(&mut self.inner, 0, true);
                    Ok(())
                } else {
                    self.supply.cut_now(&mut self.inner);
                    self.kept.on_nvram.set(false);
                    self.watch();
                    Err(Error::Flash(FlashError::PowerLoss))
                }
            }
            _ => Ok(()),
        }
    }

    fn watch(&mut self) {
        if self.keep && !self.powered() {
            self.keep = false;
            *self.kept.kept.borrow_mut() = Some(self.inner.clone());
        }
    }

    fn access<T>(&mut self, f: impl FnOnce(&mut D) -> flashfs::Result<T>) -> flashfs::Result<T> {
        self.tick()?;
        let up = self.powered();
        self.supply.aim(&mut self.inner);
        let r = f(&mut self.inner);
        match self.supply.settle(&mut self.inner) {
            // The power went during this access: on the NVRAM if that part lost it first
            // (it comes first among the parts of a volume on two devices).
            Some(part) if up => {
                let parts = self.inner.sims().len();
                self.kept.on_nvram.set(parts > 1 && part == 0);
            }
            _ => {}
        }
        self.watch();
        r
    }
}

impl<D: SimSegments> Segments for Interruptible<D> {
    fn geometry(&self) -> SegGeometry {
        self.inner.geometry()
    }
    fn bank_of(&self, seg: u32) -> u32 {
        self.inner.bank_of(seg)
    }
    fn read_header(&mut self, seg: u32) -> flashfs::Result<HeaderState> {
        self.access(|d| d.read_header(seg))
    }
    fn write_header(&mut self, seg: u32, header: &SegHeader) -> flashfs::Result<()> {
        self.access(|d| d.write_header(seg, header))
    }
    fn read_tags(&mut self, seg: u32, out: &mut [TagState]) -> flashfs::Result<()> {
        self.access(|d| d.read_tags(seg, out))
    }
    fn written_end(&mut self, seg: u32, slots: u32) -> flashfs::Result<Option<u32>> {
        self.access(|d| d.written_end(seg, slots))
    }
    fn unwritten(&mut self, seg: u32) -> flashfs::Result<bool> {
        self.access(|d| d.unwritten(seg))
    }
    fn read_written_tags(
        &mut self,
        seg: u32,
        first: u32,
        out: &mut [TagState],
    ) -> flashfs::Result<()> {
        self.access(|d| d.read_written_tags(seg, first, out))
    }
    fn visit_written_tags(
        &mut self,
        seg: u32,
        first: u32,
        visit: &mut dyn FnMut(u32, TagState),
    ) -> flashfs::Result<()> {
        self.access(|d| d.visit_written_tags(seg, first, visit))
    }
    fn read_tag(&mut self, seg: u32, slot: u32) -> flashfs::Result<TagState> {
        self.access(|d| d.read_tag(seg, slot))
    }
    fn read_slot(&mut self, seg: u32, slot: u32, buf: &mut [u8]) -> flashfs::Result<()> {
        self.access(|d| d.read_slot(seg, slot, buf))
    }
    fn read_slot_tag(&mut self, seg: u32, slot: u32, buf: &mut [u8]) -> flashfs::Result<TagState> {
        self.access(|d| d.read_slot_tag(seg, slot, buf))
    }
    fn read_slot_corrected(&mut self, seg: u32, slot: u32, buf: &mut [u8]) -> flashfs::Result<u32> {
        self.access(|d| d.read_slot_corrected(seg, slot, buf))
    }
    fn read_slot_scrubbed(
        &mut self,
        seg: u32,
        slot: u32,
        buf: &mut [u8],
    ) -> flashfs::Result<(TagState, Option<u32>)> {
        self.access(|d| d.read_slot_scrubbed(seg, slot, buf))
    }
    fn ecc_strength(&self) -> u32 {
        self.inner().ecc_strength()
    }
    fn tag_layout(&self) -> TagLayout {
        self.inner.tag_layout()
    }
    fn max_key(&self) -> u32 {
        self.inner.max_key()
    }
    fn max_seq(&self) -> u64 {
        self.inner.max_seq()
    }
    fn tier(&self, seg: u32) -> Tier {
        self.inner.tier(seg)
    }
    fn is_tiered(&self) -> bool {
        self.inner.is_tiered()
    }
    fn write_slot(&mut self, seg: u32, slot: u32, tag: &Tag, data: &[u8]) -> flashfs::Result<()> {
        self.access(|d| d.write_slot(seg, slot, tag, data))
    }
    fn write_slot_verified(
        &mut self,
        seg: u32,
        slot: u32,
        tag: &Tag,
        data: &[u8],
    ) -> flashfs::Result<()> {
        self.access(|d| d.write_slot_verified(seg, slot, tag, data))
    }
    fn slot_erased(&mut self, seg: u32, slot: u32) -> flashfs::Result<bool> {
        self.access(|d| d.slot_erased(seg, slot))
    }
    fn can_patch(&self) -> bool {
        self.inner.can_patch()
    }
    fn patch_slot(
        &mut self,
        seg: u32,
        slot: u32,
        offset: usize,
        bytes: &[u8],
    ) -> flashfs::Result<()> {
        self.access(|d| d.patch_slot(seg, slot, offset, bytes))
    }
    fn risks_earlier_slot(&self, slot: u32) -> bool {
        self.inner.risks_earlier_slot(slot)
    }
    fn has_slc_mode(&self) -> bool {
        self.inner.has_slc_mode()
    }
    fn set_slc(&mut self, seg: u32, slc: bool) -> flashfs::Result<()> {
        self.inner.set_slc(seg, slc)
    }
    fn units_per_segment(&self) -> u32 {
        self.inner.units_per_segment()
    }
    fn patch_align(&self) -> u32 {
        self.inner.patch_align()
    }
    fn rated_cycles(&self) -> u32 {
        self.inner.rated_cycles()
    }
    fn reserved_slots(&self) -> u32 {
        self.inner.reserved_slots()
    }
    fn erase(&mut self, seg: u32, background: bool) -> flashfs::Result<()> {
        self.access(|d| d.erase(seg, background))
    }
    fn is_bad(&mut self, seg: u32) -> flashfs::Result<bool> {
        self.access(|d| d.is_bad(seg))
    }
    fn is_retired(&mut self, seg: u32) -> flashfs::Result<bool> {
        self.access(|d| d.is_retired(seg))
    }
    fn mark_bad(&mut self, seg: u32) -> flashfs::Result<()> {
        self.access(|d| d.mark_bad(seg))
    }
    fn sync(&mut self) -> flashfs::Result<()> {
        self.access(|d| d.sync())
    }
    fn program_waiting(&mut self) -> flashfs::Result<()> {
        self.access(|d| d.program_waiting())
    }
    fn power_cut(&mut self) {
        self.inner.power_cut()
    }
    fn resume_slot(&mut self, seg: u32, used: u32) -> flashfs::Result<Option<u32>> {
        self.access(|d| d.resume_slot(seg, used))
    }
    fn now(&self) -> Duration {
        self.inner.now()
    }
    fn idle(&mut self, d: Duration) {
        self.inner.idle(d)
    }
    fn erase_time(&self) -> Duration {
        self.inner.erase_time()
    }
}

/// Sectors a trim or loss record names: its payload is a count (u16 LE), then (start u32 LE,
/// count u32 LE) ranges (SPEC.md). Ranges are clipped to `sectors`.
pub(super) fn record_sectors(payload: &[u8], sectors: u64) -> Vec<u64> {
    let n = match payload.get(..2) {
        Some(b) => u16::from_le_bytes([b[0], b[1]]) as usize,
        None => return Vec::new(),
    };
    let mut out = Vec::new();
    for c in payload.get(2..).unwrap_or(&[]).chunks_exact(8).take(n) {
        let start = u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as u64;
        let count = u32::from_le_bytes([c[4], c[5], c[6], c[7]]) as u64;
        let end = start.saturating_add(count).min(sectors);
        out.extend(start.min(end)..end);
    }
    out
}
