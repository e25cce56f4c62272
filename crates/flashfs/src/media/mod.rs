//! Flash seen as segments of slots: the one view of the medium the log needs.
//!
//! A segment is an erase unit (on NOR parts of small units, a few of them: SPEC.md §2.2a).
//! It holds a header, written when the segment is opened, and slots, written in order, each
//! with a tag. On NAND a slot is a page, its tag sits in the page's spare area and page 0
//! holds the header: a page and its tag are programmed in one operation. On NOR the segment
//! starts with the header and a summary of tags (Kawaguchi's segment summary), followed by
//! the slots; a slot's data is programmed before its tag, so
//! a tag that reads valid vouches for its data.
//!
//! Beside each tag lies a checksum of its slot's data (SPEC.md §2.4), checked by every
//! [`Segments::read_slot`]: data that does not match it, or a slot that reads as erased
//! where the caller expects data, is [`Error::Io`], like a page ECC cannot correct.

pub mod tag;
pub mod tiered;

use core::time::Duration;

use flash::{CellMode, FlashError, NandFlash, NorFlash, PageAddr};

use crate::error::{Error, Result};
use tag::{NorEntry, SegHeader, Tag, TagLayout, TagState, ENTRY_LEN, HEADER_LEN};

/// Slots in a row that read as erased whole (tag and data) and end what a segment holds,
/// for a reader going a tag at a time ([`Segments::read_written_tags`]). Only slots an SLC
/// segment writes count: on MLC NAND the log leaves MSB slots erased (one at a flush, and
/// every one in a segment in SLC mode, SPEC.md §4.2a), so the run counts LSB slots, passing
/// over erased MSB ones. Between two written slots that count the log leaves none erased;
/// the run of three tolerates written pages that read as erased (damage) before the end.
pub const WRITTEN_END_RUN: u32 = 3;

/// Shape of a segmented device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegGeometry {
    /// Segments (erase units, or groups of them).
    pub segments: u32,
    /// Slots per segment.
    pub slots: u32,
    /// Data bytes per slot.
    pub slot_size: u32,
    /// Banks that erase and program independently.
    pub banks: u32,
}

/// What a segment's header area holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderState {
    /// Erased: the segment was never opened since its last erase.
    Erased,
    /// Unreadable or not a header (torn, or foreign data): erase before use.
    Garbage,
    /// The segment was retired as bad.
    Bad,
    /// A header.
    Valid(SegHeader),
}

/// Which device of a volume a segment lies on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// Byte-addressable NVRAM beside the flash: where metadata goes (FRASH). Its segments
    /// wear without limit that matters, so the wear leveller leaves them out.
    Fast,
    /// The flash: where data goes, and everything on a volume of one device.
    Bulk,
}

/// A flash device seen as segments of slots.
pub trait Segments {
    /// The shape.
    fn geometry(&self) -> SegGeometry;
    /// Bank of a segment.
    fn bank_of(&self, seg: u32) -> u32;
    /// Reads a segment's header.
    fn read_header(&mut self, seg: u32) -> Result<HeaderState>;
    /// Writes the header of an erased segment.
    fn write_header(&mut self, seg: u32, header: &SegHeader) -> Result<()>;
    /// Reads the tags of a segment's slots into `out`: one per slot, or fewer for the
    /// first `out.len()` slots only.
    fn read_tags(&mut self, seg: u32, out: &mut [TagState]) -> Result<()>;
    /// Reads the tags of slots `first..` of a segment into `out[first..]` up to the end of
    /// what the segment holds: a medium reading a tag at a time (NAND) stops after
    /// [`WRITTEN_END_RUN`] slots in a row that read as erased whole, tag and data, and
    /// leaves the tags past them as `out` held them (the caller fills it with
    /// [`TagState::Erased`]); what `out[..first]` then holds is unspecified (a medium whose
    /// tags come in one read reads them all). A mount needs the tags of a head's segment
    /// only past its used count, and only up to where writing stopped.
    fn read_written_tags(&mut self, seg: u32, first: u32, out: &mut [TagState]) -> Result<()> {
        let _ = first;
        self.read_tags(seg, out)
    }
    /// Reads the tags of slots `first..` of a segment as [`Segments::read_written_tags`]
    /// does, handing each to `visit` (slot, tag) in order instead of keeping them: a medium
    /// reading a tag at a time needs no buffer a segment long (on a part of large segments,
    /// tens of KiB). By default through such a buffer.
    fn visit_written_tags(
        &mut self,
        seg: u32,
        first: u32,
        visit: &mut dyn FnMut(u32, TagState),
    ) -> Result<()> {
        let mut tags = alloc::vec![TagState::Erased; self.geometry().slots as usize];
        self.read_written_tags(seg, first, &mut tags)?;
        for (slot, t) in (0..).zip(tags).skip(first as usize) {
            visit(slot, t);
        }
        Ok(())
    }
    /// Reads one slot's tag (by default through [`Segments::read_tags`]).
    fn read_tag(&mut self, seg: u32, slot: u32) -> Result<TagState> {
        let mut tags = alloc::vec![TagState::Erased; self.geometry().slots as usize];
        self.read_tags(seg, &mut tags)?;
        Ok(tags
            .get(slot as usize)
            .copied()
            .unwrap_or(TagState::Garbage))
    }
    /// Reads a slot's data (`buf` is one slot long) and checks it against the checksum
    /// beside its tag: data that does not match, or a slot that reads as erased, is
    /// [`Error::Io`] (damage: the caller reads only slots it knows were written).
    fn read_slot(&mut self, seg: u32, slot: u32, buf: &mut [u8]) -> Result<()>;
    /// Reads a slot's data as [`Segments::read_slot`] does, and its tag with it (in the same
    /// page read on NAND), so the caller can check the slot holds what it expects.
    fn read_slot_tag(&mut self, seg: u32, slot: u32, buf: &mut [u8]) -> Result<TagState> {
        self.read_slot(seg, slot, buf)?;
        self.read_tag(seg, slot)
    }
    /// Reads a slot as [`Segments::read_slot_tag`] does, for a slot that nothing programs in
    /// place but, at most, its last `tail` bytes (an index node's spare area; none for the
    /// log's own slots and for every slot of a volume on two devices, which never patches):
    /// where the part records how much of the slot its write covered (reprogrammable NOR and
    /// NVRAM, SPEC.md §2.2), only those bytes and the last `tail` are read, the bytes
    /// between being the erased ones the write left. On NVRAM and serial NOR every byte
    /// read costs its time, and a node or a record seldom fills its slot.
    fn read_slot_written(
        &mut self,
        seg: u32,
        slot: u32,
        buf: &mut [u8],
        tail: usize,
    ) -> Result<TagState> {
        let _ = tail;
        self.read_slot_tag(seg, slot, buf)
    }
    /// Reads a slot's data as [`Segments::read_slot`] does (`buf` one slot long), and
    /// returns the bit errors the ECC corrected in it: rising counts warn that a block's data is wearing away before
    /// the ECC can no longer hide it (0 where the medium has no ECC).
    fn read_slot_corrected(&mut self, seg: u32, slot: u32, buf: &mut [u8]) -> Result<u32> {
        self.read_slot(seg, slot, buf).map(|()| 0)
    }
    /// Reads a slot's tag and its data for a scrub: the tag, and the bit errors the ECC
    /// corrected in the data, or `None` if the data does not read back (as
    /// [`Segments::read_slot_corrected`] would fail). One page read on NAND.
    fn read_slot_scrubbed(
        &mut self,
        seg: u32,
        slot: u32,
        buf: &mut [u8],
    ) -> Result<(TagState, Option<u32>)> {
        let tag = self.read_tag(seg, slot)?;
        if !matches!(tag, TagState::Valid(_)) {
            return Ok((tag, None));
        }
        match self.read_slot_corrected(seg, slot, buf) {
            Ok(bits) => Ok((tag, Some(bits))),
            Err(Error::Io) => Ok((tag, None)),
            Err(e) => Err(e),
        }
    }
    /// Bit errors one ECC codeword corrects (0: no ECC).
    fn ecc_strength(&self) -> u32 {
        0
    }
    /// How tags and data checksums are laid out in a NAND page's spare area (SPEC.md §2.4);
    /// NOR lays its entries out as [`tag::NorEntry`] (§2.2), and says its limits through
    /// [`Segments::max_key`] and [`Segments::max_seq`].
    fn tag_layout(&self) -> TagLayout {
        TagLayout::Wide
    }
    /// Largest key a slot's tag carries on this medium.
    fn max_key(&self) -> u32 {
        self.tag_layout().max_key()
    }
    /// Largest sequence number a slot's tag carries on this medium.
    fn max_seq(&self) -> u64 {
        self.tag_layout().max_seq()
    }
    /// Writes a slot: data, then tag (atomically on NAND).
    fn write_slot(&mut self, seg: u32, slot: u32, tag: &Tag, data: &[u8]) -> Result<()>;
    /// Writes a slot and reads it back: a slot that does not read back as written is a
    /// failed program (`ProgramFailed`), which catches programs that report success and do
    /// nothing. Where data and tag are programmed apart (NOR), the data is checked before
    /// the tag vouches for it, so a power cut can never leave a tag over unwritten data.
    fn write_slot_verified(&mut self, seg: u32, slot: u32, tag: &Tag, data: &[u8]) -> Result<()> {
        self.write_slot(seg, slot, tag, data)?;
        let mut back = alloc::vec![0u8; self.geometry().slot_size as usize];
        let failed = Error::Flash(FlashError::ProgramFailed { block: seg });
        match self.read_slot(seg, slot, &mut back) {
            Ok(()) if back.get(..data.len()) == Some(data) => {}
            Ok(()) | Err(Error::Io) => return Err(failed),
            Err(e) => return Err(e),
        }
        let mut tags = alloc::vec![TagState::Erased; slot as usize + 1];
        match self.read_tags(seg, &mut tags) {
            Ok(()) if tags[slot as usize] == TagState::Valid(*tag) => Ok(()),
            Ok(()) | Err(Error::Io) => Err(failed),
            Err(e) => Err(e),
        }
    }
    /// Whether a slot (data and tag) is entirely erased, so it can be written.
    fn slot_erased(&mut self, seg: u32, slot: u32) -> Result<bool>;
    /// A slot of `seg`, among its first `slots`, from which on every one of them reads as
    /// erased, found without reading every tag, or `None` where the medium has no cheaper way
    /// than reading them all (its tags come in one read). It rests on the rule that ends
    /// [`Segments::read_written_tags`]: before the last written slot, never
    /// [`WRITTEN_END_RUN`] slots in a row read as erased whole.
    fn written_end(&mut self, seg: u32, slots: u32) -> Result<Option<u32>> {
        let _ = (seg, slots);
        Ok(None)
    }
    /// Whether the first [`WRITTEN_END_RUN`] slots of `seg` read as erased whole, so that by
    /// the same rule no slot of it was written — where the medium tells that in fewer reads
    /// than [`Segments::visit_written_tags`] would take; `false` where it does not, or when
    /// a slot holds anything.
    fn unwritten(&mut self, seg: u32) -> Result<bool> {
        let _ = seg;
        Ok(false)
    }
    /// Whether programming `slot` can destroy what an earlier slot (or the header) of its
    /// segment holds if the power goes during the program: an MSB page of MLC NAND shares its
    /// cells with an LSB page written before it.
    fn risks_earlier_slot(&self, slot: u32) -> bool {
        let _ = slot;
        false
    }
    /// Whether a segment can be put in SLC mode after an erase (MLC NAND, FlexFS): only its
    /// LSB slots are then written (those [`Segments::risks_earlier_slot`] does not name), at
    /// SLC speed and endurance, for half the slots.
    fn has_slc_mode(&self) -> bool {
        false
    }
    /// Puts an erased segment in SLC mode (`true`) or the part's own mode until its next
    /// erase, which brings the own mode back. Media without the mode refuse SLC
    /// (`Unsupported`).
    fn set_slc(&mut self, seg: u32, slc: bool) -> Result<()> {
        let _ = seg;
        if slc {
            return Err(Error::Unsupported("this medium has no SLC mode"));
        }
        Ok(())
    }
    /// Erase units a segment takes (erased together, so each wears as its segment does).
    fn units_per_segment(&self) -> u32 {
        1
    }
    /// Slots of every segment that are never written (on MLC NAND, the MSB partner of the
    /// header page).
    fn reserved_slots(&self) -> u32 {
        0
    }
    /// Whether [`Segments::patch_slot`] works: the medium lets written bytes be programmed
    /// again, clearing more bits (reprogrammable NOR).
    fn can_patch(&self) -> bool {
        false
    }
    /// Bytes the offset and length of a [`Segments::patch_slot`] must be whole multiples
    /// of: the part's word.
    fn patch_align(&self) -> u32 {
        8
    }
    /// Erase cycles each unit is rated for (0: unknown).
    fn rated_cycles(&self) -> u32 {
        0
    }
    /// The tier `seg` lies in: on a volume on two devices ([`tiered::Tiered`]) the
    /// NVRAM's segments are [`Tier::Fast`]; on one device every segment is [`Tier::Bulk`].
    fn tier(&self, seg: u32) -> Tier {
        let _ = seg;
        Tier::Bulk
    }
    /// Whether any segment is [`Tier::Fast`].
    fn is_tiered(&self) -> bool {
        false
    }
    /// Programs `bytes` at `offset` inside the data of the written slot `slot`, in place. The
    /// program only clears bits: every bit of `bytes` that is 1 must still be 1 on flash.
    /// `offset` and the length are whole words of the part. Media without reprogramming
    /// refuse (`Unsupported`).
    fn patch_slot(&mut self, seg: u32, slot: u32, offset: usize, bytes: &[u8]) -> Result<()> {
        let _ = (seg, slot, offset, bytes);
        Err(Error::Unsupported(
            "this medium cannot program written bytes again",
        ))
    }
    /// Erases a segment, in the background when asked (other banks keep working).
    fn erase(&mut self, seg: u32, background: bool) -> Result<()>;
    /// Whether a segment is marked bad.
    fn is_bad(&mut self, seg: u32) -> Result<bool>;
    /// Whether a segment that was good when the log took it has been retired since
    /// ([`Segments::mark_bad`], or a retirement a power cut stopped part-way). A mount asks
    /// this of the few segments it reads (the anchors, those opened since the checkpoint),
    /// where asking [`Segments::is_bad`] reads a mark per block: on NAND the blocks are
    /// marked last first, so the last block's mark answers for a segment of any size.
    fn is_retired(&mut self, seg: u32) -> Result<bool> {
        self.is_bad(seg)
    }
    /// Retires a segment for good.
    fn mark_bad(&mut self, seg: u32) -> Result<()>;
    /// Makes every program so far durable (a barrier): on SPI NOR, programs the tag entries
    /// still waiting in RAM ([`NorSegments`]).
    fn sync(&mut self) -> Result<()>;
    /// Programs what still waits in RAM (SPI NOR's tag entries, [`NorSegments`]) and nothing
    /// else: unlike [`Segments::sync`], it waits for no operation of the device. A medium
    /// programs what waits before its own erases; a volume on two devices asks for it
    /// before an erase on the other part, which may destroy the only other copy of a slot
    /// whose entry waits here.
    fn program_waiting(&mut self) -> Result<()> {
        Ok(())
    }
    /// Forgets what a power cut takes: tag entries still waiting in RAM to be programmed
    /// (SPI NOR, [`NorSegments`]), whose slots a mount then finds as a cut left them. Called
    /// by every mount and format: whatever was not synced is then read as the flash holds it.
    fn power_cut(&mut self) {}
    /// The slot from which a head resumed after a mount may write `seg`, whose last slot
    /// with a tag that reads is `used − 1`, or `None` when none is left: every slot from
    /// there on must read as erased whole, data and tag. A cut between a slot's data and
    /// its tag leaves programmed bytes under an erased tag, which a program over them would
    /// garble; one such slot at most where each tag follows its data at once, so by default
    /// one dirty slot is skipped.
    fn resume_slot(&mut self, seg: u32, used: u32) -> Result<Option<u32>> {
        let slots = self.geometry().slots;
        let mut at = used;
        if at < slots && !self.slot_erased(seg, at)? {
            at += 1;
        }
        if at >= slots || !self.slot_erased(seg, at)? {
            return Ok(None);
        }
        Ok(Some(at))
    }
    /// Device time now.
    fn now(&self) -> Duration;
    /// Lets idle time pass.
    fn idle(&mut self, d: Duration);
    /// How long an erase takes.
    fn erase_time(&self) -> Duration;
}

