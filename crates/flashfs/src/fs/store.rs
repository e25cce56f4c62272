//! The index's node store on the volume's sectors, and the sectors themselves.

use alloc::vec::Vec;

use super::layout::Ino;
use super::locality::Locality;
use super::read_cache::ReadCache;
use super::space::Space;
use super::sweep::Sweep;
use super::writeback::WriteBack;
use crate::error::{Error, Result};
use crate::ftl::{BlockDevice, Ftl};
use crate::index::{NodePtr, NodeStore, SPARE_LEN};
use crate::log::{FastShare, Head};
use crate::media::{Segments, Tier};

/// The block device the file system keeps its blocks in, and which of them are free.
#[derive(Debug)]
pub struct Store<D> {
    /// Sectors on the log.
    pub ftl: Ftl<D>,
    /// Free sectors.
    pub space: Space,
    /// Index nodes written.
    pub node_writes: u64,
    /// Index nodes changed in place (spare pointers set).
    pub node_patches: u64,
    /// Blocks of saved free-space maps written.
    pub map_writes: u64,
    /// File blocks whose program waits (`writeback`): reads see them.
    pub wb: WriteBack,
    /// File blocks small reads took part of (`read_cache`), by sector: every program,
    /// patch or forget of a sector through this store drops it from there.
    pub rc: ReadCache,
    /// Which file extents are rewritten soon, where the log keeps such data in SLC.
    pub locality: Locality,
    /// The look for data of free sectors a power cut left the block device (`sweep`).
    pub sweep: Sweep,
    /// Blocks at the start of every file whose data goes to the fast tier of a volume on
    /// two devices while it takes data ([`FsConfig::fast_tier_file_bytes`]).
    pub fast_file_blocks: u64,
}

impl<D: Segments> Store<D> {
    /// Reads whole sectors; a sector outside the volume is damage, not a caller's mistake.
    pub fn read(&mut self, sector: u64, buf: &mut [u8]) -> Result<()> {
        let n = (buf.len() / self.ftl.sector_size()) as u64;
        if sector.checked_add(n).is_none_or(|e| e > self.ftl.sectors()) {
            return Err(Error::Corrupt("file-system pointer beyond the volume"));
        }
        if !self.wb.holds_any(sector, n) {
            return self.ftl.read(sector, buf);
        }
        // Sector by sector: a buffered one is not on the block device yet (what it holds
        // there is a former owner's).
        let ss = self.ftl.sector_size();
        for (i, chunk) in buf.chunks_exact_mut(ss).enumerate() {
            let k = sector + i as u64;
            match self.wb.get(k) {
                Some(data) => chunk.copy_from_slice(data),
                None => self.ftl.read(k, chunk)?,
            }
        }
        Ok(())
    }

    /// Reads whole sectors of file data mapped by a written extent: a sector the block
    /// device does not hold is damage ([`Error::Damaged`]), not zeros.
    pub fn read_data(&mut self, sector: u64, buf: &mut [u8]) -> Result<()> {
        let n = (buf.len() / self.ftl.sector_size()) as u64;
        if sector.checked_add(n).is_none_or(|e| e > self.ftl.sectors()) {
            return Err(Error::Corrupt("file-system pointer beyond the volume"));
        }
        if !self.wb.holds_any(sector, n) {
            return self.ftl.read_sectors(sector, buf, true);
        }
        // Sector by sector: the buffered ones are not on the block device yet.
        let ss = self.ftl.sector_size();
        for (i, chunk) in buf.chunks_exact_mut(ss).enumerate() {
            let k = sector + i as u64;
            match self.wb.get(k) {
                Some(data) => chunk.copy_from_slice(data),
                None => self.ftl.read_sectors(k, chunk, true)?,
            }
        }
        Ok(())
    }

    /// Reads one whole block of file data mapped by a written extent, as
    /// [`Store::read_data`], for a read that takes part of it: from the write-back buffers
    /// if it waits there (newer than anything on flash), else from the read cache, else
    /// from the block device, keeping it in the read cache once read and checked.
    pub fn read_data_block(&mut self, sector: u64, buf: &mut [u8]) -> Result<()> {
        if buf.len() != self.ftl.sector_size() {
            return Err(Error::InvalidArgument(
                "a cached read of other than a block",
            ));
        }
        if self.wb.holds_any(sector, 1) || !self.rc.enabled() {
            return self.read_data(sector, buf);
        }
        if self.rc.get(sector, buf) {
            return Ok(());
        }
        self.read_data(sector, buf)?;
        self.rc.insert(sector, buf);
        Ok(())
    }

    /// Reads whole sectors of file data, as [`Store::read_data`], taking the blocks the read
    /// cache holds from it (and keeping none: the caller takes them whole).
    pub fn read_data_through(&mut self, sector: u64, buf: &mut [u8]) -> Result<()> {
        let ss = self.ftl.sector_size();
        let n = (buf.len() / ss) as u64;
        if !self.rc.holds_any(sector, n) {
            return self.read_data(sector, buf);
        }
        for (i, chunk) in buf.chunks_exact_mut(ss).enumerate() {
            let k = sector + i as u64;
            if self.wb.holds_any(k, 1) || !self.rc.get(k, chunk) {
                self.read_data(k, chunk)?;
            }
        }
        Ok(())
    }

