//! The checkpoint anchors are wear-levelled: a root and a mark go to the anchors at every
//! checkpoint, so the two segments every header names would wear many times faster than
//! the log's. Once the anchor due for erasure has worn ahead of the least worn free segment,
//! the records move to two free segments and the named pair keeps only where they went
//! (SPEC.md §3.5). Mounts follow the move, after a close, after a power cut at any device
//! operation around it, and after damage that sends them to the scan.

mod common;

use common::{nand_checkpointed, nor_of, nor_spec};
use flash::NandSim;
use flash::NorSpec;
use flashfs::log::segment::SegState;
use flashfs::media::tag::TagState;
use flashfs::{BlockDevice, Ftl, FtlConfig, LogConfig, NandSegments, Segments};
use flashfs_bench::torture::{apply, read_all, versions, workload, Model, Op, SimSegments};

/// The block device's default settings with a wear spread of `spread` erases.
fn config(spread: u32) -> FtlConfig {
    FtlConfig {
        log: LogConfig {
            wear_spread: spread,
            checkpoint_min_segments: 0,
            ..LogConfig::default()
        },
        ..FtlConfig::default()
    }
}

/// `rounds` rounds of four writes (or trims) and a checkpoint.
fn rounds(sectors: u64, rounds: u64) -> Vec<Op> {
    (0..rounds)
        .flat_map(|r| {
            workload(1000 + r, sectors, 4)
                .into_iter()
                .chain([Op::Checkpoint])
        })
        .collect()
}

/// Formats `dev` and runs `n` [`rounds`], then flushes; the volume, the model of what it
/// holds, and every write's version.
fn checkpointed<D: SimSegments>(
    dev: D,
    config: FtlConfig,
    n: u64,
) -> (Ftl<D>, Model, Vec<Vec<u32>>) {
    let mut ftl = Ftl::format(dev, config).unwrap();
    let sectors = ftl.sectors();
    let ops = rounds(sectors, n);
    let vers = versions(&ops, sectors);
    let mut model = Model::new(sectors);
    for &op in &ops {
        model.issue(op);
        apply(&mut ftl, op).unwrap();
    }
    ftl.flush().unwrap();
    model.flushed();
    (ftl, model, vers)
}

fn check<D: SimSegments>(ftl: &mut Ftl<D>, model: &Model, vers: &[Vec<u32>], what: &str) {
    let read = read_all(ftl, vers).unwrap_or_else(|e| panic!("{what}: {e}"));
    model
        .check_after_cut(&read)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
}

/// The erase counts of the segments the headers name as anchors, and the highest of every
/// other segment.
fn wear<D: SimSegments>(ftl: &Ftl<D>) -> ([u32; 2], u32) {
    let named = ftl.log().volume().anchors.unwrap().map(u32::from);
    let segs = ftl.log().segments();
    let others = (0..segs.len() as u32)
        .filter(|s| !named.contains(s))
        .map(|s| segs[s as usize].erase_count)
        .max()
        .unwrap();
    (named.map(|s| segs[s as usize].erase_count), others)
}

#[test]
fn the_anchors_move_off_worn_segments_and_wear_no_faster_than_the_log() {
    // Without levelling (a spread of 0 turns it off) the named anchors take every record.
    let (still, ..) = checkpointed(nand_checkpointed(), config(0), 400);
    assert_eq!(still.log().stats().anchor_moves, 0);
    let (named_still, others_still) = wear(&still);
    let (mut ftl, model, vers) = checkpointed(nand_checkpointed(), config(4), 400);
    let moves = ftl.log().stats().anchor_moves;
    assert!(moves >= 4, "the anchors moved {moves} times");
    let counts: Vec<u32> = ftl.log().segments().iter().map(|s| s.erase_count).collect();
    let (least, most) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
    assert!(
        named_still[0] > 4 * others_still.max(1),
        "without levelling the anchors wore {named_still:?}, the rest {others_still} at most: \
         nothing to level"
    );
    // With it no segment wears like that: the named pair takes only the records saying
    // where the others went (one per move, and a move comes only once an anchor has worn
    // half the leveller's spread ahead), and each working pair moves on as it wears ahead.
    assert!(
        most * 3 < named_still[0],
        "erase counts from {least} to {most}, against {named_still:?} unlevelled"
    );
    // Mounts follow the move: after a power cut (roll-forward) and after a close.
    check(&mut ftl, &model, &vers, "before the remount");
    let dev = ftl.into_device();
    let mut ftl = Ftl::mount(dev, config(4)).unwrap();
    assert!(ftl.log().restored(), "the mount after a cut scanned");
    check(&mut ftl, &model, &vers, "after a cut");
    let mut ftl = Ftl::mount(ftl.close().unwrap(), config(4)).unwrap();
    assert!(ftl.log().restored(), "the mount after a close scanned");
    check(&mut ftl, &model, &vers, "after a close");
    // A segment the anchors left goes back to the log: some segment the headers do not
    // name took records once and holds none now.
    let named = ftl.log().volume().anchors.unwrap().map(u32::from);
    let anchors = ftl
        .log()
        .segments()
        .iter()
        .enumerate()
        .filter(|(i, s)| s.state == SegState::Anchor && !named.contains(&(*i as u32)))
        .count();
    assert_eq!(anchors, 2, "one working pair besides the named one");
}

