//! The journal: small record operations made durable without writing the index.
//!
//! A commit normally writes every dirty index node and then the superblock: for a call-log
//! entry of 15 bytes that is a leaf, the nodes above it whose spares are used up, and a
//! superblock record — hundreds of bytes for every few bytes of data, and on NOR the
//! erasures that follow. Where the medium can program written bytes again (reprogrammable
//! NOR), a commit whose changes all come from record operations (add, update, remove, and
//! the access times of reads) writes instead one **entry**: the operations themselves,
//! programmed in place after the previous entry in a **journal block**. The index stays
//! dirty in RAM; a later **checkpoint** (an ordinary commit) writes it, and the entries
//! it covers are dead. Mount replays the entries written after the last checkpoint, so
//! each entry is a commit point exactly like a superblock.
//!
//! The journal is blocks 1..=N of the volume (N in the superblock, 0 for none). Each
//! checkpoint starts an **epoch**, named by its commit number; a block belongs to the epoch
//! in its header, and is rewritten (a fresh slot, its entries area erased) only for a later
//! epoch, when a durable checkpoint covers what it held. Within an epoch blocks are
//! numbered in the order they were started; mount replays the epoch's blocks in that order
//! and each block's entries until the first that is erased or fails its CRC. Nothing is
//! appended after an entry that may be torn: after a mount or a failure the next entry
//! starts a new block. Records added in append blocks may commit themselves by their
//! frames, with no entry (append.rs): the replay adds them before the entry that counts
//! them or frames the next record of their file, or after the last entry. Layout: SPEC.md
//! §8.5b.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::vec::Vec;

use super::append::ReplayTail;
use super::layout::journal::{
    decode_fragments, encode_fragment, fragment_cap, BlockHeader, HEADER_LEN,
};
use super::layout::op::{decode_ops, encode_ops, Op, OpKind, MAX_ALIGN};
use super::layout::{Ino, Timespec};
use super::Fs;
use crate::error::{Error, Result};
use crate::ftl::BlockDevice;
use crate::log::Head;
use crate::media::Segments;

/// Blocks one entry may span: a commit larger than that is a checkpoint.
pub const MAX_ENTRY_BLOCKS: usize = 4;

/// Where the next entry goes.
#[derive(Debug, Clone, Copy)]
pub struct Tail {
    /// The journal block.
    pub block: u64,
    /// Its header.
    pub header: BlockHeader,
    /// Offset of the next entry.
    pub offset: usize,
    /// Time of the last operation in the block.
    pub time: Timespec,
}

/// What the journal did since mount ([`Journal::counts`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JournalCounts {
    /// Entries written.
    pub entries: u64,
    /// Commits whose every operation committed itself by its frame.
    pub frame_commits: u64,
    /// Bytes of entries written (padding included).
    pub entry_bytes: u64,
    /// Journal blocks written (started).
    pub block_writes: u64,
    /// Operations replayed by the mount.
    pub replayed: u64,
}

