//! Record files: regular files that hold numbered records instead of a byte array.
//!
//! A record file is a regular file with a head item ([`RecordHead`]): the records' fixed
//! size (or 0 for records of any length), the capacity of a cyclic file (or 0), and the
//! numbers `first..next` of the records it holds. Record numbers are given in order by
//! [`Fs::record_add`] and never reused, so a number names the same record for its whole
//! life, whatever is added or removed around it.
//!
//! A record is first its own index items, keyed by (inode, [`item::RECORD`], record number,
//! chunk number): the record's bytes in chunks of the index's largest value (a quarter node),
//! an empty record one empty chunk. A record of 40 bytes is one index item; an update
//! rewrites only that record's items, so a record may change length without touching the
//! rest of the file. A cyclic file of capacity N removes its oldest record in the same
//! operation that adds the (N+1)th.
//!
//! Fixed-size records whose size divides the block then move to data blocks, a block's
//! worth at a time, once no record can be added to the block: at a checkpoint, or at a
//! journal commit whose adds complete the block (which then writes the block and an entry
//! naming it instead of the records' bytes, so a log's records are written once). A record
//! with items is held by them; one without, by its block, which is freed when its last
//! record goes. Other records added by a journal commit are framed in their file's append
//! block instead (`append`). SPEC.md §8.4a and §8.5b.
//!
//! Every operation changes the head, the record's items and the inode (size and times) in
//! one working version of the index, so like every other operation it is entirely there or
//! entirely absent after a power cut.
//!
//! The file's size is the sum of its records' lengths, and [`Fs::read`] reads the records
//! concatenated, oldest first: tools see a record file as a plain file. Byte writes,
//! truncation and `fallocate` are refused (`EINVAL`): records change only by record
//! operations.

use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;

use super::layout::op::{Op, OpKind};
use super::layout::{
    item, key, record_key, record_suffix, split_key, Extent, FileType, Ino, Inode, RecordHead,
};
use super::{Attr, Fs};
use crate::error::{Error, Result};
use crate::ftl::BlockDevice;
use crate::media::Segments;

pub use super::layout::RECORD_MAX;

/// Blocks a cyclic record file's records take at most for its blocks to be written as
/// short-lived data (`Fs::short_lived`).
const SHORT_LIVED_BLOCKS: u64 = 2;

/// The shape of a record file's records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecordFormat {
    /// Bytes of every record (1 to [`RECORD_MAX`]), or 0 for records of any length up to
    /// [`RECORD_MAX`].
    pub record_size: u32,
    /// Records a cyclic file keeps: adding one more overwrites the oldest. 0: no bound.
    pub capacity: u32,
}

impl RecordFormat {
    /// Records of any length, as many as fit.
    pub const fn variable() -> Self {
        RecordFormat {
            record_size: 0,
            capacity: 0,
        }
    }

    /// Records of `size` bytes each, as many as fit.
    pub const fn fixed(size: u32) -> Self {
        RecordFormat {
            record_size: size,
            capacity: 0,
        }
    }

    /// A cyclic file of `capacity` records of `record_size` bytes each (0: any length).
    pub const fn cyclic(capacity: u32, record_size: u32) -> Self {
        RecordFormat {
            record_size,
            capacity,
        }
    }

    fn check(&self) -> Result<()> {
        if self.record_size as usize > RECORD_MAX {
            return Err(Error::TooBig);
        }
        Ok(())
    }
}

/// What a record file holds: its format and the numbers of its records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordInfo {
    /// The records' shape.
    pub format: RecordFormat,
    /// Number of the oldest record.
    pub first: u64,
    /// Number the next record added gets; the file holds records `first..next`.
    pub next: u64,
}

impl RecordInfo {
    /// Records held.
    pub fn count(&self) -> u64 {
        self.next - self.first
    }
}

impl<D: Segments> Fs<D> {
    /// The record head of `ino`, if it is a record file.
    pub(super) fn record_head(&mut self, ino: Ino) -> Result<Option<RecordHead>> {
        match self.tree.get(&key(ino, item::RECORDS))? {
            Some(v) => RecordHead::decode(&v).map(Some),
            None => Ok(None),
        }
    }

    /// A record file's inode and head; `InvalidArgument` for any other file.
    fn record_file(&mut self, ino: Ino) -> Result<(Inode, RecordHead)> {
        let inode = self.inode(ino)?;
        match inode.file_type()? {
            FileType::Regular => {}
            FileType::Directory => return Err(Error::IsDir),
            _ => return Err(Error::InvalidArgument("not a record file")),
        }
        let head = self
            .record_head(ino)?
            .ok_or(Error::InvalidArgument("not a record file"))?;
        Ok((inode, head))
    }

