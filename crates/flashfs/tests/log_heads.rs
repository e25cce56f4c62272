//! Where the log's heads put data: short-lived data apart from the rest on devices large
//! enough to afford the open segment, and static data moved by the leveller onto worn
//! segments while wear stays even.

mod common;

use std::collections::BTreeSet;

use common::*;
use flashfs::log::HOT_HEAD_MIN_SEGMENTS;
use flashfs::media::tag::{Kind, FORMAT_BLOCK_DEVICE};
use flashfs::{Head, Log, LogConfig, NandSegments};

fn nand_of_blocks(blocks: u32) -> NandSegments<flash::NandSim> {
    let spec = flash::NandSpec {
        blocks,
        ..nand_spec()
    };
    let sim = flash::NandSim::new(spec, flash::ImageMeta::new("heads", 1)).unwrap();
    NandSegments::new(sim).unwrap()
}

/// Writes a few short-lived keys again and again between writes of long-lived ones; returns
/// the segments each kind was written to.
fn segments_of_each(blocks: u32, hot_head: bool) -> (BTreeSet<u32>, BTreeSet<u32>) {
    let config = LogConfig {
        hot_head,
        ..LogConfig::default()
    };
    let mut log = Log::format(nand_of_blocks(blocks), config, FORMAT_BLOCK_DEVICE, |_| {
        Ok(1)
    })
    .unwrap();
    let mut owner = Latest::default();
    let data = vec![0x3Cu8; 512];
    let (mut hot, mut warm) = (BTreeSet::new(), BTreeSet::new());
    for i in 0..400u32 {
        let (head, key, seen) = match i % 2 {
            0 => (Head::Hot, i % 8, &mut hot),
            _ => (Head::Warm, 1000 + i, &mut warm),
        };
        let at = log
            .append(head, key, Kind::Sector, &data, &mut owner)
            .unwrap();
        seen.insert(at.seg);
        if let Some(old) = owner.0.insert(key, at) {
            log.kill(old);
        }
    }
    (hot, warm)
}

#[test]
fn short_lived_data_gets_segments_of_its_own() {
    let (hot, warm) = segments_of_each(HOT_HEAD_MIN_SEGMENTS + 16, true);
    assert!(hot.is_disjoint(&warm), "hot {hot:?}, warm {warm:?}");
    // Turned off, or on a device too small for it, both go through one head.
    for (blocks, on) in [
        (HOT_HEAD_MIN_SEGMENTS + 16, false),
        (HOT_HEAD_MIN_SEGMENTS - 8, true),
    ] {
        let (hot, warm) = segments_of_each(blocks, on);
        assert!(!hot.is_disjoint(&warm), "{blocks} blocks, hot head {on}");
    }
}

/// With heads apart the leveller waits for a worn segment to put static data on; the wait
/// must not let wear spread: static data in half the device, a few keys rewritten.
#[test]
fn wear_stays_even_with_heads_apart() {
    let spread = 8;
    let config = LogConfig {
        wear_spread: spread,
        ..LogConfig::default()
    };
    let mut log = Log::format(nand_of_blocks(32), config, FORMAT_BLOCK_DEVICE, |_| Ok(1)).unwrap();
    assert!(log.heads_apart());
    let mut owner = Latest::default();
    let data = vec![0xC3u8; 512];
    let write = |log: &mut Log<_>, owner: &mut Latest, key: u32| {
        let at = log
            .append(Head::Warm, key, Kind::Sector, &data, owner)
            .unwrap();
        if let Some(old) = owner.0.insert(key, at) {
            log.kill(old);
        }
    };
    for key in 0..16 * 16 {
        write(&mut log, &mut owner, 10_000 + key);
    }
    for i in 0..40_000u32 {
        write(&mut log, &mut owner, i % 32);
    }
    let counts: Vec<u32> = log.segments().iter().map(|s| s.erase_count).collect();
    let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
    assert!(*max >= 40, "the hot keys wore the device: {counts:?}");
    assert!(max - min <= spread + 4, "erase counts {counts:?}");
    assert!(log.stats().wear_moves > 0, "{:?}", log.stats());
}
