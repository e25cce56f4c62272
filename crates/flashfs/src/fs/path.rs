//! Paths: resolving `/a/b/c` to inodes, and whole-file helpers for tools.

use alloc::vec::Vec;

use super::layout::{FileType, Ino, ROOT_INO};
use super::namespace::TARGET_MAX;
use super::{Attr, Fs};
use crate::error::{Error, Result};
use crate::media::Segments;

/// Symbolic links followed in one resolution at most (Linux's limit).
const MAX_SYMLINKS: usize = 40;

impl<D: Segments> Fs<D> {
    /// The inode `path` names, from the root; symbolic links are followed in every
    /// component but the last.
    pub fn resolve(&mut self, path: &[u8]) -> Result<Ino> {
        self.resolve_from(ROOT_INO, path, false, &mut 0)
    }

    /// The inode `path` names, following a symbolic link in the last component too.
    pub fn resolve_follow(&mut self, path: &[u8]) -> Result<Ino> {
        self.resolve_from(ROOT_INO, path, true, &mut 0)
    }

    /// The directory that would hold `path`, and the last component's name.
    pub fn resolve_parent<'p>(&mut self, path: &'p [u8]) -> Result<(Ino, &'p [u8])> {
        let trimmed = trim_end(path);
        let (dir, name) = match trimmed.iter().rposition(|&b| b == b'/') {
            Some(i) => (&trimmed[..i], &trimmed[i + 1..]),
            None => (&b""[..], trimmed),
        };
        if name.is_empty() {
            return Err(Error::InvalidArgument("path names no entry"));
        }
        let dir = self.resolve_follow(dir)?;
        Ok((dir, name))
    }

    fn resolve_from(
        &mut self,
        start: Ino,
        path: &[u8],
        follow_last: bool,
        links: &mut usize,
    ) -> Result<Ino> {
        if path.len() > TARGET_MAX {
            return Err(Error::NameTooLong);
        }
        let mut dir = if path.first() == Some(&b'/') {
            ROOT_INO
        } else {
            start
        };
        let parts: Vec<&[u8]> = path
            .split(|&b| b == b'/')
            .filter(|p| !p.is_empty())
            .collect();
        for (i, part) in parts.iter().enumerate() {
            let attr = self.lookup(dir, part)?;
            let last = i + 1 == parts.len();
            if attr.kind == FileType::Symlink && (!last || follow_last) {
                *links += 1;
                if *links > MAX_SYMLINKS {
                    return Err(Error::Loop);
                }
                let target = self.readlink(attr.ino)?;
                dir = self.resolve_from(dir, &target, true, links)?;
            } else {
                dir = attr.ino;
            }
        }
        Ok(dir)
    }

    /// Attributes of what `path` names (not following a last symbolic link, as `lstat`).
    pub fn stat_path(&mut self, path: &[u8]) -> Result<Attr> {
        let ino = self.resolve(path)?;
        self.getattr(ino)
    }

    /// Creates the directory `path` (`mkdir`), mode 0755, owned by root.
    pub fn mkdir_path(&mut self, path: &[u8]) -> Result<Attr> {
        let (dir, name) = self.resolve_parent(path)?;
        self.mkdir(dir, name, 0o755, 0, 0)
    }

    /// Writes a whole file at `path`, creating it (mode 0644) or replacing its content.
    pub fn write_file(&mut self, path: &[u8], data: &[u8]) -> Result<Attr> {
        let (dir, name) = self.resolve_parent(path)?;
        let ino = match self.lookup(dir, name) {
            Ok(a) if a.kind == FileType::Regular => {
                self.setattr(
                    a.ino,
                    super::SetAttr {
                        size: Some(0),
                        ..Default::default()
                    },
                )?;
                a.ino
            }
            Ok(a) if a.kind == FileType::Directory => return Err(Error::IsDir),
            Ok(_) => return Err(Error::InvalidArgument("not a regular file")),
            Err(Error::NotFound) => self.create(dir, name, 0o644, 0, 0)?.ino,
            Err(e) => return Err(e),
        };
        self.write(ino, 0, data)?;
        self.getattr(ino)
    }

    /// The whole content of the file at `path`.
    pub fn read_file(&mut self, path: &[u8]) -> Result<Vec<u8>> {
        let ino = self.resolve_follow(path)?;
        let size = self.getattr(ino)?.inode.size;
        let mut buf = alloc::vec![0; usize::try_from(size).map_err(|_| Error::TooBig)?];
        let n = self.read(ino, 0, &mut buf)?;
        buf.truncate(n);
        Ok(buf)
    }

    /// Removes what `path` names: a file, link or empty directory.
    pub fn remove_path(&mut self, path: &[u8]) -> Result<()> {
        let (dir, name) = self.resolve_parent(path)?;
        match self.lookup(dir, name)?.kind {
            FileType::Directory => self.rmdir(dir, name),
            _ => self.unlink(dir, name),
        }
    }

    /// Renames `from` to `to` (replacing `to`).
    pub fn rename_path(&mut self, from: &[u8], to: &[u8]) -> Result<()> {
        let (d1, n1) = self.resolve_parent(from)?;
        let (d2, n2) = self.resolve_parent(to)?;
        self.rename(d1, n1, d2, n2, Default::default())
    }

    /// Every entry of the directory at `path` but `.` and `..`.
    pub fn list_dir(&mut self, path: &[u8]) -> Result<Vec<super::DirEntry>> {
        let dir = self.resolve_follow(path)?;
        let mut out = Vec::new();
        let mut cookie = super::layout::COOKIE_DOTDOT;
        loop {
            let batch = self.readdir(dir, cookie, 256)?;
            let Some(last) = batch.last() else { break };
            cookie = last.cookie;
            out.extend(batch);
        }
        Ok(out)
    }
}

fn trim_end(p: &[u8]) -> &[u8] {
    let mut end = p.len();
    while end > 1 && p[end - 1] == b'/' {
        end -= 1;
    }
    &p[..end]
}
