//! The copy-on-write B+tree: lookups, updates, splits and merges, commit and abort.
//!
//! A modification copies every node on its path into RAM (the arena of dirty nodes); the
//! originals stay on flash, untouched and still referenced by the committed root. `commit`
//! writes the dirty nodes children first, so a node is on flash before anything points to it,
//! and only then releases the nodes they replace. Everything is iterative: no recursion, and
//! every descent is bounded by the node levels, which [`Node::decode`] and [`Expect`] check.

use alloc::collections::BTreeSet;
use alloc::vec;
use alloc::vec::Vec;

use super::arena::Arena;
use super::cache::Cache;
use super::node::{
    check_node_size, leaf_size, max_value_len, Body, BranchEntry, LeafEntry, Node, Origin, Ref,
    Spare, HEADER_LEN, MAX_KEY_LEN, SPARE_LEN, UNDATED,
};
use super::split::{Insert, Limits};
use super::{NodePtr, NodeStore};
use crate::error::{Error, Result};

/// How a tree uses RAM and shapes its nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeConfig {
    /// RAM for clean cached nodes (estimated bytes of decoded nodes); the least recently
    /// used are unloaded beyond it. Dirty nodes come on top of it until the commit.
    pub cache_bytes: usize,
    /// Clean nodes cached whatever `cache_bytes` says, at least (1 by default: the node in
    /// use). Four hold the path from the root to a leaf of a tree four levels deep, so that
    /// where a few large nodes fill the byte budget (2 KiB NAND pages in a budget of a few
    /// kilobytes) a lookup repeated still reads nothing from flash, where with fewer each
    /// node of the path pushes out the next.
    pub cache_nodes: usize,
    /// Most entries (in a branch: children) per node; `None` for as many as fit. TFFS
    /// measured fan-outs of 2–4 and 7–14, i.e. 4 and 14 here. At least 3.
    pub max_entries: Option<usize>,
    /// A node below this share of its bytes (and, with `max_entries`, below half its
    /// entries) merges with or borrows from a sibling. At most 50.
    pub min_fill_percent: u8,
    /// Spare pointers (TFFS §4.2 "node copying"): nodes are written with a spare area, and a
    /// commit that changes only one child pointer of a node programs the new pointer into
    /// the node's spare instead of copying the node and its path to the root. Needs a store
    /// that can patch nodes in place (reprogrammable NOR); ignored on others. A tree with
    /// spare pointers must be opened with [`Tree::open_at`].
    pub spare_pointers: bool,
}

impl Default for TreeConfig {
    fn default() -> Self {
        TreeConfig {
            cache_bytes: 256 * 1024,
            cache_nodes: 1,
            max_entries: None,
            min_fill_percent: 35,
            spare_pointers: false,
        }
    }
}

/// RAM a tree uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TreeStats {
    /// Clean nodes cached.
    pub cached_nodes: usize,
    /// Their estimated RAM.
    pub cache_bytes: usize,
    /// Dirty nodes waiting for the commit.
    pub dirty_nodes: usize,
    /// Their estimated RAM.
    pub dirty_bytes: usize,
    /// Nodes of the committed version that dirty ones replace (released at the commit).
    pub replaced_nodes: usize,
    /// Most RAM (cached plus dirty) held at once since the tree was opened or the mark reset.
    pub high_water: usize,
}

/// What a node about to be read must be, given its parent: one level lower, and written no
/// later. The level check bounds every descent; the generation checks catch a pointer to a
/// slot that has since been reused, and (where the parent records the child's generation)
/// an older version of the child: the block device shows one where the newest was lost to
/// damage it could not attribute (SPEC.md §7.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Expect {
    level: Option<u8>,
    max_gen: u32,
    /// The generation recorded in the reference followed, or [`UNDATED`].
    gen: u32,
}

impl Expect {
    /// The root: any level.
    pub(super) const ROOT: Expect = Expect {
        level: None,
        max_gen: u32::MAX,
        gen: UNDATED,
    };

    /// The root of a tree whose last commit was `committed_gen`.
    fn root_at(committed_gen: u32) -> Expect {
        Expect {
            max_gen: committed_gen,
            ..Expect::ROOT
        }
    }

    /// A child of `parent`: written no later than the newest pointer in the parent (its own
    /// generation, or its spare's).
    pub(super) fn child_of(parent: &Node) -> Expect {
        Expect {
            level: Some(parent.level.saturating_sub(1)),
            max_gen: parent.max_gen(),
            gen: UNDATED,
        }
    }

