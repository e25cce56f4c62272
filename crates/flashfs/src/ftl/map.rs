//! The block device's sector map: where each sector's newest version lives, which trim and
//! loss records hide older ones, and what of it goes into a checkpoint.
//!
//! The entries are kept a page at a time under a RAM budget ([`MapPages`]); after the map
//! pages, a checkpoint holds one or more pages of the live records and the counters
//! record's address (SPEC §3.5).

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use super::hiding::Hiding;
use super::layout::{is_slot, records_len, RecordsPart, LOST, PAGE_HEADER, UNMAPPED};
use super::pages::MapPages;
use crate::error::{Error, Result};
use crate::log::checkpoint::payload;
use crate::log::{Head, Liveness, Owner, PageSource, SlotAddr};
use crate::media::tag::{Kind, Tag};

/// Where each sector lives, and how often it is rewritten.
#[derive(Debug)]
pub(super) struct SectorMap {
    /// Each sector's slot, packed ([`SectorMap::pack`]), or [`UNMAPPED`] or [`LOST`].
    pub(super) at: MapPages,
    /// Sectors mapped.
    sectors: usize,
    /// Bytes of a slot.
    slot_size: usize,
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
    /// For each sector without data, the trim or loss record that hides its older versions.
    pub(super) hidden_by: Hiding,
    /// Live trim and loss records by sequence number. Each hides at least one sector no
    /// other record hides, so there are never more of them than sectors without data: the
    /// log can always hold them (the capacity argument of the reserve).
    pub(super) records: BTreeMap<u64, Record>,
    /// Records that hide nothing any more, to be killed in the log.
    pub(super) useless: Vec<SlotAddr>,
    /// The live counters record, if any.
    pub(super) counters_at: Option<SlotAddr>,
}

/// A trim or loss record named by a checkpoint: its sequence number, copies and the sector
/// ranges it lists.
pub(super) type RecordRanges = (u64, Copies, Vec<(u32, u32)>);

/// Where a record is: a loss record is kept twice, in two segments, so that damage at rest
/// that destroys one copy does not let its sectors read as never written after a scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Copies {
    pub(super) at: SlotAddr,
    pub(super) twin: Option<SlotAddr>,
}

impl Copies {
    /// A record kept once.
    pub(super) fn one(at: SlotAddr) -> Copies {
        Copies { at, twin: None }
    }

    /// Whether `at` holds a copy.
    pub(super) fn holds(&self, at: SlotAddr) -> bool {
        self.at == at || self.twin == Some(at)
    }

    /// Every copy's address.
    pub(super) fn slots(&self) -> impl Iterator<Item = SlotAddr> {
        core::iter::once(self.at).chain(self.twin)
    }

    /// The copy in `from` moved to `to`.
    fn moved(&mut self, from: SlotAddr, to: SlotAddr) {
        if self.at == from {
            self.at = to;
        } else if self.twin == Some(from) {
            self.twin = Some(to);
        }
    }

    /// The copy in `at` is lost: the copies left, if any.
    fn without(self, at: SlotAddr) -> Option<Copies> {
        match self.twin {
            Some(twin) if self.at == at => Some(Copies::one(twin)),
            Some(twin) if twin == at => Some(Copies::one(self.at)),
            _ if self.at == at => None,
            _ => Some(self),
        }
    }
}

/// A live trim or loss record.
#[derive(Debug, Clone, Copy)]
pub(super) struct Record {
    pub(super) copies: Copies,
    pub(super) hides: u32,
}

impl SectorMap {
    /// An empty map of `sectors` sectors on a log of `slots` slots per segment (`segments`
    /// of them), `slot_size` bytes each, keeping `budget` bytes of its entries in RAM.
    pub(super) fn new(
        sectors: usize,
        (segments, slots, slot_size): (u32, u32, usize),
        budget: usize,
        hot_factor: f64,
        separate: bool,
    ) -> Self {
        SectorMap {
            at: MapPages::new(sectors, slot_size, budget, segments as u64 * slots as u64),
            sectors,
            slot_size,
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
            hidden_by: Hiding::default(),
            records: Default::default(),
            useless: Vec::new(),
            counters_at: None,
        }
    }

