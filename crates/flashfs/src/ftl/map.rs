//! The block device's sector map: where each sector's newest version lives, which trim and
//! loss records hide older ones, and how the map goes into a checkpoint's pages.
//!
//! In a checkpoint the map is cut into *chunks* of [`CHUNK_PAGES`] pages' worth of sectors.
//! A chunk whose entries fall into few runs (sectors written in order land in consecutive
//! slots) takes one page of runs; any other takes its entries, 32 bits each, in as many
//! pages as they fill — written again only where an entry changed. After the chunks come
//! one or more pages of the live records and the counters record's address (SPEC §3.5).
//! Runs are Ryu & Park's extent mappings: a volume written in order is mapped by a few
//! dozen pages instead of one per 500 sectors, and its mount reads only those.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::log::checkpoint::payload;
use crate::log::tag::{Kind, Tag};
use crate::log::{Head, Owner, SlotAddr};

/// Map entry of a sector never written, or trimmed: reads as zeros.
pub(super) const UNMAPPED: u32 = u32::MAX;
/// Map pages per chunk.
pub(super) const CHUNK_PAGES: usize = 16;
/// Bytes before a map page's runs or entries: its kind, a reserved byte, and its count.
const PAGE_HEADER: usize = 4;
/// A map page of runs.
const PAGE_RUNS: u8 = 2;
/// A map page of entries.
const PAGE_ENTRIES: u8 = 1;
/// Bytes of a run: its length (u16) and first entry (u32).
const RUN_BYTES: usize = 6;
/// Map entry of a sector whose data was lost to an unreadable block: reads fail with EIO.
pub(super) const LOST: u32 = u32::MAX - 1;

/// Where each sector lives, and how often it is rewritten.
#[derive(Debug)]
pub(super) struct SectorMap {
    /// Each sector's slot, packed ([`SectorMap::pack`]), or [`UNMAPPED`] or [`LOST`]. Changed
    /// only through [`SectorMap::set`], which notes the page a checkpoint must write again.
    at: Vec<u32>,
    /// Map pages (in their place as entries) changed since the last checkpoint, a bit each.
    dirty: Vec<u64>,
    /// Entries per map page.
    per_page: usize,
    /// Per chunk, whether the checkpoint holds it as runs (else as entries).
    runs: Vec<bool>,
    /// Pages of the chunk whose first page [`Owner::take_dirty`] last saw, to write.
    pending: [bool; CHUNK_PAGES],
    /// Write clock at each sector's last write (0: not since mount); empty without hot/cold
    /// separation, which alone needs it.
    pub(super) last_write: Vec<u32>,
    /// Sectors written so far (the write clock).
    pub(super) writes: u32,
    /// Running average of the interval between rewrites of a sector, in writes (x16).
    pub(super) avg_interval_x16: u64,
    pub(super) hot_factor: f64,
    pub(super) separate: bool,
    pub(super) slots: u32,
    /// Sectors found lost since the last loss record was written.
    pub(super) lost: Vec<u32>,
    /// For each sector without data, the sequence number of the trim or loss record that
    /// hides its older versions (0: none). Empty until the first record: a file system
    /// never trims, and this is half the map's RAM.
    pub(super) hidden_by: Vec<u64>,
    /// Live trim and loss records by sequence number. Each hides at least one sector no
    /// other record hides, so there are never more of them than sectors without data: the
    /// log can always hold them (the capacity argument of the reserve).
    pub(super) records: BTreeMap<u64, Record>,
    /// Records that hide nothing any more, to be killed in the log.
    pub(super) useless: Vec<SlotAddr>,
    /// The live counters record, if any.
    pub(super) counters_at: Option<SlotAddr>,
}

/// A trim or loss record named by a checkpoint: its sequence number, address and the sector
/// ranges it lists.
pub(super) type RecordRanges = (u64, SlotAddr, Vec<(u32, u32)>);

/// A live trim or loss record.
#[derive(Debug, Clone, Copy)]
pub(super) struct Record {
    pub(super) at: SlotAddr,
    pub(super) hides: u32,
}

