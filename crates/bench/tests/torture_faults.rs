//! The torture's fault kinds: each runs clean on the block device where it should, counts
//! media damage where the medium is damaged, and catches a target that mishandles it.

use flash::{ImageMeta, NandSim};
use flashfs::{Ftl, FtlConfig, NandSegments};
use flashfs_bench::fswork::FsWorkload;
use flashfs_bench::torture::{
    bad_block_device, run, run_case, torture_device, Case, CaseResult, Failure, Fault, FtlTarget,
    Model, Op, SimSegments, Target, TargetKind, TortureOptions, Workload,
};

type Nand = NandSegments<NandSim>;

/// The block device formatted on the torture geometry of nand-128m.
fn formatted_nand() -> Nand {
    let dev = torture_device("nand-128m").unwrap();
    let flash::DeviceSpec::Nand(spec) = dev.spec else {
        panic!("nand-128m is NAND")
    };
    let sim = NandSim::new(spec, ImageMeta::new("nand-128m", 1)).unwrap();
    Ftl::format(NandSegments::new(sim).unwrap(), FtlConfig::default())
        .unwrap()
        .into_device()
}

/// Runs `n` cases of `fault` on targets `make` builds, with the database workload.
fn cases_of<T: Target<Op = Op>>(
    make: &dyn Fn() -> T,
    fault: Fault,
    n: u64,
    ops: usize,
) -> Vec<CaseResult> {
    cases_with(make, fault, Workload::Database, n, ops)
}

/// Runs `n` cases of `fault` and `workload` on targets `make` builds.
fn cases_with<T: Target<Op = Op>>(
    make: &dyn Fn() -> T,
    fault: Fault,
    workload: Workload,
    n: u64,
    ops: usize,
) -> Vec<CaseResult> {
    let sectors = FtlTarget::mount(formatted_nand(), FtlConfig::default())
        .unwrap()
        .sectors();
    (0..n)
        .map(|i| {
            let ops = workload.ops(i, sectors, 512, ops);
            let case = Case {
                seed: i,
                cut: 20 + i * 37 % 300,
                torn: i % 2 == 1,
                fault,
            };
            run_case(make(), &ops, case)
        })
        .collect()
}

fn violations(results: &[CaseResult]) -> Vec<String> {
    results.iter().filter_map(|r| r.violation.clone()).collect()
}

/// Forwards everything to the block device, with a few things changed.
struct Wrapped {
    inner: FtlTarget<Nand>,
    /// Arms this fault instead of the one asked for.
    arm_instead: Option<Fault>,
    /// Reports no typed errors: media damage comes back as plain errors.
    untyped: bool,
    /// Trims every sector after a mount that follows a cut during a mount.
    relapse: bool,
    mount_was_cut: bool,
}

impl Wrapped {
    fn new() -> Self {
        Wrapped {
            inner: FtlTarget::mount(formatted_nand(), FtlConfig::default()).unwrap(),
            arm_instead: None,
            untyped: false,
            relapse: false,
            mount_was_cut: false,
        }
    }

    fn typed(&self, r: Result<(), Failure>) -> Result<(), Failure> {
        match r {
            Err(Failure::Media(e)) if self.untyped => Err(Failure::Error(e)),
            r => r,
        }
    }
}