/// The journal's state in RAM.
#[derive(Debug, Clone, Default)]
pub struct Journal {
    /// Blocks 1..=`blocks` are the journal (0: the volume has none).
    blocks: u32,
    /// The epoch: the commit number of the last checkpoint.
    epoch: u64,
    /// The newest epoch a journal block was found in at mount, when newer than the
    /// superblock's: a checkpoint written after those entries, then lost (its superblock
    /// damaged, so the mount took the one before). The next commit is numbered above it,
    /// so that those entries are never taken for its epoch's.
    lost_epoch: u64,
    /// The block taking entries, if one may be appended to.
    tail: Option<Tail>,
    /// Which journal blocks hold entries of this epoch (index `block - 1`).
    in_epoch: Vec<bool>,
    /// Index the next block of this epoch gets.
    next_index: u32,
    /// Operations since the last durable point, in order.
    pending: Vec<Op>,
    /// A bound on the bytes `pending` encodes to.
    pending_bytes: usize,
    /// Whether `pending` holds a small write ([`OpKind::Write`]).
    pending_writes: bool,
    /// The file system's count of changes (of the index, and of file blocks waiting in RAM)
    /// if every change since the last durable point is one of
    /// `pending`; anything else changing the index leaves it behind, and the next commit is
    /// a checkpoint.
    mark: u64,
    /// The count of changes at the last durable point.
    durable: u64,
    /// Set after a failure: the next commit is a checkpoint.
    must_checkpoint: bool,
    /// Blocks freed since the last checkpoint that wait for the next one only because the
    /// replay of this epoch reads them.
    replay_pinned: u64,
    /// Data runs released by the operations since the last durable point, with their
    /// file: the replay frees a run only where it replays the operation that released it,
    /// so the run may be taken again only once that is durable ([`Fs::forget_released`]).
    released: Vec<(Ino, (u64, u64))>,
    /// Blocks the block device has forgotten that frames that committed themselves freed,
    /// with their file: no allocation takes them before an entry counting those frames is
    /// durable.
    held: Vec<(Ino, u64)>,
    /// Files written by [`OpKind::Write`]s since the last checkpoint: the replay of a small
    /// write reads the block it lands in, so the blocks these files free wait for the
    /// checkpoint.
    rewritten: BTreeSet<Ino>,
    /// The time of the operation running under [`Fs::journaled`] (or being replayed):
    /// every timestamp it sets.
    op_time: Option<Timespec>,
    /// Whether the mount is replaying the entries (no commits meanwhile).
    replaying: bool,
    /// Entries written since mount.
    entries: u64,
    /// Commits since mount whose every operation committed itself by its frame.
    frame_commits: u64,
    /// Bytes of entries written since mount (padding included).
    entry_bytes: u64,
    /// Journal blocks written (started) since mount.
    block_writes: u64,
    /// Operations replayed by the mount.
    replayed: u64,
}

impl Journal {
    /// The journal of a volume with `blocks` journal blocks, at the checkpoint `epoch`.
    pub fn new(blocks: u32, epoch: u64) -> Journal {
        Journal {
            blocks,
            epoch,
            in_epoch: alloc::vec![false; blocks as usize],
            ..Journal::default()
        }
    }

    /// The number of the next checkpoint, which follows `last`: above every epoch a
    /// journal block was found in. Both come from flash, so the sum saturates rather than
    /// overflow on a volume whose numbers are at the end of their range.
    pub fn next_commit(&self, last: u64) -> u64 {
        last.max(self.lost_epoch).saturating_add(1)
    }

    /// Starts a new epoch after the checkpoint `epoch`: every block may be rewritten.
    pub fn checkpointed(&mut self, epoch: u64, changes: u64) {
        self.epoch = epoch;
        self.lost_epoch = 0;
        self.tail = None;
        self.in_epoch.iter_mut().for_each(|b| *b = false);
        self.next_index = 0;
        self.pending.clear();
        self.pending_bytes = 0;
        self.pending_writes = false;
        self.mark = changes;
        self.durable = changes;
        self.replay_pinned = 0;
        self.released.clear();
        self.held.clear();
        self.rewritten.clear();
    }

    /// Notes an operation done; `changes` is the count of changes after it. Operations that
    /// would make an entry of more than [`MAX_ENTRY_BLOCKS`] blocks of `block_size` — or of
    /// more than one, once it holds a small write — are not kept (nor their RAM): the next
    /// commit is then a checkpoint. Small writes are worth an entry only while it is
    /// smaller than the data block, index leaf and superblock a checkpoint would program
    /// instead; their bytes are programmed again at the checkpoint.
    pub fn note(&mut self, op: Op, changes: u64, block_size: usize) {
        // Code, inode, time, record number and length: at most 41 bytes as varints.
        self.pending_bytes += 41
            + match &op.kind {
                OpKind::Add(d) | OpKind::Update(_, d) | OpKind::Write { data: d, .. } => d.len(),
                _ => 0,
            };
        if matches!(op.kind, OpKind::Write { .. }) {
            self.rewritten.insert(op.ino);
            self.pending_writes = true;
        }
        self.pending.push(op);
        let blocks = if self.pending_writes {
            1
        } else {
            MAX_ENTRY_BLOCKS
        };
        if self.pending_bytes > blocks * (block_size - HEADER_LEN) {
            self.pending.clear();
            self.pending_bytes = 0;
            self.pending_writes = false;
            // No count ever reaches it: the next commit checkpoints, and resets it.
            self.mark = u64::MAX;
        } else {
            self.mark = changes;
        }
    }

