//! File contents: extents, reads, writes, truncation and `fallocate`.
//!
//! A file's blocks are runs of consecutive sectors, each an extent item keyed by the file
//! block it starts at. A write never touches a sector the committed version uses: it writes
//! new sectors and remaps the blocks, so a power cut shows the file before or after the
//! write, never between. The one exception is a preallocated (unwritten) block, which reads
//! as zeros in every version whatever its sector holds, so its first write goes in place.

use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;

use super::extents::{self, Known};
use super::layout::op::OpKind;
use super::layout::{item, key, key_u64, split_key, suffix_u64, Extent, FileType, Ino, Inode};
use super::{Atime, Fs};
use crate::error::{Error, Result};
use crate::media::Segments;

/// Blocks one atomic piece of a write covers at most. A longer write is applied as
/// consecutive pieces, each atomic: a power cut keeps a prefix of them. It bounds the index
/// nodes one operation dirties, which the space reserve must cover.
pub const PIECE_BLOCKS: u64 = 128;

/// A write of at most a block over this (half a block) goes to the journal with its
/// bytes, where the volume has one. Its `fsync` is then one entry where a data block's
/// would be a checkpoint (the block, the index nodes its extent and inode change, block
/// 0): 256-byte files each written whole and synced on the W25Q64JV programmed 2,363
/// bytes a file that way, 1,025 as entries and their share of the next checkpoint.
/// Larger writes are cheaper as data blocks: an entry programs its bytes once now and the
/// checkpoint programs their block again, and two of them would not fit an entry (at most
/// a block).
pub const JOURNALED_WRITE_SHARE: usize = 2;

/// `fallocate` mode bit: do not change the size.
pub const FALLOC_FL_KEEP_SIZE: u32 = 0x01;
/// `fallocate` mode bit: free the range (with `FALLOC_FL_KEEP_SIZE`).
pub const FALLOC_FL_PUNCH_HOLE: u32 = 0x02;

/// What a block maps to, if anything: its sector and whether it is unwritten.
pub(super) type Mapping = Option<(u64, bool)>;

impl<D: Segments> Fs<D> {
    pub(super) fn bs(&self) -> u64 {
        u64::from(self.sb.block_size)
    }

    /// Largest file size: extents address 2³² blocks.
    pub fn max_file_size(&self) -> u64 {
        u64::from(u32::MAX) * self.bs()
    }

    pub(super) fn regular(&mut self, ino: Ino) -> Result<Inode> {
        let inode = self.inode(ino)?;
        match inode.file_type()? {
            FileType::Regular => Ok(inode),
            FileType::Directory => Err(Error::IsDir),
            _ => Err(Error::InvalidArgument("not a regular file")),
        }
    }

    /// Reads from `off` into `buf`; returns the bytes read (fewer at the end of the file).
    /// A record file reads as its records concatenated, oldest first.
    pub fn read(&mut self, ino: Ino, off: u64, buf: &mut [u8]) -> Result<usize> {
        let inode = self.regular(ino)?;
        let n = match self.read_record_stream(ino, &inode, off, buf)? {
            Some(n) => n,
            None => self.read_inode_data(ino, &inode, off, buf)?,
        };
        self.touch_atime(ino, inode)?;
        Ok(n)
    }

    /// Writes `data` at `off` (past the end leaves a hole that reads as zeros); returns the
    /// bytes written, all of them.
    ///
    /// Reads, sizes and times show the write at once; it is durable once a commit covers
    /// it ([`Fs::fsync`], [`Fs::sync`], a transaction's commit, or one the file system makes
    /// on its own). The block the write ends inside may wait in RAM until then
    /// ([`FsConfig::write_buffer_bytes`](super::FsConfig)): a power cut before the commit may
    /// lose the write, whole, with every write after it, and never loses or tears a write a
    /// commit covered. A write of at most half a block, outside a transaction, is
    /// made durable as a journal entry carrying its bytes where the volume has a journal
    /// (SPEC.md §8.5b): its `fsync` programs that entry alone.
    pub fn write(&mut self, ino: Ino, off: u64, data: &[u8]) -> Result<usize> {
        // A small write is journaled with its bytes (SPEC.md §8.5b): its `fsync` then
        // programs one entry rather than a data block, index nodes and a superblock.
        if data.len() <= self.bs() as usize / JOURNALED_WRITE_SHARE && !self.tree.tx.in_operation()
        {
            let kind = |_: &usize| OpKind::Write {
                offset: off,
                data: data.to_vec(),
            };
            return self.journaled(ino, kind, |fs| fs.write_blocks(ino, off, data));
        }
        self.write_blocks(ino, off, data)
    }

