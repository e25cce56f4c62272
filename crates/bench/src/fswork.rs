//! File-system workloads, a model of what they leave, and the check after a power cut.
//!
//! A workload is a list of [`FsOp`]s on paths. [`Tree`] is the model: what every path holds.
//! After a power cut the file system must show the state at its last acknowledged `sync` or
//! `fsync`, or the state after some later operations, in order, each whole: [`Durable`]
//! keeps that state and the operations since, and [`Durable::check`] compares a remounted
//! file system against every state it may show.

use std::collections::BTreeMap;

use flashfs::fs::{FileType, RecordFormat, ROOT_INO};
use flashfs::{Error, Fs, Segments};

/// What a path holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// A directory.
    Dir,
    /// A regular file and its bytes.
    File(Vec<u8>),
    /// A record file: its capacity (0: no bound), its records' length (0: any), the number
    /// of its oldest record, and its records.
    Records(u32, u32, u64, Vec<Vec<u8>>),
}

/// The whole namespace: path (without the leading `/`) to what it holds.
pub type Tree = BTreeMap<String, Node>;

/// One file-system operation of a workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FsOp {
    /// Write `len` bytes of content `seed` at `off`, creating the file if needed.
    Write {
        /// The file.
        path: String,
        /// Offset.
        off: u64,
        /// Bytes.
        len: u32,
        /// Content seed (see [`content`]).
        seed: u32,
    },
    /// Append `len` bytes of content `seed`.
    Append {
        /// The file.
        path: String,
        /// Bytes.
        len: u32,
        /// Content seed.
        seed: u32,
    },
    /// Set the size.
    Truncate {
        /// The file.
        path: String,
        /// New size.
        size: u64,
    },
    /// Create a directory.
    Mkdir {
        /// The directory.
        path: String,
    },
    /// Remove a file.
    Unlink {
        /// The file.
        path: String,
    },
    /// Remove an empty directory.
    Rmdir {
        /// The directory.
        path: String,
    },
    /// Rename, replacing the target.
    Rename {
        /// From.
        from: String,
        /// To.
        to: String,
    },
    /// Create a record file, keeping `capacity` records (0: no bound) of `record_size` bytes
    /// each (0: any length).
    Records {
        /// The file.
        path: String,
        /// Records kept; adding one more removes the oldest.
        capacity: u32,
        /// Every record's length, or 0 for records of any length.
        record_size: u32,
    },
    /// Add a record of `len` bytes of content `seed`.
    RecordAdd {
        /// The record file.
        path: String,
        /// Bytes.
        len: u32,
        /// Content seed.
        seed: u32,
    },
    /// Replace the record `back` places before the newest.
    RecordUpdate {
        /// The record file.
        path: String,
        /// Which record, from the newest (0).
        back: u64,
        /// Bytes.
        len: u32,
        /// Content seed.
        seed: u32,
    },
    /// Remove the oldest record.
    RecordRemoveFirst {
        /// The record file.
        path: String,
    },
    /// Remove the newest record.
    RecordRemoveLast {
        /// The record file.
        path: String,
    },
    /// Make everything so far durable.
    Sync,
    /// Leave the device idle for `ms` milliseconds of device time ([`Fs::idle`]): the log
    /// cleans ahead of need and, on MLC NAND, migrates. Nothing the volume shows changes.
    Idle {
        /// Milliseconds of device time.
        ms: u32,
    },
}

/// Deterministic bytes: content `seed` at file offset `off`, so overlapping writes of one
/// seed agree and different seeds differ.
pub fn content(seed: u32, off: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| {
            let x = (off + i).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                ^ u64::from(seed).wrapping_mul(0xD6E8_FEB8_6659_FD93);
            (x >> 29) as u8 ^ (x >> 51) as u8
        })
        .collect()
}

fn parent(path: &str) -> Option<&str> {
    path.rfind('/').map(|i| &path[..i])
}