    /// Every pending operation is durable.
    fn settled(&mut self) {
        self.pending.clear();
        self.pending_bytes = 0;
        self.pending_writes = false;
        self.durable = self.mark;
    }

    /// Counts an entry written: every pending operation is durable.
    fn written(&mut self, bytes: usize) {
        self.settled();
        self.entries += 1;
        self.entry_bytes += bytes as u64;
    }

    /// The number of pending adds of each file that has some and whose other pending
    /// operations are all ones `also` accepts.
    pub fn adds_by_file(&self, also: impl Fn(&OpKind) -> bool) -> BTreeMap<Ino, u64> {
        let mut adds: BTreeMap<Ino, u64> = BTreeMap::new();
        let mut others: BTreeSet<Ino> = BTreeSet::new();
        for op in &self.pending {
            match &op.kind {
                OpKind::Add(_) => *adds.entry(op.ino).or_default() += 1,
                k if also(k) => {}
                _ => {
                    others.insert(op.ino);
                }
            }
        }
        adds.retain(|ino, _| !others.contains(ino));
        adds
    }

    /// The ranges (offset, length) of the pending small writes of each regular file that has
    /// some and no other pending operation but access times.
    pub fn writes_by_file(&self) -> BTreeMap<Ino, Vec<(u64, u64)>> {
        let mut writes: BTreeMap<Ino, Vec<(u64, u64)>> = BTreeMap::new();
        let mut others: BTreeSet<Ino> = BTreeSet::new();
        for op in &self.pending {
            match &op.kind {
                OpKind::Write { offset, data } => writes
                    .entry(op.ino)
                    .or_default()
                    .push((*offset, data.len() as u64)),
                OpKind::Atime => {}
                _ => {
                    others.insert(op.ino);
                }
            }
        }
        writes.retain(|ino, _| !others.contains(ino));
        writes
    }

    /// Whether a pending operation created regular file `ino`.
    pub fn creates(&self, ino: Ino) -> bool {
        self.pending
            .iter()
            .any(|op| matches!(op.kind, OpKind::Create { child, .. } if child == ino))
    }

    /// Whether every change up to the count `changes` is durable in an entry (a volume
    /// without a journal has none).
    pub fn covers(&self, changes: u64) -> bool {
        self.blocks > 0 && changes == self.durable
    }

    /// Whether every change up to the count `changes` is durable in an entry or can be one:
    /// noted, and no failure since asks for a checkpoint.
    pub fn may_hold(&self, changes: u64) -> bool {
        self.blocks > 0 && !self.must_checkpoint && changes == self.mark
    }

    /// Whether the next commit must be a checkpoint (after a failure).
    pub fn checkpoint_required(&self) -> bool {
        self.must_checkpoint
    }

    /// Sets whether the next commit must be a checkpoint.
    pub fn require_checkpoint(&mut self, on: bool) {
        self.must_checkpoint = on;
    }

    /// The operations since the last durable point, taken out to be rewritten (packed,
    /// framed) and given back with [`Journal::put_back`].
    pub fn take_pending(&mut self) -> Vec<Op> {
        core::mem::take(&mut self.pending)
    }

    /// Gives back the operations [`Journal::take_pending`] took, rewritten: they encode to
    /// no more than they did.
    pub fn put_back(&mut self, ops: Vec<Op>) {
        self.pending = ops;
    }

    /// The data runs released since the last durable point, with their files.
    pub fn take_released(&mut self) -> Vec<(Ino, (u64, u64))> {
        core::mem::take(&mut self.released)
    }

    /// The blocks held for frames no durable entry counts yet, with their files.
    pub fn take_held(&mut self) -> Vec<(Ino, u64)> {
        core::mem::take(&mut self.held)
    }