    fn write_blocks(&mut self, ino: Ino, off: u64, data: &[u8]) -> Result<usize> {
        let mut inode = self.regular(ino)?;
        self.refuse_records(ino)?;
        if data.is_empty() {
            return Ok(0);
        }
        let bs = self.bs() as usize;
        let piece = PIECE_BLOCKS as usize * bs;
        let mut done = 0;
        while done < data.len() {
            let at = off + done as u64;
            // Pieces end on piece boundaries, so they stay aligned after the first.
            let room = piece - (at % piece as u64) as usize;
            let n = room.min(data.len() - done);
            let now = self.now();
            self.write_inode_data(ino, &mut inode, at, &data[done..done + n])?;
            inode.mtime = now;
            inode.ctime = now;
            self.put_inode(ino, &inode)?;
            self.counts.wrote(n as u64);
            done += n;
            self.maybe_commit()?;
        }
        Ok(done)
    }

    /// The file's extents, by first file block (`FIEMAP`).
    pub fn extents(&mut self, ino: Ino) -> Result<Vec<(u64, Extent)>> {
        self.inode(ino)?;
        self.extents_in(ino, 0, u64::MAX)
    }

    /// Writes `data` at the end of the file; returns the offset it went to.
    pub fn append(&mut self, ino: Ino, data: &[u8]) -> Result<u64> {
        let off = self.regular(ino)?.size;
        self.write(ino, off, data)?;
        Ok(off)
    }

    /// Allocates (`mode` 0 or [`FALLOC_FL_KEEP_SIZE`]) or frees
    /// ([`FALLOC_FL_PUNCH_HOLE`] | [`FALLOC_FL_KEEP_SIZE`]) the range. Allocated blocks
    /// read as zeros and their first write needs no new space; freed ones are free at the
    /// next commit.
    pub fn fallocate(&mut self, ino: Ino, mode: u32, off: u64, len: u64) -> Result<()> {
        let mut inode = self.regular(ino)?;
        self.refuse_records(ino)?;
        if len == 0 {
            return Err(Error::InvalidArgument("fallocate of an empty range"));
        }
        let end = off.checked_add(len).ok_or(Error::TooBig)?;
        if end > self.max_file_size() {
            return Err(Error::TooBig);
        }
        if mode & !(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE) != 0 {
            return Err(Error::Unsupported("fallocate mode"));
        }
        let bs = self.bs();
        if mode & FALLOC_FL_PUNCH_HOLE != 0 {
            if mode & FALLOC_FL_KEEP_SIZE == 0 {
                return Err(Error::Unsupported("punching a hole needs KEEP_SIZE"));
            }
            let end = end.min(inode.size);
            if off < end {
                // The partial blocks at the edges take new blocks: find them first, so the
                // operation does not fail (or commit to make room) half done.
                let (full0, full1) = (off.div_ceil(bs), end / bs);
                let edges = if full0 >= full1 {
                    self.zero_cost(ino, off, end)?
                } else {
                    self.zero_cost(ino, off, full0 * bs)? + self.zero_cost(ino, full1 * bs, end)?
                };
                self.ensure_free(edges)?;
                // Whole blocks are unmapped; partial ones at the edges zeroed by rewriting.
                if full0 >= full1 {
                    self.zero_range(ino, &mut inode, off, end)?;
                } else {
                    if off < full0 * bs {
                        self.zero_range(ino, &mut inode, off, full0 * bs)?;
                    }
                    if full1 * bs < end {
                        self.zero_range(ino, &mut inode, full1 * bs, end)?;
                    }
                    let freed = self.unmap(ino, full0, full1)?;
                    self.release_runs(&mut inode, &freed);
                }
            }
        } else {
            if mode & FALLOC_FL_KEEP_SIZE == 0 && end > inode.size {
                // The file grows over its last block's tail.
                self.clear_past_end(ino, &mut inode)?;
            }
            let (b0, b1) = (off / bs, end.div_ceil(bs));
            let map = self.mapping(ino, b0, b1)?;
            let holes = map.iter().filter(|m| m.is_none()).count() as u64;
            self.ensure_free(holes)?;
            let mut i = 0;
            while i < map.len() {
                if map[i].is_some() {
                    i += 1;
                    continue;
                }
                let run = map[i..].iter().take_while(|m| m.is_none()).count() as u64;
                let (start, got) = self
                    .tree
                    .store_mut()
                    .space
                    .alloc(run)
                    .ok_or(Error::NoSpace)?;
                let e = Extent {
                    start,
                    len: got,
                    unwritten: true,
                    continued: false,
                };
                self.map_run(ino, b0 + i as u64, e)?;
                inode.blocks += got;
                i += got as usize;
            }
            if mode & FALLOC_FL_KEEP_SIZE == 0 && end > inode.size {
                inode.size = end;
            }
        }
        let now = self.now();
        inode.mtime = now;
        inode.ctime = now;
        self.put_inode(ino, &inode)?;
        self.maybe_commit()
    }

