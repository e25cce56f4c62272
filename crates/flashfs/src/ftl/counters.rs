//! The block device's lifetime counters: what the host wrote and what the log programmed for
//! it since the volume was formatted, kept in a counters record (SPEC §3.2a) so that write
//! amplification can be read off an image long after the writes.
//!
//! The record is written at format and at a clean close, not on every flush: a slot per
//! flush would itself be write amplification. After a session that ended without a close the
//! counters are those of the last close, and the mount says so.

use alloc::vec::Vec;

/// CRC of the record's fields: the tag's CRC covers the tag only.
const CRC32: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI);

/// Bytes of a counters record before its erased remainder.
const RECORD_LEN: usize = 20;

/// What a volume has written over its life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lifetime {
    /// Bytes the host wrote (for the block device, whole sectors; for the file system, file
    /// bytes).
    pub user_bytes: u64,
    /// Bytes the log programmed for them: data, metadata and the cleaner's copies (slots of
    /// data, without NAND spare bytes).
    pub flash_bytes: u64,
}

impl Lifetime {
    /// Write amplification so far: flash bytes per user byte (`None` before any write).
    pub fn write_amplification(&self) -> Option<f64> {
        (self.user_bytes > 0).then(|| self.flash_bytes as f64 / self.user_bytes as f64)
    }
}

/// The counters as a record stores them, in sectors and slots.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counters {
    /// Sectors the host wrote.
    pub sectors: u64,
    /// Slots the log programmed.
    pub slots: u64,
}

impl Counters {
    /// The record's data, one slot long.
    pub fn encode(&self, slot: usize) -> Vec<u8> {
        let mut b = alloc::vec![0xFFu8; slot];
        b[0..8].copy_from_slice(&self.sectors.to_le_bytes());
        b[8..16].copy_from_slice(&self.slots.to_le_bytes());
        let crc = CRC32.checksum(&b[..16]);
        b[16..RECORD_LEN].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// The counters a record holds, or `None` if it is damaged.
    pub fn decode(b: &[u8]) -> Option<Self> {
        let b = b.get(..RECORD_LEN)?;
        if CRC32.checksum(&b[..16]).to_le_bytes() != b[16..RECORD_LEN] {
            return None;
        }
        let word = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        Some(Counters {
            sectors: word(0),
            slots: word(8),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_decodes_to_what_was_encoded_and_damage_is_seen() {
        let c = Counters {
            sectors: 123_456_789,
            slots: 987_654_321_000,
        };
        let mut b = c.encode(512);
        assert_eq!(b.len(), 512);
        assert_eq!(Counters::decode(&b), Some(c));
        b[3] ^= 0x10;
        assert_eq!(Counters::decode(&b), None);
        assert_eq!(Counters::decode(&b[..10]), None);
    }

    #[test]
    fn write_amplification_is_flash_over_user_bytes() {
        let l = Lifetime {
            user_bytes: 1000,
            flash_bytes: 2500,
        };
        assert_eq!(l.write_amplification(), Some(2.5));
        assert_eq!(Lifetime::default().write_amplification(), None);
    }
}
