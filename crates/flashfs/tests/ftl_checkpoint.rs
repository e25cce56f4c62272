//! Checkpoints of the block device: a closed volume mounts from its checkpoint, reading a
//! fraction of what a scan reads, and shows exactly what a scan shows; an unclosed one (a
//! power cut) is scanned; a damaged checkpoint falls back to the scan; and a power cut at
//! every device operation of a close, and of the first writes after a mount from a
//! checkpoint, loses nothing acknowledged.

mod common;

use common::{nand_checkpointed, nand_long_segments, nor};
use flash::NandSim;
use flashfs::ftl::Audit;
use flashfs::{BlockDevice, Error, Ftl, FtlConfig, LogConfig, NandSegments, Segments};
use flashfs_bench::torture::{apply, read_all, versions, workload, Model, Op, SimSegments};

fn big_nand() -> NandSegments<NandSim> {
    nand_checkpointed()
}

fn scan_config() -> FtlConfig {
    FtlConfig {
        log: LogConfig {
            scan_mount: true,
            ..LogConfig::default()
        },
        ..FtlConfig::default()
    }
}

/// Page reads the device has served so far.
fn reads<D: SimSegments>(dev: &D) -> u64 {
    dev.sim().stats().reads
}

/// Applies `ops` and returns the model of what each sector holds.
fn run(ftl: &mut Ftl<NandSegments<NandSim>>, ops: &[Op]) -> Model {
    let mut model = Model::new(ftl.sectors());
    for &op in ops {
        model.issue(op);
        apply(ftl, op).unwrap();
    }
    model.flushed();
    model
}

fn check(ftl: &mut Ftl<NandSegments<NandSim>>, model: &Model, vers: &[Vec<u32>], what: &str) {
    let read = read_all(ftl, vers).unwrap_or_else(|e| panic!("{what}: {e}"));
    model
        .check_after_cut(&read)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
}

#[test]
fn a_closed_volume_mounts_from_its_checkpoint_and_shows_what_a_scan_shows() {
    let mut ftl = Ftl::format(big_nand(), FtlConfig::default()).unwrap();
    let sectors = ftl.sectors();
    // Enough writes that the cleaner runs, with trims and their records.
    let ops = workload(7, sectors, 6000);
    let vers = versions(&ops, sectors);
    let model = run(&mut ftl, &ops);
    assert!(ftl.log().stats().cleaned > 0, "the cleaner never ran");
    let dev = ftl.close().unwrap();

    let before = reads(&dev);
    let mut ftl = Ftl::mount(dev.clone(), FtlConfig::default()).unwrap();
    let restored_reads = reads(ftl.log().device()) - before;
    assert!(ftl.log().restored(), "the mount scanned");
    check(&mut ftl, &model, &vers, "mounted from the checkpoint");

    let mut scanned = Ftl::mount(dev, scan_config()).unwrap();
    let scan_reads = reads(scanned.log().device()) - before;
    assert!(!scanned.log().restored());
    check(&mut scanned, &model, &vers, "scanned");
    assert!(
        restored_reads * 4 < scan_reads,
        "checkpoint mount read {restored_reads} pages, a scan {scan_reads}"
    );
    // The same segments are in use and as live, whichever way the mount went.
    let live = |f: &Ftl<_>| {
        let v: Vec<(u32, u32)> = f
            .log()
            .segments()
            .iter()
            .map(|s| (s.live(), s.erase_count))
            .collect();
        v
    };
    let (a, b) = (live(&ftl), live(&scanned));
    let data_live = |v: &[(u32, u32)]| v.iter().map(|x| x.0 as u64).sum::<u64>();
    // The scan finds no checkpoint pages live; the checkpoint mount keeps its own.
    assert!(data_live(&a) >= data_live(&b));
    assert_eq!(ftl.mapped_sectors(), scanned.mapped_sectors());
}

