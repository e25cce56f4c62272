//! A read cache of file data blocks: the last few blocks small reads took part of, kept in
//! RAM so that the next small reads of the same block do not fetch it from flash and check
//! it again.
//!
//! A read of 64 bytes otherwise fetches its whole block (512 bytes on NOR, a 2 KiB page on
//! NAND) and checks its checksum: sequential 64-byte reads would read every block 8 or 32
//! times. Only blocks a read took *part* of are kept — a read of whole blocks hands them to
//! its caller, who does not need them again — and only as the block device returned them,
//! checked: a damaged block is an error on its first read, as without the cache, and is
//! never kept.
//!
//! The cache is keyed by sector, not by file and block. The file system never changes a
//! sector's content in place but by programming it ([`Store`](super::store::Store) drops
//! the sector from the cache before each program, patch and forget), and a file's block that
//! changes moves to another sector: so whatever remaps blocks — a write, a truncate, an
//! unlink, a rename over a file, a transaction's abort, the journal's replay, a return to
//! the last commit after a failure — leaves the cache true without being told, as the
//! stale mapping no longer leads to the old sector and the sector's content is still what
//! the cache holds. A sector that is freed and taken by another file is programmed before
//! that file maps it. The blocks waiting in RAM to be programmed (`writeback`) are newer
//! than anything here and are looked at first; the cache never holds them.
//!
//! It is RAM only: a mount starts with it empty, so a power cut never shows what it held.

use alloc::vec::Vec;

/// One cached block.
#[derive(Debug)]
struct Cached {
    /// Where it is on the block device.
    sector: u64,
    /// Its content, as read and checked.
    data: Vec<u8>,
    /// When it was last read (a counter): the least recent goes first.
    used: u64,
}

/// The cached blocks. A handful at most, so a list searched in full is faster and smaller
/// than a map.
#[derive(Debug, Default)]
pub struct ReadCache {
    /// Blocks kept at most; 0: none.
    limit: usize,
    blocks: Vec<Cached>,
    clock: u64,
    /// Reads answered from the cache since mount.
    hits: u64,
    /// Blocks read from flash and kept since mount.
    fills: u64,
    /// The most bytes held at once since mount.
    high_water: usize,
}

/// What the read cache holds and has done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadCacheStats {
    /// Blocks cached now.
    pub blocks: usize,
    /// Bytes of their content now (heap, not counting the list's own entries).
    pub bytes: usize,
    /// The most bytes cached at once since mount.
    pub high_water: usize,
    /// Block reads answered from the cache since mount.
    pub hits: u64,
    /// Blocks read from flash into the cache since mount.
    pub fills: u64,
}

impl ReadCache {
    /// A cache of at most `limit` blocks (0: none).
    pub fn new(limit: usize) -> Self {
        ReadCache {
            limit,
            ..Self::default()
        }
    }

    /// Whether blocks may be cached at all.
    pub fn enabled(&self) -> bool {
        self.limit > 0
    }

    /// Whether any sector of `[a, a + n)` is cached.
    pub fn holds_any(&self, a: u64, n: u64) -> bool {
        let end = a.saturating_add(n);
        self.blocks.iter().any(|b| (a..end).contains(&b.sector))
    }

    /// Copies `sector`'s cached content into `buf` (of the block's size) and counts the
    /// hit; false if it is not cached.
    pub fn get(&mut self, sector: u64, buf: &mut [u8]) -> bool {
        self.clock += 1;
        let Some(b) = self
            .blocks
            .iter_mut()
            .find(|b| b.sector == sector && b.data.len() == buf.len())
        else {
            return false;
        };
        buf.copy_from_slice(&b.data);
        b.used = self.clock;
        self.hits += 1;
        true
    }

