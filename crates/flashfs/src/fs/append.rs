//! Append blocks: records written once, in place, at the end of a block of their file.
//!
//! A record added by a journaled commit is first its own index items and its bytes in the
//! journal entry; at the next checkpoint the items go to an index leaf with a 19-byte key,
//! so a small record is written twice and more. Files of fixed-size records that divide
//! the block avoid that by filling data blocks (record.rs). For the others — records of any
//! length, or of a size that does not divide the block, such as a phone's call log — a
//! journal commit on reprogrammable NOR instead programs each added record, framed by its
//! length, after the last one in the file's **append block**, in place, and the entry names
//! the append in a few bytes. An append block is an ordinary data block, mapped by an
//! extent whose first block number is the number of the first record it holds; it holds
//! the records from there up to the next append block's first record (or the file's end),
//! one frame each. A record with items is held by them; one without, by its frame.
//!
//! A block is appended to only by the mount that started it and only while its frames are
//! exactly the records from its first one: after a mount, a power cut or a program that did
//! not take, bytes past its last counted frame may be torn, and the next record starts a
//! new block. A block is freed by the operation that removes its last record. SPEC.md
//! §8.4a.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use super::journal::{Op, OpKind, MAX_ALIGN};
use super::layout::{item, key, key_u64, split_key, suffix_u64, Extent, Ino, RecordHead};
use super::Fs;
use crate::error::{Error, Result};
use crate::ftl::BlockDevice;
use crate::media::Segments;

/// First byte of an append block.
const MAGIC: u8 = 0xA5;
/// Bytes of a frame's length field.
const LEN_BYTES: usize = 2;
/// Files whose append block a mount keeps open at once: one position each, in RAM.
const MAX_TAILS: usize = 32;

/// Where the next record of a file may go: the end of the frames of its newest append block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Tail {
    sector: u64,
    /// Number of the record the next frame would hold.
    next: u64,
    /// Byte offset of the next frame.
    offset: usize,
}

/// The append blocks open for appending in this mount, by file.
#[derive(Debug, Default)]
pub(super) struct Tails(BTreeMap<Ino, Tail>);

impl Tails {
    /// Forgets `ino`'s block: its next record starts a new one.
    pub fn close(&mut self, ino: Ino) {
        self.0.remove(&ino);
    }

    fn open(&mut self, ino: Ino, tail: Tail) {
        if self.0.len() >= MAX_TAILS && !self.0.contains_key(&ino) {
            self.0.pop_first();
        }
        self.0.insert(ino, tail);
    }

    /// Forgets every block of `sector` (freed).
    fn freed(&mut self, sector: u64) {
        self.0.retain(|_, t| t.sector != sector);
    }
}

/// Bytes of an append block's header: the magic and log2 of the alignment, padded to it.
fn header_len(align: usize) -> usize {
    align.max(2)
}

/// The frame of a record: length (u16, little-endian) and bytes, padded with erased bytes
/// to `align`.
fn frame(data: &[u8], align: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity((LEN_BYTES + data.len()).next_multiple_of(align));
    f.extend_from_slice(&(data.len() as u16).to_le_bytes());
    f.extend_from_slice(data);
    f.resize(f.len().next_multiple_of(align), 0xFF);
    f
}

/// The alignment an append block's header names; `None` if `block` is not one.
fn block_align(block: &[u8]) -> Option<usize> {
    match block {
        [MAGIC, shift, ..] => 1usize
            .checked_shl(u32::from(*shift))
            .filter(|&a| a <= MAX_ALIGN),
        _ => None,
    }
}

/// The bytes of the frames of an append block, from its first, as far as they parse: `None`
/// if the block is not an append block.
pub(super) fn frames(block: &[u8]) -> Option<impl Iterator<Item = &[u8]>> {
    let align = block_align(block)?;
    let mut at = header_len(align);
    Some(core::iter::from_fn(move || {
        let l = block.get(at..at + LEN_BYTES)?;
        let len = usize::from(u16::from_le_bytes([l[0], l[1]]));
        let end = at + LEN_BYTES + len;
        let data = block.get(at + LEN_BYTES..end)?;
        at = end.next_multiple_of(align);
        Some(data)
    }))
}

impl<D: Segments> Fs<D> {
    /// Whether `head`'s file may hold records in append blocks: its records do not fill
    /// data blocks, and the medium programs written bytes again.
    fn appends(&self, head: &RecordHead) -> bool {
        self.per_block(head).is_none() && self.tree.store().ftl.can_patch()
    }

