//! The phases on littlefs: formatted and mounted as its users do, files opened, written in
//! 64-byte writes (synced after each where the run says), closed.

use littlefs2::fs::{Allocation, FileAllocation, Filesystem};
use littlefs2::io::{self, SeekFrom};
use littlefs2::path::PathBuf;

use super::littlefs::{LfsDevice, Shared};
use super::meter::{PeerRow, Phase, Probe, RowKey};
use super::plan::{Plan, Workload, CHUNK, TINY_READ};
use crate::error::{BenchError, Result};

/// Bytes of littlefs's buffers on `D`: the file system's read and program caches and
/// lookahead bitmap, and one open file's cache.
pub fn buffer_bytes<D: LfsDevice>() -> u64 {
    (size_of::<Allocation<D>>() + size_of::<FileAllocation<D>>()) as u64
}

fn path(p: &str) -> Result<PathBuf> {
    PathBuf::try_from(p).map_err(|e| BenchError::Littlefs {
        context: format!("path {p:?}"),
        error: format!("{e:?}"),
    })
}

fn lfs<T>(r: io::Result<T>, what: &str) -> Result<T> {
    r.map_err(|e| BenchError::Littlefs {
        context: what.to_string(),
        error: format!("error {}", e.code()),
    })
}

fn used<D: LfsDevice>(fs: &Filesystem<'_, D>) -> Result<u64> {
    let free = lfs(fs.available_blocks(), "free space")?;
    Ok(((D::BLOCK_COUNT - free) * D::BLOCK_SIZE) as u64)
}

fn mismatch(what: String) -> BenchError {
    BenchError::Mismatch(what)
}

/// Runs every phase of `plan` on a fresh littlefs on `sim`, pushing one row per phase.
pub fn run<D: LfsDevice>(
    sim: &Shared<D::Sim>,
    plan: &Plan,
    key: &RowKey,
    rows: &mut Vec<PeerRow>,
) -> Result<()>
where
    Shared<D::Sim>: Probe,
{
    let mut storage = D::attach(sim.clone()).map_err(|error| BenchError::Flash {
        context: "attaching littlefs's driver".into(),
        error,
    })?;
    let r = phases::<D>(sim, &mut storage, plan, key, rows);
    r.map_err(|e| match (e, storage.last_error()) {
        (BenchError::Littlefs { context, error }, Some(flash)) => BenchError::Littlefs {
            context,
            error: format!("{error} (the flash: {flash})"),
        },
        (e, _) => e,
    })
}