/// Bytes below which a NOR segment takes several erase units: a segment's header and tags
/// cost the same whatever its size, and on 2 KiB units they leave room for only 3 slots of
/// 512 bytes (75% of the unit) where 4 units hold 15 (94%).
pub const NOR_MIN_SEGMENT: u32 = 8 * 1024;

/// [`NOR_MIN_SEGMENT`] on a part with a program page (SPI NOR), where every program command
/// costs its time whatever its size: a segment's header and tag summary take two commands
/// (SPEC.md §2.2), beside 30 of data in 8 KiB and 60 in 16 KiB.
pub const SPI_NOR_MIN_SEGMENT: u32 = 16 * 1024;

/// NOR flash as segments: per segment (one erase unit, or several consecutive units of one
/// bank where units are smaller than [`NOR_MIN_SEGMENT`]), header, tag summary, then slots
/// of `slot_size`.
#[derive(Debug, Clone)]
pub struct NorSegments<F> {
    flash: F,
    shape: NorShape,
    /// Whether tag entries wait in RAM after their slots' data ([`Pending`]): on parts
    /// with a program page (SPI NOR), where a program command costs its time whatever its
    /// size.
    defers: bool,
    /// Whether programs write their bytes as given (NVRAM, SPEC.md §2.2b): a segment is then
    /// taken back by writing `0xFF` over its header and tag summary only, and a slot is
    /// unwritten when its entry is, whatever its data bytes hold.
    in_place: bool,
    /// Tag entries whose slots' data is programmed, not yet themselves, a run per segment.
    pending: alloc::vec::Vec<Pending>,
}

/// Tag entries of consecutive slots of one segment, waiting to be programmed together
/// (SPEC.md §2.2): a slot whose data is programmed and whose entry is not is what a cut
/// between the two leaves, invisible to a mount, so an entry may wait — until its run
/// reaches the end of a program page (that page's part goes down in one command), the
/// segment's last slot, a sync, an erase, a program in place, or a mark. On the W25Q64JV a
/// 512-byte slot then takes its two data pages and a 13th of a command for its entry,
/// where it took three.
#[derive(Debug, Clone)]
struct Pending {
    seg: u32,
    /// Address of the first byte not yet programmed.
    at: u64,
    bytes: alloc::vec::Vec<u8>,
}

fn round_up(x: u32, to: u32) -> u32 {
    x.div_ceil(to) * to
}

const UNIT_TOO_SMALL: &str = "erase unit too small for one slot";

/// Where a NOR segment's parts lie.
#[derive(Debug, Clone, Copy)]
struct NorShape {
    slot_size: u32,
    /// Slots per segment.
    slots: u32,
    /// Bytes from one tag entry to the next.
    tag_stride: u32,
    /// Where the slots' data starts in a segment.
    data_off: u32,
    /// Erase units per segment.
    units: u32,
    /// Reprogrammable: the entry carries the slot's written length, and the checksum covers
    /// only that prefix (bytes programmed in place later are checked by their owners).
    patchable: bool,
}

impl NorShape {
    /// Segments of `units` erase units of `s` holding at most `max_slots` slots each.
    fn of(s: &flash::NorSpec, slot_size: u32, units: u32, max_slots: u32) -> Result<Self> {
        if !slot_size.is_power_of_two() || slot_size < 64 {
            return Err(Error::InvalidArgument(
                "slot size must be a power of two of at least 64",
            ));
        }
        let size = s.unit_size.saturating_mul(units);
        let word = s.word_size;
        // The entry: tag, CRC-32C of the data and, where erased bytes of a written slot
        // may be programmed later, the length of the data the CRC covers.
        let patchable = s.reprogrammable;
        if patchable && slot_size > NorEntry::MAX_PATCHABLE_SLOT {
            return Err(Error::InvalidArgument(
                "slots of reprogrammable NOR are at most 16 KiB (the written length's field)",
            ));
        }
        let layout = NorEntry::new(patchable);
        let tag_stride = round_up(layout.entry_len() as u32, word);
        let head = round_up(HEADER_LEN as u32, word);
        let mut slots = (size.saturating_sub(head) / (slot_size + tag_stride)).min(max_slots);
        // Where slots are whole program pages (SPI NOR), the data area starts on a page:
        // a slot then takes one program command per page, not one more for the page it
        // would straddle, and each command costs its time whatever its size.
        let page = s.program_page;
        let align = if page > 0 && slot_size % page == 0 {
            page
        } else {
            word
        };
        let data_off = |n: u32| round_up(head + n * tag_stride, align);
        while slots > 0 && data_off(slots) + slots * slot_size > size {
            slots -= 1;
        }
        if slots == 0 {
            return Err(Error::InvalidArgument(UNIT_TOO_SMALL));
        }
        Ok(NorShape {
            slot_size,
            slots,
            tag_stride,
            data_off: data_off(slots),
            units,
            patchable,
        })
    }
}

impl<F: NorFlash> NorSegments<F> {
    /// Views `flash` as segments of slots of `slot_size` bytes (a power of two).
    pub fn new(flash: F, slot_size: u32) -> Result<Self> {
        let units = units_per_segment(flash.spec());
        let shape = NorShape::of(flash.spec(), slot_size, units, u32::MAX)?;
        Ok(Self::from_shape(flash, shape))
    }

    /// Views `flash` as segments of exactly `slots` slots of `slot_size` bytes, each taking
    /// the fewest erase units that hold them: the shape of another device's segments, for
    /// a volume on two devices ([`tiered`]), whose segments must all hold as many slots.
    pub fn with_slots(flash: F, slot_size: u32, slots: u32) -> Result<Self> {
        let s = flash.spec();
        for units in 1..=s.units {
            match NorShape::of(s, slot_size, units, slots) {
                Ok(shape) if shape.slots == slots => return Ok(Self::from_shape(flash, shape)),
                Ok(_) | Err(Error::InvalidArgument(UNIT_TOO_SMALL)) => {}
                Err(e) => return Err(e),
            }
        }
        Err(Error::InvalidArgument("part too small for one segment"))
    }

    fn from_shape(flash: F, shape: NorShape) -> Self {
        let defers = flash.spec().program_page > 0;
        let in_place = flash.writes_in_place();
        NorSegments {
            flash,
            shape,
            defers,
            in_place,
            pending: alloc::vec::Vec::new(),
        }
    }

    /// Programs `entry`, the tag entry of `slot` (whose data is programmed), or leaves it
    /// waiting with the entries before it ([`Pending`]).
    fn put_entry(&mut self, seg: u32, slot: u32, entry: &[u8]) -> Result<()> {
        let at = self.entry_at(seg, slot);
        if !self.defers {
            return self.program_now(at, entry);
        }
        let i = match self.pending.iter().position(|p| p.seg == seg) {
            Some(i) if self.pending[i].at + self.pending[i].bytes.len() as u64 == at => i,
            Some(i) => {
                // Not the next entry of the run (a slot skipped): the run goes down first.
                self.flush(i)?;
                self.pending.push(Pending {
                    seg,
                    at,
                    bytes: alloc::vec::Vec::new(),
                });
                self.pending.len() - 1
            }
            None => {
                self.pending.push(Pending {
                    seg,
                    at,
                    bytes: alloc::vec::Vec::new(),
                });
                self.pending.len() - 1
            }
        };
        self.pending[i].bytes.extend_from_slice(entry);
        // The run's part in a program page it has filled goes down in one command; an entry
        // crossing into the next page is left half programmed until that page's part is,
        // which reads as a torn tag, as a cut inside its program would leave it.
        let page = u64::from(self.flash.spec().program_page);
        let p = &self.pending[i];
        let boundary = (p.at / page + 1) * page;
        if p.at + p.bytes.len() as u64 >= boundary {
            let n = (boundary - p.at) as usize;
            let head = self.pending[i].bytes[..n].to_vec();
            // A failed program keeps the run waiting (see `flush`).
            self.program_now(boundary - n as u64, &head)?;
            self.pending[i].bytes.drain(..n);
            self.pending[i].at = boundary;
        }
        // Nothing follows the last slot: its segment's run is complete.
        if slot + 1 == self.shape.slots || self.pending[i].bytes.is_empty() {
            return self.flush(i);
        }
        Ok(())
    }

    /// Programs the waiting run `i` and drops it. A program that fails (a worn unit) keeps
    /// it waiting: the slots it vouches for still read, so the log, which fails the segment,
    /// has the cleaner move them, and every sync until then fails rather than acknowledge
    /// slots that a cut would lose. A program again over a failed one only clears more of
    /// the bits it was to clear. Erasing or retiring the segment drops its run.
    fn flush(&mut self, i: usize) -> Result<()> {
        let (at, bytes) = (
            self.pending[i].at,
            core::mem::take(&mut self.pending[i].bytes),
        );
        match self.program_now(at, &bytes) {
            Ok(()) => {
                self.pending.remove(i);
                Ok(())
            }
            Err(e) => {
                // Gone with everything else when the power went.
                if let Some(p) = self.pending.get_mut(i) {
                    p.bytes = bytes;
                }
                Err(e)
            }
        }
    }

    /// Programs every waiting tag entry.
    fn flush_all(&mut self) -> Result<()> {
        while !self.pending.is_empty() {
            self.flush(self.pending.len() - 1)?;
        }
        Ok(())
    }

    /// Programs, forgetting the waiting entries when the power goes.
    fn program_now(&mut self, addr: u64, data: &[u8]) -> Result<()> {
        let r = self.program(addr, data);
        if r == Err(Error::Flash(FlashError::PowerLoss)) {
            self.pending.clear();
        }
        r
    }

