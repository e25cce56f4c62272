//! Volumes on images: what an image holds (a block device, the native file system, or
//! nothing yet), the block device opened or formatted on any flash medium, its space and
//! segment usage in figures, and a copy-on-write view that lets a command mount an image
//! without changing a byte of it.
//!
//! A volume on two devices (NVRAM beside NAND or NOR) lives in two image files: the flash
//! image named on the command line and the NVRAM image beside it, the same path with
//! `.nvram` appended ([`nvram_path`]). Every command that opens an image opens both when the
//! second exists, as one medium ([`Media::Tiered`], [`Media::TieredNor`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};
use flash::spec::DeviceSpec;
use flash::store::Store;
use flash::{NandSim, NorSim, NvramSim, Simulated};
use flashfs::ftl::Audit;
use flashfs::log::checkpoint::ANCHOR_HEAD;
use flashfs::log::segment::SegState;
use flashfs::media::tag::{Volume, FORMAT_BLOCK_DEVICE};
use flashfs::media::tiered::{
    NvramBesideNor, NvramNand, Tiered, MAX_BULK_SEGMENTS, MIN_FAST_SEGMENTS,
};
use flashfs::media::{blocks_per_segment_within, HeaderState, Tier};
use flashfs::{BlockDevice, Ftl, FtlConfig, Log, NandSegments, NorSegments, Segments};
use serde::Serialize;

use crate::device::{self, AtPath, NorPart};
use crate::units;

/// Sector size of the block device on NOR flash unless `mkfs --sector-size` says otherwise
/// (on NAND a sector is a page).
pub const NOR_SECTOR: u32 = 512;

/// What an image holds, found from its segment headers without mounting anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// No volume: a fresh device, or one whose headers are all gone.
    Unformatted,
    /// The block device (FTL) with sectors of `sector_size` bytes.
    BlockDevice {
        /// Bytes per sector.
        sector_size: u32,
    },
    /// A log volume of another format: the native file system.
    Native {
        /// The volume's format code.
        code: u8,
        /// Bytes per slot.
        slot_size: u32,
    },
}

impl Format {
    /// `ftl`, `native` or `unformatted`, for JSON.
    pub fn key(&self) -> &'static str {
        match self {
            Format::Unformatted => "unformatted",
            Format::BlockDevice { .. } => "ftl",
            Format::Native { .. } => "native",
        }
    }
}

/// The path of the NVRAM image of a volume on two devices whose flash image is `image`:
/// `image` with `.nvram` appended (`dev.img` → `dev.img.nvram`).
pub fn nvram_path(image: &Path) -> PathBuf {
    let mut p = image.as_os_str().to_owned();
    p.push(".nvram");
    PathBuf::from(p)
}

/// The stores of a volume's image files: the one named on the command line, and on a
/// volume on two devices the NVRAM image beside it.
#[derive(Debug)]
pub struct Images<S> {
    /// The image named on the command line (the flash, on two devices).
    pub main: S,
    /// The NVRAM image beside it, if the volume lies on two devices.
    pub nvram: Option<S>,
}

impl<S> Images<S> {
    /// One image file.
    pub fn one(main: S) -> Self {
        Images { main, nvram: None }
    }

    /// The stores with the paths they belong to, `image` being the one named on the command
    /// line: the flash's first, so that a copy written back in this order has its data in
    /// place before the metadata that names it.
    pub fn with_paths(self, image: &Path) -> impl Iterator<Item = (S, PathBuf)> {
        std::iter::once((self.main, image.to_path_buf()))
            .chain(self.nvram.map(|n| (n, nvram_path(image))))
    }
}

impl<S: Store> Images<S> {
    /// Makes every image durable on the host.
    pub fn flush(&mut self) -> flash::Result<()> {
        self.main.flush()?;
        match &mut self.nvram {
            Some(n) => n.flush(),
            None => Ok(()),
        }
    }
}

/// NVRAM beside NAND, both simulated on images.
pub type Hybrid<S> = NvramNand<NvramSim<S>, NandSim<S>>;

/// NVRAM beside NOR, both simulated on images.
pub type HybridNor<S> = NvramBesideNor<NvramSim<S>, NorSim<S>>;

/// The medium of an image seen the way the log sees it: segments of slots.
// Two devices make the largest variant; a command holds one value of it at a time, so a
// box would only add a step to every call.
#[allow(clippy::large_enum_variant)]
pub enum Media<S: Store> {
    /// NOR flash, or NVRAM laid out as NOR, with slots of a chosen size.
    Nor(NorSegments<NorPart<S>>),
    /// NAND flash, SLC or MLC: a slot is a page.
    Nand(NandSegments<NandSim<S>>),
    /// NVRAM beside SLC NAND, one volume: the metadata on the NVRAM, the data on the NAND.
    Tiered(Hybrid<S>),
    /// NVRAM beside NOR, one volume: the metadata on the NVRAM, the data on the NOR.
    TieredNor(HybridNor<S>),
}

