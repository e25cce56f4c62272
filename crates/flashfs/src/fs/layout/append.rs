//! The bytes of an append block (SPEC.md §8.4a): a header, frames from the front, and at
//! the back one bit per frame that the frame's own commit clears.
//!
//! Version 7 packs frames with no padding: a fixed-size record is its bytes alone, any other
//! record its length (one byte below 64, else two) and its bytes, and a removal of the
//! file's oldest record the length of that record. Padding, a length that says what the file's
//! head already says, and an entry for a removal are all flash worn for nothing on a device
//! that commits each of a phone's 15-byte calls. A frame that does not fit the room left
//! goes on at the front of the file's next block (its **continuation**), so a block's end is
//! not lost either, and the block before names the next one in its **link**, programmed in
//! place when the next one starts: the replay follows it without a journal entry.
//!
//! Versions 5 and 6 (a padded frame per record, the commit bit in the length word) are read
//! as before.

use alloc::vec::Vec;

/// First byte of an append block of version 7.
pub const MAGIC: u8 = 0xA7;
/// First byte of a version 6 block: padded frames whose length word holds the open bit.
const MAGIC_V6: u8 = 0xA6;
/// First byte of a version 5 block: padded frames, none committed by itself.
const MAGIC_V5: u8 = 0xA5;
/// Bytes of a version 7 header: magic, continuation length (u16), link (u32).
pub const HEADER: usize = 7;
/// Where a version 7 block keeps its link to the file's next append block.
pub const LINK_AT: usize = 3;
/// A link still erased: no next block.
const NO_LINK: u32 = u32::MAX;
/// Bytes of a version 5 or 6 frame's length word.
const WORD: usize = 2;
/// Bit of the first byte of a version 7 frame's length: the frame removes the file's oldest
/// record.
const REMOVAL: u8 = 0x80;
/// Bit of the first byte of a version 7 frame's length: a second byte follows.
const LONG: u8 = 0x40;
/// Bits of the first byte holding the length (its high bits, if long).
const LEN_BITS: u8 = 0x3F;
/// Bit of a version 6 word that the frame's own commit clears.
const V6_OPEN_BIT: u16 = 0x8000;
/// Largest word a part may have (version 5 and 6 frames pad to it).
const MAX_ALIGN: usize = super::op::MAX_ALIGN;
/// Longest record.
const RECORD_MAX: usize = super::RECORD_MAX;

/// What a frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A record of the file, the next in number.
    Record,
    /// The removal of the file's oldest record (version 7).
    Removal,
}

/// A frame as read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Record or removal.
    pub kind: Kind,
    /// The record's length (a removal's: the length of the record it removed).
    pub len: usize,
    /// The record's bytes this block holds: all of them, or the first part of a frame that
    /// goes on in the file's next block.
    pub head: &'a [u8],
    /// Whether it committed itself (its bit is clear).
    pub committed: bool,
}

impl Frame<'_> {
    /// Whether the frame goes on at the front of the file's next block.
    pub fn spans(&self) -> bool {
        self.kind == Kind::Record && self.head.len() < self.len
    }
}

/// How a block's frames are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    /// Versions 5 and 6: frames padded to `align`; version 6 frames may commit themselves.
    Padded { align: usize, commits: bool },
    /// Version 7.
    Packed,
}

/// An append block, parsed.
#[derive(Debug, Clone, Copy)]
pub struct Block<'a> {
    bytes: &'a [u8],
    version: Version,
    /// The file's record size (0: records of any length).
    fixed: usize,
}

impl<'a> Block<'a> {
    /// `bytes` as an append block of a file of `fixed`-byte records (0: any length); `None`
    /// if it is not one.
    pub fn parse(bytes: &'a [u8], fixed: usize) -> Option<Block<'a>> {
        let version = match bytes {
            [MAGIC, ..] if bytes.len() > HEADER => Version::Packed,
            [magic @ (MAGIC_V6 | MAGIC_V5), shift, ..] => {
                let align = 1usize
                    .checked_shl(u32::from(*shift))
                    .filter(|&a| a <= MAX_ALIGN)?;
                Version::Padded {
                    align,
                    commits: *magic == MAGIC_V6,
                }
            }
            _ => return None,
        };
        let block = Block {
            bytes,
            version,
            fixed,
        };
        (block.frames_at() <= bytes.len()).then_some(block)
    }

    /// The bytes at its front that finish the last frame of the file's block before.
    pub fn continuation(&self) -> &'a [u8] {
        &self.bytes[self.frames_at() - self.continued()..self.frames_at()]
    }

