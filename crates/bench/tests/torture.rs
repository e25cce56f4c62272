//! The power-loss torture harness: it passes the block device, and it catches a target that
//! acknowledges flushes it did not make durable.

use std::ops::Range;

use flash::{ImageMeta, NandSim};
use flashfs::{Ftl, FtlConfig, NandSegments, Segments};
use flashfs_bench::fswork::{FsOp, FsWorkload};
use flashfs_bench::torture::{
    format_fs, fs_config, fs_ops, fs_torture_device, ftl_config, idle_steps, nand_part, run,
    run_case, torture, torture_device, Case, Failure, Fault, FsTarget, FtlTarget, Model, Op,
    Oracle, Target, TargetKind, TortureOptions, Workload, TORTURE_REGIONS,
};

type Nand = NandSegments<NandSim>;

/// The block device formatted on the torture geometry of nand-128m.
fn formatted_nand() -> Nand {
    let dev = torture_device("nand-128m").unwrap();
    let flash::DeviceSpec::Nand(spec) = dev.spec else {
        panic!("nand-128m is NAND")
    };
    let sim = NandSim::new(spec, ImageMeta::new("nand-128m", 1)).unwrap();
    let seg = NandSegments::new(sim).unwrap();
    Ftl::format(seg, FtlConfig::default())
        .unwrap()
        .into_device()
}

/// A broken target: a volatile write cache that acknowledges every flush but only writes its
/// buffered writes through on every third one, so acknowledged data sits in RAM.
struct LyingCache<T> {
    inner: T,
    buffered: Vec<Op>,
    flushes: u64,
}

impl<T: Target<Op = Op, Model = Model>> Target for LyingCache<T> {
    type Op = Op;
    type Model = Model;
    fn kind(&self) -> &'static str {
        "lying-cache"
    }
    fn model(&self) -> Model {
        self.inner.model()
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
        match op {
            Op::Flush => {
                self.flushes += 1;
                if self.flushes == 3 {
                    self.flushes = 0;
                    for op in std::mem::take(&mut self.buffered) {
                        self.inner.apply(op)?;
                    }
                    self.inner.apply(Op::Flush)?;
                }
                Ok(())
            }
            op => {
                self.buffered.push(op);
                Ok(())
            }
        }
    }
    fn remount(&mut self) -> Result<(), Failure> {
        self.buffered.clear();
        self.inner.remount()
    }
    fn observe(&mut self, model: &Model) -> Result<(Vec<Option<u32>>, u64), String> {
        self.inner.observe(model)
    }
    fn more_ops(&self, round: u32) -> Vec<Op> {
        self.inner.more_ops(round)
    }
}

fn cases(n: u64, total: u64) -> Vec<Case> {
    (0..n)
        .map(|i| Case {
            seed: 5,
            cut: i * total / n,
            torn: i % 2 == 1,
            fault: Fault::PowerCut,
        })
        .collect()
}

#[test]
fn a_cache_that_acknowledges_flushes_it_did_not_make_is_caught() {
    let base = formatted_nand();
    let honest = || FtlTarget::mount(base.clone(), FtlConfig::default());
    let sectors = honest().unwrap().sectors();
    let ops = Workload::Database.ops(5, sectors, 512, 120);
    let (_, total) = torture(&honest, &ops, &[], &mut |_| {}).unwrap();
    let cases = cases(24, total);

    // The honest block device keeps every acknowledged flush...
    let (results, _) = torture(&honest, &ops, &cases, &mut |_| {}).unwrap();
    let broken: Vec<_> = results.iter().filter_map(|r| r.violation.clone()).collect();
    assert!(broken.is_empty(), "{broken:?}");
    assert!(results.iter().map(|r| r.cuts).sum::<u64>() >= 24);

    // ...the lying cache loses some, and the harness says so.
    let lying = || {
        honest().map(|inner| LyingCache {
            inner,
            buffered: Vec::new(),
            flushes: 0,
        })
    };
    let (results, _) = torture(&lying, &ops, &cases, &mut |_| {}).unwrap();
    let caught: Vec<_> = results.iter().filter_map(|r| r.violation.clone()).collect();
    assert!(
        caught.len() >= cases.len() / 2,
        "only {} of {} cases caught the lost flushes",
        caught.len(),
        cases.len()
    );
    assert!(caught.iter().any(|v| v.contains("flushed")), "{caught:?}");
}

