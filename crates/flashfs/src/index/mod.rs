//! The index layer: copy-on-write B+trees that map byte-string keys to byte-string values
//! (directories, inodes, file extents).
//!
//! A tree never changes a node's contents in place. Modified nodes stay dirty in RAM until
//! [`Tree::commit`] writes them bottom-up and returns the new root; the previous root stays
//! fully readable until then, so a crash before the owner records the new root leaves the old
//! version intact (TFFS §4.2, "path copying", with every version but the newest pruned).
//! On a store that can clear bits in place, a tree with spare pointers replaces one child
//! pointer of a node by programming the node's spare instead of copying it and its path to
//! the root (TFFS §4.2, "node copying"); the spare counts only once its commit is recorded.
//!
//! The tree does not know about the log: it reads and writes whole nodes through a
//! [`NodeStore`]. The node format is in `SPEC.md`, "Index nodes".

mod arena;
mod btree;
mod cache;
mod commit;
mod cursor;
mod node;
mod reshape;
#[cfg(test)]
mod spare_tests;
mod split;
mod store;

pub use btree::{Tree, TreeConfig, TreeStats};
pub use commit::Visit;
pub use cursor::Range;
pub(crate) use node::SPARE_LEN;
pub use node::{inspect_node, NodeInfo, SpareInfo, MAX_KEY_LEN, MAX_NODE_SIZE, MIN_NODE_SIZE};
pub use store::{MemStore, MemStoreStats};

use crate::error::{Error, Result};

/// Where a node lives in its store. What the number means is the store's business (for the
/// file system: a block number); the tree only keeps and compares it. A branch stores a
/// child's in 4 bytes (SPEC.md §7.3): a store's nodes must be numbered below 2³², else a
/// commit fails (`EINVAL`) rather than cut a pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodePtr(pub u64);

/// Whole-node storage for a tree, so the tree does not depend on the log.
///
/// Nodes are never overwritten: `write` always places a new node and says where. The
/// store keeps a node readable until it is released.
pub trait NodeStore {
    /// Bytes per node: every `read` and `write` moves exactly this many.
    fn node_size(&self) -> usize;
    /// Reads the node at `at` into `buf` (of `node_size` bytes).
    fn read(&mut self, at: NodePtr, buf: &mut [u8]) -> Result<()>;
    /// Writes a new node (never in place) and returns where it went.
    fn write(&mut self, node: &[u8]) -> Result<NodePtr>;
    /// The version being committed no longer references the node at `at`. Its space may be
    /// reclaimed once the owner's record of that version is durable, not before: until then
    /// the previous version, which still uses the node, is what a power cut returns to.
    fn release(&mut self, at: NodePtr);
    /// Whether [`NodeStore::patch`] works: nodes on flash can have bits cleared in place.
    fn can_patch(&self) -> bool {
        false
    }
    /// Programs `bytes` at `offset` inside the node at `at`, in place, clearing bits only:
    /// how a tree with spare pointers sets a node's spare (SPEC.md §7.6). A store that
    /// cannot refuses (`Unsupported`).
    fn patch(&mut self, at: NodePtr, offset: usize, bytes: &[u8]) -> Result<()> {
        let _ = (at, offset, bytes);
        Err(Error::Unsupported("this node store cannot patch nodes"))
    }
}

/// A store borrowed by a tree, so that several trees (or a tree and its owner) can share one.
impl<S: NodeStore + ?Sized> NodeStore for &mut S {
    fn node_size(&self) -> usize {
        (**self).node_size()
    }
    fn read(&mut self, at: NodePtr, buf: &mut [u8]) -> Result<()> {
        (**self).read(at, buf)
    }
    fn write(&mut self, node: &[u8]) -> Result<NodePtr> {
        (**self).write(node)
    }
    fn release(&mut self, at: NodePtr) {
        (**self).release(at)
    }
    fn can_patch(&self) -> bool {
        (**self).can_patch()
    }
    fn patch(&mut self, at: NodePtr, offset: usize, bytes: &[u8]) -> Result<()> {
        (**self).patch(at, offset, bytes)
    }
}