/// The medium of an image in words, e.g. `SLC NAND` or `NVRAM`.
pub fn medium_name(spec: &DeviceSpec) -> &'static str {
    match spec {
        DeviceSpec::Nor(_) => "NOR flash",
        DeviceSpec::Nand(s) if s.is_mlc() => "MLC NAND",
        DeviceSpec::Nand(_) => "SLC NAND",
        DeviceSpec::Nvram(_) => "NVRAM",
    }
}

/// Refuses two devices that cannot make one volume: the NVRAM must be NVRAM, and the
/// flash SLC NAND or NOR (the log keeps no SLC/MLC regions across two devices). The
/// messages name the parts by `main` and `nvram`, how the caller shows them.
pub fn check_pair(
    main_spec: &DeviceSpec,
    nvram_spec: &DeviceSpec,
    main: &str,
    nvram: &str,
) -> anyhow::Result<()> {
    if !matches!(nvram_spec, DeviceSpec::Nvram(_)) {
        bail!(
            "{nvram} is {}, not NVRAM: a volume on two devices keeps its metadata on NVRAM",
            medium_name(nvram_spec)
        );
    }
    if !matches!(main_spec, DeviceSpec::Nand(s) if !s.is_mlc())
        && !matches!(main_spec, DeviceSpec::Nor(_))
    {
        bail!(
            "{main} is {}: a volume on two devices keeps its data on SLC NAND or NOR flash",
            medium_name(main_spec)
        );
    }
    Ok(())
}

/// The NVRAM preset `name` to put beside a flash of `main_spec` (named `main` in messages,
/// as the command line gave it), refused in one line if the two make no volume.
pub fn nvram_beside(
    main_spec: &DeviceSpec,
    main: &str,
    name: &str,
) -> anyhow::Result<(flash::preset::Preset, flash::NvramSpec)> {
    let nvram = device::lookup(name)?;
    check_pair(main_spec, &nvram.spec, main, &format!("--nvram {name}"))?;
    match nvram.spec {
        DeviceSpec::Nvram(spec) => Ok((nvram, spec)),
        _ => bail!("--nvram {name} is not NVRAM"),
    }
}

/// Opens the image at `path`, for writing or not, and the NVRAM image beside it
/// ([`nvram_path`]) when there is one.
pub fn open_images(path: &Path, writable: bool) -> anyhow::Result<Images<ImageStore>> {
    let main = ImageStore::open(path, writable)?;
    let beside = nvram_path(path);
    let nvram = match std::fs::symlink_metadata(&beside) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Images::one(main)),
        _ => ImageStore::open(&beside, writable)?,
    };
    let (main_spec, _) = flash::image::read_header(&main).at(path)?;
    let (nvram_spec, _) = flash::image::read_header(&nvram).at(&beside)?;
    check_pair(
        &main_spec,
        &nvram_spec,
        &device::shown(path),
        &device::shown(&beside),
    )?;
    Ok(Images {
        main,
        nvram: Some(nvram),
    })
}

impl<S: Store> Media<S> {
    /// Opens the images in `images`; on NOR, slots are `nor_slot` bytes.
    pub fn open(images: Images<S>, nor_slot: u32) -> anyhow::Result<Self> {
        let Images { main: store, nvram } = images;
        let (spec, _) = flash::image::read_header(&store).map_err(device::explain)?;
        device::check_ram(&spec)?;
        if let Some(nvram) = nvram {
            return Self::open_tiered(store, spec, nvram, nor_slot);
        }
        Ok(match spec {
            DeviceSpec::Nor(_) | DeviceSpec::Nvram(_) => {
                let part = NorPart::open(store).map_err(device::explain)?;
                Media::Nor(NorSegments::new(part, nor_slot).map_err(anyhow::Error::new)?)
            }
            DeviceSpec::Nand(_) => {
                let sim = NandSim::open(store).map_err(device::explain)?;
                Media::Nand(NandSegments::new(sim).map_err(anyhow::Error::new)?)
            }
        })
    }

    /// Joins the flash image in `flash` (whose device is `spec`) and the NVRAM image in
    /// `nvram` as one volume's two tiers; on NOR, slots are `nor_slot` bytes.
    fn open_tiered(flash: S, spec: DeviceSpec, nvram: S, nor_slot: u32) -> anyhow::Result<Self> {
        let (nvram_spec, _) = flash::image::read_header(&nvram).map_err(device::explain)?;
        check_pair(&spec, &nvram_spec, "the image", "the NVRAM image")?;
        let nvram = NvramSim::open(nvram).map_err(device::explain)?;
        let too_small = |segment: u64, e: flashfs::Error| {
            anyhow!(
                "the NVRAM ({}) cannot hold {MIN_FAST_SEGMENTS} segments of the flash's ({} \
                 of data each; {e}): a larger NVRAM part, or fewer flash blocks, makes a volume",
                units::bytes(nvram_spec.capacity()),
                units::bytes(segment)
            )
        };
        if let DeviceSpec::Nor(_) = spec {
            let nor = NorSim::open(flash).map_err(device::explain)?;
            let nor = NorSegments::new(nor, nor_slot).map_err(anyhow::Error::new)?;
            let g = nor.geometry();
            let joined = Tiered::nvram_beside_nor(nvram, nor)
                .map_err(|e| too_small(u64::from(g.slots) * u64::from(g.slot_size), e))?;
            return Ok(Media::TieredNor(joined));
        }
        let nand = NandSim::open(flash).map_err(device::explain)?;
        let segment = {
            use flash::NandFlash;
            let s = nand.spec();
            u64::from(blocks_per_segment_within(s, MAX_BULK_SEGMENTS))
                * u64::from(s.pages_per_block)
                * u64::from(s.page_size)
        };
        let joined = Tiered::nvram_beside_nand(nvram, nand).map_err(|e| too_small(segment, e))?;
        Ok(Media::Tiered(joined))
    }

