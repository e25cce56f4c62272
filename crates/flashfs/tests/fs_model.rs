//! Property test: random sequences of file-system operations, with syncs and remounts in
//! between, agree with a plain in-memory model of the tree — names, types, sizes, content,
//! link counts, attributes and the errno of every refusal. After every remount the whole
//! tree is compared and `fsck` must find the volume clean.
//!
//! A full device is allowed: an operation that needs space may fail with `ENOSPC`, and then
//! it must have changed nothing.

mod common;

use std::collections::BTreeMap;

use common::*;
use flashfs::fs::{
    FileType, Ino, RenameFlags, SetAttr, XattrFlags, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE,
    ROOT_INO,
};
use flashfs::{Error, Fs, FsConfig, Segments};
use proptest::prelude::*;

const ENOENT: i32 = 2;
const EBADF: i32 = 9;
const EEXIST: i32 = 17;
const ENOTDIR: i32 = 20;
const EISDIR: i32 = 21;
const EINVAL: i32 = 22;
const ENAMETOOLONG: i32 = 36;
const ENOTEMPTY: i32 = 39;
const EPERM: i32 = 1;
const ENODATA: i32 = 61;
const EOPNOTSUPP: i32 = 95;

/// Names entries are made with (5 is one byte too long); from 6 on, an entry `dir` has,
/// if it has any.
fn name(m: &Model, dir: Ino, i: u8) -> Vec<u8> {
    match i {
        0..=4 => vec![b'a' + i],
        5 => vec![b'x'; 256],
        _ => match m.entries(dir) {
            Some(e) if !e.is_empty() => e.keys().nth(i as usize % e.len()).unwrap().clone(),
            _ => vec![b'a' + i % 5],
        },
    }
}

/// Attribute names; the last is in no namespace the volume supports.
fn xattr_name(i: u8) -> Vec<u8> {
    match i % 4 {
        0 => b"user.a".to_vec(),
        1 => b"user.b".to_vec(),
        2 => b"trusted.c".to_vec(),
        _ => b"other.d".to_vec(),
    }
}

fn bytes(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| {
            (i as u32)
                .wrapping_mul(31)
                .wrapping_add(u32::from(seed) * 7) as u8
                | 1
        })
        .collect()
}

#[derive(Debug, Clone)]
enum Op {
    Create {
        dir: u16,
        name: u8,
    },
    Mkdir {
        dir: u16,
        name: u8,
    },
    Symlink {
        dir: u16,
        name: u8,
        len: u16,
    },
    Write {
        file: u16,
        off: u32,
        len: u16,
        seed: u8,
    },
    Read {
        file: u16,
        off: u32,
        len: u16,
    },
    Truncate {
        file: u16,
        size: u32,
    },
    Unlink {
        dir: u16,
        name: u8,
    },
    Rmdir {
        dir: u16,
        name: u8,
    },
    Rename {
        dir: u16,
        name: u8,
        dir2: u16,
        name2: u8,
        flags: u8,
    },
    Link {
        node: u16,
        dir: u16,
        name: u8,
    },
    Chmod {
        node: u16,
        mode: u16,
    },
    SetXattr {
        node: u16,
        name: u8,
        len: u16,
        flags: u8,
    },
    RemoveXattr {
        node: u16,
        name: u8,
    },
    Fallocate {
        file: u16,
        mode: u8,
        off: u32,
        len: u16,
    },
    Open {
        file: u16,
    },
    Release {
        handle: u16,
    },
    Readdir {
        dir: u16,
    },
    Sync,
    Remount,
    /// A sync, then the power goes instead of an unmount: the mount replays the journal's
    /// entries (small writes and their blocks left in RAM among them).
    SyncAndCut,
}

/// A name to make.
fn name_s() -> impl Strategy<Value = u8> {
    prop_oneof![12 => 0..5u8, 1 => Just(5u8)]
}

/// A name to look up: mostly one that exists.
fn old_name_s() -> impl Strategy<Value = u8> {
    prop_oneof![4 => 0..5u8, 1 => Just(5u8), 12 => 6..255u8]
}

