//! Fault injection: power cuts, torn operations, bit flips, silent failures, reordered
//! completion and wear-out. Everything random is drawn from one seeded generator, so a run is
//! replayed exactly from its seed.

use alloc::vec::Vec;
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Where the power goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CutPoint {
    /// Mutating operations (programs, erases, writes, bad-block marks) that complete before
    /// the cut, counted from the device's creation or opening.
    pub after_ops: u64,
    /// Whether the next operation is torn (partly done) rather than not started.
    pub torn: bool,
}

/// A block that wears out early: program and erase fail once its erase count reaches
/// `at_erases`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timebomb {
    /// Block (erase unit).
    pub block: u32,
    /// Erase count at which it fails.
    pub at_erases: u32,
}

/// The faults a simulator injects. The default injects none.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FaultConfig {
    /// Seed of every random choice below.
    pub seed: u64,
    /// A power cut, if any.
    pub cut: Option<CutPoint>,
    /// Probability that a bit flips on a read (transient; NAND's ECC may correct it, NOR has
    /// none).
    pub bit_flip_rate: f64,
    /// Probability that a program reports success but does nothing.
    pub silent_program_rate: f64,
    /// Probability that an erase reports success but does nothing.
    pub silent_erase_rate: f64,
    /// Programs the device may hold in a volatile buffer and complete out of order: at a
    /// power cut a random subset of the programs since the last `sync` (up to this many of
    /// the latest) is lost. 0 = programs are durable when they return.
    pub reorder_window: usize,
    /// Blocks that wear out early.
    pub timebombs: Vec<Timebomb>,
}

/// Damage at rest: what time (retention loss, worse on worn blocks) and reads of a block
/// (read disturb) do to the charge of stored cells between uses. Applied a block at a time by
/// [`NandSim::age_block`](crate::NandSim::age_block) and
/// [`NorSim::age_unit`](crate::NorSim::age_unit), with random draws from the fault seed.
///
/// NAND: bit errors per ECC codeword; within what the ECC corrects they persist as corrected
/// errors (reads return the right data and count them), beyond it the page fails ECC, or, with
/// probability `miscorrection`, the ECC "corrects" it into other data it passes. NOR has no
/// ECC: the stored bits flip (retention loss clears charge, programmed 0 bits read 1; read
/// disturb adds charge, erased 1 bits read 0).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AtRest {
    /// Mean bit errors per 512 stored bytes of a block never erased (retention loss).
    pub retention: f64,
    /// How many times worse retention is on a block at its rated endurance (linear in its
    /// erase count, and on beyond the endurance).
    pub wear_factor: f64,
    /// Mean bit errors per 512 stored bytes added by each read of the block since its erase.
    pub disturb: f64,
    /// Probability that a NAND codeword beyond what the ECC corrects is miscorrected: the
    /// read passes ECC and returns wrong data.
    pub miscorrection: f64,
    /// Probability that a programmed NAND page (NOR: a 512-byte run) loses all its charge and
    /// reads as erased.
    pub erased: f64,
}

impl Default for AtRest {
    fn default() -> Self {
        AtRest {
            retention: 0.0,
            wear_factor: 10.0,
            disturb: 0.0,
            miscorrection: 0.0,
            erased: 0.0,
        }
    }
}

impl AtRest {
    /// The mean bit errors per 512 bytes of a block with `erases` erases of a part rated for
    /// `endurance`, read `reads` times since its erase.
    pub fn mean(&self, erases: u32, endurance: u32, reads: u32) -> f64 {
        let worn = if endurance == 0 {
            0.0
        } else {
            erases as f64 / endurance as f64
        };
        self.retention * (1.0 + (self.wear_factor - 1.0).max(0.0) * worn)
            + self.disturb * reads as f64
    }
}

