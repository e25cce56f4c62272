//! Ryu & Park's seek test: one large file, 1-byte reads at fixed fractions of it in a
//! scattered order, their device time summed, right after the mount (the file's mapping
//! not yet in RAM: *unloaded*) and then again (*loaded*).

use std::time::Duration;

use flashfs::fs::ROOT_INO;
use flashfs::Fs;

use super::device::{discard, now, Dev};
use super::fill::{file_name, Pattern, CHUNK};
use super::probe::{fs_config, fs_mount_only, Measured};
use crate::error::{BenchError, Context, Result};

/// The paper's read positions, percent of the file, in its order.
pub const SEEK_ORDER_PCT: [u64; 11] = [0, 90, 20, 70, 40, 50, 60, 30, 80, 10, 100];

/// The seek test's measurements on one configuration.
#[derive(Debug, Clone, Copy)]
pub struct Seeks {
    /// The mount before the reads.
    pub mount: Measured,
    /// The reads right after the mount.
    pub unloaded: Duration,
    /// The same reads again.
    pub loaded: Duration,
}

/// Writes one file of `bytes` on a fresh volume of `dev` and unmounts it cleanly: the
/// state the test mounts.
pub fn prepare(dev: Dev, bytes: u64, pat: &Pattern, progress: &mut dyn FnMut(u64)) -> Result<Dev> {
    let mut fs = Fs::format(dev, fs_config(false)).context(|| "mkfs".into())?;
    let ino = fs
        .create(ROOT_INO, &file_name(0), 0o644, 0, 0)
        .context(|| "creating the file".into())?
        .ino;
    let mut off = 0;
    while off < bytes {
        let len = (bytes - off).min(CHUNK as u64) as usize;
        fs.write(ino, off, pat.file(0, off, len))
            .context(|| format!("writing at {off}"))?;
        off += len as u64;
        if off % (16 << 20) == 0 {
            fs.sync().context(|| "sync".into())?;
            progress(off);
        }
    }
    progress(off);
    fs.unmount().context(|| "unmount".into())
}

/// Mounts a copy of `state` and times the reads twice.
pub fn measure(state: &Dev, scan: bool, bytes: u64, pat: &Pattern) -> Result<Seeks> {
    let (mut fs, mount) = fs_mount_only(state, scan)?;
    let ino = fs
        .lookup(ROOT_INO, &file_name(0))
        .context(|| "looking up the file".into())?
        .ino;
    let pass = |fs: &mut Fs<Dev>| -> Result<Duration> {
        let mut total = Duration::ZERO;
        for pct in SEEK_ORDER_PCT {
            let off = (bytes / 100 * pct).min(bytes.saturating_sub(1));
            let mut b = [0u8; 1];
            let t = now(fs.ftl().log().device());
            let n = fs
                .read(ino, off, &mut b)
                .context(|| format!("reading at {off}"))?;
            total += now(fs.ftl().log().device()) - t;
            if n != 1 || b[0] != pat.file(0, off, 1)[0] {
                return Err(BenchError::Mismatch(format!("the seek file at {off}")));
            }
        }
        Ok(total)
    };
    let unloaded = pass(&mut fs)?;
    let loaded = pass(&mut fs)?;
    discard(fs);
    Ok(Seeks {
        mount,
        unloaded,
        loaded,
    })
}
