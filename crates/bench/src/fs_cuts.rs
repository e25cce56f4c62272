//! A file-system workload run under power cuts against its model: after each cut the
//! volume is remounted (the mount itself sometimes cut), checked with fsck and compared with
//! every state the model allows ([`Durable`]); then a clean remount and the check that
//! deleting everything gives back all the space.

use flashfs::{Error, Fs, Segments};

use crate::fswork::{
    apply_fs, apply_model, describe_difference, removal, snapshot, Durable, FsOp, Tree,
};
use crate::torture::sim::SimSegments;

/// What a run of a file-system workload under power cuts found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CutReport {
    /// Power cuts made (including second cuts during recovery mounts).
    pub cuts: u64,
    /// Of which tore the operation they fell on.
    pub torn: u64,
    /// Of which were chained: scheduled a few device operations into the recovery from
    /// the cut before, they fell in its mount, its check or the first operations after.
    pub chained_cuts: u64,
    /// Mounts after a cut.
    pub remounts: u64,
    /// File bytes compared against the model after remounts.
    pub bytes_verified: u64,
    /// Operations the file system acknowledged.
    pub ops_acknowledged: u64,
    /// Operations refused for lack of space (left out of the model, as they must change
    /// nothing).
    pub no_space: u64,
    /// Operations after which the remounted state held some operations past the last sync.
    pub kept_unsynced: u64,
    /// Everything that broke a rule, in words.
    pub violations: Vec<String>,
}

/// How a run cuts the power.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CutPlan {
    /// Cuts to make, spread over the workload.
    pub cuts: u64,
    /// Share of cuts that tear the operation they hit.
    pub torn_share: f64,
    /// Share of recovery mounts that are themselves cut once.
    pub recovery_cut_share: f64,
    /// Seed of the cut points.
    pub seed: u64,
}

/// Formats `dev`, runs `ops` under power cuts ([`run_with_cuts`]), then checks a clean
/// remount ([`check_clean_remount`]) and that deleting everything gives back all the space
/// ([`check_no_leak`]).
pub fn torture_fs<D: SimSegments>(
    dev: D,
    config: flashfs::FsConfig,
    ops: &[FsOp],
    plan: CutPlan,
    progress: &mut dyn FnMut(usize),
) -> Result<(CutReport, D), Error> {
    let fs = Fs::format(dev, config)?;
    let empty_free = fs.statfs().blocks_free;
    let (mut report, fs, model) = run_with_cuts(fs, Tree::new(), config, ops, plan, progress)?;
    let fs = check_clean_remount(fs, config, &model, &mut report)?;
    let dev = check_no_leak(fs, &model, empty_free, &mut report)?;
    Ok((report, dev))
}

/// Runs `ops` on the mounted file system `fs`, whose whole state is `base` and durable,
/// cutting the power at random device operations as `plan` says. After each cut it reboots,
/// remounts (sometimes cut again during the mount), checks the volume with fsck and compares
/// it with the model. Returns the file system and what the model says it holds now.
/// `progress` hears each operation's index.
pub fn run_with_cuts<D: SimSegments>(
    mut fs: Fs<D>,
    base: Tree,
    config: flashfs::FsConfig,
    ops: &[FsOp],
    plan: CutPlan,
    progress: &mut dyn FnMut(usize),
) -> Result<(CutReport, Fs<D>, Tree), Error> {
    let mut report = CutReport::default();
    let mut durable = Durable::new(base);
    let mut rng = plan.seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1;
    let mut next = move |m: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % m.max(1)
    };
    let sim_ops = |fs: &Fs<D>| fs.ftl().log().device().sim().ops();
    // Device operations per workload operation, measured on the way, spread the cuts.
    let mut per_op = 8u64;
    let mut armed = false;
    let mut armed_torn = false;
    let mut armed_chained = false;
    let start_ops = sim_ops(&fs);
    let mut i = 0;
    while i < ops.len() {
        progress(i);
        if !armed && report.cuts < plan.cuts {
            let left = (plan.cuts - report.cuts).max(1);
            let span = ((ops.len() - i) as u64 * per_op / left).max(2);
            let torn = (next(1000) as f64) < plan.torn_share * 1000.0;
            fs.ftl_mut()
                .log_mut()
                .device_mut()
                .sim_mut()
                .schedule_cut(1 + next(2 * span), torn);
            armed = true;
            armed_torn = torn;
            armed_chained = false;
        }
        let op = &ops[i];
        let mut model = durable.current();
        let must = apply_model(&mut model, op);
        match apply_fs(&mut fs, op) {
            Ok(()) if must => {
                durable.acknowledged(op);
                report.ops_acknowledged += 1;
            }
            Ok(()) => report
                .violations
                .push(format!("op {i} ({op:?}) succeeded; the model refuses it")),
            Err(Error::Flash(flash::FlashError::PowerLoss)) => {
                report.torn += u64::from(armed_torn);
                report.chained_cuts += u64::from(armed_chained);
                let dev = fs.into_device();
                let (next_fs, verified, chained) =
                    recover(dev, config, &mut durable, &mut report, plan, &mut next, i)?;
                report.bytes_verified += verified;
                fs = next_fs;
                // A cut scheduled for the recovery and not reached in it falls soon after.
                armed = chained;
                armed_chained = chained;
                armed_torn = false;
            }
            Err(Error::NoSpace) => report.no_space += 1,
            Err(_) if !must => {}
            Err(e) => report
                .violations
                .push(format!("op {i} ({op:?}) failed: {e}")),
        }
        i += 1;
        per_op = ((sim_ops(&fs).saturating_sub(start_ops)) / i as u64).max(1);
    }
    // A cut still pending is moved out of reach.
    fs.ftl_mut()
        .log_mut()
        .device_mut()
        .sim_mut()
        .schedule_cut(u64::MAX / 2, false);
    let model = durable.current();
    Ok((report, fs, model))
}

