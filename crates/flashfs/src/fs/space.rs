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
    /// The commit that wrote the saved map the last commit named, and the sectors taken
    /// or freed since, as merged runs (first to length); `None` when they are not known
    /// (no map, or more runs than a delta could ever hold): the next commit that can
    /// writes a new map.
    changed: Option<(u64, BTreeMap<u64, u64>)>,
}

/// Changed runs tracked at most: beyond, a new map is cheaper than the delta.
const MAX_CHANGED_RUNS: usize = 4096;

/// The data sectors an open transaction allocated and released.
#[derive(Debug, Default, Clone)]
pub struct TxSpace {
    /// Runs allocated: no committed version uses them; an abort gives them back.
    pub allocated: Vec<(u64, u64)>,
    /// Runs released: still in use until the transaction commits.
    pub released: Vec<(u64, u64)>,
}

impl Space {
    /// Space whose changes since the saved map commit `map_commit` wrote are these runs
    /// ([`Space::changed_runs`]).
    pub fn with_changes(
        mut self,
        map_commit: u64,
        runs: impl IntoIterator<Item = (u64, u64)>,
    ) -> Space {
        let mut changed = BTreeMap::new();
        for (a, n) in runs {
            add_run(&mut changed, a, n);
        }
        self.changed = Some((map_commit, changed));
        self
    }

    /// Starts counting changes from the map commit `map_commit` wrote, or stops (`None`:
    /// no map is kept).
    pub fn reset_changes(&mut self, map_commit: Option<u64>) {
        self.changed = map_commit.map(|c| (c, BTreeMap::new()));
    }

    /// The commit that wrote the saved map, and the runs whose state may differ from the
    /// map's, merged with `unused` (sectors the working version does not use though they
    /// are not free), in order; `None` when they are not known.
    pub fn changed_runs(&self, unused: &BTreeMap<u64, u64>) -> Option<(u64, BTreeMap<u64, u64>)> {
        let (map_commit, mut runs) = self.changed.clone()?;
        for (&a, &n) in unused {
            add_run(&mut runs, a, n);
        }
        Some((map_commit, runs))
    }

    /// Sectors the working version does not use though they are not free: released ones
    /// waiting for a commit, and `held` (an open transaction's, which no commit names).
    pub fn unused(&self, held: impl IntoIterator<Item = u64>) -> BTreeMap<u64, u64> {
        let mut runs = BTreeMap::new();
        for &(a, n) in &self.pending {
            add_run(&mut runs, a, n);
        }
        for k in held {
            add_run(&mut runs, k, 1);
        }
        runs
    }

    /// Takes `n` consecutive free sectors, the first run long enough.
    pub fn alloc_run(&mut self, n: u64) -> Option<u64> {
        let (&a, _) = self.free.iter().find(|(_, &len)| len >= n)?;
        self.take(a, n);
        Some(a)
    }

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

    /// Space whose free sectors are these runs (in order, apart).
    pub fn from_free(runs: impl IntoIterator<Item = (u64, u64)>) -> Space {
        let mut s = Space::default();
        for (a, n) in runs {
            s.insert(a, n);
        }
        s
    }

    /// The free runs inside `a..end`, in order.
    pub fn free_in(&self, a: u64, end: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        runs_in(&self.free, a, end)
    }

    /// Free sectors.
    pub fn free(&self) -> u64 {
        self.free_count
    }

    /// Sectors that become free at the next commit.
    pub fn pending(&self) -> u64 {
        self.pending_count
    }

    /// Runs of freed sectors kept in RAM until a commit: those waiting for it and those the
    /// owner has not taken back yet ([`Space::take_released`]).
    pub fn freed_runs(&self) -> usize {
        self.pending.len() + self.released.len()
    }

    /// Whether sector `k` is free.
    pub fn is_free(&self, k: u64) -> bool {
        self.free
            .range(..=k)
            .next_back()
            .is_some_and(|(&a, &n)| k < a + n)
    }

