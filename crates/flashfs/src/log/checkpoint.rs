//! Checkpoints: the log's segment table and its owner's map written to flash, so that a mount
//! reads them instead of scanning every segment (Ryu & Park's startup area; SPEC §3.4).
//!
//! A checkpoint is three things:
//! - a **body** of pages, each a log slot of kind [`Kind::Page`](crate::media::tag::Kind::Page) written like any other, so
//!   the cleaner and the wear leveller treat them as data: the segment table first, then
//!   the owner's pages (the block device's sector map);
//! - a **directory**: pages of the same kind listing the body's addresses;
//! - a **root** naming the directory, in one of two **anchor** segments that every segment
//!   header names, so a mount finds it without a scan. Records wear the anchors faster than
//!   the log wears its segments, so once the anchor due for erasure has worn ahead of the
//!   least worn free segments by the wear leveller's margin, the records move to two of
//!   those (the *working* pair) and the named pair, the *master*, keeps only a record
//!   saying where they went: a chain of two, like littlefs's superblock chain.
//!
//! A root is valid only while nothing has been programmed after it: before the first
//! program that follows a root, a **mark** is appended to the anchor saying it is out of
//! date. A mount that finds a mark (a session that ended without a checkpoint, as after a
//! power cut) scans. Anchors fill a slot per record and are erased in turn: a root and a
//! mark per session wear them far less than the log's segments.
//!
//! This module holds the encodings; [`super::Log`] decides when they are written.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use super::SlotAddr;
use crate::error::{Error, Result};

/// Head code in the header of an anchor segment.
pub const ANCHOR_HEAD: u8 = 5;

/// Slots of an anchor that take records, at most: on a part of long segments an anchor takes
/// its turn after as many records as on a part of short ones, so that a mount's search for
/// its newest record takes as many reads whatever the segments' length (format 13).
pub(crate) const ANCHOR_SLOTS: u32 = 128;

/// A directory entry for a body page the checkpoint does not hold.
pub(crate) const ABSENT: u32 = u32::MAX;

/// Key of the first directory page (body pages are keyed from 0, below it). Under 2²⁴, so
/// that a compact tag entry, which keeps 24 bits of the key (SPEC §2.4), tells a directory
/// page from a body page: with a key of 2³¹ a directory page read back as body page 0, and
/// the cleaner dropped it as dead (format 3, NAND with 12 spare bytes).
pub(crate) const DIR_KEY: u32 = 0x00F0_0000;

/// Segments a device needs before its volumes keep checkpoints by default: on smaller ones a
/// scan is cheap, and two anchor segments are more than a hundredth of the device.
pub const CHECKPOINT_MIN_SEGMENTS: u32 = 256;

const ROOT_MAGIC: u32 = 0x5043_4C46; // "FLCP"
const RECORD_ROOT: u8 = 1;
const RECORD_MARK: u8 = 2;
const RECORD_MOVED: u8 = 3;
const ROOT_FIXED: usize = 64;
/// Bytes of a segment-table entry: state, used slots (u16), live slots the owner's pages
/// name (u16), erase count (u32), opening sequence number and lowest sequence number held
/// (40 bits each).
pub(crate) const SEG_ENTRY: usize = 19;
/// Absent head, or lowest sequence number of a segment holding none.
const NONE32: u32 = u32::MAX;
/// A 40-bit sequence number that means none (the log never reaches it).
pub(crate) const NONE40: u64 = (1 << 40) - 1;

const CRC32: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI);

/// Bytes of a page's payload: the slot less its CRC.
pub(crate) fn payload(slot_size: usize) -> usize {
    slot_size - 4
}

/// Seals a page: the CRC of its key and payload goes in its last 4 bytes, so a misdirected
/// or damaged page is refused.
pub(crate) fn seal_page(key: u32, page: &mut [u8]) {
    let n = page.len() - 4;
    let crc = page_crc(key, &page[..n]);
    page[n..].copy_from_slice(&crc.to_le_bytes());
}