impl SectorMap {
    /// An empty map of `sectors` sectors on a log of `slots` slots per segment, `slot_size`
    /// bytes each.
    pub(super) fn new(
        sectors: usize,
        slots: u32,
        slot_size: usize,
        hot_factor: f64,
        separate: bool,
    ) -> Self {
        let per_page = (payload(slot_size) - PAGE_HEADER) / 4;
        let chunks = sectors.div_ceil(per_page * CHUNK_PAGES);
        SectorMap {
            at: alloc::vec![UNMAPPED; sectors],
            dirty: alloc::vec![u64::MAX; (chunks * CHUNK_PAGES).div_ceil(64)],
            per_page,
            runs: alloc::vec![false; chunks],
            pending: [false; CHUNK_PAGES],
            last_write: if separate {
                alloc::vec![0; sectors]
            } else {
                Vec::new()
            },
            writes: 1,
            // Until rewrites are seen, assume one pass over the device between them.
            avg_interval_x16: (sectors as u64).max(1) * 16,
            hot_factor: hot_factor.max(0.0),
            separate,
            slots,
            lost: Vec::new(),
            hidden_by: Vec::new(),
            records: Default::default(),
            useless: Vec::new(),
            counters_at: None,
        }
    }

    /// Sectors mapped.
    pub(super) fn len(&self) -> usize {
        self.at.len()
    }

    /// Sector `k`'s entry.
    pub(super) fn get(&self, k: usize) -> u32 {
        self.at[k]
    }

    /// Every entry, in sector order.
    pub(super) fn entries(&self) -> &[u32] {
        &self.at
    }

    /// Sets sector `k`'s entry.
    pub(super) fn set(&mut self, k: usize, v: u32) {
        if self.at[k] != v {
            self.at[k] = v;
            // Sector k's page as entries: pages are numbered within chunks.
            let chunk = self.per_page * CHUNK_PAGES;
            let p = k / chunk * CHUNK_PAGES + k % chunk / self.per_page;
            self.dirty[p / 64] |= 1 << (p % 64);
        }
    }

    /// Takes in the records a checkpoint named, given each one's ranges: a record hides the
    /// sectors in its ranges that have no data, unless a newer record hides them. Returns
    /// the records left live, which the caller marks live in the log.
    pub(super) fn restore_records(&mut self, records: Vec<RecordRanges>) -> Vec<SlotAddr> {
        if records.is_empty() {
            return Vec::new();
        }
        self.hidden_by = alloc::vec![0; self.at.len()];
        let mut hides: BTreeMap<u64, u32> = BTreeMap::new();
        for (seq, _, ranges) in &records {
            for &(start, count) in ranges {
                let end = (start as usize)
                    .saturating_add(count as usize)
                    .min(self.at.len());
                for k in (start as usize).min(end)..end {
                    let held = self.at[k] == UNMAPPED || self.at[k] == LOST;
                    if held && self.hidden_by[k] < *seq {
                        let previous = core::mem::replace(&mut self.hidden_by[k], *seq);
                        if let Some(h) = hides.get_mut(&previous) {
                            *h -= 1;
                        }
                        *hides.entry(*seq).or_insert(0) += 1;
                    }
                }
            }
        }
        let mut live = Vec::new();
        for (seq, at, _) in records {
            let h = hides.get(&seq).copied().unwrap_or(0);
            if h > 0 {
                self.records.insert(seq, Record { at, hides: h });
                live.push(at);
            }
        }
        live
    }

    /// Page numbers the chunks take in a checkpoint (some of them absent).
    fn map_pages(&self) -> u32 {
        (self.runs.len() * CHUNK_PAGES) as u32
    }

    /// The sectors of chunk `c`.
    fn chunk(&self, c: usize) -> core::ops::Range<usize> {
        let first = c * self.per_page * CHUNK_PAGES;
        first..(first + self.per_page * CHUNK_PAGES).min(self.at.len())
    }