    /// What following `r` expects: this, and the generation `r` records.
    fn following(self, r: Ref) -> Expect {
        match r {
            Ref::Disk(_, gen) => Expect { gen, ..self },
            Ref::Dirty(_) => self,
        }
    }

    pub(super) fn check(self, node: &Node) -> Result<()> {
        if self.level.is_some_and(|l| l != node.level) {
            return Err(Error::Corrupt("index node at the wrong level"));
        }
        if node.gen > self.max_gen {
            return Err(Error::Corrupt("index node newer than its parent"));
        }
        if self.gen != UNDATED && node.gen != self.gen {
            return Err(Error::Corrupt(
                "index node of another generation than its parent records (a lost update)",
            ));
        }
        Ok(())
    }
}

/// Index of the child of a branch whose keys may include `key`: the last separator not
/// above it (the first separator is empty, below every key).
pub(super) fn child_index(es: &[BranchEntry], key: &[u8]) -> usize {
    es.partition_point(|e| *e.key <= *key).saturating_sub(1)
}

fn leaf_search(es: &[LeafEntry], key: &[u8]) -> core::result::Result<usize, usize> {
    es.binary_search_by(|e| (*e.key()).cmp(key))
}

/// An ordered map of byte strings, stored copy-on-write in nodes of a [`NodeStore`].
///
/// Changes are dirty in RAM until [`Tree::commit`]; until then the last committed root is
/// intact on flash. After a failed commit, retry it or [`Tree::abort`]: nodes a failed
/// commit managed to write are released by the abort (or reused by the retry).
#[derive(Debug)]
pub struct Tree<S: NodeStore> {
    pub(super) store: S,
    pub(super) lim: Limits,
    pub(super) min_bytes: usize,
    pub(super) min_entries: usize,
    pub(super) max_value: usize,
    /// Root of the last commit.
    pub(super) committed: Option<NodePtr>,
    /// Generation of the last commit: nodes on flash are no newer.
    pub(super) committed_gen: u32,
    /// Root of the working version (`None`: empty).
    pub(super) root: Option<Ref>,
    pub(super) arena: Arena,
    pub(super) cache: Cache,
    /// Nodes of the committed version that the working version replaced: released at commit.
    pub(super) pending_release: Vec<NodePtr>,
    /// Nodes written since the last commit (by a commit that failed part way): released by
    /// an abort, since no committed version references them.
    pub(super) uncommitted_writes: Vec<NodePtr>,
    /// Whether commits set spare pointers (configured, and the store can patch).
    pub(super) spares: bool,
    /// Nodes whose spares were set since the last commit (by a commit that failed part way):
    /// their spares count for the working version, and become garbage on an abort.
    pub(super) uncommitted_patches: Vec<NodePtr>,
    /// Nodes of the committed version found with a garbage spare: copied by the next commit.
    pub(super) garbage: BTreeSet<NodePtr>,
    /// Whether every garbage spare of the committed version is known (the whole version was
    /// read since the tree was opened, or the store cannot patch).
    pub(super) scanned: bool,
    pub(super) high_water: usize,
    pub(super) buf: Vec<u8>,
    /// Changes of the working version so far (inserts and removals that changed a key):
    /// the owner compares counts to tell whether anything changed behind its back.
    pub(super) mutations: u64,
}

impl<S: NodeStore> Tree<S> {
    /// Opens the tree whose root is `root` (`None`: a new, empty tree), with the default
    /// configuration. Only the root is read now; the rest loads as it is used.
    pub fn open(store: S, root: Option<NodePtr>) -> Result<Self> {
        Self::open_with(store, root, TreeConfig::default())
    }

    /// Opens a tree with a configuration. The committed generation is the root's: right
    /// for trees written without spare pointers, whose every commit writes a new root. A
    /// root with a spare area is refused: such a tree opens with [`Tree::open_at`].
    pub fn open_with(store: S, root: Option<NodePtr>, config: TreeConfig) -> Result<Self> {
        let mut t = Self::open_inner(store, root, config)?;
        if let Some(p) = root {
            let node = t.read_raw(p)?;
            if node.spare != Spare::Absent {
                return Err(Error::InvalidArgument(
                    "a tree with spare pointers opens with its committed generation",
                ));
            }
            t.committed_gen = node.gen;
            t.cache.insert(p, node);
            t.note_ram();
        }
        Ok(t)
    }

    /// Opens the tree whose root is `root` (`None`: a new, empty tree) and whose last commit
    /// was generation `committed_gen` (what [`Tree::committed_generation`] said after it;
    /// 0 for a new tree), which its owner recorded with the root. With spare pointers the
    /// root may stay the same node across commits, so only the owner knows the generation;
    /// it decides which spares count (SPEC.md §7.6).
    pub fn open_at(
        store: S,
        root: Option<NodePtr>,
        committed_gen: u32,
        config: TreeConfig,
    ) -> Result<Self> {
        let mut t = Self::open_inner(store, root, config)?;
        t.committed_gen = committed_gen;
        if let Some(p) = root {
            t.check_root(p)?;
        }
        Ok(t)
    }

