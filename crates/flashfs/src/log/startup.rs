//! Writing checkpoints and mounting from them (the formats are in [`super::checkpoint`]).
//!
//! A checkpoint is written whole before its root: the body and directory pages, a sync, then
//! the root, so a root on flash always names pages that were durable before it. Nothing
//! programmed after a root is in it, so a mark goes to the anchor (and is synced) before the
//! first such program: a mount that finds a mark scans. Cleaning is kept out of a
//! checkpoint's writes: room is made first, so no page moves while the directory is written.

use alloc::vec::Vec;

use flash::FlashError;

use super::checkpoint::{max_dirs, open_page, payload, seal_page};
use super::*;

impl<D: Segments> Log<D> {
    /// Reads both anchors' headers and tags: the anchor state, and every record's sequence
    /// number and address, newest first.
    pub(super) fn read_anchors(
        &mut self,
        segs: [u32; 2],
    ) -> Result<(Anchors, Vec<(u64, SlotAddr)>)> {
        let mut a = Anchors::new(segs);
        let mut records = Vec::new();
        let mut tags = alloc::vec![TagState::Erased; self.geo.slots as usize];
        let mut newest: Option<(u64, usize, u32)> = None;
        for (i, &seg) in segs.iter().enumerate() {
            let header = match self.dev.read_header(seg)? {
                HeaderState::Valid(h) if h.head == ANCHOR_HEAD && h.volume == self.volume => h,
                _ => continue,
            };
            self.segs[seg as usize].erase_count = header.erase_count;
            match self.dev.read_tags(seg, &mut tags) {
                Ok(()) => {}
                // An anchor that no longer reads holds no record a mount can trust.
                Err(Error::Io) => continue,
                Err(e) => return Err(e),
            }
            let used = tags
                .iter()
                .rposition(|t| *t != TagState::Erased)
                .map_or(0, |p| p as u32 + 1);
            for (slot, t) in tags.iter().enumerate() {
                if let TagState::Valid(tag) = t {
                    if tag.kind != Kind::Root {
                        continue;
                    }
                    let at = SlotAddr {
                        seg,
                        slot: slot as u32,
                    };
                    records.push((tag.seq, at));
                    if newest.is_none_or(|(s, _, _)| tag.seq > s) {
                        newest = Some((tag.seq, i, used));
                    }
                }
            }
        }
        records.sort_unstable_by_key(|r| core::cmp::Reverse(r.0));
        if let Some((_, i, used)) = newest {
            a.current = i;
            // A cut between a NOR slot's data and its tag leaves bytes under an erased tag:
            // records go on past them, as a resumed head does (SPEC §4.2).
            let mut next = used.max(self.dev.reserved_slots());
            while next < self.geo.slots && !self.dev.slot_erased(segs[i], next)? {
                next += 1;
            }
            a.next = next;
        }
        Ok((a, records))
    }