    /// The runs of chunk `c`: (length, first entry); each next entry of a run is one slot on
    /// (an address) or the same (unmapped, lost). `None` if they do not fit a page.
    fn chunk_runs(&self, c: usize) -> Option<Vec<(u16, u32)>> {
        let max = (self.per_page * 4) / RUN_BYTES;
        let mut runs: Vec<(u16, u32)> = Vec::new();
        let mut prev: Option<u32> = None;
        for &e in &self.at[self.chunk(c)] {
            let follows = prev.is_some_and(|p| {
                let step = u32::from(p != UNMAPPED && p != LOST);
                p.checked_add(step) == Some(e) && (e != UNMAPPED && e != LOST || step == 0)
            });
            match runs.last_mut() {
                Some((n, _)) if follows && *n < u16::MAX => *n += 1,
                _ => {
                    if runs.len() == max {
                        return None;
                    }
                    runs.push((1, e));
                }
            }
            prev = Some(e);
        }
        Some(runs)
    }

    /// The records part of a checkpoint: how many records, the counters record's address,
    /// then each record's sequence number and address.
    fn extras(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(8 + self.records.len() * 12);
        b.extend_from_slice(&(self.records.len() as u32).to_le_bytes());
        b.extend_from_slice(
            &self
                .counters_at
                .map_or(UNMAPPED, |a| self.pack(a))
                .to_le_bytes(),
        );
        for (seq, r) in &self.records {
            b.extend_from_slice(&seq.to_le_bytes());
            b.extend_from_slice(&self.pack(r.at).to_le_bytes());
        }
        b
    }

    /// Rebuilds the map from a checkpoint's pages, read by `read(i, buf)` (a slot long, the
    /// payload in front; `false` for a page the checkpoint does not hold). Returns the
    /// records it names, by sequence number, for the caller to resolve what they hide
    /// ([`SectorMap::restore_records`]).
    pub(super) fn restore(
        &mut self,
        pages: u32,
        slot_size: usize,
        limit: u64,
        mut read: impl FnMut(u32, &mut [u8]) -> Result<bool>,
    ) -> Result<Vec<(u64, SlotAddr)>> {
        let bad = Error::Corrupt("checkpoint map pages do not match the volume");
        let map_pages = self.map_pages();
        if pages <= map_pages {
            return Err(bad);
        }
        let pay = payload(slot_size);
        let mut buf = alloc::vec![0u8; slot_size];
        for c in 0..self.runs.len() {
            let range = self.chunk(c);
            let first = (c * CHUNK_PAGES) as u32;
            if !read(first, &mut buf)? {
                return Err(bad);
            }
            match buf[0] {
                PAGE_RUNS => {
                    let n = u16::from_le_bytes([buf[2], buf[3]]) as usize;
                    let body = buf
                        .get(PAGE_HEADER..PAGE_HEADER + n * RUN_BYTES)
                        .ok_or(bad.clone())?;
                    let mut k = range.start;
                    for r in body.chunks_exact(RUN_BYTES) {
                        let len = u16::from_le_bytes([r[0], r[1]]) as usize;
                        let start = u32::from_le_bytes([r[2], r[3], r[4], r[5]]);
                        if len == 0 || k + len > range.end {
                            return Err(bad);
                        }
                        let step = u32::from(start != UNMAPPED && start != LOST);
                        for (i, e) in self.at[k..k + len].iter_mut().enumerate() {
                            *e = start.wrapping_add(step * i as u32);
                        }
                        k += len;
                    }
                    if k != range.end {
                        return Err(bad);
                    }
                    self.runs[c] = true;
                }
                PAGE_ENTRIES => {
                    for j in 0..range.len().div_ceil(self.per_page) {
                        if j > 0 && !read(first + j as u32, &mut buf)? {
                            return Err(bad);
                        }
                        if buf[0] != PAGE_ENTRIES {
                            return Err(bad);
                        }
                        let from = range.start + j * self.per_page;
                        let n = self.per_page.min(range.end - from);
                        let body = &buf[PAGE_HEADER..];
                        for (e, w) in self.at[from..from + n].iter_mut().zip(body.chunks_exact(4)) {
                            *e = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                        }
                    }
                    self.runs[c] = false;
                }
                _ => return Err(bad),
            }
        }
        let mut extras = Vec::with_capacity((pages - map_pages) as usize * pay);
        for p in map_pages..pages {
            if !read(p, &mut buf)? {
                return Err(bad);
            }
            extras.extend_from_slice(&buf[..pay]);
        }
        let word = |i: usize| -> Result<u32> {
            Ok(u32::from_le_bytes(
                extras.get(i..i + 4).ok_or(bad.clone())?.try_into().unwrap(),
            ))
        };
        let n = word(0)? as usize;
        let counters = word(4)?;
        let valid = |p: u32| p == UNMAPPED || p == LOST || (p as u64) < limit;
        if !valid(counters) || !self.at.iter().all(|&p| valid(p)) {
            return Err(bad);
        }
        self.counters_at = (counters != UNMAPPED).then(|| self.unpack(counters));
        let mut records = Vec::with_capacity(n);
        for i in 0..n {
            let at = 8 + i * 12;
            let seq = u64::from_le_bytes(
                extras
                    .get(at..at + 8)
                    .ok_or(bad.clone())?
                    .try_into()
                    .unwrap(),
            );
            let p = word(at + 8)?;
            if !valid(p) || p == UNMAPPED || p == LOST {
                return Err(bad);
            }
            records.push((seq, self.unpack(p)));
        }
        self.dirty.fill(0);
        Ok(records)
    }
    /// Writes since the sector was last written, if it was since the mount.
    pub(super) fn age(&self, k: usize) -> Option<u32> {
        match self.last_write.get(k) {
            Some(&last) if last != 0 => Some(self.writes.wrapping_sub(last)),
            _ => None,
        }
    }

