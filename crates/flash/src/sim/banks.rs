//! The device clock and its banks.
//!
//! Each bank is busy until some instant. A synchronous operation waits for its bank, then
//! occupies it; a background erase occupies its bank without holding up the caller, so work
//! on other banks overlaps it (Kawaguchi's parallel banks). A read may suspend an erase in
//! progress where the part supports erase suspend.

use alloc::vec::Vec;

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
        self.now += ns;
        self.busy[bank as usize] = self.now;
    }

    /// Starts a background erase of `block` on the (free) bank; returns its duration.
    pub fn start_erase(&mut self, bank: u32, block: u32, ns: u64) -> u64 {
        self.wait(bank);
        let done = self.now + ns;
        self.busy[bank as usize] = done;
        self.pending[bank as usize] = Some(Pending { block, done });
        ns
    }

    /// The block a background erase is working on in `bank`, if one is still running.
    pub fn erasing(&self, bank: u32) -> Option<u32> {
        self.pending[bank as usize]
            .filter(|p| p.done > self.now)
            .map(|p| p.block)
    }

    /// Serves a read of `ns` on a bank whose erase is suspended for it (`suspend_ns` extra);
    /// the erase finishes that much later.
    pub fn suspended_read(&mut self, bank: u32, ns: u64, suspend_ns: u64) {
        let extra = ns + suspend_ns;
        self.now += extra;
        self.busy[bank as usize] += extra;
        if let Some(p) = &mut self.pending[bank as usize] {
            p.done += extra;
        }
    }

    /// Background erases that have finished by now; they are forgotten.
    pub fn finished(&mut self) -> Vec<u32> {
        let now = self.now;
        self.pending
            .iter_mut()
            .filter_map(|slot| match *slot {
                Some(p) if p.done <= now => {
                    *slot = None;
                    Some(p.block)
                }
                _ => None,
            })
            .collect()
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
        b.run(0, 10); // waits for the erase
        assert_eq!(b.now, 1010);
        assert_eq!(b.finished(), alloc::vec![0]);
        assert_eq!(b.erasing(0), None);
    }

    #[test]
    fn suspended_reads_delay_the_erase() {
        let mut b = Banks::new(1);
        b.start_erase(0, 5, 1000);
        b.suspended_read(0, 10, 20);
        assert_eq!(b.now, 30);
        assert_eq!(b.erasing(0), Some(5));
        b.wait(0);
        assert_eq!(b.now, 1030);
        b.start_erase(0, 6, 1000);
        b.now += 10;
        assert_eq!(b.interrupted(), alloc::vec![6]);
    }
}
