//! Record files: regular files that hold numbered records instead of a byte array.
//!
//! A record file is a regular file with a head item ([`RecordHead`]): the records' fixed
//! size (or 0 for records of any length), the capacity of a cyclic file (or 0), and the
//! numbers `first..next` of the records it holds. Record numbers are given in order by
//! [`Fs::record_add`] and never reused, so a number names the same record for its whole
//! life, whatever is added or removed around it.
//!
//! Each record is its own index items, keyed by (inode, [`item::RECORD`], record number,
//! chunk number): the record's bytes in chunks of the index's largest value (a quarter node),
//! an empty record one empty chunk. A record of 40 bytes is one index item and takes no data
//! block; an update rewrites only that record's items, so a record may change length without
//! touching the rest of the file. A cyclic file of capacity N removes its oldest record in
//! the same operation that adds the (N+1)th.
//!
//! Every operation changes the head, the record's items and the inode (size and times) in
//! one working version of the index, so like every other operation it is entirely there or
//! entirely absent after a power cut.
//!
//! The file's size is the sum of its records' lengths, and [`Fs::read`] reads the records
//! concatenated, oldest first: tools see a record file as a plain file. Byte writes,
//! truncation and `fallocate` are refused (`EINVAL`): records change only by record
//! operations.

use alloc::vec::Vec;

use super::journal::OpKind;
use super::layout::{item, key, key_u64, record_key, FileType, Ino, Inode, RecordHead};
use super::{Attr, Fs};
use crate::error::{Error, Result};
use crate::media::Segments;