    /// Bytes of its continuation.
    fn continued(&self) -> usize {
        match self.version {
            Version::Packed => match u16::from_le_bytes([self.bytes[1], self.bytes[2]]) {
                u16::MAX => 0,
                c => usize::from(c),
            },
            Version::Padded { .. } => 0,
        }
    }

    /// Where its first frame starts.
    fn frames_at(&self) -> usize {
        match self.version {
            Version::Packed => HEADER + self.continued(),
            Version::Padded { align, .. } => align.max(WORD),
        }
    }

    /// The sector of the file's next append block, if a link names one.
    pub fn link(&self) -> Option<u64> {
        match self.version {
            Version::Packed => {
                let l = &self.bytes[LINK_AT..LINK_AT + 4];
                match u32::from_le_bytes([l[0], l[1], l[2], l[3]]) {
                    NO_LINK => None,
                    s => Some(u64::from(s)),
                }
            }
            Version::Padded { .. } => None,
        }
    }

    /// Its frames from the first, as far as they parse. A fixed-size record's frame has no
    /// length to parse: every place that fits one is yielded, and the caller takes as many as
    /// the index counts or as have committed themselves.
    pub fn frames(&self) -> impl Iterator<Item = Frame<'a>> + '_ {
        let mut at = self.frames_at();
        let mut k = 0usize;
        let mut done = false;
        core::iter::from_fn(move || {
            if done {
                return None;
            }
            let f = match self.version {
                Version::Padded { align, commits } => {
                    let (f, end) = self.padded(at, align, commits)?;
                    at = end;
                    f
                }
                Version::Packed => {
                    let (f, end) = self.packed_frame(at, k)?;
                    at = end;
                    done = f.spans();
                    f
                }
            };
            k += 1;
            Some(f)
        })
    }

    /// A version 5 or 6 frame at `at`, and where the next starts.
    fn padded(&self, at: usize, align: usize, commits: bool) -> Option<(Frame<'a>, usize)> {
        let w = self.bytes.get(at..at + WORD)?;
        let word = u16::from_le_bytes([w[0], w[1]]);
        let len = usize::from(word & !V6_OPEN_BIT);
        let end = at + WORD + len;
        let head = self.bytes.get(at + WORD..end)?;
        Some((
            Frame {
                kind: Kind::Record,
                len,
                head,
                committed: commits && word & V6_OPEN_BIT == 0,
            },
            end.next_multiple_of(align),
        ))
    }

    /// Version 7 frame `k`, at `at`, and where the next starts.
    fn packed_frame(&self, at: usize, k: usize) -> Option<(Frame<'a>, usize)> {
        let end = area_end(self.bytes.len(), k + 1);
        if at >= end {
            return None;
        }
        let (kind, len, from) = if self.fixed > 0 {
            (Kind::Record, self.fixed, at)
        } else {
            let b0 = self.bytes[at];
            let (len, n) = match b0 & LONG {
                0 => (usize::from(b0 & LEN_BITS), 1),
                _ => {
                    let b1 = *self.bytes.get(at + 1).filter(|_| at + 1 < end)?;
                    (usize::from(b0 & LEN_BITS) << 8 | usize::from(b1), 2)
                }
            };
            // An erased byte reads as a long removal past the largest record: no frame.
            if len > RECORD_MAX {
                return None;
            }
            match b0 & REMOVAL {
                0 => (Kind::Record, len, at + n),
                _ => (Kind::Removal, len, at + n),
            }
        };
        let stop = match kind {
            Kind::Record => (from + len).min(end),
            Kind::Removal => from,
        };
        let (byte, bit) = commit_bit(self.bytes.len(), k);
        let f = Frame {
            kind,
            len,
            head: &self.bytes[from..stop],
            committed: self.bytes[byte] & bit == 0,
        };
        Some((f, stop))
    }
}

/// A fresh version 7 block of `size` bytes: its header (no link yet), then `continuation`,
/// the rest erased.
pub fn fresh(size: usize, continuation: &[u8]) -> Vec<u8> {
    let mut b = alloc::vec![0xFFu8; size];
    b[0] = MAGIC;
    if !continuation.is_empty() {
        let c = continuation.len() as u16;
        b[1..3].copy_from_slice(&c.to_le_bytes());
        b[HEADER..HEADER + continuation.len()].copy_from_slice(continuation);
    }
    b
}

