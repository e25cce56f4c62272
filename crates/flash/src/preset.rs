//! Named devices: the parts the papers measured, today's common parts, and variants.
//!
//! Paper presets take their figures from the paper that used the part. Where a paper quotes a
//! per-page time measured at the driver interface, that time already includes the bus
//! transfer, so the preset's bus time is zero. Datasheet presets use typical values.

use crate::error::{FlashError, Result};
use crate::spec::*;

const MS: u64 = 1_000_000;
const US: u64 = 1_000;

/// A named device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    /// Name used on the command line and recorded in images.
    pub name: &'static str,
    /// What the part is.
    pub summary: &'static str,
    /// Where its figures come from.
    pub source: &'static str,
    /// The device.
    pub spec: DeviceSpec,
}

/// The preset a command uses when none is named.
pub const DEFAULT_PRESET: &str = "nand-1g";

/// The ST10F280 erase-unit sizes the TFFS experiments ran with (KiB); `st10f280/N` selects one.
pub const ST10F280_UNIT_KIB: [u32; 6] = [2, 4, 8, 16, 32, 64];

const ST10F280_BYTES: u32 = 448 * 1024;

const fn st10f280(unit_kib: u32) -> NorSpec {
    NorSpec {
        unit_size: unit_kib * 1024,
        units: ST10F280_BYTES / (unit_kib * 1024),
        banks: 1,
        word_size: 2,
        program_page: 0,
        reprogrammable: true,
        timing: NorTiming {
            read_word_ns: 50,
            program_word_ns: 16 * US,
            program_cmd_ns: 0,
            erase_ns: 1500 * MS,
            bus_byte_ns: 0,
            erase_suspend_ns: None,
        },
        endurance: 100_000,
    }
}

const MLC_SLC_MODE: NandTiming = NandTiming {
    read_ns: 409 * US,
    program_ns: 431 * US,
    erase_ns: 872 * US,
    bus_byte_ns: 0,
};

