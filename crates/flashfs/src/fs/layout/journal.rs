//! The bytes of a journal block (SPEC.md §8.5b): a header naming the block's epoch and
//! place in it, then entries, each one or more fragments of encoded operations
//! ([`super::op`]) sealed by a CRC over the block's epoch, index and offset, so that an
//! entry copied or left from another block or epoch never reads as this one's.

use alloc::vec::Vec;

use super::op::MAX_ALIGN;
use super::Timespec;

/// Journal block magic.
const MAGIC: [u8; 2] = *b"FJ";
/// Journal block format version: 2 says in the header what entries align to; blocks of
/// version 1 align them to [`MAX_ALIGN`].
const VERSION: u8 = 2;
/// Bytes of a journal block's header.
pub const HEADER_LEN: usize = 32;
/// Bytes a fragment adds to its operations: length (2) and CRC (4), before padding.
const ENTRY_OVERHEAD: usize = 6;

const CRC32: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI);

/// A journal block's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHeader {
    /// The checkpoint (superblock commit number) whose entries the block holds.
    pub epoch: u64,
    /// Its place among the epoch's blocks (0, 1, … in the order they were started).
    pub index: u32,
    /// The time the first operation's time is relative to.
    pub base: Timespec,
    /// Bytes entries start and end on (a power of two up to [`MAX_ALIGN`]): the part's word,
    /// the least a program in place may be.
    pub align: usize,
}

impl BlockHeader {
    /// Encodes the header into the first [`HEADER_LEN`] bytes of `b`.
    pub fn encode(&self, b: &mut [u8]) {
        let h = &mut b[..HEADER_LEN];
        h[0..2].copy_from_slice(&MAGIC);
        h[2] = VERSION;
        h[3] = self.align.trailing_zeros() as u8;
        h[4..12].copy_from_slice(&self.epoch.to_le_bytes());
        h[12..16].copy_from_slice(&self.index.to_le_bytes());
        h[16..24].copy_from_slice(&self.base.sec.to_le_bytes());
        h[24..28].copy_from_slice(&self.base.nsec.to_le_bytes());
        let crc = CRC32.checksum(&h[..28]);
        h[28..32].copy_from_slice(&crc.to_le_bytes());
    }

    /// The header of a journal block, or `None` if the block holds none (never written,
    /// or not a journal block: either way it has no entries).
    pub fn decode(b: &[u8]) -> Option<BlockHeader> {
        let h = b.get(..HEADER_LEN)?;
        if h[0..2] != MAGIC || CRC32.checksum(&h[..28]).to_le_bytes() != h[28..32] {
            return None;
        }
        let align = match h[2] {
            1 => MAX_ALIGN,
            VERSION => 1usize
                .checked_shl(u32::from(h[3]))
                .filter(|&a| a <= MAX_ALIGN)?,
            _ => return None,
        };
        let u64_at = |i: usize| u64::from_le_bytes(h[i..i + 8].try_into().expect("8 bytes"));
        let nsec = u32::from_le_bytes(h[24..28].try_into().expect("4 bytes"));
        (nsec < 1_000_000_000).then(|| BlockHeader {
            epoch: u64_at(4),
            index: u32::from_le_bytes(h[12..16].try_into().expect("4 bytes")),
            base: Timespec {
                sec: u64_at(16) as i64,
                nsec,
            },
            align,
        })
    }
}

/// Bit of a fragment's length field: the entry goes on in the next block.
const CONTINUED: u16 = 0x8000;

/// Bytes a fragment of `ops_len` bytes of operations takes in a block of entries aligned
/// to `align`.
pub fn entry_len(ops_len: usize, align: usize) -> usize {
    (ops_len + ENTRY_OVERHEAD).div_ceil(align) * align
}

/// The most operation bytes a fragment taking at most `room` bytes holds.
pub fn fragment_cap(room: usize, align: usize) -> usize {
    (room / align * align).saturating_sub(ENTRY_OVERHEAD)
}

fn entry_crc(h: &BlockHeader, offset: usize, body: &[u8]) -> u32 {
    let mut d = CRC32.digest();
    d.update(&h.epoch.to_le_bytes());
    d.update(&h.index.to_le_bytes());
    d.update(&(offset as u32).to_le_bytes());
    d.update(body);
    d.finalize()
}

/// Encodes a fragment of an entry, `ops` (encoded operations), for `offset` in the block of
/// header `h`: length (with [`CONTINUED`] if the entry goes on in the next block),
/// operations, CRC of the block's epoch and index, the offset and all before it, padded with
/// erased bytes to the block's alignment.
pub fn encode_fragment(h: &BlockHeader, offset: usize, ops: &[u8], continued: bool) -> Vec<u8> {
    debug_assert!(ops.len() < usize::from(CONTINUED));
    let len = ops.len() as u16 | if continued { CONTINUED } else { 0 };
    let mut e = Vec::with_capacity(entry_len(ops.len(), h.align));
    e.extend_from_slice(&len.to_le_bytes());
    e.extend_from_slice(ops);
    let crc = entry_crc(h, offset, &e);
    e.extend_from_slice(&crc.to_le_bytes());
    e.resize(entry_len(ops.len(), h.align), 0xFF);
    e
}