    /// Changes the size: blocks past the new end are freed, and the tail of the last block
    /// is zeroed so that growing the file again shows zeros.
    pub(super) fn truncate_inode(&mut self, ino: Ino, inode: &mut Inode, size: u64) -> Result<()> {
        if size > self.max_file_size() {
            return Err(Error::TooBig);
        }
        let bs = self.bs();
        if size < inode.size && size % bs != 0 {
            let block_end = (size / bs + 1) * bs;
            self.zero_range(ino, inode, size, block_end.min(inode.size))?;
        } else if size > inode.size {
            self.clear_past_end(ino, inode)?;
        }
        let freed = self.unmap(ino, size.div_ceil(bs), u64::MAX)?;
        self.release_runs(inode, &freed);
        inode.size = size;
        Ok(())
    }

    /// Makes sure the bytes of the file's last block past its end are zeros before the
    /// file grows over them without writing there (a truncate or an allocation that grows
    /// it, a write past the block). A write leaves them erased (0xFF, not programmed on
    /// NOR; so does a block that damage replaced with older content of its sector), so the
    /// block is written again, once, with zeros there: growing the file shows zeros, as it
    /// must.
    pub(super) fn clear_past_end(&mut self, ino: Ino, inode: &mut Inode) -> Result<()> {
        let bs = self.bs();
        let (size, at) = (inode.size, (inode.size % bs) as usize);
        if at == 0 {
            return Ok(());
        }
        let Some((s, false)) = self.mapping(ino, size / bs, size / bs + 1)?[0] else {
            return Ok(());
        };
        let mut block = vec![0u8; bs as usize];
        self.tree.store_mut().read(s, &mut block)?;
        if block[at..].iter().all(|&b| b == 0) {
            return Ok(());
        }
        self.write_inode_data(ino, inode, size, &vec![0; bs as usize - at])?;
        inode.size = size;
        Ok(())
    }

    /// New blocks [`Self::zero_range`] takes over `[a, b)`.
    fn zero_cost(&mut self, ino: Ino, a: u64, b: u64) -> Result<u64> {
        if a >= b {
            return Ok(0);
        }
        let bs = self.bs();
        let map = self.mapping(ino, a / bs, b.div_ceil(bs))?;
        if map.iter().all(|m| !matches!(m, Some((_, false)))) {
            return Ok(0);
        }
        Ok(map.iter().filter(|m| !matches!(m, Some((_, true)))).count() as u64)
    }

    /// Writes zeros over `[a, b)` of a file where it has written data, without changing
    /// its size.
    fn zero_range(&mut self, ino: Ino, inode: &mut Inode, a: u64, b: u64) -> Result<()> {
        if a >= b {
            return Ok(());
        }
        let bs = self.bs();
        let map = self.mapping(ino, a / bs, b.div_ceil(bs))?;
        if map.iter().all(|m| !matches!(m, Some((_, false)))) {
            return Ok(());
        }
        let size = inode.size;
        self.write_inode_data(ino, inode, a, &vec![0; (b - a) as usize])?;
        inode.size = size;
        Ok(())
    }

    /// Updates the access time after a read, as the configuration says.
    pub(super) fn touch_atime(&mut self, ino: Ino, inode: Inode) -> Result<()> {
        self.journaled(ino, |_| OpKind::Atime, |fs| fs.set_atime(ino, inode))
    }

