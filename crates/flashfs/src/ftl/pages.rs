//! The sector map's entries, a page at a time: the pages in RAM under a budget, the rest
//! read back from the newest checkpoint when needed, and how pages are encoded there.
//!
//! A map page holds the entries of `per_page` consecutive sectors, as many as fill a slot.
//! In a checkpoint, pages come in *chunks* of [`CHUNK_PAGES`]. A chunk whose entries fall
//! into few runs (sectors written in order land in consecutive slots) takes one page of
//! runs; any other takes its entries in as many pages as they fill, written again only where
//! an entry changed (SPEC §3.5). Runs are Ryu & Park's extent mappings: a volume written in
//! order is mapped by a few dozen pages instead of one per 500 sectors. A chunk all
//! unmapped takes no page at all, so a large part holding little costs what it holds: in
//! checkpoint pages, and in reads when its sectors are looked through.
//!
//! Each page is in one of three states:
//! - **in RAM**, clean (the checkpoint holds the same) or dirty (changed since);
//! - **on flash**: not in RAM, the newest checkpoint's copy is the page;
//! - **fresh**: not in RAM and never written (after a format or a scan): all unmapped.
//!
//! A mount from a checkpoint reads none of them: every page is on flash, and how each
//! chunk is held (runs or entries) is learnt from its first page when it is first needed.
//! The sectors mapped come from the checkpoint, and the live slots per segment from the
//! log's segment table, so nothing here is read or counted whole at mount.
//!
//! A chunk of runs is kept as its run list rather than as pages where it can be: a dozen
//! bytes for a chunk written in order, which answer reads without making a page. Pages and
//! run lists share the budget, the least recently used leaving first.
//!
//! A dirty page never leaves RAM: only a checkpoint makes it clean. So RAM holds at most the
//! budget's pages plus the dirty ones, and the owner writes a checkpoint once dirty pages
//! alone fill the budget ([`MapPages::over_budget`]). A chunk's encoding is chosen from all
//! of its entries, read as they stand — from the pages in RAM, the chunk's run list, or
//! as unmapped — without making its pages: a chunk of runs costs a checkpoint its run list,
//! not its sixteen pages (32 KiB on a 2 KiB slot). The pages of the chunk a checkpoint is
//! writing, and its run list, are pinned in RAM until it moves on.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::ops::Range;

use super::layout::{
    decode_page, encode_entries, encode_runs, entries_per_page, is_slot, run_lookup, runs, MapPage,
    RUN_BYTES, UNMAPPED,
};
use crate::error::{Error, Result};
use crate::log::checkpoint::payload;
use crate::log::PageSource;

/// Map pages per chunk.
pub(super) const CHUNK_PAGES: usize = 16;
/// How the newest checkpoint holds a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    /// One page of runs.
    Runs,
    /// Pages of entries; also a chunk never written (fresh, all unmapped).
    Entries,
    /// No page: every entry unmapped. A part mostly unused costs no checkpoint pages, and
    /// no reads when its sectors are looked through.
    Empty,
    /// Not known since the mount: its first page, read when needed, says.
    Unread,
}

/// The chunk a checkpoint is writing: what to put back if the checkpoint fails, and what
/// its pages not in RAM hold while it is written.
#[derive(Debug)]
struct Pinned {
    chunk: usize,
    /// How the newest checkpoint held it before.
    was: Held,
    /// Its pages that were dirty before.
    dirty: [bool; CHUNK_PAGES],
    /// A chunk of runs written as entries: its run list, which its pages not in RAM are
    /// made from, a page at a time, as the checkpoint writes them.
    runs: Option<Box<[u8]>>,
}

/// The runs of a chunk's entries, given in order ([`MapPages::chunk_runs`]): (length, first
/// entry); each next entry of a run is one slot on (an address) or the same (unmapped,
/// lost). Gives up past `max` runs (more than a page holds).
struct RunsOf {
    runs: Vec<(u16, u32)>,
    prev: Option<u32>,
    max: usize,
}

impl RunsOf {
    fn new(max: usize) -> Self {
        RunsOf {
            runs: Vec::new(),
            prev: None,
            max,
        }
    }

    /// Takes the next entry; `false` once the runs would not fit.
    fn push(&mut self, e: u32) -> bool {
        let follows = self.prev.is_some_and(|p| {
            let step = u32::from(is_slot(p));
            p.checked_add(step) == Some(e) && (is_slot(e) || step == 0)
        });
        self.prev = Some(e);
        match self.runs.last_mut() {
            Some((n, _)) if follows && *n < u16::MAX => *n += 1,
            _ => {
                if self.runs.len() == self.max {
                    return false;
                }
                self.runs.push((1, e));
            }
        }
        true
    }
}

/// The entries of a run list ([`MapPage::Runs`]), in order.
fn run_entries(list: &[u8]) -> impl Iterator<Item = u32> + '_ {
    runs(list).flat_map(|(len, start)| {
        let step = u32::from(is_slot(start));
        (0..len as u32).map(move |j| start.wrapping_add(step * j))
    })
}

/// A page in RAM.
#[derive(Debug)]
struct Resident {
    entries: Box<[u32]>,
    /// The use clock at its last use: the least recently used clean page leaves first.
    used: u64,
}

/// The sector map's entries, in pages under a RAM budget. See the module documentation.
#[derive(Debug)]
pub(super) struct MapPages {
    sectors: usize,
    /// Bytes of a slot, which a page takes.
    slot: usize,
    /// Entries per page.
    per_page: usize,
    /// Entries above this are not slot addresses (a damaged checkpoint).
    limit: u64,
    resident: BTreeMap<u32, Resident>,
    /// Pages (numbered within chunks) changed since the last checkpoint took them, or never
    /// written, a bit each.
    dirty: Vec<u64>,
    /// Per chunk, how the newest checkpoint holds it.
    held: Vec<Held>,
    /// Pages of the chunk a checkpoint is writing that it writes ([`MapPages::take_dirty`]).
    pending: [bool; CHUNK_PAGES],
    /// The chunk a checkpoint is writing.
    pinned: Option<Pinned>,
    /// Bytes the pages and run lists in RAM may take.
    budget: usize,
    /// The use clock.
    clock: u64,
    /// Sectors whose entry names a slot.
    mapped: u64,
    /// Pages of runs read back, by chunk, with the use clock: a page of such a chunk is made
    /// from them without a read. A chunk written in order takes a run or two, a dozen
    /// bytes: this is Ryu & Park's extent mappings kept in RAM.
    run_lists: BTreeMap<usize, (Box<[u8]>, u64)>,
    /// Bytes the run lists take.
    run_bytes: usize,
    /// Pages read from flash since the map was made.
    loads: u64,
}

