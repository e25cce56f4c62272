//! The power-loss torture of a volume on two devices (NVRAM beside NAND, `nand-128m+fram-8m`):
//! one power supply for both parts, cuts falling on either, the metadata kept on the NVRAM
//! under the harness, and every fault kind on both targets.

use flash::Simulated;
use flashfs::media::tag::{Kind, Tag};
use flashfs::media::Tier;
use flashfs::{Ftl, Segments};
use flashfs_bench::fswork::FsWorkload;
use flashfs_bench::torture::{
    fs_torture_device, ftl_config, hybrid_part, run, torture_device, Cuts, Fault, FtlTarget,
    Hybrid, Interruptible, SimSegments, Target, TargetKind, TortureOptions, Workload, ALL_PRESETS,
    DEFAULT_PRESETS, HYBRID_PRESETS,
};

const HYBRID: &str = "nand-128m+fram-8m";

/// The unformatted volume of the hybrid preset's torture device.
fn hybrid() -> Hybrid {
    hybrid_part(&torture_device(HYBRID).unwrap(), 1).unwrap()
}

/// Mutating operations of each part: the NVRAM's, the flash's.
fn part_ops(d: &Hybrid) -> (u64, u64) {
    (d.fast().flash().nvram().ops(), d.bulk().flash().ops())
}

/// An operation on one segment of the volume.
#[derive(Debug, Clone, Copy)]
enum Step {
    Erase(u32),
    Write(u32, u32),
    Sync,
}

/// A few operations on segments of both parts, in turn: erases (an NVRAM segment's erase is
/// many writes, a NAND segment's two block erases), slot writes (on NVRAM, data and then
/// its entry) and a sync.
fn steps(split: u32) -> Vec<Step> {
    let (nvram, nand) = (2, split + 1);
    let mut v = vec![Step::Erase(nvram), Step::Erase(nand)];
    for slot in 0..3 {
        v.extend([Step::Write(nvram, slot), Step::Write(nand, slot)]);
    }
    v.extend([Step::Erase(nand), Step::Write(nvram, 3), Step::Sync]);
    v
}

fn apply(d: &mut Interruptible<Hybrid>, step: Step) -> flashfs::Result<()> {
    let data = vec![0x5A; d.geometry().slot_size as usize];
    match step {
        Step::Erase(seg) => d.erase(seg, false),
        Step::Write(seg, slot) => {
            let tag = Tag {
                key: seg * 100 + slot,
                seq: u64::from(slot) + 1,
                kind: Kind::Sector,
                copy: false,
            };
            d.write_slot(seg, slot, &tag, &data)
        }
        Step::Sync => d.sync(),
    }
}

/// A cut scheduled after k mutating operations counts those of both parts together and falls
/// on the next one, on whichever part makes it, torn or not, and takes the power of both; a
/// reboot brings both back.
#[test]
fn one_supply_cuts_at_the_operation_of_whichever_part_makes_it() {
    let base = hybrid();
    let steps = steps(base.fast_segments());
    // Which part makes each operation: a step is one access, which drives one part.
    let mut on_nvram = Vec::new();
    let mut d = Interruptible::new(base.clone(), Cuts::new());
    for &step in &steps {
        let before = part_ops(d.inner());
        apply(&mut d, step).unwrap();
        let after = part_ops(d.inner());
        assert!(
            after.0 == before.0 || after.1 == before.1,
            "{step:?} drove both parts"
        );
        on_nvram.extend((before.0..after.0).map(|_| true));
        on_nvram.extend((before.1..after.1).map(|_| false));
    }
    let n = on_nvram.len() as u64;
    assert_eq!(n, d.device_ops());
    assert!(on_nvram.contains(&true) && on_nvram.contains(&false));
    for k in 0..n {
        for torn in [false, true] {
            let cuts = Cuts::new();
            let mut d = Interruptible::new(base.clone(), cuts.clone());
            d.schedule_cut(k, torn);
            let r = steps.iter().try_for_each(|&s| apply(&mut d, s));
            let case = format!("cut {k} torn {torn}");
            assert!(
                matches!(r, Err(flashfs::Error::Flash(flash::FlashError::PowerLoss))),
                "{case}: {r:?}"
            );
            // Clean: k operations made; torn: the (k+1)-th too, half done.
            assert_eq!(d.device_ops(), k + u64::from(torn), "{case}");
            assert_eq!(cuts.on_nvram(), on_nvram[k as usize], "{case}");
            for s in d.inner().sims() {
                assert!(!s.is_powered(), "{case}: a part kept its power");
            }
            // Accesses after the cut fail and leave where it fell as it was.
            let nand = d.inner().fast_segments() + 1;
            assert!(d.read_header(nand).is_err() && d.read_header(2).is_err());
            assert_eq!(cuts.on_nvram(), on_nvram[k as usize], "{case}");
            d.reboot();
            assert!(d.powered(), "{case}: a reboot powers both parts");
            // The cut is spent: the rest runs.
            let made = d.device_ops();
            d.cancel_cut();
            apply(&mut d, Step::Sync).unwrap();
            assert_eq!(d.device_ops(), made, "{case}");
        }
    }
}