/// The payload of a page read back, if it is the page `key` and intact.
pub(crate) fn open_page(key: u32, page: &[u8]) -> Result<&[u8]> {
    let n = page.len() - 4;
    let crc = u32::from_le_bytes([page[n], page[n + 1], page[n + 2], page[n + 3]]);
    if page_crc(key, &page[..n]) != crc {
        return Err(Error::Corrupt("checkpoint page checksum"));
    }
    Ok(&page[..n])
}

/// The checksum a page `key` with this payload carries.
pub(crate) fn page_crc(key: u32, payload: &[u8]) -> u32 {
    let mut d = CRC32.digest();
    d.update(&key.to_le_bytes());
    d.update(payload);
    d.finalize()
}

/// A segment's record in a checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SegEntry {
    pub state: u8,
    /// In SLC mode (bit 7 of the state's byte).
    pub slc: bool,
    pub used: u16,
    /// Live slots other than the checkpoint's own pages and what the owner holds apart
    /// ([`super::Owner::held_apart`]): those its pages' entries name. A mount takes them
    /// from here instead of reading every page of the owner's.
    pub live: u16,
    pub erase_count: u32,
    pub open_seq: u64,
    /// `u64::MAX` when the segment holds no slot.
    pub min_seq: u64,
}

/// The bit of a segment-table entry's state byte that says the segment is in SLC mode.
const SLC_BIT: u8 = 0x80;

impl SegEntry {
    pub(crate) fn encode(&self, b: &mut [u8]) {
        b[0] = self.state | if self.slc { SLC_BIT } else { 0 };
        b[1..3].copy_from_slice(&self.used.to_le_bytes());
        b[3..5].copy_from_slice(&self.live.to_le_bytes());
        b[5..9].copy_from_slice(&self.erase_count.to_le_bytes());
        b[9..14].copy_from_slice(&self.open_seq.min(NONE40).to_le_bytes()[..5]);
        b[14..19].copy_from_slice(&self.min_seq.min(NONE40).to_le_bytes()[..5]);
    }

    pub(crate) fn decode(b: &[u8]) -> Self {
        let u40 = |b: &[u8]| {
            let mut w = [0u8; 8];
            w[..5].copy_from_slice(&b[..5]);
            u64::from_le_bytes(w)
        };
        let min = u40(&b[14..19]);
        SegEntry {
            state: b[0] & !SLC_BIT,
            slc: b[0] & SLC_BIT != 0,
            used: u16::from_le_bytes([b[1], b[2]]),
            live: u16::from_le_bytes([b[3], b[4]]),
            erase_count: u32::from_le_bytes([b[5], b[6], b[7], b[8]]),
            open_seq: u40(&b[9..14]),
            min_seq: if min == NONE40 { u64::MAX } else { min },
        }
    }
}

/// The root of a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Root {
    /// The sequence number the log gives its next slot.
    pub seq: u64,
    /// Pages of the segment table (the body's first pages).
    pub log_pages: u32,
    /// Pages of the owner's part of the body (after the segment table).
    pub owner_pages: u32,
    /// Each head's open segment and its used slots.
    pub heads: [Option<(u32, u32)>; super::HEADS],
    /// The directory's pages, in order.
    pub dirs: Vec<SlotAddr>,
    /// Segments opened while the segment table and the directory were written, which the
    /// table shows as they were before: their headers say the rest.
    pub late: Vec<u32>,
    /// The free segments the log may open after the root, until the next: a mount reads
    /// their headers to find what was written since ("rolls forward").
    pub set: Vec<u32>,
    /// Whether the volume was closed with this root: the owner forgot nothing after it
    /// unless something was programmed after it too. On a volume on two devices nothing
    /// was: the first slot written after a close appends the root again, not closed, so a
    /// mount that finds a closed root newest rolls nothing forward (SPEC.md §3.5).
    pub closed: bool,
}

