//! `flashfs fsck`: check a volume, and with `--repair` fix what can be fixed. Exit codes
//! are e2fsck's: 0 clean, 1 errors corrected, 4 errors left uncorrected, 8 operational error
//! (no image, not a flash image, no volume on it), 16 usage error.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{anyhow, Context};
use flashfs::{BlockDevice, FtlConfig};

use crate::device;
use crate::native::AnyFs;
use crate::units::count;
use crate::volume::{self, AnyFtl, Format, ImageStore, Media};
use crate::Global;

/// Examples shown by `flashfs fsck --help`.
pub const EXAMPLES: &str = "\
Examples:
  flashfs fsck dev.img              check; the image is only read
  flashfs fsck dev.img --repair     check and fix what can be fixed

Exit codes (as e2fsck): 0 no errors, 1 errors corrected, 4 errors left uncorrected,
8 operational error (missing or unreadable image, no volume on it), 16 usage error.
The native file system is checked by mounting it and verifying the namespace (entries,
link counts, reachability), the extents, the free-space accounting and that every block in
use reads back, its data checked against the checksum stored with it (a block of a file
that fails is reported with the file's path, its inode and the byte range it held); each
problem is printed on its own line.
The block device is checked by mounting it, comparing the map its checkpoint gave with the
one a scan of every segment rebuilds (the scan's is taken; --repair writes a new
checkpoint), and reading every sector; a sector whose flash can no longer be read has lost
its data: --repair makes it read as zeros, so the file system on top can be checked.";

/// Options of `flashfs fsck`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The image file to check.
    pub image: PathBuf,
    /// Fix what can be fixed (without it the image is only read).
    #[arg(long)]
    pub repair: bool,
}

/// No errors.
pub const CLEAN: u8 = 0;
/// Errors were found and corrected.
pub const CORRECTED: u8 = 1;
/// Errors were found and left.
pub const UNCORRECTED: u8 = 4;
/// The check could not be made.
pub const OPERATIONAL: u8 = 8;
/// The command line did not parse.
pub const USAGE: u8 = 16;

/// Sectors read per request.
const BATCH: u64 = 64;

/// Runs `flashfs fsck`; returns the exit code. An error is an operational error (8).
pub fn run(a: &Args, global: Global, out: &mut dyn Write) -> anyhow::Result<u8> {
    let path = a.image.as_path();
    let shown = device::shown(path);
    let images = volume::open_images(path, a.repair)?;
    let (media, format) = Media::open_probed(images).with_context(|| shown.clone())?;
    let code = match format {
        Format::Unformatted => {
            return Err(anyhow!(
                "{shown}: no flashfs volume on the image (`flashfs mkfs` formats one)"
            ))
        }
        Format::BlockDevice { .. } => check_ftl(media, a, global, out)?,
        Format::Native { .. } => check_native(media, a, global, out)?,
    };
    Ok(code)
}

