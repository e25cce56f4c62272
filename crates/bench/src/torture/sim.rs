//! Segments on a simulated part, with the fault control the torture and the file-system
//! workloads under cuts need ([`SimSegments`]), and the one power supply of a device made of
//! several parts ([`Supply`]).

use std::ops::Range;

use flash::{
    AgeReport, AtRest, CutPoint, NandFlash, NandSim, NorSim, NvramNor, NvramSim, Simulated,
};
use flashfs::media::tiered::Tiered;
use flashfs::{NandSegments, NorSegments, Segments};

/// Segments on a simulated part: what [`super::FtlTarget`] needs for fault control.
pub trait SimSegments: Segments + Clone {
    /// The simulator of the part whose blocks wear, where a flash part's own faults are set
    /// (wear-out's timebombs); on a volume on two devices, the flash's.
    fn sim(&self) -> &dyn Simulated;
    /// The simulator of [`SimSegments::sim`], mutably.
    fn sim_mut(&mut self) -> &mut dyn Simulated;
    /// Every simulator on the device's one power supply, in a fixed order: the part's, or
    /// the NVRAM's and then the flash's of a volume on two devices.
    fn sims(&self) -> Vec<&dyn Simulated> {
        vec![self.sim()]
    }
    /// Calls `f` on every simulator of [`SimSegments::sims`], in the same order.
    fn each_sim_mut(&mut self, f: &mut dyn FnMut(&mut dyn Simulated)) {
        f(self.sim_mut())
    }
    /// The segments a flash part's faults can strike (bit errors, damage at rest): every
    /// one, but on a volume on two devices only the flash's — NVRAM has no ECC and, in the
    /// simulator, no damage at rest.
    fn flash_segments(&self) -> Range<u32> {
        0..self.geometry().segments
    }
    /// Erases of a segment's first erase unit so far (0 on NVRAM, which counts none).
    fn segment_erases(&self, seg: u32) -> u32 {
        let units = self.units_per_segment() as usize;
        self.sim()
            .erase_counts()
            .get(seg as usize * units)
            .copied()
            .unwrap_or(0)
    }
    /// Bit errors the ECC corrects per codeword (`None`: no ECC, e.g. NOR).
    fn ecc_correctable(&self) -> Option<u32> {
        None
    }
    /// Makes `bits` bit errors persist in the page of a slot (see
    /// [`NandSim::inject_bit_errors`]); `false` when the medium cannot.
    fn inject_bit_errors(&mut self, seg: u32, slot: u32, bits: u8) -> bool {
        let _ = (seg, slot, bits);
        false
    }
    /// Damages a segment at rest ([`NandSim::age_block`], [`NorSim::age_unit`]) as `cfg`
    /// says, which is [`SimSegments::at_rest`] of the part the segment lies on.
    fn age(&mut self, seg: u32, cfg: &AtRest) -> AgeReport {
        let _ = (seg, cfg);
        AgeReport::default()
    }
    /// The damage at rest the torture's [`Fault::AtRest`](super::Fault::AtRest) does to this
    /// medium (on a volume on two devices, to its flash).
    fn at_rest(&self) -> AtRest {
        AtRest::default()
    }
}

impl SimSegments for NorSegments<NorSim> {
    fn sim(&self) -> &dyn Simulated {
        self.flash()
    }
    fn sim_mut(&mut self) -> &mut dyn Simulated {
        self.flash_mut()
    }
    fn age(&mut self, seg: u32, cfg: &AtRest) -> AgeReport {
        let units = self.units_per_segment();
        let mut rep = AgeReport::default();
        for u in seg * units..(seg + 1) * units {
            if let Ok(r) = self.flash_mut().age_unit(u, cfg) {
                rep.add(&r);
            }
        }
        rep
    }
    fn at_rest(&self) -> AtRest {
        // No ECC: a few flips per 64 KiB unit, each one damage the data checksum must catch.
        AtRest {
            retention: 0.05,
            wear_factor: 10.0,
            disturb: 1e-5,
            miscorrection: 0.0,
            erased: 0.005,
        }
    }
}

