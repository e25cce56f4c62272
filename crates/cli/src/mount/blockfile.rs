//! The block device as a file system of one file: `MOUNTPOINT/disk.img`, as long as the
//! device, read and written at any offset (partial sectors by read-modify-write). `fsync`
//! and `close` flush the device; `fallocate --punch-hole` trims the whole sectors in the
//! hole; the size is fixed, so truncation is refused.

use std::ffi::{OsStr, OsString};
use std::sync::MutexGuard;
use std::time::{Duration, SystemTime};

use flashfs::BlockDevice;
use fuser::{
    AccessFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, LockOwner, OpenAccMode, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};

use super::idle::{Idle, IdleThread, Shared};
use super::Volume;
use crate::volume::{AnyFtl, ImageStore};

/// The name of the one file.
pub const FILE_NAME: &str = "disk.img";

const ROOT: INodeNo = INodeNo::ROOT;
const FILE: INodeNo = INodeNo(2);
/// How long the kernel may cache names and attributes.
const TTL: Duration = Duration::from_secs(1);

/// `fallocate` mode bits (linux/falloc.h).
const FALLOC_FL_KEEP_SIZE: i32 = 0x01;
const FALLOC_FL_PUNCH_HOLE: i32 = 0x02;

/// The state behind the file system, shared with the mount that closes it.
struct Disk {
    ftl: AnyFtl<ImageStore>,
    sector: u64,
    size: u64,
    read_only: bool,
    uid: u32,
    gid: u32,
    mtime: SystemTime,
    /// Written since the last flush.
    dirty: bool,
}

impl Disk {
    fn errno(e: flashfs::Error) -> Errno {
        Errno::from_i32(e.errno())
    }

    fn attr(&self, ino: INodeNo) -> FileAttr {
        let (kind, perm, size, nlink) = if ino == ROOT {
            (FileType::Directory, 0o755, 0, 2)
        } else {
            let perm = if self.read_only { 0o444 } else { 0o644 };
            (FileType::RegularFile, perm, self.size, 1)
        };
        FileAttr {
            ino,
            size,
            blocks: size.div_ceil(512),
            atime: self.mtime,
            mtime: self.mtime,
            ctime: self.mtime,
            crtime: self.mtime,
            kind,
            perm,
            nlink,
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: self.sector as u32,
            flags: 0,
        }
    }

    /// Reads `len` bytes at `offset` (at most to the end of the device).
    fn read(&mut self, offset: u64, len: u64) -> Result<Vec<u8>, Errno> {
        let end = offset.saturating_add(len).min(self.size);
        if offset >= end {
            return Ok(Vec::new());
        }
        let ss = self.sector;
        let first = offset / ss;
        let last = (end - 1) / ss;
        let mut buf = vec![0u8; ((last - first + 1) * ss) as usize];
        self.ftl.read(first, &mut buf).map_err(Self::errno)?;
        let from = (offset - first * ss) as usize;
        buf.drain(..from);
        buf.truncate((end - offset) as usize);
        Ok(buf)
    }

    /// Writes `data` at `offset` (what fits before the end of the device); returns the bytes
    /// written.
    fn write(&mut self, offset: u64, data: &[u8]) -> Result<usize, Errno> {
        if self.read_only {
            return Err(Errno::EROFS);
        }
        if data.is_empty() {
            return Ok(0);
        }
        if offset >= self.size {
            return Err(Errno::ENOSPC);
        }
        let end = offset.saturating_add(data.len() as u64).min(self.size);
        let data = &data[..(end - offset) as usize];
        let ss = self.sector;
        let first = offset / ss;
        let last = (end - 1) / ss;
        let mut buf = vec![0u8; ((last - first + 1) * ss) as usize];
        let at = (offset - first * ss) as usize;
        // Read-modify-write of the partial sectors at either end.
        if at != 0 || (first == last && end % ss != 0) {
            self.ftl
                .read(first, &mut buf[..ss as usize])
                .map_err(Self::errno)?;
        }
        if end % ss != 0 && (last != first) {
            let tail = buf.len() - ss as usize;
            self.ftl.read(last, &mut buf[tail..]).map_err(Self::errno)?;
        }
        buf[at..at + data.len()].copy_from_slice(data);
        self.ftl.write(first, &buf).map_err(Self::errno)?;
        self.dirty = true;
        self.mtime = SystemTime::now();
        Ok(data.len())
    }

    /// Zeroes `offset..offset + len`, trimming the whole sectors in it.
    fn punch(&mut self, offset: u64, len: u64) -> Result<(), Errno> {
        if self.read_only {
            return Err(Errno::EROFS);
        }
        let end = offset.saturating_add(len).min(self.size);
        if offset >= end {
            return Ok(());
        }
        let ss = self.sector;
        let whole_first = offset.div_ceil(ss);
        let whole_end = end / ss;
        if whole_first < whole_end {
            self.ftl
                .trim(whole_first, whole_end - whole_first)
                .map_err(Self::errno)?;
            let head = (whole_first * ss).min(end) - offset;
            self.write(offset, &vec![0u8; head as usize])?;
            let tail_from = whole_end * ss;
            self.write(tail_from, &vec![0u8; (end - tail_from) as usize])?;
        } else {
            self.write(offset, &vec![0u8; (end - offset) as usize])?;
        }
        self.dirty = true;
        self.mtime = SystemTime::now();
        Ok(())
    }

    fn flush(&mut self) -> Result<(), Errno> {
        if self.dirty {
            self.ftl.flush().map_err(Self::errno)?;
            self.dirty = false;
        }
        Ok(())
    }
}