/// The length field of a version 7 frame: one byte below 64, else two.
fn length(len: usize, kind: u8) -> Vec<u8> {
    match len {
        0..=63 => alloc::vec![kind | len as u8],
        _ => alloc::vec![kind | LONG | (len >> 8) as u8 & LEN_BITS, len as u8],
    }
}

/// The frame of a record of a file of `fixed`-byte records (0: any length, at most
/// [`RECORD_MAX`]).
pub fn record_frame(data: &[u8], fixed: usize) -> Vec<u8> {
    let mut f = if fixed == 0 {
        length(data.len(), 0)
    } else {
        Vec::with_capacity(data.len())
    };
    f.extend_from_slice(data);
    f
}

/// The frame of a removal of the oldest record, which was `len` bytes long.
pub fn removal_frame(len: usize) -> Vec<u8> {
    length(len, REMOVAL)
}

/// Where the frames of a block of `size` bytes holding `frames` frames must end: the bits of
/// their commits take the bytes after.
pub fn area_end(size: usize, frames: usize) -> usize {
    size - frames.div_ceil(8)
}

/// The byte (offset in the block) and bit that frame `k`'s own commit clears.
pub fn commit_bit(size: usize, k: usize) -> (usize, u8) {
    (size - 1 - k / 8, 1 << (k % 8))
}

/// Bytes of a record's frame `f` that must be in its block for the rest to go on in the
/// next: the length of a record of any length, or one byte of a fixed-size one.
pub fn min_head(f: &[u8], fixed: usize) -> usize {
    match f.first() {
        Some(&b0) if fixed == 0 && b0 & LONG != 0 => 2,
        _ => 1,
    }
}

/// Whether a link can name every block of a volume of `sectors` blocks: it is 32 bits, and
/// its erased value says "none".
pub fn links(sectors: u64) -> bool {
    sectors <= u64::from(NO_LINK)
}

