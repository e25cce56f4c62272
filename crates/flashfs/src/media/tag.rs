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
/// A segment header's byte 26 in a segment put in SLC mode (erased, 0xFF, otherwise).
const SLC_MARK: u8 = 0x53;
/// Volume format of the block device (FTL).
pub const FORMAT_BLOCK_DEVICE: u8 = 1;
/// Volume format of the native file system.
pub const FORMAT_FILE_SYSTEM: u8 = 2;

/// Version of the log format these structures belong to (14: a NOR tag entry is 16 bytes,
/// the compact word, and its check comes last and covers the data checksum and the written
/// length, so a program stopped part-way leaves a torn entry, not a valid tag over an
/// unfinished checksum; 13: the anchors' records
/// take the first 128 slots of their segments; 12: a checkpoint keeps no page for a chunk of
/// the map with nothing mapped; 11: the anchors' records move to
/// less worn segments, and the pair the headers name records where; 10: the block device's counters
/// record counts what migration moved and holds FlexFS's shares; 9: a segment header and a
/// checkpoint's segment-table entry say whether the segment is in SLC mode; 8: a root says
/// whether a close wrote it; 7: a checkpoint's segment table
/// counts each segment's live slots, and the block device's records part the sectors
/// mapped, so a mount reads no map page; 6: on NOR parts with program
/// pages, slot data starts on a program page; 5: every anchor record written twice; 4: checkpoint directory pages keyed
/// from 0xF00000, which compact tags carry whole; 3: a checksum over every slot's data beside
/// its tag; 2 had anchors and checkpoints and tags that checked only themselves).
pub const FORMAT_VERSION: u8 = 14;

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
    /// Whether it was put in SLC mode when opened (MLC NAND): only its LSB slots are written.
    pub slc: bool,
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
    /// Which segments go to SLC mode on MLC NAND, as the log codes its setting
    /// (`log::Regions::code`; 0xFF: every segment in the part's own mode).
    pub regions: u8,
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
        if self.slc {
            b[26] = SLC_MARK;
        }
        b[27] = self.volume.regions;
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
            slc: match b[26] {
                0xFF => false,
                SLC_MARK => true,
                _ => return Err(Error::Corrupt("segment header cell mode")),
            },
            volume: Volume {
                format: b[5],
                slot_shift: b[6] & SLOT_SHIFT_MASK,
                unit_shift: b[6] >> 5,
                size: word(20),
                anchors: match (b[24], b[25]) {
                    (0xFF, 0xFF) => None,
                    (a, z) => Some([a, z]),
                },
                regions: b[27],
            },
        }))
    }
}

/// Bytes of the CRC-32C of a slot's data in a wide tag entry.
pub const DATA_CRC_LEN: usize = 4;
/// Bytes of a wide tag entry: the tag, then the CRC-32C of the slot's data.
pub const ENTRY_LEN: usize = TAG_LEN + DATA_CRC_LEN;

/// A NOR part's tag entry (SPEC.md §2.2): the tag as the compact word (key, sequence number,
/// kind), the CRC-32C of the slot's data, on reprogrammable parts the written length `W` and
/// the in-place mark, then one CRC-16 over all of it.
///
/// The entry's own check comes last and covers the data checksum and `W`, because a NOR
/// program may stop part-way (a power cut) having written a prefix: parallel NOR and NVRAM
/// program word after word. A check over the tag alone, ahead of the data checksum, would
/// then vouch for a checksum never finished, and the slot's data read as damage instead
/// of the slot as torn (never acknowledged, skipped). The mark is the one bit programmed
/// later, in place: the check takes it as unmarked.
///
/// Every byte here is programmed for every slot, 3.1% of a 512-byte slot (2.7% where the
/// part programs each word once): the compact word rather than the 12-byte tag, and the mark
/// a bit of `W`'s field rather than a byte of its own, keep it 4 bytes under the wide tag's
/// layout, which costs room (a 256 KiB segment of the 28F008SA holds 496 slots of 512 bytes
/// instead of 492) and bytes programmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NorEntry {
    /// Whether the part may program a written word again (`W` and the mark are kept).
    patchable: bool,
}

