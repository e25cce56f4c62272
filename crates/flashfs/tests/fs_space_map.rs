//! The saved free-space map (SPEC.md §8.5): a mount reads it instead of walking the index,
//! after an unmount and after a power cut, and what it reads agrees with the walk block by
//! block (`fsck` walks and compares); where it cannot be used the mount walks.

mod common;

use common::*;
use flashfs::fs::{Ino, ROOT_INO};
use flashfs::{Fs, FsConfig, Segments};
use std::collections::BTreeMap;

/// The tests' configuration, with checkpoints kept on the small NOR part too: a block
/// device that scans at mount brings back forgotten data only the walk forgets again, so
/// the file system walks there (SPEC.md §8.5).
fn config() -> FsConfig {
    let mut c = fs_config();
    c.ftl.log.checkpoint_min_segments = 4;
    c
}

/// Reprogrammable NOR of 64 units of 8 KiB: room for the checkpoint's anchors.
fn larger_nor() -> flashfs::NorSegments<flash::NorSim> {
    nor_of(flash::NorSpec {
        units: 64,
        ..nor_spec(true)
    })
}

/// Creates, grows, shrinks and deletes files, with a sync every few operations, so that
/// blocks are taken and freed all over the volume.
fn churn<D: Segments>(fs: &mut Fs<D>, files: &mut BTreeMap<Vec<u8>, Ino>, seed: u64, ops: u64) {
    for i in 0..ops {
        let r = seed.wrapping_mul(31).wrapping_add(i * 7919) % 1000;
        let name = format!("f{}", r % 23).into_bytes();
        match files.get(&name).copied() {
            Some(_) if r % 3 == 0 => {
                fs.unlink(ROOT_INO, &name).unwrap();
                files.remove(&name);
            }
            Some(ino) => {
                let off = (r * 97) % 20_000;
                fs.write(ino, off, &pattern(r + i, 1, 1 + (r as usize * 13) % 9000))
                    .unwrap();
            }
            None => {
                let ino = fs.create(ROOT_INO, &name, 0o644, 0, 0).unwrap().ino;
                fs.write(ino, 0, &pattern(r, 1, (r as usize * 37) % 30_000))
                    .unwrap();
                files.insert(name, ino);
            }
        }
        if i % 5 == 4 {
            fs.sync().unwrap();
        }
    }
    fs.sync().unwrap();
}

fn assert_clean<D: Segments>(fs: &mut Fs<D>, when: &str) {
    let r = fs.check(false).unwrap();
    assert!(r.is_clean(), "fsck {when}: {:?}", r.problems);
}

/// Ends the session with an unmount, or with a power cut after the last sync (`cut`), and
/// mounts again: the mount reads the map, the volume shows what it did (tree, free blocks,
/// files), and `fsck` (the walk, block by block, and the inode count) finds it clean.
fn remount_checked<D: Segments>(fs: Fs<D>, cut: bool, when: &str) -> Fs<D> {
    let mut fs = fs;
    let before = dump(&mut fs).unwrap();
    let (free, files) = (fs.statfs().blocks_free, fs.statfs().files);
    let dev = if cut {
        fs.into_device()
    } else {
        fs.unmount().unwrap()
    };
    let mut fs = Fs::mount(dev, config()).unwrap();
    assert!(
        fs.stats().mounted_from_map,
        "{when}: the mount walked the index"
    );
    assert_eq!(dump(&mut fs).unwrap(), before, "{when}");
    assert_eq!(fs.statfs().blocks_free, free, "{when}: free blocks");
    assert_eq!(fs.statfs().files, files, "{when}: files");
    assert_clean(&mut fs, when);
    fs
}

#[test]
fn mounts_after_an_unmount_and_after_a_cut_read_the_map_and_agree_with_the_walk() {
    let mut fs = Fs::format(nand_checkpointed(), config()).unwrap();
    let mut files = BTreeMap::new();
    for round in 0..6u64 {
        churn(&mut fs, &mut files, round, 40);
        // Even rounds end with an unmount, odd ones with a power cut after the last sync.
        let cut = round % 2 == 1;
        fs = remount_checked(fs, cut, &format!("after mount {round}"));
        // After an unmount the block device's checkpoint holds every forget, and the mount
        // looks for no free sector to forget again; `fsck` (above) checks none is kept.
        assert_eq!(fs.ftl().log().found_closed(), !cut, "round {round}");
    }
}