/// A record in an anchor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Record {
    /// A checkpoint.
    Root(Root),
    /// The checkpoint before it is out of date.
    Mark,
    /// Written to the master pair only: records go on in these two segments (the working
    /// pair), the first of which holds one already.
    Moved([u32; 2]),
}

/// Bytes of a directory group's header: its first key and its count of entries (u32 each).
const GROUP_HEAD: usize = 8;
/// Keys without a page a directory group takes in (as [`ABSENT`] entries) rather than end
/// and start another: a group's header costs two entries.
const GROUP_GAP: u32 = 2;

/// Writes at the front of `page` (a payload) the directory entries it holds of `entries`
/// (the body's pages on flash, by key ascending, with their packed addresses) and returns
/// how many. Entries go in *groups*: a header (the group's first key, its count) and the
/// addresses of consecutive keys, [`ABSENT`] for a key without a page. A key more than
/// [`GROUP_GAP`] past the last starts a group, so the keys without a page cost nothing:
/// the map of a large part holding little lists only the chunks it holds. The rest of the
/// page stays erased (all ones), where a reader stops.
pub(crate) fn encode_dir(entries: &[(u32, u32)], page: &mut [u8]) -> usize {
    let put =
        |page: &mut [u8], at: usize, w: u32| page[at..at + 4].copy_from_slice(&w.to_le_bytes());
    let mut end = 0;
    // The open group: where its header is, its first key, the key after its last.
    let mut group: Option<(usize, u32, u32)> = None;
    for (taken, &(key, addr)) in entries.iter().enumerate() {
        match group {
            Some((head, first, next))
                if key >= next
                    && key - next <= GROUP_GAP
                    && end + 4 * (key - next + 1) as usize <= page.len() =>
            {
                for _ in next..key {
                    put(page, end, ABSENT);
                    end += 4;
                }
                put(page, end, addr);
                end += 4;
                put(page, head + 4, key + 1 - first);
                group = Some((head, first, key + 1));
            }
            _ => {
                if end + GROUP_HEAD + 4 > page.len() {
                    return taken;
                }
                put(page, end, key);
                put(page, end + 4, 1);
                put(page, end + GROUP_HEAD, addr);
                group = Some((end, key, key + 1));
                end += GROUP_HEAD + 4;
            }
        }
    }
    entries.len()
}

/// The most directory pages a body of `keys` keys takes in slots of `slot_size` bytes: a
/// page covers at least as many keys as `payload - 20` bytes of one entry per key would (a
/// group past a page's first pays its header with the keys it passes over; the first
/// header and the page's unused end take the rest).
pub(crate) fn max_dir_pages(keys: usize, slot_size: usize) -> usize {
    // Saturating: a root read back may name any number of keys (on 32-bit targets too).
    keys.saturating_mul(4)
        .div_ceil(payload(slot_size).saturating_sub(20).max(4))
}

/// The entries of a directory page's payload ([`encode_dir`]): each key with a page and its
/// packed address, by key ascending within the page; `None` if the groups do not hold
/// together (a group running off the page, or of no entry).
pub(crate) fn dir_entries(payload: &[u8]) -> Option<Vec<(u32, u32)>> {
    let word = |at: usize| {
        u32::from_le_bytes([
            payload[at],
            payload[at + 1],
            payload[at + 2],
            payload[at + 3],
        ])
    };
    let mut out = Vec::new();
    let mut at = 0;
    while at + GROUP_HEAD + 4 <= payload.len() {
        let (key, count) = (word(at), word(at + 4));
        if key == ABSENT {
            break;
        }
        let end = (count as usize)
            .checked_mul(4)
            .and_then(|n| n.checked_add(at + GROUP_HEAD))
            .filter(|&end| count > 0 && end <= payload.len())?;
        key.checked_add(count)?;
        for i in 0..count {
            let p = word(at + GROUP_HEAD + 4 * i as usize);
            if p != ABSENT {
                out.push((key + i, p));
            }
        }
        at = end;
    }
    Some(out)
}