    /// Reads bytes of the tag summary, with the entries still waiting in RAM in place.
    fn read_entries(&mut self, addr: u64, buf: &mut [u8]) -> Result<()> {
        self.read_at(addr, buf)?;
        let end = addr + buf.len() as u64;
        for p in &self.pending {
            let (a, b) = (p.at.max(addr), (p.at + p.bytes.len() as u64).min(end));
            if a < b {
                buf[(a - addr) as usize..(b - addr) as usize]
                    .copy_from_slice(&p.bytes[(a - p.at) as usize..(b - p.at) as usize]);
            }
        }
        Ok(())
    }

    /// How this part's tag entries are laid out.
    fn layout(&self) -> NorEntry {
        NorEntry::new(self.shape.patchable)
    }

    /// The tag entry of a slot holding `data` (the whole slot), one stride long.
    fn entry(&self, tag: &Tag, data: &[u8]) -> alloc::vec::Vec<u8> {
        let mut t = alloc::vec![0xFFu8; self.shape.tag_stride as usize];
        self.layout().encode(tag, data, &mut t);
        t
    }

    /// Reads a slot's entry, then its data, and checks one against the other. Where the
    /// entry is marked (programmed in place inside what the checksum covers) the owner's own
    /// checks (an appended superblock's or journal fragment's CRC, an append block's commit
    /// bits) are all that is left. With `written` (`Some(tail)`), a slot whose entry
    /// records its written length `W` and no program in place below it has only its first
    /// `W` bytes and its last `tail` read, the bytes between taken as the erased bytes the
    /// write left there ([`Segments::read_slot_written`]); an entry that is not a valid tag
    /// then fails the read without its data.
    fn read_checked(
        &mut self,
        seg: u32,
        slot: u32,
        buf: &mut [u8],
        written: Option<usize>,
    ) -> Result<TagState> {
        let ss = self.shape.slot_size as usize;
        let mut entry = alloc::vec![0u8; self.shape.tag_stride as usize];
        self.read_entries(self.entry_at(seg, slot), &mut entry)?;
        let layout = self.layout();
        let tag = layout.decode(&entry);
        // The bytes to read: up to `head`, and from `from` on.
        let (head, from) = match (written, tag) {
            (None, _) => (ss, ss),
            (Some(tail), TagState::Valid(_)) if self.shape.patchable && !layout.marked(&entry) => {
                let from = ss.saturating_sub(tail);
                (layout.written_len(&entry).min(from), from)
            }
            (Some(_), TagState::Valid(_)) => (ss, ss),
            (Some(_), _) => (0, ss),
        };
        // The entry is decoded once: its data checksum is checked only under a valid tag.
        let valid = matches!(tag, TagState::Valid(_));
        let ok = if buf.len() == ss {
            self.read_parts(self.data_at(seg, slot), head, from, buf)?;
            valid && layout.data_matches(&entry, buf)
        } else {
            let mut whole = alloc::vec![0u8; ss];
            self.read_parts(self.data_at(seg, slot), head, from, &mut whole)?;
            let n = buf.len().min(ss);
            buf[..n].copy_from_slice(&whole[..n]);
            valid && layout.data_matches(&entry, &whole)
        };
        if ok {
            Ok(tag)
        } else {
            Err(Error::Io)
        }
    }

    /// Reads `out[..head]` and `out[from..]` from the slot data at `addr`, and sets the
    /// bytes between erased.
    fn read_parts(&mut self, addr: u64, head: usize, from: usize, out: &mut [u8]) -> Result<()> {
        let (first, rest) = out.split_at_mut(head.min(out.len()));
        let (gap, last) = rest.split_at_mut(from.saturating_sub(head).min(rest.len()));
        gap.fill(0xFF);
        if !first.is_empty() {
            self.read_at(addr, first)?;
        }
        if !last.is_empty() {
            self.read_at(addr + (first.len() + gap.len()) as u64, last)?;
        }
        Ok(())
    }

    /// Address on the part of a slot's data (for tools and tests that look at the medium).
    pub fn data_at(&self, seg: u32, slot: u32) -> u64 {
        self.base(seg) + self.shape.data_off as u64 + slot as u64 * self.shape.slot_size as u64
    }

    /// Address on the part of a slot's tag entry (tag, data checksum; SPEC.md §2.2).
    pub fn entry_at(&self, seg: u32, slot: u32) -> u64 {
        self.base(seg)
            + round_up(HEADER_LEN as u32, self.flash.spec().word_size) as u64
            + slot as u64 * self.shape.tag_stride as u64
    }

    /// The flash underneath.
    pub fn flash(&self) -> &F {
        &self.flash
    }

    /// The flash underneath, for fault injection and statistics.
    pub fn flash_mut(&mut self) -> &mut F {
        &mut self.flash
    }

    /// Gives the flash back, without the tag entries still waiting in RAM (as a power cut
    /// would leave it: [`Segments::sync`] first to keep them).
    pub fn into_inner(self) -> F {
        self.flash
    }

    /// Reads, waiting out an erase that is still running on the unit (only a mount right
    /// after a cleaner's background erase meets one).
    fn read_at(&mut self, addr: u64, buf: &mut [u8]) -> Result<()> {
        match self.flash.read(addr, buf) {
            Err(FlashError::Busy { .. }) => {
                self.flash
                    .idle(Duration::from_nanos(self.flash.spec().timing.erase_ns));
                Ok(self.flash.read(addr, buf)?)
            }
            r => Ok(r?),
        }
    }

    fn base(&self, seg: u32) -> u64 {
        u64::from(seg) * u64::from(self.shape.units) * u64::from(self.flash.spec().unit_size)
    }

    /// The erase units of a segment.
    fn units_of(&self, seg: u32) -> core::ops::Range<u32> {
        seg * self.shape.units..(seg + 1) * self.shape.units
    }

    /// Programs `data`, split so no command crosses the part's program page. On flash,
    /// erased bytes (`0xFF`) at either end of a command are left out, and a command of
    /// erased bytes alone is not sent: a program only clears bits, so they change nothing,
    /// while a command costs its time whatever it carries (0.4 ms on the W25Q64JV: a slot
    /// half filled — a journal block, a superblock, an index node — takes one page's
    /// command, not two). NVRAM writes its bytes as given, `0xFF` included.
    fn program(&mut self, mut addr: u64, mut data: &[u8]) -> Result<()> {
        let page = self.flash.spec().program_page as u64;
        let word = self.flash.spec().word_size.max(1) as usize;
        while !data.is_empty() {
            let n = if page == 0 {
                data.len()
            } else {
                ((page - addr % page) as usize).min(data.len())
            };
            let (skip, len) = if self.in_place {
                (0, n)
            } else {
                programmed_span(&data[..n], word)
            };
            if len > 0 {
                self.flash
                    .program(addr + skip as u64, &data[skip..skip + len])?;
            }
            addr += n as u64;
            data = &data[n..];
        }
        Ok(())
    }
}

/// The part of `data` a program must carry: from the first word holding a bit to clear to
/// the last (`word`-byte words, so the command stays aligned as `data` is), as (offset,
/// length); length 0 when every byte is erased.
fn programmed_span(data: &[u8], word: usize) -> (usize, usize) {
    let Some(first) = data.iter().position(|&b| b != 0xFF) else {
        return (0, 0);
    };
    let last = data.iter().rposition(|&b| b != 0xFF).unwrap_or(first);
    let start = first / word * word;
    let end = ((last / word + 1) * word).min(data.len());
    (start, end - start)
}

/// A medium chosen at run time (`Box<dyn Segments>`): one instantiation of the layers above
/// serves every kind of flash, where a generic one per medium would repeat them all in the
/// program (the C library takes NOR or NAND from its caller's configuration: two copies of
/// the file system on a microcontroller). The price is a virtual call per media operation,
/// each of which costs a flash access. Every method is forwarded, defaults included, so the
/// medium's own versions run.
impl<S: Segments + ?Sized> Segments for alloc::boxed::Box<S> {
    fn geometry(&self) -> SegGeometry {
        (**self).geometry()
    }
    fn bank_of(&self, seg: u32) -> u32 {
        (**self).bank_of(seg)
    }
    fn read_header(&mut self, seg: u32) -> Result<HeaderState> {
        (**self).read_header(seg)
    }
    fn write_header(&mut self, seg: u32, header: &SegHeader) -> Result<()> {
        (**self).write_header(seg, header)
    }
    fn read_tags(&mut self, seg: u32, out: &mut [TagState]) -> Result<()> {
        (**self).read_tags(seg, out)
    }
    fn read_written_tags(&mut self, seg: u32, first: u32, out: &mut [TagState]) -> Result<()> {
        (**self).read_written_tags(seg, first, out)
    }
    fn visit_written_tags(
        &mut self,
        seg: u32,
        first: u32,
        visit: &mut dyn FnMut(u32, TagState),
    ) -> Result<()> {
        (**self).visit_written_tags(seg, first, visit)
    }
    fn read_tag(&mut self, seg: u32, slot: u32) -> Result<TagState> {
        (**self).read_tag(seg, slot)
    }
    fn read_slot(&mut self, seg: u32, slot: u32, buf: &mut [u8]) -> Result<()> {
        (**self).read_slot(seg, slot, buf)
    }
    fn read_slot_tag(&mut self, seg: u32, slot: u32, buf: &mut [u8]) -> Result<TagState> {
        (**self).read_slot_tag(seg, slot, buf)
    }
    fn read_slot_written(
        &mut self,
        seg: u32,
        slot: u32,
        buf: &mut [u8],
        tail: usize,
    ) -> Result<TagState> {
        (**self).read_slot_written(seg, slot, buf, tail)
    }
    fn read_slot_corrected(&mut self, seg: u32, slot: u32, buf: &mut [u8]) -> Result<u32> {
        (**self).read_slot_corrected(seg, slot, buf)
    }
    fn read_slot_scrubbed(
        &mut self,
        seg: u32,
        slot: u32,
        buf: &mut [u8],
    ) -> Result<(TagState, Option<u32>)> {
        (**self).read_slot_scrubbed(seg, slot, buf)
    }
    fn ecc_strength(&self) -> u32 {
        (**self).ecc_strength()
    }
    fn tag_layout(&self) -> TagLayout {
        (**self).tag_layout()
    }
    fn max_key(&self) -> u32 {
        (**self).max_key()
    }
    fn max_seq(&self) -> u64 {
        (**self).max_seq()
    }
    fn write_slot(&mut self, seg: u32, slot: u32, tag: &Tag, data: &[u8]) -> Result<()> {
        (**self).write_slot(seg, slot, tag, data)
    }
    fn write_slot_verified(&mut self, seg: u32, slot: u32, tag: &Tag, data: &[u8]) -> Result<()> {
        (**self).write_slot_verified(seg, slot, tag, data)
    }
    fn slot_erased(&mut self, seg: u32, slot: u32) -> Result<bool> {
        (**self).slot_erased(seg, slot)
    }
    fn written_end(&mut self, seg: u32, slots: u32) -> Result<Option<u32>> {
        (**self).written_end(seg, slots)
    }
    fn unwritten(&mut self, seg: u32) -> Result<bool> {
        (**self).unwritten(seg)
    }
    fn risks_earlier_slot(&self, slot: u32) -> bool {
        (**self).risks_earlier_slot(slot)
    }
    fn has_slc_mode(&self) -> bool {
        (**self).has_slc_mode()
    }
    fn set_slc(&mut self, seg: u32, slc: bool) -> Result<()> {
        (**self).set_slc(seg, slc)
    }
    fn units_per_segment(&self) -> u32 {
        (**self).units_per_segment()
    }
    fn tier(&self, seg: u32) -> Tier {
        (**self).tier(seg)
    }
    fn is_tiered(&self) -> bool {
        (**self).is_tiered()
    }
    fn reserved_slots(&self) -> u32 {
        (**self).reserved_slots()
    }
    fn can_patch(&self) -> bool {
        (**self).can_patch()
    }
    fn patch_align(&self) -> u32 {
        (**self).patch_align()
    }
    fn rated_cycles(&self) -> u32 {
        (**self).rated_cycles()
    }
    fn patch_slot(&mut self, seg: u32, slot: u32, offset: usize, bytes: &[u8]) -> Result<()> {
        (**self).patch_slot(seg, slot, offset, bytes)
    }
    fn erase(&mut self, seg: u32, background: bool) -> Result<()> {
        (**self).erase(seg, background)
    }
    fn is_bad(&mut self, seg: u32) -> Result<bool> {
        (**self).is_bad(seg)
    }
    fn is_retired(&mut self, seg: u32) -> Result<bool> {
        (**self).is_retired(seg)
    }
    fn mark_bad(&mut self, seg: u32) -> Result<()> {
        (**self).mark_bad(seg)
    }
    fn sync(&mut self) -> Result<()> {
        (**self).sync()
    }
    fn program_waiting(&mut self) -> Result<()> {
        (**self).program_waiting()
    }
    fn power_cut(&mut self) {
        (**self).power_cut()
    }
    fn resume_slot(&mut self, seg: u32, used: u32) -> Result<Option<u32>> {
        (**self).resume_slot(seg, used)
    }
    fn now(&self) -> Duration {
        (**self).now()
    }
    fn idle(&mut self, d: Duration) {
        (**self).idle(d)
    }
    fn erase_time(&self) -> Duration {
        (**self).erase_time()
    }
}