impl MapPages {
    /// The entries of `sectors` sectors, all fresh, in pages of a slot of `slot_size` bytes,
    /// with `budget` bytes of pages in RAM (at least one page); entries must be
    /// below `limit` (the log's slots).
    pub(super) fn new(sectors: usize, slot_size: usize, budget: usize, limit: u64) -> Self {
        let per_page = entries_per_page(payload(slot_size));
        let chunks = sectors.div_ceil(per_page * CHUNK_PAGES);
        MapPages {
            sectors,
            slot: slot_size,
            per_page,
            limit,
            resident: BTreeMap::new(),
            dirty: alloc::vec![u64::MAX; (chunks * CHUNK_PAGES).div_ceil(64)],
            held: alloc::vec![Held::Entries; chunks],
            pending: [false; CHUNK_PAGES],
            pinned: None,
            budget: budget.max(per_page * 4),
            clock: 0,
            mapped: 0,
            run_lists: BTreeMap::new(),
            run_bytes: 0,
            loads: 0,
        }
    }

    /// Slots of the log: no entry names one at or above this.
    pub(super) fn limit(&self) -> u64 {
        self.limit
    }

    /// Sectors whose entry names a slot.
    pub(super) fn mapped(&self) -> u64 {
        self.mapped
    }

    /// Bytes of entries in RAM now.
    pub(super) fn resident_bytes(&self) -> usize {
        self.resident.len() * self.per_page * 4 + self.run_bytes
    }

    /// Pages read back from the checkpoint since the map was made.
    pub(super) fn loads(&self) -> u64 {
        self.loads
    }

    /// Page numbers the chunks take in a checkpoint (some of them absent).
    pub(super) fn map_pages(&self) -> u32 {
        (self.held.len() * CHUNK_PAGES) as u32
    }

    /// Entries a page holds (a slot's worth).
    pub(super) fn per_page(&self) -> usize {
        self.per_page
    }

    /// Sector `k`'s page and its index there.
    fn page_of(&self, k: usize) -> (u32, usize) {
        let chunk = self.per_page * CHUNK_PAGES;
        let p = k / chunk * CHUNK_PAGES + k % chunk / self.per_page;
        (p as u32, k % chunk % self.per_page)
    }

    /// The sectors of chunk `c`.
    fn chunk(&self, c: usize) -> Range<usize> {
        let first = c * self.per_page * CHUNK_PAGES;
        first..(first + self.per_page * CHUNK_PAGES).min(self.sectors)
    }

    /// The sectors of page `p` (empty past the end of the map).
    fn page_range(&self, p: u32) -> Range<usize> {
        let (c, j) = (p as usize / CHUNK_PAGES, p as usize % CHUNK_PAGES);
        let chunk = self.chunk(c);
        let start = (chunk.start + j * self.per_page).min(chunk.end);
        start..(start + self.per_page).min(chunk.end)
    }

    fn is_dirty(&self, p: u32) -> bool {
        let p = p as usize;
        self.dirty
            .get(p / 64)
            .is_some_and(|w| w & (1 << (p % 64)) != 0)
    }

    fn set_dirty(&mut self, p: u32, on: bool) {
        let p = p as usize;
        if on {
            self.dirty[p / 64] |= 1 << (p % 64);
        } else {
            self.dirty[p / 64] &= !(1 << (p % 64));
        }
    }

    /// Sector `k`'s entry. A chunk of runs not in RAM as pages answers from its run list:
    /// reading it needs no page made.
    pub(super) fn get(&mut self, k: usize, src: &mut dyn PageSource) -> Result<u32> {
        let (p, i) = self.page_of(k);
        let c = p as usize / CHUNK_PAGES;
        if !self.resident.contains_key(&p) && !self.is_dirty(p) {
            if self.is_runs(c, src)? {
                return self.run_entry(c, k - self.chunk(c).start, src);
            }
            if self.held[c] == Held::Empty {
                return Ok(UNMAPPED);
            }
        }
        Ok(self.page(p, src)?.entries[i])
    }

    /// The first sector from `k` on whose entry may name a slot or be lost: `k`, unless it
    /// begins a chunk the checkpoint holds no page of and that has not changed since; then
    /// past every such chunk in a row. A look through the map passes over them without a
    /// read (their absence is in the checkpoint's directory) and asks this once a chunk.
    pub(super) fn next_maybe_mapped(
        &mut self,
        k: usize,
        src: &mut dyn PageSource,
    ) -> Result<usize> {
        let mut k = k;
        while k < self.sectors && k % (self.per_page * CHUNK_PAGES) == 0 {
            let c = k / (self.per_page * CHUNK_PAGES);
            let first = (c * CHUNK_PAGES) as u32;
            // A page of an empty chunk in RAM and clean is all unmapped still.
            let changed = (first..first + CHUNK_PAGES as u32).any(|q| self.is_dirty(q));
            if changed || self.is_runs(c, src)? || self.held[c] != Held::Empty {
                return Ok(k);
            }
            k = self.chunk(c).end;
        }
        Ok(k)
    }

    /// Whether the newest checkpoint holds chunk `c` as runs. A chunk not read since the
    /// mount is read now, its first page: a page of runs is kept as its run list, a page
    /// of entries as a page in RAM.
    fn is_runs(&mut self, c: usize, src: &mut dyn PageSource) -> Result<bool> {
        if self.held[c] != Held::Unread {
            return Ok(self.held[c] == Held::Runs);
        }
        let bad = Error::Corrupt("checkpoint map pages do not match the volume");
        let first = (c * CHUNK_PAGES) as u32;
        let mut buf = alloc::vec![0u8; self.slot];
        if !src.read_page(first, &mut buf)? {
            self.held[c] = Held::Empty;
            return Ok(false);
        }
        self.loads += 1;
        match decode_page(&buf) {
            Some(MapPage::Runs(list)) => {
                self.check_runs(c, list)?;
                self.held[c] = Held::Runs;
                self.keep_runs(c, list);
                Ok(true)
            }
            Some(MapPage::Entries(entries)) => {
                if entries.len() != self.page_range(first).len()
                    || !entries.iter().all(|&e| self.valid(e))
                {
                    return Err(bad);
                }
                self.held[c] = Held::Entries;
                self.insert(first, entries);
                Ok(false)
            }
            None => Err(bad),
        }
    }

