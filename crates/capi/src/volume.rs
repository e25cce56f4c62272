//! The mounted volume behind a `flashfs_t *`: format, mount, unmount, sync, and the guard
//! every entry point runs its work in.

use alloc::boxed::Box;
use core::ffi::{c_char, CStr};

use flashfs::fs::Tid;
use flashfs::{Error, Fs, NandSegments, NorSegments, Result, Segments};

use crate::config::{flashfs_config, Part};
use crate::device::{CNand, CNor};
use crate::error::flashfs_error::{FLASHFS_ERR_INVAL, FLASHFS_ERR_IO};
use crate::error::{code, message};

/// The file system, on NOR or NAND as the configuration says: one instantiation of it
/// whatever the medium (a generic one per medium would put two copies in the firmware).
pub(crate) type Volume = Fs<Box<dyn Segments>>;

/// A mounted volume. Opaque: made by `flashfs_mount`, freed by `flashfs_unmount`.
pub struct flashfs_t {
    pub(crate) fs: Volume,
    /// The transaction operations run in (`flashfs_tx_begin`).
    pub(crate) tx: Option<Tid>,
    /// A panic was caught inside an operation: the volume's state in RAM is not trusted.
    poisoned: bool,
}

impl flashfs_t {
    /// Runs `f` on the file system, inside the current transaction if there is one.
    pub(crate) fn run<R>(&mut self, f: impl FnOnce(&mut Volume) -> Result<R>) -> Result<R> {
        match self.tx {
            Some(tid) => self.fs.in_tx(tid, f),
            None => f(&mut self.fs),
        }
    }
}

/// Runs `f`, catching a panic where the platform unwinds.
#[cfg(feature = "std")]
fn catch<R>(f: impl FnOnce() -> R) -> Option<R> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok()
}

/// Without `std` a panic aborts (firmware builds with `panic = "abort"`).
#[cfg(not(feature = "std"))]
fn catch<R>(f: impl FnOnce() -> R) -> Option<R> {
    Some(f())
}

/// Runs an entry point's work on the volume `h`: a null handle is invalid, a poisoned one
/// fails, a panic poisons it; errors become negative errno values.
pub(crate) fn guard(h: *mut flashfs_t, f: impl FnOnce(&mut flashfs_t) -> Result<i64>) -> i64 {
    // SAFETY: a handle is null or one `flashfs_mount` made and `flashfs_unmount` did not
    // free, used by one thread at a time (the API's contract).
    let Some(h) = (unsafe { h.as_mut() }) else {
        return FLASHFS_ERR_INVAL.code().into();
    };
    if h.poisoned {
        return FLASHFS_ERR_IO.code().into();
    }
    match catch(|| f(&mut *h)) {
        Some(Ok(v)) => v,
        Some(Err(e)) => code(&e).into(),
        None => {
            h.poisoned = true;
            FLASHFS_ERR_IO.code().into()
        }
    }
}

/// As `guard`, for entry points without a volume.
fn guard_config(f: impl FnOnce() -> Result<i64>) -> i64 {
    match catch(f) {
        Some(Ok(v)) => v,
        Some(Err(e)) => code(&e).into(),
        None => FLASHFS_ERR_IO.code().into(),
    }
}

/// A C string argument.
pub(crate) fn c_str<'a>(s: *const c_char) -> Result<&'a [u8]> {
    if s.is_null() {
        return Err(Error::InvalidArgument("null string"));
    }
    // SAFETY: a non-null string argument is NUL-terminated and outlives the call.
    Ok(unsafe { CStr::from_ptr(s) }.to_bytes())
}

/// The configuration argument, copied.
fn config(cfg: *const flashfs_config) -> Result<flashfs_config> {
    // SAFETY: a non-null configuration points at an initialized `flashfs_config`.
    unsafe { cfg.as_ref() }
        .copied()
        .ok_or(Error::InvalidArgument("null configuration"))
}

