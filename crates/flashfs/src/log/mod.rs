//! The log-structured store: segments filled by several write heads, never overwritten in
//! place, reclaimed by a cleaner, levelled for wear.
//!
//! The log knows slots, tags and liveness; it does not know what the data means. Its owner
//! (the block device, the file system) says which slots are live at mount, updates its maps
//! when the cleaner moves a slot, and may veto copying a slot it no longer needs.

pub mod checkpoint;
mod death_age;
pub mod lifetime;
pub mod policy;
pub mod region;
mod scrub;
pub mod segment;
mod startup;
pub use startup::CheckpointPages;

use alloc::vec::Vec;

use flash::FlashError;

use crate::error::{Error, Result};
use crate::media::tag::{Kind, SegHeader, Tag, TagState, Volume, MAX_SEQ};
use crate::media::{HeaderState, SegGeometry, Segments, Tier};
pub use checkpoint::CHECKPOINT_MIN_SEGMENTS;
use checkpoint::{
    AnchorPair, Anchors, Record, Root, SegEntry, Which, ANCHOR_HEAD, DIR_KEY, SEG_ENTRY,
};
use death_age::DeathAge;
pub use lifetime::Lifetime;
use policy::{threshold, Policy};
pub use region::{Regions, Shares};
pub use scrub::ScrubReport;
use segment::{SegInfo, SegState};

/// Where a slot is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SlotAddr {
    /// Segment.
    pub seg: u32,
    /// Slot within the segment.
    pub slot: u32,
}

/// A write head: an open segment that data of one temperature streams into, so the cleaner
/// finds segments of uniformly hot or uniformly cold data (Kawaguchi §3.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Head {
    /// Data rewritten recently: likely to die soon.
    Hot,
    /// New data, or data not rewritten for long.
    Warm,
    /// Survivors of cleaning: the coldest data.
    Cold,
    /// The owner's own bookkeeping records (trim and loss records of the block device).
    Meta,
}

const HEADS: usize = 4;

/// Segments a device needs before heads write apart ([`LogConfig::separate_cleaning_head`],
/// [`LogConfig::separate_meta`]): below, each extra open segment is more than a sixteenth
/// of the device, and the capacity it holds back costs more than separation saves.
pub const SEPARATE_HEADS_MIN_SEGMENTS: u32 = 16;

/// Slots of the segments [`LogConfig::checkpoint_set`] counts: a block of 64 pages, as on the
/// large-page NAND presets.
pub const SET_SEGMENT_SLOTS: u32 = 64;

/// Segments a device needs before short-lived data gets a head of its own
/// ([`LogConfig::hot_head`]): the segment of capacity it holds back is then at most a 64th
/// of the device, whatever the workload. On 448 KiB in 56 segments it held back 2%, and
/// `flashfs bench tffs` lost more there than it gained (phone +0.5 points, fax −0.6,
/// recorder −1.4).
pub const HOT_HEAD_MIN_SEGMENTS: u32 = 64;

/// The file data the fast tier of a volume on two devices takes ([`Log::fast_tier_share`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FastShare {
    /// Any (fewer than half of its slots live). Its other half stays for the metadata and
    /// for the cleaner's room, so data never pushes the metadata out to the bulk tier;
    /// data written there stays until it is rewritten or deleted, and what does not fit
    /// goes to the bulk tier as on one device.
    Any,
    /// Only data replacing a version that lies on the fast tier (fewer than three quarters
    /// live): the old version is live until the commit that supersedes it, after which the
    /// tier holds what it held, so the file stays where it was instead of the tier's share
    /// going to whichever files are written next. The last quarter stays the metadata's
    /// and the cleaner's whatever is rewritten before a commit.
    Replacing,
    /// None (three quarters or more live, or a volume on one device).
    None,
}

/// Free segments the fast tier of a volume on two devices keeps by cleaning its own: one for
/// the metadata head to open next, one for a checkpoint's set.
const FAST_TIER_FREE: u32 = 2;

impl Head {
    const ALL: [Head; HEADS] = [Head::Hot, Head::Warm, Head::Cold, Head::Meta];

    /// Code recorded in the header of the segments the head opens.
    fn code(self) -> u8 {
        match self {
            Head::Hot => 1,
            Head::Warm => 2,
            Head::Cold => 3,
            Head::Meta => 4,
        }
    }

    fn from_code(c: u8) -> Option<Head> {
        Head::ALL.into_iter().find(|h| h.code() == c)
    }
}

/// How the log behaves: every policy is a setting, measured by `flashfs bench`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogConfig {
    /// Victim choice. The adaptive policy weighs a segment's full age, as cost-benefit does,
    /// on a device of fewer than [`SEPARATE_HEADS_MIN_SEGMENTS`] segments (one head there).
    pub policy: Policy,
    /// Whether survivors of cleaning go to a head of their own (otherwise all heads are one).
    /// Ignored (one head) on a device of fewer than [`SEPARATE_HEADS_MIN_SEGMENTS`] segments.
    pub separate_cleaning_head: bool,
    /// Whether user writes are split into hot and warm heads by update frequency. Off by
    /// default: each head keeps a partly filled segment open, which a small device (the
    /// 28F008SA's 64 segments) feels as lost slack; worth it on large devices.
    pub hot_cold: bool,
    /// Free segments below which the cleaner starts (Kawaguchi's N = 12).
    pub clean_start: u32,
    /// Free segments only the cleaner may use; users get ENOSPC before touching them. Two
    /// is the least that survives every power cut: cleaning one victim may take one segment
    /// before the victim frees its own, so one free segment exists at every instant, and
    /// after a cut the cleaner always has a whole segment to restart in — even when the cut
    /// fell just as its open segment filled, or tore the next slot of a head.
    pub reserve: u32,
    /// Segments per thousand held back from the volume's size to replace blocks that go bad
    /// in service, so the exported size holds as the device wears.
    pub bad_block_permille: u32,
    /// Static wear leveling moves cold data off the least-worn segment when the erase-count
    /// spread exceeds this (0 disables it).
    pub wear_spread: u32,
    /// Erase cycles the part is rated for (0: the device's own rating,
    /// [`Segments::rated_cycles`]). As the most worn segment comes within `wear_spread` of
    /// them, the spread the leveller allows narrows with the cycles left, down to 1: every
    /// segment then reaches the end of its life together, instead of up to `wear_spread`
    /// cycles short of it when the first wears out.
    pub rated_cycles: u32,
    /// Live slots the cleaner copies per user write when it runs in the foreground: the
    /// cleaning work is spread so no single write waits for a whole segment.
    pub step_slots: u32,
    /// Whether erases run in the background on their bank while other banks work.
    pub background_erase: bool,
    /// Whether writes the owner says are short-lived ([`Head::Hot`]) get a head of their own
    /// even without hot/cold separation's classification of every write: a file system
    /// knows that a small cyclic record file's blocks die after a few more records, and
    /// kept apart they leave segments that empty by themselves instead of holes in segments
    /// of data kept for years (`flashfs bench tffs`, phone on 8192/64: bytes copied by the
    /// cleaner 0.101 → 0.006 per user byte, endurance 76.6 → 82.7%). Ignored on a device of
    /// fewer than [`HOT_HEAD_MIN_SEGMENTS`] segments.
    pub hot_head: bool,
    /// Whether the owner's metadata gets a head of its own even without hot/cold
    /// separation: a file system's index nodes die young together, so segments of them
    /// clean cheaply; a block device's few records are not worth an open segment. Ignored
    /// on a device of fewer than [`SEPARATE_HEADS_MIN_SEGMENTS`] segments.
    pub separate_meta: bool,
    /// Whether every program is read back and compared (slot data and tag, segment
    /// headers), and a segment is checked to read erased before its header is written. A
    /// mismatch is handled as a failed program (the slot is written again elsewhere, the
    /// segment retired). Catches programs and erases that report success and do nothing,
    /// at the cost of a read per program (on NAND, a spare read per earlier slot of the
    /// segment too).
    pub verify_programs: bool,
    /// Whether a volume formatted with this setting keeps checkpoints, on a device of at
    /// least `checkpoint_min_segments` segments: two anchor segments hold roots, and a close
    /// writes the segment table and the owner's map, so that the next mount reads them
    /// instead of scanning every segment ([`checkpoint`]).
    pub checkpoints: bool,
    /// Segments a device needs before its volumes keep checkpoints
    /// ([`CHECKPOINT_MIN_SEGMENTS`] by default: on smaller ones a scan is cheap and the
    /// anchors cost more than they save).
    pub checkpoint_min_segments: u32,
    /// Free segments a checkpoint lets the log open before the next one (its *set*): after
    /// a power cut, a mount reads the set's headers and the tags of the segments written,
    /// instead of every segment. A checkpoint is written once half of them are used, or as
    /// many slots were written as half of them hold; if they run out first, the log goes on
    /// outside them and the next mount scans. Counted
    /// in segments of [`SET_SEGMENT_SLOTS`] slots; larger segments (NAND segments of
    /// several blocks, SPEC.md §2.1) take proportionally fewer, at least 4, so that a
    /// roll-forward reads about as many tags whatever the segments' size, and smaller ones
    /// (the W25Q64JV's 30 slots) proportionally more, as many as a root names, so that
    /// checkpoints come as rarely.
    pub checkpoint_set: u32,
    /// Whether a mount scans every segment even when a checkpoint is current (the baseline
    /// `flashfs bench mount` measures against).
    pub scan_mount: bool,
    /// Which segments go to SLC mode on MLC NAND (FlexFS's regions; ignored elsewhere):
    /// `None` takes the volume's setting, which a format records
    /// ([`Regions::MLC_DEFAULT`] on a part with an SLC mode unless given);
    /// `Some` overrides it for this mount without changing what the volume records.
    pub regions: Option<Regions>,
    /// Percent of idle time background migration may use (FlexFS's 100%, 50%, 10%): after
    /// each step it rests long enough to keep to the share, so a request arriving in idle
    /// time is less likely to wait for a step. 100 migrates without rest.
    pub migration_share: u8,
    /// FlexFS's wear management: the part must last this long at least, so the share of
    /// new data going to SLC segments (which wears the part three times as fast) is held
    /// to what the erases left allow ([`lifetime`]). `None`: no guarantee.
    pub lifetime: Option<Lifetime>,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            policy: Policy::default(),
            separate_cleaning_head: true,
            hot_cold: false,
            hot_head: false,
            clean_start: 12,
            reserve: 2,
            bad_block_permille: 10,
            wear_spread: 1000,
            rated_cycles: 0,
            step_slots: 16,
            background_erase: true,
            separate_meta: false,
            verify_programs: false,
            checkpoints: true,
            checkpoint_min_segments: CHECKPOINT_MIN_SEGMENTS,
            checkpoint_set: 32,
            scan_mount: false,
            regions: None,
            migration_share: 100,
            lifetime: None,
        }
    }
}

/// What the log has done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogStats {
    /// Slots written for the owner.
    pub user_slots: u64,
    /// Slots copied by the cleaner.
    pub copied_slots: u64,
    /// Segment headers written.
    pub headers: u64,
    /// Segments erased.
    pub erases: u64,
    /// Segments cleaned (victims).
    pub cleaned: u64,
    /// Segments cleaned to level wear rather than to gain space.
    pub wear_moves: u64,
    /// Of `copied_slots`, those copied out of segments cleaned to level wear.
    pub wear_copied_slots: u64,
    /// Segments retired as bad.
    pub retired: u64,
    /// Live slots that could not be read back while cleaning (data lost, reported).
    pub lost_slots: u64,
    /// Segments found with an unreadable header at mount.
    pub unreadable_headers: u64,
    /// Segments opened that were not yet erased or whose bank was still erasing: each costs
    /// the writer a wait.
    pub stalled_opens: u64,
    /// Checkpoints written.
    pub checkpoints: u64,
    /// Slots written for checkpoints (body and directory pages).
    pub checkpoint_slots: u64,
    /// Records (roots and marks) written to the anchors.
    pub anchor_records: u64,
    /// Times the working anchors began to move to less worn segments.
    pub anchor_moves: u64,
    /// Of `copied_slots`, those the cleaner moved from an SLC segment to an MLC one
    /// ([`Regions`]).
    pub migrated_slots: u64,
}