    /// Opens the images in `images` and finds what they hold; on NOR the slots are then the
    /// size the volume was formatted with.
    pub fn open_probed(images: Images<S>) -> anyhow::Result<(Self, Format)> {
        let mut media = Self::open(images, NOR_SECTOR)?;
        let format = media.probe()?;
        if let (Media::Nor(seg), Format::BlockDevice { sector_size: size })
        | (
            Media::Nor(seg),
            Format::Native {
                slot_size: size, ..
            },
        ) = (&media, format)
        {
            if seg.geometry().slot_size != size {
                let Media::Nor(seg) = media else {
                    unreachable!("matched above")
                };
                let sim = seg.into_inner();
                media = Media::Nor(NorSegments::new(sim, size).map_err(|_| {
                    anyhow!("the volume's slot size ({size} B) does not fit the device")
                })?);
            }
        }
        Ok((media, format))
    }

    /// What the segment headers say the image holds: the newest valid header names the
    /// volume, as at mount.
    pub fn probe(&mut self) -> anyhow::Result<Format> {
        let newest = match self {
            Media::Nor(s) => {
                let newest = newest_volume(s)?;
                if let Some(v) = newest {
                    if !holds_its_anchors(s, &v)? {
                        bail!(
                            "the volume's anchors are not on this image: it lies on two \
                             devices, and its NVRAM image (the image's path with .nvram \
                             appended) is missing"
                        );
                    }
                }
                newest
            }
            Media::Nand(s) => {
                let newest = newest_volume(s)?;
                if newest.is_some_and(|v| is_tiered_layout(s, &v)) {
                    bail!(
                        "the volume lies on two devices, and its NVRAM image (the image's \
                         path with .nvram appended) is missing"
                    );
                }
                newest
            }
            Media::Tiered(s) => tiered_volume(s)?,
            Media::TieredNor(s) => tiered_volume(s)?,
        };
        Ok(match newest {
            None => Format::Unformatted,
            Some(v) => {
                let slot_size = 1u32
                    .checked_shl(v.slot_shift as u32)
                    .filter(|&s| s >= 64)
                    .ok_or_else(|| anyhow!("corrupt volume: impossible slot size"))?;
                if v.format == FORMAT_BLOCK_DEVICE {
                    Format::BlockDevice {
                        sector_size: slot_size,
                    }
                } else {
                    Format::Native {
                        code: v.format,
                        slot_size,
                    }
                }
            }
        })
    }

    /// The flash simulator underneath (on two devices, the flash's: the NVRAM is written in
    /// place and keeps no erase counts).
    pub fn sim(&self) -> &dyn Simulated {
        match self {
            Media::Nor(s) => s.flash(),
            Media::Nand(s) => s.flash(),
            Media::Tiered(s) => s.bulk().flash(),
            Media::TieredNor(s) => s.bulk().flash(),
        }
    }

    /// Blocks marked bad (factory or later); `None` on NOR and NVRAM, which have no marks.
    pub fn bad_blocks(&mut self) -> flash::Result<Option<u64>> {
        match self {
            Media::Nand(s) => device::bad_blocks(s.flash_mut()).map(Some),
            Media::Tiered(s) => device::bad_blocks(s.bulk_mut().flash_mut()).map(Some),
            Media::Nor(_) | Media::TieredNor(_) => Ok(None),
        }
    }
}

/// Whether `v`, found on NAND opened alone, was formatted with the segments a volume on two
/// devices gives this NAND (fewer and larger than it has alone): then its metadata lies on
/// an NVRAM image that was not opened with it.
fn is_tiered_layout<S: Store>(nand: &NandSegments<NandSim<S>>, v: &Volume) -> bool {
    use flash::NandFlash;
    let tiered = blocks_per_segment_within(nand.flash().spec(), MAX_BULK_SEGMENTS);
    tiered != nand.units_per_segment() && 1u32.checked_shl(u32::from(v.unit_shift)) == Some(tiered)
}