/// Offset of the data's CRC-32C in a NOR entry.
const NOR_DATA_CRC: usize = 8;
/// Offset of the written length and mark (u16) in a reprogrammable NOR part's entry.
const NOR_WRITTEN: usize = 12;
/// The mark's bit in the u16 at [`NOR_WRITTEN`]: set (erased) until a program in place
/// changes a byte below the written length.
const NOR_MARK_BIT: u16 = 0x8000;

impl NorEntry {
    /// Offset of the byte that holds the in-place mark (its top bit) in a reprogrammable
    /// NOR part's entry.
    pub const MARK: usize = NOR_WRITTEN + 1;
    /// The mark's bit in the byte at [`NorEntry::MARK`].
    pub const MARK_BIT: u8 = (NOR_MARK_BIT >> 8) as u8;
    /// Largest slot a reprogrammable part's entry can cover: `W` takes 15 bits.
    pub const MAX_PATCHABLE_SLOT: u32 = 16 * 1024;
    /// Largest key an entry can carry (the compact word's 24 bits).
    pub const MAX_KEY: u32 = COMPACT_MAX_KEY;
    /// Largest sequence number an entry can carry (the compact word's 36 bits).
    pub const MAX_SEQ: u64 = COMPACT_MAX_SEQ;

    /// The entry of a part that may (`patchable`) or may not program a word twice.
    pub const fn new(patchable: bool) -> Self {
        NorEntry { patchable }
    }

    /// Bytes of the entry: 16 with the written length and the mark, 14 without.
    pub const fn entry_len(self) -> usize {
        self.check_at() + 2
    }

    /// Offset of the CRC-16 that checks the entry.
    const fn check_at(self) -> usize {
        if self.patchable {
            NOR_WRITTEN + 2
        } else {
            NOR_WRITTEN
        }
    }

    /// The CRC-16 of the entry's checked bytes, the mark taken as unmarked.
    fn check(self, b: &[u8]) -> u16 {
        let at = self.check_at();
        let mut bytes = [0u8; NOR_WRITTEN + 2];
        bytes[..at].copy_from_slice(&b[..at]);
        if self.patchable {
            bytes[Self::MARK] |= Self::MARK_BIT;
        }
        CRC16.checksum(&bytes[..at])
    }

    /// Encodes the entry of a slot holding `data` (the whole slot, as programmed) into the
    /// front of `out` (at least [`NorEntry::entry_len`] bytes, erased). On a reprogrammable
    /// part the checksum covers the data up to its last byte that is not `0xFF`: the erased
    /// rest may be programmed in place later without failing it. The caller keeps slots of
    /// such parts within [`NorEntry::MAX_PATCHABLE_SLOT`].
    pub fn encode(self, tag: &Tag, data: &[u8], out: &mut [u8]) {
        out[..NOR_DATA_CRC].copy_from_slice(&compact_word(tag).to_le_bytes());
        let covered = if self.patchable {
            let len = data.iter().rposition(|&b| b != 0xFF).map_or(0, |i| i + 1);
            let field = (len as u16 & !NOR_MARK_BIT) | NOR_MARK_BIT;
            out[NOR_WRITTEN..NOR_WRITTEN + 2].copy_from_slice(&field.to_le_bytes());
            &data[..len]
        } else {
            data
        };
        out[NOR_DATA_CRC..NOR_DATA_CRC + DATA_CRC_LEN]
            .copy_from_slice(&data_crc32(covered).to_le_bytes());
        let at = self.check_at();
        let crc = self.check(out);
        out[at..at + 2].copy_from_slice(&crc.to_le_bytes());
    }

