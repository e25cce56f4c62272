//! `flashfs sim`: simulated-device image files, one device each: of a volume on two devices
//! (`mkfs --nvram`), the flash image and the NVRAM image beside it are two devices.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use flash::image::image_len;
use flash::spec::DeviceSpec;
use flash::WearModel;
use serde::Serialize;

use crate::device::{self, AnySim, AtPath, ReadOnlyFile, Spread};
use crate::units::{self, bytes, count};

/// Examples shown by `flashfs sim --help`.
pub const EXAMPLES: &str = "\
Examples:
  flashfs sim create dev.img --preset nand-128m
  flashfs sim info dev.img";

/// Examples shown by `flashfs sim create --help`.
pub const CREATE_EXAMPLES: &str = "\
Examples:
  flashfs sim create dev.img --preset nand-128m
  flashfs sim create nor.img --preset st10f280/8 --seed 7 --force";

/// Examples shown by `flashfs sim info --help`.
pub const INFO_EXAMPLES: &str = "\
Examples:
  flashfs sim info dev.img
  flashfs sim info dev.img --json
  flashfs sim info dev.img.nvram           the NVRAM image of a volume on two devices

One image, one device: beside the flash image of a volume on two devices (`mkfs --nvram`)
the NVRAM image is named, and `sim info` on it shows that device.";

/// Subcommands of `flashfs sim`.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Create a sparse image file of a simulated device, every block erased and unworn.
    #[command(after_help = CREATE_EXAMPLES)]
    Create(CreateArgs),
    /// Show an image's device, geometry, size on disk and wear.
    #[command(after_help = INFO_EXAMPLES)]
    Info(InfoArgs),
}

/// Options of `flashfs sim create`.
#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    /// The image file to create.
    pub image: PathBuf,
    /// The device (see `flashfs presets`; `st10f280/N` for N KiB units).
    #[arg(long, value_name = "NAME")]
    pub preset: String,
    /// Seed of the choices fixed at creation (which NAND blocks leave the factory bad).
    #[arg(long, value_name = "S", default_value_t = 0)]
    pub seed: u64,
    /// Replace IMAGE if it exists.
    #[arg(long)]
    pub force: bool,
}

