//! Format, mount and the walk over the committed index that both mount and `fsck` use.
//!
//! Mount reads the superblock, opens the index at its root and learns which blocks are in
//! use: from the saved free-space map where it can (`space_map`), else by walking every
//! node and extent once. The rest of the volume is free, and sectors the block device still
//! maps outside that set (data of operations a power cut interrupted, blocks freed since)
//! are forgotten so the cleaner does not copy them.

use alloc::vec;
use alloc::vec::Vec;

use super::counts::Counts;
use super::extents::ExtentCache;
use super::journal::Journal;
use super::layout::{
    self, item, key, key_u64, Extent, Inode, SpaceRef, Superblock, FIRST_INO, ROOT_INO,
};
use super::locality::Locality;
use super::read_cache::ReadCache;
use super::space::Space;
use super::store::Store;
use super::sweep::Sweep;
use super::txn::TxTree;
use super::writeback::WriteBack;
use super::{Fs, FsConfig};
use crate::error::{Error, Result};
use crate::ftl::{BlockDevice, Ftl};
use crate::index::{NodePtr, Tree, TreeConfig, Visit, MIN_NODE_SIZE};
use crate::media::tag::FORMAT_FILE_SYSTEM;
use crate::media::Segments;

/// Sectors a volume needs at least: the superblock, the reserve and some room for files.
const MIN_SECTORS: u64 = 64;
/// The index node cache's budget while a walk reads every node: enough for the path the
/// walk is on, so that the nodes it passes do not fill the cache (and the mount's heap).
const WALK_CACHE_BYTES: usize = 16 * 1024;

/// What a mount deletes and forgets besides the free blocks: the walk finds both; a mount
/// from the saved free-space map lists the orphans and leaves unwritten extents be.
struct Found {
    orphans: Vec<u64>,
    unwritten: Vec<(u64, u64, Extent)>,
}

/// Sectors in use by the committed version, as the walk found them.
pub(super) struct Usage {
    /// One bit per sector.
    pub used: Vec<u64>,
    /// Inodes found.
    pub inodes: u64,
    /// Orphans to delete.
    pub orphans: Vec<u64>,
    /// Largest inode number found.
    pub max_ino: u64,
    /// Extents allocated but never written, by inode and first file block: their sectors
    /// hold no data the volume needs, but the block device may still hold old data for
    /// them (a sector it forgot comes back at its mount until the file system forgets it
    /// again).
    pub unwritten: Vec<(u64, u64, Extent)>,
}

impl Usage {
    fn new(sectors: u64) -> Usage {
        Usage {
            used: vec![0; sectors.div_ceil(64) as usize],
            inodes: 0,
            orphans: Vec::new(),
            max_ino: 0,
            unwritten: Vec::new(),
        }
    }

    pub fn is_used(&self, k: u64) -> bool {
        self.used
            .get((k / 64) as usize)
            .is_some_and(|w| w & (1 << (k % 64)) != 0)
    }

    /// Marks a run used; fails if a sector is outside the volume or already used.
    pub fn mark(&mut self, start: u64, n: u64) -> Result<()> {
        let sectors = self.used.len() as u64 * 64;
        if start.checked_add(n).is_none_or(|e| e > sectors) {
            return Err(Error::Corrupt("a block beyond the volume"));
        }
        for k in start..start + n {
            let (w, b) = ((k / 64) as usize, k % 64);
            if self.used[w] & (1 << b) != 0 {
                return Err(Error::Corrupt("a block used twice"));
            }
            self.used[w] |= 1 << b;
        }
        Ok(())
    }
}

/// Blocks at the start of every file that go to the fast tier ([`FsConfig::fast_tier_file_bytes`]):
/// none on one device.
fn fast_file_blocks<D: Segments>(config: &FsConfig, ftl: &Ftl<D>) -> u64 {
    if ftl.log().device().is_tiered() {
        config.fast_tier_file_bytes / ftl.sector_size() as u64
    } else {
        0
    }
}

