//! Append blocks: records written once, in place, at the end of a block of their file.
//!
//! A record added by a journaled commit is first its own index items and its bytes in the
//! journal entry; at the next checkpoint the items go to an index leaf with a 19-byte key,
//! so a small record is written twice and more. Files of fixed-size records that divide
//! the block avoid that by filling data blocks (record.rs). For the others — records of any
//! length, or of a size that does not divide the block, such as a phone's call log — a
//! journal commit on reprogrammable NOR instead programs each added record as a **frame**
//! after the last one in the file's **append block**, in place, and the entry names the
//! append in a few bytes. An append block is an ordinary data block, mapped by an extent
//! whose first block number is the number of the first record whose frame starts in it; it
//! holds the records from there up to the next append block's first record (or the file's
//! end). A frame that does not fit the room left goes on at the front of the next block,
//! whose extent says so ("continued"): both blocks then hold that record. A record with
//! items is held by them; one without, by its frame.
//!
//! A block is appended to only by the mount that started it and only while its frames are
//! exactly the records from its first one (and removals): after a mount, a power cut or a
//! program that did not take, bytes past its last counted frame may be torn, and the next
//! record starts a new block. A block is freed by the operation that removes its last
//! record. SPEC.md §8.4a.
//!
//! Most operations need no entry at all. Once an entry of the epoch has framed a record in a
//! block, the replay comes to that block, so the next frames there can carry their own
//! commit: each frame has a bit at the back of its block, cleared once the frame's bytes are
//! in, which a torn program cannot fake. Removals of the oldest record commit themselves
//! the same way, as a frame naming the removed record's length, and the rest of a frame
//! that goes on in a new block is found through the **link** the full block names it by,
//! programmed before the frame's bit. A phone that
//! commits each 15-byte call thus writes 15 bytes and a bit. Such frames must not overtake
//! what came before them in the same commit, and the entries after them on their file must
//! replay after them: only a commit's leading operations commit themselves, and the file's
//! next entry says how many did ([`OpKind::Framed`]) unless it frames a record itself,
//! whose replay then takes them first. SPEC.md §8.5b.
//!
//! Blocks freed by operations whose replay does not read them are dropped from the block
//! device at once, rather than at the next checkpoint (SPEC.md §8.5b): the cleaner need not
//! copy them meanwhile. The blocks a replay reads are the ones this epoch wrote frames in
//! and those holding records whose length an operation's replay reads back.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use super::layout::append::{self as block, Block, Kind};
use super::layout::op::{Op, OpKind};
use super::layout::{item, key, key_u64, split_key, suffix_u64, Extent, Ino, RecordHead};
use super::Fs;
use crate::error::{Error, Result};
use crate::ftl::BlockDevice;
use crate::media::Segments;

/// Files whose append block a mount keeps open at once: a position and the block's image
/// each, in RAM.
const MAX_TAILS: usize = 16;

/// Where the next record of a file may go: the end of the frames of its newest append
/// block, whose bytes as programmed so far are kept in RAM — a program in place must give
/// every bit of the words it touches, and reading them back would take a flipped bit for
/// the truth.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Tail {
    sector: u64,
    /// Number of the record the next frame would hold.
    next: u64,
    /// Byte offset of the next frame.
    offset: usize,
    /// Frames in the block.
    frames: usize,
    /// Whether a mount replaying this epoch's journal would come to this block's end: an
    /// entry of the epoch framed a record here, or a frame that committed itself in such a
    /// block goes on here.
    /// Only then may a frame commit itself.
    replayable: bool,
    /// The block's bytes.
    image: Vec<u8>,
}