    /// Reads a whole sector as [`Store::read`] does, from the read cache if it holds it:
    /// for a write that keeps part of a block.
    pub fn read_for_update(&mut self, sector: u64, buf: &mut [u8]) -> Result<()> {
        if buf.len() == self.ftl.sector_size()
            && !self.wb.holds_any(sector, 1)
            && self.rc.get(sector, buf)
        {
            return Ok(());
        }
        self.read(sector, buf)
    }

    /// Drops sectors `[sector, sector + n)` from the read cache, before their content
    /// changes: dropped first, a program that fails half done leaves nothing stale.
    fn changing(&mut self, sector: u64, n: usize) {
        self.rc.invalidate(sector, n as u64);
    }

    /// Writes file data.
    pub fn write_data(&mut self, sector: u64, data: &[u8]) -> Result<()> {
        self.changing(sector, data.len() / self.ftl.sector_size());
        self.ftl.write_to(sector, data, None)
    }

    /// Writes whole sectors of file data of `ino` from its block `block` on: the log keeps
    /// them with other rewritten data if the 2Q ([`Locality`]) finds that block's extent
    /// hot (a run of sectors is classified by its first block), on the fast tier if it is
    /// at a file's start ([`Store::file_block_head`]).
    ///
    /// `replaced` is the sector of the version the run's first block replaces, if it had
    /// one on flash.
    pub fn write_file_data(
        &mut self,
        sector: u64,
        data: &[u8],
        ino: Ino,
        block: u64,
        replaced: Option<u64>,
    ) -> Result<()> {
        let ss = self.ftl.sector_size();
        // A run across the end of the file's start goes down in two parts; the second
        // replaces what it replaces (a run is placed by its first block).
        let start = self.fast_file_blocks.saturating_sub(block);
        if start > 0 && start < (data.len() / ss) as u64 {
            let (head, tail) = data.split_at(start as usize * ss);
            self.write_file_data(sector, head, ino, block, replaced)?;
            return self.write_file_data(sector + start, tail, ino, block + start, None);
        }
        let hot = self.locality.wrote(ino, block).then_some(Head::Hot);
        let head = self.file_block_head(block, hot, replaced)?;
        self.changing(sector, data.len() / ss);
        self.ftl.write_to(sector, data, head)
    }

    /// Writes a whole file block, block `block` of its file, whose content waited in RAM.
    pub fn write_file_block(&mut self, sector: u64, data: &[u8], block: u64) -> Result<()> {
        let head = self.file_block_head(block, None, None)?;
        self.changing(sector, data.len() / self.ftl.sector_size());
        self.ftl.write_to(sector, data, head)
    }

    /// The log's head for data of a file's block `block`: the metadata head, whose
    /// segments are on the fast tier of a volume on two devices, for the first
    /// [`Store::fast_file_blocks`] of a file while that tier takes data
    /// ([`crate::log::Log::fast_tier_share`], with more room for a block whose `replaced`
    /// version lies there); `otherwise` else. A small file is then written to
    /// the NVRAM whole, at its speed, where its data would cost NAND programs, and
    /// rewritten there.
    fn file_block_head(
        &mut self,
        block: u64,
        otherwise: Option<Head>,
        replaced: Option<u64>,
    ) -> Result<Option<Head>> {
        if block >= self.fast_file_blocks {
            return Ok(otherwise);
        }
        let fast = match (self.ftl.log().fast_tier_share(), replaced) {
            (FastShare::Any, _) => true,
            // Above the half, where the version replaced lies decides (one lookup in the
            // sector map, only then).
            (FastShare::Replacing, Some(old)) => self.ftl.tier_of(old)? == Some(Tier::Fast),
            _ => false,
        };
        Ok(if fast { Some(Head::Meta) } else { otherwise })
    }

    /// Writes whole sectors that are not file data (maps, the superblock) with the log's
    /// `head`.
    pub fn write_meta(&mut self, sector: u64, data: &[u8], head: Head) -> Result<()> {
        self.changing(sector, data.len() / self.ftl.sector_size());
        self.ftl.write_to(sector, data, Some(head))
    }

    /// Programs `bytes` at `offset` inside `sector`'s current content, in place
    /// ([`Ftl::patch_sector`]).
    pub fn patch_sector(&mut self, sector: u64, offset: usize, bytes: &[u8]) -> Result<()> {
        self.changing(sector, 1);
        self.ftl.patch_sector(sector, offset, bytes)
    }

    /// Lets the block device forget `sector`'s data ([`Ftl::forget`]).
    pub fn forget(&mut self, sector: u64) -> Result<()> {
        self.changing(sector, 1);
        self.ftl.forget(sector)
    }

