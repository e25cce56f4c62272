//! The block device: fixed-size sectors on the log, so a conventional file system runs on
//! flash unchanged (Kawaguchi's flash driver).
//!
//! Every write goes to a fresh slot and returns once programmed; `flush` is a barrier for
//! devices that buffer programs. Mount reads the sector map from the newest checkpoint and
//! rolls it forward through what was written after it; without one it scans the log: for
//! each sector the slot with the highest sequence number wins, unless a later trim record
//! hides it. The map's pages stay in RAM under a budget ([`FtlConfig::map_cache`]).

mod hiding;
mod layout;
mod lifetime;
mod map;
mod pages;

use alloc::vec::Vec;

use layout::{decode_ranges, encode_ranges, ranges_per_record, Counters, LOST, UNMAPPED};
pub use lifetime::Lifetime;

use crate::error::{Damage, Error, Result};
use crate::media::tag::{Kind, Tag, FORMAT_BLOCK_DEVICE};
use alloc::collections::BTreeMap;
use flash::FlashError;

use crate::log::{Head, Log, LogConfig, Owner, Restored, ScrubReport, SlotAddr, Start};
use crate::media::tag::TagState;
use crate::media::{Segments, Tier};
use map::{Copies, Record, SectorMap};

/// A device of fixed-size sectors.
pub trait BlockDevice {
    /// Bytes per sector.
    fn sector_size(&self) -> usize;
    /// Number of sectors.
    fn sectors(&self) -> u64;
    /// Reads whole sectors starting at `sector` (`buf` is a multiple of the sector size).
    /// A sector never written, or trimmed, reads as zeros.
    fn read(&mut self, sector: u64, buf: &mut [u8]) -> Result<()>;
    /// Writes whole sectors starting at `sector`.
    fn write(&mut self, sector: u64, data: &[u8]) -> Result<()>;
    /// Returns once everything written before it is durable.
    fn flush(&mut self) -> Result<()>;
    /// Declares `count` sectors from `sector` unused: they read as zeros until written.
    fn trim(&mut self, sector: u64, count: u64) -> Result<()>;
    /// A flush that also writes whatever lets the next mount skip a scan (the block device's
    /// checkpoint); by default a flush.
    fn checkpoint(&mut self) -> Result<()> {
        self.flush()
    }
}

/// Block-device settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FtlConfig {
    /// The log underneath.
    pub log: LogConfig,
    /// Sectors to export; `None` exports all the log can hold.
    pub sectors: Option<u32>,
    /// A sector counts as hot when rewritten sooner than this many times the average
    /// interval between rewrites, which the device measures as it runs.
    pub hot_factor: f64,
    /// Bytes of sector-map pages kept in RAM. Pages beyond it are read back from the newest
    /// checkpoint when needed; once the pages changed since it fill this, a checkpoint is
    /// written. A volume without checkpoints keeps its whole map in RAM.
    pub map_cache: usize,
}

/// The default [`FtlConfig::map_cache`]: the map pages of 256 MiB of 2 KiB sectors written at
/// random, and the run lists of several GiB written in order. With half of it, random reads
/// of a file fragmented over the 1 GiB NAND read a map page once in four (`flashfs bench
/// scale`); a mount and its first write touch a few pages.
pub const DEFAULT_MAP_CACHE: usize = 512 * 1024;

impl Default for FtlConfig {
    fn default() -> Self {
        FtlConfig {
            log: LogConfig::default(),
            sectors: None,
            hot_factor: 0.5,
            map_cache: DEFAULT_MAP_CACHE,
        }
    }
}

/// Where a mount from a checkpoint disagrees with what it describes ([`Ftl::audit`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Audit {
    /// Sectors whose place differs from a full scan's.
    pub differing: Vec<u64>,
    /// Segments whose live count, as the checkpoint carried it, differs from what the map
    /// holds there.
    pub miscounted: Vec<u32>,
    /// Whether a page of the checkpoint's map did not read back whole (decay): its sectors
    /// failed with a corrupt-volume error; nothing else could be compared.
    pub map_unreadable: bool,
}

impl Audit {
    /// Whether the checkpoint agrees with the scan in everything.
    pub fn is_clean(&self) -> bool {
        self.differing.is_empty() && self.miscounted.is_empty() && !self.map_unreadable
    }
}

/// The flash translation layer.
#[derive(Debug)]
pub struct Ftl<D> {
    log: Log<D>,
    map: SectorMap,
    buf: Vec<u8>,
    /// Lifetime counters of a block-device volume (a file system keeps its own).
    counters: Option<Lifetimes>,
}

/// The block device's lifetime counters in RAM.
#[derive(Debug, Clone, Copy)]
struct Lifetimes {
    /// The newest counters record found at mount (zero at format); `None` if it was missing
    /// or damaged, in which case the counters are unknown for good.
    base: Option<Counters>,
    /// Whether the volume was closed after its last write: if not, `base` misses the writes
    /// of the session that ended without a close.
    closed: bool,
    /// Sectors the host has written since mount.
    sectors: u64,
    /// Slots the log had programmed since mount when the last counters record was written:
    /// a close writes another only if more were programmed since.
    recorded_slots: u64,
}

impl<D: Segments> Ftl<D> {
    /// Formats `dev` as a block device.
    pub fn format(dev: D, config: FtlConfig) -> Result<Self> {
        Self::format_as(dev, config, FORMAT_BLOCK_DEVICE)
    }

    /// Formats `dev` as sectors for a volume of kind `format` (the block device, or the
    /// file system that keeps its blocks in them).
    pub(crate) fn format_as(dev: D, config: FtlConfig, format: u8) -> Result<Self> {
        Self::check_size(dev.geometry())?;
        // A block device keeps one slot for its counters record (at most one is live).
        let counted = format == FORMAT_BLOCK_DEVICE;
        let log = Log::format(dev, config.log, format, |capacity| {
            let capacity = capacity.saturating_sub(counted as u64);
            let max = u32::try_from(capacity)
                .unwrap_or(u32::MAX - 1)
                .min(u32::MAX - 1);
            match config.sectors {
                Some(n) if n as u64 > capacity => Err(Error::InvalidArgument(
                    "more sectors than the flash can hold",
                )),
                Some(0) => Err(Error::InvalidArgument("zero sectors")),
                Some(n) => Ok(n),
                None if max == 0 => Err(Error::NoSpace),
                None => Ok(max),
            }
        })?;
        let mut ftl = Self::with(log, config);
        if counted {
            ftl.counters = Some(Lifetimes {
                base: Some(Counters::default()),
                closed: true,
                sectors: 0,
                recorded_slots: 0,
            });
            ftl.write_counters()?;
        }
        // A fresh volume mounts from its first checkpoint, without a scan.
        ftl.log.checkpoint(&mut ftl.map)?;
        Ok(ftl)
    }