    /// Whether a sector last written `age` writes ago is hot: rewritten sooner than the
    /// device's average rewrite interval (scaled by the configured factor).
    pub(super) fn is_hot(&self, age: u32) -> bool {
        (age as f64 * 16.0) < self.avg_interval_x16 as f64 * self.hot_factor
    }

    /// Head for a sector about to be written, and the write recorded in the statistics.
    pub(super) fn classify_write(&mut self, k: usize) -> Head {
        let head = match self.age(k) {
            Some(age) => {
                // Exponential average over the last ~64 rewrites.
                let a = self.avg_interval_x16 as i64;
                self.avg_interval_x16 = (a + ((age as i64 * 16) - a) / 64).max(16) as u64;
                if self.separate && self.is_hot(age) {
                    Head::Hot
                } else {
                    Head::Warm
                }
            }
            None => Head::Warm,
        };
        if let Some(last) = self.last_write.get_mut(k) {
            *last = self.writes;
        }
        self.writes = self.writes.wrapping_add(1).max(1);
        head
    }

    /// The sector no longer relies on the record hiding its older versions.
    pub(super) fn release(&mut self, k: usize) {
        let Some(t) = self.hidden_by.get_mut(k).map(|t| core::mem::replace(t, 0)) else {
            return;
        };
        if let Some(r) = self.records.get_mut(&t) {
            r.hides -= 1;
            if r.hides == 0 {
                self.useless.push(r.at);
                self.records.remove(&t);
            }
        }
    }

    /// Record `t` now hides the older versions of sector `k`.
    pub(super) fn hide(&mut self, k: usize, t: u64) {
        self.release(k);
        if self.hidden_by.is_empty() {
            self.hidden_by = alloc::vec![0; self.at.len()];
        }
        if let Some(r) = self.records.get_mut(&t) {
            r.hides += 1;
            self.hidden_by[k] = t;
        }
    }

    /// Where a sector's data is, if it has some.
    pub(super) fn slot(&self, k: usize) -> Option<SlotAddr> {
        match self.at.get(k) {
            Some(&p) if p != UNMAPPED && p != LOST => Some(self.unpack(p)),
            _ => None,
        }
    }

    pub(super) fn pack(&self, a: SlotAddr) -> u32 {
        a.seg * self.slots + a.slot
    }

    pub(super) fn unpack(&self, p: u32) -> SlotAddr {
        SlotAddr {
            seg: p / self.slots,
            slot: p % self.slots,
        }
    }
}

impl Owner for SectorMap {
    fn pages(&self) -> u32 {
        let pay = self.per_page * 4 + PAGE_HEADER;
        self.map_pages() + (8 + self.records.len() * 12).div_ceil(pay) as u32
    }

