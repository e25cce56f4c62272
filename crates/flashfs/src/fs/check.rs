//! `fsck`: every invariant of a mounted volume, checked from the committed version, with
//! the safe repairs.
//!
//! Mount has already checked the superblock, every index node it reached (CRC, level,
//! generation, key order) and that no sector is used twice or lies outside the volume; a
//! volume that fails those does not mount and [`check_device`] reports why. The check then
//! verifies what mount does not need: the namespace (every entry names an inode of its
//! type, every inode is reachable, link counts), the extents (in order, not overlapping,
//! counted in the inode), the free-space accounting against the index and the block device
//! underneath, and that every sector in use reads back.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::layout::{
    self, dirent_name, item, split_key, suffix_u64, Extent, FileType, Ino, Inode, ROOT_INO,
};
use super::{Fs, FsConfig};
use crate::error::{Error, Result};
use crate::ftl::BlockDevice;
use crate::log::ScrubReport;
use crate::media::Segments;

/// One problem found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The inode concerned, if one is.
    pub ino: Option<Ino>,
    /// A path naming that inode, if its entries lead to the root.
    pub path: Option<String>,
    /// What is wrong.
    pub what: String,
    /// Whether the check repaired it.
    pub repaired: bool,
}

/// What a check found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// Every problem, in the order found.
    pub problems: Vec<Problem>,
    /// Inodes.
    pub inodes: u64,
    /// Directories among them.
    pub directories: u64,
    /// Blocks in use (index nodes, file data and the superblock).
    pub used_blocks: u64,
    /// Blocks free.
    pub free_blocks: u64,
    /// Whether the volume could be mounted at all.
    pub mounted: bool,
    /// Index nodes the mount found holding a garbage spare pointer (set by a commit a power
    /// cut interrupted) and copied: the normal aftermath of a power cut, not damage.
    pub garbage_spares: u64,
}

impl CheckReport {
    /// Whether nothing was wrong.
    pub fn is_clean(&self) -> bool {
        self.mounted && self.problems.is_empty()
    }

    /// Problems left unrepaired.
    pub fn unrepaired(&self) -> usize {
        self.problems.iter().filter(|p| !p.repaired).count()
    }
}

/// Mounts `dev` and checks it; with `repair`, repairs what is safe and commits. A volume
/// that does not mount is reported (not an error); an error is returned only when the
/// device cannot be read at all.
pub fn check_device<D: Segments>(
    dev: D,
    config: FsConfig,
    repair: bool,
) -> (CheckReport, Option<D>) {
    match Fs::mount(dev, config) {
        Ok(mut fs) => {
            let report = fs.check(repair).unwrap_or_else(|e| CheckReport {
                problems: alloc::vec![Problem {
                    ino: None,
                    path: None,
                    what: format!("check stopped: {e}"),
                    repaired: false,
                }],
                mounted: true,
                ..CheckReport::default()
            });
            let dev = if repair {
                fs.unmount().ok()
            } else {
                Some(fs.into_device())
            };
            (report, dev)
        }
        Err(e) => (
            CheckReport {
                problems: alloc::vec![Problem {
                    ino: None,
                    path: None,
                    what: format!("does not mount: {e}"),
                    repaired: false,
                }],
                ..CheckReport::default()
            },
            None,
        ),
    }
}

/// Everything the index says, gathered in one walk.
#[derive(Default)]
struct Census {
    inodes: BTreeMap<Ino, Inode>,
    /// Entries naming each inode: (directory, name, type recorded).
    names: BTreeMap<Ino, Vec<(Ino, Vec<u8>, FileType)>>,
    extents: BTreeMap<Ino, Vec<(u64, Extent)>>,
    /// Inodes that own items (attributes, entries, extents) besides their inode item.
    owners: BTreeSet<Ino>,
    orphans: BTreeSet<Ino>,
    /// Record files' heads, and their record chunks: (record, chunk, bytes).
    record_heads: BTreeMap<Ino, layout::RecordHead>,
    record_chunks: BTreeMap<Ino, Vec<(u64, u16, usize)>>,
}