/// How a mount found the log's state.
#[derive(Debug)]
pub enum Start {
    /// By a scan: every valid tag of the log, which the owner resolves into its map and marks
    /// live ([`Log::mark_live`]).
    Scanned(Vec<(SlotAddr, Tag)>),
    /// From a checkpoint and what was written after it.
    Restored(Restored),
}

/// What a mount from a checkpoint gives the owner.
#[derive(Debug)]
pub struct Restored {
    /// Pages of the owner's in the checkpoint, which it reads through
    /// [`Log::checkpoint_pages`] to rebuild its state as it was at the checkpoint.
    pub pages: u32,
    /// Every valid tag written after the checkpoint (the cleaner's copies among them), which
    /// the owner applies over that map as a scan would.
    pub rolled: Vec<(SlotAddr, Tag)>,
    /// The sequence number of the first slot written after the checkpoint: every original
    /// in `rolled` has one at least; a copy below it is of a version the checkpoint knew.
    pub seq: u64,
}

/// The owner's pages of the newest checkpoint, read from where the log keeps them now (the
/// cleaner moves them like any slot). An owner that keeps only part of its state in RAM
/// reads the rest through this.
pub trait PageSource {
    /// Reads the owner's page `i` into `buf`'s front (a slot long); `false` if the checkpoint
    /// holds no page `i`. A page that does not read back whole is [`Error::Corrupt`].
    fn read_page(&mut self, i: u32, buf: &mut [u8]) -> Result<bool>;
}

/// What the owner of the log's data is told, and asked. Each call may read the owner's
/// checkpoint pages through `src`.
pub trait Owner {
    /// Pages the owner keeps in a checkpoint (0: none; its state then comes from a scan).
    fn pages(&self) -> u32 {
        0
    }
    /// Whether page `i` changed since a checkpoint last took it; the answer is forgotten, as
    /// the page is about to be written. Asked for every page in order, each page encoded
    /// ([`Owner::encode_page`]) before the next is asked about.
    fn take_dirty(&mut self, i: u32, src: &mut dyn PageSource) -> Result<bool> {
        let _ = (i, src);
        Ok(true)
    }
    /// Encodes page `i` into `buf` (a slot less the page's checksum); `false` if the
    /// checkpoint holds no page `i` this time (its content fits in another).
    fn encode_page(&mut self, i: u32, buf: &mut [u8], src: &mut dyn PageSource) -> Result<bool> {
        let _ = (i, buf, src);
        Ok(false)
    }
    /// Gives every live slot the owner holds that its pages' entries do not name (records
    /// it lists apart, say). A checkpoint's segment table counts, per segment, the live
    /// slots the entries name, so that a mount need not read the pages to count them; the
    /// owner marks these others live itself when it mounts ([`Log::mark_live`]).
    fn held_apart(&self, each: &mut dyn FnMut(SlotAddr)) {
        let _ = each;
    }
    /// The checkpoint being written ended, written whole or (`ok` false) not: what
    /// [`Owner::take_dirty`] said was about to be written may not have been.
    fn checkpoint_ended(&mut self, ok: bool) {
        let _ = ok;
    }
    /// Whether a slot the cleaner is about to copy (or the scrub to check) is still needed
    /// (default: yes). `oldest_elsewhere` is the lowest sequence number any other segment may
    /// still hold: a record that hides older versions is needed only above it. The log keeps
    /// no bit per slot, only a count per segment, so the answer also says whether the slot
    /// was still counted ([`Liveness::Released`]) or was let go before ([`Liveness::Dead`]).
    fn is_live(
        &mut self,
        tag: &Tag,
        at: SlotAddr,
        oldest_elsewhere: u64,
        src: &mut dyn PageSource,
    ) -> Result<Liveness> {
        let _ = (tag, at, oldest_elsewhere, src);
        Ok(Liveness::Live)
    }
    /// The cleaner copied a live slot; an error leaves the original in place.
    fn moved(
        &mut self,
        tag: &Tag,
        from: SlotAddr,
        to: SlotAddr,
        src: &mut dyn PageSource,
    ) -> Result<()>;
    /// A live slot could not be read back while cleaning: its data is gone. `tag` is
    /// `None` when even the tag was unreadable (the owner then looks for the slot by its
    /// address). Returns whether the owner held the slot.
    fn lost(&mut self, tag: Option<&Tag>, at: SlotAddr, src: &mut dyn PageSource) -> Result<bool> {
        let _ = (tag, at, src);
        Ok(true)
    }
}

/// What an owner says of a slot it is asked about ([`Owner::is_live`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// Still needed.
    Live,
    /// Not needed, and let go before ([`Log::kill`]).
    Dead,
    /// Not needed from this answer on: it counted as live until now (a record that has
    /// nothing left to hide), and the log lets it go.
    Released,
}

/// The lowest sequence numbers any segments hold (see [`Log::oldest_seqs`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OldestSeqs {
    seg: u32,
    first: u64,
    second: u64,
}

impl OldestSeqs {
    /// The lowest sequence number held by any segment other than `seg`.
    pub fn except(&self, seg: u32) -> u64 {
        if seg == self.seg {
            self.second
        } else {
            self.first
        }
    }
}

/// Which victims a cleaning step may choose from.
#[derive(Debug, Clone, Copy)]
struct Take {
    /// The score a victim must exceed.
    th: f64,
    /// The live slots it may hold at most.
    max_live: u32,
    /// Whether a segment whose data is dying this very instant (which a policy weighing age
    /// scores zero) may be taken when nothing else qualifies.
    fresh: bool,
    /// Whether only segments in SLC mode qualify (migration to MLC).
    slc: bool,
    /// Whether segments of rewritten data are left out (locality-aware migration).
    cold: bool,
    /// Whether only segments of the fast tier qualify (the NVRAM beside the flash).
    fast: bool,
}

impl Take {
    /// Cleaning that must free a segment now: any victim with something to gain.
    const ANY: Take = Take {
        th: 0.0,
        max_live: u32::MAX,
        fresh: true,
        slc: false,
        cold: false,
        fast: false,
    };

    /// Cleaning of the fast tier running short (on two devices): any of its segments with
    /// dead slots, whatever the flash has free.
    const FAST: Take = Take {
        th: 0.0,
        max_live: u32::MAX,
        fresh: false,
        slc: false,
        cold: false,
        fast: true,
    };

    /// Cleaning ahead of need: victims scoring above `th` with at most `max_live` live slots.
    fn above(th: f64, max_live: u32) -> Take {
        Take {
            th,
            max_live,
            fresh: false,
            slc: false,
            cold: false,
            fast: false,
        }
    }

    /// Migration: any segment in SLC mode, whatever it holds; of rewritten data too unless
    /// `keep_hot`.
    fn slc(keep_hot: bool) -> Take {
        Take {
            th: f64::NEG_INFINITY,
            max_live: u32::MAX,
            fresh: true,
            slc: true,
            cold: keep_hot,
            fast: false,
        }
    }
}

/// Who a write is for: the reserve is the cleaner's alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Writer {
    Owner,
    Cleaner,
}

/// A segment being cleaned.
#[derive(Debug, Clone)]
struct Victim {
    seg: u32,
    /// Whether it was chosen to level wear.
    wear: bool,
    /// The next slot to look at.
    next: u32,
    /// Its tags, read when it was chosen.
    tags: Vec<TagState>,
    /// Whether a slot it used has no valid tag (torn, or decayed: it may have been live).
    doubtful: bool,
}

impl Victim {
    fn new(seg: u32, wear: bool, tags: Vec<TagState>) -> Self {
        Victim {
            seg,
            wear,
            next: 0,
            tags,
            doubtful: false,
        }
    }
}

/// The log.
#[derive(Debug)]
pub struct Log<D> {
    dev: D,
    geo: SegGeometry,
    volume: Volume,
    config: LogConfig,
    segs: Vec<SegInfo>,
    heads: [Option<u32>; HEADS],
    free: u32,
    /// Of them, the fast tier's (a volume on two devices; 0 on one device).
    free_fast: u32,
    /// Segments open, full or failing: those whose headers identify the volume.
    in_use: u32,
    seq: u64,
    stats: LogStats,
    erasing_until: Vec<u64>,
    /// Cleaned segments whose erase waits for their bank to have no open head.
    deferred: Vec<u32>,
    victim: Option<Victim>,
    buf: Vec<u8>,
    /// How old slots are when they die, on a device too small for a head of survivors.
    death_age: DeathAge,
    /// The checkpoint anchors, on a volume that keeps checkpoints.
    anchors: Option<Anchors>,
    /// The anchors' last state once they failed and checkpoints stopped: the owner still
    /// reads its pages of the last checkpoint through it, and the cleaner keeps them.
    retired: Option<Anchors>,
    /// Whether the mount restored the log from a checkpoint.
    restored: bool,
    /// Whether the mount found the log as a close left it: restored from a root a close
    /// wrote, with nothing written after it.
    found_closed: bool,
    /// Segments opened while a checkpoint's segment table is written, which its root lists.
    opened: Option<Vec<u32>>,
    /// Whether a checkpoint's pages are being written: they may go outside the set.
    checkpointing: bool,
    /// Whether a page of the newest checkpoint did not read back (decay): the mount after
    /// this session must scan, and no checkpoint may name that page again.
    distrusted: Distrust,
    /// The share of new data that goes to SLC segments ([`Regions::Dynamic`]).
    allocator: region::Allocator,
    /// When the current idle window began, and when the last call to [`Log::idle`] ended
    /// (device time): a call that starts where the last ended continues its window.
    idle_from: core::time::Duration,
    idle_end: Option<core::time::Duration>,
    /// The wear budget of [`LogConfig::lifetime`].
    budget: Option<lifetime::WearBudget>,
}

/// Whether the newest checkpoint can still be mounted from ([`Log::checkpoint`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Distrust {
    /// Every page read so far read back.
    No,
    /// A page did not: a mark is due in the anchor.
    MarkDue,
    /// The mark is down: no checkpoint is written for the rest of the session.
    Marked,
}

impl<D: Segments> Log<D> {
    fn empty(dev: D, config: LogConfig, volume: Volume) -> Result<Self> {
        let geo = dev.geometry();
        // The segment table counts slots in 16 bits (in RAM and in checkpoints).
        if geo.slots > u32::from(u16::MAX) {
            return Err(Error::InvalidArgument(
                "more slots per segment than the log counts (65,535)",
            ));
        }
        Ok(Log {
            geo,
            volume,
            config,
            segs: alloc::vec![SegInfo::new(SegState::Dirty, 0); geo.segments as usize],
            heads: [None; HEADS],
            // Every segment starts Dirty, which counts as free.
            free: geo.segments,
            free_fast: (0..geo.segments)
                .filter(|&s| dev.tier(s) == Tier::Fast)
                .count() as u32,
            in_use: 0,
            seq: 1,
            stats: LogStats::default(),
            erasing_until: alloc::vec![0; geo.banks as usize],
            deferred: Vec::new(),
            victim: None,
            death_age: DeathAge::new(geo.segments, geo.segments < SEPARATE_HEADS_MIN_SEGMENTS),
            anchors: None,
            retired: None,
            restored: false,
            found_closed: false,
            opened: None,
            checkpointing: false,
            distrusted: Distrust::No,
            allocator: region::Allocator::default(),
            idle_from: core::time::Duration::ZERO,
            idle_end: None,
            budget: config
                .lifetime
                .map(|l| lifetime::WearBudget::new(l, dev.now())),
            buf: alloc::vec![0; geo.slot_size as usize],
            dev,
        })
    }

