//! `flashfs info`: what an image holds, how full it is and how worn, as text, JSON and
//! plots. The image is only read: whatever mounting it records stays in memory. A volume on
//! two devices is shown whole: both images, and the segments on each.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use flash::spec::DeviceSpec;
use flash::store::Store;
use flashfs::FtlConfig;
use flashfs_bench::heap::{CountingAlloc, HeapMeter};
use serde::Serialize;

use crate::device::{self, AtPath, Spread};
use crate::native::{AnyFs, NativeInfo};
use crate::units::{self, bytes, count};
use crate::volume::{self, AnyFtl, Checkpoints, Format, ImageStore, LogUsage, Media, Space};

/// Examples shown by `flashfs info --help`.
pub const EXAMPLES: &str = "\
Examples:
  flashfs info dev.img                   format, space, inodes, commits, wear
  flashfs info dev.img --json
  flashfs info dev.img --plot out/       also writes out/erase-counts.{png,svg} and
                                         out/segment-utilization.{png,svg}

The image is only read, never changed. On a volume on two devices (`mkfs --nvram`) the
NVRAM image beside it, IMAGE.nvram, is shown too, with the segments on each device and
the metadata live on the NVRAM.";

/// Options of `flashfs info`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The image file to inspect (it is only read).
    pub image: PathBuf,
    /// One JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also draw the erase-count and segment-utilization histograms, as PNG and SVG, into
    /// this directory (created if missing).
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
}

/// Bins of the erase-count histogram.
const ERASE_BINS: u32 = 10;

/// One image file of a volume: its device, and the file on the host.
#[derive(Debug, Serialize)]
struct Part {
    image: String,
    preset: String,
    seed: u64,
    kind: &'static str,
    geometry: String,
    capacity_bytes: u64,
    file_bytes: u64,
    allocated_bytes: u64,
    #[serde(skip)]
    spec: DeviceSpec,
}

impl Part {
    /// The image at `path`, opened in `store`.
    fn read(store: &ImageStore, path: &Path) -> anyhow::Result<Part> {
        let shown = device::shown(path);
        let (spec, meta) = flash::image::read_header(store).at(path)?;
        Ok(Part {
            preset: meta.name,
            seed: meta.seed,
            kind: spec.kind(),
            geometry: device::geometry(&spec),
            capacity_bytes: spec.capacity(),
            file_bytes: store.len(),
            allocated_bytes: store.allocated_bytes().with_context(|| shown.clone())?,
            image: shown,
            spec,
        })
    }

    /// Its rows of `info`'s table, each name after `prefix`.
    fn rows(&self, prefix: &str) -> Vec<Vec<String>> {
        [
            ("image", self.image.clone()),
            ("preset", format!("{} (seed {})", self.preset, self.seed)),
            ("kind", self.kind.into()),
            ("geometry", self.geometry.clone()),
            ("capacity", bytes(self.capacity_bytes)),
            (
                "file",
                format!(
                    "{} apparent, {} allocated on disk",
                    bytes(self.file_bytes),
                    bytes(self.allocated_bytes)
                ),
            ),
        ]
        .into_iter()
        .map(|(name, value)| vec![format!("{prefix}{name}"), value])
        .collect()
    }
}

/// What `info --json` prints.
#[derive(Debug, Serialize)]
struct InfoJson {
    #[serde(flatten)]
    device: Part,
    /// The NVRAM image of a volume on two devices.
    nvram: Option<Part>,
    format: &'static str,
    format_code: Option<u8>,
    space: Option<Space>,
    file_system: Option<NativeInfo>,
    log: Option<LogUsage>,
    writes: Option<Writes>,
    write_amplification: Option<f64>,
    write_amplification_note: Option<&'static str>,
    endurance_cycles: u64,
    erase_counts: Option<Spread>,
    total_erases: u64,
    bad_blocks: Option<u64>,
    erase_count_histogram: Vec<Bin>,
    segment_utilization_histogram: Vec<Bin>,
    plots: Vec<String>,
}

#[derive(Debug, Serialize)]
struct Bin {
    bin: String,
    count: u64,
}

/// What a volume wrote over its life, as far as the image records it.
#[derive(Debug, Clone, Copy, Serialize)]
struct Writes {
    /// Bytes written by the host (to files, or to the block device's sectors).
    user_bytes: u64,
    /// Bytes the log programmed for them.
    flash_bytes: u64,
    write_amplification: Option<f64>,
}

/// Why a block device's write amplification is short of the truth.
const WRITES_INCOMPLETE: &str = "as of the last clean close: the last session ended without \
one (a power cut), and its writes are not counted";
/// Why a block device's write amplification is unknown.
const WRITES_UNKNOWN: &str = "unknown: the block device's counters record is missing or damaged";

