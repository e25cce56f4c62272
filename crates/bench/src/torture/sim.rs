//! Segments on a simulated part, with the fault control the torture and the file-system
//! workloads under cuts need ([`SimSegments`]).

use flash::{AgeReport, AtRest, NandFlash, NandSim, NorSim, NvramNor, NvramSim, Simulated};
use flashfs::{NandSegments, NorSegments, Segments};

/// Segments on a simulated part: what [`super::FtlTarget`] needs for fault control.
pub trait SimSegments: Segments + Clone {
    /// The simulator underneath.
    fn sim(&self) -> &dyn Simulated;
    /// The simulator underneath, mutably.
    fn sim_mut(&mut self) -> &mut dyn Simulated;
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
    /// Damages a segment at rest ([`NandSim::age_block`], [`NorSim::age_unit`]).
    fn age(&mut self, seg: u32, cfg: &AtRest) -> AgeReport {
        let _ = (seg, cfg);
        AgeReport::default()
    }
    /// The damage at rest the torture's [`Fault::AtRest`](super::Fault::AtRest) does to this medium.
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
