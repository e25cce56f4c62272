//! Explicit transactions: several operations that become durable together, or not at all,
//! with many transactions open at once (TFFS §4.5–4.7).
//!
//! # Versions
//!
//! The working version lives in RAM in the index ([`Tree`]); a commit writes it. A
//! transaction keeps a private *overlay* of index changes over it: key to new value or to
//! deletion. While one of its operations runs ([`Fs::in_tx`]), every index access of the
//! operation goes through the overlay ([`TxTree`]): reads see the transaction's own changes
//! over the working version, range scans merge both, writes only change the overlay. The
//! file data it writes goes to newly allocated sectors, as every write does, so nothing
//! outside the transaction can see it; the data sectors it allocates and releases are
//! recorded with it ([`TxSpace`]) instead of going to the volume's pending releases. The
//! extent-map cache is bypassed while a transaction's operation runs (and drops the maps of
//! files it changes), so it never holds a transaction's extents.
//!
//! [`Fs::commit_tx`] applies the overlay to the working version, hands the transaction's
//! releases to the free-space map and commits the file system (index nodes, then the
//! superblock): once it returns, the whole transaction is durable. A power cut before the
//! superblock is written returns to a version without any of it. Until then a transaction
//! leaves no trace on flash that a mount would see: its data sectors are free in the
//! committed version. [`Fs::abort`] drops the overlay and gives the sectors back.
//!
//! Should an operation fail inside a transaction, its own changes are undone (the
//! transaction goes on as before the call). Should a file-system commit fail (which
//! returns the RAM state to the last commit), every open transaction is aborted.
//!
//! # Isolation
//!
//! Transactions are ordered by their start (a sequence number behind each identifier), and
//! the result is that of running them one after the other in that order. Conflicts are
//! tracked per *unit*: an inode with everything it holds except directory entries; one
//! directory entry (directory and name); and the set of a directory's entries together with
//! the directory's link count, size and times (`Dir`). For each unit the file system
//! remembers which transactions read it, which later committed a change to it, and which
//! open transactions change it. With `t` the transaction asking (TFFS §4.5):
//!
//! * a read aborts `t` if a later transaction committed a change of the unit, or an earlier
//!   one that is still open changes it (`t` cannot see that change). A later open writer is
//!   no obstacle: `t` reads the version before it;
//! * a write aborts `t` if a later transaction read the unit, or a later one committed a
//!   change of it, or another open transaction changes it;
//! * creating or deleting a name in a directory changes its entry (exclusively) and the
//!   directory's `Dir` unit in a *shared* way: any number of open transactions may do so
//!   at once, and the directory's link count, size and times are applied at commit as
//!   differences from what the transaction started from, so concurrent creators do not
//!   undo each other. Listing a directory (or checking that it is empty) reads `Dir`;
//!   deleting a directory changes it exclusively.
//!
//! An abort by conflict undoes the transaction at once and fails the operation with
//! [`Error::Conflict`]; the identifier stays taken until the caller calls [`Fs::abort`] (or
//! [`Fs::commit_tx`], which then fails with `Conflict` too). Deletions are allowed inside
//! transactions.
//!
//! An operation outside any transaction (atomic, TFFS §4.7) is refused with
//! [`Error::Conflict`] when it reads or changes a unit an open transaction changes (a
//! directory's `Dir` unit only counts for listing or deleting it, not for adding or
//! removing other names); finding a name counts as reading the inode it names. Refusing at
//! the first read, rather than at the first write, is what keeps the refusal itself atomic:
//! operations read what they change before changing anything, so they stop before that.
//!
//! # Identifiers
//!
//! Identifiers are small numbers, 1 to [`FsConfig::tid_window`](super::FsConfig), handed
//! out in turn and reused once their transaction ended (TFFS §4.6). [`Fs::begin`] fails with
//! [`Error::TooManyTransactions`] when the next identifier in turn is still open. What is
//! known of units is forgotten whenever no transaction is open.

use alloc::collections::{btree_map, BTreeMap, BTreeSet};
use alloc::vec::Vec;
use core::iter::Peekable;
use core::ops::{Bound, Deref, DerefMut, RangeBounds};

use super::layout::{decode_dirent, item, split_key, FileType, Ino, Inode, FLAT, ORPHANS};
use super::space::TxSpace;
use super::store::Store;
use super::Fs;
use crate::error::{Error, Result};
use crate::index::{Range, Tree};
use crate::media::Segments;