fn op() -> impl Strategy<Value = Op> {
    let i = any::<u16>;
    prop_oneof![
        6 => (i(), name_s()).prop_map(|(dir, name)| Op::Create { dir, name }),
        4 => (i(), name_s()).prop_map(|(dir, name)| Op::Mkdir { dir, name }),
        1 => (i(), name_s(), 1..1500u16).prop_map(|(dir, name, len)| Op::Symlink { dir, name, len }),
        10 => (i(), 0..48_000u32, 1..16_000u16, any::<u8>())
            .prop_map(|(file, off, len, seed)| Op::Write { file, off, len, seed }),
        // Small writes: most end inside a block, which then waits in RAM (write-back).
        6 => (i(), 0..48_000u32, 1..300u16, any::<u8>())
            .prop_map(|(file, off, len, seed)| Op::Write { file, off, len, seed }),
        2 => (i(), 0..40_000u32, 1..6000u16).prop_map(|(file, off, len)| Op::Read { file, off, len }),
        // Small reads: they take part of a block, which the read cache keeps.
        2 => (i(), 0..40_000u32, 1..200u16).prop_map(|(file, off, len)| Op::Read { file, off, len }),
        3 => (i(), 0..50_000u32).prop_map(|(file, size)| Op::Truncate { file, size }),
        4 => (i(), old_name_s()).prop_map(|(dir, name)| Op::Unlink { dir, name }),
        2 => (i(), old_name_s()).prop_map(|(dir, name)| Op::Rmdir { dir, name }),
        5 => (i(), old_name_s(), i(), prop_oneof![name_s(), old_name_s()], 0..3u8)
            .prop_map(|(dir, name, dir2, name2, flags)| Op::Rename { dir, name, dir2, name2, flags }),
        2 => (i(), i(), name_s()).prop_map(|(node, dir, name)| Op::Link { node, dir, name }),
        1 => (i(), any::<u16>()).prop_map(|(node, mode)| Op::Chmod { node, mode }),
        2 => (i(), any::<u8>(), 0..1500u16, 0..3u8)
            .prop_map(|(node, name, len, flags)| Op::SetXattr { node, name, len, flags }),
        1 => (i(), any::<u8>()).prop_map(|(node, name)| Op::RemoveXattr { node, name }),
        2 => (i(), prop_oneof![Just(0u8), Just(1), Just(3)], 0..40_000u32, 1..8000u16)
            .prop_map(|(file, mode, off, len)| Op::Fallocate { file, mode, off, len }),
        2 => i().prop_map(|file| Op::Open { file }),
        2 => i().prop_map(|handle| Op::Release { handle }),
        1 => i().prop_map(|dir| Op::Readdir { dir }),
        1 => Just(Op::Sync),
        1 => Just(Op::Remount),
        1 => Just(Op::SyncAndCut),
    ]
}

#[derive(Debug, Clone, PartialEq)]
enum Body {
    File(Vec<u8>),
    Dir(BTreeMap<Vec<u8>, Ino>),
    Link(Vec<u8>),
}

#[derive(Debug, Clone)]
struct Node {
    body: Body,
    /// Entries naming it (a directory: 1, the root included).
    names: u32,
    /// A directory's parent.
    parent: Ino,
    perm: u32,
    xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl Node {
    fn is_dir(&self) -> bool {
        matches!(self.body, Body::Dir(_))
    }
}

/// The tree as it should be.
#[derive(Debug, Clone)]
struct Model {
    nodes: BTreeMap<Ino, Node>,
    /// Open handles (an inode once per open).
    open: Vec<Ino>,
    /// Inodes that existed once and no longer do, to test `ENOENT` on them.
    dead: Vec<Ino>,
}

impl Model {
    fn new() -> Model {
        let mut nodes = BTreeMap::new();
        nodes.insert(
            ROOT_INO,
            Node {
                body: Body::Dir(BTreeMap::new()),
                names: 1,
                parent: ROOT_INO,
                perm: 0o755,
                xattrs: BTreeMap::new(),
            },
        );
        Model {
            nodes,
            open: Vec::new(),
            dead: Vec::new(),
        }
    }

    /// An inode picked by `i` among those `keep` selects, now and then a dead one.
    fn pick(&self, i: u16, keep: impl Fn(&Node) -> bool) -> Option<Ino> {
        if i % 16 == 15 && !self.dead.is_empty() {
            return Some(self.dead[(i / 16) as usize % self.dead.len()]);
        }
        let alive: Vec<Ino> = self
            .nodes
            .iter()
            .filter(|(_, n)| keep(n))
            .map(|(&k, _)| k)
            .collect();
        if alive.is_empty() {
            None
        } else {
            Some(alive[i as usize % alive.len()])
        }
    }

    fn dir(&self, i: u16) -> Ino {
        self.pick(i, Node::is_dir).expect("the root is a directory")
    }

    fn file(&self, i: u16) -> Option<Ino> {
        self.pick(i, |n| matches!(n.body, Body::File(_)))
    }

    fn any(&self, i: u16) -> Ino {
        self.pick(i, |_| true).expect("the root exists")
    }

    fn entries(&self, dir: Ino) -> Option<&BTreeMap<Vec<u8>, Ino>> {
        match &self.nodes.get(&dir)?.body {
            Body::Dir(e) => Some(e),
            _ => None,
        }
    }

    fn entry(&self, dir: Ino, name: &[u8]) -> Option<Ino> {
        self.entries(dir)?.get(name).copied()
    }

    fn entries_mut(&mut self, dir: Ino) -> &mut BTreeMap<Vec<u8>, Ino> {
        match &mut self.nodes.get_mut(&dir).expect("directory exists").body {
            Body::Dir(e) => e,
            _ => panic!("not a directory"),
        }
    }

    fn alive(&self, ino: Ino) -> bool {
        self.nodes.contains_key(&ino)
    }

    fn file_data(&mut self, ino: Ino) -> &mut Vec<u8> {
        match &mut self.nodes.get_mut(&ino).expect("file exists").body {
            Body::File(d) => d,
            _ => panic!("not a file"),
        }
    }