impl Target for Wrapped {
    type Op = Op;
    type Model = Model;
    fn kind(&self) -> &'static str {
        "wrapped"
    }
    fn model(&self) -> Model {
        // A model told nothing about the fault armed.
        Model::new(self.inner.sectors())
    }
    fn device_ops(&self) -> u64 {
        self.inner.device_ops()
    }
    fn schedule_cut(&mut self, ops: u64, torn: bool) {
        self.inner.schedule_cut(ops, torn)
    }
    fn cancel_cut(&mut self) {
        self.inner.cancel_cut()
    }
    fn powered(&self) -> bool {
        self.inner.powered()
    }
    fn apply(&mut self, op: Op) -> Result<(), Failure> {
        let r = self.inner.apply(op);
        self.typed(r)
    }
    fn remount(&mut self) -> Result<(), Failure> {
        let r = self.inner.remount();
        let r = self.typed(r);
        if r.is_ok() && self.relapse && self.mount_was_cut {
            self.mount_was_cut = false;
            let n = self.inner.sectors();
            self.inner.apply(Op::Trim {
                sector: 0,
                count: n,
            })?;
        }
        r
    }
    fn observe(&mut self, model: &Model) -> Result<(Vec<Option<u32>>, u64), String> {
        self.inner.observe(model)
    }
    fn more_ops(&self, round: u32) -> Vec<Op> {
        self.inner.more_ops(round)
    }
    fn arm(&mut self, fault: Fault, seed: u64, ops: usize) -> bool {
        self.inner.arm(self.arm_instead.unwrap_or(fault), seed, ops)
    }
    fn damaged(&mut self) -> Vec<u64> {
        // Swallowed: the model never hears which sectors the damage touched.
        self.inner.damaged();
        Vec::new()
    }
    fn remount_cut(&mut self, at: u64, torn: bool) -> Result<(), Failure> {
        let r = self.inner.remount_cut(at, torn);
        if r == Err(Failure::PowerLoss) {
            self.mount_was_cut = true;
        }
        r
    }
    fn mount_accesses(&self) -> u64 {
        self.inner.mount_accesses()
    }
}

fn honest() -> FtlTarget<Nand> {
    FtlTarget::mount(formatted_nand(), FtlConfig::default()).unwrap()
}

#[test]
fn every_fault_but_silent_failures_runs_clean() {
    let opts = TortureOptions {
        presets: vec!["nand-128m".into(), "w25q64jv".into()],
        targets: vec![TargetKind::Ftl],
        faults: Fault::ALL
            .into_iter()
            .filter(|&f| f != Fault::Silent)
            .collect(),
        workloads: vec![Workload::Mixed],
        cuts: 6,
        ops: 100,
        ..TortureOptions::default()
    };
    let outcome = run(&opts, &mut |_, _, _| {}).unwrap();
    assert!(outcome.violations.is_empty(), "{:?}", outcome.violations);
    // NOR has no ECC and no factory bad blocks: those kinds are skipped there, listed.
    let skipped: Vec<_> = outcome.skipped.iter().map(|s| s.fault).collect();
    assert_eq!(
        skipped,
        [Fault::EccWithin, Fault::EccBeyond, Fault::BadBlocks]
    );
    assert_eq!(outcome.reports.len(), 7 + 4);
    for r in &outcome.reports {
        assert_eq!(r.cases, 6, "{r:?}");
        assert!(r.cuts >= 6 && r.remounts >= 6, "{r:?}");
        if !r.kind.damages_media() {
            assert_eq!(r.media_damage(), 0, "{r:?}");
        }
    }
    let mount_cut = |p: &str| {
        outcome
            .reports
            .iter()
            .find(|r| r.preset == p && r.kind == Fault::MountCut)
            .unwrap()
            .cuts
    };
    // A third cut in most mount-cut cases.
    assert!(mount_cut("nand-128m") > 12, "{:?}", outcome.reports);
}

#[test]
fn errors_beyond_the_ecc_are_media_damage_and_a_model_not_told_catches_them() {
    let results = cases_of(&honest, Fault::EccBeyond, 16, 120);
    assert!(
        violations(&results).is_empty(),
        "{:?}",
        violations(&results)
    );
    let damage: u64 = results.iter().map(|r| r.media_errors + r.rolled_back).sum();
    assert!(damage > 0, "no damage showed in 16 cases: {results:?}");
    // The same damage, the model neither told which sectors it hit nor that reads may fail.
    let blind = || Wrapped::new();
    let caught = violations(&cases_of(&blind, Fault::EccBeyond, 16, 120));
    assert!(!caught.is_empty(), "damage went unnoticed");
    // Damage beyond the ECC labelled as within it fails the stricter check too.
    let mislabelled = || Wrapped {
        arm_instead: Some(Fault::EccBeyond),
        ..Wrapped::new()
    };
    let caught = violations(&cases_of(&mislabelled, Fault::EccWithin, 16, 120));
    assert!(
        !caught.is_empty(),
        "errors beyond the ECC passed for corrected ones"
    );
}