    /// Refuses a byte-level change of a record file.
    pub(super) fn refuse_records(&mut self, ino: Ino) -> Result<()> {
        if self.record_head(ino)?.is_some() {
            return Err(Error::InvalidArgument(
                "a record file changes only by record operations",
            ));
        }
        Ok(())
    }

    /// Creates a record file named `name` in `dir`, in one operation.
    pub fn create_records(
        &mut self,
        dir: Ino,
        name: &[u8],
        format: RecordFormat,
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Attr> {
        format.check()?;
        let attr = self.new_inode(dir, name, FileType::Regular, mode, 0, uid, gid)?;
        self.put_head(attr.ino, format)?;
        self.maybe_commit()?;
        Ok(attr)
    }

    /// Makes the empty regular file `ino` a record file (for files named otherwise than by
    /// [`Fs::create_records`]: by an integer or a flat name).
    pub fn make_records(&mut self, ino: Ino, format: RecordFormat) -> Result<Attr> {
        format.check()?;
        let mut inode = self.inode(ino)?;
        match inode.file_type()? {
            FileType::Regular => {}
            FileType::Directory => return Err(Error::IsDir),
            _ => return Err(Error::InvalidArgument("not a regular file")),
        }
        if self.record_head(ino)?.is_some() {
            return Err(Error::InvalidArgument("already a record file"));
        }
        if inode.size != 0 || inode.blocks != 0 {
            return Err(Error::InvalidArgument(
                "only an empty file becomes a record file",
            ));
        }
        self.ensure_free(0)?;
        self.put_head(ino, format)?;
        inode.ctime = self.now();
        self.put_inode(ino, &inode)?;
        self.maybe_commit()?;
        self.attr(ino, inode)
    }

    fn put_head(&mut self, ino: Ino, format: RecordFormat) -> Result<()> {
        let head = RecordHead {
            record_size: format.record_size,
            capacity: format.capacity,
            first: 0,
            next: 0,
        };
        self.tree.insert(&key(ino, item::RECORDS), &head.encode())?;
        Ok(())
    }

    /// The format and record numbers of record file `ino`.
    pub fn record_info(&mut self, ino: Ino) -> Result<RecordInfo> {
        let (_, h) = self.record_file(ino)?;
        Ok(RecordInfo {
            format: RecordFormat {
                record_size: h.record_size,
                capacity: h.capacity,
            },
            first: h.first,
            next: h.next,
        })
    }

    /// Records that record file `ino` holds.
    pub fn records(&mut self, ino: Ino) -> Result<u64> {
        Ok(self.record_info(ino)?.count())
    }

    fn check_record(head: &RecordHead, data: &[u8]) -> Result<()> {
        if data.len() > RECORD_MAX {
            return Err(Error::TooBig);
        }
        if head.record_size != 0 && data.len() != head.record_size as usize {
            return Err(Error::InvalidArgument("record of the wrong length"));
        }
        Ok(())
    }

    /// The items (key, chunk) of record `n`.
    pub(super) fn record_items(&mut self, ino: Ino, n: u64) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let lo = record_key(ino, n, 0);
        let hi = match n.checked_add(1) {
            Some(m) => record_key(ino, m, 0),
            None => key(ino, item::RECORD + 1),
        };
        self.tree.range(lo..hi).collect()
    }

    /// Records per data block in a file whose records fill data blocks (fixed-size records
    /// of a size dividing the block); `None` for the others, whose records stay items.
    pub(super) fn per_block(&self, head: &RecordHead) -> Option<u64> {
        let size = u64::from(head.record_size);
        (size > 0 && self.bs() % size == 0).then(|| self.bs() / size)
    }

    /// Whether a record file's blocks are short-lived: a cyclic file whose records take at
    /// most [`SHORT_LIVED_BLOCKS`] blocks, so that each of its blocks dies within a few
    /// blocks' worth of the file's adds (a phone's call log). A cyclic file of more (an
    /// event log sized to the device, a history of 200 faxes) lives as long as other data.
    pub(super) fn short_lived(&mut self, ino: Ino, head: &RecordHead) -> Result<bool> {
        if head.capacity == 0 {
            return Ok(false);
        }
        let bytes = match head.record_size {
            0 => self.inode(ino)?.size,
            s => u64::from(head.capacity) * u64::from(s),
        };
        Ok(bytes <= SHORT_LIVED_BLOCKS * self.bs())
    }

