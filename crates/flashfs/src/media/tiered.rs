//! A volume on two devices (FRASH, Kim et al.): an NVRAM part beside the flash (NAND, or
//! NOR), each seen as segments of the same shape, numbered one after the other — the
//! NVRAM's first, as the [`Tier::Fast`] tier, then the flash's, the [`Tier::Bulk`] tier
//! (SPEC.md §2.2c).
//!
//! The log sees one device and chooses the tier when a head opens a segment: metadata (the
//! checkpoint, the anchors, the file system's index nodes and journal) to the fast tier,
//! data to the bulk tier, either spilling into the other when its own is full. Each tier
//! keeps its own medium's layout: the NVRAM's segments are NOR segments
//! ([`crate::media::NorSegments`] over [`flash::nvram_nor::NvramNor`]), shaped to hold as
//! many slots as the flash's.
//!
//! One clock: the two parts hang off one controller, which waits for each operation in
//! turn, so the time an NVRAM operation takes is added to the flash's clock (an erase
//! running on the flash goes on meanwhile, as it would).

use core::time::Duration;

use flash::nvram_nor::NvramNor;
use flash::{NandFlash, NorFlash, Nvram};

use super::tag::{SegHeader, Tag, TagLayout, TagState};
use super::{blocks_per_segment_within, HeaderState, NandSegments, NorSegments, SegGeometry};
use super::{Segments, Tier};
use crate::error::{Error, Result};

/// Segments of the flash at most, on a volume on two devices: a mount reads the segment
/// table whole from the NVRAM (19 bytes a segment, SPEC.md §3.5), so capping the count
/// caps the mount's time whatever the flash's size — 512 entries read in about 0.4 ms at
/// FRAM's 85 ns per 16-bit word. Segments are larger instead (on nand-128m, 16 blocks).
pub const MAX_BULK_SEGMENTS: u32 = 512;

/// Segments the NVRAM must hold at least: the two anchors (SPEC.md §3.5), which must lie on
/// it, and one for the metadata head. With so few the metadata soon spills to the flash
/// (the log keeps two NVRAM segments free by cleaning them on its own), but the mount
/// still starts from the NVRAM.
pub const MIN_FAST_SEGMENTS: u32 = 3;

/// NVRAM beside NAND: the volume of FRASH.
pub type NvramNand<N, F> = Tiered<NorSegments<NvramNor<N>>, NandSegments<F>>;

impl<N: Nvram, F: NandFlash> NvramNand<N, F> {
    /// Joins `nvram` and `nand` as a volume's two tiers: the NAND in segments of the
    /// fewest blocks that leave at most [`MAX_BULK_SEGMENTS`], the NVRAM laid out as NOR
    /// in segments holding as many slots.
    pub fn nvram_beside_nand(nvram: N, nand: F) -> Result<Self> {
        let units = blocks_per_segment_within(nand.spec(), MAX_BULK_SEGMENTS);
        let bulk = NandSegments::with_blocks_per_segment(nand, units)?;
        let g = bulk.geometry();
        let fast = NorSegments::with_slots(NvramNor::new(nvram)?, g.slot_size, g.slots)?;
        Tiered::new(fast, bulk)
    }
}

/// NVRAM beside NOR flash: the metadata on the NVRAM, the data on the NOR.
pub type NvramBesideNor<N, F> = Tiered<NorSegments<NvramNor<N>>, NorSegments<F>>;

impl<N: Nvram, F: NorFlash> NvramBesideNor<N, F> {
    /// Joins `nvram` and `nor` as a volume's two tiers: the NOR in the segments it was given
    /// ([`NorSegments::new`] chooses their slots), the NVRAM laid out as NOR in segments
    /// holding as many slots.
    pub fn nvram_beside_nor(nvram: N, bulk: NorSegments<F>) -> Result<Self> {
        let g = bulk.geometry();
        let fast = NorSegments::with_slots(NvramNor::new(nvram)?, g.slot_size, g.slots)?;
        Tiered::new(fast, bulk)
    }
}

/// The fast tier's segments, then the bulk tier's, as one device.
#[derive(Debug, Clone)]
pub struct Tiered<F, B> {
    fast: F,
    bulk: B,
    /// Segments of the fast tier: the bulk tier's are numbered from here.
    split: u32,
}

/// Which device a segment of the volume lies on, and its number there.
enum On {
    Fast(u32),
    Bulk(u32),
}

