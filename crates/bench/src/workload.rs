//! Workload generators: where each 4 KB write of Kawaguchi's experiments goes.
//!
//! A workload runs over the "initial data" region: the first `chunks` 4 KB chunks (of
//! [`CHUNK_SECTORS`] sectors of [`SECTOR_SIZE`] bytes) of the block device, which the
//! experiment fills sequentially before measuring. Every write overwrites one whole chunk,
//! 4 KB aligned, so the region never grows.
//!
//! - [`Pattern::Sequential`]: chunk 0, 1, 2, … wrapping at the end of the region (Table 4).
//! - [`Pattern::Random`]: a uniformly random chunk of the region (Table 5).
//! - [`Pattern::HotCold`]: Kawaguchi's "640-116": 60% of the writes go to a uniformly random
//!   chunk of the first eighth of the region, 40% to one of the second eighth, and the other
//!   three quarters are never rewritten after the fill (Tables 6 and 7). The paper does not
//!   say where its two hot eighths lie; here they are the first two eighths of the region.
//!
//! Generators are seeded and deterministic: the same pattern, region and seed give the same
//! sequence on every machine.

use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

/// Bytes per sector of the block device the experiments write.
pub const SECTOR_SIZE: usize = 512;
/// Sectors per write: Kawaguchi's writes are 4 KB.
pub const CHUNK_SECTORS: u64 = 8;
/// Bytes per write.
pub const CHUNK_BYTES: usize = SECTOR_SIZE * CHUNK_SECTORS as usize;

/// Share of the hot-and-cold writes that go to the hottest eighth (the "6" of 640-116).
pub const HOT_SHARE: f64 = 0.6;

/// Where the writes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// Overwrite the region in order, wrapping.
    Sequential,
    /// Overwrite uniformly random 4 KB chunks of the region.
    Random,
    /// Kawaguchi's 640-116: 60% to one eighth, 40% to another, three quarters untouched.
    HotCold,
}

impl Pattern {
    /// Every pattern, in the paper's order.
    pub const ALL: [Pattern; 3] = [Pattern::Sequential, Pattern::Random, Pattern::HotCold];

    /// Name used in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Sequential => "sequential",
            Pattern::Random => "random",
            Pattern::HotCold => "hot-cold",
        }
    }

    /// Parses a name.
    pub fn from_name(s: &str) -> Option<Pattern> {
        Pattern::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// Which part of a hot-and-cold region a chunk belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zone {
    /// The eighth that receives 60% of the writes.
    Hottest,
    /// The eighth that receives 40% of the writes.
    Hot,
    /// The three quarters never rewritten.
    Cold,
}

/// The zone of `chunk` in a hot-and-cold region of `chunks` chunks.
pub fn hot_cold_zone(chunk: u64, chunks: u64) -> Zone {
    let eighth = (chunks / 8).max(1);
    if chunk < eighth {
        Zone::Hottest
    } else if chunk < 2 * eighth {
        Zone::Hot
    } else {
        Zone::Cold
    }
}

/// A deterministic stream of 4 KB writes over a region.
#[derive(Debug, Clone)]
pub struct Workload {
    pattern: Pattern,
    chunks: u64,
    next: u64,
    rng: Xoshiro256PlusPlus,
}

impl Workload {
    /// A workload of `pattern` over the first `chunks` chunks, seeded by `seed`. Returns
    /// `None` when the region is empty, or too small for hot-and-cold (fewer than 16 chunks,
    /// so that each eighth holds at least two).
    pub fn new(pattern: Pattern, chunks: u64, seed: u64) -> Option<Workload> {
        let min = match pattern {
            Pattern::HotCold => 16,
            _ => 1,
        };
        if chunks < min {
            return None;
        }
        Some(Workload {
            pattern,
            chunks,
            next: 0,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        })
    }

    /// The pattern.
    pub fn pattern(&self) -> Pattern {
        self.pattern
    }

    /// Chunks in the region.
    pub fn chunks(&self) -> u64 {
        self.chunks
    }

    /// A uniform integer in `[0, n)` (`n > 0`), by multiply-shift (bias below 2^-40 for the
    /// region sizes used here).
    fn below(&mut self, n: u64) -> u64 {
        ((self.rng.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// A uniform float in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The chunk the next write overwrites.
    pub fn next_chunk(&mut self) -> u64 {
        match self.pattern {
            Pattern::Sequential => {
                let c = self.next;
                self.next = (self.next + 1) % self.chunks;
                c
            }
            Pattern::Random => self.below(self.chunks),
            Pattern::HotCold => {
                let eighth = self.chunks / 8;
                if self.unit() < HOT_SHARE {
                    self.below(eighth)
                } else {
                    eighth + self.below(eighth)
                }
            }
        }
    }

    /// The first sector of the next write (always a multiple of [`CHUNK_SECTORS`]).
    pub fn next_sector(&mut self) -> u64 {
        self.next_chunk() * CHUNK_SECTORS
    }
}

impl Iterator for Workload {
    type Item = u64;

    /// The first sector of the next write; the stream never ends.
    fn next(&mut self) -> Option<u64> {
        Some(self.next_sector())
    }
}