/// The fragments of a journal block (encoded operations, and whether the entry goes on in
/// the next block) and where the valid ones end: fragments run from [`HEADER_LEN`] until
/// one is erased, does not fit or fails its CRC (a torn append). Only the last may go on.
pub fn decode_fragments<'a>(h: &BlockHeader, block: &'a [u8]) -> (Vec<(&'a [u8], bool)>, usize) {
    let mut out = Vec::new();
    let mut at = HEADER_LEN;
    while let Some(l) = block.get(at..at + 2) {
        let field = u16::from_le_bytes([l[0], l[1]]);
        let len = usize::from(field & !CONTINUED);
        if field == u16::MAX || at + entry_len(len, h.align) > block.len() {
            break;
        }
        let body = &block[at..at + 2 + len];
        let crc = &block[at + 2 + len..at + 2 + len + 4];
        if entry_crc(h, at, body).to_le_bytes() != crc {
            break;
        }
        out.push((&body[2..], field & CONTINUED != 0));
        at += entry_len(len, h.align);
        if field & CONTINUED != 0 {
            break;
        }
    }
    (out, at)
}

#[cfg(test)]
mod tests {
    use super::super::op::{decode_ops, encode_ops};
    use super::*;
    use proptest::prelude::*;

    fn t(sec: i64, nsec: u32) -> Timespec {
        Timespec { sec, nsec }
    }

    /// An erased block with header `h`, which reads back as `h`.
    fn fresh_block(h: &BlockHeader) -> Vec<u8> {
        let mut block = alloc::vec![0xFFu8; 512];
        h.encode(&mut block);
        assert_eq!(BlockHeader::decode(&block), Some(*h));
        block
    }

    /// Gives an edited header a valid CRC again.
    fn reseal(block: &mut [u8]) {
        let crc = CRC32.checksum(&block[..28]);
        block[28..32].copy_from_slice(&crc.to_le_bytes());
    }

    #[test]
    fn fragments_end_at_an_erased_torn_or_continued_one() {
        let h = BlockHeader {
            epoch: 12,
            index: 3,
            base: t(5, 6),
            align: 8,
        };
        let mut block = fresh_block(&h);
        let a = encode_fragment(&h, HEADER_LEN, b"first", false);
        assert_eq!(a.len() % 8, 0);
        block[HEADER_LEN..HEADER_LEN + a.len()].copy_from_slice(&a);
        let at = HEADER_LEN + a.len();
        let b = encode_fragment(&h, at, b"second, going on", true);
        block[at..at + b.len()].copy_from_slice(&b);
        let (f, end) = decode_fragments(&h, &block);
        assert_eq!(
            f,
            [(&b"first"[..], false), (&b"second, going on"[..], true)]
        );
        assert_eq!(end, at + b.len());
        // The CRC covers the place: the same bytes in another epoch's block, or at another
        // offset, are not an entry.
        let other = BlockHeader { epoch: 13, ..h };
        assert!(decode_fragments(&other, &block).0.is_empty());
        let mut moved = alloc::vec![0xFFu8; 512];
        h.encode(&mut moved);
        moved[HEADER_LEN + 8..HEADER_LEN + 8 + a.len()].copy_from_slice(&a);
        assert!(decode_fragments(&h, &moved).0.is_empty());
        // A torn second fragment (a bit still erased) ends the block after the first.
        let mut torn = block.clone();
        torn[at + 5] |= 0x10;
        if torn != block {
            assert_eq!(decode_fragments(&h, &torn).0, [(&b"first"[..], false)]);
        }
        // A damaged header makes the block hold nothing.
        block[6] ^= 1;
        assert_eq!(BlockHeader::decode(&block), None);
    }

    #[test]
    fn entries_align_to_the_word_the_header_names() {
        let h = BlockHeader {
            epoch: 7,
            index: 0,
            base: t(1, 0),
            align: 2,
        };
        let mut block = fresh_block(&h);
        // A call record of 15 bytes (19 bytes of operation) is 26 bytes on 2-byte words, 32
        // at the 8 bytes every block aligned to before.
        assert_eq!(entry_len(19, 2), 26);
        assert_eq!(entry_len(19, 8), 32);
        let a = encode_fragment(&h, HEADER_LEN, b"odd", false);
        assert_eq!(a.len(), 10);
        block[HEADER_LEN..HEADER_LEN + a.len()].copy_from_slice(&a);
        let at = HEADER_LEN + a.len();
        let b = encode_fragment(&h, at, b"next", false);
        block[at..at + b.len()].copy_from_slice(&b);
        assert_eq!(
            decode_fragments(&h, &block),
            (
                alloc::vec![(&b"odd"[..], false), (&b"next"[..], false)],
                at + b.len()
            )
        );
        // A block of version 1 has no alignment byte: its entries align to 8.
        let mut old = block.clone();
        old[2] = 1;
        old[3] = 0;
        reseal(&mut old);
        assert_eq!(
            BlockHeader::decode(&old),
            Some(BlockHeader { align: 8, ..h })
        );
        // An alignment past the largest word is not a journal block.
        let mut wide = block.clone();
        wide[3] = 4;
        reseal(&mut wide);
        assert_eq!(BlockHeader::decode(&wide), None);
    }

    proptest! {
        /// No bytes make decoding panic; whatever decodes encodes back to the same bytes.
        #[test]
        fn decoding_any_bytes_is_safe(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let base = t(1, 2);
            if let Ok(ops) = decode_ops(&bytes, base) {
                if let Some(again) = encode_ops(&ops, base) {
                    prop_assert_eq!(decode_ops(&again, base).unwrap(), ops);
                }
            }
            let h = BlockHeader { epoch: 1, index: 0, base, align: 2 };
            let mut block = alloc::vec![0xFFu8; 256];
            h.encode(&mut block);
            let n = bytes.len().min(256 - HEADER_LEN);
            block[HEADER_LEN..HEADER_LEN + n].copy_from_slice(&bytes[..n]);
            let (f, end) = decode_fragments(&h, &block);
            prop_assert!(end <= block.len());
            prop_assert!(f.iter().take(f.len().saturating_sub(1)).all(|(_, more)| !more));
            let _ = BlockHeader::decode(&bytes);
        }
    }
}