/// Whether a record of `len` bytes fits a record file whose records are `size` bytes long
/// (0: any length).
fn fits(size: u32, len: u32) -> bool {
    size == 0 || size == len
}

/// Whether the file system must accept `op` on a volume holding `tree` (the model would
/// apply it: [`apply_model`] returns `true`), without changing anything.
pub fn accepts(tree: &Tree, op: &FsOp) -> bool {
    let dir_ok = |p: &str| parent(p).is_none_or(|d| tree.get(d) == Some(&Node::Dir));
    let is_file = |p: &str| matches!(tree.get(p), Some(Node::File(_)));
    let is_records = |p: &str| matches!(tree.get(p), Some(Node::Records(..)));
    match op {
        FsOp::Write { path, .. } => {
            dir_ok(path) && !matches!(tree.get(path), Some(Node::Dir | Node::Records(..)))
        }
        FsOp::Append { path, .. } | FsOp::Truncate { path, .. } => is_file(path),
        FsOp::Unlink { path } => is_file(path) || is_records(path),
        FsOp::Records { path, .. } => dir_ok(path) && !tree.contains_key(path),
        FsOp::RecordAdd { path, len, .. } => {
            matches!(tree.get(path), Some(Node::Records(_, size, ..)) if fits(*size, *len))
        }
        FsOp::RecordUpdate {
            path, back, len, ..
        } => matches!(
            tree.get(path),
            Some(Node::Records(_, size, _, r)) if *back < r.len() as u64 && fits(*size, *len)
        ),
        FsOp::RecordRemoveFirst { path } | FsOp::RecordRemoveLast { path } => {
            matches!(tree.get(path), Some(Node::Records(_, _, _, r)) if !r.is_empty())
        }
        FsOp::Mkdir { path } => dir_ok(path) && !tree.contains_key(path),
        FsOp::Rmdir { path } => {
            let prefix = format!("{path}/");
            tree.get(path) == Some(&Node::Dir)
                && !tree
                    .range(prefix.clone()..)
                    .next()
                    .is_some_and(|(k, _)| k.starts_with(&prefix))
        }
        FsOp::Rename { from, to } => {
            (is_file(from) || is_records(from)) && dir_ok(to) && tree.get(to) != Some(&Node::Dir)
        }
        FsOp::Sync | FsOp::Idle { .. } => true,
    }
}

