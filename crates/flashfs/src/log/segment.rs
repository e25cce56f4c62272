//! The segment usage table: what each segment holds, how much of it is live and how worn it
//! is. Which of its slots are live the owner says, when the cleaner asks: nothing here is
//! kept per slot.

use super::checkpoint::NONE40;

/// Where a segment is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegState {
    /// Content unknown (found without a valid header, or erased by an interrupted erase):
    /// erased before use.
    Dirty,
    /// Erased by this mount and not yet opened.
    Free,
    /// A write head is filling it.
    Open,
    /// Closed; only the cleaner touches it again.
    Full,
    /// Failed a program: closed, and retired once its live data has moved.
    Failing,
    /// Retired for good.
    Bad,
    /// One of the two segments that hold checkpoint roots: outside the log's pool.
    Anchor,
}

impl SegState {
    /// The state's code in a checkpoint's segment table.
    pub(crate) fn code(self) -> u8 {
        match self {
            SegState::Dirty => 0,
            SegState::Free => 1,
            SegState::Open => 2,
            SegState::Full => 3,
            SegState::Failing => 4,
            SegState::Bad => 5,
            SegState::Anchor => 6,
        }
    }

    pub(crate) fn from_code(c: u8) -> Option<SegState> {
        [
            SegState::Dirty,
            SegState::Free,
            SegState::Open,
            SegState::Full,
            SegState::Failing,
            SegState::Bad,
            SegState::Anchor,
        ]
        .into_iter()
        .find(|s| s.code() == c)
    }
}

/// A segment's cell mode. Only an SLC segment's heat matters (locality-aware migration
/// keeps hot data in SLC), so a hot segment in the part's own mode is not a state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cells {
    /// The part's own mode (MLC on MLC NAND).
    Own,
    /// SLC mode.
    Slc,
    /// SLC mode, opened for the owner's rewritten data.
    HotSlc,
}

/// One segment's record. Every segment has one in RAM, so each field is as narrow as what
/// it holds allows (24 bytes): counts of slots fit 16 bits (a log refuses a geometry of
/// more slots per segment), sequence numbers 40 bits (as in a checkpoint), times 32 bits
/// (to about a millisecond). When it was opened is kept apart, and only on the small
/// devices whose cleaner uses it (`log::death_age`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegInfo {
    /// Life stage.
    pub state: SegState,
    /// Its cell mode since it was opened.
    cells: Cells,
    /// Live slots.
    live: u16,
    /// Slots consumed (written, torn or skipped).
    used: u16,
    /// Erases so far (the wear record).
    pub erase_count: u32,
    /// When the last write or invalidation happened (the "age" of cost-benefit).
    modified: Tick,
    /// Lowest sequence number among the slots it holds ([`Seq40::NONE`] when none).
    min_seq: Seq40,
    /// Sequence number when it was opened (its place in the log's order).
    open_seq: Seq40,
}

impl SegInfo {
    pub(crate) fn new(state: SegState, erase_count: u32) -> Self {
        SegInfo {
            state,
            cells: Cells::Own,
            live: 0,
            used: 0,
            erase_count,
            // Untouched since the mount: as old as the device's clock says.
            modified: Tick::at(0),
            min_seq: Seq40::NONE,
            open_seq: Seq40::new(0),
        }
    }

    /// Whether the cleaner may pick it.
    pub fn cleanable(&self) -> bool {
        matches!(self.state, SegState::Full | SegState::Failing)
    }

    /// Whether it holds data or may receive it.
    pub fn in_use(&self) -> bool {
        matches!(
            self.state,
            SegState::Open | SegState::Full | SegState::Failing
        )
    }

    /// Live slots.
    pub fn live(&self) -> u32 {
        u32::from(self.live)
    }

    /// A slot of it became live. Saturating, as [`SegInfo::drop_live`]: a count only
    /// guides the cleaner's choice, which asks the owner slot by slot before it erases.
    pub(crate) fn add_live(&mut self) {
        self.live = self.live.saturating_add(1);
    }

    /// A live slot of it died.
    pub(crate) fn drop_live(&mut self) {
        self.live = self.live.saturating_sub(1);
    }

    /// Sets the live slots, as a checkpoint counted them.
    pub(crate) fn set_live(&mut self, live: u16) {
        self.live = live;
    }

    /// Slots consumed (written, torn or skipped).
    pub fn used(&self) -> u32 {
        u32::from(self.used)
    }

    /// Sets the slots consumed: at most the log's slots per segment, which fit 16 bits.
    pub(crate) fn set_used(&mut self, used: u32) {
        debug_assert!(used <= u32::from(u16::MAX));
        self.used = used as u16;
    }

    /// Erased: nothing used, nothing live, no sequence number held.
    pub(crate) fn clear(&mut self) {
        self.live = 0;
        self.used = 0;
        self.min_seq = Seq40::NONE;
        // An erase brings the part's own mode back; an open sets the mode again.
        self.cells = Cells::Own;
    }

    /// Whether it is in SLC mode (MLC NAND): only its LSB slots are written, so it holds
    /// half the slots of one in the part's own mode.
    pub fn slc(&self) -> bool {
        self.cells != Cells::Own
    }

    /// Whether it is in SLC mode holding the owner's rewritten data, as far as this session
    /// knows (a mount from a checkpoint does not: such a segment counts as cold).
    /// Locality-aware migration moves it last.
    pub fn hot(&self) -> bool {
        self.cells == Cells::HotSlc
    }