/// NVRAM laid out as NOR: no damage at rest (FRAM keeps its bits for its rated retention
/// whatever its use; its writes are not worn by reads), so the at-rest kind leaves it as is.
impl SimSegments for NorSegments<NvramNor<NvramSim>> {
    fn sim(&self) -> &dyn Simulated {
        self.flash()
    }
    fn sim_mut(&mut self) -> &mut dyn Simulated {
        self.flash_mut()
    }
    fn flash_segments(&self) -> Range<u32> {
        0..0
    }
}

impl SimSegments for NandSegments<NandSim> {
    fn sim(&self) -> &dyn Simulated {
        self.flash()
    }
    fn sim_mut(&mut self) -> &mut dyn Simulated {
        self.flash_mut()
    }
    fn ecc_correctable(&self) -> Option<u32> {
        Some(self.flash().spec().ecc.correctable)
    }
    fn inject_bit_errors(&mut self, seg: u32, slot: u32, bits: u8) -> bool {
        let at = self.slot_page(seg, slot);
        self.flash_mut().inject_bit_errors(at, bits).is_ok()
    }
    fn age(&mut self, seg: u32, cfg: &AtRest) -> AgeReport {
        let blocks = self.units_per_segment();
        let mut rep = AgeReport::default();
        for b in seg * blocks..(seg + 1) * blocks {
            if let Ok(r) = self.flash_mut().age_block(b, cfg) {
                rep.add(&r);
            }
        }
        rep
    }
    fn at_rest(&self) -> AtRest {
        // A mean of (t + 1) / 4 errors per codeword on a fresh block: most pages corrected,
        // some beyond the ECC, a few of those miscorrected, now and then a page erased.
        let t = self.flash().spec().ecc.correctable as f64;
        let per_512 = 512.0 / self.flash().spec().ecc.codeword.max(1) as f64;
        AtRest {
            retention: 0.25 * (t + 1.0) * per_512,
            wear_factor: 10.0,
            disturb: 1e-4,
            miscorrection: 0.05,
            erased: 0.005,
        }
    }
}

/// A volume on two devices ([`Tiered`], NVRAM beside NAND): both parts' simulators hang on
/// one supply ([`SimSegments::sims`]), and the faults of a flash part go to the bulk
/// device's segments, by their number on it.
impl<F: SimSegments, B: SimSegments> SimSegments for Tiered<F, B> {
    fn sim(&self) -> &dyn Simulated {
        self.bulk().sim()
    }
    fn sim_mut(&mut self) -> &mut dyn Simulated {
        self.bulk_mut().sim_mut()
    }
    fn sims(&self) -> Vec<&dyn Simulated> {
        let mut v = self.fast().sims();
        v.extend(self.bulk().sims());
        v
    }
    fn each_sim_mut(&mut self, f: &mut dyn FnMut(&mut dyn Simulated)) {
        self.fast_mut().each_sim_mut(f);
        self.bulk_mut().each_sim_mut(f);
    }
    fn flash_segments(&self) -> Range<u32> {
        let split = self.fast_segments();
        let (fast, bulk) = (self.fast().flash_segments(), self.bulk().flash_segments());
        // One range: the fast device's (none, for NVRAM) or the bulk device's after it.
        if fast.is_empty() {
            bulk.start + split..bulk.end + split
        } else {
            fast
        }
    }
    fn segment_erases(&self, seg: u32) -> u32 {
        match seg.checked_sub(self.fast_segments()) {
            None => self.fast().segment_erases(seg),
            Some(s) => self.bulk().segment_erases(s),
        }
    }
    fn ecc_correctable(&self) -> Option<u32> {
        self.bulk().ecc_correctable()
    }
    fn inject_bit_errors(&mut self, seg: u32, slot: u32, bits: u8) -> bool {
        match seg.checked_sub(self.fast_segments()) {
            None => self.fast_mut().inject_bit_errors(seg, slot, bits),
            Some(s) => self.bulk_mut().inject_bit_errors(s, slot, bits),
        }
    }
    fn age(&mut self, seg: u32, cfg: &AtRest) -> AgeReport {
        match seg.checked_sub(self.fast_segments()) {
            // `cfg` is the flash's: the fast device takes its own.
            None => {
                let own = self.fast().at_rest();
                self.fast_mut().age(seg, &own)
            }
            Some(s) => self.bulk_mut().age(s, cfg),
        }
    }
    fn at_rest(&self) -> AtRest {
        self.bulk().at_rest()
    }
}