    /// Block `k`, freed by frames of `ino`, waits for an entry counting them.
    pub fn hold(&mut self, ino: Ino, k: u64) {
        self.held.push((ino, k));
    }

    /// A freed block waits for the checkpoint because this epoch's replay reads it.
    pub fn pin_for_replay(&mut self) {
        self.replay_pinned += 1;
    }

    /// The time of the operation running under [`Fs::journaled`] or being replayed, if one
    /// is: every time it sets is this one, so its replay sets the same.
    pub fn op_time(&self) -> Option<Timespec> {
        self.op_time
    }

    /// Sets the running operation's time (`None`: none runs); returns the one before.
    pub fn set_op_time(&mut self, time: Option<Timespec>) -> Option<Timespec> {
        core::mem::replace(&mut self.op_time, time)
    }

    /// Whether the mount is replaying the entries: nothing commits meanwhile.
    pub fn replaying(&self) -> bool {
        self.replaying
    }

    /// Whether the replay of this epoch may read blocks `ino` frees: it replays small
    /// writes to the file, and each reads the block it lands in.
    pub fn rereads(&self, ino: Ino) -> bool {
        self.rewritten.contains(&ino)
    }

    /// Runs of freed blocks kept in RAM until the next durable point or checkpoint.
    pub fn freed_runs(&self) -> usize {
        self.released.len() + self.held.len()
    }

    /// Freed blocks that wait only for the replay or for a count of frames.
    pub fn waiting(&self) -> u64 {
        self.replay_pinned + self.held.len() as u64
    }

    /// The files that released runs or hold blocks since the last durable point: their
    /// frames need counting in the next entry.
    pub fn owing_files(&self) -> BTreeSet<Ino> {
        let released = self.released.iter().map(|&(ino, _)| ino);
        released
            .chain(self.held.iter().map(|&(ino, _)| ino))
            .collect()
    }

    /// The journal blocks holding entries of this epoch.
    pub fn blocks_in_epoch(&self) -> impl Iterator<Item = u64> + '_ {
        (1..)
            .zip(&self.in_epoch)
            .filter(|(_, &b)| b)
            .map(|(k, _)| k)
    }

    /// What the journal did since mount.
    pub fn counts(&self) -> JournalCounts {
        JournalCounts {
            entries: self.entries,
            frame_commits: self.frame_commits,
            entry_bytes: self.entry_bytes,
            block_writes: self.block_writes,
            replayed: self.replayed,
        }
    }

    /// A block that holds nothing of this epoch, to start, or `None` if all do.
    pub fn free_block(&self) -> Option<u64> {
        let i = self.in_epoch.iter().position(|&b| !b)?;
        Some(i as u64 + 1)
    }
}

impl<D: Segments> Fs<D> {
    /// Runs `f`, a record operation on `ino` (or a read's access-time update), and notes it
    /// for the journal as `kind(result)` if every change since the last durable point is
    /// noted too. `f` takes its timestamps from [`Fs::now`], which gives the one time noted.
    pub(super) fn journaled<R>(
        &mut self,
        ino: Ino,
        kind: impl FnOnce(&R) -> OpKind,
        f: impl FnOnce(&mut Self) -> Result<R>,
    ) -> Result<R> {
        if self.journal.op_time.is_some() {
            // Inside another journaled operation, or replaying: that one is what counts.
            return f(self);
        }
        let before = self.changes();
        let noting = self.journal.blocks > 0 && before == self.journal.mark;
        let commits = self.counts.commits();
        self.journal.op_time = Some(self.now());
        let result = f(self);
        self.note_released(ino);
        let time = self.journal.op_time.take();
        let changed = self.changes() != before;
        // A checkpoint during `f` (the dirty budget) holds the operation already.
        if noting && changed && self.counts.commits() == commits {
            if let (Some(time), Ok(r)) = (time, &result) {
                let op = Op {
                    ino,
                    time,
                    kind: kind(r),
                };
                self.journal
                    .note(op, self.changes(), self.sb.block_size as usize);
            }
        }
        result
    }