    fn set_atime(&mut self, ino: Ino, mut inode: Inode) -> Result<()> {
        let now = self.now();
        let update = match self.config.atime {
            Atime::Never => false,
            Atime::Strict => true,
            Atime::Relative => {
                inode.atime <= inode.mtime
                    || inode.atime <= inode.ctime
                    || now.sec - inode.atime.sec >= 24 * 3600
            }
        };
        if update && inode.nlink > 0 {
            inode.atime = now;
            self.put_inode(ino, &inode)?;
            self.maybe_commit()?;
        }
        Ok(())
    }

    /// Reads file bytes from `off` (not past the size) into `buf`.
    pub(super) fn read_inode_data(
        &mut self,
        ino: Ino,
        inode: &Inode,
        off: u64,
        buf: &mut [u8],
    ) -> Result<usize> {
        if off >= inode.size {
            return Ok(0);
        }
        let n = (buf.len() as u64).min(inode.size - off) as usize;
        let buf = &mut buf[..n];
        buf.fill(0);
        let bs = self.bs();
        let (b0, b1) = (off / bs, (off + n as u64).div_ceil(bs));
        if let Known::Nothing = self.extent_cache.get(ino) {
            self.load_extent_map(ino)?;
        }
        let mut block = Vec::new();
        let end = off + n as u64;
        for (b, e) in self.extents_in(ino, b0, b1)? {
            if e.unwritten {
                continue;
            }
            // The part of the extent inside the read, a bounded number of sectors at a time.
            let (s, t) = (b.max(b0), (b + e.len).min(b1));
            let mut k = s;
            while k < t {
                let m = (t - k).min(64);
                let sector = e.start + (k - b);
                let at_file = |e: Error| {
                    e.in_file(ino, |s| {
                        (k + s.map_or(0, |s| s.saturating_sub(sector))) * bs
                    })
                };
                // Blocks the read takes part of (at most its first and its last) go through
                // the read cache, which keeps them for the next small reads; the blocks it
                // takes whole go straight into the caller's buffer.
                let mut whole = k..k + m;
                for j in [k, k + m - 1] {
                    let (from, to) = ((j * bs).max(off), ((j + 1) * bs).min(end));
                    if (from, to) == (j * bs, (j + 1) * bs) || !whole.contains(&j) {
                        continue;
                    }
                    block.resize(bs as usize, 0);
                    self.tree
                        .store_mut()
                        .read_data_block(sector + (j - k), &mut block)
                        .map_err(at_file)?;
                    buf[(from - off) as usize..(to - off) as usize]
                        .copy_from_slice(&block[(from - j * bs) as usize..(to - j * bs) as usize]);
                    if j == whole.start {
                        whole.start += 1;
                    } else {
                        whole.end -= 1;
                    }
                }
                if !whole.is_empty() {
                    let (from, to) = (whole.start * bs - off, whole.end * bs - off);
                    self.tree
                        .store_mut()
                        .read_data_through(
                            sector + (whole.start - k),
                            &mut buf[from as usize..to as usize],
                        )
                        .map_err(at_file)?;
                }
                k += m;
            }
        }
        Ok(n)
    }

