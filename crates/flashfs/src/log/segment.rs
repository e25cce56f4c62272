//! The segment usage table: what each segment holds, how much of it is live, how worn it is,
//! and which of its slots are live.

use alloc::vec::Vec;

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

/// One segment's record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegInfo {
    /// Life stage.
    pub state: SegState,
    /// Live slots.
    pub live: u32,
    /// Slots consumed (written, torn or skipped).
    pub used: u32,
    /// Erases so far (the wear record).
    pub erase_count: u32,
    /// Device time of the last write or invalidation (the "age" of cost-benefit).
    pub modified_ns: u64,
    /// Lowest sequence number among the slots it holds (`u64::MAX` when none).
    pub min_seq: u64,
    /// Sequence number when it was opened (its place in the log's order).
    pub open_seq: u64,
    /// Device time when it was opened in this mount (0: before it): its slots are no older.
    pub opened_ns: u64,
}

impl SegInfo {
    pub(crate) fn new(state: SegState, erase_count: u32) -> Self {
        SegInfo {
            state,
            live: 0,
            used: 0,
            erase_count,
            modified_ns: 0,
            min_seq: u64::MAX,
            open_seq: 0,
            opened_ns: 0,
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
}

/// Live slots, one bit each.
#[derive(Debug, Clone)]
pub struct LiveMap {
    bits: Vec<u64>,
    slots: u32,
}

impl LiveMap {
    pub(crate) fn new(segments: u32, slots: u32) -> Self {
        LiveMap {
            bits: alloc::vec![0; (segments as usize * slots as usize).div_ceil(64)],
            slots,
        }
    }

    fn index(&self, seg: u32, slot: u32) -> usize {
        seg as usize * self.slots as usize + slot as usize
    }

    pub(crate) fn get(&self, seg: u32, slot: u32) -> bool {
        let i = self.index(seg, slot);
        self.bits[i / 64] & (1 << (i % 64)) != 0
    }

    /// Sets a bit; returns its old value.
    pub(crate) fn set(&mut self, seg: u32, slot: u32, live: bool) -> bool {
        let i = self.index(seg, slot);
        let w = &mut self.bits[i / 64];
        let old = *w & (1 << (i % 64)) != 0;
        if live {
            *w |= 1 << (i % 64);
        } else {
            *w &= !(1 << (i % 64));
        }
        old
    }

    /// Live slots of a segment from `from` on.
    pub(crate) fn next_live(&self, seg: u32, from: u32) -> Option<u32> {
        (from..self.slots).find(|&s| self.get(seg, s))
    }
}
