//! Every byte the block device writes into the log's slots (SPEC §3): trim and loss records
//! (§3.2), the counters record (§3.2a), and its part of a checkpoint (§3.5): the map pages,
//! of entries or of runs, and the list of the records the map keeps. What decides when they
//! are written lives beside: `mod.rs` (records), `map.rs` and `pages.rs` (checkpoints).

use alloc::boxed::Box;
use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::log::Shares;

/// CRC of the record's fields: the tag's CRC covers the tag only.
const CRC32: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI);

/// Bytes of a counters record before its erased remainder.
const RECORD_LEN: usize = 32;

/// The counters as a record stores them, in sectors and slots.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counters {
    /// Sectors the host wrote.
    pub sectors: u64,
    /// Slots the log programmed.
    pub slots: u64,
    /// Slots migration moved from SLC segments to MLC ones (among `slots`).
    pub migrated: u64,
    /// FlexFS's shares when the record was written (`None` on a part without an SLC mode).
    pub shares: Option<Shares>,
}

impl Counters {
    /// The record's data, one slot long: sectors, slots and migrated slots (u64 LE each), α
    /// and γ (u16 LE each, all ones for none), the CRC of the 28 bytes before it.
    pub fn encode(&self, slot: usize) -> Vec<u8> {
        let mut b = alloc::vec![0xFFu8; slot];
        b[0..8].copy_from_slice(&self.sectors.to_le_bytes());
        b[8..16].copy_from_slice(&self.slots.to_le_bytes());
        b[16..24].copy_from_slice(&self.migrated.to_le_bytes());
        let [alpha, gamma] = Shares::words(self.shares);
        b[24..26].copy_from_slice(&alpha.to_le_bytes());
        b[26..28].copy_from_slice(&gamma.to_le_bytes());
        let crc = CRC32.checksum(&b[..28]);
        b[28..RECORD_LEN].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// The counters a record holds, or `None` if it is damaged.
    pub fn decode(b: &[u8]) -> Option<Self> {
        let b = b.get(..RECORD_LEN)?;
        if CRC32.checksum(&b[..28]).to_le_bytes() != b[28..RECORD_LEN] {
            return None;
        }
        let word = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        let half = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        Some(Counters {
            sectors: word(0),
            slots: word(8),
            migrated: word(16),
            shares: Shares::from_words(half(24), half(26)),
        })
    }
}

/// Payload of trim and loss records: count (u16 LE), then (start u32 LE, count u32 LE)
/// ranges; the rest of the slot erased.
pub(super) fn encode_ranges(ranges: &[(u32, u32)], slot: usize) -> Vec<u8> {
    let mut b = alloc::vec![0xFFu8; slot];
    b[0..2].copy_from_slice(&(ranges.len() as u16).to_le_bytes());
    for (i, (start, count)) in ranges.iter().enumerate() {
        let at = 2 + i * 8;
        b[at..at + 4].copy_from_slice(&start.to_le_bytes());
        b[at + 4..at + 8].copy_from_slice(&count.to_le_bytes());
    }
    b
}

/// Ranges a record of `slot` bytes holds at most.
pub(super) fn ranges_per_record(slot: usize) -> usize {
    (slot - 2) / 8
}

/// The ranges of a trim or loss record.
pub(super) fn decode_ranges(b: &[u8]) -> Result<Vec<(u32, u32)>> {
    let bad = Error::Corrupt("malformed trim or loss record");
    let n = u16::from_le_bytes([
        *b.first().ok_or(bad.clone())?,
        *b.get(1).ok_or(bad.clone())?,
    ]) as usize;
    let body = b.get(2..2 + n * 8).ok_or(bad)?;
    Ok(body
        .chunks_exact(8)
        .map(|c| {
            (
                u32::from_le_bytes([c[0], c[1], c[2], c[3]]),
                u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
            )
        })
        .collect())
}

/// The part of a checkpoint after the map pages: what the map holds besides its entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RecordsPart {
    /// The counters record's address ([`UNMAPPED`] for none).
    pub(super) counters: u32,
    /// Sectors whose entry names a slot: a mount takes it from here, reading no map page.
    pub(super) mapped: u32,
    /// Each live trim or loss record's copies: its sequence number and address (a record
    /// kept twice has two entries of one sequence number).
    pub(super) copies: Vec<(u64, u32)>,
}