    /// Mounts the block device on `dev` by scanning its log.
    pub fn mount(dev: D, config: FtlConfig) -> Result<Self> {
        Self::mount_as(dev, config, FORMAT_BLOCK_DEVICE)
    }

    /// Mounts the sectors of a volume of kind `format`.
    pub(crate) fn mount_as(dev: D, config: FtlConfig, format: u8) -> Result<Self> {
        Self::check_size(dev.geometry())?;
        let (log, start) = Log::mount(dev, config.log)?;
        if log.volume().format != format {
            return Err(Error::NotFormatted(if format == FORMAT_BLOCK_DEVICE {
                "the volume is not a block device"
            } else {
                "the volume is not a flashfs file system"
            }));
        }
        let geo = log.geometry();
        if log.volume().size as u64 > geo.segments as u64 * geo.slots as u64 {
            return Err(Error::Corrupt(
                "the volume claims more sectors than the flash holds",
            ));
        }
        let mut ftl = Self::with(log, config);
        let restored = match start {
            Start::Scanned(found) => {
                ftl.apply_scan(&found, format)?;
                true
            }
            Start::Restored(r) => match ftl.restore(r, format) {
                Ok(()) => true,
                Err(Error::Corrupt(_) | Error::Io | Error::Damaged(_)) => false,
                Err(e) => return Err(e),
            },
        };
        if !restored {
            // A checkpoint whose pages do not read back whole: the scan finds everything.
            let dev = ftl.into_device();
            let scan = FtlConfig {
                log: LogConfig {
                    scan_mount: true,
                    ..config.log
                },
                ..config
            };
            return Self::mount_as(dev, scan, format);
        }
        ftl.log.finish_mount();
        Ok(ftl)
    }

    /// Rebuilds the map from every valid tag a scan found: per sector the newest version,
    /// unless a newer trim or loss record hides it.
    fn apply_scan(&mut self, found: &[(SlotAddr, Tag)], format: u8) -> Result<()> {
        let ftl = self;
        let sectors = ftl.map.len();
        // Per sector, the newest version's sequence number and copy flag, packed as
        // `(seq + 1) << 1 | copy` (0: none yet); its address is the map's entry. A word
        // instead of the tag and address keeps the mount's peak RAM near the map's own.
        // Tags hold 40-bit sequence numbers, so the packing cannot overflow.
        let mut newest: Vec<u64> = alloc::vec![0; sectors];
        let unpack_newest = |v: u64, k: usize| Tag {
            key: k as u32,
            seq: (v >> 1) - 1,
            kind: Kind::Sector,
            copy: v & 1 == 1,
        };
        // Trim and loss records, in sequence order, with every copy found: a record, its
        // twin and the cleaner's copies of them share a sequence number.
        let mut found_records: BTreeMap<u64, Vec<(SlotAddr, Tag)>> = Default::default();
        let mut counters: Option<(SlotAddr, Tag)> = None;
        // The newest slot of the owner's (not the log's checkpoint pages, which a close
        // writes after the counters record).
        let mut newest_seq = 0;
        for (at, tag) in found {
            if !matches!(tag.kind, Kind::Page | Kind::Root) {
                newest_seq = newest_seq.max(tag.seq);
            }
            match tag.kind {
                Kind::Sector if (tag.key as usize) < sectors => {
                    let k = tag.key as usize;
                    let v = newest[k];
                    if v == 0 || {
                        let e = ftl.map.get(k, &mut ftl.log.checkpoint_pages())?;
                        let a = ftl.map.unpack(e);
                        ftl.log.newer((*at, tag), (a, &unpack_newest(v, k)))
                    } {
                        newest[k] = ((tag.seq + 1) << 1) | u64::from(tag.copy);
                        let p = ftl.map.pack(*at);
                        ftl.map.set(k, p, &mut ftl.log.checkpoint_pages())?;
                    }
                }
                Kind::Sector => return Err(Error::Corrupt("a sector beyond the device")),
                Kind::Counters => {
                    if counters
                        .as_ref()
                        .is_none_or(|(a, t)| ftl.log.newer((*at, tag), (*a, t)))
                    {
                        counters = Some((*at, *tag));
                    }
                }
                // Pages of a checkpoint the scan replaces: dead.
                Kind::Page | Kind::Root => {}
                Kind::Trim | Kind::Lost => {
                    found_records.entry(tag.seq).or_default().push((*at, *tag))
                }
            }
        }
        let records: BTreeMap<u64, (Copies, Tag)> = found_records
            .into_iter()
            .filter_map(|(seq, mut found)| Some((seq, choose_copies(&ftl.log, &mut found)?)))
            .collect();
        let mut hides: alloc::collections::BTreeMap<u64, u32> = Default::default();
        for (&seq, &(copies, tag)) in &records {
            let at = copies.at;
            let becomes = if tag.kind == Kind::Lost {
                LOST
            } else {
                UNMAPPED
            };
            ftl.log.read_record(at, &mut ftl.buf)?;
            for (start, count) in decode_ranges(&ftl.buf)? {
                let end = (start as usize).saturating_add(count as usize).min(sectors);
                let range = (start as usize).min(end)..end;
                for (k, &v) in newest.iter().enumerate().take(range.end).skip(range.start) {
                    if v == 0 || unpack_newest(v, k).seq < seq {
                        ftl.map.set(k, becomes, &mut ftl.log.checkpoint_pages())?;
                        let previous = ftl.map.hidden_by.set(k as u32, seq);
                        if let Some(h) = hides.get_mut(&previous) {
                            *h -= 1;
                        }
                        *hides.entry(seq).or_insert(0) += 1;
                    }
                }
            }
        }
        // Only records still hiding something (and with something left to hide) are live;
        // the others would pin their segments.
        let oldest = ftl.log.oldest_seqs();
        for (seq, (copies, tag)) in records {
            let h = hides.get(&seq).copied().unwrap_or(0);
            // A trim record with no older version left to hide has done its work; a loss
            // record stays while it hides (as `Owner::is_live` has it).
            let needed = tag.kind == Kind::Lost || oldest.except(copies.at.seg) < seq;
            if h > 0 && needed {
                ftl.map.records.insert(seq, Record { copies, hides: h });
                for at in copies.slots() {
                    ftl.log.mark_live(at);
                }
            }
        }
        for k in 0..sectors {
            if let Some(a) = ftl.map.slot(k, &mut ftl.log.checkpoint_pages())? {
                ftl.log.mark_live(a);
            }
        }
        if format == FORMAT_BLOCK_DEVICE {
            // Not the log's last sequence number: a segment opened after the record (the
            // cleaner's, during the close) takes the next number in its header, and no slot
            // was written after the record.
            let closed = counters.is_some_and(|(_, t)| t.seq == newest_seq);
            ftl.counters = Some(ftl.mount_counters(counters.map(|(a, _)| a), closed)?);
        }
        Ok(())
    }