    /// Goes back to the version at `root`, committed as generation `committed_gen`, which the
    /// owner knows to be the one on flash: after a commit whose own record (the owner's) was
    /// not written, the tree's last commit is not the durable one. Spares that commit set are
    /// newer than `committed_gen`: reads find them to be garbage, and the next commit copies
    /// their nodes.
    pub fn reset_to(&mut self, root: Option<NodePtr>, committed_gen: u32) -> Result<()> {
        self.arena.clear();
        self.cache.clear();
        self.pending_release.clear();
        self.uncommitted_writes.clear();
        self.uncommitted_patches.clear();
        self.garbage.clear();
        self.scanned = root.is_none() || !self.store.can_patch();
        self.committed = root;
        self.committed_gen = committed_gen;
        self.root = root.map(Ref::root);
        if let Some(p) = root {
            self.check_root(p)?;
        }
        Ok(())
    }

    /// Reads the root at `p` and checks it against the committed generation: no newer, and
    /// in a tree without spare pointers, whose every commit writes the root, of exactly that
    /// generation — else it is an older version of the root's block, the newest lost
    /// (SPEC.md §7.4). A root of format 1 or 2 may be older: the code that wrote it kept a
    /// shrunk tree's old node as the root.
    fn check_root(&mut self, p: NodePtr) -> Result<()> {
        let committed_gen = self.committed_gen;
        let spares = self.spares;
        let node = self.node(Ref::root(p), Expect::root_at(committed_gen))?;
        if !spares && node.dated && node.gen != committed_gen {
            return Err(Error::Corrupt(
                "index root of another generation than its owner records (a lost update)",
            ));
        }
        Ok(())
    }

    fn open_inner(store: S, root: Option<NodePtr>, config: TreeConfig) -> Result<Self> {
        let node_size = store.node_size();
        check_node_size(node_size)?;
        let max_entries = match config.max_entries {
            None => usize::from(u16::MAX),
            Some(m) if (3..=usize::from(u16::MAX)).contains(&m) => m,
            Some(_) => return Err(Error::InvalidArgument("max_entries must be at least 3")),
        };
        if config.min_fill_percent > 50 {
            return Err(Error::InvalidArgument(
                "min_fill_percent must be at most 50",
            ));
        }
        let spares = config.spare_pointers && store.can_patch();
        let cap = node_size - HEADER_LEN - if spares { SPARE_LEN } else { 0 };
        let scanned = root.is_none() || !store.can_patch();
        Ok(Tree {
            store,
            lim: Limits { cap, max_entries },
            min_bytes: cap * usize::from(config.min_fill_percent) / 100,
            // Without a count limit, fill is judged by bytes alone.
            min_entries: config.max_entries.map_or(usize::MAX, |m| m / 2),
            max_value: max_value_len(node_size),
            committed: root,
            committed_gen: 0,
            root: root.map(Ref::root),
            arena: Arena::default(),
            cache: Cache::new(config.cache_bytes, config.cache_nodes),
            pending_release: Vec::new(),
            uncommitted_writes: Vec::new(),
            spares,
            uncommitted_patches: Vec::new(),
            garbage: BTreeSet::new(),
            scanned,
            high_water: 0,
            mutations: 0,
            buf: vec![0; node_size],
        })
    }

    /// Generation of the last commit (or the one the tree was opened at): what the owner
    /// records with the root and gives back to [`Tree::open_at`].
    pub fn committed_generation(&self) -> u32 {
        self.committed_gen
    }

    /// Whether commits set spare pointers: configured, and the store can patch.
    pub fn uses_spare_pointers(&self) -> bool {
        self.spares
    }

    /// Nodes of the committed version found so far whose spare is garbage (set by a commit
    /// that was never recorded). The next commit copies them; until then they read as if the
    /// spare were unused.
    pub fn garbage_spares(&self) -> usize {
        self.garbage.len()
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The store, mutably (for its counters; writing through it does not involve the tree).
    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }

    /// Gives the store back, discarding uncommitted changes as [`Tree::abort`] does.
    pub fn into_store(mut self) -> S {
        self.abort();
        self.store
    }

    /// Root of the last commit (or the one the tree was opened at).
    pub fn committed_root(&self) -> Option<NodePtr> {
        self.committed
    }