/// Bytes before the copies of a records part: their count, the counters record's address
/// and the sectors mapped.
const RECORDS_HEADER: usize = 12;

impl RecordsPart {
    /// Encodes the part: the count of copies (u32), the counters record's address (u32),
    /// the sectors mapped (u32), then per copy its sequence number (u64) and address
    /// (u32). Addresses are packed slot numbers, as in the map.
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(records_len(self.copies.len()));
        b.extend_from_slice(&(self.copies.len() as u32).to_le_bytes());
        b.extend_from_slice(&self.counters.to_le_bytes());
        b.extend_from_slice(&self.mapped.to_le_bytes());
        for (seq, at) in &self.copies {
            b.extend_from_slice(&seq.to_le_bytes());
            b.extend_from_slice(&at.to_le_bytes());
        }
        b
    }

    /// Decodes the part from the payloads of its pages, end to end.
    pub(super) fn decode(b: &[u8]) -> Result<Self> {
        let bad = Error::Corrupt("checkpoint map pages do not match the volume");
        let word = |i: usize| -> Result<u32> {
            Ok(u32::from_le_bytes(
                b.get(i..i + 4).ok_or(bad.clone())?.try_into().unwrap(),
            ))
        };
        let n = word(0)? as usize;
        let counters = word(4)?;
        let mapped = word(8)?;
        let mut copies = Vec::with_capacity(n.min(b.len() / 12));
        for i in 0..n {
            let at = RECORDS_HEADER + i * 12;
            let seq = u64::from_le_bytes(b.get(at..at + 8).ok_or(bad.clone())?.try_into().unwrap());
            copies.push((seq, word(at + 8)?));
        }
        Ok(RecordsPart {
            counters,
            mapped,
            copies,
        })
    }
}

/// Bytes of a records part listing `copies` record copies.
pub(super) fn records_len(copies: usize) -> usize {
    RECORDS_HEADER + copies * 12
}

/// Map entry of a sector never written, or trimmed: reads as zeros.
pub(super) const UNMAPPED: u32 = u32::MAX;
/// Map entry of a sector whose data was lost to an unreadable block: reads fail with EIO.
pub(super) const LOST: u32 = u32::MAX - 1;

/// Whether a map entry names a slot (not unmapped, not lost).
pub(super) fn is_slot(e: u32) -> bool {
    e != UNMAPPED && e != LOST
}

/// Bytes before a map page's runs or entries: its kind, a reserved byte, and its count.
pub(super) const PAGE_HEADER: usize = 4;
/// A map page of runs.
const PAGE_RUNS: u8 = 2;
/// A map page of entries.
const PAGE_ENTRIES: u8 = 1;
/// Bytes of a run: its length (u16) and first entry (u32).
pub(super) const RUN_BYTES: usize = 6;

/// Map entries a page of `payload` bytes holds.
pub(super) fn entries_per_page(payload: usize) -> usize {
    (payload - PAGE_HEADER) / 4
}

/// Encodes a map page of entries into `buf`.
pub(super) fn encode_entries(buf: &mut [u8], entries: &[u32]) {
    buf[0] = PAGE_ENTRIES;
    buf[2..4].copy_from_slice(&(entries.len() as u16).to_le_bytes());
    for (w, e) in buf[PAGE_HEADER..].chunks_exact_mut(4).zip(entries) {
        w.copy_from_slice(&e.to_le_bytes());
    }
}

/// Encodes a map page of runs into `buf`: (length, first entry); each next entry of a run
/// is one slot on (an address) or the same (unmapped, lost). Returns the bytes of the run
/// list written (header included).
pub(super) fn encode_runs(buf: &mut [u8], runs: &[(u16, u32)]) -> usize {
    buf[0] = PAGE_RUNS;
    buf[2..4].copy_from_slice(&(runs.len() as u16).to_le_bytes());
    for (r, (len, start)) in buf[PAGE_HEADER..].chunks_exact_mut(RUN_BYTES).zip(runs) {
        r[0..2].copy_from_slice(&len.to_le_bytes());
        r[2..6].copy_from_slice(&start.to_le_bytes());
    }
    PAGE_HEADER + runs.len() * RUN_BYTES
}

/// A map page read back.
pub(super) enum MapPage<'a> {
    /// A page of entries: its entries.
    Entries(Box<[u32]>),
    /// A page of runs: its run list, header included, as [`runs`] and [`run_lookup`] read
    /// it (a chunk of runs is kept in RAM in this form).
    Runs(&'a [u8]),
}