/// The link field naming `sector` as the file's next block (on a volume [`links`] allows).
pub fn link_bytes(sector: u64) -> [u8; 4] {
    debug_assert!(sector < u64::from(NO_LINK));
    (sector as u32).to_le_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_names_every_block_of_a_volume_below_its_erased_value() {
        let most = u64::from(u32::MAX);
        assert!(links(most));
        assert!(!links(most + 1));
        assert_eq!(link_bytes(most - 1), (u32::MAX - 1).to_le_bytes());
    }

    /// A version 7 block of 512 bytes whose frames `frames` (bytes, committed) are packed
    /// after `continuation`.
    fn block(continuation: &[u8], frames: &[(&[u8], bool)]) -> Vec<u8> {
        let mut b = fresh(512, continuation);
        let mut at = HEADER + continuation.len();
        for (k, &(f, committed)) in frames.iter().enumerate() {
            let end = area_end(512, k + 1);
            let n = f.len().min(end - at);
            b[at..at + n].copy_from_slice(&f[..n]);
            at += n;
            if committed {
                let (byte, bit) = commit_bit(512, k);
                b[byte] &= !bit;
            }
        }
        b
    }

    #[test]
    fn frames_pack_without_padding_and_read_back() {
        let call = [7u8; 15];
        let a = record_frame(&call, 15);
        assert_eq!(a.len(), 15, "a fixed-size record is its bytes alone");
        let v = record_frame(b"a message", 0);
        assert_eq!(v.len(), 10, "a length below 64 takes one byte");
        assert_eq!(record_frame(&[0; 64], 0).len(), 66);
        let rm = removal_frame(9);
        assert_eq!(rm.len(), 1);
        let b = block(&[], &[(&v, true), (&rm, true), (&v, false)]);
        let blk = Block::parse(&b, 0).unwrap();
        let got: Vec<(Kind, usize, &[u8], bool)> = blk
            .frames()
            .take(3)
            .map(|f| (f.kind, f.len, f.head, f.committed))
            .collect();
        assert_eq!(
            got,
            [
                (Kind::Record, 9, &b"a message"[..], true),
                (Kind::Removal, 9, &[][..], true),
                (Kind::Record, 9, &b"a message"[..], false),
            ]
        );
        // The erased word after them ends the frames.
        assert_eq!(blk.frames().count(), 3);
        assert_eq!(blk.link(), None);
        // Fixed-size records: 15 bytes each, back to back.
        let b = block(&[], &[(&a, true), (&a, false)]);
        let blk = Block::parse(&b, 15).unwrap();
        let mut f = blk.frames();
        assert_eq!(
            f.next().map(|f| (f.head.len(), f.committed)),
            Some((15, true))
        );
        assert_eq!(
            f.next().map(|f| (f.head.len(), f.committed)),
            Some((15, false))
        );
    }

    #[test]
    fn a_frame_that_does_not_fit_goes_on_in_the_next_block() {
        // 33 calls of 15 bytes fill 495 of the 505 bytes after the header, and the bits of
        // up to 40 frames take 5: the 34th has 5 bytes here.
        let call = [1u8; 15];
        let frames: Vec<(&[u8], bool)> = (0..34).map(|_| (&call[..], true)).collect();
        let b = block(&[], &frames);
        let blk = Block::parse(&b, 15).unwrap();
        let all: Vec<Frame> = blk.frames().collect();
        assert_eq!(all.len(), 34);
        assert!(all[..33].iter().all(|f| !f.spans() && f.committed));
        assert_eq!(all[33].head.len(), 512 - 5 - HEADER - 33 * 15);
        assert!(all[33].spans());
        // The next block starts with the rest of it.
        let rest = &call[all[33].head.len()..];
        let next = fresh(512, rest);
        let nb = Block::parse(&next, 15).unwrap();
        assert_eq!(nb.continuation(), rest);
        assert!(nb.frames().next().is_some_and(|f| !f.committed));
    }

    #[test]
    fn a_link_names_the_next_block() {
        let mut b = block(&[], &[]);
        b[LINK_AT..LINK_AT + 4].copy_from_slice(&link_bytes(4321));
        assert_eq!(Block::parse(&b, 0).unwrap().link(), Some(4321));
    }

    #[test]
    fn damaged_blocks_parse_safely() {
        assert!(Block::parse(&[0u8; 512], 0).is_none());
        // A continuation longer than the block is not a block.
        let mut b = fresh(512, &[]);
        b[1..3].copy_from_slice(&600u16.to_le_bytes());
        assert!(Block::parse(&b, 0).is_none());
        // A length past the largest record (an erased byte reads so) ends the frames.
        for word in [[0x7F, 0xFF], [LONG | 0x10, 0x01], [0xFF, 0xFF]] {
            let mut b = fresh(512, &[]);
            b[HEADER..HEADER + 2].copy_from_slice(&word);
            assert_eq!(Block::parse(&b, 0).unwrap().frames().count(), 0);
        }
        // The longest record's length reads back.
        let long = record_frame(&[5; RECORD_MAX], 0);
        let mut b = fresh(8192, &[]);
        b[HEADER..HEADER + long.len()].copy_from_slice(&long);
        let blk = Block::parse(&b, 0).unwrap();
        assert_eq!(blk.frames().next().map(|f| f.head.len()), Some(RECORD_MAX));
        // Any bytes: no panic.
        let mut x = 0x1234_5678u32;
        for _ in 0..200 {
            let mut b = fresh(64, &[]);
            for byte in b.iter_mut().skip(1) {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                *byte = x as u8;
            }
            for fixed in [0, 1, 15] {
                if let Some(blk) = Block::parse(&b, fixed) {
                    let _ = blk.continuation();
                    let _ = blk.link();
                    assert!(blk.frames().count() <= 64);
                }
            }
        }
    }

    #[test]
    fn version_6_frames_read_as_before() {
        // An open bit in the word, frames padded to the part's word of 2 bytes.
        let mut b = alloc::vec![0xFFu8; 512];
        b[0] = MAGIC_V6;
        b[1] = 1;
        let mut at = 2;
        for (r, committed) in [(&b"call"[..], false), (&b"odd"[..], true)] {
            let mut word = r.len() as u16 | V6_OPEN_BIT;
            if committed {
                word &= !V6_OPEN_BIT;
            }
            b[at..at + 2].copy_from_slice(&word.to_le_bytes());
            b[at + 2..at + 2 + r.len()].copy_from_slice(r);
            at = (at + 2 + r.len()).next_multiple_of(2);
        }
        let blk = Block::parse(&b, 0).unwrap();
        let got: Vec<(&[u8], bool)> = blk.frames().map(|f| (f.head, f.committed)).collect();
        assert_eq!(got, [(&b"call"[..], false), (&b"odd"[..], true)]);
        assert!(blk.link().is_none() && blk.continuation().is_empty());
        // Version 5: nothing committed itself.
        b[0] = MAGIC_V5;
        let blk = Block::parse(&b, 0).unwrap();
        assert!(blk.frames().all(|f| !f.committed));
    }
}