/// The volume on an image, as far as the command line reads it.
struct Volume {
    format: Format,
    space: Option<Space>,
    log: Option<LogUsage>,
    native: Option<NativeInfo>,
    writes: Option<Writes>,
    /// Why `writes` is missing or incomplete.
    writes_note: Option<&'static str>,
}

/// Runs `flashfs info`.
pub fn run(a: &Args, out: &mut dyn Write) -> anyhow::Result<()> {
    let path = a.image.as_path();
    let shown = device::shown(path);
    let images = volume::open_images(path, false)?;
    let main = Part::read(&images.main, path)?;
    let nvram = match &images.nvram {
        Some(n) => Some(Part::read(n, &volume::nvram_path(path))?),
        None => None,
    };
    let spec = main.spec;
    let (mut media, format) = Media::open_probed(images).with_context(|| shown.clone())?;
    let counts = media.sim().erase_counts();
    let bad = media.bad_blocks().at(path)?;
    let volume = read_volume(media, format).with_context(|| shown.clone())?;

    let endurance = match spec {
        DeviceSpec::Nor(s) => s.endurance as u64,
        DeviceSpec::Nand(s) => s.endurance as u64,
        DeviceSpec::Nvram(s) => s.endurance,
    };
    let spread = (!counts.is_empty()).then(|| Spread::of(&counts));
    let total_erases: u64 = counts.iter().map(|&c| c as u64).sum();
    let erase_hist = device::histogram(&counts, ERASE_BINS, 40);
    let util_hist: Vec<(String, u64)> = volume
        .log
        .as_ref()
        .map(|l| {
            l.utilization_histogram
                .iter()
                .enumerate()
                .map(|(i, &n)| (format!("{}-{}%", i * 10, (i + 1) * 10), n))
                .collect()
        })
        .unwrap_or_default();

    let mut plots = Vec::new();
    if let Some(dir) = &a.plot {
        let shown_dir = device::shown(dir);
        let bars: Vec<(String, u64)> = erase_hist
            .iter()
            .map(|(label, n, _)| (label.replace(',', ""), *n))
            .collect();
        let title = format!("Erase counts, {} ({})", main.preset, shown);
        plots.extend(
            flashfs_bench::plot::bar_chart(dir, "erase-counts", &title, "Erases", "Blocks", &bars)
                .with_context(|| shown_dir.clone())?,
        );
        let title = format!("Segment utilization, {} ({})", main.preset, shown);
        plots.extend(
            flashfs_bench::plot::bar_chart(
                dir,
                "segment-utilization",
                &title,
                "Live fraction",
                "Segments in use",
                &util_hist,
            )
            .with_context(|| shown_dir.clone())?,
        );
    }
    let plots: Vec<String> = plots.iter().map(|p| device::shown(p)).collect();

    if a.json {
        let j = InfoJson {
            device: main,
            nvram,
            format: volume.format.key(),
            format_code: match volume.format {
                Format::Native { code, .. } => Some(code),
                Format::BlockDevice { .. } => Some(flashfs::media::tag::FORMAT_BLOCK_DEVICE),
                Format::Unformatted => None,
            },
            space: volume.space,
            file_system: volume.native,
            log: volume.log,
            writes: volume.writes,
            write_amplification: volume.writes.and_then(|w| w.write_amplification),
            write_amplification_note: volume.writes_note,
            endurance_cycles: endurance,
            erase_counts: spread,
            total_erases,
            bad_blocks: bad,
            erase_count_histogram: erase_hist
                .iter()
                .map(|(label, n, _)| Bin {
                    bin: label.replace(',', ""),
                    count: *n,
                })
                .collect(),
            segment_utilization_histogram: util_hist
                .iter()
                .map(|(bin, n)| Bin {
                    bin: bin.clone(),
                    count: *n,
                })
                .collect(),
            plots,
        };
        writeln!(out, "{}", serde_json::to_string(&j)?)?;
        return Ok(());
    }

    let mut rows = main.rows("");
    if let Some(n) = &nvram {
        rows.extend(n.rows("nvram "));
    }
    rows.push(vec!["format".into(), format_line(&volume.format)]);
    if let Some(s) = &volume.space {
        rows.push(vec![
            "space".into(),
            format!(
                "{}: {} used, {} free ({})",
                bytes(s.capacity_bytes),
                bytes(s.used_bytes),
                bytes(s.free_bytes),
                s.detail
            ),
        ]);
    }
    if let Some(n) = &volume.native {
        rows.push(vec![
            "inodes".into(),
            format!(
                "{} in use, room for about {} more",
                count(n.inodes),
                count(n.free_blocks)
            ),
        ]);
        rows.push(vec![
            "commits".into(),
            format!("{} since the format", count(n.commits)),
        ]);
        rows.push(vec![
            "writes".into(),
            match n.write_amplification {
                Some(wa) => format!(
                    "{} written to files, {} programmed: write amplification {wa:.2} so far",
                    bytes(n.user_bytes),
                    bytes(n.flash_bytes)
                ),
                None => format!(
                    "no file data written yet ({} programmed)",
                    bytes(n.flash_bytes)
                ),
            },
        ]);
        rows.push(vec![
            "index".into(),
            format!(
                "B+tree of {} level{}",
                n.index_height,
                device::plural(n.index_height as u64)
            ),
        ]);
        rows.push(vec![
            "free space".into(),
            match (n.mounted_from_map, n.space_map_blocks) {
                (_, 0) => "found by walking the index (no saved map on a volume that scans)".into(),
                (true, b) => format!(
                    "read from the saved map ({} block{} kept for it)",
                    count(b),
                    device::plural(b)
                ),
                (false, _) => {
                    "found by walking the index (the saved map was stale or unreadable)".into()
                }
            },
        ]);
    }
    if let Some(l) = &volume.log {
        rows.push(vec![
            "segments".into(),
            format!(
                "{}{} of {} slots of {} B: {} in use, {} free, {} bad",
                count(l.segments),
                if l.units_per_segment > 1 {
                    format!(" ({} erase units each)", l.units_per_segment)
                } else {
                    String::new()
                },
                count(l.slots_per_segment),
                count(l.slot_bytes),
                count(l.segments_in_use),
                count(l.free_segments),
                count(l.bad_segments)
            ),
        ]);
        if let Some(t) = &l.tiers {
            rows.push(vec![
                "tiers".into(),
                format!(
                    "{} segments on the NVRAM for metadata: {} in use, {} live; \
                     {} on the flash for data: {} in use, {} live",
                    count(t.fast_segments),
                    count(t.fast_segments_in_use),
                    bytes(t.fast_live_bytes),
                    count(t.bulk_segments),
                    count(t.bulk_segments_in_use),
                    bytes(t.bulk_live_bytes)
                ),
            ]);
        }
        if let Some(r) = &l.regions {
            rows.push(vec![
                "regions".into(),
                format!(
                    "{}: {} segments in SLC mode, {} in MLC mode; {}; {}",
                    r.setting,
                    count(r.slc_segments),
                    count(r.mlc_segments),
                    match r.migrated_bytes {
                        Some(b) => format!("{} migrated from SLC to MLC so far", bytes(b)),
                        None => "what migration moved is unknown (counters lost)".into(),
                    },
                    match (r.alpha, r.gamma) {
                        (Some(a), Some(g)) => format!("α {a:.2}, γ {g:.2} when last recorded"),
                        _ => "α and γ not recorded".into(),
                    }
                ),
            ]);
        }
        rows.push(vec![
            "mount".into(),
            match l.mounted_from {
                "checkpoint" => format!(
                    "from the checkpoint written at the last close ({} slots)",
                    count(l.checkpoint_slots)
                ),
                _ => match l.checkpoints {
                    Checkpoints::None => {
                        "by a scan of every segment (the volume keeps no checkpoints)".into()
                    }
                    Checkpoints::TooLarge => "by a scan of every segment (no checkpoint root \
                                              can name this map's directory: SPEC.md §3.5)"
                        .into(),
                    Checkpoints::Kept => {
                        "by a scan of every segment (no current checkpoint)".into()
                    }
                },
            },
        ]);
        if let Some(heap) = l.mount_heap_bytes {
            rows.push(vec![
                "mount RAM".into(),
                format!(
                    "{} B of heap at most; {} B of sector map in RAM after it",
                    count(heap),
                    count(l.map_cache_bytes)
                ),
            ]);
        }
        rows.push(vec![
            "reclaimable".into(),
            format!(
                "{} ({} dead slots in closed segments, freed by cleaning)",
                bytes(l.reclaimable_slots * l.slot_bytes),
                count(l.reclaimable_slots)
            ),
        ]);
        // The native file system shows its writes with its figures (above).
        if volume.native.is_none() {
            let line = match volume.writes {
                Some(w) => {
                    let wa = match w.write_amplification {
                        Some(wa) => format!("write amplification {wa:.2} so far"),
                        None => "no sector written yet".into(),
                    };
                    let mut line = format!(
                        "{} written to sectors, {} programmed: {wa}",
                        bytes(w.user_bytes),
                        bytes(w.flash_bytes)
                    );
                    if let Some(note) = volume.writes_note {
                        line.push_str(&format!(" ({note})"));
                    }
                    line
                }
                None => format!(
                    "{} (newest sequence number {})",
                    volume.writes_note.unwrap_or(WRITES_UNKNOWN),
                    count(l.newest_sequence)
                ),
            };
            rows.push(vec!["writes".into(), line]);
        }
    }
    rows.push(vec![
        "endurance".into(),
        match spec {
            DeviceSpec::Nvram(_) => format!("{} writes", units::big_count(endurance)),
            _ => format!("{} cycles", units::big_count(endurance)),
        },
    ]);
    match spread {
        Some(s) => rows.push(vec![
            "erase counts".into(),
            format!(
                "{} over {} blocks; {} erases in all",
                s.line(),
                count(s.blocks),
                count(total_erases)
            ),
        ]),
        None => rows.push(vec![
            "erase counts".into(),
            "none (NVRAM is written in place)".into(),
        ]),
    }
    if let Some(b) = bad {
        rows.push(vec![
            "bad blocks".into(),
            format!("{} of {}", count(b), count(counts.len() as u64)),
        ]);
    }
    for l in units::table(&rows) {
        writeln!(out, "{l}")?;
    }
    if !util_hist.is_empty() {
        writeln!(
            out,
            "segment-utilization histogram (live fraction: segments in use)"
        )?;
        let most = util_hist.iter().map(|b| b.1).max().unwrap_or(0).max(1);
        let rows: Vec<Vec<String>> = util_hist
            .iter()
            .map(|(label, n)| {
                let bar = if *n == 0 {
                    0
                } else {
                    ((*n as f64 / most as f64) * 40.0).ceil() as usize
                };
                vec![format!("  {label}"), count(*n), "#".repeat(bar)]
            })
            .collect();
        for l in units::table(&rows) {
            writeln!(out, "{l}")?;
        }
    }
    if !erase_hist.is_empty() {
        writeln!(out, "erase-count histogram (erases: blocks)")?;
        let rows: Vec<Vec<String>> = erase_hist
            .into_iter()
            .map(|(label, n, bar)| vec![format!("  {label}"), count(n), bar])
            .collect();
        for l in units::table(&rows) {
            writeln!(out, "{l}")?;
        }
    }
    for p in &plots {
        writeln!(out, "wrote {p}")?;
    }
    Ok(())
}

