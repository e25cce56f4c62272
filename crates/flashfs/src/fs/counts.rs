//! What the file system has written since mount and over the volume's life: the counts
//! behind [`FsStats`](super::FsStats) and [`Lifetime`], and the lifetime totals each
//! superblock carries forward (SPEC.md §8.2).

use super::layout::Superblock;
use crate::ftl::Lifetime;
use crate::log::Shares;

/// What the log did since mount, in slots.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Programmed {
    /// Slots programmed: data, index, superblocks and the cleaner's copies.
    pub slots: u64,
    /// Of the cleaner's copies, those from SLC segments to MLC ones.
    pub migrated: u64,
}

/// Totals over the volume's life, as a superblock carries them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Totals {
    /// File bytes written by callers.
    pub user_bytes: u64,
    /// Slots the log programmed.
    pub flash_slots: u64,
    /// Slots migrated from SLC segments to MLC ones.
    pub migrated_slots: u64,
}

/// Counts since mount, over the superblock's totals at mount.
#[derive(Debug, Clone, Copy)]
pub(super) struct Counts {
    /// Checkpoints written since mount (a superblock each).
    commits: u64,
    /// Slots the log had programmed since mount when the last superblock was written: an
    /// unmount writes another if the log programmed more since (the cleaner's or the
    /// migrator's copies in idle time), so that the totals count them.
    recorded_slots: u64,
    /// File bytes written by callers since mount.
    bytes_written: u64,
    /// The superblock's file bytes written over the volume's life, at mount.
    base_user_bytes: u64,
    /// The superblock's slots programmed over the volume's life, at mount.
    base_flash_slots: u64,
    /// The superblock's slots migrated from SLC to MLC over the volume's life, at mount.
    base_migrated_slots: u64,
    /// The superblock's FlexFS shares, at mount.
    base_shares: Option<Shares>,
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
            recorded_slots: 0,
            bytes_written: 0,
            base_user_bytes: sb.user_bytes,
            base_flash_slots: sb.flash_slots,
            base_migrated_slots: sb.migrated_slots,
            base_shares: sb.shares,
            garbage_spares: 0,
            mounted_from_map: false,
        }
    }

    /// Callers wrote `n` more file bytes.
    pub fn wrote(&mut self, n: u64) {
        self.bytes_written += n;
    }

    /// A checkpoint was written, the log having programmed `slots` since mount.
    pub fn committed(&mut self, slots: u64) {
        self.commits += 1;
        self.recorded_slots = slots;
    }

    /// Whether the log has programmed slots the last superblock does not count, having
    /// programmed `slots` since mount.
    pub fn unrecorded(&self, slots: u64) -> bool {
        slots > self.recorded_slots
    }

    /// Checkpoints written since mount.
    pub fn commits(&self) -> u64 {
        self.commits
    }

    /// File bytes written by callers since mount.
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    /// The totals a superblock written now carries over the volume's life, with what the
    /// log did since mount.
    pub fn totals(&self, log: Programmed) -> Totals {
        // The bases come from flash: a damaged superblock's must not overflow.
        Totals {
            user_bytes: self.base_user_bytes.saturating_add(self.bytes_written),
            flash_slots: self.base_flash_slots.saturating_add(log.slots),
            migrated_slots: self.base_migrated_slots.saturating_add(log.migrated),
        }
    }

    /// The FlexFS shares the superblock read at mount held.
    pub fn recorded_shares(&self) -> Option<Shares> {
        self.base_shares
    }

    /// What the volume has written over its life, with what the log did since mount and
    /// the shares as they stand, in blocks of `block_size` bytes.
    pub fn lifetime(&self, log: Programmed, shares: Option<Shares>, block_size: u32) -> Lifetime {
        let t = self.totals(log);
        let bytes = |slots: u64| slots.saturating_mul(u64::from(block_size));
        Lifetime {
            user_bytes: t.user_bytes,
            flash_bytes: bytes(t.flash_slots),
            migrated_bytes: bytes(t.migrated_slots),
            shares,
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
            recorded_slots: 0,
            bytes_written: 0,
            base_user_bytes: u64::MAX - 1,
            base_flash_slots: u64::MAX / 2,
            base_migrated_slots: u64::MAX,
            base_shares: None,
            garbage_spares: 0,
            mounted_from_map: false,
        };
        c.wrote(10);
        let log = Programmed {
            slots: 1,
            migrated: 1,
        };
        assert_eq!(
            c.totals(log),
            Totals {
                user_bytes: u64::MAX,
                flash_slots: u64::MAX / 2 + 1,
                migrated_slots: u64::MAX,
            }
        );
        let l = c.lifetime(log, None, 512);
        assert_eq!((l.flash_bytes, l.migrated_bytes), (u64::MAX, u64::MAX));
    }
}
