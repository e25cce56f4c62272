//! FlexFS's wear management: a lifetime guarantee for a part whose SLC region wears it
//! faster. The part's rating (FlexFS's E_cycles) is the one the wear leveller works to,
//! [`super::LogConfig::rated_cycles`] or the part's own. Data written to SLC and migrated later costs three erases' worth of wear for
//! every one it would cost written straight to MLC (an SLC segment holds half the data,
//! then the data is written again in MLC), so a part fed SLC-first can wear out early.
//!
//! Time is cut into windows of [`Lifetime::window`]. At the start of each, the erases left
//! before every segment comes within one cycle of its rating are shared among the windows
//! left until [`Lifetime::min`]: that is the window's writing budget WB. (One cycle short:
//! near the rating the wear leveller holds the spread of erase counts to one, so the most
//! worn segment then just reaches it.) With IW the data expected in the window (the mean
//! of the windows so far) and γ the share of it sent to SLC, the window costs IW·(1 + 2γ)
//! erases' worth, times what cleaning adds — measured as the erases of the windows so far
//! per unit of IW·(1 + 2γ) they wrote — so γ = (WB/(IW·k) − 1)/2, between 0 and 1. A
//! window that has used its budget sends the rest of its data straight to MLC.
//!
//! The windows count from the mount: a remount spreads what is left over the whole of
//! [`Lifetime::min`] again, which only makes the budget stricter, never breaks it.

use core::time::Duration;

/// How long the part must last (FlexFS's L_min), and how often the budget is set again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifetime {
    /// The part must not reach its rated erase cycles sooner than this after the mount.
    pub min: Duration,
    /// The budget's window (FlexFS's T_s).
    pub window: Duration,
}

/// The writing budget of the current window and the share γ it allows.
#[derive(Debug, Clone)]
pub(super) struct WearBudget {
    lifetime: Lifetime,
    /// Device time at the mount: windows count from it.
    start: Duration,
    /// The current window (`None` before the first decision).
    window: Option<u64>,
    /// Erases the log had done when the window began, and the erases it may do in it.
    erases_at_start: u64,
    allowed: f64,
    /// Slots the owner wrote in the windows before this one, and in this one.
    past_slots: u64,
    slots: u64,
    /// Over the windows before this one: their erases, and their writes weighted by what
    /// the share of SLC they had costs (slots · (1 + 2γ)).
    past_erases: u64,
    past_cost: f64,
    /// The share of new data that may go to SLC in this window.
    gamma: f64,
}

impl WearBudget {
    pub(super) fn new(lifetime: Lifetime, start: Duration) -> Self {
        WearBudget {
            lifetime,
            start,
            window: None,
            erases_at_start: 0,
            allowed: f64::INFINITY,
            past_slots: 0,
            slots: 0,
            past_erases: 0,
            past_cost: 0.0,
            gamma: 1.0,
        }
    }

    /// The owner wrote a slot.
    pub(super) fn wrote(&mut self) {
        self.slots += 1;
    }

    /// γ at `now`, with `erases` done so far by the log. At a window's start the budget is
    /// set from `cycles_left` (erases left before every segment comes within a cycle of its
    /// rating) and `segment_slots` (slots an MLC segment holds).
    pub(super) fn gamma(
        &mut self,
        now: Duration,
        erases: u64,
        cycles_left: impl FnOnce() -> u64,
        segment_slots: u32,
    ) -> f64 {
        let window_ns = self.lifetime.window.as_nanos().max(1);
        let window = (now.saturating_sub(self.start).as_nanos() / window_ns) as u64;
        if self.window != Some(window) {
            if self.window.is_some() {
                self.past_erases += erases - self.erases_at_start;
                self.past_cost += self.slots as f64 * (1.0 + 2.0 * self.gamma);
            }
            let windows = self.lifetime.min.as_nanos().div_ceil(window_ns) as u64;
            let left = windows.saturating_sub(window).max(1);
            self.allowed = cycles_left() as f64 / left as f64;
            self.erases_at_start = erases;
            // The data expected: the mean of the windows so far (none in the first: SLC
            // first until there is something to go by).
            self.past_slots += self.slots;
            self.slots = 0;
            let expected = self.past_slots as f64 / window.max(1) as f64;
            // Erases per unit of cost: one per segment of slots, as far as nothing has
            // been measured; what the windows so far spent, once they wrote.
            let per_unit = if self.past_cost > 0.0 && self.past_erases > 0 {
                self.past_erases as f64 / self.past_cost
            } else {
                1.0 / f64::from(segment_slots.max(1))
            };
            self.gamma = if expected <= 0.0 {
                1.0
            } else {
                let room = self.allowed / (expected * per_unit);
                ((room - 1.0) / 2.0).clamp(0.0, 1.0)
            };
            self.window = Some(window);
        }
        if (erases - self.erases_at_start) as f64 >= self.allowed {
            return 0.0;
        }
        self.gamma
    }

    /// γ as last decided (1 before any decision).
    pub(super) fn current(&self) -> f64 {
        self.gamma
    }

    /// Whether γ has been decided (a window began since the mount).
    pub(super) fn decided(&self) -> bool {
        self.window.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget() -> WearBudget {
        WearBudget::new(
            Lifetime {
                min: Duration::from_secs(4000),
                window: Duration::from_secs(400),
            },
            Duration::ZERO,
        )
    }

    #[test]
    fn gamma_spends_what_the_windows_left_allow() {
        let mut b = budget();
        // Nothing written yet: no expectation, SLC first.
        assert_eq!(b.gamma(Duration::ZERO, 0, || 1000, 100), 1.0);
        // 10,000 slots in the first window; 1,000 cycles left over 9 windows is 111 erases,
        // 11,111 slots' worth: γ = (1.11 − 1)/2.
        for _ in 0..10_000 {
            b.wrote();
        }
        // 1,000 cycles left over 9 windows is 111 erases. The first window wrote 10,000
        // slots all to SLC (30,000 units of cost) for 150 erases: 1/200 erase per unit.
        let g = b.gamma(Duration::from_secs(400), 150, || 1000, 100);
        let room = 1000.0 / 9.0 / (10_000.0 * 150.0 / 30_000.0);
        assert!((g - (room - 1.0) / 2.0).abs() < 1e-9, "{g}");
        // Plenty of cycles: everything to SLC.
        let mut b = budget();
        for _ in 0..100 {
            b.wrote();
        }
        assert_eq!(b.gamma(Duration::from_secs(400), 0, || 100_000, 100), 1.0);
    }

    #[test]
    fn a_window_that_spent_its_budget_writes_mlc() {
        let mut b = budget();
        b.gamma(Duration::ZERO, 0, || 100, 10);
        // 100 cycles over 10 windows: 10 erases this window.
        assert_eq!(b.gamma(Duration::from_secs(1), 9, || 100, 10), 1.0);
        assert_eq!(b.gamma(Duration::from_secs(2), 10, || 100, 10), 0.0);
        // The next window has a budget again.
        assert!(b.gamma(Duration::from_secs(400), 10, || 90, 10) > 0.0);
    }

    #[test]
    fn the_last_window_gets_all_that_is_left() {
        let mut b = budget();
        b.gamma(Duration::from_secs(3990), 0, || 50, 10);
        assert_eq!(b.allowed, 50.0);
        // Past the lifetime, still at least one window.
        b.gamma(Duration::from_secs(9000), 0, || 50, 10);
        assert_eq!(b.allowed, 50.0);
    }
}