fn format_line(f: &Format) -> String {
    match f {
        Format::Unformatted => "unformatted (`flashfs mkfs` formats it)".into(),
        Format::BlockDevice { sector_size } => {
            format!(
                "block device (FTL), {} B sectors",
                count(*sector_size as u64)
            )
        }
        Format::Native { code, slot_size } => format!(
            "native file system (format {code}), {} B slots",
            count(*slot_size as u64)
        ),
    }
}

/// Mounts the volume in memory and reads its space and log usage.
fn read_volume(media: Media<ImageStore>, format: Format) -> anyhow::Result<Volume> {
    let mut native = None;
    let (mut writes, mut writes_note) = (None, None);
    let (space, log) = match format {
        Format::Unformatted => (None, None),
        Format::BlockDevice { .. } => {
            let meter = HeapMeter::start();
            let ftl = AnyFtl::mount(media, FtlConfig::default())
                .context("cannot mount the block device (`flashfs fsck` checks it)")?;
            let heap = meter.peak();
            let (space, mut log) = ftl.usage();
            log.mount_heap_bytes = CountingAlloc::installed().then_some(heap);
            match ftl.lifetime() {
                (Some(l), complete) => {
                    writes = Some(Writes {
                        user_bytes: l.user_bytes,
                        flash_bytes: l.flash_bytes,
                        write_amplification: l.write_amplification(),
                    });
                    writes_note = (!complete).then_some(WRITES_INCOMPLETE);
                }
                (None, _) => writes_note = Some(WRITES_UNKNOWN),
            }
            (Some(space), Some(log))
        }
        Format::Native { .. } => {
            let (space, log, info) = native_usage(media)?;
            writes = Some(Writes {
                user_bytes: info.user_bytes,
                flash_bytes: info.flash_bytes,
                write_amplification: info.write_amplification,
            });
            native = Some(info);
            (Some(space), Some(log))
        }
    };
    Ok(Volume {
        format,
        space,
        log,
        native,
        writes,
        writes_note,
    })
}

/// Space, log usage and figures of the native file system on `media` (mounted in memory:
/// the store keeps writes to itself).
fn native_usage(media: Media<ImageStore>) -> anyhow::Result<(Space, LogUsage, NativeInfo)> {
    let meter = HeapMeter::start();
    let mut fs = AnyFs::mount(media, crate::native::config(None, None))
        .context("cannot mount the file system (`flashfs fsck` checks it)")?;
    let heap = meter.peak();
    let (space, mut log, info) = fs.usage()?;
    log.mount_heap_bytes = CountingAlloc::installed().then_some(heap);
    Ok((space, log, info))
}