    /// Entry `i` of runs chunk `c`, from its run list (read back if not in RAM).
    fn run_entry(&mut self, c: usize, i: usize, src: &mut dyn PageSource) -> Result<u32> {
        let bad = Error::Corrupt("checkpoint map page does not match the volume");
        self.clock += 1;
        if let Some((list, used)) = self.run_lists.get_mut(&c) {
            *used = self.clock;
            return run_lookup(list, i).ok_or(bad);
        }
        let list = self.run_list(c, src)?;
        let e = run_lookup(&list, i).ok_or(bad)?;
        self.keep_runs(c, &list);
        Ok(e)
    }

    /// The run list of runs chunk `c`: the one kept, or its first page read back and
    /// checked whole as it comes in.
    fn run_list(&mut self, c: usize, src: &mut dyn PageSource) -> Result<Box<[u8]>> {
        if let Some((list, used)) = self.run_lists.get_mut(&c) {
            self.clock += 1;
            *used = self.clock;
            return Ok(list.clone());
        }
        let bad = Error::Corrupt("checkpoint map page does not match the volume");
        let mut buf = alloc::vec![0u8; self.slot];
        if !src.read_page((c * CHUNK_PAGES) as u32, &mut buf)? {
            return Err(bad);
        }
        let Some(MapPage::Runs(list)) = decode_page(&buf) else {
            return Err(bad);
        };
        self.loads += 1;
        self.check_runs(c, list)?;
        Ok(list.into())
    }

    /// Sets sector `k`'s entry.
    pub(super) fn set(&mut self, k: usize, v: u32, src: &mut dyn PageSource) -> Result<()> {
        let (p, i) = self.page_of(k);
        let e = &mut self.page(p, src)?.entries[i];
        let old = core::mem::replace(e, v);
        if old != v {
            self.mapped = self.mapped + u64::from(is_slot(v)) - u64::from(is_slot(old));
            self.set_dirty(p, true);
        }
        Ok(())
    }

    /// Page `p` in RAM, read or made if it is not, and counted as used now.
    fn page(&mut self, p: u32, src: &mut dyn PageSource) -> Result<&mut Resident> {
        if !self.resident.contains_key(&p) {
            self.load(p, src)?;
        }
        self.clock += 1;
        let clock = self.clock;
        let r = self
            .resident
            .get_mut(&p)
            .ok_or(Error::Corrupt("map page missing"))?;
        r.used = clock;
        Ok(r)
    }

    /// Brings page `p` into RAM: made unmapped if fresh, else read from the checkpoint (for
    /// a chunk of runs, made from its run list).
    fn load(&mut self, p: u32, src: &mut dyn PageSource) -> Result<()> {
        if let Some(entries) = self.pinned_page(p)? {
            self.insert(p, entries);
            return Ok(());
        }
        let range = self.page_range(p);
        let c = p as usize / CHUNK_PAGES;
        let runs = !self.is_dirty(p) && self.is_runs(c, src)?;
        if self.is_dirty(p) || self.held[c] == Held::Empty {
            self.insert(p, alloc::vec![UNMAPPED; range.len()].into_boxed_slice());
            return Ok(());
        }
        let bad = Error::Corrupt("checkpoint map page does not match the volume");
        if self.resident.contains_key(&p) {
            // The chunk's first page, just read to learn how the chunk is held.
            return Ok(());
        }
        if runs {
            let list = self.run_list(c, src)?;
            // Only this page's entries are made: a chunk's whole would take a page per
            // entry page of RAM for a moment.
            let entries = self.page_from_runs(&list, p)?;
            if !self.run_lists.contains_key(&c) {
                self.keep_runs(c, &list);
            }
            self.insert(p, entries);
            return Ok(());
        }
        let mut buf = alloc::vec![0u8; self.slot];
        if !src.read_page(p, &mut buf)? {
            return Err(bad);
        }
        let Some(MapPage::Entries(entries)) = decode_page(&buf) else {
            return Err(bad);
        };
        self.loads += 1;
        if entries.len() != range.len() || !entries.iter().all(|&e| self.valid(e)) {
            return Err(bad);
        }
        self.insert(p, entries);
        Ok(())
    }