    /// Sectors mapped.
    pub(super) fn len(&self) -> usize {
        self.sectors
    }

    /// Sector `k`'s entry.
    pub(super) fn get(&mut self, k: usize, src: &mut dyn PageSource) -> Result<u32> {
        self.at.get(k, src)
    }

    /// Sets sector `k`'s entry.
    pub(super) fn set(&mut self, k: usize, v: u32, src: &mut dyn PageSource) -> Result<()> {
        self.at.set(k, v, src)
    }

    /// The first sector from `k` on that may hold data or have lost it: the chunks of the
    /// map that are empty are passed over without a read.
    pub(super) fn next_maybe_mapped(
        &mut self,
        k: usize,
        src: &mut dyn PageSource,
    ) -> Result<usize> {
        self.at.next_maybe_mapped(k, src)
    }

    /// Where a sector's data is, if it has some.
    pub(super) fn slot(&mut self, k: usize, src: &mut dyn PageSource) -> Result<Option<SlotAddr>> {
        if k >= self.sectors {
            return Ok(None);
        }
        let p = self.at.get(k, src)?;
        Ok(is_slot(p).then(|| self.unpack(p)))
    }

    /// Takes in the records a checkpoint named, given each one's ranges: a record hides the
    /// sectors in its ranges that have no data, unless a newer record hides them. Returns
    /// the records left live, which the caller marks live in the log.
    pub(super) fn restore_records(
        &mut self,
        records: Vec<RecordRanges>,
        src: &mut dyn PageSource,
    ) -> Result<Vec<SlotAddr>> {
        if records.is_empty() {
            return Ok(Vec::new());
        }
        self.hidden_by = Hiding::default();
        let mut hides: BTreeMap<u64, u32> = BTreeMap::new();
        for (seq, _, ranges) in &records {
            for &(start, count) in ranges {
                let end = (start as usize)
                    .saturating_add(count as usize)
                    .min(self.sectors);
                for k in (start as usize).min(end)..end {
                    let held = !is_slot(self.at.get(k, src)?);
                    if held && self.hidden_by.get(k as u32) < *seq {
                        let previous = self.hidden_by.set(k as u32, *seq);
                        if let Some(h) = hides.get_mut(&previous) {
                            *h -= 1;
                        }
                        *hides.entry(*seq).or_insert(0) += 1;
                    }
                }
            }
        }
        let mut live = Vec::new();
        for (seq, copies, _) in records {
            let h = hides.get(&seq).copied().unwrap_or(0);
            if h > 0 {
                self.records.insert(seq, Record { copies, hides: h });
                live.extend(copies.slots());
            }
        }
        Ok(live)
    }

    /// Entries a page of records holds.
    fn extras_per_page(&self) -> usize {
        self.at.per_page() * 4 + PAGE_HEADER
    }

    /// Record copies a checkpoint lists.
    fn record_entries(&self) -> usize {
        self.records
            .values()
            .map(|r| r.copies.slots().count())
            .sum()
    }

    /// The records part of a checkpoint: how many record copies, the counters record's
    /// address, then each copy's sequence number and address (a record kept twice has two
    /// entries of one sequence number).
    fn extras(&self) -> Vec<u8> {
        let copies: Vec<(u64, u32)> = self
            .records
            .iter()
            .flat_map(|(&seq, r)| r.copies.slots().map(move |at| (seq, self.pack(at))))
            .collect();
        RecordsPart {
            counters: self.counters_at.map_or(UNMAPPED, |a| self.pack(a)),
            // The map packs slots into 32 bits: fewer sectors than that are mapped.
            mapped: self.at.mapped() as u32,
            copies,
        }
        .encode()
    }