/// Whether the segments `v` names as its anchors hold an anchor's header here, or `v`
/// keeps no anchors. The flash of a volume on two devices opened alone names anchors on
/// the NVRAM (the volume's first segments), which here are the flash's first segments,
/// opened for data or not at all; a volume on one device always holds the newest of its
/// anchors (SPEC.md §3.5).
fn holds_its_anchors<D: Segments>(dev: &mut D, v: &Volume) -> anyhow::Result<bool> {
    let Some(anchors) = v.anchors else {
        return Ok(true);
    };
    for seg in anchors {
        if u32::from(seg) >= dev.geometry().segments {
            return Ok(false);
        }
        if let HeaderState::Valid(h) = dev
            .read_header(u32::from(seg))
            .map_err(anyhow::Error::new)?
        {
            if h.head == ANCHOR_HEAD {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// The volume on two devices, if any: each tier's newest header must name the same volume
/// (a flash image beside another volume's NVRAM image would otherwise mount as garbage).
/// Right after a format the flash may hold no header yet.
fn tiered_volume<F: Segments, B: Segments>(
    dev: &mut Tiered<F, B>,
) -> anyhow::Result<Option<Volume>> {
    let fast = newest_volume(dev.fast_mut())?;
    let bulk = newest_volume(dev.bulk_mut())?;
    let units = dev.bulk().units_per_segment();
    match (fast, bulk) {
        (_, Some(b)) if 1u32.checked_shl(u32::from(b.unit_shift)) != Some(units) => Err(anyhow!(
            "the flash image holds a volume of its own (formatted without --nvram), and the \
             NVRAM image beside it is not part of it"
        )),
        (Some(f), Some(b)) if f != b => Err(anyhow!(
            "the NVRAM image and the flash image hold different volumes (an NVRAM image of \
             another volume, or one formatted alone?)"
        )),
        (None, Some(_)) => Err(anyhow!(
            "the NVRAM image holds no volume, but the flash image does: the volume's metadata \
             is not there (a fresh NVRAM image, or another one?)"
        )),
        (f, _) => Ok(f),
    }
}

/// The volume named by the newest valid segment header, if any.
fn newest_volume<D: Segments>(dev: &mut D) -> anyhow::Result<Option<Volume>> {
    let mut newest: Option<(u64, flashfs::media::tag::Volume)> = None;
    for seg in 0..dev.geometry().segments {
        if let HeaderState::Valid(h) = dev.read_header(seg).map_err(anyhow::Error::new)? {
            if newest.is_none_or(|(seq, _)| h.open_seq > seq) {
                newest = Some((h.open_seq, h.volume));
            }
        }
    }
    Ok(newest.map(|(_, v)| v))
}

/// Rebuilds an enum over the media (`Nor`, `Nand`, `Tiered`) as another: `$body` maps the
/// value inside each variant of `$from` to the same variant of `$to`.
macro_rules! rewrap {
    ($e:expr, $from:ident => $to:ident, $f:ident => $body:expr) => {
        match $e {
            $from::Nor($f) => $to::Nor($body),
            $from::Nand($f) => $to::Nand($body),
            $from::Tiered($f) => $to::Tiered($body),
            $from::TieredNor($f) => $to::TieredNor($body),
        }
    };
}
pub(crate) use rewrap;

/// The block device on any medium.
// Two devices make the largest variant; a command holds one value of it at a time, so a
// box would only add a step to every call.
#[allow(clippy::large_enum_variant)]
pub enum AnyFtl<S: Store> {
    /// On NOR flash.
    Nor(Ftl<NorSegments<NorPart<S>>>),
    /// On NAND flash.
    Nand(Ftl<NandSegments<NandSim<S>>>),
    /// On NVRAM beside NAND.
    Tiered(Ftl<Hybrid<S>>),
    /// On NVRAM beside NOR.
    TieredNor(Ftl<HybridNor<S>>),
}

/// Calls `$f` with the block device inside `$ftl`, whatever the medium.
macro_rules! with_ftl {
    ($ftl:expr, $f:ident => $body:expr) => {
        match $ftl {
            AnyFtl::Nor($f) => $body,
            AnyFtl::Nand($f) => $body,
            AnyFtl::Tiered($f) => $body,
            AnyFtl::TieredNor($f) => $body,
        }
    };
}

impl<S: Store + Send + 'static> AnyFtl<S> {
    /// Formats the block device on `media`.
    pub fn format(media: Media<S>, config: FtlConfig) -> anyhow::Result<Self> {
        Ok(rewrap!(media, Media => AnyFtl, s => Ftl::format(s, config)?))
    }

    /// Mounts the block device on `media`.
    pub fn mount(media: Media<S>, config: FtlConfig) -> anyhow::Result<Self> {
        Ok(rewrap!(media, Media => AnyFtl, s => Ftl::mount(s, config)?))
    }

    /// Mounts again by a full scan and compares with this mount's map, if it came from a
    /// checkpoint ([`Ftl::audit`]): the scanned block device and what disagrees.
    pub fn audit(self, config: FtlConfig) -> anyhow::Result<(Self, Option<Audit>)> {
        let audit;
        let ftl = rewrap!(self, AnyFtl => AnyFtl, f => {
            let (f, d) = f.audit(config)?;
            audit = d;
            f
        });
        Ok((ftl, audit))
    }

    /// Scrubs the block device ([`Ftl::scrub`]): what it found, and the sectors lost.
    pub fn scrub(&mut self) -> anyhow::Result<(flashfs::log::ScrubReport, Vec<u64>)> {
        let scrubbed = with_ftl!(self, f => f.scrub());
        Ok(scrubbed?)
    }

    /// Space and log usage now.
    pub fn usage(&self) -> (Space, LogUsage) {
        with_ftl!(self, f => ftl_usage(f))
    }

    /// Uses `d` of idle device time to clean ahead of need and migrate ([`Ftl::idle`]);
    /// returns the device time the work took.
    pub fn idle(&mut self, d: std::time::Duration) -> flashfs::Result<std::time::Duration> {
        with_ftl!(self, f => f.idle(d))
    }

    /// Makes what was written durable on the device and in the host file.
    pub fn sync(&mut self) -> anyhow::Result<()> {
        with_ftl!(self, f => {
            f.flush()?;
            f.log_mut().device_mut().sync_image().map_err(device::explain)
        })
    }

    /// What the host wrote and the log programmed since the format, if known, and whether
    /// that counts every session (see [`Ftl::lifetime_complete`]).
    pub fn lifetime(&self) -> (Option<flashfs::fs::Lifetime>, bool) {
        with_ftl!(self, f => (f.lifetime(), f.lifetime_complete()))
    }

    /// Closes the block device (recording its lifetime counters), lets every background
    /// erase finish and gives the stores back, flushed.
    pub fn close(self) -> anyhow::Result<Images<S>> {
        with_ftl!(self, f => release(f.close()?))
    }
}

/// Makes the images of `dev` durable (background erases finished) and gives their stores
/// back, flushed.
pub fn release<D: Medium>(mut dev: D) -> anyhow::Result<Images<D::Store>> {
    dev.sync_image().map_err(device::explain)?;
    let mut images = dev.into_images();
    images.flush().map_err(device::explain)?;
    Ok(images)
}

impl<S: Store> BlockDevice for AnyFtl<S> {
    fn sector_size(&self) -> usize {
        with_ftl!(self, f => f.sector_size())
    }

    fn sectors(&self) -> u64 {
        with_ftl!(self, f => f.sectors())
    }

    fn read(&mut self, sector: u64, buf: &mut [u8]) -> flashfs::Result<()> {
        with_ftl!(self, f => f.read(sector, buf))
    }

    fn write(&mut self, sector: u64, data: &[u8]) -> flashfs::Result<()> {
        with_ftl!(self, f => f.write(sector, data))
    }

    fn flush(&mut self) -> flashfs::Result<()> {
        with_ftl!(self, f => f.flush())
    }

    fn trim(&mut self, sector: u64, count: u64) -> flashfs::Result<()> {
        with_ftl!(self, f => f.trim(sector, count))
    }
}

/// A volume's space as its user sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Space {
    /// Bytes the volume offers.
    pub capacity_bytes: u64,
    /// Bytes holding data.
    pub used_bytes: u64,
    /// Bytes free.
    pub free_bytes: u64,
    /// The same in the volume's own units, e.g. `6,000 of 61,000 sectors of 2,048 B in use`.
    pub detail: String,
}

/// The log underneath a volume: segments, live and dead data, wear of the order of writes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogUsage {
    /// Bytes per slot.
    pub slot_bytes: u64,
    /// Segments (erase blocks; on NOR with small units, several units erased together).
    pub segments: u64,
    /// Erase units per segment.
    pub units_per_segment: u64,
    /// Slots per segment.
    pub slots_per_segment: u64,
    /// Segments free for writing (erased, or waiting for their erase).
    pub free_segments: u64,
    /// Segments holding data or open for writing.
    pub segments_in_use: u64,
    /// Segments retired as bad.
    pub bad_segments: u64,
    /// On MLC NAND (which has an SLC mode): the segments in use in SLC mode and in MLC mode,
    /// FlexFS's regions (SPEC.md §2.3a). `None` on other media.
    pub regions: Option<Regions>,
    /// On a volume on two devices: its segments on each. `None` on one device.
    pub tiers: Option<Tiers>,
    /// Live slots (the newest checkpoint's pages among them).
    pub live_slots: u64,
    /// Slots the newest checkpoint's body and directory take (0 without one).
    pub checkpoint_slots: u64,
    /// How the mount found the log: `checkpoint` (read from the newest checkpoint, SPEC
    /// §3.5) or `scan` (every header and tag read).
    pub mounted_from: &'static str,
    /// Whether the volume keeps checkpoints.
    pub checkpoints: Checkpoints,
    /// Bytes of the block device's sector map in RAM after the mount (its pages and run
    /// lists, under `FtlConfig::map_cache`).
    pub map_cache_bytes: u64,
    /// The most heap the mount held (`None` where the program does not count its heap).
    pub mount_heap_bytes: Option<u64>,
    /// Slots that cleaning every segment holding dead data would free.
    pub reclaimable_slots: u64,
    /// The log's newest sequence number: one is used per slot the volume writes (about the
    /// slots written since the format; the cleaner's copies keep the number they copy).
    pub newest_sequence: u64,
    /// Segments in use by live fraction, in tenths: bin i counts segments whose live
    /// fraction lies in [i/10, (i+1)/10) (the last bin includes 1).
    pub utilization_histogram: [u64; 10],
}

/// The segments of a volume on two devices: the NVRAM's (the fast tier, numbered first),
/// which hold the metadata, and the flash's (the bulk tier), which hold the data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Tiers {
    /// Segments on the NVRAM.
    pub fast_segments: u64,
    /// Of them, the segments holding data or open for writing.
    pub fast_segments_in_use: u64,
    /// Live slots on the NVRAM: the metadata in use (and the newest checkpoint).
    pub fast_live_slots: u64,
    /// Bytes of those slots.
    pub fast_live_bytes: u64,
    /// Segments on the flash.
    pub bulk_segments: u64,
    /// Of them, the segments holding data or open for writing.
    pub bulk_segments_in_use: u64,
    /// Live slots on the flash.
    pub bulk_live_slots: u64,
    /// Bytes of those slots.
    pub bulk_live_bytes: u64,
}