/// The index's settings: spare pointers as configured, or wherever the device can patch.
fn tree_config<D: Segments>(config: &FsConfig, ftl: &Ftl<D>) -> TreeConfig {
    TreeConfig {
        spare_pointers: config.spare_pointers.unwrap_or_else(|| ftl.can_patch()),
        ..config.tree
    }
}

/// Reserve and commit budget for a volume of `sectors`: the reserve holds a commit of a
/// full budget of dirty nodes plus the nodes one operation can dirty on top. With a
/// journal whose entries share blocks (`long_journal`) the budget is larger: dirty nodes
/// then wait for a checkpoint over many commits, and a small budget would force one every
/// few. A journal of a block per entry checkpoints every few commits anyway.
fn budgets(sectors: u64, dirty_limit: Option<usize>, long_journal: bool) -> (u64, usize) {
    let share = if long_journal { 20 } else { 64 };
    let limit = dirty_limit.unwrap_or((sectors / share).clamp(8, 512) as usize);
    // A limit whose reserve the volume cannot hold twice over is lowered to one it can (8
    // at least): a profile's fixed limit (`FsConfig::small_ram`) then fits small parts too.
    let affordable = ((sectors / 2).saturating_sub(32) / 2).max(8) as usize;
    let limit = limit.min(affordable);
    (limit as u64 * 2 + 32, limit)
}

impl<D: Segments> Fs<D> {
    /// Formats `dev` with an empty file system (just the root directory).
    pub fn format(dev: D, config: FsConfig) -> Result<Self> {
        let ss = dev.geometry().slot_size as usize;
        let config = config.budgeted(ss);
        if ss < MIN_NODE_SIZE {
            return Err(Error::InvalidArgument(
                "slots too small for the file system's index nodes",
            ));
        }
        let ftl = Ftl::format_as(dev, config.ftl, FORMAT_FILE_SYSTEM)?;
        let sectors = ftl.sectors();
        if sectors > u64::from(u32::MAX) {
            return Err(Error::InvalidArgument(
                "a file system of more than 2^32 - 1 blocks",
            ));
        }
        let journal_blocks = match config.journal_blocks {
            None if ftl.can_patch() => (sectors / 32).clamp(8, 256) as u16,
            // Where written bytes cannot be programmed again each entry takes a block of
            // its own. An epoch of that many small commits lets the blocks they change
            // wait in the write-back buffers until its checkpoint, each then programmed
            // once for all the small writes to it; a mount after a cut reads the epoch's
            // blocks, at most this many.
            None => (sectors / 32).clamp(8, 128) as u16,
            Some(0) => 0,
            Some(n) if u64::from(n) > sectors / 4 => {
                return Err(Error::InvalidArgument(
                    "a journal of more than a quarter of the volume",
                ))
            }
            Some(n) => n,
        };
        let long_journal = journal_blocks > 0 && ftl.can_patch();
        let (reserve, dirty_limit) = budgets(sectors, config.dirty_limit, long_journal);
        if sectors < MIN_SECTORS.max(reserve * 2) {
            return Err(Error::InvalidArgument("device too small for a file system"));
        }
        let space = Space::from_used(sectors, |k| k <= u64::from(journal_blocks));
        let tree_config = tree_config(&config, &ftl);
        let hot_in_slc = ftl.log().keeps_hot_in_slc();
        let fast_file_blocks = fast_file_blocks(&config, &ftl);
        let store = Store {
            ftl,
            space,
            node_writes: 0,
            node_patches: 0,
            map_writes: 0,
            wb: WriteBack::new(config.write_buffer_bytes / ss),
            rc: ReadCache::new(config.read_cache_bytes / ss),
            locality: Locality::new(hot_in_slc),
            sweep: Sweep::default(),
            fast_file_blocks,
        };
        let tree = TxTree::new(
            Tree::open_at(store, None, 0, tree_config)?,
            config.tid_window,
        );
        // The superblock of no commit yet: the first commit, below, writes it.
        let sb = Superblock {
            commit: 0,
            root: NodePtr(0),
            next_ino: FIRST_INO,
            sectors,
            block_size: ss as u32,
            index_gen: 0,
            user_bytes: 0,
            flash_slots: 0,
            migrated_slots: 0,
            shares: None,
            journal_blocks,
            inodes: 0,
            space: SpaceRef::None,
        };
        let mut fs = Fs {
            tree,
            sb,
            config,
            open: Default::default(),
            inodes: 1,
            reserve,
            dirty_limit,
            counts: Counts::new(&sb),
            extent_cache: ExtentCache::new(config.extent_maps, config.extent_map_extents),
            block0: Default::default(),
            closing: false,
            buf: vec![0; ss],
            journal: Journal::new(u32::from(journal_blocks), 0),
            pack: Default::default(),
            tails: Default::default(),
        };
        let now = fs.now();
        let root = Inode {
            mode: layout::FileType::Directory.mode_bits() | 0o755,
            uid: 0,
            gid: 0,
            nlink: 2,
            size: 0,
            atime: now,
            mtime: now,
            ctime: now,
            rdev: 0,
            blocks: 0,
            parent: ROOT_INO,
        };
        fs.put_inode(ROOT_INO, &root)?;
        fs.write_commit()?;
        Ok(fs)
    }