    /// Decodes the tag of an entry (its own check only, not the data's).
    pub fn decode(self, b: &[u8]) -> TagState {
        let Some(b) = b.get(..self.entry_len()) else {
            return TagState::Garbage;
        };
        if b.iter().all(|&x| x == 0xFF) {
            return TagState::Erased;
        }
        let at = self.check_at();
        if self.check(b) != u16::from_le_bytes([b[at], b[at + 1]]) {
            return TagState::Garbage;
        }
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[..8]);
        from_compact_word(u64::from_le_bytes(w))
    }

    /// The field of `W` and the mark, where the part keeps it.
    fn written_field(self, b: &[u8]) -> Option<u16> {
        match b.get(NOR_WRITTEN..NOR_WRITTEN + 2) {
            Some(w) if self.patchable => Some(u16::from_le_bytes([w[0], w[1]])),
            _ => None,
        }
    }

    /// The written length a reprogrammable part's entry records.
    pub fn written_len(self, b: &[u8]) -> usize {
        self.written_field(b)
            .map_or(0, |f| usize::from(f & !NOR_MARK_BIT))
    }

    /// Whether a program in place changed bytes below the written length (the mark is
    /// cleared): the data checksum no longer holds, and the owner's own checks are all
    /// that is left.
    pub fn marked(self, b: &[u8]) -> bool {
        self.written_field(b).is_some_and(|f| f & NOR_MARK_BIT == 0)
    }

    /// Whether `data` (the whole slot as read) matches the checksum of the entry `b`; an
    /// entry that is not a valid tag never does (erased where the caller expects data, or
    /// torn: its checksum may be unfinished).
    pub fn data_ok(self, b: &[u8], data: &[u8]) -> bool {
        matches!(self.decode(b), TagState::Valid(_)) && self.data_matches(b, data)
    }

    /// Whether `data` matches the checksum of the entry `b`, once `b` decoded as a valid
    /// tag ([`NorEntry::data_ok`] without decoding it again).
    pub fn data_matches(self, b: &[u8], data: &[u8]) -> bool {
        if self.marked(b) {
            return true;
        }
        let covered = if self.patchable {
            match data.get(..self.written_len(b)) {
                Some(d) => d,
                None => return false,
            }
        } else {
            data
        };
        b.get(NOR_DATA_CRC..NOR_DATA_CRC + DATA_CRC_LEN)
            == Some(&data_crc32(covered).to_le_bytes()[..])
    }
}

/// Largest sequence number a compact tag entry can carry (36 bits).
pub const COMPACT_MAX_SEQ: u64 = (1 << 36) - 1;
/// Largest key a compact tag entry can carry (24 bits).
pub const COMPACT_MAX_KEY: u32 = (1 << 24) - 1;

/// How a slot's tag and the checksum of its data are laid out together (SPEC.md §2.4).
///
/// The tag keeps a CRC of its own, apart from the data's: a scan that finds a valid tag over
/// damaged data still knows the slot is the newest version of its key (and reports the
/// damage when it is read) instead of skipping it and bringing an older version back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TagLayout {
    /// 16 bytes: the 12-byte tag, then the CRC-32C of the slot's data (NOR, and NAND with
    /// 16 or more free spare bytes).
    Wide,
    /// 12 bytes: key (24 bits), sequence number (36 bits), kind (4 bits), the tag's
    /// CRC-16, then the CRC-16 of the slot's data (NAND with 12 free spare bytes).
    Compact,
}

/// CRC-32C of a slot's data, as a wide entry stores it.
pub fn data_crc32(data: &[u8]) -> u32 {
    // The processor's CRC-32C instructions where it has them (the same checksum).
    #[cfg(feature = "std")]
    return crc32c::crc32c(data);
    #[cfg(not(feature = "std"))]
    DATA_CRC32.checksum(data)
}

/// CRC-16/IBM-SDLC of a slot's data, as a compact entry stores it.
pub fn data_crc16(data: &[u8]) -> u16 {
    DATA_CRC16.checksum(data)
}