/// Unmounts cleanly, remounts, and checks that the volume holds exactly `model` and that
/// fsck finds it clean.
pub fn check_clean_remount<D: Segments>(
    fs: Fs<D>,
    config: flashfs::FsConfig,
    model: &Tree,
    report: &mut CutReport,
) -> Result<Fs<D>, Error> {
    let dev = fs.unmount()?;
    let mut fs = Fs::mount(dev, config)?;
    let (found, bytes) = snapshot(&mut fs)?;
    report.bytes_verified += bytes;
    if found != *model {
        report.violations.push(format!(
            "after a clean unmount: {}",
            describe_difference(model, &found)
        ));
    }
    let check = fs.check(false)?;
    if !check.is_clean() {
        report
            .violations
            .push(format!("fsck after the run: {:?}", check.problems));
    }
    Ok(fs)
}

/// Deletes everything `model` lists and checks that the free space is back to
/// `empty_free`, what the volume had when empty.
pub fn check_no_leak<D: Segments>(
    mut fs: Fs<D>,
    model: &Tree,
    empty_free: u64,
    report: &mut CutReport,
) -> Result<D, Error> {
    for (p, n) in model.iter().rev() {
        apply_fs(&mut fs, &removal(p, n))?;
    }
    fs.sync()?;
    let free = fs.statfs().blocks_free;
    if free != empty_free {
        report.violations.push(format!(
            "space leak: {free} blocks free after deleting everything, {empty_free} when empty"
        ));
    }
    fs.unmount()
}

/// Reboots after a cut and remounts, then checks the volume against the model and makes
/// what it found the new durable state. With `plan.recovery_cut_share`, a second cut is
/// scheduled a few device operations into the recovery: if the mount reaches it, the mount
/// is retried; if not, it stays armed and falls in the first operations after (returned
/// `true`).
fn recover<D: SimSegments>(
    mut dev: D,
    config: flashfs::FsConfig,
    durable: &mut Durable,
    report: &mut CutReport,
    plan: CutPlan,
    next: &mut dyn FnMut(u64) -> u64,
    at: usize,
) -> Result<(Fs<D>, u64, bool), Error> {
    report.cuts += 1;
    dev.sim_mut().reboot();
    let mut chained = false;
    if (next(1000) as f64) < plan.recovery_cut_share * 1000.0 {
        dev.sim_mut().schedule_cut(1 + next(32), false);
        chained = true;
    }
    let mut fs = loop {
        match Fs::mount(dev.clone(), config) {
            Ok(fs) => break fs,
            Err(Error::Flash(flash::FlashError::PowerLoss)) if chained => {
                report.cuts += 1;
                report.chained_cuts += 1;
                chained = false;
                // The mount ran on a copy, which the error took with it: the retry starts
                // from the device as it was, so the cut that fell must not fall again.
                dev.sim_mut().schedule_cut(u64::MAX / 2, false);
                dev.sim_mut().reboot();
            }
            Err(e) => {
                report
                    .violations
                    .push(format!("mount after a cut at op {at} failed: {e}"));
                return Err(e);
            }
        }
    };
    report.remounts += 1;
    // The check commits, and reading may update access times: a chained cut may fall in
    // either, and then the recovery starts over.
    let checked = fs.check(false).and_then(|c| Ok((c, snapshot(&mut fs)?)));
    let (check, (found, bytes)) = match checked {
        Err(Error::Flash(flash::FlashError::PowerLoss)) if chained => {
            let dev = fs.into_device();
            report.chained_cuts += 1;
            return recover(dev, config, durable, report, plan, next, at);
        }
        c => c?,
    };
    if !check.is_clean() {
        report
            .violations
            .push(format!("fsck after a cut at op {at}: {:?}", check.problems));
    }
    match durable.check(&found) {
        Ok(k) => {
            if k > 0 {
                report.kept_unsynced += 1;
            }
        }
        Err(why) => report
            .violations
            .push(format!("after a cut at op {at}: {why}")),
    }
    *durable = Durable::new(found);
    Ok((fs, bytes, chained))
}