#[test]
fn a_volume_not_closed_rolls_forward_from_its_checkpoint() {
    let mut ftl = Ftl::format(big_nand(), FtlConfig::default()).unwrap();
    let sectors = ftl.sectors();
    let ops = workload(8, sectors, 3000);
    let vers = versions(&ops, sectors);
    let model = run(&mut ftl, &ops);
    ftl.flush().unwrap();
    assert!(ftl.log().stats().checkpoints > 1, "no checkpoint fell due");
    // A power cut: no close.
    let dev = ftl.into_device();
    let before = reads(&dev);
    let mut ftl = Ftl::mount(dev.clone(), FtlConfig::default()).unwrap();
    let rolled_reads = reads(ftl.log().device()) - before;
    assert!(ftl.log().restored(), "the mount after the cut scanned");
    check(&mut ftl, &model, &vers, "after the cut");
    let mut scanned = Ftl::mount(dev, scan_config()).unwrap();
    let scan_reads = reads(scanned.log().device()) - before;
    check(&mut scanned, &model, &vers, "scanned after the cut");
    assert!(
        rolled_reads * 2 < scan_reads,
        "roll-forward read {rolled_reads} pages, a scan {scan_reads}"
    );
    assert_eq!(ftl.mapped_sectors(), scanned.mapped_sectors());
    let (ftl, audit) = ftl.audit(FtlConfig::default()).unwrap();
    assert_eq!(
        audit,
        Some(Audit::default()),
        "the roll-forward and the scan disagree"
    );
    let mut ftl = Ftl::mount(ftl.close().unwrap(), FtlConfig::default()).unwrap();
    assert!(ftl.log().restored());
    check(&mut ftl, &model, &vers, "after a close");
}

#[test]
fn mounting_and_closing_without_writing_writes_nothing() {
    let ftl = Ftl::format(big_nand(), FtlConfig::default()).unwrap();
    let dev = ftl.close().unwrap();
    let programs = dev.sim().stats().programs;
    let ftl = Ftl::mount(dev, FtlConfig::default()).unwrap();
    assert!(ftl.log().restored());
    let dev = ftl.close().unwrap();
    assert_eq!(dev.sim().stats().programs, programs);
}

#[test]
fn a_damaged_checkpoint_page_falls_back_to_the_scan() {
    let mut ftl = Ftl::format(big_nand(), FtlConfig::default()).unwrap();
    let sectors = ftl.sectors();
    let ops = workload(9, sectors, 1500);
    let vers = versions(&ops, sectors);
    let model = run(&mut ftl, &ops);
    let stats = *ftl.log().stats();
    assert!(stats.checkpoints >= 1);
    let mut dev = ftl.close().unwrap();
    // Damage every slot holding a checkpoint page, one at a time.
    let geo = dev.geometry();
    let mut pages = Vec::new();
    let mut tags = vec![flashfs::media::tag::TagState::Erased; geo.slots as usize];
    for seg in 0..geo.segments {
        dev.read_tags(seg, &mut tags).unwrap();
        for (slot, t) in tags.iter().enumerate() {
            if let flashfs::media::tag::TagState::Valid(t) = t {
                if t.kind == flashfs::media::tag::Kind::Page {
                    pages.push((seg, slot as u32));
                }
            }
        }
    }
    assert!(!pages.is_empty());
    let mut fell_back = 0;
    for &(seg, slot) in pages.iter().step_by(pages.len().div_ceil(12)) {
        let mut d = dev.clone();
        // Beyond what the ECC corrects: the page reads as an error.
        d.inject_bit_errors(seg, slot, 8);
        let mut ftl = Ftl::mount(d.clone(), FtlConfig::default())
            .unwrap_or_else(|e| panic!("mount with page {seg}/{slot} damaged: {e}"));
        fell_back += u32::from(!ftl.log().restored());
        if ftl.log().restored() && read_all(&mut ftl, &vers).is_err() {
            // A map page of the newest checkpoint: the mount does not read those, so its
            // sectors fail (never wrong data) until a scan rebuilds the map, as `fsck`'s
            // audit does (a_decayed_map_page_fails_its_sectors_until_a_scan_rebuilds_the_map).
            let (mut scanned, audit) = Ftl::mount(d, FtlConfig::default())
                .and_then(|f| f.audit(FtlConfig::default()))
                .unwrap_or_else(|e| panic!("audit with page {seg}/{slot} damaged: {e}"));
            assert!(audit.is_some_and(|a| a.map_unreadable), "{seg}/{slot}");
            check(
                &mut scanned,
                &model,
                &vers,
                "damaged map page, after the audit",
            );
            continue;
        }
        check(&mut ftl, &model, &vers, "damaged checkpoint page");
    }
    assert!(fell_back > 0, "no damaged page was noticed");
}