    /// Starts the map from the checkpoint the log was restored from, then rolls it forward
    /// through what was written after it, as a scan would: a version written after the
    /// checkpoint beats the one it names (a cleaner's copy there is of that very version),
    /// and a record written after it hides what is older.
    fn restore(&mut self, mut r: Restored, format: u8) -> Result<()> {
        // No map page is read here: the log's segment table counted the slots they name,
        // and each is read when a sector of it is first needed.
        let known = self
            .map
            .restore_extras(r.pages, &mut self.log.checkpoint_pages())?;
        // Every copy of each record, by sequence number: those the checkpoint names still
        // where it says, then those rolled forward.
        let mut records: BTreeMap<u64, Vec<(SlotAddr, Tag)>> = BTreeMap::new();
        // A record the checkpoint names but none of whose copies is where it was was dropped
        // since (it had hidden all it had to) — or moved by the cleaner, whose copy is rolled
        // forward below, before the segment it left was erased.
        let mut gone = alloc::collections::BTreeSet::new();
        for (seq, at) in known {
            match self.log.device_mut().read_tag(at.seg, at.slot)? {
                TagState::Valid(t) if t.seq == seq && t.kind.is_tombstone() => {
                    records.entry(seq).or_default().push((at, t));
                }
                _ => {
                    gone.insert(seq);
                }
            }
        }
        gone.retain(|seq| !records.contains_key(seq));
        let sectors = self.map.len();
        let mut written: BTreeMap<u64, Vec<(SlotAddr, Tag)>> = BTreeMap::new();
        let mut counters: Option<(SlotAddr, Tag)> = None;
        let mut last = 0;
        for &(at, tag) in &r.rolled {
            last = last.max(tag.seq);
            let newer = |b: Option<&(SlotAddr, Tag)>| {
                b.is_none_or(|(a, t)| self.log.newer((at, &tag), (*a, t)))
            };
            match tag.kind {
                Kind::Sector if (tag.key as usize) < sectors => {}
                Kind::Sector => return Err(Error::Corrupt("a sector beyond the device")),
                Kind::Counters => {
                    if newer(counters.as_ref()) {
                        counters = Some((at, tag));
                    }
                }
                Kind::Trim | Kind::Lost => written.entry(tag.seq).or_default().push((at, tag)),
                Kind::Page | Kind::Root => {}
            }
        }
        // The newest version of each sector written since, in the list of what was rolled
        // itself (sorted by sector, then as `Log::newer` ranks versions; the last of each
        // sector kept): no second structure per version rolled.
        let rolled_any = !r.rolled.is_empty();
        let mut newest = core::mem::take(&mut r.rolled);
        newest.retain(|(_, t)| t.kind == Kind::Sector);
        let segs = self.log.segments();
        newest.sort_unstable_by_key(|(at, t)| {
            (t.key, t.seq, t.copy, segs[at.seg as usize].open_seq())
        });
        newest.dedup_by(|later, earlier| {
            let same = later.1.key == earlier.1.key;
            if same {
                *earlier = *later;
            }
            same
        });
        let newest_seq = |k: usize| {
            newest
                .binary_search_by_key(&k, |(_, t)| t.key as usize)
                .ok()
                .map(|i| newest[i].1.seq)
        };
        // What was written after the checkpoint replaces what it names.
        for &(at, t) in &newest {
            self.replace(t.key as usize, self.map.pack(at))?;
        }
        for (seq, mut rolled) in written {
            if let Some(copies) = records.get_mut(&seq) {
                // The cleaner moved a record the checkpoint knew: its copies join those
                // still where the checkpoint says.
                copies.append(&mut rolled);
                continue;
            }
            if gone.contains(&seq) {
                // The cleaner moved a record the checkpoint knew and erased where it was. Had
                // it been dropped after the move, it hides nothing that still matters: the
                // sectors it hid were written again or hold no older version.
                records.insert(seq, rolled);
                continue;
            }
            if seq < r.seq {
                // A copy of a record the checkpoint had already dropped.
                continue;
            }
            let Some((Copies { at, .. }, tag)) = choose_copies(&self.log, &mut rolled) else {
                continue;
            };
            let becomes = if tag.kind == Kind::Lost {
                LOST
            } else {
                UNMAPPED
            };
            self.log.read_record(at, &mut self.buf)?;
            for (start, count) in decode_ranges(&self.buf)? {
                let end = (start as usize).saturating_add(count as usize).min(sectors);
                for k in (start as usize).min(end)..end {
                    if newest_seq(k).is_none_or(|s| s < seq) {
                        self.replace(k, becomes)?;
                    }
                }
            }
            records.insert(seq, rolled);
        }
        let mut resolved = Vec::with_capacity(records.len());
        for (seq, mut found) in records {
            let Some((copies, _)) = choose_copies(&self.log, &mut found) else {
                continue;
            };
            self.log.read_record(copies.at, &mut self.buf)?;
            resolved.push((seq, copies, decode_ranges(&self.buf)?));
        }
        for at in self
            .map
            .restore_records(resolved, &mut self.log.checkpoint_pages())?
        {
            self.log.mark_live(at);
        }
        if let Some((at, _)) = counters {
            self.map.counters_at = Some(at);
        } else if let Some(at) = self.map.counters_at {
            // The counters record the checkpoint names, unless the slot holds another since:
            // its segment was cleaned and erased after the checkpoint, and the copy did not
            // read back (decay) to be rolled forward.
            let holds = matches!(
                self.log.device_mut().read_tag(at.seg, at.slot)?,
                TagState::Valid(t) if t.kind == Kind::Counters
            );
            if !holds {
                self.map.counters_at = None;
            }
        }
        if format == FORMAT_BLOCK_DEVICE {
            // Nothing written after the newest counters record: the last session closed.
            let closed = !rolled_any || counters.is_some_and(|(_, t)| t.seq == last);
            self.counters = Some(self.mount_counters(self.map.counters_at, closed)?);
        }
        Ok(())
    }

    /// Sets sector `k`'s entry to `v` while rolling forward: the slot it named is dead.
    fn replace(&mut self, k: usize, v: u32) -> Result<()> {
        if let Some(old) = self.map.slot(k, &mut self.log.checkpoint_pages())? {
            if self.map.pack(old) != v {
                self.log.kill(old);
            }
        }
        self.map.set(k, v, &mut self.log.checkpoint_pages())?;
        if layout::is_slot(v) {
            self.log.mark_live(self.map.unpack(v));
        }
        Ok(())
    }

    /// The sector map packs slot addresses into 32 bits, two values short of the top.
    fn check_size(geo: crate::SegGeometry) -> Result<()> {
        if geo.segments as u64 * geo.slots as u64 >= LOST as u64 {
            return Err(Error::InvalidArgument(
                "device has too many slots for the block device's map",
            ));
        }
        Ok(())
    }