/// Longest record, in bytes. Larger content belongs in a regular file.
pub const RECORD_MAX: usize = 4096;

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
    fn record_head(&mut self, ino: Ino) -> Result<Option<RecordHead>> {
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

    /// Refuses a byte-level change of a record file. Record files have no data blocks, so
    /// files with blocks need no look-up.
    pub(super) fn refuse_records(&mut self, ino: Ino, inode: &Inode) -> Result<()> {
        if inode.blocks == 0 && self.record_head(ino)?.is_some() {
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
    fn record_items(&mut self, ino: Ino, n: u64) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let lo = record_key(ino, n, 0);
        let hi = match n.checked_add(1) {
            Some(m) => record_key(ino, m, 0),
            None => key(ino, item::RECORD + 1),
        };
        self.tree.range(lo..hi).collect()
    }

    /// Removes record `n`'s items; returns its length.
    fn drop_record(&mut self, ino: Ino, n: u64) -> Result<u64> {
        let mut len = 0;
        for (k, v) in self.record_items(ino, n)? {
            len += v.len() as u64;
            self.tree.remove(&k)?;
        }
        Ok(len)
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
        self.bytes_written += added;
        self.maybe_commit()
    }

    /// Adds a record after the newest; returns its number. A full cyclic file loses its
    /// oldest record in the same operation.
    pub fn record_add(&mut self, ino: Ino, data: &[u8]) -> Result<u64> {
        self.journaled(ino, || OpKind::Add(data.to_vec()), |fs| fs.add(ino, data))
    }

    fn add(&mut self, ino: Ino, data: &[u8]) -> Result<u64> {
        let (inode, mut head) = self.record_file(ino)?;
        Self::check_record(&head, data)?;
        if head.next == u64::MAX {
            return Err(Error::TooBig);
        }
        self.ensure_free(0)?;
        let mut removed = 0;
        if head.capacity > 0 && head.next - head.first >= u64::from(head.capacity) {
            removed = self.drop_record(ino, head.first)?;
            head.first += 1;
        }
        let n = head.next;
        self.put_record(ino, n, data)?;
        head.next += 1;
        self.finish_change(ino, inode, &head, removed, data.len() as u64)?;
        Ok(n)
    }

    /// Record `n` of record file `ino` (`NotFound` unless `first <= n < next`).
    pub fn record_read(&mut self, ino: Ino, n: u64) -> Result<Vec<u8>> {
        let (inode, head) = self.record_file(ino)?;
        if !(head.first..head.next).contains(&n) {
            return Err(Error::NotFound);
        }
        let items = self.record_items(ino, n)?;
        if items.is_empty() {
            return Err(Error::Corrupt("a record of a record file is missing"));
        }
        self.touch_atime(ino, inode)?;
        Ok(items.into_iter().flat_map(|(_, v)| v).collect())
    }

    /// Every record of record file `ino`, oldest first, with its number.
    pub fn record_list(&mut self, ino: Ino) -> Result<Vec<(u64, Vec<u8>)>> {
        let (inode, head) = self.record_file(ino)?;
        let lo = key_u64(ino, item::RECORD, head.first);
        let hi = key(ino, item::RECORD + 1);
        let mut out: Vec<(u64, Vec<u8>)> = Vec::new();
        for entry in self.tree.range(lo..hi) {
            let (k, v) = entry?;
            let (_, _, rest) = super::layout::split_key(&k)?;
            let (n, _) = super::layout::record_suffix(rest)?;
            match out.last_mut() {
                Some((m, data)) if *m == n => data.extend_from_slice(&v),
                _ => out.push((n, v)),
            }
        }
        if out.len() as u64 != head.next - head.first {
            return Err(Error::Corrupt("a record of a record file is missing"));
        }
        self.touch_atime(ino, inode)?;
        Ok(out)
    }

    /// Replaces record `n` with `data`, which may have another length (in a file of
    /// variable-length records): only that record's items are rewritten.
    pub fn record_update(&mut self, ino: Ino, n: u64, data: &[u8]) -> Result<()> {
        self.journaled(
            ino,
            || OpKind::Update(n, data.to_vec()),
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
        let removed = self.drop_record(ino, n)?;
        self.put_record(ino, n, data)?;
        self.finish_change(ino, inode, &head, removed, data.len() as u64)
    }

    /// Removes the oldest record (`NotFound` if there is none).
    pub fn record_remove_first(&mut self, ino: Ino) -> Result<()> {
        self.journaled(ino, || OpKind::RemoveFirst, |fs| fs.remove_first(ino))
    }

    fn remove_first(&mut self, ino: Ino) -> Result<()> {
        let (inode, mut head) = self.record_file(ino)?;
        if head.first == head.next {
            return Err(Error::NotFound);
        }
        let removed = self.drop_record(ino, head.first)?;
        head.first += 1;
        self.finish_change(ino, inode, &head, removed, 0)
    }

    /// Removes the newest record (`NotFound` if there is none). Its number is given again
    /// by the next [`Fs::record_add`].
    pub fn record_remove_last(&mut self, ino: Ino) -> Result<()> {
        self.journaled(ino, || OpKind::RemoveLast, |fs| fs.remove_last(ino))
    }

    fn remove_last(&mut self, ino: Ino) -> Result<()> {
        let (inode, mut head) = self.record_file(ino)?;
        if head.first == head.next {
            return Err(Error::NotFound);
        }
        let removed = self.drop_record(ino, head.next - 1)?;
        head.next -= 1;
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
        if inode.blocks != 0 {
            return Ok(None);
        }
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
        let lo = key_u64(ino, item::RECORD, head.first);
        let hi = key(ino, item::RECORD + 1);
        let mut pos = 0u64;
        for entry in self.tree.range(lo..hi) {
            if pos >= end {
                break;
            }
            let (_, v) = entry?;
            let (a, b) = (pos, pos + v.len() as u64);
            pos = b;
            if b <= off {
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

/// Checks a record file's items for `fsck`: every record of `first..next` there and no
/// other, chunks numbered from 0 without gaps, none empty but an empty record's only one,
/// none over the index's largest value `per`, records no longer than [`RECORD_MAX`] and of
/// the fixed size if the file has one. `chunks` are (record, chunk, bytes) in key order.
pub(super) fn verify(
    head: Option<&RecordHead>,
    chunks: &[(u64, u16, usize)],
    per: usize,
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
    let mut size = 0u64;
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
        if n > expect {
            problems.push(format!("records {expect}..{n} are missing"));
        }
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
        if head.record_size != 0 && len != head.record_size as usize {
            problems.push(format!(
                "record {n} is {len} bytes in a file of {}-byte records",
                head.record_size
            ));
        }
        size += len as u64;
    }
    if expect < head.next {
        problems.push(format!("records {expect}..{} are missing", head.next));
    }
    Verified {
        size: Some(size),
        problems,
    }
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
        let v = verify(Some(&head), &good, 128);
        assert!(v.problems.is_empty(), "{:?}", v.problems);
        assert_eq!(v.size, Some(140));
        let gap = [(2, 0, 5), (4, 0, 9)];
        assert_eq!(verify(Some(&head), &gap, 128).problems.len(), 1);
        let short = [(2, 0, 5), (3, 0, 9)];
        assert_eq!(verify(Some(&head), &short, 128).problems.len(), 1);
        let stray = [(1, 0, 5), (2, 0, 5), (3, 0, 1), (4, 0, 1)];
        assert_eq!(verify(Some(&head), &stray, 128).problems.len(), 1);
        let chunk_gap = [(2, 0, 128), (2, 2, 1), (3, 0, 1), (4, 0, 1)];
        assert_eq!(verify(Some(&head), &chunk_gap, 128).problems.len(), 1);
        let fixed = RecordHead {
            record_size: 4,
            ..head
        };
        let wrong = [(2, 0, 4), (3, 0, 5), (4, 0, 4)];
        assert_eq!(verify(Some(&fixed), &wrong, 128).problems.len(), 1);
        assert_eq!(verify(None, &good, 128).size, None);
    }
}