impl Census {
    /// A path naming `ino` (by its first entry at each level), if the entries lead to the
    /// root; `None` for an inode no entry names or one in a loop of directories.
    fn path_of(&self, ino: Ino) -> Option<String> {
        let mut parts = Vec::new();
        let mut at = ino;
        while at != ROOT_INO {
            if parts.len() > self.inodes.len() {
                return None;
            }
            let (dir, name, _) = self.names.get(&at)?.first()?;
            parts.push(String::from_utf8_lossy(name).into_owned());
            at = *dir;
        }
        parts.reverse();
        Some(format!("/{}", parts.join("/")))
    }
}

impl<D: Segments> Fs<D> {
    /// Scrubs the volume ([`Ftl::scrub`](crate::Ftl::scrub)): reads back every block in use,
    /// moves data the ECC corrects more and more while it still can, and, when some was
    /// already lost, checks the volume to name it (each file and byte range, as
    /// [`Fs::check`] does; the rest of the report's problems too).
    pub fn scrub(&mut self) -> Result<(ScrubReport, Vec<Problem>)> {
        self.sync()?;
        let (report, lost) = self.tree.store_mut().ftl.scrub()?;
        for &k in &lost {
            // Found lost now: an error from the next read on, as without the cache.
            self.tree.store_mut().rc.invalidate(k, 1);
        }
        if lost.is_empty() {
            return Ok((report, Vec::new()));
        }
        Ok((report, self.check(false)?.problems))
    }

    /// Checks the mounted volume (its working version is committed first, so the check
    /// sees what a remount would); with `repair`, fixes what is safe to fix and commits.
    pub fn check(&mut self, repair: bool) -> Result<CheckReport> {
        self.checkpoint()?;
        let mut report = CheckReport {
            mounted: true,
            ..CheckReport::default()
        };
        let usage = self.walk()?;
        let census = self.census()?;
        report.inodes = census.inodes.len() as u64;
        report.garbage_spares = self.counts.garbage_spares();
        report.directories = census
            .inodes
            .values()
            .filter(|i| i.file_type().ok() == Some(FileType::Directory))
            .count() as u64;
        let mut fixes = Fixes::default();
        self.check_namespace(&census, &mut report, &mut fixes)?;
        self.check_extents(&census, &mut report, &mut fixes);
        self.check_records(&census, &mut report);
        self.check_space(&usage, &census, &mut report)?;
        // The block device's live counts, which checkpoints carry from mount to mount.
        let miscounted = self.tree.store_mut().ftl.miscounted_segments()?;
        if let Some(first) = miscounted.first() {
            report.problems.push(Problem {
                ino: None,
                path: None,
                what: format!(
                    "the log counts the live slots of {} segment(s) wrong (the first: {first})",
                    miscounted.len()
                ),
                repaired: false,
            });
        }
        // The count the superblock keeps (the mount from the saved free-space map reads it).
        if self.committed_inodes() != usage.inodes {
            report.problems.push(Problem {
                ino: None,
                path: None,
                what: format!(
                    "inode count: {} kept, {} in the index",
                    self.committed_inodes(),
                    usage.inodes
                ),
                repaired: false,
            });
        }
        if repair && !fixes.is_empty() {
            self.apply(fixes)?;
            self.checkpoint()?;
            for p in &mut report.problems {
                p.repaired = p.repaired || p.what.ends_with("(repairable)");
            }
        }
        for p in &mut report.problems {
            if let Some(s) = p.what.strip_suffix(" (repairable)") {
                p.what = String::from(s);
            }
            p.path = p.ino.and_then(|i| census.path_of(i));
        }
        Ok(report)
    }

