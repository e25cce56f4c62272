//! Block 0: where each checkpoint's superblock goes (SPEC.md §8.2).
//!
//! A checkpoint makes itself current by its superblock. Block 0 is written anew with it —
//! a whole block, which also carries the free-space delta — or, where the medium can
//! program written bytes again (reprogrammable NOR), the superblock is appended in place
//! after the records block 0 already holds: one record programmed instead of a block, and
//! on NOR the erasures a block write brings avoided. Nothing is ever appended after a record
//! that may be torn: after a mount, a failed program or a failed commit the next superblock
//! goes to a fresh block 0. This type keeps that state; the encoding is `layout`'s.

use super::layout::Superblock;
use crate::error::{Error, Result};
use crate::ftl::{BlockDevice, Ftl};
use crate::media::Segments;

/// What block 0 holds, as far as the next superblock is concerned.
#[derive(Debug, Default)]
pub struct Block0 {
    /// Superblock records block 0 holds when the next one may be appended after them; 0
    /// when block 0 must be written anew.
    records: usize,
    /// Bytes at the end of block 0 its first record's free-space delta takes: appended
    /// records stop before them.
    tail: usize,
    /// The distance between block 0's records, its first record's
    /// ([`Superblock::stride`]): a record of another form is not appended after it.
    stride: usize,
    /// Superblocks appended since mount.
    appends: u64,
}

impl Block0 {
    /// The next superblock goes to a fresh block 0 (after a mount, or for a commit that
    /// must name a current free-space map, which only a whole block holds).
    pub fn rewrite_next(&mut self) {
        self.records = 0;
    }

    /// Superblocks appended in place since mount.
    pub fn appends(&self) -> u64 {
        self.appends
    }

    /// Appends `sb` after the records block 0 holds, where the medium allows it; false when
    /// it cannot (no room left in a block of `block_size`, no record known to end cleanly,
    /// or a program that did not take), and the caller writes block 0 anew and then calls
    /// [`Block0::written`]. Until either succeeds, nothing may be appended after a record
    /// that may be torn, so a failure leaves the next superblock to a fresh block.
    pub fn append<D: Segments>(
        &mut self,
        ftl: &mut Ftl<D>,
        sb: &Superblock,
        block_size: usize,
    ) -> Result<bool> {
        let records = core::mem::take(&mut self.records);
        let room = block_size.saturating_sub(self.tail);
        let stride = sb.stride();
        if records == 0
            || stride != self.stride
            || (records + 1) * stride > room
            || !ftl.can_patch()
        {
            return Ok(false);
        }
        let mut rec = alloc::vec![0xFFu8; stride];
        sb.encode_record(&mut rec);
        match ftl.patch_sector(0, records * stride, &rec) {
            Ok(()) => {}
            // A program that did not take (caught by reading back): the record may be
            // half there; a fresh block 0 supersedes it.
            Err(Error::Flash(flash::FlashError::ProgramFailed { .. })) => return Ok(false),
            // Block 0 was lost to damage the cleaner met (its slot did not read back): the
            // fresh block 0 replaces it.
            Err(Error::Damaged(_)) => return Ok(false),
            Err(e) => return Err(e),
        }
        ftl.flush()?;
        self.records = records + 1;
        self.appends += 1;
        Ok(true)
    }

    /// Block 0 was written anew and flushed, holding one superblock, `sb`, whose free-space
    /// delta takes `tail` bytes at the block's end.
    pub fn written(&mut self, sb: &Superblock, tail: usize) {
        self.records = 1;
        self.tail = tail;
        self.stride = sb.stride();
    }
}
