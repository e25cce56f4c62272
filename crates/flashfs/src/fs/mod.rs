//! The native file system: POSIX files and directories kept in one copy-on-write B+tree on
//! the log's sectors.
//!
//! Layers, bottom up: the volume's sectors are a block device on the log ([`Ftl`]), told
//! exactly which sectors are dead so the cleaner never copies garbage; `Space` knows which
//! are free; one [`Tree`](crate::index::Tree) holds every inode, directory entry, extended attribute and extent
//! (keys in `layout`); file data lives in whole sectors that extents point to.
//!
//! Nothing is changed in place. An operation changes the working version in RAM (dirty tree
//! nodes) and writes new file data to free sectors; a commit writes the dirty nodes, then
//! the superblock (sector 0) naming the new root. A power cut returns to the last commit, so
//! every operation is entirely there or entirely absent, and `fsync`/`sync` (which commit)
//! make everything before them durable. Commits also happen on their own when the dirty
//! nodes reach a budget, and before space runs out.
//!
//! The block a small write ends inside is mapped at once but programmed later
//! (`writeback`, [`FsConfig::write_buffer_bytes`]): when full, closed, evicted, or before the
//! next commit, whatever starts it — so every commit still holds all the data before it.
//!
//! On reprogrammable NOR a commit of record operations only is instead an entry in the
//! `journal`, programmed in place: the operations themselves, replayed by the next mount,
//! while the index stays dirty in RAM until a checkpoint (an ordinary commit) writes it.
//! Records added by such a commit are written once: fixed-size records that divide the
//! block fill data blocks (`record`), others are framed in place in their file's append
//! block (`append`), and the entry names them in a few bytes — or none, where a frame
//! commits itself. A data block such an entry frees is free once the entry is durable,
//! unless the replay reads it (then it waits for the checkpoint).

mod append;
mod block0;
mod check;
mod counts;
mod extents;
mod file;
mod journal;
mod layout;
mod locality;
mod mount;
mod names;
mod namespace;
mod packed_writes;
mod path;
mod read_cache;
mod record;
mod space;
mod space_map;
mod store;
mod sweep;
mod txn;
mod writeback;
mod xattr;

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

pub use crate::ftl::Lifetime;
pub use check::{check_device, CheckReport, Problem};
pub use file::{FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, PIECE_BLOCKS};
pub use layout::{Extent, FileType, Ino, Inode, Timespec, FLAT_NAME_MAX, ROOT_INO};
pub use names::{int_name, parse_int_name, INT_COOKIE_BASE};
pub use namespace::{DirEntry, RenameFlags};
pub use namespace::{NAME_MAX, TARGET_MAX};
pub use read_cache::ReadCacheStats;
pub use record::{RecordFormat, RecordInfo, RECORD_MAX};
pub use txn::Tid;
pub use writeback::WriteBackStats;
pub use xattr::XattrFlags;
pub use xattr::XATTR_VALUE_MAX;

use crate::error::{Error, Result};
use crate::ftl::{BlockDevice, Ftl, FtlConfig};
use crate::index::TreeConfig;
use crate::log::{Head, Shares};
use crate::media::Segments;
use counts::Programmed;
use layout::{item, key, SpaceRef, Superblock};

/// When reads update the access time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Atime {
    /// On every read, as POSIX says; every read then costs a metadata write.
    Strict,
    /// When the access time is not newer than the modification or change time, or is a day
    /// old (Linux's `relatime`): tools that compare times keep working, reads stay cheap.
    Relative,
    /// Never.
    Never,
}