/// The SLC and MLC regions of an MLC part: their sizes, and what migration did as the
/// volume's lifetime counters record it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Regions {
    /// The volume's setting (`mlc-only`, `slc-only`, `baseline`, `bm`, `da`, `la`).
    pub setting: &'static str,
    /// Segments in use in SLC mode.
    pub slc_segments: u64,
    /// Segments in use in MLC mode.
    pub mlc_segments: u64,
    /// Bytes migration moved from SLC segments to MLC ones over the volume's life (`None`
    /// where the counters are unknown).
    pub migrated_bytes: Option<u64>,
    /// FlexFS's α when the counters were last recorded: the share of new data dynamic
    /// allocation sent to SLC segments.
    pub alpha: Option<f64>,
    /// FlexFS's γ likewise: the share the wear budget allowed.
    pub gamma: Option<f64>,
}

impl Regions {
    /// Takes what migration did from the volume's lifetime counters.
    pub fn record(&mut self, lifetime: Option<&flashfs::fs::Lifetime>) {
        self.migrated_bytes = lifetime.map(|l| l.migrated_bytes);
        let shares = lifetime.and_then(|l| l.shares);
        self.alpha = shares.map(|s| s.alpha());
        self.gamma = shares.map(|s| s.gamma());
    }
}

/// The usage of `log`.
pub fn log_usage<D: Segments>(log: &Log<D>) -> LogUsage {
    let geo = log.geometry();
    let segs = log.segments();
    let mut hist = [0u64; 10];
    let (mut live, mut reclaimable, mut in_use) = (0, 0, 0);
    let mut tiers = Tiers::default();
    for (i, s) in segs.iter().enumerate() {
        live += u64::from(s.live());
        let (segments, used, slots) = match log.device().tier(i as u32) {
            Tier::Fast => (
                &mut tiers.fast_segments,
                &mut tiers.fast_segments_in_use,
                &mut tiers.fast_live_slots,
            ),
            Tier::Bulk => (
                &mut tiers.bulk_segments,
                &mut tiers.bulk_segments_in_use,
                &mut tiers.bulk_live_slots,
            ),
        };
        *segments += 1;
        *used += u64::from(s.in_use());
        *slots += u64::from(s.live());
        if s.in_use() {
            in_use += 1;
            let fraction = s.live() as f64 / geo.slots.max(1) as f64;
            hist[((fraction * 10.0) as usize).min(9)] += 1;
        }
        if s.cleanable() {
            reclaimable += geo.slots.saturating_sub(s.live()) as u64;
        }
    }
    LogUsage {
        slot_bytes: geo.slot_size as u64,
        segments: geo.segments as u64,
        units_per_segment: u64::from(log.device().units_per_segment()),
        slots_per_segment: geo.slots as u64,
        free_segments: log.free_segments() as u64,
        segments_in_use: in_use,
        bad_segments: segs.iter().filter(|s| s.state == SegState::Bad).count() as u64,
        regions: log.device().has_slc_mode().then(|| {
            let (slc, mlc) = log.region_segments();
            Regions {
                setting: log.regions().name(),
                slc_segments: u64::from(slc),
                mlc_segments: u64::from(mlc),
                migrated_bytes: None,
                alpha: None,
                gamma: None,
            }
        }),
        tiers: log.device().is_tiered().then(|| Tiers {
            fast_live_bytes: tiers.fast_live_slots * geo.slot_size as u64,
            bulk_live_bytes: tiers.bulk_live_slots * geo.slot_size as u64,
            ..tiers
        }),
        live_slots: live,
        checkpoint_slots: log.checkpoint_slots(),
        mounted_from: if log.restored() { "checkpoint" } else { "scan" },
        checkpoints: if log.keeps_checkpoints() {
            Checkpoints::Kept
        } else {
            Checkpoints::None
        },
        map_cache_bytes: 0,
        mount_heap_bytes: None,
        reclaimable_slots: reclaimable,
        newest_sequence: log.last_seq(),
        utilization_histogram: hist,
    }
}

