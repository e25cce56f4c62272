//! Files through handles the caller allocates: open, read, write, seek, truncate, sync,
//! close.

use core::ffi::{c_char, c_void};

use flashfs::fs::{FileType, SetAttr};
use flashfs::{Error, Result};

use crate::volume::{c_str, flashfs_t, guard, Volume};

/// Open for reading.
pub const FLASHFS_O_RDONLY: i32 = 1;
/// Open for writing.
pub const FLASHFS_O_WRONLY: i32 = 2;
/// Open for reading and writing.
pub const FLASHFS_O_RDWR: i32 = FLASHFS_O_RDONLY | FLASHFS_O_WRONLY;
/// Create the file if it does not exist.
pub const FLASHFS_O_CREAT: i32 = 0x100;
/// With `FLASHFS_O_CREAT`: fail if the file exists.
pub const FLASHFS_O_EXCL: i32 = 0x200;
/// Truncate the file to 0 bytes.
pub const FLASHFS_O_TRUNC: i32 = 0x400;
/// Every write goes to the end of the file.
pub const FLASHFS_O_APPEND: i32 = 0x800;

/// Seek from the start of the file.
pub const FLASHFS_SEEK_SET: i32 = 0;
/// Seek from the current position.
pub const FLASHFS_SEEK_CUR: i32 = 1;
/// Seek from the end of the file.
pub const FLASHFS_SEEK_END: i32 = 2;

/// Marks an open handle (and tells a closed or never opened one apart).
const OPEN: u32 = 0x6f70_656e;
const KNOWN_FLAGS: i32 =
    FLASHFS_O_RDWR | FLASHFS_O_CREAT | FLASHFS_O_EXCL | FLASHFS_O_TRUNC | FLASHFS_O_APPEND;

/// An open file. The caller allocates it (on the stack, statically); its fields are the
/// library's.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct flashfs_file_t {
    /// The file's inode.
    pub ino: u64,
    /// Where the next read or write goes.
    pub pos: u64,
    /// The `FLASHFS_O_*` flags it was opened with.
    pub flags: i32,
    /// Whether it is open.
    pub state: u32,
}

impl flashfs_file_t {
    fn can(&self, flag: i32) -> Result<()> {
        if self.flags & flag == 0 {
            return Err(Error::BadHandle);
        }
        Ok(())
    }
}

/// The open handle argument.
pub(crate) fn handle<'a>(file: *mut flashfs_file_t) -> Result<&'a mut flashfs_file_t> {
    // SAFETY: a non-null handle points at a `flashfs_file_t` the caller owns.
    match unsafe { file.as_mut() } {
        Some(f) if f.state == OPEN => Ok(f),
        Some(_) => Err(Error::BadHandle),
        None => Err(Error::InvalidArgument("null file handle")),
    }
}

fn open(fs: &mut Volume, path: &[u8], flags: i32) -> Result<u64> {
    let (dir, name) = fs.resolve_parent(path)?;
    let attr = match fs.lookup(dir, name) {
        Ok(_) if flags & FLASHFS_O_CREAT != 0 && flags & FLASHFS_O_EXCL != 0 => {
            return Err(Error::Exists)
        }
        Ok(a) => a,
        Err(Error::NotFound) if flags & FLASHFS_O_CREAT != 0 => {
            fs.create(dir, name, 0o644, 0, 0)?
        }
        Err(e) => return Err(e),
    };
    match attr.kind {
        FileType::Regular => {}
        FileType::Directory => return Err(Error::IsDir),
        _ => return Err(Error::InvalidArgument("not a regular file")),
    }
    if flags & FLASHFS_O_TRUNC != 0 && flags & FLASHFS_O_WRONLY != 0 && attr.inode.size > 0 {
        fs.setattr(
            attr.ino,
            SetAttr {
                size: Some(0),
                ..SetAttr::default()
            },
        )?;
    }
    fs.open(attr.ino)?;
    Ok(attr.ino)
}

/// Opens the file at `path` with `FLASHFS_O_*` flags into the caller's `*file`. A created
/// file has mode 0644.
#[no_mangle]
pub extern "C" fn flashfs_file_open(
    fs: *mut flashfs_t,
    file: *mut flashfs_file_t,
    path: *const c_char,
    flags: i32,
) -> i32 {
    guard(fs, |h| {
        if file.is_null() {
            return Err(Error::InvalidArgument("null file handle"));
        }
        if flags & FLASHFS_O_RDWR == 0 || flags & !KNOWN_FLAGS != 0 {
            return Err(Error::InvalidArgument("open flags"));
        }
        let path = c_str(path)?;
        let ino = h.run(|fs| open(fs, path, flags))?;
        // SAFETY: checked non-null; the caller owns it.
        unsafe {
            *file = flashfs_file_t {
                ino,
                pos: 0,
                flags,
                state: OPEN,
            }
        };
        Ok(0)
    }) as i32
}

/// Reads up to `len` bytes at the file's position into `buf`; returns the bytes read (0 at
/// the end of the file).
#[no_mangle]
pub extern "C" fn flashfs_file_read(
    fs: *mut flashfs_t,
    file: *mut flashfs_file_t,
    buf: *mut c_void,
    len: u32,
) -> i32 {
    guard(fs, |h| {
        let f = handle(file)?;
        f.can(FLASHFS_O_RDONLY)?;
        let buf = out_buf(buf, len)?;
        // The count returned must fit.
        let cap = buf.len().min(i32::MAX as usize);
        let buf = &mut buf[..cap];
        let n = h.run(|fs| fs.read(f.ino, f.pos, buf))?;
        f.pos += n as u64;
        Ok(n as i64)
    }) as i32
}

