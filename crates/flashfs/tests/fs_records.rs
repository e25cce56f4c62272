//! Record files (fixed, variable and cyclic), integer names and the flat namespace: their
//! behaviour across remounts, `fsck`, power cuts at every device operation, and a property
//! test of record operations against a plain model.

mod common;

use std::collections::{BTreeMap, VecDeque};

use common::*;
use flashfs::fs::{
    FileType, Ino, RecordFormat, RecordInfo, FLAT_NAME_MAX, INT_COOKIE_BASE, RECORD_MAX, ROOT_INO,
};
use flashfs::{BlockDevice, Error, Fs, FsConfig, Segments};
use flashfs_bench::torture::SimSegments as Sim;
use proptest::prelude::*;

fn data(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| {
            (i as u32)
                .wrapping_mul(29)
                .wrapping_add(u32::from(seed) * 97) as u8
        })
        .collect()
}

fn remount<D: Segments>(fs: Fs<D>) -> Fs<D> {
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, fs_config()).unwrap();
    fsck_clean(&mut fs, "after the remount");
    fs
}

fn fsck_clean<D: Segments>(fs: &mut Fs<D>, what: &str) {
    let report = fs.check(false).unwrap();
    assert!(report.is_clean(), "{what}: {:?}", report.problems);
}

fn names<D: Segments>(fs: &mut Fs<D>, dir: Ino) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut cookie = 0;
    loop {
        let batch = fs.readdir(dir, cookie, 2).unwrap();
        let Some(last) = batch.last() else { break };
        cookie = last.cookie;
        out.extend(batch.into_iter().map(|e| e.name));
    }
    out
}

