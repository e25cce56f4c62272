//! The block device's lifetime counters: kept across a clean close and the cleaner's moves,
//! flagged incomplete after a session without a close, unknown (not wrong) when damaged.

mod common;

use common::*;
use flashfs::media::tag::{Kind, TagState};
use flashfs::{BlockDevice, Ftl, FtlConfig, Segments};

/// Writes every sector once, then a third of them `rounds` more times (the cleaner runs).
fn churn<D: Segments>(ftl: &mut Ftl<D>, rounds: u32) -> u64 {
    let ss = ftl.sector_size();
    let n = ftl.sectors();
    let mut written = 0;
    for k in 0..n {
        ftl.write(k, &pattern(k, 0, ss)).unwrap();
        written += 1;
    }
    for round in 1..=rounds {
        for k in (0..n).filter(|k| k % 3 == 0) {
            ftl.write(k, &pattern(k, round, ss)).unwrap();
            written += 1;
        }
    }
    written
}

/// Where the newest counters record is (the one a mount reads).
fn counters_slot<D: Segments>(dev: &mut D) -> (u32, u32) {
    let geo = dev.geometry();
    let mut found = Vec::new();
    let mut tags = vec![TagState::Erased; geo.slots as usize];
    for seg in 0..geo.segments {
        if dev.read_tags(seg, &mut tags).is_err() {
            continue;
        }
        for (slot, t) in tags.iter().enumerate() {
            if let TagState::Valid(t) = t {
                if t.kind == Kind::Counters {
                    found.push((t.seq, seg, slot as u32));
                }
            }
        }
    }
    let (_, seg, slot) = found.into_iter().max().expect("a counters record");
    (seg, slot)
}

#[test]
fn counters_survive_close_remount_and_cleaning() {
    for dev in [nor(true), nor(false)] {
        let mut ftl = Ftl::format(dev, FtlConfig::default()).unwrap();
        let ss = ftl.sector_size() as u64;
        let fresh = ftl.lifetime().unwrap();
        assert_eq!(fresh.user_bytes, 0);
        assert_eq!(fresh.write_amplification(), None);
        let written = churn(&mut ftl, 20);
        assert!(ftl.log().stats().copied_slots > 0, "the cleaner ran");
        let before = ftl.lifetime().unwrap();
        assert_eq!(before.user_bytes, written * ss);
        let st = ftl.log().stats();
        // Every slot programmed since format: the sectors, the cleaner's copies and the
        // format's own counters record (a user slot of the log).
        assert_eq!(before.flash_bytes, (st.user_slots + st.copied_slots) * ss);
        assert!(before.write_amplification().unwrap() > 1.0);

        let ftl = Ftl::mount(ftl.close().unwrap(), FtlConfig::default()).unwrap();
        assert!(ftl.lifetime_complete());
        let after = ftl.lifetime().unwrap();
        assert_eq!(after.user_bytes, before.user_bytes);
        // The close wrote one slot more: the record itself.
        assert_eq!(after.flash_bytes, before.flash_bytes + ss);

        // A second session adds to the first, and the record moves with the cleaner.
        let mut ftl = ftl;
        let more = churn(&mut ftl, 30);
        let ftl = Ftl::mount(ftl.close().unwrap(), FtlConfig::default()).unwrap();
        assert_eq!(ftl.lifetime().unwrap().user_bytes, (written + more) * ss);
    }
}

#[test]
fn a_session_without_close_is_flagged_and_not_counted() {
    let mut ftl = Ftl::format(nand(), FtlConfig::default()).unwrap();
    churn(&mut ftl, 2);
    let closed = ftl.lifetime().unwrap();
    let mut ftl = Ftl::mount(ftl.close().unwrap(), FtlConfig::default()).unwrap();
    churn(&mut ftl, 1);
    ftl.flush().unwrap();
    // A power cut: no close.
    let ftl = Ftl::mount(ftl.into_device(), FtlConfig::default()).unwrap();
    assert!(!ftl.lifetime_complete());
    assert_eq!(ftl.lifetime().unwrap().user_bytes, closed.user_bytes);
    // A mount and close that write nothing leave the record (and the flag) as they were.
    let ftl = Ftl::mount(ftl.close().unwrap(), FtlConfig::default()).unwrap();
    assert!(!ftl.lifetime_complete());
}

#[test]
fn a_damaged_record_makes_the_counters_unknown_not_wrong() {
    let mut ftl = Ftl::format(nor(true), FtlConfig::default()).unwrap();
    let ss = ftl.sector_size();
    churn(&mut ftl, 2);
    let mut dev = ftl.close().unwrap();
    let (seg, slot) = counters_slot(&mut dev);
    // Clear bits in the record's first word (as decay would flip them).
    dev.patch_slot(seg, slot, 0, &[0; 8]).unwrap();
    let mut ftl = Ftl::mount(dev, FtlConfig::default()).unwrap();
    assert_eq!(ftl.lifetime(), None);
    // The data is untouched, and the device works on.
    let mut buf = vec![0u8; ss];
    ftl.read(2, &mut buf).unwrap();
    assert_eq!(buf, pattern(2, 0, ss));
    ftl.write(2, &pattern(2, 9, ss)).unwrap();
    let ftl = Ftl::mount(ftl.close().unwrap(), FtlConfig::default()).unwrap();
    assert_eq!(ftl.lifetime(), None, "unknown stays unknown");
}

#[test]
fn a_file_system_volume_keeps_no_block_device_counters() {
    let fs = flashfs::Fs::format(nand(), fs_config()).unwrap();
    assert_eq!(fs.ftl().lifetime(), None);
}

#[test]
fn a_close_with_nothing_new_writes_no_record() {
    let ftl = Ftl::format(nand(), FtlConfig::default()).unwrap();
    let ss = ftl.sector_size() as u64;
    // Format, close, mount, close: the format's record is the only one.
    let ftl = Ftl::mount(ftl.close().unwrap(), FtlConfig::default()).unwrap();
    let ftl = Ftl::mount(ftl.close().unwrap(), FtlConfig::default()).unwrap();
    assert_eq!(ftl.lifetime().unwrap().flash_bytes, ss);
    assert_eq!(ftl.log().last_seq(), 1, "one slot written since the format");
}