/// A mount reads no map page, so one that decayed at rest shows only when a sector of it is
/// needed: EIO, never wrong data. `fsck` (the audit) says so and takes the scan's map; and
/// without it, the session's next checkpoint (its close here) is a mark instead, so the
/// next mount scans: either way everything reads back.
#[test]
fn a_decayed_map_page_fails_its_sectors_until_a_scan_rebuilds_the_map() {
    use flashfs::media::tag::{Kind, TagState};
    // Writes only: a trim record's ranges would have the mount read the page.
    let mut ftl = Ftl::format(big_nand(), FtlConfig::default()).unwrap();
    let (sectors, ss) = (ftl.sectors(), ftl.sector_size());
    let content = |k: u64| vec![(k % 251) as u8 + 1; ss];
    for k in 0..sectors {
        ftl.write(k, &content(k)).unwrap();
    }
    let mut dev = ftl.close().unwrap();
    // The newest copy of the first map page (after the segment table's, of 19-byte
    // entries): it maps sector 0.
    let geo = dev.geometry();
    let table_pages = geo.segments.div_ceil((geo.slot_size - 4) / 19);
    let mut newest: Option<(u64, u32, u32)> = None;
    let mut tags = vec![TagState::Erased; geo.slots as usize];
    for seg in 0..geo.segments {
        dev.read_tags(seg, &mut tags).unwrap();
        for (slot, t) in tags.iter().enumerate() {
            if let TagState::Valid(t) = t {
                if t.kind == Kind::Page
                    && t.key == table_pages
                    && newest.is_none_or(|(s, _, _)| t.seq > s)
                {
                    newest = Some((t.seq, seg, slot as u32));
                }
            }
        }
    }
    let (_, seg, slot) = newest.expect("a map page");
    dev.inject_bit_errors(seg, slot, 8);
    let mut buf = vec![0u8; ss];
    let damaged = |dev| {
        let mut ftl = Ftl::mount(dev, FtlConfig::default()).unwrap();
        assert!(ftl.log().restored(), "the mount read the map page");
        let mut buf = vec![0u8; ss];
        assert!(matches!(ftl.read(0, &mut buf), Err(Error::Damaged(_))));
        ftl
    };
    let (mut scanned, audit) = damaged(dev.clone()).audit(FtlConfig::default()).unwrap();
    let audit = audit.expect("the mount was from the checkpoint");
    assert!(audit.map_unreadable && !audit.is_clean());
    let mut again = Ftl::mount(damaged(dev).close().unwrap(), FtlConfig::default()).unwrap();
    assert!(
        !again.log().restored(),
        "the mount after the session scanned"
    );
    for k in 0..sectors {
        for ftl in [&mut scanned, &mut again] {
            ftl.read(k, &mut buf).unwrap();
            assert_eq!(buf, content(k), "sector {k}");
        }
    }
    // The scan's first checkpoint names pages that read back: the mount after is restored.
    again.write(0, &content(0)).unwrap();
    let mut last = Ftl::mount(again.close().unwrap(), FtlConfig::default()).unwrap();
    assert!(last.log().restored());
    last.read(0, &mut buf).unwrap();
    assert_eq!(buf, content(0));
}

/// Runs `ops` on a copy of `base` (which holds `history`) and flushes, then writes a checkpoint and runs `after`
/// (whose first program puts the checkpoint out of date), with the power cut at device
/// operation `k` counted from the checkpoint's start. The device as the cut left it, the
/// model, and whether the cut came.
fn cut_at<D: SimSegments>(
    base: &D,
    config: FtlConfig,
    history: &[Op],
    ops: &[Op],
    after: &[Op],
    k: u64,
    torn: bool,
) -> (D, Model, bool) {
    let mut ftl = Ftl::mount(base.clone(), config).unwrap();
    let mut model = Model::new(ftl.sectors());
    for &op in history {
        model.issue(op);
    }
    model.flushed();
    for &op in ops {
        model.issue(op);
        apply(&mut ftl, op).unwrap();
    }
    ftl.flush().unwrap();
    model.flushed();
    ftl.log_mut().device_mut().sim_mut().schedule_cut(k, torn);
    let cut = |ftl: Ftl<D>, model| {
        let mut dev = ftl.into_device();
        dev.sim_mut().reboot();
        (dev, model, true)
    };
    match ftl.checkpoint() {
        Ok(()) => {}
        Err(Error::Flash(flash::FlashError::PowerLoss)) => return cut(ftl, model),
        Err(e) => panic!("checkpoint: {e}"),
    }
    for &op in after {
        model.issue(op);
        match apply(&mut ftl, op) {
            Ok(()) if op.is_barrier() => model.flushed(),
            Ok(()) => {}
            Err(Error::Flash(flash::FlashError::PowerLoss)) => return cut(ftl, model),
            Err(e) => panic!("op after the checkpoint: {e}"),
        }
    }
    (ftl.into_device(), model, false)
}

