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
//!
//! Most adds need no entry at all. Once an entry of the epoch has framed a record in a
//! block, the replay comes to that block, so the next frames there can carry their own
//! commit: a frame is programmed with its **open bit** set and the bit is then cleared,
//! which a torn program cannot fake. A phone that commits each 15-byte call then writes
//! its frame and one word, instead of its frame and a 10-byte entry. Such records must not
//! overtake what came before them in the same commit, and the entries after them on their
//! file must replay after them: only a commit's leading adds commit themselves, and the
//! file's next entry says how many did ([`OpKind::Framed`]) unless it frames a record
//! itself, whose replay then takes them first. SPEC.md §8.5b.

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

/// First byte of an append block whose frames may commit themselves (version 6).
const MAGIC: u8 = 0xA6;
/// First byte of an append block of version 5, whose frames only journal entries commit.
const MAGIC_V5: u8 = 0xA5;
/// Bytes of a frame's length field.
const LEN_BYTES: usize = 2;
/// Bit of the length field that a frame's own commit clears (version 6 blocks).
const OPEN_BIT: u16 = 0x8000;
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
    /// Whether a mount replaying this epoch's journal would come to this block's end: an
    /// entry of the epoch framed a record here. Only then may a frame commit itself.
    replayable: bool,
}

/// The append blocks open for appending in this mount, by file, and the frames that
/// committed themselves since their file's last journaled operation.
#[derive(Debug, Default)]
pub(super) struct Tails {
    open: BTreeMap<Ino, Tail>,
    /// Per file, frames that committed themselves and that no entry counts yet: an entry's
    /// next operation on the file must say so first ([`OpKind::Framed`]), or the replay
    /// would apply it before them.
    owed: BTreeMap<Ino, u64>,
}

impl Tails {
    /// Forgets `ino`'s block: its next record starts a new one.
    pub fn close(&mut self, ino: Ino) {
        self.open.remove(&ino);
    }

    fn open(&mut self, ino: Ino, tail: Tail) {
        if self.open.len() >= MAX_TAILS && !self.open.contains_key(&ino) {
            self.open.pop_first();
        }
        self.open.insert(ino, tail);
    }

    /// Forgets every block of `sector` (freed).
    fn freed(&mut self, sector: u64) {
        self.open.retain(|_, t| t.sector != sector);
    }

    /// A checkpoint started a new epoch: its journal names no block yet, and owes nothing.
    pub fn checkpointed(&mut self) {
        self.open.values_mut().for_each(|t| t.replayable = false);
        self.owed.clear();
    }

    /// The working version was reloaded: no position in RAM is known to hold.
    pub fn clear(&mut self) {
        self.open.clear();
        self.owed.clear();
    }

    /// An entry is durable after which the replay comes to the end of `ino`'s block (it
    /// framed a record there) or not (it added one otherwise or removed one from the end;
    /// the replay then forgets the block, which may hold a stale frame).
    pub fn set_replayable(&mut self, ino: Ino, replayable: bool) {
        if let Some(t) = self.open.get_mut(&ino) {
            t.replayable = replayable;
        }
    }

    /// Takes the count of `ino`'s frames that committed themselves since its last
    /// journaled operation.
    fn take_owed(&mut self, ino: Ino) -> u64 {
        self.owed.remove(&ino).unwrap_or(0)
    }

    /// Files that are owed a count but have no open block any more (it was closed, freed or
    /// let go): nothing more commits itself there, so their count may be written now.
    fn take_orphans(&mut self) -> Vec<(Ino, u64)> {
        let open = &self.open;
        let orphans: Vec<(Ino, u64)> = self
            .owed
            .iter()
            .filter(|(ino, _)| !open.contains_key(ino))
            .map(|(&i, &c)| (i, c))
            .collect();
        for (ino, _) in &orphans {
            self.owed.remove(ino);
        }
        orphans
    }
}

/// Where [`Fs::append_record`] put a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placed {
    /// After the frames of the open block, committed by its own frame: no entry needs it.
    Committed,
    /// After the frames of the open block, for the entry to commit.
    After,
    /// First in a new block at this sector, for the entry to commit.
    New(u64),
    /// Nowhere: it stays items.
    Items,
}

/// The entry's note that `count` records of `ino` committed themselves by their frames.
fn framed(ino: Ino, time: super::layout::Timespec, count: u64) -> Op {
    Op {
        ino,
        time,
        kind: OpKind::Framed { count },
    }
}