    /// Writes `data` at `off` into new sectors (or unwritten ones in place) and remaps the
    /// blocks; `data` spans at most one piece. Updates the size and block count, not times.
    ///
    /// The block the write ends inside is not programmed but left in RAM (`writeback`),
    /// outside transactions and where [`FsConfig::write_buffer_bytes`](super::FsConfig) allows;
    /// a write within a block left there changes it in place.
    pub(super) fn write_inode_data(
        &mut self,
        ino: Ino,
        inode: &mut Inode,
        off: u64,
        data: &[u8],
    ) -> Result<()> {
        let end = off.checked_add(data.len() as u64).ok_or(Error::TooBig)?;
        if end > self.max_file_size() {
            return Err(Error::TooBig);
        }
        let bs = self.bs();
        let (b0, b1) = (off / bs, end.div_ceil(bs));
        let defer = self.tree.store().wb.enabled() && !self.tree.tx.in_operation();
        let old = self.mapping(ino, b0, b1)?;
        if let (true, 1, Some((s, false))) = (defer, old.len(), old[0]) {
            // Its sector is not programmed yet, so no version on flash uses it: the block
            // changes in place, and goes out once written to its end (all or nothing: a
            // failed program leaves it as it was).
            let store = self.tree.store_mut();
            let at = (off - b0 * bs) as usize;
            // Between the file's end and a write past it: zeros, where the block's tail
            // was left erased.
            let eof = (inode.size.saturating_sub(b0 * bs) as usize).min(at);
            if let Some(buffered) = store.wb.get(s) {
                if end % bs == 0 {
                    let mut block = buffered.to_vec();
                    block[eof..at].fill(0);
                    block[at..at + data.len()].copy_from_slice(data);
                    store.write_file_block(s, &block, b0)?;
                    store.wb.take(s);
                    store.wb.changed();
                } else {
                    if eof < at {
                        store.wb.write(s, eof, &vec![0; at - eof]);
                    }
                    store.wb.write(s, at, data);
                }
                inode.size = inode.size.max(end);
                return Ok(());
            }
        }
        if end > inode.size && inode.size / bs < b0 {
            self.clear_past_end(ino, inode)?;
        }
        let fresh = old.iter().filter(|m| !matches!(m, Some((_, true)))).count() as u64;
        self.ensure_free(fresh)?;
        // The new content of every block: partial blocks keep their other bytes.
        let mut content = vec![0u8; ((b1 - b0) * bs) as usize];
        let head = (off - b0 * bs) as usize;
        for (i, m) in [(0usize, old[0]), (old.len() - 1, old[old.len() - 1])] {
            let partial = (i == 0 && head != 0) || (i == old.len() - 1 && end % bs != 0);
            if let (true, Some((s, false))) = (partial, m) {
                let at = i * bs as usize;
                self.tree
                    .store_mut()
                    .read_for_update(s, &mut content[at..at + bs as usize])?;
            }
        }
        // Past the file's end a block may hold anything but the file's bytes: zeros up to
        // the write, and past the new end erased bytes (0xFF), which NOR does not program
        // (a 256-byte file's 512-byte block costs 256 bytes, not 512). Growing the file
        // over them without writing them zeroes them first (`clear_past_end`).
        let past = inode.size.saturating_sub(b0 * bs).min(content.len() as u64);
        content[past as usize..].fill(0);
        content[head..head + data.len()].copy_from_slice(data);
        let eof = (inode.size.max(end) - b0 * bs) as usize;
        if eof < content.len() {
            content[eof..].fill(0xFF);
        }
        // New sectors, in runs.
        let mut new: Vec<u64> = Vec::with_capacity(old.len());
        let mut allocated: Vec<(u64, u64)> = Vec::new();
        let mut i = 0;
        while i < old.len() {
            if let Some((s, true)) = old[i] {
                new.push(s);
                i += 1;
                continue;
            }
            let run = old[i..]
                .iter()
                .take_while(|m| !matches!(m, Some((_, true))))
                .count() as u64;
            let Some((start, got)) = self.tree.store_mut().space.alloc(run) else {
                self.undo_alloc(&allocated);
                return Err(Error::NoSpace);
            };
            allocated.push((start, got));
            new.extend(start..start + got);
            i += got as usize;
        }
        // Consecutive sectors go down in one call; the block the write ends inside waits
        // in RAM where it may.
        let programmed = new.len() - usize::from(defer && end % bs != 0);
        let mut i = 0;
        while i < programmed {
            let run = 1 + new[i..programmed]
                .windows(2)
                .take_while(|w| w[1] == w[0] + 1)
                .count();
            let bytes = &content[i * bs as usize..(i + run) * bs as usize];
            let replaced = match old[i] {
                Some((s, false)) => Some(s),
                _ => None,
            };
            let store = self.tree.store_mut();
            if let Err(e) = store.write_file_data(new[i], bytes, ino, b0 + i as u64, replaced) {
                self.undo_alloc(&allocated);
                return Err(e);
            }
            i += run;
        }
        if programmed < new.len() {
            let last = content[programmed * bs as usize..].to_vec();
            if let Err(e) =
                self.tree
                    .store_mut()
                    .defer_data(new[programmed], ino, b0 + programmed as u64, last)
            {
                self.undo_alloc(&allocated);
                return Err(e);
            }
        }
        // Remap: the old written sectors are released, the new ones mapped.
        self.unmap(ino, b0, b1)?;
        let released: Vec<(u64, u64)> = old
            .iter()
            .filter_map(|m| match m {
                Some((s, false)) => Some((*s, 1)),
                _ => None,
            })
            .collect();
        self.release_runs(inode, &released);
        let mut i = 0;
        while i < new.len() {
            let run = 1 + new[i..].windows(2).take_while(|w| w[1] == w[0] + 1).count();
            let e = Extent {
                start: new[i],
                len: run as u64,
                unwritten: false,
                continued: false,
            };
            self.map_run(ino, b0 + i as u64, e)?;
            i += run;
        }
        inode.blocks += allocated.iter().map(|r| r.1).sum::<u64>();
        inode.size = inode.size.max(end);
        Ok(())
    }