    /// Notes the data runs released since the last call as `ino`'s operation's.
    pub(super) fn note_released(&mut self, ino: Ino) {
        let runs = self.tree.store_mut().space.take_released();
        self.journal
            .released
            .extend(runs.into_iter().map(|r| (ino, r)));
    }

    /// The part's word, which programs in place start and end on: a power of two up to
    /// [`MAX_ALIGN`] (that, for a device that names no such word).
    pub(super) fn patch_align(&self) -> usize {
        let word = self.tree.store().ftl.log().device().patch_align() as usize;
        if word.is_power_of_two() && word <= MAX_ALIGN {
            word
        } else {
            MAX_ALIGN
        }
    }

    /// Writes the pending operations as one journal entry; false if they cannot be one
    /// (no journal, other changes, not enough blocks left this epoch, a program that did
    /// not take), and the caller checkpoints instead. The entry goes after the previous one
    /// in the tail block and, as far as it does not fit there, in fragments filling fresh
    /// blocks; its last fragment is the commit point.
    pub(super) fn journal_commit(&mut self) -> Result<bool> {
        let j = &self.journal;
        if j.blocks == 0 || j.must_checkpoint || j.pending.is_empty() || self.changes() != j.mark {
            return Ok(false);
        }
        // Blocks of records the pending adds complete go to data blocks now, and the entry
        // names them instead of holding their bytes.
        self.pack_pending()?;
        // So do blocks whose whole content small writes made.
        self.pack_writes()?;
        // Other records added go after the frames of their file's append block.
        self.append_pending()?;
        self.journal.mark = self.changes();
        if self.journal.pending.is_empty() {
            // Every operation committed itself by its frame.
            self.journal.settled();
            self.journal.frame_commits += 1;
            return Ok(true);
        }
        // Whether the replay, after this entry, comes to the end of each file's block: it
        // does after a record framed there, and forgets the block after a record added
        // otherwise or removed from the end (its frame would be stale).
        let marks: Vec<(Ino, bool)> = self
            .journal
            .pending
            .iter()
            .filter_map(|op| match op.kind {
                OpKind::AddAppended { .. } | OpKind::AddAt { .. } | OpKind::AddSpanned { .. } => {
                    Some((op.ino, true))
                }
                OpKind::Add(_) | OpKind::RemoveLast | OpKind::AddPacked { .. } => {
                    Some((op.ino, false))
                }
                _ => None,
            })
            .collect();
        // Fresh blocks align entries to the part's word: every byte of padding is a byte
        // of flash worn for nothing, and most entries are a few dozen bytes.
        let align = self.patch_align();
        let j = &self.journal;
        let block_size = self.sb.block_size as usize;
        let last_time = j.pending[j.pending.len() - 1].time;
        // The entry starts in the tail if it fits there or the tail has more than a sliver
        // left, relative to the tail's last operation; otherwise in a fresh block, relative
        // to its base (the entry's last operation).
        let tail_cap = j
            .tail
            .map_or(0, |t| fragment_cap(block_size - t.offset, t.header.align));
        let in_tail = j.tail.and_then(|t| encode_ops(&j.pending, t.time));
        let (ops, head) = match in_tail {
            Some(ops) if tail_cap >= ops.len() || tail_cap >= 64 => {
                let head = tail_cap.min(ops.len());
                (ops, head)
            }
            _ => match encode_ops(&j.pending, last_time) {
                Some(ops) => (ops, 0),
                None => return Ok(false),
            },
        };
        // Nothing is written unless the blocks the rest needs are all free.
        let fresh_cap = fragment_cap(block_size - HEADER_LEN, align);
        let fresh = (ops.len() - head).div_ceil(fresh_cap);
        if fresh > j.in_epoch.iter().filter(|&&b| !b).count() {
            return Ok(false);
        }
        let mut bytes = 0;
        let mut rest = &ops[..];
        if let Some(t) = j.tail.filter(|_| head > 0) {
            let (part, more) = rest.split_at(head);
            let f = encode_fragment(&t.header, t.offset, part, !more.is_empty());
            let store = self.tree.store_mut();
            match store.patch_sector(t.block, t.offset, &f) {
                Ok(()) => {}
                // A program that did not take (caught by reading back): the fragment may
                // be half there, and the checkpoint the caller writes instead covers it.
                Err(Error::Flash(flash::FlashError::ProgramFailed { .. })) => {
                    self.journal.tail = None;
                    return Ok(false);
                }
                // The tail block was lost to damage the cleaner met: the checkpoint the
                // caller writes instead ends the epoch it belongs to.
                Err(Error::Damaged(_)) => {
                    self.journal.tail = None;
                    return Ok(false);
                }
                Err(e) => return Err(e),
            }
            self.journal.tail = Some(Tail {
                offset: t.offset + f.len(),
                time: last_time,
                ..t
            });
            bytes += f.len();
            rest = more;
        }
        while !rest.is_empty() {
            let block = self.journal.free_block().ok_or(Error::NoSpace)?;
            let (part, more) = rest.split_at(rest.len().min(fresh_cap));
            // The base of the entries that start in this block: this entry is relative to
            // the time before it, and the next to its last operation.
            let header = BlockHeader {
                epoch: self.journal.epoch,
                index: self.journal.next_index,
                base: last_time,
                align,
            };
            let f = encode_fragment(&header, HEADER_LEN, part, !more.is_empty());
            self.buf.fill(0xFF);
            header.encode(&mut self.buf);
            self.buf[HEADER_LEN..HEADER_LEN + f.len()].copy_from_slice(&f);
            self.tree
                .store_mut()
                .ftl
                .write_to(block, &self.buf, Some(Head::Meta))?;
            let patchable = self.tree.store().ftl.can_patch();
            let j = &mut self.journal;
            j.in_epoch[block as usize - 1] = true;
            j.next_index += 1;
            j.block_writes += 1;
            // Where written bytes cannot be programmed again, the next entry starts a block.
            j.tail = patchable.then_some(Tail {
                block,
                header,
                offset: HEADER_LEN + f.len(),
                time: last_time,
            });
            bytes += f.len();
            rest = more;
        }
        self.tree.store_mut().ftl.flush()?;
        self.journal.written(bytes);
        for (ino, replayable) in marks {
            self.tails.set_replayable(ino, replayable);
        }
        Ok(true)
    }

