//! The sweep (SPEC.md §8.5 step 4): after a power cut the block device keeps data of blocks
//! the file system counts free; a mount from its checkpoint leaves it to be forgotten a map
//! page at a time, one step after each commit, instead of reading every map page itself.

mod common;

use common::*;
use flashfs::fs::ROOT_INO;
use flashfs::{Fs, FsConfig};

fn config() -> FsConfig {
    let mut c = fs_config();
    c.ftl.log.checkpoint_min_segments = 4;
    c
}

/// A volume holding a 4 MiB file across the map's chunks, closed, then mounted and the
/// file deleted and synced, then cut: the block device's forgets of the file's blocks are
/// lost. Returns the device and the blocks the file took.
fn deleted_then_cut() -> (flashfs::NandSegments<flash::NandSim>, u64) {
    let mut fs = Fs::format(nand_of_300x64(), config()).unwrap();
    let big = fs.create(ROOT_INO, b"big", 0o644, 0, 0).unwrap().ino;
    for i in 0..64u64 {
        fs.write(big, i * 65536, &pattern(i, 4, 65536)).unwrap();
    }
    let blocks = (64 * 65536) / u64::from(fs.block_size());
    let mut fs = Fs::mount(fs.unmount().unwrap(), config()).unwrap();
    assert!(!fs.sweep_pending(), "a mount after a close sweeps nothing");
    fs.unlink(ROOT_INO, b"big").unwrap();
    fs.sync().unwrap();
    (fs.into_device(), blocks)
}

fn assert_clean(fs: &mut Fs<flashfs::NandSegments<flash::NandSim>>, when: &str) {
    let r = fs.check(false).unwrap();
    assert!(r.is_clean(), "fsck {when}: {:?}", r.problems);
}

/// One small write and its commit, a checkpoint (a new file and its small write alone
/// would be a journal entry).
fn small_commit(fs: &mut Fs<flashfs::NandSegments<flash::NandSim>>, i: u64) {
    let ino = fs
        .create(ROOT_INO, format!("s{i}").as_bytes(), 0o644, 0, 0)
        .unwrap()
        .ino;
    fs.write(ino, 0, &pattern(i, 7, 100)).unwrap();
    fs.checkpoint().unwrap();
}

#[test]
fn a_cut_mount_leaves_the_free_blocks_data_to_the_sweep_a_page_per_commit() {
    let (dev, blocks) = deleted_then_cut();
    let mut fs = Fs::mount(dev, config()).unwrap();
    assert!(fs.ftl().log().restored() && !fs.ftl().log().found_closed());
    assert!(
        fs.sweep_pending(),
        "a cut mount from a checkpoint sweeps after it"
    );
    let revived = fs.ftl().mapped_sectors();
    assert!(
        revived >= blocks,
        "the mount forgot the deleted file's blocks itself ({revived} mapped)"
    );
    // A step per commit: the sweep ends after at most a commit per map page (a page
    // holds more than 100 entries here), each forgetting what its page maps.
    let pages = flashfs::BlockDevice::sectors(fs.ftl()) / 100 + 1;
    let mut commits = 0;
    let mut mapped = revived;
    while fs.sweep_pending() {
        small_commit(&mut fs, commits);
        commits += 1;
        // The commit's own file takes a data block and a few index nodes.
        let now = fs.ftl().mapped_sectors();
        assert!(now <= mapped + 4, "a step mapped more ({mapped} → {now})");
        mapped = now;
        assert!(commits <= pages, "the sweep does not end");
    }
    assert!(commits > 1, "one commit swept the whole map");
    assert!(
        mapped + blocks <= revived + 4 * commits,
        "the sweep left the deleted file's blocks mapped ({revived} → {mapped})"
    );
    // No free block is left mapped: `fsck` compares block by block (with no sweep under
    // way, it forgets nothing first).
    assert_clean(&mut fs, "after the sweep");
}

#[test]
fn a_sweep_cut_short_starts_again_and_an_unmount_or_idle_time_finishes_it() {
    let (dev, blocks) = deleted_then_cut();
    let mut fs = Fs::mount(dev, config()).unwrap();
    small_commit(&mut fs, 0);
    assert!(fs.sweep_pending());
    // Cut again mid-sweep: the next mount starts over, with what was swept either in a
    // checkpoint or revived again.
    let mut fs = Fs::mount(fs.into_device(), config()).unwrap();
    assert!(fs.sweep_pending());
    let revived = fs.ftl().mapped_sectors();
    let used = fs.idle(core::time::Duration::from_secs(1)).unwrap();
    assert!(!fs.sweep_pending(), "idle time did not finish the sweep");
    assert!(used > core::time::Duration::ZERO);
    assert!(fs.ftl().mapped_sectors() + blocks <= revived);
    // An unmount finishes a sweep under way: its checkpoint holds every forget, and the
    // mount after it has nothing to look for.
    let (dev, _) = deleted_then_cut();
    let fs = Fs::mount(dev, config()).unwrap();
    let revived = fs.ftl().mapped_sectors();
    let mut fs = Fs::mount(fs.unmount().unwrap(), config()).unwrap();
    assert!(fs.ftl().log().found_closed() && !fs.sweep_pending());
    assert!(fs.ftl().mapped_sectors() + blocks <= revived);
    assert_clean(&mut fs, "after the unmount");
}

/// A mount replaying the journal's small writes forgets free blocks' data before them only
/// where the log is short of room for them: here it has room, and the look is the sweep's.
#[test]
fn a_replay_of_small_writes_with_room_leaves_the_look_to_the_sweep() {
    let (dev, _) = deleted_then_cut();
    let mut fs = Fs::mount(dev, config()).unwrap();
    fs.sweep().unwrap();
    let f = fs.create(ROOT_INO, b"log", 0o644, 0, 0).unwrap().ino;
    fs.sync().unwrap();
    // Delete what takes space again, then append a few bytes and fsync: a journal entry.
    let big = fs.create(ROOT_INO, b"big", 0o644, 0, 0).unwrap().ino;
    fs.write(big, 0, &pattern(1, 4, 1 << 20)).unwrap();
    fs.sync().unwrap();
    let mut fs = Fs::mount(fs.unmount().unwrap(), config()).unwrap();
    fs.unlink(ROOT_INO, b"big").unwrap();
    fs.sync().unwrap();
    let line = pattern(3, 2, 60);
    fs.write(f, 0, &line).unwrap();
    fs.fsync(f, false).unwrap();
    let fs_stats = fs.stats();
    let before = fs.ftl().mapped_sectors();
    let mut fs = Fs::mount(fs.into_device(), config()).unwrap();
    assert!(
        fs.stats().journal_replayed > 0,
        "no journal entry replayed ({fs_stats:?})"
    );
    assert!(fs.sweep_pending());
    // Most of the deleted file's data is back: its forgets came after the last checkpoint.
    let big_blocks = (1 << 20) / u64::from(fs.block_size());
    assert!(
        fs.ftl().mapped_sectors() >= before + big_blocks / 2,
        "the replay looked through the map ({before} → {} mapped)",
        fs.ftl().mapped_sectors()
    );
    let mut back = vec![0; line.len()];
    fs.read(f, 0, &mut back).unwrap();
    assert_eq!(back, line);
    fs.sweep().unwrap();
    assert_clean(&mut fs, "after the replay and the sweep");
}