#[test]
fn errors_within_the_ecc_are_invisible() {
    let results = cases_of(&honest, Fault::EccWithin, 12, 120);
    assert!(
        violations(&results).is_empty(),
        "{:?}",
        violations(&results)
    );
    for r in &results {
        assert_eq!((r.media_errors, r.rolled_back, r.typed_errors), (0, 0, 0));
    }
    // The errors are there: a device armed the same way corrects bits on its reads.
    let mut t = honest();
    assert!(t.arm(Fault::EccWithin, 5, 40));
    let sectors = t.sectors();
    let mut model = t.model();
    for op in Workload::Database.ops(5, sectors, 512, 400) {
        model.issue(op);
        t.apply(op).unwrap();
    }
    let (seen, _) = t.observe(&model).unwrap();
    model.check_after_cut(&seen).unwrap();
    let ftl = t.ftl_mut().unwrap();
    let corrected = ftl.log().device().inner().sim().stats().corrected_bits;
    assert!(corrected > 0, "no stuck bit was ever corrected");
}

#[test]
fn a_cut_during_the_recovery_mount_is_survived_and_a_relapse_caught() {
    let results = cases_of(&honest, Fault::MountCut, 12, 120);
    assert!(
        violations(&results).is_empty(),
        "{:?}",
        violations(&results)
    );
    assert!(
        results.iter().any(|r| r.cuts == 3),
        "no case cut three times: {results:?}"
    );
    // A device that loses everything when a mount is interrupted.
    let relapsing = || Wrapped {
        relapse: true,
        ..Wrapped::new()
    };
    let caught = violations(&cases_of(&relapsing, Fault::MountCut, 12, 120));
    assert!(
        !caught.is_empty(),
        "the loss after a cut mount went unnoticed"
    );
}

#[test]
fn worn_out_blocks_fail_with_typed_errors_only() {
    let w = Workload::KawaguchiRandom;
    let results = cases_with(&honest, Fault::WearOut, w, 12, 200);
    assert!(
        violations(&results).is_empty(),
        "{:?}",
        violations(&results)
    );
    let typed: u64 = results
        .iter()
        .map(|r| r.typed_errors + r.mount_errors)
        .sum();
    // The same run through a target that does not type its errors breaks the checks, if
    // any error surfaced at all.
    let untyped = || Wrapped {
        untyped: true,
        ..Wrapped::new()
    };
    let caught = violations(&cases_with(&untyped, Fault::WearOut, w, 12, 200));
    assert!(typed > 0, "no block wore out in 12 cases");
    assert!(!caught.is_empty(), "untyped errors passed: {typed} typed");
}

#[test]
fn silent_failures_do_not_pass_unnoticed() {
    // The block device does not read back its programs: a program that reports success and
    // does nothing loses data, which the checks report (or it surfaces as a typed error).
    let results = cases_of(&honest, Fault::Silent, 12, 200);
    let noticed = results
        .iter()
        .filter(|r| r.violation.is_some() || r.typed_errors + r.mount_errors > 0)
        .count();
    assert!(noticed > 0, "{results:?}");
}

