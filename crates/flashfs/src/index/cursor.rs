//! Ordered access: seeks and range iteration.
//!
//! A position is a stack of frames, root first, one per level, so moving to the next leaf
//! climbs only as far as needed. The stack is as deep as the tree; nothing recurses.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::ops::{Bound, RangeBounds};

use super::btree::{child_index, Expect, Tree};
use super::node::{Body, Ref};
use super::NodeStore;
use crate::error::{Error, Result};

/// A key and its value.
type Entry = (Vec<u8>, Vec<u8>);

/// Only an empty tree's root is an empty node. Refusing others bounds every walk: a damaged
/// tree of shared empty subtrees would otherwise be walked path by path, exponentially many.
const EMPTY_LEAF: Error = Error::Corrupt("index: empty node below the root");

/// One level of a position. In a branch `idx` is the child being visited (going forward)
/// or one past it (going backward); in a leaf, the next entry forward, or one past the next
/// entry backward.
#[derive(Debug, Clone, Copy)]
struct Frame {
    r: Ref,
    exp: Expect,
    idx: usize,
}

impl<S: NodeStore> Tree<S> {
    /// The path to where `key` belongs, positioned before the first entry above `key`
    /// (`forward`) or after the last one below it; `inclusive` counts `key` itself in.
    fn descend(&mut self, key: &[u8], forward: bool, inclusive: bool) -> Result<Vec<Frame>> {
        let mut stack = Vec::new();
        let Some(mut r) = self.root else {
            return Ok(stack);
        };
        let mut exp = Expect::ROOT;
        loop {
            let node = self.node(r, exp)?;
            match &node.body {
                Body::Leaf(es) => {
                    let idx = if forward == inclusive {
                        es.partition_point(|e| *e.key() < *key)
                    } else {
                        es.partition_point(|e| *e.key() <= *key)
                    };
                    stack.push(Frame { r, exp, idx });
                    return Ok(stack);
                }
                Body::Branch(es) => {
                    let i = child_index(es, key);
                    let Some(e) = es.get(i) else {
                        return Ok(Vec::new());
                    };
                    let idx = if forward { i } else { i + 1 };
                    stack.push(Frame { r, exp, idx });
                    r = e.child;
                    exp = Expect::child_of(node);
                }
            }
        }
    }

    /// The entry at the position, then moves past it.
    fn step_forward(&mut self, stack: &mut Vec<Frame>) -> Result<Option<Entry>> {
        // Each turn returns, descends one level or climbs one: the walk is bounded by the
        // nodes of the tree.
        while let Some(top) = stack.last().copied() {
            let node = self.node(top.r, top.exp)?;
            match &node.body {
                Body::Leaf(es) => {
                    if es.is_empty() && stack.len() > 1 {
                        return Err(EMPTY_LEAF);
                    }
                    if let Some(e) = es.get(top.idx) {
                        let out = (e.key().to_vec(), e.val().to_vec());
                        if let Some(f) = stack.last_mut() {
                            f.idx += 1;
                        }
                        return Ok(Some(out));
                    }
                }
                Body::Branch(es) => {
                    if let Some(e) = es.get(top.idx) {
                        let child = Frame {
                            r: e.child,
                            exp: Expect::child_of(node),
                            idx: 0,
                        };
                        stack.push(child);
                        continue;
                    }
                }
            }
            stack.pop();
            if let Some(f) = stack.last_mut() {
                f.idx += 1;
            }
        }
        Ok(None)
    }