/// The append blocks open for appending in this mount, by file, the frames that committed
/// themselves since their file's last journaled operation, and the blocks the replay of
/// this epoch reads.
#[derive(Debug, Default)]
pub(super) struct Tails {
    open: BTreeMap<Ino, Tail>,
    /// Per file, frames that committed themselves and that no entry counts yet: an entry's
    /// next operation on the file must say so first ([`OpKind::Framed`]), or the replay
    /// would apply it before them.
    owed: BTreeMap<Ino, u64>,
    /// Blocks the replay of this epoch's journal reads: those it wrote frames in, and those
    /// holding records whose length an operation's replay reads. Freed, they stay with the
    /// block device until the checkpoint; others go at once.
    replay_reads: BTreeSet<u64>,
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
        self.replay_reads.insert(tail.sector);
        self.open.insert(ino, tail);
    }

    /// Forgets every block of `sector` (freed).
    fn freed(&mut self, sector: u64) {
        self.open.retain(|_, t| t.sector != sector);
    }

    /// A checkpoint started a new epoch: its journal names no block yet, owes nothing, and
    /// its replay reads nothing.
    pub fn checkpointed(&mut self) {
        self.open.values_mut().for_each(|t| t.replayable = false);
        self.owed.clear();
        self.replay_reads.clear();
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

    /// Notes that the replay of this epoch reads `sector`.
    pub fn replay_reads(&mut self, sector: u64) {
        self.replay_reads.insert(sector);
    }

    /// Whether the replay of this epoch may read `sector`.
    pub fn read_by_replay(&self, sector: u64) -> bool {
        self.replay_reads.contains(&sector)
    }

    /// Whether `ino` has frames that committed themselves and that no entry counts yet.
    pub fn owes(&self, ino: Ino) -> bool {
        self.owed.contains_key(&ino)
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

/// Where a frame went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placed {
    /// Committed by itself: no entry needs it.
    Committed,
    /// Frame `k` of the file's newest block, for the entry to commit.
    At(u64),
    /// Frame `k` of the file's newest block, going on in a new block at this sector.
    Spanned(u64, u64),
    /// First in a new block at this sector, for the entry to commit.
    New(u64),
    /// Nowhere: a record stays items, a removal goes in the entry.
    Not,
}

/// A record being framed.
struct Framing<'a> {
    ino: Ino,
    /// Its number.
    n: u64,
    /// Its frame's bytes.
    frame: &'a [u8],
    /// Whether it commits itself: it leads its commit, in a block the replay comes to.
    commit: bool,
    /// Whether its file's blocks are short-lived ([`Fs::short_lived`]).
    hot: bool,
}

/// An append block as a reader keeps it: its first record, the block after it, and the
/// lengths and bytes of its record frames.
struct Read {
    first: u64,
    after: Option<Mapped>,
    records: Vec<(usize, Vec<u8>)>,
}

/// An append block, as its extent maps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Mapped {
    /// Number of the first record whose frame starts in it.
    first: u64,
    sector: u64,
    /// Whether it starts with the rest of the block before's last frame.
    continued: bool,
}

impl Mapped {
    /// The first record it holds bytes of.
    fn lowest(&self) -> u64 {
        self.first.saturating_sub(u64::from(self.continued))
    }
}

/// The entry's note that `count` frames of `ino` committed themselves.
fn framed(ino: Ino, time: super::layout::Timespec, count: u64) -> Op {
    Op {
        ino,
        time,
        kind: OpKind::Framed { count },
    }
}

impl<D: Segments> Fs<D> {
    /// Whether `head`'s file may hold records in append blocks: its records do not fill
    /// data blocks, and the medium programs written bytes again.
    fn appends(&self, head: &RecordHead) -> bool {
        self.per_block(head).is_none() && self.tree.store().ftl.can_patch()
    }

    /// The append block of `ino` mapped at the largest record number at most `n`.
    fn mapped_at_or_before(&mut self, ino: Ino, n: u64) -> Result<Option<Mapped>> {
        let Some((k, v)) = self.tree.seek_le(&key_u64(ino, item::EXTENT, n))? else {
            return Ok(None);
        };
        Self::mapped(ino, &k, &v)
    }

    /// The append block of `ino` mapped at the smallest record number above `n`.
    fn mapped_after(&mut self, ino: Ino, n: u64) -> Result<Option<Mapped>> {
        let Some(f) = n.checked_add(1) else {
            return Ok(None);
        };
        let found = self
            .tree
            .range(key_u64(ino, item::EXTENT, f)..key(ino, item::EXTENT + 1))
            .next()
            .transpose()?;
        match found {
            Some((k, v)) => Self::mapped(ino, &k, &v),
            None => Ok(None),
        }
    }

    fn mapped(ino: Ino, k: &[u8], v: &[u8]) -> Result<Option<Mapped>> {
        let (i, ty, rest) = split_key(k)?;
        if i != ino || ty != item::EXTENT {
            return Ok(None);
        }
        let e = Extent::decode(v)?;
        Ok(Some(Mapped {
            first: suffix_u64(rest)?,
            sector: e.start,
            continued: e.continued,
        }))
    }

    /// The append block holding the frame of record `n` of `ino` if it has no items (the
    /// start of the frame, if it spans two): its first record, sector, and the next block's
    /// first record or `u64::MAX`.
    pub(super) fn append_block_of(&mut self, ino: Ino, n: u64) -> Result<Option<(u64, u64, u64)>> {
        let Some(b) = self.mapped_at_or_before(ino, n)? else {
            return Ok(None);
        };
        let end = self
            .mapped_after(ino, b.first)?
            .map_or(u64::MAX, |m| m.first);
        Ok(Some((b.first, b.sector, end)))
    }

    /// Reads a block into a new buffer.
    fn read_block(&mut self, sector: u64) -> Result<Vec<u8>> {
        let mut data = vec![0u8; self.bs() as usize];
        self.tree.store_mut().read(sector, &mut data)?;
        Ok(data)
    }