    /// Formats a new log on `dev`, keeping the wear record of segments that have one. The
    /// volume's `size` is chosen by `size` from the slots the owner may keep live; where
    /// checkpoints leave it no room ([`Error::NoSpace`]), the volume goes without them.
    pub fn format(
        dev: D,
        config: LogConfig,
        format: u8,
        size: impl Fn(u64) -> Result<u32>,
    ) -> Result<Self> {
        let mut dev = dev;
        dev.power_cut();
        let slot_shift = dev.geometry().slot_size.trailing_zeros() as u8;
        let unit_shift = dev.units_per_segment().trailing_zeros() as u8;
        let regions = config.regions.unwrap_or(if dev.has_slc_mode() {
            Regions::MLC_DEFAULT
        } else {
            Regions::MlcOnly
        });
        let mut log = Self::empty(
            dev,
            config,
            Volume {
                format,
                slot_shift,
                unit_shift,
                size: 0,
                anchors: None,
                regions: regions.code(),
            },
        )?;
        for seg in 0..log.geo.segments {
            if log.dev.is_bad(seg)? {
                log.set_state(seg, SegState::Bad);
                continue;
            }
            if let HeaderState::Valid(h) = log.dev.read_header(seg)? {
                log.segs[seg as usize].erase_count = h.erase_count;
            }
            log.erase_segment(seg)?;
        }
        if config.checkpoints && log.geo.segments >= config.checkpoint_min_segments.max(4) {
            // The first two good segments, so that their numbers fit the header's bytes.
            let good: Vec<u32> = (0..log.geo.segments.min(u8::MAX as u32))
                .filter(|&s| log.segs[s as usize].state == SegState::Free)
                .take(2)
                .collect();
            if let [a, z] = good[..] {
                log.volume.anchors = Some([a as u8, z as u8]);
                log.set_state(a, SegState::Anchor);
                log.set_state(z, SegState::Anchor);
                log.anchors = Some(Anchors::new([a, z]));
            }
        }
        log.volume.size = match size(log.capacity_slots()) {
            // Too small for checkpoints beside the volume asked for: it goes without.
            Err(Error::NoSpace) if log.anchors.is_some() => {
                for seg in log.anchors.take().map_or([0; 2], |a| a.pair.segs) {
                    log.set_state(seg, SegState::Free);
                }
                log.volume.anchors = None;
                size(log.capacity_slots())?
            }
            r => r?,
        };
        if log.volume.size > log.dev.max_key() {
            return Err(Error::InvalidArgument(
                "volume too large for the keys this medium's tags carry",
            ));
        }
        if let Some(a) = &log.anchors {
            // The first anchor gets its header now (the format just erased it); the other
            // stays erased until the first is full.
            let seg = a.pair.segs[0];
            let header = SegHeader {
                head: ANCHOR_HEAD,
                slc: false,
                erase_count: log.segs[seg as usize].erase_count,
                open_seq: log.seq,
                volume: log.volume,
            };
            log.dev.write_header(seg, &header)?;
            log.stats.headers += 1;
            let first = log.dev.reserved_slots();
            if let Some(a) = &mut log.anchors {
                a.pair.current = 0;
                a.pair.next = first;
            }
        }
        // One header makes the volume findable even while it holds no data.
        log.head_segment(Head::Warm, Writer::Owner)?;
        log.dev.sync()?;
        Ok(log)
    }

    /// Mounts the log on `dev`: from its checkpoint if one is current (and the configuration
    /// does not ask for a scan), else by scanning every segment. The owner then rebuilds its
    /// map from what [`Start`] gives and marks live what it holds ([`Log::mark_live`]): after
    /// a scan everything; from a checkpoint, whose segment table counted what the owner's
    /// pages name, only what it holds apart ([`Owner::held_apart`]) and what it rolls
    /// forward, killing ([`Log::kill`]) what that replaces.
    pub fn mount(mut dev: D, config: LogConfig) -> Result<(Self, Start)> {
        // A mount comes after a power cut, for all it knows: what waited in RAM is gone.
        dev.power_cut();
        if !config.scan_mount {
            let mut log = Self::unmounted(dev, config)?;
            if let Some(r) = log.restore()? {
                return Ok((log, Start::Restored(r)));
            }
            // Whatever the attempt read is forgotten: the scan starts afresh.
            let (log, found) = Self::scan(log.dev, config)?;
            return Ok((log, Start::Scanned(found)));
        }
        let (log, found) = Self::scan(dev, config)?;
        Ok((log, Start::Scanned(found)))
    }

    fn unmounted(dev: D, config: LogConfig) -> Result<Self> {
        Self::empty(
            dev,
            config,
            Volume {
                format: 0,
                slot_shift: 0,
                unit_shift: 0,
                size: 0,
                anchors: None,
                regions: Regions::MlcOnly.code(),
            },
        )
    }

    /// Mounts by scanning every segment: the log with no slot live and every valid tag found.
    fn scan(dev: D, config: LogConfig) -> Result<(Self, Vec<(SlotAddr, Tag)>)> {
        let mut log = Self::unmounted(dev, config)?;
        let mut headers = Vec::new();
        let mut max_seq = 0;
        for seg in 0..log.geo.segments {
            if log.dev.is_bad(seg)? {
                log.set_state(seg, SegState::Bad);
                continue;
            }
            match log.dev.read_header(seg)? {
                HeaderState::Valid(h) => {
                    max_seq = max_seq.max(h.open_seq);
                    headers.push((seg, h));
                }
                HeaderState::Bad => log.set_state(seg, SegState::Bad),
                HeaderState::Garbage => {
                    log.stats.unreadable_headers += 1;
                    log.set_state(seg, SegState::Dirty);
                }
                HeaderState::Erased => log.set_state(seg, SegState::Dirty),
            }
        }
        // Headers that do not read whole most likely say a volume was there: damage, not
        // a blank part (a part holding something else reads the same, hence the message).
        let newest = headers.iter().max_by_key(|(_, h)| h.open_seq).ok_or(
            if log.stats.unreadable_headers > 0 {
                Error::Corrupt(
                    "no segment header reads whole (damaged headers, or not a flashfs volume)",
                )
            } else {
                Error::NotFormatted("no segment header")
            },
        )?;
        log.volume = newest.1.volume;
        if 1u32.checked_shl(log.volume.slot_shift as u32) != Some(log.geo.slot_size) {
            return Err(Error::NotFormatted("slot size differs from the device's"));
        }
        if 1u32.checked_shl(u32::from(log.volume.unit_shift)) != Some(log.dev.units_per_segment()) {
            return Err(Error::NotFormatted(
                "erase units per segment differ from the device's (formatted by another layout)",
            ));
        }
        if Regions::from_code(log.volume.regions).is_none() {
            return Err(Error::NotFormatted(
                "unknown regions setting in the segment headers",
            ));
        }
        if let Some(anchors) = log.volume.anchors {
            let segs = anchors.map(u32::from);
            headers.retain(|(seg, _)| !segs.contains(seg));
            // Anchors stay out of the pool even when one has gone bad (the volume's headers
            // still name them), but checkpoints then stop.
            let mut good = true;
            for &s in &segs {
                match log.segs.get(s as usize).map(|i| i.state) {
                    Some(SegState::Bad) | None => good = false,
                    Some(_) => log.set_state(s, SegState::Anchor),
                }
            }
            if good {
                let startup::AnchorScan {
                    anchors: a,
                    records,
                    ..
                } = log.read_anchors(segs)?;
                max_seq = max_seq.max(records.first().map_or(0, |r| r.0));
                log.anchors = Some(Anchors {
                    // A root among the records may look current to a later mount: the first
                    // program of this session must put it out of date.
                    needs_mark: !records.is_empty(),
                    ..a
                });
            }
        }
        let newest_open = max_seq;
        let known: Vec<u32> = headers.iter().map(|(_, h)| h.erase_count).collect();
        let mean = if known.is_empty() {
            0
        } else {
            (known.iter().map(|&c| c as u64).sum::<u64>() / known.len() as u64) as u32
        };
        let mut found = Vec::new();
        let mut tags = alloc::vec![TagState::Erased; log.geo.slots as usize];
        // Per head slot: the newest segment its head opened. And the newest segment holding
        // copies: copies are ordered by the opening order of their segments, so the cleaner's
        // head may only resume in a segment no older than that.
        let mut newest_of: [Option<(u64, u32)>; HEADS] = [None; HEADS];
        let mut newest_copies = 0;
        for (seg, h) in headers {
            if h.volume != log.volume {
                log.set_state(seg, SegState::Dirty);
                continue;
            }
            log.dev.read_tags(seg, &mut tags)?;
            log.drop_impossible_seqs(newest_open, &mut tags);
            if let Some(head) = Head::from_code(h.head) {
                let i = log.head_index(head);
                if newest_of[i].is_none_or(|(o, _)| h.open_seq > o) {
                    newest_of[i] = Some((h.open_seq, seg));
                }
            }
            let info = &mut log.segs[seg as usize];
            info.erase_count = h.erase_count;
            info.set_open_seq(h.open_seq);
            info.set_cells(h.slc, h.head == Head::Hot.code());
            info.set_used(
                tags.iter()
                    .rposition(|t| *t != TagState::Erased)
                    .map_or(0, |p| p as u32 + 1),
            );
            for (slot, t) in tags.iter().enumerate() {
                if let TagState::Valid(tag) = t {
                    if tag.copy {
                        newest_copies = newest_copies.max(h.open_seq);
                    }
                    max_seq = max_seq.max(tag.seq);
                    info.set_min_seq(info.min_seq().min(tag.seq));
                    found.push((
                        SlotAddr {
                            seg,
                            slot: slot as u32,
                        },
                        *tag,
                    ));
                }
            }
            log.set_state(seg, SegState::Full);
        }
        for s in log.segs.iter_mut().filter(|s| s.state == SegState::Dirty) {
            s.erase_count = mean;
        }
        log.seq = max_seq + 1;
        let cleaner = log.head_index(Head::Cold);
        for (i, newest) in newest_of.iter().enumerate() {
            if let Some((open_seq, seg)) = *newest {
                if i != cleaner || open_seq >= newest_copies {
                    log.resume(i, seg)?;
                }
            }
        }
        Ok((log, found))
    }

    /// Reopens a head in the segment it was filling when the volume was last used, so the
    /// room left in it is not lost. A cut between a NOR slot's data and its tag leaves
    /// programmed bytes under an erased tag: the medium says past which slots it may write
    /// ([`Segments::resume_slot`]).
    fn resume(&mut self, head: usize, seg: u32) -> Result<()> {
        let Some(used) = self.dev.resume_slot(seg, self.segs[seg as usize].used())? else {
            return Ok(());
        };
        self.resume_at(head, seg, used);
        Ok(())
    }

    /// Resumes `head` in `seg` at slot `used`, known to be erased from there on.
    fn resume_at(&mut self, head: usize, seg: u32, used: u32) {
        if used >= self.geo.slots {
            return;
        }
        self.segs[seg as usize].set_used(used);
        self.set_state(seg, SegState::Open);
        self.heads[head] = Some(seg);
        self.seal(seg);
    }

    /// Whether version `a` of a slot beats version `b` at mount: the higher sequence number;
    /// between equal ones (a slot and the cleaner's copies of it, identical in content) the
    /// copy, and between copies the one in the later-opened segment — so the originals left
    /// in a cleaned segment whose erase never happened come out dead.
    pub fn newer(&self, a: (SlotAddr, &Tag), b: (SlotAddr, &Tag)) -> bool {
        let rank =
            |(at, t): (SlotAddr, &Tag)| (t.seq, t.copy, self.segs[at.seg as usize].open_seq());
        rank(a) > rank(b)
    }