    /// Sets its mode: SLC or not, and whether the owner's rewritten data opened it.
    pub(crate) fn set_cells(&mut self, slc: bool, hot: bool) {
        self.cells = match (slc, hot) {
            (false, _) => Cells::Own,
            (true, false) => Cells::Slc,
            (true, true) => Cells::HotSlc,
        };
    }

    /// Lowest sequence number among the slots it holds (`u64::MAX` when none).
    pub fn min_seq(&self) -> u64 {
        self.min_seq.get()
    }

    /// Sets the lowest sequence number it holds (`u64::MAX`: none).
    pub(crate) fn set_min_seq(&mut self, seq: u64) {
        self.min_seq = Seq40::new(seq);
    }

    /// Sequence number when it was opened.
    pub fn open_seq(&self) -> u64 {
        self.open_seq.get()
    }

    pub(crate) fn set_open_seq(&mut self, seq: u64) {
        self.open_seq = Seq40::new(seq);
    }

    /// Nanoseconds since its last write or invalidation at device time `now_ns` (since the
    /// clock's start if not touched in this mount).
    pub fn age_ns(&self, now_ns: u64) -> u64 {
        self.modified.age_ns(now_ns)
    }

    /// Records a write or invalidation at `now_ns`.
    pub(crate) fn touch(&mut self, now_ns: u64) {
        self.modified = Tick::at(now_ns);
    }
}

/// A sequence number in 40 bits, as a checkpoint stores it (SPEC §3.5): the log never
/// reaches 2⁴⁰ − 1, the value that means none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seq40([u8; 5]);

impl Seq40 {
    const NONE: Seq40 = Seq40([0xFF; 5]);

    /// `seq`, or none if it does not fit (`u64::MAX` among them).
    fn new(seq: u64) -> Seq40 {
        if seq >= NONE40 {
            return Seq40::NONE;
        }
        let mut b = [0; 5];
        b.copy_from_slice(&seq.to_le_bytes()[..5]);
        Seq40(b)
    }

    /// The number, `u64::MAX` for none.
    fn get(self) -> u64 {
        if self == Seq40::NONE {
            return u64::MAX;
        }
        let mut w = [0; 8];
        w[..5].copy_from_slice(&self.0);
        u64::from_le_bytes(w)
    }
}

/// A device time to about a millisecond (2²⁰ ns) in 32 bits, wrapping every 52 days. Ages are
/// told by wrapping difference, so they are right up to 26 days and then read as 26 days:
/// ages serve the cleaner's cost-benefit score, where a segment untouched for weeks scores
/// as old as one untouched for 26 days, which changes no choice that matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Tick(u32);

impl Tick {
    const SHIFT: u32 = 20;
    /// Ages beyond this (half the wrap) read as this.
    const MAX_AGE: u32 = 1 << 31;
    /// Not this mount: no time [`Tick::at`] gives.
    pub(super) const NEVER: Tick = Tick(u32::MAX);

    pub(super) fn at(now_ns: u64) -> Tick {
        // NEVER's value is skipped: a time that lands on it is a tick later.
        match (now_ns >> Self::SHIFT) as u32 {
            u32::MAX => Tick(0),
            t => Tick(t),
        }
    }

    pub(super) fn age_ns(self, now_ns: u64) -> u64 {
        let d = Tick::at(now_ns).0.wrapping_sub(self.0);
        u64::from(d.min(Self::MAX_AGE)) << Self::SHIFT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_record_is_24_bytes() {
        // Every segment has one in RAM: up to 4,096 of them on NAND (SPEC.md §2.1).
        assert_eq!(core::mem::size_of::<SegInfo>(), 24);
    }

    #[test]
    fn sequence_numbers_keep_40_bits_and_none() {
        for seq in [0, 1, 0xFF_FFFF_FFFF - 1, 123_456_789_012] {
            assert_eq!(Seq40::new(seq).get(), seq);
        }
        assert_eq!(Seq40::new(u64::MAX).get(), u64::MAX);
        assert_eq!(Seq40::new(NONE40).get(), u64::MAX);
        let mut s = SegInfo::new(SegState::Full, 3);
        assert_eq!(s.min_seq(), u64::MAX);
        s.set_min_seq(77);
        s.set_open_seq(70);
        assert_eq!((s.min_seq(), s.open_seq()), (77, 70));
        s.clear();
        assert_eq!((s.min_seq(), s.live(), s.used()), (u64::MAX, 0, 0));
    }

    #[test]
    fn ages_are_right_to_a_tick_and_wrap() {
        let tick = 1u64 << Tick::SHIFT;
        let mut s = SegInfo::new(SegState::Full, 0);
        // Untouched since the mount: as old as the clock.
        assert_eq!(s.age_ns(5 * tick), 5 * tick);
        s.touch(10 * tick + 3);
        assert_eq!(s.age_ns(10 * tick + 999), 0);
        assert_eq!(s.age_ns(25 * tick), 15 * tick);
        // Across the 32-bit wrap of ticks.
        let late = (u64::from(u32::MAX) - 2) * tick;
        s.touch(late);
        assert_eq!(s.age_ns(late + 10 * tick), 10 * tick);
        // Older than half the wrap reads as half the wrap.
        let half = u64::from(Tick::MAX_AGE) * tick;
        assert_eq!(s.age_ns(late + 3 * half / 2), half);
    }

    #[test]
    fn counts_follow_writes_and_deaths() {
        let mut s = SegInfo::new(SegState::Open, 0);
        s.set_used(3);
        s.add_live();
        s.add_live();
        s.drop_live();
        assert_eq!((s.used(), s.live()), (3, 1));
    }
}