    /// The (kind-filtered) record frames of the block at `sector` held for records from
    /// `first` on, at most `held`: each record's length and the bytes the block holds.
    fn block_records(
        &mut self,
        sector: u64,
        fixed: usize,
        held: u64,
    ) -> Result<Vec<(usize, Vec<u8>)>> {
        let missing = || Error::Corrupt("a record of a record file is missing");
        let data = self.read_block(sector)?;
        let blk = Block::parse(&data, fixed).ok_or_else(missing)?;
        Ok(blk
            .frames()
            .filter(|f| f.kind == Kind::Record)
            .take(usize::try_from(held).unwrap_or(usize::MAX))
            .map(|f| (f.len, f.head.to_vec()))
            .collect())
    }

    /// Records `n0..n1` of a file whose records may be in append blocks: `items` (the
    /// records that have items, in order) and the others from their frames, each block read
    /// once.
    pub(super) fn records_appended(
        &mut self,
        ino: Ino,
        head: &RecordHead,
        n0: u64,
        n1: u64,
        items: Vec<(u64, Vec<u8>)>,
    ) -> Result<Vec<(u64, Vec<u8>)>> {
        let missing = || Error::Corrupt("a record of a record file is missing");
        let fixed = head.record_size as usize;
        let mut items = items.into_iter().peekable();
        // The block read last.
        let mut block: Option<Read> = None;
        let mut out = Vec::new();
        for n in n0..n1 {
            if let Some(item) = items.next_if(|(m, _)| *m == n) {
                out.push(item);
                continue;
            }
            let known = block.as_ref().is_some_and(|r| {
                n >= r.first
                    && n - r.first < r.records.len() as u64
                    && r.after.is_none_or(|m| n < m.first)
            });
            if !known {
                let b = self.mapped_at_or_before(ino, n)?.ok_or_else(missing)?;
                let after = self.mapped_after(ino, b.first)?;
                let end = after.map_or(u64::MAX, |m| m.first);
                let records = self.block_records(b.sector, fixed, end.min(n1) - b.first)?;
                block = Some(Read {
                    first: b.first,
                    after,
                    records,
                });
            }
            let r = block.as_ref().ok_or_else(missing)?;
            let k = usize::try_from(n - r.first).map_err(|_| missing())?;
            let (len, bytes) = r.records.get(k).ok_or_else(missing)?;
            let mut data = bytes.clone();
            if data.len() < *len {
                // The rest is the continuation of the next block.
                let next = r.after.filter(|m| m.continued).ok_or_else(missing)?;
                let rest = self.read_block(next.sector)?;
                let blk = Block::parse(&rest, fixed).ok_or_else(missing)?;
                if data.len() + blk.continuation().len() != *len {
                    return Err(missing());
                }
                data.extend_from_slice(blk.continuation());
            }
            out.push((n, data));
        }
        Ok(out)
    }

    /// The length of record `n` of `ino`, which has no items: from its frame (its file's
    /// size, if it has one). `replayed`: the replay of the operation asking reads it too, so
    /// the block stays with the block device until the checkpoint if it is freed.
    pub(super) fn framed_len(
        &mut self,
        ino: Ino,
        head: &RecordHead,
        n: u64,
        replayed: bool,
    ) -> Result<u64> {
        if head.record_size != 0 {
            return Ok(u64::from(head.record_size));
        }
        let missing = || Error::Corrupt("a record of a record file is missing");
        let b = self.mapped_at_or_before(ino, n)?.ok_or_else(missing)?;
        let held = n.checked_sub(b.first).ok_or_else(missing)? + 1;
        let f = self.block_records(b.sector, 0, held)?;
        let (len, _) = f
            .get(f.len().wrapping_sub(1))
            .filter(|_| f.len() as u64 == held)
            .ok_or_else(missing)?;
        if replayed {
            self.tails.replay_reads(b.sector);
        }
        Ok(*len as u64)
    }