#[test]
fn power_cuts_during_a_checkpoint_and_the_writes_after_it_lose_nothing() {
    every_cut_around_a_checkpoint(big_nand(), FtlConfig::default(), 300);
}

/// A small reprogrammable NOR part keeping checkpoints: its anchors turn every few sessions,
/// and a cut between a record's data and its tag leaves programmed bytes under an erased tag
/// (found by `flashfs torture`: the next record was programmed over them).
#[test]
fn power_cuts_around_checkpoints_on_nor_lose_nothing() {
    let mut config = FtlConfig::default();
    config.log.checkpoint_min_segments = 0;
    every_cut_around_a_checkpoint(nor(true), config, 120);
}

/// Formats `dev`, turns its anchors over with a few sessions, then cuts the power at every
/// device operation of a checkpoint and of the writes after it.
fn every_cut_around_a_checkpoint<D: SimSegments>(dev: D, config: FtlConfig, n: usize) {
    every_cut_after_rounds(dev, config, n, 12);
}

/// [`every_cut_around_a_checkpoint`] after `rounds` sessions of a checkpoint each.
fn every_cut_after_rounds<D: SimSegments>(dev: D, config: FtlConfig, n: usize, rounds: u64) {
    let base = after_rounds(dev, config, rounds);
    let sectors = Ftl::mount(base.clone(), config).unwrap().sectors();
    let ops = workload(11, sectors, n);
    let after = workload(12, sectors, 30);
    let history: Vec<Op> = (0..rounds)
        .flat_map(|r| workload(100 + r, sectors, 8))
        .collect();
    let mut all = history.clone();
    all.extend(ops.iter().chain(&after).copied());
    let vers = versions(&all, sectors);
    let mut cuts = 0;
    let mut restored = 0;
    for k in 1.. {
        let mut any = false;
        for torn in [false, true] {
            let (dev, mut model, was_cut) = cut_at(&base, config, &history, &ops, &after, k, torn);
            if !was_cut {
                continue;
            }
            any = true;
            let what = format!("cut {k} (torn {torn})");
            let mut ftl =
                Ftl::mount(dev, config).unwrap_or_else(|e| panic!("mount after {what}: {e}"));
            restored += u32::from(ftl.log().restored());
            let read = read_all(&mut ftl, &vers).unwrap_or_else(|e| panic!("{what}: {e}"));
            model
                .check_after_cut(&read)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            // What the mount shows survives a close and a mount from its checkpoint.
            model.settle(&read);
            let mut ftl = Ftl::mount(ftl.close().unwrap(), config).unwrap();
            assert!(
                ftl.log().restored(),
                "{what}: no checkpoint after the close"
            );
            let again = read_all(&mut ftl, &vers).unwrap();
            assert_eq!(
                again, read,
                "{what}: the checkpoint changed what the volume holds"
            );
            cuts += 1;
        }
        if !any {
            break;
        }
    }
    assert!(cuts > 100, "only {cuts} cuts");
    assert!(restored > 0, "no cut left a checkpoint to mount from");
}

/// `dev` formatted, then `rounds` sessions of a few writes and a checkpoint, and closed.
fn after_rounds<D: SimSegments>(dev: D, config: FtlConfig, rounds: u64) -> D {
    let mut ftl = Ftl::format(dev, config).unwrap();
    let sectors = ftl.sectors();
    assert!(ftl.log().volume().anchors.is_some());
    for round in 0..rounds {
        for op in workload(100 + round, sectors, 8) {
            apply(&mut ftl, op).unwrap();
        }
        ftl.checkpoint().unwrap();
    }
    ftl.close().unwrap()
}

/// The segments of `dev` with an anchor's header (head code 5), and when each was begun.
fn anchors_begun(dev: &mut NandSegments<NandSim>) -> Vec<(u32, u64)> {
    (0..dev.geometry().segments)
        .filter_map(|seg| match dev.read_header(seg).unwrap() {
            flashfs::media::HeaderState::Valid(h) if h.head == 5 => Some((seg, h.open_seq)),
            _ => None,
        })
        .collect()
}

