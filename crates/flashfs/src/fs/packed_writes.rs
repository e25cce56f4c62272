//! Small writes that make a new file's block, committed as that block (SPEC.md §8.5b,
//! operation 15).
//!
//! A small write goes to the journal with its bytes, and its block waits in RAM
//! (`writeback`) until the checkpoint programs it: the bytes are programmed twice, in the
//! entry and in the block. That pays when more small writes follow into the same block
//! (appends), which the block then takes in one program. It does not for a small file
//! created, written whole and synced, the commonest small file there is. So before an
//! entry, where the pending writes of a file the entry creates made all of a block's
//! content (up to the block's end or the file's), half of the block at least, the block is
//! programmed as its data block, and the entry names it ([`OpKind::WriteBlock`]) instead of
//! carrying its bytes: they are programmed once, and the entry takes a few bytes.
//!
//! Why a new file and half a block: a write after the sync finds the block on flash and
//! takes a new one, so for a file that grows by appends the block named is programmed for
//! nothing, and the one it leaves waits in RAM for the checkpoint. Named at every first
//! append into a block, a log paid that at every block (and, before blocks left the bytes
//! past the file's end unprogrammed, a whole block each time: synced 64-byte appends
//! programmed 41% more); a new file written in pieces of half a block and more is most
//! likely whole. A block that went out of RAM already (to make room) costs nothing more,
//! and is named whatever its file.
//!
//! Only where written bytes can be programmed again (NOR): there entries share a block. On
//! NAND each entry programs a page and so would the block: naming it would add a page to
//! the sync and save none.
//!
//! The replay claims the named sectors in its first pass, before small writes take space,
//! and maps each in its place among the small writes, in the order they ran: a small write
//! of an earlier entry to the same block lands before it and is covered by it, one of a
//! later entry lands on it.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use super::layout::op::{Op, OpKind};
use super::layout::Ino;
use super::Fs;
use crate::error::{Error, Result};
use crate::ftl::BlockDevice;
use crate::media::Segments;

/// The block the small writes `(offset, length)` make whole, and the bytes of it they
/// reach, in a file of `size` bytes and blocks of `bs`: `None` unless they all fall in one
/// block and cover it from its start to its end or the file's.
fn whole_block(writes: &[(u64, u64)], bs: u64, size: u64) -> Option<(u64, u64)> {
    let block = writes.first()?.0 / bs;
    let mut ranges = Vec::with_capacity(writes.len());
    for &(off, n) in writes {
        let end = off.checked_add(n)?;
        if n == 0 || off / bs != block || (end - 1) / bs != block {
            return None;
        }
        ranges.push((off - block * bs, end - block * bs));
    }
    let len = ranges.iter().map(|r| r.1).max()?;
    // The file goes on past what the writes reached in the block: bytes they did not make.
    if size.saturating_sub(block * bs).min(bs) != len {
        return None;
    }
    ranges.sort_unstable();
    let mut reach = 0;
    for (a, e) in ranges {
        if a > reach {
            return None;
        }
        reach = reach.max(e);
    }
    Some((block, len))
}

/// A block to name in the entry instead of a file's pending small writes.
struct Named {
    /// The file's block.
    block: u64,
    /// Where it was programmed.
    sector: u64,
    /// Bytes of it the writes reached.
    len: u64,
    /// The file's writes in the entry not yet met: the last of them becomes the name.
    writes: usize,
}