/// File-system settings. None of them is recorded on flash but the journal's size, chosen
/// at format: a volume mounts with any.
#[derive(Debug, Clone, Copy)]
pub struct FsConfig {
    /// The block device and log underneath.
    pub ftl: FtlConfig,
    /// The index's node cache and shape.
    pub tree: TreeConfig,
    /// Dirty index nodes that trigger a commit; `None` scales with the volume.
    pub dirty_limit: Option<usize>,
    /// Entries in the lists of freed blocks kept in RAM while they wait for a checkpoint
    /// (or for the journal entry that makes their release durable), at most: past it the
    /// next operation ends in a checkpoint, which frees them. Each entry, a run of blocks,
    /// costs 16 to 24 bytes of heap (a run released outside a transaction is in two
    /// lists), so this bounds what the file system keeps per block freed, whatever the
    /// volume's size (4,096 by default). Without it a journal that commits small writes for a long
    /// time (blocks its replay reads wait for the checkpoint) grows the list with every
    /// block rewritten: 48 KiB of heap at its peak over 2,048 synced random 64-byte writes
    /// on an 8 MiB NOR part.
    pub freed_runs: usize,
    /// Spare pointers in index nodes (SPEC.md §7.6): a commit sets a node's spare instead of
    /// copying the path to the root. `None`: wherever the device can patch written bytes
    /// (reprogrammable NOR); ignored where it cannot. Overrides `tree.spare_pointers`.
    pub spare_pointers: Option<bool>,
    /// Access-time updates.
    pub atime: Atime,
    /// The wall clock for timestamps.
    pub clock: fn() -> Timespec,
    /// Transaction identifiers (SPEC.md §8.5a): how many transactions can be open at once,
    /// at most (at least 1).
    pub tid_window: u32,
    /// Files whose extent maps are kept in RAM after a read (8 by default; at most
    /// [`FsConfig::extent_map_extents`] extents over all of them). 0 keeps none: every read
    /// finds its extents in the index, for devices with little RAM.
    pub extent_maps: usize,
    /// Extents the kept extent maps hold at most, over all their files (65,536 by default;
    /// about 48 bytes of RAM each): a file with more is read through the index.
    pub extent_map_extents: usize,
    /// Blocks of the journal a format makes (SPEC.md §8.5b), where record operations and
    /// small writes commit without writing the index. `None`: where the device can program
    /// written bytes again (reprogrammable NOR), a 32nd of the volume, 8 to 256 blocks, its
    /// entries sharing blocks; elsewhere 8 to 128 blocks, an entry each. `Some(0)`: none. A
    /// mount uses the volume's journal whatever this says.
    pub journal_blocks: Option<u16>,
    /// RAM for file blocks a write may leave there, in bytes, at most: as many whole blocks
    /// as fit (32 KiB by default: 16 blocks of 2 KiB on large-page NAND, 64 of 512 bytes on
    /// NOR; less than a block: none, every write programs its blocks at once). A budget in
    /// bytes, not blocks, because small writes spread over a file of small blocks need as
    /// much RAM to wait for their checkpoint as over one of large blocks: with 16 buffers of
    /// 512 bytes, a sync after each of 64-byte writes at random places in a 32 KiB file
    /// programmed a block per sync for the evictions. The block a write ends inside (an append's last,
    /// partial block; a small write's block) waits there, so the next small writes to it
    /// change RAM, not flash; it is programmed when written to its end, when its file is
    /// closed ([`Fs::release`]), when the bound is passed (least recently written first),
    /// and before every commit but a journal entry that carries the small writes that
    /// changed it (SPEC.md §8.5b), which leaves it for the checkpoint. Durability is
    /// unchanged: a power cut loses what no commit (`fsync`, `sync`, a transaction's
    /// commit, or one the file system makes on its own) covered, and never part of what one
    /// did. Each block held costs its size in heap ([`Fs::write_back_stats`]).
    pub write_buffer_bytes: usize,
    /// RAM for file blocks kept after a read, in bytes, at most: as many whole blocks as
    /// fit (8 KiB by default: 4 blocks of 2 KiB on large-page NAND, 16 of 512 bytes on NOR;
    /// less than a block: none). A read of part of a block fetches the whole block and
    /// checks it; the block is kept, and the next reads of it (the rest of a file read in
    /// small pieces, the same record read again) copy from RAM instead, the least
    /// recently read going first. A block read whole is not kept (its reader has it), nor
    /// is one that failed its check: a damaged block is an error on its first read as
    /// without the cache (one that goes bad while cached reads from RAM until it leaves
    /// the cache or the volume is mounted again). Every write, truncate, removal, rename
    /// over a file, transaction abort and journal replay is seen at once: a changed block
    /// moves to another sector, and every program of a sector drops it from the cache.
    /// Blocks waiting to be programmed ([`FsConfig::write_buffer_bytes`]) are read from
    /// there, never from the cache. RAM only: nothing of it reaches flash or outlives the
    /// mount. Each block held costs its size in heap ([`Fs::read_cache_stats`]).
    pub read_cache_bytes: usize,
    /// Bytes at the start of every file whose blocks go to the NVRAM of a volume on two
    /// devices (NVRAM beside NAND), while data takes less than half of the NVRAM's slots
    /// ([`crate::log::Log::fast_tier_share`]); blocks beyond, and every block once
    /// that half is taken, go to the NAND. 16 KiB by default: a small file is written at
    /// the NVRAM's speed, where on the NAND it would cost a page program per block, and a
    /// large file keeps all but its first blocks on the NAND. Data there stays until
    /// rewritten or deleted. 0: data never goes to the NVRAM. Ignored on one device.
    pub fast_tier_file_bytes: u64,
    /// One figure for the RAM of the caches and buffers, in bytes, shared out when the
    /// volume is formatted or mounted ([`FsConfig::budgeted`]) over the block device's map
    /// cache, the index's node cache, the dirty index nodes a commit waits for, the extent
    /// maps, the write-back buffers and the read cache, whose own settings it then
    /// replaces. `None` (the default) leaves those settings as they are. What a volume
    /// keeps beside them does not grow with its data or files: the segment table (24 bytes
    /// per segment, at most 4,096 on NAND) and the state of the operation under way.
    pub ram_budget: Option<usize>,
}

impl Default for FsConfig {
    fn default() -> Self {
        let mut ftl = FtlConfig::default();
        ftl.log.separate_meta = true;
        ftl.log.hot_head = true;
        FsConfig {
            ftl,
            tree: TreeConfig::default(),
            dirty_limit: None,
            freed_runs: 4096,
            spare_pointers: None,
            atime: Atime::Relative,
            clock: system_clock,
            tid_window: 64,
            extent_maps: extents::FILES,
            journal_blocks: None,
            write_buffer_bytes: 32 << 10,
            read_cache_bytes: 8 << 10,
            fast_tier_file_bytes: 16 << 10,
            extent_map_extents: extents::EXTENTS,
            ram_budget: None,
        }
    }
}

