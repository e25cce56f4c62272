//! Write-back of partial blocks (`FsConfig::write_buffer_bytes`): reads and sizes see the blocks
//! waiting in RAM, the bound evicts the least recently written, frees drop them, commits
//! and transactions take them along, and a power cut loses only what no sync covered.

mod common;

use common::{fs_config, nand, nor};
use flash::{NandSim, NorSim, Simulated};
use flashfs::fs::{Ino, SetAttr, ROOT_INO};
use flashfs::{Fs, FsConfig, NandSegments, NorSegments, Segments};

fn data(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed))
        .collect()
}

fn file<D: Segments>(fs: &mut Fs<D>, name: &[u8]) -> Ino {
    fs.create(ROOT_INO, name, 0o644, 0, 0).unwrap().ino
}

fn content<D: Segments>(fs: &mut Fs<D>, ino: Ino) -> Vec<u8> {
    let size = fs.getattr(ino).unwrap().inode.size as usize;
    let mut buf = vec![0xEE; size + 10];
    let n = fs.read(ino, 0, &mut buf).unwrap();
    assert_eq!(n, size, "read stops at the size");
    buf.truncate(n);
    buf
}

/// Slots the log has programmed for callers so far.
fn slots<D: Segments>(fs: &Fs<D>) -> u64 {
    fs.ftl().log().stats().user_slots
}

/// `n` blocks of write-back on the test parts, whose blocks are 512 bytes.
fn buffered(n: usize) -> FsConfig {
    FsConfig {
        write_buffer_bytes: n * 512,
        ..fs_config()
    }
}

/// NAND with a journal asked for (an entry per block), as small syncs use it.
fn journaled_nand() -> Fs<NandSegments<NandSim>> {
    let journaled = FsConfig {
        journal_blocks: Some(8),
        ..fs_config()
    };
    Fs::format(nand(), journaled).unwrap()
}

#[test]
fn reads_and_sizes_see_buffered_data_and_nothing_is_programmed_until_the_sync() {
    let mut fs = journaled_nand();
    let f = file(&mut fs, b"f");
    fs.sync().unwrap();
    let before = slots(&fs);
    let entries = fs.stats().journal_entries;
    fs.write(f, 0, &data(1, 100)).unwrap();
    fs.write(f, 100, &data(2, 50)).unwrap();
    fs.write(f, 20, &data(3, 10)).unwrap();
    let mut want = data(1, 100);
    want.extend(data(2, 50));
    want[20..30].copy_from_slice(&data(3, 10));
    assert_eq!(slots(&fs), before, "small writes wait in RAM");
    assert_eq!(fs.getattr(f).unwrap().inode.size, 150);
    assert_eq!(content(&mut fs, f), want);
    let bs = u64::from(fs.block_size());
    assert_eq!(fs.stats().write_buffer_bytes, bs);
    assert_eq!(fs.write_back_stats().blocks, 1);
    // The writes are small: the sync programs one journal entry carrying their bytes, and
    // the block stays in RAM until the checkpoint.
    fs.fsync(f, false).unwrap();
    assert_eq!(fs.stats().journal_entries, entries + 1);
    assert_eq!(
        slots(&fs),
        before + 1,
        "the sync programmed the entry alone"
    );
    assert_eq!(fs.stats().write_buffer_bytes, bs);
    // A power cut now: the mount replays the entry.
    let mut fs = Fs::mount(fs.into_device(), fs_config()).unwrap();
    assert_eq!(content(&mut fs, f), want);
    // A larger write (over half a block) is programmed at the sync, with the index.
    fs.write(f, 150, &data(4, bs as usize / 2 + 1)).unwrap();
    want.extend(data(4, bs as usize / 2 + 1));
    fs.fsync(f, false).unwrap();
    assert_eq!(fs.stats().write_buffer_bytes, 0);
    assert_eq!(fs.write_back_stats().high_water, bs as usize);
    let dev = fs.into_device();
    let mut fs = Fs::mount(dev, fs_config()).unwrap();
    assert_eq!(content(&mut fs, f), want);
}

