//! Record files: files of numbered records, added, updated and removed one at a time
//! (each operation atomic), optionally cyclic.

use core::ffi::{c_char, c_void};

use flashfs::fs::RecordFormat;
use flashfs::Error;

use crate::file::{flashfs_file_t, handle, in_buf, out_buf};
use crate::volume::{c_str, flashfs_t, guard};

/// Longest record, in bytes.
pub const FLASHFS_RECORD_MAX: u32 = 4096;
const _: () = assert!(FLASHFS_RECORD_MAX as usize == flashfs::fs::RECORD_MAX);

/// What a record file holds.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct flashfs_record_info {
    /// Bytes of every record, or 0 for records of any length.
    pub record_size: u32,
    /// Records a cyclic file keeps (0: not cyclic).
    pub capacity: u32,
    /// Number of the oldest record.
    pub first: u64,
    /// Number the next record gets: the file holds records `first` to `next - 1`.
    pub next: u64,
}

/// Creates the record file `path`: records of `record_size` bytes (0: any length up to
/// `FLASHFS_RECORD_MAX`); a cyclic file if `capacity` is not 0 (adding one more record
/// then removes the oldest). Open it with `flashfs_file_open` to work on its records.
#[no_mangle]
pub extern "C" fn flashfs_record_create(
    fs: *mut flashfs_t,
    path: *const c_char,
    record_size: u32,
    capacity: u32,
) -> i32 {
    guard(fs, |h| {
        let path = c_str(path)?;
        let format = RecordFormat {
            record_size,
            capacity,
        };
        h.run(|fs| {
            let (dir, name) = fs.resolve_parent(path)?;
            fs.create_records(dir, name, format, 0o644, 0, 0)
        })?;
        Ok(0)
    }) as i32
}

/// Adds a record of `len` bytes; returns its number.
#[no_mangle]
pub extern "C" fn flashfs_record_add(
    fs: *mut flashfs_t,
    file: *mut flashfs_file_t,
    data: *const c_void,
    len: u32,
) -> i64 {
    guard(fs, |h| {
        let f = handle(file)?;
        let data = in_buf(data, len)?;
        let n = h.run(|fs| fs.record_add(f.ino, data))?;
        i64::try_from(n).map_err(|_| Error::TooBig)
    })
}

/// Reads record `n` into `buf` (up to `len` bytes); returns the record's length.
#[no_mangle]
pub extern "C" fn flashfs_record_read(
    fs: *mut flashfs_t,
    file: *mut flashfs_file_t,
    n: u64,
    buf: *mut c_void,
    len: u32,
) -> i32 {
    guard(fs, |h| {
        let f = handle(file)?;
        let buf = out_buf(buf, len)?;
        let record = h.run(|fs| fs.record_read(f.ino, n))?;
        let k = record.len().min(buf.len());
        buf[..k].copy_from_slice(&record[..k]);
        Ok(record.len() as i64)
    }) as i32
}

/// Replaces record `n` with `len` bytes of `data`.
#[no_mangle]
pub extern "C" fn flashfs_record_update(
    fs: *mut flashfs_t,
    file: *mut flashfs_file_t,
    n: u64,
    data: *const c_void,
    len: u32,
) -> i32 {
    guard(fs, |h| {
        let f = handle(file)?;
        let data = in_buf(data, len)?;
        h.run(|fs| fs.record_update(f.ino, n, data))?;
        Ok(0)
    }) as i32
}

/// Removes the oldest record (`last` false) or the newest (`last` true).
#[no_mangle]
pub extern "C" fn flashfs_record_remove(
    fs: *mut flashfs_t,
    file: *mut flashfs_file_t,
    last: bool,
) -> i32 {
    guard(fs, |h| {
        let f = handle(file)?;
        h.run(|fs| {
            if last {
                fs.record_remove_last(f.ino)
            } else {
                fs.record_remove_first(f.ino)
            }
        })?;
        Ok(0)
    }) as i32
}

/// Fills `*info` with the record file's format and the numbers of its records.
#[no_mangle]
pub extern "C" fn flashfs_record_stat(
    fs: *mut flashfs_t,
    file: *mut flashfs_file_t,
    info: *mut flashfs_record_info,
) -> i32 {
    guard(fs, |h| {
        let f = handle(file)?;
        // SAFETY: a non-null `info` points at a `flashfs_record_info` the caller owns.
        let out = unsafe { info.as_mut() }.ok_or(Error::InvalidArgument("null info"))?;
        let r = h.run(|fs| fs.record_info(f.ino))?;
        *out = flashfs_record_info {
            record_size: r.format.record_size,
            capacity: r.format.capacity,
            first: r.first,
            next: r.next,
        };
        Ok(0)
    }) as i32
}
