//! `flashfs presets`: the simulated devices.

use std::io::Write;

use flash::preset::{Preset, DEFAULT_PRESET, PRESETS, ST10F280_UNIT_KIB};
use flash::spec::{Cells, DeviceSpec};
use serde::Serialize;

use crate::device::{self, plural};
use crate::units::{self, big_count, bytes, ns};

/// Examples shown by `flashfs presets --help`.
pub const EXAMPLES: &str = "\
Examples:
  flashfs presets
  flashfs presets --json | head -1";

/// Options of `flashfs presets`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// One JSON object per preset, one per line.
    #[arg(long)]
    pub json: bool,
}

/// Lists every preset.
pub fn run(args: &Args, out: &mut dyn Write) -> anyhow::Result<()> {
    if args.json {
        for p in PRESETS {
            writeln!(out, "{}", serde_json::to_string(&Json::of(p))?)?;
        }
        return Ok(());
    }
    let mut geo = vec![row(&[
        "NAME",
        "KIND",
        "CAPACITY",
        "ERASE UNITS",
        "PAGE+SPARE",
        "BANKS",
        "WORD",
        "REPROGRAM",
        "CELLS",
    ])];
    let mut time = vec![row(&[
        "NAME",
        "READ",
        "PROGRAM",
        "ERASE",
        "BUS",
        "ENDURANCE",
        "ECC",
        "FACTORY BAD",
    ])];
    for p in PRESETS {
        geo.push(geometry_row(p));
        time.push(timing_row(p));
    }
    writeln!(out, "Geometry")?;
    for l in units::table(&geo) {
        writeln!(out, "  {l}")?;
    }
    writeln!(out)?;
    writeln!(out, "Timing and reliability (typical; device time)")?;
    for l in units::table(&time) {
        writeln!(out, "  {l}")?;
    }
    for p in PRESETS {
        if let DeviceSpec::Nand(s) = &p.spec {
            if let Cells::Mlc { slc_mode: t } = s.cells {
                writeln!(
                    out,
                    "  {}: MLC mode above; in SLC mode (LSB pages only) read {}, program {}, erase {}",
                    p.name,
                    per(t.read_ns, "page"),
                    per(t.program_ns, "page"),
                    per(t.erase_ns, "block")
                )?;
            }
        }
    }
    writeln!(out)?;
    writeln!(out, "Parts and sources")?;
    let width = PRESETS.iter().map(|p| p.name.len()).max().unwrap_or(0);
    for p in PRESETS {
        writeln!(out, "  {:width$}  {}", p.name, p.summary)?;
        writeln!(out, "  {:width$}  source: {}", "", p.source)?;
    }
    writeln!(out)?;
    let sizes: Vec<String> = ST10F280_UNIT_KIB.iter().map(|k| k.to_string()).collect();
    writeln!(
        out,
        "st10f280/N selects the ST10F280 with N KiB erase units (N = {}).",
        sizes.join(", ")
    )?;
    writeln!(out, "Default preset: {DEFAULT_PRESET}.")?;
    Ok(())
}

fn row(cells: &[&str]) -> Vec<String> {
    cells.iter().map(|c| c.to_string()).collect()
}

fn geometry_row(p: &Preset) -> Vec<String> {
    let spec = &p.spec;
    let (units, page, banks, word, reprogram, cells) = match spec {
        DeviceSpec::Nor(s) => (
            format!("{} x {}", s.units, bytes(s.unit_size as u64)),
            if s.program_page == 0 {
                "-".to_string()
            } else {
                format!("{} B (program)", s.program_page)
            },
            s.banks,
            format!("{} B", s.word_size),
            if s.reprogrammable { "yes" } else { "no" },
            "-",
        ),
        DeviceSpec::Nand(s) => (
            format!(
                "{} x {} ({} pages)",
                s.blocks,
                bytes(s.pages_per_block as u64 * s.page_size as u64),
                s.pages_per_block
            ),
            format!("{}+{} B", s.page_size, s.spare_size),
            s.banks,
            "-".to_string(),
            "no",
            device::cells(s.cells),
        ),
        DeviceSpec::Nvram(s) => (
            "-".to_string(),
            "-".to_string(),
            1,
            format!("{} B", s.word_size),
            "in place",
            "-",
        ),
    };
    vec![
        p.name.to_string(),
        spec.kind().to_string(),
        bytes(spec.capacity()),
        units,
        page,
        banks.to_string(),
        word,
        reprogram.to_string(),
        cells.to_string(),
    ]
}

