//! Directories: lookup, creation, links, removal, rename and listing.
//!
//! A directory is its entries, keyed by (directory, cookie, name); an entry names an inode
//! and its type. Directories also record their parent in their inode, for `..` and for
//! refusing to move a directory into itself.

use alloc::vec::Vec;

use super::layout::op::OpKind;
use super::layout::{
    self, decode_dirent, dirent_key, encode_dirent, item, key, key_u64, FileType, Ino, Inode,
    COOKIE_DOT, COOKIE_DOTDOT, ROOT_INO,
};
use super::{Attr, Fs};
use crate::error::{Error, Result};
use crate::media::Segments;

/// Longest name, in bytes.
pub const NAME_MAX: usize = 255;

/// Longest symbolic-link target, in bytes.
pub const TARGET_MAX: usize = 4095;

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// Pass this to [`Fs::readdir`] to list what comes after this entry.
    pub cookie: u64,
    /// The entry's name.
    pub name: Vec<u8>,
    /// The inode it names.
    pub ino: Ino,
    /// That inode's type.
    pub kind: FileType,
}

/// How [`Fs::rename`] treats an existing target.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RenameFlags {
    /// Fail with `Exists` rather than replace (`RENAME_NOREPLACE`).
    pub no_replace: bool,
    /// Swap source and target, which must both exist (`RENAME_EXCHANGE`).
    pub exchange: bool,
}

/// Checks a name for an entry: not empty, not `.` or `..`, no `/` or NUL, at most 255 bytes.
pub(super) fn check_name(name: &[u8]) -> Result<()> {
    if name.len() > NAME_MAX {
        return Err(Error::NameTooLong);
    }
    if name.is_empty() || name == b"." || name == b".." || name.iter().any(|&b| b == b'/' || b == 0)
    {
        return Err(Error::InvalidArgument("not a valid file name"));
    }
    Ok(())
}

impl<D: Segments> Fs<D> {
    /// The entry `name` of directory `dir`: inode and type.
    pub(super) fn entry(&mut self, dir: Ino, name: &[u8]) -> Result<Option<(Ino, FileType)>> {
        if name.len() > NAME_MAX {
            return Err(Error::NameTooLong);
        }
        match self.tree.get(&dirent_key(dir, name))? {
            Some(v) => decode_dirent(&v).map(Some),
            None => Ok(None),
        }
    }

    /// A directory's inode, or `NotDir`.
    pub(super) fn dir_inode(&mut self, dir: Ino) -> Result<Inode> {
        let inode = self.inode(dir)?;
        if inode.file_type()? != FileType::Directory {
            return Err(Error::NotDir);
        }
        Ok(inode)
    }

    /// Looks `name` up in `dir` (`.` and `..` included; `#n` finds integer entry `n` too).
    pub fn lookup(&mut self, dir: Ino, name: &[u8]) -> Result<Attr> {
        let d = self.dir_inode(dir)?;
        let ino = match name {
            b"." => dir,
            b".." => d.parent,
            _ => match self.entry(dir, name)? {
                Some((ino, _)) => ino,
                None => self.int_entry_named(dir, name)?.ok_or(Error::NotFound)?.1,
            },
        };
        self.getattr(ino)
    }

    /// Creates a regular file, device node, FIFO or socket (`mknod`); the type is in `mode`.
    pub fn mknod(
        &mut self,
        dir: Ino,
        name: &[u8],
        mode: u32,
        rdev: u64,
        uid: u32,
        gid: u32,
    ) -> Result<Attr> {
        match FileType::from_mode(mode) {
            Some(FileType::Directory) => self.mkdir(dir, name, mode, uid, gid),
            Some(FileType::Symlink) => Err(Error::InvalidArgument("mknod of a symbolic link")),
            Some(ty) => self.create_inode(dir, name, ty, mode, rdev, uid, gid),
            None if mode & layout::S_IFMT == 0 => {
                self.create_inode(dir, name, FileType::Regular, mode, 0, uid, gid)
            }
            None => Err(Error::InvalidArgument("unknown file type in mode")),
        }
    }