/// The hybrid preset is run by default and by the campaign; its torture device has the NAND
/// of nand-128m's, and an NVRAM of several segments beyond the two anchors, for both
/// targets; a pair the torture does not know is refused.
#[test]
fn the_hybrid_preset_is_run_on_a_small_nand_and_nvram() {
    assert!(HYBRID_PRESETS.contains(&HYBRID));
    assert!(ALL_PRESETS.contains(&HYBRID) && DEFAULT_PRESETS.contains(&HYBRID));
    let nand = torture_device("nand-128m").unwrap();
    for dev in [
        torture_device(HYBRID).unwrap(),
        fs_torture_device(HYBRID).unwrap(),
    ] {
        assert_eq!(dev.preset, HYBRID);
        assert_eq!(dev.spec, nand.spec, "{dev:?}");
        assert_eq!(dev.nand_blocks_per_segment, nand.nand_blocks_per_segment);
        let h = hybrid_part(&dev, 1).unwrap();
        assert!(h.fast_segments() >= 6, "{dev:?}");
        assert!(
            dev.geometry().contains("beside NVRAM"),
            "{}",
            dev.geometry()
        );
    }
    assert!(torture_device("nand-1g+fram-8m").is_err());
    assert!(torture_device("fram-8m+nand-128m").is_err());
}

/// Under the harness (the wrapper that cuts the power) the volume still has its two tiers:
/// a mount after a close reads no NAND, the NVRAM takes the metadata and its segments are
/// cleaned and erased again; silent failures are set on both parts, wear-out's timebombs
/// on the NAND only.
#[test]
fn the_hybrid_volume_keeps_its_tiers_and_faults_under_the_harness() {
    let config = ftl_config(Fault::PowerCut);
    let base = Ftl::format(hybrid(), config).unwrap().close().unwrap();
    let nand_reads = |d: &Hybrid| d.bulk().flash().stats().reads;
    let before = nand_reads(&base);
    let mut t = FtlTarget::mount(base.clone(), config).unwrap();
    // A closed volume's mount trusts the close's root: it reads the NVRAM only.
    let dev = t.ftl_mut().unwrap().log().device().inner();
    assert_eq!(nand_reads(dev), before, "the mount read the NAND");
    for op in Workload::KawaguchiRandom.ops(1, t.sectors(), t.sector_size(), 200) {
        t.apply(op).unwrap();
    }
    let log = t.ftl_mut().unwrap().log();
    let dev = log.device();
    assert!(dev.is_tiered());
    let fast: Vec<usize> = (0..log.geometry().segments as usize)
        .filter(|&s| dev.tier(s as u32) == Tier::Fast)
        .collect();
    assert_eq!(fast.len() as u32, dev.inner().fast_segments());
    let segs = log.segments();
    assert!(
        fast.iter().any(|&s| segs[s].live() > 0),
        "no metadata on the NVRAM"
    );
    assert!(
        fast.iter().any(|&s| segs[s].erase_count >= 3),
        "no NVRAM segment cleaned and erased again"
    );
    let nvram_bytes = dev.inner().fast().flash().nvram().stats().bytes_programmed;
    assert!(nvram_bytes > 0);

    for (fault, nvram_silent, timebombs) in [(Fault::Silent, true, 0), (Fault::WearOut, false, 2)] {
        let mut t = FtlTarget::mount(base.clone(), ftl_config(fault)).unwrap();
        assert!(t.arm(fault, 7, 200), "{fault}");
        let dev = t.ftl_mut().unwrap().log().device().inner();
        let (nvram, nand) = (dev.fast().sim().faults(), dev.bulk().sim().faults());
        assert_eq!(nvram.silent_program_rate > 0.0, nvram_silent, "{fault}");
        assert_eq!(nand.silent_program_rate > 0.0, nvram_silent, "{fault}");
        assert!(nvram.timebombs.is_empty(), "{fault}");
        assert_eq!(nand.timebombs.len(), timebombs, "{fault}");
    }
}

