//! Free sectors: which sectors of the volume no committed or working version uses.
//!
//! Nothing on flash says which sectors are free: mount derives it from the index (every
//! node and extent of the committed version is in use, the rest is free), so the map can
//! never disagree with the tree. Sectors the working version stops using stay reserved
//! until the next commit is durable, because the committed version, which a power cut
//! returns to, still uses them.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

/// Free sector runs and sectors waiting for a commit.
#[derive(Debug, Default, Clone)]
pub struct Space {
    /// Free runs: first sector to length, never adjacent (adjacent runs merge).
    free: BTreeMap<u64, u64>,
    free_count: u64,
    /// Runs the working version released: free once the next commit is durable.
    pending: Vec<(u64, u64)>,
    pending_count: u64,
    /// Data runs released outside transactions since the owner last took them
    /// ([`Space::take_released`]): once the operations that released them are durable, the
    /// owner may give back those no durable version needs any more ([`Space::reuse`]).
    released: Vec<(u64, u64)>,
    /// Where the last data allocation ended: the next one starts there, so a file written
    /// in several calls still gets consecutive sectors.
    cursor: u64,
    /// While an operation of a transaction runs: where its data sectors are recorded
    /// (allocations to undo if it aborts, releases to make only if it commits).
    pub tx: Option<TxSpace>,
}

/// The data sectors an open transaction allocated and released.
#[derive(Debug, Default, Clone)]
pub struct TxSpace {
    /// Runs allocated: no committed version uses them; an abort gives them back.
    pub allocated: Vec<(u64, u64)>,
    /// Runs released: still in use until the transaction commits.
    pub released: Vec<(u64, u64)>,
}

impl Space {
    /// Space of a volume of `sectors` sectors where `used(k)` says which are in use.
    pub fn from_used(sectors: u64, mut used: impl FnMut(u64) -> bool) -> Space {
        let mut s = Space::default();
        let mut run: Option<(u64, u64)> = None;
        for k in 0..sectors {
            if used(k) {
                if let Some((a, n)) = run.take() {
                    s.insert(a, n);
                }
            } else {
                run = Some(match run {
                    Some((a, n)) => (a, n + 1),
                    None => (k, 1),
                });
            }
        }
        if let Some((a, n)) = run {
            s.insert(a, n);
        }
        s
    }

    /// Free sectors.
    pub fn free(&self) -> u64 {
        self.free_count
    }

    /// Sectors that become free at the next commit.
    pub fn pending(&self) -> u64 {
        self.pending_count
    }

    /// Whether sector `k` is free.
    pub fn is_free(&self, k: u64) -> bool {
        self.free
            .range(..=k)
            .next_back()
            .is_some_and(|(&a, &n)| k < a + n)
    }

    /// Takes up to `want` consecutive free sectors, from the cursor on (wrapping around).
    pub fn alloc(&mut self, want: u64) -> Option<(u64, u64)> {
        if want == 0 {
            return None;
        }
        let (&a, &n) = self
            .free
            .range(..=self.cursor)
            .next_back()
            .filter(|(&a, &n)| self.cursor < a + n)
            .or_else(|| self.free.range(self.cursor..).next())
            .or_else(|| self.free.iter().next())?;
        let start = if self.cursor > a && self.cursor < a + n {
            self.cursor
        } else {
            a
        };
        let got = want.min(a + n - start);
        self.take(start, got);
        self.cursor = start + got;
        if let Some(tx) = &mut self.tx {
            tx.allocated.push((start, got));
        }
        Some((start, got))
    }

    /// Takes sector `k` if it is free or waiting for a commit (a data block a journal entry
    /// names, at its replay: the replay may have released it before, as the operations it
    /// replays did); false if it is in use.
    pub fn claim(&mut self, k: u64) -> bool {
        if self.is_free(k) {
            self.take(k, 1);
            return true;
        }
        self.unpend(k)
    }

    /// Removes sector `k` from the sectors waiting for a commit; false if it is not there.
    fn unpend(&mut self, k: u64) -> bool {
        let Some(i) = self
            .pending
            .iter()
            .position(|&(a, n)| (a..a + n).contains(&k))
        else {
            return false;
        };
        let (a, n) = self.pending.swap_remove(i);
        if k > a {
            self.pending.push((a, k - a));
        }
        if k + 1 < a + n {
            self.pending.push((k + 1, a + n - k - 1));
        }
        self.pending_count -= 1;
        true
    }

    /// Frees sector `k`, released and waiting for a commit, at once: no durable version
    /// needs it any more. It is the next data allocation's.
    pub fn reuse(&mut self, k: u64) {
        if self.unpend(k) {
            self.insert(k, 1);
            self.cursor = k;
        }
    }

    /// Takes one free sector for an index node: the lowest, so nodes do not break up the
    /// runs data allocation walks through.
    pub fn alloc_node(&mut self) -> Option<u64> {
        let (&a, _) = self.free.iter().next()?;
        self.take(a, 1);
        Some(a)
    }

