//! Small devices and helpers shared by the integration tests.
#![allow(dead_code)]

use flash::store::Store;
use flash::{
    preset, Cells, DeviceSpec, EccSpec, ImageMeta, NandSpec, NandTiming, NorSpec, NorTiming,
    NvramSpec, WearModel,
};

pub const US: u64 = 1_000;
pub const MS: u64 = 1_000_000;

/// A small NOR part: 8 units of 256 B in 2 banks, 4-byte words, easy round timings.
pub fn small_nor(reprogrammable: bool) -> NorSpec {
    NorSpec {
        unit_size: 256,
        units: 8,
        banks: 2,
        word_size: 4,
        program_page: 0,
        reprogrammable,
        timing: NorTiming {
            read_word_ns: 100,
            program_word_ns: 1_000,
            program_cmd_ns: 500,
            erase_ns: MS,
            bus_byte_ns: 0,
            erase_suspend_ns: None,
        },
        endurance: 5,
    }
}

pub fn small_timing() -> NandTiming {
    NandTiming {
        read_ns: 10 * US,
        program_ns: 100 * US,
        erase_ns: MS,
        bus_byte_ns: 10,
    }
}

/// A small SLC NAND part: 8 blocks of 8 pages of 64 + 8 B in 2 banks, ECC of 2 bits per
/// 32 B, no factory bad blocks.
pub fn small_nand() -> NandSpec {
    NandSpec {
        blocks: 8,
        pages_per_block: 8,
        page_size: 64,
        spare_size: 8,
        banks: 2,
        cells: Cells::Slc,
        ecc: EccSpec {
            codeword: 32,
            correctable: 2,
        },
        timing: small_timing(),
        endurance: 5,
        factory_bad_permille: 0,
    }
}

/// The small NAND part with two bits per cell.
pub fn small_mlc() -> NandSpec {
    NandSpec {
        cells: Cells::Mlc {
            slc_mode: NandTiming {
                read_ns: 5 * US,
                program_ns: 40 * US,
                erase_ns: MS,
                bus_byte_ns: 10,
            },
        },
        ..small_nand()
    }
}

pub fn small_nvram() -> NvramSpec {
    NvramSpec {
        size: 1024,
        word_size: 2,
        access_ns: 100,
        command_ns: 0,
        bus_byte_ns: 0,
        endurance: 1_000_000,
    }
}

pub fn meta(wear: WearModel) -> ImageMeta {
    ImageMeta {
        wear,
        ..ImageMeta::new("test", 1)
    }
}

pub fn nor_preset(name: &str) -> NorSpec {
    match preset::lookup(name).unwrap().spec {
        DeviceSpec::Nor(s) => s,
        other => panic!("{name} is not NOR: {other:?}"),
    }
}

pub fn nand_preset(name: &str) -> NandSpec {
    match preset::lookup(name).unwrap().spec {
        DeviceSpec::Nand(s) => s,
        other => panic!("{name} is not NAND: {other:?}"),
    }
}

/// Every byte of a store: the whole image, header and tables included.
pub fn image_bytes<S: Store>(s: &S) -> Vec<u8> {
    let mut v = vec![0u8; s.len() as usize];
    s.read(0, &mut v).unwrap();
    v
}

/// A page's worth of recognisable bytes for (block, page).
pub fn pattern(block: u32, page: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (block as usize * 31 + page as usize * 7 + i * 13) as u8 ^ 0xA5)
        .collect()
}