/// A write of up to half a block is an operation of the journal: with its `fsync`, one
/// entry (a small file written whole and synced costs that, not a checkpoint). Past half a
/// block the write is a data block, and its `fsync` a checkpoint.
#[test]
fn a_write_of_half_a_block_and_its_sync_are_one_journal_entry() {
    let mut fs = journaled_nand();
    let f = file(&mut fs, b"f");
    fs.sync().unwrap();
    let bs = fs.block_size() as usize;
    let (slots0, entries0) = (slots(&fs), fs.stats().journal_entries);
    fs.write(f, 0, &data(1, bs / 2)).unwrap();
    fs.fsync(f, false).unwrap();
    assert_eq!(fs.stats().journal_entries, entries0 + 1);
    assert_eq!(slots(&fs), slots0 + 1, "one entry");
    let (slots1, entries1) = (slots(&fs), fs.stats().journal_entries);
    fs.write(f, bs as u64, &data(2, bs / 2 + 1)).unwrap();
    fs.fsync(f, false).unwrap();
    assert_eq!(
        fs.stats().journal_entries,
        entries1,
        "a checkpoint, no entry"
    );
    assert!(slots(&fs) > slots1 + 1, "the blocks, the index and block 0");
    let mut fs = Fs::mount(fs.into_device(), fs_config()).unwrap();
    let mut want = data(1, bs / 2);
    want.resize(bs, 0);
    want.extend(data(2, bs / 2 + 1));
    assert_eq!(content(&mut fs, f), want);
}

/// NOR that programs written bytes again, with a journal, and `blocks` blocks of write-back.
fn journaled_nor(blocks: usize) -> Fs<NorSegments<NorSim>> {
    let journaled = FsConfig {
        journal_blocks: Some(8),
        ..buffered(blocks)
    };
    Fs::format(nor(true), journaled).unwrap()
}

/// Syncs file `f`, which must make one journal entry; returns its bytes.
fn entry<D: Segments>(fs: &mut Fs<D>, f: Ino) -> u64 {
    let (entries, bytes) = (fs.stats().journal_entries, fs.stats().journal_bytes);
    fs.fsync(f, false).unwrap();
    assert_eq!(fs.stats().journal_entries, entries + 1, "a journal entry");
    fs.stats().journal_bytes - bytes
}

/// Mounts what a power cut left and checks the volume: nothing astray, the space in use
/// counted right.
fn after_cut(fs: Fs<NorSegments<NorSim>>) -> Fs<NorSegments<NorSim>> {
    let mut fs = Fs::mount(fs.into_device(), fs_config()).unwrap();
    let report = fs.check(false).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    fs
}

/// On NOR, a new file whose small writes make half a block or more of its content is
/// programmed as the block at the sync, and the entry names it rather than carrying the
/// bytes a second time. Appends to it, and a new file of less than half a block, travel in
/// the entry: the block takes them later in one program.
#[test]
fn a_small_file_synced_is_its_block_and_an_entry_naming_it() {
    let mut fs = journaled_nor(64);
    fs.sync().unwrap();
    let slots0 = slots(&fs);
    let f = file(&mut fs, b"f");
    let mut want = data(1, 256);
    fs.write(f, 0, &want).unwrap();
    let bytes = entry(&mut fs, f);
    assert!(bytes < 40, "the create, and the block named: {bytes} bytes");
    assert_eq!(fs.write_back_stats().blocks, 0, "the block went out");
    // The block, and a journal block if the entry did not fit the last one's room.
    assert!((1..=2).contains(&(slots(&fs) - slots0)));
    let mut fs = after_cut(fs);
    assert_eq!(content(&mut fs, f), want);
    fs.write(f, 256, &data(2, 64)).unwrap();
    want.extend(data(2, 64));
    assert!(entry(&mut fs, f) > 64, "an append: its bytes");
    assert_eq!(fs.write_back_stats().blocks, 1);
    let mut fs = after_cut(fs);
    assert_eq!(content(&mut fs, f), want);
    let g = file(&mut fs, b"g");
    fs.write(g, 0, &data(4, 128)).unwrap();
    assert!(entry(&mut fs, g) > 128, "a quarter of a block: its bytes");
    assert_eq!(fs.write_back_stats().blocks, 1);
    let mut fs = after_cut(fs);
    assert_eq!(content(&mut fs, g), data(4, 128));
}