#[test]
fn a_device_that_rolls_back_a_flushed_sector_is_caught() {
    // No cut at all: the remount itself loses a sector (it is trimmed behind the harness's
    // back before the clean remount), which the model must reject.
    let base = formatted_nand();
    let mut t = FtlTarget::mount(base, FtlConfig::default()).unwrap();
    let ops = [
        Op::Write {
            sector: 3,
            count: 1,
            version: 1,
        },
        Op::Flush,
    ];
    struct Rollback(FtlTarget<Nand>);
    impl Target for Rollback {
        type Op = Op;
        type Model = Model;
        fn kind(&self) -> &'static str {
            "rollback"
        }
        fn model(&self) -> Model {
            self.0.model()
        }
        fn device_ops(&self) -> u64 {
            self.0.device_ops()
        }
        fn schedule_cut(&mut self, ops: u64, torn: bool) {
            self.0.schedule_cut(ops, torn)
        }
        fn cancel_cut(&mut self) {
            self.0.cancel_cut()
        }
        fn powered(&self) -> bool {
            self.0.powered()
        }
        fn apply(&mut self, op: Op) -> Result<(), Failure> {
            self.0.apply(op)
        }
        fn remount(&mut self) -> Result<(), Failure> {
            self.0.apply(Op::Trim {
                sector: 3,
                count: 1,
            })?;
            self.0.remount()
        }
        fn observe(&mut self, model: &Model) -> Result<(Vec<Option<u32>>, u64), String> {
            self.0.observe(model)
        }
        fn more_ops(&self, round: u32) -> Vec<Op> {
            self.0.more_ops(round)
        }
    }
    // A cut far beyond the workload never fires.
    let case = Case {
        seed: 1,
        cut: 1 << 40,
        torn: false,
        fault: Fault::PowerCut,
    };
    let r = run_case(Rollback(t), &ops, case);
    assert_eq!(r.cuts, 0);
    let v = r.violation.expect("the rollback is caught");
    assert!(v.contains("sector 3"), "{v}");

    // The same without the rollback passes.
    t = FtlTarget::mount(formatted_nand(), FtlConfig::default()).unwrap();
    let r = run_case(t, &ops, case);
    assert_eq!(r.violation, None);
    assert_eq!(r.remounts, 2);
}

#[test]
fn exhaustive_cuts_every_operation_clean_and_torn() {
    let opts = TortureOptions {
        presets: vec!["w25q64jv".into()],
        targets: vec![TargetKind::Ftl],
        workloads: vec![Workload::Mixed],
        faults: vec![Fault::PowerCut],
        ops: 12,
        exhaustive: true,
        ..TortureOptions::default()
    };
    let outcome = run(&opts, &mut |_, _, _| {}).unwrap();
    let r = &outcome.reports[0];
    assert_eq!(r.target, "ftl");
    assert_eq!(r.kind, Fault::PowerCut);
    assert!(r.workload_device_ops > 12, "{r:?}");
    assert_eq!(r.cases, 2 * r.workload_device_ops);
    // Every first cut fires (each is within the workload); chained ones may not.
    assert!(r.cuts >= r.cases, "{r:?}");
    assert!(r.remounts >= 2 * r.cases);
    assert!(r.bytes_verified >= r.remounts * r.sectors * 512);
    assert!(outcome.violations.is_empty(), "{:?}", outcome.violations);
}

/// NVRAM tears a write as a prefix, where the NOR simulator clears a random part of the bits:
/// a cut at every operation of a short workload, clean and torn, on both NVRAM presets (1-
/// and 2-byte words), block device and file system. A tag entry whose check came before its
/// data checksum failed here (log format 13).
#[test]
fn exhaustive_cuts_on_nvram_lose_nothing_acknowledged() {
    for target in [TargetKind::Ftl, TargetKind::Fs] {
        let opts = TortureOptions {
            presets: vec!["cy15b102q".into(), "fram-8m".into()],
            targets: vec![target],
            workloads: vec![Workload::Mixed],
            fs_workloads: vec![flashfs_bench::fswork::FsWorkload::Mixed],
            faults: vec![Fault::PowerCut],
            ops: 12,
            exhaustive: true,
            ..TortureOptions::default()
        };
        let outcome = run(&opts, &mut |_, _, _| {}).unwrap();
        assert_eq!(outcome.reports.len(), 2, "{target:?}");
        for r in &outcome.reports {
            assert_eq!(r.cases, 2 * r.workload_device_ops, "{r:?}");
            assert!(r.cuts >= r.cases && r.bytes_verified > 0, "{r:?}");
        }
        assert!(outcome.violations.is_empty(), "{:?}", outcome.violations);
    }
}

#[test]
fn a_replayed_case_is_the_same_case() {
    let opts = TortureOptions {
        presets: vec!["28f008sa".into()],
        targets: vec![TargetKind::Ftl],
        workloads: vec![Workload::AppendLog],
        faults: vec![Fault::MountCut],
        cut: Some(37),
        torn: true,
        seed: 11,
        ..TortureOptions::default()
    };
    let a = run(&opts, &mut |_, _, _| {}).unwrap();
    let b = run(&opts, &mut |_, _, _| {}).unwrap();
    assert_eq!(a.reports, b.reports);
    assert_eq!(a.reports[0].cases, 1);
    assert!(a.reports[0].cuts >= 1);
    // No selected fault kind applies: refused, not an empty run.
    assert!(run(
        &TortureOptions {
            presets: vec!["fram-8m".into()],
            faults: vec![Fault::AtRest, Fault::BadBlocks],
            ..TortureOptions::default()
        },
        &mut |_, _, _| {}
    )
    .is_err());
}

