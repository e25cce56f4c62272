//! Write-back of partial blocks: the blocks small writes end inside, kept in RAM until they
//! must go to flash.
//!
//! A write that ends inside a block would otherwise program the whole block, and the next
//! small write to it would copy it again: 64-byte appends would program a NAND page per 64
//! bytes. Instead the block's sector is allocated and mapped as for any write, but its
//! content waits here, keyed by sector; later writes to the block change it in place (the
//! sector is not programmed yet, so no version on flash uses it). It is programmed when the
//! block is written to its end, when the file is closed, when the buffers are over their
//! bound (least recently used first), when an operation runs in a transaction, and before
//! every commit — so every commit, whatever starts it, holds all the data before it, and a
//! power cut loses only what no commit has covered, as without the buffers. The one commit
//! that leaves blocks here is a journal entry that carries, as small writes, every change
//! made to them (SPEC.md §8.5b); changes made here otherwise are counted
//! ([`WriteBack::changes`]) so that the next commit is a checkpoint.
//!
//! The file system keeps the index consistent with the buffers: a sector freed while its
//! content waits here is dropped from them ([`WriteBack::drop_range`]).

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use super::layout::Ino;

/// One block waiting to be programmed.
#[derive(Debug)]
struct Buffered {
    /// The file it belongs to.
    ino: Ino,
    /// Its block number in the file.
    block: u64,
    /// The whole block.
    data: Vec<u8>,
    /// When it was last written (a counter): the least recent goes first.
    used: u64,
}

/// The buffered blocks, by sector.
#[derive(Debug, Default)]
pub struct WriteBack {
    /// Blocks kept at most; 0: none (every write programs at once).
    limit: usize,
    blocks: BTreeMap<u64, Buffered>,
    clock: u64,
    /// Changes made to buffered blocks in place since mount: they change file data without
    /// changing the index, and the journal must know ([`WriteBack::changes`]).
    changes: u64,
    /// The most bytes held at once since mount.
    high_water: usize,
}

/// What the buffers hold and have held.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteBackStats {
    /// Blocks buffered now.
    pub blocks: usize,
    /// Bytes of their content now (heap, not counting the map's own nodes).
    pub bytes: usize,
    /// The most bytes buffered at once since mount.
    pub high_water: usize,
}

impl WriteBack {
    /// Buffers holding at most `limit` blocks (0: none).
    pub fn new(limit: usize) -> Self {
        WriteBack {
            limit,
            ..Self::default()
        }
    }

    /// Whether blocks may be buffered at all.
    pub fn enabled(&self) -> bool {
        self.limit > 0
    }

    /// Whether any sector of `[a, a + n)` is buffered.
    pub fn holds_any(&self, a: u64, n: u64) -> bool {
        self.blocks.range(a..a.saturating_add(n)).next().is_some()
    }

    /// The buffered content of `sector`.
    pub fn get(&self, sector: u64) -> Option<&[u8]> {
        self.blocks.get(&sector).map(|b| b.data.as_slice())
    }

    /// Changes `bytes` of `sector`'s buffered content from `at`; false if it is not
    /// buffered (or the bytes do not fit in it).
    pub fn write(&mut self, sector: u64, at: usize, bytes: &[u8]) -> bool {
        self.clock += 1;
        let Some(b) = self.blocks.get_mut(&sector) else {
            return false;
        };
        let Some(dst) = b.data.get_mut(at..at + bytes.len()) else {
            return false;
        };
        dst.copy_from_slice(bytes);
        b.used = self.clock;
        self.changes += 1;
        true
    }

    /// Counts a change made to a buffered block outside [`WriteBack::write`] (its content
    /// completed and programmed in place).
    pub fn changed(&mut self) {
        self.changes += 1;
    }

    /// Changes made to buffered blocks in place since mount.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// Buffers `data` as `sector`'s content, block `block` of file `ino` (replacing what
    /// was buffered for it).
    pub fn insert(&mut self, sector: u64, ino: Ino, block: u64, data: Vec<u8>) {
        self.clock += 1;
        self.put(sector, ino, block, data, self.clock);
        self.high_water = self.high_water.max(self.bytes());
    }

    fn put(&mut self, sector: u64, ino: Ino, block: u64, data: Vec<u8>, used: u64) {
        let b = Buffered {
            ino,
            block,
            data,
            used,
        };
        self.blocks.insert(sector, b);
    }