/// Checks the block device: mounts it and reads every sector.
fn check_ftl(
    media: Media<ImageStore>,
    a: &Args,
    global: Global,
    out: &mut dyn Write,
) -> anyhow::Result<u8> {
    let shown = device::shown(&a.image);
    let ftl = match AnyFtl::mount(media, FtlConfig::default()) {
        Ok(f) => f,
        Err(e) => return mount_failed(e, &shown, out),
    };
    // The scan is the reference: a checkpoint that disagrees with it is damage.
    let (mut ftl, audit) = ftl
        .audit(FtlConfig::default())
        .with_context(|| format!("{shown}: cannot scan the block device"))?;
    let audit = audit.unwrap_or_default();
    let (n, ss) = (ftl.sectors(), ftl.sector_size());
    let bar = global.progress_bar(n, "checking {bar:40} {pos}/{len} sectors {eta}");
    let mut lost = Vec::new();
    let mut buf = vec![0u8; BATCH as usize * ss];
    let mut at = 0;
    while at < n {
        let k = BATCH.min(n - at);
        let chunk = &mut buf[..k as usize * ss];
        if let Err(e) = ftl.read(at, chunk) {
            if !e.is_unreadable() {
                return Err(anyhow::Error::new(e).context(format!("{shown}: sector {at}")));
            }
            // Find the sectors that fail.
            for s in at..at + k {
                match ftl.read(s, &mut chunk[..ss]) {
                    Ok(()) => {}
                    Err(e) if e.is_unreadable() => lost.push(s),
                    Err(e) => {
                        return Err(anyhow::Error::new(e).context(format!("{shown}: sector {s}")))
                    }
                }
            }
        }
        at += k;
        bar.set_position(at);
    }
    bar.finish_and_clear();
    let (space, log) = ftl.usage();
    let state = format!(
        "{} of {} sectors in use, {} of {} segments free",
        count(space.used_bytes / ss as u64),
        count(n),
        count(log.free_segments),
        count(log.segments)
    );
    let mut code = CLEAN;
    if !audit.is_clean() {
        let differing = &audit.differing;
        let miscounted: Vec<u64> = audit.miscounted.iter().map(|&s| u64::from(s)).collect();
        let mut what = Vec::new();
        if !differing.is_empty() {
            what.push(format!(
                "the place of {} sector{} ({})",
                count(differing.len() as u64),
                device::plural(differing.len() as u64),
                list(differing)
            ));
        }
        if audit.map_unreadable {
            what.push("a page of its map, which does not read back whole".into());
        }
        if !miscounted.is_empty() {
            what.push(format!(
                "the live count of {} segment{} ({})",
                count(miscounted.len() as u64),
                device::plural(miscounted.len() as u64),
                list(&miscounted)
            ));
        }
        writeln!(
            out,
            "{shown}: the checkpoint disagrees with a scan on {}; the scan's map is taken{}",
            what.join(" and "),
            if a.repair {
                " and a new checkpoint written"
            } else {
                "; `--repair` writes a new checkpoint"
            }
        )?;
        code = if a.repair { CORRECTED } else { UNCORRECTED };
    }
    if lost.is_empty() {
        if code == CLEAN {
            writeln!(out, "{shown}: clean, {state}")?;
        }
    } else if !a.repair {
        writeln!(
            out,
            "{shown}: {} unreadable sector{} (data lost): {}; `--repair` makes them read as zeros",
            count(lost.len() as u64),
            device::plural(lost.len() as u64),
            list(&lost)
        )?;
        code = UNCORRECTED;
    } else {
        for run in runs(&lost) {
            ftl.trim(run.0, run.1)
                .with_context(|| format!("{shown}: cannot repair sector {}", run.0))?;
        }
        let mut check = vec![0u8; ss];
        for &s in &lost {
            ftl.read(s, &mut check)
                .with_context(|| format!("{shown}: sector {s} still fails"))?;
        }
        writeln!(
            out,
            "{shown}: {} unreadable sector{} now read as zeros (their data was lost): {}; {state}",
            count(lost.len() as u64),
            device::plural(lost.len() as u64),
            list(&lost)
        )?;
        code = code.max(CORRECTED);
    }
    // A clean volume is left as it was, its checkpoint current.
    if a.repair && code != CLEAN {
        ftl.close().with_context(|| shown.clone())?;
    }
    Ok(code)
}

/// A volume that does not mount has errors left; an image that cannot be read is an
/// operational error.
fn mount_failed(e: anyhow::Error, shown: &str, out: &mut dyn Write) -> anyhow::Result<u8> {
    match e.downcast_ref::<flashfs::Error>() {
        Some(flashfs::Error::Flash(flash::FlashError::Io(_))) | None => {
            Err(e.context(format!("{shown}: cannot mount the block device")))
        }
        Some(fe) => {
            writeln!(
                out,
                "{shown}: the block device does not mount: {}",
                crate::one_line(&fe.to_string())
            )?;
            Ok(UNCORRECTED)
        }
    }
}

