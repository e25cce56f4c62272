//! Transactions: any sequence of operations made durable all at once, or not at all.
//!
//! A transaction begun on a volume becomes the one its operations run in, until it commits
//! or aborts (or another is chosen with `flashfs_tx_use`). Operations of open
//! transactions stay invisible to a power cut until their commit; a conflict with another
//! transaction rolls one back (`FLASHFS_ERR_DEADLK`).

use flashfs::Error;

use crate::volume::{flashfs_t, guard};

/// Begins a transaction, stores its identifier in `*tid` and runs the volume's next
/// operations in it.
#[no_mangle]
pub extern "C" fn flashfs_tx_begin(fs: *mut flashfs_t, tid: *mut u32) -> i32 {
    guard(fs, |h| {
        if tid.is_null() {
            return Err(Error::InvalidArgument("null transaction pointer"));
        }
        let t = h.fs.begin()?;
        h.tx = Some(t);
        // SAFETY: checked non-null; the caller owns it.
        unsafe { *tid = t };
        Ok(0)
    }) as i32
}

/// Runs the volume's next operations in the open transaction `tid`, or outside any if
/// `tid` is 0.
#[no_mangle]
pub extern "C" fn flashfs_tx_use(fs: *mut flashfs_t, tid: u32) -> i32 {
    guard(fs, |h| {
        h.tx = (tid != 0).then_some(tid);
        Ok(0)
    }) as i32
}

/// Commits transaction `tid`: once it returns 0 all its operations are durable; a power
/// cut before leaves none of them.
#[no_mangle]
pub extern "C" fn flashfs_tx_commit(fs: *mut flashfs_t, tid: u32) -> i32 {
    guard(fs, |h| {
        if h.tx == Some(tid) {
            h.tx = None;
        }
        h.fs.commit_tx(tid)?;
        Ok(0)
    }) as i32
}

/// Aborts transaction `tid`: none of its operations happened.
#[no_mangle]
pub extern "C" fn flashfs_tx_abort(fs: *mut flashfs_t, tid: u32) -> i32 {
    guard(fs, |h| {
        if h.tx == Some(tid) {
            h.tx = None;
        }
        h.fs.abort(tid)?;
        Ok(0)
    }) as i32
}