/// Every preset, in the order `flashfs presets` lists them.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "28f008sa",
        summary: "Intel 28F008SA array: 8 banks x 8 segments of 256 KiB (16 MiB), 32-bit words",
        source: "Kawaguchi et al. 1995, Table 3 (erase 1 s/segment, write 400 KB/s, read 4 MB/s)",
        spec: DeviceSpec::Nor(NorSpec {
            unit_size: 256 * 1024,
            units: 64,
            banks: 8,
            word_size: 4,
            program_page: 0,
            reprogrammable: true,
            timing: NorTiming {
                // 4 bytes per 10 us = 400 KB/s; 4 bytes per 1 us = 4 MB/s.
                read_word_ns: 1000,
                program_word_ns: 10 * US,
                program_cmd_ns: 0,
                erase_ns: 1000 * MS,
                bus_byte_ns: 0,
                erase_suspend_ns: Some(20 * US),
            },
            endurance: 100_000,
        }),
    },
    Preset {
        name: "m29dw640d",
        summary: "ST M29DW640D: 8 MiB NOR, 126 units of 64 KiB, dual-bank, 16-bit words",
        source: "Gal & Toledo 2005, sec. 5.1 (read 90 ns, program 10 us, erase 0.8 s)",
        spec: DeviceSpec::Nor(NorSpec {
            unit_size: 64 * 1024,
            units: 126,
            banks: 2,
            word_size: 2,
            program_page: 0,
            reprogrammable: true,
            timing: NorTiming {
                read_word_ns: 90,
                program_word_ns: 10 * US,
                program_cmd_ns: 0,
                erase_ns: 800 * MS,
                bus_byte_ns: 0,
                erase_suspend_ns: Some(20 * US),
            },
            endurance: 100_000,
        }),
    },
    Preset {
        name: "st10f280",
        summary: "ST10F280 on-chip NOR: 448 KiB in 7 units of 64 KiB (st10f280/N: N KiB units)",
        source: "Gal & Toledo 2005, sec. 5.1 (read 50 ns, write 16 us, erase 1.5 s)",
        spec: DeviceSpec::Nor(st10f280(64)),
    },
    Preset {
        name: "nand-128m",
        summary: "small-page SLC NAND, 128 MiB: 512+16 B pages, 32 pages/block",
        source: "Kim et al. (FRASH), Table 1 (read 16 us, write 200 us, erase 2 ms)",
        spec: DeviceSpec::Nand(NandSpec {
            blocks: 8192,
            pages_per_block: 32,
            page_size: 512,
            spare_size: 12, // 16 B spare less 3 B Hamming ECC and the bad-block marker
            banks: 1,
            cells: Cells::Slc,
            ecc: EccSpec { codeword: 512, correctable: 1 },
            timing: NandTiming { read_ns: 16 * US, program_ns: 200 * US, erase_ns: 2 * MS, bus_byte_ns: 0 },
            endurance: 100_000,
            factory_bad_permille: 5,
        }),
    },
    Preset {
        name: "nand-1g",
        summary: "large-page SLC NAND, 1 GiB: 2048+64 B pages, 64 pages/block (YAFFS2 class)",
        source: "Samsung K9F8G08U0M-class datasheet, typical: tR 25 us, tPROG 200 us, tBERS 1.5 ms, 25 ns/B",
        spec: DeviceSpec::Nand(NandSpec {
            blocks: 8192,
            pages_per_block: 64,
            page_size: 2048,
            spare_size: 34, // 64 B less 4 x 7 B BCH and 2 B marker
            banks: 1,
            cells: Cells::Slc,
            ecc: EccSpec { codeword: 512, correctable: 4 },
            timing: NandTiming { read_ns: 25 * US, program_ns: 200 * US, erase_ns: 1500 * US, bus_byte_ns: 25 },
            endurance: 100_000,
            factory_bad_permille: 5,
        }),
    },
    Preset {
        name: "mlc-flexfs",
        summary: "KFXXGH6X4M-class MLC NAND, 1 GiB: 4 KiB pages, 128 pages/block (64 LSB + 64 MSB)",
        source: "Lee et al. (FlexFS), Table 1: SLC mode 409/431/872 us, MLC mode 403/994/872 us (read/write/erase)",
        spec: DeviceSpec::Nand(NandSpec {
            blocks: 2048,
            pages_per_block: 128,
            page_size: 4096,
            spare_size: 70, // 128 B less 8 x 7 B BCH and 2 B marker
            banks: 1,
            cells: Cells::Mlc { slc_mode: MLC_SLC_MODE },
            ecc: EccSpec { codeword: 512, correctable: 4 },
            timing: NandTiming { read_ns: 403 * US, program_ns: 994 * US, erase_ns: 872 * US, bus_byte_ns: 0 },
            endurance: 10_000,
            factory_bad_permille: 5,
        }),
    },
    Preset {
        name: "fram-8m",
        summary: "parallel FRAM, 8 MiB, 16-bit words, byte-addressable",
        source: "Kim et al. (FRASH), Table 1 (read/write 85 ns)",
        spec: DeviceSpec::Nvram(NvramSpec {
            size: 8 << 20,
            word_size: 2,
            access_ns: 85,
            command_ns: 0,
            bus_byte_ns: 0,
            endurance: 1_000_000_000_000_000,
        }),
    },
    Preset {
        name: "w25q64jv",
        summary: "Winbond W25Q64JV SPI NOR, 8 MiB: 4 KiB sectors, 256 B page program, quad SPI",
        source: "W25Q64JV datasheet, typical: tPP 0.4 ms, tSE 45 ms, 104 MHz quad read (~19 ns/B)",
        spec: DeviceSpec::Nor(NorSpec {
            unit_size: 4096,
            units: 2048,
            banks: 1,
            word_size: 1,
            program_page: 256,
            reprogrammable: true,
            timing: NorTiming {
                read_word_ns: 0,
                program_word_ns: 0,
                program_cmd_ns: 400 * US,
                erase_ns: 45 * MS,
                bus_byte_ns: 19,
                erase_suspend_ns: Some(20 * US),
            },
            endurance: 100_000,
        }),
    },
    Preset {
        name: "w25n01gv",
        summary: "Winbond W25N01GV SPI NAND, 128 MiB: 2048+64 B pages, 64 pages/block, on-die ECC",
        source: "W25N01GV datasheet, typical: tRD 60 us (ECC on), tPP 250 us, tBE 2 ms, ~19 ns/B",
        spec: DeviceSpec::Nand(NandSpec {
            blocks: 1024,
            pages_per_block: 64,
            page_size: 2048,
            spare_size: 16, // the ECC-protected user bytes of the 64 B spare area
            banks: 1,
            cells: Cells::Slc,
            ecc: EccSpec { codeword: 512, correctable: 1 },
            timing: NandTiming { read_ns: 60 * US, program_ns: 250 * US, erase_ns: 2 * MS, bus_byte_ns: 19 },
            endurance: 100_000,
            factory_bad_permille: 19, // up to 20 of 1024 blocks
        }),
    },
    Preset {
        name: "cy15b102q",
        summary: "Cypress CY15B102Q SPI FRAM, 256 KiB, byte-addressable",
        source: "CY15B102Q datasheet: 25 MHz SPI (320 ns/B), 4-byte command, 1e14 cycles",
        spec: DeviceSpec::Nvram(NvramSpec {
            size: 256 * 1024,
            word_size: 1,
            access_ns: 0,
            command_ns: 1280,
            bus_byte_ns: 320,
            endurance: 100_000_000_000_000,
        }),
    },
];