#[test]
fn commits_write_a_delta_and_a_new_map_only_when_it_outgrows_block_0() {
    let mut fs = Fs::format(nand_checkpointed(), config()).unwrap();
    let blocks = fs.space_map_blocks();
    assert!(blocks > 0);
    let first = fs.space_map().expect("the format's commit writes a map");
    assert_eq!(first.end - first.start, blocks);
    // A few commits that change a few runs: deltas, no map written.
    let format_writes = fs.stats().space_map_writes;
    assert_eq!(format_writes, blocks);
    let a = fs.create(ROOT_INO, b"a", 0o644, 0, 0).unwrap().ino;
    for i in 0..3 {
        fs.write(a, i * 512, &pattern(i, 1, 512)).unwrap();
        fs.sync().unwrap();
    }
    assert_eq!(
        fs.stats().space_map_writes,
        format_writes,
        "a delta fits block 0"
    );
    assert_eq!(fs.space_map(), Some(first.clone()));
    // Many scattered changes: the delta no longer fits, a new map is written and the old
    // one freed.
    let mut files = BTreeMap::new();
    churn(&mut fs, &mut files, 7, 300);
    let written = fs.stats().space_map_writes - format_writes;
    assert!(written >= blocks, "{written} map blocks written");
    assert_ne!(fs.space_map(), Some(first));
    assert_clean(&mut fs, "after new maps");
    let fs = Fs::mount(fs.unmount().unwrap(), config()).unwrap();
    assert!(fs.stats().mounted_from_map);
}

#[test]
fn appended_superblocks_name_the_map_stale_and_an_unmount_makes_it_current() {
    // Reprogrammable NOR: commits append their superblock in place, with no room for a
    // delta, so a mount after a power cut walks; an unmount writes block 0 anew.
    let mut fs = Fs::format(larger_nor(), config()).unwrap();
    let a = fs.create(ROOT_INO, b"a", 0o644, 0, 0).unwrap().ino;
    fs.sync().unwrap();
    // Writes larger than the journal takes: each commit a checkpoint.
    for i in 0..4 {
        fs.write(a, i * 300, &pattern(i, 1, 300)).unwrap();
        fs.sync().unwrap();
    }
    assert!(fs.stats().superblock_appends > 0, "{:?}", fs.stats());
    let before = dump(&mut fs).unwrap();
    let mut fs = Fs::mount(fs.into_device(), config()).unwrap();
    assert_eq!(dump(&mut fs).unwrap(), before);
    assert_clean(&mut fs, "after a cut");
    for i in 0..4 {
        fs.write(a, 2000 + i * 300, &pattern(i + 9, 1, 300))
            .unwrap();
        fs.sync().unwrap();
    }
    let before = dump(&mut fs).unwrap();
    let mut fs = Fs::mount(fs.unmount().unwrap(), config()).unwrap();
    assert!(
        fs.stats().mounted_from_map,
        "an unmount leaves a current map"
    );
    assert_eq!(dump(&mut fs).unwrap(), before);
    assert_clean(&mut fs, "after an unmount");
}

#[test]
fn a_mount_after_a_cut_with_appended_superblocks_walks() {
    let mut fs = Fs::format(larger_nor(), config()).unwrap();
    let a = fs.create(ROOT_INO, b"a", 0o644, 0, 0).unwrap().ino;
    fs.sync().unwrap();
    let appends = fs.stats().superblock_appends;
    fs.write(a, 0, &pattern(1, 1, 300)).unwrap();
    fs.sync().unwrap();
    assert_eq!(fs.stats().superblock_appends, appends + 1);
    let fs = Fs::mount(fs.into_device(), config()).unwrap();
    assert!(
        !fs.stats().mounted_from_map,
        "the newest superblock was appended: its map is stale"
    );
}

/// A mount after a power cut forgets again what the session before had forgotten. The
/// close after it writes a checkpoint that holds those forgets even when nothing was
/// written since the last, so the mount after that close, which looks for no free sector to
/// forget, finds none kept (`fsck` would name it).
#[test]
fn the_forgets_of_a_mount_after_a_cut_outlive_a_close_with_nothing_written() {
    let mut fs = Fs::format(nand_checkpointed(), config()).unwrap();
    let mut files = BTreeMap::new();
    churn(&mut fs, &mut files, 1, 60);
    let fs = Fs::mount(fs.into_device(), config()).unwrap();
    assert!(!fs.ftl().log().found_closed());
    let mut fs = Fs::mount(fs.unmount().unwrap(), config()).unwrap();
    assert!(fs.ftl().log().found_closed());
    assert_clean(&mut fs, "after the close");
}

