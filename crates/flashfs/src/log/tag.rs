//! The on-flash records of the log: slot tags and segment headers (see SPEC.md).
//!
//! A tag says what a slot holds and how new it is. It is 12 bytes so that it fits the free
//! spare bytes of small-page NAND; the sequence number is 40 bits, more than the programs a
//! device of any preset can take in its life.

use crate::error::{Error, Result};

/// Bytes of an encoded tag.
pub const TAG_LEN: usize = 12;
/// Bytes of an encoded segment header.
pub const HEADER_LEN: usize = 32;
/// Largest sequence number a tag can carry.
pub const MAX_SEQ: u64 = (1 << 40) - 1;

const MAGIC: u32 = 0x5346_4C46; // "FLFS"
/// Kind-byte bit of a slot written by the cleaner.
const COPY_FLAG: u8 = 0x80;
/// Volume format of the block device (FTL).
pub const FORMAT_BLOCK_DEVICE: u8 = 1;
/// Volume format of the native file system.
pub const FORMAT_FILE_SYSTEM: u8 = 2;

/// Version of the log format these structures belong to (2: anchors and checkpoints).
pub const FORMAT_VERSION: u8 = 2;

const CRC16: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_IBM_SDLC);
const CRC32: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI);

/// What a slot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A sector of the block device; the key is its number.
    Sector,
    /// A list of trimmed sector ranges; the key is unused.
    Trim,
    /// A list of sector ranges whose newest data was lost to an unreadable block: they read
    /// as an I/O error until written again.
    Lost,
    /// The block device's lifetime counters (only the newest is live); the key is unused.
    Counters,
    /// A page of a checkpoint's body (the segment table, the owner's map) or of its
    /// directory; the key is the page's number (SPEC §3.4).
    Page,
    /// A checkpoint's root, or the mark that the one before it is out of date; written only
    /// in the anchor segments.
    Root,
}

impl Kind {
    fn code(self) -> u8 {
        match self {
            Kind::Sector => 1,
            Kind::Trim => 2,
            Kind::Lost => 3,
            Kind::Counters => 4,
            Kind::Page => 5,
            Kind::Root => 6,
        }
    }

    /// Whether records of this kind hide older versions of other slots (and so are needed
    /// only while such versions may exist).
    pub fn is_tombstone(self) -> bool {
        matches!(self, Kind::Trim | Kind::Lost)
    }

    fn from_code(c: u8) -> Option<Kind> {
        match c {
            1 => Some(Kind::Sector),
            2 => Some(Kind::Trim),
            3 => Some(Kind::Lost),
            4 => Some(Kind::Counters),
            5 => Some(Kind::Page),
            6 => Some(Kind::Root),
            _ => None,
        }
    }
}

/// The tag of a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tag {
    /// Whose data it is (for a sector: the sector number).
    pub key: u32,
    /// When it was written: versions of a key are ordered by it.
    pub seq: u64,
    /// What it is.
    pub kind: Kind,
    /// Written by the cleaner: a copy of a slot with the same key and sequence number.
    /// Between equal sequence numbers a copy beats an original, and a later copy an earlier.
    pub copy: bool,
}

/// What reading a tag found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TagState {
    /// Never programmed since the erase.
    Erased,
    /// Programmed, but unreadable or failing its CRC (a torn write).
    Garbage,
    /// A valid tag.
    Valid(Tag),
}

impl Tag {
    /// Encodes the tag.
    pub fn encode(&self) -> [u8; TAG_LEN] {
        let mut b = [0u8; TAG_LEN];
        b[0..4].copy_from_slice(&self.key.to_le_bytes());
        b[4..9].copy_from_slice(&self.seq.to_le_bytes()[..5]);
        b[9] = self.kind.code() | if self.copy { COPY_FLAG } else { 0 };
        let crc = CRC16.checksum(&b[..10]);
        b[10..12].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes a tag read from flash.
    pub fn decode(b: &[u8]) -> TagState {
        let Some(b) = b.get(..TAG_LEN) else {
            return TagState::Garbage;
        };
        if b.iter().all(|&x| x == 0xFF) {
            return TagState::Erased;
        }
        if CRC16.checksum(&b[..10]) != u16::from_le_bytes([b[10], b[11]]) {
            return TagState::Garbage;
        }
        let mut seq = [0u8; 8];
        seq[..5].copy_from_slice(&b[4..9]);
        match Kind::from_code(b[9] & !COPY_FLAG) {
            Some(kind) => TagState::Valid(Tag {
                key: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
                seq: u64::from_le_bytes(seq),
                kind,
                copy: b[9] & COPY_FLAG != 0,
            }),
            None => TagState::Garbage,
        }
    }
}

/// The header a segment gets when it is opened for writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegHeader {
    /// Erases this segment has had, the wear record that survives remounts.
    pub erase_count: u32,
    /// Sequence number when it was opened: the log's order of segments.
    pub open_seq: u64,
    /// Which write head opened it (0: unknown), so a mount can resume the heads.
    pub head: u8,
    /// Volume parameters every header repeats, so any one of them describes the volume.
    pub volume: Volume,
}