    fn with(log: Log<D>, config: FtlConfig) -> Self {
        let sectors = log.volume().size as usize;
        let geo = log.geometry();
        let separate = log.config().hot_cold && log.heads_apart();
        // Without checkpoints nothing can leave RAM: the budget is the whole map.
        let budget = if log.keeps_checkpoints() {
            config.map_cache
        } else {
            usize::MAX
        };
        Ftl {
            map: SectorMap::new(
                sectors,
                (geo.segments, geo.slots, geo.slot_size as usize),
                budget,
                config.hot_factor,
                separate,
            ),
            buf: alloc::vec![0; geo.slot_size as usize],
            log,
            counters: None,
        }
    }

    /// The counters the newest counters record holds (marking it live), and whether anything
    /// was written after it.
    fn mount_counters(&mut self, newest: Option<SlotAddr>, closed: bool) -> Result<Lifetimes> {
        let Some(at) = newest else {
            return Ok(Lifetimes {
                base: None,
                closed: false,
                sectors: 0,
                recorded_slots: 0,
            });
        };
        let base = match self.log.read_record(at, &mut self.buf) {
            Ok(()) => Counters::decode(&self.buf),
            Err(Error::Io) => None,
            Err(e) => return Err(e),
        };
        self.map.counters_at = Some(at);
        self.log.mark_live(at);
        Ok(Lifetimes {
            base,
            closed,
            sectors: 0,
            recorded_slots: 0,
        })
    }

    /// The counters as of now, if known.
    fn counters_now(&self) -> Option<Counters> {
        let c = self.counters?;
        let base = c.base?;
        // The bases come from flash: a damaged record's must not overflow.
        Some(Counters {
            sectors: base.sectors.saturating_add(c.sectors),
            slots: base.slots.saturating_add(self.slots_since_mount()),
            migrated: base
                .migrated
                .saturating_add(self.log.stats().migrated_slots),
            shares: self.log.shares(base.shares),
        })
    }

    /// What the host has written to this block device and what the log programmed for it,
    /// since format: `None` if unknown (a file-system volume, which keeps its own, or a
    /// counters record lost to damage). Counts the writes of a session that ended without
    /// [`Ftl::close`] only if [`Ftl::lifetime_complete`].
    pub fn lifetime(&self) -> Option<Lifetime> {
        let c = self.counters_now()?;
        let ss = self.sector_size() as u64;
        Some(Lifetime {
            user_bytes: c.sectors.saturating_mul(ss),
            flash_bytes: c.slots.saturating_mul(ss),
            migrated_bytes: c.migrated.saturating_mul(ss),
            shares: c.shares,
        })
    }

    /// Whether [`Ftl::lifetime`] counts every write: false when the previous session ended
    /// without a close (a power cut), whose writes since the last close are not counted.
    pub fn lifetime_complete(&self) -> bool {
        self.counters.is_some_and(|c| c.closed)
    }

    /// Writes a counters record (counting its own slot) and kills the previous one.
    fn write_counters(&mut self) -> Result<()> {
        let Some(mut c) = self.counters_now() else {
            return Ok(());
        };
        c.slots += 1;
        let rec = c.encode(self.sector_size());
        let at = self
            .log
            .append(Head::Meta, 0, Kind::Counters, &rec, &mut self.map)?;
        if let Some(old) = self.map.counters_at.replace(at) {
            self.log.kill(old);
        }
        let programmed = self.slots_since_mount();
        if let Some(l) = &mut self.counters {
            l.recorded_slots = programmed;
        }
        Ok(())
    }

    /// Slots the log has programmed since mount.
    fn slots_since_mount(&self) -> u64 {
        let st = self.log.stats();
        st.user_slots + st.copied_slots
    }

    /// Closes the block device: records its lifetime counters (if anything was written since
    /// mount), writes a checkpoint (on a volume that keeps them) so the next mount reads it
    /// instead of scanning, and knows it holds every forget, makes everything durable and
    /// gives the device back.
    pub fn close(mut self) -> Result<D> {
        let programmed = self.slots_since_mount();
        if self
            .counters
            .is_some_and(|c| c.base.is_some() && programmed > c.recorded_slots)
        {
            self.write_counters()?;
        }
        self.log.close_checkpoint(&mut self.map)?;
        self.log.sync()?;
        Ok(self.log.into_device())
    }

    /// Checks a mount from a checkpoint against a full scan (what `fsck` does; a mount never
    /// scans when it need not): counts what the map holds in each segment against the
    /// log's live counts, then mounts the device again by scanning and compares the two
    /// maps. Returns the scanned block device, which the next close checkpoints afresh, and
    /// what disagrees — `None` if this mount was a scan already. Nothing is written.
    pub fn audit(self, config: FtlConfig) -> Result<(Self, Option<Audit>)> {
        if !self.log.restored() {
            return Ok((self, None));
        }
        let mut this = self;
        // A map page is read when first needed, not at mount: one that does not read back
        // shows here, and the scan's map replaces the checkpoint's.
        let restored = match this
            .miscounted_segments()
            .and_then(|m| Ok((m, this.entries()?)))
        {
            Ok(r) => Some(r),
            Err(Error::Corrupt(_) | Error::Damaged(_)) => None,
            Err(e) => return Err(e),
        };
        let scan = FtlConfig {
            log: LogConfig {
                scan_mount: true,
                ..config.log
            },
            ..config
        };
        let mut scanned = Self::mount(this.into_device(), scan)?;
        let Some((miscounted, restored)) = restored else {
            let audit = Audit {
                map_unreadable: true,
                ..Audit::default()
            };
            return Ok((scanned, Some(audit)));
        };
        let mut differing = Vec::new();
        for (k, (s, r)) in scanned.entries()?.into_iter().zip(restored).enumerate() {
            if s != r && !scanned.same_version(s, r)? {
                differing.push(k as u64);
            }
        }
        let audit = Audit {
            differing,
            miscounted,
            map_unreadable: false,
        };
        Ok((scanned, Some(audit)))
    }

    /// Segments whose live count in the log differs from what the map holds there: the
    /// slots its entries name, its records and its counters record. Checkpoints carry the
    /// counts from mount to mount, and a mount erases a full segment counted empty, so
    /// `fsck` checks them. Reads every map page on flash.
    pub fn miscounted_segments(&mut self) -> Result<Vec<u32>> {
        let mut held = alloc::vec![0u32; self.log.geometry().segments as usize];
        let mut from = 0;
        while let Some(k) = self.next_mapped(from)? {
            if let Some(at) = self.map.slot(k, &mut self.log.checkpoint_pages())? {
                held[at.seg as usize] += 1;
            }
            from = k + 1;
        }
        self.map.held_apart(&mut |at| held[at.seg as usize] += 1);
        Ok(self.log.miscounted(held))
    }