    /// The entries of page `p` of a runs chunk, from its run list `list`, in order.
    fn run_page<'l>(&self, list: &'l [u8], p: u32) -> impl Iterator<Item = u32> + 'l {
        let range = self.page_range(p);
        let first = self.chunk(p as usize / CHUNK_PAGES).start;
        run_entries(list)
            .skip(range.start - first)
            .take(range.len())
    }

    /// Page `p` of a runs chunk made from its run list `list` (checked whole when read).
    fn page_from_runs(&self, list: &[u8], p: u32) -> Result<Box<[u32]>> {
        let entries: Box<[u32]> = self.run_page(list, p).collect();
        if entries.len() != self.page_range(p).len() {
            return Err(Error::Corrupt(
                "checkpoint map page does not match the volume",
            ));
        }
        Ok(entries)
    }

    /// The entries of page `p`, not in RAM, if its chunk is the one a checkpoint is writing
    /// as entries though the checkpoint before held it otherwise: from its pinned run
    /// list, or unmapped (a chunk held empty). `None` for any other page.
    fn pinned_page(&self, p: u32) -> Result<Option<Box<[u32]>>> {
        let Some(pin) = &self.pinned else {
            return Ok(None);
        };
        let c = p as usize / CHUNK_PAGES;
        if pin.chunk != c || self.held[c] != Held::Entries {
            return Ok(None);
        }
        match (pin.was, &pin.runs) {
            (Held::Runs, Some(list)) => self.page_from_runs(list, p).map(Some),
            // Its run list is pinned unless every page was in RAM, where they stay.
            (Held::Runs, None) => Err(Error::Corrupt(
                "map chunk of runs written as entries without its run list",
            )),
            (Held::Empty, _) => Ok(Some(alloc::vec![UNMAPPED; self.page_range(p).len()].into())),
            _ => Ok(None),
        }
    }

    fn valid(&self, e: u32) -> bool {
        !is_slot(e) || (e as u64) < self.limit
    }

    /// Checks the run list of chunk `c` ([`MapPage::Runs`]), whole: its runs cover the
    /// chunk exactly, and a run of slots stays below the log's slots.
    fn check_runs(&self, c: usize, list: &[u8]) -> Result<()> {
        let bad = Error::Corrupt("checkpoint map page does not match the volume");
        let range = self.chunk(c);
        let mut total = 0;
        for (len, start) in runs(list) {
            // A run of slots stays below the log's slots; any other is one value repeated.
            let fits =
                !is_slot(start) || (start as u64 + len as u64).saturating_sub(1) < self.limit;
            if len == 0 || total + len > range.len() || !fits {
                return Err(bad);
            }
            total += len;
        }
        if total != range.len() {
            return Err(bad);
        }
        Ok(())
    }

    /// Keeps the run list of chunk `c` (they count in the budget).
    fn keep_runs(&mut self, c: usize, list: &[u8]) {
        let list: Box<[u8]> = list.into();
        self.clock += 1;
        self.run_bytes += list.len();
        if let Some((old, _)) = self.run_lists.insert(c, (list, self.clock)) {
            self.run_bytes -= old.len();
        }
        self.evict(None);
    }

    /// Forgets the run list of chunk `c`.
    fn drop_runs(&mut self, c: usize) {
        if let Some((old, _)) = self.run_lists.remove(&c) {
            self.run_bytes -= old.len();
        }
    }

    /// Puts a page in RAM and lets the least recently used clean ones go while over budget.
    fn insert(&mut self, p: u32, entries: Box<[u32]>) {
        self.clock += 1;
        self.resident.insert(
            p,
            Resident {
                entries,
                used: self.clock,
            },
        );
        self.evict(Some(p));
    }

    /// Lets clean pages and run lists go, least recently used first, until the budget
    /// holds (or only dirty and pinned pages, and `keep`, are left).
    fn evict(&mut self, keep: Option<u32>) {
        while self.resident_bytes() > self.budget {
            let pinned = self.pinned.as_ref().map(|p| p.chunk);
            let page = self
                .resident
                .iter()
                .filter(|(&q, _)| {
                    Some(q) != keep && !self.is_dirty(q) && pinned != Some(q as usize / CHUNK_PAGES)
                })
                .min_by_key(|(_, r)| r.used)
                .map(|(&q, r)| (q, r.used));
            let list = self
                .run_lists
                .iter()
                .filter(|(&c, _)| pinned != Some(c))
                .min_by_key(|(_, (_, u))| *u)
                .map(|(&c, (_, u))| (c, *u));
            match (page, list) {
                (Some((q, pu)), Some((_, lu))) if pu <= lu => {
                    self.resident.remove(&q);
                }
                (_, Some((c, _))) => self.drop_runs(c),
                (Some((q, _)), None) => {
                    self.resident.remove(&q);
                }
                (None, None) => break,
            }
        }
    }

    /// Whether the pages that cannot leave RAM (dirty ones) exceed the budget: time for a
    /// checkpoint.
    pub(super) fn over_budget(&self) -> bool {
        self.resident_bytes() > self.budget
    }

    /// Starts the map from a checkpoint that maps `mapped` sectors: nothing in RAM, nothing
    /// dirty, every chunk on flash and read when first needed.
    pub(super) fn restore(&mut self, mapped: u64) {
        self.run_lists.clear();
        self.run_bytes = 0;
        self.resident.clear();
        self.dirty.fill(0);
        self.held.fill(Held::Unread);
        self.mapped = mapped;
    }

    /// The runs of chunk `c`'s entries as they stand (see [`RunsOf`]), `None` if they do not
    /// fit a page. Each page's entries come from RAM, else (fresh, or in a chunk held
    /// empty) are unmapped, else from the chunk's run list: no page is made. A chunk held
    /// as entries must have every page in RAM or fresh.
    fn chunk_runs(
        &mut self,
        c: usize,
        src: &mut dyn PageSource,
    ) -> Result<Option<Vec<(u16, u32)>>> {
        // Read only if a page needs it: a chunk whose pages are all in RAM may have a run
        // list that no longer reads (a checkpoint that failed after writing some of them).
        let mut list: Option<Box<[u8]>> = None;
        let mut runs = RunsOf::new((self.per_page * 4) / RUN_BYTES);
        let first = (c * CHUNK_PAGES) as u32;
        for q in first..first + CHUNK_PAGES as u32 {
            let range = self.page_range(q);
            if range.is_empty() {
                break;
            }
            let fits = if let Some(r) = self.resident.get(&q) {
                r.entries.iter().all(|&e| runs.push(e))
            } else if self.is_dirty(q) || self.held[c] == Held::Empty {
                range.clone().all(|_| runs.push(UNMAPPED))
            } else if self.held[c] == Held::Runs {
                if list.is_none() {
                    list = Some(self.run_list(c, src)?);
                }
                let list = list.as_deref().unwrap_or_default();
                self.run_page(list, q).all(|e| runs.push(e))
            } else {
                return Err(Error::Corrupt("map chunk of entries not in RAM"));
            };
            if !fits {
                return Ok(None);
            }
        }
        Ok(Some(runs.runs))
    }

    /// Whether map page `i` changed since a checkpoint last took it; see
    /// [`crate::log::Owner::take_dirty`]. At a chunk's first page, chooses the chunk's
    /// encoding and pins its pages (and run list) until the checkpoint moves on.
    pub(super) fn take_dirty(&mut self, i: u32, src: &mut dyn PageSource) -> Result<bool> {
        let (c, j) = (i as usize / CHUNK_PAGES, i as usize % CHUNK_PAGES);
        if j == 0 {
            self.unpin();
            self.pending = [false; CHUNK_PAGES];
            // Pages past the end of the map are never dirty.
            let mut dirty = [false; CHUNK_PAGES];
            for (j, d) in dirty.iter_mut().enumerate() {
                *d = self.is_dirty(i + j as u32) && !self.page_range(i + j as u32).is_empty();
            }
            if dirty.iter().any(|&d| d) {
                let was_runs = self.is_runs(c, src)?;
                let was = self.held[c];
                self.pinned = Some(Pinned {
                    chunk: c,
                    was,
                    dirty,
                    runs: None,
                });
                let pages: Vec<u32> = (0..CHUNK_PAGES as u32)
                    .map(|j| i + j)
                    .filter(|&q| !self.page_range(q).is_empty())
                    .collect();
                // Whether runs may fit is known only with every entry at hand: a chunk of
                // runs or without pages has them without reading more than one page, one of
                // entries only if no page need be read (else it stays entries and only its
                // dirty pages are written).
                let whole = was_runs
                    || was == Held::Empty
                    || pages
                        .iter()
                        .all(|q| self.resident.contains_key(q) || self.is_dirty(*q));
                let runs = if whole {
                    self.chunk_runs(c, src)?
                } else {
                    None
                };
                let now = match &runs {
                    Some(runs) if matches!(runs[..], [(_, UNMAPPED)]) => Held::Empty,
                    Some(_) => Held::Runs,
                    None => Held::Entries,
                };
                if now == Held::Entries {
                    if was == Held::Entries {
                        // Its dirty pages are written: a fresh one is made now.
                        for &q in &pages {
                            if dirty[(q - i) as usize] {
                                self.page(q, src)?;
                            }
                        }
                    } else if was == Held::Runs
                        && pages.iter().any(|q| !self.resident.contains_key(q))
                    {
                        // Every page is written, those not in RAM made from the run list
                        // one at a time ([`MapPages::pinned_page`]).
                        let list = self.run_list(c, src)?;
                        if let Some(pin) = &mut self.pinned {
                            pin.runs = Some(list);
                        }
                    }
                }
                for (j, p) in self.pending.iter_mut().enumerate() {
                    // The pages the checkpoint holds change: those of the new encoding are
                    // written, those of the old one it leaves are dropped. Entries to
                    // entries: only the pages changed.
                    *p = match (was, now) {
                        (Held::Entries, Held::Entries) => dirty[j],
                        (Held::Runs, Held::Runs) => j == 0,
                        (Held::Empty, Held::Empty) => false,
                        _ => true,
                    };
                }
                self.held[c] = now;
                // Its run list is about to change (read above, it may have been kept); a
                // chunk of runs keeps its new one, which its pages not in RAM now read from.
                self.drop_runs(c);
                if let (Held::Runs, Some(runs)) = (now, runs) {
                    let mut buf = alloc::vec![0xFFu8; self.slot];
                    let len = encode_runs(&mut buf, &runs);
                    self.keep_runs(c, &buf[..len]);
                }
                for q in pages {
                    self.set_dirty(q, false);
                }
            }
        }
        Ok(self.pending[j])
    }

    /// Encodes map page `i` into `buf`; `false` if the checkpoint holds no such page (an
    /// entries page of a chunk of runs, or past the end).
    pub(super) fn encode_page(
        &mut self,
        i: u32,
        buf: &mut [u8],
        src: &mut dyn PageSource,
    ) -> Result<bool> {
        let (c, j) = (i as usize / CHUNK_PAGES, i as usize % CHUNK_PAGES);
        if matches!(self.held[c], Held::Unread | Held::Empty) {
            // Unread: asked only for a page the checkpoint does not hold, of a chunk
            // unchanged since the mount: it still holds none.
            return Ok(false);
        }
        if self.held[c] == Held::Runs {
            if j != 0 {
                return Ok(false);
            }
            // Its run list, made when the chunk's encoding was chosen and pinned since.
            let (list, _) = self
                .run_lists
                .get(&c)
                .ok_or(Error::Corrupt("map chunk of runs not in RAM"))?;
            buf.get_mut(..list.len())
                .ok_or(Error::Corrupt("map run list larger than a page"))?
                .copy_from_slice(list);
            return Ok(true);
        }
        if self.page_range(i).is_empty() {
            return Ok(false);
        }
        let pinned = match self.resident.contains_key(&i) {
            true => None,
            false => self.pinned_page(i)?,
        };
        match pinned {
            Some(entries) => encode_entries(buf, &entries),
            None => encode_entries(buf, &self.page(i, src)?.entries),
        }
        Ok(true)
    }

    /// Unpins the chunk a checkpoint wrote; if it is runs and its run list is kept, or
    /// empty, its pages (clean now, and made again without a read) leave RAM.
    fn unpin(&mut self) {
        if let Some(Pinned { chunk: c, .. }) = self.pinned.take() {
            let runs = self.held[c] == Held::Runs && self.run_lists.contains_key(&c);
            if runs || self.held[c] == Held::Empty {
                let first = (c * CHUNK_PAGES) as u32;
                for q in first..first + CHUNK_PAGES as u32 {
                    if !self.is_dirty(q) {
                        self.resident.remove(&q);
                    }
                }
            }
        }
    }

    /// The checkpoint ended: unpins its chunk. If it was not written whole, that chunk's
    /// encoding is what it was, and its pages that were dirty, or are in RAM, are dirty.
    pub(super) fn checkpoint_ended(&mut self, ok: bool) {
        if ok {
            self.unpin();
        }
        // Still pinned: the checkpoint failed. A chunk of runs written as entries in part:
        // its pages put so far replaced its page of runs, which may no longer read; it is
        // made whole in RAM (dirty until a checkpoint writes it), as before the checkpoint
        // began — while still pinned, so that no page made leaves RAM before it is dirty.
        let rebuild = self
            .pinned
            .as_mut()
            .and_then(|pin| Some((pin.chunk, pin.runs.take()?)));
        if let Some((c, list)) = rebuild {
            let first = (c * CHUNK_PAGES) as u32;
            for q in first..first + CHUNK_PAGES as u32 {
                if self.page_range(q).is_empty() || self.resident.contains_key(&q) {
                    continue;
                }
                // The list was checked whole when read: every page of it is whole.
                if let Ok(entries) = self.page_from_runs(&list, q) {
                    self.insert(q, entries);
                }
            }
        }
        if let Some(Pinned {
            chunk: c,
            was,
            dirty,
            ..
        }) = self.pinned.take()
        {
            self.held[c] = was;
            self.drop_runs(c);
            let first = (c * CHUNK_PAGES) as u32;
            for (q, d) in (first..).zip(dirty) {
                if d || self.resident.contains_key(&q) {
                    self.set_dirty(q, true);
                }
            }
        }
        self.pending = [false; CHUNK_PAGES];
        self.evict(None);
    }
}

