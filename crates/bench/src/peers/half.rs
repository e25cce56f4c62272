//! Mount followed by the first write on a half-full part, and its floor: the complaint
//! littlefs's users rate worst is that the first write after a mount walks everything
//! stored (its allocator looks for free blocks), so it grows with the data.
//!
//! Each system fills half of a fresh part with one file written in 64 KiB writes, unmounts,
//! then mounts and makes a first write: a new file of 64 bytes, synced. flashfs does it
//! twice, mounting from its checkpoint and then by the full scan (YAFFS's way, the
//! baseline). The floor is what no mount can avoid: reading the checkpoint (its root,
//! directory and body slots) and programming one slot, timed on a fresh part of the same
//! model.

use flash::{DeviceClock, NandSim, NorSim, Simulated};
use flashfs::fs::ROOT_INO;
use flashfs::media::tag::{Kind, Tag};
use flashfs::{Fs, FsConfig, FtlConfig, LogConfig, NandSegments, NorSegments};
use littlefs2::fs::Filesystem;
use littlefs2::path::PathBuf;
use serde::Serialize;

use super::flashfs_run::config;
use super::littlefs::{shared, LfsDevice, Nand1g, Shared, W25n01gv, W25q64jv};
use super::meter::{Probe, SimSegments};
use super::{meta, PeerDevice};
use crate::error::{BenchError, Context, Result};
use crate::tffs::device::{Uncounted, NOR_BLOCK_BYTES};

/// Bytes per write of the fill.
const FILL_WRITE: usize = 64 << 10;

/// One system's mount and first write on one half-full part.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HalfRow {
    /// Device preset.
    pub device: String,
    /// `flashfs` (from its checkpoint), `flashfs-scan` (the full scan) or `littlefs`.
    pub system: &'static str,
    /// Bytes the fill stored.
    pub stored_bytes: u64,
    /// Device time of the mount, milliseconds.
    pub mount_ms: f64,
    /// Device time of the first write (a 64-byte file created and synced), milliseconds.
    pub first_write_ms: f64,
    /// The two together.
    pub mount_first_write_ms: f64,
    /// Page (slot) reads of the mount and first write.
    pub page_reads: u64,
    /// flashfs from its checkpoint: device time of reading its checkpoint's slots and
    /// programming one slot, milliseconds.
    pub floor_ms: Option<f64>,
}

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Runs the experiment on `dev` (w25q64jv, w25n01gv or nand-1g).
pub fn run_half(dev: PeerDevice, seed: u64) -> Result<Vec<HalfRow>> {
    let spec = dev.spec()?;
    let what = || format!("simulating the {}", dev.preset());
    let mut rows = Vec::new();
    match (dev, spec) {
        (PeerDevice::W25q64jv, flash::DeviceSpec::Nor(s)) => {
            let segs = |s| -> Result<_> {
                let sim = Uncounted(NorSim::new(s, meta(dev, seed)).context(what)?);
                NorSegments::new(sim, NOR_BLOCK_BYTES).context(what)
            };
            flashfs_half(dev, segs(s)?, segs(s)?, &mut rows)?;
            let sim = shared(NorSim::new(s, meta(dev, seed)).context(what)?);
            littlefs_half::<W25q64jv>(dev, &sim, &mut rows)?;
        }
        (PeerDevice::W25n01gv | PeerDevice::Nand1g, flash::DeviceSpec::Nand(s)) => {
            let segs = |s| -> Result<_> {
                let sim = Uncounted(NandSim::new(s, meta(dev, seed)).context(what)?);
                NandSegments::new(sim).context(what)
            };
            flashfs_half(dev, segs(s)?, segs(s)?, &mut rows)?;
            let sim = shared(NandSim::new(s, meta(dev, seed)).context(what)?);
            if dev == PeerDevice::W25n01gv {
                littlefs_half::<W25n01gv>(dev, &sim, &mut rows)?;
            } else {
                littlefs_half::<Nand1g>(dev, &sim, &mut rows)?;
            }
        }
        _ => {
            return Err(BenchError::InvalidOptions(format!(
                "the half-full mount runs on w25q64jv, w25n01gv and nand-1g, not {}",
                dev.preset()
            )))
        }
    }
    Ok(rows)
}