fn open(cfg: &flashfs_config, format: bool) -> Result<Volume> {
    let dev: Box<dyn Segments> = match cfg.part()? {
        Part::Nor(spec) => Box::new(NorSegments::new(CNor::new(*cfg, spec), cfg.nor_block())?),
        Part::Nand(spec) => Box::new(NandSegments::new(CNand::new(*cfg, spec))?),
    };
    if format {
        Fs::format(dev, cfg.fs_config())
    } else {
        Fs::mount(dev, cfg.fs_config())
    }
}

fn unmount(volume: Volume) -> Result<()> {
    volume.unmount().map(drop)
}

/// Makes a new, empty volume on the flash `cfg` describes, erasing what it held. The
/// volume is left unmounted.
#[no_mangle]
pub extern "C" fn flashfs_format(cfg: *const flashfs_config) -> i32 {
    guard_config(|| {
        let cfg = config(cfg)?;
        unmount(open(&cfg, true)?)?;
        Ok(0)
    }) as i32
}

/// Mounts the volume on the flash `cfg` describes and stores its handle in `*out`. A mount
/// after a power cut finishes or undoes what the cut interrupted: every operation a sync
/// acknowledged is there, whole.
#[no_mangle]
pub extern "C" fn flashfs_mount(cfg: *const flashfs_config, out: *mut *mut flashfs_t) -> i32 {
    guard_config(|| {
        if out.is_null() {
            return Err(Error::InvalidArgument("null handle pointer"));
        }
        let cfg = config(cfg)?;
        let volume = open(&cfg, false)?;
        let h = Box::new(flashfs_t {
            fs: volume,
            tx: None,
            poisoned: false,
        });
        // SAFETY: `out` is non-null and points at a `flashfs_t *` the caller gave.
        unsafe { *out = Box::into_raw(h) };
        Ok(0)
    }) as i32
}

/// Syncs the volume and frees its handle, which the caller must not use again. The handle
/// is freed even when the sync fails (as after a power cut): the error says the last
/// changes may not be on flash.
#[no_mangle]
pub extern "C" fn flashfs_unmount(fs: *mut flashfs_t) -> i32 {
    if fs.is_null() {
        return FLASHFS_ERR_INVAL.code();
    }
    // SAFETY: a handle `flashfs_mount` made, given back once.
    let h = unsafe { Box::from_raw(fs) };
    if h.poisoned {
        return FLASHFS_ERR_IO.code();
    }
    guard_config(|| unmount(h.fs).map(|()| 0)) as i32
}

/// Makes every change so far durable (operations inside a transaction are durable when it
/// commits). Once it returns 0, a power cut keeps all of them; before, it may lose any
/// change since the last sync, never part of one.
#[no_mangle]
pub extern "C" fn flashfs_sync(fs: *mut flashfs_t) -> i32 {
    guard(fs, |h| h.fs.sync().map(|()| 0)) as i32
}

/// Space of a volume.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct flashfs_fsinfo {
    /// Bytes per block.
    pub block_size: u32,
    /// Blocks for files and their metadata.
    pub blocks: u64,
    /// Blocks free.
    pub blocks_free: u64,
    /// Files and directories.
    pub files: u64,
}

/// Fills `*info` with the volume's space.
#[no_mangle]
pub extern "C" fn flashfs_fs_stat(fs: *mut flashfs_t, info: *mut flashfs_fsinfo) -> i32 {
    guard(fs, |h| {
        // SAFETY: a non-null `info` points at a `flashfs_fsinfo` the caller owns.
        let info = unsafe { info.as_mut() }.ok_or(Error::InvalidArgument("null info"))?;
        let s = h.fs.statfs();
        *info = flashfs_fsinfo {
            block_size: s.block_size,
            blocks: s.blocks,
            blocks_free: s.blocks_free,
            files: s.files,
        };
        Ok(0)
    }) as i32
}

/// A message for an error code this library returned (a static string).
#[no_mangle]
pub extern "C" fn flashfs_strerror(err: i32) -> *const c_char {
    message(err).as_ptr().cast()
}