    /// Has the block device let go of `sectors`, blocks that a mount reads whatever they hold
    /// (the journal's), so that a power cut never brings one back as data lost
    /// ([`Ftl::let_go`]).
    pub fn let_go(&mut self, sectors: &[u64]) -> Result<()> {
        let mut ranges = Vec::new();
        let mut rest = sectors;
        while let Some(&first) = rest.first() {
            let run = rest
                .iter()
                .zip(first..)
                .take_while(|(&k, want)| k == *want)
                .count();
            self.changing(first, run);
            ranges.push((first, run as u64));
            rest = &rest[run..];
        }
        self.ftl.let_go(&ranges)
    }

    /// Keeps `data`, the whole block of file `ino` at `sector`, in RAM instead of
    /// programming it, and programs the least recently written buffered blocks beyond the
    /// bound.
    pub fn defer_data(&mut self, sector: u64, ino: Ino, block: u64, data: Vec<u8>) -> Result<()> {
        self.changing(sector, 1);
        self.wb.insert(sector, ino, block, data);
        while let Some(k) = self.wb.over_limit() {
            self.write_back(k)?;
        }
        Ok(())
    }

    /// Programs buffered `sector` and drops it from the buffers (nothing if not buffered);
    /// on failure it stays buffered.
    pub fn write_back(&mut self, sector: u64) -> Result<()> {
        let Some((ino, block)) = self.wb.owner(sector) else {
            return Ok(());
        };
        let Some(data) = self.wb.take(sector) else {
            return Ok(());
        };
        match self.write_file_block(sector, &data, block) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.wb.put_back(sector, ino, block, data);
                Err(e)
            }
        }
    }

    /// Programs every buffered block, of file `ino` only if given.
    pub fn write_back_all(&mut self, ino: Option<Ino>) -> Result<()> {
        for k in self.wb.sectors(ino) {
            self.write_back(k)?;
        }
        Ok(())
    }

    /// Writes file data that dies young (a cyclic record file's block): the log keeps it
    /// apart from data that lives long, where it can ([`crate::log::LogConfig::hot_head`]).
    pub fn write_short_lived(&mut self, sector: u64, data: &[u8]) -> Result<()> {
        self.changing(sector, data.len() / self.ftl.sector_size());
        self.ftl.write_to(sector, data, Some(Head::Hot))
    }

    /// Starts the sweep (`sweep`) from the first sector.
    pub fn start_sweep(&mut self) {
        self.sweep.start();
    }

    /// Takes one step of the sweep, if one is under way: one map page at most.
    pub fn sweep_step(&mut self) -> Result<()> {
        self.sweep.step(&mut self.ftl, &self.space, &mut self.rc)
    }

    /// Finishes the sweep.
    pub fn sweep_all(&mut self) -> Result<()> {
        while self.sweep.is_pending() {
            self.sweep_step()?;
        }
        Ok(())
    }

    /// Sweeps the whole map now.
    pub fn forget_free(&mut self) -> Result<()> {
        self.start_sweep();
        self.sweep_all()
    }

    /// Frees the pending sectors now that the commit is durable, and lets the log forget
    /// their data so the cleaner stops copying it.
    pub fn committed(&mut self) -> Result<()> {
        for (a, n) in self.space.committed() {
            for k in a..a + n {
                self.forget(k)?;
            }
        }
        Ok(())
    }
}

impl<D: Segments> NodeStore for Store<D> {
    fn node_size(&self) -> usize {
        self.ftl.sector_size()
    }

    fn read(&mut self, at: NodePtr, buf: &mut [u8]) -> Result<()> {
        if at.0 >= self.ftl.sectors() || self.wb.holds_any(at.0, 1) {
            return Store::read(self, at.0, buf);
        }
        // A node is programmed in place only in its spare area (`patch`, SPEC.md §7.6):
        // the erased bytes between its payload and that area are not read.
        self.ftl.read_sector_written(at.0, buf, SPARE_LEN)
    }

    fn write(&mut self, node: &[u8]) -> Result<NodePtr> {
        let k = self.space.alloc_node().ok_or(Error::NoSpace)?;
        if let Err(e) = self.write_meta(k, node, Head::Meta) {
            self.space.unalloc(k, 1);
            return Err(e);
        }
        self.node_writes += 1;
        Ok(NodePtr(k))
    }

    fn release(&mut self, at: NodePtr) {
        self.space.release_node(at.0, 1);
    }

    fn can_patch(&self) -> bool {
        self.ftl.can_patch()
    }

    fn patch(&mut self, at: NodePtr, offset: usize, bytes: &[u8]) -> Result<()> {
        if at.0 == 0 || at.0 >= self.ftl.sectors() {
            return Err(Error::Corrupt("file-system pointer beyond the volume"));
        }
        // Reads leave out what lies between a node's payload and its spare area.
        if offset < self.node_size().saturating_sub(SPARE_LEN) {
            return Err(Error::InvalidArgument(
                "an index node is patched only in its spare area",
            ));
        }
        self.patch_sector(at.0, offset, bytes)?;
        self.node_patches += 1;
        Ok(())
    }
}