    /// Creates a regular file.
    pub fn create(&mut self, dir: Ino, name: &[u8], mode: u32, uid: u32, gid: u32) -> Result<Attr> {
        // A create is an operation of the journal (SPEC.md §8.5b): a new file and a small
        // first write, `fsync`ed, program one entry rather than index nodes and a
        // superblock. Inside a transaction it is one of the transaction's changes.
        if self.tree.tx.in_operation() {
            return self.create_inode(dir, name, FileType::Regular, mode, 0, uid, gid);
        }
        let kind = |a: &Attr| OpKind::Create {
            name: name.to_vec(),
            mode,
            uid,
            gid,
            child: a.ino,
        };
        self.journaled(dir, kind, |fs| {
            fs.create_inode(dir, name, FileType::Regular, mode, 0, uid, gid)
        })
    }

    /// Creates a directory.
    pub fn mkdir(&mut self, dir: Ino, name: &[u8], mode: u32, uid: u32, gid: u32) -> Result<Attr> {
        self.create_inode(dir, name, FileType::Directory, mode, 0, uid, gid)
    }

    /// Creates a symbolic link to `target`.
    pub fn symlink(
        &mut self,
        dir: Ino,
        name: &[u8],
        target: &[u8],
        uid: u32,
        gid: u32,
    ) -> Result<Attr> {
        if target.len() > TARGET_MAX {
            return Err(Error::NameTooLong);
        }
        if target.is_empty() {
            return Err(Error::NotFound);
        }
        // A bad name or an existing entry says so even on a full volume.
        check_name(name)?;
        if self.dir_inode(dir)?.nlink == 0 {
            return Err(Error::NotFound);
        }
        if self.entry(dir, name)?.is_some() {
            return Err(Error::Exists);
        }
        let blocks = (target.len() as u64).div_ceil(u64::from(self.sb.block_size));
        self.ensure_free(blocks)?;
        // No commit between the new inode and its target: a power cut must not leave a
        // link to nothing.
        let attr = self.new_inode(dir, name, FileType::Symlink, 0o777, 0, uid, gid)?;
        let mut inode = attr.inode;
        self.write_inode_data(attr.ino, &mut inode, 0, target)?;
        self.put_inode(attr.ino, &inode)?;
        self.maybe_commit()?;
        self.attr(attr.ino, inode)
    }

    /// The target of a symbolic link.
    pub fn readlink(&mut self, ino: Ino) -> Result<Vec<u8>> {
        let inode = self.inode(ino)?;
        if inode.file_type()? != FileType::Symlink {
            return Err(Error::InvalidArgument("not a symbolic link"));
        }
        if inode.size > TARGET_MAX as u64 {
            return Err(Error::Corrupt("symbolic link target longer than allowed"));
        }
        let mut target = alloc::vec![0; inode.size as usize];
        let n = self.read_inode_data(ino, &inode, 0, &mut target)?;
        target.truncate(n);
        Ok(target)
    }

    #[allow(clippy::too_many_arguments)]
    fn create_inode(
        &mut self,
        dir: Ino,
        name: &[u8],
        ty: FileType,
        mode: u32,
        rdev: u64,
        uid: u32,
        gid: u32,
    ) -> Result<Attr> {
        let attr = self.new_inode(dir, name, ty, mode, rdev, uid, gid)?;
        self.maybe_commit()?;
        Ok(attr)
    }

