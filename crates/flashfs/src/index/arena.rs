//! Dirty nodes: modified in RAM, not yet written. They stay until the commit writes them or
//! an abort drops them, and they are counted against the tree's RAM.

use alloc::vec::Vec;

use super::node::Node;
use crate::error::{Error, Result};

/// The dirty nodes of a tree, each known by a small id that its parent's [`Ref::Dirty`]
/// holds.
///
/// [`Ref::Dirty`]: super::node::Ref::Dirty
#[derive(Debug, Default)]
pub(crate) struct Arena {
    slots: Vec<Option<Node>>,
    free: Vec<u32>,
    live: usize,
    ram: usize,
}

const MISSING: Error = Error::Corrupt("index: dangling dirty node");

impl Arena {
    /// Adds a node; returns its id.
    pub fn add(&mut self, node: Node) -> u32 {
        self.ram += node.ram();
        self.live += 1;
        match self.free.pop() {
            Some(id) => {
                if let Some(s) = self.slots.get_mut(id as usize) {
                    *s = Some(node);
                }
                id
            }
            None => {
                self.slots.push(Some(node));
                (self.slots.len() - 1) as u32
            }
        }
    }

    /// The node `id`.
    pub fn get(&self, id: u32) -> Result<&Node> {
        self.slots
            .get(id as usize)
            .and_then(Option::as_ref)
            .ok_or(MISSING)
    }

    /// Takes node `id` out to modify it; [`Arena::put`] returns it (or [`Arena::free`] it).
    pub fn take(&mut self, id: u32) -> Result<Node> {
        let node = self
            .slots
            .get_mut(id as usize)
            .and_then(Option::take)
            .ok_or(MISSING)?;
        self.ram -= node.ram();
        Ok(node)
    }

    /// Puts a taken node back.
    pub fn put(&mut self, id: u32, node: Node) {
        self.ram += node.ram();
        if let Some(s) = self.slots.get_mut(id as usize) {
            *s = Some(node);
        }
    }

    /// Forgets the taken node `id` (merged away, or written).
    pub fn free(&mut self, id: u32) {
        self.live = self.live.saturating_sub(1);
        self.free.push(id);
    }

    /// Drops every node.
    pub fn clear(&mut self) {
        *self = Arena::default();
    }

    /// Estimated RAM of the dirty nodes.
    pub fn ram(&self) -> usize {
        self.ram
    }

    /// Dirty nodes held.
    pub fn len(&self) -> usize {
        self.live
    }
}