    /// Whether two map entries name slots holding the same version of a sector: the
    /// cleaner's copy and the slot it was copied from, both left until the source segment is
    /// erased. A scan may take either (SPEC §2.4).
    fn same_version(&mut self, a: u32, b: u32) -> Result<bool> {
        if !layout::is_slot(a) || !layout::is_slot(b) {
            return Ok(false);
        }
        let (a, b) = (self.map.unpack(a), self.map.unpack(b));
        let dev = self.log.device_mut();
        Ok(
            match (dev.read_tag(a.seg, a.slot)?, dev.read_tag(b.seg, b.slot)?) {
                (TagState::Valid(x), TagState::Valid(y)) => {
                    x.kind == Kind::Sector && y.kind == x.kind && x.key == y.key && x.seq == y.seq
                }
                _ => false,
            },
        )
    }

    /// Every entry of the map, in sector order (what [`Ftl::audit`] compares).
    fn entries(&mut self) -> Result<Vec<u32>> {
        (0..self.map.len())
            .map(|k| self.map.get(k, &mut self.log.checkpoint_pages()))
            .collect()
    }

    /// Writes a checkpoint of the map and the log's segment table now (a close does), so
    /// that a mount reads it instead of scanning, if nothing is written after it. Does
    /// nothing on a volume without checkpoints or when nothing changed since the last.
    pub fn checkpoint(&mut self) -> Result<()> {
        self.log.checkpoint(&mut self.map)
    }

    /// Whether the volume keeps checkpoints and one of this map fits a root
    /// ([`Log::checkpoints_fit`]): if not, every mount scans.
    pub fn checkpoints_fit(&self) -> bool {
        self.log.checkpoints_fit(self.map.pages())
    }

    /// Bytes of the sector map's pages in RAM now, and pages read back from the checkpoint
    /// since mount (the map cache's misses).
    pub fn map_cache_stats(&self) -> (usize, u64) {
        (self.map.at.resident_bytes(), self.map.at.loads())
    }

    fn check(&self, sector: u64, len: usize) -> Result<u64> {
        let ss = self.sector_size();
        if len % ss != 0 {
            return Err(Error::InvalidArgument(
                "length is not a whole number of sectors",
            ));
        }
        let n = (len / ss) as u64;
        match sector.checked_add(n) {
            Some(end) if end <= self.sectors() => Ok(n),
            _ => Err(Error::InvalidArgument(
                "sector beyond the end of the device",
            )),
        }
    }

    /// Uses idle device time to clean ahead of need.
    pub fn idle(&mut self, d: core::time::Duration) -> Result<core::time::Duration> {
        let used = self.log.idle(d, &mut self.map)?;
        self.record_losses()?;
        Ok(used)
    }

    /// Reads back every sector's data, checking it, and moves the segments whose data is
    /// wearing away to fresh ones while the ECC still corrects it ([`Log::scrub`]). Returns
    /// what the scrub found and the sectors whose data was already lost: from now on they
    /// read as lost (EIO) until written again, after a remount too.
    pub fn scrub(&mut self) -> Result<(ScrubReport, Vec<u64>)> {
        let refresh = self.log.refresh_bits();
        let known = self.map.lost.len();
        let report = self.log.scrub(&mut self.map, refresh)?;
        let lost = self.map.lost[known..]
            .iter()
            .map(|&k| u64::from(k))
            .collect();
        self.record_losses()?;
        // The segments it moved may have taken the log past its checkpoint's set.
        self.checkpoint_if_due()?;
        self.log.sync()?;
        Ok((report, lost))
    }

    /// Cleans every segment holding dead data.
    pub fn gc(&mut self) -> Result<()> {
        self.log.gc(&mut self.map)?;
        self.record_losses()
    }

    /// Writes loss records for sectors found unreadable, so they keep failing with EIO after
    /// a remount instead of silently showing an older version.
    fn record_losses(&mut self) -> Result<()> {
        while !self.map.lost.is_empty() {
            let n = self
                .map
                .lost
                .len()
                .min(ranges_per_record(self.sector_size()));
            let ranges: Vec<(u32, u32)> = self.map.lost[..n].iter().map(|&k| (k, 1)).collect();
            let rec = encode_ranges(&ranges, self.sector_size());
            let t = self.append_record(Kind::Lost, &rec)?;
            for (k, _) in ranges {
                self.map.hide(k as usize, t);
            }
            self.map.lost.drain(..n);
            self.twin_record(t, Kind::Lost, &rec)?;
        }
        for at in core::mem::take(&mut self.map.useless) {
            self.log.kill(at);
        }
        Ok(())
    }

    /// Lets go of ranges of sectors (first, count) that a mount reads again whatever they
    /// hold (the file system's journal blocks): after a power cut each must read as without
    /// data or as an old version of itself, never as data lost. On a volume mounted by a
    /// scan a forget ([`Ftl::forget`]) does that at no cost: a scan maps only versions it
    /// reads. On one that keeps checkpoints a cut brings back the checkpoint's map, which
    /// may name a version the cleaner erased after the forget let it go: there the ranges
    /// are trimmed ([`Ftl::trim_ranges`]), a record that survives the cut.
    pub(crate) fn let_go(&mut self, ranges: &[(u64, u64)]) -> Result<()> {
        if self.log.keeps_checkpoints() {
            return self.trim_ranges(ranges);
        }
        for &(sector, count) in ranges {
            for k in sector..sector.saturating_add(count) {
                self.forget(k)?;
            }
        }
        Ok(())
    }

    /// Trims ranges of sectors (first, count) with as few trim records as they fit in
    /// ([`BlockDevice::trim`]); ranges without data take none.
    pub(crate) fn trim_ranges(&mut self, ranges: &[(u64, u64)]) -> Result<()> {
        let mut mapped = Vec::new();
        for &(sector, count) in ranges {
            let end = sector.checked_add(count).filter(|&e| e <= self.sectors());
            let Some(end) = end else {
                return Err(Error::InvalidArgument("trim beyond the end of the device"));
            };
            for k in sector..end {
                if self.map.get(k as usize, &mut self.log.checkpoint_pages())? != UNMAPPED {
                    mapped.push((sector as u32, count as u32));
                    break;
                }
            }
        }
        for part in mapped.chunks(ranges_per_record(self.sector_size())) {
            let rec = encode_ranges(part, self.sector_size());
            let t = self.append_record(Kind::Trim, &rec)?;
            for &(sector, count) in part {
                for k in sector as usize..(sector + count) as usize {
                    if let Some(old) = self.map.slot(k, &mut self.log.checkpoint_pages())? {
                        self.log.kill(old);
                    }
                    self.map
                        .set(k, UNMAPPED, &mut self.log.checkpoint_pages())?;
                    self.map.hide(k, t);
                }
            }
            // Kept twice, as a loss record is: damage at rest destroying a lone trim record
            // would bring back the versions it hides.
            self.twin_record(t, Kind::Trim, &rec)?;
        }
        self.record_losses()?;
        self.checkpoint_if_due()
    }