    fn census(&mut self) -> Result<Census> {
        let mut c = Census::default();
        for entry in self.tree.iter() {
            let (k, v) = entry?;
            let (ino, ty, rest) = split_key(&k)?;
            match ty {
                item::INODE => {
                    c.inodes.insert(ino, Inode::decode(&v)?);
                }
                item::DIRENT => {
                    let (child, kind) = layout::decode_dirent(&v)?;
                    c.names.entry(child).or_default().push((
                        ino,
                        dirent_name(rest)?.to_vec(),
                        kind,
                    ));
                    c.owners.insert(ino);
                }
                item::EXTENT => {
                    c.extents
                        .entry(ino)
                        .or_default()
                        .push((suffix_u64(rest)?, Extent::decode(&v)?));
                    c.owners.insert(ino);
                }
                item::XATTR => {
                    c.owners.insert(ino);
                }
                item::ORPHAN => {
                    c.orphans.insert(suffix_u64(rest)?);
                }
                item::RECORDS => {
                    c.record_heads.insert(ino, layout::RecordHead::decode(&v)?);
                    c.owners.insert(ino);
                }
                item::RECORD => {
                    let (n, chunk) = layout::record_suffix(rest)?;
                    c.record_chunks
                        .entry(ino)
                        .or_default()
                        .push((n, chunk, v.len()));
                    c.owners.insert(ino);
                }
                item::INT_DIRENT => {
                    let n = layout::int_dirent_name(rest)?;
                    let (child, kind) = layout::decode_dirent(&v)?;
                    let name = super::names::census_int_name(n);
                    c.names.entry(child).or_default().push((ino, name, kind));
                    c.owners.insert(ino);
                }
                item::FLAT_NAME => {
                    let name = layout::flat_name(rest)?.to_vec();
                    let (child, kind) = layout::decode_dirent(&v)?;
                    c.names.entry(child).or_default().push((ino, name, kind));
                }
                _ => return Err(Error::Corrupt("unknown item type in the index")),
            }
        }
        Ok(c)
    }

    fn check_namespace(
        &mut self,
        c: &Census,
        report: &mut CheckReport,
        fixes: &mut Fixes,
    ) -> Result<()> {
        let mut problem = |ino: Option<Ino>, what: String| {
            report.problems.push(Problem {
                ino,
                path: None,
                what,
                repaired: false,
            })
        };
        match c.inodes.get(&ROOT_INO).map(Inode::file_type) {
            Some(Ok(FileType::Directory)) => {}
            _ => problem(Some(ROOT_INO), String::from("the root is not a directory")),
        }
        // Entries: each names an existing inode of the recorded type, from a directory.
        for (&child, names) in &c.names {
            for (dir, name, kind) in names {
                match c.inodes.get(dir).map(Inode::file_type) {
                    Some(Ok(FileType::Directory)) => {}
                    // The flat namespace: any inode but a directory.
                    _ if *dir == layout::FLAT => {
                        if *kind == FileType::Directory {
                            problem(
                                Some(child),
                                format!("flat name {:?} names a directory", show(name)),
                            );
                        }
                    }
                    _ => problem(
                        Some(*dir),
                        format!(
                            "entry {:?} in an inode that is not a directory (repairable)",
                            show(name)
                        ),
                    ),
                }
                match c.inodes.get(&child) {
                    None => {
                        problem(
                            Some(*dir),
                            format!(
                                "entry {:?} names missing inode {child} (repairable)",
                                show(name)
                            ),
                        );
                        fixes.remove_entries.push((*dir, name.clone()));
                    }
                    Some(i) if i.file_type().ok() != Some(*kind) => {
                        problem(
                            Some(child),
                            format!("entry {:?} records the wrong type (repairable)", show(name)),
                        );
                        fixes.retype.push((*dir, name.clone(), child));
                    }
                    Some(_) => {}
                }
            }
        }
        // Link counts, parents and reachability.
        let mut subdirs: BTreeMap<Ino, u32> = BTreeMap::new();
        for (&child, names) in &c.names {
            if c.inodes.get(&child).and_then(|i| i.file_type().ok()) == Some(FileType::Directory) {
                for (dir, _, _) in names {
                    *subdirs.entry(*dir).or_default() += 1;
                }
            }
        }
        for (&ino, inode) in &c.inodes {
            let names = c.names.get(&ino).map_or(0, |n| n.len()) as u32;
            let Ok(ty) = inode.file_type() else { continue };
            let orphan = c.orphans.contains(&ino);
            let expected = if ty == FileType::Directory {
                if ino != ROOT_INO && names > 1 {
                    problem(Some(ino), format!("directory has {names} names"));
                }
                if names == 0 && ino != ROOT_INO && !orphan {
                    0
                } else {
                    2 + subdirs.get(&ino).copied().unwrap_or(0)
                }
            } else {
                names
            };
            if names == 0 && ino != ROOT_INO && !orphan {
                problem(
                    Some(ino),
                    format!("inode {ino} is not reachable from the root (repairable)"),
                );
                fixes.unreachable.push(ino);
                continue;
            }
            if orphan && inode.nlink == 0 {
                continue;
            }
            if inode.nlink != expected {
                problem(
                    Some(ino),
                    format!(
                        "link count {} should be {expected} (repairable)",
                        inode.nlink
                    ),
                );
                fixes.nlink.push((ino, expected));
            }
            if ty == FileType::Directory && ino != ROOT_INO {
                if let Some((dir, _, _)) = c.names.get(&ino).and_then(|n| n.first()) {
                    if inode.parent != *dir {
                        problem(
                            Some(ino),
                            format!("parent {} should be {dir} (repairable)", inode.parent),
                        );
                        fixes.parent.push((ino, *dir));
                    }
                }
            }
        }
        // A directory cycle cut off from the root has names, so look for it from the root.
        let mut seen = BTreeSet::new();
        let mut stack = alloc::vec![ROOT_INO, layout::FLAT];
        let mut children: BTreeMap<Ino, Vec<Ino>> = BTreeMap::new();
        for (&child, names) in &c.names {
            for (dir, _, _) in names {
                children.entry(*dir).or_default().push(child);
            }
        }
        while let Some(d) = stack.pop() {
            if seen.insert(d) {
                stack.extend(children.get(&d).into_iter().flatten().copied());
            }
        }
        for (&ino, names) in &c.names {
            if !seen.contains(&ino) && c.inodes.contains_key(&ino) && !names.is_empty() {
                problem(
                    Some(ino),
                    format!("inode {ino} is only reachable from a detached directory"),
                );
            }
        }
        for &o in &c.orphans {
            if c.inodes.get(&o).is_some_and(|i| i.nlink > 0) || !c.inodes.contains_key(&o) {
                problem(
                    Some(o),
                    format!("orphan list names inode {o}, which is not an orphan (repairable)"),
                );
                fixes.unorphan.push(o);
            }
        }
        for &o in &c.owners {
            if !c.inodes.contains_key(&o) {
                problem(Some(o), format!("items of missing inode {o} (repairable)"));
                fixes.purge.push(o);
            }
        }
        Ok(())
    }