    /// The entry before the position, then moves before it.
    fn step_backward(&mut self, stack: &mut Vec<Frame>) -> Result<Option<Entry>> {
        while let Some(top) = stack.last().copied() {
            let node = self.node(top.r, top.exp)?;
            if node.len() == 0 && stack.len() > 1 {
                return Err(EMPTY_LEAF);
            }
            let n = top.idx.min(node.len());
            if n > 0 {
                match &node.body {
                    Body::Leaf(es) => {
                        if let Some(e) = es.get(n - 1) {
                            let out = (e.key().to_vec(), e.val().to_vec());
                            if let Some(f) = stack.last_mut() {
                                f.idx = n - 1;
                            }
                            return Ok(Some(out));
                        }
                    }
                    Body::Branch(es) => {
                        if let Some(e) = es.get(n - 1) {
                            let child = Frame {
                                r: e.child,
                                exp: Expect::child_of(node),
                                // Start from the child's end, whatever its length.
                                idx: usize::MAX,
                            };
                            if let Some(f) = stack.last_mut() {
                                f.idx = n;
                            }
                            stack.push(child);
                            continue;
                        }
                    }
                }
            }
            stack.pop();
            if let Some(f) = stack.last_mut() {
                f.idx = f.idx.saturating_sub(1);
            }
        }
        Ok(None)
    }

    /// The first entry whose key is `key` or above.
    pub fn seek_ge(&mut self, key: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let mut stack = self.descend(key, true, true)?;
        self.step_forward(&mut stack)
    }

    /// The last entry whose key is `key` or below: e.g. the extent that covers an offset,
    /// when extents are keyed by their start.
    pub fn seek_le(&mut self, key: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let mut stack = self.descend(key, false, true)?;
        self.step_backward(&mut stack)
    }

    /// The last entry whose key is below `key`.
    pub fn seek_lt(&mut self, key: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let mut stack = self.descend(key, false, false)?;
        self.step_backward(&mut stack)
    }

    /// The entries with keys in `range`, in order: `tree.range(start..)`,
    /// `tree.range(a..=b)`. Each item is a key and its value, or the error that ended the
    /// walk.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&mut self, range: R) -> Range<'_, S> {
        let own = |b: Bound<&K>| match b {
            Bound::Included(k) => Bound::Included(Box::from(k.as_ref())),
            Bound::Excluded(k) => Bound::Excluded(Box::from(k.as_ref())),
            Bound::Unbounded => Bound::Unbounded,
        };
        Range {
            start: Some(own(range.start_bound())),
            end: own(range.end_bound()),
            tree: self,
            stack: Vec::new(),
            last: None,
            done: false,
        }
    }

    /// Every entry, in order.
    pub fn iter(&mut self) -> Range<'_, S> {
        self.range::<&[u8], _>(..)
    }
}

/// An ordered walk over part of a tree (see [`Tree::range`]).
#[derive(Debug)]
pub struct Range<'a, S: NodeStore> {
    tree: &'a mut Tree<S>,
    stack: Vec<Frame>,
    /// Where to start, until the first step.
    start: Option<Bound<Box<[u8]>>>,
    end: Bound<Box<[u8]>>,
    /// The last key returned: keys must increase, or the tree is damaged (a subtree
    /// reached twice), and the walk stops.
    last: Option<Vec<u8>>,
    done: bool,
}

impl<S: NodeStore> Range<'_, S> {
    fn position(&mut self, start: Bound<Box<[u8]>>) -> Result<()> {
        self.stack = match start {
            Bound::Included(k) => self.tree.descend(&k, true, true)?,
            Bound::Excluded(k) => self.tree.descend(&k, true, false)?,
            Bound::Unbounded => match self.tree.root {
                Some(r) => alloc::vec![Frame {
                    r,
                    exp: Expect::ROOT,
                    idx: 0
                }],
                None => Vec::new(),
            },
        };
        Ok(())
    }

    fn before_end(&self, key: &[u8]) -> bool {
        match &self.end {
            Bound::Included(e) => key <= &**e,
            Bound::Excluded(e) => key < &**e,
            Bound::Unbounded => true,
        }
    }
}

impl<S: NodeStore> Iterator for Range<'_, S> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if let Some(start) = self.start.take() {
            if let Err(e) = self.position(start) {
                self.done = true;
                return Some(Err(e));
            }
        }
        match self.tree.step_forward(&mut self.stack) {
            Ok(Some((k, _))) if self.last.as_ref().is_some_and(|l| *l >= k) => {
                self.done = true;
                Some(Err(Error::Corrupt("index keys out of order across nodes")))
            }
            Ok(Some((k, v))) if self.before_end(&k) => {
                self.last = Some(k.clone());
                Some(Ok((k, v)))
            }
            Ok(_) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