/// The data checksums' lookup tables: every slot read and written is checksummed whole, so
/// on a host they take 16 tables at a time (8 KiB for CRC-16), about four times the speed of
/// one, and CRC-32C uses the processor's instructions: a sequential read through FUSE spent
/// half its time in a one-table checksum. A microcontroller build keeps one table (1 KiB,
/// 512 B) for its code size. Same checksums either way.
#[cfg(feature = "std")]
type DataTable = crc::Table<16>;
#[cfg(not(feature = "std"))]
type DataTable = crc::Table<1>;
#[cfg(not(feature = "std"))]
const DATA_CRC32: crc::Crc<u32, DataTable> = crc::Crc::<u32, DataTable>::new(&crc::CRC_32_ISCSI);
const DATA_CRC16: crc::Crc<u16, DataTable> = crc::Crc::<u16, DataTable>::new(&crc::CRC_16_IBM_SDLC);

/// The compact 64-bit word of a tag (SPEC.md §2.4): key (24 bits), sequence number (36),
/// kind code (3), copy (1). The caller keeps key and sequence number within them.
fn compact_word(tag: &Tag) -> u64 {
    u64::from(tag.key & COMPACT_MAX_KEY)
        | (tag.seq & COMPACT_MAX_SEQ) << 24
        | u64::from(tag.kind.code() | if tag.copy { 8 } else { 0 }) << 60
}

/// The tag a compact word holds, already checked.
fn from_compact_word(word: u64) -> TagState {
    let kind = (word >> 60) as u8;
    match Kind::from_code(kind & 7) {
        Some(k) => TagState::Valid(Tag {
            key: (word & u64::from(COMPACT_MAX_KEY)) as u32,
            seq: (word >> 24) & COMPACT_MAX_SEQ,
            kind: k,
            copy: kind & 8 != 0,
        }),
        None => TagState::Garbage,
    }
}

impl TagLayout {
    /// The layout for `free` spare bytes of a NAND page.
    pub fn for_spare(free: usize) -> Option<TagLayout> {
        if free >= ENTRY_LEN {
            Some(TagLayout::Wide)
        } else if free >= TAG_LEN {
            Some(TagLayout::Compact)
        } else {
            None
        }
    }

    /// Bytes of an entry.
    pub fn entry_len(self) -> usize {
        match self {
            TagLayout::Wide => ENTRY_LEN,
            TagLayout::Compact => TAG_LEN,
        }
    }

    /// Largest sequence number an entry can carry.
    pub fn max_seq(self) -> u64 {
        match self {
            TagLayout::Wide => MAX_SEQ,
            TagLayout::Compact => COMPACT_MAX_SEQ,
        }
    }

    /// Largest key an entry can carry.
    pub fn max_key(self) -> u32 {
        match self {
            TagLayout::Wide => u32::MAX,
            TagLayout::Compact => COMPACT_MAX_KEY,
        }
    }

    /// Encodes the entry of a slot holding `data` (the whole slot, as it is programmed) into
    /// the front of `out` (at least [`TagLayout::entry_len`] bytes).
    pub fn encode(self, tag: &Tag, data: &[u8], out: &mut [u8]) {
        match self {
            TagLayout::Wide => {
                out[..TAG_LEN].copy_from_slice(&tag.encode());
                out[TAG_LEN..ENTRY_LEN].copy_from_slice(&data_crc32(data).to_le_bytes());
            }
            TagLayout::Compact => {
                out[..8].copy_from_slice(&compact_word(tag).to_le_bytes());
                let crc = CRC16.checksum(&out[..8]);
                out[8..10].copy_from_slice(&crc.to_le_bytes());
                out[10..12].copy_from_slice(&data_crc16(data).to_le_bytes());
            }
        }
    }