impl FsConfig {
    /// The settings [`FsConfig::ram_budget`] stands for on a volume of `block`-byte blocks
    /// (these settings unchanged without a budget). Of the budget, in sixteenths: 5 for the
    /// block device's map cache and 4 for the index's node cache (both unloaded least
    /// recently used first); 3 for dirty index nodes, a block each, at least 8 (a commit
    /// comes once they fill it: a smaller share writes the index more often); 2 for extent
    /// maps (8 files' at most); 1 for the write-back buffers and 1 for the read cache, in
    /// whole blocks. Where a share holds less than one of its unit (a block, an extent map
    /// of a few extents) that cache keeps none.
    pub fn budgeted(&self, block: usize) -> FsConfig {
        let Some(bytes) = self.ram_budget else {
            return *self;
        };
        let share = |n: usize| bytes / 16 * n;
        let block = block.max(1);
        let mut c = *self;
        c.ftl.map_cache = share(5);
        c.tree.cache_bytes = share(4);
        c.dirty_limit = Some((share(3) / block).max(8));
        c.extent_map_extents = share(2) / extents::EXTENT_BYTES;
        c.extent_maps = if c.extent_map_extents < 16 {
            0
        } else {
            extents::FILES
        };
        c.write_buffer_bytes = share(1);
        c.read_cache_bytes = share(1);
        c
    }

    /// Settings for microcontrollers, which give the file system tens of kilobytes of RAM:
    /// 8 KiB of cached index nodes and at least four (about six of NOR's 512-byte nodes,
    /// four of 2 KiB NAND pages: a path from the root to a leaf and more; a read in small
    /// pieces, which finds its file's inode and extents in the index every time, then
    /// reads no node from flash once that path is in RAM, where with one cached node it
    /// read about 28 times from the W25Q64JV per 64-byte read), a commit once 32 index
    /// nodes are dirty (each waits in RAM at its block's size; with fewer, commits of small
    /// changes write the index each time: with 8, the phone workload of `flashfs bench
    /// tffs` reached about 1% of its part's endurance), no extent maps kept after a read,
    /// 4 KiB of file blocks left in RAM by small writes, 2 KiB of file blocks kept after a
    /// read (one 2 KiB NAND page, as littlefs's read cache on such parts, or four 512-byte
    /// NOR blocks: a file read in small pieces reads each block once), 4 KiB of the block
    /// device's sector-map pages and 256 runs of freed blocks waiting for a checkpoint
    /// (about 4 KiB). What it costs in RAM and in wear is measured by `flashfs bench tffs
    /// --config small-ram` (docs/experiments/tffs.md), beside littlefs by `flashfs bench
    /// peers` (docs/experiments/peers.md).
    pub fn small_ram() -> Self {
        let mut c = FsConfig::default();
        c.tree.cache_bytes = 8 << 10;
        c.tree.cache_nodes = 4;
        c.dirty_limit = Some(32);
        c.freed_runs = 256;
        c.extent_maps = 0;
        c.write_buffer_bytes = 4 << 10;
        c.read_cache_bytes = 2 << 10;
        c.ftl.map_cache = 4 << 10;
        c
    }
}

/// The time now, from the host's clock.
#[cfg(feature = "std")]
pub fn system_clock() -> Timespec {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Timespec {
        sec: d.as_secs() as i64,
        nsec: d.subsec_nanos(),
    }
}

/// Without a host clock, time stands at the epoch until the firmware gives one
/// ([`FsConfig::clock`]).
#[cfg(not(feature = "std"))]
pub fn system_clock() -> Timespec {
    Timespec::default()
}

/// An inode's attributes, as `stat` shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attr {
    /// Inode number.
    pub ino: Ino,
    /// What it is.
    pub kind: FileType,
    /// The rest of its attributes.
    pub inode: Inode,
    /// Bytes per block (the unit of `inode.blocks`).
    pub block_size: u32,
}

/// What `statfs` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatFs {
    /// Bytes per block.
    pub block_size: u32,
    /// Blocks for files and their metadata.
    pub blocks: u64,
    /// Blocks free now: those the next commit frees count as free, those its dirty index
    /// nodes will take as used.
    pub blocks_free: u64,
    /// Inodes in use.
    pub files: u64,
    /// Inodes that could still be made (each needs at least one free block's share).
    pub files_free: u64,
    /// Longest name.
    pub name_max: u32,
}

/// A new time for [`SetAttr`]: now, or a given time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetTime {
    /// The clock's time (`UTIME_NOW`).
    Now,
    /// This time.
    At(Timespec),
}

/// Attribute changes; `None` leaves an attribute as it is (`UTIME_OMIT` for times).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SetAttr {
    /// New permission bits (the type bits are kept).
    pub mode: Option<u32>,
    /// New owner.
    pub uid: Option<u32>,
    /// New group.
    pub gid: Option<u32>,
    /// New size (truncate or extend).
    pub size: Option<u64>,
    /// New access time.
    pub atime: Option<SetTime>,
    /// New modification time.
    pub mtime: Option<SetTime>,
}

