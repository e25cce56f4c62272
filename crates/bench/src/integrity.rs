//! Integrity: what reading back and checking every live byte costs, in device time, on a
//! volume filled with files — `fsck` ([`Fs::check`]: the index, the namespace and every
//! block in use, its data checked against its checksum) and a scrub ([`Fs::scrub`]: every
//! live slot read back) — and a scrub of the same volume after bit errors the ECC still
//! corrects were planted in some of its pages (the segments it then moves).

use flashfs::log::ScrubReport;
use flashfs::media::tag::TagState;
use flashfs::{Fs, FsConfig, Segments};
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use crate::error::{Context, Result};
use crate::mount::{copy, now, reads, Dev, FileSet, FsFill, Part, Pattern};

/// What to run.
#[derive(Debug, Clone)]
pub struct IntegrityOptions {
    /// Device preset (NAND).
    pub preset: String,
    /// How full the volume is, percent of its capacity.
    pub fill_percent: u64,
    /// The files written.
    pub file_set: FileSet,
    /// Pages given bit errors within the ECC before the last scrub.
    pub worn_pages: u32,
    /// Seed of the files and of the pages chosen.
    pub seed: u64,
}

impl Default for IntegrityOptions {
    fn default() -> Self {
        IntegrityOptions {
            preset: "nand-1g".into(),
            fill_percent: 90,
            file_set: FileSet::Small,
            worn_pages: 64,
            seed: 31,
        }
    }
}

impl IntegrityOptions {
    /// Seconds instead of minutes: the 128 MiB NAND half full.
    pub fn quick() -> Self {
        IntegrityOptions {
            preset: "nand-128m".into(),
            fill_percent: 50,
            worn_pages: 16,
            ..IntegrityOptions::default()
        }
    }
}

/// One measurement.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IntegrityRow {
    /// `fsck`, `scrub`, or `scrub-worn` (after bit errors were planted).
    pub op: &'static str,
    /// Device preset.
    pub preset: String,
    /// File data stored, MiB.
    pub stored_mib: f64,
    /// Files stored.
    pub files: u64,
    /// Device time of the operation, milliseconds.
    pub device_ms: f64,
    /// Page reads of the operation.
    pub page_reads: u64,
    /// File data stored over the device time: how fast the volume is verified, MiB/s.
    pub mib_per_s: f64,
    /// Live slots read back (scrub).
    pub slots: u64,
    /// Bit errors the ECC corrected in them (scrub).
    pub corrected_bits: u64,
    /// Segments moved to fresh ones (scrub).
    pub refreshed: u64,
    /// Slots or blocks found lost.
    pub lost: u64,
}

/// Fills a volume, then times `fsck`, a scrub, and a scrub after bit errors were planted,
/// each on a copy of the filled state; `progress` hears the bytes stored while filling.
pub fn run_integrity(
    opts: &IntegrityOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Vec<IntegrityRow>> {
    let part = Part::preset(&opts.preset);
    let mut fs = Fs::format(part.build(opts.seed)?, FsConfig::default())
        .context(|| format!("formatting {}", part.label()))?;
    let st = fs.statfs();
    let target = st.blocks * u64::from(st.block_size) * opts.fill_percent / 100;
    let pat = Pattern::new(opts.seed);
    let mut fill = FsFill::new(opts.file_set, opts.seed);
    fill.to(&mut fs, &pat, target, &mut |b| progress(b, target))?;
    let state = fs.unmount().context(|| "unmounting".into())?;
    let stored = fill.stored;
    let files = fill.files.len() as u64;
    let row = |op, dev: &Dev, t0, r0, rep: ScrubReport, lost| {
        let ms = (now(dev) - t0).as_secs_f64() * 1e3;
        IntegrityRow {
            op,
            preset: opts.preset.clone(),
            stored_mib: stored as f64 / (1 << 20) as f64,
            files,
            device_ms: ms,
            page_reads: reads(dev) - r0,
            mib_per_s: stored as f64 / (1 << 20) as f64 / (ms / 1e3),
            slots: rep.slots,
            corrected_bits: rep.corrected_bits,
            refreshed: rep.refreshed,
            lost,
        }
    };
    let mut rows = Vec::new();

    let mut fs = Fs::mount(copy(&state), FsConfig::default()).context(|| "mounting".into())?;
    let (t0, r0) = (now(fs.ftl().log().device()), reads(fs.ftl().log().device()));
    let report = fs.check(false).context(|| "fsck".into())?;
    let lost = report.problems.len() as u64;
    rows.push(row(
        "fsck",
        fs.ftl().log().device(),
        t0,
        r0,
        ScrubReport::default(),
        lost,
    ));

    for op in ["scrub", "scrub-worn"] {
        let mut dev = copy(&state);
        if op == "scrub-worn" {
            plant_bit_errors(&mut dev, opts.worn_pages, opts.seed);
        }
        let mut fs = Fs::mount(dev, FsConfig::default()).context(|| "mounting".into())?;
        let (t0, r0) = (now(fs.ftl().log().device()), reads(fs.ftl().log().device()));
        let (rep, _) = fs.scrub().context(|| op.into())?;
        rows.push(row(
            op,
            fs.ftl().log().device(),
            t0,
            r0,
            rep,
            rep.lost_slots,
        ));
    }
    Ok(rows)
}

/// Gives `n` written slots, drawn at random, as many stuck bit errors as the ECC corrects
/// in a codeword (each slot once, so that none goes beyond).
fn plant_bit_errors(dev: &mut Dev, n: u32, seed: u64) {
    let geo = dev.geometry();
    let t = dev.ecc_strength().clamp(1, u32::from(u8::MAX)) as u8;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0xB17);
    let mut planted = std::collections::BTreeSet::new();
    // Erased slots are passed over; the tries are bounded all the same.
    for _ in 0..n * 1000 {
        if planted.len() == n as usize {
            break;
        }
        let seg = (rng.next_u64() % u64::from(geo.segments)) as u32;
        let slot = (rng.next_u64() % u64::from(geo.slots)) as u32;
        if planted.contains(&(seg, slot))
            || !matches!(dev.read_tag(seg, slot), Ok(TagState::Valid(_)))
        {
            continue;
        }
        let at = dev.slot_page(seg, slot);
        if dev.flash_mut().0.inject_bit_errors(at, t).is_ok() {
            planted.insert((seg, slot));
        }
    }
}

/// The rows as a table.
pub fn table(rows: &[IntegrityRow]) -> String {
    let mut s = format!(
        "{:<11} {:<10} {:>10} {:>6} {:>11} {:>10} {:>9} {:>9} {:>10} {:>9} {:>5}\n",
        "OP",
        "PRESET",
        "STORED MiB",
        "FILES",
        "DEVICE ms",
        "PAGE READS",
        "MiB/s",
        "SLOTS",
        "CORRECTED",
        "MOVED",
        "LOST"
    );
    for r in rows {
        s += &format!(
            "{:<11} {:<10} {:>10.1} {:>6} {:>11.1} {:>10} {:>9.1} {:>9} {:>10} {:>9} {:>5}\n",
            r.op,
            r.preset,
            r.stored_mib,
            r.files,
            r.device_ms,
            r.page_reads,
            r.mib_per_s,
            r.slots,
            r.corrected_bits,
            r.refreshed,
            r.lost
        );
    }
    s
}
