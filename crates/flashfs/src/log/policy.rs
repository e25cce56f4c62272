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
    /// cleaning ahead of need only segments that are cheap to clean (at most a quarter live),
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
}