    /// Returns sectors that no version uses (allocated and never committed).
    pub fn unalloc(&mut self, start: u64, n: u64) {
        if let Some(tx) = &mut self.tx {
            if let Some(i) = tx.allocated.iter().rposition(|&r| r == (start, n)) {
                tx.allocated.remove(i);
            }
        }
        self.insert(start, n);
    }

    /// The working version no longer uses these data sectors (inside a transaction: the
    /// transaction's version, so they wait for its commit).
    pub fn release(&mut self, start: u64, n: u64) {
        if let Some(tx) = &mut self.tx {
            if n > 0 {
                tx.released.push((start, n));
            }
            return;
        }
        if n > 0 {
            self.released.push((start, n));
        }
        self.release_node(start, n);
    }

    /// Takes the data runs released outside transactions since the last call (or commit).
    pub fn take_released(&mut self) -> Vec<(u64, u64)> {
        core::mem::take(&mut self.released)
    }

    /// The working version no longer uses these sectors (index nodes: never a
    /// transaction's).
    pub fn release_node(&mut self, start: u64, n: u64) {
        if n > 0 {
            self.pending.push((start, n));
            self.pending_count += n;
        }
    }

    /// The commit that released the pending sectors is durable: frees them and returns
    /// them, for the block device to forget.
    pub fn committed(&mut self) -> Vec<(u64, u64)> {
        let runs = core::mem::take(&mut self.pending);
        self.pending_count = 0;
        self.released.clear();
        for &(a, n) in &runs {
            self.insert(a, n);
        }
        runs
    }

    fn take(&mut self, start: u64, n: u64) {
        let (&a, &len) = self
            .free
            .range(..=start)
            .next_back()
            .expect("taking a sector that is free");
        debug_assert!(start + n <= a + len);
        self.free.remove(&a);
        if start > a {
            self.free.insert(a, start - a);
        }
        if start + n < a + len {
            self.free.insert(start + n, a + len - start - n);
        }
        self.free_count -= n;
    }

    fn insert(&mut self, mut a: u64, mut n: u64) {
        if n == 0 {
            return;
        }
        self.free_count += n;
        if let Some((&pa, &pn)) = self.free.range(..a).next_back() {
            if pa + pn == a {
                self.free.remove(&pa);
                a = pa;
                n += pn;
            }
        }
        if let Some(&nn) = self.free.get(&(a + n)) {
            self.free.remove(&(a + n));
            n += nn;
        }
        self.free.insert(a, n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_runs_merges_frees_and_waits_for_commits() {
        let mut s = Space::from_used(100, |k| k == 0 || (40..50).contains(&k));
        assert_eq!(s.free(), 89);
        assert!(!s.is_free(0) && s.is_free(1) && !s.is_free(45) && s.is_free(99));
        assert_eq!(s.alloc(30), Some((1, 30)));
        assert_eq!(s.alloc(30), Some((31, 9)));
        assert_eq!(s.alloc(5), Some((50, 5)));
        assert_eq!(s.alloc_node(), Some(55));
        s.release(1, 30);
        assert_eq!(s.pending(), 30);
        assert!(!s.is_free(10));
        assert_eq!(s.committed(), [(1, 30)]);
        assert!(s.is_free(10));
        s.unalloc(55, 1);
        s.unalloc(50, 5);
        assert_eq!(s.free(), 89 - 39 + 30);
        // Everything from 50 on merged back into one run.
        assert_eq!(s.free.get(&50), Some(&50));
        let mut got = 0;
        while let Some((_, n)) = s.alloc(7) {
            got += n;
        }
        assert_eq!(got, 80);
        assert_eq!(s.free(), 0);
    }

    #[test]
    fn a_sector_given_back_early_is_the_next_taken_and_a_replay_claims_released_ones() {
        let mut s = Space::from_used(20, |k| k < 10);
        assert_eq!(s.alloc(2), Some((10, 2)));
        s.release(3, 3);
        assert_eq!(s.take_released(), [(3, 3)]);
        assert_eq!(s.pending(), 3);
        // Sector 4 is needed by no durable version: free now, and the next allocation's.
        s.reuse(4);
        assert_eq!((s.pending(), s.free()), (2, 9));
        assert_eq!(s.alloc(1), Some((4, 1)));
        // A replay takes a sector it released itself (still pending), or a free one; not
        // one in use.
        assert!(s.claim(3) && s.claim(5) && s.claim(12));
        assert_eq!((s.pending(), s.free()), (0, 7));
        assert!(!s.claim(0) && !s.claim(12));
        // Inside a transaction nothing is released for early reuse.
        s.tx = Some(TxSpace::default());
        s.release(0, 1);
        s.tx = None;
        assert!(s.take_released().is_empty());
    }
}