    /// Restores the log from its newest checkpoint, if it is current and whole; `None` sends
    /// the mount to a scan.
    pub(super) fn restore(&mut self) -> Result<Option<Vec<SlotAddr>>> {
        // Any valid header names the volume and its anchors; the first is usually segment 0.
        let mut volume = None;
        for seg in 0..self.geo.segments {
            if self.dev.is_bad(seg)? {
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
        let Some(anchors) = volume.anchors else {
            return Ok(None);
        };
        self.volume = volume;
        let segs = anchors.map(u32::from);
        if segs.iter().any(|&s| s >= self.geo.segments) {
            return Ok(None);
        }
        for &s in &segs {
            if self.dev.is_bad(s)? {
                return Ok(None);
            }
        }
        let (anchors, records) = self.read_anchors(segs)?;
        let mut buf = alloc::vec![0u8; self.geo.slot_size as usize];
        for (_, at) in records {
            match self.dev.read_slot(at.seg, at.slot, &mut buf) {
                Ok(()) => {}
                Err(Error::Io) => continue,
                Err(e) => return Err(e),
            }
            // The newest record that reads decides. One that does not is a mark torn by a
            // power cut (nothing was programmed after it) or a damaged root: the record
            // before it is what the log was when the program began.
            match Record::decode(&buf, |p| self.unpack(p)) {
                None => continue,
                Some(Record::Mark) => return Ok(None),
                Some(Record::Root(root)) => return self.restore_root(&root, anchors),
            }
        }
        Ok(None)
    }

    /// Loads the segment table of `root` and resumes its heads; the owner's pages' addresses.
    fn restore_root(&mut self, root: &Root, mut anchors: Anchors) -> Result<Option<Vec<SlotAddr>>> {
        let pay = payload(self.geo.slot_size as usize);
        let log_pages = self.table_pages();
        let total = log_pages as usize + root.owner_pages as usize;
        if root.log_pages != log_pages || root.dirs.len() != total.div_ceil(pay / 4) {
            return Ok(None);
        }
        let mut buf = alloc::vec![0u8; self.geo.slot_size as usize];
        let mut pages = Vec::with_capacity(total);
        for (d, &at) in root.dirs.iter().enumerate() {
            let Some(body) = self.read_page_at(at, DIR_KEY + d as u32, &mut buf)? else {
                return Ok(None);
            };
            for w in body.chunks_exact(4).take(total - pages.len()) {
                pages.push(self.unpack(u32::from_le_bytes([w[0], w[1], w[2], w[3]])));
            }
        }
        let per = pay / SEG_ENTRY;
        for p in 0..log_pages {
            let Some(body) = self.read_page_at(pages[p as usize], p, &mut buf)? else {
                return Ok(None);
            };
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
                if (state == SegState::Anchor) != anchors.segs.contains(&(seg as u32)) {
                    return Ok(None);
                }
                self.set_state(seg as u32, state);
                let s = &mut self.segs[seg];
                s.used = u32::from(e.used).min(self.geo.slots);
                s.erase_count = e.erase_count;
                s.open_seq = e.open_seq;
                s.min_seq = e.min_seq;
            }
        }
        for &seg in &root.late {
            let header = match self.dev.read_header(seg)? {
                HeaderState::Valid(h) if seg < self.geo.segments && h.volume == self.volume => h,
                _ => return Ok(None),
            };
            // The table may show it before or after it opened, depending on which of its
            // pages came first.
            if matches!(
                self.segs[seg as usize].state,
                SegState::Bad | SegState::Anchor
            ) {
                return Ok(None);
            }
            self.set_state(seg, SegState::Full);
            let s = &mut self.segs[seg as usize];
            s.used = self.geo.slots;
            s.erase_count = header.erase_count;
            s.open_seq = header.open_seq;
            // Its slots are no older than it: a bound from below is all the log needs.
            s.min_seq = header.open_seq;
        }
        for (i, h) in root.heads.iter().enumerate() {
            let Some((seg, used)) = *h else { continue };
            if seg >= self.geo.segments
                || used > self.geo.slots
                || self.segs[seg as usize].state != SegState::Full
            {
                return Ok(None);
            }
            // Something programmed after the root (without its mark) would be lost: scan.
            if used < self.geo.slots && !self.dev.slot_erased(seg, used)? {
                return Ok(None);
            }
            self.segs[seg as usize].used = used;
            self.resume(i, seg)?;
        }
        self.seq = root.seq;
        for &at in pages.iter().chain(&root.dirs) {
            self.mark_live(at);
        }
        anchors.needs_mark = true;
        anchors.current_root = true;
        anchors.log_pages = log_pages;
        anchors.dirs = root.dirs.clone();
        let owner = pages.split_off(log_pages as usize);
        anchors.pages = pages
            .into_iter()
            .chain(owner.iter().copied())
            .map(Some)
            .collect();
        self.anchors = Some(anchors);
        self.restored = true;
        Ok(Some(owner))
    }

    /// A checkpoint page's payload, if it is readable and intact.
    fn read_page_at<'a>(
        &mut self,
        at: SlotAddr,
        key: u32,
        buf: &'a mut [u8],
    ) -> Result<Option<&'a [u8]>> {
        if at.seg >= self.geo.segments || at.slot >= self.geo.slots {
            return Ok(None);
        }
        match self.dev.read_slot(at.seg, at.slot, buf) {
            Ok(()) => Ok(open_page(key, buf).ok()),
            Err(Error::Io) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Reads page `i` of the owner's part of the checkpoint the log was restored from, at
    /// `at` (from [`Start::Restored`]); its payload goes in `buf`'s front, a slot long. A
    /// damaged page is [`Error::Corrupt`]: the owner then mounts again with a scan.
    pub fn read_page(&mut self, i: u32, at: SlotAddr, buf: &mut [u8]) -> Result<()> {
        let key = self.anchors.as_ref().map_or(0, |a| a.log_pages) + i;
        match self.read_page_at(at, key, buf)? {
            Some(_) => Ok(()),
            None => Err(Error::Corrupt("checkpoint page unreadable or damaged")),
        }
    }

    /// Whether this mount restored the log from a checkpoint rather than a scan.
    pub fn restored(&self) -> bool {
        self.restored
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
        let Some(a) = &self.anchors else {
            return Ok(());
        };
        if a.current_root {
            return Ok(());
        }
        let slot = self.geo.slot_size as usize;
        let pay = payload(slot);
        let log_pages = self.table_pages();
        let owner_pages = owner.pages();
        let total = log_pages as usize + owner_pages as usize;
        let per_dir = pay / 4;
        let ndirs = total.div_ceil(per_dir);
        // Each segment the table and the directory may open goes in the root too.
        let usable = self
            .geo
            .slots
            .saturating_sub(self.dev.reserved_slots())
            .max(1) as usize;
        if ndirs + (log_pages as usize + ndirs).div_ceil(usable) + 2 > max_dirs(slot) {
            return Err(Error::InvalidArgument("checkpoint too large for its root"));
        }
        let mut pages = core::mem::take(&mut self.anchors.as_mut().unwrap().pages);
        for old in pages.drain(total.min(pages.len())..).flatten() {
            self.kill(old);
        }
        pages.resize(total, None);
        self.anchors.as_mut().unwrap().pages = pages;
        // Room for the whole body first: cleaning moves slots, which changes the owner's
        // pages, so none may run once the first of them is written.
        self.make_room_for(owner, owner_pages)?;
        let lp = log_pages as usize;
        let dirty: Vec<u32> = (0..owner_pages)
            .filter(|&i| owner.take_dirty(i) | self.page_at(lp + i as usize).is_none())
            .collect();
        let mut buf = alloc::vec![0xFFu8; slot];
        for i in dirty {
            buf.fill(0xFF);
            owner.encode_page(i, &mut buf[..pay]);
            self.put_page(log_pages + i, &mut buf)?;
        }
        // The table says what each segment was before it and the directory were written; the
        // segments opened meanwhile go in the root ("late"), their headers saying the rest.
        self.opened = Some(Vec::new());
        let per = pay / SEG_ENTRY;
        for p in 0..log_pages as usize {
            buf.fill(0xFF);
            for (j, s) in self.segs.iter().skip(p * per).take(per).enumerate() {
                SegEntry {
                    state: s.state.code(),
                    used: s.used.min(u16::MAX as u32) as u16,
                    erase_count: s.erase_count,
                    open_seq: s.open_seq,
                    min_seq: s.min_seq,
                }
                .encode(&mut buf[j * SEG_ENTRY..]);
            }
            self.put_page(p as u32, &mut buf)?;
        }
        let mut dirs = Vec::with_capacity(ndirs);
        for d in 0..ndirs {
            buf.fill(0xFF);
            for j in 0..per_dir.min(total - d * per_dir) {
                let at = self
                    .page_at(d * per_dir + j)
                    .ok_or(Error::Corrupt("checkpoint page missing from its directory"))?;
                buf[j * 4..j * 4 + 4].copy_from_slice(&self.pack(at).to_le_bytes());
            }
            let key = DIR_KEY + d as u32;
            seal_page(key, &mut buf);
            dirs.push(self.write_page(key, &buf)?);
        }
        let late = self.opened.take().unwrap_or_default();
        let a = self.anchors.as_mut().unwrap();
        for at in core::mem::replace(&mut a.dirs, dirs) {
            self.kill(at);
        }
        self.seal_heads();
        self.dev.sync()?;
        let mut heads = [None; HEADS];
        for (h, seg) in heads.iter_mut().zip(self.heads) {
            *h = seg.map(|s| (s, self.segs[s as usize].used));
        }
        let a = self.anchors.as_ref().unwrap();
        let root = Root {
            // The root's own record takes the next number.
            seq: self.seq + 1,
            log_pages,
            owner_pages,
            heads,
            dirs: a.dirs.clone(),
            late,
        };
        self.append_record(&Record::Root(root))?;
        self.stats.checkpoints += 1;
        if let Some(a) = &mut self.anchors {
            a.log_pages = log_pages;
            a.current_root = true;
        }
        Ok(())
    }

    fn page_at(&self, i: usize) -> Option<SlotAddr> {
        self.anchors.as_ref()?.pages.get(i).copied().flatten()
    }

    /// Seals and writes body page `key`, killing its previous version.
    fn put_page(&mut self, key: u32, buf: &mut [u8]) -> Result<()> {
        seal_page(key, buf);
        let at = self.write_page(key, buf)?;
        let a = self.anchors.as_mut().unwrap();
        if let Some(old) = a.pages[key as usize].replace(at) {
            self.kill(old);
        }
        Ok(())
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

    /// Puts the newest root out of date before the first program after it.
    pub(super) fn before_program(&mut self) -> Result<()> {
        let Some(a) = &mut self.anchors else {
            return Ok(());
        };
        a.current_root = false;
        if a.needs_mark {
            self.append_record(&Record::Mark)?;
        }
        Ok(())
    }

    /// Appends a record to the current anchor (the other, erased, once it is full) and makes
    /// it durable. If the anchors fail, checkpoints stop for the session and both anchors
    /// are emptied, so that no root outlives the state it describes.
    fn append_record(&mut self, rec: &Record) -> Result<()> {
        let slots = self.geo.slots;
        let data = rec.encode(self.geo.slot_size as usize, |a| self.pack(a));
        for _ in 0..8 {
            let Some(a) = &self.anchors else {
                return Ok(());
            };
            let mut next = a.next;
            // On MLC a program may destroy the slot paired with it: records use safe slots.
            while next < slots && self.dev.risks_earlier_slot(next) {
                next += 1;
            }
            if next >= slots {
                self.rotate_anchor()?;
                continue;
            }
            let seg = a.segs[a.current];
            if let Some(a) = &mut self.anchors {
                a.next = next + 1;
            }
            let tag = Tag {
                key: 0,
                seq: self.seq,
                kind: Kind::Root,
                copy: false,
            };
            self.seq += 1;
            match self.dev.write_slot(seg, next, &tag, &data) {
                Ok(()) => {
                    self.dev.sync()?;
                    self.stats.anchor_records += 1;
                    if let Some(a) = &mut self.anchors {
                        a.needs_mark = matches!(rec, Record::Root(_));
                    }
                    return Ok(());
                }
                Err(Error::Flash(FlashError::ProgramFailed { .. })) => continue,
                Err(e) => return Err(e),
            }
        }
        self.drop_anchors()
    }

    /// Moves to the other anchor: erases it and writes its header.
    fn rotate_anchor(&mut self) -> Result<()> {
        let Some(a) = &self.anchors else {
            return Ok(());
        };
        let other = 1 - a.current;
        let seg = a.segs[other];
        let s = &mut self.segs[seg as usize];
        s.erase_count = s.erase_count.saturating_add(1);
        let header = SegHeader {
            head: ANCHOR_HEAD,
            erase_count: s.erase_count,
            open_seq: self.seq,
            volume: self.volume,
        };
        let r = self
            .dev
            .erase(seg, false)
            .and_then(|()| self.dev.write_header(seg, &header));
        match r {
            Ok(()) => {
                self.stats.erases += 1;
                self.stats.headers += 1;
                let first = self.dev.reserved_slots();
                if let Some(a) = &mut self.anchors {
                    a.current = other;
                    a.next = first;
                }
                Ok(())
            }
            Err(Error::Flash(
                FlashError::ProgramFailed { .. } | FlashError::EraseFailed { .. },
            )) => self.drop_anchors(),
            Err(e) => Err(e),
        }
    }

    /// Stops checkpoints: both anchors are erased (or retired), so every later mount scans.
    fn drop_anchors(&mut self) -> Result<()> {
        let Some(a) = self.anchors.take() else {
            return Ok(());
        };
        for seg in a.segs {
            match self.dev.erase(seg, false) {
                Ok(()) => {}
                Err(Error::Flash(FlashError::EraseFailed { .. })) => self.dev.mark_bad(seg)?,
                Err(e) => return Err(e),
            }
        }
        Ok(())
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