impl Idle for Disk {
    fn idle(&mut self, d: Duration) -> flashfs::Result<Duration> {
        self.ftl.idle(d)
    }
}

/// The block device served as one file.
pub struct BlockFile {
    disk: Shared<Disk>,
    name: OsString,
}

/// The mounted block device: the file system the session serves, and what closes it.
pub struct BlockVolume {
    disk: Shared<Disk>,
    read_only: bool,
}

impl BlockVolume {
    /// Serves `ftl` as one file owned by `uid`:`gid`, last modified at `mtime`.
    pub fn new(
        ftl: AnyFtl<ImageStore>,
        read_only: bool,
        uid: u32,
        gid: u32,
        mtime: SystemTime,
    ) -> Self {
        let sector = ftl.sector_size() as u64;
        let size = ftl.sectors() * sector;
        BlockVolume {
            disk: Shared::new(Disk {
                ftl,
                sector,
                size,
                read_only,
                uid,
                gid,
                mtime,
                dirty: false,
            }),
            read_only,
        }
    }
}

impl Volume for BlockVolume {
    type Fs = BlockFile;

    fn filesystem(&self) -> BlockFile {
        BlockFile {
            disk: self.disk.clone(),
            name: OsString::from(FILE_NAME),
        }
    }

    fn idle_thread(&self) -> std::io::Result<Option<IdleThread>> {
        if self.read_only {
            return Ok(None);
        }
        IdleThread::start(self.disk.clone()).map(Some)
    }

    fn close(self) -> anyhow::Result<String> {
        let disk = self
            .disk
            .into_inner()
            .ok_or_else(|| anyhow::anyhow!("the file system is still in use"))?;
        let (space, _) = disk.ftl.usage();
        disk.ftl.close()?;
        Ok(format!(
            "{} of {} in use",
            crate::units::bytes(space.used_bytes),
            crate::units::bytes(space.capacity_bytes)
        ))
    }
}

impl BlockFile {
    fn disk(&self) -> MutexGuard<'_, Disk> {
        self.disk.lock()
    }
}

impl Filesystem for BlockFile {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if parent == ROOT && name == self.name.as_os_str() {
            reply.entry(&TTL, &self.disk().attr(FILE), Generation(0));
        } else {
            reply.error(Errno::ENOENT);
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match ino {
            ROOT | FILE => reply.attr(&TTL, &self.disk().attr(ino)),
            _ => reply.error(Errno::ENOENT),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        if ino != ROOT && ino != FILE {
            return reply.error(Errno::ENOENT);
        }
        let mut disk = self.disk();
        if mode.is_some() || uid.is_some() || gid.is_some() {
            return reply.error(Errno::EPERM);
        }
        if let Some(size) = size {
            // The device has the size it has.
            if ino != FILE || size != disk.size {
                return reply.error(Errno::EPERM);
            }
        }
        if atime.is_some() || mtime.is_some() {
            if disk.read_only {
                return reply.error(Errno::EROFS);
            }
            disk.mtime = match mtime {
                Some(TimeOrNow::SpecificTime(t)) => t,
                _ => SystemTime::now(),
            };
        }
        reply.attr(&TTL, &disk.attr(ino));
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if ino != FILE {
            return reply.error(Errno::EISDIR);
        }
        if self.disk().read_only && flags.acc_mode() != OpenAccMode::O_RDONLY {
            return reply.error(Errno::EROFS);
        }
        reply.opened(FileHandle(0), FopenFlags::empty());
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        if ino != FILE {
            return reply.error(Errno::EISDIR);
        }
        match self.disk().read(offset, size as u64) {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        if ino != FILE {
            return reply.error(Errno::EISDIR);
        }
        match self.disk().write(offset, data) {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        match self.disk().flush() {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let mut disk = self.disk();
        if disk.read_only {
            return reply.ok();
        }
        disk.dirty = false;
        match disk.ftl.sync() {
            Ok(()) => reply.ok(),
            Err(_) => reply.error(Errno::EIO),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        if ino != FILE {
            return reply.error(Errno::EISDIR);
        }
        let mut disk = self.disk();
        let result = if mode == FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE {
            disk.punch(offset, length)
        } else if mode & !FALLOC_FL_KEEP_SIZE == 0 {
            // Allocation: every byte of the device is there already; it cannot grow.
            if offset.saturating_add(length) <= disk.size || mode & FALLOC_FL_KEEP_SIZE != 0 {
                Ok(())
            } else {
                Err(Errno::ENOSPC)
            }
        } else {
            Err(Errno::from_i32(95)) // EOPNOTSUPP
        };
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        if ino != ROOT {
            return reply.error(Errno::ENOTDIR);
        }
        let entries = [
            (ROOT, FileType::Directory, OsStr::new(".")),
            (ROOT, FileType::Directory, OsStr::new("..")),
            (FILE, FileType::RegularFile, self.name.as_os_str()),
        ];
        for (i, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(*ino, i as u64 + 1, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let disk = self.disk();
        let (space, _) = disk.ftl.usage();
        let ss = disk.sector;
        let free = space.free_bytes / ss;
        reply.statfs(
            space.capacity_bytes / ss,
            free,
            free,
            1,
            0,
            ss as u32,
            255,
            ss as u32,
        );
    }

    fn access(&self, _req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        if ino != ROOT && ino != FILE {
            return reply.error(Errno::ENOENT);
        }
        if mask.contains(AccessFlags::W_OK) && self.disk().read_only {
            return reply.error(Errno::EROFS);
        }
        reply.ok();
    }
}
