//! The index B+tree against a `BTreeMap` model, under commits, aborts, reopens, failing
//! writes and damaged nodes.

use std::collections::{BTreeMap, BTreeSet};

use flashfs::index::{inspect_node, MemStore, NodePtr, NodeStore, Tree, TreeConfig, Visit};
use flashfs::Error;
use proptest::prelude::*;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const CRC32: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI);

/// A small deterministic generator, so the non-proptest tests are repeatable.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Keys of three shapes: short, path-like, and long with a long shared prefix (which makes
/// separators long too).
fn key(shape: u8, n: u32) -> Vec<u8> {
    let mut k = match shape % 3 {
        0 => Vec::new(),
        1 => b"dir/entry-".to_vec(),
        _ => vec![b'x'; 290],
    };
    k.extend_from_slice(format!("{n:05}").as_bytes());
    k
}

fn value(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| seed.wrapping_add(i as u8)).collect()
}

fn contents<S: NodeStore>(t: &mut Tree<S>) -> Model {
    t.iter().map(|r| r.unwrap()).collect()
}

/// Every node ever written is either reachable from the committed root or released, never
/// both, and nothing was released twice or read after release.
fn check_accounting(t: &mut Tree<MemStore>) {
    let mut reachable = BTreeSet::new();
    t.committed_nodes(|p| {
        assert!(reachable.insert(p), "node {p:?} reached twice");
    })
    .unwrap();
    let s = t.store();
    for p in (0..s.written()).map(NodePtr) {
        assert!(
            reachable.contains(&p) != s.is_released(p),
            "node {p:?}: reachable {} released {}",
            reachable.contains(&p),
            s.is_released(p)
        );
    }
    assert_eq!(s.stats().bad_releases, 0);
    assert_eq!(s.stats().reads_after_release, 0);
}

fn config(max_entries: Option<usize>, cache_bytes: usize) -> TreeConfig {
    TreeConfig {
        cache_bytes,
        max_entries,
        ..TreeConfig::default()
    }
}

// ---------------------------------------------------------------------------------------
// Model test

#[derive(Debug, Clone)]
enum Op {
    Insert {
        shape: u8,
        n: u32,
        len: usize,
        seed: u8,
    },
    /// Many keys at once, so trees grow several levels within one case.
    Bulk {
        shape: u8,
        from: u32,
        count: u32,
        len: usize,
    },
    Remove {
        shape: u8,
        n: u32,
    },
    /// Removes a run of keys, so nodes empty and merge.
    RemoveRun {
        shape: u8,
        from: u32,
        count: u32,
    },
    Get {
        shape: u8,
        n: u32,
    },
    SeekGe {
        shape: u8,
        n: u32,
    },
    SeekLe {
        shape: u8,
        n: u32,
    },
    Range {
        shape: u8,
        n: u32,
        take: usize,
    },
    Commit,
    /// A commit whose store fails after `allowed` writes, then a retry or an abort.
    FailingCommit {
        allowed: u64,
        retry: bool,
    },
    Abort,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    let k = || (0u8..3, 0u32..600);
    prop_oneof![
        10 => (k(), 0usize..1100, any::<u8>())
            .prop_map(|((shape, n), len, seed)| Op::Insert { shape, n, len, seed }),
        2 => (0u8..3, 0u32..600, 1u32..120, 0usize..300)
            .prop_map(|(shape, from, count, len)| Op::Bulk { shape, from, count, len }),
        5 => k().prop_map(|(shape, n)| Op::Remove { shape, n }),
        1 => (0u8..3, 0u32..600, 1u32..150)
            .prop_map(|(shape, from, count)| Op::RemoveRun { shape, from, count }),
        3 => k().prop_map(|(shape, n)| Op::Get { shape, n }),
        2 => k().prop_map(|(shape, n)| Op::SeekGe { shape, n }),
        2 => k().prop_map(|(shape, n)| Op::SeekLe { shape, n }),
        1 => (k(), 0usize..40).prop_map(|((shape, n), take)| Op::Range { shape, n, take }),
        2 => Just(Op::Commit),
        1 => (0u64..6, any::<bool>()).prop_map(|(allowed, retry)| Op::FailingCommit { allowed, retry }),
        1 => Just(Op::Abort),
        1 => Just(Op::Reopen),
    ]
}