/// Fills half of `segs`, then mounts from the checkpoint and by the scan, each followed by
/// the first write; `blank`, a fresh part of the same model, times the floor.
fn flashfs_half<D: SimSegments>(
    dev: PeerDevice,
    segs: D,
    mut blank: D,
    rows: &mut Vec<HalfRow>,
) -> Result<()> {
    let mut fs = Fs::format(segs, config()).context(|| "format".into())?;
    let ino = fs
        .create(ROOT_INO, b"data", 0o644, 0, 0)
        .context(|| "create".into())?
        .ino;
    let chunk = vec![0x5A; FILL_WRITE];
    let mut stored = 0u64;
    loop {
        let s = fs.statfs();
        if (s.blocks - s.blocks_free) * 2 >= s.blocks {
            break;
        }
        fs.write(ino, stored, &chunk).context(|| "fill".into())?;
        stored += FILL_WRITE as u64;
    }
    let mut d = fs.unmount().context(|| "unmount".into())?;
    for (system, scan) in [("flashfs", false), ("flashfs-scan", true)] {
        let cfg = FsConfig {
            ftl: FtlConfig {
                log: LogConfig {
                    scan_mount: scan,
                    ..LogConfig::default()
                },
                ..config().ftl
            },
            ..config()
        };
        let (t0, s0) = (d.sim().now(), d.sim().stats().clone());
        let mut fs = Fs::mount(d, cfg).context(|| format!("{system} mount"))?;
        let t1 = fs.now();
        let name = format!("first-{system}");
        let f = fs
            .create(ROOT_INO, name.as_bytes(), 0o644, 0, 0)
            .context(|| "first write".into())?
            .ino;
        fs.write(f, 0, &[0xA5; 64])
            .context(|| "first write".into())?;
        fs.fsync(f, false).context(|| "first write".into())?;
        let t2 = fs.now();
        let reads = Probe::stats(&fs).since(&s0).reads;
        let floor = match (scan, fs.ftl().log().checkpoint_len()) {
            (false, Some(n)) => Some(floor_ms(&mut blank, n)?),
            _ => None,
        };
        rows.push(HalfRow {
            device: dev.preset().to_string(),
            system,
            stored_bytes: stored,
            mount_ms: ms(t1 - t0),
            first_write_ms: ms(t2 - t1),
            mount_first_write_ms: ms(t2 - t0),
            page_reads: reads,
            floor_ms: floor,
        });
        d = fs.unmount().context(|| "unmount".into())?;
    }
    Ok(())
}

/// Device time of reading `n` slots and programming one, on `blank`.
fn floor_ms<D: SimSegments>(blank: &mut D, n: u32) -> Result<f64> {
    let geo = blank.geometry();
    let mut buf = vec![0u8; geo.slot_size as usize];
    let t0 = blank.sim().now();
    for i in 0..n {
        // Read results do not matter here, only their time: the slots are erased. Segment 0
        // takes the program.
        let seg = 1 + (i / geo.slots) % (geo.segments - 1);
        let _ = blank.read_slot(seg, i % geo.slots, &mut buf);
    }
    let tag = Tag {
        key: 0,
        seq: 1,
        kind: Kind::Sector,
        copy: false,
    };
    // A slot of data (erased bytes would not be programmed at all on NOR).
    buf.fill(0x5A);
    blank
        .write_slot(0, 0, &tag, &buf)
        .context(|| "the floor's program".into())?;
    Ok(ms(blank.sim().now() - t0))
}

/// The same on littlefs: the fill, then a mount and the first write.
fn littlefs_half<L: LfsDevice>(
    dev: PeerDevice,
    sim: &Shared<L::Sim>,
    rows: &mut Vec<HalfRow>,
) -> Result<()>
where
    Shared<L::Sim>: Probe,
{
    let lfs = |e: littlefs2::io::Error, what: &str| BenchError::Littlefs {
        context: what.to_string(),
        error: format!("error {}", e.code()),
    };
    let path = |p: &str| {
        PathBuf::try_from(p).map_err(|e| BenchError::Littlefs {
            context: format!("path {p:?}"),
            error: format!("{e:?}"),
        })
    };
    let mut storage = L::attach(sim.clone()).map_err(|error| BenchError::Flash {
        context: "attaching littlefs's driver".into(),
        error,
    })?;
    Filesystem::format(&mut storage).map_err(|e| lfs(e, "format"))?;
    let data = path("/data")?;
    let mut stored = 0u64;
    {
        let mut alloc = Filesystem::allocate();
        let fs = Filesystem::mount(&mut alloc, &mut storage).map_err(|e| lfs(e, "mount"))?;
        let chunk = vec![0x5A; FILL_WRITE];
        fs.create_file_and_then(&data, |f| {
            while fs.available_blocks()? * 2 > L::BLOCK_COUNT {
                f.write(&chunk)?;
                f.sync()?;
                stored += FILL_WRITE as u64;
            }
            Ok(())
        })
        .map_err(|e| lfs(e, "fill"))?;
    }
    let (t0, s0) = (sim.now(), sim.stats());
    let mut alloc = Filesystem::allocate();
    let fs = Filesystem::mount(&mut alloc, &mut storage).map_err(|e| lfs(e, "mount"))?;
    let t1 = sim.now();
    fs.create_file_and_then(&path("/first")?, |f| {
        f.write(&[0xA5; 64])?;
        f.sync()
    })
    .map_err(|e| lfs(e, "first write"))?;
    let t2 = sim.now();
    rows.push(HalfRow {
        device: dev.preset().to_string(),
        system: "littlefs",
        stored_bytes: stored,
        mount_ms: ms(t1 - t0),
        first_write_ms: ms(t2 - t1),
        mount_first_write_ms: ms(t2 - t0),
        page_reads: sim.stats().since(&s0).reads,
        floor_ms: None,
    });
    Ok(())
}