    /// Ends a mount once the owner has marked what is live: segments left with nothing live
    /// are free to erase.
    pub fn finish_mount(&mut self) {
        let empty: Vec<u32> = (0..self.geo.segments)
            .filter(|&i| {
                let s = self.segs[i as usize];
                s.state == SegState::Full && s.live() == 0
            })
            .collect();
        // Some segment must keep a header, or a cut during the erases leaves no volume.
        let keep = if self.in_use as usize == empty.len() {
            empty
                .iter()
                .copied()
                .max_by_key(|&i| self.segs[i as usize].open_seq())
        } else {
            None
        };
        for seg in empty.into_iter().filter(|&i| Some(i) != keep) {
            self.set_state(seg, SegState::Dirty);
            self.deferred.push(seg);
        }
    }

    /// The sequence number the last appended slot got.
    pub fn last_seq(&self) -> u64 {
        self.seq - 1
    }

    /// Marks a slot found at mount live: its segment counts it. The log keeps no bit per
    /// slot (its RAM would grow with the device), so each live slot is marked once.
    pub fn mark_live(&mut self, at: SlotAddr) {
        self.segs[at.seg as usize].add_live();
    }

    /// The slot is no longer needed (overwritten, trimmed, deleted): its segment counts one
    /// live slot less. Called once per slot that was live (written, or marked at mount).
    pub fn kill(&mut self, at: SlotAddr) {
        // The owner forgot something the newest root holds: a close must say so anew.
        if let Some(a) = &mut self.anchors {
            a.closed_root = false;
        }
        let now = self.now_ns();
        self.death_age.died(at.seg, now);
        let s = &mut self.segs[at.seg as usize];
        s.drop_live();
        s.touch(now);
    }

    /// Reads a slot's data (one slot long).
    pub fn read(&mut self, at: SlotAddr, buf: &mut [u8]) -> Result<()> {
        let r = self.dev.read_slot(at.seg, at.slot, buf);
        self.checked_read(at, r)
    }

    /// Reads a trim, loss or counters record, as [`Log::read`] but only as far as its write
    /// went: the log's own slots are never programmed in place ([`Log::patch`]).
    pub fn read_record(&mut self, at: SlotAddr, buf: &mut [u8]) -> Result<()> {
        let r = self
            .dev
            .read_slot_written(at.seg, at.slot, buf, 0)
            .map(|_| ());
        self.checked_read(at, r)
    }

    /// Passes a read's result on; a slot that did not read makes its segment one that loses
    /// data, which gets no more: the cleaner moves what still reads and retires it.
    fn checked_read<T>(&mut self, at: SlotAddr, r: Result<T>) -> Result<T> {
        if r.as_ref().err() == Some(&Error::Io) {
            match self.segs[at.seg as usize].state {
                SegState::Open => self.fail(at.seg),
                SegState::Full => self.set_state(at.seg, SegState::Failing),
                _ => {}
            }
        }
        r
    }

    /// Reads a slot's data (one slot long), as [`Log::read`], and checks that its tag says
    /// it holds `key` of `kind`: a slot that holds something else (a page that read as
    /// erased, was taken for free space and written again while a map still named it) is
    /// damage, [`Error::Io`], never someone else's data. `tail`: the slot is programmed in
    /// place, if ever, only in its last `tail` bytes, so the bytes between what its write
    /// put there and those need not be read ([`Segments::read_slot_written`]); `None`: it
    /// may be anywhere past the written length, the slot is read whole.
    pub fn read_expecting(
        &mut self,
        at: SlotAddr,
        key: u32,
        kind: Kind,
        buf: &mut [u8],
        tail: Option<usize>,
    ) -> Result<()> {
        let read = match tail {
            Some(tail) => self.dev.read_slot_written(at.seg, at.slot, buf, tail),
            None => self.dev.read_slot_tag(at.seg, at.slot, buf),
        };
        let r = match read {
            Ok(TagState::Valid(t)) if t.key == key && t.kind == kind => Ok(()),
            Ok(_) => Err(Error::Io),
            // A map naming a retired block: what it held is gone.
            Err(Error::Flash(FlashError::BadBlock { .. })) => Err(Error::Io),
            Err(e) => Err(e),
        };
        self.checked_read(at, r)
    }

    /// Whether [`Log::patch`] works on this medium.
    pub fn can_patch(&self) -> bool {
        self.dev.can_patch()
    }

    /// Programs `bytes` at `offset` inside the data of the live slot `at`, in place, clearing
    /// bits only (reprogrammable NOR). The slot's data checksum covers only its written
    /// length, or is set aside by the in-place mark when the patch changes a byte inside it
    /// (SPEC.md §2.2), so the slot stays valid; the cleaner copies slots whole, with a fresh
    /// checksum, so the change moves with the slot. Only the owner's sectors are patched:
    /// the log's own slots (checkpoint pages and roots, trim, loss and counters records)
    /// never are, so they are read only as far as their writes went
    /// ([`Segments::read_slot_written`]).
    pub fn patch(&mut self, at: SlotAddr, offset: usize, bytes: &[u8]) -> Result<()> {
        if at.seg >= self.geo.segments || at.slot >= self.geo.slots {
            return Err(Error::InvalidArgument("patch of a slot outside the log"));
        }
        if offset
            .checked_add(bytes.len())
            .is_none_or(|e| e > self.geo.slot_size as usize)
        {
            return Err(Error::InvalidArgument("patch beyond its slot"));
        }
        self.dev.patch_slot(at.seg, at.slot, offset, bytes)?;
        if self.config.verify_programs {
            let mut back = alloc::vec![0u8; self.geo.slot_size as usize];
            let same = match self.dev.read_slot(at.seg, at.slot, &mut back) {
                Ok(()) => back[offset..offset + bytes.len()] == *bytes,
                Err(Error::Io) => false,
                Err(e) => return Err(e),
            };
            if !same {
                return Err(Error::Flash(FlashError::ProgramFailed { block: at.seg }));
            }
        }
        Ok(())
    }

    /// Appends a slot for the owner, cleaning first if space runs short.
    pub fn append(
        &mut self,
        head: Head,
        key: u32,
        kind: Kind,
        data: &[u8],
        owner: &mut dyn Owner,
    ) -> Result<SlotAddr> {
        if data.len() > self.geo.slot_size as usize {
            return Err(Error::InvalidArgument("data longer than a slot"));
        }
        if key > self.dev.max_key() {
            return Err(Error::InvalidArgument(
                "key beyond what this medium's tags carry",
            ));
        }
        match self.make_room(owner) {
            Ok(()) => {}
            // A loss record takes what its head's open segment has left even when the
            // cleaner can make no more room: it stands for the slot whose data was lost
            // (SPEC.md §4.1a), and without it the sector would read as never written after
            // the next mount.
            Err(Error::NoSpace) if kind == Kind::Lost && self.head_room(head) > 0 => {}
            Err(e) => return Err(e),
        }
        if self.seq > MAX_SEQ.min(self.dev.max_seq()) {
            return Err(Error::ReadOnly);
        }
        let tag = Tag {
            key,
            seq: self.seq,
            kind,
            copy: false,
        };
        self.seq += 1;
        let at = self.write(head, Writer::Owner, &tag, data)?;
        self.stats.user_slots += 1;
        Ok(at)
    }

    /// The lowest sequence number no tag can bear when the newest segment was opened at
    /// `newest_open` ([`Log::drop_impossible_seqs`]).
    pub(crate) fn impossible_seq(&self, newest_open: u64) -> u64 {
        let slots = 2 * u64::from(self.geo.segments) * u64::from(self.geo.slots);
        newest_open.saturating_add(slots)
    }

    /// Takes for torn every valid tag in `tags` whose sequence number no slot can have: each
    /// slot written since the newest segment was opened (at `newest_open`, or the newest root
    /// written) sits in a segment not erased since, so fewer than twice the log's slots came
    /// after it. A torn tag may pass its own check by chance (a 16-bit CRC on NOR, one in
    /// 65,536), with a key and sequence number of garbage: resumed from such a number, the
    /// log would number every later slot beyond it (found by flashfs torture on w25q64jv: a
    /// sequence number of 10¹², then a sector beyond the device at the next mount).
    pub(crate) fn drop_impossible_seqs(&self, newest_open: u64, tags: &mut [TagState]) {
        let limit = self.impossible_seq(newest_open);
        for t in tags.iter_mut() {
            *t = possible(*t, limit);
        }
    }

    /// Appends a second copy of a slot the owner appended (`tag`, `data`) to `head`: a copy
    /// as the cleaner writes them, with the same key, kind and sequence number, so a mount
    /// takes either for the other. For records whose loss to damage at rest must not take
    /// their effect along: the caller keeps the copy only if it landed in another segment
    /// than the first (it kills it otherwise). `None` when no room is left for it.
    pub fn append_twin(
        &mut self,
        head: Head,
        tag: Tag,
        data: &[u8],
        owner: &mut dyn Owner,
    ) -> Result<Option<SlotAddr>> {
        match self.make_room(owner) {
            Ok(()) => {}
            Err(Error::NoSpace) => return Ok(None),
            Err(e) => return Err(e),
        }
        let tag = Tag { copy: true, ..tag };
        self.write(head, Writer::Owner, &tag, data).map(Some)
    }

    /// Makes every slot appended so far durable.
    pub fn sync(&mut self) -> Result<()> {
        self.seal_heads();
        self.dev.sync()
    }

    /// Leaves the next slot of an open segment unprogrammed when programming it could destroy
    /// a slot written before it (the MSB page paired with a written LSB page of MLC NAND).
    /// Done whenever what the segment holds becomes something a power cut must not lose: at
    /// a flush, before a cleaned segment's erase, after a header, and on resuming a head.
    /// Skipping costs a page; writing filler there instead could itself tear.
    fn seal(&mut self, seg: u32) {
        let s = &mut self.segs[seg as usize];
        if s.state == SegState::Open
            && s.used() < self.geo.slots
            && self.dev.risks_earlier_slot(s.used())
        {
            s.set_used(s.used() + 1);
            if s.used() == self.geo.slots {
                self.close(seg);
            }
        }
    }

    fn seal_heads(&mut self) {
        for seg in self.heads.into_iter().flatten() {
            self.seal(seg);
        }
    }

    /// Uses `d` of idle device time to clean ahead of need and, under background migration,
    /// to migrate: while fewer than `clean_start` segments are free, a segment is worth
    /// cleaning if it gains more than its own erases kill (below), since the time costs
    /// nothing. Work stops when the window is used up (a step at a time, so a request
    /// arriving after the window waits for at most one step). Returns the time it used.
    ///
    /// Calls with nothing done on the device between them make one idle window, so a caller
    /// may give idle time in slices as it passes (a mount driven by the wall clock).
    pub fn idle(
        &mut self,
        d: core::time::Duration,
        owner: &mut dyn Owner,
    ) -> Result<core::time::Duration> {
        let start = self.dev.now();
        let continued = self.idle_end == Some(start);
        if !continued {
            self.idle_from = start;
        }
        self.allocator.idled(d.as_nanos() as u64, continued);
        // Only victims an eighth dead or more, and more dead slots than there are heads:
        // on a volume too full ever to have `clean_start` free segments, cleaning segments
        // of a slot or two of dead space reclaims no more than its own erases kill (on MLC
        // NAND an erase skips an MSB page in each open segment), and would go on for as
        // long as the device idles, wearing it for nothing. An SLC segment full of live
        // data counts as half dead, as the victim policy counts it, so idle cleaning still
        // migrates.
        let max_live = self
            .geo
            .slots
            .saturating_sub((self.geo.slots / 8).max(HEADS as u32 + 1));
        while (self.free < self.config.clean_start || self.victim.is_some())
            && self.dev.now() - start < d
        {
            if !self.clean_step(owner, self.config.step_slots, Take::above(0.0, max_live))? {
                break;
            }
        }
        if self.regions().migrates_when_idle() && self.dev.has_slc_mode() {
            self.migrate(start + d, owner)?;
        }
        let used = self.dev.now() - start;
        if used < d {
            self.dev.idle(d - used);
        }
        self.idle_end = Some(self.dev.now());
        Ok(used.min(d))
    }