    /// Appends a trim or loss record holding `rec` and takes it into the map's live
    /// records, hiding nothing yet; returns its sequence number.
    fn append_record(&mut self, kind: Kind, rec: &[u8]) -> Result<u64> {
        let at = self.log.append(Head::Meta, 0, kind, rec, &mut self.map)?;
        let t = self.log.last_seq();
        self.map.records.insert(
            t,
            Record {
                copies: Copies::one(at),
                hides: 0,
            },
        );
        Ok(t)
    }

    /// Keeps record `t` (holding `rec`) twice: a second copy in another head's segment, so
    /// that damage at rest destroying one leaves the other. Without it a loss record lost
    /// to damage would leave its sectors reading as never written after a scan.
    fn twin_record(&mut self, t: u64, kind: Kind, rec: &[u8]) -> Result<()> {
        // On the NVRAM of a volume on two devices the one copy is enough: NVRAM keeps its
        // bytes at rest (it has no retention loss or read disturb to guard against), and
        // a twin on the flash would cost every mount a flash read.
        let on_nvram = self.map.records.get(&t).is_some_and(|r| {
            let dev = self.log.device();
            dev.is_tiered() && dev.tier(r.copies.at.seg) == Tier::Fast
        });
        if on_nvram {
            return Ok(());
        }
        let tag = Tag {
            key: 0,
            seq: t,
            kind,
            copy: false,
        };
        let Some(twin) = self.log.append_twin(Head::Cold, tag, rec, &mut self.map)? else {
            return Ok(());
        };
        // Cleaning for room may have moved the first copy, or dropped the record.
        match self.map.records.get_mut(&t) {
            Some(r) if r.copies.at.seg != twin.seg => r.copies.twin = Some(twin),
            _ => self.log.kill(twin),
        }
        Ok(())
    }

    /// The log underneath (statistics, segment table).
    pub fn log(&self) -> &Log<D> {
        &self.log
    }

    /// The log underneath, mutably (device access for fault injection).
    pub fn log_mut(&mut self) -> &mut Log<D> {
        &mut self.log
    }

    /// Writes whole sectors through `head`, or the head the sector's update frequency
    /// suggests (`None`, what [`BlockDevice::write`] does).
    pub(crate) fn write_to(&mut self, sector: u64, data: &[u8], head: Option<Head>) -> Result<()> {
        self.check(sector, data.len())?;
        let ss = self.sector_size();
        for (i, chunk) in data.chunks_exact(ss).enumerate() {
            let k = sector as usize + i;
            let classified = self.map.classify_write(k);
            let head = head.unwrap_or(classified);
            let at = self
                .log
                .append(head, k as u32, Kind::Sector, chunk, &mut self.map)?;
            if let Some(c) = &mut self.counters {
                c.sectors += 1;
            }
            // Read the old place only now: cleaning during the append may have moved it.
            if let Some(old) = self.map.slot(k, &mut self.log.checkpoint_pages())? {
                self.log.kill(old);
            }
            self.map.release(k);
            let p = self.map.pack(at);
            self.map.set(k, p, &mut self.log.checkpoint_pages())?;
            self.record_losses()?;
        }
        self.checkpoint_if_due()
    }

    /// Writes a checkpoint when the log says one is due (half of the last one's set used),
    /// so that a power cut costs the next mount a short roll-forward, not a scan.
    /// Also when the map pages changed since the last checkpoint fill the map's budget:
    /// only a checkpoint lets them leave RAM.
    fn checkpoint_if_due(&mut self) -> Result<()> {
        let full = self.map.at.over_budget() && self.log.keeps_checkpoints();
        if self.log.checkpoint_due() || full {
            self.checkpoint()?;
        }
        Ok(())
    }

    /// Reads whole sectors, as [`BlockDevice::read`]; with `written`, the caller knows each
    /// sector was written (a file's block, by its extent), so one the map does not hold
    /// (its page read as erased, or its tag was lost, when the volume was scanned) is damage
    /// rather than zeros.
    pub fn read_sectors(&mut self, sector: u64, buf: &mut [u8], written: bool) -> Result<()> {
        self.read_sectors_as(sector, buf, written, None)
    }

    /// Reads one sector, as [`BlockDevice::read`], that its owner programs in place (if
    /// ever) only in its last `tail` bytes (an index node: its spare area), so that what lies
    /// between the bytes its write put there and those is not read
    /// ([`crate::media::Segments::read_slot_written`]).
    pub fn read_sector_written(&mut self, sector: u64, buf: &mut [u8], tail: usize) -> Result<()> {
        self.read_sectors_as(sector, buf, false, Some(tail))
    }

