//! `flashfs mkfs`: create an image of a simulated device and format a volume on it.
//!
//! The image is built under a temporary name next to IMAGE and renamed over it only once the
//! format succeeded, so a failed `mkfs` leaves IMAGE exactly as it was (or absent). With
//! `--nvram` the volume lies on two devices, NVRAM beside NAND or NOR, in two images: IMAGE
//! (the flash) and IMAGE.nvram, each built the same way.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};
use flash::preset::Preset;
use flash::spec::DeviceSpec;
use flash::store::FileStore;
use flashfs::{BlockDevice, FtlConfig, LogConfig};

use crate::device::{self, AtPath};
use crate::native::AnyFs;
use crate::units::{bytes, count};
use crate::volume::{self, AnyFtl, Images, LogUsage, Media, NOR_SECTOR};

/// Examples shown by `flashfs mkfs --help`.
pub const EXAMPLES: &str = "\
Examples:
  flashfs mkfs dev.img --preset nand-128m                   the native file system on 128 MiB of NAND
  flashfs mkfs dev.img --preset nand-128m --ftl             a block device on 128 MiB of NAND
  flashfs mkfs dev.img --preset mlc-flexfs --regions bm     MLC NAND with SLC and MLC regions
  flashfs mkfs dev.img --preset nand-128m --ftl --sectors 20000 --force
  flashfs mkfs nor.img --preset 28f008sa --ftl --sector-size 4096 --reserve 4
  flashfs mkfs small.img --preset nand-1g --blocks 512        a custom geometry: 512 blocks of nand-1g
  flashfs mkfs fram.img --preset cy15b102q                   the native file system on 256 KiB of FRAM
  flashfs mkfs dev.img --preset nand-128m --nvram fram-8m    NAND for data, FRAM for metadata:
                                                             dev.img and dev.img.nvram
  flashfs mkfs dev.img --preset w25q64jv --nvram cy15b102q   SPI NOR for data, SPI FRAM for metadata

Without --ftl the image holds the native file system (blocks of a NAND page, or 512 bytes
on NOR and NVRAM, which is laid out as NOR of 8 KiB units or more): mount it with `flashfs mount`, or use `flashfs ls/put/get` on the image directly.
The block device exports fixed-size sectors (on NAND a page, elsewhere 512 bytes unless
--sector-size says otherwise); `flashfs mount` shows it as one file that any file system
can be made on. The cleaning policy is chosen when mounting (`flashfs mount --policy`).
With --nvram the volume lies on two devices: the metadata (index, journal, checkpoint) on
the NVRAM, in IMAGE.nvram, and the data on the flash (SLC NAND or NOR), in IMAGE, with
small files' first 16 KiB on the NVRAM while it has room. Every command given
IMAGE opens IMAGE.nvram with it; keep the two files together.";

/// Options of `flashfs mkfs`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The image file to create.
    pub image: PathBuf,
    /// The device (see `flashfs presets`; `st10f280/N` for N KiB units).
    #[arg(long, value_name = "NAME")]
    pub preset: String,
    /// An NVRAM part (`fram-8m`, `cy15b102q`) beside the NAND or NOR of --preset, for the
    /// volume's metadata: its image is IMAGE.nvram.
    #[arg(long, value_name = "NAME")]
    pub nvram: Option<String>,
    /// Format a block device (FTL) of fixed-size sectors rather than the native file system.
    #[arg(long)]
    pub ftl: bool,
    /// Replace IMAGE if it exists.
    #[arg(long)]
    pub force: bool,
    /// Seed of the choices fixed at creation (which NAND blocks leave the factory bad).
    #[arg(long, value_name = "S", default_value_t = 0)]
    pub seed: u64,
    /// Sectors the block device exports [default: all the flash can hold].
    #[arg(long, value_name = "N")]
    pub sectors: Option<u32>,
    /// Bytes per sector on NOR flash and NVRAM: a power of two, at least 64 [default: 512].
    /// On NAND a sector is a page.
    #[arg(long, value_name = "BYTES")]
    pub sector_size: Option<u32>,
    /// A custom geometry: this many erase blocks (NAND) or units (NOR) instead of the
    /// preset's, with its timings, endurance and ECC.
    #[arg(long, value_name = "N")]
    pub blocks: Option<u32>,
    /// A custom geometry: erase units of this many bytes (NOR), or blocks of this many pages
    /// (NAND), instead of the preset's.
    #[arg(long, value_name = "N")]
    pub block_size: Option<u32>,
    /// Free segments held back for the cleaner, at least 2: each one more lowers the size
    /// exported and leaves the cleaner more room.
    #[arg(long, value_name = "N", default_value_t = LogConfig::default().reserve)]
    pub reserve: u32,
    /// On MLC NAND, which segments go to SLC mode (FlexFS's regions), recorded in the volume
    /// for every later mount: mlc-only (none), slc-only (all: half the capacity), baseline
    /// (writes to SLC, the cleaner moves them to MLC when it needs the space), bm (the
    /// baseline, and idle time moves them), da (bm, and only the share of writes that idle
    /// time can move goes to SLC; the default on MLC NAND), la (da, and data rewritten soon
    /// stays in SLC).
    #[arg(long, value_name = "SETTING",
          value_parser = ["mlc-only", "slc-only", "baseline", "bm", "da", "la"])]
    pub regions: Option<String>,
}