/// Writes `len` bytes of `data` at the file's position (at its end with
/// `FLASHFS_O_APPEND`); returns `len`. Durable once a sync covers it.
#[no_mangle]
pub extern "C" fn flashfs_file_write(
    fs: *mut flashfs_t,
    file: *mut flashfs_file_t,
    data: *const c_void,
    len: u32,
) -> i32 {
    guard(fs, |h| {
        let f = handle(file)?;
        f.can(FLASHFS_O_WRONLY)?;
        let data = in_buf(data, len)?;
        if data.len() > i32::MAX as usize {
            return Err(Error::TooBig);
        }
        let append = f.flags & FLASHFS_O_APPEND != 0;
        let end = h.run(|fs| {
            let at = if append {
                fs.getattr(f.ino)?.inode.size
            } else {
                f.pos
            };
            fs.write(f.ino, at, data)?;
            Ok(at + data.len() as u64)
        })?;
        f.pos = end;
        Ok(data.len() as i64)
    }) as i32
}

/// Moves the file's position to `off` from `whence` (`FLASHFS_SEEK_*`); returns the new
/// position.
#[no_mangle]
pub extern "C" fn flashfs_file_seek(
    fs: *mut flashfs_t,
    file: *mut flashfs_file_t,
    off: i64,
    whence: i32,
) -> i64 {
    guard(fs, |h| {
        let f = handle(file)?;
        let base = match whence {
            FLASHFS_SEEK_SET => 0,
            FLASHFS_SEEK_CUR => f.pos as i64,
            FLASHFS_SEEK_END => h.run(|fs| fs.getattr(f.ino))?.inode.size as i64,
            _ => return Err(Error::InvalidArgument("whence")),
        };
        let pos = base
            .checked_add(off)
            .filter(|p| *p >= 0)
            .ok_or(Error::InvalidArgument("seek before the start of the file"))?;
        f.pos = pos as u64;
        Ok(pos)
    })
}

/// The file's position.
#[no_mangle]
pub extern "C" fn flashfs_file_tell(fs: *mut flashfs_t, file: *mut flashfs_file_t) -> i64 {
    guard(fs, |_| Ok(handle(file)?.pos as i64))
}

/// The file's size in bytes.
#[no_mangle]
pub extern "C" fn flashfs_file_size(fs: *mut flashfs_t, file: *mut flashfs_file_t) -> i64 {
    guard(fs, |h| {
        let f = handle(file)?;
        Ok(h.run(|fs| fs.getattr(f.ino))?.inode.size as i64)
    })
}

/// Cuts the file to `size` bytes, or extends it with zeros.
#[no_mangle]
pub extern "C" fn flashfs_file_truncate(
    fs: *mut flashfs_t,
    file: *mut flashfs_file_t,
    size: u64,
) -> i32 {
    guard(fs, |h| {
        let f = handle(file)?;
        f.can(FLASHFS_O_WRONLY)?;
        let set = SetAttr {
            size: Some(size),
            ..SetAttr::default()
        };
        h.run(|fs| fs.setattr(f.ino, set))?;
        Ok(0)
    }) as i32
}

/// Makes the file's writes durable, with every change before them (a sync is all or
/// nothing). Inside a transaction, its commit does that instead.
#[no_mangle]
pub extern "C" fn flashfs_file_sync(fs: *mut flashfs_t, file: *mut flashfs_file_t) -> i32 {
    guard(fs, |h| {
        let f = handle(file)?;
        if h.tx.is_none() {
            h.fs.fsync(f.ino, false)?;
        }
        Ok(0)
    }) as i32
}

/// Closes the file, syncing it first outside a transaction (as littlefs's close does); the
/// handle is closed even when the sync fails.
#[no_mangle]
pub extern "C" fn flashfs_file_close(fs: *mut flashfs_t, file: *mut flashfs_file_t) -> i32 {
    guard(fs, |h| {
        let f = handle(file)?;
        f.state = 0;
        let ino = f.ino;
        let synced = match h.tx {
            None => h.fs.fsync(ino, false),
            Some(_) => Ok(()),
        };
        // Inside a transaction the file may be one it made, seen only through it.
        let released = h.run(|fs| fs.release(ino));
        synced.and(released)?;
        Ok(0)
    }) as i32
}

/// A caller's output buffer.
pub(crate) fn out_buf<'a>(buf: *mut c_void, len: u32) -> Result<&'a mut [u8]> {
    if len == 0 {
        return Ok(&mut []);
    }
    if buf.is_null() {
        return Err(Error::InvalidArgument("null buffer"));
    }
    // SAFETY: a non-null buffer of `len` bytes the caller owns for the call.
    Ok(unsafe { core::slice::from_raw_parts_mut(buf.cast(), len as usize) })
}

/// A caller's input buffer.
pub(crate) fn in_buf<'a>(data: *const c_void, len: u32) -> Result<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if data.is_null() {
        return Err(Error::InvalidArgument("null buffer"));
    }
    // SAFETY: a non-null buffer of `len` bytes the caller owns for the call.
    Ok(unsafe { core::slice::from_raw_parts(data.cast(), len as usize) })
}