    /// Keeps `data`, `sector`'s content as just read and checked, dropping the least
    /// recently read block beyond the bound.
    pub fn insert(&mut self, sector: u64, data: &[u8]) {
        if self.limit == 0 {
            return;
        }
        self.clock += 1;
        let used = self.clock;
        self.fills += 1;
        if let Some(b) = self.blocks.iter_mut().find(|b| b.sector == sector) {
            b.data.clear();
            b.data.extend_from_slice(data);
            b.used = used;
            return;
        }
        if self.blocks.len() >= self.limit {
            // The least recent block's buffer is reused: no allocation once full.
            if let Some(b) = self.blocks.iter_mut().min_by_key(|b| b.used) {
                b.sector = sector;
                b.data.clear();
                b.data.extend_from_slice(data);
                b.used = used;
            }
            return;
        }
        self.blocks.push(Cached {
            sector,
            data: data.to_vec(),
            used,
        });
        self.high_water = self.high_water.max(self.bytes());
    }

    /// Drops sectors `[a, a + n)`: their content changes (programmed, patched, forgotten).
    pub fn invalidate(&mut self, a: u64, n: u64) {
        let end = a.saturating_add(n);
        self.blocks.retain(|b| !(a..end).contains(&b.sector));
    }

    /// Drops everything.
    pub fn clear(&mut self) {
        self.blocks.clear();
    }

    /// Bytes of cached content.
    pub fn bytes(&self) -> usize {
        self.blocks.iter().map(|b| b.data.len()).sum()
    }

    /// What the cache holds and has done.
    pub fn stats(&self) -> ReadCacheStats {
        ReadCacheStats {
            blocks: self.blocks.len(),
            bytes: self.bytes(),
            high_water: self.high_water,
            hits: self.hits,
            fills: self.fills,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_read_block_goes_first() {
        let mut c = ReadCache::new(2);
        c.insert(10, &[1; 4]);
        c.insert(20, &[2; 4]);
        let mut buf = [0u8; 4];
        // Reading 10 again makes 20 the least recent.
        assert!(c.get(10, &mut buf));
        assert_eq!(buf, [1; 4]);
        c.insert(30, &[3; 4]);
        assert!(!c.get(20, &mut buf));
        assert!(c.get(10, &mut buf) && c.get(30, &mut buf));
        assert_eq!(buf, [3; 4]);
        let st = c.stats();
        assert_eq!((st.blocks, st.bytes, st.high_water), (2, 8, 8));
        assert_eq!((st.hits, st.fills), (3, 3));
    }

    #[test]
    fn a_sector_inserted_again_is_replaced_not_doubled() {
        let mut c = ReadCache::new(4);
        c.insert(7, &[1; 4]);
        c.insert(7, &[2; 4]);
        let mut buf = [0u8; 4];
        assert!(c.get(7, &mut buf));
        assert_eq!(buf, [2; 4]);
        assert_eq!(c.stats().blocks, 1);
    }

    #[test]
    fn invalidated_sectors_are_gone() {
        let mut c = ReadCache::new(4);
        for k in [5, 6, 9] {
            c.insert(k, &[k as u8; 4]);
        }
        assert!(c.holds_any(6, 1) && c.holds_any(8, 2) && !c.holds_any(0, 5));
        c.invalidate(5, 2);
        let mut buf = [0u8; 4];
        assert!(!c.get(5, &mut buf) && !c.get(6, &mut buf));
        assert!(c.get(9, &mut buf));
        c.clear();
        assert!(!c.get(9, &mut buf));
        assert_eq!(c.stats().bytes, 0);
    }

    #[test]
    fn a_cache_of_no_blocks_keeps_nothing() {
        let mut c = ReadCache::new(0);
        assert!(!c.enabled());
        c.insert(1, &[1; 4]);
        let mut buf = [0u8; 4];
        assert!(!c.get(1, &mut buf));
        assert_eq!(c.stats(), ReadCacheStats::default());
    }

    #[test]
    fn a_read_of_another_size_misses() {
        let mut c = ReadCache::new(1);
        c.insert(3, &[1; 4]);
        let mut buf = [0u8; 8];
        assert!(!c.get(3, &mut buf));
    }
}