/// What a format made, for the one line `mkfs` prints.
pub struct Formatted {
    /// The images' stores, flushed.
    pub images: Images<FileStore>,
    /// What the volume offers, e.g. `block device of 61,000 sectors x 2,048 B (119 MiB)`.
    pub summary: String,
}

/// An image `mkfs` makes: the preset of its device, where it goes, and the temporary name
/// it is built under.
struct Target {
    preset: Preset,
    path: PathBuf,
    temp: PathBuf,
}

/// Runs `flashfs mkfs`.
pub fn run(a: &Args, out: &mut dyn Write) -> anyhow::Result<()> {
    let mut preset = device::lookup(&a.preset)?;
    preset.spec = custom_geometry(a, preset.spec)?;
    check_options(a, &preset)?;
    let nvram = match &a.nvram {
        Some(name) => {
            Some(volume::nvram_beside(&preset.spec, &format!("--preset {}", a.preset), name)?.0)
        }
        None => None,
    };
    let path = a.image.as_path();
    let shown = device::shown(path);
    let beside = volume::nvram_path(path);
    device::check_target(path, a.force)?;
    // An NVRAM image left beside IMAGE would be taken for the new volume's: it is replaced,
    // or removed, only with --force.
    let stale = device::check_target(&beside, a.force)? && nvram.is_none();
    let main = Target {
        temp: temp_path(path)?,
        path: path.to_path_buf(),
        preset,
    };
    let nvram = match nvram {
        Some(preset) => Some(Target {
            temp: temp_path(&beside)?,
            path: beside.clone(),
            preset,
        }),
        None => None,
    };
    let made = build(a, &main, nvram.as_ref()).and_then(|summary| {
        // The NVRAM first: a flash image renamed into place alone would pair with the
        // stale NVRAM image beside it.
        for t in nvram.iter().chain([&main]) {
            std::fs::rename(&t.temp, &t.path)
                .map_err(device::io_error)
                .with_context(|| format!("{}: cannot replace", device::shown(&t.path)))?;
        }
        if stale {
            std::fs::remove_file(&beside)
                .map_err(device::io_error)
                .with_context(|| format!("{}: cannot remove", device::shown(&beside)))?;
        }
        Ok(summary)
    });
    let summary = match made {
        Ok(s) => s,
        Err(e) => {
            for t in nvram.iter().chain([&main]) {
                let _ = std::fs::remove_file(&t.temp);
            }
            return Err(e);
        }
    };
    let part = |p: &Preset| {
        format!(
            "{} ({}, {})",
            p.name,
            p.spec.kind(),
            bytes(p.spec.capacity())
        )
    };
    let beside_line = match &nvram {
        Some(t) => format!(
            ", metadata on {} in {}",
            part(&t.preset),
            device::shown(&t.path)
        ),
        None => String::new(),
    };
    writeln!(
        out,
        "formatted {shown}: {summary}, on {}{beside_line}, seed {}",
        part(&main.preset),
        a.seed
    )?;
    Ok(())
}

/// Refuses options that cannot apply, before anything is written.
/// The preset's device with the geometry the options give, checked as a simulator would.
fn custom_geometry(a: &Args, spec: DeviceSpec) -> anyhow::Result<DeviceSpec> {
    if a.blocks.is_none() && a.block_size.is_none() {
        return Ok(spec);
    }
    let custom = match spec {
        DeviceSpec::Nor(mut s) => {
            s.units = a.blocks.unwrap_or(s.units);
            s.unit_size = a.block_size.unwrap_or(s.unit_size);
            DeviceSpec::Nor(s)
        }
        DeviceSpec::Nand(mut s) => {
            s.blocks = a.blocks.unwrap_or(s.blocks);
            s.pages_per_block = a.block_size.unwrap_or(s.pages_per_block);
            DeviceSpec::Nand(s)
        }
        DeviceSpec::Nvram(_) => bail!("--blocks and --block-size apply to flash, not NVRAM"),
    };
    custom
        .validate()
        .map_err(|e| anyhow!("that geometry is not a device: {e}"))?;
    Ok(custom)
}