fn per(v: u64, what: &str) -> String {
    format!("{}/{what}", ns(v))
}

fn timing_row(p: &Preset) -> Vec<String> {
    let (read, program, erase, bus, endurance, ecc, bad) = match &p.spec {
        DeviceSpec::Nor(s) => {
            let t = &s.timing;
            let program = match (t.program_cmd_ns, t.program_word_ns) {
                (0, w) => per(w, "word"),
                (c, 0) => per(c, "command"),
                (c, w) => format!("{} + {}", per(c, "command"), per(w, "word")),
            };
            let erase = match t.erase_suspend_ns {
                Some(_) => format!("{}, suspendable", per(t.erase_ns, "unit")),
                None => per(t.erase_ns, "unit"),
            };
            (
                if t.read_word_ns == 0 {
                    "-".to_string()
                } else {
                    per(t.read_word_ns, "word")
                },
                program,
                erase,
                bus(t.bus_byte_ns),
                format!("{} cycles", big_count(s.endurance as u64)),
                "none".to_string(),
                "-".to_string(),
            )
        }
        DeviceSpec::Nand(s) => {
            let t = &s.timing;
            (
                per(t.read_ns, "page"),
                per(t.program_ns, "page"),
                per(t.erase_ns, "block"),
                bus(t.bus_byte_ns),
                format!("{} cycles", big_count(s.endurance as u64)),
                format!(
                    "{} bit{}/{} B",
                    s.ecc.correctable,
                    plural(s.ecc.correctable as u64),
                    s.ecc.codeword
                ),
                format!(
                    "{}.{}%",
                    s.factory_bad_permille / 10,
                    s.factory_bad_permille % 10
                ),
            )
        }
        DeviceSpec::Nvram(s) => {
            let access = match (s.command_ns, s.access_ns) {
                (0, a) => per(a, "word"),
                (c, 0) => per(c, "command"),
                (c, a) => format!("{} + {}", per(c, "command"), per(a, "word")),
            };
            (
                access.clone(),
                access,
                "-".to_string(),
                bus(s.bus_byte_ns),
                format!("{} writes", big_count(s.endurance)),
                "none".to_string(),
                "-".to_string(),
            )
        }
    };
    vec![
        p.name.to_string(),
        read,
        program,
        erase,
        bus,
        endurance,
        ecc,
        bad,
    ]
}

fn bus(ns_per_byte: u64) -> String {
    if ns_per_byte == 0 {
        "-".to_string()
    } else {
        per(ns_per_byte, "B")
    }
}