/// Whether a volume keeps checkpoints (JSON: `kept`, `none`, `too-large`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Checkpoints {
    /// It does (a mount scans only where none is current).
    Kept,
    /// It does not: a device of fewer than 256 segments, one too small for them beside the
    /// volume, or anchors that failed.
    None,
    /// It would, but no checkpoint root can name this map's directory: every mount scans
    /// (SPEC.md §3.5).
    TooLarge,
}

/// The log's usage under a block device: with its map in RAM and whether its checkpoints fit.
pub fn ftl_log_usage<D: Segments>(ftl: &Ftl<D>) -> LogUsage {
    let mut log = log_usage(ftl.log());
    log.map_cache_bytes = ftl.map_cache_stats().0 as u64;
    if log.checkpoints == Checkpoints::Kept && !ftl.checkpoints_fit() {
        log.checkpoints = Checkpoints::TooLarge;
    }
    log
}

fn ftl_usage<D: Segments>(ftl: &Ftl<D>) -> (Space, LogUsage) {
    let ss = ftl.sector_size() as u64;
    let (n, used) = (ftl.sectors(), ftl.mapped_sectors());
    let space = Space {
        capacity_bytes: n * ss,
        used_bytes: used * ss,
        free_bytes: (n - used) * ss,
        detail: format!(
            "{} of {} sectors of {} B in use",
            units::count(used),
            units::count(n),
            units::count(ss)
        ),
    };
    let mut log = ftl_log_usage(ftl);
    if let Some(r) = &mut log.regions {
        r.record(ftl.lifetime().as_ref());
    }
    (space, log)
}