/// A transaction identifier: a small number, reused once its transaction ended.
pub type Tid = u32;

/// What conflicts are tracked on (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Unit {
    /// An inode and its items other than directory entries.
    Ino(Ino),
    /// A directory's set of entries, with its link count, size and times.
    Dir(Ino),
    /// One directory entry (or orphan item), by key.
    Entry(Vec<u8>),
}

/// What is known of a unit while transactions are open (sequence numbers).
#[derive(Debug, Default)]
struct UnitState {
    /// Transactions, open or committed, that read it.
    readers: BTreeSet<u64>,
    /// The latest committed transaction that changed it exclusively.
    committed_excl: u64,
    /// The latest committed transaction that changed it in a shared way.
    committed_shared: u64,
    /// Open transactions that change it, and whether exclusively.
    writers: BTreeMap<u64, bool>,
}

/// A transaction's change of one index item.
#[derive(Debug, Clone)]
enum Change {
    /// The item's new value.
    Put(Vec<u8>),
    /// The item is deleted.
    Del,
    /// A directory's inode, applied at commit as the difference from `base`.
    Dir { base: Inode, latest: Inode },
}

impl Change {
    fn value(&self) -> Option<Vec<u8>> {
        match self {
            Change::Put(v) => Some(v.clone()),
            Change::Del => None,
            Change::Dir { latest, .. } => Some(latest.encode().to_vec()),
        }
    }
}

/// One open transaction.
#[derive(Debug)]
struct Txn {
    /// Its place in the order of transactions.
    seq: u64,
    overlay: BTreeMap<Vec<u8>, Change>,
    /// Its data sectors (while one of its operations runs: in [`super::space::Space`]).
    space: TxSpace,
    /// Inodes it made minus those it deleted.
    inodes: i64,
    /// It conflicted: it is aborted and waits for the caller to end it.
    doomed: bool,
    /// Its changes have been undone already.
    rolled_back: bool,
    /// The running operation's overlay changes: key and what the overlay held before.
    undo: Vec<(Vec<u8>, Option<Change>)>,
}

/// The open transactions and what they accessed.
#[derive(Debug)]
pub(super) struct Txns {
    window: Tid,
    next: Tid,
    seq: u64,
    open: BTreeMap<Tid, Txn>,
    units: BTreeMap<Unit, UnitState>,
    /// The transaction whose operation runs now.
    active: Option<Tid>,
}

impl Txns {
    /// The running transaction's overlay, if an operation of one runs.
    fn overlay(&self) -> Option<&BTreeMap<Vec<u8>, Change>> {
        let tid = self.active?;
        self.open.get(&tid).map(|t| &t.overlay)
    }

    /// Whether an operation of a transaction runs now.
    pub fn in_operation(&self) -> bool {
        self.active.is_some()
    }

    fn new(window: u32) -> Txns {
        Txns {
            window: window.max(1),
            next: 1,
            seq: 0,
            open: BTreeMap::new(),
            units: BTreeMap::new(),
            active: None,
        }
    }

    /// A file-system commit failed and RAM went back to the last commit: every open
    /// transaction is aborted (its sectors are free again in the rebuilt free-space map).
    pub fn invalidate_all(&mut self) {
        for t in self.open.values_mut() {
            t.overlay.clear();
            t.space = TxSpace::default();
            t.inodes = 0;
            t.undo.clear();
            t.doomed = true;
            t.rolled_back = true;
        }
        self.units.clear();
    }

    /// Inodes open transactions made minus those they deleted: counted in the working
    /// version's inodes, not in a commit's.
    pub fn inode_delta(&self) -> i64 {
        self.open.values().map(|t| t.inodes).sum()
    }

    /// The data sectors open transactions allocated (`running`: those of the transaction
    /// whose operation runs, kept in the free-space map meanwhile).
    pub fn held(&self, running: Option<&TxSpace>) -> BTreeSet<u64> {
        self.open
            .values()
            .map(|t| &t.space)
            .chain(running)
            .flat_map(|s| s.allocated.iter())
            .flat_map(|&(a, n)| a..a + n)
            .collect()
    }

    /// The running transaction's sequence number, or a conflict if it is aborted.
    fn running(&self) -> Result<Option<(Tid, u64)>> {
        match self.active {
            None => Ok(None),
            Some(tid) => match self.open.get(&tid) {
                Some(t) if !t.doomed => Ok(Some((tid, t.seq))),
                _ => Err(Error::Conflict),
            },
        }
    }