    /// Background migration ([`Regions::Background`] and after): once the device has been
    /// idle for [`region::MIGRATION_WAIT`], moves SLC segments' data to MLC segments a
    /// cleaning step at a time until `end` or until nothing is left in SLC, resting after
    /// each step so that it uses [`LogConfig::migration_share`] of the time. A request
    /// arriving during a step waits for the step.
    fn migrate(&mut self, end: core::time::Duration, owner: &mut dyn Owner) -> Result<()> {
        let begin = self.idle_from + region::MIGRATION_WAIT;
        if begin >= end {
            return Ok(());
        }
        if self.dev.now() < begin {
            self.dev.idle(begin - self.dev.now());
        }
        let share = u32::from(self.config.migration_share.clamp(1, 100));
        // Cold segments first; rewritten data last, once the rest is in MLC, by which time
        // much of it has died in SLC.
        let mut keep_hot = self.regions().keeps_hot_in_slc();
        let (mut busy, moved) = (core::time::Duration::ZERO, self.stats.migrated_slots);
        while self.dev.now() < end {
            // Room for the copies first: migration frees a segment per two it empties.
            let t0 = self.dev.now();
            if self.free <= self.config.reserve {
                break;
            }
            if !self.clean_step(owner, self.config.step_slots, Take::slc(keep_hot))? {
                if !keep_hot {
                    break;
                }
                keep_hot = false;
                continue;
            }
            let step = self.dev.now() - t0;
            busy += step;
            let rest = step * (100 - share) / share;
            let left = end.saturating_sub(self.dev.now());
            if !rest.is_zero() && !left.is_zero() {
                self.dev.idle(rest.min(left));
            }
        }
        self.allocator
            .migrated(busy.as_nanos() as u64, self.stats.migrated_slots - moved);
        Ok(())
    }

    /// Cleans every segment holding dead slots (an explicit garbage collection).
    pub fn gc(&mut self, owner: &mut dyn Owner) -> Result<()> {
        while self.clean_step(owner, u32::MAX, Take::ANY)? {}
        Ok(())
    }

    /// Cleans while space is short: a step at a time under the threshold curve, then in
    /// full until more than the reserve is free — in that order, because a step may open a
    /// segment for the survivors and the user's write may need one more.
    fn make_room(&mut self, owner: &mut dyn Owner) -> Result<()> {
        if !self.deferred.is_empty() {
            self.start_deferred_erases()?;
        }
        if let Some(th) = threshold(
            self.policy(),
            self.geo.slots,
            self.free,
            self.config.clean_start,
            self.config.reserve,
        ) {
            // The adaptive policy cleans early only what is cheap: erasing ahead then costs
            // few copies, and segments still filling up with dead data are left to die.
            let max_live = match self.policy() {
                Policy::Adaptive => self.early_live_limit(),
                _ => u32::MAX,
            };
            self.clean_step(owner, self.config.step_slots, Take::above(th, max_live))?;
        }
        // On two devices the NVRAM is cleaned on its own once it runs short of free
        // segments, whatever the flash has free: the cleaner's threshold counts both tiers,
        // so the NVRAM's dead metadata would stay, and new metadata spill to the flash once
        // a few MiB of it were written.
        if self.fast_tier_short() {
            self.clean_step(owner, self.config.step_slots, Take::FAST)?;
        }
        // Each round cleans one whole victim. If as many rounds as there are segments gain
        // nothing (victims so full that what their copies cost eats what they free), the
        // space is gone: say so rather than spin.
        let mut rounds = 0;
        while self.free <= self.config.reserve {
            if rounds > self.geo.segments || !self.clean_step(owner, u32::MAX, Take::ANY)? {
                return Err(Error::NoSpace);
            }
            rounds += 1;
        }
        Ok(())
    }

    /// The live slots a victim of the adaptive policy's cleaning ahead of need may hold
    /// ([`policy::early_live_limit`]).
    fn early_live_limit(&self) -> u32 {
        policy::early_live_limit(
            self.geo.slots,
            self.free,
            self.config.clean_start,
            self.config.reserve,
        )
    }

    /// Slots left in the open segment of head `i` (an index into the heads).
    fn room(&self, i: usize) -> u32 {
        self.heads[i].map_or(0, |seg| self.slots_left(seg))
    }

    /// Slots a segment can still be written in: in SLC mode its LSB slots only.
    fn slots_left(&self, seg: u32) -> u32 {
        let s = &self.segs[seg as usize];
        if !s.slc() {
            return self.geo.slots - s.used();
        }
        (s.used()..self.geo.slots)
            .filter(|&slot| !self.dev.risks_earlier_slot(slot))
            .count() as u32
    }

    /// Slots a segment in SLC mode (`slc`) or in the part's own mode holds, less those every
    /// segment reserves.
    fn slots_per_segment(&self, slc: bool) -> u32 {
        let first = self.dev.reserved_slots();
        if !slc {
            return self.geo.slots.saturating_sub(first);
        }
        (first..self.geo.slots)
            .filter(|&slot| !self.dev.risks_earlier_slot(slot))
            .count() as u32
    }

    /// Whether a segment `head` opens for `by` goes to SLC mode.
    fn opens_slc(&mut self, head: Head, by: Writer) -> bool {
        let regions = self.regions();
        if !self.dev.has_slc_mode()
            || !regions.opens_slc(by == Writer::Cleaner || head == Head::Cold)
        {
            return false;
        }
        if regions == Regions::SlcOnly {
            return true;
        }
        let hot = regions.keeps_hot_in_slc() && head == Head::Hot;
        let mut share = if regions.allocates() && !hot {
            self.allocator.alpha()
        } else {
            1.0
        };
        let (slc, mlc) = (self.slots_per_segment(true), self.slots_per_segment(false));
        if let Some(budget) = &mut self.budget {
            let rated = match self.config.rated_cycles {
                0 => self.dev.rated_cycles(),
                r => r,
            };
            let segs = &self.segs;
            let cycles_left = || {
                segs.iter()
                    .filter(|s| s.state != SegState::Bad)
                    .map(|s| u64::from(rated.saturating_sub(s.erase_count + 1)))
                    .sum()
            };
            share = share.min(budget.gamma(self.dev.now(), self.stats.erases, cycles_left, mlc));
        }
        self.allocator.next_is_slc(share, slc, mlc)
    }

    /// Whether the owner's rewritten data ([`Head::Hot`]) stays in SLC segments
    /// ([`Regions::Locality`] on a part with an SLC mode): an owner then tells it apart.
    pub fn keeps_hot_in_slc(&self) -> bool {
        self.dev.has_slc_mode() && self.regions().keeps_hot_in_slc()
    }

    /// The share of new data going to SLC segments under [`Regions::Dynamic`] (FlexFS's α).
    pub fn slc_share(&self) -> f64 {
        self.allocator.alpha()
    }

    /// The share of new data the wear budget lets go to SLC segments in the current window
    /// (FlexFS's γ; 1 without [`LogConfig::lifetime`]).
    pub fn wear_share(&self) -> f64 {
        self.budget.as_ref().map_or(1.0, |b| b.current())
    }

    /// FlexFS's shares as they stand, to record beside an owner's lifetime counters: α (the
    /// share of new data dynamic allocation sends to SLC segments, whole where the setting
    /// does not allocate) and γ ([`Log::wear_share`], whole without a wear budget). A share
    /// this session has not decided yet (α before an idle window and a migration, γ before
    /// the wear budget's first window) is the one `recorded` holds, so that a session that
    /// only reads, or writes a little without idling, does not replace what the last one
    /// found with the defaults.
    /// `None` on a part without an SLC mode.
    pub fn shares(&self, recorded: Option<Shares>) -> Option<Shares> {
        if !self.dev.has_slc_mode() {
            return None;
        }
        let alpha = match recorded {
            _ if !self.regions().allocates() => 1.0,
            Some(r) if !self.allocator.decided() => r.alpha(),
            _ => self.allocator.alpha(),
        };
        let gamma = match (&self.budget, recorded) {
            (None, _) => 1.0,
            (Some(b), Some(r)) if !b.decided() => r.gamma(),
            (Some(b), _) => b.current(),
        };
        Some(Shares::new(alpha, gamma))
    }

    /// Slots left in the open segment of `head`.
    fn head_room(&self, head: Head) -> u32 {
        self.room(self.head_index(head))
    }

    /// Slots left in the cleaner's open segment.
    fn cleaner_room(&self) -> u32 {
        self.room(self.survivor_head().1)
    }

    /// The head survivors of cleaning go to, and its index. Normally the cold head; with no
    /// free segment and no room in the cold head (after a power cut just as the cleaner's
    /// segment filled) the open head with the most room — a copy is identical to its
    /// original, so only the separation of cold data suffers, and only until the next victim.
    fn survivor_head(&self) -> (Head, usize) {
        // On two devices, what the fast tier held (metadata) stays there.
        let victim_fast = self
            .victim
            .as_ref()
            .is_some_and(|v| self.dev.tier(v.seg) == Tier::Fast);
        if victim_fast && self.meta_apart() {
            return (Head::Meta, self.head_index(Head::Meta));
        }
        let cold = self.head_index(Head::Cold);
        if self.free > 0 || self.room(cold) > 0 {
            return (Head::Cold, cold);
        }
        Head::ALL
            .into_iter()
            .map(|h| (h, self.head_index(h)))
            .max_by_key(|&(_, i)| self.room(i))
            .unwrap_or((Head::Cold, cold))
    }

    /// Copies up to `budget` live slots out of the current victim (choosing one as `take`
    /// allows if none is in progress); erases the victim once empty. Returns whether there
    /// was anything to do.
    fn clean_step(&mut self, owner: &mut dyn Owner, budget: u32, take: Take) -> Result<bool> {
        if self.victim.is_none() {
            // With nothing free (only right after a power cut in the middle of cleaning) the
            // victim must fit in the room left in the cleaner's head; the one that was being
            // cleaned does.
            let take = if self.free == 0 {
                Take {
                    max_live: take.max_live.min(self.cleaner_room()),
                    ..take
                }
            } else {
                take
            };
            let (seg, wear) = match self.wear_victim() {
                Some(seg) => (seg, true),
                None => match self.pick_victim(take) {
                    Some(seg) => (seg, false),
                    None => return Ok(false),
                },
            };
            let mut tags = alloc::vec![TagState::Erased; self.geo.slots as usize];
            self.dev.read_tags(seg, &mut tags)?;
            self.victim = Some(Victim::new(seg, wear, tags));
        }
        let mut copied = 0;
        while copied < budget {
            let Some(v) = &mut self.victim else { break };
            let seg = v.seg;
            let slot = v.next;
            if slot >= self.geo.slots {
                self.finish_victim(owner)?;
                return Ok(true);
            }
            v.next += 1;
            let from = SlotAddr { seg, slot };
            let tag = match v.tags[slot as usize] {
                TagState::Valid(tag) => tag,
                // Torn, skipped, or decayed since it was written: known at the end, when
                // the segment's count says whether anything live is left unfound.
                t => {
                    let doubt = self.may_have_decayed(seg, slot, t);
                    if let Some(v) = &mut self.victim {
                        v.doubtful |= doubt;
                    }
                    continue;
                }
            };
            match self.save_slot(owner, from, &tag) {
                Ok(true) => copied += 1,
                Ok(false) => {}
                Err(e) => {
                    // Nothing was saved: the slot is still live here (or its liveness not
                    // known), and the next step starts with it — skipped, its segment
                    // would be erased without it.
                    self.victim_resume(slot);
                    return Err(e);
                }
            }
        }
        Ok(true)
    }