    /// Makes a new inode and its entry in the working version, without committing.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new_inode(
        &mut self,
        dir: Ino,
        name: &[u8],
        ty: FileType,
        mode: u32,
        rdev: u64,
        uid: u32,
        gid: u32,
    ) -> Result<Attr> {
        check_name(name)?;
        let parent = self.dir_inode(dir)?;
        if parent.nlink == 0 {
            return Err(Error::NotFound);
        }
        if self.entry(dir, name)?.is_some() {
            return Err(Error::Exists);
        }
        self.check_not_int_named(dir, name)?;
        self.add_new_entry(
            (dir, parent),
            &dirent_key(dir, name),
            ty,
            mode,
            rdev,
            (uid, gid),
        )
    }

    /// Makes a new inode of type `ty` named by `entry` (a string or an integer name in `dir`,
    /// checked free) in the working version: the directory gains a link if `ty` is one, and
    /// its times.
    pub(super) fn add_new_entry(
        &mut self,
        (dir, mut parent): (Ino, Inode),
        entry: &[u8],
        ty: FileType,
        mode: u32,
        rdev: u64,
        (uid, gid): (u32, u32),
    ) -> Result<Attr> {
        if ty == FileType::Directory && parent.nlink == u32::MAX {
            return Err(Error::TooManyLinks);
        }
        self.ensure_free(0)?;
        let (ino, inode) = self.make_inode(ty, mode, rdev, uid, gid, dir)?;
        self.tree.insert(entry, &encode_dirent(ino, ty))?;
        if ty == FileType::Directory {
            parent.nlink += 1;
        }
        parent.mtime = inode.ctime;
        parent.ctime = inode.ctime;
        self.put_inode(dir, &parent)?;
        self.attr(ino, inode)
    }

    /// A new inode numbered from the superblock, in the working version, counted; a
    /// directory's records `parent` as its parent.
    pub(super) fn make_inode(
        &mut self,
        ty: FileType,
        mode: u32,
        rdev: u64,
        uid: u32,
        gid: u32,
        parent: Ino,
    ) -> Result<(Ino, Inode)> {
        let now = self.now();
        let ino = self.sb.next_ino;
        self.sb.next_ino += 1;
        let inode = Inode {
            mode: ty.mode_bits() | (mode & 0o7777),
            uid,
            gid,
            nlink: if ty == FileType::Directory { 2 } else { 1 },
            size: 0,
            atime: now,
            mtime: now,
            ctime: now,
            rdev,
            blocks: 0,
            parent: if ty == FileType::Directory { parent } else { 0 },
        };
        self.put_inode(ino, &inode)?;
        self.inodes += 1;
        Ok((ino, inode))
    }

    /// Gives inode `ino` another name (a hard link).
    pub fn link(&mut self, ino: Ino, dir: Ino, name: &[u8]) -> Result<Attr> {
        check_name(name)?;
        let inode = self.inode(ino)?;
        let ty = inode.file_type()?;
        if ty == FileType::Directory {
            return Err(Error::NotPermitted("hard link to a directory"));
        }
        let parent = self.dir_inode(dir)?;
        if parent.nlink == 0 {
            return Err(Error::NotFound);
        }
        if self.entry(dir, name)?.is_some() {
            return Err(Error::Exists);
        }
        self.check_not_int_named(dir, name)?;
        self.add_link(
            (ino, inode, ty),
            Some((dir, parent)),
            &dirent_key(dir, name),
        )
    }

    /// Adds the entry `entry` (a string or an integer name in directory `parent`, or a flat
    /// name without one; checked free) for the existing non-directory `ino` of type `ty`:
    /// one more link, and the directory's times.
    pub(super) fn add_link(
        &mut self,
        (ino, mut inode, ty): (Ino, Inode, FileType),
        parent: Option<(Ino, Inode)>,
        entry: &[u8],
    ) -> Result<Attr> {
        if inode.nlink == 0 {
            return Err(Error::NotFound);
        }
        if inode.nlink == u32::MAX {
            return Err(Error::TooManyLinks);
        }
        self.ensure_free(0)?;
        let now = self.now();
        inode.nlink += 1;
        inode.ctime = now;
        self.put_inode(ino, &inode)?;
        self.tree.insert(entry, &encode_dirent(ino, ty))?;
        if let Some((dir, mut parent)) = parent {
            parent.mtime = now;
            parent.ctime = now;
            self.put_inode(dir, &parent)?;
        }
        self.maybe_commit()?;
        self.attr(ino, inode)
    }

    /// Removes the name `name` (not a directory) from `dir`. The inode goes with its last
    /// name, or with its last close if it is open.
    pub fn unlink(&mut self, dir: Ino, name: &[u8]) -> Result<()> {
        self.dir_inode(dir)?;
        let Some((ino, ty)) = self.entry(dir, name)? else {
            return self.remove_int_named(dir, name, false);
        };
        if ty == FileType::Directory {
            return Err(Error::IsDir);
        }
        self.remove_entry(dir, name, ino)?;
        self.maybe_commit()
    }

    /// Removes the empty directory `name` from `dir`.
    pub fn rmdir(&mut self, dir: Ino, name: &[u8]) -> Result<()> {
        self.dir_inode(dir)?;
        match name {
            b"." => return Err(Error::InvalidArgument("rmdir of .")),
            b".." => return Err(Error::NotEmpty),
            _ => {}
        }
        let Some((ino, ty)) = self.entry(dir, name)? else {
            return self.remove_int_named(dir, name, true);
        };
        if ty != FileType::Directory {
            return Err(Error::NotDir);
        }
        if !self.dir_is_empty(ino)? {
            return Err(Error::NotEmpty);
        }
        self.remove_entry(dir, name, ino)?;
        self.maybe_commit()
    }

    pub(super) fn dir_is_empty(&mut self, dir: Ino) -> Result<bool> {
        for ty in [item::DIRENT, item::INT_DIRENT] {
            let (lo, hi) = (key(dir, ty), key(dir, ty + 1));
            if self.tree.range(lo..hi).next().transpose()?.is_some() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Removes an entry and drops the link it held; `ino` is what it names.
    fn remove_entry(&mut self, dir: Ino, name: &[u8], ino: Ino) -> Result<()> {
        let now = self.now();
        self.tree.remove(&dirent_key(dir, name))?;
        let mut parent = self.inode(dir)?;
        self.drop_link(ino, Some(&mut parent), now)?;
        parent.mtime = now;
        parent.ctime = now;
        self.put_inode(dir, &parent)
    }

    /// Drops one link of `ino` whose entry in `parent` is gone: a directory loses both its
    /// links (and its parent the `..` one), a file one; with none left the inode is deleted,
    /// or made an orphan while open.
    pub(super) fn drop_link(
        &mut self,
        ino: Ino,
        parent: Option<&mut Inode>,
        now: layout::Timespec,
    ) -> Result<()> {
        let mut inode = self.inode(ino)?;
        if inode.file_type()? == FileType::Directory {
            inode.nlink = 0;
            if let Some(p) = parent {
                p.nlink = p.nlink.saturating_sub(1);
            }
        } else {
            inode.nlink = inode.nlink.saturating_sub(1);
        }
        inode.ctime = now;
        if inode.nlink > 0 {
            return self.put_inode(ino, &inode);
        }
        if self.is_open(ino) {
            self.put_inode(ino, &inode)?;
            self.add_orphan(ino)
        } else {
            self.purge(ino)
        }
    }

    /// Deletes an inode and everything it owns.
    pub(super) fn purge(&mut self, ino: Ino) -> Result<()> {
        self.extent_cache.forget(ino);
        self.tails.close(ino);
        let lo = key(ino, 0);
        let hi = key(
            ino.checked_add(1)
                .ok_or(Error::Corrupt("inode number overflow"))?,
            0,
        );
        let items: Vec<(Vec<u8>, Vec<u8>)> = self.tree.range(lo..hi).collect::<Result<_>>()?;
        for (k, v) in items {
            if k[8] == item::EXTENT {
                let e = layout::Extent::decode_at(0, &v, self.sb.sectors)?;
                let store = self.tree.store_mut();
                store.wb.drop_range(e.start, e.len);
                store.space.release(e.start, e.len);
            }
            self.tree.remove(&k)?;
        }
        self.tree
            .remove(&key_u64(layout::ORPHANS, item::ORPHAN, ino))?;
        self.inodes = self.inodes.saturating_sub(1);
        Ok(())
    }

    /// Lists `dir` after `cookie` (0: from the start, with `.` and `..`), at most `max`
    /// entries; integer entries come last, shown as `#n` (see [`Fs::create_int`]).
    pub fn readdir(&mut self, dir: Ino, cookie: u64, max: usize) -> Result<Vec<DirEntry>> {
        let d = self.dir_inode(dir)?;
        let mut out = Vec::new();
        if cookie < COOKIE_DOT && out.len() < max {
            out.push(DirEntry {
                cookie: COOKIE_DOT,
                name: b".".to_vec(),
                ino: dir,
                kind: FileType::Directory,
            });
        }
        if cookie < COOKIE_DOTDOT && out.len() < max {
            out.push(DirEntry {
                cookie: COOKIE_DOTDOT,
                name: b"..".to_vec(),
                ino: d.parent,
                kind: FileType::Directory,
            });
        }
        let lo = key_u64(dir, item::DIRENT, cookie.max(COOKIE_DOTDOT) + 1);
        let hi = key(dir, item::DIRENT + 1);
        let mut last_cookie = None;
        for entry in self.tree.range(lo..hi) {
            let (k, v) = entry?;
            let (_, _, rest) = layout::split_key(&k)?;
            let c = layout::suffix_u64(rest)?;
            // Entries sharing a cookie are listed together, or a resumed listing would skip
            // the rest of them.
            if out.len() >= max && last_cookie != Some(c) {
                break;
            }
            let (ino, kind) = decode_dirent(&v)?;
            out.push(DirEntry {
                cookie: c,
                name: rest[8..].to_vec(),
                ino,
                kind,
            });
            last_cookie = Some(c);
        }
        self.list_int(dir, cookie, max, &mut out)?;
        self.touch_atime(dir, d)?;
        Ok(out)
    }

    /// Renames `name` in `dir` to `new_name` in `new_dir`, atomically, replacing what
    /// `new_name` named unless the flags say otherwise.
    pub fn rename(
        &mut self,
        dir: Ino,
        name: &[u8],
        new_dir: Ino,
        new_name: &[u8],
        flags: RenameFlags,
    ) -> Result<()> {
        if flags.exchange && flags.no_replace {
            return Err(Error::InvalidArgument("exchange and no-replace together"));
        }
        for n in [name, new_name] {
            if n == b"." || n == b".." {
                return Err(Error::InvalidArgument("rename of . or .."));
            }
        }
        check_name(new_name)?;
        self.dir_inode(dir)?;
        let new_parent = self.dir_inode(new_dir)?;
        if new_parent.nlink == 0 {
            return Err(Error::NotFound);
        }
        let (ino, ty) = self.entry(dir, name)?.ok_or(Error::NotFound)?;
        let target = self.entry(new_dir, new_name)?;
        if dir == new_dir && name == new_name {
            return Ok(());
        }
        if target.is_none() && !flags.exchange {
            self.check_not_int_named(new_dir, new_name)?;
        }
        if let Some((t_ino, _)) = target {
            if t_ino == ino && !flags.exchange {
                // Two names of one inode: POSIX says do nothing.
                return Ok(());
            }
        }
        // A directory may not move below itself.
        if ty == FileType::Directory && dir != new_dir && self.is_ancestor(ino, new_dir)? {
            return Err(Error::InvalidArgument("a directory into its own subtree"));
        }
        if flags.exchange {
            let (t_ino, t_ty) = target.ok_or(Error::NotFound)?;
            if t_ty == FileType::Directory && dir != new_dir && self.is_ancestor(t_ino, dir)? {
                return Err(Error::InvalidArgument("a directory into its own subtree"));
            }
            self.ensure_free(0)?;
            return self.exchange(dir, name, (ino, ty), new_dir, new_name, (t_ino, t_ty));
        }
        if let Some((t_ino, t_ty)) = target {
            if flags.no_replace {
                return Err(Error::Exists);
            }
            match (ty == FileType::Directory, t_ty == FileType::Directory) {
                (true, false) => return Err(Error::NotDir),
                (false, true) => return Err(Error::IsDir),
                (true, true) if !self.dir_is_empty(t_ino)? => return Err(Error::NotEmpty),
                _ => {}
            }
        }
        self.ensure_free(0)?;
        let now = self.now();
        self.tree.remove(&dirent_key(dir, name))?;
        let mut np = self.inode(new_dir)?;
        if let Some((t_ino, _)) = target {
            self.drop_link(t_ino, Some(&mut np), now)?;
        }
        self.tree
            .insert(&dirent_key(new_dir, new_name), &encode_dirent(ino, ty))?;
        let mut inode = self.inode(ino)?;
        inode.ctime = now;
        if ty == FileType::Directory && dir != new_dir {
            inode.parent = new_dir;
            np.nlink += 1;
            let mut op = self.inode(dir)?;
            op.nlink = op.nlink.saturating_sub(1);
            op.mtime = now;
            op.ctime = now;
            self.put_inode(dir, &op)?;
        } else if dir != new_dir {
            let mut op = self.inode(dir)?;
            op.mtime = now;
            op.ctime = now;
            self.put_inode(dir, &op)?;
        }
        self.put_inode(ino, &inode)?;
        np.mtime = now;
        np.ctime = now;
        self.put_inode(new_dir, &np)?;
        self.maybe_commit()
    }

    fn exchange(
        &mut self,
        dir: Ino,
        name: &[u8],
        a: (Ino, FileType),
        new_dir: Ino,
        new_name: &[u8],
        b: (Ino, FileType),
    ) -> Result<()> {
        let now = self.now();
        self.tree
            .insert(&dirent_key(dir, name), &encode_dirent(b.0, b.1))?;
        self.tree
            .insert(&dirent_key(new_dir, new_name), &encode_dirent(a.0, a.1))?;
        for (ino, ty, parent) in [(a.0, a.1, new_dir), (b.0, b.1, dir)] {
            let mut inode = self.inode(ino)?;
            inode.ctime = now;
            if ty == FileType::Directory {
                inode.parent = parent;
            }
            self.put_inode(ino, &inode)?;
        }
        let dirs_a = u32::from(a.1 == FileType::Directory);
        let dirs_b = u32::from(b.1 == FileType::Directory);
        for (d, gains, loses) in [(dir, dirs_b, dirs_a), (new_dir, dirs_a, dirs_b)] {
            let mut p = self.inode(d)?;
            if dir != new_dir {
                p.nlink = (p.nlink + gains).saturating_sub(loses);
            }
            p.mtime = now;
            p.ctime = now;
            self.put_inode(d, &p)?;
            if dir == new_dir {
                break;
            }
        }
        self.maybe_commit()
    }

    /// Whether directory `anc` is `dir` or above it.
    fn is_ancestor(&mut self, anc: Ino, mut dir: Ino) -> Result<bool> {
        // Parents always lead to the root; a loop (damage) is cut off by the depth bound.
        for _ in 0..=self.inodes + 1 {
            if dir == anc {
                return Ok(true);
            }
            if dir == ROOT_INO {
                return Ok(false);
            }
            dir = self.inode(dir)?.parent;
        }
        Err(Error::Corrupt("directory parents form a loop"))
    }
}
