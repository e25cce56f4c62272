//! Integer names within directories, and the volume-wide flat namespace of unique names.
//!
//! **Integer names.** A directory may name an inode by a `u32` instead of a string: the entry
//! is keyed by (directory, [`item::INT_DIRENT`], number), so finding it compares no strings.
//! Integer entries are links like any other (they count in the link count, a directory named
//! by one has it as parent). [`Fs::readdir`] lists them after the string entries as `#`
//! and the decimal number (`#123`), with cookies from [`INT_COOKIE_BASE`] up, and
//! [`Fs::lookup`], [`Fs::unlink`] and [`Fs::rmdir`] accept that form, so POSIX tools can
//! show, open and remove them. A string entry spelled like an integer entry's shown name
//! cannot be made while that integer entry exists, nor the other way round, so a listing
//! never shows one name twice. Rename moves string entries only.
//!
//! **Flat names.** Besides the directory tree the volume has one flat namespace of unique
//! names (1 to 255 arbitrary bytes), keyed under the pseudo-inode [`FLAT`] (the orphan
//! list's, with its own item type). A flat name names a non-directory inode and counts as one
//! of its links; an inode may have flat names, directory entries, or both, and goes with its
//! last link (or last close) however its names were made.

use alloc::vec::Vec;

use super::layout::{
    self, decode_dirent, encode_dirent, flat_key, int_dirent_key, item, key, FileType, Ino, Inode,
    FLAT, FLAT_NAME_MAX,
};
use super::namespace::DirEntry;
use super::{Attr, Fs};
use crate::error::{Error, Result};
use crate::media::Segments;

/// Readdir cookie of integer entry 0; entry `n` has `INT_COOKIE_BASE + n`. It is above every
/// string entry's cookie and, with any `n`, below 2⁶³ (a signed directory offset).
pub const INT_COOKIE_BASE: u64 = 0x6000_0000_0000_0000;

/// The name [`Fs::readdir`] shows for integer name `n`: `#` and its decimal digits.
pub fn int_name(n: u32) -> Vec<u8> {
    let mut digits = Vec::new();
    let mut x = n;
    loop {
        digits.push(b'0' + (x % 10) as u8);
        x /= 10;
        if x == 0 {
            break;
        }
    }
    digits.push(b'#');
    digits.reverse();
    digits
}

/// The integer name a shown name stands for: `#` and decimal digits, without leading zeros
/// (so each integer has exactly one spelling).
pub fn parse_int_name(name: &[u8]) -> Option<u32> {
    let digits = name.strip_prefix(b"#")?;
    if digits.is_empty() || digits.len() > 10 || (digits.len() > 1 && digits[0] == b'0') {
        return None;
    }
    let mut n: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        n = n * 10 + u64::from(d - b'0');
    }
    u32::try_from(n).ok()
}

/// Checks a flat name: 1 to [`FLAT_NAME_MAX`] bytes, any bytes.
fn check_flat_name(name: &[u8]) -> Result<()> {
    if name.len() > FLAT_NAME_MAX {
        return Err(Error::NameTooLong);
    }
    if name.is_empty() {
        return Err(Error::InvalidArgument("empty flat name"));
    }
    Ok(())
}

/// The type a creation mode asks for: a regular file (also when the mode has no type),
/// directory, FIFO or socket.
fn creatable(mode: u32) -> Result<FileType> {
    match FileType::from_mode(mode) {
        None if mode & layout::S_IFMT == 0 => Ok(FileType::Regular),
        Some(
            ty @ (FileType::Regular | FileType::Directory | FileType::Fifo | FileType::Socket),
        ) => Ok(ty),
        Some(_) => Err(Error::InvalidArgument(
            "only files, directories, FIFOs and sockets",
        )),
        None => Err(Error::InvalidArgument("unknown file type in mode")),
    }
}

/// The index key of an entry as `fsck` names it: a flat name under [`FLAT`], an integer entry
/// as `/#n` (no string name has a `/`), or a string entry.
pub(super) fn census_key(dir: Ino, name: &[u8]) -> Vec<u8> {
    if dir == FLAT {
        return flat_key(name);
    }
    match name.strip_prefix(b"/").and_then(parse_int_name) {
        Some(n) => int_dirent_key(dir, n),
        None => layout::dirent_key(dir, name),
    }
}

/// How `fsck` names integer entry `n` (see [`census_key`]).
pub(super) fn census_int_name(n: u32) -> Vec<u8> {
    let mut v = alloc::vec![b'/'];
    v.extend_from_slice(&int_name(n));
    v
}

impl<D: Segments> Fs<D> {
    /// Integer entry `n` of `dir`: inode and type.
    fn int_entry(&mut self, dir: Ino, n: u32) -> Result<Option<(Ino, FileType)>> {
        match self.tree.get(&int_dirent_key(dir, n))? {
            Some(v) => decode_dirent(&v).map(Some),
            None => Ok(None),
        }
    }