    /// Replays the entries written after the last checkpoint onto the working version (the
    /// checkpoint's index, just opened); returns the operations replayed. The journal then
    /// has no tail: the next entry starts a block.
    pub(super) fn replay_journal(&mut self) -> Result<u64> {
        let blocks = u32::from(self.sb.journal_blocks);
        let counters = core::mem::take(&mut self.journal);
        self.journal = Journal {
            entries: counters.entries,
            frame_commits: counters.frame_commits,
            entry_bytes: counters.entry_bytes,
            block_writes: counters.block_writes,
            replayed: counters.replayed,
            ..Journal::new(blocks, self.sb.commit)
        };
        let mut found: Vec<(u32, u64)> = Vec::new();
        let mut dead = Vec::new();
        let mut buf = alloc::vec![0u8; self.sb.block_size as usize];
        for b in 1..=u64::from(blocks) {
            self.tree.store_mut().read(b, &mut buf)?;
            match BlockHeader::decode(&buf) {
                Some(h) if h.epoch == self.sb.commit => found.push((h.index, b)),
                // An earlier epoch's, or a later one whose checkpoint was lost: dead, and
                // let go so the cleaner does not copy it.
                h => {
                    if let Some(h) = h.filter(|h| h.epoch > self.sb.commit) {
                        self.journal.lost_epoch = self.journal.lost_epoch.max(h.epoch);
                    }
                    dead.push(b);
                }
            }
        }
        self.tree.store_mut().let_go(&dead)?;
        found.sort_unstable();
        if found.windows(2).any(|w| w[0].0 == w[1].0) {
            return Err(Error::Corrupt("two journal blocks with one place"));
        }
        let mut replayed = 0;
        // Per file, where the entries have come to in its newest append block.
        let mut tails: BTreeMap<Ino, ReplayTail> = BTreeMap::new();
        self.journal.replaying = true;
        // Small writes are replayed after every other operation: they take new blocks, and
        // taken earlier they could take a block a later entry names, or one the records'
        // replay reads, which the checkpoint leaves free. They change regular files only,
        // whose other journaled operations set access times alone, so the result is the
        // same as in the order they ran. Blocks small writes made whole
        // ([`OpKind::WriteBlock`]) are claimed in the first pass, with the blocks other
        // entries name, and mapped in the second, in their place among the small writes.
        // The second pass reads the blocks again only if the first met a small write.
        let result = (|| -> Result<()> {
            let mut writes = 0u64;
            self.for_each_op(&found, &mut buf, |fs, op| {
                match op.kind {
                    OpKind::Write { .. } => writes += 1,
                    OpKind::WriteBlock { block, sector, .. } => {
                        writes += 1;
                        fs.claim_written_block(op.ino, block, sector)
                            .map_err(damage)?;
                    }
                    _ => replayed += fs.replay_op(op, &mut tails)?,
                }
                Ok(())
            })?;
            // Records that committed themselves after the last entry on their file come
            // last.
            for (ino, mut tail) in tails {
                replayed += self.replay_framed(ino, &mut tail, None).map_err(damage)?;
            }
            if writes > 0 {
                // The log holds the data of the sectors the session forgot again, and the
                // small writes take new space: where the log is short of room for them,
                // what no entry named is forgotten first, so they find the room they found
                // as they ran. Otherwise that is left to the sweep (`sweep`): the look
                // reads every map page holding data.
                let store = self.tree.store_mut();
                if !store.ftl.log().has_room(writes.saturating_mul(2)) {
                    store.forget_free()?;
                }
                let mut none = BTreeMap::new();
                self.for_each_op(&found, &mut buf, |fs, op| {
                    if matches!(op.kind, OpKind::Write { .. } | OpKind::WriteBlock { .. }) {
                        replayed += fs.replay_op(op, &mut none)?;
                    }
                    Ok(())
                })?;
            }
            Ok(())
        })();
        self.journal.replaying = false;
        result?;
        // Blocks the replay freed wait for the checkpoint that follows a mount.
        self.tree.store_mut().space.take_released();
        let changes = self.changes();
        let j = &mut self.journal;
        for &(i, b) in &found {
            j.in_epoch[b as usize - 1] = true;
            j.next_index = j.next_index.max(i.saturating_add(1));
        }
        j.replayed += replayed;
        j.mark = changes;
        j.durable = changes;
        Ok(replayed)
    }