/// Counters since mount.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FsStats {
    /// Commits written: checkpoints (index nodes and a superblock), journal entries and
    /// frame commits.
    pub commits: u64,
    /// Commits written as journal entries (SPEC.md §8.5b), without the index.
    pub journal_entries: u64,
    /// Commits whose every operation was an add committed by its own frame in an append
    /// block (SPEC.md §8.5b): no entry, no index.
    pub frame_commits: u64,
    /// Bytes of those entries.
    pub journal_bytes: u64,
    /// Journal blocks written (each holding entries programmed into it in place later).
    pub journal_blocks: u64,
    /// Operations the mount replayed from the journal.
    pub journal_replayed: u64,
    /// Index nodes written.
    pub node_writes: u64,
    /// Index nodes changed in place instead (spare pointers set).
    pub node_patches: u64,
    /// Superblocks written as a whole block 0.
    pub superblock_writes: u64,
    /// Superblocks appended in place after the previous ones (reprogrammable NOR).
    pub superblock_appends: u64,
    /// File bytes written by callers.
    pub bytes_written: u64,
    /// Bytes of file blocks waiting in RAM to be programmed ([`FsConfig::write_buffer_bytes`]).
    pub write_buffer_bytes: u64,
    /// Bytes of file blocks kept in RAM after a read ([`FsConfig::read_cache_bytes`]).
    pub read_cache_bytes: u64,
    /// Block reads the read cache answered ([`FsConfig::read_cache_bytes`]).
    pub read_cache_hits: u64,
    /// Blocks of saved free-space maps written (SPEC.md §8.5).
    pub space_map_writes: u64,
    /// Whether the mount read its free space from the saved map (not walking the index).
    pub mounted_from_map: bool,
}

/// A mounted file system on a flash device.
#[derive(Debug)]
pub struct Fs<D: Segments> {
    /// The index, seen through the running transaction's changes if any (`txn`).
    tree: txn::TxTree<D>,
    sb: Superblock,
    config: FsConfig,
    /// Open counts of inodes opened through [`Fs::open`].
    open: BTreeMap<Ino, u32>,
    /// Inodes in use.
    inodes: u64,
    /// Sectors kept free for index nodes: a commit always finds room for its dirty nodes.
    reserve: u64,
    dirty_limit: usize,
    /// What was written since mount and over the volume's life.
    counts: counts::Counts,
    buf: Vec<u8>,
    /// Extent maps of recently read files.
    extent_cache: extents::ExtentCache,
    /// Where the next superblock goes: appended in block 0 or block 0 anew.
    block0: block0::Block0,
    /// Whether [`Fs::unmount`] runs: its commit names a current free-space map.
    closing: bool,
    /// The journal (SPEC.md §8.5b).
    journal: journal::Journal,
    /// Record files whose records may fill data blocks at the next checkpoint.
    pack: alloc::collections::BTreeSet<Ino>,
    /// Run blocks this mount may append records to, by file (SPEC.md §8.4a).
    tails: append::Tails,
}

/// Blocks freed since the last checkpoint and still held by the block device that may wait
/// for the next one, at most (and at most an eighth of the volume): blocks the replay of the
/// journal reads. Until then the checkpoint the journal follows still maps them, so they
/// stay live and the cleaner copies them with its victims; a checkpoint costs the dirty
/// index nodes, which do not grow with the volume. On the phone workload (`flashfs bench
/// tffs`), whose commits rarely write the index, endurance on the 8 MB part with an eighth
/// (2,048 blocks), a 16th, a 32nd, a 64th and a 128th: 45.9, 57.7, 62.1, 59.4 and 53.0%;
/// on a 448 KiB part a quarter, an eighth (112) and a 32nd gave 46.2, 57.9 and 43.6%.
const MAX_PINNED: u64 = 512;

/// Free blocks beyond the index's reserve below which freed blocks waiting for a checkpoint
/// bring it on (plus a 256th of the volume): room for the blocks a journal commit writes
/// (data blocks of records, append blocks), which would otherwise leave records as items.
const COMMIT_HEADROOM: u64 = 8;

impl<D: Segments> Fs<D> {
    /// Bytes per block.
    pub fn block_size(&self) -> u32 {
        self.sb.block_size
    }

    /// Commits so far over the volume's life.
    pub fn commit_count(&self) -> u64 {
        self.sb.commit
    }

    /// What the log has done since mount.
    fn programmed(&self) -> Programmed {
        let st = self.ftl().log().stats();
        Programmed {
            slots: st.user_slots + st.copied_slots,
            migrated: st.migrated_slots,
        }
    }

    /// FlexFS's shares as they stand, over those the superblock recorded.
    fn shares(&self) -> Option<Shares> {
        self.ftl().log().shares(self.counts.recorded_shares())
    }

    /// What the volume has written over its life (kept in the superblock at each commit).
    pub fn lifetime(&self) -> Lifetime {
        self.counts
            .lifetime(self.programmed(), self.shares(), self.sb.block_size)
    }

    /// Counters since mount.
    pub fn stats(&self) -> FsStats {
        let journal = self.journal.counts();
        FsStats {
            commits: self.counts.commits() + journal.entries + journal.frame_commits,
            journal_entries: journal.entries,
            frame_commits: journal.frame_commits,
            journal_bytes: journal.entry_bytes,
            journal_blocks: journal.block_writes,
            journal_replayed: journal.replayed,
            node_writes: self.tree.store().node_writes,
            node_patches: self.tree.store().node_patches,
            superblock_writes: self.counts.commits() - self.block0.appends(),
            superblock_appends: self.block0.appends(),
            bytes_written: self.counts.bytes_written(),
            write_buffer_bytes: self.tree.store().wb.bytes() as u64,
            read_cache_bytes: self.tree.store().rc.bytes() as u64,
            read_cache_hits: self.tree.store().rc.stats().hits,
            space_map_writes: self.tree.store().map_writes,
            mounted_from_map: self.counts.mounted_from_map(),
        }
    }

