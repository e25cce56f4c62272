//! The device clock and its banks.
//!
//! Each bank is busy until some instant. A synchronous operation waits for its bank, then
//! occupies it; a background erase occupies its bank without holding up the caller, so work
//! on other banks overlaps it (Kawaguchi's parallel banks). A read may suspend an erase in
//! progress where the part supports erase suspend.

use alloc::vec::Vec;
use core::ops::RangeInclusive;

#[derive(Debug, Clone, Copy)]
struct Pending {
    block: u32,
    done: u64,
}

#[derive(Debug, Clone)]
pub(crate) struct Banks {
    /// Device time in nanoseconds.
    pub now: u64,
    busy: Vec<u64>,
    pending: Vec<Option<Pending>>,
}

impl Banks {
    pub fn new(banks: u32) -> Self {
        Banks {
            now: 0,
            busy: alloc::vec![0; banks as usize],
            pending: alloc::vec![None; banks as usize],
        }
    }

    /// Waits until `bank` is free.
    pub fn wait(&mut self, bank: u32) {
        self.now = self.now.max(self.busy[bank as usize]);
    }

    /// Occupies the (free) bank for `ns` and advances the clock past it.
    pub fn run(&mut self, bank: u32, ns: u64) {
        self.wait(bank);
        self.now = self.now.saturating_add(ns);
        self.busy[bank as usize] = self.now;
    }

    /// Occupies the (free) bank for `ns` without holding up the caller.
    pub fn occupy(&mut self, bank: u32, ns: u64) {
        self.wait(bank);
        self.busy[bank as usize] = self.now.saturating_add(ns);
    }

    /// Starts a background erase of `block` on the (free) bank; returns its duration.
    pub fn start_erase(&mut self, bank: u32, block: u32, ns: u64) -> u64 {
        self.wait(bank);
        let done = self.now.saturating_add(ns);
        self.busy[bank as usize] = done;
        self.pending[bank as usize] = Some(Pending { block, done });
        ns
    }

    /// Lets `ns` of idle time pass.
    pub fn idle(&mut self, ns: u64) {
        self.now = self.now.saturating_add(ns);
    }

    /// The block a background erase is working on in `bank`, if one is still running.
    pub fn erasing(&self, bank: u32) -> Option<u32> {
        self.pending[bank as usize]
            .filter(|p| p.done > self.now)
            .map(|p| p.block)
    }

    /// Serves a read of `ns` that touches `banks`. Where the part can suspend an erase
    /// (`suspend_ns`: the extra time it costs), a bank erasing in the background serves the
    /// read at once and its erase finishes that much later; any other bank is waited for.
    pub fn read(&mut self, banks: RangeInclusive<u32>, ns: u64, suspend_ns: Option<u64>) {
        let suspends = |me: &Self, b: u32| suspend_ns.is_some() && me.erasing(b).is_some();
        for b in banks.clone() {
            if !suspends(self, b) {
                self.wait(b);
            }
        }
        let suspended: Vec<u32> = banks.clone().filter(|&b| suspends(self, b)).collect();
        let extra = match suspend_ns {
            Some(s) if !suspended.is_empty() => ns.saturating_add(s),
            _ => ns,
        };
        self.now = self.now.saturating_add(extra);
        for b in banks {
            let i = b as usize;
            if suspended.contains(&b) {
                self.busy[i] = self.busy[i].saturating_add(extra);
                if let Some(p) = &mut self.pending[i] {
                    p.done = p.done.saturating_add(extra);
                }
            } else {
                self.busy[i] = self.now;
            }
        }
    }

    /// A background erase that has finished by now, as (bank, block). It stays pending
    /// until [`done`](Banks::done) says its effect is on the medium.
    pub fn next_finished(&self) -> Option<(u32, u32)> {
        self.pending
            .iter()
            .enumerate()
            .find_map(|(bank, slot)| match slot {
                Some(p) if p.done <= self.now => Some((bank as u32, p.block)),
                _ => None,
            })
    }

    /// The background erase of `bank` is applied to the medium.
    pub fn done(&mut self, bank: u32) {
        self.pending[bank as usize] = None;
    }

    /// Waits until every bank is free (every background erase has finished).
    pub fn wait_all(&mut self) {
        self.now = self.busy.iter().fold(self.now, |a, &b| a.max(b));
    }

    /// Background erases still running; they are forgotten (the power is going).
    pub fn interrupted(&mut self) -> Vec<u32> {
        let now = self.now;
        self.pending
            .iter_mut()
            .filter_map(|slot| slot.take().filter(|p| p.done > now))
            .map(|p| p.block)
            .collect()
    }

    /// After a reset no bank is busy.
    pub fn reset(&mut self) {
        self.busy.iter_mut().for_each(|b| *b = self.now);
        self.pending.iter_mut().for_each(|p| *p = None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn background_erases_overlap_across_banks() {
        let mut b = Banks::new(2);
        b.start_erase(0, 0, 1000);
        b.run(1, 300);
        assert_eq!(b.now, 300);
        assert_eq!(b.erasing(0), Some(0));
        assert_eq!(b.next_finished(), None);
        b.run(0, 10); // waits for the erase
        assert_eq!(b.now, 1010);
        assert_eq!(b.next_finished(), Some((0, 0)));
        assert_eq!(b.erasing(0), None);
        b.done(0);
        assert_eq!(b.next_finished(), None);
    }

    #[test]
    fn suspended_reads_delay_the_erase() {
        let mut b = Banks::new(1);
        b.start_erase(0, 5, 1000);
        b.read(0..=0, 10, Some(20));
        assert_eq!(b.now, 30);
        assert_eq!(b.erasing(0), Some(5));
        b.wait(0);
        assert_eq!(b.now, 1030);
        // Without suspend the read waits.
        b.start_erase(0, 7, 1000);
        b.read(0..=0, 10, None);
        assert_eq!(b.now, 2040);
        b.start_erase(0, 6, 1000);
        b.now += 10;
        assert_eq!(b.interrupted(), alloc::vec![6]);
    }
}