/// Free space in a few runs is saved as the runs, in fewer blocks than the bits would
/// take, and a mount reads those alone; as the runs grow many the map goes back to bits.
/// (Where they take as many blocks, runs are saved: see the small volumes of the other
/// tests.)
/// Either way the mount after an unmount or a power cut agrees with the walk.
#[test]
fn few_free_runs_are_saved_as_runs_in_fewer_blocks_than_bits() {
    let mut fs = Fs::format(nand_of_300x64(), config()).unwrap();
    let bits = fs.space_map_blocks();
    assert_eq!(bits, 5);
    assert_eq!(
        fs.stats().space_map_writes,
        1,
        "the fresh volume's map is one run"
    );
    let f = fs.create(ROOT_INO, b"in-order", 0o644, 0, 0).unwrap().ino;
    for i in 0..64u64 {
        fs.write(f, i * 4096, &pattern(i, 1, 4096)).unwrap();
    }
    fs = remount_checked(fs, false, "after the unmount");
    // Two files written block by block in turn, then one deleted: hundreds of free runs,
    // which take more blocks than the bits.
    let a = fs.create(ROOT_INO, b"a", 0o644, 0, 0).unwrap().ino;
    let b = fs.create(ROOT_INO, b"b", 0o644, 0, 0).unwrap().ino;
    for i in 0..400u64 {
        fs.write(a, i * 512, &pattern(i, 2, 512)).unwrap();
        fs.write(b, i * 512, &pattern(i, 3, 512)).unwrap();
    }
    fs.sync().unwrap();
    let writes = fs.stats().space_map_writes;
    fs.unlink(ROOT_INO, b"a").unwrap();
    fs.sync().unwrap();
    assert_eq!(fs.stats().space_map_writes - writes, bits, "a map of bits");
    fs = remount_checked(fs, true, "after a cut, with a map of bits");
    // Scattered changes: the delta, or a new map of either kind, at each commit.
    let mut files = BTreeMap::new();
    for round in 0..12u64 {
        churn(&mut fs, &mut files, round, 80);
        fs = remount_checked(fs, round % 2 == 1, &format!("round {round}"));
    }
    // The second file deleted too: few runs again, saved as runs.
    let writes = fs.stats().space_map_writes;
    fs.unlink(ROOT_INO, b"b").unwrap();
    fs.sync().unwrap();
    let written = fs.stats().space_map_writes - writes;
    assert!((1..bits).contains(&written), "{written} map blocks written");
    remount_checked(fs, false, "after the last unmount");
}

/// After a power cut the mount forgets again the sectors the block device maps and the
/// file system does not use, looking only through the chunks of the map that hold data: a
/// file deleted beyond chunks emptied (and checkpointed without a page) is forgotten, and
/// `fsck` finds no free block still mapped.
#[test]
fn a_cut_mount_forgets_past_the_empty_chunks_of_the_map() {
    let mut fs = Fs::format(nand_of_300x64(), config()).unwrap();
    // 4 MiB of 512-byte blocks: the map's chunks (2,016 sectors each) 0 to 4.
    let big = fs.create(ROOT_INO, b"big", 0o644, 0, 0).unwrap().ino;
    for i in 0..64u64 {
        fs.write(big, i * 65536, &pattern(i, 4, 65536)).unwrap();
    }
    let small = fs.create(ROOT_INO, b"small", 0o644, 0, 0).unwrap().ino;
    fs.write(small, 0, &pattern(9, 5, 3000)).unwrap();
    fs = remount_checked(fs, false, "after the files");
    // The big file's chunks go empty, and a close's checkpoint holds them so.
    fs.unlink(ROOT_INO, b"big").unwrap();
    fs = remount_checked(fs, false, "after the big file's delete");
    // The small file's forget is lost to the cut: the mount must find its blocks again.
    fs.unlink(ROOT_INO, b"small").unwrap();
    fs.sync().unwrap();
    let fs = remount_checked(fs, true, "after the small file's delete and a cut");
    assert!(!fs.ftl().log().found_closed());
}