    /// What the write-back buffers ([`FsConfig::write_buffer_bytes`]) hold now and held at most
    /// since mount.
    pub fn write_back_stats(&self) -> WriteBackStats {
        self.tree.store().wb.stats()
    }

    /// What the read cache ([`FsConfig::read_cache_bytes`]) holds now, held at most and
    /// answered since mount.
    pub fn read_cache_stats(&self) -> ReadCacheStats {
        self.tree.store().rc.stats()
    }

    /// The files with blocks waiting in RAM, oldest write first, with the sectors those
    /// blocks will go to.
    pub fn write_back_blocks(&self) -> Vec<(Ino, u64)> {
        self.tree.store().wb.by_age()
    }

    /// The block device and log underneath (space and wear statistics).
    pub fn ftl(&self) -> &Ftl<D> {
        &self.tree.store().ftl
    }

    /// The block device underneath, mutably (fault injection in tests). The read cache is
    /// emptied: what is done through it may change any sector.
    pub fn ftl_mut(&mut self) -> &mut Ftl<D> {
        let store = self.tree.store_mut();
        store.rc.clear();
        &mut store.ftl
    }

    /// The index's RAM use.
    pub fn index_stats(&self) -> crate::index::TreeStats {
        self.tree.stats()
    }

    /// Levels of the index.
    pub fn index_height(&mut self) -> Result<usize> {
        self.tree.height()
    }

    /// Unloads every clean cached index node, e.g. to measure lookups from flash.
    pub fn drop_caches(&mut self) {
        self.tree.drop_cache();
    }

    /// Commits (a checkpoint: the journal is left empty) with a free-space map the next
    /// mount reads instead of walking the index, writes the block device's checkpoint of
    /// its map so that mount need not scan either, and gives the device back.
    pub fn unmount(mut self) -> Result<D> {
        // The last commit writes block 0 anew, where a current map fits.
        self.closing = true;
        self.block0.rewrite_next();
        // The close's checkpoint of the block device must hold every forget (SPEC.md §3.5).
        self.tree.store_mut().sweep_all()?;
        self.checkpoint()?;
        let no_current_map =
            !matches!(self.sb.space, SpaceRef::Current { .. }) && self.space_map_blocks() > 0;
        if no_current_map || self.counts.unrecorded(self.programmed().slots) {
            // Nothing to commit, but the superblock names no current map, or its lifetime
            // totals miss what the cleaner or the migrator copied since, or the trim record
            // that dropped the journal's blocks after the last commit: block 0 anew again,
            // where the map stays current.
            self.block0.rewrite_next();
            self.write_commit()?;
        }
        self.tree.into_store().ftl.close()
    }

    /// Gives the device back without committing, as a power cut would leave it.
    pub fn into_device(self) -> D {
        self.tree.into_store().ftl.into_device()
    }

    /// Makes every change so far durable, the file blocks waiting in RAM
    /// ([`FsConfig::write_buffer_bytes`]) with it.
    pub fn sync(&mut self) -> Result<()> {
        self.commit()
    }

    /// Makes the file's data and attributes durable (with everything before them: a commit
    /// is all or nothing), its blocks waiting in RAM ([`FsConfig::write_buffer_bytes`]) and
    /// every other file's with them. Once it returns, a power cut keeps every write before
    /// it; before, it may lose any write since the last commit, but never part of one
    /// a commit covered.
    pub fn fsync(&mut self, ino: Ino, _datasync: bool) -> Result<()> {
        self.inode(ino)?;
        self.commit()
    }

    /// Inodes of the version a commit writes now: open transactions' are not in it.
    fn committed_inodes(&self) -> u64 {
        (self.inodes as i64 - self.tree.tx.inode_delta()).max(0) as u64
    }

    /// Space and inode counts.
    pub fn statfs(&self) -> StatFs {
        let space = &self.tree.store().space;
        let meta = 1 + u64::from(self.sb.journal_blocks);
        let total = self.sb.sectors.saturating_sub(meta + self.reserve);
        // The working version's blocks: its dirty index nodes will take blocks and free
        // those they replace (with a journal, many commits may pass before they do).
        let t = self.tree.stats();
        let free = (space.free() + space.pending() + t.replaced_nodes as u64)
            .saturating_sub(t.dirty_nodes as u64)
            .saturating_sub(self.reserve);
        StatFs {
            block_size: self.sb.block_size,
            blocks: total,
            blocks_free: free.min(total),
            files: self.inodes,
            files_free: free,
            name_max: namespace::NAME_MAX as u32,
        }
    }

    /// Uses idle device time to sweep (`sweep`) and to clean ahead of need; returns the
    /// device time used.
    pub fn idle(&mut self, d: core::time::Duration) -> Result<core::time::Duration> {
        let store = self.tree.store_mut();
        let start = store.ftl.log().device().now();
        let mut used = core::time::Duration::ZERO;
        while store.sweep.is_pending() && used < d {
            store.sweep_step()?;
            used = store.ftl.log().device().now().saturating_sub(start);
        }
        Ok(used + store.ftl.idle(d.saturating_sub(used))?)
    }