    /// Gives back sectors allocated by a write that failed before mapping them.
    pub(super) fn undo_alloc(&mut self, runs: &[(u64, u64)]) {
        let store = self.tree.store_mut();
        for &(a, n) in runs {
            store.wb.drop_range(a, n);
            for k in a..a + n {
                // Only spares the cleaner a copy (see `Fs::forget_freed`).
                let _ = store.forget(k);
            }
            store.space.unalloc(a, n);
        }
    }

    /// Releases sectors a file no longer uses (free at the next commit).
    pub(super) fn release_runs(&mut self, inode: &mut Inode, runs: &[(u64, u64)]) {
        for &(a, n) in runs {
            let store = self.tree.store_mut();
            // A freed block waiting in RAM is never programmed.
            store.wb.drop_range(a, n);
            store.space.release(a, n);
            inode.blocks = inode.blocks.saturating_sub(n);
        }
    }

    /// Keeps the file's whole extent map in RAM, or notes that it has too many extents.
    fn load_extent_map(&mut self, ino: Ino) -> Result<()> {
        let mut map = BTreeMap::new();
        let mut fits = true;
        let (lo, hi) = (key(ino, item::EXTENT), key(ino, item::EXTENT + 1));
        for entry in self.tree.range(lo..hi) {
            if map.len() == self.extent_cache.max_extents() {
                fits = false;
                break;
            }
            let (k, v) = entry?;
            let (_, _, rest) = split_key(&k)?;
            let first = suffix_u64(rest)?;
            map.insert(first, Extent::decode_at(first, &v, self.sb.sectors)?);
        }
        self.extent_cache.load(ino, fits.then_some(map));
        Ok(())
    }

    /// Maps blocks from `b` to `e` in the index (replacing the extent item there).
    pub(super) fn put_extent(&mut self, ino: Ino, b: u64, e: Extent) -> Result<()> {
        match self
            .tree
            .insert(&key_u64(ino, item::EXTENT, b), &e.encode())
        {
            Ok(_) => {
                self.extent_cache.insert(ino, b, e);
                Ok(())
            }
            Err(err) => {
                self.extent_cache.forget(ino);
                Err(err)
            }
        }
    }

    /// Removes the extent item at block `b` from the index.
    fn remove_extent(&mut self, ino: Ino, b: u64) -> Result<()> {
        match self.tree.remove(&key_u64(ino, item::EXTENT, b)) {
            Ok(_) => {
                self.extent_cache.remove(ino, b);
                Ok(())
            }
            Err(err) => {
                self.extent_cache.forget(ino);
                Err(err)
            }
        }
    }

    /// The extents that overlap blocks `[b0, b1)`, by first block: from the file's map in
    /// RAM if it is kept, else from the index.
    pub(super) fn extents_in(&mut self, ino: Ino, b0: u64, b1: u64) -> Result<Vec<(u64, Extent)>> {
        if let Known::Map(map) = self.extent_cache.get(ino) {
            return Ok(extents::overlapping(map, b0, b1));
        }
        let mut out = Vec::new();
        if let Some((k, v)) = self.tree.seek_le(&key_u64(ino, item::EXTENT, b0))? {
            let (i, ty, rest) = split_key(&k)?;
            if i == ino && ty == item::EXTENT {
                let b = suffix_u64(rest)?;
                let e = Extent::decode_at(b, &v, self.sb.sectors)?;
                if b < b0 && b + e.len > b0 {
                    out.push((b, e));
                }
            }
        }
        let lo = key_u64(ino, item::EXTENT, b0);
        let hi = if b1 == u64::MAX {
            key(ino, item::EXTENT + 1)
        } else {
            key_u64(ino, item::EXTENT, b1)
        };
        for entry in self.tree.range(lo..hi) {
            let (k, v) = entry?;
            let (_, _, rest) = split_key(&k)?;
            let first = suffix_u64(rest)?;
            out.push((first, Extent::decode_at(first, &v, self.sb.sectors)?));
        }
        Ok(out)
    }

