//! Writing checkpoints and mounting from them (the formats are in [`super::checkpoint`]).
//!
//! A checkpoint is written whole before its root: the body and directory pages, a sync, then
//! the root, so a root on flash always names pages that were durable before it. Nothing
//! programmed after a root is in it, so a mark goes to the anchor (and is synced) before the
//! first such program: a mount that finds a mark scans. Cleaning is kept out of a
//! checkpoint's writes: room is made first, so no page moves while the directory is written.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use flash::FlashError;

use crate::error::Damage;

use super::checkpoint::{
    dir_entries, encode_dir, max_dir_pages, max_dirs, open_page, page_crc, payload, seal_page,
    BodyPages, ANCHOR_SLOTS,
};
use super::*;

/// The fewest segments the set of a close's root holds: a quarter of them the most worn
/// (the cleaner's), the rest the least.
const CLOSE_SET_MIN: u32 = 4;

/// What reading the anchors found.
pub(super) struct AnchorScan {
    /// Where records go next.
    pub anchors: Anchors,
    /// Every record copy's sequence number and address, newest first (a record's two
    /// copies side by side).
    pub records: Vec<(u64, SlotAddr)>,
    /// Whether the newest record can be trusted to be the newest written.
    pub trusted: bool,
}

impl<D: Segments> Log<D> {
    /// Reads both anchors' headers and tags: the anchor state, every record's sequence
    /// number and address (newest first), and whether the newest can be trusted: no anchor
    /// header is damaged and nothing unreadable follows the newest record, which could
    /// have been a newer one (a torn or decayed record sends the mount to a scan).
    ///
    /// The anchor begun last is read first; when both headers hold and it has a record,
    /// the other is not read further: all its records came before the newer one was
    /// begun, so only that anchor's can be the newest.
    pub(super) fn read_anchors(&mut self, segs: [u32; 2]) -> Result<AnchorScan> {
        let mut a = Anchors::new(segs);
        let mut records = Vec::new();
        // Records' first copies.
        let mut firsts = Vec::new();
        let mut newest: Option<(u64, usize, u32)> = None;
        let mut trusted = true;
        // Per anchor: the last slot holding anything, when its header was written, and
        // whether its header or tags do not read.
        let mut ends = [0u32; 2];
        let mut opened = [0u64; 2];
        let mut unreadable = [false; 2];
        let headers = [
            self.dev.read_header(segs[0])?,
            self.dev.read_header(segs[1])?,
        ];
        // The headers that hold: this volume's anchors'.
        let begun = headers.map(|h| match h {
            HeaderState::Valid(h) if h.head == ANCHOR_HEAD && h.volume == self.volume => Some(h),
            _ => None,
        });
        for (i, h) in begun.iter().enumerate() {
            if let Some(h) = h {
                self.segs[segs[i] as usize].erase_count = h.erase_count;
                opened[i] = h.open_seq;
            }
        }
        let both_begun = begun.iter().all(Option::is_some);
        let seq = |i: usize| begun[i].map(|h| h.open_seq);
        let order = if seq(1) > seq(0) { [1, 0] } else { [0, 1] };
        for i in order {
            if both_begun && newest.is_some() {
                break;
            }
            let seg = segs[i];
            let header = match (begun[i], headers[i]) {
                (Some(h), _) => h,
                // Erased: the other anchor's turn had begun, its header not yet written —
                // unless slots behind it hold something: then the header decayed, and the
                // anchor may hold the newest records.
                (None, HeaderState::Erased) => {
                    // A run of erased slots from the first says so in fewest reads; else
                    // the tags up to where writing stopped.
                    let mut empty = true;
                    let looked = match self.dev.unwritten(seg) {
                        Ok(false) => self.dev.visit_written_tags(seg, 0, &mut |_, t| {
                            empty &= t == TagState::Erased;
                        }),
                        other => other.map(|_| ()),
                    };
                    match looked {
                        Ok(()) => {}
                        Err(Error::Io) => empty = false,
                        Err(e) => return Err(e),
                    }
                    if !empty {
                        trusted = false;
                        unreadable[i] = true;
                    }
                    continue;
                }
                _ => {
                    trusted = false;
                    unreadable[i] = true;
                    continue;
                }
            };
            let tags = match self.read_anchor_tags(seg, header.open_seq) {
                Ok(tags) => tags,
                Err(Error::Io) => {
                    trusted = false;
                    unreadable[i] = true;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let used = tags.last().map_or(0, |&(slot, _)| slot + 1);
            ends[i] = used;
            for &(slot, t) in &tags {
                if let TagState::Valid(tag) = t {
                    if tag.kind != Kind::Root {
                        continue;
                    }
                    let at = SlotAddr { seg, slot };
                    records.push((tag.seq, at));
                    if tag.key == 0 {
                        firsts.push(at);
                    }
                    if newest.is_none_or(|(s, _, _)| tag.seq > s) {
                        newest = Some((tag.seq, i, used));
                    }
                }
            }
        }
        // Newest first; of a record's two copies, the later one first.
        records.sort_unstable_by_key(|&(seq, at)| core::cmp::Reverse((seq, at.seg, at.slot)));
        // The anchor of a root that may be stale, if any.
        let mut doubted = None;
        if let Some(&(_, at)) = records.first() {
            let i = (at.seg == segs[1]) as usize;
            // The newest record's last copy that reads ends what it wrote. If that is its
            // first copy, the slot of its second may hold the second torn or decayed.
            let end = if firsts.contains(&at) {
                self.record_slot_from(at.slot + 1) + 1
            } else {
                at.slot + 1
            };
            // Unreadable slots after it in its anchor, or in the other anchor if that one
            // was started later (its header is newer): either may be a newer record.
            let later = opened[1 - i] > opened[i] && ends[1 - i] > 0;
            if ends[i] > end || later {
                trusted = false;
            }
            // What may be newer sits in the other anchor: that one must not be erased
            // while this root, perhaps stale, still reads. This anchor goes first.
            if later || unreadable[1 - i] {
                doubted = Some(i);
            }
        }
        if let Some(i) = doubted {
            a.stale = true;
            a.pair.current = i;
            a.pair.next = self.anchor_slots();
        } else if let Some((_, i, used)) = newest {
            a.pair.current = i;
            // A cut between a NOR slot's data and its tag leaves bytes under an erased tag:
            // records go on past them, as a resumed head does (SPEC §4.2).
            let mut next = used.max(self.dev.reserved_slots());
            while next < self.anchor_slots() && !self.dev.slot_erased(segs[i], next)? {
                next += 1;
            }
            a.pair.next = next;
        }
        Ok(AnchorScan {
            anchors: a,
            records,
            trusted,
        })
    }

    /// The tags of an anchor begun at `open_seq` that can bear on the mount, as (slot, tag)
    /// in slot order, erased slots left out: those of its newest record that reads and of
    /// every slot after it. Where the medium finds where writing stopped without reading
    /// every tag ([`Segments::written_end`]), the tags are read back from there to that
    /// record's first copy: records go down in order, so nothing before it is newer or
    /// follows it. A tag whose sequence number no slot can have is taken for torn.
    fn read_anchor_tags(&mut self, seg: u32, open_seq: u64) -> Result<Vec<(u32, TagState)>> {
        // Its records came after its header.
        let limit = self.impossible_seq(open_seq);
        let checked = |t| possible(t, limit);
        let mut out = Vec::new();
        let slots = self.anchor_slots();
        let Some(end) = self.dev.written_end(seg, slots)? else {
            // The tags come in one read (NOR): those of the record slots only.
            let mut tags = alloc::vec![TagState::Erased; slots as usize];
            self.dev.read_tags(seg, &mut tags)?;
            for (slot, t) in (0..).zip(tags) {
                if t != TagState::Erased {
                    out.push((slot, checked(t)));
                }
            }
            return Ok(out);
        };
        for slot in (0..end.min(slots)).rev() {
            let t = checked(self.dev.read_tag(seg, slot)?);
            if t != TagState::Erased {
                out.push((slot, t));
            }
            if matches!(t, TagState::Valid(t) if t.kind == Kind::Root && t.key == 0) {
                break;
            }
        }
        out.reverse();
        Ok(out)
    }

    /// Restores the log from its newest checkpoint, if it is current and whole; `None` sends
    /// the mount to a scan.
    pub(super) fn restore(&mut self) -> Result<Option<Restored>> {
        // Any valid header names the volume and its anchors; the first is usually segment 0.
        // A segment retired (marked bad) may hold the header of a volume formatted before;
        // one bad from the factory holds none (or reads as bad).
        let mut volume = None;
        for seg in 0..self.geo.segments {
            if self.dev.is_retired(seg)? {
                continue;
            }
            if let HeaderState::Valid(h) = self.dev.read_header(seg)? {
                volume = Some(h.volume);
                break;
            }
        }
        let Some(volume) = volume else {
            return Ok(None);
        };
        // A setting this code does not know: the scan says so.
        let Some(anchors) = volume
            .anchors
            .filter(|_| Regions::from_code(volume.regions).is_some())
        else {
            return Ok(None);
        };
        self.volume = volume;
        let segs = anchors.map(u32::from);
        if segs.iter().any(|&s| s >= self.geo.segments) {
            return Ok(None);
        }
        for &s in &segs {
            if self.dev.is_retired(s)? {
                return Ok(None);
            }
        }
        let found = self.read_anchors(segs)?;
        let mut anchors = found.anchors.clone();
        let mut record = self.newest_record(&found)?;
        // The records moved on from the pair the headers name: its newest says where.
        if let Some(Record::Moved(working)) = record {
            if !self.may_anchor(working, segs)? {
                return Ok(None);
            }
            let found = self.read_anchors(working)?;
            record = self.newest_record(&found)?;
            let master = anchors.pair;
            anchors = found.anchors;
            anchors.master = Some(master);
        }
        match record {
            Some(Record::Root(root)) => self.restore_root(&root, anchors),
            _ => Ok(None),
        }
    }

    /// The newest record of a pair, if it can be trusted and reads whole. The newest record
    /// decides, from either copy. One whose copies do not read whole may be a torn record
    /// or a decayed one, and only the first leaves the record before it true: the scan
    /// decides instead.
    fn newest_record(&mut self, found: &AnchorScan) -> Result<Option<Record>> {
        let Some(&(newest, _)) = found.records.first().filter(|_| found.trusted) else {
            return Ok(None);
        };
        let mut buf = alloc::vec![0u8; self.geo.slot_size as usize];
        for &(_, at) in found.records.iter().take_while(|r| r.0 == newest) {
            // A record is never programmed in place: only as much as its write put there
            // is read.
            match self.dev.read_slot_written(at.seg, at.slot, &mut buf, 0) {
                Ok(_) => {}
                Err(Error::Io) => continue,
                Err(e) => return Err(e),
            }
            if let Some(record) = Record::decode(&buf, |p| self.unpack(p)) {
                return Ok(Some(record));
            }
        }
        Ok(None)
    }

    /// Whether `working`, named by a record of the master pair `master`, can be a working
    /// pair: two distinct segments of the device, neither of the master's, neither bad.
    fn may_anchor(&mut self, working: [u32; 2], master: [u32; 2]) -> Result<bool> {
        if working[0] == working[1]
            || working
                .iter()
                .any(|s| *s >= self.geo.segments || master.contains(s))
        {
            return Ok(false);
        }
        for &s in &working {
            if self.dev.is_retired(s)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The first slot from `slot` on that an anchor record may take: one whose program
    /// cannot harm an earlier slot (on MLC a program may destroy the slot paired with it),
    /// or [`Log::anchor_slots`] if none is left.
    fn record_slot_from(&self, slot: u32) -> u32 {
        let slots = self.anchor_slots();
        let mut next = slot.min(slots);
        while next < slots && self.dev.risks_earlier_slot(next) {
            next += 1;
        }
        next
    }

    /// Slots of an anchor that take records: the segment's first [`ANCHOR_SLOTS`].
    fn anchor_slots(&self) -> u32 {
        self.geo.slots.min(ANCHOR_SLOTS)
    }

    /// Loads the segment table of `root`, rolls forward through what was written after it
    /// (in its set's segments and its heads' segments) and resumes the heads. Returns the
    /// owner's pages' addresses and the tags written after the root, for the owner.
    fn restore_root(&mut self, root: &Root, mut anchors: Anchors) -> Result<Option<Restored>> {
        let pay = payload(self.geo.slot_size as usize);
        let log_pages = self.table_pages();
        let total = (log_pages as usize).saturating_add(root.owner_pages as usize);
        let dirs = root.dirs.len();
        if root.log_pages != log_pages
            || dirs == 0
            || dirs > max_dir_pages(total, self.geo.slot_size as usize)
        {
            return Ok(None);
        }
        let segments = self.geo.segments;
        let bad_seg = |s: u32| s >= segments || anchors.holds_segment(s);
        if root.set.iter().chain(&root.late).any(|&s| bad_seg(s))
            || root
                .heads
                .iter()
                .flatten()
                .any(|&(s, u)| bad_seg(s) || u > self.geo.slots)
        {
            return Ok(None);
        }
        // Roll forward: the set's segments opened since the root, oldest first, after the
        // heads' segments (opened before it). On two devices, nothing was programmed after
        // a closed root (a program appends it again, open, first): there is nothing to roll
        // forward, and the flash is not read at all.
        let trusted = root.closed && self.dev.is_tiered();
        let mut rolled: Vec<(u32, SegHeader)> = Vec::new();
        let mut retired = Vec::new();
        for &seg in root.set.iter().filter(|_| !trusted) {
            // The header first: a segment not opened since the root (most of the set) needs
            // nothing more, and asking whether it is bad costs a read of its own on NAND. One
            // that went bad unopened is found bad when it is erased for use, as a segment
            // that goes bad later is.
            match self.dev.read_header(seg)? {
                HeaderState::Bad => retired.push(seg),
                // Records that moved here while the master still named the pair before
                // (a cut in between): nothing for the roll-forward, and no mount reads
                // them; the segment is erased before use, as the table has it free.
                HeaderState::Valid(h) if h.head == ANCHOR_HEAD => {}
                HeaderState::Valid(h) if h.volume == self.volume && h.open_seq >= root.seq => {
                    if self.dev.is_retired(seg)? {
                        retired.push(seg);
                    } else {
                        rolled.push((seg, h));
                    }
                }
                _ => {}
            }
        }
        rolled.sort_unstable_by_key(|(_, h)| h.open_seq);
        let mut found: Vec<(SlotAddr, Tag)> = Vec::new();
        // Per segment read: its used slots and lowest sequence number.
        let mut extent: Vec<(u32, u32, u64)> = Vec::new();
        let newest_open = rolled
            .last()
            .map_or(root.seq, |(_, h)| h.open_seq.max(root.seq));
        let limit = self.impossible_seq(newest_open);
        let heads = root.heads.iter().flatten().map(|&(s, u)| (s, u));
        for (seg, from) in heads.chain(rolled.iter().map(|(s, _)| (*s, 0))) {
            // Tag by tag, as they are read: a buffer a segment long would be the largest
            // thing a mount holds on a part of large segments.
            let (mut used, mut min_seq) = (from, u64::MAX);
            if trusted {
                extent.push((seg, used, min_seq));
                continue;
            }
            let visit = &mut |slot: u32, t| match possible(t, limit) {
                TagState::Erased => {}
                TagState::Valid(tag) => {
                    used = slot + 1;
                    min_seq = min_seq.min(tag.seq);
                    found.push((SlotAddr { seg, slot }, tag));
                }
                TagState::Garbage => used = slot + 1,
            };
            match self.dev.visit_written_tags(seg, from, visit) {
                Ok(()) => {}
                Err(Error::Io) => return Ok(None),
                Err(e) => return Err(e),
            }
            extent.push((seg, used, min_seq));
        }
        // The cleaner may have moved the checkpoint's own pages since: their copies keep
        // the sequence numbers, below the root's (a later checkpoint's pages are above).
        let mut moved_dirs = root.dirs.clone();
        let mut moved: BTreeMap<u32, SlotAddr> = BTreeMap::new();
        for (at, tag) in &found {
            if tag.kind == Kind::Page && tag.copy && tag.seq < root.seq {
                if tag.key >= DIR_KEY {
                    if let Some(d) = moved_dirs.get_mut((tag.key - DIR_KEY) as usize) {
                        *d = *at;
                    }
                } else {
                    moved.insert(tag.key, *at);
                }
            }
        }
        let mut buf = alloc::vec![0u8; self.geo.slot_size as usize];
        let mut pages = BodyPages::with_keys(total as u32);
        // Keys below this are listed already: the directory lists each once, ascending.
        let mut next = 0;
        let slots = u64::from(self.geo.segments) * u64::from(self.geo.slots);
        for (d, &at) in moved_dirs.iter().enumerate() {
            let Some(body) = self.read_page_at(at, DIR_KEY + d as u32, &mut buf)? else {
                return Ok(None);
            };
            let Some(entries) = dir_entries(body) else {
                return Ok(None);
            };
            for (key, p) in entries {
                // The owner's pages are not read at mount: an address off the device would
                // be met only when counted, so it sends the mount to the scan now.
                if key < next || key as usize >= total || u64::from(p) >= slots {
                    return Ok(None);
                }
                pages.replace(key, self.unpack(p));
                next = key + 1;
            }
        }
        for (&key, &at) in &moved {
            if pages.get(key).is_some() {
                pages.replace(key, at);
            }
        }
        let per = pay / SEG_ENTRY;
        for p in 0..log_pages {
            let Some(at) = pages.get(p) else {
                return Ok(None);
            };
            let Some(body) = self.read_page_at(at, p, &mut buf)? else {
                return Ok(None);
            };
            anchors.table_sums.push(page_crc(p, body));
            let entries: Vec<SegEntry> = body
                .chunks_exact(SEG_ENTRY)
                .take(per)
                .map(SegEntry::decode)
                .collect();
            for (j, e) in entries.into_iter().enumerate() {
                let seg = p as usize * per + j;
                if seg >= self.geo.segments as usize {
                    break;
                }
                let Some(state) = SegState::from_code(e.state) else {
                    return Ok(None);
                };
                // An open segment is resumed below only if a head still writes it; a free
                // one is erased again before use, as a scan would have it.
                let state = match state {
                    SegState::Open => SegState::Full,
                    SegState::Free => SegState::Dirty,
                    s => s,
                };
                // The anchors may have moved since the table was written (the root that
                // moved them names it): to segments it shows empty, from segments whose
                // records no mount reads any more and which are erased before use.
                let state = match (state, anchors.holds_segment(seg as u32)) {
                    (SegState::Anchor | SegState::Dirty, true) => SegState::Anchor,
                    (_, true) => return Ok(None),
                    (SegState::Anchor, false) => SegState::Dirty,
                    (s, false) => s,
                };
                self.set_state(seg as u32, state);
                let s = &mut self.segs[seg];
                s.set_used(u32::from(e.used).min(self.geo.slots));
                s.set_live(e.live.min(e.used));
                s.erase_count = e.erase_count;
                s.set_open_seq(e.open_seq);
                s.set_min_seq(e.min_seq);
                s.set_cells(e.slc, false);
            }
        }
        for &seg in &root.late {
            let header = match self.dev.read_header(seg)? {
                HeaderState::Valid(h) if h.volume == self.volume => h,
                _ => return Ok(None),
            };
            // The table may show it before or after it opened, depending on which of its
            // pages came first.
            if self.segs[seg as usize].state == SegState::Bad {
                return Ok(None);
            }
            self.set_state(seg, SegState::Full);
            let s = &mut self.segs[seg as usize];
            s.set_used(self.geo.slots);
            s.erase_count = header.erase_count;
            s.set_open_seq(header.open_seq);
            s.set_cells(header.slc, header.head == super::Head::Hot.code());
            // Its slots are no older than it: a bound from below is all the log needs.
            s.set_min_seq(header.open_seq);
        }
        for seg in retired {
            self.set_state(seg, SegState::Bad);
        }
        for &(seg, h) in &rolled {
            self.set_state(seg, SegState::Full);
            let s = &mut self.segs[seg as usize];
            // Erased and opened since the table was written: what it holds now is what the
            // owner rolls forward.
            s.clear();
            s.erase_count = h.erase_count;
            s.set_open_seq(h.open_seq);
            s.set_cells(h.slc, h.head == super::Head::Hot.code());
        }
        for &(seg, used, min_seq) in &extent {
            let s = &mut self.segs[seg as usize];
            if s.state != SegState::Full {
                return Ok(None);
            }
            s.set_used(used);
            s.set_min_seq(s.min_seq().min(min_seq));
        }
        // Each head resumes in the newest segment it opened; the cleaner's only in one no
        // older than the newest holding copies (SPEC §4.2).
        let mut newest_of: [Option<(u64, u32)>; HEADS] = [None; HEADS];
        for (i, h) in root.heads.iter().enumerate() {
            if let Some((seg, _)) = *h {
                newest_of[i] = Some((self.segs[seg as usize].open_seq(), seg));
            }
        }
        for &(seg, h) in &rolled {
            if let Some(head) = Head::from_code(h.head) {
                let i = self.head_index(head);
                if newest_of[i].is_none_or(|(o, _)| h.open_seq > o) {
                    newest_of[i] = Some((h.open_seq, seg));
                }
            }
        }
        let mut newest_copies = 0;
        let mut max_seq = root.seq.saturating_sub(1);
        for (at, tag) in &found {
            max_seq = max_seq.max(tag.seq);
            if tag.copy {
                newest_copies = newest_copies.max(self.segs[at.seg as usize].open_seq());
            }
        }
        let cleaner = self.head_index(Head::Cold);
        for (i, newest) in newest_of.iter().enumerate() {
            if let Some((open_seq, seg)) = *newest {
                if trusted {
                    // The root's counts are where writing stopped, and nothing was
                    // programmed after it.
                    self.resume_at(i, seg, self.segs[seg as usize].used());
                } else if i != cleaner || open_seq >= newest_copies {
                    self.resume(i, seg)?;
                }
            }
        }
        self.seq = max_seq + 1;
        for at in pages.slots().chain(moved_dirs.iter().copied()) {
            self.mark_live(at);
        }
        anchors.needs_mark = true;
        anchors.rolling = true;
        anchors.set = root.set.clone();
        anchors.current_root = found.is_empty();
        anchors.closed_root = root.closed && found.is_empty();
        self.found_closed = anchors.closed_root;
        anchors.log_pages = log_pages;
        anchors.dirs = moved_dirs;
        anchors.root = Some(root.clone());
        let owner = pages.keys().saturating_sub(log_pages);
        anchors.pages = pages;
        self.anchors = Some(anchors);
        self.restored = true;
        // The checkpoint's pages are the log's; the rest is the owner's to resolve.
        found.retain(|(_, t)| !matches!(t.kind, Kind::Page | Kind::Root));
        Ok(Some(Restored {
            pages: owner,
            rolled: found,
            seq: root.seq,
        }))
    }

    /// A checkpoint page's payload, if it is readable and intact.
    fn read_page_at<'a>(
        &mut self,
        at: SlotAddr,
        key: u32,
        buf: &'a mut [u8],
    ) -> Result<Option<&'a [u8]>> {
        read_page_at(&mut self.dev, self.geo, at, key, buf)
    }

    /// The owner's pages of the newest checkpoint, where they are now.
    pub fn checkpoint_pages(&mut self) -> CheckpointPages<'_, D> {
        CheckpointPages {
            log_pages: self.table_pages(),
            pages: body_pages(&self.anchors, &self.retired),
            dev: &mut self.dev,
            geo: self.geo,
            distrusted: &mut self.distrusted,
        }
    }

    /// Segments whose live count differs from what is held there: `held` counts, per
    /// segment, the live slots the owner holds; the log adds its checkpoint's pages (once
    /// the anchors failed, the owner's pages of the last checkpoint, which it still reads
    /// and the cleaner still moves). What `fsck` checks: checkpoints carry the counts from
    /// mount to mount, and a mount erases a full segment counted empty.
    pub fn miscounted(&self, mut held: Vec<u32>) -> Vec<u32> {
        if let Some(a) = self.anchors.as_ref().or(self.retired.as_ref()) {
            for at in a.pages.slots().chain(a.dirs.iter().copied()) {
                held[at.seg as usize] += 1;
            }
        }
        let live = self.segs.iter().map(|s| s.live());
        (0..self.geo.segments)
            .zip(live.zip(held))
            .filter(|(_, (live, held))| live != held)
            .map(|(seg, _)| seg)
            .collect()
    }

    /// Whether the volume keeps checkpoints (it has anchors that work).
    pub fn keeps_checkpoints(&self) -> bool {
        self.anchors.is_some()
    }

    /// Whether this mount restored the log from a checkpoint rather than a scan.
    pub fn restored(&self) -> bool {
        self.restored
    }

    /// Whether this mount found the log as a close left it (SPEC.md §3.5): the owner's
    /// state in the checkpoint is whole, nothing it forgot before the close is back.
    pub fn found_closed(&self) -> bool {
        self.found_closed
    }

    /// Slots the newest checkpoint takes: its root, directory and body pages (`None` when
    /// the volume keeps none). What a mount from it reads at the least.
    pub fn checkpoint_len(&self) -> Option<u32> {
        self.anchors
            .as_ref()
            .map(|a| 1 + a.dirs.len() as u32 + a.pages.len() as u32)
    }

    /// Free segments a checkpoint names for the log to open before the next one
    /// ([`LogConfig::checkpoint_set`], scaled to segments of [`SET_SEGMENT_SLOTS`] slots:
    /// fewer for larger segments, more for smaller ones, so that as many slots go between
    /// two checkpoints whatever the segments' size; the root's room bounds it).
    fn set_segments(&self) -> u32 {
        let asked = self.config.checkpoint_set.max(2);
        let scaled = u64::from(asked) * u64::from(SET_SEGMENT_SLOTS) / u64::from(self.geo.slots);
        if self.geo.slots <= SET_SEGMENT_SLOTS {
            // The W25Q64JV's segments of 30 slots: 68, and a checkpoint comes after about
            // 1,000 slots instead of 480.
            return scaled.min(u64::from(u16::MAX)) as u32;
        }
        (scaled as u32).clamp(asked.min(4), asked)
    }

    /// Slots the set asked for holds: [`LogConfig::checkpoint_set`] segments of
    /// [`SET_SEGMENT_SLOTS`] slots.
    fn set_slots(&self) -> u32 {
        self.config
            .checkpoint_set
            .max(2)
            .saturating_mul(SET_SEGMENT_SLOTS)
    }

    /// Pages the segment table takes in a checkpoint.
    fn table_pages(&self) -> u32 {
        let per = payload(self.geo.slot_size as usize) / SEG_ENTRY;
        self.geo.segments.div_ceil(per as u32)
    }

    /// Segments a checkpoint's body and directory take at most (for an owner of `owner`
    /// pages): the capacity holds room for one, and for writing the next beside it.
    pub(super) fn checkpoint_segments(&self, owner: u64) -> u32 {
        let pay = payload(self.geo.slot_size as usize) as u64;
        let body = self.table_pages() as u64 + owner;
        let pages = body + body.div_ceil(pay / 4);
        let usable = self
            .geo
            .slots
            .saturating_sub(self.dev.reserved_slots())
            .max(1) as u64;
        pages.div_ceil(usable) as u32 + 1
    }

    /// Writes a checkpoint: the owner's changed pages, the segment table, the directory and,
    /// once they are durable, a root. Does nothing on a volume without anchors, or when
    /// nothing was programmed since the last root.
    pub fn checkpoint(&mut self, owner: &mut dyn Owner) -> Result<()> {
        self.checkpoint_as(owner, false)
    }

    /// Writes the checkpoint a close leaves: its root says so, and the next mount that finds
    /// nothing written after it knows the owner forgot nothing since (SPEC.md §3.5). Written
    /// even when nothing was programmed since the last root, unless that root is a close's
    /// and no slot died since.
    pub fn close_checkpoint(&mut self, owner: &mut dyn Owner) -> Result<()> {
        self.checkpoint_as(owner, true)
    }

    /// Whether the volume keeps checkpoints and a root can name one of an owner of
    /// `owner_pages` pages; if not, every mount scans (SPEC.md §3.5: a root's room).
    pub fn checkpoints_fit(&self, owner_pages: u32) -> bool {
        self.anchors.is_some() && self.checkpoint_room(owner_pages).is_some()
    }

    /// What a checkpoint of an owner of `owner_pages` pages takes in its root: `None` when
    /// no root can name it, and the volume is mounted by a scan.
    fn checkpoint_room(&self, owner_pages: u32) -> Option<RootRoom> {
        let slot = self.geo.slot_size as usize;
        let log_pages = self.table_pages();
        let total = log_pages as usize + owner_pages as usize;
        // The directory lists the pages on flash once they are written (`encode_dir`): the
        // root is made room for as many pages as it may take.
        let dirs = max_dir_pages(total, slot);
        if total >= DIR_KEY as usize || DIR_KEY as u64 + dirs as u64 > u64::from(self.dev.max_key())
        {
            // Page keys that would reach the directory's, or directory keys its tags cannot
            // carry.
            return None;
        }
        // Each segment the table and the directory may open goes in the root too.
        let usable = self
            .geo
            .slots
            .saturating_sub(self.dev.reserved_slots())
            .max(1) as usize;
        // The root names the directory, the late segments and the set: the set gives way.
        let named = dirs + (log_pages as usize + dirs).div_ceil(usable) + 2;
        let set = max_dirs(slot).saturating_sub(named);
        (set >= 2).then_some(RootRoom {
            log_pages,
            dirs,
            set,
        })
    }

    fn checkpoint_as(&mut self, owner: &mut dyn Owner, closing: bool) -> Result<()> {
        let Some(a) = &self.anchors else {
            return Ok(());
        };
        match self.distrusted {
            Distrust::No => {}
            Distrust::MarkDue => {
                // A page of the newest checkpoint did not read back, and its owner could not
                // write it again (it was never in RAM): a new checkpoint would name it too.
                // A mark sends the next mount to the scan, which rebuilds what it held.
                self.append_record(&Record::Mark)?;
                self.distrusted = Distrust::Marked;
                return Ok(());
            }
            Distrust::Marked => return Ok(()),
        }
        if a.current_root && (a.closed_root || !closing) {
            return Ok(());
        }
        let owner_pages = owner.pages();
        let Some(room) = self.checkpoint_room(owner_pages) else {
            return Ok(());
        };
        let (log_pages, ndirs) = (room.log_pages, room.dirs);
        let total = log_pages as usize + owner_pages as usize;
        // A close's root names a quarter of the set: the mount after it reads every
        // header of the set to roll forward, and a session that writes enough to use
        // half of it checkpoints with a whole set soon enough.
        let wanted = match closing {
            true => (self.set_segments() / 4).max(CLOSE_SET_MIN),
            false => self.set_segments(),
        };
        let set = (wanted as usize).min(room.set);
        if set < 2 {
            return Ok(());
        }
        let Some(a) = &mut self.anchors else {
            return Ok(());
        };
        let dropped = a.pages.resize(total as u32);
        for old in dropped {
            self.kill(old);
        }
        // Room for the whole body first: cleaning moves slots, which changes the owner's
        // pages, so none may run once the first of them is written.
        self.make_room_for(owner, owner_pages)?;
        self.checkpointing = true;
        let r = self.write_checkpoint(owner, log_pages, owner_pages, ndirs, set, closing);
        owner.checkpoint_ended(matches!(r, Ok(true)));
        self.checkpointing = false;
        self.opened = None;
        r.map(|_| ())
    }

    /// Writes a checkpoint's pages and root, once room is made. False if the anchors
    /// failed meanwhile: checkpoints stop, and the pages written since went into none, so
    /// the owner's must stay changed (in RAM) rather than be read back from the last
    /// checkpoint the log keeps.
    fn write_checkpoint(
        &mut self,
        owner: &mut dyn Owner,
        log_pages: u32,
        owner_pages: u32,
        ndirs: usize,
        set: usize,
        closing: bool,
    ) -> Result<bool> {
        let slot = self.geo.slot_size as usize;
        let pay = payload(slot);
        let lp = log_pages as usize;
        let mut buf = alloc::vec![0xFFu8; slot];
        for i in 0..owner_pages {
            let absent = self.page_at(lp + i as usize).is_none();
            if !owner.take_dirty(i, &mut self.checkpoint_pages())? && !absent {
                continue;
            }
            buf.fill(0xFF);
            if owner.encode_page(i, &mut buf[..pay], &mut self.checkpoint_pages())? {
                if !self.put_page(log_pages + i, &mut buf)? {
                    return Ok(false);
                }
            } else {
                self.drop_page(log_pages + i);
            }
        }
        let counted = self.owner_counts(owner);
        // The table says what each segment was before it and the directory were written; the
        // segments opened meanwhile go in the root ("late"), their headers saying the rest.
        self.opened = Some(Vec::new());
        let per = pay / SEG_ENTRY;
        for p in 0..log_pages as usize {
            buf.fill(0xFF);
            let segs = self.segs.iter().zip(&counted);
            for (j, (s, &live)) in segs.skip(p * per).take(per).enumerate() {
                SegEntry {
                    state: s.state.code(),
                    slc: s.slc(),
                    // The log refuses geometries of more slots than 16 bits count.
                    used: s.used() as u16,
                    live,
                    erase_count: s.erase_count,
                    open_seq: s.open_seq(),
                    min_seq: s.min_seq(),
                }
                .encode(&mut buf[j * SEG_ENTRY..]);
            }
            let sum = page_crc(p as u32, &buf[..pay]);
            let Some(a) = &mut self.anchors else {
                return Ok(false);
            };
            if a.pages.get(p as u32).is_some() && a.table_sums.get(p) == Some(&sum) {
                continue;
            }
            a.table_sums.resize(log_pages as usize, 0);
            a.table_sums[p] = sum;
            if !self.put_page(p as u32, &mut buf)? {
                return Ok(false);
            }
        }
        let listed: Vec<(u32, u32)> = match &self.anchors {
            Some(a) => a.pages.iter().map(|(k, at)| (k, self.pack(at))).collect(),
            None => Vec::new(),
        };
        let mut dirs = Vec::with_capacity(ndirs);
        let mut rest = &listed[..];
        while !rest.is_empty() {
            buf.fill(0xFF);
            let taken = encode_dir(rest, &mut buf[..pay]);
            rest = &rest[taken..];
            let key = DIR_KEY + dirs.len() as u32;
            seal_page(key, &mut buf);
            dirs.push(self.write_page(key, &buf)?);
        }
        let late = self.opened.take().unwrap_or_default();
        // Anchors that failed while the pages were written stop checkpoints for good.
        let Some(a) = &mut self.anchors else {
            dirs.into_iter().for_each(|at| self.kill(at));
            return Ok(false);
        };
        for at in core::mem::replace(&mut a.dirs, dirs) {
            self.kill(at);
        }
        self.seal_heads();
        self.dev.sync()?;
        let mut heads = [None; HEADS];
        for (h, seg) in heads.iter_mut().zip(self.heads) {
            *h = seg.map(|s| (s, self.segs[s as usize].used()));
        }
        let Some(a) = &self.anchors else {
            return Ok(false);
        };
        let room = max_dirs(slot).saturating_sub(a.dirs.len() + late.len());
        let root = Root {
            // The root's own record takes the next number.
            seq: self.seq + 1,
            log_pages,
            owner_pages,
            heads,
            dirs: a.dirs.clone(),
            late,
            set: self.next_set(set.min(room)),
            closed: closing,
        };
        let mut set = root.set.clone();
        self.append_record(&Record::Root(root.clone()))?;
        let Some(a) = &mut self.anchors else {
            return Ok(false);
        };
        // The anchors may have moved into the set, which the root then left them out of.
        set.retain(|&s| !a.holds_segment(s));
        a.root = Some(Root {
            set: set.clone(),
            ..root
        });
        a.log_pages = log_pages;
        a.current_root = true;
        a.closed_root = closing;
        a.rolling = true;
        a.set = set;
        a.programs = 0;
        self.stats.checkpoints += 1;
        Ok(true)
    }

    /// Per segment, the live slots the owner's pages name: the live count less the
    /// checkpoint's own pages and what the owner holds apart. Neither changes while the rest
    /// of a checkpoint is written (nothing of the owner's is written or cleaned then), so
    /// the counts taken once the owner's pages are down hold for every table page.
    fn owner_counts(&self, owner: &dyn Owner) -> Vec<u16> {
        let mut counted: Vec<u16> = self.segs.iter().map(|s| s.live() as u16).collect();
        let mut drop = |at: SlotAddr| {
            let c = &mut counted[at.seg as usize];
            debug_assert!(
                *c > 0,
                "segment {} counts fewer live slots than it holds",
                at.seg
            );
            *c = c.saturating_sub(1);
        };
        if let Some(a) = &self.anchors {
            a.pages
                .slots()
                .chain(a.dirs.iter().copied())
                .for_each(&mut drop);
        }
        owner.held_apart(&mut drop);
        counted
    }

    fn page_at(&self, i: usize) -> Option<SlotAddr> {
        self.anchors.as_ref()?.pages.get(i as u32)
    }

    /// Body page `key` is not in the checkpoint any more.
    fn drop_page(&mut self, key: u32) {
        let Some(a) = &mut self.anchors else {
            return;
        };
        if let Some(old) = a.pages.take(key) {
            self.kill(old);
        }
    }

    /// Seals and writes body page `key`, killing its previous version; false if the
    /// anchors failed meanwhile (the page is in no checkpoint).
    fn put_page(&mut self, key: u32, buf: &mut [u8]) -> Result<bool> {
        seal_page(key, buf);
        let at = self.write_page(key, buf)?;
        let Some(a) = &mut self.anchors else {
            self.kill(at);
            return Ok(false);
        };
        if let Some(old) = a.pages.replace(key, at) {
            self.kill(old);
        }
        Ok(true)
    }

    fn write_page(&mut self, key: u32, buf: &[u8]) -> Result<SlotAddr> {
        self.before_program()?;
        if self.seq > MAX_SEQ {
            return Err(Error::ReadOnly);
        }
        let tag = Tag {
            key,
            seq: self.seq,
            kind: Kind::Page,
            copy: false,
        };
        self.seq += 1;
        let at = self.write(Head::Meta, Writer::Owner, &tag, buf)?;
        self.stats.checkpoint_slots += 1;
        Ok(at)
    }

    /// Cleans until a checkpoint with `owner_pages` pages of the owner's can be written
    /// without cleaning, beyond the reserve (the capacity leaves room for it).
    fn make_room_for(&mut self, owner: &mut dyn Owner, owner_pages: u32) -> Result<()> {
        if !self.deferred.is_empty() {
            self.start_deferred_erases()?;
        }
        let need = self.config.reserve + self.checkpoint_segments(owner_pages as u64);
        let mut rounds = 0;
        while self.free <= need {
            if rounds > self.geo.segments || !self.clean_step(owner, u32::MAX, Take::ANY)? {
                return Err(Error::NoSpace);
            }
            rounds += 1;
        }
        Ok(())
    }

    /// Before a program: puts the newest root out of date if the log no longer keeps to its
    /// set (a mount could not find this program from it).
    pub(super) fn before_program(&mut self) -> Result<()> {
        let tiered = self.dev.is_tiered();
        let Some(a) = &mut self.anchors else {
            return Ok(());
        };
        a.current_root = false;
        a.closed_root = false;
        a.programs = a.programs.saturating_add(1);
        // On two devices a mount trusts a close's root to describe the log whole (it reads
        // no tag of the flash): before anything is programmed after it, it is appended
        // again, open, and a mount rolls forward from it as from any other. Asked of the
        // root itself, not of `closed_root`, which a slot dying clears with nothing
        // programmed.
        if let Some(root) = a.root.as_ref().filter(|r| tiered && r.closed) {
            let open = Root {
                closed: false,
                ..root.clone()
            };
            self.append_record(&Record::Root(open.clone()))?;
            if let Some(a) = &mut self.anchors {
                a.root = Some(open);
            }
            return Ok(());
        }
        if a.needs_mark && !a.rolling {
            self.append_record(&Record::Mark)?;
        }
        Ok(())
    }

    /// Whether a checkpoint is due: half of the newest one's set is used, or as many slots
    /// were programmed since it as half the set asked for holds in segments of
    /// [`SET_SEGMENT_SLOTS`] (so that a roll-forward reads as many tags on a part of large
    /// segments, whose set cannot shrink below a segment per head), or the log writes
    /// outside any set (after a scan, or once a set ran out), so a power cut now would
    /// cost the next mount a scan; or, on two devices, the set's fast-tier segments are
    /// all opened while the fast tier has others free.
    pub fn checkpoint_due(&self) -> bool {
        let Some(a) = &self.anchors else {
            return false;
        };
        if self.checkpointing || a.current_root {
            return false;
        }
        if !a.rolling || a.programs >= self.set_slots() / 2 {
            return true;
        }
        let left = a
            .set
            .iter()
            .filter(|&&s| {
                matches!(
                    self.segs[s as usize].state,
                    SegState::Free | SegState::Dirty
                )
            })
            .count();
        left * 2 <= a.set.len() || self.fast_share_used(&a.set)
    }

    /// On two devices, whether the metadata head has opened the last of `set`'s fast-tier
    /// segments while the fast tier has free segments outside the set. Metadata takes a
    /// quarter of a set's segments, but under small synced writes it is most of what is
    /// written: its next segment would then come from the flash (the set allows no other),
    /// and every commit after would program index nodes on the flash rather than the NVRAM.
    /// A checkpoint now names a new set, with fresh fast-tier segments, while the head
    /// still has its segment's room to write the checkpoint in.
    fn fast_share_used(&self, set: &[u32]) -> bool {
        if !self.dev.is_tiered() || !self.meta_apart() {
            return false;
        }
        let fast = |s: u32| self.dev.tier(s) == Tier::Fast;
        let free = |s: u32| {
            matches!(
                self.segs[s as usize].state,
                SegState::Free | SegState::Dirty
            )
        };
        // With none of the set's fast segments free, any free one lies outside the set.
        set.iter().any(|&s| fast(s))
            && !set.iter().any(|&s| fast(s) && free(s))
            && self.free_fast > 0
    }

    /// The free segments (erased or to be erased), least worn first.
    fn free_by_wear(&self) -> Vec<u32> {
        let mut free: Vec<u32> = (0..self.geo.segments)
            .filter(|&s| {
                matches!(
                    self.segs[s as usize].state,
                    SegState::Free | SegState::Dirty
                )
            })
            .collect();
        free.sort_unstable_by_key(|&s| (self.segs[s as usize].erase_count, s));
        free
    }

    /// The set the next root names: free segments, the least worn (for new data) and a
    /// quarter of the most worn (for the cleaner's survivors and static data), as the heads
    /// pick them.
    ///
    /// On two devices, a quarter of the set (at least one) comes from the fast tier's free
    /// segments, where the metadata head opens its segments, and the rest from the bulk
    /// tier's: wear is compared within a tier only.
    fn next_set(&self, n: usize) -> Vec<u32> {
        let free = self.free_by_wear();
        if !self.dev.is_tiered() {
            return ends_by_wear(&free, n);
        }
        let (fast, bulk): (Vec<u32>, Vec<u32>) = free
            .into_iter()
            .partition(|&s| self.dev.tier(s) == Tier::Fast);
        let n_fast = (n / 4).max(1).min(fast.len()).min(n);
        let mut set = ends_by_wear(&bulk, n - n_fast);
        set.extend(ends_by_wear(&fast, n_fast));
        set
    }

    /// Appends a record to the working anchors and makes it durable. If the anchors fail,
    /// checkpoints stop for the session and the anchors are emptied, so that no root
    /// outlives the state it describes.
    fn append_record(&mut self, rec: &Record) -> Result<()> {
        // A root that may be stale goes before anything else is erased: then the rotation
        // below takes the other anchor. A cut between leaves no record that reads, or
        // the unreadable ones that send a mount to a scan.
        if let Some(a) = self.anchors.as_mut().filter(|a| a.stale) {
            a.stale = false;
            let seg = a.pair.segs[a.pair.current];
            self.wipe_anchor(seg)?;
        }
        // The records move before this one if the anchor they would go to next has worn
        // ahead; a root then leaves the new pair out of its set.
        let mut rec = rec.clone();
        let moved = self.move_if_worn()?;
        if let Some(working) = moved {
            self.stats.anchor_moves += 1;
            if let Record::Root(root) = &mut rec {
                root.set.retain(|s| !working.contains(s));
            }
        }
        // A mark takes the next sequence number without using it up: the slot whose
        // program called for it has its number already, which the owner may ask for.
        let takes_seq = matches!(rec, Record::Root(_));
        let slot_size = self.geo.slot_size as usize;
        let data = rec.encode(slot_size, |a| self.pack(a));
        if !self.put_record(Which::Working, &data, takes_seq)? {
            return self.drop_anchors();
        }
        if let Some(a) = &mut self.anchors {
            a.needs_mark = takes_seq;
        }
        if let Some(working) = moved {
            // The record is down in the new pair; from the master's record on, mounts look
            // there. A cut before it leaves the master naming the old pair, whose newest
            // record is the one before this: as after a cut before this record.
            let data = Record::Moved(working).encode(slot_size, |a| self.pack(a));
            if !self.put_record(Which::Master, &data, false)? {
                return self.drop_anchors();
            }
        }
        Ok(())
    }

    /// Writes `data`, a record, into two safe slots of the pair `which` and syncs: damage
    /// at rest that leaves one copy unreadable, or reading as erased, leaves the other (a
    /// single copy read as erased would make the record before it look newest, a root the
    /// log may have long left). Once the current anchor is full the other is erased and
    /// takes the records. False if the pair failed.
    fn put_record(&mut self, which: Which, data: &[u8], takes_seq: bool) -> Result<bool> {
        let slots = self.anchor_slots();
        for _ in 0..8 {
            let Some(pair) = self.anchors.as_ref().and_then(|a| a.pair(which)).copied() else {
                return Ok(false);
            };
            let first = self.record_slot_from(pair.next);
            let second = self.record_slot_from(first.saturating_add(1));
            if second >= slots {
                if !self.rotate_anchor(which)? {
                    return Ok(false);
                }
                continue;
            }
            let seg = pair.segs[pair.current];
            if let Some(p) = self.anchors.as_mut().and_then(|a| a.pair_mut(which)) {
                p.next = second + 1;
            }
            let seq = self.seq;
            if takes_seq {
                self.seq += 1;
            }
            let mut r = Ok(());
            for (key, slot) in [(0, first), (1, second)] {
                let tag = Tag {
                    key,
                    seq,
                    kind: Kind::Root,
                    copy: false,
                };
                r = if self.config.verify_programs {
                    self.dev.write_slot_verified(seg, slot, &tag, data)
                } else {
                    self.dev.write_slot(seg, slot, &tag, data)
                };
                if r.is_err() {
                    break;
                }
            }
            match r {
                Ok(()) => {
                    self.dev.sync()?;
                    self.stats.anchor_records += 1;
                    return Ok(true);
                }
                Err(Error::Flash(FlashError::ProgramFailed { .. })) => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(false)
    }

    /// Moves the working anchors ([`Log::move_anchors`]) if the next record would erase
    /// the other anchor of the pair and that one has worn ahead ([`Log::anchor_worn`]).
    fn move_if_worn(&mut self) -> Result<Option<[u32; 2]>> {
        let Some(pair) = self.anchors.as_ref().map(|a| a.pair) else {
            return Ok(None);
        };
        let first = self.record_slot_from(pair.next);
        let full = self.record_slot_from(first.saturating_add(1)) >= self.anchor_slots();
        if !full || !self.anchor_worn(pair.segs[1 - pair.current]) {
            return Ok(None);
        }
        self.move_anchors()
    }

    /// Whether anchor `seg`, due for erasure, has worn ahead of the least worn free segment
    /// by the margin the heads keep when they pick free segments (half the spread the wear
    /// leveller allows): its records then move ([`Log::move_anchors`]). An anchor holds no
    /// data for the leveller to move, and takes records at every checkpoint and mark: left
    /// in place it would wear several times faster than the log's segments.
    fn anchor_worn(&self, seg: u32) -> bool {
        if self.config.wear_spread == 0 {
            return false;
        }
        if !self.levelled(seg as usize) {
            return false;
        }
        let levelled = || {
            self.segs
                .iter()
                .enumerate()
                .filter(|&(i, _)| self.levelled(i))
                .map(|(_, s)| s)
        };
        let good = levelled().filter(|s| s.state != SegState::Bad);
        let max = good.map(|s| s.erase_count).max().unwrap_or(0);
        let near = (self.allowed_spread(max) / 2).max(1);
        let least = levelled()
            .filter(|s| matches!(s.state, SegState::Free | SegState::Dirty))
            .map(|s| s.erase_count)
            .min();
        let worn = self.segs[seg as usize].erase_count.saturating_add(1);
        least.is_some_and(|l| worn > l.saturating_add(near))
    }

    /// Makes the two least worn free segments the working anchors: both erased, the first
    /// given an anchor header. The pair the records leave goes back to the pool, unless it
    /// is the master (which then keeps only where the records went). `None` if two free
    /// segments are not left beyond the cleaner's reserve, or the flash refused one (it is
    /// retired). A move gives back as many segments as it takes, but the first, which
    /// leaves the master in place: the capacity holds two back for it.
    ///
    /// They may be in the newest root's set: a free segment holds nothing a roll-forward
    /// needs (a set segment cleaned since the root had its live slots copied into the set),
    /// and a roll-forward passes over a segment with an anchor header.
    fn move_anchors(&mut self) -> Result<Option<[u32; 2]>> {
        if self.free < self.config.reserve + 2 {
            return Ok(None);
        }
        let [a, b, ..] = self.free_by_wear()[..] else {
            return Ok(None);
        };
        let working = [a, b];
        // The second first: if the first's header fails, the second is merely erased.
        for (seg, header) in [(working[1], false), (working[0], true)] {
            if !self.begin_anchor(seg, header)? {
                self.retire(seg)?;
                if header {
                    self.set_state(working[1], SegState::Free);
                }
                return Ok(None);
            }
            self.segs[seg as usize].clear();
        }
        for seg in working {
            self.set_state(seg, SegState::Anchor);
        }
        let first = self.dev.reserved_slots();
        let Some(a) = &mut self.anchors else {
            return Ok(None);
        };
        let left = core::mem::replace(
            &mut a.pair,
            AnchorPair {
                segs: working,
                current: 0,
                next: first,
            },
        );
        if a.master.is_none() {
            a.master = Some(left);
        } else {
            // Its records are out of date once the master names the new pair; until then a
            // mount reads them, so they stay until the segments are opened again.
            for seg in left.segs {
                self.set_state(seg, SegState::Dirty);
            }
        }
        Ok(Some(working))
    }

    /// Moves the pair `which` to its other anchor: erases it and writes its header. False
    /// if the flash refused.
    fn rotate_anchor(&mut self, which: Which) -> Result<bool> {
        let Some(pair) = self.anchors.as_ref().and_then(|a| a.pair(which)).copied() else {
            return Ok(false);
        };
        let other = 1 - pair.current;
        if !self.begin_anchor(pair.segs[other], true)? {
            return Ok(false);
        }
        let first = self.dev.reserved_slots();
        if let Some(p) = self.anchors.as_mut().and_then(|a| a.pair_mut(which)) {
            p.current = other;
            p.next = first;
        }
        Ok(true)
    }

    /// Erases `seg` for records and, if `header`, writes its anchor header. False if the
    /// flash refused: an erase or a program failed, or, where programs are verified, did
    /// nothing.
    fn begin_anchor(&mut self, seg: u32, header: bool) -> Result<bool> {
        let s = &mut self.segs[seg as usize];
        s.erase_count = s.erase_count.saturating_add(1);
        let head = SegHeader {
            head: ANCHOR_HEAD,
            slc: false,
            erase_count: s.erase_count,
            open_seq: self.seq,
            volume: self.volume,
        };
        let mut r = self.dev.erase(seg, false);
        if r.is_ok() && self.config.verify_programs && !self.reads_erased(seg)? {
            r = Err(Error::Flash(FlashError::EraseFailed { block: seg }));
        }
        if r.is_ok() {
            self.stats.erases += 1;
        }
        if header && r.is_ok() {
            r = self.dev.write_header(seg, &head);
            if r.is_ok() && self.config.verify_programs {
                r = self.dev.sync();
            }
            if r.is_ok()
                && self.config.verify_programs
                && self.dev.read_header(seg)? != HeaderState::Valid(head)
            {
                r = Err(Error::Flash(FlashError::ProgramFailed { block: seg }));
            }
            if r.is_ok() {
                self.stats.headers += 1;
            }
        }
        match r {
            Ok(()) => Ok(true),
            Err(Error::Flash(
                FlashError::ProgramFailed { .. } | FlashError::EraseFailed { .. },
            )) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Stops checkpoints: the anchors are erased (or retired), so every later mount scans.
    fn drop_anchors(&mut self) -> Result<()> {
        let Some(a) = self.anchors.take() else {
            return Ok(());
        };
        // The master first, when the records moved: once it holds nothing, no mount reads
        // the working pair. Then the older anchor of the working pair: a cut between the
        // two leaves the newest root, whose set the log still keeps to. The other way round
        // a mount would roll forward from the older root, blind to what was written since
        // in the newer one's set.
        let master = a.master.map(|m| m.segs).unwrap_or_default();
        let working = [a.pair.segs[1 - a.pair.current], a.pair.segs[a.pair.current]];
        let order: Vec<u32> = match a.master {
            Some(_) => master.into_iter().chain(working).collect(),
            None => working.to_vec(),
        };
        self.retired = Some(a);
        for seg in order {
            self.wipe_anchor(seg)?;
        }
        // No root names the last checkpoint now: no mount reads its segment table or its
        // directory, which die. Only the owner's pages stay live, where the owner reads
        // those of its pages it does not hold in RAM.
        let table = self.table_pages();
        let Some(r) = &mut self.retired else {
            return Ok(());
        };
        let mut unread = r.pages.take_below(table);
        unread.append(&mut r.dirs);
        r.table_sums.clear();
        for at in unread {
            self.kill(at);
        }
        Ok(())
    }

    /// Leaves anchor `seg` holding no root a mount would read: erased, or marked bad where
    /// the erase fails. Where programs are verified, an erase or a mark that reports success
    /// and does nothing is caught and tried again: a root left behind would send the next
    /// mount rolling forward through a set the log no longer keeps to.
    fn wipe_anchor(&mut self, seg: u32) -> Result<()> {
        for _ in 0..4 {
            match self.dev.erase(seg, false) {
                Ok(()) => {}
                Err(Error::Flash(FlashError::EraseFailed { .. })) => self.dev.mark_bad(seg)?,
                Err(e) => return Err(e),
            }
            if !self.config.verify_programs || self.holds_no_root(seg)? {
                return Ok(());
            }
            self.dev.mark_bad(seg)?;
            if self.holds_no_root(seg)? {
                return Ok(());
            }
        }
        Err(Error::Flash(FlashError::EraseFailed { block: seg }))
    }

    /// Whether a mount would find no record in anchor `seg` ([`Log::read_anchors`] reads
    /// only behind an anchor's header).
    fn holds_no_root(&mut self, seg: u32) -> Result<bool> {
        Ok(self.dev.is_bad(seg)?
            || !matches!(self.dev.read_header(seg)?,
                HeaderState::Valid(h) if h.head == ANCHOR_HEAD))
    }

    pub(super) fn pack(&self, a: SlotAddr) -> u32 {
        a.seg * self.geo.slots + a.slot
    }

    pub(super) fn unpack(&self, p: u32) -> SlotAddr {
        SlotAddr {
            seg: p / self.geo.slots,
            slot: p % self.geo.slots,
        }
    }
}

/// A checkpoint page's payload, if it is readable and intact.
fn read_page_at<'a, D: Segments>(
    dev: &mut D,
    geo: SegGeometry,
    at: SlotAddr,
    key: u32,
    buf: &'a mut [u8],
) -> Result<Option<&'a [u8]>> {
    if at.seg >= geo.segments || at.slot >= geo.slots {
        return Ok(None);
    }
    // A page is never programmed in place: only as much as its write put there is read.
    match dev.read_slot_written(at.seg, at.slot, buf, 0) {
        Ok(_) => Ok(open_page(key, buf).ok()),
        Err(Error::Io) => Ok(None),
        Err(e) => Err(e),
    }
}

/// A volume without checkpoints has no body pages.
static NO_PAGES: BodyPages = BodyPages::empty();

/// Where the newest checkpoint's body pages are: the anchors' or, once they failed and
/// checkpoints stopped, their last state's (the owner still reads its pages there).
fn body_pages<'a>(anchors: &'a Option<Anchors>, retired: &'a Option<Anchors>) -> &'a BodyPages {
    anchors
        .as_ref()
        .or(retired.as_ref())
        .map_or(&NO_PAGES, |a| &a.pages)
}

/// The owner's pages of the newest checkpoint ([`Log::checkpoint_pages`]).
#[derive(Debug)]
pub struct CheckpointPages<'a, D> {
    dev: &'a mut D,
    geo: SegGeometry,
    /// Where each page of the checkpoint is: the log's, then the owner's.
    pages: &'a BodyPages,
    log_pages: u32,
    /// Set when a page does not read back.
    distrusted: &'a mut Distrust,
}

impl<D: Segments> PageSource for CheckpointPages<'_, D> {
    fn read_page(&mut self, i: u32, buf: &mut [u8]) -> Result<bool> {
        let key = self.log_pages + i;
        let Some(at) = self.pages.get(key) else {
            return Ok(false);
        };
        match read_page_at(self.dev, self.geo, at, key, buf)? {
            Some(_) => Ok(true),
            None => {
                // The data it maps is intact: the next mount scans for it (SPEC §3.5).
                if *self.distrusted == Distrust::No {
                    *self.distrusted = Distrust::MarkDue;
                }
                Err(Error::Damaged(Damage {
                    slot: Some((at.seg, at.slot)),
                    ..Damage::default()
                }))
            }
        }
    }
}

/// What a checkpoint takes in its root ([`Log::checkpoints_fit`]).
struct RootRoom {
    /// Pages of the segment table.
    log_pages: u32,
    /// Directory pages at most.
    dirs: usize,
    /// Set segments the root has room for beside the directory and the late segments.
    set: usize,
}

/// Of segments sorted least worn first, `n`: the least worn (for new data) and a quarter of
/// the most worn (for the cleaner's survivors and static data), as the heads pick them.
fn ends_by_wear(free: &[u32], n: usize) -> Vec<u32> {
    let n = n.min(free.len());
    let worn = n / 4;
    // `n` is at most the free segments: the two ends do not overlap.
    let mut set: Vec<u32> = free[..n - worn].to_vec();
    set.extend_from_slice(&free[free.len() - worn..]);
    set
}