/// A cut at every device operation of a short workload on `preset`, clean and torn, on both
/// targets: the cuts fall on both parts (torn NVRAM writes among them) and lose nothing
/// acknowledged. The file system's workload is longer: its first operations wait in RAM for
/// a sync, which writes only metadata.
fn exhaustive_cuts_lose_nothing_acknowledged(preset: &str) {
    for (target, ops) in [(TargetKind::Ftl, 12), (TargetKind::Fs, 40)] {
        let opts = TortureOptions {
            presets: vec![preset.into()],
            targets: vec![target],
            workloads: vec![Workload::Mixed],
            fs_workloads: vec![FsWorkload::Mixed],
            faults: vec![Fault::PowerCut],
            ops,
            exhaustive: true,
            ..TortureOptions::default()
        };
        let outcome = run(&opts, &mut |_, _, _| {}).unwrap();
        assert!(outcome.violations.is_empty(), "{:?}", outcome.violations);
        let r = &outcome.reports[0];
        assert_eq!(r.cases, 2 * r.workload_device_ops, "{r:?}");
        assert!(r.cuts >= r.cases && r.bytes_verified > 0, "{r:?}");
        assert!(r.nvram_cuts > 0 && r.nvram_cuts < r.cuts, "{r:?}");
    }
}

#[test]
fn exhaustive_cuts_on_the_hybrid_volume_lose_nothing_acknowledged() {
    exhaustive_cuts_lose_nothing_acknowledged(HYBRID);
}

/// Every fault kind applies to the volume (the NAND's faults to the NAND), on both targets.
#[test]
fn every_fault_kind_runs_on_the_hybrid_volume() {
    let opts = TortureOptions {
        presets: vec![HYBRID.into()],
        workloads: vec![Workload::Database],
        fs_workloads: vec![FsWorkload::Mixed],
        cuts: 2,
        ops: 80,
        ..TortureOptions::default()
    };
    let outcome = run(&opts, &mut |_, _, _| {}).unwrap();
    assert!(outcome.violations.is_empty(), "{:?}", outcome.violations);
    assert!(outcome.skipped.is_empty(), "{:?}", outcome.skipped);
    assert_eq!(outcome.reports.len(), 2 * Fault::ALL.len());
    for r in &outcome.reports {
        assert_eq!(r.cases, 2, "{r:?}");
        assert!(r.cuts >= 2 && r.remounts >= 4, "{r:?}");
        if !r.kind.damages_media() {
            assert_eq!(r.media_damage(), 0, "{r:?}");
        }
    }
}

const HYBRID_NOR: &str = "w25q64jv+cy15b102q";

/// NVRAM beside SPI NOR: the NOR's torture device with a part of the FRAM in segments of as
/// many slots, among the default presets; exhaustive cuts fall on both parts and lose
/// nothing acknowledged (the NOR's tag entries wait in RAM for a program page: a cut drops
/// them).
#[test]
fn exhaustive_cuts_on_nvram_beside_nor_lose_nothing_acknowledged() {
    assert!(HYBRID_PRESETS.contains(&HYBRID_NOR));
    assert!(ALL_PRESETS.contains(&HYBRID_NOR) && DEFAULT_PRESETS.contains(&HYBRID_NOR));
    let dev = torture_device(HYBRID_NOR).unwrap();
    assert_eq!(dev.spec, torture_device("w25q64jv").unwrap().spec);
    assert!(
        dev.geometry().contains("beside NVRAM") && dev.geometry().contains("in 8 segments"),
        "{}",
        dev.geometry()
    );
    exhaustive_cuts_lose_nothing_acknowledged(HYBRID_NOR);
}
