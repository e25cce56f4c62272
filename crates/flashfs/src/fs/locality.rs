//! Which file data is rewritten soon: a 2Q (Johnson & Shasha) of recently written extents,
//! for FlexFS's locality-aware migration ([`crate::Regions::Locality`]), where rewritten
//! data stays in SLC segments instead of being migrated to MLC only to die there.
//!
//! Keys are extents of [`EXTENT_BLOCKS`] blocks of a file: the file system writes every
//! version of a block to a new sector, so only the file's own coordinates see a rewrite.
//! An extent written once enters `first` (a FIFO); written again while remembered there, it
//! is hot and moves to `hot` (an LRU), where further writes keep it. Extents written once
//! and never again — a stream of new data — only pass through `first`, so they never push
//! hot ones out. Both queues are bounded: the RAM is fixed whatever the file system holds.

use alloc::collections::VecDeque;

use super::layout::Ino;

/// Blocks per extent: rewrites are noticed at this granularity (64 KiB of 4 KiB blocks).
pub const EXTENT_BLOCKS: u64 = 16;

/// Extents `first` remembers (with 4 KiB blocks, 16 MiB of data written once).
const FIRST: usize = 256;

/// Extents `hot` holds (8 MiB of rewritten data).
const HOT: usize = 128;

/// The 2Q; empty and inert unless enabled.
#[derive(Debug, Default)]
pub struct Locality {
    enabled: bool,
    /// Extents written once lately, oldest first.
    first: VecDeque<u64>,
    /// Extents rewritten lately, least recently written first.
    hot: VecDeque<u64>,
}

impl Locality {
    /// A 2Q that classifies writes if `enabled`, and answers "cold" otherwise.
    pub fn new(enabled: bool) -> Self {
        Locality {
            enabled,
            ..Locality::default()
        }
    }

    /// Notes a write of file `ino` at block `block`, and says whether its extent is hot
    /// (rewritten while remembered).
    pub fn wrote(&mut self, ino: Ino, block: u64) -> bool {
        if !self.enabled {
            return false;
        }
        let key = (ino << 24) ^ (block / EXTENT_BLOCKS);
        if let Some(i) = self.hot.iter().position(|&k| k == key) {
            self.hot.remove(i);
            self.hot.push_back(key);
            return true;
        }
        if let Some(i) = self.first.iter().position(|&k| k == key) {
            self.first.remove(i);
            if self.hot.len() == HOT {
                self.hot.pop_front();
            }
            self.hot.push_back(key);
            return true;
        }
        if self.first.len() == FIRST {
            self.first.pop_front();
        }
        self.first.push_back(key);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_extent_written_twice_is_hot() {
        let mut l = Locality::new(true);
        assert!(!l.wrote(5, 0));
        assert!(l.wrote(5, 3), "same extent");
        assert!(l.wrote(5, 0));
        assert!(!l.wrote(5, EXTENT_BLOCKS), "next extent");
        assert!(!l.wrote(6, 0), "another file");
    }

    #[test]
    fn a_stream_of_new_data_does_not_evict_hot_extents() {
        let mut l = Locality::new(true);
        l.wrote(1, 0);
        assert!(l.wrote(1, 0));
        for b in 0..10 * FIRST as u64 {
            l.wrote(2, b * EXTENT_BLOCKS);
        }
        assert!(l.wrote(1, 0));
        assert!(l.first.len() <= FIRST && l.hot.len() <= HOT);
    }

    #[test]
    fn a_rewrite_after_the_queue_forgot_is_cold() {
        let mut l = Locality::new(true);
        l.wrote(1, 0);
        for b in 0..FIRST as u64 {
            l.wrote(2, b * EXTENT_BLOCKS);
        }
        assert!(!l.wrote(1, 0));
    }

    #[test]
    fn disabled_it_remembers_nothing() {
        let mut l = Locality::new(false);
        l.wrote(1, 0);
        assert!(!l.wrote(1, 0));
        assert!(l.first.is_empty());
    }
}