    /// For `fsck`: the (record, length) of the frames that the append blocks `extents` (a
    /// file's, by first record) hold whole for records of `head`, by record; what is wrong
    /// with the blocks goes to `problems`. A frame that goes on in a block that does not
    /// continue it holds nothing (its record must have items, which the caller checks). The
    /// work is bounded by the blocks, not by the head's numbers.
    pub(super) fn framed_records(
        &mut self,
        head: &RecordHead,
        extents: &[(u64, Extent)],
        problems: &mut Vec<String>,
    ) -> Result<Vec<(u64, usize)>> {
        let fixed = head.record_size as usize;
        let mut framed = Vec::new();
        // The last block's last frame if it goes on: its record, length and the bytes due.
        let mut going_on: Option<(u64, usize, usize)> = None;
        for (i, &(first, e)) in extents.iter().enumerate() {
            let end = extents.get(i + 1).map_or(u64::MAX, |x| x.0);
            let before = going_on.take();
            if e.len == 0 || e.unwritten || e.start >= self.sb.sectors {
                continue;
            }
            let data = self.read_block(e.start)?;
            let Some(blk) = Block::parse(&data, fixed) else {
                problems.push(format!(
                    "append block at record {first} is not an append block"
                ));
                continue;
            };
            if e.continued {
                let got = blk.continuation().len();
                match before {
                    Some((n, len, rest)) if got == rest && n >= head.first => {
                        framed.push((n, len));
                    }
                    Some((_, _, rest)) if got == rest => {}
                    Some((n, _, rest)) => {
                        problems.push(format!("record {n} goes on in {got} bytes, not {rest}"))
                    }
                    None if first > head.first => {
                        problems.push(format!("append block at record {first} continues no frame"))
                    }
                    None => {}
                }
            }
            let held = end.min(head.next).saturating_sub(first);
            let records = blk.frames().filter(|f| f.kind == Kind::Record);
            for (k, f) in records
                .take(usize::try_from(held).unwrap_or(usize::MAX))
                .enumerate()
            {
                let Some(n) = first.checked_add(k as u64) else {
                    break;
                };
                if f.spans() {
                    going_on = Some((n, f.len, f.len - f.head.len()));
                } else if n >= head.first {
                    framed.push((n, f.len));
                }
            }
        }
        Ok(framed)
    }

    /// After record `n` went from a file whose records may be in append blocks: frees the
    /// append blocks that held bytes of it if no record of `head` (as it is now) is left in
    /// them. A block open for appending needs nothing more: it takes only record `next` of
    /// its tail, so a number given back by a removal from the end never lands on a stale
    /// frame.
    pub(super) fn release_append_block(
        &mut self,
        ino: Ino,
        inode: &mut super::layout::Inode,
        head: &RecordHead,
        n: u64,
    ) -> Result<()> {
        let Some(b) = self.mapped_at_or_before(ino, n)? else {
            return Ok(());
        };
        let after = self.mapped_after(ino, b.first)?;
        self.release_if_empty(ino, inode, head, b, after)?;
        if let Some(a) = after.filter(|a| a.continued && a.lowest() == n) {
            let beyond = self.mapped_after(ino, a.first)?;
            self.release_if_empty(ino, inode, head, a, beyond)?;
        }
        Ok(())
    }

    /// Frees append block `b` (followed by `after`) if it holds none of `head`'s records.
    fn release_if_empty(
        &mut self,
        ino: Ino,
        inode: &mut super::layout::Inode,
        head: &RecordHead,
        b: Mapped,
        after: Option<Mapped>,
    ) -> Result<()> {
        let end = after.map_or(u64::MAX, |m| m.first);
        if head.first.max(b.lowest()) < head.next.min(end) {
            return Ok(());
        }
        let freed = self.unmap(ino, b.first, b.first.saturating_add(1))?;
        for &(sector, _) in &freed {
            self.tails.freed(sector);
        }
        self.release_runs(inode, &freed);
        Ok(())
    }