    /// Decodes the tag of an entry (its own check only, not the data's).
    pub fn decode(self, b: &[u8]) -> TagState {
        match self {
            TagLayout::Wide => Tag::decode(b),
            TagLayout::Compact => {
                let Some(b) = b.get(..TAG_LEN) else {
                    return TagState::Garbage;
                };
                // The tag part alone: a torn program may leave the data CRC half written.
                if b[..10].iter().all(|&x| x == 0xFF) {
                    return if b[10..].iter().all(|&x| x == 0xFF) {
                        TagState::Erased
                    } else {
                        TagState::Garbage
                    };
                }
                if CRC16.checksum(&b[..8]) != u16::from_le_bytes([b[8], b[9]]) {
                    return TagState::Garbage;
                }
                let mut w = [0u8; 8];
                w.copy_from_slice(&b[..8]);
                from_compact_word(u64::from_le_bytes(w))
            }
        }
    }

    /// Whether `data` (the whole slot as read) matches the checksum in the entry `b`.
    pub fn data_ok(self, b: &[u8], data: &[u8]) -> bool {
        match self {
            TagLayout::Wide => b
                .get(TAG_LEN..ENTRY_LEN)
                .is_some_and(|c| c == data_crc32(data).to_le_bytes()),
            TagLayout::Compact => b
                .get(10..12)
                .is_some_and(|c| c == data_crc16(data).to_le_bytes()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(seq: u64) -> Tag {
        Tag {
            key: 0x00AB_CDEF,
            seq,
            kind: Kind::Page,
            copy: true,
        }
    }

    /// A NOR program stopped part-way leaves a prefix of the entry (word by word on
    /// parallel NOR and NVRAM): no prefix short of the whole entry is a valid tag, so a
    /// torn entry is a torn slot, never a tag over an unfinished data checksum.
    #[test]
    fn no_prefix_of_a_nor_entry_is_a_valid_tag() {
        let mut data = [0x5Au8; 512];
        data[300..].fill(0xFF);
        for patchable in [false, true] {
            let layout = NorEntry::new(patchable);
            let mut entry = [0xFFu8; 16];
            layout.encode(&sample(77), &data, &mut entry);
            assert_eq!(layout.decode(&entry), TagState::Valid(sample(77)));
            assert!(layout.data_ok(&entry, &data));
            assert_eq!(layout.written_len(&entry), if patchable { 300 } else { 0 });
            for n in 0..layout.entry_len() {
                let mut torn = [0xFFu8; 16];
                torn[..n].copy_from_slice(&entry[..n]);
                let want = if n == 0 {
                    TagState::Erased
                } else {
                    TagState::Garbage
                };
                assert_eq!(layout.decode(&torn), want, "prefix of {n} bytes");
                assert!(!layout.data_ok(&torn, &data), "prefix of {n} bytes");
            }
            // Damage to the data fails its checksum; the tag stays valid.
            let mut bad = data;
            bad[7] ^= 1;
            assert!(!layout.data_ok(&entry, &bad));
            if patchable {
                // Bytes past the written length may be programmed in place; below it, the
                // mark says the owner's checks are all that is left.
                let mut filled = data;
                filled[400] = 0;
                assert!(layout.data_ok(&entry, &filled));
                assert!(!layout.data_ok(&entry, &bad));
                entry[NorEntry::MARK] &= !NorEntry::MARK_BIT;
                assert!(layout.marked(&entry));
                assert!(layout.data_ok(&entry, &bad));
                assert_eq!(layout.decode(&entry), TagState::Valid(sample(77)));
            }
        }
    }

    #[test]
    fn the_data_checksums_are_crc_32c_and_crc_16_ibm_sdlc() {
        // The catalogue's check values: the same whichever implementation computes them.
        assert_eq!(data_crc32(b"123456789"), 0xE306_9283);
        assert_eq!(data_crc32(&[0x5A; 2048]), CRC32.checksum(&[0x5A; 2048]));
        assert_eq!(data_crc16(b"123456789"), 0x906E);
    }

    #[test]
    fn entries_round_trip_in_both_layouts() {
        let data = [0x5Au8; 512];
        for layout in [TagLayout::Wide, TagLayout::Compact] {
            let t = sample(layout.max_seq() - 1);
            let mut b = [0xFFu8; ENTRY_LEN];
            layout.encode(&t, &data, &mut b);
            assert_eq!(layout.decode(&b), TagState::Valid(t), "{layout:?}");
            assert!(layout.data_ok(&b, &data));
            assert_eq!(layout.decode(&[0xFF; ENTRY_LEN]), TagState::Erased);
            for k in [
                Kind::Sector,
                Kind::Trim,
                Kind::Lost,
                Kind::Counters,
                Kind::Root,
            ] {
                let t = Tag {
                    kind: k,
                    copy: false,
                    ..t
                };
                layout.encode(&t, &data, &mut b);
                assert_eq!(layout.decode(&b), TagState::Valid(t));
            }
        }
    }

    #[test]
    fn damaged_data_fails_its_checksum_but_leaves_the_tag_valid() {
        let data = [0x33u8; 512];
        for layout in [TagLayout::Wide, TagLayout::Compact] {
            let t = sample(77);
            let mut b = [0xFFu8; ENTRY_LEN];
            layout.encode(&t, &data, &mut b);
            for i in 0..data.len() * 8 {
                let mut d = data;
                d[i / 8] ^= 1 << (i % 8);
                assert!(!layout.data_ok(&b, &d), "{layout:?} bit {i}");
            }
            // A damaged data checksum is damaged data, not a torn tag.
            let mut c = b;
            c[layout.entry_len() - 1] ^= 1;
            assert_eq!(layout.decode(&c), TagState::Valid(t));
            assert!(!layout.data_ok(&c, &data));
            // Every bit of the tag part is checked by the tag's own CRC.
            let tag_bytes = if layout == TagLayout::Wide {
                TAG_LEN
            } else {
                10
            };
            for i in 0..tag_bytes * 8 {
                let mut d = b;
                d[i / 8] ^= 1 << (i % 8);
                assert_eq!(layout.decode(&d), TagState::Garbage, "{layout:?} bit {i}");
            }
        }
    }

    #[test]
    fn an_erased_slot_never_passes_as_written_data() {
        // A page that reads as erased where a written slot should be: the erased checksum
        // field never matches erased data, at any slot size.
        for shift in 6..=15 {
            let data = vec![0xFFu8; 1 << shift];
            assert_ne!(data_crc32(&data), u32::MAX, "{shift}");
            assert_ne!(data_crc16(&data), u16::MAX, "{shift}");
            for layout in [TagLayout::Wide, TagLayout::Compact] {
                assert!(!layout.data_ok(&[0xFF; ENTRY_LEN], &data));
            }
        }
    }

    #[test]
    fn layouts_follow_the_free_spare_bytes() {
        assert_eq!(TagLayout::for_spare(11), None);
        assert_eq!(TagLayout::for_spare(12), Some(TagLayout::Compact));
        assert_eq!(TagLayout::for_spare(16), Some(TagLayout::Wide));
        assert_eq!(TagLayout::for_spare(70), Some(TagLayout::Wide));
    }

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
            slc: false,
            volume: Volume {
                format: 1,
                slot_shift: 9,
                unit_shift: 2,
                size: 30_000,
                anchors: Some([0, 2]),
                regions: 0xFF,
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
        // A segment in SLC mode says so in byte 26, which the CRC covers.
        let slc = SegHeader { slc: true, ..h };
        assert_eq!(slc.encode()[26], SLC_MARK);
        assert_eq!(SegHeader::decode(&slc.encode()), Ok(Some(slc)));
        for i in 0..HEADER_LEN * 8 {
            let mut d = b;
            d[i / 8] ^= 1 << (i % 8);
            assert!(SegHeader::decode(&d).is_err(), "bit {i}");
        }
    }
}
