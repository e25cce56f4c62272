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
    /// FlexFS's dynamic allocation (DA): background migration, and a share α of the owner's
    /// data goes to SLC segments, the rest straight to MLC ones, α chosen so that what goes
    /// to SLC can be migrated in the idle time predicted (`log::region::Allocator`).
    Dynamic,
    /// FlexFS's locality-aware migration (LA): dynamic allocation, and data the owner
    /// rewrites soon ([`crate::log::Head::Hot`]: the file system asks a 2Q of recently
    /// written extents) stays in SLC: its segments open in SLC mode whatever α says and the
    /// migrator moves them last, once the cold segments are in MLC, by which time much of
    /// their data has died in SLC.
    Locality,
}

/// Idle time before background migration starts (FlexFS's T_wait): a request that arrives
/// sooner finds the device as the writes left it.
pub const MIGRATION_WAIT: core::time::Duration = core::time::Duration::from_secs(1);

impl Regions {
    /// Every setting, in the order the command line lists them.
    pub const ALL: [Regions; 6] = [
        Regions::MlcOnly,
        Regions::SlcOnly,
        Regions::Baseline,
        Regions::Background,
        Regions::Dynamic,
        Regions::Locality,
    ];

    /// The setting a volume on a part with an SLC mode gets when none is given: the best
    /// measured over `flashfs bench flexfs`'s runs (as fast as background migration when
    /// idle time suffices, far faster when it does not; locality-aware migration measured
    /// no faster on the locality run, and slower as the volume filled).
    pub const MLC_DEFAULT: Regions = Regions::Dynamic;

    /// The setting's name on the command line and in benchmark rows.
    pub fn name(self) -> &'static str {
        match self {
            Regions::MlcOnly => "mlc-only",
            Regions::SlcOnly => "slc-only",
            Regions::Baseline => "baseline",
            Regions::Background => "bm",
            Regions::Dynamic => "da",
            Regions::Locality => "la",
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
            Regions::Dynamic => 4,
            Regions::Locality => 5,
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
            Regions::Baseline | Regions::Background | Regions::Dynamic | Regions::Locality => {
                !survivors
            }
        }
    }

    /// Whether idle time moves SLC data to MLC segments.
    pub(super) fn migrates_when_idle(self) -> bool {
        matches!(
            self,
            Regions::Background | Regions::Dynamic | Regions::Locality
        )
    }

    /// Whether the share of new data going to SLC follows the idle time predicted (α).
    pub fn allocates(self) -> bool {
        matches!(self, Regions::Dynamic | Regions::Locality)
    }

    /// Whether rewritten data stays in SLC.
    pub fn keeps_hot_in_slc(self) -> bool {
        self == Regions::Locality
    }

    /// Whether the volume's size counts SLC segments only.
    pub(super) fn sized_for_slc(self) -> bool {
        self == Regions::SlcOnly
    }
}

/// FlexFS's two shares of new data that go to SLC segments, as they stood at some moment, in
/// ten-thousandths: α, what dynamic allocation sends there by the idle time it predicts
/// ([`Regions::allocates`]; all of it where the setting does not allocate), and γ, what the
/// wear budget allows ([`super::LogConfig::lifetime`]; all of it without one). Owners record
/// them beside their lifetime counters (SPEC §3.2a, §8.2), so that an image says what they
/// were when it was last written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shares {
    /// α, in ten-thousandths (at most [`Shares::WHOLE`]).
    alpha: u16,
    /// γ, in ten-thousandths (at most [`Shares::WHOLE`]).
    gamma: u16,
}

impl Shares {
    /// A whole share (all new data), in the units the fields count.
    pub const WHOLE: u16 = 10_000;

    /// The shares `alpha` and `gamma`, fractions between 0 and 1.
    pub fn new(alpha: f64, gamma: f64) -> Self {
        // Rounded to the nearest unit (`f64::round` is not in `core`): the value is at
        // least 0.
        let units = |f: f64| (f.clamp(0.0, 1.0) * f64::from(Self::WHOLE) + 0.5) as u16;
        Shares {
            alpha: units(alpha),
            gamma: units(gamma),
        }
    }

    /// α as a fraction.
    pub fn alpha(self) -> f64 {
        f64::from(self.alpha) / f64::from(Self::WHOLE)
    }

    /// γ as a fraction.
    pub fn gamma(self) -> f64 {
        f64::from(self.gamma) / f64::from(Self::WHOLE)
    }

    /// The shares a record holds as two words, α first; `None` for a record that holds none
    /// (all ones, as erased) or values past a whole share (damage the record's checksum
    /// missed, or a record of a later format).
    pub fn from_words(alpha: u16, gamma: u16) -> Option<Self> {
        (alpha <= Self::WHOLE && gamma <= Self::WHOLE).then_some(Shares { alpha, gamma })
    }

    /// The two words a record holds for `shares`: all ones for none.
    pub fn words(shares: Option<Self>) -> [u16; 2] {
        shares.map_or([u16::MAX; 2], |s| [s.alpha, s.gamma])
    }
}

/// Idle windows and bursts of writes the prediction remembers (FlexFS: the last 10).
const WINDOWS: usize = 10;

/// FlexFS's dynamic allocation ([`Regions::Dynamic`]): predicts the idle time migration
/// can use and the next burst of writes from the last [`WINDOWS`] (a weighted mean, the
/// three newest counting twice), and measures what migrating a slot costs; the share α of
/// new data that goes to SLC is what the predicted idle time can migrate, at most all of
/// it.
#[derive(Debug, Clone, Default)]
pub(super) struct Allocator {
    /// Idle windows (ns) and the slots the owner wrote before each, newest last.
    windows: [(u64, u64); WINDOWS],
    /// Windows recorded (at most [`WINDOWS`]).
    seen: usize,
    /// Slots the owner wrote since the last idle window.
    written: u64,
    /// Device time spent migrating and the slots it moved, over the session.
    migration_ns: u64,
    migrated: u64,
    /// Segments owed to SLC by the shares so far: a segment opens in SLC mode whenever a
    /// whole one is owed.
    owed: f64,
}