    /// Mounts the file system on `dev`.
    pub fn mount(dev: D, config: FsConfig) -> Result<Self> {
        let config = config.budgeted(dev.geometry().slot_size as usize);
        let ftl = Ftl::mount_as(dev, config.ftl, FORMAT_FILE_SYSTEM)?;
        let ss = ftl.sector_size();
        let sectors = ftl.sectors();
        let mut buf = vec![0; ss];
        let tree_config = tree_config(&config, &ftl);
        let hot_in_slc = ftl.log().keeps_hot_in_slc();
        let fast_file_blocks = fast_file_blocks(&config, &ftl);
        let mut store = Store {
            ftl,
            space: Space::default(),
            node_writes: 0,
            node_patches: 0,
            map_writes: 0,
            wb: WriteBack::new(config.write_buffer_bytes / ss),
            rc: ReadCache::new(config.read_cache_bytes / ss),
            locality: Locality::new(hot_in_slc),
            sweep: Sweep::default(),
            fast_file_blocks,
        };
        store.read(0, &mut buf)?;
        // The newest of the superblocks block 0 holds. The first commit after the mount
        // writes block 0 afresh: a torn record may follow the newest.
        let (sb, _) = Superblock::decode_newest(&buf)?;
        if sb.sectors != sectors || sb.block_size as usize != ss {
            return Err(Error::Corrupt(
                "superblock geometry differs from the volume",
            ));
        }
        if sb.root.0 == 0 || sb.root.0 >= sectors {
            return Err(Error::Corrupt("superblock root beyond the volume"));
        }
        let tree = TxTree::new(
            Tree::open_at(store, Some(sb.root), sb.index_gen, tree_config)?,
            config.tid_window,
        );
        let long_journal = sb.journal_blocks > 0 && tree.store().ftl.can_patch();
        let (reserve, dirty_limit) = budgets(sectors, config.dirty_limit, long_journal);
        let mut fs = Fs {
            tree,
            sb,
            config,
            open: Default::default(),
            inodes: 0,
            reserve,
            dirty_limit,
            counts: Counts::new(&sb),
            extent_cache: ExtentCache::new(config.extent_maps, config.extent_map_extents),
            block0: Default::default(),
            closing: false,
            buf,
            journal: Journal::default(),
            pack: Default::default(),
            tails: Default::default(),
        };
        // The saved free-space map where the superblock names a current one that reads
        // back whole; otherwise the walk (SPEC.md §8.5).
        let block0 = fs.buf.clone();
        let found = match fs.load_space_map(&block0)? {
            Some(space) => {
                fs.tree.store_mut().space = space;
                fs.inodes = fs.sb.inodes;
                fs.counts.note_mount_from_map();
                Found {
                    orphans: fs.orphan_list()?,
                    unwritten: Vec::new(),
                }
            }
            None => {
                let usage = fs.rescan()?;
                Found {
                    orphans: usage.orphans,
                    unwritten: usage.unwritten,
                }
            }
        };
        if fs.tree.get(&key(ROOT_INO, item::INODE))?.is_none() {
            return Err(Error::Corrupt("no root directory"));
        }
        // Commits after the last checkpoint that are journal entries (SPEC.md §8.5b).
        let replayed = fs.replay_journal()?;
        let closed = fs.tree.store().ftl.log().found_closed();
        fs.forget_stale(&found.unwritten, closed)?;
        // A block of this epoch may end in a torn or unfinished entry; nothing is appended
        // after one, so a new epoch starts.
        let journal_used = fs.journal.blocks_in_epoch().next().is_some();
        // Spares a power cut left from an unrecorded commit: the next commit reuses their
        // generation, so the nodes holding them are copied now (SPEC.md §7.6).
        let garbage_spares = fs.tree.rewrite_garbage()? as u64;
        fs.counts.found_garbage_spares(garbage_spares);
        for ino in &found.orphans {
            fs.purge(*ino)?;
        }
        if !found.orphans.is_empty() || garbage_spares > 0 || replayed > 0 || journal_used {
            fs.checkpoint()?;
        }
        Ok(fs)
    }