impl<F: NorFlash> Segments for NorSegments<F> {
    fn geometry(&self) -> SegGeometry {
        let s = self.flash.spec();
        SegGeometry {
            segments: s.units / self.shape.units,
            slots: self.shape.slots,
            slot_size: self.shape.slot_size,
            banks: s.banks,
        }
    }

    fn bank_of(&self, seg: u32) -> u32 {
        self.flash.spec().bank_of(seg * self.shape.units)
    }

    fn units_per_segment(&self) -> u32 {
        self.shape.units
    }

    fn read_header(&mut self, seg: u32) -> Result<HeaderState> {
        let mut b = [0u8; HEADER_LEN];
        self.read_entries(self.base(seg), &mut b)?;
        if b.iter().all(|&x| x == 0) {
            return Ok(HeaderState::Bad);
        }
        Ok(match SegHeader::decode(&b) {
            Ok(Some(h)) => HeaderState::Valid(h),
            Ok(None) => HeaderState::Erased,
            Err(_) => HeaderState::Garbage,
        })
    }

    fn write_header(&mut self, seg: u32, header: &SegHeader) -> Result<()> {
        let head = round_up(HEADER_LEN as u32, self.flash.spec().word_size) as usize;
        let mut b = alloc::vec![0xFFu8; head];
        b[..HEADER_LEN].copy_from_slice(&header.encode());
        let at = self.base(seg);
        // Where entries wait, the header waits with them: the first entries follow it in
        // the same program page, and a segment whose header a cut leaves erased over
        // programmed slots is erased before use, as every segment a mount finds without a
        // header is (SPEC.md §2.2).
        if self.defers && head as u32 <= self.flash.spec().program_page {
            self.pending.retain(|p| p.seg != seg);
            self.pending.push(Pending { seg, at, bytes: b });
            return Ok(());
        }
        self.program(at, &b)
    }

    fn read_tags(&mut self, seg: u32, out: &mut [TagState]) -> Result<()> {
        let stride = self.shape.tag_stride as usize;
        // Only the entries asked for: on NVRAM every byte read costs its time.
        let mut raw = alloc::vec![0u8; out.len().min(self.shape.slots as usize) * stride];
        let at = self.base(seg) + round_up(HEADER_LEN as u32, self.flash.spec().word_size) as u64;
        self.read_entries(at, &mut raw)?;
        let layout = self.layout();
        for (o, chunk) in out.iter_mut().zip(raw.chunks_exact(stride)) {
            *o = layout.decode(chunk);
        }
        Ok(())
    }

    fn read_tag(&mut self, seg: u32, slot: u32) -> Result<TagState> {
        let stride = self.shape.tag_stride as usize;
        let mut raw = alloc::vec![0u8; stride];
        let at = self.base(seg)
            + round_up(HEADER_LEN as u32, self.flash.spec().word_size) as u64
            + slot as u64 * stride as u64;
        self.read_entries(at, &mut raw)?;
        Ok(self.layout().decode(&raw))
    }

    fn read_slot(&mut self, seg: u32, slot: u32, buf: &mut [u8]) -> Result<()> {
        self.read_slot_tag(seg, slot, buf).map(|_| ())
    }

    fn read_slot_tag(&mut self, seg: u32, slot: u32, buf: &mut [u8]) -> Result<TagState> {
        self.read_checked(seg, slot, buf, None)
    }

    fn read_slot_written(
        &mut self,
        seg: u32,
        slot: u32,
        buf: &mut [u8],
        tail: usize,
    ) -> Result<TagState> {
        self.read_checked(seg, slot, buf, Some(tail))
    }

    fn write_slot(&mut self, seg: u32, slot: u32, tag: &Tag, data: &[u8]) -> Result<()> {
        let mut padded;
        let data = if data.len() == self.shape.slot_size as usize {
            data
        } else {
            padded = alloc::vec![0xFFu8; self.shape.slot_size as usize];
            padded[..data.len()].copy_from_slice(data);
            &padded[..]
        };
        self.program_now(self.data_at(seg, slot), data)?;
        let t = self.entry(tag, data);
        self.put_entry(seg, slot, &t)
    }

    fn write_slot_verified(&mut self, seg: u32, slot: u32, tag: &Tag, data: &[u8]) -> Result<()> {
        // A verified slot's entry is programmed and read back at once.
        self.flush_all()?;
        let failed = Error::Flash(FlashError::ProgramFailed { block: seg });
        let mut want = alloc::vec![0xFFu8; self.shape.slot_size as usize];
        want[..data.len()].copy_from_slice(data);
        let at = self.data_at(seg, slot);
        self.program(at, &want)?;
        let mut back = alloc::vec![0u8; want.len()];
        self.read_at(at, &mut back)?;
        if back != want {
            // No tag: the slot stays invisible, as if the power had gone before it.
            return Err(failed);
        }
        let t = self.entry(tag, &want);
        let at = self.entry_at(seg, slot);
        self.program(at, &t)?;
        let mut back = alloc::vec![0u8; t.len()];
        self.read_at(at, &mut back)?;
        if back != t || self.layout().decode(&back) != TagState::Valid(*tag) {
            return Err(failed);
        }
        Ok(())
    }

    fn max_key(&self) -> u32 {
        NorEntry::MAX_KEY
    }

    fn max_seq(&self) -> u64 {
        NorEntry::MAX_SEQ
    }

    fn can_patch(&self) -> bool {
        self.flash.spec().reprogrammable
    }

    fn patch_align(&self) -> u32 {
        self.flash.spec().word_size
    }

    fn rated_cycles(&self) -> u32 {
        self.flash.spec().endurance
    }

    fn patch_slot(&mut self, seg: u32, slot: u32, offset: usize, bytes: &[u8]) -> Result<()> {
        if !self.can_patch() {
            return Err(Error::Unsupported(
                "this NOR part cannot program a word twice",
            ));
        }
        let word = self.flash.spec().word_size as usize;
        if offset % word != 0
            || bytes.len() % word != 0
            || offset
                .checked_add(bytes.len())
                .is_none_or(|e| e > self.shape.slot_size as usize)
        {
            return Err(Error::InvalidArgument(
                "a patch must be whole words inside one slot",
            ));
        }
        // A program in place is a commit point of its owner (an appended superblock, a
        // journal entry, an append block's commit bits): every slot written before it must
        // be found with it, and its own entry is read below.
        self.flush_all()?;
        let at = self.data_at(seg, slot) + offset as u64;
        let mut old = alloc::vec![0u8; bytes.len()];
        self.read_at(at, &mut old)?;
        // A bit the patch needs set is already cleared: those bytes are not what the owner
        // left there (damage at rest, or a stray program). The program cannot take, as one
        // that fails: every owner of a patch then writes a copy instead.
        if bytes.iter().zip(&old).any(|(n, o)| n & !o != 0) {
            return Err(Error::Flash(FlashError::ProgramFailed { block: seg }));
        }
        // A patch inside the written length would fail the data checksum: the entry is
        // marked first (a cut between leaves a marked slot with its old data, still sound).
        // A mark that does not read back (a program that reported success and did nothing)
        // stops the patch there: the slot keeps its old data, still sound, rather than
        // taking new data its checksum does not cover.
        let mut entry = alloc::vec![0u8; self.shape.tag_stride as usize];
        let e = self.entry_at(seg, slot);
        self.read_at(e, &mut entry)?;
        let layout = self.layout();
        let first_change = bytes.iter().zip(&old).position(|(n, o)| n != o);
        let inside = first_change.is_some_and(|i| offset + i < layout.written_len(&entry));
        if inside && !layout.marked(&entry) {
            // The mark's bit cleared, the rest of its word programmed again as it is.
            let from = NorEntry::MARK / word * word;
            let mut mark = entry[from..from + word].to_vec();
            mark[NorEntry::MARK - from] &= !NorEntry::MARK_BIT;
            let at_mark = e + from as u64;
            self.program(at_mark, &mark)?;
            let mut back = alloc::vec![0u8; word];
            self.read_at(at_mark, &mut back)?;
            if back[NorEntry::MARK - from] & NorEntry::MARK_BIT != 0 {
                return Err(Error::Flash(FlashError::ProgramFailed { block: seg }));
            }
        }
        self.program(at, bytes)
    }

    fn slot_erased(&mut self, seg: u32, slot: u32) -> Result<bool> {
        let mut tag = alloc::vec![0u8; self.shape.tag_stride as usize];
        self.read_entries(self.entry_at(seg, slot), &mut tag)?;
        if self.in_place {
            // Data bytes left by a cut before the entry, or by the slot's last use, are
            // written over as given: only the entry says the slot is unwritten.
            return Ok(tag.iter().all(|&b| b == 0xFF));
        }
        let mut data = alloc::vec![0u8; self.shape.slot_size as usize];
        self.read_at(self.data_at(seg, slot), &mut data)?;
        Ok(data.iter().chain(&tag).all(|&b| b == 0xFF))
    }