    fn take_dirty(&mut self, i: u32) -> bool {
        let i = i as usize;
        if i >= self.map_pages() as usize {
            // The records' pages are written every time: they are few.
            return true;
        }
        let (c, j) = (i / CHUNK_PAGES, i % CHUNK_PAGES);
        if j == 0 {
            // The chunk's encoding is chosen as the log comes to its first page.
            let bit = |d: &[u64], p: usize| d[p / 64] & (1 << (p % 64)) != 0;
            let dirty: Vec<bool> = (0..CHUNK_PAGES).map(|j| bit(&self.dirty, i + j)).collect();
            for p in i..i + CHUNK_PAGES {
                self.dirty[p / 64] &= !(1 << (p % 64));
            }
            self.pending = [false; CHUNK_PAGES];
            if dirty.iter().any(|&d| d) {
                let was_runs = self.runs[c];
                let runs = self.chunk_runs(c).is_some();
                for (j, p) in self.pending.iter_mut().enumerate() {
                    // Runs: the first page, and the others once entries, to drop. Entries:
                    // the pages changed, or all once runs.
                    *p = match (runs, was_runs) {
                        (true, true) => j == 0,
                        (true, false) => true,
                        (false, true) => true,
                        (false, false) => dirty[j],
                    };
                }
                self.runs[c] = runs;
            }
        }
        self.pending[j]
    }

    fn encode_page(&self, i: u32, buf: &mut [u8]) -> bool {
        let map_pages = self.map_pages();
        if i >= map_pages {
            let pay = self.per_page * 4 + PAGE_HEADER;
            let extras = self.extras();
            let from = (i - map_pages) as usize * pay;
            let part = extras.get(from..).unwrap_or(&[]);
            let n = part.len().min(pay).min(buf.len());
            buf[..n].copy_from_slice(&part[..n]);
            return true;
        }
        let (c, j) = (i as usize / CHUNK_PAGES, i as usize % CHUNK_PAGES);
        let range = self.chunk(c);
        if self.runs[c] {
            let Some(runs) = self.chunk_runs(c).filter(|_| j == 0) else {
                return false;
            };
            buf[0] = PAGE_RUNS;
            buf[2..4].copy_from_slice(&(runs.len() as u16).to_le_bytes());
            for (r, (len, start)) in buf[PAGE_HEADER..].chunks_exact_mut(RUN_BYTES).zip(runs) {
                r[0..2].copy_from_slice(&len.to_le_bytes());
                r[2..6].copy_from_slice(&start.to_le_bytes());
            }
            return true;
        }
        let from = range.start + j * self.per_page;
        if from >= range.end {
            return false;
        }
        let n = self.per_page.min(range.end - from);
        buf[0] = PAGE_ENTRIES;
        buf[2..4].copy_from_slice(&(n as u16).to_le_bytes());
        for (w, e) in buf[PAGE_HEADER..]
            .chunks_exact_mut(4)
            .zip(&self.at[from..from + n])
        {
            w.copy_from_slice(&e.to_le_bytes());
        }
        true
    }

    fn is_live(&mut self, tag: &Tag, at: SlotAddr, oldest_elsewhere: u64) -> bool {
        match tag.kind {
            Kind::Sector => self.at.get(tag.key as usize) == Some(&self.pack(at)),
            Kind::Counters => self.counters_at == Some(at),
            Kind::Page | Kind::Root => false,
            Kind::Trim | Kind::Lost => match self.records.get(&tag.seq) {
                Some(r) if r.at != at => false,
                // No version it hides is left anywhere: the record has done its work.
                Some(_) if oldest_elsewhere > tag.seq => {
                    self.records.remove(&tag.seq);
                    false
                }
                Some(_) => true,
                None => false,
            },
        }
    }

    fn lost(&mut self, tag: Option<&Tag>, at: SlotAddr) {
        let packed = self.pack(at);
        let sector = match tag {
            Some(t) if t.kind == Kind::Sector => Some(t.key as usize),
            Some(t) if t.kind == Kind::Counters => {
                self.counters_at = self.counters_at.filter(|&c| c != at);
                None
            }
            Some(t) => {
                // A record lost: the sectors it hid keep their state for this session.
                self.records.remove(&t.seq);
                None
            }
            // Rare (a page that decayed between mount and cleaning): find it by address.
            None => self.at.iter().position(|&p| p == packed),
        };
        if let Some(k) = sector.filter(|&k| self.at.get(k) == Some(&packed)) {
            self.set(k, LOST);
            self.lost.push(k as u32);
        }
    }