    /// The append block that holds record `n` of `ino` if it has no items: (its first
    /// record, sector, the next block's first record or `u64::MAX`).
    pub(super) fn append_block_of(&mut self, ino: Ino, n: u64) -> Result<Option<(u64, u64, u64)>> {
        let Some((k, v)) = self.tree.seek_le(&key_u64(ino, item::EXTENT, n))? else {
            return Ok(None);
        };
        let (i, ty, rest) = split_key(&k)?;
        if i != ino || ty != item::EXTENT {
            return Ok(None);
        }
        let first = suffix_u64(rest)?;
        let e = Extent::decode(&v)?;
        let after = match first.checked_add(1) {
            Some(f) => self
                .tree
                .range(key_u64(ino, item::EXTENT, f)..key(ino, item::EXTENT + 1))
                .next()
                .transpose()?
                .map(|(k, _)| split_key(&k).and_then(|(_, _, r)| suffix_u64(r)))
                .transpose()?,
            None => None,
        };
        Ok(Some((first, e.start, after.unwrap_or(u64::MAX))))
    }

    /// Records `n0..n1` of a file whose records may be in append blocks: `items` (the
    /// records that have items, in order) and the others from their frames, each block read
    /// once.
    pub(super) fn records_appended(
        &mut self,
        ino: Ino,
        n0: u64,
        n1: u64,
        items: Vec<(u64, Vec<u8>)>,
    ) -> Result<Vec<(u64, Vec<u8>)>> {
        let missing = || Error::Corrupt("a record of a record file is missing");
        let mut items = items.into_iter().peekable();
        // The block read last: its first record, the next block's, and its frames' bytes.
        let mut block: Option<(u64, u64, Vec<Vec<u8>>)> = None;
        let mut out = Vec::new();
        for n in n0..n1 {
            if let Some(item) = items.next_if(|(m, _)| *m == n) {
                out.push(item);
                continue;
            }
            if !block
                .as_ref()
                .is_some_and(|(a, z, _)| (*a..*z).contains(&n))
            {
                let (first, sector, end) = self.append_block_of(ino, n)?.ok_or_else(missing)?;
                let mut data = vec![0u8; self.bs() as usize];
                self.tree.store_mut().read(sector, &mut data)?;
                let held = usize::try_from(end.min(n1) - first).unwrap_or(usize::MAX);
                let f = frames(&data).ok_or_else(missing)?;
                block = Some((first, end, f.take(held).map(<[u8]>::to_vec).collect()));
            }
            let (first, _, f) = block.as_ref().ok_or_else(missing)?;
            let k = usize::try_from(n - first).map_err(|_| missing())?;
            let data = f.get(k).ok_or_else(missing)?;
            out.push((n, data.clone()));
        }
        Ok(out)
    }

    /// For `fsck`: the (record, bytes) of the frames that the append blocks `extents` (a
    /// file's, by first record) hold for records of `head`, by record; the blocks that are
    /// not append blocks go to `problems`. The work is bounded by the blocks, not by the
    /// head's numbers.
    pub(super) fn framed_records(
        &mut self,
        head: &RecordHead,
        extents: &[(u64, Extent)],
        problems: &mut Vec<String>,
    ) -> Result<Vec<(u64, usize)>> {
        let mut framed = Vec::new();
        let mut block = vec![0u8; self.bs() as usize];
        for (i, &(first, e)) in extents.iter().enumerate() {
            let end = extents.get(i + 1).map_or(u64::MAX, |x| x.0);
            if e.len == 0 || e.unwritten || e.start >= self.sb.sectors {
                continue;
            }
            self.tree.store_mut().read(e.start, &mut block)?;
            let Some(f) = frames(&block) else {
                problems.push(format!(
                    "append block at record {first} is not an append block"
                ));
                continue;
            };
            let held = end.min(head.next).saturating_sub(first);
            for (k, d) in f
                .take(usize::try_from(held).unwrap_or(usize::MAX))
                .enumerate()
            {
                let Some(n) = first.checked_add(k as u64) else {
                    break;
                };
                if n >= head.first {
                    framed.push((n, d.len()));
                }
            }
        }
        Ok(framed)
    }