    /// Whether there are changes not yet committed (copying nodes with garbage spares is
    /// one).
    pub fn is_dirty(&self) -> bool {
        let moved = match self.root {
            Some(Ref::Disk(p, _)) => Some(p) != self.committed,
            Some(Ref::Dirty(_)) => true,
            None => self.committed.is_some(),
        };
        moved || !self.pending_release.is_empty() || !self.garbage.is_empty()
    }

    /// Largest value this tree takes (a quarter of a node).
    pub fn max_value_len(&self) -> usize {
        self.max_value
    }

    /// Levels from the root to the leaves (0 for an empty tree).
    pub fn height(&mut self) -> Result<usize> {
        match self.root {
            None => Ok(0),
            Some(r) => Ok(usize::from(self.node(r, Expect::ROOT)?.level) + 1),
        }
    }

    /// RAM in use and its high-water mark.
    pub fn stats(&self) -> TreeStats {
        TreeStats {
            cached_nodes: self.cache.len(),
            cache_bytes: self.cache.ram(),
            dirty_nodes: self.arena.len(),
            dirty_bytes: self.arena.ram(),
            replaced_nodes: self.pending_release.len(),
            high_water: self.high_water,
        }
    }

    /// Restarts the high-water mark from the RAM in use now.
    pub fn reset_high_water(&mut self) {
        self.high_water = 0;
        self.note_ram();
    }

    /// Runs `f` with the clean-node cache held to `budget` bytes (never more than its own):
    /// a walk over the whole tree reads every node once, and keeping them would fill the
    /// cache, and the heap, with nodes no later operation needs more than any other.
    pub fn with_cache_budget<R>(&mut self, budget: usize, f: impl FnOnce(&mut Self) -> R) -> R {
        let own = self.cache.budget();
        self.cache.set_budget(budget.min(own));
        let r = f(self);
        self.cache.set_budget(own);
        r
    }

    /// Unloads every clean node (dirty ones stay), e.g. to measure cold lookups.
    pub fn drop_cache(&mut self) {
        self.cache.clear();
    }

    pub(super) fn note_ram(&mut self) {
        self.high_water = self.high_water.max(self.cache.ram() + self.arena.ram());
    }

    /// The node `r`, loading it into the cache if needed.
    pub(super) fn node(&mut self, r: Ref, exp: Expect) -> Result<&Node> {
        let exp = exp.following(r);
        let p = match r {
            Ref::Dirty(id) => {
                let node = self.arena.get(id)?;
                exp.check(node)?;
                return Ok(node);
            }
            Ref::Disk(p, _) => p,
        };
        if !self.cache.contains(p) {
            let node = self.read_node(p, exp)?;
            self.cache.insert(p, node);
            self.note_ram();
        }
        let node = self
            .cache
            .get(p)
            .ok_or(Error::Corrupt("index cache lost a node"))?;
        exp.check(node)?;
        Ok(node)
    }

    pub(super) fn read_node(&mut self, p: NodePtr, exp: Expect) -> Result<Node> {
        let node = self.read_raw(p)?;
        exp.check(&node)?;
        Ok(node)
    }

    /// Reads and decodes the node at `p` and applies its spare: one set by the committed
    /// version (or by this tree's commit in progress) counts, a newer one is garbage.
    fn read_raw(&mut self, p: NodePtr) -> Result<Node> {
        self.store.read(p, &mut self.buf)?;
        let mut node = Node::decode(&self.buf)?;
        let limit = if self.uncommitted_patches.contains(&p) {
            self.dirty_gen()
        } else {
            self.committed_gen
        };
        if node.apply_spare(limit) {
            self.garbage.insert(p);
        }
        Ok(node)
    }