impl<D: Segments> Fs<D> {
    /// Before a journal entry: programs each block whose whole content the pending small
    /// writes of its file made, and replaces those writes in the entry with one
    /// [`OpKind::WriteBlock`] naming it, at the place and time of the last of them.
    pub(super) fn pack_writes(&mut self) -> Result<()> {
        if self.transactions() > 0 || !self.tree.store().ftl.can_patch() {
            return Ok(());
        }
        let bs = self.bs();
        let mut packed: BTreeMap<Ino, Named> = BTreeMap::new();
        for (ino, writes) in self.journal.writes_by_file() {
            let size = self.inode(ino)?.size;
            let Some((block, len)) = whole_block(&writes, bs, size) else {
                continue;
            };
            let Some((sector, false)) = self.mapping(ino, block, block + 1)?[0] else {
                continue;
            };
            // See the module documentation: a new file's half block at least, or a block
            // on flash already.
            let waits = self.tree.store().wb.get(sector).is_some();
            if waits && (len * 2 < bs || !self.journal.creates(ino)) {
                continue;
            }
            self.tree.store_mut().write_back(sector)?;
            let writes = writes.len();
            packed.insert(
                ino,
                Named {
                    block,
                    sector,
                    len,
                    writes,
                },
            );
        }
        if packed.is_empty() {
            return Ok(());
        }
        // The blocks are durable before the entry that names them.
        self.tree.store_mut().ftl.flush()?;
        let pending = self.journal.take_pending();
        let mut out = Vec::with_capacity(pending.len());
        for op in pending {
            let named = packed.get_mut(&op.ino);
            let Some(n) = named.filter(|_| matches!(op.kind, OpKind::Write { .. })) else {
                out.push(op);
                continue;
            };
            n.writes -= 1;
            if n.writes == 0 {
                let kind = OpKind::WriteBlock {
                    block: n.block,
                    sector: n.sector,
                    len: n.len,
                };
                out.push(Op { kind, ..op });
            }
        }
        self.journal.put_back(out);
        Ok(())
    }

    /// The replay's first pass over an [`OpKind::WriteBlock`]: takes its sector before any
    /// small write takes space. A sector the checkpoint already holds can only be the
    /// file's own block allocated unwritten, which the write filled in place.
    pub(super) fn claim_written_block(&mut self, ino: Ino, block: u64, sector: u64) -> Result<()> {
        let bad = Error::Corrupt("a journal entry names a data block that does not apply");
        if sector >= self.sb.sectors || block >= self.max_file_size() / self.bs() {
            return Err(bad);
        }
        if self.tree.store_mut().space.claim(sector) {
            return Ok(());
        }
        match self.mapping(ino, block, block + 1)?[0] {
            Some((s, true)) if s == sector => Ok(()),
            _ => Err(bad),
        }
    }

    /// Replays an [`OpKind::WriteBlock`] (its sector claimed): maps the file's `block` to
    /// `sector`, which holds its content, releasing what the block held, and makes the
    /// file at least `len` bytes into the block, as the small writes it stands for did.
    pub(super) fn replay_written_block(
        &mut self,
        ino: Ino,
        block: u64,
        sector: u64,
        len: u64,
    ) -> Result<()> {
        let mut inode = self.regular(ino)?;
        self.refuse_records(ino)?;
        let bs = self.bs();
        if len == 0 || len > bs {
            return Err(Error::Corrupt(
                "a journal entry names a data block that does not apply",
            ));
        }
        let end = block * bs + len;
        if end > inode.size && inode.size / bs < block {
            self.clear_past_end(ino, &mut inode)?;
        }
        self.map_written_block(ino, &mut inode, block, sector)?;
        let now = self.now();
        inode.size = inode.size.max(end);
        inode.mtime = now;
        inode.ctime = now;
        self.put_inode(ino, &inode)?;
        self.counts.wrote(len);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::whole_block;

    #[test]
    fn writes_make_a_block_whole_only_from_its_start_to_its_end_or_the_file_s() {
        // One write of a new 256-byte file.
        assert_eq!(whole_block(&[(0, 256)], 512, 256), Some((0, 256)));
        // Pieces in any order, overlapping, up to the block's end of a longer file.
        let w = [(1024 + 300, 212), (1024, 100), (1024 + 50, 260)];
        assert_eq!(whole_block(&w, 512, 4096), Some((2, 512)));
        // A gap, a file going on past the writes, two blocks, a write across an edge.
        assert_eq!(whole_block(&[(0, 100), (101, 155)], 512, 256), None);
        assert_eq!(whole_block(&[(0, 256)], 512, 300), None);
        assert_eq!(whole_block(&[(0, 256), (512, 10)], 512, 522), None);
        assert_eq!(whole_block(&[(400, 200)], 512, 600), None);
        // Nothing written, or an empty write.
        assert_eq!(whole_block(&[], 512, 0), None);
        assert_eq!(whole_block(&[(0, 0)], 512, 0), None);
        // An append that starts the file's next block makes it whole.
        assert_eq!(whole_block(&[(512, 64)], 512, 576), Some((1, 64)));
        assert_eq!(whole_block(&[(u64::MAX, 2)], 512, u64::MAX), None);
    }
}