/// Directory pages, late segments and set segments a root can name, together, in a slot of
/// `slot_size` bytes.
pub(crate) fn max_dirs(slot_size: usize) -> usize {
    (slot_size - ROOT_FIXED - 4) / 4
}

impl Record {
    /// Encodes the record into a whole slot; `pack` turns an address into its 32-bit form.
    pub(crate) fn encode(&self, slot_size: usize, pack: impl Fn(SlotAddr) -> u32) -> Vec<u8> {
        let mut b = alloc::vec![0xFFu8; slot_size];
        b[0..4].copy_from_slice(&ROOT_MAGIC.to_le_bytes());
        let end = match self {
            Record::Mark => {
                b[4] = RECORD_MARK;
                8
            }
            Record::Moved(segs) => {
                b[4] = RECORD_MOVED;
                b[8..12].copy_from_slice(&segs[0].to_le_bytes());
                b[12..16].copy_from_slice(&segs[1].to_le_bytes());
                16
            }
            Record::Root(r) => {
                b[4] = RECORD_ROOT;
                b[5] = u8::from(r.closed);
                b[8..16].copy_from_slice(&r.seq.to_le_bytes());
                b[16..20].copy_from_slice(&r.log_pages.to_le_bytes());
                b[20..24].copy_from_slice(&r.owner_pages.to_le_bytes());
                for (i, h) in r.heads.iter().enumerate() {
                    let (seg, used) = h.unwrap_or((NONE32, NONE32));
                    b[24 + i * 8..28 + i * 8].copy_from_slice(&seg.to_le_bytes());
                    b[28 + i * 8..32 + i * 8].copy_from_slice(&used.to_le_bytes());
                }
                b[56..60].copy_from_slice(&(r.dirs.len() as u32).to_le_bytes());
                b[60..62].copy_from_slice(&(r.late.len() as u16).to_le_bytes());
                b[62..64].copy_from_slice(&(r.set.len() as u16).to_le_bytes());
                let words = r
                    .dirs
                    .iter()
                    .map(|&d| pack(d))
                    .chain(r.late.iter().copied())
                    .chain(r.set.iter().copied());
                let mut end = ROOT_FIXED;
                for w in words {
                    b[end..end + 4].copy_from_slice(&w.to_le_bytes());
                    end += 4;
                }
                end
            }
        };
        let crc = CRC32.checksum(&b[..end]);
        b[end..end + 4].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes a record read from an anchor slot; `None` if it is damaged or not a record.
    pub(crate) fn decode(b: &[u8], unpack: impl Fn(u32) -> SlotAddr) -> Option<Record> {
        let word = |i: usize| Some(u32::from_le_bytes(b.get(i..i + 4)?.try_into().ok()?));
        if word(0)? != ROOT_MAGIC {
            return None;
        }
        let (record, end) = match *b.get(4)? {
            RECORD_MARK => (Record::Mark, 8),
            RECORD_MOVED => (Record::Moved([word(8)?, word(12)?]), 16),
            RECORD_ROOT => {
                let n = word(56)? as usize;
                let late = u16::from_le_bytes([*b.get(60)?, *b.get(61)?]) as usize;
                let set = u16::from_le_bytes([*b.get(62)?, *b.get(63)?]) as usize;
                if n.checked_add(late)?.checked_add(set)? > max_dirs(b.len()) {
                    return None;
                }
                let mut heads = [None; super::HEADS];
                for (i, h) in heads.iter_mut().enumerate() {
                    let (seg, used) = (word(24 + i * 8)?, word(28 + i * 8)?);
                    if seg != NONE32 {
                        *h = Some((seg, used));
                    }
                }
                let root = Root {
                    seq: u64::from_le_bytes(b.get(8..16)?.try_into().ok()?),
                    log_pages: word(16)?,
                    owner_pages: word(20)?,
                    heads,
                    dirs: (0..n)
                        .map(|i| word(ROOT_FIXED + i * 4).map(&unpack))
                        .collect::<Option<_>>()?,
                    late: (n..n + late)
                        .map(|i| word(ROOT_FIXED + i * 4))
                        .collect::<Option<_>>()?,
                    set: (n + late..n + late + set)
                        .map(|i| word(ROOT_FIXED + i * 4))
                        .collect::<Option<_>>()?,
                    closed: *b.get(5)? == 1,
                };
                (Record::Root(root), ROOT_FIXED + (n + late + set) * 4)
            }
            _ => return None,
        };
        (CRC32.checksum(b.get(..end)?) == word(end)?).then_some(record)
    }
}

/// Two anchor segments taking records in turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AnchorPair {
    /// The two segments.
    pub segs: [u32; 2],
    /// The one receiving records.
    pub current: usize,
    /// Its next slot to program (the number of slots past the end: it is full).
    pub next: u32,
}