/// Slots written in the anchor of `dev` begun last, and how many anchors are begun.
fn anchor_use(dev: &mut NandSegments<NandSim>) -> (u32, u32) {
    let (mut newest, mut used, mut begun) = (0, 0, 0);
    for (seg, open_seq) in anchors_begun(dev) {
        begun += 1;
        if open_seq >= newest {
            newest = open_seq;
            used = (0..dev.geometry().slots)
                .filter(|&s| !dev.slot_erased(seg, s).unwrap())
                .count() as u32;
        }
    }
    (used, begun)
}

/// A power cut at every device operation of a checkpoint whose records make the anchor take
/// its turn at its 128th slot, on a part of longer segments, and of the writes after it.
#[test]
fn power_cuts_around_an_anchor_turn_on_long_segments_lose_nothing() {
    let config = FtlConfig::default();
    // The sessions that leave the one anchor begun one record short of its 128 slots: the
    // checkpoint of the cut runs and the mark after it then turn it.
    let rounds = (50..80)
        .find(|&r| {
            let (used, begun) = anchor_use(&mut after_rounds(nand_long_segments(), config, r));
            begun == 1 && (126..128).contains(&used)
        })
        .expect("no session count leaves the anchor just short of its turn");
    // Uncut, the checkpoint and the writes after it do turn it.
    let (mut dev, _, cut) = {
        let base = after_rounds(nand_long_segments(), config, rounds);
        let sectors = Ftl::mount(base.clone(), config).unwrap().sectors();
        let history: Vec<Op> = (0..rounds)
            .flat_map(|r| workload(100 + r, sectors, 8))
            .collect();
        let ops = workload(11, sectors, 40);
        let after = workload(12, sectors, 30);
        cut_at(&base, config, &history, &ops, &after, 1 << 40, false)
    };
    assert!(!cut);
    let u = anchor_use(&mut dev);
    assert_eq!(u.1, 2, "the anchors did not turn: {u:?} after {rounds}");
    every_cut_after_rounds(nand_long_segments(), config, 40, rounds);
}

/// A volume flushed but not closed: the device, its model, the versions written, and the
/// copies of its newest anchor record (segment, slot).
type Unclosed = (NandSegments<NandSim>, Model, Vec<Vec<u32>>, Vec<(u32, u32)>);

/// A volume flushed but not closed, and the copies of its newest anchor record (the anchor
/// slots with the highest sequence number), the later copy first.
fn unclosed_with_newest_record() -> Unclosed {
    let mut ftl = Ftl::format(big_nand(), FtlConfig::default()).unwrap();
    let sectors = ftl.sectors();
    let ops = workload(21, sectors, 2000);
    let vers = versions(&ops, sectors);
    let model = run(&mut ftl, &ops);
    ftl.flush().unwrap();
    let [a, z] = ftl.log().volume().anchors.unwrap().map(u32::from);
    let mut dev = ftl.into_device();
    let mut copies: Vec<(u64, u32, u32)> = Vec::new();
    let mut tags = vec![flashfs::media::tag::TagState::Erased; dev.geometry().slots as usize];
    for seg in [a, z] {
        dev.read_tags(seg, &mut tags).unwrap();
        for (slot, t) in tags.iter().enumerate() {
            if let flashfs::media::tag::TagState::Valid(t) = t {
                copies.push((t.seq, seg, slot as u32));
            }
        }
    }
    copies.sort_unstable();
    let newest = copies.last().unwrap().0;
    let newest: Vec<(u32, u32)> = copies
        .iter()
        .rev()
        .filter(|c| c.0 == newest)
        .map(|&(_, seg, slot)| (seg, slot))
        .collect();
    assert_eq!(newest.len(), 2, "an anchor record is written twice");
    (dev, model, vers, newest)
}

/// Makes the page of a slot read as erased.
fn erase_at_rest(dev: &mut NandSegments<NandSim>, seg: u32, slot: u32) {
    let at = dev.slot_page(seg, slot);
    dev.flash_mut().erase_page_at_rest(at).unwrap();
}

#[test]
fn a_decayed_copy_of_the_newest_anchor_record_leaves_the_other() {
    for (copy, erased) in [(0, false), (0, true), (1, false), (1, true)] {
        let (mut dev, model, vers, newest) = unclosed_with_newest_record();
        let (seg, slot) = newest[copy];
        if erased {
            erase_at_rest(&mut dev, seg, slot);
        } else {
            assert!(dev.inject_bit_errors(seg, slot, 8));
        }
        let mut ftl = Ftl::mount(dev, FtlConfig::default()).unwrap();
        let what = format!("copy {copy} of the newest record damaged (erased {erased})");
        assert!(ftl.log().restored(), "{what}: not mounted from its twin");
        check(&mut ftl, &model, &vers, &what);
    }
}