/// The records moved, then the working pair's newest record decayed: the mount cannot trust
/// the record before it and scans; the scan puts the old working pair's segments back in
/// the pool, and checkpoints go on from the named pair.
#[test]
fn a_decayed_record_in_the_moved_anchors_sends_the_mount_to_the_scan() {
    let (ftl, model, vers) = checkpointed(nand_checkpointed(), config(4), 400);
    assert!(ftl.log().stats().anchor_moves > 0);
    let named = ftl.log().volume().anchors.unwrap().map(u32::from);
    let working: Vec<u32> = (0..ftl.log().segments().len() as u32)
        .filter(|&s| ftl.log().segments()[s as usize].state == SegState::Anchor)
        .filter(|s| !named.contains(s))
        .collect();
    let mut dev = ftl.into_device();
    // Both copies of the newest record of the working pair decayed beyond the ECC.
    let mut newest: Vec<(u64, u32, u32)> = Vec::new();
    for &seg in &working {
        for slot in 0..dev.geometry().slots {
            if let TagState::Valid(t) = dev.read_tag(seg, slot).unwrap() {
                newest.push((t.seq, seg, slot));
            }
        }
    }
    let top = newest.iter().map(|n| n.0).max().unwrap();
    for &(_, seg, slot) in newest.iter().filter(|n| n.0 == top) {
        assert!(dev.inject_bit_errors(seg, slot, 8));
    }
    let mut ftl = Ftl::mount(dev, config(4)).unwrap();
    assert!(!ftl.log().restored(), "mounted from the record before");
    check(&mut ftl, &model, &vers, "after the scan");
    // Back in the pool: the checkpoints after may take either again, as any free segment.
    let stray = working
        .iter()
        .filter(|&&s| ftl.log().segments()[s as usize].state == SegState::Anchor)
        .count();
    assert_eq!(stray, 0, "the old working pair stayed out of the pool");
    let mut ftl = Ftl::mount(ftl.close().unwrap(), config(4)).unwrap();
    assert!(ftl.log().restored(), "no checkpoint after the scan's close");
    check(&mut ftl, &model, &vers, "after the close");
}

/// Runs `ops` on a copy of `base` (which holds `history`) with the power cut at device
/// operation `k`; the device as the cut left it (`None` if the run ended first), the model,
/// and the anchors' moves of the run.
fn cut_at<D: SimSegments>(
    base: &D,
    config: FtlConfig,
    history: &[Op],
    ops: &[Op],
    k: u64,
    torn: bool,
) -> (Option<D>, Model, u64) {
    let mut ftl = Ftl::mount(base.clone(), config).unwrap();
    let mut model = Model::new(ftl.sectors());
    for &op in history {
        model.issue(op);
    }
    model.flushed();
    ftl.log_mut().device_mut().sim_mut().schedule_cut(k, torn);
    let mut cut = false;
    for &op in ops {
        model.issue(op);
        match apply(&mut ftl, op) {
            Ok(()) if op.is_barrier() => model.flushed(),
            Ok(()) => {}
            Err(flashfs::Error::Flash(flash::FlashError::PowerLoss)) => {
                cut = true;
                break;
            }
            Err(e) => panic!("{op:?}: {e}"),
        }
    }
    let moves = ftl.log().stats().anchor_moves;
    let mut dev = ftl.into_device();
    if !cut {
        return (None, model, moves);
    }
    dev.sim_mut().reboot();
    (Some(dev), model, moves)
}

/// Formats `dev` and wears its anchors ahead with [`rounds`], then cuts the power at every
/// device operation of more rounds, which move the anchors: each mount shows a state the
/// model allows, and that state survives a close and a mount from its checkpoint.
fn every_cut_while_anchors_move<D: SimSegments>(dev: D, config: FtlConfig, n: u64) {
    let (ftl, ..) = checkpointed(dev, config, 120);
    let sectors = ftl.sectors();
    let base = ftl.close().unwrap();
    let history = rounds(sectors, 120);
    let ops: Vec<Op> = (0..n)
        .flat_map(|r| {
            workload(7000 + r, sectors, 3)
                .into_iter()
                .chain([Op::Checkpoint])
        })
        .collect();
    let mut all = history.clone();
    all.extend(&ops);
    let vers = versions(&all, sectors);
    let (_, _, moves) = cut_at(&base, config, &history, &ops, 1 << 40, false);
    assert!(moves > 0, "the run moved no anchor");
    let mut cuts = 0;
    for k in 1.. {
        let mut any = false;
        for torn in [false, true] {
            let (Some(dev), mut model, _) = cut_at(&base, config, &history, &ops, k, torn) else {
                continue;
            };
            any = true;
            let what = format!("cut {k} (torn {torn})");
            let mut ftl =
                Ftl::mount(dev, config).unwrap_or_else(|e| panic!("mount after {what}: {e}"));
            let read = read_all(&mut ftl, &vers).unwrap_or_else(|e| panic!("{what}: {e}"));
            model
                .check_after_cut(&read)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            model.settle(&read);
            let mut ftl = Ftl::mount(ftl.close().unwrap(), config).unwrap();
            assert!(
                ftl.log().restored(),
                "{what}: no checkpoint after the close"
            );
            let again = read_all(&mut ftl, &vers).unwrap();
            assert_eq!(again, read, "{what}: the checkpoint changed what it holds");
            cuts += 1;
        }
        if !any {
            break;
        }
    }
    assert!(cuts > 100, "only {cuts} cuts");
}

#[test]
fn power_cuts_while_the_anchors_move_on_nand_lose_nothing() {
    every_cut_while_anchors_move::<NandSegments<NandSim>>(nand_checkpointed(), config(2), 8);
}

#[test]
fn power_cuts_while_the_anchors_move_on_nor_lose_nothing() {
    let spec = NorSpec {
        units: 64,
        ..nor_spec(true)
    };
    every_cut_while_anchors_move(nor_of(spec), config(2), 14);
}