/// Parameters fixed when a volume is formatted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Volume {
    /// What lives on the log (see [`FORMAT_BLOCK_DEVICE`]).
    pub format: u8,
    /// Bytes per slot, as log2 (below 32).
    pub slot_shift: u8,
    /// Erase units per segment, as log2 (below 8): NOR units smaller than a segment's
    /// least size are taken several at a time.
    pub unit_shift: u8,
    /// Size as the owner counts it (the block device: sectors exported).
    pub size: u32,
    /// The two segments that hold checkpoint roots, if the volume keeps checkpoints.
    pub anchors: Option<[u8; 2]>,
}

/// Bits of header byte 6 that hold the slot shift; the top 3 hold the unit shift.
const SLOT_SHIFT_MASK: u8 = 0x1F;

impl SegHeader {
    /// Encodes the header.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0xFFu8; HEADER_LEN];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4] = FORMAT_VERSION;
        b[5] = self.volume.format;
        // Headers written before segments could take several units have 0 in the top bits.
        b[6] = self.volume.slot_shift & SLOT_SHIFT_MASK | self.volume.unit_shift << 5;
        b[7] = self.head;
        b[8..12].copy_from_slice(&self.erase_count.to_le_bytes());
        b[12..20].copy_from_slice(&self.open_seq.to_le_bytes());
        b[20..24].copy_from_slice(&self.volume.size.to_le_bytes());
        if let Some([a, z]) = self.volume.anchors {
            b[24] = a;
            b[25] = z;
        }
        let crc = CRC32.checksum(&b[..28]);
        b[28..32].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes a header; `Ok(None)` when the area is erased (a fresh segment).
    pub fn decode(b: &[u8]) -> Result<Option<SegHeader>> {
        let Some(b) = b.get(..HEADER_LEN) else {
            return Err(Error::Corrupt("short segment header"));
        };
        if b.iter().all(|&x| x == 0xFF) {
            return Ok(None);
        }
        let word = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        if word(0) != MAGIC {
            return Err(Error::NotFormatted("bad segment magic"));
        }
        if CRC32.checksum(&b[..28]) != word(28) {
            return Err(Error::Corrupt("segment header checksum"));
        }
        if b[4] != FORMAT_VERSION {
            return Err(Error::NotFormatted("unsupported format version"));
        }
        let mut seq = [0u8; 8];
        seq.copy_from_slice(&b[12..20]);
        Ok(Some(SegHeader {
            erase_count: word(8),
            open_seq: u64::from_le_bytes(seq),
            head: b[7],
            volume: Volume {
                format: b[5],
                slot_shift: b[6] & SLOT_SHIFT_MASK,
                unit_shift: b[6] >> 5,
                size: word(20),
                anchors: match (b[24], b[25]) {
                    (0xFF, 0xFF) => None,
                    (a, z) => Some([a, z]),
                },
            },
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip_and_detect_damage() {
        let t = Tag {
            key: 0xDEAD_BEEF,
            seq: MAX_SEQ - 3,
            kind: Kind::Sector,
            copy: true,
        };
        let b = t.encode();
        assert_eq!(Tag::decode(&b), TagState::Valid(t));
        assert_eq!(Tag::decode(&[0xFF; TAG_LEN]), TagState::Erased);
        for i in 0..TAG_LEN * 8 {
            let mut d = b;
            d[i / 8] ^= 1 << (i % 8);
            assert_eq!(Tag::decode(&d), TagState::Garbage, "bit {i}");
        }
        assert_eq!(Tag::decode(&b[..5]), TagState::Garbage);
    }

    #[test]
    fn headers_round_trip_and_detect_damage() {
        let h = SegHeader {
            erase_count: 77,
            open_seq: 123_456_789,
            head: 3,
            volume: Volume {
                format: 1,
                slot_shift: 9,
                unit_shift: 2,
                size: 30_000,
                anchors: Some([0, 2]),
            },
        };
        let b = h.encode();
        assert_eq!(b[6], 9 | 2 << 5);
        assert_eq!(SegHeader::decode(&b), Ok(Some(h)));
        // A header from before segments took several units: one unit each.
        let one = SegHeader {
            volume: Volume {
                unit_shift: 0,
                ..h.volume
            },
            ..h
        };
        assert_eq!(one.encode()[6], 9);
        assert_eq!(SegHeader::decode(&one.encode()), Ok(Some(one)));
        assert_eq!(SegHeader::decode(&[0xFF; HEADER_LEN]), Ok(None));
        for i in 0..HEADER_LEN * 8 {
            let mut d = b;
            d[i / 8] ^= 1 << (i % 8);
            assert!(SegHeader::decode(&d).is_err(), "bit {i}");
        }
    }
}
