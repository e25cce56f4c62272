//! Commit and abort: writing the working version children first, releasing what it
//! replaced, or dropping it.

use alloc::boxed::Box;
use alloc::vec;

use super::btree::{Expect, Tree};
use super::node::{Body, Node, Ref};
use super::{NodePtr, NodeStore};
use crate::error::{Error, Result};

impl<S: NodeStore> Tree<S> {
    /// Writes the working version: every dirty node, children first, then releases the
    /// nodes they replace. Returns the new root, which the owner records to make the commit
    /// durable; until it does, the previous root is intact (its nodes are released only now,
    /// and the store keeps released nodes until the owner's record supersedes them).
    pub fn commit(&mut self) -> Result<NodePtr> {
        let (root, gen) = match self.root {
            Some(Ref::Disk(p)) if Some(p) == self.committed => (p, self.committed_gen),
            // The tree shrank to a child that was already on flash.
            Some(Ref::Disk(p)) => {
                let gen = self.node(Ref::Disk(p), Expect::ROOT)?.gen;
                (p, gen.max(self.committed_gen))
            }
            Some(Ref::Dirty(id)) => (self.write_dirty(id)?, self.commit_gen()?),
            None => (self.write_empty_root()?, self.commit_gen()?),
        };
        self.committed_gen = gen;
        let mut released = core::mem::take(&mut self.pending_release);
        released.sort_unstable();
        released.dedup();
        for p in released {
            self.cache.remove(p);
            self.store.release(p);
        }
        self.uncommitted_writes.clear();
        // Every dirty node hangs off the root and was written; nothing is left behind.
        debug_assert_eq!(self.arena.len(), 0);
        self.arena.clear();
        self.committed = Some(root);
        self.note_ram();
        Ok(root)
    }

    /// An empty tree is an empty leaf on flash.
    fn write_empty_root(&mut self) -> Result<NodePtr> {
        let gen = self.commit_gen()?;
        let node = Node::empty_leaf(gen);
        node.encode(gen, &mut self.buf)?;
        let p = self.store.write(&self.buf)?;
        self.uncommitted_writes.push(p);
        self.cache.insert(p, node);
        self.root = Some(Ref::Disk(p));
        Ok(p)
    }

    /// Generation of the next commit. After 2^32 commits of one tree there is none: the tree
    /// can be read but no longer changed.
    fn commit_gen(&self) -> Result<u32> {
        self.committed_gen.checked_add(1).ok_or(Error::ReadOnly)
    }

    /// Writes the dirty subtree under `root_id`, children first. Written nodes move to the
    /// cache; on an error the rest stays dirty, so a retry continues where this stopped.
    fn write_dirty(&mut self, root_id: u32) -> Result<NodePtr> {
        let gen = self.commit_gen()?;
        let mut stack = vec![root_id];
        while let Some(&id) = stack.last() {
            if let Some((_, child)) = self.arena.get(id)?.first_dirty_child() {
                stack.push(child);
                continue;
            }
            let mut node = self.arena.take(id)?;
            node.gen = gen;
            let written = node
                .encode(gen, &mut self.buf)
                .and_then(|()| self.store.write(&self.buf));
            let p = match written {
                Ok(p) => p,
                Err(e) => {
                    self.arena.put(id, node);
                    return Err(e);
                }
            };
            self.arena.free(id);
            self.uncommitted_writes.push(p);
            self.cache.insert(p, node);
            stack.pop();
            match stack.last() {
                Some(&parent) => self.replace_child(parent, id, p)?,
                None => {
                    self.root = Some(Ref::Disk(p));
                    return Ok(p);
                }
            }
        }
        Err(Error::Corrupt("index commit lost its root"))
    }

    fn replace_child(&mut self, parent: u32, id: u32, p: NodePtr) -> Result<()> {
        let mut node = self.arena.take(parent)?;
        if let Body::Branch(es) = &mut node.body {
            if let Some(e) = es.iter_mut().find(|e| e.child == Ref::Dirty(id)) {
                e.child = Ref::Disk(p);
            }
        }
        self.arena.put(parent, node);
        Ok(())
    }

    /// Drops every change since the last commit: the tree is the committed version again.
    pub fn abort(&mut self) {
        self.arena.clear();
        self.pending_release.clear();
        for p in core::mem::take(&mut self.uncommitted_writes) {
            self.cache.remove(p);
            self.store.release(p);
        }
        self.root = self.committed.map(Ref::Disk);
    }

    /// Calls `f` on every node of the last committed version, parents before children and
    /// in key order: what the store must keep. Reads nodes that are not cached.
    ///
    /// Leaves must come in increasing key order and only the root may be empty, so a
    /// damaged tree whose pointers share a subtree fails here after visiting each node at
    /// most once, instead of being walked over and over.
    pub fn committed_nodes(&mut self, mut f: impl FnMut(NodePtr)) -> Result<()> {
        let Some(root) = self.committed else {
            return Ok(());
        };
        let mut stack = vec![(root, Expect::ROOT)];
        let mut last_key: Option<Box<[u8]>> = None;
        while let Some((p, exp)) = stack.pop() {
            f(p);
            let node = self.node(Ref::Disk(p), exp)?;
            match &node.body {
                Body::Branch(es) => {
                    let cexp = Expect::child_of(node);
                    for e in es.iter().rev() {
                        if let Ref::Disk(c) = e.child {
                            stack.push((c, cexp));
                        }
                    }
                }
                Body::Leaf(es) => {
                    let (Some(first), Some(last)) = (es.first(), es.last()) else {
                        if exp == Expect::ROOT {
                            continue;
                        }
                        return Err(Error::Corrupt("index: empty leaf below the root"));
                    };
                    if last_key.as_ref().is_some_and(|k| *k >= first.key) {
                        return Err(Error::Corrupt("index leaves out of key order"));
                    }
                    last_key = Some(last.key.clone());
                }
            }
        }
        Ok(())
    }
}
