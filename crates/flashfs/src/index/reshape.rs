//! Keeping the tree's shape: splitting nodes that overflow, merging or evening out nodes
//! that emptied, growing and shrinking the root. Runs bottom-up after each change, over the
//! dirty path only.

use alloc::vec::Vec;

use super::btree::{Expect, Tree};
use super::node::{Body, BranchEntry, Node, Ref, Runs, MAX_LEVEL};
use super::split::{plan, plan_ascending, Insert};
use super::NodeStore;
use crate::error::{Error, Result};

impl<S: NodeStore> Tree<S> {
    fn overflows(&self, node: &Node) -> bool {
        node.len() > self.lim.max_entries || node.payload_len() > self.lim.cap
    }

    fn underfull(&self, node: &Node) -> bool {
        let least = if node.is_leaf() { 1 } else { 2 };
        node.len() < least || (node.payload_len() < self.min_bytes && node.len() < self.min_entries)
    }

    /// How to cut an overfull node: after an ascending run of insertions, where the run
    /// leaves the left node full; otherwise as evenly as fits. A tree with a fan-out range
    /// (TFFS's experiments) always cuts evenly, to stay in its range.
    fn split_plan(&self, node: &Node) -> Result<Vec<usize>> {
        let runs = Runs::new(node);
        let bytes = |a, b| runs.bytes(a, b);
        let ranged = self.min_entries != usize::MAX;
        node.last_insert
            .filter(|i| i.ascending && !ranged)
            .and_then(|i| plan_ascending(node.len(), bytes, self.lim, i.at))
            .or_else(|| plan(node.len(), bytes, self.lim))
            .ok_or(Error::InvalidArgument("index entry larger than a node"))
    }

    /// After a leaf changed: splits what overflows and rebalances what emptied, bottom up.
    /// `added`: the change added an entry. A node that took it as part of an ascending run
    /// is then left alone even if underfull: it is the fresh right part of an ascending
    /// split, and evening it out with its full sibling would undo that split.
    pub(super) fn fix_path(&mut self, path: &[(u32, usize)], added: bool) -> Result<()> {
        for d in (1..path.len()).rev() {
            let (parent, i) = path[d - 1];
            self.fix_child(parent, i, added)?;
        }
        self.fix_root()
    }

    fn fix_child(&mut self, pid: u32, i: usize, added: bool) -> Result<()> {
        let parent = self.arena.get(pid)?;
        let Body::Branch(es) = &parent.body else {
            return Ok(());
        };
        let siblings = es.len();
        let Some(Ref::Dirty(cid)) = es.get(i).map(|e| e.child) else {
            return Ok(());
        };
        let node = self.arena.get(cid)?;
        if node.len() == 0 {
            // An empty child goes without a sibling's help: its neighbours' key ranges
            // close over its own. (A tree never keeps an empty node below its root.)
            self.arena.take(cid)?;
            self.arena.free(cid);
            let mut parent = self.arena.take(pid)?;
            if let Body::Branch(es) = &mut parent.body {
                if i < es.len() {
                    es.remove(i);
                }
                if let Some(first) = es.first_mut() {
                    first.key = Default::default();
                }
            }
            parent.last_insert = None;
            self.arena.put(pid, parent);
        } else if self.overflows(node) {
            let parts = self.split_plan(node)?;
            let node = self.arena.take(cid)?;
            let mut pieces = node.split(&parts).into_iter();
            if let Some((_, first)) = pieces.next() {
                self.arena.put(cid, first);
            }
            let new: Vec<BranchEntry> = pieces
                .map(|(key, n)| BranchEntry {
                    key,
                    child: Ref::Dirty(self.arena.add(n)),
                })
                .collect();
            let mut parent = self.arena.take(pid)?;
            if let Body::Branch(es) = &mut parent.body {
                let at = (i + 1).min(es.len());
                let n = new.len();
                es.splice(at..at, new);
                parent.last_insert = Some(Insert::after(parent.last_insert, at + n - 1, es.len()));
            }
            self.arena.put(pid, parent);
        } else if self.underfull(node)
            && siblings > 1
            && !(added && node.last_insert.is_some_and(|l| l.ascending))
        {
            self.rebalance(pid, i)?;
        }
        Ok(())
    }

