//! Device specifications: geometry, timing, endurance and error correction of each medium.
//!
//! A specification is plain data. It is what a preset names, what an image header records, and
//! all a simulator needs to behave like the part. Times are in nanoseconds of device time.

use crate::error::{FlashError, Result};

/// Timing of a NOR part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NorTiming {
    /// Array read per word (memory-mapped access time).
    pub read_word_ns: u64,
    /// Programming one word (the cell time, per word).
    pub program_word_ns: u64,
    /// Fixed cost of one program command (page-program parts: the whole page time).
    pub program_cmd_ns: u64,
    /// Erasing one erase unit.
    pub erase_ns: u64,
    /// Bus transfer per byte, on top of the array times (serial parts).
    pub bus_byte_ns: u64,
    /// Extra time a read costs when it suspends an erase in progress on its bank; `None` when
    /// the part cannot suspend an erase (a read then waits for the erase to finish).
    pub erase_suspend_ns: Option<u64>,
}

impl NorTiming {
    /// No timing: a real part behind a driver, whose time is its own (the adapters'), or a
    /// part described only by its geometry.
    pub const UNTIMED: NorTiming = NorTiming {
        read_word_ns: 0,
        program_word_ns: 0,
        program_cmd_ns: 0,
        erase_ns: 0,
        bus_byte_ns: 0,
        erase_suspend_ns: None,
    };
}

/// A NOR flash part: byte-readable, word-programmable, erased by units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NorSpec {
    /// Bytes in one erase unit.
    pub unit_size: u32,
    /// Number of erase units.
    pub units: u32,
    /// Banks that work independently; units are split evenly and contiguously among them.
    pub banks: u32,
    /// Program granularity and alignment in bytes.
    pub word_size: u32,
    /// Largest program command in bytes, which may not cross a multiple of it (SPI page
    /// program); 0 when a command may span any number of words.
    pub program_page: u32,
    /// Whether an already-programmed word may be programmed again to clear more bits.
    pub reprogrammable: bool,
    /// Latencies.
    pub timing: NorTiming,
    /// Guaranteed erase cycles per unit.
    pub endurance: u32,
}

/// Timing of NAND operations in one cell mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NandTiming {
    /// Loading a page from the array (tR).
    pub read_ns: u64,
    /// Programming a page (tPROG).
    pub program_ns: u64,
    /// Erasing a block (tBERS).
    pub erase_ns: u64,
    /// Bus transfer per byte moved to or from the host.
    pub bus_byte_ns: u64,
}

impl NandTiming {
    /// No timing (see [`NorTiming::UNTIMED`]).
    pub const UNTIMED: NandTiming = NandTiming {
        read_ns: 0,
        program_ns: 0,
        erase_ns: 0,
        bus_byte_ns: 0,
    };
}

/// Error correction as the part (or its controller) applies it to each page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EccSpec {
    /// Bytes of page data one codeword covers.
    pub codeword: u32,
    /// Bit errors one codeword corrects.
    pub correctable: u32,
}

/// Cells of a NAND part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cells {
    /// One bit per cell.
    Slc,
    /// Two bits per cell: LSB/MSB page pairs (page `2i` is the LSB page of pair `i`, page
    /// `2i + 1` its MSB page). After an erase a block is used either in MLC mode (all pages,
    /// the spec's `timing`) or in SLC mode (LSB pages only, these timings).
    Mlc {
        /// Latencies of a block used in SLC mode.
        slc_mode: NandTiming,
    },
}

/// A NAND part: pages with a spare area, programmed once per erase, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NandSpec {
    /// Number of erase blocks.
    pub blocks: u32,
    /// Pages per block (for MLC: LSB and MSB pages together).
    pub pages_per_block: u32,
    /// Data bytes per page.
    pub page_size: u32,
    /// Spare (OOB) bytes per page free for the file system (what ECC and the bad-block
    /// marker leave of the physical spare area).
    pub spare_size: u32,
    /// Dies or planes that work independently; blocks are split evenly among them.
    pub banks: u32,
    /// Cell type.
    pub cells: Cells,
    /// Error correction per page.
    pub ecc: EccSpec,
    /// Latencies (MLC parts: of MLC mode).
    pub timing: NandTiming,
    /// Guaranteed erase cycles per block.
    pub endurance: u32,
    /// Blocks per thousand that leave the factory marked bad.
    pub factory_bad_permille: u32,
}

/// Byte-addressable non-volatile RAM (FRAM): in-place writes, no erase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NvramSpec {
    /// Capacity in bytes.
    pub size: u64,
    /// Bytes moved per access cycle.
    pub word_size: u32,
    /// One access cycle, read or write.
    pub access_ns: u64,
    /// Fixed cost of each command (opcode and address on serial parts).
    pub command_ns: u64,
    /// Bus transfer per byte, on top of the access cycles (serial parts).
    pub bus_byte_ns: u64,
    /// Guaranteed write cycles per byte.
    pub endurance: u64,
}

/// Any medium.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceSpec {
    /// NOR flash.
    Nor(NorSpec),
    /// NAND flash (SLC or MLC).
    Nand(NandSpec),
    /// NVRAM.
    Nvram(NvramSpec),
}

/// Largest NOR or NVRAM device a simulator takes, in bytes. Far beyond real parts; it
/// bounds what a (possibly hostile) image header can make a simulator allocate.
pub const MAX_BYTE_DEVICE: u64 = 16 << 30;

/// Largest NOR erase unit a simulator takes, in bytes.
pub const MAX_NOR_UNIT: u32 = 16 << 20;