    fn doom(&mut self, tid: Tid) -> Error {
        if let Some(t) = self.open.get_mut(&tid) {
            t.doomed = true;
        }
        Error::Conflict
    }

    /// Checks and records a read of `unit`.
    fn read(&mut self, unit: Unit) -> Result<()> {
        if self.open.is_empty() {
            return Ok(());
        }
        let Some((tid, seq)) = self.running()? else {
            let busy = self
                .units
                .get(&unit)
                .is_some_and(|st| !st.writers.is_empty());
            return if busy { Err(Error::Conflict) } else { Ok(()) };
        };
        let st = self.units.entry(unit).or_default();
        if st.committed_excl.max(st.committed_shared) > seq
            || st.writers.range(..seq).next().is_some()
        {
            return Err(self.doom(tid));
        }
        st.readers.insert(seq);
        Ok(())
    }

    /// Checks and records a change of `unit`, exclusive or shared.
    fn write(&mut self, unit: Unit, excl: bool) -> Result<()> {
        if self.open.is_empty() {
            return Ok(());
        }
        let Some((tid, seq)) = self.running()? else {
            let busy = self
                .units
                .get(&unit)
                .is_some_and(|st| st.writers.values().any(|&x| excl || x));
            return if busy { Err(Error::Conflict) } else { Ok(()) };
        };
        let st = self.units.entry(unit).or_default();
        let committed = if excl {
            st.committed_excl.max(st.committed_shared)
        } else {
            st.committed_excl
        };
        let other_writer = st.writers.iter().any(|(&w, &x)| w != seq && (excl || x));
        if st.readers.range(seq + 1..).next().is_some() || committed > seq || other_writer {
            return Err(self.doom(tid));
        }
        *st.writers.entry(seq).or_insert(false) |= excl;
        Ok(())
    }

    /// Ends a transaction: its changes become the latest committed ones of their units,
    /// or (aborted) its accesses are forgotten.
    fn end(&mut self, tid: Tid, committed: bool) {
        let Some(t) = self.open.remove(&tid) else {
            return;
        };
        if self.open.is_empty() {
            self.units.clear();
            return;
        }
        if !committed {
            return self.forget(t.seq);
        }
        for st in self.units.values_mut() {
            match st.writers.remove(&t.seq) {
                Some(true) => st.committed_excl = st.committed_excl.max(t.seq),
                Some(false) => st.committed_shared = st.committed_shared.max(t.seq),
                None => {}
            }
        }
    }

    /// Forgets what an aborted transaction read and changed.
    fn forget(&mut self, seq: u64) {
        for st in self.units.values_mut() {
            st.writers.remove(&seq);
            st.readers.remove(&seq);
        }
    }
}

/// The item type of a key that names a directory entry.
fn is_entry(ino: Ino, ty: u8) -> bool {
    ty == item::DIRENT || ty == item::INT_DIRENT || (ino == FLAT && ty == item::FLAT_NAME)
}

/// The unit a look-up of one key reads.
fn key_unit(k: &[u8]) -> Option<Unit> {
    let (ino, ty, _) = split_key(k).ok()?;
    Some(
        if is_entry(ino, ty) || (ino == ORPHANS && ty == item::ORPHAN) {
            Unit::Entry(k.to_vec())
        } else {
            Unit::Ino(ino)
        },
    )
}

/// The unit a scan starting at `lo` reads.
fn scan_unit(lo: &[u8]) -> Option<Unit> {
    let (ino, ty, _) = split_key(lo).ok()?;
    Some(if is_entry(ino, ty) {
        Unit::Dir(ino)
    } else {
        Unit::Ino(ino)
    })
}

fn dir_inode(v: Option<&[u8]>) -> Option<Inode> {
    let i = Inode::decode(v?).ok()?;
    matches!(i.file_type(), Ok(FileType::Directory)).then_some(i)
}

/// Whether a directory's inode changed in more than its link count, size and times.
fn changes_more(a: &Inode, b: &Inode) -> bool {
    (a.mode, a.uid, a.gid, a.rdev, a.blocks, a.parent)
        != (b.mode, b.uid, b.gid, b.rdev, b.blocks, b.parent)
}