/// A block that small writes made whole and that went out of RAM before the sync (to make
/// room) is named whatever its file; the replay puts it in its place among small writes:
/// after an entry that changed part of it (the block covers it), before one that appends
/// to it (which lands on it).
#[test]
fn a_named_block_replays_in_its_place_among_small_writes() {
    let mut fs = journaled_nor(1);
    let f = file(&mut fs, b"f");
    fs.write(f, 0, &data(1, 300)).unwrap();
    fs.checkpoint().unwrap();
    fs.write(f, 0, &data(2, 100)).unwrap();
    assert!(entry(&mut fs, f) > 100, "part of the block: the bytes");
    let mut want = data(3, 300);
    fs.write(f, 0, &want[..200]).unwrap();
    fs.write(f, 200, &want[200..]).unwrap();
    // Another file's block takes the one block of RAM: f's goes out.
    let g = file(&mut fs, b"g");
    fs.write(g, 0, &data(5, 10)).unwrap();
    let waiting: Vec<Ino> = fs.write_back_blocks().iter().map(|b| b.0).collect();
    assert_eq!(waiting, vec![g]);
    let bytes = entry(&mut fs, f);
    assert!(
        (10..64).contains(&bytes),
        "f's block named, g's bytes: {bytes}"
    );
    fs.write(f, 300, &data(4, 20)).unwrap();
    want.extend(data(4, 20));
    assert!(entry(&mut fs, f) > 20);
    let mut fs = after_cut(fs);
    assert_eq!(
        fs.stats().journal_replayed,
        5,
        "a write, a block named, a create, two writes"
    );
    assert_eq!(content(&mut fs, f), want);
    assert_eq!(content(&mut fs, g), data(5, 10));
}

/// A block allocated unwritten and then made whole by small writes keeps its sector: the
/// replay maps the sector it already holds as written.
#[test]
fn an_allocated_block_made_whole_by_small_writes_replays_in_place() {
    let mut fs = journaled_nor(1);
    let f = file(&mut fs, b"f");
    fs.fallocate(f, 0, 0, 300).unwrap();
    fs.checkpoint().unwrap();
    let blocks = fs.getattr(f).unwrap().inode.blocks;
    let want = data(7, 300);
    fs.write(f, 0, &want[..150]).unwrap();
    fs.write(f, 150, &want[150..]).unwrap();
    let g = file(&mut fs, b"g");
    fs.write(g, 0, &data(8, 10)).unwrap();
    assert!(entry(&mut fs, f) < 64, "f's block named");
    let mut fs = after_cut(fs);
    assert_eq!(content(&mut fs, f), want);
    assert_eq!(fs.getattr(f).unwrap().inode.blocks, blocks);
}