    /// The first free sector from `k` on.
    pub fn next_free(&self, k: u64) -> Option<u64> {
        if self.is_free(k) {
            return Some(k);
        }
        self.free.range(k..).next().map(|(&a, _)| a)
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
        self.note_change(start, n);
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
        // A run partly free already: only a damaged volume frees a block twice (an index,
        // or a saved free-space map, naming it twice). Its free parts must not count or
        // overlap twice, so runs stay apart and `take` finds what it takes.
        if self.free_in(a, a + n).next().is_some() {
            for k in a..a + n {
                if !self.is_free(k) {
                    self.insert(k, 1);
                }
            }
            return;
        }
        self.note_change(a, n);
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

    fn note_change(&mut self, a: u64, n: u64) {
        if let Some((_, changed)) = &mut self.changed {
            add_run(changed, a, n);
            if changed.len() > MAX_CHANGED_RUNS {
                self.changed = None;
            }
        }
    }
}

/// The parts of merged runs (first to length) inside `a..end`, in order.
pub fn runs_in(
    runs: &BTreeMap<u64, u64>,
    a: u64,
    end: u64,
) -> impl Iterator<Item = (u64, u64)> + '_ {
    // The run that starts before `a` may reach into it.
    let first = runs.range(..a).next_back().map_or(a, |(&s, _)| s);
    runs.range(first..end).filter_map(move |(&s, &n)| {
        let (lo, hi) = (s.max(a), (s + n).min(end));
        (lo < hi).then(|| (lo, hi - lo))
    })
}

/// Whether sector `k` is in merged runs (first to length).
pub fn in_runs(runs: &BTreeMap<u64, u64>, k: u64) -> bool {
    runs.range(..=k)
        .next_back()
        .is_some_and(|(&a, &n)| k < a + n)
}

/// Adds run `a..a + n` to merged runs (first to length), joining those it overlaps or
/// touches.
pub fn add_run(runs: &mut BTreeMap<u64, u64>, mut a: u64, n: u64) {
    if n == 0 {
        return;
    }
    let mut end = a + n;
    if let Some((&pa, &pn)) = runs.range(..=a).next_back() {
        if pa + pn >= a {
            a = pa;
            end = end.max(pa + pn);
        }
    }
    while let Some((&na, &nn)) = runs.range(a..).next() {
        if na > end {
            break;
        }
        runs.remove(&na);
        end = end.max(na + nn);
    }
    runs.insert(a, end - a);
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
    fn changes_since_the_map_are_merged_runs_of_what_was_taken_and_freed() {
        let mut s = Space::from_used(100, |k| k < 10);
        assert_eq!(s.changed_runs(&BTreeMap::new()), None, "no map yet");
        s.reset_changes(Some(4));
        assert_eq!(s.alloc_run(5), Some(10));
        assert_eq!(s.alloc(3), Some((15, 3)));
        s.release(2, 2);
        let unused = s.unused([50]);
        let (commit, runs) = s.changed_runs(&unused).unwrap();
        assert_eq!(commit, 4);
        // 10..18 taken (one run), 2..4 released (pending), 50 an open transaction's.
        assert_eq!(
            runs.into_iter().collect::<Vec<_>>(),
            [(2, 2), (10, 8), (50, 1)]
        );
        assert!(in_runs(&unused, 3) && in_runs(&unused, 50) && !in_runs(&unused, 4));
        // The first run long enough, not the first free one.
        s.unalloc(12, 1);
        assert_eq!(s.alloc_run(4), Some(18));
        s.reset_changes(None);
        assert_eq!(s.changed_runs(&unused), None);
        // A run freed twice in part counts once.
        let mut twice = Space::from_used(20, |k| k < 10);
        twice.unalloc(8, 4);
        assert_eq!(twice.free(), 12);
        assert_eq!(twice.alloc(20), Some((8, 12)));
        // Runs clipped to a range, the one starting before it included.
        let mut runs = BTreeMap::new();
        add_run(&mut runs, 2, 3);
        add_run(&mut runs, 10, 5);
        add_run(&mut runs, 5, 1);
        assert_eq!(runs_in(&runs, 3, 12).collect::<Vec<_>>(), [(3, 3), (10, 2)]);
        assert_eq!(runs_in(&runs, 6, 10).count(), 0);
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