/// Options of `flashfs sim info`.
#[derive(Debug, clap::Args)]
pub struct InfoArgs {
    /// The image file to inspect (it is only read).
    pub image: PathBuf,
    /// One JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs a `flashfs sim` subcommand.
pub fn run(cmd: &Command, out: &mut dyn Write) -> anyhow::Result<()> {
    match cmd {
        Command::Create(a) => create(a, out),
        Command::Info(a) => info(a, out),
    }
}

fn create(a: &CreateArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let preset = device::lookup(&a.preset)?;
    let path = a.image.as_path();
    let shown = device::shown(path);
    if device::check_target(path, a.force)? {
        std::fs::remove_file(path)
            .map_err(device::io_error)
            .with_context(|| format!("{shown}: cannot replace"))?;
    }
    device::create_image(path, &preset, a.seed)?;
    let file = ReadOnlyFile::open(path).with_context(|| shown.clone())?;
    writeln!(
        out,
        "created {shown}: {} ({}, {}), seed {}; {} file, {} on disk",
        preset.name,
        preset.spec.kind(),
        bytes(preset.spec.capacity()),
        a.seed,
        bytes(image_len(&preset.spec)),
        bytes(file.allocated_bytes().with_context(|| shown.clone())?),
    )?;
    Ok(())
}

/// What `sim info --json` prints.
#[derive(Debug, Serialize)]
struct InfoJson {
    image: String,
    preset: String,
    seed: u64,
    kind: &'static str,
    geometry: String,
    capacity_bytes: u64,
    file_bytes: u64,
    allocated_bytes: u64,
    wear_model: &'static str,
    endurance_cycles: u64,
    erase_counts: Option<Spread>,
    blocks_at_endurance: u64,
    bad_blocks: Option<u64>,
    erase_count_histogram: Vec<Bin>,
    /// The NVRAM image beside this one, holding the metadata of a volume on two devices.
    nvram_image: Option<String>,
}

#[derive(Debug, Serialize)]
struct Bin {
    erases: String,
    blocks: u64,
}

fn info(a: &InfoArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let path = a.image.as_path();
    let shown = device::shown(path);
    let file = ReadOnlyFile::open(path).with_context(|| shown.clone())?;
    let file_bytes = flash::store::Store::len(&file);
    let allocated = file.allocated_bytes()?;
    let (spec, _) = flash::image::read_header(&file).at(path)?;
    device::check_ram(&spec).with_context(|| shown.clone())?;
    let (mut sim, spec) = AnySim::open(file).at(path)?;
    let meta = sim.sim().meta().clone();
    let counts = sim.sim().erase_counts();
    let bad = match spec {
        DeviceSpec::Nand(_) => Some(sim.bad_blocks().at(path)?),
        _ => None,
    };
    let endurance = match spec {
        DeviceSpec::Nor(s) => s.endurance as u64,
        DeviceSpec::Nand(s) => s.endurance as u64,
        DeviceSpec::Nvram(s) => s.endurance,
    };
    let worn = counts.iter().filter(|&&c| c as u64 >= endurance).count() as u64;
    let spread = (!counts.is_empty()).then(|| Spread::of(&counts));
    let hist = device::histogram(&counts, 10, 40);
    let beside = crate::volume::nvram_path(path);
    let nvram_image = beside.exists().then(|| device::shown(&beside));
    let (wear_model, wear_text) = match meta.wear {
        WearModel::Never => ("never", "worn blocks never fail"),
        WearModel::AtLimit => ("at-limit", "worn blocks fail at the endurance"),
        WearModel::Gradual => ("gradual", "worn blocks fail gradually past the endurance"),
    };
    if a.json {
        let j = InfoJson {
            image: shown,
            preset: meta.name.clone(),
            seed: meta.seed,
            kind: spec.kind(),
            geometry: device::geometry(&spec),
            capacity_bytes: spec.capacity(),
            file_bytes,
            allocated_bytes: allocated,
            wear_model,
            endurance_cycles: endurance,
            erase_counts: spread,
            blocks_at_endurance: worn,
            bad_blocks: bad,
            erase_count_histogram: hist
                .iter()
                .map(|(label, n, _)| Bin {
                    erases: label.replace(',', ""),
                    blocks: *n,
                })
                .collect(),
            nvram_image,
        };
        writeln!(out, "{}", serde_json::to_string(&j)?)?;
        return Ok(());
    }
    let mut rows = vec![
        vec!["image".into(), shown],
        vec![
            "preset".into(),
            format!("{} (seed {})", meta.name, meta.seed),
        ],
        vec!["kind".into(), spec.kind().into()],
        vec!["geometry".into(), device::geometry(&spec)],
        vec!["capacity".into(), bytes(spec.capacity())],
        vec![
            "file".into(),
            format!(
                "{} apparent, {} allocated on disk",
                bytes(file_bytes),
                bytes(allocated)
            ),
        ],
        vec![
            "endurance".into(),
            match spec {
                DeviceSpec::Nvram(_) => format!("{} writes", units::big_count(endurance)),
                _ => format!("{} cycles; {wear_text}", units::big_count(endurance)),
            },
        ],
    ];
    match spread {
        Some(s) => {
            rows.push(vec![
                "erase counts".into(),
                format!("{} over {} blocks", s.line(), count(s.blocks)),
            ]);
            rows.push(vec![
                "at endurance".into(),
                format!("{} blocks", count(worn)),
            ]);
        }
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
    if let Some(n) = nvram_image {
        rows.push(vec![
            "beside it".into(),
            format!("{n}, the NVRAM of a volume on two devices (`flashfs sim info {n}`)"),
        ]);
    }
    for l in units::table(&rows) {
        writeln!(out, "{l}")?;
    }
    if !hist.is_empty() {
        writeln!(out, "erase-count histogram (erases: blocks)")?;
        let rows: Vec<Vec<String>> = hist
            .into_iter()
            .map(|(label, n, bar)| vec![format!("  {label}"), count(n), bar])
            .collect();
        for l in units::table(&rows) {
            writeln!(out, "{l}")?;
        }
    }
    Ok(())
}