    /// Whether the sweep is under way: the look, after a mount that followed a power cut,
    /// for data the block device keeps of free blocks (its forgets since its last
    /// checkpoint, the writes of operations the cut interrupted), which the cleaner copies
    /// until it is forgotten. A step of it follows each commit (SPEC.md §8.5 step 4).
    pub fn sweep_pending(&self) -> bool {
        self.tree.store().sweep.is_pending()
    }

    /// Finishes the sweep ([`Fs::sweep_pending`]) now, instead of a map page per commit.
    pub fn sweep(&mut self) -> Result<()> {
        self.tree.store_mut().sweep_all()
    }

    /// Cleans every segment holding dead data (after a commit, so freed files count, and
    /// the sweep, so the data of free blocks a power cut left does).
    pub fn gc(&mut self) -> Result<()> {
        self.checkpoint()?;
        let store = self.tree.store_mut();
        store.sweep_all()?;
        store.ftl.gc()
    }

    /// Makes the working version durable: as a journal entry if it can be one, otherwise
    /// as a checkpoint.
    fn commit(&mut self) -> Result<()> {
        // The data of the operations the commit covers must be on flash before it, unless
        // the journal holds every one: then the blocks in RAM hold only bytes of its small
        // writes, which the entry carries, and they wait for the checkpoint or their turn.
        if !self.journal.may_hold(self.changes()) {
            if let Err(e) = self.tree.store_mut().write_back_all(None) {
                self.journal.require_checkpoint(true);
                self.reload()?;
                return Err(e);
            }
        }
        let settled = self.tree.store().space.pending() == 0 && !self.tree.is_dirty();
        // Dirty nodes whose every change a journal entry already holds are durable; the
        // sectors those changes released stay reserved until the next checkpoint.
        let journaled = self.journal.covers(self.changes());
        if !self.journal.checkpoint_required() && (settled || journaled) {
            return Ok(());
        }
        match self.journal_commit() {
            Ok(true) => {
                self.forget_released();
                self.tree.store_mut().sweep_step()
            }
            Ok(false) => self.checkpoint(),
            Err(e) => {
                self.journal.require_checkpoint(true);
                self.reload()?;
                Err(e)
            }
        }
    }

    /// The operations since the last durable point are durable in the journal: the data
    /// blocks they freed that its replay does not read are free now — the block device
    /// forgets them, so the cleaner stops copying them, and a later operation may take them
    /// again; the others wait for the checkpoint (SPEC.md §8.5b). No block freed waits for
    /// anything else: the checkpoint the entries follow still maps it, but a mount reads it
    /// only to replay them, and the replay takes a block it released again as the
    /// operations it replays did. Except where frames that committed themselves freed it:
    /// the replay frees it only where an entry counts them, so no allocation takes it
    /// before such an entry is durable — taken earlier, an operation of another file
    /// replayed before that entry would find it still mapped.
    fn forget_released(&mut self) {
        let untold = self.tree.store_mut().space.take_released();
        let released = self.journal.take_released();
        for (ino, (a, n)) in released {
            (a..a + n).for_each(|k| self.forget_freed(Some(ino), k));
        }
        for (a, n) in untold {
            (a..a + n).for_each(|k| self.forget_freed(None, k));
        }
        for (ino, k) in self.journal.take_held() {
            if self.tails.owes(ino) {
                self.journal.hold(ino, k);
            } else {
                self.tree.store_mut().space.reuse(k);
            }
        }
    }

    /// Forgets block `k`, freed by a durable operation (of file `by`), unless the replay
    /// reads it; frees it unless frames of `by` that no durable entry counts freed it.
    fn forget_freed(&mut self, by: Option<Ino>, k: u64) {
        if self.tails.read_by_replay(k) || by.is_some_and(|ino| self.journal.rereads(ino)) {
            self.journal.pin_for_replay();
            return;
        }
        // Forgetting only spares the cleaner copies: a map page that does not read back
        // leaves the data live until the next mount forgets what no version uses.
        let _ = self.tree.store_mut().forget(k);
        match by {
            Some(ino) if self.tails.owes(ino) => self.journal.hold(ino, k),
            _ => self.tree.store_mut().space.reuse(k),
        }
    }

    /// Writes the working version into the index and then the superblock that makes it
    /// current (what [`Fs::sync`] does where the volume has no journal): the journal's
    /// entries are covered from then on, a mount replays nothing, and the blocks the
    /// index needs for them show in [`Fs::statfs`].
    pub fn checkpoint(&mut self) -> Result<()> {
        let space = &self.tree.store().space;
        if !self.tree.is_dirty() && space.pending() == 0 {
            // A block waits in RAM only with the uncommitted change that mapped it. With no
            // change left, what waits there is a failed operation's (the device failed
            // between its block and its commit, which took its change back): dropped with
            // it, as its caller was told.
            self.tree.store_mut().wb.clear();
            return Ok(());
        }
        if let Err(e) = self.write_commit() {
            // Whatever went wrong, RAM no longer matches a version on flash for sure:
            // return to the committed one, which mount would find.
            self.journal.require_checkpoint(true);
            self.reload()?;
            return Err(e);
        }
        self.tree.store_mut().sweep_step()
    }