/// Applies `op` to the model; `false` if the file system must refuse it.
pub fn apply_model(tree: &mut Tree, op: &FsOp) -> bool {
    let dir_ok = |tree: &Tree, p: &str| parent(p).is_none_or(|d| tree.get(d) == Some(&Node::Dir));
    match op {
        FsOp::Write {
            path,
            off,
            len,
            seed,
        } => {
            if !dir_ok(tree, path) || matches!(tree.get(path), Some(Node::Dir | Node::Records(..)))
            {
                return false;
            }
            let Node::File(data) = tree.entry(path.clone()).or_insert(Node::File(Vec::new()))
            else {
                return false;
            };
            let end = (*off + u64::from(*len)) as usize;
            if data.len() < end {
                data.resize(end, 0);
            }
            data[*off as usize..end].copy_from_slice(&content(*seed, *off, *len as usize));
            true
        }
        FsOp::Append { path, len, seed } => match tree.get_mut(path) {
            Some(Node::File(data)) => {
                let off = data.len() as u64;
                data.extend(content(*seed, off, *len as usize));
                true
            }
            _ => false,
        },
        FsOp::Truncate { path, size } => match tree.get_mut(path) {
            Some(Node::File(data)) => {
                data.resize(*size as usize, 0);
                true
            }
            _ => false,
        },
        FsOp::Mkdir { path } => {
            if !dir_ok(tree, path) || tree.contains_key(path) {
                return false;
            }
            tree.insert(path.clone(), Node::Dir);
            true
        }
        FsOp::Unlink { path } => match tree.get(path) {
            Some(Node::File(_) | Node::Records(..)) => {
                tree.remove(path);
                true
            }
            _ => false,
        },
        FsOp::Records {
            path,
            capacity,
            record_size,
        } => {
            if !dir_ok(tree, path) || tree.contains_key(path) {
                return false;
            }
            let node = Node::Records(*capacity, *record_size, 0, Vec::new());
            tree.insert(path.clone(), node);
            true
        }
        FsOp::RecordAdd { path, len, seed } => match tree.get_mut(path) {
            Some(Node::Records(capacity, size, first, recs)) if fits(*size, *len) => {
                if *capacity > 0 && recs.len() >= *capacity as usize {
                    recs.remove(0);
                    *first += 1;
                }
                recs.push(content(*seed, 0, *len as usize));
                true
            }
            _ => false,
        },
        FsOp::RecordUpdate {
            path,
            back,
            len,
            seed,
        } => match tree.get_mut(path) {
            Some(Node::Records(_, size, _, recs))
                if *back < recs.len() as u64 && fits(*size, *len) =>
            {
                let i = recs.len() - 1 - *back as usize;
                recs[i] = content(*seed, 0, *len as usize);
                true
            }
            _ => false,
        },
        FsOp::RecordRemoveFirst { path } => match tree.get_mut(path) {
            Some(Node::Records(_, _, first, recs)) if !recs.is_empty() => {
                recs.remove(0);
                *first += 1;
                true
            }
            _ => false,
        },
        FsOp::RecordRemoveLast { path } => match tree.get_mut(path) {
            Some(Node::Records(_, _, _, recs)) if !recs.is_empty() => {
                recs.pop();
                true
            }
            _ => false,
        },
        FsOp::Rmdir { path } => {
            let prefix = format!("{path}/");
            if tree.get(path) != Some(&Node::Dir) || tree.keys().any(|k| k.starts_with(&prefix)) {
                return false;
            }
            tree.remove(path);
            true
        }
        FsOp::Rename { from, to } => {
            // Files only in the workloads: directories move in the model tests.
            let (Some(Node::File(_) | Node::Records(..)), true) =
                (tree.get(from), dir_ok(tree, to))
            else {
                return false;
            };
            if tree.get(to) == Some(&Node::Dir) {
                return false;
            }
            let node = tree.remove(from).expect("checked above");
            tree.insert(to.clone(), node);
            true
        }
        FsOp::Sync | FsOp::Idle { .. } => true,
    }
}

/// The operation that removes `path`, which holds `node` (a directory once it is empty).
pub fn removal(path: &str, node: &Node) -> FsOp {
    let path = path.to_string();
    match node {
        Node::Dir => FsOp::Rmdir { path },
        Node::File(_) | Node::Records(..) => FsOp::Unlink { path },
    }
}

fn slash(p: &str) -> Vec<u8> {
    format!("/{p}").into_bytes()
}