/// A preset as JSON.
#[derive(Debug, Serialize)]
struct Json {
    name: &'static str,
    kind: &'static str,
    summary: &'static str,
    source: &'static str,
    capacity_bytes: u64,
    geometry: Geometry,
    timing_ns: Timing,
    endurance_cycles: u64,
    ecc: Option<Ecc>,
    factory_bad_permille: u32,
    /// Other names that select variants of this preset.
    variants: Vec<String>,
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Geometry {
    Nor {
        erase_unit_bytes: u32,
        erase_units: u32,
        banks: u32,
        word_bytes: u32,
        program_page_bytes: Option<u32>,
        reprogrammable: bool,
    },
    Nand {
        erase_unit_bytes: u64,
        erase_units: u32,
        pages_per_block: u32,
        page_bytes: u32,
        spare_bytes: u32,
        banks: u32,
        cells: &'static str,
    },
    Nvram {
        word_bytes: u32,
    },
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Timing {
    Nor {
        read_word: u64,
        program_word: u64,
        program_command: u64,
        erase: u64,
        bus_per_byte: u64,
        erase_suspend: Option<u64>,
    },
    Nand {
        read_page: u64,
        program_page: u64,
        erase: u64,
        bus_per_byte: u64,
        slc_mode: Option<NandTimes>,
    },
    Nvram {
        access_word: u64,
        command: u64,
        bus_per_byte: u64,
    },
}

#[derive(Debug, Serialize)]
struct NandTimes {
    read_page: u64,
    program_page: u64,
    erase: u64,
    bus_per_byte: u64,
}

#[derive(Debug, Serialize)]
struct Ecc {
    codeword_bytes: u32,
    correctable_bits: u32,
}

impl Json {
    fn of(p: &Preset) -> Json {
        let (geometry, timing_ns, endurance_cycles, ecc, factory_bad_permille) = match &p.spec {
            DeviceSpec::Nor(s) => (
                Geometry::Nor {
                    erase_unit_bytes: s.unit_size,
                    erase_units: s.units,
                    banks: s.banks,
                    word_bytes: s.word_size,
                    program_page_bytes: (s.program_page != 0).then_some(s.program_page),
                    reprogrammable: s.reprogrammable,
                },
                Timing::Nor {
                    read_word: s.timing.read_word_ns,
                    program_word: s.timing.program_word_ns,
                    program_command: s.timing.program_cmd_ns,
                    erase: s.timing.erase_ns,
                    bus_per_byte: s.timing.bus_byte_ns,
                    erase_suspend: s.timing.erase_suspend_ns,
                },
                s.endurance as u64,
                None,
                0,
            ),
            DeviceSpec::Nand(s) => (
                Geometry::Nand {
                    erase_unit_bytes: s.pages_per_block as u64 * s.page_size as u64,
                    erase_units: s.blocks,
                    pages_per_block: s.pages_per_block,
                    page_bytes: s.page_size,
                    spare_bytes: s.spare_size,
                    banks: s.banks,
                    cells: match s.cells {
                        Cells::Slc => "slc",
                        Cells::Mlc { .. } => "mlc",
                    },
                },
                Timing::Nand {
                    read_page: s.timing.read_ns,
                    program_page: s.timing.program_ns,
                    erase: s.timing.erase_ns,
                    bus_per_byte: s.timing.bus_byte_ns,
                    slc_mode: match s.cells {
                        Cells::Slc => None,
                        Cells::Mlc { slc_mode: t } => Some(NandTimes {
                            read_page: t.read_ns,
                            program_page: t.program_ns,
                            erase: t.erase_ns,
                            bus_per_byte: t.bus_byte_ns,
                        }),
                    },
                },
                s.endurance as u64,
                Some(Ecc {
                    codeword_bytes: s.ecc.codeword,
                    correctable_bits: s.ecc.correctable,
                }),
                s.factory_bad_permille,
            ),
            DeviceSpec::Nvram(s) => (
                Geometry::Nvram {
                    word_bytes: s.word_size,
                },
                Timing::Nvram {
                    access_word: s.access_ns,
                    command: s.command_ns,
                    bus_per_byte: s.bus_byte_ns,
                },
                s.endurance,
                None,
                0,
            ),
        };
        let variants = if p.name == "st10f280" {
            ST10F280_UNIT_KIB
                .iter()
                .map(|k| format!("st10f280/{k}"))
                .collect()
        } else {
            Vec::new()
        };
        Json {
            name: p.name,
            kind: p.spec.kind(),
            summary: p.summary,
            source: p.source,
            capacity_bytes: p.spec.capacity(),
            geometry,
            timing_ns,
            endurance_cycles,
            ecc,
            factory_bad_permille,
            variants,
        }
    }
}