    /// Rebuilds free space and counts from the committed version and returns what else the
    /// walk found. The sectors it does not use are forgotten once the journal is replayed
    /// ([`Fs::forget_stale`]): an entry may name a data block written after the checkpoint.
    pub(super) fn rescan(&mut self) -> Result<Usage> {
        // Extent maps follow the working version, which is about to be forgotten.
        self.extent_cache.clear();
        let usage = self.walk()?;
        if usage.max_ino >= self.sb.next_ino {
            return Err(Error::Corrupt(
                "an inode numbered beyond the superblock's count",
            ));
        }
        let sectors = self.sb.sectors;
        let space = Space::from_used(sectors, |k| usage.is_used(k));
        let store = self.tree.store_mut();
        store.space = space;
        self.inodes = usage.inodes;
        Ok(usage)
    }

    /// Lets the block device forget the data of sectors that no version uses, and of those
    /// `unwritten` (from the rescan) still maps unwritten after the replay, so the cleaner
    /// stops copying it. What the block device forgot since its last checkpoint is not
    /// durable: without this, a mount after a power cut would bring back dead data the log
    /// had already counted as free space. After a close (`closed`, SPEC.md §3.5) the
    /// checkpoint holds every forget, and none is looked for. After a mount from a
    /// checkpoint, the sweep looks for them after the mount (`sweep`): a look now would
    /// read every page of the map that holds data. After a scan the whole map is in RAM and
    /// the look reads nothing: it is done now.
    pub(super) fn forget_stale(
        &mut self,
        unwritten: &[(u64, u64, Extent)],
        closed: bool,
    ) -> Result<()> {
        let store = self.tree.store_mut();
        if store.ftl.log().restored() {
            if !closed {
                store.start_sweep();
            }
        } else {
            store.forget_free()?;
        }
        for &(ino, first, e) in unwritten {
            // The blocks an extent of now still maps unwritten to the same sectors; both
            // map block `b` to `start + b - first`, so they agree everywhere or nowhere.
            for (b, now) in self.extents_in(ino, first, first + e.len)? {
                if !now.unwritten || now.start + first != e.start + b {
                    continue;
                }
                let (lo, hi) = (b.max(first), (b + now.len).min(first + e.len));
                let store = self.tree.store_mut();
                for k in e.start + (lo - first)..e.start + (hi - first) {
                    store.forget(k)?;
                }
            }
        }
        Ok(())
    }