    fn check_extents(&mut self, c: &Census, report: &mut CheckReport, fixes: &mut Fixes) {
        let max_blocks = self.max_file_size() / self.bs();
        for (&ino, exts) in &c.extents {
            let Some(inode) = c.inodes.get(&ino) else {
                continue;
            };
            let mut problem = |what: String| {
                report.problems.push(Problem {
                    ino: Some(ino),
                    path: None,
                    what,
                    repaired: false,
                })
            };
            if !matches!(inode.file_type(), Ok(FileType::Regular | FileType::Symlink)) {
                problem(String::from("extents on an inode that holds no data"));
            }
            let records = c.record_heads.contains_key(&ino);
            let mut end = 0;
            let mut blocks = 0;
            for &(b, e) in exts {
                if b < end {
                    problem(format!("extent at block {b} overlaps the one before"));
                }
                if b.saturating_add(e.len) > max_blocks {
                    problem(format!("extent at block {b} ends past the largest file"));
                }
                if e.continued && !records {
                    problem(format!(
                        "extent at block {b} continues an append block in a file of bytes"
                    ));
                }
                // A record file's blocks are numbered by the records they hold (its
                // records check covers them).
                if !e.unwritten && b * self.bs() >= inode.size && !records {
                    problem(format!(
                        "written extent at block {b} past the end of the file"
                    ));
                }
                end = b.saturating_add(e.len);
                blocks += e.len;
            }
            if blocks != inode.blocks {
                problem(format!(
                    "block count {} should be {blocks} (repairable)",
                    inode.blocks
                ));
                fixes.blocks.push((ino, blocks));
            }
        }
        for (&ino, inode) in &c.inodes {
            if inode.blocks != 0 && !c.extents.contains_key(&ino) {
                report.problems.push(Problem {
                    ino: Some(ino),
                    path: None,
                    what: format!("block count {} should be 0 (repairable)", inode.blocks),
                    repaired: false,
                });
                fixes.blocks.push((ino, 0));
            }
        }
    }