/// `cur` with the changes from `base` to `latest`: counts as differences, other fields
/// where they changed.
fn merge(cur: Inode, base: &Inode, latest: &Inode) -> Inode {
    let mut n = cur;
    let d = |c: u64, b: u64, l: u64| (i128::from(c) + i128::from(l) - i128::from(b)).max(0);
    n.nlink =
        d(cur.nlink.into(), base.nlink.into(), latest.nlink.into()).min(u32::MAX.into()) as u32;
    n.size = d(cur.size, base.size, latest.size).min(u64::MAX.into()) as u64;
    macro_rules! pick {
        ($($f:ident),*) => {$(if latest.$f != base.$f { n.$f = latest.$f; })*};
    }
    pick!(mode, uid, gid, rdev, blocks, parent, atime, mtime, ctime);
    n
}

/// The units a change of key `k` from `old` to `new` writes, and whether exclusively.
fn write_units(k: &[u8], old: Option<&[u8]>, new: Option<&[u8]>) -> Result<Vec<(Unit, bool)>> {
    let (ino, ty, _) = split_key(k)?;
    let mut v = Vec::new();
    if is_entry(ino, ty) {
        v.push((Unit::Entry(k.to_vec()), true));
        v.push((Unit::Dir(ino), false));
    } else if ino == ORPHANS && ty == item::ORPHAN {
        v.push((Unit::Entry(k.to_vec()), true));
    } else if ty == item::INODE {
        match (dir_inode(old), new) {
            (Some(_), None) => {
                v.push((Unit::Ino(ino), true));
                v.push((Unit::Dir(ino), true));
            }
            (Some(o), Some(n)) => {
                if changes_more(&o, &Inode::decode(n)?) {
                    v.push((Unit::Ino(ino), true));
                }
                v.push((Unit::Dir(ino), false));
            }
            (None, _) => v.push((Unit::Ino(ino), true)),
        }
    } else {
        v.push((Unit::Ino(ino), true));
    }
    Ok(v)
}

fn own<K: AsRef<[u8]>>(b: Bound<&K>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_ref().to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.as_ref().to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn borrow(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Whether a range holds no key at all (which `BTreeMap::range` would refuse).
fn empty_range(a: &Bound<Vec<u8>>, b: &Bound<Vec<u8>>) -> bool {
    match (a, b) {
        (Bound::Included(x), Bound::Included(y)) => x > y,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Excluded(y))
        | (Bound::Excluded(x), Bound::Included(y)) => x >= y,
        _ => false,
    }
}

/// The entries of a range, through the running transaction's overlay if any.
pub(super) enum TxRange<'a, D: Segments> {
    /// Straight from the index.
    Tree(Range<'a, Store<D>>),
    /// Merged with an overlay.
    Merged(Merge<'a, D>),
    /// An error, then nothing.
    Failed(Option<Error>),
}

impl<D: Segments> Iterator for TxRange<'_, D> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            TxRange::Tree(r) => r.next(),
            TxRange::Merged(m) => m.next(),
            TxRange::Failed(e) => e.take().map(Err),
        }
    }
}

/// The index's entries of a range merged, as the walk goes, with a transaction's changes
/// in it: a scan costs what it reads, whatever the range holds beyond.
pub(super) struct Merge<'a, D: Segments> {
    tree: Peekable<Range<'a, Store<D>>>,
    overlay: Peekable<btree_map::Range<'a, Vec<u8>, Change>>,
}

impl<D: Segments> Merge<'_, D> {
    fn next(&mut self) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
        loop {
            match (self.tree.peek(), self.overlay.peek()) {
                (_, None) | (Some(Err(_)), _) => return self.tree.next(),
                (Some(Ok((t, _))), Some((o, _))) if t < *o => return self.tree.next(),
                (Some(Ok((t, _))), Some((o, _))) if t == *o => {
                    // The transaction's change replaces the index's entry.
                    self.tree.next();
                }
                _ => {}
            }
            let (k, c) = self.overlay.next()?;
            if let Some(v) = c.value() {
                return Some(Ok((k.clone(), v)));
            }
        }
    }
}

/// The index as the running operation sees it: through its transaction's overlay, with
/// conflicts checked while transactions are open. Everything else of the index is reached
/// through `Deref`.
#[derive(Debug)]
pub(super) struct TxTree<D: Segments> {
    tree: Tree<Store<D>>,
    /// The open transactions.
    pub tx: Txns,
}

impl<D: Segments> Deref for TxTree<D> {
    type Target = Tree<Store<D>>;
    fn deref(&self) -> &Self::Target {
        &self.tree
    }
}