    /// The integer entry a string name of the form `#n` stands for, if there is one.
    pub(super) fn int_entry_named(
        &mut self,
        dir: Ino,
        name: &[u8],
    ) -> Result<Option<(u32, Ino, FileType)>> {
        let Some(n) = parse_int_name(name) else {
            return Ok(None);
        };
        Ok(self.int_entry(dir, n)?.map(|(ino, ty)| (n, ino, ty)))
    }

    /// Refuses a new string entry `name` that would show like an existing integer entry.
    pub(super) fn check_not_int_named(&mut self, dir: Ino, name: &[u8]) -> Result<()> {
        match self.int_entry_named(dir, name)? {
            Some(_) => Err(Error::Exists),
            None => Ok(()),
        }
    }

    /// Checks that `dir` is a live directory where integer name `n` is free; returns its
    /// inode.
    fn int_slot_free(&mut self, dir: Ino, n: u32) -> Result<Inode> {
        let parent = self.dir_inode(dir)?;
        if parent.nlink == 0 {
            return Err(Error::NotFound);
        }
        if self.int_entry(dir, n)?.is_some() || self.entry(dir, &int_name(n))?.is_some() {
            return Err(Error::Exists);
        }
        Ok(parent)
    }

    /// Creates an inode named by integer `n` in `dir`: a regular file, directory, FIFO or
    /// socket as `mode`'s type bits say (none: a regular file). `Exists` if `n` is taken, or
    /// if a string entry is spelled as `n` is shown (`#n`).
    pub fn create_int(&mut self, dir: Ino, n: u32, mode: u32, uid: u32, gid: u32) -> Result<Attr> {
        let ty = creatable(mode)?;
        let parent = self.int_slot_free(dir, n)?;
        let attr = self.add_new_entry(
            (dir, parent),
            &int_dirent_key(dir, n),
            ty,
            mode,
            0,
            (uid, gid),
        )?;
        self.maybe_commit()?;
        Ok(attr)
    }

    /// Looks integer name `n` up in `dir`.
    pub fn lookup_int(&mut self, dir: Ino, n: u32) -> Result<Attr> {
        self.dir_inode(dir)?;
        let (ino, _) = self.int_entry(dir, n)?.ok_or(Error::NotFound)?;
        self.getattr(ino)
    }

    /// Gives inode `ino` (not a directory) the integer name `n` in `dir` (a hard link).
    pub fn link_int(&mut self, ino: Ino, dir: Ino, n: u32) -> Result<Attr> {
        let inode = self.inode(ino)?;
        let ty = inode.file_type()?;
        if ty == FileType::Directory {
            return Err(Error::NotPermitted("hard link to a directory"));
        }
        let parent = self.int_slot_free(dir, n)?;
        self.add_link(
            (ino, inode, ty),
            Some((dir, parent)),
            &int_dirent_key(dir, n),
        )
    }

    /// Removes integer name `n` from `dir`: a non-directory (which goes with its last link
    /// or last close) or an empty directory.
    pub fn remove_int(&mut self, dir: Ino, n: u32) -> Result<()> {
        self.dir_inode(dir)?;
        let (ino, ty) = self.int_entry(dir, n)?.ok_or(Error::NotFound)?;
        self.remove_int_entry(dir, n, ino, ty)
    }

    /// Removes what `unlink` (`want_dir` false) or `rmdir` (true) of the string name `#n`
    /// means when no string entry has that name: integer entry `n`.
    pub(super) fn remove_int_named(&mut self, dir: Ino, name: &[u8], want_dir: bool) -> Result<()> {
        let (n, ino, ty) = self.int_entry_named(dir, name)?.ok_or(Error::NotFound)?;
        match (want_dir, ty == FileType::Directory) {
            (false, true) => Err(Error::IsDir),
            (true, false) => Err(Error::NotDir),
            _ => self.remove_int_entry(dir, n, ino, ty),
        }
    }

    fn remove_int_entry(&mut self, dir: Ino, n: u32, ino: Ino, ty: FileType) -> Result<()> {
        if ty == FileType::Directory && !self.dir_is_empty(ino)? {
            return Err(Error::NotEmpty);
        }
        let now = self.now();
        self.tree.remove(&int_dirent_key(dir, n))?;
        let mut parent = self.inode(dir)?;
        self.drop_link(ino, Some(&mut parent), now)?;
        parent.mtime = now;
        parent.ctime = now;
        self.put_inode(dir, &parent)?;
        self.maybe_commit()
    }