/// What damage at rest did to a block.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgeReport {
    /// Pages (NOR: units) that took bit errors.
    pub pages: u64,
    /// Bit errors in all.
    pub bits: u64,
    /// NAND pages whose errors the ECC corrects.
    pub corrected: u64,
    /// NAND pages that now fail ECC.
    pub uncorrectable: u64,
    /// NAND pages the ECC now miscorrects into wrong data.
    pub miscorrected: u64,
    /// Pages (NOR: 512-byte runs) that now read as erased.
    pub erased: u64,
}

impl AgeReport {
    /// Adds another report's counts.
    pub fn add(&mut self, o: &AgeReport) {
        self.pages += o.pages;
        self.bits += o.bits;
        self.corrected += o.corrected;
        self.uncorrectable += o.uncorrectable;
        self.miscorrected += o.miscorrected;
        self.erased += o.erased;
    }

    /// Whether stored data changed in a way the ECC does not hide.
    pub fn visible(&self) -> bool {
        self.pages > self.corrected || self.erased > 0
    }
}

/// When worn blocks fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WearModel {
    /// Never: erase counts are only counted.
    Never,
    /// Every program and erase fails once a block has reached its endurance.
    AtLimit,
    /// Past the endurance, each program and erase fails with a probability that rises
    /// linearly from 0 at the endurance to 1 at twice the endurance, as real parts do.
    #[default]
    Gradual,
}

impl WearModel {
    pub(crate) fn code(self) -> u8 {
        match self {
            WearModel::Never => 0,
            WearModel::AtLimit => 1,
            WearModel::Gradual => 2,
        }
    }

    pub(crate) fn from_code(c: u8) -> Option<Self> {
        Some(match c {
            0 => WearModel::Never,
            1 => WearModel::AtLimit,
            2 => WearModel::Gradual,
            _ => return None,
        })
    }
}

/// What happens to the mutating operation about to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fate {
    /// It runs as asked.
    Normal,
    /// It reports success and does nothing.
    Silent,
    /// It is cut part-way; the power is then off.
    Torn,
    /// The power goes before it starts.
    Cut,
}

/// Fault state of one simulator.
#[derive(Debug, Clone)]
pub(crate) struct Faults {
    pub config: FaultConfig,
    pub rng: Xoshiro256PlusPlus,
    /// Mutating operations that ran (including torn and failed ones).
    pub ops: u64,
    pub powered: bool,
}

impl Faults {
    pub fn new(config: FaultConfig) -> Self {
        Faults {
            rng: Xoshiro256PlusPlus::seed_from_u64(config.seed),
            config,
            ops: 0,
            powered: true,
        }
    }

    pub fn reconfigure(&mut self, config: FaultConfig) {
        self.rng = Xoshiro256PlusPlus::seed_from_u64(config.seed);
        self.config = config;
    }

    /// Decides the fate of the next mutating operation, which may be `silent`-able.
    pub fn begin(&mut self, silent_rate: f64) -> Fate {
        if let Some(cut) = self.config.cut {
            if self.ops >= cut.after_ops {
                self.config.cut = None;
                if cut.torn {
                    self.ops += 1;
                    return Fate::Torn;
                }
                return Fate::Cut;
            }
        }
        self.ops += 1;
        if silent_rate > 0.0 && self.chance(silent_rate) {
            return Fate::Silent;
        }
        Fate::Normal
    }

