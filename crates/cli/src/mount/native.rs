//! The native file system served through FUSE: every request becomes one call of
//! [`flashfs::Fs`] under one lock, and every error reaches the caller as its errno.
//!
//! Inode numbers are the file system's own (the root is 1 in both). Open files are counted
//! by the file system ([`Fs::open`]/[`Fs::release`]), so a file unlinked while open keeps
//! its data until its last close. Directory offsets are the file system's readdir cookies,
//! so a listing resumed after changes neither repeats nor skips entries. The kernel checks
//! permissions (`default_permissions`); a read-only mount refuses every change with EROFS.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::MutexGuard;
use std::time::{Duration, SystemTime};

use flashfs::fs::{Attr, RenameFlags, SetAttr, SetTime, XattrFlags};
use flashfs::Fs;
use fuser::{
    AccessFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, KernelConfig, LockOwner, OpenAccMode, OpenFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr,
    Request, TimeOrNow, WriteFlags,
};

use super::idle::{Idle, IdleThread, Shared};
use super::Volume;
use crate::native;
use crate::units;
use crate::volume::Medium;

/// How long the kernel may cache names and attributes. Every change goes through this
/// process, which answers with the new attributes, so the cache is never stale for long.
const TTL: Duration = Duration::from_secs(1);

/// Largest write the kernel sends in one request.
const MAX_WRITE: u32 = 1 << 20;

/// Directory entries fetched from the index per step of a listing.
const DIR_BATCH: usize = 128;

/// `setxattr` flags (linux/xattr.h).
const XATTR_CREATE: i32 = 1;
const XATTR_REPLACE: i32 = 2;

/// The state behind the file system, shared with the mount that closes it.
struct State<D: Medium> {
    fs: Fs<D>,
    read_only: bool,
}

impl<D: Medium> Idle for State<D> {
    fn idle(&mut self, d: Duration) -> flashfs::Result<Duration> {
        self.fs.idle(d)
    }
}

/// The native file system as the session serves it.
pub struct NativeFs<D: Medium> {
    state: Shared<State<D>>,
}

/// The mounted native file system: what the session serves, and what closes it.
pub struct NativeVolume<D: Medium> {
    state: Shared<State<D>>,
    read_only: bool,
}

impl<D: Medium> NativeVolume<D> {
    /// Serves `fs`; read-only refuses every change.
    pub fn new(fs: Fs<D>, read_only: bool) -> Self {
        NativeVolume {
            state: Shared::new(State { fs, read_only }),
            read_only,
        }
    }
}

impl<D: Medium> Volume for NativeVolume<D>
where
    D::Store: Send,
{
    type Fs = NativeFs<D>;

    fn filesystem(&self) -> NativeFs<D> {
        NativeFs {
            state: self.state.clone(),
        }
    }

    fn idle_thread(&self) -> std::io::Result<Option<IdleThread>> {
        if self.read_only {
            return Ok(None);
        }
        IdleThread::start(self.state.clone()).map(Some)
    }

    fn close(self) -> anyhow::Result<String> {
        let state = self
            .state
            .into_inner()
            .ok_or_else(|| anyhow::anyhow!("the file system is still in use"))?;
        let mut fs = state.fs;
        let st = fs.statfs();
        let bs = u64::from(st.block_size);
        let summary = format!(
            "{} of {} in use, {} inode{}",
            units::bytes((st.blocks - st.blocks_free) * bs),
            units::bytes(st.blocks * bs),
            units::count(st.files),
            crate::device::plural(st.files)
        );
        if state.read_only {
            // Nothing to keep: a read-only mount never changed the image.
            drop(fs.into_device().into_images());
        } else {
            fs.sync()?;
            native::close(fs)?;
        }
        Ok(summary)
    }
}

fn errno(e: flashfs::Error) -> Errno {
    Errno::from_i32(e.errno())
}

fn kind(k: flashfs::fs::FileType) -> FileType {
    use flashfs::fs::FileType as K;
    match k {
        K::Regular => FileType::RegularFile,
        K::Directory => FileType::Directory,
        K::Symlink => FileType::Symlink,
        K::Fifo => FileType::NamedPipe,
        K::Socket => FileType::Socket,
        K::CharDevice => FileType::CharDevice,
        K::BlockDevice => FileType::BlockDevice,
    }
}

fn file_attr(a: &Attr) -> FileAttr {
    let i = &a.inode;
    FileAttr {
        ino: INodeNo(a.ino),
        size: i.size,
        blocks: i.blocks * u64::from(a.block_size) / 512,
        atime: native::system_time(i.atime),
        mtime: native::system_time(i.mtime),
        ctime: native::system_time(i.ctime),
        crtime: native::system_time(i.ctime),
        kind: kind(a.kind),
        perm: (i.mode & 0o7777) as u16,
        nlink: i.nlink,
        uid: i.uid,
        gid: i.gid,
        rdev: i.rdev as u32,
        blksize: a.block_size,
        flags: 0,
    }
}