impl Allocator {
    /// The owner wrote a slot.
    pub(super) fn wrote(&mut self) {
        self.written += 1;
    }

    /// An idle window of `ns` began (the writes since the last one make a burst), or, if
    /// `continued`, the current one lasts `ns` longer.
    pub(super) fn idled(&mut self, ns: u64, continued: bool) {
        if continued && self.seen > 0 {
            self.windows[WINDOWS - 1].0 += ns;
            return;
        }
        self.windows.rotate_left(1);
        self.windows[WINDOWS - 1] = (ns, self.written);
        self.seen = (self.seen + 1).min(WINDOWS);
        self.written = 0;
    }

    /// Migration took `ns` of device time to move `slots` slots.
    pub(super) fn migrated(&mut self, ns: u64, slots: u64) {
        self.migration_ns += ns;
        self.migrated += slots;
    }

    /// Whether α goes by what was seen: an idle window and a migration.
    pub(super) fn decided(&self) -> bool {
        self.seen > 0 && self.migrated > 0
    }

    /// The share of new data to put in SLC segments: 1 until a window and a migration have
    /// been seen.
    pub(super) fn alpha(&self) -> f64 {
        if !self.decided() {
            return 1.0;
        }
        let recent = &self.windows[WINDOWS - self.seen..];
        let weighted = |f: &dyn Fn(&(u64, u64)) -> u64| {
            let (mut sum, mut weights) = (0.0, 0.0);
            for (i, w) in recent.iter().enumerate() {
                let weight = if recent.len() - i <= 3 { 2.0 } else { 1.0 };
                sum += weight * f(w) as f64;
                weights += weight;
            }
            sum / weights
        };
        // What migration can use of each window: the part after the wait. (Averaged per
        // window, not taken off the mean: of gaps of 0.2 s and 5 s, the second leaves 4 s.)
        let wait = MIGRATION_WAIT.as_nanos() as u64;
        let idle = weighted(&|w| w.0.saturating_sub(wait));
        let burst = weighted(&|w| w.1);
        let per_slot = self.migration_ns as f64 / self.migrated as f64;
        if burst * per_slot <= 0.0 {
            return 1.0;
        }
        (idle / (burst * per_slot)).min(1.0)
    }

    /// Whether the owner's next new segment goes to SLC mode, given that an SLC segment holds
    /// `slc` slots and an MLC one `mlc`: segments are chosen so that the share `a` of the
    /// data (α, or less), not of the segments, lands in SLC.
    pub(super) fn next_is_slc(&mut self, a: f64, slc: u32, mlc: u32) -> bool {
        if a >= 1.0 {
            return true;
        }
        // A share p of segments in SLC holds p·slc of every p·slc + (1 − p)·mlc slots.
        let (s, m) = (f64::from(slc.max(1)), f64::from(mlc.max(1)));
        let p = a * m / (s + a * (m - s));
        self.owed += p;
        if self.owed >= 1.0 {
            self.owed -= 1.0;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_round_trip_through_their_words() {
        let s = Shares::new(0.4321, 1.0);
        assert_eq!((s.alpha, s.gamma), (4321, 10_000));
        let [a, g] = Shares::words(Some(s));
        assert_eq!(Shares::from_words(a, g), Some(s));
        let [a, g] = Shares::words(None);
        assert_eq!(Shares::from_words(a, g), None);
        assert_eq!(Shares::from_words(10_001, 0), None);
        assert_eq!(Shares::new(-1.0, 2.0), Shares::new(0.0, 1.0));
    }

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
    fn alpha_is_what_the_predicted_idle_time_can_migrate() {
        let mut a = Allocator::default();
        assert_eq!(a.alpha(), 1.0, "nothing seen yet");
        // Bursts of 1,000 slots, idle windows of 1 s + 0.5 s, a slot migrated per ms:
        // half a second migrates half a burst.
        for _ in 0..12 {
            for _ in 0..1000 {
                a.wrote();
            }
            a.idled(1_500_000_000, false);
        }
        a.migrated(1_000_000, 1);
        assert!((a.alpha() - 0.5).abs() < 1e-9, "{}", a.alpha());
        // Longer windows lately count more, and α never passes 1.
        for _ in 0..3 {
            a.idled(9_000_000_000, false);
        }
        assert_eq!(a.alpha(), 1.0);
    }

    #[test]
    fn segments_follow_the_share_of_data() {
        let mut a = Allocator::default();
        for _ in 0..10 {
            for _ in 0..1000 {
                a.wrote();
            }
            a.idled(1_500_000_000, false);
        }
        a.migrated(1_000_000, 1);
        // α = 1/2 of the data in SLC segments of half the slots: 2 SLC per MLC segment.
        let slc = (0..300)
            .filter(|_| a.next_is_slc(a.alpha(), 63, 126))
            .count();
        assert!((199..=201).contains(&slc), "{slc}");
    }

    #[test]
    fn the_baseline_sends_survivors_to_mlc_and_writes_to_slc() {
        assert!(Regions::Baseline.opens_slc(false));
        assert!(!Regions::Baseline.opens_slc(true));
        assert!(!Regions::MlcOnly.opens_slc(false));
        assert!(Regions::SlcOnly.opens_slc(true));
    }
}
