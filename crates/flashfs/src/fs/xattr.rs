//! Extended attributes: `user.*`, `trusted.*` and `security.*` names, values up to 64 KiB.
//!
//! A value is stored in chunks that fit index leaves, keyed by the attribute's name, a zero
//! byte (names have none) and the chunk number, so a value's chunks are adjacent and in
//! order.

use alloc::vec::Vec;

use super::layout::{item, key, split_key, xattr_chunk_key as chunk_key, xattr_key, Ino};
use super::Fs;
use crate::error::{Error, Result};
use crate::media::Segments;

/// Largest value (Linux's `XATTR_SIZE_MAX`).
pub const XATTR_VALUE_MAX: usize = 65536;

/// How [`Fs::setxattr`] treats an existing attribute.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XattrFlags {
    /// Fail with `Exists` if the attribute exists (`XATTR_CREATE`).
    pub create: bool,
    /// Fail with `NoAttribute` unless it exists (`XATTR_REPLACE`).
    pub replace: bool,
}

fn check(name: &[u8]) -> Result<()> {
    if name.len() > 255 {
        return Err(Error::NameTooLong);
    }
    if name.contains(&0) || name.is_empty() {
        return Err(Error::InvalidArgument("not a valid attribute name"));
    }
    let known = [&b"user."[..], b"trusted.", b"security."];
    if !known
        .iter()
        .any(|p| name.starts_with(p) && name.len() > p.len())
    {
        return Err(Error::Unsupported("attribute namespace"));
    }
    Ok(())
}

impl<D: Segments> Fs<D> {
    /// Keys of the chunks of attribute `name`.
    fn chunks(&mut self, ino: Ino, name: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let lo = chunk_key(ino, name, 0);
        let mut hi = xattr_key(ino, name);
        hi.push(1);
        self.tree.range(lo..hi).collect()
    }

    /// The value of attribute `name`.
    pub fn getxattr(&mut self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        self.inode(ino)?;
        check(name)?;
        let chunks = self.chunks(ino, name)?;
        if chunks.is_empty() {
            return Err(Error::NoAttribute);
        }
        Ok(chunks.into_iter().flat_map(|(_, v)| v).collect())
    }

    /// Sets attribute `name` to `value`.
    pub fn setxattr(
        &mut self,
        ino: Ino,
        name: &[u8],
        value: &[u8],
        flags: XattrFlags,
    ) -> Result<()> {
        let mut inode = self.inode(ino)?;
        check(name)?;
        if value.len() > XATTR_VALUE_MAX {
            return Err(Error::TooBig);
        }
        let old = self.chunks(ino, name)?;
        if flags.create && !old.is_empty() {
            return Err(Error::Exists);
        }
        if flags.replace && old.is_empty() {
            return Err(Error::NoAttribute);
        }
        self.ensure_free(0)?;
        for (k, _) in old {
            self.tree.remove(&k)?;
        }
        let per = self.tree.max_value_len();
        let mut parts: Vec<&[u8]> = value.chunks(per).collect();
        if parts.is_empty() {
            parts.push(&[]);
        }
        for (i, part) in parts.into_iter().enumerate() {
            self.tree.insert(&chunk_key(ino, name, i as u16), part)?;
        }
        inode.ctime = self.now();
        self.put_inode(ino, &inode)?;
        self.maybe_commit()
    }

    /// The names of the inode's attributes.
    pub fn listxattr(&mut self, ino: Ino) -> Result<Vec<Vec<u8>>> {
        self.inode(ino)?;
        let lo = key(ino, item::XATTR);
        let hi = key(ino, item::XATTR + 1);
        let mut names = Vec::new();
        for entry in self.tree.range(lo..hi) {
            let (k, _) = entry?;
            let (_, _, rest) = split_key(&k)?;
            // Only the first chunk names an attribute.
            if let Some(name) = rest.strip_suffix(&[0, 0, 0]) {
                names.push(name.to_vec());
            }
        }
        Ok(names)
    }

    /// Removes attribute `name`.
    pub fn removexattr(&mut self, ino: Ino, name: &[u8]) -> Result<()> {
        let mut inode = self.inode(ino)?;
        check(name)?;
        let old = self.chunks(ino, name)?;
        if old.is_empty() {
            return Err(Error::NoAttribute);
        }
        for (k, _) in old {
            self.tree.remove(&k)?;
        }
        inode.ctime = self.now();
        self.put_inode(ino, &inode)?;
        self.maybe_commit()
    }
}