#[test]
fn factory_bad_blocks_are_never_touched() {
    let dev = torture_device("nand-128m").unwrap();
    let (base, bad) = bad_block_device(&dev, 3).unwrap();
    assert!(!bad.is_empty() && !bad.contains(&0), "{bad:?}");
    // The same seed, the same part.
    assert_eq!(bad_block_device(&dev, 3).unwrap().1, bad);
    let mut t = FtlTarget::mount(base.clone(), FtlConfig::default()).unwrap();
    assert!(t.arm(Fault::BadBlocks, 1, 300));
    for op in Workload::Mixed.ops(3, t.sectors(), 512, 300) {
        t.apply(op).unwrap();
    }
    let counts = t
        .ftl_mut()
        .unwrap()
        .log()
        .device()
        .inner()
        .sim()
        .erase_counts();
    for b in &bad {
        assert_eq!(counts[*b as usize], 0, "bad block {b} erased");
    }
    assert!(counts.iter().filter(|&&c| c > 1).count() > 4, "{counts:?}");
    // And the torture of that part passes.
    let results: Vec<_> = (0..6)
        .map(|i| {
            let t = FtlTarget::mount(base.clone(), FtlConfig::default()).unwrap();
            let ops = Workload::Mixed.ops(i, t.sectors(), 512, 150);
            let case = Case {
                seed: i,
                cut: 30 * i + 7,
                torn: i % 2 == 0,
                fault: Fault::BadBlocks,
            };
            run_case(t, &ops, case)
        })
        .collect();
    assert!(
        violations(&results).is_empty(),
        "{:?}",
        violations(&results)
    );
}

/// Replays one case of the block device's torture, as `flashfs torture --preset P --target
/// ftl --fault F --workload W --seed S --cut K [--torn] --no-idle` does, and asserts it runs
/// clean. The cases here were found before the workloads had idle steps: with them, a cut
/// after the first idle step falls elsewhere.
fn replay(preset: &str, fault: Fault, workload: Workload, seed: u64, cut: u64, torn: bool) {
    replay_case(TortureOptions {
        idle: false,
        ..ftl_case(preset, fault, workload, seed, cut, torn)
    });
}

/// The options of one case of the torture on `target`, its workload left to the caller:
/// `flashfs torture --preset P --target T --fault F --seed S --cut K [--torn]`.
fn case(
    preset: &str,
    target: TargetKind,
    fault: Fault,
    seed: u64,
    cut: u64,
    torn: bool,
) -> TortureOptions {
    TortureOptions {
        presets: vec![preset.into()],
        targets: vec![target],
        faults: vec![fault],
        cuts: 1,
        seed,
        cut: Some(cut),
        torn,
        ..TortureOptions::default()
    }
}

/// One case of the block device's torture, running `workload`, as the campaign ran it
/// (idle steps included): `flashfs torture --preset P --target ftl --fault F --workload W
/// --seed S --cut K [--torn]`.
fn ftl_case(
    preset: &str,
    fault: Fault,
    workload: Workload,
    seed: u64,
    cut: u64,
    torn: bool,
) -> TortureOptions {
    TortureOptions {
        workloads: vec![workload],
        ..case(preset, TargetKind::Ftl, fault, seed, cut, torn)
    }
}

/// One case of the file system's torture, running `workload`.
fn fs_case(
    preset: &str,
    fault: Fault,
    workload: FsWorkload,
    seed: u64,
    cut: u64,
    torn: bool,
) -> TortureOptions {
    TortureOptions {
        fs_workloads: vec![workload],
        ..case(preset, TargetKind::Fs, fault, seed, cut, torn)
    }
}

/// Runs the one case `opts` names and fails on any violation.
fn replay_case(opts: TortureOptions) {
    let outcome = run(&opts, &mut |_, _, _| {}).unwrap();
    assert_eq!(outcome.reports[0].cases, 1);
    assert!(
        outcome.violations.is_empty(),
        "{:?} seed {} cut {:?}: {:?}",
        opts.presets,
        opts.seed,
        opts.cut,
        outcome.violations
    );
}

