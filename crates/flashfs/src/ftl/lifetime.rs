//! The block device's lifetime counters: what the host wrote and what the log programmed for
//! it since the volume was formatted, kept in a counters record (SPEC §3.2a,
//! [`super::layout::Counters`]) so that write amplification, and on MLC NAND what migration
//! moved, can be read off an image long after the writes.
//!
//! The record is written at format and at a clean close, not on every flush: a slot per
//! flush would itself be write amplification. After a session that ended without a close the
//! counters are those of the last close, and the mount says so.

/// What a volume has written over its life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lifetime {
    /// Bytes the host wrote (for the block device, whole sectors; for the file system, file
    /// bytes).
    pub user_bytes: u64,
    /// Bytes the log programmed for them: data, metadata and the cleaner's copies (slots of
    /// data, without NAND spare bytes).
    pub flash_bytes: u64,
    /// Bytes migration moved from SLC segments to MLC ones (FlexFS's regions; 0 elsewhere),
    /// part of `flash_bytes`.
    pub migrated_bytes: u64,
    /// FlexFS's shares α and γ when the counters were last recorded (`None` on a part
    /// without an SLC mode).
    pub shares: Option<crate::log::Shares>,
}

impl Lifetime {
    /// Write amplification so far: flash bytes per user byte (`None` before any write).
    pub fn write_amplification(&self) -> Option<f64> {
        (self.user_bytes > 0).then(|| self.flash_bytes as f64 / self.user_bytes as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_amplification_is_flash_over_user_bytes() {
        let l = Lifetime {
            user_bytes: 1000,
            flash_bytes: 2500,
            ..Lifetime::default()
        };
        assert_eq!(l.write_amplification(), Some(2.5));
        assert_eq!(Lifetime::default().write_amplification(), None);
    }
}