/// Bytes of an append block's header: the magic and log2 of the alignment, padded to it.
fn header_len(align: usize) -> usize {
    align.max(2)
}

/// The frame of a record: length (u16, little-endian, with [`OPEN_BIT`] set) and bytes,
/// padded with erased bytes to `align`.
fn frame(data: &[u8], align: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity((LEN_BYTES + data.len()).next_multiple_of(align));
    f.extend_from_slice(&(data.len() as u16 | OPEN_BIT).to_le_bytes());
    f.extend_from_slice(data);
    f.resize(f.len().next_multiple_of(align), 0xFF);
    f
}

/// The alignment an append block's header names and whether its frames may commit
/// themselves; `None` if `block` is not an append block.
fn block_kind(block: &[u8]) -> Option<(usize, bool)> {
    match block {
        [magic @ (MAGIC | MAGIC_V5), shift, ..] => 1usize
            .checked_shl(u32::from(*shift))
            .filter(|&a| a <= MAX_ALIGN)
            .map(|a| (a, *magic == MAGIC)),
        _ => None,
    }
}

/// A frame as read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Frame<'a> {
    /// The record's bytes.
    pub data: &'a [u8],
    /// Whether it committed itself (its open bit is clear, in a version 6 block).
    pub committed: bool,
}