/// On MLC NAND, the survivors the cleaner copies out of a block whose program failed become
/// the only copies when that block is retired, as when a block is erased: the cleaner's head
/// must not leave them in an LSB page whose MSB partner a torn program could still spoil.
/// These cases (found by a soak of the `silent` kind) lost flushed sectors before it did.
#[test]
fn mlc_survivors_of_a_retired_block_are_safe_from_a_torn_program() {
    for (workload, seed, cut) in [
        (Workload::AppendLog, 21971, 304),
        (Workload::AppendLog, 22371, 328),
        (Workload::Database, 22234, 160),
        (Workload::KawaguchiRandom, 22091, 185),
    ] {
        replay("mlc-flexfs", Fault::Silent, workload, seed, cut, true);
    }
}

/// A copy the cleaner could not make (here no segment left to open after the one it
/// opened failed its erase, silently, and was retired) leaves the slot live in its victim:
/// the next step starts with it again. It went on with the next slot, so the victim was
/// erased without the sector's only version (found by the million-cut campaign: a flushed
/// sector read as never written after the remount; and by a soak of the `silent` kind on
/// this part: the segment's live count left wrong).
#[test]
fn a_copy_the_cleaner_could_not_make_is_tried_again() {
    for (workload, seed, cut) in [
        (Workload::Mixed, 568, 1176),
        (Workload::AppendLog, 703, 431),
    ] {
        replay_case(ftl_case(
            "mlc-flexfs",
            Fault::Silent,
            workload,
            seed,
            cut,
            true,
        ));
    }
}

/// A checkpoint's directory page on a NAND part whose compact tags keep 24 bits of the key
/// must read back as a directory page, or the cleaner drops it as dead and the next checkpoint
/// kills whatever took its slot (found by flashfs torture: this case lost a flushed sector
/// under wear-out once the cleaner chose its victims by age to the millisecond).
#[test]
fn directory_pages_survive_the_cleaner_on_compact_tags() {
    replay(
        "nand-128m",
        Fault::WearOut,
        Workload::KawaguchiRandom,
        12,
        93,
        true,
    );
}

/// A record that does not read in the anchor started after the newest readable one (its
/// header is newer) may be a newer root: the mount must scan, not roll forward from the
/// older root, which would miss the segments the newer one's set opened (found by flashfs
/// torture on MLC NAND under ECC failures: a flushed sector came back at an old version).
#[test]
fn an_unreadable_record_in_the_newer_anchor_sends_the_mount_to_a_scan() {
    for (seed, cut, torn) in [(21, 404, false), (312, 189, true)] {
        replay(
            "mlc-flexfs",
            Fault::EccBeyond,
            Workload::AppendLog,
            seed,
            cut,
            torn,
        );
    }
}

/// Anchors that fail while a checkpoint is written (here a mark that would not program)
/// stop checkpoints; the map pages that checkpoint wrote afterwards are in none, so they
/// must stay changed in RAM. Taken as written, one left the cache and came back from the
/// last checkpoint the log kept, naming a slot since reused (found by flashfs torture: a
/// flushed sector read as never written).
#[test]
fn map_pages_stay_in_ram_when_the_anchors_fail_during_a_checkpoint() {
    replay(
        "nand-128m",
        Fault::WearOut,
        Workload::KawaguchiRandom,
        106,
        928,
        true,
    );
}

/// After a mount that could not trust its anchors because the other anchor's header or
/// records do not read, the first record erases the anchor of the newest readable record
/// before anything else: rotating straight away erased the unreadable (newer) root, and a
/// cut before the mark was down left the older root trusted (found by flashfs torture under
/// damage at rest: a flushed sector came back at an old version).
#[test]
fn the_record_after_an_untrusted_mount_keeps_the_unreadable_anchor() {
    replay(
        "mlc-flexfs",
        Fault::AtRest,
        Workload::AppendLog,
        770,
        595,
        false,
    );
}