    fn add(&mut self, dir: Ino, name: &[u8], ino: Ino, node: Node) {
        self.entries_mut(dir).insert(name.to_vec(), ino);
        self.nodes.insert(ino, node);
    }

    /// Drops one name of `ino` (its entry already gone); deletes it with its last name,
    /// unless it is open.
    fn drop_name(&mut self, ino: Ino) {
        let n = self.nodes.get_mut(&ino).expect("named inode exists");
        n.names -= 1;
        if n.names == 0 && (n.is_dir() || !self.open.contains(&ino)) {
            self.nodes.remove(&ino);
            self.dead.push(ino);
        }
    }

    /// Whether directory `anc` is `dir` or one of its ancestors.
    fn is_ancestor(&self, anc: Ino, mut dir: Ino) -> bool {
        loop {
            if dir == anc {
                return true;
            }
            if dir == ROOT_INO {
                return false;
            }
            dir = self.nodes[&dir].parent;
        }
    }

    fn nlink(&self, ino: Ino) -> u32 {
        let n = &self.nodes[&ino];
        match &n.body {
            Body::Dir(e) => {
                let subdirs = e.values().filter(|c| self.nodes[c].is_dir()).count() as u32;
                2 + subdirs
            }
            _ => n.names,
        }
    }

    /// What a remount leaves: no handles, no unnamed inodes.
    fn remount(&mut self) {
        self.open.clear();
        let gone: Vec<Ino> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.names == 0)
            .map(|(&k, _)| k)
            .collect();
        for k in gone {
            self.nodes.remove(&k);
            self.dead.push(k);
        }
    }

    /// The same picture [`dump`] takes of a volume.
    fn dump(&self) -> BTreeMap<Vec<u8>, Entry> {
        let mut out = BTreeMap::new();
        let mut stack = vec![(b"/".to_vec(), ROOT_INO)];
        while let Some((path, ino)) = stack.pop() {
            let n = &self.nodes[&ino];
            let (content, size) = match &n.body {
                Body::File(d) => (Content::File(d.clone()), d.len() as u64),
                Body::Link(t) => (Content::Symlink(t.clone()), t.len() as u64),
                Body::Dir(e) => {
                    for (name, &c) in e {
                        let mut p = path.clone();
                        if p != b"/" {
                            p.push(b'/');
                        }
                        p.extend_from_slice(name);
                        stack.push((p, c));
                    }
                    (Content::Dir, 0)
                }
            };
            out.insert(
                path,
                Entry {
                    content,
                    nlink: self.nlink(ino),
                    perm: n.perm,
                    size,
                    xattrs: n.xattrs.clone(),
                },
            );
        }
        out
    }
}

/// Checks an outcome against the errors the model allows (none: it must succeed, or fail
/// with `ENOSPC` when `nospc` says the operation needs space). Returns whether it succeeded.
fn outcome<T: std::fmt::Debug>(
    op: &Op,
    got: &Result<T, Error>,
    allowed: &[i32],
    nospc: bool,
) -> Result<bool, TestCaseError> {
    match got {
        Ok(_) if allowed.is_empty() => Ok(true),
        Ok(v) => Err(TestCaseError::fail(format!(
            "{op:?} succeeded ({v:?}) but the model expects one of errno {allowed:?}"
        ))),
        Err(Error::NoSpace) if allowed.is_empty() && nospc => Ok(false),
        Err(e) if allowed.contains(&e.errno()) => Ok(false),
        Err(e) => Err(TestCaseError::fail(format!(
            "{op:?} failed with {e:?} (errno {}), the model expects {}",
            e.errno(),
            if allowed.is_empty() {
                String::from("success")
            } else {
                format!("one of errno {allowed:?}")
            }
        ))),
    }
}

/// Errors a name brings by itself.
fn name_errors(name: &[u8]) -> Vec<i32> {
    if name.len() > 255 {
        vec![ENAMETOOLONG]
    } else {
        vec![]
    }
}

/// Compares the whole volume with the model.
fn compare<D: Segments>(fs: &mut Fs<D>, m: &Model, when: &str) -> Result<(), TestCaseError> {
    let (got, inodes) = dump(fs).map_err(|e| TestCaseError::fail(format!("{when}: {e}")))?;
    let want = m.dump();
    if got != want {
        let diff: Vec<String> = want
            .keys()
            .chain(got.keys())
            .filter(|k| want.get(*k) != got.get(*k))
            .map(|k| {
                format!(
                    "{}: model {:?} volume {:?}",
                    String::from_utf8_lossy(k),
                    want.get(k)
                        .map(|e| (e.size, e.nlink, e.perm, e.xattrs.len())),
                    got.get(k)
                        .map(|e| (e.size, e.nlink, e.perm, e.xattrs.len()))
                )
            })
            .take(5)
            .collect();
        return Err(TestCaseError::fail(format!(
            "{when}: the volume differs from the model:\n{}\nmodel:\n{}volume:\n{}",
            diff.join("\n"),
            show(&want),
            show(&got)
        )));
    }
    // Open inodes without a name are still there, with their data.
    let mut orphans = 0;
    for (&ino, n) in &m.nodes {
        if n.names > 0 {
            continue;
        }
        orphans += 1;
        let a = fs
            .getattr(ino)
            .map_err(|e| TestCaseError::fail(format!("{when}: open orphan {ino}: {e}")))?;
        prop_assert_eq!(a.inode.nlink, 0, "{}: orphan {} link count", when, ino);
        if let Body::File(d) = &n.body {
            let mut buf = vec![0; d.len() + 1];
            let k = fs.read(ino, 0, &mut buf).unwrap();
            prop_assert!(
                k == d.len() && buf[..k] == d[..],
                "{}: orphan {} content",
                when,
                ino
            );
        }
    }
    prop_assert_eq!(
        inodes + orphans,
        m.nodes.len(),
        "{}: inodes in the model",
        when
    );
    prop_assert_eq!(
        fs.statfs().files,
        m.nodes.len() as u64,
        "{}: inodes statfs counts",
        when
    );
    Ok(())
}