/// Most erase units (NOR) or blocks (NAND) a simulator takes.
pub const MAX_BLOCKS: u32 = 1 << 24;

/// Largest NAND page (data or spare area) a simulator takes, in bytes.
pub const MAX_NAND_PAGE: u32 = 1 << 20;

/// Most pages a simulated NAND part may have (it keeps one state byte per page in RAM).
pub const MAX_NAND_PAGES: u64 = 1 << 28;

impl NorSpec {
    /// Capacity in bytes.
    pub fn capacity(&self) -> u64 {
        self.unit_size as u64 * self.units as u64
    }

    /// Bank of an erase unit.
    pub fn bank_of(&self, unit: u32) -> u32 {
        unit / (self.units / self.banks)
    }

    /// Checks that the geometry can exist.
    pub fn validate(&self) -> Result<()> {
        let bad = |why| Err(FlashError::BadSpec(why));
        if self.units == 0 || self.unit_size == 0 || self.banks == 0 || self.word_size == 0 {
            return bad("a NOR size is zero");
        }
        if !self.word_size.is_power_of_two() || self.word_size > 8 {
            return bad("NOR word size must be 1, 2, 4 or 8 bytes");
        }
        if self.unit_size % self.word_size != 0 {
            return bad("NOR unit size is not a multiple of the word size");
        }
        if self.units % self.banks != 0 {
            return bad("NOR units do not split evenly into banks");
        }
        if self.program_page != 0
            && (self.program_page % self.word_size != 0 || self.unit_size % self.program_page != 0)
        {
            return bad("NOR program page does not divide the unit into words");
        }
        if self.endurance == 0 {
            return bad("endurance is zero");
        }
        if self.capacity() > MAX_BYTE_DEVICE {
            return bad("NOR device larger than 16 GiB");
        }
        if self.unit_size > MAX_NOR_UNIT || self.units > MAX_BLOCKS {
            return bad("NOR unit larger than 16 MiB or more than 2^24 units");
        }
        Ok(())
    }
}

impl NandSpec {
    /// Capacity of page data in bytes (MLC parts: in MLC mode).
    pub fn capacity(&self) -> u64 {
        self.blocks as u64 * self.pages_per_block as u64 * self.page_size as u64
    }

    /// Bank of a block.
    pub fn bank_of(&self, block: u32) -> u32 {
        block / (self.blocks / self.banks)
    }

    /// Whether the part has two bits per cell.
    pub fn is_mlc(&self) -> bool {
        matches!(self.cells, Cells::Mlc { .. })
    }

    /// Checks that the geometry can exist.
    pub fn validate(&self) -> Result<()> {
        let bad = |why| Err(FlashError::BadSpec(why));
        if self.blocks == 0 || self.pages_per_block == 0 || self.page_size == 0 || self.banks == 0 {
            return bad("a NAND size is zero");
        }
        if self.blocks % self.banks != 0 {
            return bad("NAND blocks do not split evenly into banks");
        }
        if self.pages_per_block > 1024 {
            return bad("more than 1024 pages per block");
        }
        if self.is_mlc() && self.pages_per_block % 2 != 0 {
            return bad("an MLC block needs LSB/MSB page pairs");
        }
        if self.ecc.codeword == 0 || self.page_size % self.ecc.codeword != 0 {
            return bad("ECC codewords do not divide the page");
        }
        if self.ecc.correctable > 32 {
            return bad("ECC corrects more than 32 bits per codeword");
        }
        if self.page_size > MAX_NAND_PAGE || self.spare_size > MAX_NAND_PAGE {
            return bad("NAND page or spare area larger than 1 MiB");
        }
        if self.blocks > MAX_BLOCKS
            || self.blocks as u64 * self.pages_per_block as u64 > MAX_NAND_PAGES
        {
            return bad("more than 2^24 NAND blocks or 2^28 pages");
        }
        if self.factory_bad_permille > 100 {
            return bad("more than 10% factory bad blocks");
        }
        if self.endurance == 0 {
            return bad("endurance is zero");
        }
        Ok(())
    }
}

impl NvramSpec {
    /// Checks that the geometry can exist.
    pub fn validate(&self) -> Result<()> {
        if self.size == 0 || self.word_size == 0 || self.endurance == 0 {
            return Err(FlashError::BadSpec("an NVRAM size is zero"));
        }
        if self.size > MAX_BYTE_DEVICE {
            return Err(FlashError::BadSpec("NVRAM device larger than 16 GiB"));
        }
        Ok(())
    }
}

impl DeviceSpec {
    /// Checks that the geometry can exist.
    pub fn validate(&self) -> Result<()> {
        match self {
            DeviceSpec::Nor(s) => s.validate(),
            DeviceSpec::Nand(s) => s.validate(),
            DeviceSpec::Nvram(s) => s.validate(),
        }
    }

    /// Capacity in bytes (NAND: page data only).
    pub fn capacity(&self) -> u64 {
        match self {
            DeviceSpec::Nor(s) => s.capacity(),
            DeviceSpec::Nand(s) => s.capacity(),
            DeviceSpec::Nvram(s) => s.size,
        }
    }

    /// Short name of the medium.
    pub fn kind(&self) -> &'static str {
        match self {
            DeviceSpec::Nor(_) => "nor",
            DeviceSpec::Nand(s) if s.is_mlc() => "mlc-nand",
            DeviceSpec::Nand(_) => "nand",
            DeviceSpec::Nvram(_) => "nvram",
        }
    }
}
