//! Spare pointers (SPEC.md §7.6) on a store that can patch nodes: what commits write, what
//! reads apply, and what a commit cut short leaves behind.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::vec::Vec;

use super::node::{spare_offset, SPARE_LEN};
use super::{inspect_node, MemStore, NodePtr, NodeStore, SpareInfo, Tree, TreeConfig};
use crate::error::Error;

const KEYS: u32 = 300;

fn cfg(spares: bool) -> TreeConfig {
    TreeConfig {
        max_entries: Some(4),
        spare_pointers: spares,
        ..TreeConfig::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// A tree of fan-out 2–4 holding `KEYS` keys, committed: five or six levels.
fn tall(spares: bool) -> (Tree<MemStore>, BTreeMap<u32, Vec<u8>>) {
    let mut s = MemStore::new(512);
    s.set_patchable(true);
    let mut t = Tree::open_at(s, None, 0, cfg(spares)).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..KEYS {
        t.insert(&key(i), b"v0").unwrap();
        model.insert(i, b"v0".to_vec());
    }
    t.commit().unwrap();
    assert!(t.height().unwrap() >= 5);
    assert_eq!(t.uses_spare_pointers(), spares);
    (t, model)
}

/// The tree as its owner would open it again: from the recorded root and generation, with
/// nothing cached.
fn reopen(t: Tree<MemStore>) -> Tree<MemStore> {
    let (root, gen) = (t.committed_root(), t.committed_generation());
    let spares = t.uses_spare_pointers();
    Tree::open_at(t.into_store(), root, gen, cfg(spares)).unwrap()
}

fn check(t: &mut Tree<MemStore>, model: &BTreeMap<u32, Vec<u8>>) {
    let got: Vec<(Vec<u8>, Vec<u8>)> = t.iter().map(|e| e.unwrap()).collect();
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(&i, v)| (key(i), v.clone())).collect();
    assert_eq!(got, want);
    let mut nodes = 0;
    t.committed_nodes(|_| nodes += 1).unwrap();
    assert!(nodes > 0);
    let st = t.store().stats();
    assert_eq!((st.bad_releases, st.reads_after_release), (0, 0));
}

/// The nodes from the root down to the leaf holding `k`, root first, read from the store
/// as written (spares not applied: only for paths no spare has changed).
fn path_to(t: &mut Tree<MemStore>, k: &[u8]) -> Vec<NodePtr> {
    let mut p = t.committed_root().unwrap();
    let mut out = Vec::new();
    let mut buf = alloc::vec![0u8; 512];
    loop {
        out.push(p);
        t.store_mut().read(p, &mut buf).unwrap();
        let info = inspect_node(&buf).unwrap();
        if info.leaf {
            return out;
        }
        // Children in key order; find the one for `k` by the keys below each.
        let mut next = info.children[0];
        for &c in &info.children[1..] {
            let mut it = t.store().clone();
            let first = first_key(&mut it, c);
            if first.as_slice() <= k {
                next = c;
            }
        }
        p = next;
    }
}

/// The smallest key under the node at `p`.
fn first_key(s: &mut MemStore, mut p: NodePtr) -> Vec<u8> {
    let mut buf = alloc::vec![0u8; 512];
    loop {
        s.read(p, &mut buf).unwrap();
        let info = inspect_node(&buf).unwrap();
        if info.leaf {
            // Leaf entry 0 after the header and the key prefix.
            let plen = u16::from_le_bytes([buf[14], buf[15]]) as usize;
            let at = 20 + plen;
            let slen = u16::from_le_bytes([buf[at], buf[at + 1]]) as usize;
            let mut k = buf[20..20 + plen].to_vec();
            k.extend_from_slice(&buf[at + 4..at + 4 + slen]);
            return k;
        }
        p = info.children[0];
    }
}

#[test]
fn one_leaf_update_writes_one_node_and_patches_its_parent() {
    let mut per_commit = [0u64; 2];
    for spares in [false, true] {
        let (mut t, mut model) = tall(spares);
        let height = t.height().unwrap() as u64;
        t.store_mut().reset_stats();
        let rounds = 40u32;
        for n in 0..rounds {
            let i = (n * 37) % KEYS;
            let v = format!("w{n}").into_bytes();
            t.insert(&key(i), &v).unwrap();
            model.insert(i, v);
            let root = t.committed_root();
            t.commit().unwrap();
            if !spares {
                // Path copying: the whole path, root included.
                assert_ne!(t.committed_root(), root);
            }
        }
        let st = t.store().stats();
        per_commit[usize::from(spares)] = st.writes;
        if spares {
            // Mostly the leaf alone; a parent whose spare is taken is copied (and its own
            // parent patched), so a little above one.
            assert!(st.writes < u64::from(rounds) * 2, "{st:?}");
            assert!(st.patches >= u64::from(rounds) / 2, "{st:?}");
        } else {
            assert_eq!(st.writes, u64::from(rounds) * height);
            assert_eq!(st.patches, 0);
        }
        check(&mut t, &model);
        let mut t = reopen(t);
        check(&mut t, &model);
        assert_eq!(t.garbage_spares(), 0);
    }
    assert!(per_commit[1] * 3 < per_commit[0], "{per_commit:?}");
}

#[test]
fn a_second_change_under_the_same_parent_copies_the_parent() {
    let (mut t, mut model) = tall(true);
    let k = key(100);
    let path = path_to(&mut t, &k);
    let root = t.committed_root();
    let mut update = |t: &mut Tree<MemStore>, v: &[u8]| {
        t.store_mut().reset_stats();
        t.insert(&k, v).unwrap();
        model.insert(100, v.to_vec());
        t.commit().unwrap();
        let st = t.store().stats();
        (st.writes, st.patches)
    };
    // The leaf is copied; its parent takes the new pointer in its spare.
    assert_eq!(update(&mut t, b"one"), (1, 1));
    assert_eq!(t.committed_root(), root);
    let parent = path[path.len() - 2];
    let mut buf = alloc::vec![0u8; 512];
    t.store_mut().read(parent, &mut buf).unwrap();
    assert!(matches!(
        inspect_node(&buf).unwrap().spare,
        SpareInfo::Set { generation, .. } if generation == t.committed_generation()
    ));
    // The parent's spare is taken: the parent is copied, the grandparent patched.
    assert_eq!(update(&mut t, b"two"), (2, 1));
    assert_eq!(t.committed_root(), root);
    assert!(t.store().is_released(parent));
    // The new parent has a free spare again.
    assert_eq!(update(&mut t, b"three"), (1, 1));
    check(&mut t, &model);
    let mut t = reopen(t);
    check(&mut t, &model);
}

#[test]
fn a_spare_newer_than_the_commit_is_ignored_and_never_revived() {
    for abort in [false, true] {
        let (mut t, mut model) = tall(true);
        let (root, gen) = (t.committed_root(), t.committed_generation());
        // Two leaves far apart: leaf, parent's spare, then the second leaf fails.
        t.insert(&key(0), b"lost").unwrap();
        t.insert(&key(KEYS - 1), b"lost").unwrap();
        t.store_mut().fail_writes_after(Some(2));
        assert_eq!(t.commit(), Err(Error::Flash(flash::FlashError::PowerLoss)));
        assert_eq!(t.store().stats().patches, 1);
        t.store_mut().fail_writes_after(None);
        let mut t = if abort {
            t.abort();
            assert_eq!(t.garbage_spares(), 1);
            t
        } else {
            // A power cut: what is on the store, opened as the owner recorded it.
            let s = t.store().clone();
            let mut t = Tree::open_at(s, root, gen, cfg(true)).unwrap();
            t.committed_nodes(|_| {}).unwrap();
            assert_eq!(t.garbage_spares(), 1);
            t
        };
        assert_eq!(t.committed_root(), root);
        check(&mut t, &model);
        assert!(t.is_dirty());
        // The next commit reuses the generation the garbage spare carries: the node holding
        // it is copied first, so the spare never counts.
        t.insert(&key(150), b"kept").unwrap();
        model.insert(150, b"kept".to_vec());
        t.commit().unwrap();
        assert_eq!(t.committed_generation(), gen + 1);
        assert_eq!(t.garbage_spares(), 0);
        check(&mut t, &model);
        let mut t = reopen(t);
        check(&mut t, &model);
        assert_eq!(t.get(&key(0)).unwrap().as_deref(), Some(&b"v0"[..]));
        assert_eq!(t.garbage_spares(), 0);
    }
}

#[test]
fn a_torn_spare_is_ignored_and_counts_as_used() {
    let (mut t, mut model) = tall(true);
    let k = key(7);
    let path = path_to(&mut t, &k);
    let parent = path[path.len() - 2];
    let off = spare_offset(512);
    {
        let node = t.store_mut().node_mut(parent).unwrap();
        // Half a pointer: some bits cleared, the check not matching.
        node[off] = 0x00;
        node[off + 5] = 0x12;
    }
    let mut buf = alloc::vec![0u8; 512];
    t.store_mut().read(parent, &mut buf).unwrap();
    assert_eq!(inspect_node(&buf).unwrap().spare, SpareInfo::Torn);
    let mut t = reopen(t);
    check(&mut t, &model);
    assert_eq!(t.garbage_spares(), 0);
    // The parent cannot take a pointer: it is copied, its parent patched.
    t.store_mut().reset_stats();
    t.insert(&k, b"new").unwrap();
    model.insert(7, b"new".to_vec());
    t.commit().unwrap();
    let st = t.store().stats();
    assert_eq!((st.writes, st.patches), (2, 1));
    let mut t = reopen(t);
    check(&mut t, &model);
}

#[test]
fn a_spare_pointer_to_no_child_or_on_a_leaf_is_damage() {
    let (mut t, _) = tall(true);
    let path = path_to(&mut t, &key(3));
    let off = spare_offset(512);
    let mut bad = super::node::encode_spare(9, 1, NodePtr(1));
    let parent = path[path.len() - 2];
    t.store_mut().node_mut(parent).unwrap()[off..off + SPARE_LEN].copy_from_slice(&bad);
    let leaf = path[path.len() - 1];
    bad = super::node::encode_spare(0, 1, NodePtr(1));
    t.store_mut().node_mut(leaf).unwrap()[off..off + SPARE_LEN].copy_from_slice(&bad);
    let mut buf = alloc::vec![0u8; 512];
    for p in [parent, leaf] {
        t.store_mut().read(p, &mut buf).unwrap();
        assert!(matches!(inspect_node(&buf), Err(Error::Corrupt(_))));
    }
    let mut t = reopen(t);
    assert!(matches!(t.get(&key(3)), Err(Error::Corrupt(_))));
}

#[test]
fn trees_with_spares_open_only_at_a_generation() {
    let (t, _) = tall(true);
    let root = t.committed_root();
    assert!(matches!(
        Tree::open_with(t.into_store(), root, cfg(true)),
        Err(Error::InvalidArgument(_))
    ));
    // Without a store that patches, the option changes nothing: format 1, path copying.
    let mut t = Tree::open_at(MemStore::new(512), None, 0, cfg(true)).unwrap();
    assert!(!t.uses_spare_pointers());
    t.insert(b"a", b"1").unwrap();
    let root = t.commit().unwrap();
    let mut t = Tree::open_with(t.into_store(), Some(root), cfg(true)).unwrap();
    assert_eq!(t.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
    // A root newer than the generation recorded with it is damage.
    assert!(matches!(
        Tree::open_at(t.into_store(), Some(root), 0, cfg(true)),
        Err(Error::Corrupt(_))
    ));
}

#[test]
fn mem_store_patches_only_clear_bits() {
    let mut s = MemStore::new(512);
    let p = s.write(&[0xF0; 512]).unwrap();
    assert!(matches!(s.patch(p, 0, &[0x00]), Err(Error::Unsupported(_))));
    s.set_patchable(true);
    assert!(s.can_patch());
    assert!(matches!(
        s.patch(p, 0, &[0x0F]),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        s.patch(p, 511, &[0, 0]),
        Err(Error::InvalidArgument(_))
    ));
    s.patch(p, 1, &[0x30]).unwrap();
    let mut buf = [0u8; 512];
    s.read(p, &mut buf).unwrap();
    assert_eq!(&buf[..3], &[0xF0, 0x30, 0xF0]);
    assert_eq!(s.stats().patches, 1);
}
