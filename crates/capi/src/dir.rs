//! Directories and names: mkdir, remove, rename, stat, and listing through handles the
//! caller allocates.

use core::ffi::c_char;

use flashfs::fs::{Attr, FileType, NAME_MAX};
use flashfs::Error;

use crate::volume::{c_str, flashfs_t, guard};

/// Longest name, in bytes (without the terminating NUL).
pub const FLASHFS_NAME_MAX: u32 = 255;
// The name field holds the longest name and its NUL (a literal length for the header).
const _: () = assert!(FLASHFS_NAME_MAX as usize == NAME_MAX && NAME_MAX + 1 == 256);
/// `flashfs_info::kind`: a regular file.
pub const FLASHFS_TYPE_REG: u8 = 1;
/// `flashfs_info::kind`: a directory.
pub const FLASHFS_TYPE_DIR: u8 = 2;
/// `flashfs_info::kind`: anything else (a symbolic link, a device node made by other
/// tools).
pub const FLASHFS_TYPE_OTHER: u8 = 3;

/// What a name refers to.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct flashfs_info {
    /// `FLASHFS_TYPE_*`.
    pub kind: u8,
    /// Bytes (a directory: 0).
    pub size: u64,
    /// Last change of the content, seconds since 1970 (the epoch where the firmware has
    /// no clock).
    pub mtime: i64,
    /// The name, NUL-terminated (empty from `flashfs_stat`).
    pub name: [c_char; 256],
}

impl flashfs_info {
    fn new(attr: &Attr, name: &[u8]) -> Self {
        let mut info = flashfs_info {
            kind: match attr.kind {
                FileType::Regular => FLASHFS_TYPE_REG,
                FileType::Directory => FLASHFS_TYPE_DIR,
                _ => FLASHFS_TYPE_OTHER,
            },
            size: if attr.kind == FileType::Directory {
                0
            } else {
                attr.inode.size
            },
            mtime: attr.inode.mtime.sec,
            name: [0; 256],
        };
        for (d, &s) in info.name.iter_mut().zip(name.iter().take(NAME_MAX)) {
            *d = s as c_char;
        }
        info
    }
}

fn info_out<'a>(info: *mut flashfs_info) -> Result<&'a mut flashfs_info, Error> {
    // SAFETY: a non-null `info` points at a `flashfs_info` the caller owns.
    unsafe { info.as_mut() }.ok_or(Error::InvalidArgument("null info"))
}

/// Makes the directory `path`.
#[no_mangle]
pub extern "C" fn flashfs_mkdir(fs: *mut flashfs_t, path: *const c_char) -> i32 {
    guard(fs, |h| {
        let path = c_str(path)?;
        h.run(|fs| fs.mkdir_path(path))?;
        Ok(0)
    }) as i32
}

/// Removes the file or empty directory `path`. An open file keeps its data until closed.
#[no_mangle]
pub extern "C" fn flashfs_remove(fs: *mut flashfs_t, path: *const c_char) -> i32 {
    guard(fs, |h| {
        let path = c_str(path)?;
        h.run(|fs| fs.remove_path(path))?;
        Ok(0)
    }) as i32
}

/// Renames `from` to `to`, replacing what `to` named (an empty directory by a directory, a
/// file by a file), atomically.
#[no_mangle]
pub extern "C" fn flashfs_rename(
    fs: *mut flashfs_t,
    from: *const c_char,
    to: *const c_char,
) -> i32 {
    guard(fs, |h| {
        let (from, to) = (c_str(from)?, c_str(to)?);
        h.run(|fs| fs.rename_path(from, to))?;
        Ok(0)
    }) as i32
}

/// Fills `*info` with what `path` names.
#[no_mangle]
pub extern "C" fn flashfs_stat(
    fs: *mut flashfs_t,
    path: *const c_char,
    info: *mut flashfs_info,
) -> i32 {
    guard(fs, |h| {
        let path = c_str(path)?;
        let out = info_out(info)?;
        let attr = h.run(|fs| fs.stat_path(path))?;
        *out = flashfs_info::new(&attr, b"");
        Ok(0)
    }) as i32
}

/// Marks an open directory handle.
const OPEN: u32 = 0x6469_7273;

/// An open directory. The caller allocates it; its fields are the library's.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct flashfs_dir_t {
    /// The directory's inode.
    pub ino: u64,
    /// Where the listing goes on.
    pub cookie: u64,
    /// Whether it is open.
    pub state: u32,
}

/// Opens the directory `path` for listing into the caller's `*dir`.
#[no_mangle]
pub extern "C" fn flashfs_dir_open(
    fs: *mut flashfs_t,
    dir: *mut flashfs_dir_t,
    path: *const c_char,
) -> i32 {
    guard(fs, |h| {
        if dir.is_null() {
            return Err(Error::InvalidArgument("null directory handle"));
        }
        let path = c_str(path)?;
        let attr = h.run(|fs| {
            let ino = fs.resolve_follow(path)?;
            fs.getattr(ino)
        })?;
        if attr.kind != FileType::Directory {
            return Err(Error::NotDir);
        }
        // SAFETY: checked non-null; the caller owns it.
        unsafe {
            *dir = flashfs_dir_t {
                ino: attr.ino,
                cookie: 0,
                state: OPEN,
            }
        };
        Ok(0)
    }) as i32
}

/// Reads the directory's next entry into `*info` (`.` and `..` first); returns 1, or 0
/// after the last entry.
#[no_mangle]
pub extern "C" fn flashfs_dir_read(
    fs: *mut flashfs_t,
    dir: *mut flashfs_dir_t,
    info: *mut flashfs_info,
) -> i32 {
    guard(fs, |h| {
        // SAFETY: a non-null handle points at a `flashfs_dir_t` the caller owns.
        let d = match unsafe { dir.as_mut() } {
            Some(d) if d.state == OPEN => d,
            Some(_) => return Err(Error::BadHandle),
            None => return Err(Error::InvalidArgument("null directory handle")),
        };
        let out = info_out(info)?;
        let (ino, cookie) = (d.ino, d.cookie);
        let next = h.run(|fs| {
            let Some(e) = fs.readdir(ino, cookie, 1)?.pop() else {
                return Ok(None);
            };
            let attr = fs.getattr(e.ino)?;
            Ok(Some((e.cookie, flashfs_info::new(&attr, &e.name))))
        })?;
        match next {
            Some((cookie, entry)) => {
                d.cookie = cookie;
                *out = entry;
                Ok(1)
            }
            None => Ok(0),
        }
    }) as i32
}

/// Closes a directory handle.
#[no_mangle]
pub extern "C" fn flashfs_dir_close(fs: *mut flashfs_t, dir: *mut flashfs_dir_t) -> i32 {
    guard(fs, |_| {
        // SAFETY: a non-null handle points at a `flashfs_dir_t` the caller owns.
        match unsafe { dir.as_mut() } {
            Some(d) if d.state == OPEN => {
                d.state = 0;
                Ok(0)
            }
            Some(_) => Err(Error::BadHandle),
            None => Err(Error::InvalidArgument("null directory handle")),
        }
    }) as i32
}