    fn check_records(&mut self, c: &Census, report: &mut CheckReport) {
        let per = self.tree.max_value_len();
        let inos: BTreeSet<Ino> = c
            .record_heads
            .keys()
            .chain(c.record_chunks.keys())
            .copied()
            .collect();
        for ino in inos {
            let Some(inode) = c.inodes.get(&ino) else {
                continue;
            };
            let chunks = c.record_chunks.get(&ino).map_or(&[][..], |v| &v[..]);
            let head = c.record_heads.get(&ino);
            let extents = match head {
                Some(_) => c.extents.get(&ino).map_or(&[][..], |v| &v[..]),
                None => &[],
            };
            let mut blocks = Vec::new();
            let framed = match head {
                Some(h) if self.per_block(h).is_none() && !extents.is_empty() => self
                    .framed_records(h, extents, &mut blocks)
                    .unwrap_or_else(|e| {
                        blocks.push(format!("append blocks unreadable: {e}"));
                        Vec::new()
                    }),
                _ => Vec::new(),
            };
            let mut found = super::record::verify(head, chunks, extents, &framed, per, self.bs());
            found.problems.append(&mut blocks);
            if let Some(size) = found.size {
                if !matches!(inode.file_type(), Ok(FileType::Regular)) {
                    found.problems.push(String::from(
                        "records on an inode that is not a regular file",
                    ));
                }
                if inode.size != size {
                    found.problems.push(format!(
                        "size {} should be {size}, the records' bytes",
                        inode.size
                    ));
                }
            }
            for what in found.problems {
                report.problems.push(Problem {
                    ino: Some(ino),
                    path: None,
                    what,
                    repaired: false,
                });
            }
        }
    }

    fn check_space(
        &mut self,
        usage: &super::mount::Usage,
        c: &Census,
        report: &mut CheckReport,
    ) -> Result<()> {
        // Blocks allocated and never written (fallocate) read as zeros whatever the block
        // device holds for them: they need no data.
        let unwritten: BTreeSet<u64> = c
            .extents
            .values()
            .flatten()
            .filter(|(_, e)| e.unwritten)
            .flat_map(|(_, e)| e.start..e.start.saturating_add(e.len))
            .collect();
        let sectors = self.sb.sectors;
        let map_unwritten = self.space_map_unwritten();
        let used = (0..sectors).filter(|&k| usage.is_used(k)).count() as u64;
        report.used_blocks = used;
        let space = &self.tree.store().space;
        report.free_blocks = space.free();
        let mut problem = |ino: Option<Ino>, what: String| {
            report.problems.push(Problem {
                ino,
                path: None,
                what,
                repaired: false,
            })
        };
        // Sectors open transactions wrote: in use, though no committed item names them.
        let held = self.tree.tx.held(space.tx.as_ref());
        let used = used + held.len() as u64;
        if space.free() + space.pending() + used != sectors {
            problem(
                None,
                format!(
                    "free-space accounting: {} free + {} pending + {used} used != {sectors} blocks",
                    space.free(),
                    space.pending()
                ),
            );
        }
        // What a power cut left of free blocks is forgotten by the sweep, as it goes: the
        // check finishes it first, so that any left after it is a fault.
        self.tree.store_mut().sweep_all()?;
        let mapped: BTreeSet<u64> = self
            .tree
            .store_mut()
            .ftl
            .mapped_where(|_| true)?
            .into_iter()
            .collect();
        let bs = self.sb.block_size as u64;
        // The file and byte offset a block holds, for problems with its data.
        let owner = |k: u64| {
            c.extents.iter().find_map(|(&ino, list)| {
                list.iter().find_map(|(b, e)| {
                    (e.start <= k && k - e.start < e.len).then(|| (ino, (b + k - e.start) * bs))
                })
            })
        };
        let mut buf = alloc::vec![0; self.sb.block_size as usize];
        for k in 0..sectors {
            if !usage.is_used(k) {
                continue;
            }
            // Free space read from the saved map must agree with the walk block by block:
            // a block in use taken as free would be given to another file.
            if self.tree.store().space.is_free(k) {
                problem(None, format!("block {k} is in use but counted free"));
            }
            if !mapped.contains(&k) {
                // A journal block is written when an epoch first needs it.
                let journal = (1..=u64::from(self.sb.journal_blocks)).contains(&k);
                if !unwritten.contains(&k) && !journal && !map_unwritten.contains(&k) {
                    match owner(k) {
                        // A file's block whose page read as erased when a scan rebuilt the map.
                        Some((ino, off)) => problem(
                            Some(ino),
                            format!(
                                "bytes {off}-{} (block {k}) hold no data: lost",
                                off + bs - 1
                            ),
                        ),
                        None => problem(None, format!("block {k} is in use but holds no data")),
                    }
                }
                continue;
            }
            if let Err(e) = self.tree.store_mut().ftl.read(k, &mut buf) {
                // Say whose data it was: the file and the byte range of the block.
                match owner(k) {
                    Some((ino, off)) => problem(
                        Some(ino),
                        format!(
                            "bytes {off}-{} (block {k}) do not read back: {e}",
                            off + bs - 1
                        ),
                    ),
                    None => problem(None, format!("block {k} does not read back: {e}")),
                }
            }
        }
        if let Some(k) = mapped
            .iter()
            .find(|&&k| !usage.is_used(k) && !held.contains(&k))
        {
            problem(
                None,
                format!("block {k} is free but the log still keeps its data"),
            );
        }
        Ok(())
    }