/// The frames of an append block, from its first, as far as they parse: `None` if the
/// block is not an append block.
pub(super) fn frames(block: &[u8]) -> Option<impl Iterator<Item = Frame<'_>>> {
    let (align, commits) = block_kind(block)?;
    let mut at = header_len(align);
    Some(core::iter::from_fn(move || {
        let l = block.get(at..at + LEN_BYTES)?;
        let word = u16::from_le_bytes([l[0], l[1]]);
        let len = usize::from(word & !OPEN_BIT);
        let end = at + LEN_BYTES + len;
        let data = block.get(at + LEN_BYTES..end)?;
        at = end.next_multiple_of(align);
        Some(Frame {
            data,
            committed: commits && word & OPEN_BIT == 0,
        })
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
                block = Some((first, end, f.take(held).map(|f| f.data.to_vec()).collect()));
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
                    framed.push((n, d.data.len()));
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
    /// record into the file's append block (or a new one). An add at the front of the
    /// entry whose frame goes after the last of a block the epoch's journal leads the
    /// replay to commits itself: its frame's open bit is cleared once its bytes are in,
    /// and the entry drops it. Any other is replaced in the entry with an
    /// [`OpKind::AddAppended`], which names the record's length (and the new block) instead
    /// of holding its bytes; a record that cannot be appended stays an add. The first
    /// operation the entry holds on a file that has records committed by their frames is
    /// preceded by an [`OpKind::Framed`] counting them (SPEC.md §8.5b).
    pub(super) fn append_pending(&mut self) -> Result<()> {
        // With a transaction open, adds stay items (their records may yet be undone); the
        // counts owed still go before any operation on their files.
        let appending = self.transactions() == 0 && self.tree.store().ftl.can_patch();
        // The adds of a file are its records `next - k..next` unless a removal from the end
        // gave a number back, and their bytes are the records' unless an update changed
        // them: files with either are left as they are. Removals from the front (a phone
        // deleting its oldest message to make room for the new one) change neither.
        let adds = self
            .journal
            .adds_by_file(|k| matches!(k, OpKind::RemoveFirst | OpKind::Atime));
        // Per file: the number of its next pending add, and its head.
        let mut next: BTreeMap<Ino, (u64, RecordHead)> = BTreeMap::new();
        for (ino, k) in adds.into_iter().filter(|_| appending) {
            match self.record_head(ino)? {
                Some(head) if self.appends(&head) => {
                    next.insert(ino, (head.next.saturating_sub(k), head));
                }
                _ => {}
            }
        }
        let pending = core::mem::take(&mut self.journal.pending);
        let mut out = Vec::with_capacity(pending.len());
        // Whether `out` holds an operation yet: a frame after one must not commit itself,
        // or a power cut before the entry would keep it without what came before it.
        let mut entered = false;
        let mut result = Ok(());
        for op in pending {
            let (ino, time) = (op.ino, op.time);
            let target = match &op.kind {
                OpKind::Add(data) if result.is_ok() => next.get_mut(&ino).map(|t| (t, data)),
                _ => None,
            };
            let placed = match target {
                Some(((n, head), data)) => {
                    *n += 1;
                    let n = *n - 1;
                    match self.append_record(ino, head, n, data, !entered) {
                        Ok(p) => p,
                        Err(e) => {
                            result = Err(e);
                            Placed::Items
                        }
                    }
                }
                None => Placed::Items,
            };
            for (orphan, count) in self.tails.take_orphans() {
                out.push(framed(orphan, time, count));
                entered = true;
            }
            if placed == Placed::Committed {
                continue;
            }
            // A framed add's replay takes the records that committed themselves before it
            // by itself: their frames come before its own, which is not committed by
            // itself, and nothing is framed in that block after a new one starts.
            let owed = self.tails.take_owed(ino);
            let sector = match placed {
                Placed::After => None,
                Placed::New(s) => Some(s),
                _ => {
                    if owed > 0 {
                        out.push(framed(ino, time, owed));
                    }
                    out.push(op);
                    entered = true;
                    continue;
                }
            };
            let len = match &op.kind {
                OpKind::Add(data) => data.len() as u64,
                _ => 0,
            };
            out.push(Op {
                kind: OpKind::AddAppended { len, sector },
                ..op
            });
            entered = true;
        }
        self.journal.pending = out;
        result?;
        // The frames are durable before the entry that counts them.
        self.tree.store_mut().ftl.flush()
    }

    /// Appends record `n` of `ino` (just added, as items) to its append block or a new one
    /// and removes its items, committing it by its frame if `commit` allows and the block
    /// is one the replay comes to. It stays items (already dropped by a cyclic file, too
    /// large for a block, beyond the numbers a block may be mapped at, no free block beyond
    /// the index's reserve, or a program that did not take) otherwise.
    fn append_record(
        &mut self,
        ino: Ino,
        head: &RecordHead,
        n: u64,
        data: &[u8],
        commit: bool,
    ) -> Result<Placed> {
        let align = self.patch_align();
        let f = frame(data, align);
        let bs = self.bs() as usize;
        if n < head.first
            || n >= head.next
            || n >= self.max_file_size() / self.bs()
            || header_len(align) + f.len() > bs
        {
            return Ok(Placed::Items);
        }
        let tail = self.tails.open.get(&ino).copied();
        let placed = match tail {
            Some(t) if t.next == n && t.offset + f.len() <= bs => {
                let commit = commit && t.replayable;
                // Its bytes first, then the bit that says they are all there.
                let mut programs = vec![(t.offset, f.clone())];
                if commit {
                    let mut word = f[..align.max(LEN_BYTES)].to_vec();
                    word[1] &= !(OPEN_BIT >> 8) as u8;
                    programs.push((t.offset, word));
                }
                for (at, bytes) in programs {
                    let r = self.tree.store_mut().ftl.patch_sector(t.sector, at, &bytes);
                    match r {
                        Ok(()) => {}
                        Err(Error::Flash(flash::FlashError::ProgramFailed { .. })) => {
                            self.tails.close(ino);
                            return Ok(Placed::Items);
                        }
                        Err(e) => {
                            self.tails.close(ino);
                            return Err(e);
                        }
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
                if commit {
                    *self.tails.owed.entry(ino).or_default() += 1;
                    Placed::Committed
                } else {
                    Placed::After
                }
            }
            _ => {
                if self.tree.store().space.free() <= self.reserve {
                    return Ok(Placed::Items);
                }
                let Some((sector, _)) = self.tree.store_mut().space.alloc(1) else {
                    return Ok(Placed::Items);
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
                        replayable: false,
                    },
                );
                Placed::New(sector)
            }
        };
        for (k, _) in self.record_items(ino, n)? {
            self.tree.remove(&k)?;
        }
        Ok(placed)
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

/// Where the replay has come to in a file's newest append block: frames after the records
/// it holds so far may have committed themselves.
#[derive(Debug, Clone, Copy)]
pub(super) struct ReplayTail {
    /// The block's first record.
    first: u64,
    sector: u64,
    /// Time of the file's last operation replayed: the time of records found after it.
    pub(super) time: super::layout::Timespec,
}

impl<D: Segments> Fs<D> {
    /// The block holding `ino`'s newest record, if it is an append block, as of an
    /// operation at `time` just replayed.
    pub(super) fn replay_tail(
        &mut self,
        ino: Ino,
        time: super::layout::Timespec,
    ) -> Result<Option<ReplayTail>> {
        let Some(last) = self.record_head(ino)?.and_then(|h| h.next.checked_sub(1)) else {
            return Ok(None);
        };
        Ok(self
            .append_block_of(ino, last)?
            .map(|(first, sector, _)| ReplayTail {
                first,
                sector,
                time,
            }))
    }

    /// Replays the records of `ino` that committed themselves by their frames after those
    /// the replay has counted in `tail`'s block: exactly `count` (an [`OpKind::Framed`]; a
    /// frame missing is damage), or, at the end of the replay, as many as there are.
    /// Returns the records added.
    pub(super) fn replay_framed(
        &mut self,
        ino: Ino,
        tail: ReplayTail,
        count: Option<u64>,
    ) -> Result<u64> {
        let bad = || Error::Corrupt("a journal entry counts frames that are not there");
        // The block must still hold the file's newest record, and the frames to read are
        // those after it.
        let head = self.record_head(ino)?;
        let newest = head.and_then(|h| h.next.checked_sub(1).map(|last| (h.next, last)));
        let holder = match newest {
            Some((_, last)) => self.append_block_of(ino, last)?,
            None => None,
        };
        let skip = match (newest, holder) {
            (Some((next, _)), Some((first, sector, _)))
                if sector == tail.sector && first == tail.first =>
            {
                usize::try_from(next.checked_sub(first).ok_or_else(bad)?).map_err(|_| bad())?
            }
            _ => return count.map_or(Ok(0), |_| Err(bad())),
        };
        let mut block = vec![0u8; self.bs() as usize];
        self.tree.store_mut().read(tail.sector, &mut block)?;
        let lens: Vec<u64> = frames(&block)
            .ok_or_else(bad)?
            .skip(skip)
            .take_while(|f| f.committed)
            .take(count.map_or(usize::MAX, |c| usize::try_from(c).unwrap_or(usize::MAX)))
            .map(|f| f.data.len() as u64)
            .collect();
        if count.is_some_and(|c| c != lens.len() as u64) {
            return Err(bad());
        }
        let added = lens.len() as u64;
        let before = self.op_time.replace(tail.time);
        let result = lens
            .into_iter()
            .try_for_each(|len| self.replay_appended(ino, len, None));
        self.op_time = before;
        result.map(|()| added)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An append block of `align` holding `records`, each committed by itself if `true`.
    fn block(align: usize, records: &[(&[u8], bool)]) -> Vec<u8> {
        let mut b = vec![0xFFu8; 512];
        b[0] = MAGIC;
        b[1] = align.trailing_zeros() as u8;
        let mut at = header_len(align);
        for &(r, committed) in records {
            let mut f = frame(r, align);
            if committed {
                f[1] &= !(OPEN_BIT >> 8) as u8;
            }
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
            let recs: [(&[u8], bool); 3] =
                [(b"call", false), (b"", true), (b"a longer message", true)];
            let b = block(align, &recs);
            let got: Vec<(&[u8], bool)> = frames(&b)
                .unwrap()
                .map(|f| (f.data, f.committed))
                .take(3)
                .collect();
            assert_eq!(got, recs, "align {align}");
            // The erased bytes after them end the frames.
            assert_eq!(frames(&b).unwrap().count(), 3, "align {align}");
        }
    }

    #[test]
    fn only_version_6_frames_commit_themselves() {
        let mut b = block(2, &[(b"x", true), (b"y", false)]);
        b[0] = MAGIC_V5;
        let got: Vec<Frame> = frames(&b).unwrap().collect();
        assert_eq!(got.len(), 2);
        assert!(got.iter().all(|f| !f.committed));
        assert_eq!((got[0].data, got[1].data), (&b"x"[..], &b"y"[..]));
    }

    #[test]
    fn a_block_that_is_not_an_append_block_has_no_frames() {
        assert!(frames(&[0u8; 512]).is_none());
        let mut b = block(2, &[(b"x", true)]);
        b[1] = 4; // an alignment of 16
        assert!(frames(&b).is_none());
        // A length running past the block ends the frames instead of panicking.
        let mut b = block(2, &[(b"x", true)]);
        b[2..4].copy_from_slice(&600u16.to_le_bytes());
        assert_eq!(frames(&b).unwrap().count(), 0);
    }
}