/// One power supply for every simulator of a device ([`SimSegments::sims`]): a cut point
/// counts the mutating operations of all of them together and falls on whichever part
/// performs the operation at that count, torn as that part tears (a page half programmed,
/// a block partly erased, a prefix of an NVRAM write); once one part loses power every part
/// has lost it, and a reboot brings them all back. On a device of one part it is that
/// part's own cut.
///
/// Each simulator counts and cuts its own operations, so the supply keeps the cut point
/// over the total and, before every access of the device ([`Supply::aim`]), sets each
/// part's cut as far ahead of its own count as the supply's is ahead of the total; after
/// the access ([`Supply::settle`]) a part that lost power takes it from the others. That
/// is exact when one access drives the mutating operations of one part only, which a
/// volume on two devices keeps: every segment lies on one part, and of a sync only the
/// NVRAM's side could program (NAND's sync programs nothing). `settle` checks it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Supply {
    /// The cut, counted in mutating operations of every part together since their creation.
    cut: Option<CutPoint>,
}

impl Supply {
    /// Mutating operations of every part of `dev` so far: the unit of cut points.
    pub fn ops<D: SimSegments>(dev: &D) -> u64 {
        dev.sims().iter().map(|s| s.ops()).sum()
    }

    /// Whether every part of `dev` has power.
    pub fn powered<D: SimSegments>(dev: &D) -> bool {
        dev.sims().iter().all(|s| s.is_powered())
    }

    /// Whether a cut is scheduled and has not fired.
    pub fn pending(&self) -> bool {
        self.cut.is_some()
    }

    /// Cuts the power once `ops` more mutating operations of any part of `dev` have
    /// completed; with `torn`, the next one is left half done.
    pub fn schedule_cut<D: SimSegments>(&mut self, dev: &mut D, ops: u64, torn: bool) {
        self.cut = Some(CutPoint {
            after_ops: Self::ops(dev).saturating_add(ops),
            torn,
        });
        self.aim(dev);
    }

    /// Forgets the scheduled cut, here and in every part.
    pub fn cancel_cut<D: SimSegments>(&mut self, dev: &mut D) {
        self.cut = None;
        dev.each_sim_mut(&mut |s| {
            let mut faults = s.faults().clone();
            faults.cut = None;
            s.set_faults(faults);
        });
    }

    /// Cuts the power of every part now.
    pub fn cut_now<D: SimSegments>(&mut self, dev: &mut D) {
        self.cut = None;
        dev.each_sim_mut(&mut |s| {
            clear_cut(s);
            // A host I/O failure of a simulator's store shows at its next access.
            if s.is_powered() {
                let _ = s.power_cut();
            }
        });
    }

    /// Restores the power of every part.
    pub fn reboot<D: SimSegments>(&mut self, dev: &mut D) {
        dev.each_sim_mut(&mut |s| s.reboot());
    }

    /// Before an access of `dev`: sets each part's cut to the supply's.
    pub fn aim<D: SimSegments>(&self, dev: &mut D) {
        let Some(cut) = self.cut else { return };
        let left = cut.after_ops.saturating_sub(Self::ops(dev));
        dev.each_sim_mut(&mut |s| s.schedule_cut(left, cut.torn));
    }

    /// After an access of `dev`: if a part lost power, every part loses it and the cut is
    /// spent. Returns the part that lost it first, by its place in [`SimSegments::sims`],
    /// when the power went.
    pub fn settle<D: SimSegments>(&mut self, dev: &mut D) -> Option<usize> {
        let down = dev.sims().iter().position(|s| !s.is_powered());
        let Some(part) = down else {
            // Past the cut point with the power on: one access drove operations of two
            // parts, and the cut fell behind the point it was scheduled at.
            debug_assert!(
                self.cut.is_none_or(|c| Self::ops(dev) <= c.after_ops),
                "one device access drove mutating operations of two parts"
            );
            return None;
        };
        self.cut_now(dev);
        Some(part)
    }
}

/// Forgets a part's scheduled cut, if it has one (setting its faults reseeds its generator:
/// a part without a cut keeps its random draws as they were).
fn clear_cut(sim: &mut dyn Simulated) {
    if sim.faults().cut.is_some() {
        let mut faults = sim.faults().clone();
        faults.cut = None;
        sim.set_faults(faults);
    }
}
