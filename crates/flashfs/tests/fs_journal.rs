//! The journal (SPEC.md §8.5b): record operations committed as entries on reprogrammable
//! NOR, replayed by the mount after a power cut, checkpointed when anything else changes.
//! Cuts at every device operation are in `fs_powercut.rs`.

mod common;

use std::sync::atomic::{AtomicI64, Ordering};

use common::*;
use flashfs::fs::{Atime, Ino, RecordFormat, Timespec, ROOT_INO};
use flashfs::media::tag::Kind;
use flashfs::{Fs, FsConfig, Segments};

/// A clock that moves a second at each reading.
fn ticking_clock() -> Timespec {
    static NOW: AtomicI64 = AtomicI64::new(1_800_000_000);
    Timespec {
        sec: NOW.fetch_add(1, Ordering::Relaxed),
        nsec: 123,
    }
}

fn config() -> FsConfig {
    FsConfig {
        clock: ticking_clock,
        atime: Atime::Strict,
        ..fs_config()
    }
}

#[test]
fn record_commits_are_entries_and_a_mount_replays_them() {
    let mut fs = Fs::format(nor(true), config()).unwrap();
    let log = record_file(&mut fs, b"log", RecordFormat::cyclic(4, 8));
    let var = record_file(&mut fs, b"var", RecordFormat::variable());
    fs.sync().unwrap();
    let before = fs.stats();
    for i in 0..10u8 {
        fs.record_add(log, &[i; 8]).unwrap();
        fs.sync().unwrap();
    }
    fs.record_add(var, b"short").unwrap();
    fs.record_add(var, &[7; 300]).unwrap();
    fs.record_update(var, 0, &[9; 200]).unwrap();
    fs.record_remove_last(var).unwrap();
    fs.sync().unwrap();
    // A read sets the access time: an operation of the journal too.
    assert_eq!(fs.record_read(log, 9).unwrap(), [9; 8]);
    fs.sync().unwrap();
    let after = fs.stats();
    assert_eq!(after.journal_entries - before.journal_entries, 12);
    assert_eq!(after.superblock_writes, before.superblock_writes);
    assert_eq!(after.superblock_appends, before.superblock_appends);
    assert_eq!(after.node_writes, before.node_writes, "{after:?}");
    let attrs = [fs.getattr(log).unwrap(), fs.getattr(var).unwrap()];
    let (want, _) = dump(&mut fs).unwrap();

    // The power goes: nothing but the entries says what happened since the checkpoint.
    let dev = fs.into_device();
    let mut fs = Fs::mount(dev, config()).unwrap();
    assert_eq!(fs.stats().journal_replayed, 10 + 4 + 1);
    assert_eq!([fs.getattr(log).unwrap(), fs.getattr(var).unwrap()], attrs);
    let info = fs.record_info(log).unwrap();
    assert_eq!((info.first, info.next), (6, 10));
    assert_eq!(fs.record_read(var, 0).unwrap(), [9; 200]);
    let (got, _) = dump(&mut fs).unwrap();
    assert_eq!(got, want);
    assert!(fs.check(false).unwrap().is_clean());
    // The mount checkpointed: a second power cut replays nothing.
    let dev = fs.into_device();
    let fs = Fs::mount(dev, config()).unwrap();
    assert_eq!(fs.stats().journal_replayed, 0);
}