/// The block device on the MLC part as the torture mounts it (through the wrapper that cuts
/// the power): it has the part's SLC mode, so the regions put writes in SLC segments and the
/// cleaner migrates them to MLC ones under the cuts.
#[test]
fn the_mlc_part_keeps_its_slc_mode_under_the_harness() {
    let dev = torture_device("mlc-flexfs").unwrap();
    let config = ftl_config(Fault::PowerCut);
    assert_eq!(config.log.regions, Some(TORTURE_REGIONS));
    let base = Ftl::format(nand_part(&dev, 1).unwrap(), config)
        .unwrap()
        .into_device();
    let mut t = FtlTarget::mount(base, config).unwrap();
    for op in Workload::AppendLog.ops(1, t.sectors(), t.sector_size(), 200) {
        t.apply(op).unwrap();
    }
    let log = t.ftl_mut().unwrap().log();
    assert!(log.device().has_slc_mode());
    let (slc, mlc) = log.region_segments();
    // The format's segments are long cleaned: these were opened under the wrapper.
    assert!(slc > 0 && mlc > 0, "{slc} SLC and {mlc} MLC segments");
    assert!(log.stats().migrated_slots > 0, "{:?}", log.stats());
}

/// The device operations (counted from the start of `ops`, as a case's cut is) of each idle
/// step during which the log migrated, when `ops` run on `t` without a cut.
fn migrating_steps<T: Target>(
    mut t: T,
    ops: &[T::Op],
    migrated: impl Fn(&mut T) -> u64,
) -> Vec<Range<u64>> {
    let start = t.device_ops();
    let mut model = t.model();
    let mut steps = Vec::new();
    for op in ops {
        let (from, before) = (t.device_ops() - start, migrated(&mut t));
        model.issue(op);
        t.apply(op.clone()).unwrap();
        model.acknowledge(op);
        if t.is_idle(op) && migrated(&mut t) > before {
            steps.push(from..t.device_ops() - start);
        }
    }
    steps
}

/// Cuts at the first, a middle and the last device operation of up to three migrating idle
/// steps, clean and torn: each case must cut inside the step and hold everything
/// acknowledged after every remount. Returns the cases run.
fn cut_inside_migrations<T: Target>(
    fresh: &dyn Fn() -> T,
    ops: &[T::Op],
    seed: u64,
    steps: &[Range<u64>],
) -> usize {
    let mut n = 0;
    for step in steps.iter().take(3) {
        let mid = step.start + (step.end - step.start) / 2;
        for cut in [step.start, mid, step.end - 1] {
            let case = Case {
                seed,
                cut,
                torn: n % 2 == 1,
                fault: Fault::PowerCut,
            };
            let r = run_case(fresh(), ops, case);
            assert_eq!(r.violation, None, "{case:?}");
            assert!(
                r.idle_cuts >= 1,
                "{case:?} did not cut the idle step: {r:?}"
            );
            n += 1;
        }
    }
    n
}

/// On the MLC part the workloads' idle steps migrate, and cuts inside a migration leave the
/// block device holding what was acknowledged.
#[test]
fn cuts_inside_migrations_of_the_block_device_lose_nothing() {
    let dev = torture_device("mlc-flexfs").unwrap();
    let config = ftl_config(Fault::PowerCut);
    let base = Ftl::format(nand_part(&dev, 1).unwrap(), config)
        .unwrap()
        .into_device();
    let fresh = || FtlTarget::mount(base.clone(), config).unwrap();
    let mut cases = 0;
    for w in [Workload::AppendLog, Workload::Database] {
        let seed = 3;
        let t = fresh();
        let plain = w.ops(seed, t.sectors(), t.sector_size(), 200);
        let ops = idle_steps(plain, seed, 200, |op| op.is_barrier(), |ms| Op::Idle { ms });
        let migrated = |t: &mut FtlTarget<Nand>| t.ftl_mut().unwrap().log().stats().migrated_slots;
        let steps = migrating_steps(t, &ops, migrated);
        assert!(!steps.is_empty(), "{w}: no idle step migrated");
        cases += cut_inside_migrations(&fresh, &ops, seed, &steps);
    }
    assert!(cases >= 6);
}

/// The same on the file system.
#[test]
fn cuts_inside_migrations_of_the_file_system_lose_nothing() {
    let dev = fs_torture_device("mlc-flexfs").unwrap();
    let config = fs_config(Fault::PowerCut, None);
    let base = format_fs(&dev, nand_part(&dev, 1).unwrap(), None).unwrap();
    let fresh = || FsTarget::mount(base.clone(), config).unwrap();
    let mut cases = 0;
    for w in [FsWorkload::Mixed, FsWorkload::Database] {
        let seed = 3;
        let t = fresh();
        let plain = fs_ops(w, seed, 200, &t);
        let ops = idle_steps(
            plain,
            seed,
            200,
            |op| *op == FsOp::Sync,
            |ms| FsOp::Idle { ms },
        );
        let migrated =
            |t: &mut FsTarget<Nand>| t.fs_mut().unwrap().ftl().log().stats().migrated_slots;
        let steps = migrating_steps(t, &ops, migrated);
        assert!(!steps.is_empty(), "{}: no idle step migrated", w.name());
        cases += cut_inside_migrations(&fresh, &ops, seed, &steps);
    }
    assert!(cases >= 6);
}