    /// Starts the map from a checkpoint of `pages` pages: reads the part that follows the
    /// map pages (the map's own pages are read when needed, [`MapPages::restore`]): the
    /// sectors mapped, the counters record's address, and the records it names, by
    /// sequence number, which it returns for the caller to resolve what they hide
    /// ([`SectorMap::restore_records`]).
    pub(super) fn restore_extras(
        &mut self,
        pages: u32,
        src: &mut dyn PageSource,
    ) -> Result<Vec<(u64, SlotAddr)>> {
        let bad = Error::Corrupt("checkpoint map pages do not match the volume");
        let map_pages = self.at.map_pages();
        if pages <= map_pages {
            return Err(bad);
        }
        let pay = payload(self.slot_size);
        let mut buf = alloc::vec![0u8; self.slot_size];
        let mut extras = Vec::with_capacity((pages - map_pages) as usize * pay);
        for p in map_pages..pages {
            if !src.read_page(p, &mut buf)? {
                return Err(bad);
            }
            extras.extend_from_slice(&buf[..pay]);
        }
        let RecordsPart {
            counters,
            mapped,
            copies,
        } = RecordsPart::decode(&extras)?;
        let limit = self.limit();
        let valid = |p: u32| !is_slot(p) || (p as u64) < limit;
        if !valid(counters)
            || !copies.iter().all(|&(_, p)| valid(p) && is_slot(p))
            || mapped as usize > self.sectors
        {
            return Err(bad);
        }
        self.at.restore(u64::from(mapped));
        self.counters_at = (counters != UNMAPPED).then(|| self.unpack(counters));
        Ok(copies
            .into_iter()
            .map(|(seq, p)| (seq, self.unpack(p)))
            .collect())
    }

    /// Slots of the log: no entry names one at or above this.
    fn limit(&self) -> u64 {
        self.at.limit()
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
        let t = self.hidden_by.take(k as u32);
        if t == 0 {
            return;
        }
        if let Some(r) = self.records.get_mut(&t) {
            r.hides -= 1;
            if r.hides == 0 {
                self.useless.extend(r.copies.slots());
                self.records.remove(&t);
            }
        }
    }