#[cfg(test)]
mod tests {
    use super::super::layout::LOST;
    use super::*;

    const SLOT: usize = 512;
    const LIMIT: u64 = (u32::MAX - 2) as u64;

    /// A checkpoint's map pages, as the log keeps them.
    #[derive(Default)]
    struct Flash {
        pages: Vec<Option<Vec<u8>>>,
        reads: u64,
    }

    impl PageSource for Flash {
        fn read_page(&mut self, i: u32, buf: &mut [u8]) -> Result<bool> {
            self.reads += 1;
            match self.pages.get(i as usize).cloned().flatten() {
                Some(p) => {
                    buf.copy_from_slice(&p);
                    Ok(true)
                }
                None => Ok(false),
            }
        }
    }

    /// Takes a checkpoint of `map` into `flash` as the log would: each page asked about,
    /// then written if changed (or absent), before the next. Returns the pages written.
    fn checkpoint(map: &mut MapPages, flash: &mut Flash) -> usize {
        let n = map.map_pages() as usize;
        flash.pages.resize(n, None);
        let mut written = 0;
        for i in 0..n {
            let absent = flash.pages[i].is_none();
            let mut src = core::mem::take(flash);
            let dirty = map.take_dirty(i as u32, &mut src).unwrap();
            *flash = src;
            if !dirty && !absent {
                continue;
            }
            let mut buf = vec![0xFFu8; SLOT];
            let mut src = core::mem::take(flash);
            let some = map
                .encode_page(i as u32, &mut buf[..payload(SLOT)], &mut src)
                .unwrap();
            *flash = src;
            flash.pages[i] = if some {
                written += 1;
                Some(buf)
            } else {
                None
            };
        }
        map.checkpoint_ended(true);
        written
    }