    /// Before a journal entry is written: in every file of records that may be appended
    /// whose pending operations are adds (and removals of the oldest), programs each added
    /// record into the file's append block (or a new one), and each removal of the oldest
    /// record at the front of the entry as a frame too. An operation at the front of the
    /// entry whose frame goes after the last of a block the epoch's journal leads the replay
    /// to commits itself: its bit is cleared once its bytes are in, and the entry drops it.
    /// An add framed otherwise is replaced in the entry by an operation naming its frame
    /// ([`OpKind::AddAt`], [`OpKind::AddSpanned`] or [`OpKind::AddAppended`] for a new
    /// block) instead of holding its bytes; a record that cannot be appended stays an add.
    /// The first operation the entry holds on a file that has frames committed by
    /// themselves is preceded by an [`OpKind::Framed`] counting them (SPEC.md §8.5b).
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
            .adds_by_file(|k| matches!(k, OpKind::RemoveFirst { .. } | OpKind::Atime));
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
        let pending = self.journal.take_pending();
        let mut out = Vec::with_capacity(pending.len());
        // Whether `out` holds an operation yet: a frame after one must not commit itself,
        // or a power cut before the entry would keep it without what came before it.
        let mut entered = false;
        let mut result = Ok(());
        for op in pending {
            let (ino, time) = (op.ino, op.time);
            let placed = match (&op.kind, result.is_ok()) {
                (OpKind::Add(data), true) => match next.get_mut(&ino) {
                    Some((n, head)) => {
                        *n += 1;
                        self.append_record(ino, head, *n - 1, data, !entered)
                    }
                    None => Ok(Placed::Not),
                },
                (&OpKind::RemoveFirst { len: Some(len) }, true) if appending && !entered => {
                    self.frame_removal(ino, len)
                }
                _ => Ok(Placed::Not),
            };
            let placed = placed.unwrap_or_else(|e| {
                result = Err(e);
                Placed::Not
            });
            // Blocks its frame freed (the block before a new one) are the operation's.
            self.note_released(ino);
            for (orphan, count) in self.tails.take_orphans() {
                out.push(framed(orphan, time, count));
                entered = true;
            }
            if placed == Placed::Committed {
                continue;
            }
            entered = true;
            let len = match &op.kind {
                OpKind::Add(data) => data.len() as u64,
                _ => 0,
            };
            // A framed add's replay takes the frames that committed themselves before it by
            // itself: they come before its own, which is not committed by itself.
            let kind = match placed {
                Placed::At(k) => OpKind::AddAt { len, k },
                Placed::Spanned(k, sector) => OpKind::AddSpanned { len, k, sector },
                Placed::New(sector) => OpKind::AddAppended {
                    len,
                    sector: Some(sector),
                },
                _ => {
                    let owed = self.tails.take_owed(ino);
                    if owed > 0 {
                        out.push(framed(ino, time, owed));
                    }
                    out.push(op);
                    continue;
                }
            };
            self.tails.take_owed(ino);
            out.push(Op { kind, ..op });
        }
        // An entry is written anyway: it counts the frames that committed themselves and
        // freed blocks, which may then be taken again once it is durable
        // ([`Fs::forget_released`]).
        if let Some(time) = out.last().map(|op| op.time) {
            for ino in self.journal.owing_files() {
                let count = self.tails.take_owed(ino);
                if count > 0 {
                    out.push(framed(ino, time, count));
                }
            }
        }
        self.journal.put_back(out);
        result?;
        // The frames are durable before the entry that counts them.
        self.tree.store_mut().ftl.flush()
    }

    /// Programs `bytes` into `tail`'s block at `offset`, in place, and keeps its image.
    fn program(&mut self, tail: &mut Tail, offset: usize, bytes: &[u8]) -> Result<()> {
        let align = self.patch_align();
        let a = offset / align * align;
        let b = (offset + bytes.len()).next_multiple_of(align);
        let mut words = tail.image[a..b].to_vec();
        for (w, &x) in words[offset - a..].iter_mut().zip(bytes) {
            *w &= x;
        }
        self.tree.store_mut().patch_sector(tail.sector, a, &words)?;
        tail.image[a..b].copy_from_slice(&words);
        Ok(())
    }

    /// Writes a new append block at a free sector: `image`, with its first frame or a
    /// continuation, `short_lived` if its file's blocks are (`Fs::short_lived`). `None`
    /// when no sector is free beyond the index's reserve.
    fn start_block(&mut self, image: &[u8], short_lived: bool) -> Result<Option<u64>> {
        if self.tree.store().space.free() <= self.reserve {
            return Ok(None);
        }
        let Some((sector, _)) = self.tree.store_mut().space.alloc(1) else {
            return Ok(None);
        };
        let store = self.tree.store_mut();
        let r = match short_lived {
            true => store.write_short_lived(sector, image),
            false => store.write_data(sector, image),
        };
        if let Err(e) = r {
            self.undo_alloc(&[(sector, 1)]);
            return Err(e);
        }
        Ok(Some(sector))
    }

    /// Frames record `n` of `ino` (just added, as items) after the last frame of its append
    /// block, going on in a new block if it does not fit, or first in a new block, and
    /// removes its items; commits it by its frame if `commit` allows and the block is one the
    /// replay comes to. It stays items (already dropped by a cyclic file, too large for a
    /// block, beyond the numbers a block may be mapped at, no free block beyond the index's
    /// reserve, or a program that did not take) otherwise.
    fn append_record(
        &mut self,
        ino: Ino,
        head: &RecordHead,
        n: u64,
        data: &[u8],
        commit: bool,
    ) -> Result<Placed> {
        let fixed = head.record_size as usize;
        let f = block::record_frame(data, fixed);
        let bs = self.bs() as usize;
        // What a fresh block holds of frames, with the byte of their first bits.
        let fresh_room = bs - block::HEADER - 1;
        let max = self.max_file_size() / self.bs();
        if n < head.first || n >= head.next || n.saturating_add(1) >= max || f.len() > fresh_room {
            return Ok(Placed::Not);
        }
        let mut a = Framing {
            ino,
            n,
            frame: &f,
            commit: false,
            hot: self.short_lived(ino, head)?,
        };
        let Some(t) = self.tails.open.remove(&ino).filter(|t| t.next == n) else {
            return self.append_first(&a);
        };
        a.commit = commit && t.replayable;
        let room = block::area_end(bs, t.frames + 1).saturating_sub(t.offset);
        let r = if f.len() <= room {
            self.frame_in_place(&a, t)
        } else if room >= block::min_head(&f, fixed)
            && f.len() - room <= fresh_room
            && block::links(self.sb.sectors)
        {
            self.frame_spanning(&a, t, room)
        } else {
            // A sliver left (or no link to span with): the frame starts the next block,
            // which its entry names.
            return self.append_first(&a);
        };
        let placed = match r {
            Ok(Some(p)) => p,
            // A program that did not take: the block is closed, the record stays items.
            Ok(None) => return Ok(Placed::Not),
            Err(e) => return Err(e),
        };
        if placed == Placed::Committed {
            *self.tails.owed.entry(ino).or_default() += 1;
        }
        for (k, _) in self.record_items(ino, n)? {
            self.tree.remove(&k)?;
        }
        Ok(placed)
    }

    /// Frames a record first in a new block, for the entry to commit. Not where a block is
    /// mapped at its number already: a continued block whose own first record was removed
    /// from the end still holds the rest of the record before, and this one stays items.
    fn append_first(&mut self, a: &Framing) -> Result<Placed> {
        if self
            .mapped_at_or_before(a.ino, a.n)?
            .is_some_and(|b| b.first == a.n)
        {
            return Ok(Placed::Not);
        }
        let bs = self.bs() as usize;
        let mut image = block::fresh(bs, &[]);
        image[block::HEADER..block::HEADER + a.frame.len()].copy_from_slice(a.frame);
        let Some(sector) = self.start_block(&image, a.hot)? else {
            return Ok(Placed::Not);
        };
        self.map_append_block(a.ino, a.n, sector, false)?;
        self.tails.open(
            a.ino,
            Tail {
                sector,
                next: a.n + 1,
                offset: block::HEADER + a.frame.len(),
                frames: 1,
                replayable: false,
                image,
            },
        );
        for (k, _) in self.record_items(a.ino, a.n)? {
            self.tree.remove(&k)?;
        }
        Ok(Placed::New(sector))
    }

    /// Runs `programs` on the tail; a program that did not take closes it (`None`).
    fn try_programs(&mut self, t: &mut Tail, programs: &[(usize, &[u8])]) -> Result<Option<()>> {
        for &(at, bytes) in programs {
            match self.program(t, at, bytes) {
                Ok(()) => {}
                Err(Error::Flash(flash::FlashError::ProgramFailed { .. })) => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        Ok(Some(()))
    }

    /// Frames a record after the last frame of `t`'s block.
    fn frame_in_place(&mut self, a: &Framing, mut t: Tail) -> Result<Option<Placed>> {
        let k = t.frames;
        let offset = t.offset;
        if self.try_programs(&mut t, &[(offset, a.frame)])?.is_none() {
            return Ok(None);
        }
        if a.commit && self.try_commit(&mut t, k)?.is_none() {
            return Ok(None);
        }
        t.next = a.n + 1;
        t.offset += a.frame.len();
        t.frames += 1;
        self.tails.open(a.ino, t);
        Ok(Some(if a.commit {
            Placed::Committed
        } else {
            Placed::At(k as u64)
        }))
    }

    /// Clears frame `k`'s bit in `t`'s block; `None` if the program did not take.
    fn try_commit(&mut self, t: &mut Tail, k: usize) -> Result<Option<()>> {
        let (byte, bit) = block::commit_bit(t.image.len(), k);
        self.try_programs(t, &[(byte, &[!bit])])
    }

    /// Frames a record whose frame's first `room` bytes go after the last frame of `t`'s
    /// block, the rest at the front of a new block, which `t`'s block then links to.
    fn frame_spanning(&mut self, a: &Framing, mut t: Tail, room: usize) -> Result<Option<Placed>> {
        let bs = self.bs() as usize;
        let image = block::fresh(bs, &a.frame[room..]);
        let Some(sector) = self.start_block(&image, a.hot)? else {
            return Ok(None);
        };
        let (k, offset) = (t.frames, t.offset);
        let link = block::link_bytes(sector);
        let head = &a.frame[..room];
        let done = self.try_programs(&mut t, &[(offset, head), (block::LINK_AT, &link)])?;
        let done = match done {
            Some(()) if a.commit => {
                self.tree.store_mut().ftl.flush()?;
                self.try_commit(&mut t, k)?
            }
            d => d,
        };
        if done.is_none() {
            self.undo_alloc(&[(sector, 1)]);
            return Ok(None);
        }
        self.map_append_block(a.ino, a.n + 1, sector, true)?;
        self.tails.open(
            a.ino,
            Tail {
                sector,
                next: a.n + 1,
                offset: block::HEADER + a.frame.len() - room,
                frames: 0,
                replayable: a.commit,
                image,
            },
        );
        Ok(Some(if a.commit {
            Placed::Committed
        } else {
            Placed::Spanned(k as u64, sector)
        }))
    }

    /// Frames the removal of the oldest record of `ino` (of `len` bytes, just removed)
    /// after the last frame of its block, committed by itself, if the file has a block open
    /// that the replay comes to, its records have no fixed size and the frame fits.
    fn frame_removal(&mut self, ino: Ino, len: u64) -> Result<Placed> {
        let bs = self.bs() as usize;
        let f = block::removal_frame(len as usize);
        let fits =
            |t: &Tail| t.replayable && t.offset + f.len() <= block::area_end(bs, t.frames + 1);
        if !self.tails.open.get(&ino).is_some_and(fits) {
            return Ok(Placed::Not);
        }
        if self.record_head(ino)?.is_none_or(|h| h.record_size != 0) {
            return Ok(Placed::Not);
        }
        let Some(mut t) = self.tails.open.remove(&ino) else {
            return Ok(Placed::Not);
        };
        let k = t.frames;
        let offset = t.offset;
        if self.try_programs(&mut t, &[(offset, &f)])?.is_none()
            || self.try_commit(&mut t, k)?.is_none()
        {
            return Ok(Placed::Not);
        }
        t.offset += f.len();
        t.frames += 1;
        self.tails.open(ino, t);
        *self.tails.owed.entry(ino).or_default() += 1;
        Ok(Placed::Committed)
    }

    /// Maps the append block at `sector` as the one whose first record is `n` (`continued`:
    /// it starts with the rest of record `n - 1`'s frame). The block before it then ends at
    /// `n`: if every record it held has gone (a cyclic file wraps past a block that seemed
    /// to hold its newest records), it is freed.
    fn map_append_block(&mut self, ino: Ino, n: u64, sector: u64, continued: bool) -> Result<()> {
        let mut inode = self.inode(ino)?;
        self.put_extent(
            ino,
            n,
            Extent {
                start: sector,
                len: 1,
                unwritten: false,
                continued,
            },
        )?;
        inode.blocks += 1;
        if let (Some(before), Some(head)) = (n.checked_sub(1), self.record_head(ino)?) {
            if let Some(b) = self.mapped_at_or_before(ino, before)? {
                let after = self.mapped_after(ino, b.first)?;
                self.release_if_empty(ino, &mut inode, &head, b, after)?;
            }
        }
        self.put_inode(ino, &inode)
    }
}

/// Where the replay has come to in a file's newest append block: frames after the ones it
/// has accounted for may have committed themselves.
#[derive(Debug, Clone, Copy)]
pub(super) struct ReplayTail {
    sector: u64,
    /// Frames of the block the replay has accounted for.
    frames: usize,
    /// Time of the file's last operation replayed: the time of the frames found after it.
    pub(super) time: super::layout::Timespec,
}

impl<D: Segments> Fs<D> {
    /// The newest append block of `ino`: the one mapped at its next record's number or
    /// below.
    fn newest_append_block(&mut self, ino: Ino) -> Result<Option<Mapped>> {
        match self.record_head(ino)? {
            Some(h) => self.mapped_at_or_before(ino, h.next),
            None => Ok(None),
        }
    }

    /// Replays an add of a record of `len` bytes held by its frame: in the block at
    /// `sector`, which it starts, or else in the file's newest block.
    fn replay_add_framed(&mut self, ino: Ino, len: u64, sector: Option<u64>) -> Result<u64> {
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
            Some(s) => self.claim_append_block(ino, n, s, false)?,
            None => {
                if self.append_block_of(ino, n)?.is_none() {
                    return Err(bad());
                }
            }
        }
        Ok(n)
    }

    /// Takes the block at `sector`, free until now, as `ino`'s append block at record `n`.
    fn claim_append_block(&mut self, ino: Ino, n: u64, s: u64, continued: bool) -> Result<()> {
        if n >= self.max_file_size() / self.bs()
            || s >= self.sb.sectors
            || !self.tree.store_mut().space.claim(s)
        {
            return Err(Error::Corrupt(
                "a journal entry or link names a block that is not free",
            ));
        }
        self.map_append_block(ino, n, s, continued)
    }

    /// Replays [`OpKind::AddAppended`], [`OpKind::AddAt`] and [`OpKind::AddSpanned`]: the
    /// frames that committed themselves before it first, then the add; returns the record
    /// operations applied, and the file's replay tail after it.
    pub(super) fn replay_appended(
        &mut self,
        ino: Ino,
        kind: &OpKind,
        tail: Option<ReplayTail>,
        time: super::layout::Timespec,
    ) -> Result<(u64, Option<ReplayTail>)> {
        let bad = || Error::Corrupt("a journal entry names a frame that is not there");
        let mut absorbed = 0;
        let mut tail = tail;
        if let Some(t) = tail.as_mut() {
            absorbed = self.replay_framed(ino, t, None)?;
        }
        let after = match *kind {
            OpKind::AddAppended { len, sector: None } => {
                // Version 6: the block holding the record before, whose frames are its
                // records.
                let n = self.replay_add_framed(ino, len, None)?;
                let (first, sector, _) = self.append_block_of(ino, n)?.ok_or_else(bad)?;
                let frames = usize::try_from(n + 1 - first).map_err(|_| bad())?;
                ReplayTail {
                    sector,
                    frames,
                    time,
                }
            }
            OpKind::AddAppended {
                len,
                sector: Some(s),
            } => {
                self.replay_add_framed(ino, len, Some(s))?;
                ReplayTail {
                    sector: s,
                    frames: 1,
                    time,
                }
            }
            OpKind::AddAt { len, k } | OpKind::AddSpanned { len, k, .. } => {
                let b = self.newest_append_block(ino)?.ok_or_else(bad)?;
                let k = usize::try_from(k).map_err(|_| bad())?;
                if tail.is_some_and(|t| t.sector != b.sector || t.frames != k) {
                    return Err(bad());
                }
                let n = self.replay_add_framed(ino, len, None)?;
                match *kind {
                    OpKind::AddSpanned { sector, .. } => {
                        self.claim_append_block(ino, n + 1, sector, true)?;
                        ReplayTail {
                            sector,
                            frames: 0,
                            time,
                        }
                    }
                    _ => ReplayTail {
                        sector: b.sector,
                        frames: k + 1,
                        time,
                    },
                }
            }
            _ => return Err(bad()),
        };
        Ok((absorbed + 1, Some(after)))
    }

    /// Replays the frames of `ino` that committed themselves after those the replay has
    /// accounted for in `tail`'s block, following links into the next blocks: exactly
    /// `count` (an [`OpKind::Framed`]; a frame missing is damage), or, at the end of the
    /// replay, as many as there are. Returns the frames applied; `tail` moves past them.
    pub(super) fn replay_framed(
        &mut self,
        ino: Ino,
        tail: &mut ReplayTail,
        count: Option<u64>,
    ) -> Result<u64> {
        let bad = || Error::Corrupt("a journal entry counts frames that are not there");
        let fixed = self.record_head(ino)?.ok_or_else(bad)?.record_size as usize;
        let want = count.unwrap_or(u64::MAX);
        let before = self.journal.set_op_time(Some(tail.time));
        let mut done = 0u64;
        let result = (|| -> Result<()> {
            loop {
                // The block must still be the file's newest: frames after the newest
                // record's are the ones to read.
                if self.newest_append_block(ino)?.map(|b| b.sector) != Some(tail.sector) {
                    return match count {
                        Some(_) => Err(bad()),
                        None => Ok(()),
                    };
                }
                let data = self.read_block(tail.sector)?;
                let blk = Block::parse(&data, fixed).ok_or_else(bad)?;
                // The rest of a frame that went on.
                let mut spanned = None;
                for f in blk.frames().skip(tail.frames) {
                    if done == want || !f.committed {
                        break;
                    }
                    match f.kind {
                        Kind::Record => {
                            self.replay_add_framed(ino, f.len as u64, None)?;
                        }
                        Kind::Removal => self.remove_first_known(ino, f.len as u64)?,
                    }
                    tail.frames += 1;
                    done += 1;
                    if f.spans() {
                        spanned = Some(f.len - f.head.len());
                    }
                }
                // Only a frame that went on leads to the next block: its link was
                // programmed before the frame's bit, so a link that may be torn is never
                // followed.
                let Some(rest) = spanned else {
                    return Ok(());
                };
                let link = blk.link().ok_or_else(bad)?;
                if link >= self.sb.sectors {
                    return Err(bad());
                }
                let linked = self.read_block(link)?;
                if Block::parse(&linked, fixed).is_none_or(|b| b.continuation().len() != rest) {
                    return Err(bad());
                }
                let next = self.record_head(ino)?.ok_or_else(bad)?.next;
                self.claim_append_block(ino, next, link, true)?;
                self.tails.replay_reads(link);
                *tail = ReplayTail {
                    sector: link,
                    frames: 0,
                    time: tail.time,
                };
            }
        })();
        self.journal.set_op_time(before);
        result?;
        if count.is_some_and(|c| c != done) {
            return Err(bad());
        }
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_continued_block_holds_the_record_before_its_first() {
        let m = Mapped {
            first: 10,
            sector: 3,
            continued: true,
        };
        assert_eq!(m.lowest(), 9);
        assert_eq!(
            Mapped {
                continued: false,
                ..m
            }
            .lowest(),
            10
        );
        assert_eq!(Mapped { first: 0, ..m }.lowest(), 0);
    }
}