impl<F: Segments, B: Segments> Tiered<F, B> {
    /// Joins `fast` and `bulk`. Their segments must hold as many slots of the same size, the
    /// fast device at least [`MIN_FAST_SEGMENTS`] of them; the bulk device may not have an
    /// SLC mode (its MSB slots would shape the fast tier's).
    pub fn new(fast: F, bulk: B) -> Result<Self> {
        let (f, b) = (fast.geometry(), bulk.geometry());
        if f.slots != b.slots || f.slot_size != b.slot_size {
            return Err(Error::InvalidArgument(
                "the two devices' segments must hold as many slots of one size",
            ));
        }
        if bulk.has_slc_mode() {
            return Err(Error::Unsupported(
                "a volume on two devices takes SLC flash, not MLC",
            ));
        }
        if f.segments < MIN_FAST_SEGMENTS {
            return Err(Error::InvalidArgument(
                "the NVRAM holds fewer than 3 segments (the two anchors and one for metadata)",
            ));
        }
        Ok(Tiered {
            split: f.segments,
            fast,
            bulk,
        })
    }

    /// The fast device.
    pub fn fast(&self) -> &F {
        &self.fast
    }

    /// The fast device, mutably.
    pub fn fast_mut(&mut self) -> &mut F {
        &mut self.fast
    }

    /// The bulk device.
    pub fn bulk(&self) -> &B {
        &self.bulk
    }

    /// The bulk device, mutably.
    pub fn bulk_mut(&mut self) -> &mut B {
        &mut self.bulk
    }

    /// Gives both devices back.
    pub fn into_inner(self) -> (F, B) {
        (self.fast, self.bulk)
    }

    /// Segments of the fast tier (numbered first).
    pub fn fast_segments(&self) -> u32 {
        self.split
    }

    fn on(&self, seg: u32) -> On {
        match seg.checked_sub(self.split) {
            None => On::Fast(seg),
            Some(s) => On::Bulk(s),
        }
    }

    /// Runs `op` on the fast device and adds the time it took to the volume's clock.
    fn timed<R>(&mut self, op: impl FnOnce(&mut F) -> R) -> R {
        let t0 = self.fast.now();
        let r = op(&mut self.fast);
        let spent = self.fast.now().saturating_sub(t0);
        self.bulk.idle(spent);
        r
    }
}

/// Forwards a call on segment `$seg` to the device it lies on.
macro_rules! on_segment {
    ($self:ident, $seg:expr, |$dev:ident, $s:ident| $call:expr) => {
        match $self.on($seg) {
            On::Fast($s) => $self.timed(|$dev| $call),
            On::Bulk($s) => {
                let $dev = &mut $self.bulk;
                $call
            }
        }
    };
}

impl<F: Segments, B: Segments> Segments for Tiered<F, B> {
    fn geometry(&self) -> SegGeometry {
        let (f, b) = (self.fast.geometry(), self.bulk.geometry());
        SegGeometry {
            segments: f.segments + b.segments,
            slots: b.slots,
            slot_size: b.slot_size,
            banks: f.banks + b.banks,
        }
    }

    fn bank_of(&self, seg: u32) -> u32 {
        match self.on(seg) {
            On::Fast(s) => self.bulk.geometry().banks + self.fast.bank_of(s),
            On::Bulk(s) => self.bulk.bank_of(s),
        }
    }

    fn tier(&self, seg: u32) -> Tier {
        match self.on(seg) {
            On::Fast(_) => Tier::Fast,
            On::Bulk(_) => Tier::Bulk,
        }
    }

    fn is_tiered(&self) -> bool {
        true
    }

    fn read_header(&mut self, seg: u32) -> Result<HeaderState> {
        on_segment!(self, seg, |d, s| d.read_header(s))
    }

    fn write_header(&mut self, seg: u32, header: &SegHeader) -> Result<()> {
        on_segment!(self, seg, |d, s| d.write_header(s, header))
    }

    fn read_tags(&mut self, seg: u32, out: &mut [TagState]) -> Result<()> {
        on_segment!(self, seg, |d, s| d.read_tags(s, out))
    }

    fn read_written_tags(&mut self, seg: u32, first: u32, out: &mut [TagState]) -> Result<()> {
        on_segment!(self, seg, |d, s| d.read_written_tags(s, first, out))
    }

    fn visit_written_tags(
        &mut self,
        seg: u32,
        first: u32,
        visit: &mut dyn FnMut(u32, TagState),
    ) -> Result<()> {
        on_segment!(self, seg, |d, s| d.visit_written_tags(s, first, visit))
    }

    fn read_tag(&mut self, seg: u32, slot: u32) -> Result<TagState> {
        on_segment!(self, seg, |d, s| d.read_tag(s, slot))
    }