    /// Saves the victim's slot `from` (tag `tag`) if it is live: copies it to the
    /// survivors' head and tells its keeper, or, if it no longer reads, records it lost.
    /// False if it was not live; on an error nothing was saved.
    fn save_slot(&mut self, owner: &mut dyn Owner, from: SlotAddr, tag: &Tag) -> Result<bool> {
        if self.liveness(owner, tag, from)? != Liveness::Live {
            return Ok(false);
        }
        let mut buf = core::mem::take(&mut self.buf);
        let read = if tag.kind == Kind::Sector {
            self.dev.read_slot(from.seg, from.slot, &mut buf)
        } else {
            // The log's own slots are never programmed in place (`Log::patch`).
            self.dev
                .read_slot_written(from.seg, from.slot, &mut buf, 0)
                .map(|_| ())
        };
        let result = match read {
            Ok(()) => self
                .write(
                    self.survivor_head().0,
                    Writer::Cleaner,
                    &Tag { copy: true, ..*tag },
                    &buf,
                )
                .map(Some),
            Err(Error::Io) => Ok(None),
            Err(e) => Err(e),
        };
        self.buf = buf;
        let Some(to) = result? else {
            self.lose(owner, Some(tag), from)?;
            return Ok(true);
        };
        match self.anchors.as_mut().or(self.retired.as_mut()) {
            Some(a) if tag.kind == Kind::Page => a.moved(tag.key, from, to),
            _ => {
                if let Err(e) = owner.moved(tag, from, to, &mut self.checkpoint_pages()) {
                    // The owner still names the original: the copy is dead.
                    self.kill(to);
                    return Err(e);
                }
            }
        }
        self.kill(from);
        self.stats.copied_slots += 1;
        if self.segs[from.seg as usize].slc() && !self.segs[to.seg as usize].slc() {
            self.stats.migrated_slots += 1;
        }
        if self.victim.as_ref().is_some_and(|v| v.wear) {
            self.stats.wear_copied_slots += 1;
        }
        Ok(true)
    }

    /// Whether slot `at` (tag `tag`) is still needed: a checkpoint page if the checkpoint
    /// holds it (the log's own: the owner never sees them), anything else if the owner says
    /// so. A slot the owner releases now is let go here.
    fn liveness(&mut self, owner: &mut dyn Owner, tag: &Tag, at: SlotAddr) -> Result<Liveness> {
        if tag.kind == Kind::Page {
            let held = [&self.anchors, &self.retired]
                .iter()
                .any(|a| a.as_ref().is_some_and(|a| a.holds(tag.key, at)));
            return Ok(if held { Liveness::Live } else { Liveness::Dead });
        }
        let oldest = if tag.kind.is_tombstone() {
            self.oldest_seq_except(at.seg)
        } else {
            0
        };
        let l = owner.is_live(tag, at, oldest, &mut self.checkpoint_pages())?;
        if l == Liveness::Released {
            self.kill(at);
        }
        Ok(l)
    }

    /// The slot `at`, live or maybe live, no longer reads back: whoever keeps it — the
    /// anchors for a checkpoint page, else the owner — is told its data is gone, and if one
    /// did, it dies, counted as lost. `tag` is `None` when even the tag was unreadable.
    fn lose(&mut self, owner: &mut dyn Owner, tag: Option<&Tag>, at: SlotAddr) -> Result<()> {
        let anchors = self.anchors.as_mut().or(self.retired.as_mut());
        // A page whose tag does not read either is known by its address: left in the
        // checkpoint's pages, its slot would be killed again, reused, by the next
        // checkpoint that writes the page anew.
        let page = match (&anchors, tag) {
            (_, Some(t)) if t.kind == Kind::Page => Some(t.key),
            (Some(a), None) => a.key_at(at),
            _ => None,
        };
        let held = match (anchors, page) {
            (Some(a), Some(key)) => {
                a.lost(key, at);
                true
            }
            _ => owner.lost(tag, at, &mut self.checkpoint_pages())?,
        };
        if held {
            self.kill(at);
            self.stats.lost_slots += 1;
        }
        Ok(())
    }

    /// Slots of `seg` without a valid tag (from `tags`) that may be live: while the
    /// segment's count says live slots are left that no tag named, each is looked for by
    /// its address and reported lost if someone held it. Rare: a tag that decayed.
    fn lose_unnamed(&mut self, owner: &mut dyn Owner, seg: u32, tags: &[TagState]) -> Result<()> {
        for (slot, &t) in (0..).zip(tags) {
            if self.segs[seg as usize].live() == 0 {
                break;
            }
            if self.may_have_decayed(seg, slot, t) {
                self.lose(owner, None, SlotAddr { seg, slot })?;
            }
        }
        Ok(())
    }

    /// Whether slot `slot` of `seg`, whose tag reads as `t`, may be a live slot whose tag
    /// decayed: any programmed slot without a valid tag, and an erased-looking one among
    /// those the segment used.
    fn may_have_decayed(&self, seg: u32, slot: u32, t: TagState) -> bool {
        match t {
            TagState::Valid(_) => false,
            TagState::Garbage => true,
            // An SLC segment never writes its MSB slots.
            TagState::Erased => {
                let s = &self.segs[seg as usize];
                slot < s.used() && !(s.slc() && self.dev.risks_earlier_slot(slot))
            }
        }
    }

    /// The victim's slot `slot` is still live: the next cleaning step starts there.
    fn victim_resume(&mut self, slot: u32) {
        if let Some(v) = &mut self.victim {
            v.next = slot;
        }
    }

    fn finish_victim(&mut self, owner: &mut dyn Owner) -> Result<()> {
        let Some(v) = self.victim.take() else {
            return Ok(());
        };
        if v.doubtful && self.segs[v.seg as usize].live() > 0 {
            if let Err(e) = self.lose_unnamed(owner, v.seg, &v.tags) {
                self.victim = Some(v);
                return Err(e);
            }
        }
        self.stats.cleaned += 1;
        if self.segs[v.seg as usize].state == SegState::Failing {
            // Retiring it makes its survivors the only copies, as an erase would.
            self.seal_heads();
            return self.retire(v.seg);
        }
        // Erasing a bank that a head writes to would stall every write for the whole erase:
        // the erase waits until the bank is quiet (Kawaguchi's cleaning bank list).
        self.set_state(v.seg, SegState::Dirty);
        self.deferred.push(v.seg);
        self.start_deferred_erases()
    }

    /// Starts, in the background, the deferred erases whose bank is neither erasing nor
    /// written by an open head.
    fn start_deferred_erases(&mut self) -> Result<()> {
        // Until some segment in use carries a header, the deferred ones are the volume's only
        // identity on flash.
        if self.in_use == 0 {
            return Ok(());
        }
        let now = self.now_ns();
        let mut i = 0;
        while i < self.deferred.len() {
            let seg = self.deferred[i];
            let bank = self.dev.bank_of(seg);
            let head_here = self
                .heads
                .iter()
                .flatten()
                .any(|&h| self.dev.bank_of(h) == bank);
            if self.segs[seg as usize].state != SegState::Dirty {
                self.deferred.swap_remove(i);
            } else if !head_here && self.erasing_until[bank as usize] <= now {
                self.deferred.swap_remove(i);
                // Its survivors become the only copies: nothing may endanger them.
                self.seal_heads();
                self.erase_segment(seg)?;
            } else {
                i += 1;
            }
        }
        Ok(())
    }

    /// The best victim `take` allows: segments with nothing live always come first.
    fn pick_victim(&self, take: Take) -> Option<u32> {
        let now = self.now_ns();
        let mut best: Option<(f64, u32)> = None;
        // Segments that a policy weighing age scores zero, their data dying this very
        // instant: scored as a nanosecond old, for cleaning that must take a victim.
        let mut fresh: Option<(f64, u32)> = None;
        let policy = self.policy();
        for (i, s) in self.segs.iter().enumerate() {
            if !s.cleanable() {
                continue;
            }
            if s.state == SegState::Failing {
                return Some(i as u32);
            }
            if s.live() > take.max_live || (take.slc && !s.slc()) || (take.cold && s.hot()) {
                continue;
            }
            if take.fast && self.dev.tier(i as u32) != Tier::Fast {
                continue;
            }
            let score_at = |age_ns: u64| {
                let score = policy.score(s.live(), self.geo.slots, age_ns as f64 / 1e9)?;
                Some(if s.live() == 0 { f64::INFINITY } else { score })
            };
            let mut age = s.age_ns(now);
            // With one head the cleaner's survivors join young data again: cleaning a
            // segment of data that outlived the rest gains no segment of cold data that
            // stays full, only the same data to copy again next time. Its age then says no
            // more than that its young data has died: it counts up to the age at which data
            // dies (`flashfs bench tffs`, 448/64: phone 79.3 → 80.8%, recorder 89.1 → 90.1%,
            // fax 86.74 → 86.77%).
            if let (false, Some(death)) = (self.room_for_heads(), self.death_age.mean_ns()) {
                age = age.min(death);
            }
            let Some(mut score) = score_at(age) else {
                continue;
            };
            let mut slot = &mut best;
            if score <= 0.0 && take.fresh {
                score = score_at(1).unwrap_or(0.0);
                slot = &mut fresh;
            }
            if score > take.th && slot.is_none_or(|(b, _)| score > b) {
                *slot = Some((score, i as u32));
            }
        }
        // A segment being overwritten right now will soon be emptier: cleaning it would copy
        // what the next writes kill (under sequential overwrites the copies snowball). It is
        // taken only when nothing else qualifies, as when a trim has just touched every
        // segment, so that a full device is reported only when no segment has room to give.
        best.or(fresh).map(|(_, i)| i)
    }

    /// A segment to move when wear has spread too far: of those lagging the most worn by
    /// more than the spread, the one holding the oldest data — static data parked there,
    /// which will not move by itself; a lagging segment of young data is cleaned soon
    /// anyway. An open head that holds nothing comes first: it is closed, so its segment
    /// rejoins the rotation without a copy.
    fn wear_victim(&mut self) -> Option<u32> {
        if self.config.wear_spread == 0 || self.free <= self.config.reserve {
            return None;
        }
        let max = self
            .segs
            .iter()
            .enumerate()
            .filter(|&(i, s)| s.state != SegState::Bad && self.levelled(i))
            .map(|(_, s)| s.erase_count)
            .max()?;
        let spread = self.allowed_spread(max);
        if self.heads_apart() && !self.cold_head_worn(max, spread) {
            return None;
        }
        let idle_head = |s: &SegInfo| s.state == SegState::Open && s.live() == 0;
        let (i, _) = self
            .segs
            .iter()
            .enumerate()
            .filter(|(_, s)| s.state == SegState::Full || idle_head(s))
            .filter(|&(i, s)| self.levelled(i) && max.saturating_sub(s.erase_count) > spread)
            .min_by_key(|(_, s)| if idle_head(s) { 0 } else { s.min_seq() })?;
        self.close(i as u32);
        self.stats.wear_moves += 1;
        Some(i as u32)
    }

