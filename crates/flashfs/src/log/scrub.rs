//! Scrubbing: every live slot read back and checked, and segments whose data is wearing away
//! moved to fresh ones while the ECC can still correct them.
//!
//! A read corrects bit errors silently until a codeword holds more than the ECC corrects;
//! then the data is gone. Retention loss and read disturb grow slowly, so a slot that needed
//! the ECC for half its strength is moved now, with its segment (the cleaner copies the
//! segment's live slots and erases it), before the errors grow past it. A slot that no
//! longer reads back is lost: the owner is told, as when the cleaner meets one.

use alloc::vec;
use alloc::vec::Vec;

use super::segment::SegState;
use super::{Liveness, Log, Owner, SlotAddr, Take, Victim};
use crate::error::Result;
use crate::media::tag::TagState;
use crate::media::Segments;

/// What a scrub found and did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ScrubReport {
    /// Live slots read back and checked.
    pub slots: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Bit errors the ECC corrected in them.
    pub corrected_bits: u64,
    /// Segments whose live slots were moved to fresh segments, and the segments erased.
    pub refreshed: u64,
    /// Live slots that did not read back: their data is lost, and the owner was told.
    pub lost_slots: u64,
}

impl<D: Segments> Log<D> {
    /// The corrected bits in one slot at which its segment is moved: half the ECC's
    /// strength (at least one); never on a medium without ECC.
    pub fn refresh_bits(&self) -> u32 {
        match self.dev.ecc_strength() {
            0 => u32::MAX,
            t => t.div_ceil(2),
        }
    }

    /// Reads back every live slot, checking its data; moves the live slots of each segment
    /// where a slot needed the ECC for `refresh_bits` bits or more, or did not read back
    /// (the unreadable ones are reported to `owner` as lost). Slots of the segments the
    /// heads are still filling are checked and reported where they are.
    pub fn scrub(&mut self, owner: &mut dyn Owner, refresh_bits: u32) -> Result<ScrubReport> {
        let mut rep = ScrubReport::default();
        let ss = self.geo.slot_size as usize;
        let mut buf = vec![0u8; ss];
        for seg in 0..self.geo.segments {
            let state = self.segs[seg as usize].state;
            if !matches!(state, SegState::Full | SegState::Failing | SegState::Open) {
                continue;
            }
            let mut worst = 0;
            let mut unreadable = Vec::new();
            let mut tags = vec![TagState::Erased; self.geo.slots as usize];
            // The live slots are those whose tag the owner (or the checkpoint) still needs,
            // each read with its tag in one go; a used slot without a valid tag may be a live
            // one whose tag decayed, which the count of those found tells. A head's segment
            // is read up to where it is filled.
            let end = match state {
                SegState::Open => self.segs[seg as usize].used(),
                _ => self.geo.slots,
            };
            let mut found = 0;
            let mut doubtful = false;
            for slot in 0..end {
                let (t, data) = self.dev.read_slot_scrubbed(seg, slot, &mut buf)?;
                tags[slot as usize] = t;
                let tag = match t {
                    TagState::Valid(tag) => tag,
                    t => {
                        doubtful |= self.may_have_decayed(seg, slot, t);
                        continue;
                    }
                };
                if self.liveness(owner, &tag, SlotAddr { seg, slot })? != Liveness::Live {
                    continue;
                }
                found += 1;
                match data {
                    Some(bits) => {
                        rep.slots += 1;
                        rep.bytes += ss as u64;
                        rep.corrected_bits += u64::from(bits);
                        worst = worst.max(bits);
                    }
                    None => unreadable.push(slot),
                }
            }
            let unnamed = doubtful && self.segs[seg as usize].live() > found;
            if worst < refresh_bits && unreadable.is_empty() && !unnamed {
                continue;
            }
            let lost = self.stats.lost_slots;
            if self.segs[seg as usize].cleanable() {
                self.relocate(owner, seg)?;
                rep.refreshed += 1;
            } else {
                // A head's open segment cannot be cleaned: its unreadable slots are reported
                // where they are.
                for slot in unreadable {
                    let tag = match tags[slot as usize] {
                        TagState::Valid(t) => Some(t),
                        _ => None,
                    };
                    self.lose(owner, tag.as_ref(), SlotAddr { seg, slot })?;
                }
                if unnamed {
                    self.lose_unnamed(owner, seg, &tags)?;
                }
            }
            rep.lost_slots += self.stats.lost_slots - lost;
        }
        Ok(rep)
    }

    /// Cleans `seg` now, whatever the policy would choose: its live slots are copied (the
    /// unreadable ones reported lost) and it is erased.
    fn relocate(&mut self, owner: &mut dyn Owner, seg: u32) -> Result<()> {
        // A victim in progress is finished first: one victim at a time.
        while self.victim.as_ref().is_some_and(|v| v.seg != seg) {
            self.clean_step(owner, u32::MAX, Take::ANY)?;
        }
        if self.victim.is_none() {
            if !self.segs[seg as usize].cleanable() {
                return Ok(());
            }
            let mut tags = vec![TagState::Erased; self.geo.slots as usize];
            self.dev.read_tags(seg, &mut tags)?;
            self.victim = Some(Victim::new(seg, false, tags));
        }
        while self.victim.is_some() {
            self.clean_step(owner, u32::MAX, Take::ANY)?;
        }
        Ok(())
    }
}