    // The volume never programs a written slot again (`can_patch` is false whatever its
    // parts allow), so each part reads only what a slot's write put there.
    fn read_slot(&mut self, seg: u32, slot: u32, buf: &mut [u8]) -> Result<()> {
        self.read_slot_written(seg, slot, buf, 0).map(|_| ())
    }

    fn read_slot_tag(&mut self, seg: u32, slot: u32, buf: &mut [u8]) -> Result<TagState> {
        self.read_slot_written(seg, slot, buf, 0)
    }

    fn read_slot_written(
        &mut self,
        seg: u32,
        slot: u32,
        buf: &mut [u8],
        tail: usize,
    ) -> Result<TagState> {
        // Nothing is programmed in place here, not even a slot's last bytes: what its write
        // left past its written length is all erased.
        let _ = tail;
        on_segment!(self, seg, |d, s| d.read_slot_written(s, slot, buf, 0))
    }

    fn read_slot_corrected(&mut self, seg: u32, slot: u32, buf: &mut [u8]) -> Result<u32> {
        on_segment!(self, seg, |d, s| d.read_slot_corrected(s, slot, buf))
    }

    fn read_slot_scrubbed(
        &mut self,
        seg: u32,
        slot: u32,
        buf: &mut [u8],
    ) -> Result<(TagState, Option<u32>)> {
        on_segment!(self, seg, |d, s| d.read_slot_scrubbed(s, slot, buf))
    }

    fn ecc_strength(&self) -> u32 {
        self.bulk.ecc_strength()
    }

    fn tag_layout(&self) -> TagLayout {
        self.bulk.tag_layout()
    }

    fn max_key(&self) -> u32 {
        self.fast.max_key().min(self.bulk.max_key())
    }

    fn max_seq(&self) -> u64 {
        self.fast.max_seq().min(self.bulk.max_seq())
    }

    fn write_slot(&mut self, seg: u32, slot: u32, tag: &Tag, data: &[u8]) -> Result<()> {
        on_segment!(self, seg, |d, s| d.write_slot(s, slot, tag, data))
    }

    fn write_slot_verified(&mut self, seg: u32, slot: u32, tag: &Tag, data: &[u8]) -> Result<()> {
        on_segment!(self, seg, |d, s| d.write_slot_verified(s, slot, tag, data))
    }

    fn slot_erased(&mut self, seg: u32, slot: u32) -> Result<bool> {
        on_segment!(self, seg, |d, s| d.slot_erased(s, slot))
    }

    fn written_end(&mut self, seg: u32, slots: u32) -> Result<Option<u32>> {
        on_segment!(self, seg, |d, s| d.written_end(s, slots))
    }

    fn unwritten(&mut self, seg: u32) -> Result<bool> {
        on_segment!(self, seg, |d, s| d.unwritten(s))
    }

    fn units_per_segment(&self) -> u32 {
        self.bulk.units_per_segment()
    }

    fn reserved_slots(&self) -> u32 {
        self.bulk.reserved_slots()
    }

    fn rated_cycles(&self) -> u32 {
        self.bulk.rated_cycles()
    }

    fn erase(&mut self, seg: u32, background: bool) -> Result<()> {
        on_segment!(self, seg, |d, s| d.erase(s, background))
    }

    fn is_bad(&mut self, seg: u32) -> Result<bool> {
        on_segment!(self, seg, |d, s| d.is_bad(s))
    }

    fn is_retired(&mut self, seg: u32) -> Result<bool> {
        on_segment!(self, seg, |d, s| d.is_retired(s))
    }

    fn mark_bad(&mut self, seg: u32) -> Result<()> {
        on_segment!(self, seg, |d, s| d.mark_bad(s))
    }

    fn sync(&mut self) -> Result<()> {
        self.timed(|d| d.sync())?;
        self.bulk.sync()
    }

    fn program_waiting(&mut self) -> Result<()> {
        self.timed(|d| d.program_waiting())?;
        self.bulk.program_waiting()
    }

    fn power_cut(&mut self) {
        self.fast.power_cut();
        self.bulk.power_cut();
    }

    fn resume_slot(&mut self, seg: u32, used: u32) -> Result<Option<u32>> {
        on_segment!(self, seg, |d, s| d.resume_slot(s, used))
    }

    fn now(&self) -> Duration {
        self.bulk.now()
    }

    fn idle(&mut self, d: Duration) {
        self.bulk.idle(d);
    }

    fn erase_time(&self) -> Duration {
        self.bulk.erase_time()
    }
}