    /// Whether static data moved now settles within half of `spread` erases of the most worn
    /// segment (`max`): in the cold head's segment if that is worn enough, else in the most
    /// worn free one, for which the cold head's segment is closed. If neither is, the move
    /// waits for a worn segment to come free: static data put on a segment of middling wear
    /// lags again a few erases later and is moved again (phone on 8192/64: wear-levelling
    /// copies 0.086 → 0.065 bytes per user byte).
    fn cold_head_worn(&mut self, max: u32, spread: u32) -> bool {
        let worn = |ec: u32| ec.saturating_add((spread / 2).max(1)) >= max;
        let cold = self.head_index(Head::Cold);
        if let Some(seg) = self.heads[cold] {
            if worn(self.segs[seg as usize].erase_count) {
                return true;
            }
        }
        let best = self
            .segs
            .iter()
            .enumerate()
            .filter(|&(i, s)| {
                matches!(s.state, SegState::Free | SegState::Dirty) && self.levelled(i)
            })
            .map(|(_, s)| s.erase_count)
            .max();
        if !best.is_some_and(worn) {
            return false;
        }
        if let Some(seg) = self.heads[cold] {
            self.close(seg);
        }
        true
    }

    /// The spread of erase counts the leveller allows while the most worn segment has `max`
    /// erases: the configured one, narrowed near the rated cycles to the cycles left.
    fn allowed_spread(&self, max: u32) -> u32 {
        let rated = match self.config.rated_cycles {
            0 => self.dev.rated_cycles(),
            r => r,
        };
        let spread = self.config.wear_spread;
        if rated == 0 {
            return spread;
        }
        spread.min(rated.saturating_sub(max).max(1))
    }

    /// Writes a slot through a head, retrying in a new segment when a program fails.
    fn write(&mut self, head: Head, by: Writer, tag: &Tag, data: &[u8]) -> Result<SlotAddr> {
        for _ in 0..8 {
            let seg = self.head_segment(head, by)?;
            self.before_program()?;
            let slot = self.segs[seg as usize].used();
            self.segs[seg as usize].set_used(slot + 1);
            let r = if self.config.verify_programs {
                self.dev.write_slot_verified(seg, slot, tag, data)
            } else {
                self.dev.write_slot(seg, slot, tag, data)
            };
            match r {
                Ok(()) => {
                    if by == Writer::Owner {
                        self.allocator.wrote();
                        if let Some(b) = &mut self.budget {
                            b.wrote();
                        }
                    }
                    let now = self.now_ns();
                    let s = &mut self.segs[seg as usize];
                    s.add_live();
                    s.touch(now);
                    s.set_min_seq(s.min_seq().min(tag.seq));
                    let slc = s.slc();
                    if s.used() == self.geo.slots {
                        self.close(seg);
                    } else if slc {
                        // An SLC segment never programs an MSB slot: the next write goes
                        // to the next LSB one.
                        self.seal(seg);
                    }
                    return Ok(SlotAddr { seg, slot });
                }
                // A slot that was not erased (damage in the erased part of a segment: a
                // program would set bits) fails its segment like a program that did not take.
                Err(Error::Flash(
                    FlashError::ProgramFailed { .. }
                    | FlashError::SetsBits { .. }
                    | FlashError::PageAlreadyProgrammed { .. },
                )) => self.fail(seg),
                Err(e) => {
                    // The slot is spent either way: a full segment leaves its head.
                    if self.segs[seg as usize].used() >= self.geo.slots {
                        self.close(seg);
                    }
                    return Err(e);
                }
            }
        }
        Err(Error::ReadOnly)
    }

    fn head_index(&self, head: Head) -> usize {
        if !self.heads_apart() {
            return 0;
        }
        match head {
            Head::Hot if self.config.hot_cold || self.hot_apart() => 0,
            Head::Hot | Head::Warm => 1,
            Head::Cold => 2,
            // Metadata gets a segment of its own only under full separation; on small devices
            // the extra open segment costs more than mixing a few records in.
            Head::Meta if self.config.hot_cold || self.meta_apart() => 3,
            Head::Meta => 1,
        }
    }

    /// The open segment of a head, opening a new one when needed.
    fn head_segment(&mut self, head: Head, by: Writer) -> Result<u32> {
        let h = self.head_index(head);
        if let Some(seg) = self.heads[h] {
            return Ok(seg);
        }
        let floor = match by {
            Writer::Cleaner => 0,
            Writer::Owner => self.config.reserve,
        };
        for _ in 0..8 {
            if self.free <= floor {
                return Err(Error::NoSpace);
            }
            // One head shared by all holds mostly young data, whoever opens its segment;
            // only static data the leveller moves should settle on a worn one.
            let cold = if self.heads_apart() {
                head == Head::Cold
            } else {
                self.victim.as_ref().is_some_and(|v| v.wear)
            };
            let seg = match self.pick_free(cold, self.head_tier(head)) {
                Some(seg) => seg,
                // The checkpoint's set is used up: the log goes on outside it, and a mark
                // goes down before the next program (until the next checkpoint, a mount
                // after a power cut scans).
                None if self.anchors.as_ref().is_some_and(|a| a.rolling) => {
                    if let Some(a) = &mut self.anchors {
                        a.rolling = false;
                    }
                    continue;
                }
                None => return Err(Error::NoSpace),
            };
            let bank = self.dev.bank_of(seg) as usize;
            if self.segs[seg as usize].state == SegState::Dirty
                || self.erasing_until[bank] > self.now_ns()
            {
                self.stats.stalled_opens += 1;
            }
            if self.segs[seg as usize].state == SegState::Dirty {
                self.seal_heads();
                self.erase_segment(seg)?;
                if self.segs[seg as usize].state != SegState::Free {
                    continue;
                }
            }
            let header = SegHeader {
                head: head.code(),
                slc: self.opens_slc(head, by),
                erase_count: self.segs[seg as usize].erase_count,
                open_seq: self.seq,
                volume: self.volume,
            };
            let mut r = if self.config.verify_programs && !self.reads_erased(seg)? {
                Err(Error::Flash(FlashError::EraseFailed { block: seg }))
            } else {
                self.dev
                    .set_slc(seg, header.slc)
                    .and_then(|()| self.dev.write_header(seg, &header))
            };
            // A header may wait in RAM with its segment's first tags (SPI NOR): it goes
            // down before it is read back.
            if r.is_ok() && self.config.verify_programs {
                r = self.dev.sync();
            }
            if r.is_ok()
                && self.config.verify_programs
                && self.dev.read_header(seg)? != HeaderState::Valid(header)
            {
                r = Err(Error::Flash(FlashError::ProgramFailed { block: seg }));
            }
            match r {
                Ok(()) => {
                    self.stats.headers += 1;
                    let now = self.now_ns();
                    self.set_state(seg, SegState::Open);
                    let s = &mut self.segs[seg as usize];
                    s.clear();
                    s.set_open_seq(header.open_seq);
                    s.set_cells(header.slc, head == Head::Hot && h == 0);
                    self.death_age.opened(seg, now);
                    self.heads[h] = Some(seg);
                    self.seal(seg);
                    if let Some(o) = &mut self.opened {
                        o.push(seg);
                    }
                    return Ok(seg);
                }
                Err(Error::Flash(
                    FlashError::ProgramFailed { .. } | FlashError::EraseFailed { .. },
                )) => self.retire(seg)?,
                Err(e) => return Err(e),
            }
        }
        Err(Error::ReadOnly)
    }

    /// Whether a segment about to be opened reads erased (its header area and first slot):
    /// an erase that reported success but did nothing shows here. Waits out an erase still
    /// running on its bank, as the header program would.
    fn reads_erased(&mut self, seg: u32) -> Result<bool> {
        let bank = self.dev.bank_of(seg) as usize;
        let now = self.now_ns();
        if self.erasing_until[bank] > now {
            self.dev.idle(core::time::Duration::from_nanos(
                self.erasing_until[bank] - now,
            ));
        }
        if self.dev.read_header(seg)? != HeaderState::Erased {
            return Ok(false);
        }
        // Every tag, not just the first slot: a stale tag left by an erase that did nothing
        // would bring an old version back at the next mount.
        let mut tags = alloc::vec![TagState::Erased; self.geo.slots as usize];
        match self.dev.read_tags(seg, &mut tags) {
            Ok(()) => {}
            Err(Error::Io) => return Ok(false),
            Err(e) => return Err(e),
        }
        if tags.iter().any(|t| *t != TagState::Erased) {
            return Ok(false);
        }
        let first = self
            .dev
            .reserved_slots()
            .min(self.geo.slots.saturating_sub(1));
        self.dev.slot_erased(seg, first)
    }

    /// The tier a head's segments come from: the fast one for metadata with a head of its
    /// own, the bulk one for everything else.
    fn head_tier(&self, head: Head) -> Tier {
        if head == Head::Meta && self.meta_apart() {
            Tier::Fast
        } else {
            Tier::Bulk
        }
    }

    /// Whether the fast tier, where metadata goes, has fewer than [`FAST_TIER_FREE`] free
    /// segments left.
    fn fast_tier_short(&self) -> bool {
        self.dev.is_tiered() && self.meta_apart() && self.free_fast < FAST_TIER_FREE
    }

    /// Which file data the fast tier of a volume on two devices takes beside the metadata
    /// (written with the metadata head, [`Head::Meta`]), from how many of its slots are
    /// live ([`FastShare`]).
    pub fn fast_tier_share(&self) -> FastShare {
        if !self.dev.is_tiered() || !self.meta_apart() {
            return FastShare::None;
        }
        // The fast tier's segments are numbered first (`Tiered`).
        let (mut live, mut room) = (0u64, 0u64);
        for (seg, s) in self.segs.iter().enumerate() {
            if self.dev.tier(seg as u32) != Tier::Fast {
                break;
            }
            if !matches!(s.state, SegState::Bad | SegState::Anchor) {
                live += u64::from(s.live());
                room += u64::from(self.geo.slots);
            }
        }
        if live * 2 < room {
            FastShare::Any
        } else if live * 4 < room * 3 {
            FastShare::Replacing
        } else {
            FastShare::None
        }
    }

    /// Whether the wear leveller counts `seg`: not the fast tier's segments, whose NVRAM
    /// wears without limit that matters, and which take every checkpoint.
    fn levelled(&self, seg: usize) -> bool {
        self.dev.tier(seg as u32) == Tier::Bulk
    }

    /// A free segment for a head, from `tier` while it has one, else from the other (a
    /// tier that is full spills into the other: metadata to the flash, data to the NVRAM):
    /// least worn for user data (it will be erased again soon),
    /// most worn for `cold` data (survivors, static data moved: they will sit still); away from banks that are busy
    /// erasing or hold another open head, so erases overlap writes — but never at the price
    /// of wear: only segments within half the wear leveller's spread of the least (most)
    /// worn free one qualify. Otherwise a bank that always holds an open head would keep its
    /// cleaned segments waiting for an erase forever, and the rest would wear for them.
    fn pick_free(&self, cold: bool, tier: Tier) -> Option<u32> {
        let now = self.now_ns();
        let open_banks: Vec<u32> = self
            .heads
            .iter()
            .flatten()
            .map(|&s| self.dev.bank_of(s))
            .collect();
        // How worn a segment is, from the head's point of view (less is better).
        let wear = |s: &SegInfo| {
            if cold {
                u32::MAX - s.erase_count
            } else {
                s.erase_count
            }
        };
        let unbound = || {
            self.segs
                .iter()
                .enumerate()
                .filter(|(_, s)| matches!(s.state, SegState::Free | SegState::Dirty))
                // A cleaned segment still carries a header; with none in use it must survive.
                .filter(|(i, _)| self.in_use > 0 || !self.deferred.contains(&(*i as u32)))
        };
        // A tier spills into the other only when it is full, not when its share of the
        // checkpoint's set is used up: then there is no segment to pick here, and the
        // caller goes on outside the set.
        let in_tier = unbound().any(|(i, _)| self.dev.tier(i as u32) == tier);
        let free = || {
            unbound()
                .filter(|(i, _)| self.may_open(*i as u32))
                .filter(move |(i, _)| !in_tier || self.dev.tier(*i as u32) == tier)
        };
        let best = free().map(|(_, s)| wear(s)).min()?;
        let near = if self.config.wear_spread == 0 {
            u32::MAX
        } else {
            (self.config.wear_spread / 2).max(1)
        };
        free()
            .filter(|(_, s)| wear(s) - best <= near)
            .min_by_key(|(i, s)| {
                let bank = self.dev.bank_of(*i as u32);
                // Erased before not erased; then the soonest usable (an erase still running on
                // its bank delays the header); then a bank no other head writes to.
                let ready = self.erasing_until[bank as usize].max(now);
                let shared = open_banks.contains(&bank);
                (s.state == SegState::Dirty, ready, shared, wear(s), *i)
            })
            .map(|(i, _)| i as u32)
    }