/// On NOR the bytes of a file's last block past its end are left erased, never programmed;
/// whatever grows the file over them without writing them — a write further on in the
/// block (the block waiting in RAM), a truncate, an allocation, a write past the block —
/// shows zeros there, before and after a remount.
#[test]
fn a_block_s_bytes_past_the_file_s_end_are_not_programmed_and_read_as_zeros() {
    let mut fs = journaled_nor(64);
    let f = file(&mut fs, b"f");
    fs.checkpoint().unwrap();
    let programmed =
        |fs: &Fs<NorSegments<NorSim>>| fs.ftl().log().device().flash().stats().bytes_programmed;
    let before = programmed(&fs);
    fs.open(f).unwrap();
    fs.write(f, 0, &data(1, 100)).unwrap();
    fs.release(f).unwrap();
    assert_eq!(
        fs.write_back_stats().blocks,
        0,
        "the close programmed the block"
    );
    let cost = programmed(&fs) - before;
    assert!(cost < 200, "the block programmed {cost} bytes for 100");
    let mut want = data(1, 100);
    // A write further on in the same block: on flash, and waiting in RAM.
    fs.write(f, 150, &data(2, 10)).unwrap();
    fs.write(f, 200, &data(3, 10)).unwrap();
    assert_eq!(fs.write_back_stats().blocks, 1);
    want.resize(150, 0);
    want.extend(data(2, 10));
    want.resize(200, 0);
    want.extend(data(3, 10));
    assert_eq!(content(&mut fs, f), want);
    // Grown by an allocation, by a truncate (each over a tail left erased: the block
    // programmed first), then by a write past the block.
    fs.sync().unwrap();
    fs.fallocate(f, 0, 0, 300).unwrap();
    want.resize(300, 0);
    assert_eq!(content(&mut fs, f), want);
    fs.write(f, 300, &data(4, 10)).unwrap();
    want.extend(data(4, 10));
    fs.sync().unwrap();
    fs.setattr(
        f,
        SetAttr {
            size: Some(400),
            ..SetAttr::default()
        },
    )
    .unwrap();
    want.resize(400, 0);
    assert_eq!(content(&mut fs, f), want);
    let bs = fs.block_size() as usize;
    fs.write(f, bs as u64 + 10, &data(3, 10)).unwrap();
    want.resize(bs + 10, 0);
    want.extend(data(3, 10));
    assert_eq!(content(&mut fs, f), want);
    fs.sync().unwrap();
    let mut fs = Fs::mount(fs.unmount().unwrap(), fs_config()).unwrap();
    assert_eq!(content(&mut fs, f), want);
}

#[test]
fn a_block_written_to_its_end_goes_out_at_once() {
    let mut fs = Fs::format(nor(false), fs_config()).unwrap();
    let f = file(&mut fs, b"f");
    let bs = fs.block_size() as usize;
    for i in 0..bs / 64 - 1 {
        fs.write(f, (i * 64) as u64, &data(i as u8, 64)).unwrap();
    }
    assert_eq!(fs.write_back_stats().blocks, 1);
    fs.write(f, (bs - 64) as u64, &data(9, 64)).unwrap();
    assert_eq!(fs.write_back_stats().blocks, 0, "the full block went out");
    fs.write(f, bs as u64, &data(10, 1)).unwrap();
    assert_eq!(fs.write_back_stats().blocks, 1, "the next block waits");
}

#[test]
fn the_least_recently_written_block_is_evicted_first() {
    let mut fs = Fs::format(nand(), buffered(2)).unwrap();
    let (a, b, c) = (
        file(&mut fs, b"a"),
        file(&mut fs, b"b"),
        file(&mut fs, b"c"),
    );
    fs.write(a, 0, &data(1, 10)).unwrap();
    fs.write(b, 0, &data(2, 10)).unwrap();
    // `a` is written again: `b` is now the least recently written.
    fs.write(a, 10, &data(3, 10)).unwrap();
    let files = |fs: &Fs<_>| {
        fs.write_back_blocks()
            .iter()
            .map(|&(ino, _)| ino)
            .collect::<Vec<_>>()
    };
    assert_eq!(files(&fs), vec![b, a]);
    let before = slots(&fs);
    fs.write(c, 0, &data(4, 10)).unwrap();
    assert_eq!(files(&fs), vec![a, c], "b was evicted");
    assert_eq!(slots(&fs), before + 1, "the eviction programmed one block");
    assert_eq!(content(&mut fs, b), data(2, 10));
    fs.sync().unwrap();
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, fs_config()).unwrap();
    let mut want_a = data(1, 10);
    want_a.extend(data(3, 10));
    assert_eq!(content(&mut fs, a), want_a);
    assert_eq!(content(&mut fs, b), data(2, 10));
    assert_eq!(content(&mut fs, c), data(4, 10));
}