/// Applies `op` to the file system.
pub fn apply_fs<D: Segments>(fs: &mut Fs<D>, op: &FsOp) -> flashfs::Result<()> {
    match op {
        FsOp::Write {
            path,
            off,
            len,
            seed,
        } => {
            let p = slash(path);
            let (dir, name) = fs.resolve_parent(&p)?;
            let (ino, created) = match fs.lookup(dir, name) {
                Ok(a) => (a.ino, false),
                Err(Error::NotFound) => (fs.create(dir, name, 0o644, 0, 0)?.ino, true),
                Err(e) => return Err(e),
            };
            // A new file and its first write are two operations; the model counts one, so
            // a write refused (a full volume) takes the file it created with it.
            let written = fs.write(ino, *off, &content(*seed, *off, *len as usize));
            if written.is_err() && created {
                // A power cut in between leaves the file: the model allows for that.
                let _ = fs.unlink(dir, name);
            }
            written.map(drop)
        }
        FsOp::Append { path, len, seed } => {
            let ino = fs.resolve(&slash(path))?;
            let off = fs.getattr(ino)?.inode.size;
            fs.write(ino, off, &content(*seed, off, *len as usize))
                .map(drop)
        }
        FsOp::Truncate { path, size } => {
            let ino = fs.resolve(&slash(path))?;
            fs.setattr(
                ino,
                flashfs::fs::SetAttr {
                    size: Some(*size),
                    ..Default::default()
                },
            )
            .map(drop)
        }
        FsOp::Mkdir { path } => fs.mkdir_path(&slash(path)).map(drop),
        FsOp::Unlink { path } => {
            let p = slash(path);
            let (dir, name) = fs.resolve_parent(&p)?;
            fs.unlink(dir, name)
        }
        FsOp::Rmdir { path } => {
            let p = slash(path);
            let (dir, name) = fs.resolve_parent(&p)?;
            fs.rmdir(dir, name)
        }
        FsOp::Rename { from, to } => fs.rename_path(&slash(from), &slash(to)),
        FsOp::Records {
            path,
            capacity,
            record_size,
        } => {
            let p = slash(path);
            let (dir, name) = fs.resolve_parent(&p)?;
            let format = RecordFormat {
                record_size: *record_size,
                capacity: *capacity,
            };
            fs.create_records(dir, name, format, 0o644, 0, 0).map(drop)
        }
        FsOp::RecordAdd { path, len, seed } => {
            let ino = fs.resolve(&slash(path))?;
            fs.record_add(ino, &content(*seed, 0, *len as usize))
                .map(drop)
        }
        FsOp::RecordUpdate {
            path,
            back,
            len,
            seed,
        } => {
            let ino = fs.resolve(&slash(path))?;
            let info = fs.record_info(ino)?;
            let n = info
                .next
                .checked_sub(1 + back)
                .filter(|&n| n >= info.first)
                .ok_or(Error::NotFound)?;
            fs.record_update(ino, n, &content(*seed, 0, *len as usize))
        }
        FsOp::RecordRemoveFirst { path } => {
            let ino = fs.resolve(&slash(path))?;
            fs.record_remove_first(ino)
        }
        FsOp::RecordRemoveLast { path } => {
            let ino = fs.resolve(&slash(path))?;
            fs.record_remove_last(ino)
        }
        FsOp::Sync => fs.sync(),
        FsOp::Idle { ms } => fs
            .idle(core::time::Duration::from_millis(u64::from(*ms)))
            .map(drop),
    }
}

/// Reads the whole namespace of a file system into a [`Tree`]; also returns the bytes read.
pub fn snapshot<D: Segments>(fs: &mut Fs<D>) -> flashfs::Result<(Tree, u64)> {
    let mut tree = Tree::new();
    let mut bytes = 0;
    let mut stack = vec![(ROOT_INO, String::new())];
    while let Some((dir, path)) = stack.pop() {
        let mut cookie = 2;
        loop {
            let batch = fs.readdir(dir, cookie, 128)?;
            let Some(last) = batch.last() else { break };
            cookie = last.cookie;
            for e in batch {
                let name = String::from_utf8_lossy(&e.name).into_owned();
                let p = if path.is_empty() {
                    name
                } else {
                    format!("{path}/{name}")
                };
                match e.kind {
                    FileType::Directory => {
                        tree.insert(p.clone(), Node::Dir);
                        stack.push((e.ino, p));
                    }
                    _ if fs.record_info(e.ino).is_ok() => {
                        let info = fs.record_info(e.ino)?;
                        let recs: Vec<Vec<u8>> =
                            fs.record_list(e.ino)?.into_iter().map(|r| r.1).collect();
                        bytes += recs.iter().map(|r| r.len() as u64).sum::<u64>();
                        let f = info.format;
                        tree.insert(
                            p,
                            Node::Records(f.capacity, f.record_size, info.first, recs),
                        );
                    }
                    _ => {
                        let size = fs.getattr(e.ino)?.inode.size as usize;
                        let mut data = vec![0; size];
                        let n = fs.read(e.ino, 0, &mut data)?;
                        data.truncate(n);
                        bytes += n as u64;
                        tree.insert(p, Node::File(data));
                    }
                }
            }
        }
    }
    Ok((tree, bytes))
}

