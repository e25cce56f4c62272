//! `flashfs scrub`: read back every live byte of a volume, move data whose bit errors the
//! ECC corrects to fresh blocks while it still can, and report what was already lost.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{anyhow, Context};
use flashfs::log::ScrubReport;
use flashfs::FtlConfig;

use crate::device;
use crate::native::AnyFs;
use crate::units::{bytes, count};
use crate::volume::{self, AnyFtl, Format, Media};

/// Examples shown by `flashfs scrub --help`.
pub const EXAMPLES: &str = "\
Examples:
  flashfs scrub dev.img             read every live byte back; move wearing data

Every live slot is read and its data checked against the checksum stored with it. On NAND,
a segment holding a slot whose bit errors needed half the ECC's strength or more is moved
to a fresh one (its live data copied, the block erased) before the errors outgrow the ECC.
Data that no longer reads back is reported: the sectors of the block device, or the files
and byte ranges of the native file system; it reads as an I/O error from then on, until
written again. Exit code 0 when nothing was lost, 4 when some data was (as fsck's errors
left), 1 when the scrub could not run.";

/// Options of `flashfs scrub`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The image file to scrub (changed in place).
    pub image: PathBuf,
}

/// Exit code when the scrub found data lost (fsck's "errors left uncorrected").
pub const LOST: u8 = 4;

/// Runs `flashfs scrub`; returns the exit code: 0 nothing lost, [`LOST`] data lost.
pub fn run(a: &Args, out: &mut dyn Write) -> anyhow::Result<u8> {
    let path = a.image.as_path();
    let shown = device::shown(path);
    let images = volume::open_images(path, true)?;
    let (media, format) = Media::open_probed(images).with_context(|| shown.clone())?;
    let (report, lost) = match format {
        Format::Unformatted => {
            return Err(anyhow!(
                "{shown}: no flashfs volume on the image (`flashfs mkfs` formats one)"
            ))
        }
        Format::BlockDevice { .. } => {
            let mut ftl = AnyFtl::mount(media, FtlConfig::default())
                .with_context(|| format!("{shown}: cannot mount the block device"))?;
            let (report, sectors) = ftl.scrub().with_context(|| shown.clone())?;
            ftl.close().with_context(|| shown.clone())?;
            let lost: Vec<String> = sectors.iter().map(|s| format!("sector {s}")).collect();
            (report, lost)
        }
        Format::Native { .. } => {
            let mut fs = AnyFs::mount(media, crate::native::config(None, None))
                .with_context(|| format!("{shown}: cannot mount the file system"))?;
            let scrubbed = crate::with_fs!(&mut fs, f => f.scrub());
            let (report, problems) = scrubbed.with_context(|| shown.clone())?;
            fs.close().with_context(|| shown.clone())?;
            let lost = problems
                .iter()
                .map(|p| {
                    let at = match (&p.path, p.ino) {
                        (Some(path), Some(i)) => format!("{path} (inode {i}): "),
                        (None, Some(i)) => format!("inode {i}: "),
                        _ => String::new(),
                    };
                    format!("{at}{}", crate::one_line(&p.what))
                })
                .collect();
            (report, lost)
        }
    };
    for l in &lost {
        writeln!(out, "{shown}: lost: {l}")?;
    }
    writeln!(out, "{shown}: {}", summary(&report))?;
    Ok(if report.lost_slots > 0 { LOST } else { 0 })
}

/// One line of what a scrub did.
fn summary(r: &ScrubReport) -> String {
    format!(
        "{} slots read ({}), {} bit error{} corrected, {} segment{} moved, {} slot{} lost",
        count(r.slots),
        bytes(r.bytes),
        count(r.corrected_bits),
        device::plural(r.corrected_bits),
        count(r.refreshed),
        device::plural(r.refreshed),
        count(r.lost_slots),
        device::plural(r.lost_slots),
    )
}