    /// A map restored from `flash` (of `mapped` sectors mapped), and its entries read
    /// back. The restore reads nothing: the pages are read as they are needed.
    fn restored(
        sectors: usize,
        budget: usize,
        mapped: u64,
        flash: &mut Flash,
    ) -> (MapPages, Vec<u32>) {
        let mut m = MapPages::new(sectors, SLOT, budget, LIMIT);
        let reads = flash.reads;
        m.restore(mapped);
        assert_eq!(flash.reads, reads, "a restore reads no page");
        let all: Vec<u32> = (0..sectors).map(|k| m.get(k, flash).unwrap()).collect();
        assert_eq!(all.iter().filter(|&&e| is_slot(e)).count() as u64, mapped);
        (m, all)
    }

    fn per_chunk() -> usize {
        entries_per_page(payload(SLOT)) * CHUNK_PAGES
    }

    #[test]
    fn chunks_of_runs_and_of_entries_round_trip_through_their_changes() {
        let per_chunk = per_chunk();
        let sectors = per_chunk * 3 + 100;
        let mut flash = Flash::default();
        let mut map = MapPages::new(sectors, SLOT, usize::MAX, LIMIT);
        let mut model = vec![UNMAPPED; sectors];
        let mut set = |map: &mut MapPages, flash: &mut Flash, k: usize, v: u32| {
            map.set(k, v, flash).unwrap();
            model[k] = v;
        };
        // Chunk 0 written in order (runs); chunk 1 at random (entries); the rest unmapped.
        for k in 0..per_chunk {
            set(&mut map, &mut flash, k, 1000 + k as u32);
        }
        let mut x = 7u32;
        for k in per_chunk..2 * per_chunk {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            set(&mut map, &mut flash, k, x % 100_000);
        }
        set(&mut map, &mut flash, 3 * per_chunk + 5, LOST);
        let first = checkpoint(&mut map, &mut flash);
        let runs = |map: &MapPages, c: usize| map.held[c] == Held::Runs;
        assert!(runs(&map, 0) && !runs(&map, 1) && runs(&map, 3));
        assert_eq!(map.held[2], Held::Empty);
        let chunk2 = 2 * CHUNK_PAGES..3 * CHUNK_PAGES;
        assert!(
            flash.pages[chunk2].iter().all(Option::is_none),
            "an empty chunk takes no page"
        );
        // One entry changes in each: chunk 0 stays runs (one page), chunk 1 rewrites one
        // page of entries.
        map.set(3, 5, &mut flash).unwrap();
        map.set(per_chunk + 1, 9, &mut flash).unwrap();
        assert_eq!(checkpoint(&mut map, &mut flash), 2);
        let (_, all) = restored(sectors, usize::MAX, map.mapped(), &mut flash);
        let mut expect = vec![UNMAPPED; sectors];
        for (k, e) in expect.iter_mut().enumerate() {
            *e = map.get(k, &mut flash).unwrap();
        }
        assert_eq!(all, expect);
        // Chunk 0 scattered: entries now, every page; chunk 1 made sequential: runs.
        for k in (0..per_chunk).step_by(2) {
            map.set(k, UNMAPPED - 7 - k as u32, &mut flash).unwrap();
        }
        for k in per_chunk..2 * per_chunk {
            map.set(k, 50_000 + k as u32, &mut flash).unwrap();
        }
        checkpoint(&mut map, &mut flash);
        assert!(!runs(&map, 0) && runs(&map, 1));
        assert_eq!(
            flash.pages[CHUNK_PAGES + 1],
            None,
            "the entries pages of a runs chunk go"
        );
        let (_, all) = restored(sectors, usize::MAX, map.mapped(), &mut flash);
        for (k, e) in all.iter().enumerate() {
            assert_eq!(*e, map.get(k, &mut flash).unwrap(), "sector {k}");
        }
        assert!(first > 0);
    }

