//! The index's node store on the volume's sectors, and the sectors themselves.

use alloc::vec::Vec;

use super::space::Space;
use crate::error::{Error, Result};
use crate::ftl::{BlockDevice, Ftl};
use crate::index::{NodePtr, NodeStore};
use crate::log::Head;
use crate::media::Segments;

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
}

impl<D: Segments> Store<D> {
    /// Reads whole sectors; a sector outside the volume is damage, not a caller's mistake.
    pub fn read(&mut self, sector: u64, buf: &mut [u8]) -> Result<()> {
        let n = (buf.len() / self.ftl.sector_size()) as u64;
        if sector.checked_add(n).is_none_or(|e| e > self.ftl.sectors()) {
            return Err(Error::Corrupt("file-system pointer beyond the volume"));
        }
        self.ftl.read(sector, buf)
    }

    /// Reads whole sectors of file data mapped by a written extent: a sector the block
    /// device does not hold is damage ([`Error::Damaged`]), not zeros.
    pub fn read_data(&mut self, sector: u64, buf: &mut [u8]) -> Result<()> {
        let n = (buf.len() / self.ftl.sector_size()) as u64;
        if sector.checked_add(n).is_none_or(|e| e > self.ftl.sectors()) {
            return Err(Error::Corrupt("file-system pointer beyond the volume"));
        }
        self.ftl.read_sectors(sector, buf, true)
    }

    /// Writes file data.
    pub fn write_data(&mut self, sector: u64, data: &[u8]) -> Result<()> {
        self.ftl.write_to(sector, data, None)
    }

    /// Writes file data that dies young (a cyclic record file's block): the log keeps it
    /// apart from data that lives long, where it can ([`crate::log::LogConfig::hot_head`]).
    pub fn write_short_lived(&mut self, sector: u64, data: &[u8]) -> Result<()> {
        self.ftl.write_to(sector, data, Some(Head::Hot))
    }

    /// Frees the pending sectors now that the commit is durable, and lets the log forget
    /// their data so the cleaner stops copying it.
    pub fn committed(&mut self) -> Result<()> {
        for (a, n) in self.space.committed() {
            for k in a..a + n {
                self.ftl.forget(k)?;
            }
        }
        Ok(())
    }

    /// Sectors the block device holds data for that are now free.
    pub fn stale(&mut self) -> Result<Vec<u64>> {
        let space = &self.space;
        self.ftl.mapped_where(|k| space.is_free(k))
    }
}

impl<D: Segments> NodeStore for Store<D> {
    fn node_size(&self) -> usize {
        self.ftl.sector_size()
    }

    fn read(&mut self, at: NodePtr, buf: &mut [u8]) -> Result<()> {
        Store::read(self, at.0, buf)
    }

    fn write(&mut self, node: &[u8]) -> Result<NodePtr> {
        let k = self.space.alloc_node().ok_or(Error::NoSpace)?;
        if let Err(e) = self.ftl.write_to(k, node, Some(Head::Meta)) {
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
        self.ftl.patch_sector(at.0, offset, bytes)?;
        self.node_patches += 1;
        Ok(())
    }
}