    /// Appends the integer entries of `dir` after `cookie` to a listing, up to `max` entries
    /// in all.
    pub(super) fn list_int(
        &mut self,
        dir: Ino,
        cookie: u64,
        max: usize,
        out: &mut Vec<DirEntry>,
    ) -> Result<()> {
        if out.len() >= max {
            return Ok(());
        }
        let from = match cookie.checked_sub(INT_COOKIE_BASE) {
            None => 0,
            Some(n) if n >= u64::from(u32::MAX) => return Ok(()),
            Some(n) => n as u32 + 1,
        };
        let lo = int_dirent_key(dir, from);
        let hi = key(dir, item::INT_DIRENT + 1);
        for entry in self.tree.range(lo..hi) {
            let (k, v) = entry?;
            let (_, _, rest) = layout::split_key(&k)?;
            let n = layout::int_dirent_name(rest)?;
            let (ino, kind) = decode_dirent(&v)?;
            out.push(DirEntry {
                cookie: INT_COOKIE_BASE + u64::from(n),
                name: int_name(n),
                ino,
                kind,
            });
            if out.len() >= max {
                break;
            }
        }
        Ok(())
    }

    /// The inode flat name `name` names, and its type.
    fn flat_entry(&mut self, name: &[u8]) -> Result<Option<(Ino, FileType)>> {
        check_flat_name(name)?;
        match self.tree.get(&flat_key(name))? {
            Some(v) => decode_dirent(&v).map(Some),
            None => Ok(None),
        }
    }

    /// Creates a regular file (or FIFO or socket, as `mode`'s type bits say) named only by
    /// the flat name `name`, unique on the volume: `Exists` if it is taken.
    pub fn flat_create(&mut self, name: &[u8], mode: u32, uid: u32, gid: u32) -> Result<Attr> {
        let ty = creatable(mode)?;
        if ty == FileType::Directory {
            return Err(Error::InvalidArgument("a flat name names no directory"));
        }
        if self.flat_entry(name)?.is_some() {
            return Err(Error::Exists);
        }
        self.ensure_free(0)?;
        let (ino, inode) = self.make_inode(ty, mode, 0, uid, gid, 0)?;
        self.tree.insert(&flat_key(name), &encode_dirent(ino, ty))?;
        self.maybe_commit()?;
        self.attr(ino, inode)
    }

    /// Gives inode `ino` (not a directory) the flat name `name` as one more link.
    pub fn flat_link(&mut self, name: &[u8], ino: Ino) -> Result<Attr> {
        let inode = self.inode(ino)?;
        let ty = inode.file_type()?;
        if ty == FileType::Directory {
            return Err(Error::NotPermitted("a flat name for a directory"));
        }
        if self.flat_entry(name)?.is_some() {
            return Err(Error::Exists);
        }
        self.add_link((ino, inode, ty), None, &flat_key(name))
    }

    /// The inode flat name `name` names.
    pub fn flat_lookup(&mut self, name: &[u8]) -> Result<Attr> {
        let (ino, _) = self.flat_entry(name)?.ok_or(Error::NotFound)?;
        self.getattr(ino)
    }

    /// Removes flat name `name`; the inode goes with its last link, or its last close.
    pub fn flat_remove(&mut self, name: &[u8]) -> Result<()> {
        let (ino, _) = self.flat_entry(name)?.ok_or(Error::NotFound)?;
        let now = self.now();
        self.tree.remove(&flat_key(name))?;
        self.drop_link(ino, None, now)?;
        self.maybe_commit()
    }

    /// Flat names after `after` (in byte order; empty: from the first), at most `max`, with
    /// the inodes they name.
    pub fn flat_list(&mut self, after: &[u8], max: usize) -> Result<Vec<(Vec<u8>, Ino)>> {
        let mut lo = flat_key(after);
        if !after.is_empty() {
            lo.push(0);
        }
        let hi = key(FLAT, item::FLAT_NAME + 1);
        let mut out = Vec::new();
        for entry in self.tree.range(lo..hi) {
            if out.len() >= max {
                break;
            }
            let (k, v) = entry?;
            let (_, _, rest) = layout::split_key(&k)?;
            out.push((layout::flat_name(rest)?.to_vec(), decode_dirent(&v)?.0));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_names_have_one_spelling() {
        for n in [0, 7, 10, 123, u32::MAX] {
            assert_eq!(parse_int_name(&int_name(n)), Some(n));
        }
        assert_eq!(int_name(123), b"#123");
        for bad in [
            &b"#"[..],
            b"#01",
            b"123",
            b"#4294967296",
            b"#1a",
            b"#-1",
            b"#99999999999",
        ] {
            assert_eq!(parse_int_name(bad), None, "{bad:?}");
        }
        assert_eq!(census_key(5, &census_int_name(9)), int_dirent_key(5, 9));
        assert_eq!(census_key(5, b"#9"), layout::dirent_key(5, b"#9"));
    }
}
