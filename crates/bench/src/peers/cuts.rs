//! littlefs under power cuts, in the cut scheme of `flashfs torture`: the power is cut after
//! the k-th mutating device operation of a workload (clean), or in the middle of it (torn:
//! a program or erase left half done), for cut points spread over the whole workload; then
//! the part is powered again, littlefs mounts it, and the file is checked.
//!
//! The workload: a 32 KiB file written whole and synced (before any cut), then 64-byte
//! writes at the random offsets, each followed by a sync. A sync that returned is a promise:
//! after the cut the file must hold every write up to the last acknowledged one, and may
//! hold the one in flight, nothing else.

use littlefs2::fs::Filesystem;
use littlefs2::io::SeekFrom;
use littlefs2::path::PathBuf;
use serde::Serialize;

use flash::Simulated;

use super::littlefs::{LfsDevice, Shared};
use super::plan::{Plan, CHUNK};
use crate::error::{BenchError, Result};

/// What the cuts of one kind found on one device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CutReport {
    /// Device preset.
    pub device: String,
    /// `littlefs`.
    pub system: &'static str,
    /// Torn operations (true) or clean cuts (false).
    pub torn: bool,
    /// Mutating device operations of the uncut workload.
    pub workload_ops: u64,
    /// Cuts made.
    pub cuts: u64,
    /// Cuts after which the volume mounted and the file held an allowed state.
    pub survived: u64,
    /// Cuts after which the mount failed.
    pub mount_failed: u64,
    /// Cuts after which the file could not be opened or read.
    pub unreadable: u64,
    /// Cuts after which the file held neither the acknowledged state nor that plus the
    /// write in flight.
    pub wrong_content: u64,
    /// The first failure, described.
    pub first_failure: Option<String>,
}

fn lfs_err(what: &str, e: littlefs2::io::Error) -> String {
    format!("{what}: littlefs error {}", e.code())
}

/// Formats, writes the file whole and synced, then runs the synced random writes until
/// the power goes; returns how many writes were acknowledged.
fn workload<D: LfsDevice>(
    storage: &mut D,
    plan: &Plan,
    path: &PathBuf,
    arm: &mut dyn FnMut(),
) -> Result<u64> {
    let fail = |e: String| BenchError::Littlefs {
        context: "cut workload's set-up".into(),
        error: e,
    };
    Filesystem::format(storage).map_err(|e| fail(lfs_err("format", e)))?;
    let mut alloc = Filesystem::allocate();
    let fs = Filesystem::mount(&mut alloc, storage).map_err(|e| fail(lfs_err("mount", e)))?;
    fs.create_file_and_then(path, |f| {
        for off in (0..plan.random_file).step_by(CHUNK) {
            f.write(&Plan::chunk(off, 0))?;
        }
        Ok(())
    })
    .map_err(|e| fail(lfs_err("first writing", e)))?;
    arm();
    let mut acked = 0;
    let _ = fs.open_file_with_options_and_then(
        |o| o.write(true),
        path,
        |f| {
            for (i, &off) in plan.random_offsets.iter().enumerate() {
                f.seek(SeekFrom::Start(off as u32))?;
                f.write(&Plan::chunk(off, i as u64 + 1))?;
                f.sync()?;
                acked = i as u64 + 1;
            }
            Ok(())
        },
    );
    Ok(acked)
}

/// The file after the first `n` random writes.
fn state_after(plan: &Plan, n: u64) -> Vec<u8> {
    let mut p = plan.clone();
    p.random_offsets.truncate(n as usize);
    p.random_file_after()
}

/// Cuts the power at `cuts` points spread over the workload on fresh parts from `make`,
/// clean or torn, and checks what littlefs mounts afterwards.
pub fn run_cuts<D: LfsDevice>(
    device: &str,
    make: &dyn Fn() -> Result<Shared<D::Sim>>,
    plan: &Plan,
    cuts: u64,
    torn: bool,
) -> Result<CutReport>
where
    D::Sim: Simulated,
{
    let path = PathBuf::try_from("/random").map_err(|e| BenchError::Littlefs {
        context: "path".into(),
        error: format!("{e:?}"),
    })?;
    let attach = |sim: &Shared<D::Sim>| {
        D::attach(sim.clone()).map_err(|error| BenchError::Flash {
            context: "attaching littlefs's driver".into(),
            error,
        })
    };
    // The uncut run: how many mutating operations the measured part makes.
    let sim = make()?;
    let mut storage = attach(&sim)?;
    let mut start = 0;
    let done = workload(&mut storage, plan, &path, &mut || {
        start = sim.borrow().ops()
    })?;
    if done != plan.random_offsets.len() as u64 {
        return Err(BenchError::Littlefs {
            context: "the uncut workload".into(),
            error: format!("stopped after {done} writes"),
        });
    }
    let total = sim.borrow().ops() - start;
    let mut report = CutReport {
        device: device.to_string(),
        system: "littlefs",
        torn,
        workload_ops: total,
        cuts: 0,
        survived: 0,
        mount_failed: 0,
        unreadable: 0,
        wrong_content: 0,
        first_failure: None,
    };
    let points = cuts.min(total.max(1));
    for i in 0..points {
        let k = 1 + i * total.saturating_sub(1) / points.max(1);
        let sim = make()?;
        let mut storage = attach(&sim)?;
        let acked = workload(&mut storage, plan, &path, &mut || {
            sim.borrow_mut().schedule_cut(k, torn)
        })?;
        if sim.borrow().is_powered() {
            // The workload ended before the cut point.
            continue;
        }
        sim.borrow_mut().reboot();
        report.cuts += 1;
        let mut alloc = Filesystem::allocate();
        let fs = match Filesystem::mount(&mut alloc, &mut storage) {
            Ok(fs) => fs,
            Err(e) => {
                report.mount_failed += 1;
                report
                    .first_failure
                    .get_or_insert(format!("cut at op {k}: {}", lfs_err("mount", e)));
                continue;
            }
        };
        let mut back = vec![0u8; plan.random_file as usize];
        let read = fs.open_file_and_then(&path, |f| f.read(&mut back));
        match read {
            Ok(n) if n == back.len() => {
                let ok = back == state_after(plan, acked) || back == state_after(plan, acked + 1);
                if ok {
                    report.survived += 1;
                } else {
                    report.wrong_content += 1;
                    report.first_failure.get_or_insert(format!(
                        "cut at op {k}: the file holds neither {acked} nor {} writes",
                        acked + 1
                    ));
                }
            }
            Ok(n) => {
                report.unreadable += 1;
                report
                    .first_failure
                    .get_or_insert(format!("cut at op {k}: the file reads {n} bytes"));
            }
            Err(e) => {
                report.unreadable += 1;
                report
                    .first_failure
                    .get_or_insert(format!("cut at op {k}: {}", lfs_err("read", e)));
            }
        }
    }
    Ok(report)
}