    fn moved(&mut self, tag: &Tag, from: SlotAddr, to: SlotAddr) {
        match tag.kind {
            Kind::Sector => {
                let (from, to) = (self.pack(from), self.pack(to));
                let k = tag.key as usize;
                if self.at.get(k) == Some(&from) {
                    self.set(k, to);
                }
            }
            Kind::Trim | Kind::Lost => {
                if let Some(r) = self.records.get_mut(&tag.seq).filter(|r| r.at == from) {
                    r.at = to;
                }
            }
            Kind::Counters => {
                if self.counters_at == Some(from) {
                    self.counters_at = Some(to);
                }
            }
            // The log keeps its checkpoint pages and roots itself.
            Kind::Page | Kind::Root => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SLOT: usize = 512;

    /// Takes a checkpoint of `map` into `pages` as the log would (only the pages it says
    /// changed, dropping the ones it no longer holds).
    fn checkpoint(map: &mut SectorMap, pages: &mut Vec<Option<Vec<u8>>>) -> usize {
        let n = map.pages() as usize;
        pages.resize(n, None);
        let dirty: Vec<usize> = (0..n)
            .filter(|&i| map.take_dirty(i as u32) | pages[i].is_none())
            .collect();
        let mut written = 0;
        for i in dirty {
            let mut buf = vec![0xFFu8; SLOT];
            if map.encode_page(i as u32, &mut buf[..payload(SLOT)]) {
                pages[i] = Some(buf);
                written += 1;
            } else {
                pages[i] = None;
            }
        }
        written
    }

    fn restored(map: &SectorMap, pages: &[Option<Vec<u8>>]) -> SectorMap {
        let mut m = SectorMap::new(map.len(), 31, SLOT, 0.5, false);
        m.restore(
            pages.len() as u32,
            SLOT,
            u64::from(u32::MAX - 2),
            |i, buf| match &pages[i as usize] {
                Some(p) => {
                    buf.copy_from_slice(p);
                    Ok(true)
                }
                None => Ok(false),
            },
        )
        .unwrap();
        m
    }

    #[test]
    fn chunks_of_runs_and_of_entries_round_trip_through_their_changes() {
        let per_chunk = (payload(SLOT) - PAGE_HEADER) / 4 * CHUNK_PAGES;
        let sectors = per_chunk * 3 + 100;
        let mut map = SectorMap::new(sectors, 31, SLOT, 0.5, false);
        // Chunk 0 written in order (runs); chunk 1 at random (entries); the rest unmapped.
        for k in 0..per_chunk {
            map.set(k, 1000 + k as u32);
        }
        let mut x = 7u32;
        for k in per_chunk..2 * per_chunk {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            map.set(k, x % 100_000);
        }
        map.set(3 * per_chunk + 5, LOST);
        let mut pages = Vec::new();
        let first = checkpoint(&mut map, &mut pages);
        assert!(map.runs[0] && !map.runs[1] && map.runs[2] && map.runs[3]);
        assert_eq!(restored(&map, &pages).entries(), map.entries());
        // One entry changes in each: chunk 0 stays runs (one page), chunk 1 rewrites one
        // page of entries.
        map.set(3, 5);
        map.set(per_chunk + 1, 9);
        assert_eq!(
            checkpoint(&mut map, &mut pages),
            2 + 1,
            "the records page too"
        );
        assert_eq!(restored(&map, &pages).entries(), map.entries());
        // Chunk 0 scattered: entries now, every page; chunk 1 made sequential: runs.
        for k in (0..per_chunk).step_by(2) {
            map.set(k, UNMAPPED - 7 - k as u32);
        }
        for k in per_chunk..2 * per_chunk {
            map.set(k, 50_000 + k as u32);
        }
        checkpoint(&mut map, &mut pages);
        assert!(!map.runs[0] && map.runs[1]);
        assert_eq!(
            pages[CHUNK_PAGES + 1],
            None,
            "the entries pages of a runs chunk go"
        );
        assert_eq!(restored(&map, &pages).entries(), map.entries());
        assert!(first > 0);
    }
}