impl<D: Segments> DerefMut for TxTree<D> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.tree
    }
}

impl<D: Segments> TxTree<D> {
    /// The index, with room for `window` open transactions.
    pub fn new(tree: Tree<Store<D>>, window: u32) -> Self {
        TxTree {
            tree,
            tx: Txns::new(window),
        }
    }

    /// The node store, giving the index up.
    pub fn into_store(self) -> Store<D> {
        self.tree.into_store()
    }

    /// A key's value as the running operation sees it, without conflict checks.
    fn view(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(c) = self.tx.overlay().and_then(|o| o.get(key)) {
            return Ok(c.value());
        }
        self.tree.get(key)
    }

    /// A key's value.
    pub fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(u) = key_unit(key) {
            self.tx.read(u)?;
        }
        let v = self.view(key)?;
        if self.tx.active.is_none() && !self.tx.open.is_empty() {
            // An atomic operation that finds a name goes on to the inode it names: refused
            // now if a transaction changes that inode, before the operation changes anything.
            if let (Some(Unit::Entry(_)), Some(v)) = (key_unit(key), &v) {
                if let Ok((ino, _)) = decode_dirent(v) {
                    self.tx.read(Unit::Ino(ino))?;
                }
            }
        }
        Ok(v)
    }

    /// Checks a change of `key` from `old` to `new` against the open transactions.
    fn check_write(&mut self, key: &[u8], old: Option<&[u8]>, new: Option<&[u8]>) -> Result<()> {
        for (u, excl) in write_units(key, old, new)? {
            self.tx.write(u, excl)?;
        }
        Ok(())
    }

    /// Records a change in the running transaction's overlay.
    fn set(&mut self, key: &[u8], c: Change) {
        if let Some(t) = self.tx.active.and_then(|tid| self.tx.open.get_mut(&tid)) {
            let before = t.overlay.insert(key.to_vec(), c);
            t.undo.push((key.to_vec(), before));
        }
    }

    /// Sets a key's value; returns the value it replaced.
    pub fn insert(&mut self, key: &[u8], value: &[u8]) -> Result<Option<Vec<u8>>> {
        if self.tx.open.is_empty() {
            return self.tree.insert(key, value);
        }
        self.tx.running()?;
        let old = self.view(key)?;
        self.check_write(key, old.as_deref(), Some(value))?;
        if self.tx.active.is_none() {
            return self.tree.insert(key, value);
        }
        let is_inode = split_key(key).is_ok_and(|(_, ty, _)| ty == item::INODE);
        let change = match (is_inode, dir_inode(old.as_deref())) {
            (true, Some(o)) => match self.tx.overlay().and_then(|m| m.get(key)) {
                Some(Change::Dir { base, .. }) => Change::Dir {
                    base: *base,
                    latest: Inode::decode(value)?,
                },
                Some(_) => Change::Put(value.to_vec()),
                None => Change::Dir {
                    base: o,
                    latest: Inode::decode(value)?,
                },
            },
            _ => Change::Put(value.to_vec()),
        };
        self.set(key, change);
        Ok(old)
    }

    /// Deletes a key; returns its value.
    pub fn remove(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if self.tx.open.is_empty() {
            return self.tree.remove(key);
        }
        self.tx.running()?;
        let old = self.view(key)?;
        if old.is_none() {
            return Ok(None);
        }
        self.check_write(key, old.as_deref(), None)?;
        if self.tx.active.is_none() {
            return self.tree.remove(key);
        }
        self.set(key, Change::Del);
        Ok(old)
    }

    /// The entries with keys in `range`, in order.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&mut self, range: R) -> TxRange<'_, D> {
        let (a, b) = (own(range.start_bound()), own(range.end_bound()));
        if !self.tx.open.is_empty() {
            if let Bound::Included(lo) | Bound::Excluded(lo) = &a {
                if let Some(u) = scan_unit(lo) {
                    if let Err(e) = self.tx.read(u) {
                        return TxRange::Failed(Some(e));
                    }
                }
            }
        }
        let Some(overlay) = self.tx.overlay() else {
            return TxRange::Tree(self.tree.range((a, b)));
        };
        // `BTreeMap::range` refuses a range that holds no key; the index's walk does not.
        let changes = if empty_range(&a, &b) {
            overlay
                .range::<[u8], _>((Bound::Unbounded, Bound::Excluded(&[][..])))
                .peekable()
        } else {
            overlay
                .range::<[u8], _>((borrow(&a), borrow(&b)))
                .peekable()
        };
        TxRange::Merged(Merge {
            tree: self.tree.range((a, b)).peekable(),
            overlay: changes,
        })
    }

    /// The entry with the greatest key not above `key`. Inside a transaction, only among
    /// the keys of the same inode and item type (all its callers look no further).
    pub fn seek_le(&mut self, key: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        if !self.tx.open.is_empty() {
            if let Some(u) = scan_unit(key) {
                self.tx.read(u)?;
            }
        }
        let Some(overlay) = self.tx.overlay() else {
            return self.tree.seek_le(key);
        };
        let lo = &key[..key.len().min(9)];
        // The index's greatest key not above `key` that the overlay leaves alone: each
        // step back passes a key the transaction itself changed, so the walk is bounded by
        // its own changes, not by the keys of the inode.
        let mut base = self.tree.seek_le(key)?;
        while let Some((k, _)) = &base {
            if k.as_slice() < lo || !overlay.contains_key(k) {
                break;
            }
            base = self.tree.seek_lt(k)?;
        }
        let base = base.filter(|(k, _)| k.as_slice() >= lo);
        let changed = overlay
            .range::<[u8], _>((Bound::Included(lo), Bound::Included(key)))
            .rev()
            .find_map(|(k, c)| c.value().map(|v| (k.clone(), v)));
        Ok(match (base, changed) {
            (Some(b), Some(c)) => Some(if c.0 > b.0 { c } else { b }),
            (b, c) => b.or(c),
        })
    }

    /// Applies a committing transaction's overlay to the working version.
    fn apply(&mut self, overlay: BTreeMap<Vec<u8>, Change>) -> Result<()> {
        for (k, c) in overlay {
            match c {
                Change::Put(v) => {
                    self.tree.insert(&k, &v)?;
                }
                Change::Del => {
                    self.tree.remove(&k)?;
                }
                Change::Dir { base, latest } => {
                    let new = match self.tree.get(&k)? {
                        Some(v) => merge(Inode::decode(&v)?, &base, &latest),
                        None => latest,
                    };
                    self.tree.insert(&k, &new.encode())?;
                }
            }
        }
        Ok(())
    }
}