/// Reads a whole file back and compares it with the model.
fn check_file<D: Segments>(
    fs: &mut Fs<D>,
    m: &Model,
    ino: Ino,
    op: &Op,
) -> Result<(), TestCaseError> {
    let Some(Node {
        body: Body::File(d),
        ..
    }) = m.nodes.get(&ino)
    else {
        return Ok(());
    };
    let a = fs.getattr(ino).unwrap();
    prop_assert_eq!(a.inode.size, d.len() as u64, "size after {:?}", op);
    let mut buf = vec![0; d.len() + 7];
    let n = fs.read(ino, 0, &mut buf).unwrap();
    prop_assert!(
        n == d.len(),
        "read {} of {} bytes after {:?}",
        n,
        d.len(),
        op
    );
    if buf[..n] != d[..] {
        let at = buf.iter().zip(d).position(|(a, b)| a != b).unwrap();
        return Err(TestCaseError::fail(format!(
            "content differs from byte {at} after {op:?}"
        )));
    }
    Ok(())
}

fn remount<D: Segments>(fs: Fs<D>, config: FsConfig) -> Result<Fs<D>, TestCaseError> {
    let dev = fs
        .unmount()
        .map_err(|e| TestCaseError::fail(format!("unmount: {e}")))?;
    Fs::mount(dev, config).map_err(|e| TestCaseError::fail(format!("mount: {e}")))
}

/// Settings that change how the index and commits behave, none of them on flash: the
/// default; commits after almost every operation; and a narrow, deep index with a cache too
/// small to hold it. With each, blocks left in RAM by writes: the default bound, one (every
/// other block written evicts one), or none; and blocks kept after reads: the default
/// bound (half the time), one (every other block read evicts one), or none.
fn config_s() -> impl Strategy<Value = FsConfig> {
    (
        0..3u8,
        // One block is 512 bytes on the test parts.
        prop_oneof![
            Just(FsConfig::default().write_buffer_bytes),
            Just(512),
            Just(0)
        ],
        prop_oneof![
            2 => Just(FsConfig::default().read_cache_bytes),
            1 => Just(512),
            1 => Just(0)
        ],
    )
        .prop_map(|(k, buffers, cached)| {
            let mut c = fs_config();
            c.write_buffer_bytes = buffers;
            c.read_cache_bytes = cached;
            match k {
                0 => {}
                1 => c.dirty_limit = Some(1),
                _ => {
                    c.tree.max_entries = Some(4);
                    c.tree.cache_bytes = 4096;
                    c.dirty_limit = Some(4);
                }
            }
            c
        })
}

fn fsck<D: Segments>(fs: &mut Fs<D>, when: &str) -> Result<(), TestCaseError> {
    let report = fs
        .check(false)
        .map_err(|e| TestCaseError::fail(format!("{when}: check: {e}")))?;
    prop_assert!(
        report.is_clean(),
        "{}: check found {:?}",
        when,
        report.problems
    );
    Ok(())
}