    fn unwritten(&mut self, seg: u32) -> Result<bool> {
        // Only where the first slots are fewer bytes to read than the whole tag summary
        // (long segments: a volume on two devices shapes the NVRAM's to the NAND's).
        let run = WRITTEN_END_RUN.min(self.shape.slots);
        let summary = u64::from(self.shape.slots) * u64::from(self.shape.tag_stride);
        if u64::from(run) * u64::from(self.shape.slot_size + self.shape.tag_stride) >= summary {
            return Ok(false);
        }
        for slot in 0..run {
            if !self.slot_erased(seg, slot)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn resume_slot(&mut self, seg: u32, used: u32) -> Result<Option<u32>> {
        if !self.defers {
            // One dirty slot at most: the default's reads.
            let mut at = used;
            if at < self.shape.slots && !self.slot_erased(seg, at)? {
                at += 1;
            }
            if at >= self.shape.slots || !self.slot_erased(seg, at)? {
                return Ok(None);
            }
            return Ok(Some(at));
        }
        // Entries wait in RAM, so a cut may leave several slots programmed under erased
        // tags, and one of them may hold only 0xFF bytes: the head resumes after the last
        // slot that does not read as erased whole (two reads, at most a segment's data).
        if used >= self.shape.slots {
            return Ok(None);
        }
        let ss = self.shape.slot_size as usize;
        let n = (self.shape.slots - used) as usize;
        let mut data = alloc::vec![0u8; n * ss];
        self.read_at(self.data_at(seg, used), &mut data)?;
        let stride = self.shape.tag_stride as usize;
        let mut entries = alloc::vec![0u8; n * stride];
        self.read_entries(self.entry_at(seg, used), &mut entries)?;
        let dirty = (0..n).rev().find(|&i| {
            data[i * ss..(i + 1) * ss]
                .iter()
                .chain(&entries[i * stride..(i + 1) * stride])
                .any(|&b| b != 0xFF)
        });
        let at = used + dirty.map_or(0, |i| i as u32 + 1);
        Ok((at < self.shape.slots).then_some(at))
    }

    fn power_cut(&mut self) {
        self.pending.clear();
    }

    fn erase(&mut self, seg: u32, background: bool) -> Result<()> {
        // An erase may destroy the only other copy of what waits (a cleaned segment whose
        // live slots were copied): the copies' entries go down first. The segment's own
        // run goes with it.
        self.pending.retain(|p| p.seg != seg);
        self.flush_all()?;
        if self.in_place {
            // NVRAM: the header and the tag summary alone, in address order, as an erase
            // would begin (a cut leaves an erased or garbled header, and a prefix of the
            // entries erased); the slots' data is written over as given when they are
            // written again. 8 KiB instead of a whole segment on a large one.
            let summary = alloc::vec![0xFFu8; self.shape.data_off as usize];
            return self.program(self.base(seg), &summary);
        }
        // The unit holding the header and tags goes first: a cut part-way leaves an erased
        // or garbled header, so the mount erases the whole segment again before using it.
        // A valid header over tags vouching for slots already scrambled would be believed.
        for unit in self.units_of(seg) {
            let r = if background {
                self.flash.start_erase(unit)
            } else {
                self.flash.erase(unit)
            };
            match r {
                // The log knows segments, not units.
                Err(FlashError::EraseFailed { .. }) => {
                    return Err(Error::Flash(FlashError::EraseFailed { block: seg }))
                }
                r => r?,
            }
        }
        Ok(())
    }

    fn is_bad(&mut self, _seg: u32) -> Result<bool> {
        Ok(false)
    }

    fn mark_bad(&mut self, seg: u32) -> Result<()> {
        // NOR has no bad-block marks: a zeroed header says "retired". Where the header cannot
        // be cleared the unit's garbage header still keeps it out of the free pool.
        // Retiring a segment drops what it holds, as an erase does: the copies the cleaner
        // made of its live slots go down first. Its own run goes with it.
        self.pending.retain(|p| p.seg != seg);
        self.flush_all()?;
        let head = round_up(HEADER_LEN as u32, self.flash.spec().word_size) as usize;
        match self.program(self.base(seg), &alloc::vec![0u8; head]) {
            Err(Error::Flash(FlashError::PowerLoss)) => Err(Error::Flash(FlashError::PowerLoss)),
            _ => Ok(()),
        }
    }

    fn sync(&mut self) -> Result<()> {
        self.flush_all()?;
        Ok(self.flash.sync()?)
    }

    fn program_waiting(&mut self) -> Result<()> {
        self.flush_all()
    }

    fn now(&self) -> Duration {
        self.flash.now()
    }

    fn idle(&mut self, d: Duration) {
        self.flash.idle(d)
    }

    fn erase_time(&self) -> Duration {
        if self.in_place {
            // A write of the header and tag summary, over when `erase` returns.
            return Duration::ZERO;
        }
        Duration::from_nanos(self.flash.spec().timing.erase_ns * u64::from(self.shape.units))
    }
}

/// Erase units per segment on a NOR part: the fewest (a power of two, at most 128, the
/// header's field) that make at least [`NOR_MIN_SEGMENT`] bytes ([`SPI_NOR_MIN_SEGMENT`]
/// on a part with a program page), within one bank.
pub fn units_per_segment(s: &flash::NorSpec) -> u32 {
    let per_bank = s.units / s.banks.max(1);
    let min = if s.program_page > 0 {
        SPI_NOR_MIN_SEGMENT
    } else {
        NOR_MIN_SEGMENT
    };
    let mut units = 1;
    while s.unit_size * units < min && units < 128 && per_bank % (units * 2) == 0 {
        units *= 2;
    }
    units
}

/// Segments a NAND part is divided into at most: above this, a segment takes several
/// blocks ([`nand_blocks_per_segment`]). The log keeps a record of every segment in RAM, so
/// the count, not the part's size, is what that RAM grows with: capped, it stays the same
/// from a 128 MiB part to a 16 GiB one.
pub const NAND_MAX_SEGMENTS: u32 = 4096;

/// Blocks per segment on a NAND part: the fewest (a power of two, at most 128, the header's
/// field) that leave at most [`NAND_MAX_SEGMENTS`] segments, within one bank, and with
/// slots that a 16-bit count holds.
pub fn nand_blocks_per_segment(s: &flash::NandSpec) -> u32 {
    blocks_per_segment_within(s, NAND_MAX_SEGMENTS)
}

/// Blocks per segment on a NAND part: the fewest (as [`nand_blocks_per_segment`]) that
/// leave at most `max` segments.
pub fn blocks_per_segment_within(s: &flash::NandSpec, max: u32) -> u32 {
    let per_bank = s.blocks / s.banks.max(1);
    let mut units = 1u32;
    while s.blocks / units > max
        && units < 128
        && per_bank % (units * 2) == 0
        && u64::from(s.pages_per_block) * u64::from(units * 2) <= u64::from(u16::MAX)
    {
        units *= 2;
    }
    units
}

/// NAND flash as segments of one block, or of several consecutive blocks of one bank on
/// parts of more than [`NAND_MAX_SEGMENTS`] blocks (SPEC.md §2.1): page 0 of a segment's
/// first block holds the header, every other page of its blocks a slot with its tag in the
/// spare area.
#[derive(Debug, Clone)]
pub struct NandSegments<F> {
    flash: F,
    layout: TagLayout,
    /// Blocks per segment.
    units: u32,
}

impl<F: NandFlash> NandSegments<F> {
    /// Reads a slot's page, data and tag entry in one read, and checks the data against
    /// the entry: the tag, and the bit errors the ECC corrected. An erased spare never
    /// matches (SPEC.md §2.4): a page that reads as erased where the caller expects data is
    /// damage.
    fn read_checked(&mut self, seg: u32, slot: u32, buf: &mut [u8]) -> Result<(TagState, u32)> {
        match self.read_page_of(seg, slot, buf)? {
            (tag, bits, true) => Ok((tag, bits)),
            _ => Err(Error::Io),
        }
    }

    /// Reads slot `slot`'s page: its tag, the bits the ECC corrected and whether the data
    /// matches its checksum.
    fn read_page_of(
        &mut self,
        seg: u32,
        slot: u32,
        buf: &mut [u8],
    ) -> Result<(TagState, u32, bool)> {
        let ps = self.flash.spec().page_size as usize;
        let mut spare = [0u8; ENTRY_LEN];
        let spare = &mut spare[..self.layout.entry_len()];
        let at = self.slot_page(seg, slot);
        let (status, ok) = if buf.len() == ps {
            let status = self.flash.read_page(at, buf, spare)?;
            (status, self.layout.data_ok(spare, buf))
        } else {
            let mut whole = alloc::vec![0u8; ps];
            let status = self.flash.read_page(at, &mut whole, spare)?;
            let n = buf.len().min(ps);
            buf[..n].copy_from_slice(&whole[..n]);
            (status, self.layout.data_ok(spare, &whole))
        };
        Ok((self.layout.decode(spare), status.corrected_bits, ok))
    }

    /// Views `flash` as segments; its spare area must hold a tag (and the checksum of the
    /// page's data: [`TagLayout::Wide`] where 16 free bytes allow, else
    /// [`TagLayout::Compact`]).
    pub fn new(flash: F) -> Result<Self> {
        let units = nand_blocks_per_segment(flash.spec());
        Self::with_blocks_per_segment(flash, units)
    }

    /// Views `flash` as segments of `units` blocks each, whatever its size: for a part
    /// that stands in for a larger one (a test or torture device keeps the full part's
    /// segments on fewer blocks). A volume is mounted with the blocks per segment it was
    /// formatted with (its headers say, SPEC.md §2.3). `units` is a power of two of at
    /// most 128 that divides each bank's blocks.
    pub fn with_blocks_per_segment(flash: F, units: u32) -> Result<Self> {
        let s = flash.spec();
        let Some(layout) = TagLayout::for_spare(s.spare_size as usize) else {
            return Err(Error::InvalidArgument("NAND spare area smaller than a tag"));
        };
        if s.pages_per_block < 2 || (s.page_size as usize) < HEADER_LEN {
            return Err(Error::InvalidArgument("NAND block too small"));
        }
        let per_bank = s.blocks / s.banks.max(1);
        if !units.is_power_of_two()
            || units > 128
            || per_bank % units != 0
            || u64::from(s.pages_per_block) * u64::from(units) > u64::from(u16::MAX)
        {
            return Err(Error::InvalidArgument(
                "blocks per segment must be a power of two of at most 128 dividing each bank",
            ));
        }
        Ok(NandSegments {
            flash,
            layout,
            units,
        })
    }

    /// The page holding slot `slot` of segment `seg`: slot `i` is the segment's page `i +
    /// 1`, counted across its blocks in order.
    pub fn slot_page(&self, seg: u32, slot: u32) -> PageAddr {
        let ppb = self.flash.spec().pages_per_block;
        let n = slot + 1;
        PageAddr::new(seg * self.units + n / ppb, n % ppb)
    }

    /// Whether the slots from `first` below `end` (up to [`WRITTEN_END_RUN`] of them, fewer
    /// near `end`) all read as erased whole. Stops at the first written one.
    fn erased_run_below(&mut self, seg: u32, first: u32, end: u32) -> Result<bool> {
        self.erased_run_knowing(seg, first, end, None)
    }

    /// [`Self::erased_run_below`], with slot `known` already read as erased whole: not read
    /// again.
    fn erased_run_knowing(
        &mut self,
        seg: u32,
        first: u32,
        end: u32,
        known: Option<u32>,
    ) -> Result<bool> {
        let mut counted = 0;
        for slot in first..end {
            if counted == WRITTEN_END_RUN {
                break;
            }
            if Some(slot) != known && self.tag_and_erased(seg, slot)? != (TagState::Erased, true) {
                return Ok(false);
            }
            counted += u32::from(self.counts_in_run(slot));
        }
        Ok(true)
    }

    /// The first slot of `seg` below `end` at which `holds` (given `end`), by a binary
    /// search: `holds` must be false up to some slot and true from there on (`end` if
    /// never).
    fn first_slot(
        &mut self,
        seg: u32,
        end: u32,
        holds: fn(&mut Self, u32, u32, u32) -> Result<bool>,
    ) -> Result<u32> {
        let (mut lo, mut hi) = (0, end);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if holds(self, seg, mid, end)? {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Ok(lo)
    }

    /// Whether the first slot from `slot` on (below `end`) that counts towards
    /// [`WRITTEN_END_RUN`] reads as erased whole (true if none): one page read.
    fn erased_from(&mut self, seg: u32, slot: u32, end: u32) -> Result<bool> {
        let Some(slot) = self.counting_from(slot, end) else {
            return Ok(true);
        };
        Ok(self.tag_and_erased(seg, slot)? == (TagState::Erased, true))
    }

    /// The first slot from `slot` on, below `end`, that counts towards [`WRITTEN_END_RUN`].
    fn counting_from(&self, slot: u32, end: u32) -> Option<u32> {
        (slot..end).find(|&s| self.counts_in_run(s))
    }

    /// Whether an erased `slot` counts towards [`WRITTEN_END_RUN`]: not an MSB slot, which
    /// the log leaves erased where its LSB partner must not be put at risk.
    fn counts_in_run(&self, slot: u32) -> bool {
        !self.risks_earlier_slot(slot)
    }

    /// The tags of `slots` of a segment in order, to `visit`, up to where writing stopped:
    /// [`WRITTEN_END_RUN`] slots in a row erased whole, tag and data.
    fn walk_written_tags(
        &mut self,
        seg: u32,
        slots: core::ops::Range<u32>,
        visit: &mut dyn FnMut(u32, TagState),
    ) -> Result<()> {
        let mut erased_run = 0;
        for slot in slots {
            // A program cut short can leave data under a spare area that reads as erased,
            // so an erased tag is checked against its page. Past the first erased slot the
            // next are likely erased too: tag and page are read together.
            let (tag, erased) = if erased_run > 0 {
                let (tag, erased) = self.tag_and_erased(seg, slot)?;
                (tag, erased && tag == TagState::Erased)
            } else {
                let tag = self.read_tag(seg, slot)?;
                (tag, tag == TagState::Erased && self.slot_erased(seg, slot)?)
            };
            visit(slot, tag);
            if erased {
                erased_run += u32::from(self.counts_in_run(slot));
                if erased_run == WRITTEN_END_RUN {
                    break;
                }
            } else {
                erased_run = 0;
            }
        }
        Ok(())
    }

    /// Slot `slot`'s tag and whether its page reads erased whole, data and spare, in one
    /// page read: where the slot is likely erased, half the reads of its tag and then its
    /// page ([`Segments::slot_erased`]), for the transfer of a page.
    fn tag_and_erased(&mut self, seg: u32, slot: u32) -> Result<(TagState, bool)> {
        let s = *self.flash.spec();
        let mut data = alloc::vec![0u8; s.page_size as usize];
        let mut spare = alloc::vec![0u8; s.spare_size as usize];
        let at = self.slot_page(seg, slot);
        match self.flash.read_page(at, &mut data, &mut spare) {
            Ok(_) => Ok((
                self.layout.decode(&spare[..self.layout.entry_len()]),
                data.iter().chain(&spare).all(|&b| b == 0xFF),
            )),
            Err(FlashError::Uncorrectable { .. } | FlashError::BadBlock { .. }) => {
                Ok((TagState::Garbage, false))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The page holding segment `seg`'s header: the first of its first block.
    pub fn header_page(&self, seg: u32) -> PageAddr {
        PageAddr::new(seg * self.units, 0)
    }

    /// The blocks of a segment, the one holding the header first.
    fn blocks_of(&self, seg: u32) -> core::ops::Range<u32> {
        seg * self.units..(seg + 1) * self.units
    }

    /// The flash underneath.
    pub fn flash(&self) -> &F {
        &self.flash
    }

    /// The flash underneath, for fault injection and statistics.
    pub fn flash_mut(&mut self) -> &mut F {
        &mut self.flash
    }

    /// Gives the flash back.
    pub fn into_inner(self) -> F {
        self.flash
    }
}

impl<F: NandFlash> Segments for NandSegments<F> {
    fn geometry(&self) -> SegGeometry {
        let s = self.flash.spec();
        SegGeometry {
            segments: s.blocks / self.units,
            slots: s.pages_per_block * self.units - 1,
            slot_size: s.page_size,
            banks: s.banks,
        }
    }

    fn bank_of(&self, seg: u32) -> u32 {
        self.flash.spec().bank_of(seg * self.units)
    }

    fn units_per_segment(&self) -> u32 {
        self.units
    }

    fn read_header(&mut self, seg: u32) -> Result<HeaderState> {
        let mut b = [0u8; HEADER_LEN];
        match self.flash.read_page(self.header_page(seg), &mut b, &mut []) {
            Ok(_) => {}
            Err(FlashError::Uncorrectable { .. }) => return Ok(HeaderState::Garbage),
            Err(FlashError::BadBlock { .. }) => return Ok(HeaderState::Bad),
            Err(e) => return Err(e.into()),
        }
        Ok(match SegHeader::decode(&b) {
            Ok(Some(h)) => HeaderState::Valid(h),
            Ok(None) => HeaderState::Erased,
            Err(_) => HeaderState::Garbage,
        })
    }

    fn write_header(&mut self, seg: u32, header: &SegHeader) -> Result<()> {
        Ok(self
            .flash
            .program_page(self.header_page(seg), &header.encode(), &[])?)
    }

    fn read_tags(&mut self, seg: u32, out: &mut [TagState]) -> Result<()> {
        for (slot, o) in (0..).zip(out.iter_mut()) {
            *o = self.read_tag(seg, slot)?;
        }
        Ok(())
    }

    fn written_end(&mut self, seg: u32, slots: u32) -> Result<Option<u32>> {
        let slots = slots.min(self.geometry().slots);
        // First a binary search a read per probe, for the first slot that reads erased
        // whole with the one before it written: where no slot before the end reads erased
        // (no decayed page, no torn program left as erased), that is the end, and a run of
        // erased slots from it says so. An anchor on a part of large segments is searched in
        // half the reads this way.
        let end = self.first_slot(seg, slots, Self::erased_from)?;
        // The search ended on a probe that read erased (unless at the end): the run's check
        // does not read that slot again.
        let probed = self.counting_from(end, slots);
        if self.erased_run_knowing(seg, end, slots, probed)? {
            return Ok(Some(end));
        }
        // Else a binary search for the first slot that starts a run of erased slots (cut
        // short by the end): by the rule, every slot after such a run is erased too.
        self.first_slot(seg, slots, Self::erased_run_below)
            .map(Some)
    }

    fn unwritten(&mut self, seg: u32) -> Result<bool> {
        // A page read per slot, where the walk reads a slot's tag and then its page.
        let slots = self.geometry().slots;
        self.erased_run_below(seg, 0, slots)
    }

    fn read_written_tags(&mut self, seg: u32, first: u32, out: &mut [TagState]) -> Result<()> {
        let end = self
            .geometry()
            .slots
            .min(out.len().try_into().unwrap_or(u32::MAX));
        self.walk_written_tags(seg, first..end, &mut |slot, t| out[slot as usize] = t)
    }

    fn visit_written_tags(
        &mut self,
        seg: u32,
        first: u32,
        visit: &mut dyn FnMut(u32, TagState),
    ) -> Result<()> {
        let end = self.geometry().slots;
        self.walk_written_tags(seg, first..end, visit)
    }

    fn read_slot(&mut self, seg: u32, slot: u32, buf: &mut [u8]) -> Result<()> {
        self.read_slot_tag(seg, slot, buf).map(|_| ())
    }

    fn read_slot_corrected(&mut self, seg: u32, slot: u32, buf: &mut [u8]) -> Result<u32> {
        self.read_checked(seg, slot, buf).map(|(_, bits)| bits)
    }

    fn ecc_strength(&self) -> u32 {
        self.flash.spec().ecc.correctable
    }

    fn read_slot_tag(&mut self, seg: u32, slot: u32, buf: &mut [u8]) -> Result<TagState> {
        self.read_checked(seg, slot, buf).map(|(tag, _)| tag)
    }

    fn read_slot_scrubbed(
        &mut self,
        seg: u32,
        slot: u32,
        buf: &mut [u8],
    ) -> Result<(TagState, Option<u32>)> {
        match self.read_page_of(seg, slot, buf) {
            Ok((tag, bits, ok)) => Ok((tag, ok.then_some(bits))),
            // Beyond the ECC: neither the tag nor the data reads back.
            Err(Error::Io) => Ok((TagState::Garbage, None)),
            Err(e) => Err(e),
        }
    }

    fn tag_layout(&self) -> TagLayout {
        self.layout
    }

    fn read_tag(&mut self, seg: u32, slot: u32) -> Result<TagState> {
        let mut spare = [0u8; ENTRY_LEN];
        let spare = &mut spare[..self.layout.entry_len()];
        let at = self.slot_page(seg, slot);
        match self.flash.read_page(at, &mut [], spare) {
            Ok(_) => Ok(self.layout.decode(spare)),
            Err(FlashError::Uncorrectable { .. } | FlashError::BadBlock { .. }) => {
                Ok(TagState::Garbage)
            }
            Err(e) => Err(e.into()),
        }
    }

    fn rated_cycles(&self) -> u32 {
        self.flash.spec().endurance
    }

    fn risks_earlier_slot(&self, slot: u32) -> bool {
        // Slot s is the segment's page s + 1 (blocks have an even count of pages, so its
        // parity is the page's in its block); odd pages are the MSB pages of their pair.
        self.flash.spec().is_mlc() && (slot + 1) % 2 == 1
    }

    fn reserved_slots(&self) -> u32 {
        u32::from(self.flash.spec().is_mlc())
    }

    fn has_slc_mode(&self) -> bool {
        self.flash.spec().is_mlc()
    }

    fn set_slc(&mut self, seg: u32, slc: bool) -> Result<()> {
        let mode = if slc { CellMode::Slc } else { CellMode::Mlc };
        for block in self.blocks_of(seg) {
            let r = match self.flash.as_mlc() {
                Some(mlc) => mlc.set_mode(block, mode),
                None if slc => return Err(Error::Unsupported("this medium has no SLC mode")),
                None => Ok(()),
            };
            match r {
                // A block that still holds programmed pages was not erased; one marked bad
                // by a retirement a cut interrupted fails its segment as a program would.
                Err(FlashError::ModeChangeNotErased { .. }) => {
                    return Err(Error::Flash(FlashError::EraseFailed { block: seg }))
                }
                Err(FlashError::BadBlock { .. }) => {
                    return Err(Error::Flash(FlashError::ProgramFailed { block: seg }))
                }
                r => r?,
            }
        }
        Ok(())
    }

    fn slot_erased(&mut self, seg: u32, slot: u32) -> Result<bool> {
        let s = *self.flash.spec();
        let mut data = alloc::vec![0u8; s.page_size as usize];
        let mut spare = alloc::vec![0u8; s.spare_size as usize];
        let at = self.slot_page(seg, slot);
        match self.flash.read_page(at, &mut data, &mut spare) {
            Ok(_) => Ok(data.iter().chain(&spare).all(|&b| b == 0xFF)),
            Err(FlashError::Uncorrectable { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    fn write_slot(&mut self, seg: u32, slot: u32, tag: &Tag, data: &[u8]) -> Result<()> {
        let ps = self.flash.spec().page_size as usize;
        let mut spare = [0xFFu8; ENTRY_LEN];
        let spare = &mut spare[..self.layout.entry_len()];
        if data.len() >= ps {
            self.layout.encode(tag, &data[..ps], spare);
        } else {
            // The rest of the page stays erased, and is checked as such.
            let mut whole = alloc::vec![0xFFu8; ps];
            whole[..data.len()].copy_from_slice(data);
            self.layout.encode(tag, &whole, spare);
        }
        let at = self.slot_page(seg, slot);
        match self.flash.program_page(at, data, spare) {
            // A block of the segment marked bad by a retirement a cut interrupted: the
            // segment fails, as on a program that did not take.
            Err(FlashError::BadBlock { .. }) => {
                Err(Error::Flash(FlashError::ProgramFailed { block: seg }))
            }
            r => Ok(r?),
        }
    }

    fn erase(&mut self, seg: u32, background: bool) -> Result<()> {
        // The block holding the header goes first: a cut part-way leaves an erased header,
        // so the segment is erased again, whole, before use (as on NOR, SPEC.md §2.2a).
        for block in self.blocks_of(seg) {
            let r = if background {
                self.flash.start_erase(block)
            } else {
                self.flash.erase_block(block)
            };
            match r {
                // The log knows segments, not blocks; a block marked bad by a retirement a
                // cut interrupted fails the segment's erase, which retires it again.
                Err(FlashError::EraseFailed { .. } | FlashError::BadBlock { .. }) => {
                    return Err(Error::Flash(FlashError::EraseFailed { block: seg }))
                }
                r => r?,
            }
        }
        Ok(())
    }

    /// Whether any block of the segment is marked bad: a segment is bad whole.
    fn is_bad(&mut self, seg: u32) -> Result<bool> {
        for block in self.blocks_of(seg) {
            if self.flash.is_bad(block)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn is_retired(&mut self, seg: u32) -> Result<bool> {
        // `mark_bad` marks the last block first: a retirement begun shows there.
        Ok(self.flash.is_bad(self.blocks_of(seg).end - 1)?)
    }

    fn mark_bad(&mut self, seg: u32) -> Result<()> {
        // The header's block last, so that a segment whose header reads as bad has every
        // block marked; one a cut left part-marked is still bad by `is_bad`, and by
        // `is_retired`, which reads the last block's mark only.
        for block in self.blocks_of(seg).rev() {
            self.flash.mark_bad(block)?;
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        Ok(self.flash.sync()?)
    }

    fn now(&self) -> Duration {
        self.flash.now()
    }

    fn idle(&mut self, d: Duration) {
        self.flash.idle(d)
    }

    fn erase_time(&self) -> Duration {
        Duration::from_nanos(self.flash.spec().timing.erase_ns * u64::from(self.units))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flash::{preset, DeviceSpec, ImageMeta, NorSim, NorSpec, Simulated};

    fn spec(name: &str) -> NorSpec {
        match preset::lookup(name).unwrap().spec {
            DeviceSpec::Nor(s) => s,
            _ => panic!("{name} is not NOR"),
        }
    }

    fn part(name: &str) -> NorSegments<NorSim> {
        NorSegments::new(
            NorSim::new(spec(name), ImageMeta::new(name, 1)).unwrap(),
            512,
        )
        .unwrap()
    }

    /// `W`'s 15 bits cover slots of up to 16 KiB on reprogrammable NOR: larger ones are
    /// refused, not laid out with a written length that wraps.
    #[test]
    fn reprogrammable_nor_slots_are_at_most_16_kib() {
        let sim = |name| NorSim::new(spec(name), ImageMeta::new(name, 1)).unwrap();
        assert_eq!(
            NorSegments::new(sim("28f008sa"), 16 * 1024)
                .unwrap()
                .geometry()
                .slots,
            15
        );
        assert!(matches!(
            NorSegments::new(sim("28f008sa"), 32 * 1024),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn small_units_are_taken_several_to_a_segment() {
        // (preset, units per segment, segments, slots per segment): entries of 16 bytes on these
        // reprogrammable parts (SPEC.md §2.2).
        for (name, units, segments, slots) in [
            ("m29dw640d", 1, 126, 124),
            ("st10f280", 1, 7, 124),
            ("st10f280/2", 4, 56, 15),
            ("st10f280/8", 1, 56, 15),
            ("w25q64jv", 4, 512, 30),
        ] {
            assert_layout(&part(name), name, (units, segments, slots));
        }
    }

    #[test]
    fn nor_slot_data_starts_on_a_program_page_at_no_cost_in_slots() {
        let mut d = part("w25q64jv");
        // 32 + 30 × 16 bytes of header and entries, then the data from 512: 30 slots of 512
        // bytes in the 16 KiB segment, as many per KiB as 15 in 8 KiB.
        assert_eq!((d.shape.data_off, d.geometry().slots), (512, 30));
        let data = [0x5Au8; 512];
        let before = d.flash().stats().programs;
        d.write_slot(3, 4, &sector_tag(1), &data).unwrap();
        // Two program pages of data (a slot straddling three pages took three); the entry
        // waits for the entries after it.
        assert_eq!(d.flash().stats().programs - before, 2);
        d.sync().unwrap();
        assert_eq!(d.flash().stats().programs - before, 3);
        let mut back = [0u8; 512];
        let state = d.read_slot_tag(3, 4, &mut back).unwrap();
        assert!(
            matches!(state, TagState::Valid(t) if t.key == 7),
            "{state:?}"
        );
        d.read_slot(3, 4, &mut back).unwrap();
        assert_eq!(back, data);
        // Parts without program pages keep the data right after the entries.
        assert_eq!(part("m29dw640d").shape.data_off, 32 + 124 * 16);
    }

    #[test]
    fn erased_bytes_are_not_programmed_on_flash() {
        assert_eq!(programmed_span(&[0xFF; 8], 1), (0, 0));
        assert_eq!(programmed_span(&[0xFF, 1, 0xFF, 2, 0xFF], 1), (1, 3));
        // Whole words, so the command stays aligned.
        assert_eq!(
            programmed_span(&[0xFF, 0xFF, 0xFF, 7, 0xFF, 0xFF], 2),
            (2, 2)
        );
        assert_eq!(programmed_span(&[0xFF, 0xFF, 0xFF, 0xFF, 7], 2), (4, 1));
        // A slot half filled (a journal block, a superblock) takes one page's command on
        // the W25Q64JV, not two, and reads back whole.
        let mut d = part("w25q64jv");
        let mut data = [0xFFu8; 512];
        data[..100].fill(0x5A);
        data[200] = 0;
        let before = d.flash().stats().programs;
        d.write_slot(2, 0, &sector_tag(0), &data).unwrap();
        assert_eq!(d.flash().stats().programs - before, 1);
        let mut back = [0u8; 512];
        d.read_slot(2, 0, &mut back).unwrap();
        assert_eq!(back, data);
    }

    /// A slot read as written takes its first `W` bytes from the part and the rest as the
    /// erased bytes they were: bytes programmed in place past `W` since (an appended
    /// record, which only the owner's sectors get) are read by a whole read alone.
    #[test]
    fn a_slot_read_as_written_stops_at_its_written_length() {
        let mut d = part("w25q64jv");
        let mut data = [0xFFu8; 512];
        data[..100].fill(0x5A);
        d.write_slot(2, 1, &sector_tag(1), &data).unwrap();
        d.patch_slot(2, 1, 256, &[0x22; 4]).unwrap();
        let read = |d: &mut NorSegments<NorSim>, written: bool| {
            let before = d.flash().stats().bytes_read;
            let mut back = [0u8; 512];
            let tag = if written {
                d.read_slot_written(2, 1, &mut back, 0)
            } else {
                d.read_slot_tag(2, 1, &mut back)
            };
            assert_eq!(tag, Ok(TagState::Valid(sector_tag(1))));
            (back, d.flash().stats().bytes_read - before)
        };
        let (whole, whole_bytes) = read(&mut d, false);
        assert_eq!(
            (&whole[..100], &whole[256..260]),
            (&data[..100], &[0x22; 4][..])
        );
        let (written, written_bytes) = read(&mut d, true);
        assert_eq!(written, data);
        assert_eq!((whole_bytes, written_bytes), (512 + 16, 100 + 16));
        // A slot programmed in place in its last bytes (an index node's spare area) is read
        // with them, and the erased bytes between left out.
        d.patch_slot(2, 1, 496, &[0x33; 4]).unwrap();
        let before = d.flash().stats().bytes_read;
        let mut back = [0u8; 512];
        d.read_slot_written(2, 1, &mut back, 16).unwrap();
        assert_eq!(d.flash().stats().bytes_read - before, 16 + 100 + 16);
        let mut want = data;
        want[496..500].fill(0x33);
        assert_eq!(back, want);
        // Damage inside the written length is caught either way.
        let at = d.data_at(2, 1);
        d.flash_mut().corrupt_at_rest(at + 10, &[0x00]).unwrap();
        assert_eq!(
            d.read_slot_written(2, 1, &mut [0u8; 512], 0),
            Err(Error::Io)
        );
        assert_eq!(d.read_slot(2, 1, &mut [0u8; 512]), Err(Error::Io));
    }

    #[test]
    fn spi_nor_entries_wait_and_go_down_a_program_page_at_a_time() {
        let mut d = part("w25q64jv");
        let data = [0x5Au8; 512];
        let before = d.flash().stats().programs;
        let header = test_header(9, 2);
        // The header waits with the entries that follow it.
        d.write_header(2, &header).unwrap();
        assert_eq!(d.read_header(2).unwrap(), HeaderState::Valid(header));
        // The header and the entries of slots 0–13 fill the first program page.
        for slot in 0..13 {
            d.write_slot(2, slot, &sector_tag(u64::from(slot)), &data)
                .unwrap();
        }
        assert_eq!(d.flash().stats().programs - before, 26, "data only");
        // Waiting entries read as written, for the tags and for the data's checksum.
        assert!(matches!(d.read_tag(2, 12).unwrap(), TagState::Valid(_)));
        let mut back = [0u8; 512];
        d.read_slot(2, 12, &mut back).unwrap();
        assert!(!d.slot_erased(2, 12).unwrap());
        // On flash, though, slot 12 has no entry and the segment no header: a cut now
        // leaves slots 0–12 programmed under an erased header, which a mount erases.
        let mut raw = [0u8; 16];
        let at = d.entry_at(2, 12);
        d.flash_mut().read(at, &mut raw).unwrap();
        assert!(raw.iter().all(|&b| b == 0xFF));
        let mut head = [0u8; HEADER_LEN];
        let base = d.base(2);
        d.flash_mut().read(base, &mut head).unwrap();
        assert!(head.iter().all(|&b| b == 0xFF));
        d.write_slot(2, 13, &sector_tag(13), &data).unwrap();
        // Slot 13's data, and the header with the first page of entries in one command.
        assert_eq!(d.flash().stats().programs - before, 29);
        d.flash_mut().read(at, &mut raw).unwrap();
        assert!(matches!(
            NorEntry::new(true).decode(&raw),
            TagState::Valid(_)
        ));
        d.flash_mut().read(base, &mut head).unwrap();
        assert_eq!(SegHeader::decode(&head), Ok(Some(header)));
        for slot in 14..29 {
            d.write_slot(2, slot, &sector_tag(u64::from(slot)), &data)
                .unwrap();
        }
        let at = d.entry_at(2, 28);
        d.flash_mut().read(at, &mut raw).unwrap();
        assert!(raw.iter().all(|&b| b == 0xFF));
        // The segment's last slot puts down the rest of its run: the second page.
        d.write_slot(2, 29, &sector_tag(29), &data).unwrap();
        assert_eq!(d.flash().stats().programs - before, 62);
        assert!(d.pending.is_empty());
        let mut tags = [TagState::Erased; 30];
        d.read_tags(2, &mut tags).unwrap();
        assert!(tags.iter().all(|t| matches!(t, TagState::Valid(_))));
    }

    #[test]
    fn spi_nor_header_waiting_goes_down_at_a_sync_and_a_cut_loses_it() {
        let mut d = part("w25q64jv");
        let data = [0x5Au8; 512];
        let header = test_header(9, 2);
        d.write_header(3, &header).unwrap();
        d.write_slot(3, 0, &sector_tag(1), &data).unwrap();
        let before = d.flash().stats().programs;
        // Header and entry in one command.
        d.sync().unwrap();
        assert_eq!(d.flash().stats().programs - before, 1);
        d.power_cut();
        assert_eq!(d.read_header(3).unwrap(), HeaderState::Valid(header));
        assert!(matches!(d.read_tag(3, 0).unwrap(), TagState::Valid(_)));
        // Unsynced, both are gone with the power: the segment reads unopened, its slot
        // programmed (a mount takes every segment without a header for dirty).
        d.write_header(4, &header).unwrap();
        d.write_slot(4, 0, &sector_tag(2), &data).unwrap();
        d.power_cut();
        assert_eq!(d.read_header(4).unwrap(), HeaderState::Erased);
        assert_eq!(d.read_tag(4, 0).unwrap(), TagState::Erased);
        assert!(!d.slot_erased(4, 0).unwrap());
        // A header whose segment is erased before its entries come goes with it.
        d.write_header(5, &header).unwrap();
        d.erase(5, false).unwrap();
        d.sync().unwrap();
        assert_eq!(d.read_header(5).unwrap(), HeaderState::Erased);
    }

    #[test]
    fn spi_nor_waiting_entries_go_down_before_an_erase_or_a_patch_and_a_cut_loses_them() {
        let mut d = part("w25q64jv");
        let data = [0x5Au8; 512];
        d.write_slot(2, 0, &sector_tag(0), &data).unwrap();
        d.write_slot(3, 0, &sector_tag(1), &data).unwrap();
        // Erasing a segment (a cleaned one, whose copies wait) puts every entry down first.
        d.erase(5, false).unwrap();
        assert!(d.pending.is_empty());
        let mut raw = [0u8; 20];
        let at = d.entry_at(3, 0);
        d.flash_mut().read(at, &mut raw).unwrap();
        assert!(matches!(
            NorEntry::new(true).decode(&raw),
            TagState::Valid(_)
        ));
        // A program in place is a commit point: what was written before it goes down too.
        let mut half = [0xFFu8; 512];
        half[..256].fill(0x11);
        d.write_slot(2, 1, &sector_tag(2), &half).unwrap();
        d.write_slot(2, 2, &sector_tag(3), &data).unwrap();
        d.patch_slot(2, 1, 256, &[0x22; 4]).unwrap();
        assert!(d.pending.is_empty());
        let at = d.entry_at(2, 2);
        d.flash_mut().read(at, &mut raw).unwrap();
        assert!(matches!(
            NorEntry::new(true).decode(&raw),
            TagState::Valid(_)
        ));
        // A cut loses what waits: the slots' data is there, their tags read erased.
        d.write_slot(2, 3, &sector_tag(4), &data).unwrap();
        d.write_slot(2, 4, &sector_tag(5), &[0xFF; 512]).unwrap();
        d.write_slot(2, 5, &sector_tag(6), &data).unwrap();
        d.power_cut();
        assert_eq!(d.read_tag(2, 3).unwrap(), TagState::Erased);
        assert_eq!(d.read_slot(2, 3, &mut [0u8; 512]), Err(Error::Io));
        // A head resumed there goes past every slot the cut left programmed, even past one
        // that holds only 0xFF bytes (slot 4) with a dirty one after it.
        assert_eq!(d.resume_slot(2, 3).unwrap(), Some(6));
        assert_eq!(d.resume_slot(2, 6).unwrap(), Some(6));
        // Nothing left: a full segment is not resumed.
        for slot in 6..30 {
            d.write_slot(2, slot, &sector_tag(u64::from(slot)), &data)
                .unwrap();
        }
        d.power_cut();
        assert_eq!(d.resume_slot(2, 6).unwrap(), None);
    }

    #[test]
    fn spi_nor_entries_that_fail_to_program_keep_waiting_and_fail_every_sync() {
        use flash::{FaultConfig, Timebomb};
        let mut d = part("w25q64jv");
        let data = [0x5Au8; 512];
        for slot in 0..3 {
            d.write_slot(2, slot, &sector_tag(u64::from(slot)), &data)
                .unwrap();
        }
        // Segment 2 is units 8–11: the header's unit, with the entries, wears out.
        d.flash_mut().set_faults(FaultConfig {
            timebombs: alloc::vec![Timebomb {
                block: 8,
                at_erases: 0,
            }],
            ..FaultConfig::default()
        });
        // No sync acknowledges slots a cut would lose; they still read, for the cleaner.
        assert!(matches!(
            d.sync(),
            Err(Error::Flash(FlashError::ProgramFailed { .. }))
        ));
        assert!(d.sync().is_err());
        let mut back = [0u8; 512];
        d.read_slot(2, 2, &mut back).unwrap();
        assert_eq!(back, data);
        // Retiring a segment puts the copies of its live slots down first.
        d.write_slot(4, 0, &sector_tag(8), &data).unwrap();
        d.flash_mut().set_faults(FaultConfig::default());
        let mut e = alloc::vec![0u8; 16];
        d.mark_bad(7).unwrap();
        let at = d.entry_at(4, 0);
        d.flash_mut().read(at, &mut e).unwrap();
        assert!(matches!(NorEntry::new(true).decode(&e), TagState::Valid(_)));
        // Once the segment is erased (its live slots moved), syncs succeed again.
        d.flash_mut().set_faults(FaultConfig::default());
        d.write_slot(3, 0, &sector_tag(9), &data).unwrap();
        d.erase(2, false).unwrap();
        assert!(d.pending.is_empty());
        d.sync().unwrap();
    }

    /// Units per segment, segments and slots per segment of `d`, preset `name`.
    fn assert_layout<S: Segments>(d: &S, name: &str, want: (u32, u32, u32)) {
        let g = d.geometry();
        assert_eq!((d.units_per_segment(), g.segments, g.slots), want, "{name}");
    }

    #[test]
    fn a_segment_stays_in_one_bank() {
        // Two banks of 2 units of 2 KiB: only 2 units can go together.
        let spec = NorSpec {
            unit_size: 2048,
            units: 4,
            banks: 2,
            ..spec("m29dw640d")
        };
        assert_eq!(units_per_segment(&spec), 2);
        let d = NorSegments::new(NorSim::new(spec, ImageMeta::new("t", 1)).unwrap(), 512).unwrap();
        assert_eq!((d.bank_of(0), d.bank_of(1)), (0, 1));
    }

    /// A segment header of a volume with slots of 2^`slot_shift` bytes in segments of
    /// 2^`unit_shift` erase units.
    fn test_header(slot_shift: u8, unit_shift: u8) -> SegHeader {
        SegHeader {
            erase_count: 1,
            open_seq: 1,
            head: 1,
            slc: false,
            volume: crate::media::tag::Volume {
                format: 1,
                slot_shift,
                unit_shift,
                size: 1,
                anchors: None,
                regions: 0xFF,
            },
        }
    }

    /// The tag of sector 7 at sequence number `seq`.
    fn sector_tag(seq: u64) -> Tag {
        Tag {
            key: 7,
            seq,
            kind: crate::media::tag::Kind::Sector,
            copy: false,
        }
    }

    /// The erase units whose counts differ between `before` and `after`.
    fn changed_units(before: &[u32], after: &[u32]) -> Vec<usize> {
        (0..after.len())
            .filter(|&u| after[u] != before[u])
            .collect()
    }

    #[test]
    fn erasing_a_segment_erases_each_of_its_units() {
        let mut d = part("st10f280/2");
        let header = test_header(9, 2);
        d.write_header(1, &header).unwrap();
        let tag = sector_tag(1);
        // The last slot lies in the segment's last unit.
        d.write_slot(1, 14, &tag, &[0x5A; 512]).unwrap();
        assert!(!d.slot_erased(1, 14).unwrap());
        let before = d.flash().erase_counts();
        d.erase(1, false).unwrap();
        let erased = changed_units(&before, &d.flash().erase_counts());
        assert_eq!(erased, [4, 5, 6, 7]);
        assert_eq!(d.read_header(1).unwrap(), HeaderState::Erased);
        assert!(d.slot_erased(1, 14).unwrap());
    }

    fn nand(name: &str) -> NandSegments<flash::NandSim> {
        let DeviceSpec::Nand(spec) = preset::lookup(name).unwrap().spec else {
            panic!("{name} is not NAND");
        };
        NandSegments::new(flash::NandSim::new(spec, ImageMeta::new(name, 1)).unwrap()).unwrap()
    }

    #[test]
    fn large_nand_parts_take_several_blocks_to_a_segment() {
        // (preset, blocks per segment, segments, slots per segment): SPEC.md §2.1.
        for (name, units, segments, slots) in [
            ("nand-128m", 2, 4096, 63),
            ("nand-1g", 2, 4096, 127),
            ("w25n01gv", 1, 1024, 63),
            ("mlc-flexfs", 1, 2048, 127),
        ] {
            assert_layout(&nand(name), name, (units, segments, slots));
        }
        // A 16 GiB part of 128 KiB blocks: the count stays capped.
        let DeviceSpec::Nand(spec) = preset::lookup("nand-1g").unwrap().spec else {
            unreachable!()
        };
        let big = flash::NandSpec {
            blocks: 131_072,
            ..spec
        };
        assert_eq!(nand_blocks_per_segment(&big), 32);
        assert_eq!(
            big.blocks / nand_blocks_per_segment(&big),
            NAND_MAX_SEGMENTS
        );
    }

    #[test]
    fn a_nand_segment_numbers_its_pages_across_its_blocks() {
        let d = nand("nand-1g");
        assert_eq!(d.header_page(3), PageAddr::new(6, 0));
        assert_eq!(d.slot_page(3, 0), PageAddr::new(6, 1));
        assert_eq!(d.slot_page(3, 62), PageAddr::new(6, 63));
        assert_eq!(d.slot_page(3, 63), PageAddr::new(7, 0));
        assert_eq!(d.slot_page(3, 126), PageAddr::new(7, 63));
    }

    #[test]
    fn a_nand_segment_is_erased_and_retired_whole() {
        let mut d = nand("nand-1g");
        let header = test_header(11, 1);
        let good = (0..d.geometry().segments - 1)
            .find(|&s| !d.is_bad(s).unwrap() && !d.is_bad(s + 1).unwrap())
            .unwrap();
        d.write_header(good, &header).unwrap();
        let tag = sector_tag(1);
        // The last slot lies in the segment's second block.
        d.write_slot(good, 126, &tag, &[0x5A; 2048]).unwrap();
        assert_eq!(d.read_tag(good, 126).unwrap(), TagState::Valid(tag));
        let before = d.flash().erase_counts();
        d.erase(good, false).unwrap();
        let erased = changed_units(&before, &d.flash().erase_counts());
        let first = 2 * good as usize;
        assert_eq!(erased, [first, first + 1]);
        assert_eq!(d.read_header(good).unwrap(), HeaderState::Erased);
        assert!(d.slot_erased(good, 126).unwrap());
        // A bad block in the second half (a retirement a cut stopped part-way) makes the
        // segment bad; its slots there read as garbage, and its erase fails.
        let next = good + 1;
        d.write_header(next, &header).unwrap();
        assert!(!d.is_retired(next).unwrap());
        d.flash_mut().mark_bad(2 * next + 1).unwrap();
        assert!(d.is_bad(next).unwrap());
        // A retirement marks the last block first: one begun shows in that block's mark.
        assert!(d.is_retired(next).unwrap());
        assert_eq!(d.read_tag(next, 126).unwrap(), TagState::Garbage);
        assert!(matches!(
            d.write_slot(next, 126, &tag, &[0x5A; 2048]),
            Err(Error::Flash(FlashError::ProgramFailed { block })) if block == next
        ));
        assert!(matches!(
            d.erase(next, false),
            Err(Error::Flash(FlashError::EraseFailed { block })) if block == next
        ));
        // Retiring a segment marks each of its blocks.
        d.mark_bad(good).unwrap();
        assert!(d.flash_mut().is_bad(2 * good).unwrap());
        assert!(d.flash_mut().is_bad(2 * good + 1).unwrap());
        assert!(d.is_retired(good).unwrap());
    }

    #[test]
    fn a_roll_forward_reads_only_the_tags_past_a_used_count_up_to_the_written_end() {
        let mut d = nand("w25n01gv");
        let tag = sector_tag;
        for slot in 0..4 {
            d.write_slot(2, slot, &tag(u64::from(slot) + 1), &[0x5A; 2048])
                .unwrap();
        }
        // One slot left erased between two written (an MSB page skipped on MLC) does not
        // end what the segment holds.
        d.write_slot(2, 5, &tag(6), &[0x5A; 2048]).unwrap();
        let slots = d.geometry().slots;
        let mut out = vec![TagState::Erased; slots as usize];
        let before = d.flash().stats().reads;
        d.read_written_tags(2, 3, &mut out).unwrap();
        // A spare read for slot 3; a spare and a page read for slot 4, the first erased;
        // after an erased slot, one page read each (tag and data at once): slot 5, written,
        // then 6, 7 and 8, but 6 starts a run again (a spare and a page read), and three in
        // a row from 6 end the segment.
        assert_eq!(d.flash().stats().reads - before, 1 + 2 + 1 + 2 + 1 + 1);
        assert_eq!(out[3], TagState::Valid(tag(4)));
        assert_eq!(out[5], TagState::Valid(tag(6)));
        assert!(out[..3].iter().all(|t| *t == TagState::Erased));
        assert_eq!(out[4], TagState::Erased);
        assert!(out[6..].iter().all(|t| *t == TagState::Erased));
        // Handed over one at a time as they are read, without a buffer: the same tags for
        // the same reads, up to the end of the run.
        let before = d.flash().stats().reads;
        let mut seen = Vec::new();
        d.visit_written_tags(2, 3, &mut |slot, t| seen.push((slot, t)))
            .unwrap();
        assert_eq!(d.flash().stats().reads - before, 1 + 2 + 1 + 2 + 1 + 1);
        let want: Vec<(u32, TagState)> = (3..9).map(|s| (s, out[s as usize])).collect();
        assert_eq!(seen, want);
    }

    /// The page reads [`Segments::written_end`] takes on segment 2 of `d`, checking that it
    /// finds `end`.
    fn reads_to_find_end(d: &mut NandSegments<flash::NandSim>, end: u32) -> u64 {
        let before = d.flash().stats().reads;
        assert_eq!(
            d.written_end(2, u32::MAX).unwrap(),
            Some(end),
            "written up to {end}"
        );
        d.flash().stats().reads - before
    }

    #[test]
    fn the_written_end_is_found_by_a_search_past_single_erased_slots() {
        let mut d = nand("w25n01gv");
        let slots = d.geometry().slots;
        assert_eq!(
            d.written_end(2, u32::MAX).unwrap(),
            Some(0),
            "an erased segment"
        );
        // Written slots with one erased slot after every other (MLC's skipped MSB pages),
        // then a page programmed short of its spare area.
        for end in [1, 2, 7, 40, slots - 2, slots] {
            let mut d = nand("w25n01gv");
            for slot in (0..end).filter(|s| s % 4 != 1 || *s + 1 == end) {
                if slot + 1 == end && end % 3 == 0 {
                    let at = d.slot_page(2, slot);
                    d.flash_mut().program_page(at, &[0x5A; 2048], &[]).unwrap();
                } else {
                    d.write_slot(2, slot, &sector_tag(u64::from(slot) + 1), &[0x5A; 2048])
                        .unwrap();
                }
            }
            let probes = reads_to_find_end(&mut d, end);
            assert!(
                probes <= 8 * 2 * u64::from(WRITTEN_END_RUN),
                "{probes} reads"
            );
        }
    }

    /// Where no slot before the end reads as erased, the end is found a read per probe of the
    /// search, and a run of erased slots from it checked, but for its first slot, which the
    /// search read: about half the reads of a search that reads a run at every probe.
    #[test]
    fn the_written_end_of_slots_written_in_a_row_takes_a_read_per_probe() {
        let slots = nand("w25n01gv").geometry().slots;
        let probes = u64::from(u32::BITS - slots.leading_zeros());
        for end in [0, 1, 2, 7, 40, slots - 2, slots] {
            let mut d = nand("w25n01gv");
            for slot in 0..end {
                d.write_slot(2, slot, &sector_tag(u64::from(slot) + 1), &[0x5A; 2048])
                    .unwrap();
            }
            let reads = reads_to_find_end(&mut d, end);
            assert!(
                reads < probes + u64::from(WRITTEN_END_RUN),
                "{reads} reads up to {end}"
            );
        }
    }

    /// The search may be kept to a segment's first slots (an anchor's records take its
    /// first 128): it finds the end among them, in a read per probe of that range, and
    /// takes them all written for a run cut short by their end.
    #[test]
    fn the_written_end_is_searched_among_the_first_slots_asked() {
        let mut d = nand("w25n01gv");
        for slot in 0..20 {
            d.write_slot(2, slot, &sector_tag(u64::from(slot) + 1), &[0x5A; 2048])
                .unwrap();
        }
        let before = d.flash().stats().reads;
        assert_eq!(d.written_end(2, 32).unwrap(), Some(20));
        let reads = d.flash().stats().reads - before;
        assert!(reads < 5 + u64::from(WRITTEN_END_RUN), "{reads} reads");
        assert_eq!(d.written_end(2, 20).unwrap(), Some(20));
        assert_eq!(d.written_end(2, 10).unwrap(), Some(10));
    }

    /// A segment whose first slots read as erased whole was never written, found in a page
    /// read per slot of the run (a walk of its tags reads the first slot's tag, then its
    /// page); one written slot, or a torn program left under an erased tag, says otherwise.
    #[test]
    fn an_unwritten_segment_is_told_in_a_run_of_page_reads() {
        let mut d = nand("w25n01gv");
        let before = d.flash().stats().reads;
        assert!(d.unwritten(2).unwrap());
        assert_eq!(d.flash().stats().reads - before, u64::from(WRITTEN_END_RUN));
        d.write_slot(2, 1, &sector_tag(1), &[0x5A; 2048]).unwrap();
        assert!(!d.unwritten(2).unwrap());
        let mut d = nand("w25n01gv");
        let at = d.slot_page(2, 2);
        d.flash_mut().program_page(at, &[0x5A; 2048], &[]).unwrap();
        assert!(!d.unwritten(2).unwrap(), "data under an erased tag");
        assert!(d.unwritten(3).unwrap(), "another segment");
    }

    /// A segment in SLC mode on MLC NAND writes only its LSB slots, so every MSB slot reads
    /// as erased: an LSB page that decayed to erased between two of them is not the end of
    /// what the segment holds, neither for a reader going a tag at a time nor for the search.
    #[test]
    fn a_decayed_page_in_an_slc_segment_does_not_end_it() {
        let mut d = nand("mlc-flexfs");
        d.erase(2, false).unwrap();
        d.set_slc(2, true).unwrap();
        let lsb: Vec<u32> = (1..20).step_by(2).collect();
        assert!(lsb.iter().all(|&s| !d.risks_earlier_slot(s)));
        for &slot in &lsb {
            d.write_slot(2, slot, &sector_tag(u64::from(slot)), &[0x5A; 4096])
                .unwrap();
        }
        let decayed = d.slot_page(2, 5);
        d.flash_mut().erase_page_at_rest(decayed).unwrap();
        let mut out = vec![TagState::Erased; d.geometry().slots as usize];
        d.read_written_tags(2, 0, &mut out).unwrap();
        assert_eq!(out[5], TagState::Erased);
        for &slot in lsb.iter().filter(|&&s| s != 5) {
            assert_eq!(
                out[slot as usize],
                TagState::Valid(sector_tag(u64::from(slot)))
            );
        }
        assert_eq!(d.written_end(2, u32::MAX).unwrap(), Some(20));
    }

    #[test]
    fn data_under_an_erased_spare_does_not_end_what_a_segment_holds() {
        let mut d = nand("w25n01gv");
        let tag = sector_tag;
        // Programs cut short before their spare area: data under erased tags.
        for slot in 0..WRITTEN_END_RUN {
            let at = d.slot_page(2, slot);
            d.flash_mut().program_page(at, &[0x5A; 2048], &[]).unwrap();
        }
        d.write_slot(2, WRITTEN_END_RUN, &tag(9), &[0x5A; 2048])
            .unwrap();
        let mut out = vec![TagState::Erased; d.geometry().slots as usize];
        d.read_written_tags(2, 0, &mut out).unwrap();
        assert_eq!(out[WRITTEN_END_RUN as usize], TagState::Valid(tag(9)));
    }
}