#[test]
fn truncate_and_unlink_drop_or_keep_buffered_data() {
    let mut fs = Fs::format(nand(), fs_config()).unwrap();
    let t = file(&mut fs, b"t");
    fs.write(t, 0, &data(1, 300)).unwrap();
    // Down inside the buffered block, then up again: zeros past the cut.
    fs.setattr(
        t,
        SetAttr {
            size: Some(120),
            ..SetAttr::default()
        },
    )
    .unwrap();
    fs.setattr(
        t,
        SetAttr {
            size: Some(400),
            ..SetAttr::default()
        },
    )
    .unwrap();
    let mut want = data(1, 120);
    want.resize(400, 0);
    assert_eq!(content(&mut fs, t), want);
    // Down to nothing: the block is freed, its buffer dropped.
    fs.setattr(
        t,
        SetAttr {
            size: Some(0),
            ..SetAttr::default()
        },
    )
    .unwrap();
    assert_eq!(fs.write_back_stats().blocks, 0);
    assert_eq!(content(&mut fs, t), Vec::<u8>::new());
    // An unlinked file's buffered block is dropped, never programmed.
    let u = file(&mut fs, b"u");
    fs.write(u, 0, &data(2, 77)).unwrap();
    fs.write(t, 0, &data(3, 33)).unwrap();
    assert_eq!(fs.write_back_stats().blocks, 2);
    let before = slots(&fs);
    fs.unlink(ROOT_INO, b"u").unwrap();
    assert_eq!(fs.write_back_blocks().len(), 1);
    assert_eq!(fs.write_back_blocks()[0].0, t);
    fs.sync().unwrap();
    assert_eq!(fs.write_back_stats().blocks, 0);
    assert!(slots(&fs) > before);
    let report = fs.check(false).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, fs_config()).unwrap();
    assert_eq!(content(&mut fs, t), data(3, 33));
    assert!(fs.lookup(ROOT_INO, b"u").is_err());
}

#[test]
fn a_punched_hole_and_a_rename_over_a_file_see_the_buffered_block() {
    let mut fs = Fs::format(nor(true), fs_config()).unwrap();
    let p = file(&mut fs, b"p");
    fs.write(p, 0, &data(1, 400)).unwrap();
    fs.fallocate(
        p,
        flashfs::fs::FALLOC_FL_PUNCH_HOLE | flashfs::fs::FALLOC_FL_KEEP_SIZE,
        100,
        50,
    )
    .unwrap();
    let mut want = data(1, 400);
    want[100..150].fill(0);
    assert_eq!(content(&mut fs, p), want);
    let q = file(&mut fs, b"q");
    fs.write(q, 0, &data(2, 40)).unwrap();
    // `p` replaces `q`: q's buffered block is dropped with it.
    fs.rename(ROOT_INO, b"p", ROOT_INO, b"q", Default::default())
        .unwrap();
    assert!(fs.write_back_blocks().iter().all(|&(ino, _)| ino != q));
    fs.sync().unwrap();
    let dev = fs.into_device();
    let mut fs = Fs::mount(dev, fs_config()).unwrap();
    let q = fs.lookup(ROOT_INO, b"q").unwrap().ino;
    assert_eq!(content(&mut fs, q), want);
    let report = fs.check(false).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
}

#[test]
fn a_power_cut_loses_only_the_writes_no_sync_covered() {
    for dev in [nor(true), nor(false)] {
        let mut fs = Fs::format(dev, fs_config()).unwrap();
        let f = file(&mut fs, b"f");
        fs.write(f, 0, &data(1, 100)).unwrap();
        fs.fsync(f, false).unwrap();
        fs.write(f, 100, &data(2, 100)).unwrap();
        fs.write(f, 10, &data(3, 5)).unwrap();
        assert!(fs.write_back_stats().blocks > 0);
        let mut fs = Fs::mount(fs.into_device(), fs_config()).unwrap();
        assert_eq!(content(&mut fs, f), data(1, 100), "the synced write, alone");
    }
}

#[test]
fn close_programs_the_block_but_only_a_sync_makes_it_durable() {
    let mut fs = Fs::format(nand(), fs_config()).unwrap();
    let f = file(&mut fs, b"f");
    fs.sync().unwrap();
    fs.open(f).unwrap();
    fs.write(f, 0, &data(1, 60)).unwrap();
    let before = slots(&fs);
    fs.release(f).unwrap();
    assert_eq!(fs.write_back_stats().blocks, 0);
    assert_eq!(slots(&fs), before + 1, "the close programmed the block");
    let mut fs = Fs::mount(fs.into_device(), fs_config()).unwrap();
    assert_eq!(content(&mut fs, f), Vec::<u8>::new(), "nothing synced it");
}