/// Runs `ops` on a fresh volume on `dev` and the model side by side.
fn run<D: Segments>(dev: D, config: FsConfig, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut fs = Fs::format(dev, config).unwrap();
    let mut m = Model::new();
    for (step, op) in ops.iter().enumerate() {
        let when = format!("step {step} {op:?}");
        let mut full_compare = false;
        match *op {
            Op::Create { dir, name: n } | Op::Mkdir { dir, name: n } => {
                let dir = m.dir(dir);
                let name = name(&m, dir, n);
                let mut allowed = name_errors(&name);
                if !m.alive(dir) {
                    allowed.push(ENOENT);
                } else if m.entry(dir, &name).is_some() {
                    allowed.push(EEXIST);
                }
                let mkdir = matches!(op, Op::Mkdir { .. });
                let got = if mkdir {
                    fs.mkdir(dir, &name, 0o750, 0, 0)
                } else {
                    fs.create(dir, &name, 0o640, 0, 0)
                };
                if outcome(op, &got, &allowed, true)? {
                    let a = got.unwrap();
                    prop_assert!(
                        !m.nodes.contains_key(&a.ino),
                        "inode number {} reused",
                        a.ino
                    );
                    let (body, perm) = if mkdir {
                        (Body::Dir(BTreeMap::new()), 0o750)
                    } else {
                        (Body::File(Vec::new()), 0o640)
                    };
                    let kind = if mkdir {
                        FileType::Directory
                    } else {
                        FileType::Regular
                    };
                    prop_assert_eq!(a.kind, kind);
                    m.add(
                        dir,
                        &name,
                        a.ino,
                        Node {
                            body,
                            names: 1,
                            parent: dir,
                            perm,
                            xattrs: BTreeMap::new(),
                        },
                    );
                } else {
                    full_compare = true;
                }
            }
            Op::Symlink { dir, name: n, len } => {
                let dir = m.dir(dir);
                let name = name(&m, dir, n);
                let target = bytes(n, len as usize);
                let mut allowed = name_errors(&name);
                if !m.alive(dir) {
                    allowed.push(ENOENT);
                } else if m.entry(dir, &name).is_some() {
                    allowed.push(EEXIST);
                }
                let got = fs.symlink(dir, &name, &target, 0, 0);
                if outcome(op, &got, &allowed, true)? {
                    let a = got.unwrap();
                    prop_assert_eq!(a.inode.size, target.len() as u64);
                    m.add(
                        dir,
                        &name,
                        a.ino,
                        Node {
                            body: Body::Link(target),
                            names: 1,
                            parent: dir,
                            perm: 0o777,
                            xattrs: BTreeMap::new(),
                        },
                    );
                } else {
                    full_compare = true;
                }
            }
            Op::Write {
                file,
                off,
                len,
                seed,
            } => {
                let Some(ino) = m.file(file) else { continue };
                let data = bytes(seed, len as usize);
                let allowed = if m.alive(ino) { vec![] } else { vec![ENOENT] };
                let got = fs.write(ino, u64::from(off), &data);
                if outcome(op, &got, &allowed, true)? {
                    prop_assert_eq!(got.unwrap(), data.len());
                    let d = m.file_data(ino);
                    let end = off as usize + data.len();
                    if d.len() < end {
                        d.resize(end, 0);
                    }
                    d[off as usize..end].copy_from_slice(&data);
                }
                check_file(&mut fs, &m, ino, op)?;
            }
            Op::Read { file, off, len } => {
                let Some(ino) = m.file(file) else { continue };
                let allowed = if m.alive(ino) { vec![] } else { vec![ENOENT] };
                let mut buf = vec![0xEE; len as usize];
                let got = fs.read(ino, u64::from(off), &mut buf);
                if outcome(op, &got, &allowed, false)? {
                    let n = got.unwrap();
                    let d = match &m.nodes[&ino].body {
                        Body::File(d) => d,
                        _ => unreachable!(),
                    };
                    let want = d.get(off as usize..).unwrap_or(&[]);
                    let want = &want[..want.len().min(len as usize)];
                    prop_assert_eq!(&buf[..n], want, "{}", when);
                }
            }
            Op::Truncate { file, size } => {
                let Some(ino) = m.file(file) else { continue };
                let allowed = if m.alive(ino) { vec![] } else { vec![ENOENT] };
                let set = SetAttr {
                    size: Some(u64::from(size)),
                    ..Default::default()
                };
                let got = fs.setattr(ino, set);
                if outcome(op, &got, &allowed, true)? {
                    m.file_data(ino).resize(size as usize, 0);
                }
                check_file(&mut fs, &m, ino, op)?;
            }
            Op::Unlink { dir, name: n } => {
                let dir = m.dir(dir);
                let name = name(&m, dir, n);
                let mut allowed = name_errors(&name);
                let target = m.entry(dir, &name);
                if !m.alive(dir) {
                    allowed.push(ENOENT);
                } else {
                    match target {
                        None => allowed.push(ENOENT),
                        Some(t) if m.nodes[&t].is_dir() => allowed.push(EISDIR),
                        Some(_) => {}
                    }
                }
                let got = fs.unlink(dir, &name);
                if outcome(op, &got, &allowed, false)? {
                    m.entries_mut(dir).remove(&name);
                    m.drop_name(target.unwrap());
                }
            }
            Op::Rmdir { dir, name: n } => {
                let dir = m.dir(dir);
                let name = name(&m, dir, n);
                let mut allowed = name_errors(&name);
                let target = m.entry(dir, &name);
                if !m.alive(dir) {
                    allowed.push(ENOENT);
                } else {
                    match target {
                        None => allowed.push(ENOENT),
                        Some(t) if !m.nodes[&t].is_dir() => allowed.push(ENOTDIR),
                        Some(t) if !m.entries(t).unwrap().is_empty() => allowed.push(ENOTEMPTY),
                        Some(_) => {}
                    }
                }
                let got = fs.rmdir(dir, &name);
                if outcome(op, &got, &allowed, false)? {
                    m.entries_mut(dir).remove(&name);
                    m.drop_name(target.unwrap());
                }
            }
            Op::Rename {
                dir,
                name: n,
                dir2,
                name2: n2,
                flags,
            } => {
                let (dir, dir2) = (m.dir(dir), m.dir(dir2));
                let (name, name2) = (name(&m, dir, n), name(&m, dir2, n2));
                let flags = RenameFlags {
                    no_replace: flags == 1,
                    exchange: flags == 2,
                };
                let mut allowed = name_errors(&name);
                allowed.extend(name_errors(&name2));
                let src = m.entry(dir, &name);
                let dst = m.entry(dir2, &name2);
                let mut noop = false;
                if src.is_none() {
                    allowed.push(ENOENT);
                }
                if !m.alive(dir) || !m.alive(dir2) {
                    allowed.push(ENOENT);
                } else if let (Some(s), true) = (src, allowed.is_empty()) {
                    let s_dir = m.nodes[&s].is_dir();
                    if (dir == dir2 && name == name2) || (dst == Some(s) && !flags.exchange) {
                        noop = true;
                    } else {
                        if s_dir && m.is_ancestor(s, dir2) {
                            allowed.push(EINVAL);
                        }
                        if flags.exchange {
                            match dst {
                                None => allowed.push(ENOENT),
                                Some(t) if m.nodes[&t].is_dir() && m.is_ancestor(t, dir) => {
                                    allowed.push(EINVAL)
                                }
                                Some(_) => {}
                            }
                        } else if let Some(t) = dst {
                            let t_dir = m.nodes[&t].is_dir();
                            if flags.no_replace {
                                allowed.push(EEXIST);
                            }
                            match (s_dir, t_dir) {
                                (true, false) => allowed.push(ENOTDIR),
                                (false, true) => allowed.push(EISDIR),
                                (true, true) if !m.entries(t).unwrap().is_empty() => {
                                    allowed.push(ENOTEMPTY)
                                }
                                _ => {}
                            }
                        }
                    }
                }
                let got = fs.rename(dir, &name, dir2, &name2, flags);
                if outcome(op, &got, &allowed, !noop)? && !noop {
                    let s = src.unwrap();
                    if flags.exchange {
                        let t = dst.unwrap();
                        m.entries_mut(dir).insert(name.clone(), t);
                        m.entries_mut(dir2).insert(name2.clone(), s);
                        for (ino, p) in [(s, dir2), (t, dir)] {
                            let node = m.nodes.get_mut(&ino).unwrap();
                            if node.is_dir() {
                                node.parent = p;
                            }
                        }
                    } else {
                        m.entries_mut(dir).remove(&name);
                        if let Some(t) = m.entries_mut(dir2).insert(name2.clone(), s) {
                            m.drop_name(t);
                        }
                        let node = m.nodes.get_mut(&s).unwrap();
                        if node.is_dir() {
                            node.parent = dir2;
                        }
                    }
                }
                full_compare = true;
            }
            Op::Link { node, dir, name: n } => {
                let (ino, dir) = (m.any(node), m.dir(dir));
                let name = name(&m, dir, n);
                let mut allowed = name_errors(&name);
                match m.nodes.get(&ino) {
                    None => allowed.push(ENOENT),
                    Some(n) if n.is_dir() => allowed.push(EPERM),
                    Some(n) if n.names == 0 => allowed.push(ENOENT),
                    Some(_) => {}
                }
                if !m.alive(dir) {
                    allowed.push(ENOENT);
                } else if m.entry(dir, &name).is_some() {
                    allowed.push(EEXIST);
                }
                let got = fs.link(ino, dir, &name);
                if outcome(op, &got, &allowed, true)? {
                    m.entries_mut(dir).insert(name, ino);
                    m.nodes.get_mut(&ino).unwrap().names += 1;
                    prop_assert_eq!(got.unwrap().inode.nlink, m.nlink(ino));
                }
            }
            Op::Chmod { node, mode } => {
                let ino = m.any(node);
                let allowed = if m.alive(ino) { vec![] } else { vec![ENOENT] };
                let set = SetAttr {
                    mode: Some(u32::from(mode)),
                    ..Default::default()
                };
                let got = fs.setattr(ino, set);
                if outcome(op, &got, &allowed, false)? {
                    m.nodes.get_mut(&ino).unwrap().perm = u32::from(mode) & 0o7777;
                }
            }
            Op::SetXattr {
                node,
                name: n,
                len,
                flags,
            } => {
                let (ino, name) = (m.any(node), xattr_name(n));
                let value = bytes(n, len as usize);
                let flags = XattrFlags {
                    create: flags == 1,
                    replace: flags == 2,
                };
                let mut allowed = vec![];
                if !m.alive(ino) {
                    allowed.push(ENOENT);
                } else if !name.starts_with(b"user.") && !name.starts_with(b"trusted.") {
                    allowed.push(EOPNOTSUPP);
                } else {
                    let exists = m.nodes[&ino].xattrs.contains_key(&name);
                    if flags.create && exists {
                        allowed.push(EEXIST);
                    }
                    if flags.replace && !exists {
                        allowed.push(ENODATA);
                    }
                }
                let got = fs.setxattr(ino, &name, &value, flags);
                if outcome(op, &got, &allowed, true)? {
                    m.nodes.get_mut(&ino).unwrap().xattrs.insert(name, value);
                } else {
                    full_compare = true;
                }
            }
            Op::RemoveXattr { node, name: n } => {
                let (ino, name) = (m.any(node), xattr_name(n));
                let mut allowed = vec![];
                if !m.alive(ino) {
                    allowed.push(ENOENT);
                } else if !name.starts_with(b"user.") && !name.starts_with(b"trusted.") {
                    allowed.push(EOPNOTSUPP);
                } else if !m.nodes[&ino].xattrs.contains_key(&name) {
                    allowed.push(ENODATA);
                }
                let got = fs.removexattr(ino, &name);
                if outcome(op, &got, &allowed, false)? {
                    m.nodes.get_mut(&ino).unwrap().xattrs.remove(&name);
                }
            }
            Op::Fallocate {
                file,
                mode,
                off,
                len,
            } => {
                let Some(ino) = m.file(file) else { continue };
                let mode = match mode {
                    0 => 0,
                    1 => FALLOC_FL_KEEP_SIZE,
                    _ => FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE,
                };
                let allowed = if m.alive(ino) { vec![] } else { vec![ENOENT] };
                let got = fs.fallocate(ino, mode, u64::from(off), u64::from(len));
                if outcome(op, &got, &allowed, true)? {
                    let d = m.file_data(ino);
                    let (a, b) = (off as usize, off as usize + len as usize);
                    if mode == 0 && d.len() < b {
                        d.resize(b, 0);
                    }
                    if mode & FALLOC_FL_PUNCH_HOLE != 0 {
                        let b = b.min(d.len());
                        if a < b {
                            d[a..b].fill(0);
                        }
                    }
                }
                check_file(&mut fs, &m, ino, op)?;
            }
            Op::Open { file } => {
                let Some(ino) = m.file(file) else { continue };
                let allowed = if m.alive(ino) { vec![] } else { vec![ENOENT] };
                let got = fs.open(ino);
                if outcome(op, &got, &allowed, false)? {
                    m.open.push(ino);
                }
            }
            Op::Release { handle } => {
                if m.open.is_empty() {
                    // Nothing open: a release is a caller's mistake.
                    let got = fs.release(ROOT_INO);
                    outcome(op, &got, &[EBADF], false)?;
                    continue;
                }
                let ino = m.open.remove(handle as usize % m.open.len());
                let got = fs.release(ino);
                outcome(op, &got, &[], false)?;
                if !m.open.contains(&ino) && m.nodes[&ino].names == 0 {
                    m.nodes.remove(&ino);
                    m.dead.push(ino);
                }
            }
            Op::Readdir { dir } => {
                let dir = m.dir(dir);
                let allowed = if m.alive(dir) { vec![] } else { vec![ENOENT] };
                let got = fs.readdir(dir, 0, usize::MAX);
                if outcome(op, &got, &allowed, false)? {
                    let got: BTreeMap<Vec<u8>, (Ino, FileType)> = got
                        .unwrap()
                        .into_iter()
                        .map(|d| (d.name, (d.ino, d.kind)))
                        .collect();
                    let mut want: BTreeMap<Vec<u8>, (Ino, FileType)> = m
                        .entries(dir)
                        .unwrap()
                        .iter()
                        .map(|(n, &i)| {
                            let kind = match m.nodes[&i].body {
                                Body::File(_) => FileType::Regular,
                                Body::Dir(_) => FileType::Directory,
                                Body::Link(_) => FileType::Symlink,
                            };
                            (n.clone(), (i, kind))
                        })
                        .collect();
                    want.insert(b".".to_vec(), (dir, FileType::Directory));
                    want.insert(b"..".to_vec(), (m.nodes[&dir].parent, FileType::Directory));
                    prop_assert_eq!(got, want, "{}", when);
                }
            }
            Op::Sync => {
                fs.sync().unwrap();
                full_compare = true;
            }
            Op::Remount => {
                fs = remount(fs, config)?;
                m.remount();
                compare(&mut fs, &m, &when)?;
                fsck(&mut fs, &when)?;
            }
            Op::SyncAndCut => {
                fs.sync().unwrap();
                fs = Fs::mount(fs.into_device(), config)
                    .map_err(|e| TestCaseError::fail(format!("{when}: mount after a cut: {e}")))?;
                m.remount();
                compare(&mut fs, &m, &when)?;
                fsck(&mut fs, &when)?;
            }
        }
        if full_compare {
            compare(&mut fs, &m, &when)?;
        }
    }
    compare(&mut fs, &m, "at the end")?;
    fsck(&mut fs, "at the end")?;
    let mut fs = remount(fs, config)?;
    m.remount();
    compare(&mut fs, &m, "after the final remount")?;
    fsck(&mut fs, "after the final remount")?;
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

proptest! {
    // 64 cases per device in the suite; PROPTEST_CASES=N for a longer soak.
    #![proptest_config(ProptestConfig {
        cases: cases(),
        ..ProptestConfig::default()
    })]

    #[test]
    fn reprogrammable_nor_matches_model(config in config_s(), ops in proptest::collection::vec(op(), 1..300)) {
        run(nor(true), config, &ops)?;
    }

    #[test]
    fn nor_matches_model(config in config_s(), ops in proptest::collection::vec(op(), 1..300)) {
        run(nor(false), config, &ops)?;
    }

    #[test]
    fn nand_matches_model(config in config_s(), ops in proptest::collection::vec(op(), 1..300)) {
        run(nand(), config, &ops)?;
    }
}