/// What must survive a power cut: the state at the last acknowledged sync, and the
/// operations acknowledged since (any prefix of which may survive too).
#[derive(Debug, Clone, Default)]
pub struct Durable {
    /// The state at the last sync.
    pub base: Tree,
    /// Operations that succeeded since.
    pub since: Vec<FsOp>,
}

impl Durable {
    /// A file system whose whole state is durable.
    pub fn new(base: Tree) -> Self {
        Durable {
            base,
            since: Vec::new(),
        }
    }

    /// Records an operation the file system acknowledged (a sync makes the state durable).
    pub fn acknowledged(&mut self, op: &FsOp) {
        if *op == FsOp::Sync {
            let mut t = core::mem::take(&mut self.base);
            for o in self.since.drain(..) {
                apply_model(&mut t, &o);
            }
            apply_model(&mut t, op);
            self.base = t;
        } else {
            self.since.push(op.clone());
        }
    }

    /// The state now, as the model sees it.
    pub fn current(&self) -> Tree {
        let mut t = self.base.clone();
        for o in &self.since {
            apply_model(&mut t, o);
        }
        t
    }

    /// Which state `found` is (how many operations since the sync it holds), or a
    /// description of how it differs from the durable one. A write that creates its file is
    /// two operations of the file system ([`apply_fs`]: create, then write), so the state
    /// between them — the new file empty — is one the volume may show too.
    pub fn check(&self, found: &Tree) -> Result<usize, String> {
        let mut t = self.base.clone();
        if *found == t {
            return Ok(0);
        }
        for (i, o) in self.since.iter().enumerate() {
            if let FsOp::Write { path, .. } = o {
                if !t.contains_key(path) && accepts(&t, o) {
                    let mut created = t.clone();
                    created.insert(path.clone(), Node::File(Vec::new()));
                    if *found == created {
                        return Ok(i);
                    }
                }
            }
            apply_model(&mut t, o);
            if *found == t {
                return Ok(i + 1);
            }
        }
        Err(describe_difference(&self.base, found))
    }
}

/// The first difference between two trees, in words.
pub fn describe_difference(want: &Tree, found: &Tree) -> String {
    for (p, n) in want {
        match found.get(p) {
            None => return format!("/{p} is missing"),
            Some(f) if f != n => {
                return match (n, f) {
                    (Node::File(a), Node::File(b)) if a.len() != b.len() => {
                        format!("/{p} has {} bytes instead of {}", b.len(), a.len())
                    }
                    (Node::File(a), Node::File(b)) => {
                        let at = a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(0);
                        format!("/{p} differs at byte {at}")
                    }
                    (Node::Records(_, _, i, a), Node::Records(_, _, j, b)) => format!(
                        "/{p} holds records {j}..{} instead of {i}..{}, or other bytes",
                        *j + b.len() as u64,
                        *i + a.len() as u64
                    ),
                    _ => format!("/{p} has the wrong type"),
                };
            }
            _ => {}
        }
    }
    match found.keys().find(|p| !want.contains_key(*p)) {
        Some(p) => format!("/{p} should not exist"),
        None => "no state matches, though each path matches the durable one".into(),
    }
}