impl AnchorPair {
    pub(crate) fn new(segs: [u32; 2]) -> Self {
        AnchorPair {
            segs,
            current: 0,
            next: u32::MAX,
        }
    }
}

/// Where a checkpoint's body pages are, by key: the segment table's, then the owner's. Only
/// the pages on flash are kept: the block device's map of a large part holding little has
/// most of its keys without a page (a chunk of sectors held as runs takes its first page
/// only), and a place per key would make the RAM grow with the part.
#[derive(Debug, Clone, Default)]
pub(crate) struct BodyPages {
    at: BTreeMap<u32, SlotAddr>,
    /// Keys of the body, with a page or without.
    keys: u32,
}

impl BodyPages {
    /// A body of no keys.
    pub(crate) const fn empty() -> Self {
        BodyPages {
            at: BTreeMap::new(),
            keys: 0,
        }
    }

    /// A body of `keys` keys, none with a page yet.
    pub(crate) fn with_keys(keys: u32) -> Self {
        BodyPages {
            at: BTreeMap::new(),
            keys,
        }
    }

    /// Keys of the body, with a page or without.
    pub(crate) fn keys(&self) -> u32 {
        self.keys
    }

    /// Where page `key` is.
    pub(crate) fn get(&self, key: u32) -> Option<SlotAddr> {
        self.at.get(&key).copied()
    }

    /// Page `key` is now at `at` (a key of the body); returns where it was.
    pub(crate) fn replace(&mut self, key: u32, at: SlotAddr) -> Option<SlotAddr> {
        debug_assert!(key < self.keys, "page {key} of a body of {}", self.keys);
        self.at.insert(key, at)
    }

    /// Page `key` has no page any more; returns where it was.
    pub(crate) fn take(&mut self, key: u32) -> Option<SlotAddr> {
        self.at.remove(&key)
    }

    /// Where the pages are, by key.
    pub(crate) fn slots(&self) -> impl Iterator<Item = SlotAddr> + '_ {
        self.at.values().copied()
    }

    /// The keys with a page and where it is, by key.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, SlotAddr)> + '_ {
        self.at.iter().map(|(&k, &at)| (k, at))
    }

    /// Pages on flash.
    pub(crate) fn len(&self) -> usize {
        self.at.len()
    }

    /// The body takes `keys` keys from now on; returns where the pages of the keys it no
    /// longer has were.
    pub(crate) fn resize(&mut self, keys: u32) -> Vec<SlotAddr> {
        self.keys = keys;
        self.at.split_off(&keys).into_values().collect()
    }

    /// Takes the pages of the keys below `end`; returns where they were.
    pub(crate) fn take_below(&mut self, end: u32) -> Vec<SlotAddr> {
        let above = self.at.split_off(&end);
        core::mem::replace(&mut self.at, above)
            .into_values()
            .collect()
    }
}