#[test]
fn a_newest_anchor_record_decayed_whole_sends_the_mount_to_the_scan() {
    // Both copies beyond the ECC: the record before them may be a root the log has long
    // left (found by flashfs torture --fault ecc-beyond).
    let (mut dev, model, vers, newest) = unclosed_with_newest_record();
    for &(seg, slot) in &newest {
        assert!(dev.inject_bit_errors(seg, slot, 8));
    }
    let mut ftl = Ftl::mount(dev, FtlConfig::default()).unwrap();
    assert!(
        !ftl.log().restored(),
        "mounted from a record before a damaged one"
    );
    check(&mut ftl, &model, &vers, "after the newest record decayed");
    // The later copy read as erased and the first decayed: the scan again.
    let (mut dev, model, vers, newest) = unclosed_with_newest_record();
    erase_at_rest(&mut dev, newest[0].0, newest[0].1);
    assert!(dev.inject_bit_errors(newest[1].0, newest[1].1, 8));
    let mut ftl = Ftl::mount(dev, FtlConfig::default()).unwrap();
    assert!(
        !ftl.log().restored(),
        "mounted from a record before a damaged one"
    );
    check(
        &mut ftl,
        &model,
        &vers,
        "after the newest record decayed and read as erased",
    );
}

/// On segments longer than the slots an anchor gives records, the anchors take turns once
/// those are used, so a mount searches as many slots for the newest record as on a part of
/// short segments, and finds it.
#[test]
fn anchors_of_long_segments_take_turns_after_their_first_slots() {
    let mut ftl = Ftl::format(nand_long_segments(), FtlConfig::default()).unwrap();
    let sectors = ftl.sectors();
    let slots = ftl.log().device().geometry().slots;
    assert!(slots > 128, "segments of {slots} slots");
    let ops = workload(31, sectors, 4000);
    let vers = versions(&ops, sectors);
    // A checkpoint (a root, then a mark at the next program) every 20 operations: more
    // records than an anchor's 128 slots hold.
    let model = run_checkpointed(&mut ftl, &ops, 20);
    assert!(ftl.log().stats().anchor_records > 128, "too few records");
    let mut dev = ftl.into_device();
    let mut turns = 0;
    for (seg, _) in anchors_begun(&mut dev) {
        turns += 1;
        for slot in 128..slots {
            assert!(
                dev.slot_erased(seg, slot).unwrap(),
                "anchor {seg} wrote slot {slot}"
            );
        }
    }
    assert!(turns >= 2, "the anchors never took turns");
    let mut ftl = Ftl::mount(dev, FtlConfig::default()).unwrap();
    assert!(ftl.log().restored(), "the mount scanned");
    check(&mut ftl, &model, &vers, "after the anchors took turns");
}

/// Applies `ops` with a checkpoint after every `every` of them, then flushes; the model of
/// what each sector holds.
fn run_checkpointed(ftl: &mut Ftl<NandSegments<NandSim>>, ops: &[Op], every: usize) -> Model {
    let mut model = Model::new(ftl.sectors());
    for chunk in ops.chunks(every) {
        for &op in chunk {
            model.issue(op);
            apply(ftl, op).unwrap();
        }
        ftl.checkpoint().unwrap();
    }
    ftl.flush().unwrap();
    model.flushed();
    model
}

/// A volume flushed but not closed after its anchors took turns: the device, its model,
/// the versions written, and the anchors, the one begun last first.
fn turned_anchors() -> (NandSegments<NandSim>, Model, Vec<Vec<u32>>, [u32; 2]) {
    // Checkpoints enough for the anchors to take turns (three records fit one here), and
    // as many as leave the second anchor the newer: how many the log adds of its own
    // depends on its set, so a few spacings are tried.
    for every in [300, 270, 240, 330, 210] {
        let mut ftl = Ftl::format(big_nand(), FtlConfig::default()).unwrap();
        let sectors = ftl.sectors();
        let ops = workload(23, sectors, 3000);
        let vers = versions(&ops, sectors);
        let model = run_checkpointed(&mut ftl, &ops, every);
        let anchors = ftl.log().volume().anchors.unwrap().map(u32::from);
        let mut dev = ftl.into_device();
        let opened = |dev: &mut NandSegments<NandSim>, seg| match dev.read_header(seg).unwrap() {
            flashfs::media::HeaderState::Valid(h) => h.open_seq,
            h => panic!("anchor {seg}: {h:?}"),
        };
        if opened(&mut dev, anchors[1]) > opened(&mut dev, anchors[0]) {
            return (dev, model, vers, [anchors[1], anchors[0]]);
        }
    }
    panic!("the anchors never took turns");
}