    /// The value of `key`.
    pub fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let Some(mut r) = self.root else {
            return Ok(None);
        };
        let mut exp = Expect::ROOT;
        loop {
            let node = self.node(r, exp)?;
            match &node.body {
                Body::Leaf(es) => {
                    return Ok(leaf_search(es, key)
                        .ok()
                        .and_then(|i| es.get(i))
                        .map(|e| e.val().to_vec()));
                }
                Body::Branch(es) => {
                    r = es
                        .get(child_index(es, key))
                        .ok_or(Error::Corrupt("index branch without children"))?
                        .child;
                    exp = Expect::child_of(node);
                }
            }
        }
    }

    /// Sets `key` to `value`; returns the value it replaces.
    pub fn insert(&mut self, key: &[u8], value: &[u8]) -> Result<Option<Vec<u8>>> {
        if key.is_empty() || key.len() > MAX_KEY_LEN {
            return Err(Error::InvalidArgument("index key must be 1 to 300 bytes"));
        }
        if value.len() > self.max_value {
            return Err(Error::InvalidArgument(
                "index value longer than a quarter node",
            ));
        }
        debug_assert!(leaf_size(key.len(), value.len()) <= self.lim.cap);
        let old = self.get(key)?;
        if old.as_deref() == Some(value) {
            return Ok(old);
        }
        self.mutations += 1;
        let path = self.dirty_path(key)?;
        let leaf_id = path.last().map_or(0, |&(id, _)| id);
        let mut leaf = self.arena.take(leaf_id)?;
        let mut added = false;
        if let Body::Leaf(es) = &mut leaf.body {
            match leaf_search(es, key) {
                Ok(i) => {
                    if let Some(e) = es.get_mut(i) {
                        e.set_val(value);
                    }
                }
                Err(i) => {
                    es.insert(i, LeafEntry::new(key, value));
                    added = true;
                    leaf.last_insert = Some(Insert::after(leaf.last_insert, i, es.len()));
                }
            }
        }
        self.arena.put(leaf_id, leaf);
        self.fix_path(&path, added)?;
        self.note_ram();
        Ok(old)
    }

    /// Removes `key`; returns its value.
    pub fn remove(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let Some(old) = self.get(key)? else {
            return Ok(None);
        };
        self.mutations += 1;
        let path = self.dirty_path(key)?;
        let leaf_id = path.last().map_or(0, |&(id, _)| id);
        let mut leaf = self.arena.take(leaf_id)?;
        if let Body::Leaf(es) = &mut leaf.body {
            if let Ok(i) = leaf_search(es, key) {
                es.remove(i);
            }
        }
        leaf.last_insert = None;
        self.arena.put(leaf_id, leaf);
        self.fix_path(&path, false)?;
        self.note_ram();
        Ok(Some(old))
    }

    /// Changes of the working version so far (never reset: compare two counts).
    pub fn mutations(&self) -> u64 {
        self.mutations
    }

    /// Generation the dirty nodes will be written in.
    pub(super) fn dirty_gen(&self) -> u32 {
        self.committed_gen.saturating_add(1)
    }

    /// Makes the node `r` dirty: a copy in the arena, its original (if any) to be released at
    /// commit. The caller points the parent at the copy.
    pub(super) fn make_dirty(&mut self, r: Ref, exp: Expect) -> Result<u32> {
        let exp = exp.following(r);
        let p = match r {
            Ref::Dirty(id) => return Ok(id),
            Ref::Disk(p, _) => p,
        };
        // With spare pointers the original stays cached: the commit compares the copy with
        // it, to patch or keep it instead of writing the copy.
        let cached = if self.spares {
            self.cache.get(p).cloned()
        } else {
            self.cache.take(p)
        };
        let mut node = match cached {
            Some(n) => {
                exp.check(&n)?;
                n
            }
            None => {
                let n = self.read_node(p, exp)?;
                if self.spares {
                    self.cache.insert(p, n.clone());
                }
                n
            }
        };
        node.origin = Some(Origin {
            at: p,
            gen: node.gen,
        });
        node.gen = self.dirty_gen();
        self.pending_release.push(p);
        Ok(self.arena.add(node))
    }

    pub(super) fn set_child(&mut self, parent: u32, i: usize, child: Ref) -> Result<()> {
        let mut node = self.arena.take(parent)?;
        if let Body::Branch(es) = &mut node.body {
            if let Some(e) = es.get_mut(i) {
                e.child = child;
            }
        }
        self.arena.put(parent, node);
        Ok(())
    }

    /// Dirties the path from the root to the leaf where `key` belongs. Returns each node on
    /// it, root first, with the index of the child taken (0 for the leaf).
    pub(super) fn dirty_path(&mut self, key: &[u8]) -> Result<Vec<(u32, usize)>> {
        let mut id = match self.root {
            None => self.arena.add(Node::empty_leaf(self.dirty_gen())),
            Some(r) => self.make_dirty(r, Expect::ROOT)?,
        };
        self.root = Some(Ref::Dirty(id));
        let mut path = Vec::new();
        loop {
            let node = self.arena.get(id)?;
            let Body::Branch(es) = &node.body else {
                path.push((id, 0));
                return Ok(path);
            };
            let i = child_index(es, key);
            let child = es
                .get(i)
                .ok_or(Error::Corrupt("index branch without children"))?
                .child;
            let exp = Expect::child_of(node);
            let cid = self.make_dirty(child, exp)?;
            self.set_child(id, i, Ref::Dirty(cid))?;
            path.push((id, i));
            id = cid;
        }
    }
}
