//! How old slots are when they die: on a device too small for a head of its own for the
//! cleaner's survivors, the cleaner counts a victim's age only up to it (see
//! `Log::pick_victim`). Kept only there, so larger devices hold nothing per segment for it.

use alloc::vec::Vec;

use super::segment::Tick;

/// The running mean age at death of slots, from the opening of their segment.
#[derive(Debug, Clone)]
pub(super) struct DeathAge {
    /// When each segment was opened in this mount ([`Tick::NEVER`]: before it); empty where
    /// the age is not kept.
    opened: Vec<Tick>,
    /// The mean over the last few hundred deaths, ns (0 until one is known).
    mean_ns: u64,
}

impl DeathAge {
    /// For a device of `segments` segments; kept only if `kept`.
    pub(super) fn new(segments: u32, kept: bool) -> Self {
        DeathAge {
            opened: if kept {
                alloc::vec![Tick::NEVER; segments as usize]
            } else {
                Vec::new()
            },
            mean_ns: 0,
        }
    }

    /// Segment `seg` was opened at device time `now_ns`.
    pub(super) fn opened(&mut self, seg: u32, now_ns: u64) {
        if let Some(t) = self.opened.get_mut(seg as usize) {
            *t = Tick::at(now_ns);
        }
    }

    /// A slot of segment `seg` died at `now_ns`: counted if the segment was opened in this
    /// mount (segments found at mount, whose opening time is unknown, do not count).
    pub(super) fn died(&mut self, seg: u32, now_ns: u64) {
        let Some(&t) = self.opened.get(seg as usize) else {
            return;
        };
        if t == Tick::NEVER {
            return;
        }
        let age = t.age_ns(now_ns);
        self.mean_ns = match self.mean_ns {
            0 => age,
            avg => (avg as i128 + (age as i128 - avg as i128) / 256) as u64,
        };
    }

    /// The mean age at death, if one is known.
    pub(super) fn mean_ns(&self) -> Option<u64> {
        (self.mean_ns > 0).then_some(self.mean_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TICK: u64 = 1 << 20;

    #[test]
    fn deaths_count_from_openings_in_this_mount() {
        let mut d = DeathAge::new(4, true);
        // Opened before the mount: not counted.
        d.died(1, 50 * TICK);
        assert_eq!(d.mean_ns(), None);
        d.opened(1, 8 * TICK);
        d.died(1, 25 * TICK);
        assert_eq!(d.mean_ns(), Some(17 * TICK));
        // Later deaths move the mean a 256th of the way.
        d.died(1, (8 + 17 + 256) * TICK);
        assert_eq!(d.mean_ns(), Some(18 * TICK));
        // The time whose tick is NEVER's value counts as opened, a tick later.
        let mut e = DeathAge::new(4, true);
        e.opened(2, u64::from(u32::MAX) * TICK);
        e.died(2, (u64::from(u32::MAX) + 3) * TICK);
        assert_eq!(e.mean_ns(), Some(2 * TICK));
    }

    #[test]
    fn nothing_is_kept_where_it_is_not_used() {
        let mut d = DeathAge::new(8192, false);
        d.opened(3, TICK);
        d.died(3, 9 * TICK);
        assert_eq!(d.mean_ns(), None);
        assert!(d.opened.is_empty());
    }
}