#[test]
fn other_changes_and_transactions_make_the_commit_a_checkpoint() {
    let mut fs = Fs::format(nor(true), fs_config()).unwrap();
    let log = record_file(&mut fs, b"log", RecordFormat::variable());
    fs.sync().unwrap();
    let entries = |fs: &Fs<_>| fs.stats().journal_entries;
    let checkpoints = |fs: &Fs<_>| {
        let s = fs.stats();
        s.commits - s.journal_entries
    };
    let (e0, c0) = (entries(&fs), checkpoints(&fs));
    // A record and a new directory: one checkpoint.
    fs.record_add(log, b"a").unwrap();
    fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap();
    fs.sync().unwrap();
    assert_eq!((entries(&fs), checkpoints(&fs)), (e0, c0 + 1));
    // A transaction's records reach the index at its commit: a checkpoint.
    let tid = fs.begin().unwrap();
    fs.in_tx(tid, |fs| fs.record_add(log, b"b")).unwrap();
    fs.commit_tx(tid).unwrap();
    assert_eq!((entries(&fs), checkpoints(&fs)), (e0, c0 + 2));
    // An atomic operation while a transaction is open (on another file) is an entry; the
    // transaction's changes stay out of it.
    let other = record_file(&mut fs, b"other", RecordFormat::variable());
    fs.sync().unwrap();
    let c1 = checkpoints(&fs);
    let tid = fs.begin().unwrap();
    fs.in_tx(tid, |fs| fs.record_add(other, b"in the transaction"))
        .unwrap();
    fs.record_add(log, b"c").unwrap();
    fs.sync().unwrap();
    assert_eq!((entries(&fs), checkpoints(&fs)), (e0 + 1, c1));
    let dev = fs.into_device();
    let mut fs = Fs::mount(dev, fs_config()).unwrap();
    let records: Vec<Vec<u8>> = fs
        .record_list(log)
        .unwrap()
        .into_iter()
        .map(|r| r.1)
        .collect();
    assert_eq!(records, [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
    assert_eq!(fs.record_info(other).unwrap().count(), 0);
    assert!(fs.check(false).unwrap().is_clean());
}

#[test]
fn a_full_journal_checkpoints_and_goes_on() {
    let config = FsConfig {
        journal_blocks: Some(2),
        ..fs_config()
    };
    let mut fs = Fs::format(nor(true), config).unwrap();
    let log = record_file(&mut fs, b"log", RecordFormat::cyclic(50, 100));
    fs.record_add(log, &[0; 100]).unwrap();
    fs.sync().unwrap();
    // Updates, whose entries hold the records (adds would go to an append block).
    for i in 1..41u8 {
        fs.record_update(log, 0, &[i; 100]).unwrap();
        fs.sync().unwrap();
    }
    let s = fs.stats();
    // Two blocks hold eight entries of 112 bytes an epoch (four each).
    assert!(s.journal_entries >= 30, "{s:?}");
    assert!(s.commits - s.journal_entries >= 4, "{s:?}");
    // A checkpoint trims the blocks of the epoch it ends: nothing of them is left for the
    // cleaner to copy.
    let journal = |fs: &mut Fs<_>| [1, 2].map(|b| fs.ftl_mut().is_mapped(b).unwrap());
    assert!(journal(&mut fs)[0]);
    fs.checkpoint().unwrap();
    assert_eq!(journal(&mut fs), [false, false]);
    fs.record_update(log, 0, &[41; 100]).unwrap();
    fs.sync().unwrap();
    assert_eq!(journal(&mut fs), [true, false]);
    let dev = fs.into_device();
    let mut fs = Fs::mount(dev, config).unwrap();
    let info = fs.record_info(log).unwrap();
    assert_eq!((info.first, info.next), (0, 1));
    assert_eq!(fs.record_read(log, 0).unwrap(), [41; 100]);
    assert!(fs.check(false).unwrap().is_clean());
}

/// Adds a record to a new record file, committed on its own; returns the journal entries
/// written.
fn entries_for_one_record<D: Segments>(mut fs: Fs<D>) -> u64 {
    let r = record_file(&mut fs, b"r", RecordFormat::variable());
    fs.sync().unwrap();
    fs.record_add(r, b"x").unwrap();
    fs.sync().unwrap();
    fs.stats().journal_entries
}

/// Every medium has a journal by default: where written bytes can be programmed again its
/// entries share blocks, elsewhere each takes a block of its own.
#[test]
fn every_medium_has_a_journal_unless_left_out() {
    for dev in [
        Fs::format(nor(true), fs_config()),
        Fs::format(nor(false), fs_config()),
    ] {
        assert_eq!(entries_for_one_record(dev.unwrap()), 1);
    }
    assert_eq!(
        entries_for_one_record(Fs::format(nand(), fs_config()).unwrap()),
        1
    );
    // The journal can be left out, and its blocks are the files'.
    let none = FsConfig {
        journal_blocks: Some(0),
        ..fs_config()
    };
    let fs = Fs::format(nor(true), none).unwrap();
    assert!(fs.statfs().blocks > Fs::format(nor(true), fs_config()).unwrap().statfs().blocks);
    assert_eq!(
        fs.statfs().blocks,
        Fs::format(nor(false), none).unwrap().statfs().blocks
    );
    assert_eq!(entries_for_one_record(fs), 0);
    assert_eq!(entries_for_one_record(Fs::format(nand(), none).unwrap()), 0);
}

/// An entry pads only to the part's word: the update of a 15-byte record (19 bytes of
/// operation, 6 of length and CRC) takes 26 bytes on 2-byte words, 28 on 4-byte words,
/// never the 32 of an 8-byte alignment; an add that starts an append block, 12 on both;
/// adds and a removal from the front after it commit themselves by their frames, no entry;
/// a removal from the end after them, with the count of those frames, 14 and 16.
#[test]
fn entries_pad_only_to_the_parts_word() {
    for (word, want, want_started, want_counted) in [(2, 26, 12, 14), (4, 28, 12, 16)] {
        let dev = nor_of(flash::NorSpec {
            word_size: word,
            ..nor_spec(true)
        });
        let mut fs = Fs::format(dev, fs_config()).unwrap();
        let calls = record_file(&mut fs, b"calls", RecordFormat::variable());
        fs.record_add(calls, &[2; 15]).unwrap();
        fs.sync().unwrap();
        let before = fs.stats();
        fs.record_update(calls, 0, &[3; 15]).unwrap();
        fs.sync().unwrap();
        let after = fs.stats();
        assert_eq!(
            after.journal_entries - before.journal_entries,
            1,
            "{word}-byte words"
        );
        assert_eq!(
            after.journal_bytes - before.journal_bytes,
            want,
            "{word}-byte words"
        );
        // An add that starts an append block: code, inode, time, length and sector.
        let before = fs.stats();
        fs.record_add(calls, &[4; 15]).unwrap();
        fs.sync().unwrap();
        let started = fs.stats().journal_bytes - before.journal_bytes;
        assert_eq!(started, want_started, "{word}-byte words");
        // The adds after it, and the removal of the oldest record, commit themselves: no
        // entry at all.
        let before = fs.stats();
        for i in 5..8 {
            fs.record_add(calls, &[i; 15]).unwrap();
            fs.sync().unwrap();
        }
        fs.record_remove_first(calls).unwrap();
        fs.sync().unwrap();
        let after = fs.stats();
        assert_eq!(
            after.journal_bytes, before.journal_bytes,
            "{word}-byte words"
        );
        assert_eq!(after.frame_commits - before.frame_commits, 4);
        // The removal from the end after them says first that four frames came before it.
        fs.record_remove_last(calls).unwrap();
        fs.sync().unwrap();
        let counted = fs.stats().journal_bytes - after.journal_bytes;
        assert_eq!(counted, want_counted, "{word}-byte words");
        // Each record is 15 copies of one byte.
        let bytes = |fs: &mut Fs<_>| -> Vec<u8> {
            let list = fs.record_list(calls).unwrap();
            list.iter().map(|r| r.1[0]).collect()
        };
        assert_eq!(bytes(&mut fs), [4, 5, 6]);
        let mut fs = Fs::mount(fs.into_device(), fs_config()).unwrap();
        assert_eq!(bytes(&mut fs), [4, 5, 6], "{word}-byte words, replayed");
    }
}

/// A small write's `fsync` programs one entry with its bytes: no data block, no index node,
/// no superblock; the mount replays it. A punch of the block it left in RAM changes no
/// index entry (the clock stands still: not even the times change), yet its sync must not
/// be taken for covered (a regression: it was, and a cut brought the punched bytes back).
fn small_writes_are_entries<D: Segments>(mut fs: Fs<D>) -> Fs<D> {
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap().ino;
    fs.write(f, 0, &[1; 3000]).unwrap();
    fs.sync().unwrap();
    let before = fs.stats();
    for i in 0..5u8 {
        fs.write(f, u64::from(i) * 700, &[i + 2; 64]).unwrap();
        fs.fsync(f, false).unwrap();
    }
    let after = fs.stats();
    assert_eq!(after.journal_entries - before.journal_entries, 5);
    assert_eq!(after.commits - before.commits, 5, "no checkpoint");
    assert_eq!(after.node_writes, before.node_writes, "no index node");
    assert_eq!(after.superblock_writes, before.superblock_writes);
    let mut want = vec![1u8; 3000];
    for i in 0..5u8 {
        let at = usize::from(i) * 700;
        want[at..at + 64].fill(i + 2);
    }
    let dev = fs.into_device();
    let mut fs = Fs::mount(dev, fs_config()).unwrap();
    let mut got = vec![0; 3000];
    assert_eq!(fs.read(f, 0, &mut got).unwrap(), 3000);
    assert!(got == want, "the synced writes are not all there");
    // The block the last write left in RAM, punched: a change the index does not see.
    fs.write(f, 2800, &[9; 64]).unwrap();
    fs.fsync(f, false).unwrap();
    fs.fallocate(f, 3, 2810, 20).unwrap();
    fs.fsync(f, false).unwrap();
    want[2800..2864].fill(9);
    want[2810..2830].fill(0);
    let mut fs = Fs::mount(fs.into_device(), fs_config()).unwrap();
    assert_eq!(fs.read(f, 0, &mut got).unwrap(), 3000);
    assert!(got == want, "the punch is lost");
    assert!(fs.check(false).unwrap().is_clean());
    fs
}

#[test]
fn small_writes_and_their_fsync_are_journal_entries() {
    small_writes_are_entries(Fs::format(nor(true), fs_config()).unwrap());
    // Where a journal is asked for: an entry per block.
    let asked = FsConfig {
        journal_blocks: Some(8),
        ..fs_config()
    };
    small_writes_are_entries(Fs::format(nor(false), asked).unwrap());
    small_writes_are_entries(Fs::format(nand(), asked).unwrap());
}

/// The slot holding the newest version of sector `key` (a scan of every tag).
fn newest_slot_of<D: Segments>(dev: &mut D, key: u32) -> (u32, u32) {
    let (_, seg, slot) = valid_tags(dev)
        .into_iter()
        .filter(|(_, _, t)| t.kind == Kind::Sector && t.key == key)
        .map(|(seg, slot, t)| (t.seq, seg, slot))
        .max()
        .expect("sector written");
    (seg, slot)
}

/// A checkpoint lost to damage after entries of its epoch were written: the mount takes the
/// checkpoint before it and replays that one's epoch. The next checkpoint must not take the
/// lost one's number, or a later mount takes the lost epoch's entries, which can come back
/// (should damage take the trim record that drops them), for its own (a regression: the
/// torture saw a file grow by bytes written in the lost epoch, under `ecc-beyond`).
#[test]
fn a_lost_checkpoints_entries_never_pass_for_a_later_ones() {
    let asked = FsConfig {
        journal_blocks: Some(8),
        ..fs_config()
    };
    let mut fs = Fs::format(nand(), asked).unwrap();
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap().ino;
    fs.write(f, 0, &[1; 3000]).unwrap();
    fs.sync().unwrap();
    fs.write(f, 0, &[2; 64]).unwrap();
    fs.fsync(f, false).unwrap();
    fs.checkpoint().unwrap();
    // An entry of the new epoch, then its checkpoint's superblock lost at rest.
    fs.write(f, 1000, &[3; 64]).unwrap();
    fs.fsync(f, false).unwrap();
    assert_eq!(fs.stats().journal_entries, 2);
    let mut dev = fs.into_device();
    let (seg, slot) = newest_slot_of(&mut dev, 0);
    let at = dev.slot_page(seg, slot);
    dev.flash_mut().inject_bit_errors(at, 64).unwrap();
    // The checkpoint before it (whose epoch's entry went with the block the lost epoch
    // wrote again): the state of then, without the lost epoch's entry.
    let mut fs = Fs::mount(dev, asked).unwrap();
    let mut then = vec![0; 3000];
    assert_eq!(fs.read(f, 0, &mut then).unwrap(), 3000);
    assert!(
        then[1000..1064] == [1; 64],
        "the lost epoch's entry was replayed"
    );
    assert!(then[..64] == [1; 64] || then[..64] == [2; 64]);
    // A change, and its checkpoint.
    fs.create(ROOT_INO, b"g", 0o644, 0, 0).unwrap();
    fs.checkpoint().unwrap();
    // The power goes; the lost epoch's block is still on flash.
    let mut fs = Fs::mount(fs.into_device(), asked).unwrap();
    let mut got = vec![0; 3000];
    assert_eq!(fs.read(f, 0, &mut got).unwrap(), 3000);
    assert!(
        got == then,
        "the lost epoch's entry was replayed after the next checkpoint"
    );
    assert!(fs.check(false).unwrap().is_clean());
}

/// On a volume that keeps checkpoints, the blocks of an epoch a checkpoint ended are trimmed,
/// not just forgotten: a forget holds only until a power cut, after which the block device maps them again as its checkpoint
/// did, and a mount reads every journal block. Had the cleaner erased the versions named
/// there meanwhile, they would read as data lost and the mount would fail (the torture's
/// case mlc-flexfs fs mount-cut fs-database seed 834 cut 80 torn). Trimmed, they have no
/// data after the cut either.
#[test]
fn an_ended_epochs_journal_blocks_stay_without_data_after_a_power_cut() {
    let config = FsConfig {
        journal_blocks: Some(8),
        ..config()
    };
    let mut fs = Fs::format(nand_checkpointed(), config).unwrap();
    let (log, used) = records_in_the_journal(&mut fs);
    // A checkpoint of the block device: its map names the journal's blocks.
    fs.ftl_mut().checkpoint().unwrap();
    end_the_epoch(&mut fs, &used);
    // The power goes before the block device's next checkpoint; the cleaner had erased
    // what the blocks held (dead to it), as it may.
    let mut dev = fs.into_device();
    for &k in &used {
        let (seg, slot) = newest_slot_of(&mut dev, k as u32);
        let page = dev.slot_page(seg, slot);
        dev.flash_mut().erase_page_at_rest(page).unwrap();
    }
    let mut fs = Fs::mount(dev, config).unwrap();
    assert_eq!(fs.record_list(log).unwrap().len(), 4);
    assert!(fs.check(false).unwrap().is_clean());
}

/// On a volume the block device mounts by a scan, the blocks of an ended epoch are let go
/// without a trim record: a scan maps only versions it reads, so a power cut cannot bring
/// one back as data lost, and a record would be programs the commit-every-event workloads of
/// small NOR parts pay in endurance.
#[test]
fn a_scanned_volume_lets_an_ended_epochs_journal_blocks_go_without_a_record() {
    let mut fs = Fs::format(nor(true), config()).unwrap();
    assert!(!fs.ftl().log().keeps_checkpoints());
    let (log, used) = records_in_the_journal(&mut fs);
    end_the_epoch(&mut fs, &used);
    let mut dev = fs.into_device();
    let trims = valid_tags(&mut dev)
        .into_iter()
        .filter(|(_, _, t)| t.kind == Kind::Trim)
        .count();
    assert_eq!(trims, 0, "trim records on a scanned volume");
    // The power goes: the blocks come back as their epoch's, or as nothing, and are
    // ignored.
    let mut fs = Fs::mount(dev, config()).unwrap();
    assert_eq!(fs.record_list(log).unwrap().len(), 4);
    assert!(fs.check(false).unwrap().is_clean());
}

/// A record file given four records, each synced alone: journal entries or self-committing
/// frames, in journal blocks. Returns the file
/// and the journal blocks the block device maps.
fn records_in_the_journal<D: Segments>(fs: &mut Fs<D>) -> (Ino, Vec<u64>) {
    let log = record_file(fs, b"log", RecordFormat::variable());
    fs.sync().unwrap();
    for i in 0..4u8 {
        fs.record_add(log, &[i; 40]).unwrap();
        fs.sync().unwrap();
    }
    let st = fs.stats();
    // Entries, or on reprogrammable NOR frames that commit themselves in append blocks.
    assert!(st.journal_entries + st.frame_commits >= 4, "{st:?}");
    let used: Vec<u64> = (1..=st.journal_blocks)
        .filter(|&k| fs.ftl_mut().is_mapped(k).unwrap())
        .collect();
    assert!(!used.is_empty(), "no journal block holds entries");
    (log, used)
}

/// A change that is no record: a checkpoint of the file system ends the epoch, and the block
/// device lets the journal blocks it `used` go.
fn end_the_epoch<D: Segments>(fs: &mut Fs<D>, used: &[u64]) {
    fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap();
    fs.sync().unwrap();
    for &k in used {
        assert!(
            !fs.ftl_mut().is_mapped(k).unwrap(),
            "block {k} after the checkpoint"
        );
    }
}

/// A new file and a small first write, `fsync`ed, are one journal entry (file-system version
/// 12): no index node, no superblock; a mount after a power cut replays the create (the same
/// inode, name, mode and owner) and the write.
fn creates_are_entries<D: Segments>(mut fs: Fs<D>, config: FsConfig) {
    let dir = fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap().ino;
    fs.sync().unwrap();
    let before = fs.stats();
    let mut files = Vec::new();
    for i in 0..5u8 {
        let name = format!("f{i}");
        let a = fs.create(dir, name.as_bytes(), 0o600, 7, 8).unwrap();
        fs.write(a.ino, 0, &[i; 64]).unwrap();
        fs.fsync(a.ino, false).unwrap();
        files.push((name, a.ino));
    }
    // An empty file, synced alone.
    let empty = fs.create(ROOT_INO, b"empty", 0o644, 0, 0).unwrap().ino;
    fs.sync().unwrap();
    let after = fs.stats();
    assert_eq!(
        after.journal_entries - before.journal_entries,
        6,
        "{after:?}"
    );
    assert_eq!(after.node_writes, before.node_writes, "{after:?}");
    assert_eq!(after.superblock_writes, before.superblock_writes);
    assert_eq!(after.superblock_appends, before.superblock_appends);
    let (want, _) = dump(&mut fs).unwrap();

    // The power goes.
    let mut fs = Fs::mount(fs.into_device(), config).unwrap();
    assert_eq!(fs.stats().journal_replayed, 11);
    for (i, (name, ino)) in files.iter().enumerate() {
        let a = fs.lookup(dir, name.as_bytes()).unwrap();
        assert_eq!(a.ino, *ino);
        assert_eq!(
            (a.inode.mode & 0o7777, a.inode.uid, a.inode.gid),
            (0o600, 7, 8)
        );
        let mut buf = [0u8; 64];
        assert_eq!(fs.read(a.ino, 0, &mut buf).unwrap(), 64);
        assert_eq!(buf, [i as u8; 64]);
    }
    assert_eq!(fs.lookup(ROOT_INO, b"empty").unwrap().ino, empty);
    let (got, _) = dump(&mut fs).unwrap();
    assert_eq!(got, want);
    assert!(fs.check(false).unwrap().is_clean());
    // A file created after the replay takes the next inode, not one the replay gave.
    let next = fs.create(ROOT_INO, b"next", 0o644, 0, 0).unwrap().ino;
    assert!(next > empty, "{next} after {empty}");
}

#[test]
fn a_new_file_and_its_small_write_are_one_entry() {
    creates_are_entries(Fs::format(nor(true), fs_config()).unwrap(), fs_config());
    let asked = FsConfig {
        journal_blocks: Some(8),
        ..fs_config()
    };
    creates_are_entries(Fs::format(nand(), asked).unwrap(), asked);
}
