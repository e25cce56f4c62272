//! The sweep: a look through the block device's map for data of free blocks, spread over
//! the operations after a mount from a checkpoint that followed a power cut (SPEC.md §8.5
//! step 4).
//!
//! The block device's forgets since its last checkpoint are not durable, and a power cut
//! also leaves the data of operations it interrupted: after one, the block device keeps
//! data of blocks the file system counts free. That data is harmless — no version reads a
//! free block, and writing one replaces it — but the cleaner copies it until it is
//! forgotten, so the file system forgets it. Finding it means reading every map page that
//! covers a free block and holds data, which grows with the volume; a mount that did so
//! would cost what the volume holds. The sweep does it a map page at a time instead: one
//! step after each commit, as many as idle time allows, all of it before a garbage
//! collection, an unmount (whose checkpoint then holds every forget, as a close's must) and
//! a check. A power cut during the sweep starts it again at the next mount. (After a mount
//! that scanned, the whole map is in RAM and the look reads nothing: the mount does it.)
//!
//! Only free blocks are forgotten, a step's free blocks as the file system counts them
//! then: a block taken since the mount holds its new owner's data, or its old data until
//! its owner's program replaces it (no version reads it before), and a block freed since
//! was forgotten when the commit freeing it was durable.

use super::read_cache::ReadCache;
use super::space::Space;
use crate::error::{Error, Result};
use crate::ftl::Ftl;
use crate::media::Segments;

/// Where the sweep is. See the module documentation.
#[derive(Debug, Default)]
pub struct Sweep {
    /// The first block not looked at yet; `None` when nothing is left to look for.
    next: Option<u64>,
}

impl Sweep {
    /// Whether a part of the map is still to be looked through.
    pub fn is_pending(&self) -> bool {
        self.next.is_some()
    }

    /// Starts from the first block (again, if a sweep was under way).
    pub fn start(&mut self) {
        self.next = Some(0);
    }

    /// Looks through one map page of `ftl`, the first from the sweep's place on that
    /// covers a block free in `space` and may hold data, forgetting the free blocks' data
    /// (and dropping them from `rc`). A page that does not read (damage) ends the sweep:
    /// forgetting only spares the cleaner copies, and the data the page maps stays live
    /// until the next sweep. Any other error (the device failed, the power went) is the
    /// caller's, the sweep left where it was.
    pub fn step<D: Segments>(
        &mut self,
        ftl: &mut Ftl<D>,
        space: &Space,
        rc: &mut ReadCache,
    ) -> Result<()> {
        let Some(from) = self.next else {
            return Ok(());
        };
        let Some(k) = space.next_free(from) else {
            self.next = None;
            return Ok(());
        };
        let step = ftl.forget_step(k, |s| {
            let free = space.is_free(s);
            if free {
                rc.invalidate(s, 1);
            }
            free
        });
        self.next = match step {
            Ok(next) => next,
            Err(Error::Io | Error::Damaged(_) | Error::Corrupt(_)) => None,
            Err(e) => return Err(e),
        };
        Ok(())
    }
}