    /// Merges child `i` of `pid` with a sibling, or evens out their entries. A sibling that
    /// cannot be read is left alone: the node stays valid, only less full.
    fn rebalance(&mut self, pid: u32, i: usize) -> Result<()> {
        let parent = self.arena.get(pid)?;
        let Body::Branch(es) = &parent.body else {
            return Ok(());
        };
        let (li, ri) = if i + 1 < es.len() {
            (i, i + 1)
        } else {
            (i.saturating_sub(1), i)
        };
        let (Some(l), Some(r)) = (es.get(li), es.get(ri)) else {
            return Ok(());
        };
        if li == ri {
            return Ok(());
        }
        let (lref, rref, sep) = (l.child, r.child, r.key.clone());
        let exp = Expect::child_of(parent);
        // Plan on copies first: a sibling that needs no change is not made dirty.
        let Ok(mut joined) = self.node(lref, exp).cloned() else {
            return Ok(());
        };
        let Ok(right) = self.node(rref, exp).cloned() else {
            return Ok(());
        };
        let nleft = joined.len();
        joined.append(right, sep)?;
        let runs = Runs::new(&joined);
        let parts = match plan(joined.len(), |a, b| runs.bytes(a, b), self.lim) {
            Some(p) if p.len() == 1 || (p.len() == 2 && p.first() != Some(&nleft)) => p,
            _ => return Ok(()),
        };
        let Ok(lid) = self.make_dirty(lref, exp) else {
            return Ok(());
        };
        self.set_child(pid, li, Ref::Dirty(lid))?;
        let Ok(rid) = self.make_dirty(rref, exp) else {
            return Ok(());
        };
        self.set_child(pid, ri, Ref::Dirty(rid))?;

        // The copies made dirty are replaced by the joined entries.
        self.arena.take(lid)?;
        self.arena.take(rid)?;
        joined.gen = self.dirty_gen();
        joined.last_insert = None;
        let mut parent = self.arena.take(pid)?;
        if let Body::Branch(es) = &mut parent.body {
            if parts.len() == 1 {
                self.arena.put(lid, joined);
                self.arena.free(rid);
                if ri < es.len() {
                    es.remove(ri);
                }
            } else {
                let mut halves = joined.split(&parts).into_iter();
                if let (Some((_, l)), Some((s, r))) = (halves.next(), halves.next()) {
                    self.arena.put(lid, l);
                    self.arena.put(rid, r);
                    if let Some(e) = es.get_mut(ri) {
                        e.key = s;
                    }
                }
            }
        }
        parent.last_insert = None;
        self.arena.put(pid, parent);
        Ok(())
    }

    /// Grows the tree when the root overflows, shrinks it when the root has one child.
    fn fix_root(&mut self) -> Result<()> {
        loop {
            let Some(Ref::Dirty(id)) = self.root else {
                return Ok(());
            };
            let node = self.arena.get(id)?;
            if self.overflows(node) {
                if node.level >= MAX_LEVEL {
                    return Err(Error::InvalidArgument("index tree too tall"));
                }
                let (level, gen) = (node.level + 1, node.gen);
                let parts = self.split_plan(node)?;
                let node = self.arena.take(id)?;
                self.arena.free(id);
                let entries = node
                    .split(&parts)
                    .into_iter()
                    .map(|(key, n)| BranchEntry {
                        key,
                        child: Ref::Dirty(self.arena.add(n)),
                    })
                    .collect();
                let root = self.arena.add(Node::new(level, gen, Body::Branch(entries)));
                self.root = Some(Ref::Dirty(root));
            } else {
                let next = match &node.body {
                    Body::Branch(es) if es.len() <= 1 => es.first().map(|e| e.child),
                    Body::Leaf(es) if es.is_empty() => None,
                    _ => return Ok(()),
                };
                self.arena.take(id)?;
                self.arena.free(id);
                self.root = next;
                if next.is_none() {
                    return Ok(());
                }
            }
        }
    }
}
