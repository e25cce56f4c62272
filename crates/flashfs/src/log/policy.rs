//! Cleaning policies: which segment to clean, and when (Kawaguchi's threshold curve).
//!
//! A policy scores each cleanable segment; a higher score is a better victim. The threshold
//! curve keeps the cleaner idle while at least `start` segments are free, then lets it take
//! segments whose score exceeds a threshold that falls linearly to zero as the free segments
//! fall to the reserve. Segments with no live data are always taken first.

/// How the cleaner chooses a victim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policy {
    /// The segment with the least live data.
    Greedy,
    /// The segment maximising age x (1 - u) / (2u): free space gained per copy cost, weighted
    /// by how long the segment has been left alone (Kawaguchi's variant of LFS).
    CostBenefit,
    /// Free space gained per copy, (1 - u) / u, weighted by the fourth root of the age, and
    /// cleaning ahead of need only segments that are cheap to clean (none live as cleaning
    /// starts, up to a quarter near the reserve: [`early_live_limit`]),
    /// everything else as late as possible so that more of it dies first. The light age
    /// weight is near-greedy on uniform updates (where greedy is best) yet leaves alone a
    /// segment being overwritten right now (which cost-benefit's full age weight does, and
    /// greedy does not). Measured best on `flashfs bench kawaguchi`.
    #[default]
    Adaptive,
}

impl Policy {
    /// Every policy, for benchmarks.
    pub const ALL: [Policy; 3] = [Policy::Greedy, Policy::CostBenefit, Policy::Adaptive];

    /// Name used in configs and reports.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Greedy => "greedy",
            Policy::CostBenefit => "cost-benefit",
            Policy::Adaptive => "adaptive",
        }
    }

    /// Parses a name.
    pub fn from_name(s: &str) -> Option<Policy> {
        Policy::ALL.into_iter().find(|p| p.name() == s)
    }

    /// Score of a segment with `live` of `slots` slots live, last modified `age_s` seconds
    /// ago; `None` when it has nothing to gain.
    pub fn score(self, live: u32, slots: u32, age_s: f64) -> Option<f64> {
        if live >= slots {
            return None;
        }
        let u = live as f64 / slots as f64;
        Some(match self {
            Policy::Greedy => 1.0 - u,
            Policy::CostBenefit => {
                if live == 0 {
                    f64::INFINITY
                } else {
                    age_s * (1.0 - u) / (2.0 * u)
                }
            }
            Policy::Adaptive => {
                if live == 0 {
                    f64::INFINITY
                } else {
                    libm::sqrt(libm::sqrt(age_s.max(0.0))) * (1.0 - u) / u
                }
            }
        })
    }

    /// The score at which the threshold curve starts (with `start` free segments):
    /// Kawaguchi's 455 invalid of 504 blocks for greedy, "unmodified 30 days with one
    /// invalid block" for cost-benefit.
    pub fn start_threshold(self, slots: u32) -> f64 {
        match self {
            Policy::Greedy => 455.0 / 504.0,
            Policy::CostBenefit => {
                let n = slots.max(2) as f64;
                30.0 * 86_400.0 * (1.0 / n) / (2.0 * (n - 1.0) / n)
            }
            Policy::Adaptive => 0.5,
        }
    }
}

/// The threshold a victim's score must exceed with `free` free segments, or `None` when the
/// cleaner should stay idle. At or below `reserve` free segments everything qualifies.
pub fn threshold(policy: Policy, slots: u32, free: u32, start: u32, reserve: u32) -> Option<f64> {
    if free >= start {
        return None;
    }
    // The adaptive policy cleans ahead of need only segments cheap to clean (the log limits
    // how much of them may be live); anything else waits for the reserve, so that more of
    // it dies first.
    if policy == Policy::Adaptive {
        return Some(0.0);
    }
    if free <= reserve || start <= reserve {
        return Some(0.0);
    }
    let fraction = (free - reserve) as f64 / (start - reserve) as f64;
    Some(policy.start_threshold(slots) * fraction)
}

/// The live slots of `slots` a victim of the adaptive policy's cleaning ahead of need may
/// hold with `free` free segments: none as the cleaner starts (`start`), rising with the
/// free segments used up to a quarter of a segment at the `reserve` — Kawaguchi's threshold
/// curve, on the cost of a victim rather than its score. Data that dies in the order it was
/// written (a queue of messages, a log) empties whole segments if left alone; a fixed
/// quarter took them a quarter live whenever fewer than `start` segments were free
/// (`flashfs bench tffs`, phone on 448/2: 0.098 → 0.006 bytes copied by the cleaner per
/// user byte).
pub fn early_live_limit(slots: u32, free: u32, start: u32, reserve: u32) -> u32 {
    let span = start.saturating_sub(reserve).max(1);
    let below = start.saturating_sub(free).min(span);
    slots / 4 * below / span
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_segments_score_best() {
        for p in Policy::ALL {
            let empty = p.score(0, 500, 1.0).unwrap();
            let half = p.score(250, 500, 1.0).unwrap();
            assert!(empty > half, "{p:?}");
            assert_eq!(p.score(500, 500, 1.0), None);
        }
    }

    #[test]
    fn cost_benefit_prefers_old_segments() {
        let young = Policy::CostBenefit.score(250, 500, 10.0).unwrap();
        let old = Policy::CostBenefit.score(250, 500, 1000.0).unwrap();
        assert!(old > young);
    }

    #[test]
    fn threshold_curve_falls_with_free_segments() {
        let p = Policy::Greedy;
        assert_eq!(threshold(p, 504, 12, 12, 2), None);
        let t11 = threshold(p, 504, 11, 12, 2).unwrap();
        let t5 = threshold(p, 504, 5, 12, 2).unwrap();
        assert!(t11 > t5 && t5 > 0.0);
        assert_eq!(threshold(p, 504, 2, 12, 2), Some(0.0));
        assert!((p.start_threshold(504) - 455.0 / 504.0).abs() < 1e-12);
    }

    #[test]
    fn early_cleaning_takes_fuller_victims_as_free_segments_run_out() {
        let limit = |free| early_live_limit(64, free, 12, 2);
        assert_eq!(limit(12), 0);
        assert_eq!(limit(20), 0);
        assert_eq!(limit(2), 16);
        assert_eq!(limit(0), 16);
        let curve: Vec<u32> = (2..=12).rev().map(limit).collect();
        assert!(curve.windows(2).all(|w| w[0] <= w[1]), "{curve:?}");
        assert!(limit(7) > 0 && limit(7) < 16, "{}", limit(7));
        // A start at or below the reserve: the whole quarter below it, nothing above.
        assert_eq!(early_live_limit(64, 1, 2, 2), 16);
        assert_eq!(early_live_limit(64, 3, 2, 2), 0);
    }
}