/// Which pair of anchors a record goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Which {
    /// Where roots and marks go.
    Working,
    /// The pair every segment header names, once the records moved away from it.
    Master,
}

/// The anchors: where roots and marks go, and what the newest of them says.
#[derive(Debug, Clone)]
pub(crate) struct Anchors {
    /// The pair receiving roots and marks.
    pub pair: AnchorPair,
    /// The pair the segment headers name, once the records moved to other segments (`None`:
    /// they are `pair`). It holds the records saying where they went.
    pub master: Option<AnchorPair>,
    /// Whether the newest record is a root that a program would put out of date: a mark
    /// must go first.
    pub needs_mark: bool,
    /// Whether the current anchor's newest root may be stale (the other anchor holds what
    /// does not read, perhaps newer): it is erased before the next record, which then goes
    /// to the other anchor.
    pub stale: bool,
    /// Whether nothing was programmed since the newest root, which this session mounted
    /// from or wrote: a checkpoint now would say nothing new.
    pub current_root: bool,
    /// Whether, besides, the newest root was written by a close and no slot died since: a
    /// close now would say nothing new either.
    pub closed_root: bool,
    /// The newest root, once this session mounted from one or wrote one: on a volume on
    /// two devices it is appended again, not closed, before the first program after a
    /// close ([`Root::closed`]).
    pub root: Option<Root>,
    /// Where the newest root's body pages are (segment table, then the owner's pages).
    pub pages: BodyPages,
    /// Where its directory pages are.
    pub dirs: Vec<SlotAddr>,
    /// Pages of the segment table in the newest root.
    pub log_pages: u32,
    /// Whether the newest root still describes the log once its set's segments are read:
    /// the log opens segments of the set only. It stops with a mark, when the set is used up
    /// or after a scan.
    pub rolling: bool,
    /// The newest root's set of segments.
    pub set: Vec<u32>,
    /// Slots programmed since the newest root: about as many tags as a roll-forward from
    /// it reads after a power cut.
    pub programs: u32,
    /// The checksums of the segment-table pages on flash: a page that would be written
    /// again unchanged is left where it is.
    pub table_sums: Vec<u32>,
}

impl Anchors {
    pub(crate) fn new(segs: [u32; 2]) -> Self {
        Anchors {
            pair: AnchorPair::new(segs),
            master: None,
            needs_mark: false,
            stale: false,
            current_root: false,
            closed_root: false,
            root: None,
            pages: BodyPages::default(),
            dirs: Vec::new(),
            log_pages: 0,
            rolling: false,
            set: Vec::new(),
            programs: 0,
            table_sums: Vec::new(),
        }
    }

    /// The pair `which`.
    pub(crate) fn pair(&self, which: Which) -> Option<&AnchorPair> {
        match which {
            Which::Working => Some(&self.pair),
            Which::Master => self.master.as_ref(),
        }
    }

    pub(crate) fn pair_mut(&mut self, which: Which) -> Option<&mut AnchorPair> {
        match which {
            Which::Working => Some(&mut self.pair),
            Which::Master => self.master.as_mut(),
        }
    }

    /// Whether `seg` is one of the anchors, working or master.
    pub(crate) fn holds_segment(&self, seg: u32) -> bool {
        self.pair.segs.contains(&seg) || self.master.is_some_and(|m| m.segs.contains(&seg))
    }

    /// Whether `at` is a live page of the checkpoint (body or directory) with key `key`.
    /// Directory pages are known by address: one lost leaves the others where they were.
    pub(crate) fn holds(&self, key: u32, at: SlotAddr) -> bool {
        if key >= DIR_KEY {
            self.dirs.contains(&at)
        } else {
            self.pages.get(key) == Some(at)
        }
    }

    /// The key of the page held at `at`, if the checkpoint holds one there: how a page
    /// whose tag no longer reads is known (a look through the pages, for a rare event).
    pub(crate) fn key_at(&self, at: SlotAddr) -> Option<u32> {
        let dir = self.dirs.iter().position(|&d| d == at);
        dir.map(|i| DIR_KEY + i as u32)
            .or_else(|| self.pages.iter().find(|&(_, p)| p == at).map(|(k, _)| k))
    }