    /// Removes record `n`'s items, if it has any; returns its length: from the items, the
    /// file's record size, `known`, or else its frame (`replayed`: the operation's replay
    /// reads the frame too).
    fn drop_record(
        &mut self,
        ino: Ino,
        head: &RecordHead,
        n: u64,
        known: Option<u64>,
        replayed: bool,
    ) -> Result<u64> {
        let items = self.record_items(ino, n)?;
        if items.is_empty() {
            // Held in its data block or append block, which the caller frees once no record
            // is left in it. Every record has an item (an empty one a single empty chunk)
            // unless it is in a block.
            if self.per_block(head).is_some() {
                return Ok(u64::from(head.record_size));
            }
            return match known {
                Some(len) => Ok(len),
                None => self.framed_len(ino, head, n, replayed),
            };
        }
        let mut len = 0;
        for (k, v) in items {
            len += v.len() as u64;
            self.tree.remove(&k)?;
        }
        Ok(len)
    }

    /// Frees the data block that held record `n` if none of `head`'s records is left in it.
    fn release_record_block(
        &mut self,
        ino: Ino,
        inode: &mut Inode,
        head: &RecordHead,
        n: u64,
    ) -> Result<()> {
        let Some(pb) = self.per_block(head) else {
            return self.release_append_block(ino, inode, head, n);
        };
        let b = n / pb;
        let (lo, hi) = (b * pb, (b * pb).saturating_add(pb));
        if head.first.max(lo) < head.next.min(hi) {
            return Ok(());
        }
        let freed = self.unmap(ino, b, b + 1)?;
        self.release_runs(inode, &freed);
        Ok(())
    }

    /// Records `n0..n1` of a record file (within `first..next`), oldest first: from their
    /// items, or else from the data block or append block holding them.
    fn records_in(
        &mut self,
        ino: Ino,
        head: &RecordHead,
        n0: u64,
        n1: u64,
    ) -> Result<Vec<(u64, Vec<u8>)>> {
        let missing = Error::Corrupt("a record of a record file is missing");
        let mut items: Vec<(u64, Vec<u8>)> = Vec::new();
        for entry in self
            .tree
            .range(record_key(ino, n0, 0)..record_key(ino, n1, 0))
        {
            let (k, v) = entry?;
            let (_, _, rest) = split_key(&k)?;
            let (n, _) = record_suffix(rest)?;
            match items.last_mut() {
                Some((m, data)) if *m == n => data.extend_from_slice(&v),
                _ => items.push((n, v)),
            }
        }
        if items.len() as u64 == n1 - n0 {
            return Ok(items);
        }
        let Some(pb) = self.per_block(head) else {
            return self.records_appended(ino, head, n0, n1, items);
        };
        let size = head.record_size as usize;
        let mut items = items.into_iter().peekable();
        let mut block: Option<(u64, Vec<u8>)> = None;
        let mut out = Vec::new();
        for n in n0..n1 {
            if let Some(item) = items.next_if(|(m, _)| *m == n) {
                out.push(item);
                continue;
            }
            let b = n / pb;
            let data = match &block {
                Some((c, data)) if *c == b => data,
                _ => {
                    let Some((sector, false)) = self.mapping(ino, b, b + 1)?[0] else {
                        return Err(missing);
                    };
                    let mut data = vec![0u8; self.bs() as usize];
                    self.tree.store_mut().read(sector, &mut data)?;
                    &block.insert((b, data)).1
                }
            };
            let at = (n % pb) as usize * size;
            out.push((n, data[at..at + size].to_vec()));
        }
        Ok(out)
    }