fn records_by_content<D: Segments>(mut fs: Fs<D>) -> Fs<D> {
    let f = record_file(&mut fs, b"log", RecordFormat::variable());
    // Lengths around the index's value size (a quarter node): one chunk, several, none, most.
    let lens = [10, 40, 300, 0, RECORD_MAX, 128, 129];
    let mut want: Vec<Vec<u8>> = Vec::new();
    for (i, &len) in lens.iter().enumerate() {
        let n = fs.record_add(f, &data(i as u8, len)).unwrap();
        assert_eq!(n, i as u64);
        want.push(data(i as u8, len));
    }
    // Small records live in the index: no data block.
    assert_eq!(fs.getattr(f).unwrap().inode.blocks, 0);
    assert!(fs.extents(f).unwrap().is_empty());
    let check = |fs: &mut Fs<D>, want: &[Vec<u8>]| {
        assert_eq!(fs.records(f).unwrap(), want.len() as u64);
        for (i, w) in want.iter().enumerate() {
            assert_eq!(&fs.record_read(f, i as u64).unwrap(), w, "record {i}");
        }
        let all: Vec<u8> = want.concat();
        assert_eq!(fs.getattr(f).unwrap().inode.size, all.len() as u64);
        assert_eq!(fs.read_file(b"/log").unwrap(), all);
        // A read from the middle of the stream, across record boundaries.
        let mut buf = vec![0; 200];
        let n = fs.read(f, 30, &mut buf).unwrap();
        assert_eq!(&buf[..n], &all[30..230]);
        let listed: Vec<Vec<u8>> = fs
            .record_list(f)
            .unwrap()
            .into_iter()
            .map(|r| r.1)
            .collect();
        assert_eq!(listed, want);
    };
    check(&mut fs, &want);
    // Updates that change lengths, both ways, rewrite only that record.
    fs.record_update(f, 1, &data(50, 700)).unwrap();
    want[1] = data(50, 700);
    fs.record_update(f, 2, &data(51, 5)).unwrap();
    want[2] = data(51, 5);
    fs.record_update(f, 3, &data(52, 1)).unwrap();
    want[3] = data(52, 1);
    check(&mut fs, &want);
    let mut fs = remount(fs);
    check(&mut fs, &want);
    // Refusals change nothing.
    assert_eq!(fs.record_read(f, 7), Err(Error::NotFound));
    assert_eq!(fs.record_update(f, 9, b"x"), Err(Error::NotFound));
    assert_eq!(
        fs.record_add(f, &vec![1; RECORD_MAX + 1]),
        Err(Error::TooBig)
    );
    assert!(matches!(
        fs.write(f, 0, b"bytes"),
        Err(Error::InvalidArgument(_))
    ));
    let trunc = flashfs::fs::SetAttr {
        size: Some(3),
        ..Default::default()
    };
    assert!(matches!(
        fs.setattr(f, trunc),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        fs.fallocate(f, 0, 0, 10),
        Err(Error::InvalidArgument(_))
    ));
    check(&mut fs, &want);
    // Removing the first and the last: numbers stay with their records.
    fs.record_remove_first(f).unwrap();
    fs.record_remove_last(f).unwrap();
    let info = fs.record_info(f).unwrap();
    assert_eq!((info.first, info.next), (1, 6));
    assert_eq!(fs.record_read(f, 0), Err(Error::NotFound));
    assert_eq!(fs.record_read(f, 5).unwrap(), want[5]);
    assert_eq!(fs.record_add(f, b"again").unwrap(), 6);
    let mut fs = remount(fs);
    assert_eq!(fs.record_read(f, 6).unwrap(), b"again");
    assert_eq!(
        fs.read_file(b"/log").unwrap(),
        [&want[1..6].concat()[..], b"again"].concat()
    );
    // Fixed-size records refuse other lengths.
    let g = record_file(&mut fs, b"fixed", RecordFormat::fixed(16));
    fs.record_add(g, &data(1, 16)).unwrap();
    assert!(matches!(
        fs.record_add(g, &data(1, 15)),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        fs.record_update(g, 0, &data(1, 17)),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(fs.records(g).unwrap(), 1);
    // Not a record file.
    let plain = fs.create(ROOT_INO, b"plain", 0o644, 0, 0).unwrap().ino;
    assert!(matches!(
        fs.record_add(plain, b"x"),
        Err(Error::InvalidArgument(_))
    ));
    fs.write(plain, 0, b"x").unwrap();
    assert!(matches!(
        fs.make_records(plain, RecordFormat::variable()),
        Err(Error::InvalidArgument(_))
    ));
    fs
}

#[test]
fn records_add_read_update_and_remove_across_remounts() {
    let dev = Fs::format(nor(true), fs_config())
        .unwrap()
        .unmount()
        .unwrap();
    let fs = records_by_content(Fs::mount(dev, fs_config()).unwrap());
    let mut fs = remount(fs);
    fsck_clean(&mut fs, "at the end");
    let dev = Fs::format(nand(), fs_config()).unwrap().unmount().unwrap();
    let fs = records_by_content(Fs::mount(dev, fs_config()).unwrap());
    remount(fs);
}

#[test]
fn cyclic_files_keep_the_last_records_in_order() {
    let mut fs = Fs::format(nor(false), fs_config()).unwrap();
    let cap = 5u64;
    let f = fs
        .create_records(
            ROOT_INO,
            b"calls",
            RecordFormat::cyclic(cap as u32, 15),
            0o644,
            0,
            0,
        )
        .unwrap()
        .ino;
    let mut fs_opt = Some(fs);
    for i in 0..23u64 {
        let mut fs = fs_opt.take().unwrap();
        assert_eq!(fs.record_add(f, &data(i as u8, 15)).unwrap(), i);
        let fs = if i % 6 == 5 { remount(fs) } else { fs };
        fs_opt = Some(fs);
    }
    let mut fs = fs_opt.unwrap();
    let check = |fs: &mut Fs<_>| {
        let info: RecordInfo = fs.record_info(f).unwrap();
        assert_eq!((info.first, info.next, info.count()), (23 - cap, 23, cap));
        let list = fs.record_list(f).unwrap();
        let want: Vec<(u64, Vec<u8>)> = (23 - cap..23).map(|i| (i, data(i as u8, 15))).collect();
        assert_eq!(list, want);
        let stream: Vec<u8> = want.iter().flat_map(|r| r.1.clone()).collect();
        assert_eq!(fs.read_file(b"/calls").unwrap(), stream);
        assert_eq!(fs.record_read(f, 23 - cap - 1), Err(Error::NotFound));
    };
    check(&mut fs);
    let mut fs = remount(fs);
    check(&mut fs);
    // A cyclic file of variable-length records.
    let v = record_file(&mut fs, b"var", RecordFormat::cyclic(2, 0));
    for (i, len) in [3, 500, 0, 77].into_iter().enumerate() {
        fs.record_add(v, &data(i as u8, len)).unwrap();
    }
    let mut fs = remount(fs);
    assert_eq!(
        fs.record_list(v).unwrap(),
        vec![(2, vec![]), (3, data(3, 77))]
    );
    assert_eq!(fs.getattr(v).unwrap().inode.size, 77);
}

/// Fixed-size records of a size that divides the block leave the index for data blocks at a
/// checkpoint, a block once all its records are there; a block whose records are all gone
/// is freed; updates and removals of records held in blocks read back as they should.
#[test]
fn fixed_size_records_fill_data_blocks() {
    records_fill_blocks(nor(true));
    records_fill_blocks(nand());
}

fn records_fill_blocks<D: Segments>(dev: D) {
    let mut fs = Fs::format(dev, fs_config()).unwrap();
    let bs = u64::from(fs.block_size());
    let per = bs / 32;
    let f = record_file(&mut fs, b"events", RecordFormat::cyclic(4 * per as u32, 32));
    let mut want: VecDeque<(u64, Vec<u8>)> = VecDeque::new();
    let add = |fs: &mut Fs<D>, want: &mut VecDeque<(u64, Vec<u8>)>, i: u64| {
        let d = data(i as u8, 32);
        assert_eq!(fs.record_add(f, &d).unwrap(), i);
        want.push_back((i, d));
        if want.len() as u64 > 4 * per {
            want.pop_front();
        }
    };
    // Four blocks and a half: four are written at the checkpoint, the half stays items.
    for i in 0..4 * per + per / 2 {
        add(&mut fs, &mut want, i);
    }
    fs.checkpoint().unwrap();
    let attr = fs.getattr(f).unwrap();
    // The oldest block lost half its records to the wrap, but still holds the rest.
    assert_eq!(attr.inode.blocks, 4, "blocks after the first checkpoint");
    assert_eq!(attr.inode.size, 4 * per * 32);
    let list: Vec<(u64, Vec<u8>)> = want.iter().cloned().collect();
    assert_eq!(fs.record_list(f).unwrap(), list);
    fsck_clean(&mut fs, "after packing");
    // Records held in blocks: an update overrides one, and the stream shows it.
    let n = want[1].0;
    fs.record_update(f, n, &data(200, 32)).unwrap();
    want[1].1 = data(200, 32);
    assert_eq!(fs.record_read(f, n).unwrap(), data(200, 32));
    // The wrap empties the oldest block: it is freed; the next checkpoint writes the
    // block the update changed again, and the one completed since.
    for i in 4 * per + per / 2..5 * per {
        add(&mut fs, &mut want, i);
    }
    let mut fs = remount(fs);
    assert_eq!(fs.getattr(f).unwrap().inode.blocks, 4);
    let list: Vec<(u64, Vec<u8>)> = want.iter().cloned().collect();
    assert_eq!(fs.record_list(f).unwrap(), list);
    let stream: Vec<u8> = want.iter().flat_map(|r| r.1.clone()).collect();
    assert_eq!(fs.read_file(b"/events").unwrap(), stream);
    let mut mid = vec![0u8; 100];
    let got = fs.read(f, 17, &mut mid).unwrap();
    assert_eq!(&mid[..got], &stream[17..117]);
    // Removing from both ends frees the blocks emptied, down to none.
    while fs.record_info(f).unwrap().count() > 0 {
        fs.record_remove_last(f).unwrap();
        if fs.record_info(f).unwrap().count() > 0 {
            fs.record_remove_first(f).unwrap();
        }
    }
    let mut fs = remount(fs);
    let attr = fs.getattr(f).unwrap();
    assert_eq!((attr.inode.blocks, attr.inode.size), (0, 0));
}

/// A fresh volume on reprogrammable NOR with a record file `/sms`, committed.
fn sms_file(format: RecordFormat) -> (Fs<impl Segments>, Ino) {
    let mut fs = Fs::format(nor(true), fs_config()).unwrap();
    let f = record_file(&mut fs, b"sms", format);
    fs.sync().unwrap();
    (fs, f)
}

/// Adds `data` to `f`, committed on its own, and returns the journal bytes it took.
fn add_synced<D: Segments>(fs: &mut Fs<D>, f: Ino, data: &[u8]) -> u64 {
    let before = fs.stats().journal_bytes;
    fs.record_add(f, data).unwrap();
    fs.sync().unwrap();
    fs.stats().journal_bytes - before
}

fn check_list<D: Segments>(fs: &mut Fs<D>, f: Ino, want: &VecDeque<(u64, Vec<u8>)>, what: &str) {
    let list: Vec<(u64, Vec<u8>)> = want.iter().cloned().collect();
    assert_eq!(fs.record_list(f).unwrap(), list, "{what}");
    let stream: Vec<u8> = want.iter().flat_map(|r| r.1.clone()).collect();
    assert_eq!(
        fs.read_file(b"/sms").unwrap(),
        stream,
        "{what}: the byte stream"
    );
}

/// The sector whose bytes hold `needle`, if one does.
fn sector_holding<D: Segments>(fs: &mut Fs<D>, needle: &[u8]) -> Option<u64> {
    let mut buf = vec![0u8; fs.block_size() as usize];
    (1..fs.ftl().sectors()).find(|&k| {
        fs.ftl_mut().is_mapped(k).unwrap()
            && fs.ftl_mut().read(k, &mut buf).is_ok()
            && buf.windows(needle.len()).any(|w| w == needle)
    })
}

/// A block a checkpoint covered, freed by removals whose lengths the journal holds, is free
/// at once (SPEC.md §8.5b): an add before the next checkpoint takes it again. A power cut
/// then: the replay releases the block with the removal and takes it again with the add.
#[test]
fn a_block_freed_is_taken_again_before_the_checkpoint() {
    let (mut fs, f) = sms_file(RecordFormat::variable());
    let checkpoints = |fs: &Fs<_>| {
        let st = fs.stats();
        st.superblock_writes + st.superblock_appends
    };
    // Each message starts with a mark and its number: its block is found by its bytes.
    let mark = |n: u64| [&b"msg#"[..], &n.to_le_bytes()].concat();
    let message = |n: u64| {
        let mut d = data(n as u8, 110 + (n as usize * 13) % 50);
        d[..12].copy_from_slice(&mark(n));
        d
    };
    let mut want: VecDeque<(u64, Vec<u8>)> = VecDeque::new();
    let mut held: BTreeMap<u64, u64> = BTreeMap::new();
    // Sectors whose messages went, with the checkpoint count when the last one did.
    let mut emptied: BTreeMap<u64, u64> = BTreeMap::new();
    for n in 0..2000u64 {
        if want.len() >= 8 {
            let (gone, _) = want.pop_front().unwrap();
            let before = checkpoints(&fs);
            fs.record_remove_first(f).unwrap();
            fs.sync().unwrap();
            // A removal in the journal, not covered by a checkpoint.
            let journaled = checkpoints(&fs) == before;
            if let Some(k) = held.remove(&gone) {
                if journaled && !held.values().any(|&s| s == k) {
                    emptied.insert(k, before);
                }
            }
        }
        fs.record_add(f, &message(n)).unwrap();
        fs.sync().unwrap();
        want.push_back((n, message(n)));
        let Some(k) = sector_holding(&mut fs, &mark(n)) else {
            continue;
        };
        held.insert(n, k);
        if emptied.get(&k) == Some(&checkpoints(&fs)) {
            // Taken again in the epoch that freed it: cut the power now.
            let dev = fs.into_device();
            let mut fs = Fs::mount(dev, fs_config()).unwrap();
            assert!(fs.stats().journal_replayed > 0);
            check_list(
                &mut fs,
                f,
                &want,
                "the replay after the block was taken again",
            );
            fsck_clean(&mut fs, "after the replay");
            return;
        }
    }
    panic!("no block was taken again before the next checkpoint");
}

/// More files appending at once than a mount keeps append blocks open for (16): a file
/// whose block it lets go, after records that committed themselves there, has them counted
/// in the next entry, so a power cut keeps every record, and a removal from the end after
/// them removes the last.
#[test]
fn more_files_appending_than_blocks_kept_open() {
    // Room for the whole scenario in one epoch: no checkpoint settles it.
    let config = FsConfig {
        dirty_limit: Some(100),
        ..fs_config()
    };
    let dev = nor_of(flash::NorSpec {
        units: 64,
        ..nor_spec(true)
    });
    let mut fs = Fs::format(dev, config).unwrap();
    let files: Vec<Ino> = (0..40u8)
        .map(|i| {
            record_file(
                &mut fs,
                format!("f{i}").as_bytes(),
                RecordFormat::variable(),
            )
        })
        .collect();
    fs.sync().unwrap();
    let mut want: Vec<Vec<Vec<u8>>> = vec![Vec::new(); files.len()];
    let mut add = |fs: &mut Fs<_>, i: usize, seed: u8| {
        let d = data(seed.wrapping_add(i as u8), 10 + i);
        fs.record_add(files[i], &d).unwrap();
        fs.sync().unwrap();
        want[i].push(d);
    };
    for i in 0..files.len() {
        add(&mut fs, i, 0);
    }
    fs.checkpoint().unwrap();
    // Two commits in a row per file: the second add commits itself; the blocks of files
    // done earlier are let go for the later ones.
    for i in 0..files.len() {
        add(&mut fs, i, 50);
        add(&mut fs, i, 100);
    }
    let st = fs.stats();
    assert!(st.frame_commits >= files.len() as u64, "{st:?}");
    // A removal from the end must come after the records that committed themselves.
    for &f in &files {
        fs.record_remove_last(f).unwrap();
        fs.sync().unwrap();
    }
    want.iter_mut().for_each(|w| drop(w.pop()));
    let checkpoints = |st: flashfs::fs::FsStats| st.commits - st.journal_entries - st.frame_commits;
    assert_eq!(checkpoints(fs.stats()), checkpoints(st), "one epoch");
    let mut fs = Fs::mount(fs.into_device(), config).unwrap();
    fsck_clean(&mut fs, "after the cut");
    for (i, &f) in files.iter().enumerate() {
        let got: Vec<Vec<u8>> = fs
            .record_list(f)
            .unwrap()
            .into_iter()
            .map(|r| r.1)
            .collect();
        assert_eq!(got, want[i], "file {i}");
    }
}

/// On reprogrammable NOR, a record added by a journaled commit to a file whose records do
/// not fill blocks is framed after the last in the file's append block, in place: its
/// bytes are written once, packed, a frame that does not fit going on in the next block.
/// The add that starts the file's first block is an entry of a few bytes naming it; the
/// adds after it commit themselves by their frames, with no entry, also those that go on
/// in a new block (the block before links to it). The mount replays the entry and finds
/// the records after it; removing the records frees the blocks.
#[test]
fn journaled_adds_go_once_to_append_blocks() {
    let (mut fs, f) = sms_file(RecordFormat::variable());
    let mut want: VecDeque<(u64, Vec<u8>)> = VecDeque::new();
    let mut entry_bytes = Vec::new();
    for i in 0..40u64 {
        let d = data(i as u8, 20 + (i as usize * 37) % 140);
        entry_bytes.push(add_synced(&mut fs, f, &d));
        want.push_back((i, d));
    }
    let blocks = fs.getattr(f).unwrap().inode.blocks;
    // Code, inode, time, length and the block the first add starts, with the entry's
    // length and CRC: 12 bytes on the test part's 4-byte words. Entries holding the records
    // would take 26 to 172.
    let entries: Vec<u64> = entry_bytes.iter().copied().filter(|&b| b > 0).collect();
    assert_eq!(entries, [12], "{entry_bytes:?}");
    assert_eq!(fs.stats().frame_commits, 39);
    // Each record takes its bytes and its length (a byte below 64, else two); a block its
    // 7-byte header and a bit per frame.
    let bytes: u64 = want
        .iter()
        .map(|r| r.1.len() as u64 + if r.1.len() < 64 { 1 } else { 2 })
        .sum();
    assert!(
        blocks == bytes.div_ceil(512 - 7 - 6),
        "{blocks} blocks for {bytes} B of frames"
    );
    check_list(&mut fs, f, &want, "as added");
    // Replayed from the journal (`fsck` would checkpoint first), then from the
    // checkpoint's index.
    let dev = fs.into_device();
    let mut fs = Fs::mount(dev, fs_config()).unwrap();
    assert_eq!(fs.stats().journal_replayed, 40);
    check_list(&mut fs, f, &want, "replayed");
    fsck_clean(&mut fs, "after the replay");
    fs.checkpoint().unwrap();
    let mut fs = remount(fs);
    check_list(&mut fs, f, &want, "after a checkpoint");
    // After a mount the old block takes no more frames: the next add starts a block —
    // here, where the newest block holds just the rest of the last record and is mapped at
    // the next record's number, the one after it does, and that one stays items.
    let before = fs.getattr(f).unwrap().inode.blocks;
    add_synced(&mut fs, f, &data(99, 30));
    want.push_back((40, data(99, 30)));
    assert_eq!(fs.getattr(f).unwrap().inode.blocks, before);
    add_synced(&mut fs, f, &data(98, 30));
    want.push_back((41, data(98, 30)));
    assert_eq!(fs.getattr(f).unwrap().inode.blocks, before + 1);
    // An update overrides a framed record; removing from both ends frees emptied blocks.
    fs.record_update(f, 3, &data(77, 300)).unwrap();
    want[3].1 = data(77, 300);
    fs.sync().unwrap();
    check_list(&mut fs, f, &want, "after an update");
    while want.len() > 2 {
        fs.record_remove_first(f).unwrap();
        want.pop_front();
        fs.record_remove_last(f).unwrap();
        want.pop_back();
        fs.sync().unwrap();
    }
    check_list(&mut fs, f, &want, "after removals");
    let mut fs = remount(fs);
    check_list(&mut fs, f, &want, "removals replayed");
    // Two records: in one block, or one going on in the next.
    assert!((1..=2).contains(&fs.getattr(f).unwrap().inode.blocks));
    while fs.record_info(f).unwrap().count() > 0 {
        fs.record_remove_first(f).unwrap();
    }
    fs.sync().unwrap();
    let fs = remount(fs);
    let mut fs = fs;
    let attr = fs.getattr(f).unwrap();
    assert_eq!((attr.inode.blocks, attr.inode.size), (0, 0));
}

/// A record removed from the end leaves its frame in the block: the number it gives back
/// goes to a record framed in a new block, never read from the stale frame.
#[test]
fn a_number_given_back_is_framed_anew() {
    let (mut fs, f) = sms_file(RecordFormat::variable());
    let mut want: VecDeque<(u64, Vec<u8>)> = VecDeque::new();
    for i in 0..3u64 {
        add_synced(&mut fs, f, &data(i as u8, 50));
        want.push_back((i, data(i as u8, 50)));
    }
    fs.record_remove_last(f).unwrap();
    fs.sync().unwrap();
    want.pop_back();
    for (i, len) in [(2u64, 9), (3, 120)] {
        add_synced(&mut fs, f, &data(100 + i as u8, len));
        want.push_back((i, data(100 + i as u8, len)));
    }
    check_list(&mut fs, f, &want, "live");
    assert_eq!(fs.getattr(f).unwrap().inode.blocks, 2);
    let dev = fs.into_device();
    let mut fs = Fs::mount(dev, fs_config()).unwrap();
    check_list(&mut fs, f, &want, "replayed");
    fsck_clean(&mut fs, "replayed");
}

/// A cyclic log of call records (15 bytes, which do not divide the block) keeps its records
/// in append blocks that wrap: a block is freed once the wrap has dropped all it held.
#[test]
fn a_cyclic_call_log_wraps_through_append_blocks() {
    let (mut fs, f) = sms_file(RecordFormat::cyclic(20, 15));
    let mut want: VecDeque<(u64, Vec<u8>)> = VecDeque::new();
    for i in 0..200u64 {
        add_synced(&mut fs, f, &data(i as u8, 15));
        want.push_back((i, data(i as u8, 15)));
        if want.len() > 20 {
            want.pop_front();
        }
        // 28 frames of 18 bytes fill a block: the 20 records live span at most two.
        assert!(fs.getattr(f).unwrap().inode.blocks <= 2, "after {i}");
    }
    check_list(&mut fs, f, &want, "wrapped");
    fsck_clean(&mut fs, "wrapped");
    let mut fs = remount(fs);
    check_list(&mut fs, f, &want, "wrapped, remounted");
}

/// The oldest record removed in the commit that adds the next, after a mount: the add
/// starts a new block, so the block before it ends there, holding nothing any more, and is
/// freed (the property test found it left in use: at the removal the block still seemed to
/// hold the records after it).
#[test]
fn a_block_emptied_when_the_next_starts_is_freed() {
    let (mut fs, f) = sms_file(RecordFormat::variable());
    add_synced(&mut fs, f, &data(1, 20));
    assert_eq!(fs.getattr(f).unwrap().inode.blocks, 1);
    let mut fs = remount(fs);
    fs.record_add(f, &data(2, 30)).unwrap();
    fs.record_remove_first(f).unwrap();
    fs.sync().unwrap();
    assert_eq!(fs.getattr(f).unwrap().inode.blocks, 1);
    fsck_clean(&mut fs, "after the commit");
    let dev = fs.into_device();
    let mut fs = Fs::mount(dev, fs_config()).unwrap();
    assert_eq!(fs.getattr(f).unwrap().inode.blocks, 1);
    assert_eq!(fs.record_list(f).unwrap(), [(1, data(2, 30))]);
    fsck_clean(&mut fs, "replayed");
}

/// With a journal, a sync whose adds complete a block of records writes that block and a
/// journal entry naming it, not the records' bytes: a power cut then replays the entry from
/// the block.
#[test]
fn a_sync_writes_a_complete_block_once() {
    let mut fs = Fs::format(nor(true), fs_config()).unwrap();
    let per = u64::from(fs.block_size()) / 32;
    let f = record_file(&mut fs, b"events", RecordFormat::cyclic(3 * per as u32, 32));
    fs.sync().unwrap();
    let mut want = Vec::new();
    let sync = |fs: &mut Fs<_>, want: &mut Vec<(u64, Vec<u8>)>, from: u64, to: u64| {
        for i in from..to {
            fs.record_add(f, &data(i as u8, 32)).unwrap();
            want.push((i, data(i as u8, 32)));
        }
        let before = fs.stats();
        fs.sync().unwrap();
        let after = fs.stats();
        assert_eq!(
            after.journal_entries,
            before.journal_entries + 1,
            "{from}..{to}"
        );
        after.journal_bytes - before.journal_bytes
    };
    // Half a block: the entry holds the records. The other half completes the block: the
    // entry names it, and is smaller than the half block of bytes it stands for.
    let half = sync(&mut fs, &mut want, 0, per / 2);
    assert!(half > per / 2 * 32, "{half} bytes of entry");
    let rest = sync(&mut fs, &mut want, per / 2, per);
    assert!(rest < 32, "{rest} bytes of entry for the rest of the block");
    assert_eq!(fs.getattr(f).unwrap().inode.blocks, 1);
    // A block and a bit more, then the rest of that block and another, wrapping: the
    // blocks written, the bits in the entries.
    sync(&mut fs, &mut want, per, 2 * per + 3);
    assert_eq!(fs.getattr(f).unwrap().inode.blocks, 2);
    sync(&mut fs, &mut want, 2 * per + 3, 3 * per + 3);
    assert_eq!(fs.getattr(f).unwrap().inode.blocks, 3);
    // A power cut: the mount replays the entries from the blocks they name.
    let mut dev = fs.into_device();
    dev.sim_mut().reboot();
    let mut fs = Fs::mount(dev, fs_config()).unwrap();
    assert!(fs.stats().journal_replayed > 0);
    fsck_clean(&mut fs, "after the replay");
    let keep = 3 * per as usize;
    let want = want[want.len() - keep..].to_vec();
    assert_eq!(fs.record_list(f).unwrap(), want);
    assert_eq!(fs.getattr(f).unwrap().inode.blocks, 3);
    let mut fs = remount(fs);
    assert_eq!(fs.record_list(f).unwrap(), want);
}

#[test]
fn unlink_frees_a_record_file() {
    let mut fs = Fs::format(nor(true), fs_config()).unwrap();
    fs.sync().unwrap();
    let before = fs.statfs();
    let f = record_file(&mut fs, b"big", RecordFormat::variable());
    for i in 0..60u8 {
        fs.record_add(f, &data(i, 100)).unwrap();
    }
    // The index, not only the journal: the records' blocks show (6,000 bytes of records
    // need at least 12 blocks of 512).
    fs.checkpoint().unwrap();
    let full = fs.statfs();
    assert!(
        full.blocks_free + 12 <= before.blocks_free,
        "{full:?} vs {before:?}"
    );
    // Open, unlinked: still usable, gone at its last close.
    fs.open(f).unwrap();
    fs.unlink(ROOT_INO, b"big").unwrap();
    fs.record_add(f, b"after unlink").unwrap();
    assert_eq!(fs.record_read(f, 60).unwrap(), b"after unlink");
    fs.release(f).unwrap();
    assert_eq!(fs.record_info(f), Err(Error::NotFound));
    let mut fs = remount(fs);
    let after = fs.statfs();
    assert_eq!(after.files, before.files);
    assert!(
        after.blocks_free + 2 >= before.blocks_free,
        "{after:?} vs {before:?}"
    );
    // An orphan record file left by a power cut goes at the next mount.
    let g = record_file(&mut fs, b"g", RecordFormat::fixed(4));
    fs.record_add(g, b"abcd").unwrap();
    fs.open(g).unwrap();
    fs.unlink(ROOT_INO, b"g").unwrap();
    fs.sync().unwrap();
    let dev = fs.into_device();
    let mut fs = Fs::mount(dev, fs_config()).unwrap();
    fsck_clean(&mut fs, "after the orphan's mount");
    assert_eq!(fs.statfs().files, before.files);
}

#[test]
fn integer_names_alongside_string_names() {
    let mut fs = Fs::format(nand(), fs_config()).unwrap();
    let a = fs.create_int(ROOT_INO, 5, 0o644, 0, 0).unwrap();
    assert_eq!(a.kind, FileType::Regular);
    assert_eq!(fs.create_int(ROOT_INO, 5, 0o644, 0, 0), Err(Error::Exists));
    // The shown name is taken both ways.
    assert_eq!(fs.create(ROOT_INO, b"#5", 0o644, 0, 0), Err(Error::Exists));
    fs.create(ROOT_INO, b"#7", 0o644, 0, 0).unwrap();
    assert_eq!(fs.create_int(ROOT_INO, 7, 0o644, 0, 0), Err(Error::Exists));
    // Not the canonical spelling: an ordinary name.
    fs.create(ROOT_INO, b"#05", 0o644, 0, 0).unwrap();
    let d = fs.create_int(ROOT_INO, 1000, 0o040_755, 0, 0).unwrap();
    assert_eq!(d.kind, FileType::Directory);
    assert_eq!(fs.getattr(ROOT_INO).unwrap().inode.nlink, 3);
    let inner = fs.create_int(d.ino, 0, 0o644, 0, 0).unwrap();
    fs.link_int(inner.ino, d.ino, u32::MAX).unwrap();
    assert_eq!(fs.getattr(inner.ino).unwrap().inode.nlink, 2);
    assert_eq!(fs.lookup_int(ROOT_INO, 5).unwrap().ino, a.ino);
    assert_eq!(fs.lookup(ROOT_INO, b"#5").unwrap().ino, a.ino);
    assert_eq!(fs.lookup_int(ROOT_INO, 6), Err(Error::NotFound));
    assert_eq!(fs.lookup(d.ino, b"#4294967295").unwrap().ino, inner.ino);
    fs.write(a.ino, 0, b"integer-named").unwrap();
    let mut fs = remount(fs);
    assert_eq!(fs.read_file(b"/#5").unwrap(), b"integer-named");
    assert_eq!(fs.read_file(b"/#1000/#0").unwrap(), b"");
    // Listed after the string names, as `#n`, resumable from any cookie.
    let listed = names(&mut fs, ROOT_INO);
    let ints: Vec<&Vec<u8>> = listed
        .iter()
        .filter(|n| n.as_slice() == b"#5" || n.as_slice() == b"#1000")
        .collect();
    assert_eq!(ints, [&b"#5".to_vec(), &b"#1000".to_vec()]);
    assert_eq!(listed.len(), 6, "{listed:?}");
    let all = fs.readdir(ROOT_INO, 0, 100).unwrap();
    let e = all.iter().find(|e| e.name == b"#1000").unwrap();
    assert_eq!(
        (e.cookie, e.ino, e.kind),
        (INT_COOKIE_BASE + 1000, d.ino, FileType::Directory)
    );
    assert_eq!(
        names(&mut fs, d.ino),
        [&b"."[..], b"..", b"#0", b"#4294967295"]
    );
    // A directory holding only integer entries is not empty.
    assert_eq!(fs.remove_int(ROOT_INO, 1000), Err(Error::NotEmpty));
    assert_eq!(fs.rmdir(ROOT_INO, b"#1000"), Err(Error::NotEmpty));
    assert_eq!(fs.unlink(ROOT_INO, b"#1000"), Err(Error::IsDir));
    fs.remove_int(d.ino, 0).unwrap();
    fs.unlink(d.ino, b"#4294967295").unwrap();
    assert_eq!(fs.getattr(inner.ino), Err(Error::NotFound));
    fs.rmdir(ROOT_INO, b"#1000").unwrap();
    assert_eq!(fs.getattr(ROOT_INO).unwrap().inode.nlink, 2);
    // unlink of `#7` takes the string entry; then `#5` the integer one.
    fs.unlink(ROOT_INO, b"#7").unwrap();
    fs.unlink(ROOT_INO, b"#5").unwrap();
    assert_eq!(fs.remove_int(ROOT_INO, 5), Err(Error::NotFound));
    let mut fs = remount(fs);
    assert_eq!(names(&mut fs, ROOT_INO), [&b"."[..], b"..", b"#05"]);
    // A record file named by an integer.
    let r = fs.create_int(ROOT_INO, 42, 0o644, 0, 0).unwrap().ino;
    fs.make_records(r, RecordFormat::cyclic(3, 0)).unwrap();
    fs.record_add(r, b"one").unwrap();
    let mut fs = remount(fs);
    assert_eq!(fs.record_read(r, 0).unwrap(), b"one");
}

#[test]
fn flat_names_are_unique_on_the_volume() {
    let mut fs = Fs::format(nor(false), fs_config()).unwrap();
    let long = vec![b'n'; FLAT_NAME_MAX];
    let a = fs.flat_create(&long, 0o644, 0, 0).unwrap();
    assert_eq!(fs.flat_create(&long, 0o644, 0, 0), Err(Error::Exists));
    assert_eq!(
        fs.flat_create(&vec![b'n'; FLAT_NAME_MAX + 1], 0o644, 0, 0),
        Err(Error::NameTooLong)
    );
    assert!(matches!(
        fs.flat_create(b"", 0o644, 0, 0),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        fs.flat_create(b"dir", 0o040_755, 0, 0),
        Err(Error::InvalidArgument(_))
    ));
    // Any bytes, slashes included: the names are not paths.
    let b = fs.flat_create(b"fax/2024/in", 0o644, 0, 0).unwrap();
    fs.write(b.ino, 0, b"page").unwrap();
    // A file in the tree may get a flat name too.
    let c = fs.create(ROOT_INO, b"c", 0o644, 0, 0).unwrap();
    fs.flat_link(b"also c", c.ino).unwrap();
    assert_eq!(fs.getattr(c.ino).unwrap().inode.nlink, 2);
    assert_eq!(fs.flat_link(b"also c", c.ino), Err(Error::Exists));
    assert!(matches!(
        fs.flat_link(b"root", ROOT_INO),
        Err(Error::NotPermitted(_))
    ));
    let mut fs = remount(fs);
    assert_eq!(fs.flat_lookup(&long).unwrap().ino, a.ino);
    let got = fs.flat_lookup(b"fax/2024/in").unwrap();
    assert_eq!(got.ino, b.ino);
    let mut buf = [0; 10];
    assert_eq!(fs.read(b.ino, 0, &mut buf).unwrap(), 4);
    assert_eq!(fs.flat_lookup(b"nothing"), Err(Error::NotFound));
    let listed: Vec<Vec<u8>> = fs
        .flat_list(b"", 10)
        .unwrap()
        .into_iter()
        .map(|e| e.0)
        .collect();
    assert_eq!(
        listed,
        [b"also c".to_vec(), b"fax/2024/in".to_vec(), long.clone()]
    );
    let rest = fs.flat_list(b"also c", 1).unwrap();
    assert_eq!(rest, [(b"fax/2024/in".to_vec(), b.ino)]);
    // The file keeps its flat name when its directory entry goes, and goes with the last.
    fs.unlink(ROOT_INO, b"c").unwrap();
    assert_eq!(fs.flat_lookup(b"also c").unwrap().inode.nlink, 1);
    fs.flat_remove(b"also c").unwrap();
    assert_eq!(fs.getattr(c.ino), Err(Error::NotFound));
    assert_eq!(fs.flat_remove(b"also c"), Err(Error::NotFound));
    // A record file with a flat name.
    fs.make_records(a.ino, RecordFormat::fixed(2)).unwrap();
    fs.record_add(a.ino, b"ab").unwrap();
    let files = fs.statfs().files;
    let mut fs = remount(fs);
    assert_eq!(fs.statfs().files, files);
    assert_eq!(fs.record_read(a.ino, 0).unwrap(), b"ab");
    fs.flat_remove(&long).unwrap();
    fs.flat_remove(b"fax/2024/in").unwrap();
    let mut fs = remount(fs);
    assert_eq!(fs.statfs().files, 1);
    assert!(fs.flat_list(b"", 10).unwrap().is_empty());
}

// ---------------------------------------------------------------------------------------
// Power cuts.

/// One step of a power-cut scenario.
#[derive(Debug, Clone)]
enum Step {
    /// A record file in the root.
    Create(&'static str, RecordFormat),
    /// Adds a record (length, seed).
    Add(&'static str, usize, u8),
    /// Replaces the record that many places after the oldest (length, seed).
    Update(&'static str, u64, usize, u8),
    RemoveFirst(&'static str),
    RemoveLast(&'static str),
    /// Writes the index (and with it the data blocks of complete blocks of records).
    Checkpoint,
    CreateInt(u32),
    RemoveInt(u32),
    FlatCreate(&'static str),
    FlatRemove(&'static str),
    Sync,
}

fn apply<D: Segments>(fs: &mut Fs<D>, step: &Step) -> Result<(), Error> {
    let rec = |fs: &mut Fs<D>, name: &str| fs.lookup(ROOT_INO, name.as_bytes()).map(|a| a.ino);
    match step {
        Step::Create(name, fmt) => fs
            .create_records(ROOT_INO, name.as_bytes(), *fmt, 0o644, 0, 0)
            .map(drop),
        Step::Add(name, len, seed) => {
            let f = rec(fs, name)?;
            fs.record_add(f, &data(*seed, *len)).map(drop)
        }
        Step::Update(name, i, len, seed) => {
            let f = rec(fs, name)?;
            let first = fs.record_info(f)?.first;
            fs.record_update(f, first + i, &data(*seed, *len))
        }
        Step::RemoveFirst(name) => {
            let f = rec(fs, name)?;
            fs.record_remove_first(f)
        }
        Step::RemoveLast(name) => {
            let f = rec(fs, name)?;
            fs.record_remove_last(f)
        }
        Step::CreateInt(n) => fs.create_int(ROOT_INO, *n, 0o644, 0, 0).map(drop),
        Step::RemoveInt(n) => fs.remove_int(ROOT_INO, *n),
        Step::FlatCreate(name) => fs.flat_create(name.as_bytes(), 0o644, 0, 0).map(drop),
        Step::FlatRemove(name) => fs.flat_remove(name.as_bytes()),
        Step::Sync => fs.sync(),
        Step::Checkpoint => fs.checkpoint(),
    }
}

/// A record file's `first`, `next` and records.
type Records = (u64, u64, Vec<(u64, Vec<u8>)>);

/// What a volume holds, as these scenarios see it: the tree (with record files as their
/// byte streams), every record file's numbers and records, and the flat names.
#[derive(Debug, Clone, PartialEq, Eq)]
struct State {
    tree: BTreeMap<Vec<u8>, Entry>,
    records: BTreeMap<Vec<u8>, Records>,
    flat: Vec<Vec<u8>>,
}

fn state<D: Segments>(fs: &mut Fs<D>) -> State {
    let (tree, _) = dump(fs).unwrap();
    let mut records = BTreeMap::new();
    for e in fs.readdir(ROOT_INO, 0, 1000).unwrap() {
        if let Ok(info) = fs.record_info(e.ino) {
            let list = fs.record_list(e.ino).unwrap();
            records.insert(e.name, (info.first, info.next, list));
        }
    }
    let flat = fs
        .flat_list(b"", 1000)
        .unwrap()
        .into_iter()
        .map(|e| e.0)
        .collect();
    State {
        tree,
        records,
        flat,
    }
}

fn ops<D: Sim>(fs: &Fs<D>) -> u64 {
    fs.ftl().log().device().sim().ops()
}

fn powered<D: Sim>(fs: &Fs<D>) -> bool {
    fs.ftl().log().device().sim().is_powered()
}

/// Runs `steps` on a fresh volume, then again cut after every device operation (clean and
/// torn): after each cut the volume mounts, `fsck` finds it clean, and it holds the state
/// after some step between the last sync and the step cut off — no step half done.
fn every_cut<D: Sim>(dev: D, config: FsConfig, steps: &[Step]) {
    let base = Fs::format(dev, config).unwrap().unmount().unwrap();
    let mut fs = Fs::mount(base.clone(), config).unwrap();
    let start = ops(&fs);
    let mut states = vec![state(&mut fs)];
    for (i, step) in steps.iter().enumerate() {
        apply(&mut fs, step).unwrap_or_else(|e| panic!("step {i} {step:?}: {e}"));
        states.push(state(&mut fs));
    }
    let total = ops(&fs) - start;
    // A sync of record operations may be a single journal entry: a program.
    assert!(total >= 3, "only {total} device operations");
    drop(fs);
    for k in 0..=total {
        for torn in [false, true] {
            let what = format!("cut after {k} of {total} operations (torn {torn})");
            let mut fs = Fs::mount(base.clone(), config).unwrap();
            fs.ftl_mut()
                .log_mut()
                .device_mut()
                .sim_mut()
                .schedule_cut(k, torn);
            let (mut done, mut durable) = (0, 0);
            for (i, step) in steps.iter().enumerate() {
                let r = apply(&mut fs, step);
                if !powered(&fs) {
                    break;
                }
                r.unwrap_or_else(|e| panic!("{what}: step {i} {step:?}: {e}"));
                done = i + 1;
                if matches!(step, Step::Sync) {
                    durable = i + 1;
                }
            }
            assert_eq!(!powered(&fs), k < total, "{what}: did the cut come?");
            let mut dev = fs.into_device();
            dev.sim_mut().set_faults(Default::default());
            dev.sim_mut().reboot();
            let mut fs = Fs::mount(dev, config).unwrap_or_else(|e| panic!("{what}: mount: {e}"));
            fsck_clean(&mut fs, &what);
            let got = state(&mut fs);
            let hi = (done + 1).min(states.len() - 1);
            assert!(
                (durable..=hi).any(|i| states[i] == got),
                "{what}: no state of steps {durable}..={hi} matches:\n{got:#?}"
            );
            assert_eq!(
                fs.statfs().files,
                dump(&mut fs).unwrap().1 as u64 + flat_only(&got),
                "{what}"
            );
        }
    }
}

/// Inodes named only by flat names (not in the tree's dump).
fn flat_only(s: &State) -> u64 {
    s.flat.len() as u64
}

fn eager() -> FsConfig {
    FsConfig {
        dirty_limit: Some(1),
        ..fs_config()
    }
}

fn on_every_device(steps: &[Step]) {
    every_cut(nor(true), eager(), steps);
    every_cut(nor(false), eager(), steps);
    every_cut(nand(), eager(), steps);
    every_cut(nand(), fs_config(), steps);
}

#[test]
fn power_cuts_add_and_update_with_length_changes() {
    let steps = [
        Step::Create("r", RecordFormat::variable()),
        Step::Add("r", 40, 1),
        Step::Add("r", 300, 2),
        Step::Sync,
        Step::Add("r", 10, 3),
        // Longer, over several chunks; then shorter; then empty.
        Step::Update("r", 0, 600, 4),
        Step::Update("r", 1, 7, 5),
        Step::Update("r", 2, 0, 6),
        Step::RemoveFirst("r"),
        Step::RemoveLast("r"),
        Step::Add("r", 129, 7),
    ];
    on_every_device(&steps);
}

#[test]
fn power_cuts_wrap_a_cyclic_file() {
    let steps = [
        Step::Create("c", RecordFormat::cyclic(3, 32)),
        Step::Add("c", 32, 1),
        Step::Add("c", 32, 2),
        Step::Add("c", 32, 3),
        Step::Sync,
        // Each of these removes the oldest and adds one, together.
        Step::Add("c", 32, 4),
        Step::Add("c", 32, 5),
        Step::Update("c", 1, 32, 6),
        Step::Add("c", 32, 7),
        Step::Add("c", 32, 8),
        Step::Sync,
    ];
    on_every_device(&steps);
}

#[test]
fn power_cuts_fill_and_free_data_blocks() {
    // 128-byte records, four to a block; 256-byte ones, two.
    let mut steps = vec![
        Step::Create("c", RecordFormat::cyclic(10, 128)),
        Step::Create("f", RecordFormat::fixed(256)),
    ];
    let adds = |name, n: usize, seed: u8| {
        (0..n).map(move |i| Step::Add(name, if name == "c" { 128 } else { 256 }, seed + i as u8))
    };
    steps.extend(adds("f", 3, 0));
    steps.extend(adds("c", 6, 10));
    steps.push(Step::Checkpoint);
    // The wrap drops records held in a block; updates override records held in blocks.
    steps.extend(adds("c", 6, 20));
    steps.push(Step::Update("c", 0, 128, 30));
    steps.push(Step::Update("f", 0, 256, 31));
    steps.push(Step::Sync);
    steps.push(Step::Checkpoint);
    // The oldest block of each file empties and is freed.
    steps.extend(adds("c", 2, 40));
    steps.push(Step::RemoveLast("f"));
    steps.push(Step::RemoveLast("f"));
    steps.push(Step::RemoveFirst("f"));
    steps.push(Step::Sync);
    steps.extend(adds("f", 1, 50));
    steps.push(Step::Checkpoint);
    on_every_device(&steps);
}

#[test]
fn power_cuts_sync_complete_blocks() {
    // 128-byte records, four to a block, six kept: syncs that complete a block write it
    // and name it in their entry.
    let mut steps = vec![Step::Create("c", RecordFormat::cyclic(6, 128)), Step::Sync];
    for (n, seed) in [(4, 0), (2, 10), (2, 20), (5, 30), (1, 40)] {
        steps.extend((0..n).map(|i| Step::Add("c", 128, seed + i)));
        steps.push(Step::Sync);
    }
    on_every_device(&steps);
}

/// Records framed in append blocks (SPEC.md §8.4a) under power cuts: after the last frame
/// and in new blocks, the oldest removed and a record added in one commit, a number given
/// back and framed anew, an update of a framed record, blocks freed by removals, and a
/// cyclic log of 15-byte records wrapping.
#[test]
fn power_cuts_append_records() {
    let mut steps = vec![
        Step::Create("v", RecordFormat::variable()),
        Step::Create("c", RecordFormat::cyclic(4, 15)),
        Step::Sync,
    ];
    // 770 bytes of records: a block and the start of the next.
    for i in 0..7u8 {
        steps.push(Step::Add("v", 20 + 30 * usize::from(i), i));
        steps.push(Step::Sync);
    }
    steps.extend([
        Step::RemoveFirst("v"),
        Step::Add("v", 60, 10),
        Step::Sync,
        Step::RemoveLast("v"),
        Step::Sync,
        Step::Add("v", 33, 11),
        Step::Sync,
        Step::Update("v", 1, 90, 12),
        Step::Sync,
    ]);
    for i in 0..7u8 {
        steps.push(Step::Add("c", 15, 20 + i));
        steps.push(Step::Sync);
    }
    steps.extend((0..5).map(|_| Step::RemoveFirst("v")));
    steps.push(Step::Sync);
    // The scenario is what it says: records framed in blocks, two of them at once.
    let mut fs = Fs::format(nor(true), fs_config()).unwrap();
    let mut most = 0;
    for step in &steps {
        apply(&mut fs, step).unwrap();
        let v = fs.lookup(ROOT_INO, b"v").unwrap().ino;
        most = most.max(fs.getattr(v).unwrap().inode.blocks);
    }
    assert_eq!(most, 3, "append blocks of v at most");
    let c = fs.lookup(ROOT_INO, b"c").unwrap().ino;
    assert_eq!(fs.getattr(c).unwrap().inode.blocks, 1);
    every_cut(nor(true), fs_config(), &steps);
}

#[test]
fn power_cuts_integer_and_flat_names() {
    let steps = [
        Step::CreateInt(3),
        Step::FlatCreate("a long flat name"),
        Step::Sync,
        Step::CreateInt(4),
        Step::RemoveInt(3),
        Step::FlatCreate("another"),
        Step::FlatRemove("a long flat name"),
    ];
    every_cut(nor(true), eager(), &steps);
    every_cut(nand(), eager(), &steps);
}

// ---------------------------------------------------------------------------------------
// Property test.

#[derive(Debug, Clone)]
enum Op {
    Add(usize, u16, u8),
    Update(usize, u8, u16, u8),
    Read(usize, u8),
    Stream(usize, u16, u16),
    RemoveFirst(usize),
    RemoveLast(usize),
    Sync,
    Checkpoint,
    Remount,
    /// A sync, then the power goes: the mount replays the journal.
    Cut,
}

fn op() -> impl Strategy<Value = Op> {
    let len = prop_oneof![8 => 0..200u16, 1 => 0..(RECORD_MAX as u16 + 2)];
    let f = 0..FORMATS.len();
    prop_oneof![
        8 => (f.clone(), len.clone(), any::<u8>()).prop_map(|(f, l, s)| Op::Add(f, l, s)),
        3 => (f.clone(), any::<u8>(), len, any::<u8>()).prop_map(|(f, i, l, s)| Op::Update(f, i, l, s)),
        2 => (f.clone(), any::<u8>()).prop_map(|(f, i)| Op::Read(f, i)),
        1 => (f.clone(), any::<u16>(), any::<u16>()).prop_map(|(f, o, l)| Op::Stream(f, o, l)),
        1 => f.clone().prop_map(Op::RemoveFirst),
        1 => f.prop_map(Op::RemoveLast),
        3 => Just(Op::Sync),
        1 => Just(Op::Checkpoint),
        1 => Just(Op::Remount),
        1 => Just(Op::Cut),
    ]
}

/// The model of one record file.
struct Model {
    format: RecordFormat,
    first: u64,
    recs: VecDeque<Vec<u8>>,
}

impl Model {
    fn next(&self) -> u64 {
        self.first + self.recs.len() as u64
    }
    fn refuses(&self, len: usize) -> Option<Error> {
        if len > RECORD_MAX {
            Some(Error::TooBig)
        } else if self.format.record_size != 0 && len != self.format.record_size as usize {
            Some(Error::InvalidArgument("record of the wrong length"))
        } else {
            None
        }
    }
}

/// The model's files: variable-length records, cyclic or not; fixed-size records that stay
/// items (20 bytes do not divide a block) or fill data blocks (64 and 128 bytes).
const FORMATS: [RecordFormat; 5] = [
    RecordFormat::variable(),
    RecordFormat::cyclic(4, 0),
    RecordFormat::cyclic(3, 20),
    RecordFormat::fixed(64),
    RecordFormat::cyclic(11, 128),
];

/// A record length for file `f`: mostly the fixed size of a file that has one, so that
/// most adds and updates of such files succeed.
fn length(f: usize, len: u16) -> usize {
    match FORMATS[f].record_size {
        0 => len as usize,
        _ if len % 8 == 0 => len as usize,
        size => size as usize,
    }
}

fn run_model<D: Segments>(dev: D, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut fs = Fs::format(dev, fs_config()).unwrap();
    let mut files = Vec::new();
    let mut models = Vec::new();
    for (i, &f) in FORMATS.iter().enumerate() {
        let name = format!("r{i}");
        files.push(record_file(&mut fs, name.as_bytes(), f));
        models.push(Model {
            format: f,
            first: 0,
            recs: VecDeque::new(),
        });
    }
    let same_err = |got: Result<(), Error>, want: Option<Error>| -> Result<(), TestCaseError> {
        match (got, want) {
            (Ok(()), None) => Ok(()),
            (Err(g), Some(w)) if g.errno() == w.errno() => Ok(()),
            (g, w) => Err(TestCaseError::fail(format!(
                "got {g:?}, the model says {w:?}"
            ))),
        }
    };
    for (step, op) in ops.iter().enumerate() {
        let what = format!("step {step} {op:?}");
        match *op {
            Op::Add(f, len, seed) => {
                let m = &mut models[f];
                let d = data(seed, length(f, len));
                let want = m.refuses(d.len());
                let got = fs.record_add(files[f], &d);
                // A full volume refuses, and the refusal changes nothing.
                let want = if got == Err(Error::NoSpace) && want.is_none() {
                    Some(Error::NoSpace)
                } else {
                    want
                };
                if want.is_none() {
                    prop_assert_eq!(got.clone(), Ok(m.next()), "{}", what);
                    m.recs.push_back(d);
                    if m.format.capacity > 0 && m.recs.len() > m.format.capacity as usize {
                        m.recs.pop_front();
                        m.first += 1;
                    }
                }
                same_err(got.map(drop), want)?;
            }
            Op::Update(f, i, len, seed) => {
                let m = &mut models[f];
                let d = data(seed, length(f, len));
                let n = m.first + u64::from(i % 24);
                let idx = (n - m.first) as usize;
                let want = if idx >= m.recs.len() {
                    m.refuses(d.len()).or(Some(Error::NotFound))
                } else {
                    m.refuses(d.len())
                };
                let got = fs.record_update(files[f], n, &d);
                let want = if got == Err(Error::NoSpace) && want.is_none() {
                    Some(Error::NoSpace)
                } else {
                    want
                };
                if want.is_none() {
                    m.recs[idx] = d;
                }
                same_err(got, want).map_err(|e| TestCaseError::fail(format!("{what}: {e}")))?;
            }
            Op::Read(f, i) => {
                let m = &models[f];
                let n = m.first + u64::from(i % 24);
                let want = m
                    .recs
                    .get((n - m.first) as usize)
                    .cloned()
                    .ok_or(Error::NotFound);
                prop_assert_eq!(fs.record_read(files[f], n), want, "{}", what);
            }
            Op::Stream(f, off, len) => {
                let all: Vec<u8> = models[f].recs.iter().flatten().copied().collect();
                let mut buf = vec![0; len as usize];
                let n = fs.read(files[f], u64::from(off), &mut buf).unwrap();
                let from = (off as usize).min(all.len());
                let to = (from + len as usize).min(all.len());
                prop_assert_eq!(&buf[..n], &all[from..to], "{}", what);
            }
            Op::RemoveFirst(f) | Op::RemoveLast(f) => {
                let m = &mut models[f];
                let want = if m.recs.is_empty() {
                    Some(Error::NotFound)
                } else {
                    None
                };
                let got = if matches!(op, Op::RemoveFirst(_)) {
                    fs.record_remove_first(files[f])
                } else {
                    fs.record_remove_last(files[f])
                };
                if want.is_none() {
                    if matches!(op, Op::RemoveFirst(_)) {
                        m.recs.pop_front();
                        m.first += 1;
                    } else {
                        m.recs.pop_back();
                    }
                }
                same_err(got, want)?;
            }
            Op::Sync => fs.sync().unwrap(),
            Op::Checkpoint => fs.checkpoint().unwrap(),
            Op::Remount => {
                fs = remount(fs);
            }
            Op::Cut => {
                fs.sync().unwrap();
                fs = Fs::mount(fs.into_device(), fs_config()).unwrap();
                fsck_clean(&mut fs, "after a cut");
            }
        }
    }
    let mut fs = remount(fs);
    for (f, m) in models.iter().enumerate() {
        let info = fs.record_info(files[f]).unwrap();
        prop_assert_eq!((info.first, info.next), (m.first, m.next()));
        let want: Vec<(u64, Vec<u8>)> = m
            .recs
            .iter()
            .enumerate()
            .map(|(i, r)| (m.first + i as u64, r.clone()))
            .collect();
        prop_assert_eq!(fs.record_list(files[f]).unwrap(), want);
        let size: usize = m.recs.iter().map(Vec::len).sum();
        prop_assert_eq!(fs.getattr(files[f]).unwrap().inode.size, size as u64);
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24)
}

proptest! {
    // 24 cases per device in the suite; PROPTEST_CASES=N for a longer soak.
    #![proptest_config(ProptestConfig {
        cases: cases(),
        ..ProptestConfig::default()
    })]

    #[test]
    fn record_files_match_model_on_nor(ops in proptest::collection::vec(op(), 1..120)) {
        run_model(nor(true), &ops)?;
    }

    #[test]
    fn record_files_match_model_on_nand(ops in proptest::collection::vec(op(), 1..120)) {
        run_model(nand(), &ops)?;
    }
}