/// A read found a sector damaged on a full volume: its loss record met `NoSpace` (the cleaner
/// could make no more room) and stayed in RAM, so after the next power cut the sector read as
/// never written. A loss record now takes what its head's open segment has left (found by
/// flashfs torture on st10f280 under damage at rest).
#[test]
fn a_loss_record_on_a_full_volume_takes_its_heads_room() {
    replay(
        "st10f280",
        Fault::AtRest,
        Workload::Database,
        500039,
        154,
        false,
    );
}

/// A trim record the checkpoint names, moved by the cleaner after it and its old segment
/// erased, is the record's copy rolled forward, not a record dropped since: the mount from
/// the checkpoint dropped it, and a copy of the version it hid came back (found by the
/// million-cut campaign on 28f008sa under silent failures).
#[test]
fn a_record_moved_after_the_checkpoint_and_its_old_place_erased_still_hides() {
    replay("28f008sa", Fault::Silent, Workload::Mixed, 783, 1046, false);
}

/// The newest anchor record read as erased after damage at rest, so the root before it
/// looked newest; the mount rolled forward through that root's set, blind to what was
/// written since in the newer root's set, and a sector written and flushed read as never
/// written. Each anchor record is now written twice (found by the million-cut campaign on
/// nand-1g under damage at rest).
#[test]
fn a_newest_anchor_record_read_as_erased_leaves_its_twin() {
    replay(
        "nand-1g",
        Fault::AtRest,
        Workload::KawaguchiRandom,
        810,
        368,
        false,
    );
}

/// The newer anchor's header read as erased after damage at rest, which looked like a turn
/// begun but not yet given its header, so the older anchor's newest root looked current and
/// a flushed sector came back at an old version. Such an anchor now sends the mount to the
/// scan (found by flashfs torture on nand-128m under damage at rest).
#[test]
fn an_anchor_header_read_as_erased_over_records_is_damage() {
    replay(
        "nand-128m",
        Fault::AtRest,
        Workload::AppendLog,
        5859,
        501,
        false,
    );
}

/// A tag torn by a power cut during the recovery passed its 16-bit check by chance, with a
/// sequence number of 10¹²: the log resumed from it, and the next mount met a sector beyond
/// the device. A mount now takes for torn any sequence number no slot can have (found by the
/// 200,000-cut campaign on w25q64jv).
#[test]
fn a_torn_tag_with_an_impossible_sequence_number_is_torn() {
    replay(
        "w25q64jv",
        Fault::MountCut,
        Workload::KawaguchiRandom,
        25,
        8011,
        false,
    );
}

/// Small writes in the journal (SPEC.md §8.5b, operation 13) take new blocks when replayed.
/// Replayed in order with the record operations, one took a block that a later entry named
/// (a record block the run had written after the checkpoint, free in it), and the mount
/// refused the volume. These cases of the record workload, which mixes record files and
/// small writes, broke so before the writes were replayed after every other operation.
#[test]
fn replayed_small_writes_take_no_block_a_record_entry_names() {
    for (preset, seed, cut, torn) in [
        ("w25q64jv", 44, 237, false),
        ("w25q64jv", 82, 54, true),
        ("28f008sa", 65, 154, true),
        ("w25q64jv", 31, 68, true),
    ] {
        replay_case(TortureOptions {
            idle: false,
            ..fs_case(
                preset,
                Fault::PowerCut,
                FsWorkload::Records,
                seed,
                cut,
                torn,
            )
        });
    }
}

/// A NAND journal asked for at format: damage took the newest superblock, the mount took the
/// one before, and the next checkpoint took the lost one's number, so the lost epoch's
/// journal blocks, back after the next cut, passed for its own entries (a file grew by 505
/// bytes). Found by a 400,000-cut campaign while the NAND journal was on by default.
#[test]
fn a_lost_checkpoints_journal_blocks_never_pass_for_a_later_ones() {
    replay_case(TortureOptions {
        journal_blocks: Some(16),
        idle: false,
        ..fs_case(
            "w25n01gv",
            Fault::EccBeyond,
            FsWorkload::SmallWrites,
            920219,
            55,
            false,
        )
    });
}