    /// A chunk whose sectors are all unmapped again (trimmed) leaves the checkpoint, and a
    /// look through a restored map passes over the empty chunks without reading.
    #[test]
    fn empty_chunks_take_no_page_and_no_read() {
        let per_chunk = per_chunk();
        let sectors = per_chunk * 8;
        let mut flash = Flash::default();
        let mut map = MapPages::new(sectors, SLOT, usize::MAX, LIMIT);
        // Chunks 1 and 6 hold data, chunk 3 a lost sector; a checkpoint writes those only.
        for k in (per_chunk..2 * per_chunk).chain(6 * per_chunk..6 * per_chunk + 10) {
            map.set(k, 1000 + k as u32, &mut flash).unwrap();
        }
        map.set(3 * per_chunk + 7, LOST, &mut flash).unwrap();
        checkpoint(&mut map, &mut flash);
        let held: Vec<usize> = (0..8)
            .filter(|c| flash.pages[c * CHUNK_PAGES].is_some())
            .collect();
        assert_eq!(held, [1, 3, 6]);
        // Chunk 6 emptied: its page goes at the next checkpoint.
        for k in 6 * per_chunk..6 * per_chunk + 10 {
            map.set(k, UNMAPPED, &mut flash).unwrap();
        }
        checkpoint(&mut map, &mut flash);
        assert!(flash.pages[6 * CHUNK_PAGES].is_none());
        assert_eq!(map.held[6], Held::Empty);
        // Restored: the look through reads the two chunks that hold pages, once each.
        let mut m = MapPages::new(sectors, SLOT, usize::MAX, LIMIT);
        m.restore(per_chunk as u64);
        let reads = flash.reads;
        let mut seen = Vec::new();
        let mut k = 0;
        while k < sectors {
            k = m.next_maybe_mapped(k, &mut flash).unwrap();
            if k < sectors {
                if m.get(k, &mut flash).unwrap() != UNMAPPED {
                    seen.push(k);
                }
                k += 1;
            }
        }
        let want: Vec<usize> = (per_chunk..2 * per_chunk)
            .chain([3 * per_chunk + 7])
            .collect();
        assert_eq!(seen, want);
        // The source is asked about each chunk's first page: absent ones cost no read on
        // flash (the directory says so), present ones one read each.
        assert_eq!(m.loads(), 2);
        assert_eq!(flash.reads - reads, 8);
        // Written again, an empty chunk's sector reads back and is checkpointed.
        m.set(6 * per_chunk + 3, 77, &mut flash).unwrap();
        checkpoint(&mut m, &mut flash);
        let (_, all) = restored(sectors, usize::MAX, per_chunk as u64 + 1, &mut flash);
        assert_eq!(all[6 * per_chunk + 3], 77);
        assert_eq!(all[6 * per_chunk + 4], UNMAPPED);
    }

    /// Random writes over a map far larger than its budget, checkpointed whenever the
    /// changed pages fill it, against a plain array: every entry reads back, RAM stays
    /// within the budget and a chunk, and a restore gives the same map.
    #[test]
    fn a_map_larger_than_its_budget_reads_back_what_was_written() {
        let sectors = per_chunk() * 6 + 77;
        let per_page = entries_per_page(payload(SLOT));
        let budget = 2 * CHUNK_PAGES * per_page * 4;
        let mut flash = Flash::default();
        let mut map = MapPages::new(sectors, SLOT, budget, LIMIT);
        let mut model = vec![UNMAPPED; sectors];
        checkpoint(&mut map, &mut flash);
        let mut x = 99u64;
        let mut checkpoints = 0;
        for i in 0..20_000u32 {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let k = if i % 3 == 0 {
                (i as usize * 7) % sectors
            } else {
                (x >> 33) as usize % sectors
            };
            if x % 5 == 0 {
                assert_eq!(map.get(k, &mut flash).unwrap(), model[k], "sector {k}");
            } else {
                let v = if x % 17 == 0 { UNMAPPED } else { i };
                map.set(k, v, &mut flash).unwrap();
                model[k] = v;
            }
            if map.over_budget() {
                checkpoint(&mut map, &mut flash);
                checkpoints += 1;
                assert!(!map.over_budget());
            }
            assert!(map.resident_bytes() <= budget + CHUNK_PAGES * per_page * 4);
        }
        assert!(checkpoints > 10, "{checkpoints} checkpoints");
        assert!(map.loads() > 0);
        let mapped = model.iter().filter(|&&e| is_slot(e)).count() as u64;
        assert_eq!(map.mapped(), mapped);
        for (k, &e) in model.iter().enumerate() {
            assert_eq!(map.get(k, &mut flash).unwrap(), e, "sector {k}");
        }
        checkpoint(&mut map, &mut flash);
        let (m, all) = restored(sectors, budget, mapped, &mut flash);
        assert_eq!(all, model);
        assert_eq!(m.mapped(), mapped);
        assert!(m.resident_bytes() <= budget);
    }

    /// A map restored from a checkpoint reads a chunk's pages only when a sector of it is
    /// needed, and its next checkpoint writes only what changed, keeping the chunks it
    /// never read as they are.
    #[test]
    fn a_restored_map_reads_only_what_it_needs_and_checkpoints_again() {
        let per_chunk = per_chunk();
        let sectors = per_chunk * 4;
        let mut flash = Flash::default();
        let mut map = MapPages::new(sectors, SLOT, usize::MAX, LIMIT);
        let mut model = vec![UNMAPPED; sectors];
        // Chunks 0 and 2 in order (runs), chunk 1 at random (entries), chunk 3 unmapped.
        let mut x = 11u32;
        for (k, e) in model.iter_mut().enumerate().take(3 * per_chunk) {
            let v = if (per_chunk..2 * per_chunk).contains(&k) {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                x % 100_000
            } else {
                2000 + k as u32
            };
            map.set(k, v, &mut flash).unwrap();
            *e = v;
        }
        checkpoint(&mut map, &mut flash);
        let mut m = MapPages::new(sectors, SLOT, usize::MAX, LIMIT);
        m.restore(map.mapped());
        let reads = flash.reads;
        // A sector of the entries chunk's third page: its first page says how the chunk is
        // held, then the page itself.
        let k = per_chunk + 2 * m.per_page() + 1;
        assert_eq!(m.get(k, &mut flash).unwrap(), model[k]);
        assert_eq!(flash.reads - reads, 2);
        // A sector of a runs chunk: its one page.
        assert_eq!(
            m.get(2 * per_chunk + 9, &mut flash).unwrap(),
            model[2 * per_chunk + 9]
        );
        assert_eq!(flash.reads - reads, 3);
        // Changes in chunks 1 and 3; chunks 0 and 2 never read.
        m.set(k, 7, &mut flash).unwrap();
        model[k] = 7;
        m.set(3 * per_chunk + 4, 8, &mut flash).unwrap();
        model[3 * per_chunk + 4] = 8;
        let before = flash.pages.clone();
        let written = checkpoint(&mut m, &mut flash);
        assert_eq!(
            written, 2,
            "the changed page of entries and chunk 3's page of runs"
        );
        assert_eq!(flash.pages[0], before[0], "an unread chunk stays as it was");
        let (_, all) = restored(sectors, usize::MAX, m.mapped(), &mut flash);
        assert_eq!(all, model);
    }