    /// After record `n` went from a file whose records may be in append blocks: frees the
    /// append block it was counted in if no record of `head` (as it is now) is left there.
    /// A block open for appending needs nothing more: it takes only record `next` of its
    /// tail, so a number given back by a removal from the end never lands on a stale frame.
    pub(super) fn release_append_block(
        &mut self,
        ino: Ino,
        inode: &mut super::layout::Inode,
        head: &RecordHead,
        n: u64,
    ) -> Result<()> {
        let Some((first, _, end)) = self.append_block_of(ino, n)? else {
            return Ok(());
        };
        if head.first.max(first) < head.next.min(end) {
            return Ok(());
        }
        let freed = self.unmap(ino, first, first.saturating_add(1))?;
        for &(sector, _) in &freed {
            self.tails.freed(sector);
        }
        self.release_runs(inode, &freed);
        Ok(())
    }

    /// Before a journal entry is written: in every file of records that may be appended
    /// whose pending operations are adds (and removals of the oldest), programs each added
    /// record into the file's append block (or a new one) and replaces its add in the entry
    /// with an [`OpKind::AddAppended`], which names the record's length (and the new block)
    /// instead of holding its bytes. A record that cannot be appended stays an add.
    pub(super) fn append_pending(&mut self) -> Result<()> {
        if self.transactions() > 0 || !self.tree.store().ftl.can_patch() {
            return Ok(());
        }
        // The adds of a file are its records `next - k..next` unless a removal from the end
        // gave a number back, and their bytes are the records' unless an update changed
        // them: files with either are left as they are. Removals from the front (a phone
        // deleting its oldest message to make room for the new one) change neither.
        let adds = self
            .journal
            .adds_by_file(|k| matches!(k, OpKind::RemoveFirst | OpKind::Atime));
        // Per file: the number of its next pending add, and its head.
        let mut next: BTreeMap<Ino, (u64, RecordHead)> = BTreeMap::new();
        for (ino, k) in adds {
            match self.record_head(ino)? {
                Some(head) if self.appends(&head) => {
                    next.insert(ino, (head.next.saturating_sub(k), head));
                }
                _ => {}
            }
        }
        if next.is_empty() {
            return Ok(());
        }
        let pending = core::mem::take(&mut self.journal.pending);
        let mut out = Vec::with_capacity(pending.len());
        let mut result = Ok(());
        for op in pending {
            let OpKind::Add(data) = &op.kind else {
                out.push(op);
                continue;
            };
            let Some((n, head)) = next.get_mut(&op.ino).filter(|_| result.is_ok()) else {
                out.push(op);
                continue;
            };
            *n += 1;
            let n = *n - 1;
            match self.append_record(op.ino, head, n, data) {
                Ok(Some(sector)) => {
                    let len = data.len() as u64;
                    out.push(Op {
                        kind: OpKind::AddAppended { len, sector },
                        ..op
                    })
                }
                Ok(None) => out.push(op),
                Err(e) => {
                    result = Err(e);
                    out.push(op);
                }
            }
        }
        self.journal.pending = out;
        result?;
        // The frames are durable before the entry that counts them.
        self.tree.store_mut().ftl.flush()
    }

    /// Appends record `n` of `ino` (just added, as items) to its append block or a new one
    /// and removes its items: `Some(None)` if it went after the frames of the open block,
    /// `Some(Some(sector))` if it starts the new block at `sector`, `None` if it stays items
    /// (already dropped by a cyclic file, too large for a block, beyond the numbers a block
    /// may be mapped at, no free block beyond the index's reserve, or a program that did not
    /// take).
    fn append_record(
        &mut self,
        ino: Ino,
        head: &RecordHead,
        n: u64,
        data: &[u8],
    ) -> Result<Option<Option<u64>>> {
        let align = self.patch_align();
        let f = frame(data, align);
        let bs = self.bs() as usize;
        if n < head.first
            || n >= head.next
            || n >= self.max_file_size() / self.bs()
            || header_len(align) + f.len() > bs
        {
            return Ok(None);
        }
        let tail = self.tails.0.get(&ino).copied();
        let placed = match tail {
            Some(t) if t.next == n && t.offset + f.len() <= bs => {
                match self
                    .tree
                    .store_mut()
                    .ftl
                    .patch_sector(t.sector, t.offset, &f)
                {
                    Ok(()) => {}
                    Err(Error::Flash(flash::FlashError::ProgramFailed { .. })) => {
                        self.tails.close(ino);
                        return Ok(None);
                    }
                    Err(e) => {
                        self.tails.close(ino);
                        return Err(e);
                    }
                }
                self.tails.open(
                    ino,
                    Tail {
                        next: n + 1,
                        offset: t.offset + f.len(),
                        ..t
                    },
                );
                None
            }
            _ => {
                if self.tree.store().space.free() <= self.reserve {
                    return Ok(None);
                }
                let Some((sector, _)) = self.tree.store_mut().space.alloc(1) else {
                    return Ok(None);
                };
                let mut block = vec![0xFFu8; bs];
                block[0] = MAGIC;
                block[1] = align.trailing_zeros() as u8;
                let at = header_len(align);
                block[at..at + f.len()].copy_from_slice(&f);
                // Mapped as it is written: later frames patch it before the commit's flush.
                if let Err(e) = self.tree.store_mut().write_data(sector, &block) {
                    self.undo_alloc(&[(sector, 1)]);
                    return Err(e);
                }
                self.map_append_block(ino, n, sector)?;
                self.tails.open(
                    ino,
                    Tail {
                        sector,
                        next: n + 1,
                        offset: at + f.len(),
                    },
                );
                Some(sector)
            }
        };
        for (k, _) in self.record_items(ino, n)? {
            self.tree.remove(&k)?;
        }
        Ok(Some(placed))
    }