#[test]
fn an_anchor_whose_header_reads_as_erased_over_records_sends_the_mount_to_the_scan() {
    let (mut dev, model, vers, [newer, _]) = turned_anchors();
    // The newer anchor's header lost its charge: its turn had not begun, by the look of it,
    // and the older anchor's newest root would look current.
    let at = dev.header_page(newer);
    dev.flash_mut().erase_page_at_rest(at).unwrap();
    let mut ftl = Ftl::mount(dev, FtlConfig::default()).unwrap();
    assert!(
        !ftl.log().restored(),
        "mounted from the older anchor's root"
    );
    check(
        &mut ftl,
        &model,
        &vers,
        "after the newer anchor's header read as erased",
    );
}

#[test]
fn a_mount_reads_no_record_of_the_older_anchor_when_the_newer_holds_one() {
    let (dev, model, vers, [_, older]) = turned_anchors();
    let mut wiped = dev.clone();
    let slots = wiped.geometry().slots;
    for slot in 0..slots {
        let at = wiped.slot_page(older, slot);
        wiped.flash_mut().erase_page_at_rest(at).unwrap();
    }
    let mut mounted_reads = Vec::new();
    for (what, dev) in [("as written", dev), ("older anchor wiped", wiped)] {
        let before = reads(&dev);
        let mut ftl = Ftl::mount(dev, FtlConfig::default()).unwrap();
        mounted_reads.push(reads(ftl.log().device()) - before);
        assert!(ftl.log().restored(), "{what}: the mount scanned");
        check(&mut ftl, &model, &vers, what);
    }
    assert_eq!(
        mounted_reads[0], mounted_reads[1],
        "the older anchor's slots changed what the mount read"
    );
}

/// Anchor records and turns are read back like every program when programs may fail
/// silently (found by flashfs torture --fault silent: a mark that did not take left an old
/// root looking current).
#[test]
fn silent_failures_of_anchor_programs_lose_nothing() {
    use flashfs_bench::torture::{run as torture, Fault, TargetKind, TortureOptions, Workload};
    for (preset, seed, cut) in [("28f008sa", 22, 481), ("w25q64jv", 8, 130)] {
        let opts = TortureOptions {
            presets: vec![preset.into()],
            targets: vec![TargetKind::Ftl],
            faults: vec![Fault::Silent],
            workloads: vec![Workload::Mixed],
            seed,
            cut: Some(cut),
            ..TortureOptions::default()
        };
        let outcome = torture(&opts, &mut |_, _, _| {}).unwrap();
        assert!(
            outcome.violations.is_empty(),
            "{preset} seed {seed} cut {cut}: {:?}",
            outcome.violations
        );
    }
}

/// A map cache of two pages over a map of sixteen: writes at random read map pages back
/// from the checkpoint and force checkpoints once the changed pages fill the cache; every
/// sector reads back, before and after a close and after a power cut, and the map in RAM
/// stays within the cache and the one chunk a checkpoint holds while writing it.
#[test]
fn a_map_larger_than_its_cache_reads_back_through_checkpoints_and_cuts() {
    let config = FtlConfig {
        map_cache: 1024,
        ..FtlConfig::default()
    };
    let mut ftl = Ftl::format(big_nand(), config).unwrap();
    let n = ftl.sectors();
    let ss = ftl.sector_size();
    let mut want = vec![0u32; n as usize];
    let mut x = 12345u64;
    let mut most = 0;
    for i in 1..=3 * n as u32 {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let k = (x >> 33) % n;
        let mut buf = vec![0u8; ss];
        buf[..4].copy_from_slice(&i.to_le_bytes());
        ftl.write(k, &buf).unwrap();
        want[k as usize] = i;
        most = most.max(ftl.map_cache_stats().0);
    }
    let check = |ftl: &mut Ftl<NandSegments<NandSim>>| {
        let mut buf = vec![0u8; ss];
        for (k, &v) in want.iter().enumerate() {
            ftl.read(k as u64, &mut buf).unwrap();
            assert_eq!(
                u32::from_le_bytes(buf[..4].try_into().unwrap()),
                v,
                "sector {k}"
            );
        }
    };
    check(&mut ftl);
    let (resident, loads) = ftl.map_cache_stats();
    assert!(loads > 1000, "{loads} map pages read back");
    // A chunk is 16 pages of 126 entries, 504 bytes each. Changed pages stay until a
    // checkpoint (one is written once they pass the budget), and a read keeps the page it
    // read: up to one page beyond the budget when changed pages fill it.
    assert!(resident <= 1024 + 504, "{resident} bytes of map in RAM");
    assert!(
        most <= 1024 + 16 * 504,
        "{most} bytes of map in RAM at most"
    );
    assert!(ftl.log().stats().checkpoints > 100);
    // A power cut: the mount rolls forward from the newest checkpoint.
    let mut ftl = Ftl::mount(ftl.into_device(), config).unwrap();
    assert!(ftl.log().restored());
    check(&mut ftl);
    let mut ftl = Ftl::mount(ftl.close().unwrap(), config).unwrap();
    assert!(ftl.log().restored());
    check(&mut ftl);
    assert!(ftl.map_cache_stats().0 <= 1024);
    // The scan agrees (a copy and its source left unerased are the same version).
    let (mut scanned, audit) = ftl.audit(config).unwrap();
    assert_eq!(audit, Some(Audit::default()));
    check(&mut scanned);
}

