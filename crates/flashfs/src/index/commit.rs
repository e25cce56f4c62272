//! Commit and abort: writing the working version children first, releasing what it
//! replaced, or dropping it.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use super::btree::{Expect, Tree};
use super::node::{encode_spare, spare_offset, Body, Diff, Node, Ref, Spare};
use super::{NodePtr, NodeStore};
use crate::error::{Error, Result};

impl<S: NodeStore> Tree<S> {
    /// Writes the working version: every dirty node, children first, then releases the
    /// nodes they replace. Returns the new root, which the owner records to make the commit
    /// durable; until it does, the previous root is intact (its nodes are released only now,
    /// and the store keeps released nodes until the owner's record supersedes them).
    ///
    /// With spare pointers, a dirty node that differs from the node it copies in one child
    /// pointer only, where that node's spare is free, is not written: the new pointer goes
    /// into the spare, and the node stays. A dirty node identical to its original is not
    /// written either. Nodes with garbage spares are copied first (SPEC.md §7.6).
    pub fn commit(&mut self) -> Result<NodePtr> {
        if !self.scanned {
            self.scan_branches()?;
        }
        self.rewrite_garbage()?;
        let (root, gen) = match self.root {
            Some(Ref::Disk(p, _)) if Some(p) == self.committed => (p, self.committed_gen),
            // The tree shrank to a child that was already on flash: a copy of it is the new
            // root, so that a tree without spares has a root of its committed generation
            // (SPEC.md §7.4). With spares the child stays where it is.
            Some(r @ Ref::Disk(..)) => {
                let id = self.make_dirty(r, Expect::ROOT)?;
                self.root = Some(Ref::Dirty(id));
                (self.write_dirty(id)?, self.commit_gen()?)
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
        self.uncommitted_patches.clear();
        self.garbage.clear();
        // Every dirty node hangs off the root and was written; nothing is left behind.
        debug_assert_eq!(self.arena.len(), 0);
        self.arena.clear();
        self.committed = Some(root);
        self.root = Some(Ref::root(root));
        self.note_ram();
        Ok(root)
    }

    /// An empty tree is an empty leaf on flash.
    fn write_empty_root(&mut self) -> Result<NodePtr> {
        let gen = self.commit_gen()?;
        let node = Node::empty_leaf(gen);
        node.encode_as(gen, &mut self.buf, self.spares)?;
        let p = self.store.write(&self.buf)?;
        self.uncommitted_writes.push(p);
        self.cache.insert(p, node);
        self.root = Some(Ref::root(p));
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
            let kept = match self.keep_origin(&mut node, gen) {
                Ok(k) => k,
                Err(e) => {
                    self.arena.put(id, node);
                    return Err(e);
                }
            };
            let (p, written_in) = match kept {
                Some(kept) => kept,
                None => {
                    node.gen = gen;
                    node.origin = None;
                    node.spare = if self.spares {
                        Spare::Free
                    } else {
                        Spare::Absent
                    };
                    let written = node
                        .encode_as(gen, &mut self.buf, self.spares)
                        .and_then(|()| self.store.write(&self.buf));
                    match written {
                        Ok(p) => {
                            self.uncommitted_writes.push(p);
                            self.cache.insert(p, node);
                            (p, gen)
                        }
                        Err(e) => {
                            self.arena.put(id, node);
                            return Err(e);
                        }
                    }
                }
            };
            self.arena.free(id);
            stack.pop();
            match stack.last() {
                Some(&parent) => self.replace_child(parent, id, Ref::Disk(p, written_in))?,
                None => {
                    self.root = Some(Ref::root(p));
                    return Ok(p);
                }
            }
        }
        Err(Error::Corrupt("index commit lost its root"))
    }

    /// With spare pointers: if the dirty `node` can stay in the node it copies (identical,
    /// or one child pointer away and that node's spare free), keeps that node (setting its
    /// spare, in generation `gen`, if needed) and returns where it is and the generation
    /// that wrote it. `None`: write a copy.
    fn keep_origin(&mut self, node: &mut Node, gen: u32) -> Result<Option<(NodePtr, u32)>> {
        let Some(origin) = node.origin.filter(|_| self.spares) else {
            return Ok(None);
        };
        // A garbage spare would count once this generation is committed: copy the node.
        if node.spare == Spare::Garbage {
            return Ok(None);
        }
        let orig = match self.cache.get(origin.at) {
            Some(n) => n.clone(),
            None => self.read_node(origin.at, Expect::ROOT)?,
        };
        if orig.spare == Spare::Garbage {
            return Ok(None);
        }
        let kept = match node.diff(&orig) {
            Diff::Same => orig,
            // A spare records the child its commit wrote, in that generation (§7.6).
            Diff::OneChild(i, child, child_gen)
                if child_gen == gen && node.spare.is_free() && orig.spare.is_free() =>
            {
                let index = u16::try_from(i)
                    .map_err(|_| Error::Corrupt("index node with too many children"))?;
                let bytes = encode_spare(index, gen, child);
                self.uncommitted_patches.push(origin.at);
                if let Err(e) = self
                    .store
                    .patch(origin.at, spare_offset(self.buf.len()), &bytes)
                {
                    // The spare may hold part of the pointer now: never program it again.
                    node.spare = Spare::Torn;
                    self.cache.remove(origin.at);
                    return Err(e);
                }
                let mut n = orig;
                n.spare = Spare::Set { index, gen, child };
                n.apply_spare(gen);
                n
            }
            _ => return Ok(None),
        };
        if let Some(i) = self.pending_release.iter().rposition(|&q| q == origin.at) {
            self.pending_release.swap_remove(i);
        }
        self.cache.insert(origin.at, kept);
        Ok(Some((origin.at, origin.gen)))
    }

    /// Reads every branch of the committed version, so that every garbage spare in it is
    /// known before a commit reuses the generation that wrote it.
    fn scan_branches(&mut self) -> Result<()> {
        let Some(root) = self.committed else {
            self.scanned = true;
            return Ok(());
        };
        let mut stack = vec![(Ref::root(root), Expect::ROOT)];
        while let Some((r, exp)) = stack.pop() {
            let node = self.node(r, exp)?;
            if let Body::Branch(es) = &node.body {
                if node.level >= 2 {
                    let cexp = Expect::child_of(node);
                    stack.extend(
                        es.iter()
                            .filter(|e| matches!(e.child, Ref::Disk(..)))
                            .map(|e| (e.child, cexp)),
                    );
                }
            }
        }
        self.scanned = true;
        Ok(())
    }

    /// The keys that lead to the nodes with garbage spares still in the working version:
    /// each node's lowest key bound (the empty key for the leftmost), which routes to it.
    fn garbage_routes(&mut self) -> Result<Vec<Box<[u8]>>> {
        let mut keys = Vec::new();
        let Some(root) = self.root else {
            return Ok(keys);
        };
        let mut stack: Vec<(Ref, Expect, Box<[u8]>)> = vec![(root, Expect::ROOT, Box::default())];
        while let Some((r, exp, lo)) = stack.pop() {
            if matches!(r, Ref::Disk(p, _) if self.garbage.contains(&p)) {
                keys.push(lo.clone());
            }
            let node = self.node(r, exp)?;
            let Body::Branch(es) = &node.body else {
                continue;
            };
            // Only branches hold spares: leaves need not be read.
            if node.level < 2 {
                continue;
            }
            let cexp = Expect::child_of(node);
            for (i, e) in es.iter().enumerate() {
                let key = if i == 0 { lo.clone() } else { e.key.clone() };
                stack.push((e.child, cexp, key));
            }
        }
        Ok(keys)
    }

    /// Copies every node of the working version whose spare is garbage (a spare a power cut
    /// or an abort left from a commit never recorded): dirties the path to each, so the
    /// next commit writes it anew with a free spare. Returns how many it found. The commit
    /// does this itself; an owner calls it to have [`Tree::is_dirty`] reflect the work.
    pub fn rewrite_garbage(&mut self) -> Result<usize> {
        if self.garbage.is_empty() {
            return Ok(0);
        }
        let keys = self.garbage_routes()?;
        for k in &keys {
            let path = self.dirty_path(k)?;
            self.fix_path(&path, false)?;
        }
        self.note_ram();
        if !self.garbage_routes()?.is_empty() {
            return Err(Error::Corrupt(
                "index node with a garbage spare out of reach",
            ));
        }
        Ok(keys.len())
    }

    fn replace_child(&mut self, parent: u32, id: u32, written: Ref) -> Result<()> {
        let mut node = self.arena.take(parent)?;
        if let Body::Branch(es) = &mut node.body {
            if let Some(e) = es.iter_mut().find(|e| e.child == Ref::Dirty(id)) {
                e.child = written;
            }
        }
        self.arena.put(parent, node);
        Ok(())
    }

    /// Drops every change since the last commit: the tree is the committed version again.
    pub fn abort(&mut self) {
        self.arena.clear();
        self.pending_release.clear();
        // Spares set by the failed commit now belong to no recorded commit: garbage.
        for p in core::mem::take(&mut self.uncommitted_patches) {
            self.cache.remove(p);
            self.garbage.insert(p);
        }
        for p in core::mem::take(&mut self.uncommitted_writes) {
            self.cache.remove(p);
            self.store.release(p);
        }
        self.root = self.committed.map(Ref::root);
    }

    /// Calls `f` on every node of the last committed version, parents before children and
    /// in key order: what the store must keep. Reads nodes that are not cached.
    ///
    /// Leaves must come in increasing key order and only the root may be empty, so a
    /// damaged tree whose pointers share a subtree fails here after visiting each node at
    /// most once, instead of being walked over and over.
    pub fn committed_nodes(&mut self, mut f: impl FnMut(NodePtr)) -> Result<()> {
        self.walk_committed(|v| {
            if let Visit::Node(p) = v {
                f(p);
            }
            Ok(())
        })
    }

    /// Visits the last committed version as [`Tree::committed_nodes`] does, and each leaf's
    /// items (key, value) right after the leaf, so the items come in key order: one read of
    /// each node where a walk over the nodes and then over the items reads every leaf twice.
    /// An error from `f` stops the walk.
    pub fn walk_committed(&mut self, mut f: impl FnMut(Visit<'_>) -> Result<()>) -> Result<()> {
        let Some(root) = self.committed else {
            return Ok(());
        };
        let mut stack = vec![(Ref::root(root), Expect::ROOT)];
        let mut last_key: Option<Box<[u8]>> = None;
        while let Some((r, exp)) = stack.pop() {
            let Ref::Disk(p, _) = r else {
                return Err(Error::Corrupt("index: committed node not on flash"));
            };
            f(Visit::Node(p))?;
            let node = self.node(r, exp)?;
            match &node.body {
                Body::Branch(es) => {
                    let cexp = Expect::child_of(node);
                    for e in es.iter().rev() {
                        if let Ref::Disk(..) = e.child {
                            stack.push((e.child, cexp));
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
                    if last_key.as_deref().is_some_and(|k| k >= first.key()) {
                        return Err(Error::Corrupt("index leaves out of key order"));
                    }
                    last_key = Some(last.key().into());
                    for e in es {
                        f(Visit::Item(e.key(), e.val()))?;
                    }
                }
            }
        }
        self.scanned = true;
        Ok(())
    }
}

/// What [`Tree::walk_committed`] visits.
#[derive(Debug, Clone, Copy)]
pub enum Visit<'a> {
    /// A node, before its children (and before its items, if a leaf).
    Node(NodePtr),
    /// An item of the leaf visited last: key and value.
    Item(&'a [u8], &'a [u8]),
}
