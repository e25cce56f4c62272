//! Small devices and helpers shared by the tests.
#![allow(dead_code, unused_imports)]

use flash::{Cells, EccSpec, ImageMeta, NandSim, NandSpec, NandTiming, NorSim, NorSpec, NorTiming};
use flashfs::{NandSegments, NorSegments};

/// A small NOR part: 16 units of 8 KiB in 2 banks, 4-byte words.
pub fn nor_spec(reprogrammable: bool) -> NorSpec {
    NorSpec {
        unit_size: 8 * 1024,
        units: 16,
        banks: 2,
        word_size: 4,
        program_page: 0,
        reprogrammable,
        timing: NorTiming {
            read_word_ns: 100,
            program_word_ns: 10_000,
            program_cmd_ns: 0,
            erase_ns: 100_000_000,
            bus_byte_ns: 0,
            erase_suspend_ns: Some(20_000),
        },
        endurance: 100_000,
    }
}

/// A small NAND part: 24 blocks of 16 pages of 512 B.
pub fn nand_spec() -> NandSpec {
    NandSpec {
        blocks: 24,
        pages_per_block: 16,
        page_size: 512,
        spare_size: 16,
        banks: 1,
        cells: Cells::Slc,
        ecc: EccSpec {
            codeword: 512,
            correctable: 1,
        },
        timing: NandTiming {
            read_ns: 25_000,
            program_ns: 200_000,
            erase_ns: 1_500_000,
            bus_byte_ns: 25,
        },
        endurance: 100_000,
        factory_bad_permille: 0,
    }
}

pub fn nor(reprogrammable: bool) -> NorSegments<NorSim> {
    let sim = NorSim::new(nor_spec(reprogrammable), ImageMeta::new("test-nor", 1)).unwrap();
    NorSegments::new(sim, 512).unwrap()
}

pub fn nand() -> NandSegments<NandSim> {
    let sim = NandSim::new(nand_spec(), ImageMeta::new("test-nand", 1)).unwrap();
    NandSegments::new(sim).unwrap()
}

/// Deterministic sector content: sector number and version, repeated (the torture
/// harness's, so the tests and the harness agree on what each write holds).
pub use flashfs_bench::torture::pattern;