    fn write_commit(&mut self) -> Result<()> {
        // Where superblocks are appended, a delta would take the room of appended records
        // and bring block 0 writes sooner: only the unmount names a current map there.
        let current_map = self.closing || !self.tree.store().ftl.can_patch();
        self.write_commit_with(current_map)
    }

    /// Writes the commit; `current_map`: a block 0 written anew names a current free-space
    /// map (a delta or a new map), not a stale one.
    fn write_commit_with(&mut self, current_map: bool) -> Result<()> {
        // Whatever starts it (a sync, the dirty nodes' budget, space running out), the
        // commit covers every operation before it, so their data goes to flash first.
        self.tree.store_mut().write_back_all(None)?;
        self.pack_records()?;
        // A spare pointer whose program failed counts as torn: the index retries the
        // commit by copying that node instead. New nodes never fail here (the log moves a
        // failed program to another segment itself).
        let mut root = self.tree.commit();
        for _ in 0..3 {
            match root {
                Err(Error::Flash(flash::FlashError::ProgramFailed { .. })) => {
                    root = self.tree.commit();
                }
                _ => break,
            }
        }
        let root = root?;
        let index_gen = self.tree.committed_generation();
        self.tree.store_mut().ftl.flush()?;
        let totals = self.counts.totals(self.programmed());
        let mut sb = Superblock {
            commit: self.journal.next_commit(self.sb.commit),
            root,
            index_gen,
            user_bytes: totals.user_bytes,
            flash_slots: totals.flash_slots,
            migrated_slots: totals.migrated_slots,
            shares: self.shares(),
            inodes: self.committed_inodes(),
            // An appended record has no room for the free-space delta (SPEC.md §8.5).
            space: self.sb.space.map().map_or(SpaceRef::None, SpaceRef::Stale),
            ..self.sb
        };
        let mut map_written = None;
        let block_size = self.sb.block_size as usize;
        let ftl = &mut self.tree.store_mut().ftl;
        // A record appended in place must follow its predecessor's number (SPEC.md §8.2):
        // one that skips a lost epoch's goes to block 0 anew.
        let follows = self.sb.commit.checked_add(1) == Some(sb.commit);
        if !(follows && self.block0.append(ftl, &sb, block_size)?) {
            let delta = if current_map {
                self.space_for_commit(&mut sb)?
            } else {
                None
            };
            sb.encode(&mut self.buf);
            if let Some((map_commit, runs)) = &delta {
                layout::encode_delta(&mut self.buf, sb.commit, *map_commit, runs);
                map_written = (*map_commit == sb.commit).then_some(sb.commit);
            }
            let store = self.tree.store_mut();
            store.write_meta(0, &self.buf, Head::Meta)?;
            store.ftl.flush()?;
            self.block0.written(&sb, sb.delta_bytes());
            if map_written.is_some() || sb.space == SpaceRef::None {
                self.tree.store_mut().space.reset_changes(map_written);
            }
        }
        self.tree.store_mut().committed()?;
        self.sb = sb;
        let slots = self.programmed().slots;
        self.counts.committed(slots);
        // The blocks of the epoch just ended hold nothing needed now: let go, they are
        // dead to the cleaner at once, rather than copied as live until the next epoch
        // reuses them, and a power cut never brings one back as data lost, since a mount
        // reads every journal block (SPEC §8.5b).
        let used: Vec<u64> = self.journal.blocks_in_epoch().collect();
        self.tree.store_mut().let_go(&used)?;
        self.journal.checkpointed(sb.commit, self.changes());
        self.tails.checkpointed();
        Ok(())
    }

    /// Forgets the working version: the tree, the free space and the counters go back to
    /// the last commit (the last checkpoint and the journal's entries after it).
    fn reload(&mut self) -> Result<()> {
        // Not `abort`: the tree's own last commit may be the one whose superblock failed.
        self.tree.tx.invalidate_all();
        self.tails.clear();
        // Their sectors belong to the working version being dropped.
        self.tree.store_mut().wb.clear();
        // Not needed (a sector's content changes only by a program, which drops it from the
        // cache), but what failed may have been the block device itself.
        self.tree.store_mut().rc.clear();
        self.tree.reset_to(Some(self.sb.root), self.sb.index_gen)?;
        let found = self.rescan()?;
        let must = self.journal.checkpoint_required();
        self.replay_journal()?;
        self.forget_stale(&found.unwritten, false)?;
        // Nothing is appended after an entry that may be torn: the replay starts no tail.
        self.journal.require_checkpoint(must);
        Ok(())
    }

    /// Checkpoints if the working version has grown to the budget: its dirty nodes, the
    /// freed blocks the block device still holds (the cleaner copies them), or the freed
    /// blocks that keep the free ones down near the reserve (a journal commit's new blocks
    /// would find no room).
    fn maybe_commit(&mut self) -> Result<()> {
        if self.journal.replaying() {
            return Ok(());
        }
        let space = &self.tree.store().space;
        let headroom = COMMIT_HEADROOM + self.sb.sectors / 256;
        // Blocks that wait only for the replay or for a count cost the cleaner nothing.
        let for_replay = self.journal.waiting();
        let freed_runs = space.freed_runs() + self.journal.freed_runs();
        if self.tree.stats().dirty_nodes >= self.dirty_limit
            || freed_runs > self.config.freed_runs
            || space.pending().saturating_sub(for_replay) > (self.sb.sectors / 8).min(MAX_PINNED)
            || for_replay > self.sb.sectors / 4
            || (space.pending() > 0 && space.free() < self.reserve + headroom)
        {
            self.checkpoint()?;
        }
        Ok(())
    }