/// Workloads on the file system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsWorkload {
    /// A mix of every operation on a few directories and files.
    Mixed,
    /// Many small files: write to `tmp/`, fsync, rename into `new/`; old ones deleted.
    MailSpool,
    /// One log file appended to, fsynced every few appends, rotated now and then.
    AppendLog,
    /// Random in-place overwrites of one large file, fsynced often.
    Database,
    /// Record files as a phone or an event recorder keeps them (TFFS §5.1): records added
    /// to cyclic logs, updated and removed, most operations committed on their own.
    Records,
    /// Small writes (at most 256 bytes) between syncs, about seven operations apart: appends to three
    /// files and overwrites inside them, so most writes end inside a block that waits in RAM
    /// ([`flashfs::FsConfig::write_buffer_bytes`]) until the next sync, an eviction or the block's
    /// end; files truncated to nothing when they reach their bound. And small files written
    /// whole in one or two writes and synced (which the journal may name as their block,
    /// SPEC.md §8.5b), some of them removed again.
    SmallWrites,
}

impl FsWorkload {
    /// Every workload.
    pub const ALL: [FsWorkload; 6] = [
        FsWorkload::Mixed,
        FsWorkload::MailSpool,
        FsWorkload::AppendLog,
        FsWorkload::Database,
        FsWorkload::Records,
        FsWorkload::SmallWrites,
    ];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            FsWorkload::Mixed => "fs-mixed",
            FsWorkload::MailSpool => "mail-spool",
            FsWorkload::AppendLog => "fs-append-log",
            FsWorkload::Database => "fs-database",
            FsWorkload::Records => "fs-records",
            FsWorkload::SmallWrites => "fs-small-writes",
        }
    }

    /// The workload of a name.
    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|w| w.name() == s)
    }

    /// `n` operations from `seed`, writing at most `max_write` bytes at once; files stay
    /// within `max_file` bytes.
    pub fn ops(self, seed: u64, n: usize, max_write: u32, max_file: u64) -> Vec<FsOp> {
        let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = move |m: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % m.max(1)
        };
        let mut ops = Vec::with_capacity(n);
        let mut version = (seed as u32).wrapping_mul(1_000_003);
        let mut v = || {
            version = version.wrapping_add(1);
            version
        };
        match self {
            FsWorkload::Mixed => {
                ops.push(FsOp::Mkdir { path: "a".into() });
                ops.push(FsOp::Mkdir { path: "b".into() });
                while ops.len() < n {
                    let dir = ["a", "b", "a/c"][next(3) as usize];
                    let file = format!("{dir}/f{}", next(6));
                    let op = match next(16) {
                        0..=5 => FsOp::Write {
                            path: file,
                            off: next(max_file / 2),
                            len: 1 + next(u64::from(max_write)) as u32,
                            seed: v(),
                        },
                        6 => FsOp::Truncate {
                            path: file,
                            size: next(max_file),
                        },
                        7 => FsOp::Unlink { path: file },
                        8 | 9 => FsOp::Rename {
                            from: file,
                            to: format!("{}/f{}", ["a", "b", "a/c"][next(3) as usize], next(6)),
                        },
                        10 => FsOp::Mkdir { path: "a/c".into() },
                        11 => FsOp::Rmdir { path: "a/c".into() },
                        12 => FsOp::Append {
                            path: file,
                            len: 1 + next(u64::from(max_write) / 4) as u32,
                            seed: v(),
                        },
                        _ => FsOp::Sync,
                    };
                    ops.push(op);
                }
            }
            FsWorkload::MailSpool => {
                ops.push(FsOp::Mkdir { path: "tmp".into() });
                ops.push(FsOp::Mkdir { path: "new".into() });
                let mut m = 0u32;
                while ops.len() < n {
                    m += 1;
                    let tmp = format!("tmp/{m}");
                    ops.push(FsOp::Write {
                        path: tmp.clone(),
                        off: 0,
                        len: 200 + next(u64::from(max_write)) as u32,
                        seed: v(),
                    });
                    ops.push(FsOp::Sync);
                    ops.push(FsOp::Rename {
                        from: tmp,
                        to: format!("new/{m}"),
                    });
                    if m > 6 && next(2) == 0 {
                        ops.push(FsOp::Unlink {
                            path: format!("new/{}", m - 6),
                        });
                    }
                }
            }
            FsWorkload::AppendLog => {
                let mut k = 0;
                ops.push(FsOp::Write {
                    path: "log".into(),
                    off: 0,
                    len: 1,
                    seed: v(),
                });
                while ops.len() < n {
                    ops.push(FsOp::Append {
                        path: "log".into(),
                        len: 20 + next(u64::from(max_write) / 2) as u32,
                        seed: v(),
                    });
                    k += 1;
                    if k % 4 == 0 {
                        ops.push(FsOp::Sync);
                    }
                    if k % 40 == 0 {
                        ops.push(FsOp::Rename {
                            from: "log".into(),
                            to: "log.1".into(),
                        });
                        ops.push(FsOp::Write {
                            path: "log".into(),
                            off: 0,
                            len: 1,
                            seed: v(),
                        });
                    }
                }
            }
            FsWorkload::Database => {
                let size = max_file.max(4096);
                ops.push(FsOp::Write {
                    path: "db".into(),
                    off: 0,
                    len: size.min(u64::from(max_write)) as u32,
                    seed: v(),
                });
                ops.push(FsOp::Truncate {
                    path: "db".into(),
                    size,
                });
                ops.push(FsOp::Sync);
                while ops.len() < n {
                    let len = 512 * (1 + next(u64::from(max_write) / 512).min(7)) as u32;
                    let off = next(size.saturating_sub(u64::from(len)) / 512 + 1) * 512;
                    ops.push(FsOp::Write {
                        path: "db".into(),
                        off,
                        len,
                        seed: v(),
                    });
                    if next(3) == 0 {
                        ops.push(FsOp::Sync);
                    }
                }
            }
            FsWorkload::Records => {
                // Records of at most `max_write` bytes: two cyclic logs — calls of 15 bytes
                // each, a size that does not divide a block, and events of one length in a
                // file of any — and a file of messages kept to about 40 by removing the
                // oldest.
                let long = max_write.max(20);
                let logs = [("calls", 20, 15, 15), ("events", 64, 32.min(long), 0)];
                for (path, capacity, _, record_size) in logs {
                    ops.push(FsOp::Records {
                        path: path.into(),
                        capacity,
                        record_size,
                    });
                }
                ops.push(FsOp::Records {
                    path: "sms".into(),
                    capacity: 0,
                    record_size: 0,
                });
                ops.push(FsOp::Sync);
                let mut messages = 0u64;
                while ops.len() < n {
                    let (log, _, len, _) = logs[next(2) as usize];
                    let op = match next(12) {
                        0..=4 => FsOp::RecordAdd {
                            path: log.into(),
                            len,
                            seed: v(),
                        },
                        5 | 6 => {
                            messages += 1;
                            FsOp::RecordAdd {
                                path: "sms".into(),
                                len: 20 + next(u64::from(long - 19)) as u32,
                                seed: v(),
                            }
                        }
                        7 if messages > 0 => FsOp::RecordUpdate {
                            path: "sms".into(),
                            back: next(messages.min(4)),
                            len: 1 + next(u64::from(long)) as u32,
                            seed: v(),
                        },
                        8 if messages > 40 => {
                            messages -= 1;
                            FsOp::RecordRemoveFirst { path: "sms".into() }
                        }
                        9 if messages > 0 => {
                            messages -= 1;
                            FsOp::RecordRemoveLast { path: "sms".into() }
                        }
                        // Something the journal does not take: the next commit checkpoints.
                        10 => FsOp::Write {
                            path: "settings".into(),
                            off: next(4) * 64,
                            len: 64,
                            seed: v(),
                        },
                        _ => FsOp::Sync,
                    };
                    ops.push(op);
                    // Most events are made durable on their own, as a phone does.
                    if next(3) > 0 {
                        ops.push(FsOp::Sync);
                    }
                }
            }
            FsWorkload::SmallWrites => {
                let small = u64::from(max_write).clamp(1, 256);
                let bound = max_file.max(2 * small);
                // Where each file ends, as the writes leave it.
                let mut size = [0u64; 3];
                // Small files written whole so far, by number.
                let mut whole: Vec<u32> = Vec::new();
                let mut made = 0u32;
                while ops.len() < n {
                    let f = next(3) as usize;
                    let path = format!("s{f}");
                    let len = 1 + next(small);
                    let op = match next(16) {
                        14 => {
                            let k = made;
                            made += 1;
                            whole.push(k);
                            let path = format!("w{k}");
                            // In one write, or two.
                            let mut off = 0;
                            if next(2) == 0 {
                                ops.push(FsOp::Write {
                                    path: path.clone(),
                                    off: 0,
                                    len: len as u32,
                                    seed: v(),
                                });
                                off = len;
                            }
                            ops.push(FsOp::Write {
                                path,
                                off,
                                len: 1 + next(small) as u32,
                                seed: v(),
                            });
                            FsOp::Sync
                        }
                        15 if !whole.is_empty() => {
                            let k = whole.swap_remove(next(whole.len() as u64) as usize);
                            FsOp::Unlink {
                                path: format!("w{k}"),
                            }
                        }
                        0..=6 if size[f] + len > bound => {
                            size[f] = 0;
                            FsOp::Truncate { path, size: 0 }
                        }
                        0..=6 => {
                            size[f] += len;
                            FsOp::Append {
                                path,
                                len: len as u32,
                                seed: v(),
                            }
                        }
                        7..=11 => {
                            let off = next(size[f].max(1));
                            size[f] = size[f].max(off + len);
                            FsOp::Write {
                                path,
                                off,
                                len: len as u32,
                                seed: v(),
                            }
                        }
                        _ => FsOp::Sync,
                    };
                    ops.push(op);
                }
            }
        }
        ops.truncate(n);
        ops
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_follows_operations_and_checks_prefixes() {
        let mut d = Durable::default();
        let ops = [
            FsOp::Mkdir { path: "a".into() },
            FsOp::Write {
                path: "a/f".into(),
                off: 3,
                len: 4,
                seed: 1,
            },
            FsOp::Sync,
            FsOp::Rename {
                from: "a/f".into(),
                to: "g".into(),
            },
            FsOp::Truncate {
                path: "g".into(),
                size: 2,
            },
        ];
        let mut t = Tree::new();
        for op in &ops {
            assert!(apply_model(&mut t, op));
            d.acknowledged(op);
        }
        assert!(!apply_model(&mut t, &FsOp::Rmdir { path: "zz".into() }));
        assert_eq!(d.current(), t);
        assert_eq!(d.since.len(), 2);
        assert_eq!(d.check(&t), Ok(2));
        assert_eq!(d.check(&d.base.clone()), Ok(0));
        let mut wrong = d.base.clone();
        wrong.insert("a/f".into(), Node::File(vec![0; 7]));
        assert!(d.check(&wrong).unwrap_err().contains("differs at byte"));
        assert_eq!(content(1, 3, 4)[1..], content(1, 4, 3)[..]);
        for w in FsWorkload::ALL {
            let ops = w.ops(5, 200, 4096, 1 << 16);
            assert_eq!(ops.len(), 200);
            assert_eq!(FsWorkload::from_name(w.name()), Some(w));
            let mut t = Tree::new();
            let ok = ops
                .iter()
                .filter(|o| {
                    let before = accepts(&t, o);
                    let applied = apply_model(&mut t, o);
                    assert_eq!(before, applied, "{} {o:?}", w.name());
                    applied
                })
                .count();
            assert!(ok > 100, "{} applies only {ok} of 200", w.name());
        }
    }
}