/// A counters record whose tag decayed at rest was reported lost to the block device by its
/// address alone, which it looked for among the sectors only: the record stayed named, its
/// segment was erased and written again, and the next mount counted its slot twice (as the
/// counters record and as the sector now there). Found when checkpoints began to carry
/// the live counts, by the check of them after every remount.
#[test]
fn a_counters_record_lost_with_its_tag_is_no_longer_named() {
    replay("w25n01gv", Fault::AtRest, Workload::Mixed, 5107, 477, true);
}

/// A checkpoint's map page damaged at rest (or beyond the ECC) fails every sector it maps
/// with EIO, never written ones too, until the next mount scans and rebuilds the map from
/// the slots: then each shows what it held again. The model took each EIO for a recorded
/// loss and called what the scan found — a sector never written, and one at its only
/// version — a violation (found by the million-cut and 200,000-cut campaigns).
#[test]
fn a_sector_failed_by_a_lost_map_page_shows_what_it_held_after_the_scan() {
    replay(
        "nand-128m",
        Fault::EccBeyond,
        Workload::Database,
        101,
        356,
        false,
    );
    replay(
        "nand-128m",
        Fault::AtRest,
        Workload::Database,
        3100881,
        361,
        false,
    );
}

/// Damage at rest made the header of the cleaner's open segment unreadable; the cleaner
/// went on copying survivors into it and erased their sources, and the next mount, which
/// trusts no slot under a header it cannot read, lost them. The sectors written into such
/// a segment by the operation before a remount (here one that failed with ENOSPC) are
/// damage too, reported at the remount (found by the million-cut campaign on w25n01gv).
#[test]
fn slots_written_into_a_segment_whose_header_decayed_are_damage_up_to_the_remount() {
    replay(
        "w25n01gv",
        Fault::AtRest,
        Workload::AppendLog,
        3100376,
        364,
        false,
    );
}

/// A trim record with nothing left to hide dropped both its copies when the cleaner met
/// one, and killed the other copy's slot in another segment at once: after a power cut the
/// mount counted that segment's live slots wrong (found by flashfs torture on w25n01gv
/// under silent failures, on log format 12). Each copy is now let go when its own segment
/// is cleaned.
#[test]
fn a_released_trim_record_lets_go_of_each_copy_with_its_own_segment() {
    replay_case(ftl_case(
        "w25n01gv",
        Fault::Silent,
        Workload::Mixed,
        89,
        553,
        false,
    ));
}

/// A checkpoint page whose tag and data no longer read (damage) is known to the cleaner by
/// its address: it was left in the checkpoint's pages (a directory page in its list), the
/// segment was erased and written again, and the next checkpoint killed the slot a second
/// time, now another sector's: the log counted that segment's live slots wrong (found by
/// the million-cut campaign on log format 12 on the MLC part: a body page under ECC
/// failures, a directory page under damage at rest).
#[test]
fn a_lost_checkpoint_page_leaves_the_checkpoint_before_its_slot_is_reused() {
    for (fault, seed, cut) in [(Fault::EccBeyond, 328, 329), (Fault::AtRest, 702, 542)] {
        replay_case(ftl_case(
            "mlc-flexfs",
            fault,
            Workload::Mixed,
            seed,
            cut,
            true,
        ));
    }
}

/// A step of the sweep (the look for data of free blocks after a cut, SPEC.md §8.5 step 4)
/// follows each commit, the mount's own included: a power cut during its map-page read was
/// taken for damage and dropped, and the mount returned as if whole on a device without
/// power (found by flashfs torture on the Kawaguchi part, cut again inside the mount). Only
/// a page that does not read ends the sweep quietly now; any other error is the caller's.
#[test]
fn a_cut_during_a_step_of_the_sweep_fails_the_mount() {
    replay_case(fs_case(
        "28f008sa",
        Fault::MountCut,
        FsWorkload::SmallWrites,
        1400,
        391,
        true,
    ));
}