/// A device too small for checkpoints beside the volume is formatted without them, not
/// refused (found by `flashfs torture --campaign`, whose block-device configuration asks for
/// checkpoints on every device: the ST10F280's torture geometry has no room for them).
#[test]
fn a_device_too_small_for_checkpoints_is_formatted_without_them() {
    let spec = flashfs_bench::torture::torture_device("st10f280")
        .unwrap()
        .spec;
    let flash::DeviceSpec::Nor(spec) = spec else {
        panic!("NOR preset")
    };
    let dev = flashfs::NorSegments::new(
        flash::NorSim::new(spec, flash::ImageMeta::new("t", 1)).unwrap(),
        512,
    )
    .unwrap();
    let config = flashfs_bench::torture::ftl_config(flashfs_bench::torture::Fault::PowerCut);
    let mut ftl = Ftl::format(dev, config).unwrap();
    assert!(!ftl.log().keeps_checkpoints());
    ftl.write(0, &[7; 512]).unwrap();
    let mut ftl = Ftl::mount(ftl.close().unwrap(), config).unwrap();
    let mut buf = [0; 512];
    ftl.read(0, &mut buf).unwrap();
    assert_eq!(buf, [7; 512]);
}

/// On segments much larger than the set's unit (here 1,023 slots against 64), the set
/// cannot shrink below four segments, one per head: half of it would hold 2,046 slots. A
/// checkpoint comes after as many slots as half the set asked for holds instead (32
/// segments of 64: 1,024), so a roll-forward reads as many tags as on small segments, and
/// a mount after a power cut between two checkpoints reads about that many pages.
#[test]
fn checkpoints_on_large_segments_come_after_as_many_slots_as_on_small_ones() {
    let spec = flash::NandSpec {
        blocks: 40,
        pages_per_block: 1024,
        ..common::nand_spec()
    };
    let dev =
        NandSegments::new(NandSim::new(spec, flash::ImageMeta::new("t", 1)).unwrap()).unwrap();
    assert_eq!(dev.geometry().slots, 1023);
    let config = FtlConfig {
        log: LogConfig {
            checkpoint_min_segments: 16,
            ..LogConfig::default()
        },
        ..FtlConfig::default()
    };
    let mut ftl = Ftl::format(dev, config).unwrap();
    assert!(ftl.log().keeps_checkpoints());
    let data = [0x5A; 512];
    let (mut last, mut since, mut widest) = (ftl.log().stats().checkpoints, 0u64, 0u64);
    for k in 0..5000 {
        ftl.write(k % ftl.sectors(), &data).unwrap();
        since += 1;
        let now = ftl.log().stats().checkpoints;
        if now != last {
            widest = widest.max(since);
            (last, since) = (now, 0);
        }
    }
    assert!(last >= 4, "{last} checkpoints");
    assert!(widest <= 1024, "{widest} writes between two checkpoints");
    // A power cut just before the next checkpoint would be due.
    ftl.flush().unwrap();
    let dev = ftl.into_device();
    let before = reads(&dev);
    let ftl = Ftl::mount(dev, config).unwrap();
    assert!(ftl.log().restored());
    let read = reads(ftl.log().device()) - before;
    assert!(read <= 1024 + 200, "{read} page reads to mount");
}