/// Punching a hole whose both edges are partial blocks takes two new blocks; on a volume
/// with one left it must fail whole (regression: it zeroed the first edge, then committed
/// that half-done state to free the first edge's old block for the second, so a power cut
/// could keep half a punch).
#[test]
fn punch_hole_on_a_full_volume_changes_all_or_nothing() {
    let mut fs = Fs::format(nor(false), fs_config()).unwrap();
    let p = fs.create(ROOT_INO, b"p", 0o644, 0, 0).unwrap().ino;
    let content = bytes(1, 3 * 512);
    fs.write(p, 0, &content).unwrap();
    let fill = fs.create(ROOT_INO, b"fill", 0o644, 0, 0).unwrap().ino;
    let mut size = 0u64;
    while fs.write(fill, size, &[1; 512]).is_ok() {
        size += 512;
    }
    fs.sync().unwrap();
    // Free blocks back one at a time until exactly one is left.
    let mut tries = 0;
    while fs.statfs().blocks_free != 1 {
        tries += 1;
        assert!(tries < 100, "could not leave exactly one block free");
        if fs.statfs().blocks_free == 0 {
            size -= 512;
            let set = SetAttr {
                size: Some(size),
                ..Default::default()
            };
            fs.setattr(fill, set).unwrap();
        } else {
            fs.write(fill, size, &[1; 512]).unwrap();
            size += 512;
        }
        fs.sync().unwrap();
    }
    let got = fs.fallocate(p, FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE, 100, 1024);
    let mut want = content.clone();
    match got {
        Err(Error::NoSpace) => {}
        Ok(()) => want[100..1124].fill(0),
        Err(e) => panic!("punch: {e}"),
    }
    assert_eq!(
        got,
        Err(Error::NoSpace),
        "two new blocks from one free block"
    );
    let mut buf = vec![0; want.len()];
    fs.read(p, 0, &mut buf).unwrap();
    assert!(buf == want, "the failed punch changed the file");
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, fs_config()).unwrap();
    fs.read(p, 0, &mut buf).unwrap();
    assert!(buf == want, "the failed punch changed the file on flash");
    assert!(fs.check(false).unwrap().is_clean());
}

