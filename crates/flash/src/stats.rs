//! Work counters and latency distributions of a device.
//!
//! Take a snapshot before a run and [`Stats::since`] after it to get what the run cost.

use core::time::Duration;

/// Log-linear histogram of latencies: 8 sub-buckets per power of two (12.5% resolution),
/// fixed size, no allocation.
#[derive(Clone, PartialEq, Eq)]
pub struct Histogram {
    buckets: [u64; BUCKETS],
    count: u64,
    max_ns: u64,
    sum_ns: u128,
}

const SUB: u32 = 3;
const BUCKETS: usize = 64 << SUB;

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: [0; BUCKETS],
            count: 0,
            max_ns: 0,
            sum_ns: 0,
        }
    }
}

impl core::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.count)
            .field("p50", &self.percentile(50.0))
            .field("p99", &self.percentile(99.0))
            .field("max", &self.max())
            .finish()
    }
}

fn bucket_of(ns: u64) -> usize {
    if ns < (1 << SUB) {
        return ns as usize;
    }
    let msb = 63 - ns.leading_zeros();
    let sub = (ns >> (msb - SUB)) & ((1 << SUB) - 1);
    (((msb - SUB + 1) << SUB) as u64 + sub) as usize
}

/// Upper bound of the values that land in bucket `i`.
fn bucket_high(i: usize) -> u64 {
    if i < (1 << SUB) {
        return i as u64;
    }
    let msb = (i >> SUB) as u32 + SUB - 1;
    let sub = (i & ((1 << SUB) - 1)) as u64;
    let low = (1u64 << msb) | (sub << (msb - SUB));
    low + ((1u64 << (msb - SUB)) - 1)
}

impl Histogram {
    /// Records one latency.
    pub fn record(&mut self, d: Duration) {
        let ns = d.as_nanos().min(u64::MAX as u128) as u64;
        self.buckets[bucket_of(ns)] += 1;
        self.count += 1;
        self.max_ns = self.max_ns.max(ns);
        self.sum_ns += ns as u128;
    }

    /// Number of latencies recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Largest latency recorded.
    pub fn max(&self) -> Duration {
        Duration::from_nanos(self.max_ns)
    }

    /// Mean latency.
    pub fn mean(&self) -> Duration {
        if self.count == 0 {
            return Duration::ZERO;
        }
        Duration::from_nanos((self.sum_ns / self.count as u128) as u64)
    }

    /// The latency below which `p` percent of the recorded ones fall (to 12.5%).
    pub fn percentile(&self, p: f64) -> Duration {
        if self.count == 0 {
            return Duration::ZERO;
        }
        let rank = libm::ceil(p.clamp(0.0, 100.0) / 100.0 * self.count as f64).max(1.0) as u64;
        let mut seen = 0;
        for (i, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Duration::from_nanos(bucket_high(i).min(self.max_ns));
            }
        }
        self.max()
    }

    /// What was recorded since `earlier` (a snapshot of this histogram). The max is this
    /// histogram's, an upper bound.
    pub fn since(&self, earlier: &Histogram) -> Histogram {
        let mut h = self.clone();
        for (b, e) in h.buckets.iter_mut().zip(earlier.buckets.iter()) {
            *b = b.saturating_sub(*e);
        }
        h.count = self.count.saturating_sub(earlier.count);
        h.sum_ns = self.sum_ns.saturating_sub(earlier.sum_ns);
        h
    }
}

/// What a device has done.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Read operations (NAND: page reads).
    pub reads: u64,
    /// Program operations (NVRAM: writes).
    pub programs: u64,
    /// Erase operations.
    pub erases: u64,
    /// Bytes moved to the host.
    pub bytes_read: u64,
    /// Bytes programmed (NAND: data and spare given).
    pub bytes_programmed: u64,
    /// Bit errors corrected by ECC.
    pub corrected_bits: u64,
    /// Reads that failed ECC.
    pub uncorrectable_reads: u64,
    /// Programs the device reported failed.
    pub failed_programs: u64,
    /// Erases the device reported failed.
    pub failed_erases: u64,
    /// Blocks marked bad.
    pub marked_bad: u64,
    /// Latency of reads, including any wait for a busy bank.
    pub read_latency: Histogram,
    /// Latency of programs.
    pub program_latency: Histogram,
    /// Latency of erases (for background erases: from start to completion).
    pub erase_latency: Histogram,
}