fn run_model(
    node_size: usize,
    cfg: TreeConfig,
    ops: &[Op],
) -> std::result::Result<(), TestCaseError> {
    let mut t = Tree::open_with(MemStore::new(node_size), None, cfg).unwrap();
    let max_val = t.max_value_len();
    let mut cur = Model::new();
    let mut committed = Model::new();
    for op in ops {
        match *op {
            Op::Insert {
                shape,
                n,
                len,
                seed,
            } => {
                let (k, v) = (key(shape, n), value(len.min(max_val), seed));
                prop_assert_eq!(t.insert(&k, &v).unwrap(), cur.insert(k, v));
            }
            Op::Bulk {
                shape,
                from,
                count,
                len,
            } => {
                for n in from..from + count {
                    let (k, v) = (key(shape, n), value(len.min(max_val), n as u8));
                    prop_assert_eq!(t.insert(&k, &v).unwrap(), cur.insert(k, v));
                }
            }
            Op::Remove { shape, n } => {
                let k = key(shape, n);
                prop_assert_eq!(t.remove(&k).unwrap(), cur.remove(&k));
            }
            Op::RemoveRun { shape, from, count } => {
                for n in from..from + count {
                    let k = key(shape, n);
                    prop_assert_eq!(t.remove(&k).unwrap(), cur.remove(&k));
                }
            }
            Op::Get { shape, n } => {
                let k = key(shape, n);
                prop_assert_eq!(t.get(&k).unwrap(), cur.get(&k).cloned());
            }
            Op::SeekGe { shape, n } => {
                let k = key(shape, n);
                let want = cur
                    .range(k.clone()..)
                    .next()
                    .map(|(a, b)| (a.clone(), b.clone()));
                prop_assert_eq!(t.seek_ge(&k).unwrap(), want);
            }
            Op::SeekLe { shape, n } => {
                let k = key(shape, n);
                let want = cur
                    .range(..=k.clone())
                    .next_back()
                    .map(|(a, b)| (a.clone(), b.clone()));
                prop_assert_eq!(t.seek_le(&k).unwrap(), want);
                let below = cur
                    .range(..k.clone())
                    .next_back()
                    .map(|(a, b)| (a.clone(), b.clone()));
                prop_assert_eq!(t.seek_lt(&k).unwrap(), below);
            }
            Op::Range { shape, n, take } => {
                let k = key(shape, n);
                let got: Vec<_> = t
                    .range(k.clone()..)
                    .take(take)
                    .map(|r| r.unwrap())
                    .collect();
                let want: Vec<_> = cur
                    .range(k..)
                    .take(take)
                    .map(|(a, b)| (a.clone(), b.clone()))
                    .collect();
                prop_assert_eq!(got, want);
            }
            Op::Commit => {
                t.commit().unwrap();
                committed = cur.clone();
                prop_assert!(!t.is_dirty());
            }
            Op::FailingCommit { allowed, retry } => {
                t.store_mut().fail_writes_after(Some(allowed));
                let result = t.commit();
                t.store_mut().fail_writes_after(None);
                if result.is_ok() || retry {
                    if result.is_err() {
                        t.commit().unwrap();
                    }
                    committed = cur.clone();
                } else {
                    // The last commit is intact for a fresh reader, and an abort returns to it.
                    let root = t.committed_root();
                    let mut reader = Tree::open(t.store().clone(), root).unwrap();
                    prop_assert_eq!(contents(&mut reader), committed.clone());
                    t.abort();
                    cur = committed.clone();
                }
                prop_assert_eq!(contents(&mut t), cur.clone());
            }
            Op::Abort => {
                t.abort();
                cur = committed.clone();
                prop_assert_eq!(contents(&mut t), cur.clone());
            }
            Op::Reopen => {
                // As an owner reopens it: from the root and generation it recorded, which
                // the root must be of exactly (every commit writes it).
                let (root, gen) = (t.committed_root(), t.committed_generation());
                t = Tree::open_at(t.into_store(), root, gen, cfg).unwrap();
                cur = committed.clone();
                prop_assert_eq!(contents(&mut t), cur.clone());
            }
        }
    }
    prop_assert_eq!(contents(&mut t), cur);
    t.commit().unwrap();
    check_accounting(&mut t);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn tree_matches_a_btreemap(
        node_size in prop_oneof![Just(512usize), Just(2048), Just(4096)],
        max_entries in prop_oneof![Just(None), Just(Some(4usize)), Just(Some(14))],
        cache in prop_oneof![Just(0usize), Just(8 * 1024), Just(1 << 20)],
        ops in proptest::collection::vec(op(), 1..200),
    ) {
        run_model(node_size, config(max_entries, cache), &ops)?;
    }
}

// ---------------------------------------------------------------------------------------
// Node sizes, big keys and values, fan-out