    /// The least recently written block, if the buffers hold more than their bound.
    pub fn over_limit(&self) -> Option<u64> {
        if self.blocks.len() <= self.limit {
            return None;
        }
        self.blocks
            .iter()
            .min_by_key(|(_, b)| b.used)
            .map(|(&k, _)| k)
    }

    /// Takes `sector`'s content out of the buffers (to program it or because it was freed).
    pub fn take(&mut self, sector: u64) -> Option<Vec<u8>> {
        self.blocks.remove(&sector).map(|b| b.data)
    }

    /// Puts back a block taken out whose program failed, as if never taken.
    pub fn put_back(&mut self, sector: u64, ino: Ino, block: u64, data: Vec<u8>) {
        self.put(sector, ino, block, data, 0);
    }

    /// The file `sector`'s content belongs to, and its block number there.
    pub fn owner(&self, sector: u64) -> Option<(Ino, u64)> {
        self.blocks.get(&sector).map(|b| (b.ino, b.block))
    }

    /// The buffered sectors, in order; of file `ino` only if given.
    pub fn sectors(&self, ino: Option<Ino>) -> Vec<u64> {
        self.blocks
            .iter()
            .filter(|(_, b)| ino.is_none_or(|i| b.ino == i))
            .map(|(&k, _)| k)
            .collect()
    }

    /// The buffered blocks' files and sectors, least recently written first.
    pub fn by_age(&self) -> Vec<(Ino, u64)> {
        let mut v: Vec<(u64, Ino, u64)> = self
            .blocks
            .iter()
            .map(|(&k, b)| (b.used, b.ino, k))
            .collect();
        v.sort_unstable();
        v.into_iter().map(|(_, ino, k)| (ino, k)).collect()
    }

    /// Drops the buffered content of sectors `[a, a + n)`: they were freed.
    pub fn drop_range(&mut self, a: u64, n: u64) {
        let gone: Vec<u64> = self
            .blocks
            .range(a..a.saturating_add(n))
            .map(|(&k, _)| k)
            .collect();
        for k in gone {
            self.blocks.remove(&k);
        }
    }

    /// Drops everything: the working version they belonged to is gone.
    pub fn clear(&mut self) {
        self.blocks.clear();
    }

    /// Bytes of buffered content.
    pub fn bytes(&self) -> usize {
        self.blocks.values().map(|b| b.data.len()).sum()
    }

    /// What the buffers hold and have held.
    pub fn stats(&self) -> WriteBackStats {
        WriteBackStats {
            blocks: self.blocks.len(),
            bytes: self.bytes(),
            high_water: self.high_water,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_written_block_goes_first() {
        let mut wb = WriteBack::new(2);
        wb.insert(10, 1, 0, alloc::vec![0; 4]);
        wb.insert(20, 1, 0, alloc::vec![0; 4]);
        assert_eq!(wb.over_limit(), None);
        // Writing 10 again makes 20 the least recent.
        assert!(wb.write(10, 1, &[7, 7]));
        wb.insert(30, 2, 0, alloc::vec![0; 4]);
        assert_eq!(wb.over_limit(), Some(20));
        assert_eq!(wb.take(20), Some(alloc::vec![0; 4]));
        assert_eq!(wb.over_limit(), None);
        assert_eq!(wb.get(10), Some(&[0, 7, 7, 0][..]));
        assert_eq!(wb.sectors(Some(2)), alloc::vec![30]);
        assert_eq!(wb.stats().high_water, 12);
    }

    #[test]
    fn freed_sectors_are_dropped_and_writes_past_the_block_refused() {
        let mut wb = WriteBack::new(4);
        wb.insert(5, 1, 0, alloc::vec![0; 4]);
        wb.insert(6, 1, 0, alloc::vec![0; 4]);
        wb.insert(9, 1, 0, alloc::vec![0; 4]);
        assert!(!wb.write(5, 3, &[1, 1]));
        assert!(!wb.write(7, 0, &[1]));
        wb.drop_range(5, 2);
        assert_eq!(wb.sectors(None), alloc::vec![9]);
        assert!(wb.holds_any(8, 2) && !wb.holds_any(0, 9));
        assert_eq!(wb.stats().bytes, 4);
    }
}