fn check_options(a: &Args, preset: &Preset) -> anyhow::Result<()> {
    let min = LogConfig::default().reserve;
    if a.reserve < min {
        return Err(anyhow!(
            "--reserve {}: the cleaner needs at least {min} free segments to survive every power cut",
            a.reserve
        ));
    }
    if let Some(n) = a.sector_size {
        match preset.spec {
            DeviceSpec::Nor(_) | DeviceSpec::Nvram(_) if n.is_power_of_two() && n >= 64 => {}
            DeviceSpec::Nor(_) | DeviceSpec::Nvram(_) => {
                return Err(anyhow!(
                    "--sector-size {n}: a sector is a power of two of at least 64 bytes"
                ))
            }
            DeviceSpec::Nand(s) => {
                return Err(anyhow!(
                    "--sector-size: on NAND a sector is a page ({} bytes on {})",
                    s.page_size,
                    preset.name
                ))
            }
        }
    }
    let mlc = matches!(preset.spec, DeviceSpec::Nand(s) if s.is_mlc());
    match a.regions.as_deref() {
        Some(r) if r != "mlc-only" && !mlc => {
            return Err(anyhow!(
                "--regions {r}: SLC mode exists only on MLC NAND ({} is not)",
                preset.name
            ))
        }
        _ => {}
    }
    if a.sectors == Some(0) {
        return Err(anyhow!(
            "--sectors 0: the block device needs at least one sector"
        ));
    }
    if !a.ftl && (a.sectors.is_some() || a.sector_size.is_some()) {
        return Err(anyhow!(
            "--sectors and --sector-size size the block device: add --ftl"
        ));
    }
    Ok(())
}

/// A name next to `path` for the image being built.
fn temp_path(path: &Path) -> anyhow::Result<PathBuf> {
    let name = path
        .file_name()
        .ok_or_else(|| anyhow!("{}: not a file name", device::shown(path)))?;
    let mut temp = std::ffi::OsString::from(".");
    temp.push(name);
    temp.push(format!(".mkfs-{}", std::process::id()));
    Ok(path.with_file_name(temp))
}

/// Creates the image of `main` and that of `nvram` (if any) under their temporary names and
/// formats the volume on them; returns the summary of the volume.
fn build(a: &Args, main: &Target, nvram: Option<&Target>) -> anyhow::Result<String> {
    let what = || device::shown(&a.image);
    let create = |t: &Target| -> anyhow::Result<FileStore> {
        device::create_image(&t.temp, &t.preset, a.seed)
            .map_err(|e| anyhow!("{}: {}", device::shown(&t.path), e.root_cause()))?;
        FileStore::open(&t.temp).at(&t.path)
    };
    let images = Images {
        main: create(main)?,
        nvram: nvram.map(create).transpose()?,
    };
    let slot = a.sector_size.unwrap_or(NOR_SECTOR);
    let media = Media::open(images, slot).with_context(what)?;
    let formatted = if a.ftl {
        format_ftl(media, a)
    } else {
        format_native(media, a)
    }
    .with_context(what)?;
    drop(formatted.images);
    Ok(formatted.summary)
}

/// How a volume on two devices shares its segments out, for the summary (nothing on one
/// device).
fn tiers_summary(log: &LogUsage) -> String {
    match &log.tiers {
        Some(t) => format!(
            " ({} segments on the NVRAM for metadata, {} on the flash for data)",
            count(t.fast_segments),
            count(t.bulk_segments)
        ),
        None => String::new(),
    }
}

/// Formats the block device on a fresh image.
fn format_ftl(media: Media<FileStore>, a: &Args) -> anyhow::Result<Formatted> {
    let config = FtlConfig {
        log: LogConfig {
            reserve: a.reserve,
            regions: regions(a),
            ..LogConfig::default()
        },
        sectors: a.sectors,
        ..FtlConfig::default()
    };
    let ftl = AnyFtl::format(media, config).context("cannot format the block device")?;
    let (ss, n) = (ftl.sector_size() as u64, ftl.sectors());
    let summary = format!(
        "block device (FTL) of {} sectors x {} B ({}){}",
        count(n),
        count(ss),
        bytes(n * ss),
        tiers_summary(&ftl.usage().1)
    );
    let images = ftl.close()?;
    Ok(Formatted { images, summary })
}

/// The regions setting asked for (clap allows only the names it parses).
fn regions(a: &Args) -> Option<flashfs::Regions> {
    a.regions.as_deref().and_then(flashfs::Regions::parse)
}

/// Formats the native file system on a fresh image.
fn format_native(media: Media<FileStore>, a: &Args) -> anyhow::Result<Formatted> {
    let mut config = crate::native::config(None, Some(a.reserve));
    config.ftl.log.regions = regions(a);
    let mut fs = AnyFs::format(media, config).context("cannot format the file system")?;
    let (space, log, info) = fs.usage()?;
    let summary = format!(
        "native file system of {} blocks x {} B ({}){}",
        count(info.blocks),
        count(u64::from(info.block_size)),
        bytes(space.capacity_bytes),
        tiers_summary(&log)
    );
    let images = fs.close()?;
    Ok(Formatted { images, summary })
}