    /// The cleaner moved page `key`.
    pub(crate) fn moved(&mut self, key: u32, from: SlotAddr, to: SlotAddr) {
        if key >= DIR_KEY {
            if let Some(a) = self.dirs.iter_mut().find(|a| **a == from) {
                *a = to;
            }
        } else if self.pages.get(key) == Some(from) {
            self.pages.replace(key, to);
        }
    }

    /// Page `key` could not be read back: the next checkpoint writes it again. It leaves
    /// the pages kept (a directory page its list), so that the next checkpoint does not
    /// kill its slot a second time, erased and written again by then. The newest root
    /// names it still: a mount that reads it finds it damaged and scans.
    pub(crate) fn lost(&mut self, key: u32, at: SlotAddr) {
        if key >= DIR_KEY {
            self.dirs.retain(|&d| d != at);
        } else if self.pages.get(key) == Some(at) {
            self.pages.take(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::tag::{Kind, Tag, TagLayout, TagState};
    use proptest::prelude::*;

    /// Writes `entries` into directory pages of `pay` bytes, as a checkpoint does.
    fn directory(entries: &[(u32, u32)], pay: usize) -> Vec<Vec<u8>> {
        let mut pages = Vec::new();
        let mut rest = entries;
        while !rest.is_empty() {
            let mut page = vec![0xFFu8; pay];
            let taken = encode_dir(rest, &mut page);
            assert!(taken > 0, "a page took no entry");
            rest = &rest[taken..];
            pages.push(page);
        }
        pages
    }

    proptest! {
        /// Any set of keys with pages comes back from the directory, in order, in no more
        /// pages than a checkpoint makes room for (one entry per key, `pay - 20` bytes a
        /// page).
        #[test]
        fn a_directory_lists_the_pages_on_flash_and_no_others(
            keys in proptest::collection::btree_set(0u32..20_000, 0..3_000),
            pay in prop_oneof![Just(508usize), Just(2044), Just(60)],
        ) {
            let entries: Vec<(u32, u32)> = keys.iter().map(|&k| (k, k.wrapping_mul(7) % 1_000_000)).collect();
            let pages = directory(&entries, pay);
            let back: Vec<(u32, u32)> = pages
                .iter()
                .flat_map(|p| dir_entries(p).unwrap())
                .collect();
            prop_assert_eq!(&back, &entries);
            let total = keys.last().map_or(0, |&k| k as usize + 1);
            prop_assert!(pages.len() <= max_dir_pages(total, pay + 4));
        }
    }

    #[test]
    fn a_directory_of_sparse_keys_takes_a_group_per_run() {
        // A large part's map holding little: a dozen chunks of 16 keys each hold their
        // first page, among 16,000 keys. Listing every key took 32 pages; groups take one.
        let entries: Vec<(u32, u32)> = (0..77)
            .chain((0..12).map(|c| 77 + 16 * c * 80))
            .map(|k| (k, k + 5))
            .collect();
        let pages = directory(&entries, 2044);
        assert_eq!(pages.len(), 1);
        assert_eq!(dir_entries(&pages[0]).unwrap(), entries);
        // A gap of two keys stays in the group; three start another.
        let mut page = vec![0xFFu8; 64];
        encode_dir(&[(1, 10), (4, 40), (8, 80)], &mut page);
        let words: Vec<u32> = dir_entries_raw(&page);
        assert_eq!(words[..8], [1, 4, 10, ABSENT, ABSENT, 40, 8, 1]);
        assert_eq!(words[8], 80);
    }

    fn dir_entries_raw(page: &[u8]) -> Vec<u32> {
        page.chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect()
    }

    #[test]
    fn a_directory_page_whose_groups_do_not_hold_together_is_refused() {
        let mut page = vec![0xFFu8; 64];
        encode_dir(&[(3, 30), (4, 40)], &mut page);
        assert_eq!(dir_entries(&page).unwrap(), [(3, 30), (4, 40)]);
        // A count running off the page, and a group of no entry.
        for count in [100u32, 0] {
            let mut bad = page.clone();
            bad[4..8].copy_from_slice(&count.to_le_bytes());
            assert_eq!(dir_entries(&bad), None, "count {count}");
        }
        // Keys that wrap past the last key.
        let mut bad = page.clone();
        bad[0..4].copy_from_slice(&(u32::MAX - 1).to_le_bytes());
        assert_eq!(dir_entries(&bad), None);
    }

    #[test]
    fn every_tag_layout_tells_directory_pages_from_body_pages() {
        // The largest body and directory keys of a compact volume come back whole.
        for layout in [TagLayout::Wide, TagLayout::Compact] {
            for key in [0, DIR_KEY - 1, DIR_KEY, DIR_KEY + 7, layout.max_key()] {
                let tag = Tag {
                    key,
                    seq: 544,
                    kind: Kind::Page,
                    copy: true,
                };
                let mut entry = [0u8; 16];
                layout.encode(&tag, &[0; 512], &mut entry);
                assert_eq!(
                    layout.decode(&entry),
                    TagState::Valid(tag),
                    "{layout:?} {key:#x}"
                );
            }
        }
        assert!(DIR_KEY < TagLayout::Compact.max_key());
    }

    fn pack(a: SlotAddr) -> u32 {
        a.seg * 100 + a.slot
    }

    fn unpack(p: u32) -> SlotAddr {
        SlotAddr {
            seg: p / 100,
            slot: p % 100,
        }
    }

    #[test]
    fn records_round_trip_and_detect_damage() {
        let root = Root {
            seq: 0x12_3456_789A,
            log_pages: 3,
            owner_pages: 70,
            heads: [None, Some((7, 12)), Some((9, 0)), None],
            dirs: alloc::vec![SlotAddr { seg: 4, slot: 5 }, SlotAddr { seg: 6, slot: 7 }],
            late: alloc::vec![8],
            set: alloc::vec![10, 11],
            closed: false,
        };
        let closed = Root {
            closed: true,
            ..root.clone()
        };
        let moved = Record::Moved([300, 7]);
        for r in [
            Record::Root(root),
            Record::Root(closed),
            Record::Mark,
            moved,
        ] {
            let b = r.encode(512, pack);
            assert_eq!(Record::decode(&b, unpack), Some(r.clone()));
            let end = match r {
                Record::Mark => 12,
                Record::Moved(_) => 20,
                Record::Root(_) => ROOT_FIXED + 24,
            };
            for i in 0..end * 8 {
                let mut d = b.clone();
                d[i / 8] ^= 1 << (i % 8);
                assert_ne!(Record::decode(&d, unpack), Some(r.clone()), "bit {i}");
            }
        }
        assert_eq!(Record::decode(&[0xFF; 512], unpack), None);
    }

    #[test]
    fn pages_are_refused_when_damaged_or_misdirected() {
        let mut p = alloc::vec![7u8; 64];
        seal_page(3, &mut p);
        assert_eq!(open_page(3, &p).unwrap(), &[7u8; 60][..]);
        assert!(open_page(4, &p).is_err());
        p[10] ^= 1;
        assert!(open_page(3, &p).is_err());
    }

    #[test]
    fn segment_entries_round_trip() {
        let e = SegEntry {
            state: 3,
            slc: true,
            used: 63,
            live: 41,
            erase_count: 99_999,
            open_seq: NONE40 - 1,
            min_seq: u64::MAX,
        };
        let mut b = [0u8; SEG_ENTRY];
        e.encode(&mut b);
        assert_eq!(SegEntry::decode(&b), e);
    }
}