impl<D: Segments> Fs<D> {
    /// Starts a transaction (TFFS `BeginTransaction`). Fails with
    /// [`Error::TooManyTransactions`] when the next identifier in turn is still in use.
    pub fn begin(&mut self) -> Result<Tid> {
        let tx = &mut self.tree.tx;
        let tid = tx.next;
        if tx.open.contains_key(&tid) {
            return Err(Error::TooManyTransactions);
        }
        tx.next = tid % tx.window + 1;
        tx.seq += 1;
        tx.open.insert(
            tid,
            Txn {
                seq: tx.seq,
                overlay: BTreeMap::new(),
                space: TxSpace::default(),
                inodes: 0,
                doomed: false,
                rolled_back: false,
                undo: Vec::new(),
            },
        );
        Ok(tid)
    }

    /// Open transactions.
    pub fn transactions(&self) -> usize {
        self.tree.tx.open.len()
    }

    /// Runs `f` (any file operations on `self`) inside transaction `tid`: its changes are
    /// seen by `tid` only until [`Fs::commit_tx`]. If `f` fails, its changes are undone and
    /// the transaction goes on; if it conflicts, the transaction is aborted and `f`'s
    /// result is [`Error::Conflict`].
    pub fn in_tx<R>(&mut self, tid: Tid, f: impl FnOnce(&mut Self) -> Result<R>) -> Result<R> {
        if self.tree.tx.active.is_some() {
            return Err(Error::InvalidArgument("transactions do not nest"));
        }
        let t = self.tree.tx.open.get_mut(&tid).ok_or(Error::BadHandle)?;
        if t.doomed {
            return Err(Error::Conflict);
        }
        // Blocks waiting in RAM go out first: an operation in a transaction programs its
        // blocks at once, and may free or read the working version's, whose buffers an
        // abort must not have dropped.
        self.tree.store_mut().write_back_all(None)?;
        let Some(t) = self.tree.tx.open.get_mut(&tid) else {
            return Err(Error::BadHandle);
        };
        t.undo.clear();
        let space = core::mem::take(&mut t.space);
        let marks = (space.allocated.len(), space.released.len());
        self.tree.store_mut().space.tx = Some(space);
        self.tree.tx.active = Some(tid);
        self.extent_cache.bypass = true;
        let inodes = self.inodes;
        let result = f(self);
        self.extent_cache.bypass = false;
        self.tree.tx.active = None;
        let space = self.tree.store_mut().space.tx.take().unwrap_or_default();
        let Some(t) = self.tree.tx.open.get_mut(&tid) else {
            return result;
        };
        if t.rolled_back {
            // A failed commit returned everything to the last commit.
            return Err(result.err().unwrap_or(Error::Conflict));
        }
        t.space = space;
        t.inodes += self.inodes as i64 - inodes as i64;
        if t.doomed {
            self.rollback(tid);
            return Err(Error::Conflict);
        }
        match result {
            Ok(r) => {
                t.undo.clear();
                Ok(r)
            }
            Err(e) => {
                for (k, before) in core::mem::take(&mut t.undo).into_iter().rev() {
                    match before {
                        Some(c) => t.overlay.insert(k, c),
                        None => t.overlay.remove(&k),
                    };
                }
                let fresh: Vec<(u64, u64)> = t
                    .space
                    .allocated
                    .drain(marks.0.min(t.space.allocated.len())..)
                    .collect();
                t.space.released.truncate(marks.1);
                t.inodes -= self.inodes as i64 - inodes as i64;
                self.inodes = inodes;
                self.give_back(&fresh);
                Err(e)
            }
        }
    }