    /// Record `t` now hides the older versions of sector `k`.
    pub(super) fn hide(&mut self, k: usize, t: u64) {
        self.release(k);
        if let Some(r) = self.records.get_mut(&t) {
            r.hides += 1;
            self.hidden_by.set(k as u32, t);
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
        self.at.map_pages()
            + records_len(self.record_entries()).div_ceil(self.extras_per_page()) as u32
    }

    fn take_dirty(&mut self, i: u32, src: &mut dyn PageSource) -> Result<bool> {
        if i >= self.at.map_pages() {
            // The records' pages are written every time: they are few.
            return Ok(true);
        }
        self.at.take_dirty(i, src)
    }

    fn encode_page(&mut self, i: u32, buf: &mut [u8], src: &mut dyn PageSource) -> Result<bool> {
        let map_pages = self.at.map_pages();
        if i < map_pages {
            return self.at.encode_page(i, buf, src);
        }
        let pay = self.extras_per_page();
        let extras = self.extras();
        let from = (i - map_pages) as usize * pay;
        let part = extras.get(from..).unwrap_or(&[]);
        let n = part.len().min(pay).min(buf.len());
        buf[..n].copy_from_slice(&part[..n]);
        Ok(true)
    }

    fn held_apart(&self, each: &mut dyn FnMut(SlotAddr)) {
        // The records a checkpoint lists after the map, the counters record, and the
        // records about to be killed (still counted until they are).
        for r in self.records.values() {
            r.copies.slots().for_each(&mut *each);
        }
        self.counters_at.into_iter().for_each(&mut *each);
        self.useless.iter().copied().for_each(each);
    }

    fn checkpoint_ended(&mut self, ok: bool) {
        self.at.checkpoint_ended(ok);
    }

    fn is_live(
        &mut self,
        tag: &Tag,
        at: SlotAddr,
        oldest_elsewhere: u64,
        src: &mut dyn PageSource,
    ) -> Result<Liveness> {
        let live = match tag.kind {
            Kind::Sector => {
                (tag.key as usize) < self.sectors
                    && self.at.get(tag.key as usize, src)? == self.pack(at)
            }
            Kind::Counters => self.counters_at == Some(at),
            Kind::Page | Kind::Root => false,
            Kind::Trim | Kind::Lost => match self.records.get_mut(&tag.seq) {
                Some(r) if !r.copies.holds(at) => false,
                // No version a trim record hides is left anywhere: it has done its work (its
                // twin holds the record's own sequence number, nothing older). Each copy is
                // let go when its own segment is cleaned: the other stays counted where it
                // is, so no count is dropped for a slot the cleaner may be erasing. A loss
                // record stays while its sectors are not written again: without it a scan
                // would find them never written.
                Some(r) if tag.kind == Kind::Trim && oldest_elsewhere >= tag.seq => {
                    match r.copies.without(at) {
                        Some(left) => r.copies = left,
                        None => {
                            self.records.remove(&tag.seq);
                        }
                    }
                    return Ok(Liveness::Released);
                }
                Some(_) => true,
                None => false,
            },
        };
        Ok(if live { Liveness::Live } else { Liveness::Dead })
    }

    fn lost(&mut self, tag: Option<&Tag>, at: SlotAddr, src: &mut dyn PageSource) -> Result<bool> {
        let packed = self.pack(at);
        // A slot whose tag decayed too is found by its address: the counters record or a
        // record's copy, which the map lists apart, or a sector (below). Left named, the
        // counters record would point into the segment once erased and written again.
        let tag = match tag {
            None if self.counters_at == Some(at) => Some(Tag {
                key: 0,
                seq: 0,
                kind: Kind::Counters,
                copy: false,
            }),
            None => self
                .records
                .iter()
                .find(|(_, r)| r.copies.holds(at))
                .map(|(&seq, _)| Tag {
                    key: 0,
                    seq,
                    kind: Kind::Trim,
                    copy: false,
                }),
            Some(t) => Some(*t),
        };
        let tag = tag.as_ref();
        let sector = match tag {
            Some(t) if t.kind == Kind::Sector => Some(t.key as usize),
            Some(t) if t.kind == Kind::Counters => {
                let held = self.counters_at == Some(at);
                self.counters_at = self.counters_at.filter(|&c| c != at);
                return Ok(held);
            }
            Some(t) => {
                // A record's copy lost: the other, if any, stands for it; without one the
                // sectors it hid keep their state for this session.
                let Some(r) = self.records.get_mut(&t.seq).filter(|r| r.copies.holds(at)) else {
                    return Ok(false);
                };
                match r.copies.without(at) {
                    Some(left) => r.copies = left,
                    None => {
                        self.records.remove(&t.seq);
                    }
                }
                return Ok(true);
            }
            // Rare (a page that decayed between mount and cleaning): find it by address,
            // through every page of the map.
            None => {
                let mut found = None;
                for k in 0..self.sectors {
                    if self.at.get(k, src)? == packed {
                        found = Some(k);
                        break;
                    }
                }
                found
            }
        };
        if let Some(k) = sector.filter(|&k| k < self.sectors) {
            if self.at.get(k, src)? == packed {
                self.at.set(k, LOST, src)?;
                self.lost.push(k as u32);
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn moved(
        &mut self,
        tag: &Tag,
        from: SlotAddr,
        to: SlotAddr,
        src: &mut dyn PageSource,
    ) -> Result<()> {
        match tag.kind {
            Kind::Sector => {
                let (from, to) = (self.pack(from), self.pack(to));
                let k = tag.key as usize;
                if k < self.sectors && self.at.get(k, src)? == from {
                    self.at.set(k, to, src)?;
                }
            }
            Kind::Trim | Kind::Lost => {
                if let Some(r) = self.records.get_mut(&tag.seq) {
                    r.copies.moved(from, to);
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
        Ok(())
    }
}