#[test]
fn transactions_take_the_buffered_data_along() {
    let mut fs = Fs::format(nand(), fs_config()).unwrap();
    let (a, b) = (file(&mut fs, b"a"), file(&mut fs, b"b"));
    fs.sync().unwrap();
    fs.write(a, 0, &data(1, 70)).unwrap();
    let tid = fs.begin().unwrap();
    // An operation in a transaction programs what waits first, and its own blocks at once.
    fs.in_tx(tid, |fs| fs.write(b, 0, &data(2, 30))).unwrap();
    assert_eq!(fs.write_back_stats().blocks, 0);
    fs.write(a, 70, &data(3, 10)).unwrap();
    fs.abort(tid).unwrap();
    let mut want = data(1, 70);
    want.extend(data(3, 10));
    assert_eq!(content(&mut fs, a), want, "an abort keeps other writes");
    let tid = fs.begin().unwrap();
    fs.in_tx(tid, |fs| fs.write(b, 0, &data(4, 30))).unwrap();
    fs.write(a, 80, &data(5, 20)).unwrap();
    fs.commit_tx(tid).unwrap();
    want.extend(data(5, 20));
    let mut fs = Fs::mount(fs.into_device(), fs_config()).unwrap();
    assert_eq!(
        content(&mut fs, a),
        want,
        "the commit covered the buffered write"
    );
    assert_eq!(content(&mut fs, b), data(4, 30));
}

#[test]
fn buffering_cuts_the_programs_of_small_appends() {
    let appends = |n: usize| {
        let mut fs = Fs::format(nand(), buffered(n)).unwrap();
        let f = file(&mut fs, b"f");
        fs.sync().unwrap();
        let before = slots(&fs);
        for i in 0..128u64 {
            fs.write(f, i * 64, &data(i as u8, 64)).unwrap();
        }
        fs.sync().unwrap();
        let programmed = slots(&fs) - before;
        let mut fs = Fs::mount(fs.unmount().unwrap(), fs_config()).unwrap();
        assert_eq!(fs.getattr(f).unwrap().inode.size, 128 * 64);
        programmed
    };
    let (off, on) = (appends(0), appends(4));
    // 8 KiB in 512-byte blocks: 16 blocks, plus the sync's index nodes and superblock;
    // without buffers every append programs one.
    assert!(off >= 128, "without buffers: {off} slots");
    assert!(on <= 16 + 4, "with buffers: {on} slots");
}

#[test]
fn no_buffers_means_every_write_programs_at_once() {
    let mut fs = Fs::format(nand(), buffered(0)).unwrap();
    let f = file(&mut fs, b"f");
    let before = slots(&fs);
    fs.write(f, 0, &data(1, 10)).unwrap();
    assert_eq!(fs.write_back_stats().blocks, 0);
    assert_eq!(slots(&fs), before + 1);
}

#[test]
fn a_write_over_several_blocks_starting_in_a_buffered_one_keeps_its_bytes() {
    let mut fs = Fs::format(nor(false), fs_config()).unwrap();
    let f = file(&mut fs, b"f");
    let bs = fs.block_size() as usize;
    fs.write(f, 0, &data(1, 100)).unwrap();
    // Over the buffered block's tail and two more: its first 50 bytes come from RAM.
    fs.write(f, 50, &data(2, 2 * bs)).unwrap();
    let mut want = data(1, 50);
    want.extend(data(2, 2 * bs));
    assert_eq!(content(&mut fs, f), want);
    // The block this write ended inside waits; the one it started in was programmed anew.
    assert_eq!(fs.write_back_blocks().len(), 1);
    fs.sync().unwrap();
    let mut fs = Fs::mount(fs.into_device(), fs_config()).unwrap();
    assert_eq!(content(&mut fs, f), want);
}