/// Checks the native file system on `media` (read-only unless `--repair`): mounts it, then
/// checks the namespace, the extents, the free space and that every block in use reads
/// back. Each problem is printed on its own line. Returns the exit code, as [`check_ftl`].
fn check_native(
    media: Media<ImageStore>,
    a: &Args,
    global: Global,
    out: &mut dyn Write,
) -> anyhow::Result<u8> {
    let shown = device::shown(&a.image);
    let bar = global.progress_bar(1, "{spinner} checking {msg}");
    bar.set_message(shown.clone());
    bar.enable_steady_tick(std::time::Duration::from_millis(100));
    let mut fs = match AnyFs::mount(media, crate::native::config(None, None)) {
        Ok(fs) => fs,
        Err(e) => {
            bar.finish_and_clear();
            return match e.downcast_ref::<flashfs::Error>() {
                Some(flashfs::Error::Flash(flash::FlashError::Io(_))) | None => {
                    Err(e.context(format!("{shown}: cannot mount the file system")))
                }
                Some(fe) => {
                    writeln!(
                        out,
                        "{shown}: the file system does not mount: {}",
                        crate::one_line(&fe.to_string())
                    )?;
                    Ok(UNCORRECTED)
                }
            };
        }
    };
    let report = crate::with_fs!(&mut fs, f => f.check(a.repair));
    bar.finish_and_clear();
    let report = report.with_context(|| format!("{shown}: the check stopped"))?;
    for p in &report.problems {
        let what = crate::one_line(&p.what);
        let at = match (&p.path, p.ino) {
            (Some(path), Some(i)) => format!("{path} (inode {i}): "),
            (None, Some(i)) => format!("inode {i}: "),
            _ => String::new(),
        };
        let fixed = if p.repaired { " (repaired)" } else { "" };
        writeln!(out, "{shown}: {at}{what}{fixed}")?;
    }
    let state = format!(
        "{} inode{} ({} director{}), {} of {} blocks in use",
        count(report.inodes),
        device::plural(report.inodes),
        count(report.directories),
        if report.directories == 1 { "y" } else { "ies" },
        count(report.used_blocks),
        count(report.used_blocks + report.free_blocks)
    );
    let problems = report.problems.len() as u64;
    let left = report.unrepaired() as u64;
    let code = if report.is_clean() {
        writeln!(out, "{shown}: clean, {state}")?;
        CLEAN
    } else if left > 0 {
        let hint = if a.repair {
            ""
        } else {
            "; `--repair` fixes what can be fixed"
        };
        writeln!(
            out,
            "{shown}: {} problem{} left{hint}; {state}",
            count(left),
            device::plural(left)
        )?;
        UNCORRECTED
    } else {
        writeln!(
            out,
            "{shown}: {} problem{} corrected; {state}",
            count(problems),
            device::plural(problems)
        )?;
        CORRECTED
    };
    if a.repair {
        fs.close().with_context(|| shown.clone())?;
    } else {
        drop(fs.abandon());
    }
    Ok(code)
}

/// Consecutive sectors as (first, count).
fn runs(sectors: &[u64]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &s in sectors {
        match out.last_mut() {
            Some((first, n)) if *first + *n == s => *n += 1,
            _ => out.push((s, 1)),
        }
    }
    out
}

/// `3, 7-9, 12` (at most ten runs, then `...`).
fn list(sectors: &[u64]) -> String {
    let runs = runs(sectors);
    let mut parts: Vec<String> = runs
        .iter()
        .take(10)
        .map(|&(s, n)| {
            if n == 1 {
                s.to_string()
            } else {
                format!("{s}-{}", s + n - 1)
            }
        })
        .collect();
    if runs.len() > 10 {
        parts.push("...".into());
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sector_lists_are_runs() {
        assert_eq!(runs(&[3, 7, 8, 9, 12]), vec![(3, 1), (7, 3), (12, 1)]);
        assert_eq!(list(&[3, 7, 8, 9, 12]), "3, 7-9, 12");
        let many: Vec<u64> = (0..30).map(|i| i * 2).collect();
        assert!(list(&many).ends_with(", ..."));
        assert_eq!(list(&[]), "");
    }
}
