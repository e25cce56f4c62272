//! Which trim or loss record hides each sector without data: the record's sequence number,
//! kept as runs of consecutive sectors hidden by the same record.
//!
//! A trim or loss record hides the older versions of the sectors in its ranges until each
//! is written again (SPEC.md §3.3). The block device must know, for a sector written again,
//! which record stops hiding it, so that a record hiding nothing more can go. A number per
//! sector would cost 8 bytes of RAM for every sector of the device as soon as one record
//! exists; records hide ranges (a file's blocks, a partition), so runs cost a few entries
//! per record instead, and only a range written again sector by sector, every other one,
//! splits into many.

use alloc::collections::BTreeMap;

/// Sectors hidden by records, as runs. See the module documentation.
#[derive(Debug, Clone, Default)]
pub(super) struct Hiding {
    /// First sector of each run → its length and the hiding record's sequence number.
    runs: BTreeMap<u32, (u32, u64)>,
}

impl Hiding {
    /// The sequence number of the record hiding sector `k` (0: none).
    pub(super) fn get(&self, k: u32) -> u64 {
        self.run_of(k).map_or(0, |(_, (_, seq))| seq)
    }

    /// Sector `k` is hidden by the record `seq` now; returns the record that hid it (0: none).
    pub(super) fn set(&mut self, k: u32, seq: u64) -> u64 {
        let previous = self.take(k);
        if seq == 0 {
            return previous;
        }
        let mut start = k;
        let mut len = 1;
        // Joined to the run before it and the run after it when the same record hides them.
        if let Some((s, (l, q))) = self.run_of(k.wrapping_sub(1)).filter(|_| k > 0) {
            if q == seq {
                self.runs.remove(&s);
                start = s;
                len += l;
            }
        }
        if let Some(&(l, q)) = k.checked_add(1).and_then(|n| self.runs.get(&n)) {
            if q == seq {
                self.runs.remove(&(k + 1));
                len += l;
            }
        }
        self.runs.insert(start, (len, seq));
        previous
    }

    /// Sector `k` is hidden by nothing now; returns the record that hid it (0: none).
    pub(super) fn take(&mut self, k: u32) -> u64 {
        let Some((s, (l, seq))) = self.run_of(k) else {
            return 0;
        };
        self.runs.remove(&s);
        if k > s {
            self.runs.insert(s, (k - s, seq));
        }
        let end = s + l;
        if k + 1 < end {
            self.runs.insert(k + 1, (end - k - 1, seq));
        }
        seq
    }

    /// Runs kept (for the RAM they take).
    #[cfg(test)]
    fn runs(&self) -> usize {
        self.runs.len()
    }

    /// The run holding sector `k`: its first sector, length and record.
    fn run_of(&self, k: u32) -> Option<(u32, (u32, u64))> {
        let (&s, &(l, seq)) = self.runs.range(..=k).next_back()?;
        (k - s < l).then_some((s, (l, seq)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use proptest::prelude::*;

    #[test]
    fn a_range_hidden_sector_by_sector_is_one_run_and_splits_where_written() {
        let mut h = Hiding::default();
        for k in 100..200 {
            assert_eq!(h.set(k, 7), 0);
        }
        assert_eq!(h.runs(), 1);
        assert_eq!(
            (h.get(99), h.get(100), h.get(199), h.get(200)),
            (0, 7, 7, 0)
        );
        assert_eq!(h.take(150), 7);
        assert_eq!(h.take(150), 0);
        assert_eq!(h.runs(), 2);
        // A newer record over part of it.
        for k in 140..160 {
            h.set(k, 9);
        }
        assert_eq!(
            (h.get(139), h.get(140), h.get(150), h.get(160)),
            (7, 9, 9, 7)
        );
        assert_eq!(h.runs(), 3);
        // Hidden again by the first record: the runs join up.
        for k in 140..160 {
            assert_eq!(h.set(k, 7), 9);
        }
        assert_eq!(h.runs(), 1);
    }

    proptest! {
        /// Against a number per sector: every sector's record, after any mix of sets and
        /// takes, and runs that never touch with the same record.
        #[test]
        fn runs_match_a_number_per_sector(
            ops in proptest::collection::vec((0u32..64, 0u64..4, any::<bool>()), 0..300)
        ) {
            let mut h = Hiding::default();
            let mut model = vec![0u64; 64];
            for (k, seq, take) in ops {
                let old = model[k as usize];
                let got = if take {
                    model[k as usize] = 0;
                    h.take(k)
                } else {
                    model[k as usize] = seq;
                    h.set(k, seq)
                };
                prop_assert_eq!(got, old);
            }
            for k in 0..64u32 {
                prop_assert_eq!(h.get(k), model[k as usize], "sector {}", k);
            }
            let runs: alloc::vec::Vec<_> = h.runs.iter().map(|(&s, &(l, q))| (s, l, q)).collect();
            for w in runs.windows(2) {
                prop_assert!(w[0].0 + w[0].1 <= w[1].0, "overlap {:?}", w);
                prop_assert!(w[0].0 + w[0].1 < w[1].0 || w[0].2 != w[1].2, "not joined {:?}", w);
            }
            prop_assert!(runs.iter().all(|r| r.1 > 0 && r.2 != 0));
        }
    }
}