    /// Maps the append block at `sector` as the one whose first record is `n`. The block
    /// before it then ends at `n`: if every record it held has gone (a cyclic file wraps
    /// past a block that seemed to hold its newest records), it is freed.
    fn map_append_block(&mut self, ino: Ino, n: u64, sector: u64) -> Result<()> {
        let mut inode = self.inode(ino)?;
        self.put_extent(
            ino,
            n,
            Extent {
                start: sector,
                len: 1,
                unwritten: false,
            },
        )?;
        inode.blocks += 1;
        if let (Some(before), Some(head)) = (n.checked_sub(1), self.record_head(ino)?) {
            self.release_append_block(ino, &mut inode, &head, before)?;
        }
        self.put_inode(ino, &inode)
    }

    /// Replays an [`OpKind::AddAppended`]: the add of a record of `len` bytes, held by its
    /// frame — in the block at `sector`, which it starts, or else after the frames of the
    /// block holding the record before it.
    pub(super) fn replay_appended(
        &mut self,
        ino: Ino,
        len: u64,
        sector: Option<u64>,
    ) -> Result<()> {
        let bad = || Error::Corrupt("a journal entry names an append that does not apply");
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l <= super::record::RECORD_MAX)
            .ok_or_else(bad)?;
        let n = self.add(ino, &vec![0u8; len])?;
        for (k, _) in self.record_items(ino, n)? {
            self.tree.remove(&k)?;
        }
        match sector {
            Some(s) => {
                if n >= self.max_file_size() / self.bs()
                    || s >= self.sb.sectors
                    || !self.tree.store_mut().space.claim(s)
                {
                    return Err(bad());
                }
                self.map_append_block(ino, n, s)
            }
            None => match self.append_block_of(ino, n)? {
                Some(_) => Ok(()),
                None => Err(bad()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(align: usize, records: &[&[u8]]) -> Vec<u8> {
        let mut b = vec![0xFFu8; 512];
        b[0] = MAGIC;
        b[1] = align.trailing_zeros() as u8;
        let mut at = header_len(align);
        for r in records {
            let f = frame(r, align);
            b[at..at + f.len()].copy_from_slice(&f);
            at += f.len();
        }
        b
    }

    #[test]
    fn frames_pad_to_the_word_and_read_back_in_order() {
        assert_eq!(frame(&[7; 15], 2).len(), 18);
        assert_eq!(frame(&[7; 15], 4).len(), 20);
        assert_eq!(frame(&[], 1).len(), 2);
        for align in [1, 2, 4, 8] {
            let recs: [&[u8]; 3] = [b"call", b"", b"a longer message"];
            let b = block(align, &recs);
            let got: Vec<&[u8]> = frames(&b).unwrap().take(3).collect();
            assert_eq!(got, recs, "align {align}");
        }
    }

    #[test]
    fn a_block_that_is_not_an_append_block_has_no_frames() {
        assert!(frames(&[0u8; 512]).is_none());
        let mut b = block(2, &[b"x"]);
        b[1] = 4; // an alignment of 16
        assert!(frames(&b).is_none());
        // A length running past the block ends the frames instead of panicking.
        let mut b = block(2, &[b"x"]);
        b[2..4].copy_from_slice(&600u16.to_le_bytes());
        assert_eq!(frames(&b).unwrap().count(), 0);
    }
}