/// An image opened for a command: written through to the file, or read from the file with
/// whatever is written kept in RAM (the file never changes).
#[derive(Debug)]
pub enum ImageStore {
    /// Read and written.
    File(flash::store::FileStore),
    /// Only read.
    ReadOnly(Overlay<device::ReadOnlyFile>),
}

impl ImageStore {
    /// Opens the image at `path`, for writing or not.
    pub fn open(path: &Path, writable: bool) -> anyhow::Result<Self> {
        let shown = device::shown(path);
        let file = device::ReadOnlyFile::open(path).with_context(|| shown.clone())?;
        if writable {
            drop(file);
            Ok(ImageStore::File(
                flash::store::FileStore::open(path).at(path)?,
            ))
        } else {
            Ok(ImageStore::ReadOnly(Overlay::new(file)))
        }
    }
}

impl ImageStore {
    /// Bytes the image takes on the host disk.
    pub fn allocated_bytes(&self) -> anyhow::Result<u64> {
        match self {
            ImageStore::File(s) => s.allocated_bytes().map_err(device::explain),
            ImageStore::ReadOnly(s) => s.base().allocated_bytes(),
        }
    }
}

impl Store for ImageStore {
    fn len(&self) -> u64 {
        match self {
            ImageStore::File(s) => s.len(),
            ImageStore::ReadOnly(s) => s.len(),
        }
    }

    fn read(&self, off: u64, buf: &mut [u8]) -> flash::Result<()> {
        match self {
            ImageStore::File(s) => s.read(off, buf),
            ImageStore::ReadOnly(s) => s.read(off, buf),
        }
    }

    fn write(&mut self, off: u64, data: &[u8]) -> flash::Result<()> {
        match self {
            ImageStore::File(s) => s.write(off, data),
            ImageStore::ReadOnly(s) => s.write(off, data),
        }
    }

    fn zero(&mut self, off: u64, len: u64) -> flash::Result<()> {
        match self {
            ImageStore::File(s) => s.zero(off, len),
            ImageStore::ReadOnly(s) => s.zero(off, len),
        }
    }

    fn flush(&mut self) -> flash::Result<()> {
        match self {
            ImageStore::File(s) => s.flush(),
            ImageStore::ReadOnly(s) => s.flush(),
        }
    }
}

const CHUNK: u64 = 4096;

/// A store that never writes to the one beneath: what is written is kept in RAM, over it.
/// A read-only command can so mount an image (a mount may record what it finds) and leave
/// every byte of the file as it was.
#[derive(Debug)]
pub struct Overlay<S> {
    base: S,
    chunks: BTreeMap<u64, Box<[u8]>>,
}

impl<S: Store> Overlay<S> {
    /// A view of `base` that keeps writes to itself.
    pub fn new(base: S) -> Self {
        Overlay {
            base,
            chunks: BTreeMap::new(),
        }
    }

    /// Pieces of `off..off + n`: (chunk, offset in chunk, offset in buffer, length).
    fn pieces(off: u64, n: usize) -> impl Iterator<Item = (u64, usize, usize, usize)> {
        let end = off + n as u64;
        let mut at = off;
        std::iter::from_fn(move || {
            if at >= end {
                return None;
            }
            let chunk = at / CHUNK;
            let within = (at % CHUNK) as usize;
            let len = ((CHUNK - at % CHUNK).min(end - at)) as usize;
            let piece = (chunk, within, (at - off) as usize, len);
            at += len as u64;
            Some(piece)
        })
    }

    fn check(&self, off: u64, n: u64) -> flash::Result<()> {
        match off.checked_add(n) {
            Some(end) if end <= self.base.len() => Ok(()),
            _ => Err(flash::FlashError::OutOfRange { addr: off, len: n }),
        }
    }

    fn chunk_mut(&mut self, chunk: u64) -> flash::Result<&mut [u8]> {
        if !self.chunks.contains_key(&chunk) {
            let start = chunk * CHUNK;
            let len = CHUNK.min(self.base.len() - start) as usize;
            let mut b = vec![0u8; len].into_boxed_slice();
            self.base.read(start, &mut b)?;
            self.chunks.insert(chunk, b);
        }
        Ok(self.chunks.get_mut(&chunk).expect("inserted above"))
    }
}