/// Finds a preset by name, in any case (`flashfs presets` prints part names in capitals).
/// `st10f280/N` is the ST10F280 with erase units of N KiB (the paper's "448/N"), for N in
/// [`ST10F280_UNIT_KIB`].
pub fn lookup(name: &str) -> Result<Preset> {
    if let Some(p) = PRESETS.iter().find(|p| p.name.eq_ignore_ascii_case(name)) {
        return Ok(*p);
    }
    const ST10F280_PREFIX: &str = "st10f280/";
    let kib = name
        .get(..ST10F280_PREFIX.len())
        .filter(|p| p.eq_ignore_ascii_case(ST10F280_PREFIX))
        .and_then(|_| name[ST10F280_PREFIX.len()..].parse::<u32>().ok())
        .filter(|n| ST10F280_UNIT_KIB.contains(n))
        .ok_or(FlashError::UnknownPreset)?;
    let base = PRESETS
        .iter()
        .find(|p| p.name == "st10f280")
        .ok_or(FlashError::UnknownPreset)?;
    Ok(Preset {
        name: ST10F280_NAMES[ST10F280_UNIT_KIB
            .iter()
            .position(|&k| k == kib)
            .unwrap_or(5)],
        spec: DeviceSpec::Nor(st10f280(kib)),
        ..*base
    })
}

const ST10F280_NAMES: [&str; 6] = [
    "st10f280/2",
    "st10f280/4",
    "st10f280/8",
    "st10f280/16",
    "st10f280/32",
    "st10f280/64",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_is_valid() {
        for p in PRESETS {
            p.spec
                .validate()
                .unwrap_or_else(|e| panic!("{}: {e}", p.name));
        }
        for kib in ST10F280_UNIT_KIB {
            let p = lookup(&format!("st10f280/{kib}")).unwrap();
            p.spec.validate().unwrap();
            assert_eq!(p.spec.capacity(), 448 * 1024);
            assert_eq!(p.name, format!("st10f280/{kib}"));
        }
        assert!(lookup(DEFAULT_PRESET).is_ok());
    }

    #[test]
    fn unknown_names_are_refused() {
        assert_eq!(lookup("nope"), Err(FlashError::UnknownPreset));
        assert_eq!(lookup("st10f280/3"), Err(FlashError::UnknownPreset));
        assert_eq!(lookup("st10f280/"), Err(FlashError::UnknownPreset));
        assert_eq!(lookup("st10f2é0/4"), Err(FlashError::UnknownPreset));
        assert_eq!(lookup("é"), Err(FlashError::UnknownPreset));
    }

    #[test]
    fn names_are_found_in_any_case() {
        for p in PRESETS {
            let upper = p.name.to_ascii_uppercase();
            assert_eq!(lookup(&upper).unwrap().name, p.name, "{upper}");
        }
        assert_eq!(lookup("M29DW640D").unwrap().name, "m29dw640d");
        assert_eq!(lookup("ST10F280/4").unwrap().name, "st10f280/4");
        assert_eq!(lookup("Nand-1G").unwrap().name, "nand-1g");
    }

    #[test]
    fn paper_geometries() {
        let DeviceSpec::Nor(k) = lookup("28f008sa").unwrap().spec else {
            panic!()
        };
        assert_eq!((k.units, k.banks, k.unit_size), (64, 8, 256 * 1024));
        // 504 blocks of 512 B per segment fit with a summary in front.
        assert!(504 * 512 < k.unit_size);
        let DeviceSpec::Nor(m) = lookup("m29dw640d").unwrap().spec else {
            panic!()
        };
        assert_eq!((m.units, m.unit_size), (126, 64 * 1024));
        let DeviceSpec::Nand(n) = lookup("nand-128m").unwrap().spec else {
            panic!()
        };
        assert_eq!(n.capacity(), 128 << 20);
        let DeviceSpec::Nand(g) = lookup("nand-1g").unwrap().spec else {
            panic!()
        };
        assert_eq!(g.capacity(), 1 << 30);
        let DeviceSpec::Nand(f) = lookup("mlc-flexfs").unwrap().spec else {
            panic!()
        };
        assert!(f.is_mlc() && f.pages_per_block == 128 && f.page_size == 4096);
    }
}