    fn apply(&mut self, f: Fixes) -> Result<()> {
        for (dir, name) in f.remove_entries {
            self.tree.remove(&super::names::census_key(dir, &name))?;
        }
        for (dir, name, child) in f.retype {
            let ty = self.inode(child)?.file_type()?;
            self.tree.insert(
                &super::names::census_key(dir, &name),
                &layout::encode_dirent(child, ty),
            )?;
        }
        for ino in f.purge {
            self.purge(ino)?;
            self.inodes += 1; // It had no inode to count.
        }
        for o in f.unorphan {
            self.tree
                .remove(&layout::key_u64(layout::ORPHANS, item::ORPHAN, o))?;
        }
        for (ino, n) in f.nlink {
            let mut i = self.inode(ino)?;
            i.nlink = n;
            self.put_inode(ino, &i)?;
        }
        for (ino, p) in f.parent {
            let mut i = self.inode(ino)?;
            i.parent = p;
            self.put_inode(ino, &i)?;
        }
        for (ino, b) in f.blocks {
            let mut i = self.inode(ino)?;
            i.blocks = b;
            self.put_inode(ino, &i)?;
        }
        if !f.unreachable.is_empty() {
            let lf = match self.lookup(ROOT_INO, b"lost+found") {
                Ok(a) => a.ino,
                Err(Error::NotFound) => self.mkdir(ROOT_INO, b"lost+found", 0o700, 0, 0)?.ino,
                Err(e) => return Err(e),
            };
            for ino in f.unreachable {
                let mut inode = self.inode(ino)?;
                let ty = inode.file_type()?;
                let name = format!("#{ino}");
                self.tree.insert(
                    &layout::dirent_key(lf, name.as_bytes()),
                    &layout::encode_dirent(ino, ty),
                )?;
                let mut parent = self.inode(lf)?;
                if ty == FileType::Directory {
                    inode.parent = lf;
                    inode.nlink = inode.nlink.max(2);
                    parent.nlink += 1;
                } else {
                    inode.nlink = 1;
                }
                self.put_inode(ino, &inode)?;
                self.put_inode(lf, &parent)?;
            }
        }
        Ok(())
    }
}

/// Repairs decided by the check.
#[derive(Default)]
struct Fixes {
    remove_entries: Vec<(Ino, Vec<u8>)>,
    retype: Vec<(Ino, Vec<u8>, Ino)>,
    purge: Vec<Ino>,
    unorphan: Vec<Ino>,
    nlink: Vec<(Ino, u32)>,
    parent: Vec<(Ino, Ino)>,
    blocks: Vec<(Ino, u64)>,
    unreachable: Vec<Ino>,
}

impl Fixes {
    fn is_empty(&self) -> bool {
        self.remove_entries.is_empty()
            && self.retype.is_empty()
            && self.purge.is_empty()
            && self.unorphan.is_empty()
            && self.nlink.is_empty()
            && self.parent.is_empty()
            && self.blocks.is_empty()
            && self.unreachable.is_empty()
    }
}

/// A name for messages.
fn show(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}