    /// Calls `f` with each operation of the committed entries in the epoch's blocks `found`
    /// (place in the epoch, block), in order. An entry still going on when the blocks end
    /// was never committed. Each block is read again rather than kept from the scan, and
    /// one entry is decoded at a time: RAM for a block and an entry, not a journal's worth.
    fn for_each_op(
        &mut self,
        found: &[(u32, u64)],
        buf: &mut [u8],
        mut f: impl FnMut(&mut Self, &Op) -> Result<()>,
    ) -> Result<()> {
        // An entry begun in an earlier block: its bytes so far, and the time its first
        // operation is relative to.
        let mut carry: Option<(Vec<u8>, Timespec)> = None;
        let mut prev: Option<u32> = None;
        for &(index, b) in found {
            if carry.is_some() && prev.and_then(|i| i.checked_add(1)) != Some(index) {
                break;
            }
            prev = Some(index);
            self.tree.store_mut().read(b, buf)?;
            let h = BlockHeader::decode(buf).ok_or(Error::Corrupt("journal block changed"))?;
            let (fragments, _) = decode_fragments(&h, buf);
            if carry.is_some() && fragments.is_empty() {
                break;
            }
            // Entries that start in a block are relative to the one before them in it, the
            // first to the block's base.
            let mut time = h.base;
            for (part, continued) in fragments {
                let (mut bytes, base) = carry.take().unwrap_or((Vec::new(), time));
                bytes.extend_from_slice(part);
                if continued {
                    carry = Some((bytes, base));
                    continue;
                }
                let ops = decode_ops(&bytes, base)?;
                time = ops.last().map_or(base, |o| o.time);
                for op in &ops {
                    f(self, op)?;
                }
            }
        }
        Ok(())
    }