fn phases<D: LfsDevice>(
    sim: &Shared<D::Sim>,
    storage: &mut D,
    plan: &Plan,
    key: &RowKey,
    rows: &mut Vec<PeerRow>,
) -> Result<()>
where
    Shared<D::Sim>: Probe,
{
    let heap = buffer_bytes::<D>();
    lfs(Filesystem::format(storage), "format")?;
    let linear = path("/linear")?;
    let random = path("/random")?;
    let random_after = plan.random_file_after();
    {
        let mut alloc = Filesystem::allocate();
        let fs = lfs(Filesystem::mount(&mut alloc, storage), "mount")?;

        let mut ph = Phase::start(Workload::LinearWrite, sim);
        let w = fs.open_file_with_options_and_then(
            |o| o.write(true).create(true).truncate(true),
            &linear,
            |f| {
                for off in (0..plan.linear_bytes).step_by(CHUNK) {
                    let t = sim.now();
                    f.write(&Plan::chunk(off, 0))?;
                    if plan.sync {
                        f.sync()?;
                    }
                    ph.op(t, sim, CHUNK as u64);
                }
                Ok(())
            },
        );
        lfs(w, "linear write")?;
        rows.push(ph.finish(sim, key, heap, used(&fs)?));

        let w = fs.create_file_and_then(&random, |f| {
            for off in (0..plan.random_file).step_by(CHUNK) {
                f.write(&Plan::chunk(off, 0))?;
            }
            Ok(())
        });
        lfs(w, "random file's first writing")?;
        let mut ph = Phase::start(Workload::RandomWrite, sim);
        let w = fs.open_file_with_options_and_then(
            |o| o.write(true),
            &random,
            |f| {
                for (i, &off) in plan.random_offsets.iter().enumerate() {
                    let t = sim.now();
                    f.seek(SeekFrom::Start(off as u32))?;
                    f.write(&Plan::chunk(off, i as u64 + 1))?;
                    if plan.sync {
                        f.sync()?;
                    }
                    ph.op(t, sim, CHUNK as u64);
                }
                Ok(())
            },
        );
        lfs(w, "random write")?;
        rows.push(ph.finish(sim, key, heap, used(&fs)?));

        lfs(fs.create_dir(&path("/small")?), "small files' directory")?;
        let mut ph = Phase::start(Workload::SmallFiles, sim);
        for i in 0..plan.small_files {
            let data = plan.small_file(i);
            let p = path(&format!("/small/f{i:05}"))?;
            let t = sim.now();
            lfs(
                fs.create_file_and_then(&p, |f| f.write(&data)),
                "small file",
            )?;
            ph.op(t, sim, data.len() as u64);
        }
        rows.push(ph.finish(sim, key, heap, used(&fs)?));

        let mut ph = Phase::start(Workload::LinearRead, sim);
        let r = fs.open_file_and_then(&linear, |f| {
            let mut buf = [0u8; CHUNK];
            let mut bad = None;
            for off in (0..plan.linear_bytes).step_by(CHUNK) {
                let t = sim.now();
                let n = f.read(&mut buf)?;
                ph.op(t, sim, n as u64);
                if n != CHUNK || buf != Plan::chunk(off, 0) {
                    bad.get_or_insert(off);
                }
            }
            Ok(bad)
        });
        if let Some(off) = lfs(r, "linear read")? {
            return Err(mismatch(format!("littlefs linear file at {off}")));
        }
        rows.push(ph.finish(sim, key, heap, used(&fs)?));

        let mut ph = Phase::start(Workload::RandomRead, sim);
        let r = fs.open_file_and_then(&random, |f| {
            let mut buf = [0u8; CHUNK];
            let mut bad = None;
            for &off in &plan.random_offsets {
                let t = sim.now();
                f.seek(SeekFrom::Start(off as u32))?;
                let n = f.read(&mut buf)?;
                ph.op(t, sim, n as u64);
                if buf[..] != random_after[off as usize..off as usize + CHUNK] {
                    bad.get_or_insert(off);
                }
            }
            Ok(bad)
        });
        if let Some(off) = lfs(r, "random read")? {
            return Err(mismatch(format!("littlefs random file at {off}")));
        }
        rows.push(ph.finish(sim, key, heap, used(&fs)?));

        let mut ph = Phase::start(Workload::SmallRead, sim);
        let mut buf = vec![0u8; plan.small_bytes];
        for i in 0..plan.small_files {
            let p = path(&format!("/small/f{i:05}"))?;
            let t = sim.now();
            let n = lfs(
                fs.open_file_and_then(&p, |f| f.read(&mut buf)),
                "small read",
            )?;
            ph.op(t, sim, n as u64);
            if buf[..n] != plan.small_file(i)[..] {
                return Err(mismatch(format!("littlefs small file {i}")));
            }
        }
        rows.push(ph.finish(sim, key, heap, used(&fs)?));

        let mut ph = Phase::start(Workload::TinyRead, sim);
        let r = fs.open_file_and_then(&linear, |f| {
            let mut buf = [0u8; TINY_READ];
            let mut bad = None;
            for off in (0..plan.tiny_read_bytes).step_by(TINY_READ) {
                let t = sim.now();
                let n = f.read(&mut buf)?;
                ph.op(t, sim, n as u64);
                let at = (off % CHUNK as u64) as usize;
                if n != TINY_READ || buf[..] != Plan::chunk(off - at as u64, 0)[at..at + n] {
                    bad.get_or_insert(off);
                }
            }
            Ok(bad)
        });
        if let Some(off) = lfs(r, "tiny read")? {
            return Err(mismatch(format!("littlefs linear file at {off}")));
        }
        rows.push(ph.finish(sim, key, heap, used(&fs)?));

        let mut ph = Phase::start(Workload::HeadOverwrite, sim);
        let w = fs.open_file_with_options_and_then(
            |o| o.write(true),
            &linear,
            |f| {
                for n in 1..=plan.head_overwrites {
                    let t = sim.now();
                    f.seek(SeekFrom::Start(0))?;
                    f.write(&Plan::head_after(n))?;
                    if plan.sync {
                        f.sync()?;
                    }
                    ph.op(t, sim, CHUNK as u64);
                }
                Ok(())
            },
        );
        lfs(w, "head overwrite")?;
        rows.push(ph.finish(sim, key, heap, used(&fs)?));
        let r = fs.open_file_and_then(&linear, |f| {
            let mut buf = [0u8; CHUNK];
            f.read(&mut buf)?;
            Ok(buf)
        });
        if lfs(r, "head read")? != Plan::head_after(plan.head_overwrites) {
            return Err(mismatch("littlefs linear file's head".into()));
        }
    }

    {
        let mut ph = Phase::start(Workload::Mount, sim);
        let t = sim.now();
        let mut alloc = Filesystem::allocate();
        let fs = lfs(Filesystem::mount(&mut alloc, storage), "mount")?;
        ph.op(t, sim, 0);
        rows.push(ph.finish(sim, key, heap, used(&fs)?));
    }

    let mut ph = Phase::start(Workload::MountFirstWrite, sim);
    let t = sim.now();
    let mut alloc = Filesystem::allocate();
    let fs = lfs(Filesystem::mount(&mut alloc, storage), "mount")?;
    let w = fs.open_file_with_options_and_then(
        |o| o.write(true),
        &random,
        |f| {
            f.write(&Plan::chunk(0, u64::MAX))?;
            f.sync()
        },
    );
    lfs(w, "first write")?;
    ph.op(t, sim, CHUNK as u64);
    rows.push(ph.finish(sim, key, heap, used(&fs)?));
    Ok(())
}