    /// A uniform draw in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.rng.next_u64() % n
        }
    }

    pub fn byte(&mut self) -> u8 {
        self.rng.next_u64() as u8
    }

    /// Bit flips among `bits` bits that each flip with probability `rate`: a Poisson draw
    /// (the sum of draws of mean at most 16, so large reads flip as many bits as they should).
    pub fn flips(&mut self, bits: u64, rate: f64) -> u32 {
        if rate.is_nan() || rate <= 0.0 {
            return 0;
        }
        let mut left = bits as f64 * rate.min(1.0);
        let mut k = 0u32;
        while left > 0.0 {
            let lambda = left.min(16.0);
            left -= lambda;
            k = k.saturating_add(self.poisson(lambda));
        }
        k
    }

    /// A Poisson draw with mean `lambda` (at most 16; capped at 1000).
    fn poisson(&mut self, lambda: f64) -> u32 {
        if lambda.is_nan() || lambda <= 0.0 {
            return 0;
        }
        let limit = libm::exp(-lambda);
        let mut k = 0;
        let mut p = self.unit();
        while p > limit && k < 1000 {
            k += 1;
            p *= self.unit();
        }
        k
    }

    /// Flips `n` random bits of `buf`.
    pub fn flip_bits(&mut self, buf: &mut [u8], n: u32) {
        if buf.is_empty() {
            return;
        }
        for _ in 0..n {
            let bit = self.below(buf.len() as u64 * 8);
            buf[(bit / 8) as usize] ^= 1 << (bit % 8);
        }
    }

    /// Whether a program or erase of a block at `erase_count` fails from wear.
    pub fn worn_out(
        &mut self,
        model: WearModel,
        block: u32,
        erase_count: u32,
        endurance: u32,
    ) -> bool {
        if self
            .config
            .timebombs
            .iter()
            .any(|t| t.block == block && erase_count >= t.at_erases)
        {
            return true;
        }
        match model {
            WearModel::Never => false,
            WearModel::AtLimit => erase_count >= endurance,
            WearModel::Gradual => {
                erase_count >= endurance
                    && self.chance((erase_count - endurance) as f64 / endurance as f64)
            }
        }
    }
}

/// SplitMix64: a stateless mix, for choices that must follow from an image's seed alone
/// (which blocks left the factory bad).
pub(crate) fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_draws() {
        let mut a = Faults::new(FaultConfig {
            seed: 7,
            ..Default::default()
        });
        let mut b = Faults::new(FaultConfig {
            seed: 7,
            ..Default::default()
        });
        for _ in 0..100 {
            assert_eq!(a.below(1000), b.below(1000));
        }
    }

    #[test]
    fn poisson_mean_is_close() {
        let mut f = Faults::new(FaultConfig {
            seed: 1,
            ..Default::default()
        });
        let n = 20_000;
        let total: u32 = (0..n).map(|_| f.flips(1000, 0.002)).sum();
        let mean = total as f64 / n as f64;
        assert!((1.9..2.1).contains(&mean), "{mean}");
        // Means beyond one draw's range add up.
        let total: u64 = (0..100).map(|_| f.flips(1 << 20, 1e-3) as u64).sum();
        let mean = total as f64 / 100.0;
        assert!((1030.0..1067.0).contains(&mean), "{mean}");
        assert_eq!(f.flips(1000, f64::NAN), 0);
        assert_eq!(f.flips(1000, -1.0), 0);
        assert!(f.flips(8, f64::INFINITY) <= 30);
    }

    #[test]
    fn cut_fires_once_at_its_point() {
        let mut f = Faults::new(FaultConfig {
            cut: Some(CutPoint {
                after_ops: 2,
                torn: false,
            }),
            ..Default::default()
        });
        assert_eq!(f.begin(0.0), Fate::Normal);
        assert_eq!(f.begin(0.0), Fate::Normal);
        assert_eq!(f.begin(0.0), Fate::Cut);
        assert_eq!(f.begin(0.0), Fate::Normal);
    }

    #[test]
    fn wear_models() {
        let mut f = Faults::new(FaultConfig {
            timebombs: alloc::vec![Timebomb {
                block: 3,
                at_erases: 5
            }],
            ..Default::default()
        });
        assert!(!f.worn_out(WearModel::Never, 0, 1_000_000, 10));
        assert!(f.worn_out(WearModel::AtLimit, 0, 10, 10));
        assert!(!f.worn_out(WearModel::AtLimit, 0, 9, 10));
        assert!(!f.worn_out(WearModel::Gradual, 0, 10, 10));
        assert!(f.worn_out(WearModel::Gradual, 0, 20, 10));
        assert!(f.worn_out(WearModel::Never, 3, 5, 100));
        assert!(!f.worn_out(WearModel::Never, 3, 4, 100));
    }
}
