//! FlexFS's regions on MLC NAND (Lee et al., USENIX ATC 2009): a segment erased into SLC
//! mode writes only its LSB pages — half the slots, at SLC speed — and one in the part's own
//! (MLC) mode writes them all. Which mode a segment gets is decided when a head opens it;
//! the SLC segments make up the SLC region, the others the MLC region, and both change size
//! as segments are erased and opened again.
//!
//! Migration is cleaning: the cleaner's survivors always go to MLC segments, so cleaning an
//! SLC segment moves its live data to MLC and frees the segment. A cleaning policy that
//! counts live slots against a segment's full slot count sees an SLC segment full of live
//! data as half empty, which is what cleaning it gains.

/// Which segments a head opens in SLC mode, on a medium that has one
/// ([`crate::media::Segments::has_slc_mode`]); elsewhere every segment is in the part's own
/// mode whatever this says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Regions {
    /// Every segment in the part's own mode (MLC): full capacity, MLC speed.
    #[default]
    MlcOnly,
    /// Every segment in SLC mode: SLC speed, half the capacity. A volume formatted this way
    /// is sized for it; mounted with another setting it takes MLC segments as it goes.
    SlcOnly,
    /// FlexFS's baseline: the owner's writes go to SLC segments, the cleaner's survivors to
    /// MLC ones, so data moves to MLC only when cleaning needs the space (as the volume
    /// fills up, ever more of each write waits for a migration).
    Baseline,
    /// FlexFS's background migration (BM): as the baseline, and once the device has been
    /// idle for [`MIGRATION_WAIT`] the cleaner moves the data of SLC segments to MLC ones
    /// until a request arrives, so that the next burst of writes finds SLC segments free.
    Background,
}

/// Idle time before background migration starts (FlexFS's T_wait): a request that arrives
/// sooner finds the device as the writes left it.
pub const MIGRATION_WAIT: core::time::Duration = core::time::Duration::from_secs(1);

impl Regions {
    /// Every setting, in the order the command line lists them.
    pub const ALL: [Regions; 4] = [
        Regions::MlcOnly,
        Regions::SlcOnly,
        Regions::Baseline,
        Regions::Background,
    ];

    /// The setting's name on the command line and in benchmark rows.
    pub fn name(self) -> &'static str {
        match self {
            Regions::MlcOnly => "mlc-only",
            Regions::SlcOnly => "slc-only",
            Regions::Baseline => "baseline",
            Regions::Background => "bm",
        }
    }

    /// The setting's code in the volume's segment headers (SPEC.md §2.3): the erased
    /// byte for MLC-only, so that it is what a volume formatted before the setting existed
    /// would say.
    pub fn code(self) -> u8 {
        match self {
            Regions::MlcOnly => 0xFF,
            Regions::SlcOnly => 1,
            Regions::Baseline => 2,
            Regions::Background => 3,
        }
    }

    /// The setting coded `code`.
    pub fn from_code(code: u8) -> Option<Regions> {
        Regions::ALL.into_iter().find(|r| r.code() == code)
    }

    /// The setting named `name`.
    pub fn parse(name: &str) -> Option<Regions> {
        Regions::ALL.into_iter().find(|r| r.name() == name)
    }

    /// Whether a segment opened for the cleaner's survivors (`survivors`) or for the owner's
    /// writes goes to SLC mode.
    pub(super) fn opens_slc(self, survivors: bool) -> bool {
        match self {
            Regions::MlcOnly => false,
            Regions::SlcOnly => true,
            Regions::Baseline | Regions::Background => !survivors,
        }
    }

    /// Whether idle time moves SLC data to MLC segments.
    pub(super) fn migrates_when_idle(self) -> bool {
        self == Regions::Background
    }

    /// Whether the volume's size counts SLC segments only.
    pub(super) fn sized_for_slc(self) -> bool {
        self == Regions::SlcOnly
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for r in Regions::ALL {
            assert_eq!(Regions::parse(r.name()), Some(r));
        }
        assert_eq!(Regions::parse("slc"), None);
        for r in Regions::ALL {
            assert_eq!(Regions::from_code(r.code()), Some(r));
        }
        assert_eq!(Regions::from_code(0), None);
    }

    #[test]
    fn the_baseline_sends_survivors_to_mlc_and_writes_to_slc() {
        assert!(Regions::Baseline.opens_slc(false));
        assert!(!Regions::Baseline.opens_slc(true));
        assert!(!Regions::MlcOnly.opens_slc(false));
        assert!(Regions::SlcOnly.opens_slc(true));
    }
}