    /// Frees sectors no version uses and lets the block device forget them.
    fn give_back(&mut self, runs: &[(u64, u64)]) {
        let store = self.tree.store_mut();
        for &(a, n) in runs {
            store.wb.drop_range(a, n);
            for k in a..a + n {
                // Only spares the cleaner a copy (see `Fs::forget_freed`).
                let _ = store.forget(k);
            }
            store.space.unalloc(a, n);
        }
    }

    /// Undoes a transaction's changes (it stays open, aborted).
    fn rollback(&mut self, tid: Tid) {
        let Some(t) = self.tree.tx.open.get_mut(&tid) else {
            return;
        };
        t.doomed = true;
        if t.rolled_back {
            return;
        }
        t.rolled_back = true;
        let seq = t.seq;
        t.overlay.clear();
        t.undo.clear();
        let space = core::mem::take(&mut t.space);
        let inodes = core::mem::take(&mut t.inodes);
        self.inodes = (self.inodes as i64 - inodes).max(0) as u64;
        self.give_back(&space.allocated);
        self.tree.tx.forget(seq);
    }

    /// Commits transaction `tid` (TFFS `CommitTransaction`): once this returns, all of it is
    /// durable. Fails with [`Error::Conflict`] if it was aborted by a conflict; if the
    /// file-system commit fails, the volume returns to its last commit and every open
    /// transaction is aborted. Either way the identifier is free again.
    pub fn commit_tx(&mut self, tid: Tid) -> Result<()> {
        if self.tree.tx.active.is_some() {
            return Err(Error::InvalidArgument(
                "commit inside a transaction's operation",
            ));
        }
        let t = self.tree.tx.open.get_mut(&tid).ok_or(Error::BadHandle)?;
        if t.doomed {
            self.rollback(tid);
            self.tree.tx.end(tid, false);
            return Err(Error::Conflict);
        }
        let overlay = core::mem::take(&mut t.overlay);
        let space = core::mem::take(&mut t.space);
        for k in overlay.keys() {
            if let Ok((ino, _, _)) = split_key(k) {
                self.extent_cache.forget(ino);
            }
        }
        self.tree.tx.end(tid, true);
        if let Err(e) = self.tree.apply(overlay) {
            self.reload()?;
            return Err(e);
        }
        for (a, n) in space.released {
            let store = self.tree.store_mut();
            store.wb.drop_range(a, n);
            store.space.release(a, n);
        }
        self.commit()
    }

    /// Aborts transaction `tid` (TFFS `AbortTransaction`): none of its changes remain, its
    /// new sectors are free again, and the identifier is free.
    pub fn abort(&mut self, tid: Tid) -> Result<()> {
        if self.tree.tx.active.is_some() {
            return Err(Error::InvalidArgument(
                "abort inside a transaction's operation",
            ));
        }
        if !self.tree.tx.open.contains_key(&tid) {
            return Err(Error::BadHandle);
        }
        self.rollback(tid);
        self.tree.tx.end(tid, false);
        Ok(())
    }
}
