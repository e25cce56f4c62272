//! A node store in RAM, with counters and an injected write failure, for tests and for
//! measuring the tree alone.

use alloc::vec::Vec;

use flash::FlashError;

use super::{NodePtr, NodeStore};
use crate::error::{Error, Result};

/// What a [`MemStore`] has been asked to do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemStoreStats {
    /// Nodes read.
    pub reads: u64,
    /// Nodes written.
    pub writes: u64,
    /// Nodes released.
    pub releases: u64,
    /// Releases of a node already released, or never written: always a bug.
    pub bad_releases: u64,
    /// Reads of a released node: always a bug.
    pub reads_after_release: u64,
    /// Nodes patched in place.
    pub patches: u64,
}

/// Nodes in a `Vec`, never reused: node `n` is the `n`-th written. Released nodes stay
/// stored but refuse reads, so a tree that still uses one is caught.
#[derive(Debug, Clone)]
pub struct MemStore {
    node_size: usize,
    nodes: Vec<Vec<u8>>,
    released: Vec<bool>,
    stats: MemStoreStats,
    writes_left: Option<u64>,
    patchable: bool,
}

impl MemStore {
    /// An empty store of nodes of `node_size` bytes.
    pub fn new(node_size: usize) -> MemStore {
        MemStore {
            node_size,
            nodes: Vec::new(),
            released: Vec::new(),
            stats: MemStoreStats::default(),
            writes_left: None,
            patchable: false,
        }
    }

    /// Lets nodes be patched in place (clearing bits only), as on reprogrammable NOR, or
    /// not: what [`NodeStore::can_patch`] says.
    pub fn set_patchable(&mut self, on: bool) {
        self.patchable = on;
    }

    /// The counters.
    pub fn stats(&self) -> MemStoreStats {
        self.stats
    }

    /// Zeroes the counters.
    pub fn reset_stats(&mut self) {
        self.stats = MemStoreStats::default();
    }

    /// Lets `n` more writes (patches count as writes) succeed, then fails every write (as a
    /// power cut would) until called again; `None` never fails.
    pub fn fail_writes_after(&mut self, n: Option<u64>) {
        self.writes_left = n;
    }

    /// Nodes ever written (the next write's pointer).
    pub fn written(&self) -> u64 {
        self.nodes.len() as u64
    }

    /// Whether the node at `p` was released.
    pub fn is_released(&self, p: NodePtr) -> bool {
        self.released.get(p.0 as usize).copied().unwrap_or(false)
    }

    /// Nodes written and not released.
    pub fn live(&self) -> impl Iterator<Item = NodePtr> + '_ {
        self.released
            .iter()
            .enumerate()
            .filter(|(_, &r)| !r)
            .map(|(i, _)| NodePtr(i as u64))
    }

    /// Counts a write against [`MemStore::fail_writes_after`].
    fn take_write(&mut self) -> Result<()> {
        if let Some(left) = self.writes_left.as_mut() {
            if *left == 0 {
                return Err(Error::Flash(FlashError::PowerLoss));
            }
            *left -= 1;
        }
        Ok(())
    }

    /// The stored bytes of the node at `p`, to damage in tests.
    pub fn node_mut(&mut self, p: NodePtr) -> Option<&mut [u8]> {
        self.nodes.get_mut(p.0 as usize).map(Vec::as_mut_slice)
    }
}

impl NodeStore for MemStore {
    fn node_size(&self) -> usize {
        self.node_size
    }

    fn read(&mut self, at: NodePtr, buf: &mut [u8]) -> Result<()> {
        self.stats.reads += 1;
        if buf.len() != self.node_size {
            return Err(Error::InvalidArgument("buffer is not one node"));
        }
        let i = at.0 as usize;
        let node = self
            .nodes
            .get(i)
            .ok_or(Error::Corrupt("index pointer to no node"))?;
        if self.released.get(i).copied().unwrap_or(true) {
            self.stats.reads_after_release += 1;
            return Err(Error::Corrupt("index pointer to a released node"));
        }
        buf.copy_from_slice(node);
        Ok(())
    }

    fn write(&mut self, node: &[u8]) -> Result<NodePtr> {
        if node.len() != self.node_size {
            return Err(Error::InvalidArgument("write of a partial node"));
        }
        self.take_write()?;
        self.stats.writes += 1;
        let p = NodePtr(self.nodes.len() as u64);
        self.nodes.push(node.to_vec());
        self.released.push(false);
        Ok(p)
    }

    fn can_patch(&self) -> bool {
        self.patchable
    }

    fn patch(&mut self, at: NodePtr, offset: usize, bytes: &[u8]) -> Result<()> {
        if !self.patchable {
            return Err(Error::Unsupported("this node store cannot patch nodes"));
        }
        let i = at.0 as usize;
        if self.released.get(i).copied().unwrap_or(true) {
            return Err(Error::InvalidArgument("patch of a node not stored"));
        }
        let node = self
            .nodes
            .get(i)
            .ok_or(Error::InvalidArgument("patch of a node not stored"))?;
        let old = offset
            .checked_add(bytes.len())
            .and_then(|end| node.get(offset..end))
            .ok_or(Error::InvalidArgument("patch beyond its node"))?;
        if bytes.iter().zip(old).any(|(n, o)| n & !o != 0) {
            return Err(Error::InvalidArgument("a patch may only clear bits"));
        }
        self.take_write()?;
        self.stats.patches += 1;
        if let Some(node) = self.nodes.get_mut(i) {
            for (o, n) in node[offset..offset + bytes.len()].iter_mut().zip(bytes) {
                *o &= n;
            }
        }
        Ok(())
    }

    fn release(&mut self, at: NodePtr) {
        match self.released.get_mut(at.0 as usize) {
            Some(r) if !*r => {
                *r = true;
                self.stats.releases += 1;
            }
            _ => self.stats.bad_releases += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_fails_and_catches_misuse() {
        let mut s = MemStore::new(512);
        let node = [7u8; 512];
        let a = s.write(&node).unwrap();
        s.fail_writes_after(Some(1));
        let b = s.write(&node).unwrap();
        assert_eq!(s.write(&node), Err(Error::Flash(FlashError::PowerLoss)));
        s.fail_writes_after(None);
        assert!(s.write(&node[..100]).is_err());
        s.release(a);
        s.release(a);
        let mut buf = [0u8; 512];
        assert!(matches!(s.read(a, &mut buf), Err(Error::Corrupt(_))));
        s.read(b, &mut buf).unwrap();
        assert_eq!(buf, node);
        assert!(matches!(
            s.read(NodePtr(9), &mut buf),
            Err(Error::Corrupt(_))
        ));
        let st = s.stats();
        assert_eq!((st.writes, st.releases, st.bad_releases), (2, 1, 1));
        assert_eq!((st.reads, st.reads_after_release), (3, 1));
        assert_eq!(s.live().collect::<Vec<_>>(), [b]);
        assert_eq!(s.written(), 2);
    }
}