/// The block device forgets freed sectors without a record, so its mount revives their old
/// data until the file system forgets them again. Sectors held by unwritten extents were
/// not forgotten again (regression): every mount brought their dead data back to life,
/// until the log had no free segment left and a mount failed for want of space.
#[test]
fn a_mount_does_not_revive_data_under_unwritten_extents() {
    let mut fs = Fs::format(nand(), fs_config()).unwrap();
    let a = fs.create(ROOT_INO, b"a", 0o644, 0, 0).unwrap().ino;
    fs.write(a, 0, &bytes(1, 64 * 512)).unwrap();
    let old: Vec<u64> = fs
        .extents(a)
        .unwrap()
        .iter()
        .flat_map(|(_, e)| e.start..e.start + e.len)
        .collect();
    // The rest of the volume taken, so that the next allocation wraps around to a's
    // sectors once it has the few left at the end.
    let fill = fs.create(ROOT_INO, b"fill", 0o644, 0, 0).unwrap().ino;
    let rest = fs.statfs().blocks_free * 512;
    fs.write(fill, 0, &vec![2; rest as usize]).unwrap();
    fs.unlink(ROOT_INO, b"a").unwrap();
    fs.checkpoint().unwrap();
    let b = fs.create(ROOT_INO, b"b", 0o644, 0, 0).unwrap().ino;
    let len = fs.statfs().blocks_free * 512;
    fs.fallocate(b, 0, 0, len).unwrap();
    fs.sync().unwrap();
    let reused = fs
        .extents(b)
        .unwrap()
        .iter()
        .flat_map(|(_, e)| e.start..e.start + e.len)
        .filter(|k| old.contains(k))
        .count();
    assert!(reused >= 8, "the allocation reused {reused} of a's sectors");
    let mapped = fs.ftl().mapped_sectors();
    for round in 0..3 {
        let dev = fs.unmount().unwrap();
        fs = Fs::mount(dev, fs_config()).unwrap();
        assert_eq!(
            fs.ftl().mapped_sectors(),
            mapped,
            "sectors holding data after mount {round}"
        );
    }
    let mut buf = vec![1; len as usize];
    fs.read(b, 0, &mut buf).unwrap();
    assert!(
        buf.iter().all(|&x| x == 0),
        "unwritten blocks read as zeros"
    );
    assert!(fs.check(false).unwrap().is_clean());
}