    fn read_sectors_as(
        &mut self,
        sector: u64,
        buf: &mut [u8],
        written: bool,
        tail: Option<usize>,
    ) -> Result<()> {
        self.check(sector, buf.len())?;
        let ss = self.sector_size();
        for (i, chunk) in buf.chunks_exact_mut(ss).enumerate() {
            let k = sector as usize + i;
            match self.map.get(k, &mut self.log.checkpoint_pages())? {
                UNMAPPED if written => {
                    return Err(Error::Damaged(Damage {
                        sector: Some(k as u64),
                        ..Damage::default()
                    }))
                }
                UNMAPPED => chunk.fill(0),
                LOST => {
                    return Err(Error::Damaged(Damage {
                        sector: Some(k as u64),
                        ..Damage::default()
                    }))
                }
                p => {
                    let at = self.map.unpack(p);
                    let read = self
                        .log
                        .read_expecting(at, k as u32, Kind::Sector, chunk, tail);
                    if let Err(e) = read {
                        if e.is_unreadable() {
                            // Damaged or unreadable: a loss record keeps the sector an
                            // error until it is written again (never an older version).
                            self.log.kill(at);
                            self.map.set(k, LOST, &mut self.log.checkpoint_pages())?;
                            self.map.lost.push(k as u32);
                            // The loss is kept in RAM if its record cannot be written now
                            // (no space, a worn device): the read still says what it found.
                            if let Err(Error::Flash(FlashError::PowerLoss)) = self.record_losses() {
                                return Err(Error::Flash(FlashError::PowerLoss));
                            }
                            return Err(Error::Damaged(Damage {
                                slot: Some((at.seg, at.slot)),
                                sector: Some(k as u64),
                                file: None,
                            }));
                        }
                        return Err(e);
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether [`Ftl::patch_sector`] works on this medium.
    pub(crate) fn can_patch(&self) -> bool {
        self.log.can_patch()
    }

    /// Programs `bytes` at `offset` inside the sector's current slot, in place, clearing bits
    /// only (reprogrammable NOR; see [`Log::patch`]). The sector must hold data:
    /// `InvalidArgument` if it never did, `Damaged` if its slot was lost.
    pub(crate) fn patch_sector(&mut self, sector: u64, offset: usize, bytes: &[u8]) -> Result<()> {
        self.check(sector, 0)?;
        let at = match self
            .map
            .get(sector as usize, &mut self.log.checkpoint_pages())?
        {
            UNMAPPED => return Err(Error::InvalidArgument("patch of a sector without data")),
            // Its slot was lost (damage the cleaner found): what the patch would go over
            // is gone. The caller may write the sector anew.
            LOST => {
                return Err(Error::Damaged(Damage {
                    sector: Some(sector),
                    ..Damage::default()
                }))
            }
            p => self.map.unpack(p),
        };
        self.log.patch(at, offset, bytes)
    }

    /// Drops a sector's data from the map without a trim record: for an owner that knows,
    /// after every mount, which sectors it uses (the file system, by walking its index), a
    /// record would be flash written for nothing. After a power cut the sector may show an
    /// old version again; such an owner never reads a sector it does not use. A forget is
    /// durable once a checkpoint follows it; a mount that finds the log as a close left it
    /// ([`Log::found_closed`]) vouches for every forget only if the owner programs before it
    /// forgets a sector the checkpoint maps, as the file system does (its forgets follow the
    /// commit that freed the sectors).
    pub(crate) fn forget(&mut self, sector: u64) -> Result<()> {
        let k = sector as usize;
        if k >= self.map.len() {
            return Ok(());
        }
        if let Some(old) = self.map.slot(k, &mut self.log.checkpoint_pages())? {
            self.log.kill(old);
        }
        self.map
            .set(k, UNMAPPED, &mut self.log.checkpoint_pages())?;
        self.map.release(k);
        Ok(())
    }

    /// One step of a look through the map for sectors to forget ([`Ftl::forget`]): from
    /// sector `from`, past the chunks a checkpoint holds empty (without a read), through
    /// the rest of the first map page where data may be, forgetting each sector there that
    /// holds data (or lost it) and passes `drop`. Reads one map page at most, so that an
    /// owner can spread a look through a large map over many operations. Returns where the
    /// next step starts, `None` once past the end.
    pub(crate) fn forget_step(
        &mut self,
        from: u64,
        mut drop: impl FnMut(u64) -> bool,
    ) -> Result<Option<u64>> {
        let len = self.map.len();
        let from = usize::try_from(from).unwrap_or(usize::MAX);
        if from >= len {
            return Ok(None);
        }
        let k = self
            .map
            .next_maybe_mapped(from, &mut self.log.checkpoint_pages())?;
        if k >= len {
            return Ok(None);
        }
        let per_page = self.map.at.per_page();
        let end = ((k / per_page + 1) * per_page).min(len);
        for s in k..end {
            let p = self.map.get(s, &mut self.log.checkpoint_pages())?;
            if p != UNMAPPED && drop(s as u64) {
                self.forget(s as u64)?;
            }
        }
        Ok((end < len).then_some(end as u64))
    }

    /// The sectors that hold data (or lost it) and pass `keep`, in order, in one pass
    /// through the map ([`Ftl::next_mapped`]).
    pub(crate) fn mapped_where(&mut self, mut keep: impl FnMut(u64) -> bool) -> Result<Vec<u64>> {
        let mut out = Vec::new();
        let mut from = 0;
        while let Some(k) = self.next_mapped(from)? {
            if keep(k as u64) {
                out.push(k as u64);
            }
            from = k + 1;
        }
        Ok(out)
    }

    /// The first sector from `from` on that holds data (or lost it). The map is read a
    /// page at a time, passing over the chunks a checkpoint holds empty without a read, so
    /// that a look through it costs what the volume holds, not the part's size.
    fn next_mapped(&mut self, from: usize) -> Result<Option<usize>> {
        let mut k = from;
        while k < self.map.len() {
            k = self
                .map
                .next_maybe_mapped(k, &mut self.log.checkpoint_pages())?;
            if k < self.map.len() && self.map.get(k, &mut self.log.checkpoint_pages())? != UNMAPPED
            {
                return Ok(Some(k));
            }
            k += 1;
        }
        Ok(None)
    }

    /// Whether `sector` holds data now.
    pub fn is_mapped(&mut self, sector: u64) -> Result<bool> {
        let Ok(k) = usize::try_from(sector) else {
            return Ok(false);
        };
        Ok(self
            .map
            .slot(k, &mut self.log.checkpoint_pages())?
            .is_some())
    }

    /// The tier `sector`'s data lies on, if it has some (on one device, always the bulk
    /// tier).
    pub fn tier_of(&mut self, sector: u64) -> Result<Option<Tier>> {
        let Ok(k) = usize::try_from(sector) else {
            return Ok(None);
        };
        let at = self.map.slot(k, &mut self.log.checkpoint_pages())?;
        Ok(at.map(|a| self.log.device().tier(a.seg)))
    }

    /// Sectors that currently hold data.
    pub fn mapped_sectors(&self) -> u64 {
        self.map.at.mapped()
    }

    /// Gives the device back.
    pub fn into_device(self) -> D {
        self.log.into_device()
    }
}

/// The copies of a record to keep, of those found (`found`, every one of the same sequence
/// number): the newest as [`Log::newer`] ranks them, and for a loss record the next newest
/// in another segment as its twin. Returns them with the newest's tag.
fn choose_copies<D: Segments>(
    log: &Log<D>,
    found: &mut [(SlotAddr, Tag)],
) -> Option<(Copies, Tag)> {
    found.sort_unstable_by(|a, b| {
        if log.newer((b.0, &b.1), (a.0, &a.1)) {
            core::cmp::Ordering::Greater
        } else if log.newer((a.0, &a.1), (b.0, &b.1)) {
            core::cmp::Ordering::Less
        } else {
            core::cmp::Ordering::Equal
        }
    });
    let &(at, tag) = found.first()?;
    let twin = found
        .iter()
        .find(|(a, _)| a.seg != at.seg)
        .filter(|_| tag.kind == Kind::Lost)
        .map(|&(a, _)| a);
    Some((Copies { at, twin }, tag))
}

impl<D: Segments> BlockDevice for Ftl<D> {
    fn sector_size(&self) -> usize {
        self.log.geometry().slot_size as usize
    }

    fn sectors(&self) -> u64 {
        self.map.len() as u64
    }

    fn read(&mut self, sector: u64, buf: &mut [u8]) -> Result<()> {
        self.read_sectors(sector, buf, false)
    }

    fn write(&mut self, sector: u64, data: &[u8]) -> Result<()> {
        self.write_to(sector, data, None)
    }

    fn flush(&mut self) -> Result<()> {
        self.log.sync()
    }

    fn checkpoint(&mut self) -> Result<()> {
        Ftl::checkpoint(self)?;
        self.log.sync()
    }

    fn trim(&mut self, sector: u64, count: u64) -> Result<()> {
        self.trim_ranges(&[(sector, count)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::{NandSegments, NorSegments};
    use flash::{
        preset, DeviceSpec, FaultConfig, ImageMeta, NandSim, NorSim, NorSpec, NorTiming, Simulated,
        Timebomb,
    };

    fn w25n01gv() -> NandSegments<NandSim> {
        let DeviceSpec::Nand(spec) = preset::lookup("w25n01gv").unwrap().spec else {
            panic!("w25n01gv is not NAND");
        };
        NandSegments::new(NandSim::new(spec, ImageMeta::new("w25n01gv", 1)).unwrap()).unwrap()
    }

    /// A forget programs nothing, so only a root written after it holds it: a close writes
    /// one even when nothing was programmed since the last root, unless that root is a
    /// close's and no slot died since (SPEC.md §3.5).
    #[test]
    fn a_close_holds_the_forgets_of_a_session_that_programmed_nothing() {
        let mut ftl = Ftl::format(w25n01gv(), FtlConfig::default()).unwrap();
        let data = alloc::vec![7u8; ftl.sector_size()];
        for k in 0..8 {
            ftl.write_to(k, &data, None).unwrap();
        }
        // A power cut right after a checkpoint: nothing follows a root no close wrote.
        Ftl::checkpoint(&mut ftl).unwrap();
        ftl.flush().unwrap();
        let mut ftl = Ftl::mount(ftl.into_device(), FtlConfig::default()).unwrap();
        assert!(ftl.log.restored() && !ftl.log.found_closed());
        ftl.forget(3).unwrap();
        let programs = ftl.log.device().flash().stats().programs;
        let mut ftl = Ftl::mount(ftl.close().unwrap(), FtlConfig::default()).unwrap();
        assert!(ftl.log.device().flash().stats().programs > programs);
        assert!(ftl.log.found_closed());
        assert!(!ftl.is_mapped(3).unwrap() && ftl.is_mapped(4).unwrap());
        // Closed again with nothing done: nothing to add.
        let programs = ftl.log.device().flash().stats().programs;
        let ftl = Ftl::mount(ftl.close().unwrap(), FtlConfig::default()).unwrap();
        assert_eq!(ftl.log.device().flash().stats().programs, programs);
        assert!(ftl.log.found_closed());
        // A power cut after a write: the mount rolls forward and says it found no close.
        let mut ftl = ftl;
        ftl.write_to(9, &data, None).unwrap();
        ftl.flush().unwrap();
        let ftl = Ftl::mount(ftl.into_device(), FtlConfig::default()).unwrap();
        assert!(ftl.log.restored() && !ftl.log.found_closed());
    }

    /// A small NOR part of 16 units of 8 KiB, keeping checkpoints.
    fn nor_checkpointed() -> (NorSegments<NorSim>, FtlConfig) {
        let spec = NorSpec {
            unit_size: 8 * 1024,
            units: 16,
            banks: 2,
            word_size: 4,
            program_page: 0,
            reprogrammable: true,
            timing: NorTiming {
                read_word_ns: 100,
                program_word_ns: 10_000,
                program_cmd_ns: 0,
                erase_ns: 100_000_000,
                bus_byte_ns: 0,
                erase_suspend_ns: Some(20_000),
            },
            endurance: 100_000,
        };
        let dev = NorSegments::new(NorSim::new(spec, ImageMeta::new("nor", 1)).unwrap(), 512);
        let mut config = FtlConfig::default();
        config.log.checkpoint_min_segments = 0;
        (dev.unwrap(), config)
    }

    /// Anchors that wear out stop checkpoints. The last checkpoint's segment table and
    /// directory, which no mount reads any more, die; its map pages, which the map still
    /// reads, stay live, and count as held (found by `flashfs torture --target fs --fault
    /// wear-out` on NOR: a checkpoint whose root did not take left `fsck` finding the live
    /// counts of the segments holding its pages off).
    #[test]
    fn worn_out_anchors_leave_the_live_counts_right() {
        let (dev, config) = nor_checkpointed();
        let mut ftl = Ftl::format(dev, config).unwrap();
        assert!(ftl.log.keeps_checkpoints());
        let data = alloc::vec![7u8; ftl.sector_size()];
        for k in 0..40 {
            ftl.write_to(k, &data, None).unwrap();
        }
        Ftl::checkpoint(&mut ftl).unwrap();
        assert!(ftl.miscounted_segments().unwrap().is_empty());
        let live = |ftl: &Ftl<NorSegments<NorSim>>| -> u64 {
            ftl.log.segments().iter().map(|s| u64::from(s.live())).sum()
        };
        // Live: the sectors, the counters record and the checkpoint's pages but its root:
        // one of directory, one of segment table, the rest the map's.
        let pages = u64::from(ftl.log.checkpoint_len().unwrap()) - 1;
        assert_eq!(live(&ftl), ftl.mapped_sectors() + 1 + pages);
        // Both anchors wear out: the next root does not take, nor the turn to the other.
        let anchors = ftl.log.volume().anchors.unwrap();
        let units = ftl.log.device().units_per_segment();
        let timebombs = anchors
            .iter()
            .flat_map(|&a| (0..units).map(move |u| u32::from(a) * units + u))
            .map(|block| Timebomb {
                block,
                at_erases: 0,
            })
            .collect();
        let faults = FaultConfig {
            timebombs,
            ..FaultConfig::default()
        };
        ftl.log.device_mut().flash_mut().set_faults(faults);
        for k in 0..8 {
            ftl.write_to(k, &data, None).unwrap();
        }
        Ftl::checkpoint(&mut ftl).unwrap();
        assert!(!ftl.log.keeps_checkpoints(), "the anchors held");
        assert_eq!(ftl.miscounted_segments().unwrap(), alloc::vec![]);
        // The map's pages stay live, the directory and the segment table do not.
        assert_eq!(live(&ftl), ftl.mapped_sectors() + 1 + pages - 2);
        // Every sector reads back, after a remount too (by a scan: no root is left).
        let check = |ftl: &mut Ftl<NorSegments<NorSim>>| {
            let mut buf = alloc::vec![0u8; ftl.sector_size()];
            for k in 0..40 {
                ftl.read(k, &mut buf).unwrap();
                assert_eq!(buf, data, "sector {k}");
            }
        };
        check(&mut ftl);
        let mut ftl = Ftl::mount(ftl.close().unwrap(), config).unwrap();
        assert!(!ftl.log.restored());
        check(&mut ftl);
    }
}