    /// Applies one journaled operation as it ran; `tails` follows where each file's
    /// entries have come to in its newest append block. Returns the record operations
    /// applied (an [`OpKind::Framed`] applies its count).
    fn replay_op(&mut self, op: &Op, tails: &mut BTreeMap<Ino, ReplayTail>) -> Result<u64> {
        self.journal.op_time = Some(op.time);
        let ino = op.ino;
        let result = match &op.kind {
            OpKind::Add(d) => self.record_add(ino, d).map(|_| 1),
            OpKind::Update(n, d) => self.record_update(ino, *n, d).map(|_| 1),
            OpKind::RemoveFirst { len: None } => self.record_remove_first(ino).map(|_| 1),
            &OpKind::RemoveFirst { len: Some(len) } => self.remove_first_known(ino, len).map(|_| 1),
            OpKind::RemoveLast => self.record_remove_last(ino).map(|_| 1),
            OpKind::Atime => self.inode(ino).and_then(|mut i| {
                i.atime = op.time;
                self.put_inode(ino, &i).map(|_| 1)
            }),
            &OpKind::AddPacked { sector, count } => {
                self.replay_packed(ino, sector, count).map(|_| 1)
            }
            // The frames that committed themselves before it come first.
            OpKind::AddAppended { .. } | OpKind::AddAt { .. } | OpKind::AddSpanned { .. } => {
                let tail = tails.remove(&ino);
                self.replay_appended(ino, &op.kind, tail, op.time)
                    .map(|(applied, after)| {
                        if let Some(t) = after {
                            tails.insert(ino, t);
                        }
                        applied
                    })
            }
            OpKind::Write { offset, data } => self.write(ino, *offset, data).map(|_| 1),
            &OpKind::WriteBlock { block, sector, len } => self
                .replay_written_block(ino, block, sector, len)
                .map(|_| 1),
            OpKind::Create {
                name,
                mode,
                uid,
                gid,
                child,
            } => self.create(ino, name, *mode, *uid, *gid).and_then(|a| {
                if a.ino == *child {
                    Ok(1)
                } else {
                    Err(Error::Corrupt(
                        "a journaled create replays to another inode",
                    ))
                }
            }),
            &OpKind::Framed { count } => match tails.get_mut(&ino) {
                Some(tail) => self.replay_framed(ino, tail, Some(count)),
                None => Err(Error::Corrupt(
                    "a journal entry counts frames in no append block",
                )),
            },
        };
        self.journal.op_time = None;
        let applied = result.map_err(damage)?;
        match op.kind {
            // Records after these are not framed in that block: its next frames, if any,
            // are not theirs (the writer's [`Tails::set_replayable`] follows this).
            OpKind::Add(_) | OpKind::RemoveLast | OpKind::AddPacked { .. } => {
                tails.remove(&ino);
            }
            _ => {
                if let Some(t) = tails.get_mut(&ino) {
                    t.time = op.time;
                }
            }
        }
        Ok(applied)
    }
}

/// An error replaying the journal: damage, unless the device failed or is full.
fn damage(e: Error) -> Error {
    match e {
        Error::Io | Error::Damaged(_) | Error::Flash(_) | Error::Corrupt(_) | Error::NoSpace => e,
        _ => Error::Corrupt("a journal entry does not apply to the index"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_commit_is_numbered_above_a_lost_epoch_and_saturates() {
        let mut j = Journal::new(8, 5);
        assert_eq!(j.next_commit(5), 6);
        j.lost_epoch = 9;
        assert_eq!(j.next_commit(5), 10);
        // Numbers read from flash at the end of their range do not overflow.
        j.lost_epoch = u64::MAX;
        assert_eq!(j.next_commit(5), u64::MAX);
        j.checkpointed(u64::MAX, 0);
        assert_eq!(j.next_commit(u64::MAX), u64::MAX);
    }
}