#[test]
fn every_node_size_holds_big_keys_and_values() {
    for node_size in [512, 2048, 4096] {
        let mut t = Tree::open(MemStore::new(node_size), None).unwrap();
        let big = t.max_value_len();
        let mut model = Model::new();
        for n in 0..400u32 {
            // Longest keys, sharing 290 bytes, with values up to the limit.
            let mut k = vec![b'k'; 290];
            k.extend_from_slice(format!("{:010}", n * 7919 % 1000).as_bytes());
            assert_eq!(k.len(), 300);
            let v = value(if n % 3 == 0 { big } else { n as usize % 50 }, n as u8);
            t.insert(&k, &v).unwrap();
            model.insert(k, v);
        }
        assert!(matches!(
            t.insert(&[b'k'; 301], b""),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(t.insert(b"", b""), Err(Error::InvalidArgument(_))));
        assert!(matches!(
            t.insert(b"k", &vec![0; big + 1]),
            Err(Error::InvalidArgument(_))
        ));
        let root = t.commit().unwrap();
        let mut t = Tree::open(t.into_store(), Some(root)).unwrap();
        assert_eq!(contents(&mut t), model);
        let keys: Vec<_> = model.keys().cloned().collect();
        for k in keys.iter().step_by(2) {
            assert_eq!(t.remove(k).unwrap(), model.remove(k));
        }
        t.commit().unwrap();
        assert_eq!(contents(&mut t), model);
        for k in keys.iter() {
            assert_eq!(t.remove(k).unwrap(), model.remove(k));
        }
        assert_eq!(t.height().unwrap(), 0);
        let root = t.commit().unwrap();
        check_accounting(&mut t);
        // The empty tree is one empty leaf.
        assert_eq!(t.store().live().collect::<Vec<_>>(), vec![root]);
    }
}

#[test]
fn fan_out_limits_bound_every_node() {
    for (max, min_height) in [(4usize, 5usize), (14, 3)] {
        let mut t = Tree::open_with(MemStore::new(4096), None, config(Some(max), 1 << 20)).unwrap();
        for n in 0..2000u32 {
            t.insert(&n.to_be_bytes(), b"v").unwrap();
        }
        t.commit().unwrap();
        let h = t.height().unwrap();
        assert!(h >= min_height, "max {max}: height {h}");
        // Every node obeys the limit; every node but the root is at least half full.
        let mut nodes = Vec::new();
        t.committed_nodes(|p| nodes.push(p)).unwrap();
        let root = t.committed_root().unwrap();
        let mut buf = vec![0; 4096];
        for p in nodes {
            t.store_mut().read(p, &mut buf).unwrap();
            let info = inspect_node(&buf).unwrap();
            assert!(info.entries <= max, "{info:?}");
            assert!(p == root || info.entries >= max / 2, "{info:?}");
        }
        for n in (0..2000u32).filter(|n| n % 5 != 0) {
            t.remove(&n.to_be_bytes()).unwrap();
        }
        t.commit().unwrap();
        assert_eq!(t.iter().count(), 400);
        check_accounting(&mut t);
    }
}

#[test]
fn seek_le_finds_the_extent_covering_an_offset() {
    // Extents of one file keyed by (inode, start offset), value = length.
    let ext_key = |ino: u64, off: u64| [ino.to_be_bytes(), off.to_be_bytes()].concat();
    let mut t = Tree::open(MemStore::new(512), None).unwrap();
    for ino in [5u64, 6] {
        for i in 0..300u64 {
            t.insert(&ext_key(ino, i * 1000), &500u64.to_le_bytes())
                .unwrap();
        }
    }
    let (k, _) = t.seek_le(&ext_key(5, 123_456)).unwrap().unwrap();
    assert_eq!(k, ext_key(5, 123_000));
    let (k, _) = t.seek_le(&ext_key(6, 0)).unwrap().unwrap();
    assert_eq!(k, ext_key(6, 0));
    let (k, _) = t.seek_le(&ext_key(6, 0)[..15]).unwrap().unwrap();
    assert_eq!(k, ext_key(5, 299_000));
    assert_eq!(t.seek_le(&ext_key(4, u64::MAX)).unwrap(), None);
    assert_eq!(t.seek_ge(&ext_key(7, 0)).unwrap(), None);
    let (k, _) = t.seek_ge(&ext_key(5, 299_001)).unwrap().unwrap();
    assert_eq!(k, ext_key(6, 0));
    assert_eq!(t.range(ext_key(6, 0)..ext_key(6, 10_000)).count(), 10);
    assert_eq!(t.range(ext_key(5, 0)..=ext_key(5, 10_000)).count(), 11);
}

// ---------------------------------------------------------------------------------------
// Scale

/// Entries appended at the end of two key ranges side by side (two record files growing),
/// with other keys after both, leave their leaves full: a node split during an ascending
/// run keeps its left part as full as it was. An even split would leave every leaf of an
/// appended range half-empty for good, doubling the nodes a commit writes and halving what
/// the volume holds.
#[test]
fn ascending_runs_fill_their_leaves() {
    let k = |range: u8, n: u32| {
        let mut k = vec![range];
        k.extend_from_slice(&n.to_be_bytes());
        k
    };
    let val = [7u8; 32];
    // How many such entries one leaf holds.
    let mut t = Tree::open(MemStore::new(512), None).unwrap();
    let mut per_leaf = 0;
    while t.height().unwrap() <= 1 {
        t.insert(&k(1, per_leaf), &val).unwrap();
        per_leaf += 1;
    }
    let per_leaf = per_leaf - 1;

    let mut t = Tree::open(MemStore::new(512), None).unwrap();
    t.insert(&k(9, 0), b"after both").unwrap();
    let mut entries = 1usize;
    for n in 0..3000u32 {
        t.insert(&k(1, n), &val).unwrap();
        entries += 1;
        if n % 3 == 0 {
            t.insert(&k(2, n / 3), &val).unwrap();
            entries += 1;
        }
        if n % 64 == 63 {
            t.commit().unwrap();
        }
    }
    t.commit().unwrap();
    let mut nodes = 0;
    t.committed_nodes(|_| nodes += 1).unwrap();
    let least = entries.div_ceil(per_leaf as usize);
    // Leaves within a tenth of the least, and the branches above them.
    assert!(
        nodes <= least + least / 10 + 12,
        "{nodes} nodes for {entries} entries of {per_leaf} per leaf"
    );
    assert_eq!(t.iter().count(), entries);
    check_accounting(&mut t);
}

#[test]
fn a_hundred_thousand_keys_stay_shallow() {
    const N: u32 = 100_000;
    // Directory-like keys: parent inode, then a name.
    let k = |n: u32| {
        let mut k = (u64::from(n % 64) + 1).to_be_bytes().to_vec();
        k.extend_from_slice(format!("file-{n:07}.dat").as_bytes());
        k
    };
    let mut t = Tree::open(MemStore::new(4096), None).unwrap();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut order: Vec<u32> = (0..N).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    for (i, &n) in order.iter().enumerate() {
        t.insert(&k(n), &u64::from(n).to_le_bytes()).unwrap();
        if i % 10_000 == 9_999 {
            t.commit().unwrap();
        }
    }
    let root = t.commit().unwrap();
    let height = t.height().unwrap();
    assert!(height <= 5, "height {height}");
    let build = (t.store().stats().writes, t.stats().high_water);
    let mut nodes = 0;
    t.committed_nodes(|_| nodes += 1).unwrap();

    // Cold lookups read one node per level, no more.
    let mut t = Tree::open(t.into_store(), Some(root)).unwrap();
    let mut most = 0;
    for _ in 0..200 {
        let n = rng.below(u64::from(N)) as u32;
        t.drop_cache();
        t.store_mut().reset_stats();
        assert_eq!(
            t.get(&k(n)).unwrap(),
            Some(u64::from(n).to_le_bytes().to_vec())
        );
        most = most.max(t.store().stats().reads);
    }
    assert!(most as usize <= height, "{most} reads, height {height}");

    // One insert into the big tree costs one node per level at commit.
    t.store_mut().reset_stats();
    t.insert(b"\0\0\0\0\0\0\0\x01new", b"x").unwrap();
    t.commit().unwrap();
    let s = t.store().stats();
    assert_eq!(s.writes as usize, height);
    assert_eq!(s.releases as usize, height);
    eprintln!(
        "100k keys in 4096-byte nodes: height {height}, {nodes} nodes; building (11 commits) \
         wrote {} nodes with a RAM high water of {} bytes; a cold lookup reads at most {most} \
         nodes; one insert + commit writes {} nodes ({} bytes)",
        build.0,
        build.1,
        s.writes,
        s.writes * 4096,
    );
    assert_eq!(t.iter().count(), N as usize + 1);
    check_accounting(&mut t);
}

// ---------------------------------------------------------------------------------------
// RAM

#[test]
fn the_cache_stays_within_its_budget() {
    let budget = 16 * 1024;
    let mut t = Tree::open_with(MemStore::new(2048), None, config(None, budget)).unwrap();
    for n in 0..3000u32 {
        t.insert(&n.to_be_bytes(), &[7; 40]).unwrap();
    }
    let dirty_peak = t.stats().high_water;
    assert!(
        t.stats().dirty_bytes > budget,
        "dirty nodes stay until commit"
    );
    t.commit().unwrap();
    assert_eq!(t.stats().dirty_nodes, 0);
    t.reset_high_water();
    for n in 0..3000u32 {
        assert!(t.get(&n.to_be_bytes()).unwrap().is_some());
    }
    let s = t.stats();
    // At most one node beyond the budget (the one just loaded), and the mark reports it.
    assert!(s.cache_bytes <= budget + 2048 * 3, "{s:?}");
    assert!(
        s.high_water >= s.cache_bytes && s.high_water <= budget + 2048 * 3,
        "{s:?}"
    );
    assert!(dirty_peak > s.high_water);
}

/// A cache held to a number of nodes whatever its bytes keeps the path of a lookup: the
/// same lookup again reads nothing from flash, where a cache of one node reads the whole
/// path every time (each node pushes out the one above it).
#[test]
fn a_cache_of_a_path_s_nodes_answers_a_repeated_lookup_from_ram() {
    let mut t = Tree::open_with(MemStore::new(512), None, config(Some(4), 0)).unwrap();
    for n in 0..300u32 {
        t.insert(&n.to_be_bytes(), &[7; 20]).unwrap();
    }
    let root = t.commit().unwrap();
    let height = t.height().unwrap();
    assert!(height >= 3, "height {height}");
    let lookups = |nodes: usize, t: Tree<MemStore>| {
        let mut t = Tree::open_with(
            t.into_store(),
            Some(root),
            TreeConfig {
                cache_nodes: nodes,
                ..config(Some(4), 0)
            },
        )
        .unwrap();
        let key = 150u32.to_be_bytes();
        assert!(t.get(&key).unwrap().is_some());
        t.store_mut().reset_stats();
        for _ in 0..10 {
            assert!(t.get(&key).unwrap().is_some());
        }
        (t.store().stats().reads, t)
    };
    let (reads, t) = lookups(1, t);
    assert_eq!(reads as usize, 10 * height, "one cached node");
    let (reads, _) = lookups(height, t);
    assert_eq!(reads, 0, "a path's nodes cached");
}

#[test]
fn a_walk_of_the_committed_version_reads_each_node_once_and_gives_every_item_in_order() {
    let mut t = Tree::open_with(MemStore::new(512), None, config(None, 256 * 1024)).unwrap();
    for n in 0..3000u32 {
        t.insert(&n.to_be_bytes(), &value(20 + (n % 30) as usize, n as u8))
            .unwrap();
    }
    t.commit().unwrap();
    let items = contents(&mut t);
    let mut nodes = Vec::new();
    t.committed_nodes(|p| nodes.push(p)).unwrap();
    assert!(nodes.len() > 100, "{} nodes", nodes.len());

    // Walked with a cache of a few nodes: every node read once, however the cache fares.
    t.drop_cache();
    let reads = t.store().stats().reads;
    let (mut walked_nodes, mut walked_items) = (Vec::new(), Vec::new());
    t.with_cache_budget(2 * 1024, |t| {
        t.walk_committed(|v| {
            match v {
                Visit::Node(p) => walked_nodes.push(p),
                Visit::Item(k, v) => walked_items.push((k.to_vec(), v.to_vec())),
            }
            Ok(())
        })
    })
    .unwrap();
    assert_eq!(t.store().stats().reads - reads, nodes.len() as u64);
    assert_eq!(walked_nodes, nodes);
    assert_eq!(walked_items, items.into_iter().collect::<Vec<_>>());
    assert!(t.stats().cache_bytes <= 3 * 1024, "{:?}", t.stats());

    // An error from the visitor stops the walk and comes back.
    let mut seen = 0;
    let r = t.walk_committed(|v| {
        if let Visit::Item(..) = v {
            seen += 1;
            if seen == 10 {
                return Err(Error::Corrupt("stop"));
            }
        }
        Ok(())
    });
    assert_eq!((r, seen), (Err(Error::Corrupt("stop")), 10));
}

// ---------------------------------------------------------------------------------------
// Copy-on-write, accounting, failures

#[test]
fn the_committed_version_survives_until_the_next_commit() {
    let mut t = Tree::open(MemStore::new(512), None).unwrap();
    let mut old = Model::new();
    for n in 0..500u32 {
        let (k, v) = (key(1, n), value(20, n as u8));
        t.insert(&k, &v).unwrap();
        old.insert(k, v);
    }
    let r1 = t.commit().unwrap();
    for n in 0..500u32 {
        if n % 3 == 0 {
            t.remove(&key(1, n)).unwrap();
        } else {
            t.insert(&key(1, n), b"changed").unwrap();
        }
    }
    // Nothing written or released yet: the old root reads back whole.
    let snapshot = t.store().clone();
    assert_eq!(snapshot.stats().releases, 0);
    let mut old_tree = Tree::open(snapshot, Some(r1)).unwrap();
    assert_eq!(contents(&mut old_tree), old);
    let r2 = t.commit().unwrap();
    assert_ne!(r1, r2);
    assert!(t.store().is_released(r1));
    check_accounting(&mut t);
}

#[test]
fn many_commits_leak_nothing() {
    let mut rng = Rng(42);
    let mut t = Tree::open_with(MemStore::new(512), None, config(Some(14), 32 * 1024)).unwrap();
    let mut model = Model::new();
    for round in 0..300 {
        for _ in 0..rng.below(30) {
            let k = key(rng.below(3) as u8, rng.below(800) as u32);
            if rng.below(3) == 0 {
                assert_eq!(t.remove(&k).unwrap(), model.remove(&k));
            } else {
                let v = value(rng.below(100) as usize, round as u8);
                assert_eq!(t.insert(&k, &v).unwrap(), model.insert(k, v));
            }
        }
        if rng.below(5) == 0 {
            t.abort();
            model = contents(&mut t);
        } else {
            t.commit().unwrap();
        }
    }
    t.commit().unwrap();
    assert_eq!(contents(&mut t), model);
    check_accounting(&mut t);
}

#[test]
fn a_failed_commit_leaves_the_last_root_intact() {
    for retry in [false, true] {
        for allowed in 0..12u64 {
            let mut t = Tree::open(MemStore::new(512), None).unwrap();
            let mut old = Model::new();
            for n in 0..300u32 {
                let (k, v) = (key(0, n), value(30, 1));
                t.insert(&k, &v).unwrap();
                old.insert(k, v);
            }
            let root = t.commit().unwrap();
            let mut new = old.clone();
            for n in (0..300u32).step_by(7) {
                t.insert(&key(0, n), b"new").unwrap();
                new.insert(key(0, n), b"new".to_vec());
            }
            for n in 300..340u32 {
                t.insert(&key(0, n), b"more").unwrap();
                new.insert(key(0, n), b"more".to_vec());
            }
            t.store_mut().fail_writes_after(Some(allowed));
            let result = t.commit();
            if result.is_ok() {
                // Enough writes were allowed: nothing left to test at this count.
                assert_eq!(contents(&mut t), new);
                continue;
            }
            assert!(matches!(result, Err(Error::Flash(_))));
            assert_eq!(t.committed_root(), Some(root));
            // A fresh reader at the last root sees it whole.
            let mut reader = Tree::open(t.store().clone(), Some(root)).unwrap();
            assert_eq!(contents(&mut reader), old);
            // The working version is still there too.
            assert_eq!(contents(&mut t), new);
            t.store_mut().fail_writes_after(None);
            if retry {
                t.commit().unwrap();
                assert_eq!(contents(&mut t), new);
            } else {
                t.abort();
                assert_eq!(contents(&mut t), old);
            }
            check_accounting(&mut t);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Damage

/// A committed tree of several levels in 512-byte nodes, and its root.
fn damaged_fixture() -> (MemStore, NodePtr, Model) {
    let mut t = Tree::open(MemStore::new(512), None).unwrap();
    let mut model = Model::new();
    for n in 0..400u32 {
        let (k, v) = (key(1, n), value(100, n as u8));
        t.insert(&k, &v).unwrap();
        model.insert(k, v);
    }
    let root = t.commit().unwrap();
    assert!(t.height().unwrap() >= 3);
    (t.into_store(), root, model)
}

fn reseal(node: &mut [u8]) {
    let mut d = CRC32.digest();
    d.update(&node[..16]);
    d.update(&node[20..]);
    let crc = d.finalize();
    node[16..20].copy_from_slice(&crc.to_le_bytes());
}

/// Runs every operation over a possibly damaged tree: each either works or fails with a
/// typed error; none panics or hangs.
fn exercise(store: MemStore, root: NodePtr) -> Vec<Error> {
    let mut errors = Vec::new();
    let mut t = match Tree::open_with(store, Some(root), config(None, 2048)) {
        Ok(t) => t,
        Err(e) => return vec![e],
    };
    errors.extend(t.iter().filter_map(|r| r.err()));
    for n in [0u32, 57, 133, 199, 250] {
        let k = key(1, n);
        errors.extend(t.get(&k).err());
        errors.extend(t.seek_le(&k).err());
        errors.extend(t.seek_ge(&k).err());
        errors.extend(t.insert(&k, b"x").err());
        errors.extend(t.remove(&key(1, n + 1)).err());
    }
    errors.extend(t.commit().err());
    errors
}

#[test]
fn damaged_nodes_are_corrupt_errors() {
    let (store, root, model) = damaged_fixture();
    let mut nodes = Vec::new();
    let mut t = Tree::open(store.clone(), Some(root)).unwrap();
    t.committed_nodes(|p| nodes.push(p)).unwrap();
    assert_eq!(contents(&mut t), model);
    for &p in &nodes {
        for at in [0usize, 5, 10, 17, 30, 200, 511] {
            let mut s = store.clone();
            s.node_mut(p).unwrap()[at] ^= 0x10;
            let errors = exercise(s, root);
            assert!(!errors.is_empty(), "damage to {p:?} at {at} went unnoticed");
            for e in &errors {
                assert!(matches!(e, Error::Corrupt(_)), "{e:?}");
            }
        }
    }
    // A pointer to nowhere.
    assert!(matches!(
        Tree::open(store.clone(), Some(NodePtr(1 << 40))),
        Err(Error::Corrupt(_))
    ));
}

/// The fixture with its first key changed and committed: the root's first child is copied
/// (SPEC.md §7.5).
struct Rewritten {
    store: MemStore,
    old_root: NodePtr,
    new_root: NodePtr,
    key: Vec<u8>,
    old_child: NodePtr,
    new_child: NodePtr,
}

fn rewrite_first_key() -> Rewritten {
    let (mut store, old_root, _) = damaged_fixture();
    let first_child = |store: &mut MemStore, root| {
        let mut buf = vec![0; 512];
        store.read(root, &mut buf).unwrap();
        inspect_node(&buf).unwrap().children[0]
    };
    let old_child = first_child(&mut store, old_root);
    let mut t = Tree::open(store, Some(old_root)).unwrap();
    let key = t.iter().next().unwrap().unwrap().0;
    t.insert(&key, b"changed").unwrap();
    let new_root = t.commit().unwrap();
    let mut store = t.into_store();
    let new_child = first_child(&mut store, new_root);
    assert_ne!(new_child, old_child);
    Rewritten {
        store,
        old_root,
        new_root,
        key,
        old_child,
        new_child,
    }
}

#[test]
fn a_pointer_to_a_newer_node_is_caught() {
    // A branch pointing at a node written after it (a slot reused by the log) is corrupt
    // even though the node itself is sound: a copy of the old root pointed by hand at the
    // first child's newer copy.
    let Rewritten {
        mut store,
        old_root,
        old_child,
        new_child,
        ..
    } = rewrite_first_key();
    let mut forged = store.node_mut(old_root).unwrap().to_vec();
    // The first child pointer (4 bytes) follows the header, the key prefix and the empty
    // first key's length (SPEC.md, "Index nodes").
    let at = 20 + usize::from(u16::from_le_bytes([forged[14], forged[15]])) + 2;
    assert_eq!(forged[at..at + 4], (old_child.0 as u32).to_le_bytes());
    forged[at..at + 4].copy_from_slice(&(new_child.0 as u32).to_le_bytes());
    reseal(&mut forged);
    let forged = store.write(&forged).unwrap();
    let errors = exercise(store, forged);
    assert!(
        errors.contains(&Error::Corrupt("index node newer than its parent")),
        "{errors:?}"
    );
}

#[test]
fn an_older_version_of_a_node_is_caught() {
    // The block device may show an older version of a node's slot where the newest was lost
    // to damage it could not attribute: sound, older than its parent, and with other
    // contents. The parent records the generation of the child it points to, so the older
    // version is refused instead of read as the tree.
    let Rewritten {
        mut store,
        new_root,
        key,
        old_child,
        new_child,
        ..
    } = rewrite_first_key();
    let older = store.node_mut(old_child).unwrap().to_vec();
    store.node_mut(new_child).unwrap().copy_from_slice(&older);
    // The older version alone is a sound node, and the tree above it sound too.
    assert!(inspect_node(&older).is_ok());
    let errors = exercise(store.clone(), new_root);
    assert!(
        errors.contains(&Error::Corrupt(
            "index node of another generation than its parent records (a lost update)"
        )),
        "{errors:?}"
    );
    // What the older version held is never returned as the tree's.
    let mut t = Tree::open(store, Some(new_root)).unwrap();
    assert!(matches!(t.get(&key), Err(Error::Corrupt(_))));
}

#[test]
fn an_older_version_of_the_root_is_caught() {
    // Every commit of a tree without spare pointers writes its root, so the root must be of
    // the generation its owner recorded; an older version of its block is refused.
    let Rewritten {
        mut store,
        old_root,
        new_root,
        ..
    } = rewrite_first_key();
    let gen = Tree::open(store.clone(), Some(new_root))
        .unwrap()
        .committed_generation();
    assert!(Tree::open_at(store.clone(), Some(new_root), gen, TreeConfig::default()).is_ok());
    let older = store.node_mut(old_root).unwrap().to_vec();
    store.node_mut(new_root).unwrap().copy_from_slice(&older);
    assert!(matches!(
        Tree::open_at(store, Some(new_root), gen, TreeConfig::default()),
        Err(Error::Corrupt(
            "index root of another generation than its owner records (a lost update)"
        ))
    ));
}

#[test]
fn a_tree_that_shrinks_keeps_a_root_of_its_committed_generation() {
    // Removals from either end, committed now and then, shrink the tree level by level; after
    // each commit the root must be of the generation recorded, as the owner reopens it.
    for from_the_end in [false, true] {
        let (store, root, model) = damaged_fixture();
        let mut t = Tree::open(store, Some(root)).unwrap();
        let mut keys: Vec<Vec<u8>> = model.keys().cloned().collect();
        if from_the_end {
            keys.reverse();
        }
        for (i, k) in keys.iter().enumerate().take(keys.len() - 1) {
            t.remove(k).unwrap();
            if i % 7 == 0 {
                let root = t.commit().unwrap();
                let gen = t.committed_generation();
                let mut r =
                    Tree::open_at(t.store().clone(), Some(root), gen, TreeConfig::default())
                        .unwrap();
                assert_eq!(contents(&mut r).len(), keys.len() - i - 1);
            }
        }
        t.commit().unwrap();
        assert_eq!(t.height().unwrap(), 1);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_as_a_root_are_rejected(
        bytes in proptest::collection::vec(any::<u8>(), 512),
        header in any::<bool>(),
    ) {
        let mut b = bytes;
        if header {
            // Past the magic and the CRC, into the structural checks.
            let ty = 1 + (b[2] & 1);
            b[0..4].copy_from_slice(&[b'I', b'X', ty, 1]);
            b[5] = 9;
            reseal(&mut b);
        }
        let mut s = MemStore::new(512);
        let p = s.write(&b).unwrap();
        for e in exercise(s, p) {
            prop_assert!(matches!(e, Error::Corrupt(_)), "{:?}", e);
        }
    }

    #[test]
    fn mutated_nodes_behind_good_crcs_never_panic(
        which in any::<prop::sample::Index>(),
        edits in proptest::collection::vec((0usize..512, any::<u8>()), 1..6),
    ) {
        let (mut store, root, _) = damaged_fixture();
        let mut nodes = Vec::new();
        Tree::open(store.clone(), Some(root)).unwrap().committed_nodes(|p| nodes.push(p)).unwrap();
        let p = nodes[which.index(nodes.len())];
        let node = store.node_mut(p).unwrap();
        for (at, v) in edits {
            node[at] = v;
        }
        reseal(node);
        for e in exercise(store, root) {
            // A generation forged to the last one leaves the tree unable to commit.
            prop_assert!(matches!(e, Error::Corrupt(_) | Error::ReadOnly), "{:?}", e);
        }
    }
}

/// A branch node built by hand (SPEC.md, "Index nodes"), without a key prefix.
fn forged_branch(level: u8, gen: u32, children: &[NodePtr]) -> Vec<u8> {
    let mut payload = Vec::new();
    for (i, c) in children.iter().enumerate() {
        let sep: &[u8] = if i == 0 { &[] } else { &[b'A' + i as u8] };
        payload.extend_from_slice(&(sep.len() as u16).to_le_bytes());
        payload.extend_from_slice(sep);
        payload.extend_from_slice(&c.0.to_le_bytes());
    }
    let mut b = vec![0xFF; 512];
    b[0..6].copy_from_slice(&[b'I', b'X', 2, 1, level, 9]);
    b[6..8].copy_from_slice(&(children.len() as u16).to_le_bytes());
    b[8..12].copy_from_slice(&gen.to_le_bytes());
    b[12..14].copy_from_slice(&(payload.len() as u16).to_le_bytes());
    b[14..16].copy_from_slice(&0u16.to_le_bytes());
    b[20..20 + payload.len()].copy_from_slice(&payload);
    reseal(&mut b);
    b
}

#[test]
fn shared_subtrees_are_caught_without_walking_them_all() {
    // One real leaf, then five levels of branches whose 40 children are all the level
    // below: 40^5 paths to the same leaf, each node sound on its own.
    let mut t = Tree::open(MemStore::new(512), None).unwrap();
    for n in 0..3u32 {
        t.insert(&key(1, n), b"v").unwrap();
    }
    let leaf = t.commit().unwrap();
    let mut store = t.into_store();
    let mut below = leaf;
    for level in 1..=5u8 {
        below = store
            .write(&forged_branch(level, 100, &[below; 40]))
            .unwrap();
    }
    let root = below;
    store.reset_stats();
    let mut t = Tree::open(store, Some(root)).unwrap();
    let items: Vec<_> = t.iter().collect();
    assert!(items.len() <= 4, "{} items", items.len());
    assert!(matches!(items.last(), Some(Err(Error::Corrupt(_)))));
    let mut visited = 0;
    assert!(matches!(
        t.committed_nodes(|_| visited += 1),
        Err(Error::Corrupt(_))
    ));
    assert!(visited < 20, "{visited} nodes visited");
    assert!(t.store().stats().reads < 20);
}
