//! What the file system has written since mount and over the volume's life: the counts
//! behind [`FsStats`](super::FsStats) and [`Lifetime`], and the lifetime totals each
//! superblock carries forward (SPEC.md §8.2).

use super::layout::Superblock;
use crate::ftl::Lifetime;

/// Counts since mount, over the superblock's totals at mount.
#[derive(Debug, Clone, Copy)]
pub(super) struct Counts {
    /// Checkpoints written since mount (a superblock each).
    commits: u64,
    /// File bytes written by callers since mount.
    bytes_written: u64,
    /// The superblock's file bytes written over the volume's life, at mount.
    base_user_bytes: u64,
    /// The superblock's slots programmed over the volume's life, at mount.
    base_flash_slots: u64,
    /// Index nodes the mount found with garbage spares (and copied).
    garbage_spares: u64,
    /// Whether the mount read its free space from the saved map.
    mounted_from_map: bool,
}

impl Counts {
    /// Nothing written yet on a volume whose superblock is `sb`.
    pub fn new(sb: &Superblock) -> Self {
        Counts {
            commits: 0,
            bytes_written: 0,
            base_user_bytes: sb.user_bytes,
            base_flash_slots: sb.flash_slots,
            garbage_spares: 0,
            mounted_from_map: false,
        }
    }

    /// Callers wrote `n` more file bytes.
    pub fn wrote(&mut self, n: u64) {
        self.bytes_written += n;
    }

    /// A checkpoint was written.
    pub fn committed(&mut self) {
        self.commits += 1;
    }

    /// Checkpoints written since mount.
    pub fn commits(&self) -> u64 {
        self.commits
    }

    /// File bytes written by callers since mount.
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    /// The totals a superblock written now carries: file bytes written and slots programmed
    /// over the volume's life, `slots` of them since mount.
    pub fn totals(&self, slots: u64) -> (u64, u64) {
        // The bases come from flash: a damaged superblock's must not overflow.
        (
            self.base_user_bytes.saturating_add(self.bytes_written),
            self.base_flash_slots.saturating_add(slots),
        )
    }

    /// What the volume has written over its life, `slots` of `block_size` bytes programmed
    /// since mount.
    pub fn lifetime(&self, slots: u64, block_size: u32) -> Lifetime {
        let (user_bytes, flash_slots) = self.totals(slots);
        Lifetime {
            user_bytes,
            flash_bytes: flash_slots.saturating_mul(u64::from(block_size)),
        }
    }

    /// The mount copied `n` index nodes with garbage spares.
    pub fn found_garbage_spares(&mut self, n: u64) {
        self.garbage_spares = n;
    }

    /// Index nodes the mount found with garbage spares.
    pub fn garbage_spares(&self) -> u64 {
        self.garbage_spares
    }

    /// Notes that the mount read its free space from the saved map.
    pub fn note_mount_from_map(&mut self) {
        self.mounted_from_map = true;
    }

    /// Whether the mount read its free space from the saved map.
    pub fn mounted_from_map(&self) -> bool {
        self.mounted_from_map
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_from_a_damaged_superblock_saturate() {
        let mut c = Counts {
            commits: 0,
            bytes_written: 0,
            base_user_bytes: u64::MAX - 1,
            base_flash_slots: u64::MAX / 2,
            garbage_spares: 0,
            mounted_from_map: false,
        };
        c.wrote(10);
        assert_eq!(c.totals(1), (u64::MAX, u64::MAX / 2 + 1));
        assert_eq!(c.lifetime(1, 512).flash_bytes, u64::MAX);
    }
}