#[cfg(test)]
mod cut_tests {
    use super::*;
    use crate::fswork::FsWorkload;
    use flash::{ImageMeta, NorSim};
    use flashfs::{FsConfig, NorSegments};

    #[test]
    fn every_workload_survives_cuts_on_a_small_nor() {
        let spec = crate::torture::torture_device("28f008sa").unwrap().spec;
        let flash::DeviceSpec::Nor(spec) = spec else {
            panic!("NOR preset")
        };
        for w in FsWorkload::ALL {
            let dev =
                NorSegments::new(NorSim::new(spec, ImageMeta::new("t", 1)).unwrap(), 512).unwrap();
            let ops = w.ops(3, 150, 2048, 16 * 1024);
            let plan = CutPlan {
                cuts: 12,
                torn_share: 0.5,
                recovery_cut_share: 0.3,
                seed: 9,
            };
            let (r, _) = torture_fs(dev, FsConfig::default(), &ops, plan, &mut |_| {}).unwrap();
            assert!(r.violations.is_empty(), "{}: {:?}", w.name(), r.violations);
            assert!(r.cuts >= 6, "{}: only {} cuts", w.name(), r.cuts);
            assert!(r.bytes_verified > 0 && r.remounts > 0);
        }
    }

    /// The small-write workload is what brings write-back of partial blocks into the
    /// torture: its writes wait in RAM between syncs.
    #[test]
    fn the_small_write_workload_leaves_blocks_in_ram_between_syncs() {
        let spec = crate::torture::fs_torture_device("w25q64jv").unwrap().spec;
        let flash::DeviceSpec::Nor(spec) = spec else {
            panic!("NOR preset")
        };
        let dev =
            NorSegments::new(NorSim::new(spec, ImageMeta::new("t", 1)).unwrap(), 512).unwrap();
        let mut fs = Fs::format(dev, FsConfig::default()).unwrap();
        let ops = FsWorkload::SmallWrites.ops(5, 300, 256, 8192);
        let mut model = Tree::new();
        let mut waiting = 0;
        for op in &ops {
            assert_eq!(
                apply_fs(&mut fs, op).is_ok(),
                apply_model(&mut model, op),
                "{op:?}"
            );
            waiting += usize::from(fs.write_back_stats().blocks > 0);
        }
        assert!(
            waiting > ops.len() / 2,
            "blocks waited after {waiting} operations"
        );
        let mut fs = Fs::mount(fs.unmount().unwrap(), FsConfig::default()).unwrap();
        assert_eq!(snapshot(&mut fs).unwrap().0, model);
    }

    /// The record workload is what brings the journal (SPEC.md §8.5b) into the torture: on
    /// a part that programs twice most of its commits are entries.
    #[test]
    fn the_record_workload_commits_through_the_journal() {
        let spec = crate::torture::fs_torture_device("st10f280").unwrap().spec;
        let flash::DeviceSpec::Nor(spec) = spec else {
            panic!("NOR preset")
        };
        assert!(spec.reprogrammable);
        let dev =
            NorSegments::new(NorSim::new(spec, ImageMeta::new("t", 1)).unwrap(), 512).unwrap();
        let mut fs = Fs::format(dev, FsConfig::default()).unwrap();
        let ops = FsWorkload::Records.ops(5, 300, 160, 0);
        let mut model = Tree::new();
        for op in &ops {
            assert_eq!(
                apply_fs(&mut fs, op).is_ok(),
                apply_model(&mut model, op),
                "{op:?}"
            );
        }
        let st = fs.stats();
        // Entries and commits by frames alike are the journal's.
        assert!(
            (st.journal_entries + st.frame_commits) * 2 > st.commits,
            "{st:?}"
        );
        assert!(st.commits > st.journal_entries, "{st:?}");
        let dev = fs.into_device();
        let mut fs = Fs::mount(dev, FsConfig::default()).unwrap();
        assert!(fs.stats().journal_replayed > 0);
        assert_eq!(snapshot(&mut fs).unwrap().0, model);
    }
}