    /// Makes `n` data blocks available beyond the reserve, committing to free released
    /// ones if that helps.
    fn ensure_free(&mut self, n: u64) -> Result<()> {
        let need = n.saturating_add(self.reserve);
        if self.tree.store().space.free() >= need {
            return Ok(());
        }
        if self.tree.store().space.pending() > 0 {
            self.checkpoint()?;
        }
        if self.tree.store().space.free() >= need {
            Ok(())
        } else {
            Err(Error::NoSpace)
        }
    }

    /// A count that moves with every change of the working version: of the index, and of
    /// file blocks waiting in RAM changed in place (which the index does not see). The
    /// journal compares it to know whether every change is one it noted.
    fn changes(&self) -> u64 {
        let in_place = self.tree.store().wb.changes();
        self.tree.mutations().wrapping_add(in_place)
    }

    /// The time now (the running journaled operation's time, if one runs).
    fn now(&self) -> Timespec {
        self.journal
            .op_time()
            .unwrap_or_else(|| (self.config.clock)())
    }

    /// An inode's attributes.
    fn inode(&mut self, ino: Ino) -> Result<Inode> {
        match self.tree.get(&key(ino, item::INODE))? {
            // Bounded here as the walk bounds it: a mount from the saved free-space map
            // has not walked the index.
            Some(v) => match Inode::decode(&v)? {
                i if i.size > self.max_file_size() => {
                    Err(Error::Corrupt("an inode larger than a file can be"))
                }
                i => Ok(i),
            },
            None => Err(Error::NotFound),
        }
    }

    fn put_inode(&mut self, ino: Ino, inode: &Inode) -> Result<()> {
        self.tree.insert(&key(ino, item::INODE), &inode.encode())?;
        Ok(())
    }

    fn attr(&self, ino: Ino, inode: Inode) -> Result<Attr> {
        Ok(Attr {
            ino,
            kind: inode.file_type()?,
            inode,
            block_size: self.sb.block_size,
        })
    }

    /// An inode's attributes.
    pub fn getattr(&mut self, ino: Ino) -> Result<Attr> {
        let inode = self.inode(ino)?;
        self.attr(ino, inode)
    }

    /// Changes attributes: `chmod`, `chown`, `truncate`, `utimens` in one atomic step.
    pub fn setattr(&mut self, ino: Ino, set: SetAttr) -> Result<Attr> {
        let mut inode = self.inode(ino)?;
        let now = self.now();
        if let Some(size) = set.size {
            match inode.file_type()? {
                FileType::Regular => self.refuse_records(ino)?,
                FileType::Directory => return Err(Error::IsDir),
                _ => return Err(Error::InvalidArgument("truncate of a special file")),
            }
            self.truncate_inode(ino, &mut inode, size)?;
            inode.mtime = now;
        }
        if let Some(mode) = set.mode {
            inode.mode = (inode.mode & layout::S_IFMT) | (mode & 0o7777);
        }
        if let Some(uid) = set.uid {
            inode.uid = uid;
        }
        if let Some(gid) = set.gid {
            inode.gid = gid;
        }
        let pick = |t: SetTime| match t {
            SetTime::Now => now,
            SetTime::At(t) => t,
        };
        if let Some(t) = set.atime {
            inode.atime = pick(t);
        }
        if let Some(t) = set.mtime {
            inode.mtime = pick(t);
        }
        if [inode.atime, inode.mtime]
            .iter()
            .any(|t| t.nsec >= 1_000_000_000)
        {
            return Err(Error::InvalidArgument("nanoseconds past a second"));
        }
        inode.ctime = now;
        self.put_inode(ino, &inode)?;
        self.maybe_commit()?;
        self.attr(ino, inode)
    }

    /// Opens an inode: it keeps its data while open, even once it has no name left.
    pub fn open(&mut self, ino: Ino) -> Result<Attr> {
        let attr = self.getattr(ino)?;
        *self.open.entry(ino).or_insert(0) += 1;
        Ok(attr)
    }

    /// Closes an inode opened with [`Fs::open`]; the last close of an inode without a name
    /// deletes it. The last close programs the file's blocks waiting in RAM
    /// ([`FsConfig::write_buffer_bytes`]) but does not commit: as with POSIX `close`, only
    /// [`Fs::fsync`] or [`Fs::sync`] makes the writes durable.
    pub fn release(&mut self, ino: Ino) -> Result<()> {
        let Some(n) = self.open.get_mut(&ino) else {
            return Err(Error::BadHandle);
        };
        *n -= 1;
        if *n > 0 {
            return Ok(());
        }
        self.open.remove(&ino);
        match self.inode(ino) {
            // Its blocks are freed: what waits in RAM is dropped, never programmed.
            Ok(inode) if inode.nlink == 0 => {
                self.purge(ino)?;
                self.maybe_commit()
            }
            Ok(_) => self.tree.store_mut().write_back_all(Some(ino)),
            Err(Error::NotFound) => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn is_open(&self, ino: Ino) -> bool {
        self.open.contains_key(&ino)
    }
}