/// The map page in `buf`, or `None` if it is neither kind or its count runs past it.
pub(super) fn decode_page(buf: &[u8]) -> Option<MapPage<'_>> {
    let n = u16::from_le_bytes([*buf.get(2)?, *buf.get(3)?]) as usize;
    match *buf.first()? {
        PAGE_ENTRIES => Some(MapPage::Entries(
            buf.get(PAGE_HEADER..PAGE_HEADER + n * 4)?
                .chunks_exact(4)
                .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
                .collect(),
        )),
        PAGE_RUNS => buf.get(..PAGE_HEADER + n * RUN_BYTES).map(MapPage::Runs),
        _ => None,
    }
}

/// The runs of a run list ([`MapPage::Runs`]): (length, first entry).
pub(super) fn runs(list: &[u8]) -> impl Iterator<Item = (usize, u32)> + '_ {
    list.get(PAGE_HEADER..)
        .unwrap_or_default()
        .chunks_exact(RUN_BYTES)
        .map(|r| {
            let len = u16::from_le_bytes([r[0], r[1]]) as usize;
            (len, u32::from_le_bytes([r[2], r[3], r[4], r[5]]))
        })
}

/// Entry `i` of the chunk a run list ([`MapPage::Runs`]) maps.
pub(super) fn run_lookup(list: &[u8], i: usize) -> Option<u32> {
    let mut at = 0;
    for (len, start) in runs(list) {
        if i < at + len {
            let step = u32::from(is_slot(start));
            return Some(start.wrapping_add(step * (i - at) as u32));
        }
        at += len;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_decodes_to_what_was_encoded_and_damage_is_seen() {
        let c = Counters {
            sectors: 123_456_789,
            slots: 987_654_321_000,
            migrated: 55_555,
            shares: Some(Shares::new(0.25, 0.5)),
        };
        let b = c.encode(512);
        assert_eq!(b.len(), 512);
        assert_eq!(Counters::decode(&b), Some(c));
        let none = Counters { shares: None, ..c };
        assert_eq!(Counters::decode(&none.encode(512)), Some(none));
        for bit in 0..RECORD_LEN * 8 {
            let mut d = b.clone();
            d[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(Counters::decode(&d), None, "bit {bit}");
        }
        assert_eq!(Counters::decode(&b[..RECORD_LEN - 1]), None);
    }

    #[test]
    fn ranges_and_records_round_trip_and_short_bytes_are_refused() {
        let ranges = [(0, 5), (1 << 31, 7)];
        let b = encode_ranges(&ranges, 64);
        assert_eq!(b.len(), 64);
        assert_eq!(decode_ranges(&b).unwrap(), ranges);
        assert!(decode_ranges(&b[..10]).is_err());
        assert_eq!(ranges_per_record(512), 63);
        let copies = [(9, 100), (9, 2000), (12, 7)];
        let part = RecordsPart {
            counters: UNMAPPED,
            mapped: 77,
            copies: copies.to_vec(),
        };
        let r = part.encode();
        assert_eq!(r.len(), records_len(copies.len()));
        assert_eq!(RecordsPart::decode(&r).unwrap(), part);
        assert!(RecordsPart::decode(&r[..r.len() - 1]).is_err());
    }

    #[test]
    fn map_pages_round_trip_in_both_kinds() {
        let mut buf = alloc::vec![0xFFu8; 64];
        encode_entries(&mut buf, &[3, UNMAPPED, LOST]);
        assert!(
            matches!(decode_page(&buf), Some(MapPage::Entries(e)) if *e == [3, UNMAPPED, LOST])
        );
        let runs = [(3, 10), (2, UNMAPPED), (1, 4)];
        encode_runs(&mut buf, &runs);
        let Some(MapPage::Runs(list)) = decode_page(&buf) else {
            panic!("a page of runs");
        };
        assert_eq!(list.len(), PAGE_HEADER + 3 * RUN_BYTES);
        let all: Vec<u32> = (0..6).map_while(|i| run_lookup(list, i)).collect();
        assert_eq!(all, [10, 11, 12, UNMAPPED, UNMAPPED, 4]);
        // A count past the page, or another kind, is not a page.
        buf[2] = 200;
        assert!(decode_page(&buf).is_none());
        buf[0] = 7;
        assert!(decode_page(&buf).is_none());
    }
}