    /// The orphans the committed index lists.
    fn orphan_list(&mut self) -> Result<Vec<u64>> {
        let (lo, hi) = (
            key(layout::ORPHANS, item::ORPHAN),
            key(layout::ORPHANS, item::ORPHAN + 1),
        );
        let mut out = Vec::new();
        for entry in self.tree.range(lo..hi) {
            let (k, _) = entry?;
            let (_, _, rest) = layout::split_key(&k)?;
            out.push(layout::suffix_u64(rest)?);
        }
        Ok(out)
    }

    /// Walks the committed index once: every node, and each leaf's items right after it.
    pub(super) fn walk(&mut self) -> Result<Usage> {
        let max_size = self.max_file_size();
        let max_blocks = max_size / self.bs();
        let mut usage = Usage::new(self.sb.sectors);
        usage.mark(0, 1 + u64::from(self.sb.journal_blocks))?;
        // The saved free-space map the superblock names is in use until a commit names
        // another.
        if let Some(at) = self.sb.space.map() {
            usage.mark(at, self.map_len())?;
        }
        self.tree.with_cache_budget(WALK_CACHE_BYTES, |tree| {
            tree.walk_committed(|v| match v {
                Visit::Node(p) => usage.mark(p.0, 1),
                Visit::Item(k, v) => check_item(k, v, &mut usage, (max_size, max_blocks)),
            })
        })?;
        Ok(usage)
    }

    /// Records that `ino` has no name but is open, so a mount after a power cut deletes it.
    pub(super) fn add_orphan(&mut self, ino: u64) -> Result<()> {
        self.tree
            .insert(&key_u64(layout::ORPHANS, item::ORPHAN, ino), &[])?;
        Ok(())
    }
}

/// Checks one item of the walk and notes what it uses; `max` is the largest file's size in
/// bytes and in blocks.
fn check_item(k: &[u8], v: &[u8], usage: &mut Usage, max: (u64, u64)) -> Result<()> {
    let (max_size, max_blocks) = max;
    let (ino, ty, rest) = layout::split_key(k)?;
    usage.max_ino = usage.max_ino.max(ino);
    match ty {
        // Sizes and extents are bounded here, once, so that nothing after mount does
        // arithmetic on a damaged value.
        item::INODE => {
            if Inode::decode(v)?.size > max_size {
                return Err(Error::Corrupt("an inode larger than a file can be"));
            }
            usage.inodes += 1;
        }
        item::EXTENT => {
            let first = layout::suffix_u64(rest)?;
            let e = Extent::decode(v)?;
            if first.checked_add(e.len).is_none_or(|end| end > max_blocks) {
                return Err(Error::Corrupt("an extent past the largest file"));
            }
            usage.mark(e.start, e.len)?;
            if e.unwritten {
                usage.unwritten.push((ino, first, e));
            }
        }
        item::DIRENT => {
            layout::dirent_name(rest)?;
            layout::decode_dirent(v)?;
        }
        item::ORPHAN if ino == layout::ORPHANS => {
            usage.orphans.push(layout::suffix_u64(rest)?);
        }
        item::XATTR => {}
        item::RECORDS => {
            layout::RecordHead::decode(v)?;
        }
        item::RECORD => {
            layout::record_suffix(rest)?;
        }
        item::INT_DIRENT => {
            layout::int_dirent_name(rest)?;
            layout::decode_dirent(v)?;
        }
        item::FLAT_NAME if ino == layout::FLAT => {
            layout::flat_name(rest)?;
            layout::decode_dirent(v)?;
        }
        _ => return Err(Error::Corrupt("unknown item type in the index")),
    }
    Ok(())
}