    /// Whether the log may open `seg` now: while the newest checkpoint's set governs, only
    /// its segments (a checkpoint's own pages excepted: a mount never needs to find them).
    fn may_open(&self, seg: u32) -> bool {
        match &self.anchors {
            Some(a) if a.rolling && !self.checkpointing => a.set.contains(&seg),
            _ => true,
        }
    }

    /// Erases a segment (in the background where configured); a failed erase retires it.
    fn erase_segment(&mut self, seg: u32) -> Result<()> {
        self.segs[seg as usize].erase_count = self.segs[seg as usize].erase_count.saturating_add(1);
        self.before_dropping()?;
        let mut r = self.dev.erase(seg, self.config.background_erase);
        if r.is_ok() && self.config.verify_programs {
            // An erase that did nothing leaves old tags that a mount would read as live
            // versions; check now, before anything relies on the segment being empty.
            let bank = self.dev.bank_of(seg) as usize;
            self.erasing_until[bank] = self.now_ns() + self.dev.erase_time().as_nanos() as u64;
            if !self.reads_erased(seg)? {
                r = Err(Error::Flash(FlashError::EraseFailed { block: seg }));
            }
        }
        match r {
            Ok(()) => {
                self.stats.erases += 1;
                let bank = self.dev.bank_of(seg) as usize;
                self.erasing_until[bank] = self.now_ns() + self.dev.erase_time().as_nanos() as u64;
                self.segs[seg as usize].clear();
                self.set_state(seg, SegState::Free);
                Ok(())
            }
            Err(Error::Flash(FlashError::EraseFailed { .. })) => self.retire(seg),
            Err(e) => Err(e),
        }
    }

    /// A program failed in `seg`: close it; the cleaner moves its live data, then retires it.
    fn fail(&mut self, seg: u32) {
        self.close(seg);
        self.set_state(seg, SegState::Failing);
    }

    fn retire(&mut self, seg: u32) -> Result<()> {
        self.close(seg);
        self.set_state(seg, SegState::Bad);
        self.stats.retired += 1;
        self.before_dropping()?;
        self.dev.mark_bad(seg)?;
        // A retirement mark that did not take (NOR: the header survived its clearing) would
        // let a mount read the segment's old slots as live.
        for _ in 0..3 {
            if !self.config.verify_programs
                || !matches!(self.dev.read_header(seg), Ok(HeaderState::Valid(_)))
            {
                break;
            }
            self.dev.mark_bad(seg)?;
        }
        Ok(())
    }

    /// Before a segment's slots are dropped (erased, retired): on two devices the cleaner's
    /// copies of them may lie on the other part, whose medium programs its waiting tag
    /// entries before its own erases only (SPI NOR, SPEC.md §2.2): they go down first, in an
    /// operation of their own, or a cut just after the erase would lose both copies.
    fn before_dropping(&mut self) -> Result<()> {
        if self.dev.is_tiered() {
            self.dev.program_waiting()?;
        }
        Ok(())
    }

    fn close(&mut self, seg: u32) {
        for h in self.heads.iter_mut() {
            if *h == Some(seg) {
                *h = None;
            }
        }
        if self.segs[seg as usize].state == SegState::Open {
            self.set_state(seg, SegState::Full);
        }
    }

    fn set_state(&mut self, seg: u32, state: SegState) {
        let s = &mut self.segs[seg as usize];
        let was = *s;
        s.state = state;
        let is = *s;
        let free = |x: &SegInfo| matches!(x.state, SegState::Free | SegState::Dirty);
        let fast = self.dev.tier(seg) == Tier::Fast;
        match (free(&was), free(&is)) {
            (false, true) => {
                self.free += 1;
                self.free_fast += u32::from(fast);
            }
            (true, false) => {
                self.free -= 1;
                self.free_fast -= u32::from(fast);
            }
            _ => {}
        }
        match (was.in_use(), is.in_use()) {
            (false, true) => self.in_use += 1,
            (true, false) => self.in_use -= 1,
            _ => {}
        }
    }

    fn now_ns(&self) -> u64 {
        self.dev.now().as_nanos() as u64
    }

    /// The lowest sequence number held by any segment other than `except`: a record that
    /// supersedes older versions (a trim) is needed only while some segment may still hold
    /// one of them — including cleaned segments whose erase has not happened yet.
    pub fn oldest_seq_except(&self, except: u32) -> u64 {
        self.oldest_seqs().except(except)
    }

    /// The two oldest segments by the lowest sequence number they hold, so that many
    /// `except` questions (a mount's records) cost one pass over the segments.
    pub fn oldest_seqs(&self) -> OldestSeqs {
        let mut o = OldestSeqs {
            seg: u32::MAX,
            first: u64::MAX,
            second: u64::MAX,
        };
        for (i, s) in self.segs.iter().enumerate() {
            if !(s.in_use() || s.state == SegState::Dirty) {
                continue;
            }
            let min_seq = s.min_seq();
            if min_seq < o.first {
                o.second = o.first;
                o.first = min_seq;
                o.seg = i as u32;
            } else if min_seq < o.second {
                o.second = min_seq;
            }
        }
        o
    }

    /// Segments free for writing.
    pub fn free_segments(&self) -> u32 {
        self.free
    }

    /// Whether the owner can write `slots` slots, and a checkpoint the size of the newest
    /// after them, into segments free now, without the cleaner: the free segments beyond
    /// the cleaner's reserve hold them.
    pub fn has_room(&self, slots: u64) -> bool {
        let beyond = self.free.saturating_sub(self.config.reserve);
        u64::from(beyond) * u64::from(self.geo.slots)
            >= slots.saturating_add(self.checkpoint_slots())
    }

    /// Slots the newest checkpoint takes (its body and directory pages; 0 without one).
    pub fn checkpoint_slots(&self) -> u64 {
        self.anchors
            .as_ref()
            .map_or(0, |a| (a.pages.len() + a.dirs.len()) as u64)
    }

    /// Segments holding data (open, full or failing) in SLC mode and in the part's own mode:
    /// the sizes of the SLC and MLC regions ([`Regions`]).
    pub fn region_segments(&self) -> (u32, u32) {
        let in_use = self.segs.iter().filter(|s| s.in_use());
        let slc = in_use.clone().filter(|s| s.slc()).count() as u32;
        (slc, in_use.count() as u32 - slc)
    }

    /// Segments not retired as bad.
    pub fn good_segments(&self) -> u32 {
        self.segs
            .iter()
            .filter(|s| s.state != SegState::Bad)
            .count() as u32
    }

    /// Slots the owner may keep live at most and still leave the cleaner room to work: the
    /// good segments less the cleaner's reserve, the bad-block spares, one segment per head
    /// (partly filled while open) and one more (so dead space always adds up to a segment).
    pub fn capacity_slots(&self) -> u64 {
        let good = self.good_segments();
        let bad_spares = (good as u64 * self.config.bad_block_permille as u64 / 1000) as u32;
        let mut spare = self.config.reserve + bad_spares + self.heads_in_use() + 1;
        if self.anchors.is_some() {
            // The anchors (the pair the headers name and the working pair, once records
            // moved to less worn segments), the checkpoint's body and room to write the
            // next one beside it. Its map takes four bytes per slot the device holds, at
            // most.
            let usable = self.geo.slots as u64 * self.geo.segments as u64;
            let map =
                (usable * 4).div_ceil(checkpoint::payload(self.geo.slot_size as usize) as u64);
            spare += 4 + 2 * self.checkpoint_segments(map + 1);
        }
        let slc = self.dev.has_slc_mode() && self.regions().sized_for_slc();
        let usable = self.slots_per_segment(slc);
        good.saturating_sub(spare) as u64 * usable as u64
    }

    /// Distinct heads the configuration opens (as [`Log::head_index`] assigns them): the
    /// capacity leaves room for each.
    fn heads_in_use(&self) -> u32 {
        match (self.heads_apart(), self.config.hot_cold) {
            (false, _) => 1,
            (true, false) => 2 + u32::from(self.meta_apart()) + u32::from(self.hot_apart()),
            (true, true) => 4,
        }
    }

    /// The victim policy in force. The adaptive policy weighs age lightly because cold data
    /// has a head of its own to go to; on a device too small for one, where cleaning
    /// survivors join young data, it weighs the full age instead (cost-benefit), so that
    /// segments of data kept for good stay out of cleaning (`flashfs bench tffs`, 448/64:
    /// fax 76.7 → 86.7%, recorder 72.3 → 84.1%).
    fn policy(&self) -> Policy {
        match self.config.policy {
            Policy::Adaptive if !self.room_for_heads() => Policy::CostBenefit,
            p => p,
        }
    }

    /// Whether the device is large enough for heads apart ([`SEPARATE_HEADS_MIN_SEGMENTS`]).
    fn room_for_heads(&self) -> bool {
        self.geo.segments >= SEPARATE_HEADS_MIN_SEGMENTS
    }

    /// Whether heads write apart: configured so, on a device large enough for it.
    pub fn heads_apart(&self) -> bool {
        self.config.separate_cleaning_head && self.room_for_heads()
    }

    /// Whether short-lived data gets a head of its own without hot/cold separation.
    fn hot_apart(&self) -> bool {
        self.config.hot_head && self.heads_apart() && self.geo.segments >= HOT_HEAD_MIN_SEGMENTS
    }

    /// Whether metadata gets a head of its own without hot/cold separation.
    fn meta_apart(&self) -> bool {
        (self.config.separate_meta || self.dev.is_tiered()) && self.heads_apart()
    }

    /// The device's shape.
    pub fn geometry(&self) -> SegGeometry {
        self.geo
    }

    /// The regions setting in force: the configuration's, else the volume's.
    pub fn regions(&self) -> Regions {
        self.config
            .regions
            .or_else(|| Regions::from_code(self.volume.regions))
            .unwrap_or_default()
    }

    /// The volume parameters.
    pub fn volume(&self) -> Volume {
        self.volume
    }

    /// The configuration.
    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// Counters.
    pub fn stats(&self) -> &LogStats {
        &self.stats
    }

    /// The segment usage table.
    pub fn segments(&self) -> &[SegInfo] {
        &self.segs
    }

    /// The device.
    pub fn device(&self) -> &D {
        &self.dev
    }

    /// The device, for fault injection and statistics.
    pub fn device_mut(&mut self) -> &mut D {
        &mut self.dev
    }

    /// Gives the device back.
    pub fn into_device(self) -> D {
        self.dev
    }
}

/// `t`, or [`TagState::Garbage`] for a valid tag whose sequence number no slot can have: at
/// or above `limit` ([`Log::impossible_seq`], [`Log::drop_impossible_seqs`]).
pub(crate) fn possible(t: TagState, limit: u64) -> TagState {
    match t {
        TagState::Valid(tag) if tag.seq >= limit => TagState::Garbage,
        t => t,
    }
}