impl<S> Overlay<S> {
    /// The store underneath, as it was.
    pub fn base(&self) -> &S {
        &self.base
    }

    /// Copies everything written over the store underneath into `dst` (the same image,
    /// opened for writing); chunks of zeros become holes.
    pub fn write_back<T: Store>(&self, dst: &mut T) -> flash::Result<()> {
        for (&chunk, data) in &self.chunks {
            let off = chunk * CHUNK;
            if data.iter().all(|&b| b == 0) {
                dst.zero(off, data.len() as u64)?;
            } else {
                dst.write(off, data)?;
            }
        }
        dst.flush()
    }
}

impl<S: Store> Store for Overlay<S> {
    fn len(&self) -> u64 {
        self.base.len()
    }

    fn read(&self, off: u64, buf: &mut [u8]) -> flash::Result<()> {
        self.check(off, buf.len() as u64)?;
        for (chunk, within, at, len) in Self::pieces(off, buf.len()) {
            match self.chunks.get(&chunk) {
                Some(c) => buf[at..at + len].copy_from_slice(&c[within..within + len]),
                None => self
                    .base
                    .read(chunk * CHUNK + within as u64, &mut buf[at..at + len])?,
            }
        }
        Ok(())
    }

    fn write(&mut self, off: u64, data: &[u8]) -> flash::Result<()> {
        self.check(off, data.len() as u64)?;
        for (chunk, within, at, len) in Self::pieces(off, data.len()) {
            self.chunk_mut(chunk)?[within..within + len].copy_from_slice(&data[at..at + len]);
        }
        Ok(())
    }

    fn zero(&mut self, off: u64, len: u64) -> flash::Result<()> {
        self.check(off, len)?;
        let mut at = off;
        while at < off + len {
            let n = (CHUNK - at % CHUNK).min(off + len - at);
            let within = (at % CHUNK) as usize;
            self.chunk_mut(at / CHUNK)?[within..within + n as usize].fill(0);
            at += n;
        }
        Ok(())
    }
}

/// A medium a volume runs on, able to give its images back.
pub trait Medium: Segments + Send + 'static {
    /// Where the images live.
    type Store: Store;
    /// Makes the images durable on the host (background erases finished).
    fn sync_image(&mut self) -> flash::Result<()>;
    /// Gives the images' stores back.
    fn into_images(self) -> Images<Self::Store>;
}

impl<S: Store + Send + 'static> Medium for NorSegments<NorPart<S>> {
    type Store = S;
    fn sync_image(&mut self) -> flash::Result<()> {
        Simulated::flush(self.flash_mut())
    }
    fn into_images(self) -> Images<S> {
        Images::one(self.into_inner().into_store())
    }
}

impl<S: Store + Send + 'static> Medium for NandSegments<NandSim<S>> {
    type Store = S;
    fn sync_image(&mut self) -> flash::Result<()> {
        Simulated::flush(self.flash_mut())
    }
    fn into_images(self) -> Images<S> {
        Images::one(self.into_inner().into_store())
    }
}

impl<S: Store + Send + 'static> Medium for Hybrid<S> {
    type Store = S;
    fn sync_image(&mut self) -> flash::Result<()> {
        Simulated::flush(self.bulk_mut().flash_mut())?;
        Simulated::flush(self.fast_mut().flash_mut())
    }
    fn into_images(self) -> Images<S> {
        let (nvram, nand) = self.into_inner();
        Images {
            main: nand.into_inner().into_store(),
            nvram: Some(nvram.into_inner().into_inner().into_store()),
        }
    }
}

impl<S: Store + Send + 'static> Medium for HybridNor<S> {
    type Store = S;
    fn sync_image(&mut self) -> flash::Result<()> {
        Simulated::flush(self.bulk_mut().flash_mut())?;
        Simulated::flush(self.fast_mut().flash_mut())
    }
    fn into_images(self) -> Images<S> {
        let (nvram, nor) = self.into_inner();
        Images {
            main: nor.into_inner().into_store(),
            nvram: Some(nvram.into_inner().into_inner().into_store()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flash::store::RamStore;

    #[test]
    fn overlay_keeps_writes_to_itself() {
        let mut base = RamStore::new(3 * CHUNK + 100);
        base.write(CHUNK - 2, &[1, 2, 3, 4]).unwrap();
        let mut o = Overlay::new(base.clone());
        o.write(CHUNK - 1, &[9, 9]).unwrap();
        o.zero(3 * CHUNK + 50, 50).unwrap();
        let mut buf = [0u8; 4];
        o.read(CHUNK - 2, &mut buf).unwrap();
        assert_eq!(buf, [1, 9, 9, 4]);
        base.read(CHUNK - 2, &mut buf).unwrap();
        assert_eq!(buf, [1, 2, 3, 4]);
        assert!(o.write(3 * CHUNK + 99, &[1, 2]).is_err());
        assert!(o.read(u64::MAX, &mut buf).is_err());
    }
}