    /// What each block of `[b0, b1)` maps to.
    pub(super) fn mapping(&mut self, ino: Ino, b0: u64, b1: u64) -> Result<Vec<Mapping>> {
        let mut map = vec![None; (b1 - b0) as usize];
        for (b, e) in self.extents_in(ino, b0, b1)? {
            for k in b.max(b0)..(b + e.len).min(b1) {
                map[(k - b0) as usize] = Some((e.start + (k - b), e.unwritten));
            }
        }
        Ok(map)
    }

    /// Removes the mapping of blocks `[b0, b1)`, keeping the parts of extents outside it;
    /// returns the sector runs that were mapped there.
    pub(super) fn unmap(&mut self, ino: Ino, b0: u64, b1: u64) -> Result<Vec<(u64, u64)>> {
        let mut removed = Vec::new();
        for (b, e) in self.extents_in(ino, b0, b1)? {
            self.remove_extent(ino, b)?;
            let (s, t) = (b.max(b0), (b + e.len).min(b1));
            if b < s {
                let head = Extent { len: s - b, ..e };
                self.put_extent(ino, b, head)?;
            }
            if t < b + e.len {
                let tail = Extent {
                    start: e.start + (t - b),
                    len: b + e.len - t,
                    ..e
                };
                self.put_extent(ino, t, tail)?;
            }
            removed.push((e.start + (s - b), t - s));
        }
        Ok(removed)
    }

    /// Maps block `b` to the block written at `sector`, releasing what it mapped before. A
    /// block already at `sector` (allocated unwritten, or filled in place by a write replayed
    /// before) is marked written, and what RAM kept of it for that write dropped: the
    /// sector's content is newer.
    pub(super) fn map_written_block(
        &mut self,
        ino: Ino,
        inode: &mut Inode,
        b: u64,
        sector: u64,
    ) -> Result<()> {
        let old = self.unmap(ino, b, b + 1)?;
        if old.iter().any(|&(s, _)| s == sector) {
            self.tree.store_mut().wb.drop_range(sector, 1);
        } else {
            self.release_runs(inode, &old);
            inode.blocks += 1;
        }
        let e = Extent {
            start: sector,
            len: 1,
            unwritten: false,
            continued: false,
        };
        self.map_run(ino, b, e)
    }

    /// Maps blocks from `b` to the extent `e` (which must not overlap a mapped block),
    /// merging it with a neighbour that continues it on flash.
    pub(super) fn map_run(&mut self, ino: Ino, mut b: u64, mut e: Extent) -> Result<()> {
        if b > 0 {
            if let Some((k, v)) = self.tree.seek_le(&key_u64(ino, item::EXTENT, b - 1))? {
                let (i, ty, rest) = split_key(&k)?;
                if i == ino && ty == item::EXTENT {
                    let lb = suffix_u64(rest)?;
                    let l = Extent::decode_at(lb, &v, self.sb.sectors)?;
                    if lb + l.len == b
                        && l.start + l.len == e.start
                        && l.unwritten == e.unwritten
                        && !l.continued
                        && !e.continued
                        && l.len + e.len <= u64::from(u32::MAX)
                    {
                        b = lb;
                        e = Extent {
                            start: l.start,
                            len: l.len + e.len,
                            ..e
                        };
                    }
                }
            }
        }
        let right = key_u64(ino, item::EXTENT, b + e.len);
        if let Some(v) = self.tree.get(&right)? {
            let r = Extent::decode_at(b + e.len, &v, self.sb.sectors)?;
            if e.start + e.len == r.start
                && r.unwritten == e.unwritten
                && !r.continued
                && !e.continued
                && e.len + r.len <= u64::from(u32::MAX)
            {
                self.remove_extent(ino, b + e.len)?;
                e.len += r.len;
            }
        }
        self.put_extent(ino, b, e)
    }
}