    /// Moves the complete blocks of records of the files noted since the last checkpoint out
    /// of the index into data blocks. A checkpoint calls it before writing the index; not
    /// while a transaction is open (its view of the records must not move under it).
    pub(super) fn pack_records(&mut self) -> Result<()> {
        if self.transactions() > 0 {
            return Ok(());
        }
        for ino in core::mem::take(&mut self.pack) {
            let Some(head) = self.record_head(ino)? else {
                continue;
            };
            let Some(pb) = self.per_block(&head) else {
                continue;
            };
            // Blocks below `full` take no more records.
            let full = (head.next / pb).min(self.max_file_size() / self.bs());
            if head.first >= full * pb {
                continue;
            }
            let mut blocks: Vec<u64> = Vec::new();
            let (lo, hi) = (
                record_key(ino, head.first, 0),
                record_key(ino, full * pb, 0),
            );
            for entry in self.tree.range(lo..hi) {
                let (k, _) = entry?;
                let (_, _, rest) = split_key(&k)?;
                let b = record_suffix(rest)?.0 / pb;
                if blocks.last() != Some(&b) {
                    blocks.push(b);
                }
            }
            for b in blocks {
                if self.pack_block(ino, &head, pb, b)?.is_none() {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Writes the live records of block `b` of a record file into a new data block, maps
    /// it and removes their items; returns the block's sector, or `None` (nothing done) when
    /// no sector is free beyond the reserve for index nodes.
    fn pack_block(&mut self, ino: Ino, head: &RecordHead, pb: u64, b: u64) -> Result<Option<u64>> {
        if self.tree.store().space.free() <= self.reserve {
            return Ok(None);
        }
        let (n0, n1) = block_span(head, pb, b);
        let size = head.record_size as usize;
        let mut block = vec![0u8; self.bs() as usize];
        for (n, data) in self.records_in(ino, head, n0, n1)? {
            if data.len() != size {
                return Err(Error::Corrupt("a record of the wrong length"));
            }
            let at = (n - b * pb) as usize * size;
            block[at..at + size].copy_from_slice(&data);
        }
        let Some((sector, _)) = self.tree.store_mut().space.alloc(1) else {
            return Ok(None);
        };
        let hot = self.short_lived(ino, head)?;
        let store = self.tree.store_mut();
        let written = match hot {
            false => store.write_data(sector, &block),
            true => store.write_short_lived(sector, &block),
        };
        if let Err(e) = written {
            self.undo_alloc(&[(sector, 1)]);
            return Err(e);
        }
        self.map_block(ino, head, pb, b, sector)?;
        Ok(Some(sector))
    }

    /// Makes the data block at `sector` hold block `b` of a record file: removes the items
    /// of its live records and maps it there, freeing the block it replaces.
    fn map_block(
        &mut self,
        ino: Ino,
        head: &RecordHead,
        pb: u64,
        b: u64,
        sector: u64,
    ) -> Result<()> {
        let (n0, n1) = block_span(head, pb, b);
        let items: Vec<Vec<u8>> = self
            .tree
            .range(record_key(ino, n0, 0)..record_key(ino, n1.max(n0), 0))
            .map(|e| e.map(|(k, _)| k))
            .collect::<Result<_>>()?;
        for k in items {
            self.tree.remove(&k)?;
        }
        let mut inode = self.inode(ino)?;
        self.map_written_block(ino, &mut inode, b, sector)?;
        self.put_inode(ino, &inode)
    }

    /// Before a journal entry is written: in every record file whose pending operations
    /// are all adds, writes the blocks those adds complete into data blocks, and replaces
    /// each block's adds in the entry with one [`OpKind::AddPacked`] naming it, at the
    /// place and time of the last of them. The records' bytes are then written once, in
    /// their block, rather than in the entry and again at the checkpoint.
    pub(super) fn pack_pending(&mut self) -> Result<()> {
        if self.transactions() > 0 {
            return Ok(());
        }
        // For each file packed: the first pending add's number, records per block, and the
        // sector of each block written.
        let mut packed: BTreeMap<Ino, (u64, u64, BTreeMap<u64, u64>)> = BTreeMap::new();
        for (ino, k) in self.journal.adds_by_file(|_| false) {
            let Some(head) = self.record_head(ino)? else {
                continue;
            };
            let Some(pb) = self.per_block(&head) else {
                continue;
            };
            let first_add = head.next.saturating_sub(k);
            let full = (head.next / pb).min(self.max_file_size() / self.bs());
            let mut sectors = BTreeMap::new();
            for b in first_add / pb..full {
                // A block whose records a cyclic file has already dropped again.
                if head.first >= b * pb + pb {
                    continue;
                }
                match self.pack_block(ino, &head, pb, b)? {
                    Some(sector) => sectors.insert(b, sector),
                    None => break,
                };
            }
            if !sectors.is_empty() {
                packed.insert(ino, (first_add, pb, sectors));
            }
        }
        if packed.is_empty() {
            return Ok(());
        }
        // The blocks are durable before the entry that names them.
        self.tree.store_mut().ftl.flush()?;
        let pending = self.journal.take_pending();
        let mut next: BTreeMap<Ino, u64> = packed.iter().map(|(&i, p)| (i, p.0)).collect();
        let mut out = Vec::with_capacity(pending.len());
        for op in pending {
            let place = match (&op.kind, packed.get(&op.ino), next.get_mut(&op.ino)) {
                (OpKind::Add(_), Some((first_add, pb, sectors)), Some(n)) => {
                    let (m, pb) = (*n, *pb);
                    *n += 1;
                    let (lo, hi) = (m / pb * pb, m / pb * pb + pb);
                    sectors
                        .get(&(m / pb))
                        .map(|&sector| (sector, m + 1 == hi, hi - lo.max(*first_add)))
                }
                _ => None,
            };
            match place {
                None => out.push(op),
                // The block's last record: its one operation for the block's pending adds.
                Some((sector, true, count)) => out.push(Op {
                    kind: OpKind::AddPacked { sector, count },
                    ..op
                }),
                Some(_) => {}
            }
        }
        self.journal.put_back(out);
        Ok(())
    }

    /// Replays an [`OpKind::AddPacked`]: `count` adds, which must end a block, and then the
    /// data block at `sector` made that block. The adds' own bytes do not matter: the block
    /// holds the records, and mapping it removes the items the adds made.
    pub(super) fn replay_packed(&mut self, ino: Ino, sector: u64, count: u64) -> Result<()> {
        let bad = || Error::Corrupt("a journal entry names a data block that does not apply");
        let (_, head) = self.record_file(ino)?;
        let pb = self.per_block(&head).ok_or_else(bad)?;
        let end = head.next.checked_add(count).ok_or_else(bad)?;
        if count == 0 || count > pb || end % pb != 0 || sector >= self.sb.sectors {
            return Err(bad());
        }
        let zeros = vec![0u8; head.record_size as usize];
        for _ in 0..count {
            self.add(ino, &zeros)?;
        }
        if !self.tree.store_mut().space.claim(sector) {
            return Err(bad());
        }
        let (_, head) = self.record_file(ino)?;
        self.map_block(ino, &head, pb, end / pb - 1, sector)
    }

    fn put_record(&mut self, ino: Ino, n: u64, data: &[u8]) -> Result<()> {
        let per = self.tree.max_value_len();
        if data.is_empty() {
            self.tree.insert(&record_key(ino, n, 0), &[])?;
        }
        for (i, part) in data.chunks(per).enumerate() {
            let c = u16::try_from(i).map_err(|_| Error::TooBig)?;
            self.tree.insert(&record_key(ino, n, c), part)?;
        }
        Ok(())
    }

    /// Writes the head, and the inode after records of `removed` bytes gave way to records
    /// of `added` bytes; commits if the working version has grown to the budget.
    fn finish_change(
        &mut self,
        ino: Ino,
        mut inode: Inode,
        head: &RecordHead,
        removed: u64,
        added: u64,
    ) -> Result<()> {
        self.tree.insert(&key(ino, item::RECORDS), &head.encode())?;
        let now = self.now();
        inode.size = inode.size.saturating_sub(removed) + added;
        inode.mtime = now;
        inode.ctime = now;
        self.put_inode(ino, &inode)?;
        self.counts.wrote(added);
        self.maybe_commit()
    }

    /// Adds a record after the newest; returns its number. A full cyclic file loses its
    /// oldest record in the same operation.
    pub fn record_add(&mut self, ino: Ino, data: &[u8]) -> Result<u64> {
        self.journaled(ino, |_| OpKind::Add(data.to_vec()), |fs| fs.add(ino, data))
    }

    pub(super) fn add(&mut self, ino: Ino, data: &[u8]) -> Result<u64> {
        let (mut inode, mut head) = self.record_file(ino)?;
        Self::check_record(&head, data)?;
        if head.next == u64::MAX {
            return Err(Error::TooBig);
        }
        self.ensure_free(0)?;
        let mut removed = 0;
        if head.capacity > 0 && head.next - head.first >= u64::from(head.capacity) {
            let gone = head.first;
            removed = self.drop_record(ino, &head, gone, None, true)?;
            head.first += 1;
            self.release_record_block(ino, &mut inode, &head, gone)?;
        }
        let n = head.next;
        self.put_record(ino, n, data)?;
        head.next += 1;
        if self.per_block(&head).is_some() {
            self.pack.insert(ino);
        }
        self.finish_change(ino, inode, &head, removed, data.len() as u64)?;
        Ok(n)
    }

    /// Record `n` of record file `ino` (`NotFound` unless `first <= n < next`).
    pub fn record_read(&mut self, ino: Ino, n: u64) -> Result<Vec<u8>> {
        let (inode, head) = self.record_file(ino)?;
        if !(head.first..head.next).contains(&n) {
            return Err(Error::NotFound);
        }
        let (_, data) = self
            .records_in(ino, &head, n, n + 1)?
            .pop()
            .ok_or(Error::Corrupt("a record of a record file is missing"))?;
        self.touch_atime(ino, inode)?;
        Ok(data)
    }

    /// Every record of record file `ino`, oldest first, with its number.
    pub fn record_list(&mut self, ino: Ino) -> Result<Vec<(u64, Vec<u8>)>> {
        let (inode, head) = self.record_file(ino)?;
        let out = self.records_in(ino, &head, head.first, head.next)?;
        self.touch_atime(ino, inode)?;
        Ok(out)
    }

    /// Replaces record `n` with `data`, which may have another length (in a file of
    /// variable-length records): only that record's items are rewritten.
    pub fn record_update(&mut self, ino: Ino, n: u64, data: &[u8]) -> Result<()> {
        self.journaled(
            ino,
            |_| OpKind::Update(n, data.to_vec()),
            |fs| fs.update(ino, n, data),
        )
    }

    fn update(&mut self, ino: Ino, n: u64, data: &[u8]) -> Result<()> {
        let (inode, head) = self.record_file(ino)?;
        Self::check_record(&head, data)?;
        if !(head.first..head.next).contains(&n) {
            return Err(Error::NotFound);
        }
        self.ensure_free(0)?;
        // A record held in a data block is overridden by its new items until the next
        // checkpoint writes the block again.
        let removed = self.drop_record(ino, &head, n, None, true)?;
        self.put_record(ino, n, data)?;
        if self.per_block(&head).is_some() {
            self.pack.insert(ino);
        }
        self.finish_change(ino, inode, &head, removed, data.len() as u64)
    }

    /// Removes the oldest record (`NotFound` if there is none).
    pub fn record_remove_first(&mut self, ino: Ino) -> Result<()> {
        let kind = |&len: &u64| OpKind::RemoveFirst { len: Some(len) };
        self.journaled(ino, kind, |fs| fs.remove_first(ino, None))
            .map(drop)
    }

    /// Replays the removal of the oldest record, whose length the journal gives.
    pub(super) fn remove_first_known(&mut self, ino: Ino, len: u64) -> Result<()> {
        self.remove_first(ino, Some(len)).map(drop)
    }

    /// Removes the oldest record, of length `known` if given; returns its length.
    fn remove_first(&mut self, ino: Ino, known: Option<u64>) -> Result<u64> {
        let (mut inode, mut head) = self.record_file(ino)?;
        if head.first == head.next {
            return Err(Error::NotFound);
        }
        let gone = head.first;
        // Its length goes in the journal: the replay need not read it.
        let removed = self.drop_record(ino, &head, gone, known, false)?;
        head.first += 1;
        self.release_record_block(ino, &mut inode, &head, gone)?;
        self.finish_change(ino, inode, &head, removed, 0)?;
        Ok(removed)
    }

    /// Removes the newest record (`NotFound` if there is none). Its number is given again
    /// by the next [`Fs::record_add`].
    pub fn record_remove_last(&mut self, ino: Ino) -> Result<()> {
        self.journaled(ino, |_| OpKind::RemoveLast, |fs| fs.remove_last(ino))
    }

    fn remove_last(&mut self, ino: Ino) -> Result<()> {
        let (mut inode, mut head) = self.record_file(ino)?;
        if head.first == head.next {
            return Err(Error::NotFound);
        }
        let gone = head.next - 1;
        let removed = self.drop_record(ino, &head, gone, None, true)?;
        head.next -= 1;
        self.release_record_block(ino, &mut inode, &head, gone)?;
        self.finish_change(ino, inode, &head, removed, 0)
    }

    /// For [`Fs::read`]: the bytes of a record file's records, concatenated oldest first,
    /// from `off` into `buf`; `None` if `ino` is not a record file.
    pub(super) fn read_record_stream(
        &mut self,
        ino: Ino,
        inode: &Inode,
        off: u64,
        buf: &mut [u8],
    ) -> Result<Option<usize>> {
        let Some(head) = self.record_head(ino)? else {
            return Ok(None);
        };
        if off >= inode.size {
            return Ok(Some(0));
        }
        let n = (buf.len() as u64).min(inode.size - off) as usize;
        let buf = &mut buf[..n];
        buf.fill(0);
        let end = off + n as u64;
        // Fixed-size records are found by arithmetic; others by walking them, a batch at a
        // time.
        let records = match u64::from(head.record_size) {
            0 => {
                let mut pos = 0u64;
                let mut out = Vec::new();
                let mut n = head.first;
                while pos < end && n < head.next {
                    let m = n.saturating_add(64).min(head.next);
                    for (_, v) in self.records_in(ino, &head, n, m)? {
                        let a = pos;
                        pos += v.len() as u64;
                        if pos > off && a < end {
                            out.push((a, v));
                        }
                    }
                    n = m;
                }
                out
            }
            size => {
                let (r0, r1) = (off / size, end.div_ceil(size));
                let n1 = head.first.saturating_add(r1).min(head.next);
                self.records_in(ino, &head, head.first + r0, n1)?
                    .into_iter()
                    .map(|(m, v)| ((m - head.first) * size, v))
                    .collect()
            }
        };
        for (a, v) in records {
            let b = a + v.len() as u64;
            if b <= off || a >= end {
                continue;
            }
            let (s, t) = (a.max(off), b.min(end));
            buf[(s - off) as usize..(t - off) as usize]
                .copy_from_slice(&v[(s - a) as usize..(t - a) as usize]);
        }
        Ok(Some(n))
    }
}

/// What `fsck` found in one inode's record items.
pub(super) struct Verified {
    /// The records' bytes, if the inode has a head.
    pub size: Option<u64>,
    /// What is wrong.
    pub problems: Vec<alloc::string::String>,
}

/// Checks a record file's items and data blocks for `fsck`: every record of `first..next`
/// there and no other, either as items (chunks numbered from 0 without gaps, none empty but
/// an empty record's only one, none over the index's largest value `per`) or, in a file
/// whose records fill data blocks of `block` bytes, in a written data block, or else in a
/// frame of an append block; records no longer than [`RECORD_MAX`] and of the fixed size if
/// the file has one; every data block or append block holding a record of the file.
/// `chunks` are (record, chunk, bytes) in key order, `extents` the file's extents by first
/// block, `framed` the (record, bytes) of the frames its append blocks hold for its records,
/// by record.
pub(super) fn verify(
    head: Option<&RecordHead>,
    chunks: &[(u64, u16, usize)],
    extents: &[(u64, Extent)],
    framed: &[(u64, usize)],
    per: usize,
    block: u64,
) -> Verified {
    use alloc::format;
    let mut problems = Vec::new();
    let Some(head) = head else {
        problems.push(alloc::string::String::from(
            "record items without a record file head",
        ));
        return Verified {
            size: None,
            problems,
        };
    };
    let size = u64::from(head.record_size);
    let pb = (size > 0 && block % size == 0).then(|| block / size);
    // Records `a..z`, without items: in written data blocks, or missing. The work is
    // bounded by the extents, not by the numbers a damaged head may hold.
    let mut held = 0u64;
    let mut gap = |a: u64, z: u64, problems: &mut Vec<alloc::string::String>| {
        if a >= z {
            return;
        }
        let mut covered = 0u64;
        if pb.is_none() {
            let lo = framed.partition_point(|&(n, _)| n < a);
            let hi = framed.partition_point(|&(n, _)| n < z);
            covered = (hi - lo) as u64;
            held += framed[lo..hi].iter().map(|&(_, l)| l as u64).sum::<u64>();
        }
        if let Some(pb) = pb {
            let (b0, b1) = (a / pb, (z - 1) / pb);
            // Extents are in key order: the first that may reach `b0` starts at or before it.
            let from = extents.partition_point(|&(s, _)| s <= b0).saturating_sub(1);
            for &(s, e) in extents[from..].iter().take_while(|(s, _)| *s <= b1) {
                let (lo, hi) = (s.max(b0), s.saturating_add(e.len).min(b1 + 1));
                if e.unwritten || lo >= hi {
                    continue;
                }
                let (r0, r1) = (lo.saturating_mul(pb).max(a), hi.saturating_mul(pb).min(z));
                covered += r1.saturating_sub(r0);
            }
        }
        let covered = covered.min(z - a);
        if pb.is_some() {
            held += covered * size;
        }
        if covered < z - a {
            problems.push(format!(
                "records {a}..{z}: {} in no item and no data block",
                z - a - covered
            ));
        }
    };
    let mut total = 0u64;
    let mut expect = head.first;
    let mut i = 0;
    while i < chunks.len() {
        let n = chunks[i].0;
        let group = chunks[i..].iter().take_while(|c| c.0 == n).count();
        let parts = &chunks[i..i + group];
        i += group;
        if n < head.first || n >= head.next {
            problems.push(format!(
                "record {n} outside the file's records {}..{}",
                head.first, head.next
            ));
            continue;
        }
        gap(expect, n, &mut problems);
        expect = n + 1;
        let mut len = 0;
        for (j, &(_, c, bytes)) in parts.iter().enumerate() {
            if usize::from(c) != j {
                problems.push(format!("record {n} lacks chunk {j}"));
                break;
            }
            if bytes > per || (bytes == 0 && parts.len() > 1) {
                problems.push(format!("record {n} has a chunk of {bytes} bytes"));
            }
            len += bytes;
        }
        if len > RECORD_MAX {
            problems.push(format!("record {n} is {len} bytes, more than allowed"));
        }
        if size != 0 && len as u64 != size {
            problems.push(format!(
                "record {n} is {len} bytes in a file of {size}-byte records"
            ));
        }
        total += len as u64;
    }
    gap(expect, head.next, &mut problems);
    match pb {
        None => {
            for (i, &(s, e)) in extents.iter().enumerate() {
                let end = extents.get(i + 1).map_or(u64::MAX, |x| x.0);
                // A continued block holds bytes of the record before its first.
                let lowest = s.saturating_sub(u64::from(e.continued));
                if e.len != 1 || e.unwritten {
                    problems.push(format!(
                        "append block at record {s} is not one written block"
                    ));
                } else if head.first.max(lowest) >= head.next.min(end) {
                    problems.push(format!(
                        "append block at record {s} holds no record of the file"
                    ));
                }
            }
            for &(n, len) in framed {
                if len > RECORD_MAX || (size != 0 && len as u64 != size) {
                    problems.push(format!("record {n} is a frame of {len} bytes"));
                }
            }
        }
        Some(pb) => {
            // The blocks holding a record of `first..next` are one run.
            let live = match head.first < head.next {
                true => head.first / pb..(head.next - 1) / pb + 1,
                false => 0..0,
            };
            for &(s, e) in extents {
                let end = s.saturating_add(e.len);
                if e.unwritten || e.continued || s < live.start || end > live.end {
                    problems.push(format!(
                        "data blocks {s}..{end} are not all blocks holding records of the file"
                    ));
                }
            }
        }
    }
    Verified {
        size: Some(total + held),
        problems,
    }
}

/// The live records of block `b` of a file of `pb` records per block: `n0..n1`.
fn block_span(head: &RecordHead, pb: u64, b: u64) -> (u64, u64) {
    let start = b * pb;
    (
        start.max(head.first),
        start.saturating_add(pb).min(head.next),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_finds_gaps_strays_and_bad_lengths() {
        let head = RecordHead {
            record_size: 0,
            capacity: 0,
            first: 2,
            next: 5,
        };
        let good = [(2, 0, 128), (2, 1, 3), (3, 0, 0), (4, 0, 9)];
        let v = verify(Some(&head), &good, &[], &[], 128, 512);
        assert!(v.problems.is_empty(), "{:?}", v.problems);
        assert_eq!(v.size, Some(140));
        let gap = [(2, 0, 5), (4, 0, 9)];
        assert_eq!(
            verify(Some(&head), &gap, &[], &[], 128, 512).problems.len(),
            1
        );
        let short = [(2, 0, 5), (3, 0, 9)];
        assert_eq!(
            verify(Some(&head), &short, &[], &[], 128, 512)
                .problems
                .len(),
            1
        );
        let stray = [(1, 0, 5), (2, 0, 5), (3, 0, 1), (4, 0, 1)];
        assert_eq!(
            verify(Some(&head), &stray, &[], &[], 128, 512)
                .problems
                .len(),
            1
        );
        let chunk_gap = [(2, 0, 128), (2, 2, 1), (3, 0, 1), (4, 0, 1)];
        assert_eq!(
            verify(Some(&head), &chunk_gap, &[], &[], 128, 512)
                .problems
                .len(),
            1
        );
        let fixed = RecordHead {
            record_size: 4,
            ..head
        };
        let wrong = [(2, 0, 4), (3, 0, 5), (4, 0, 4)];
        assert_eq!(
            verify(Some(&fixed), &wrong, &[], &[], 128, 512)
                .problems
                .len(),
            1
        );
        assert_eq!(verify(None, &good, &[], &[], 128, 512).size, None);
    }

    #[test]
    fn verify_counts_records_in_blocks_and_bounds_its_work_by_the_extents() {
        let ext = |start, len| Extent {
            start,
            len,
            unwritten: false,
            continued: false,
        };
        // 256-byte records, two to a block: records 3..8, block 1 (2, 3) and 2 (4, 5)
        // written, 6 and 7 items.
        let head = RecordHead {
            record_size: 256,
            capacity: 0,
            first: 3,
            next: 8,
        };
        let items = [(6, 0, 128), (6, 1, 128), (7, 0, 128), (7, 1, 128)];
        let v = verify(Some(&head), &items, &[(1, ext(40, 2))], &[], 128, 512);
        assert!(v.problems.is_empty(), "{:?}", v.problems);
        assert_eq!(v.size, Some(5 * 256));
        // Block 2 missing; a block past the records.
        let v = verify(
            Some(&head),
            &items,
            &[(1, ext(40, 1)), (4, ext(50, 1))],
            &[],
            128,
            512,
        );
        assert_eq!(v.problems.len(), 2, "{:?}", v.problems);
        // A damaged head claiming 2⁶³ records and an extent of 2³² blocks: one problem
        // each, at once.
        let huge = RecordHead {
            next: 1 << 63,
            ..head
        };
        let v = verify(
            Some(&huge),
            &[],
            &[(1, ext(40, u64::from(u32::MAX)))],
            &[],
            128,
            512,
        );
        assert_eq!(v.problems.len(), 1, "{:?}", v.problems);
        let v = verify(
            Some(&head),
            &[],
            &[(0, ext(40, u64::from(u32::MAX)))],
            &[],
            128,
            512,
        );
        assert_eq!(v.problems.len(), 1, "{:?}", v.problems);
    }
}