fn set_time(t: TimeOrNow) -> SetTime {
    match t {
        TimeOrNow::Now => SetTime::Now,
        TimeOrNow::SpecificTime(t) => SetTime::At(native::timespec(t)),
    }
}

impl<D: Medium> NativeFs<D> {
    fn state(&self) -> MutexGuard<'_, State<D>> {
        self.state.lock()
    }

    /// The file system, for a change: EROFS on a read-only mount.
    fn writable(&self) -> Result<MutexGuard<'_, State<D>>, Errno> {
        let s = self.state();
        if s.read_only {
            return Err(Errno::EROFS);
        }
        Ok(s)
    }

    fn entry(reply: ReplyEntry, r: Result<Attr, Errno>) {
        match r {
            Ok(a) => reply.entry(&TTL, &file_attr(&a), Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn empty(reply: ReplyEmpty, r: Result<(), Errno>) {
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}

impl<D: Medium> Filesystem for NativeFs<D>
where
    D::Store: Send,
{
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_write(MAX_WRITE);
        // Writes gather in the kernel's page cache and come in large requests: one call of
        // the file system per megabyte rather than per 4 KiB. The kernel then keeps sizes
        // and times of files being written, and sends them with the data.
        if !self.state().read_only {
            let _ = config.add_capabilities(fuser::InitFlags::FUSE_WRITEBACK_CACHE);
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let r = self.state().fs.lookup(parent.0, name.as_bytes());
        Self::entry(reply, r.map_err(errno));
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.state().fs.getattr(ino.0) {
            Ok(a) => reply.attr(&TTL, &file_attr(&a)),
            Err(e) => reply.error(errno(e)),
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
        let set = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime: atime.map(set_time),
            mtime: mtime.map(set_time),
        };
        let r = self
            .writable()
            .and_then(|mut s| s.fs.setattr(ino.0, set).map_err(errno));
        match r {
            Ok(a) => reply.attr(&TTL, &file_attr(&a)),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.state().fs.readlink(ino.0) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let r = self.writable().and_then(|mut s| {
            s.fs.mknod(
                parent.0,
                name.as_bytes(),
                mode & !(umask & 0o777),
                u64::from(rdev),
                req.uid(),
                req.gid(),
            )
            .map_err(errno)
        });
        Self::entry(reply, r);
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let r = self.writable().and_then(|mut s| {
            s.fs.mkdir(
                parent.0,
                name.as_bytes(),
                mode & !umask & 0o7777,
                req.uid(),
                req.gid(),
            )
            .map_err(errno)
        });
        Self::entry(reply, r);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = self
            .writable()
            .and_then(|mut s| s.fs.unlink(parent.0, name.as_bytes()).map_err(errno));
        Self::empty(reply, r);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = self
            .writable()
            .and_then(|mut s| s.fs.rmdir(parent.0, name.as_bytes()).map_err(errno));
        Self::empty(reply, r);
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let r = self.writable().and_then(|mut s| {
            s.fs.symlink(
                parent.0,
                link_name.as_bytes(),
                target.as_os_str().as_bytes(),
                req.uid(),
                req.gid(),
            )
            .map_err(errno)
        });
        Self::entry(reply, r);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: fuser::RenameFlags,
        reply: ReplyEmpty,
    ) {
        use fuser::RenameFlags as F;
        if flags.intersects(!(F::RENAME_NOREPLACE | F::RENAME_EXCHANGE)) {
            return reply.error(Errno::EINVAL);
        }
        let how = RenameFlags {
            no_replace: flags.contains(F::RENAME_NOREPLACE),
            exchange: flags.contains(F::RENAME_EXCHANGE),
        };
        let r = self.writable().and_then(|mut s| {
            s.fs.rename(
                parent.0,
                name.as_bytes(),
                newparent.0,
                newname.as_bytes(),
                how,
            )
            .map_err(errno)
        });
        Self::empty(reply, r);
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let r = self.writable().and_then(|mut s| {
            s.fs.link(ino.0, newparent.0, newname.as_bytes())
                .map_err(errno)
        });
        Self::entry(reply, r);
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let mut s = self.state();
        if s.read_only && flags.acc_mode() != OpenAccMode::O_RDONLY {
            return reply.error(Errno::EROFS);
        }
        match s.fs.open(ino.0) {
            Ok(_) => reply.opened(FileHandle(ino.0), FopenFlags::empty()),
            Err(e) => reply.error(errno(e)),
        }
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
        let mut buf = vec![0u8; size as usize];
        let r = self.state().fs.read(ino.0, offset, &mut buf);
        match r {
            Ok(n) => reply.data(&buf[..n]),
            Err(e) => reply.error(errno(e)),
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
        // The kernel gives appends the offset of the end of the file, under its inode lock.
        let r = self
            .writable()
            .and_then(|mut s| s.fs.write(ino.0, offset, data).map_err(errno));
        match r {
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
        // Every write is in the file system already; `fsync` makes it durable.
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let r = self.state().fs.release(ino.0).map_err(errno);
        Self::empty(reply, r);
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        let mut s = self.state();
        if s.read_only {
            return reply.ok();
        }
        let r = s.fs.fsync(ino.0, datasync).map_err(errno).and_then(|()| {
            s.fs.ftl_mut()
                .log_mut()
                .device_mut()
                .sync_image()
                .map_err(|_| Errno::EIO)
        });
        Self::empty(reply, r);
    }

    fn fsyncdir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.fsync(req, ino, fh, datasync, reply);
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.state().fs.getattr(ino.0) {
            Ok(a) if a.kind == flashfs::fs::FileType::Directory => {
                reply.opened(FileHandle(ino.0), FopenFlags::empty())
            }
            Ok(_) => reply.error(Errno::ENOTDIR),
            Err(e) => reply.error(errno(e)),
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
        let mut s = self.state();
        let mut cookie = offset;
        loop {
            let batch = match s.fs.readdir(ino.0, cookie, DIR_BATCH) {
                Ok(b) => b,
                Err(e) => return reply.error(errno(e)),
            };
            if batch.is_empty() {
                break;
            }
            for e in batch {
                if reply.add(
                    INodeNo(e.ino),
                    e.cookie,
                    kind(e.kind),
                    OsStr::from_bytes(&e.name),
                ) {
                    return reply.ok();
                }
                cookie = e.cookie;
            }
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let st = self.state().fs.statfs();
        reply.statfs(
            st.blocks,
            st.blocks_free,
            st.blocks_free,
            st.files + st.files_free,
            st.files_free,
            st.block_size,
            st.name_max,
            st.block_size,
        );
    }

    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
        reply: ReplyEmpty,
    ) {
        if position != 0 {
            return reply.error(Errno::EINVAL);
        }
        let how = XattrFlags {
            create: flags & XATTR_CREATE != 0,
            replace: flags & XATTR_REPLACE != 0,
        };
        let r = self.writable().and_then(|mut s| {
            s.fs.setxattr(ino.0, name.as_bytes(), value, how)
                .map_err(xattr_errno)
        });
        Self::empty(reply, r);
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        match self.state().fs.getxattr(ino.0, name.as_bytes()) {
            Ok(v) => xattr_reply(reply, &v, size),
            Err(e) => reply.error(xattr_errno(e)),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        match self.state().fs.listxattr(ino.0) {
            Ok(names) => {
                let mut list = Vec::new();
                for n in names {
                    list.extend_from_slice(&n);
                    list.push(0);
                }
                xattr_reply(reply, &list, size);
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = self.writable().and_then(|mut s| {
            s.fs.removexattr(ino.0, name.as_bytes())
                .map_err(xattr_errno)
        });
        Self::empty(reply, r);
    }

    fn access(&self, _req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        // Permissions are the kernel's (default_permissions); what is left is existence
        // and a read-only mount.
        let s = &mut *self.state();
        match s.fs.getattr(ino.0) {
            Ok(_) if mask.contains(AccessFlags::W_OK) && s.read_only => reply.error(Errno::EROFS),
            Ok(_) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let r = self.writable().and_then(|mut s| {
            let a =
                s.fs.mknod(
                    parent.0,
                    name.as_bytes(),
                    mode & !(umask & 0o777),
                    0,
                    req.uid(),
                    req.gid(),
                )
                .map_err(errno)?;
            s.fs.open(a.ino).map_err(errno)
        });
        match r {
            Ok(a) => reply.created(
                &TTL,
                &file_attr(&a),
                Generation(0),
                FileHandle(a.ino),
                FopenFlags::empty(),
            ),
            Err(e) => reply.error(e),
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
        let r = self.writable().and_then(|mut s| {
            s.fs.fallocate(ino.0, mode as u32, offset, length)
                .map_err(errno)
        });
        Self::empty(reply, r);
    }
}

/// An attribute's errors: too large a value is E2BIG here (EFBIG is for files).
fn xattr_errno(e: flashfs::Error) -> Errno {
    match e {
        flashfs::Error::TooBig => Errno::from_i32(7), // E2BIG
        e => errno(e),
    }
}

/// The size-probe protocol: a request of size 0 asks for the size; a buffer too small is
/// ERANGE.
fn xattr_reply(reply: ReplyXattr, value: &[u8], size: u32) {
    if size == 0 {
        reply.size(value.len() as u32);
    } else if value.len() > size as usize {
        reply.error(Errno::ERANGE);
    } else {
        reply.data(value);
    }
}