    /// A chunk's encoding is chosen from its entries where they are (a page in RAM, its
    /// run list, fresh): a checkpoint of a chunk of runs with one page changed makes none
    /// of its other pages, and neither does one of a chunk never written.
    #[test]
    fn a_chunk_is_encoded_without_making_its_pages() {
        let per_chunk = per_chunk();
        let sectors = per_chunk * 2;
        let mut flash = Flash::default();
        let mut map = MapPages::new(sectors, SLOT, usize::MAX, LIMIT);
        let mut model = vec![UNMAPPED; sectors];
        for (k, m) in model.iter_mut().enumerate().take(per_chunk) {
            map.set(k, k as u32, &mut flash).unwrap();
            *m = k as u32;
        }
        checkpoint(&mut map, &mut flash);
        let mapped = map.mapped();
        let (mut map, _) = restored(sectors, usize::MAX, mapped, &mut flash);
        map.restore(mapped);
        // One page of the chunk of runs changed; one of the chunk never written.
        for (k, v) in [(5, 900_000), (per_chunk + 3, 7)] {
            map.set(k, v, &mut flash).unwrap();
            model[k] = v;
        }
        // The first chunk is written, the checkpoint fails at the second.
        for c in 0..2 {
            let first = (c * CHUNK_PAGES) as u32;
            let mut src = core::mem::take(&mut flash);
            assert!(map.take_dirty(first, &mut src).unwrap());
            flash = src;
            assert_eq!(map.held[c], Held::Runs);
            let pages = (first..first + CHUNK_PAGES as u32)
                .filter(|q| map.resident.contains_key(q))
                .count();
            assert_eq!(pages, 1, "chunk {c}: only the page changed is in RAM");
            if c == 0 {
                let mut buf = vec![0xFFu8; SLOT];
                let mut src = core::mem::take(&mut flash);
                assert!(map
                    .encode_page(first, &mut buf[..payload(SLOT)], &mut src)
                    .unwrap());
                flash = src;
                flash.pages[first as usize] = Some(buf);
            }
        }
        map.checkpoint_ended(false);
        checkpoint(&mut map, &mut flash);
        let (_, all) = restored(sectors, usize::MAX, map.mapped(), &mut flash);
        let wrong = (0..sectors).find(|&k| all[k] != model[k]);
        assert_eq!(wrong, None, "a sector reads back other than written");
    }

    /// A chunk of runs that no longer fits a page of runs is written as entries, each page
    /// not in RAM made from the run list as the checkpoint reaches it: at most the pages
    /// changed and the one being written are in RAM at once, whether the checkpoint
    /// completes or fails first.
    #[test]
    fn a_chunk_of_runs_becomes_entries_a_page_at_a_time() {
        let per_chunk = per_chunk();
        let per_page = entries_per_page(payload(SLOT));
        // A budget of nothing: pages not pinned and not dirty leave RAM at once.
        for (fail, budget) in [(false, usize::MAX), (true, usize::MAX), (true, 0)] {
            let mut flash = Flash::default();
            let mut map = MapPages::new(per_chunk, SLOT, usize::MAX, LIMIT);
            let mut model = vec![UNMAPPED; per_chunk];
            for (k, m) in model.iter_mut().enumerate() {
                map.set(k, k as u32, &mut flash).unwrap();
                *m = k as u32;
            }
            checkpoint(&mut map, &mut flash);
            let mapped = map.mapped();
            let (mut map, _) = restored(per_chunk, budget, mapped, &mut flash);
            map.restore(mapped);
            // Every other entry of the first page moved: more runs than a page holds.
            for k in (0..per_page).step_by(2) {
                let v = 1_000_000 + 7 * k as u32;
                map.set(k, v, &mut flash).unwrap();
                model[k] = v;
            }
            let mut most = 0;
            for i in 0..CHUNK_PAGES as u32 {
                let mut src = core::mem::take(&mut flash);
                assert!(map.take_dirty(i, &mut src).unwrap(), "page {i} is written");
                flash = src;
                assert_eq!(map.held[0], Held::Entries);
                if fail && i == 3 {
                    break;
                }
                let mut buf = vec![0xFFu8; SLOT];
                let mut src = core::mem::take(&mut flash);
                assert!(map
                    .encode_page(i, &mut buf[..payload(SLOT)], &mut src)
                    .unwrap());
                flash = src;
                flash.pages[i as usize] = Some(buf);
                most = most.max(map.resident.len());
            }
            assert_eq!(most, 1, "only the page changed stays in RAM");
            map.checkpoint_ended(!fail);
            if fail {
                checkpoint(&mut map, &mut flash);
            }
            let (_, all) = restored(per_chunk, usize::MAX, map.mapped(), &mut flash);
            let wrong = (0..per_chunk).find(|&k| all[k] != model[k]);
            assert_eq!(
                wrong, None,
                "fail {fail}: a sector reads back other than written"
            );
        }
    }

    /// A checkpoint that fails part-way leaves its chunk's pages dirty: nothing written
    /// before it is read back stale.
    #[test]
    fn a_failed_checkpoint_keeps_its_chunk_dirty() {
        let sectors = per_chunk() * 2;
        let mut flash = Flash::default();
        let mut map = MapPages::new(sectors, SLOT, 0, LIMIT);
        checkpoint(&mut map, &mut flash);
        map.set(1, 42, &mut flash).unwrap();
        let mut src = core::mem::take(&mut flash);
        assert!(map.take_dirty(0, &mut src).unwrap());
        flash = src;
        map.checkpoint_ended(false);
        // Many other pages come and go through the budget.
        for k in (per_chunk()..sectors).step_by(7) {
            map.get(k, &mut flash).unwrap();
        }
        assert_eq!(map.get(1, &mut flash).unwrap(), 42);
        checkpoint(&mut map, &mut flash);
        let (_, all) = restored(sectors, usize::MAX, map.mapped(), &mut flash);
        assert_eq!(all[1], 42);
    }
}
