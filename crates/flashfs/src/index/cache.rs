//! Clean nodes kept in RAM under a byte budget, the least recently used unloaded first, and
//! never fewer than a set number of nodes.

use alloc::collections::BTreeMap;

use super::node::Node;
use super::NodePtr;

#[derive(Debug)]
struct Cached {
    node: Node,
    tick: u64,
    ram: usize,
}

/// Decoded clean nodes by where they are on flash.
#[derive(Debug)]
pub(crate) struct Cache {
    map: BTreeMap<NodePtr, Cached>,
    /// Use order: tick of last use -> node.
    lru: BTreeMap<u64, NodePtr>,
    tick: u64,
    ram: usize,
    budget: usize,
    /// Nodes kept whatever the budget, at least (1 or more).
    min_nodes: usize,
}

impl Cache {
    /// An empty cache that holds up to `budget` bytes (estimated RAM of decoded nodes), or
    /// `min_nodes` nodes (at least one) where they take more.
    pub fn new(budget: usize, min_nodes: usize) -> Cache {
        Cache {
            map: BTreeMap::new(),
            lru: BTreeMap::new(),
            tick: 0,
            ram: 0,
            budget,
            min_nodes: min_nodes.max(1),
        }
    }

    /// Unloads the least recently used node; `false` if there is none.
    fn unload_oldest(&mut self) -> bool {
        let Some((_, victim)) = self.lru.pop_first() else {
            return false;
        };
        if let Some(c) = self.map.remove(&victim) {
            self.ram -= c.ram;
        }
        true
    }

    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    /// Whether the node at `p` is cached.
    pub fn contains(&self, p: NodePtr) -> bool {
        self.map.contains_key(&p)
    }

    /// The node at `p`, marked as just used.
    pub fn get(&mut self, p: NodePtr) -> Option<&Node> {
        let tick = self.next_tick();
        let c = self.map.get_mut(&p)?;
        self.lru.remove(&c.tick);
        c.tick = tick;
        self.lru.insert(tick, p);
        Some(&c.node)
    }

    /// Caches a node, first unloading the least recently used ones to make room, down to
    /// the nodes kept whatever the budget. A node larger than the whole budget is still
    /// cached (it is about to be used).
    pub fn insert(&mut self, p: NodePtr, node: Node) {
        self.remove(p);
        let ram = node.ram();
        while self.map.len() >= self.min_nodes
            && self.ram + ram > self.budget
            && self.unload_oldest()
        {}
        let tick = self.next_tick();
        self.ram += ram;
        self.lru.insert(tick, p);
        self.map.insert(p, Cached { node, tick, ram });
    }

    /// Takes the node at `p` out (it is about to become dirty, or it was released).
    pub fn take(&mut self, p: NodePtr) -> Option<Node> {
        let c = self.map.remove(&p)?;
        self.lru.remove(&c.tick);
        self.ram -= c.ram;
        Some(c.node)
    }

    /// Forgets the node at `p`.
    pub fn remove(&mut self, p: NodePtr) {
        let _ = self.take(p);
    }

    /// Forgets every node.
    pub fn clear(&mut self) {
        self.map.clear();
        self.lru.clear();
        self.ram = 0;
    }

    /// Bytes it may hold.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Holds it to `budget` bytes from now on (or its least number of nodes), unloading the
    /// least recently used nodes beyond it at once.
    pub fn set_budget(&mut self, budget: usize) {
        self.budget = budget;
        while self.map.len() > self.min_nodes && self.ram > self.budget && self.unload_oldest() {}
    }

    /// Estimated RAM of the cached nodes.
    pub fn ram(&self) -> usize {
        self.ram
    }

    /// Nodes cached.
    pub fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_smaller_budget_unloads_at_once_and_a_larger_one_keeps() {
        let one = Node::empty_leaf(0).ram();
        let mut c = Cache::new(3 * one, 1);
        for p in 1..=3 {
            c.insert(NodePtr(p), Node::empty_leaf(p as u32));
        }
        assert!(c.get(NodePtr(1)).is_some()); // 2 is now the oldest
        c.set_budget(2 * one);
        assert_eq!(c.len(), 2);
        assert!(c.contains(NodePtr(1)) && c.contains(NodePtr(3)));
        c.set_budget(3 * one);
        c.insert(NodePtr(4), Node::empty_leaf(4));
        assert_eq!((c.len(), c.ram(), c.budget()), (3, 3 * one, 3 * one));
    }

    #[test]
    fn evicts_least_recently_used() {
        let one = Node::empty_leaf(0).ram();
        let mut c = Cache::new(2 * one, 1);
        c.insert(NodePtr(1), Node::empty_leaf(1));
        c.insert(NodePtr(2), Node::empty_leaf(2));
        assert!(c.get(NodePtr(1)).is_some()); // 2 is now the oldest
        c.insert(NodePtr(3), Node::empty_leaf(3));
        assert!(c.contains(NodePtr(1)) && c.contains(NodePtr(3)));
        assert!(!c.contains(NodePtr(2)));
        assert_eq!(c.ram(), 2 * one);
        assert_eq!(c.take(NodePtr(1)).map(|n| n.gen), Some(1));
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn a_tiny_budget_still_holds_the_node_in_use() {
        let mut c = Cache::new(0, 1);
        c.insert(NodePtr(1), Node::empty_leaf(1));
        c.insert(NodePtr(2), Node::empty_leaf(2));
        assert_eq!(c.len(), 1);
        assert!(c.get(NodePtr(2)).is_some());
    }

    #[test]
    fn a_least_number_of_nodes_stays_whatever_the_budget() {
        let one = Node::empty_leaf(0).ram();
        let mut c = Cache::new(one, 3);
        for p in 1..=4 {
            c.insert(NodePtr(p), Node::empty_leaf(p as u32));
        }
        // A path of three nodes over a budget of one: the oldest goes, the rest stay.
        assert_eq!((c.len(), c.ram()), (3, 3 * one));
        assert!(!c.contains(NodePtr(1)));
        assert!(c.get(NodePtr(2)).is_some());
        c.insert(NodePtr(5), Node::empty_leaf(5));
        assert!(c.contains(NodePtr(2)) && !c.contains(NodePtr(3)));
        // A smaller budget keeps them too; a larger one lets more stay.
        c.set_budget(0);
        assert_eq!(c.len(), 3);
        c.set_budget(4 * one);
        c.insert(NodePtr(6), Node::empty_leaf(6));
        assert_eq!(c.len(), 4);
    }
}