impl Stats {
    /// The work done since `earlier` (a snapshot of the same device; counts that went
    /// backwards, from a snapshot of something else, come out as zero).
    pub fn since(&self, earlier: &Stats) -> Stats {
        Stats {
            reads: self.reads.saturating_sub(earlier.reads),
            programs: self.programs.saturating_sub(earlier.programs),
            erases: self.erases.saturating_sub(earlier.erases),
            bytes_read: self.bytes_read.saturating_sub(earlier.bytes_read),
            bytes_programmed: self
                .bytes_programmed
                .saturating_sub(earlier.bytes_programmed),
            corrected_bits: self.corrected_bits.saturating_sub(earlier.corrected_bits),
            uncorrectable_reads: self
                .uncorrectable_reads
                .saturating_sub(earlier.uncorrectable_reads),
            failed_programs: self.failed_programs.saturating_sub(earlier.failed_programs),
            failed_erases: self.failed_erases.saturating_sub(earlier.failed_erases),
            marked_bad: self.marked_bad.saturating_sub(earlier.marked_bad),
            read_latency: self.read_latency.since(&earlier.read_latency),
            program_latency: self.program_latency.since(&earlier.program_latency),
            erase_latency: self.erase_latency.since(&earlier.erase_latency),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_values_in_order() {
        let mut last = 0;
        for ns in (0..5000u64).chain([1 << 20, (1 << 40) + 12345, u64::MAX]) {
            let b = bucket_of(ns);
            assert!(b < BUCKETS);
            assert!(
                bucket_high(b) >= ns,
                "{ns} in bucket {b} high {}",
                bucket_high(b)
            );
            assert!(b >= last || ns > 5000);
            last = b;
        }
    }

    #[test]
    fn percentiles_are_within_resolution() {
        let mut h = Histogram::default();
        for i in 1..=1000u64 {
            h.record(Duration::from_micros(i));
        }
        let p50 = h.percentile(50.0).as_micros() as f64;
        assert!((500.0..=500.0 * 1.125).contains(&p50), "{p50}");
        assert_eq!(h.percentile(100.0), Duration::from_micros(1000));
        assert_eq!(h.max(), Duration::from_micros(1000));
        let snap = h.clone();
        h.record(Duration::from_secs(1));
        let d = h.since(&snap);
        assert_eq!(d.count(), 1);
        assert_eq!(d.percentile(50.0), Duration::from_secs(1));
    }
}

/// How evenly blocks have worn: the summary of a device's erase counts.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WearSpread {
    /// Blocks counted.
    pub blocks: u64,
    /// Fewest erases of any block.
    pub min: u32,
    /// Mean erases per block.
    pub mean: f64,
    /// Most erases of any block.
    pub max: u32,
    /// Standard deviation of the erase counts.
    pub stddev: f64,
}

impl WearSpread {
    /// The spread of `counts` (all zero when empty).
    pub fn of(counts: &[u32]) -> WearSpread {
        let (Some(&min), Some(&max)) = (counts.iter().min(), counts.iter().max()) else {
            return WearSpread::default();
        };
        let n = counts.len() as f64;
        let mean = counts.iter().map(|&c| c as f64).sum::<f64>() / n;
        let var = counts
            .iter()
            .map(|&c| (c as f64 - mean) * (c as f64 - mean))
            .sum::<f64>()
            / n;
        WearSpread {
            blocks: counts.len() as u64,
            min,
            mean,
            max,
            stddev: libm::sqrt(var),
        }
    }
}

#[cfg(test)]
mod spread_tests {
    use super::WearSpread;

    #[test]
    fn spread_of_counts() {
        let s = WearSpread::of(&[1, 1, 3, 3]);
        assert_eq!((s.blocks, s.min, s.max), (4, 1, 3));
        assert!((s.mean - 2.0).abs() < 1e-12 && (s.stddev - 1.0).abs() < 1e-12);
        assert_eq!(WearSpread::of(&[]), WearSpread::default());
    }
}
