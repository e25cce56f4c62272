//! The configuration a C caller fills in: the flash's geometry and callbacks, and the few
//! file-system settings firmware chooses.

use core::ffi::c_void;

use flash::{Cells, EccSpec, NandSpec, NandTiming, NorSpec, NorTiming};
use flashfs::{Error, FsConfig, Result};

/// `flashfs_config::medium`: NOR flash (byte reads, word programs, unit erases).
pub const FLASHFS_NOR: u32 = 0;
/// `flashfs_config::medium`: NAND flash (page reads and programs with a spare area, block
/// erases).
pub const FLASHFS_NAND: u32 = 1;

/// Erase cycles assumed when `flashfs_config::endurance` is 0.
pub const FLASHFS_DEFAULT_ENDURANCE: u32 = 100_000;
/// NOR block size used when `flashfs_config::block_size` is 0.
pub const FLASHFS_DEFAULT_NOR_BLOCK: u32 = 512;

/// Reads `len` bytes at byte address `addr` of a NOR part into `buf`.
pub type flashfs_read_fn =
    Option<unsafe extern "C" fn(context: *mut c_void, addr: u64, buf: *mut u8, len: u32) -> i32>;
/// Programs `len` bytes (whole words, word-aligned) at `addr` of a NOR part.
pub type flashfs_prog_fn =
    Option<unsafe extern "C" fn(context: *mut c_void, addr: u64, data: *const u8, len: u32) -> i32>;
/// Reads the start of page `page` of block `block` of a NAND part: `data_len` bytes of its
/// data and `spare_len` of its spare area (either may be 0). Returns the bit errors the ECC
/// corrected (0 or more), `FLASHFS_ERR_BADMSG` when it could not
/// correct them, or another negative error.
pub type flashfs_read_page_fn = Option<
    unsafe extern "C" fn(
        context: *mut c_void,
        block: u32,
        page: u32,
        data: *mut u8,
        data_len: u32,
        spare: *mut u8,
        spare_len: u32,
    ) -> i32,
>;
/// Programs page `page` of block `block` of a NAND part: data and spare in one operation
/// (shorter buffers leave the rest erased).
pub type flashfs_prog_page_fn = Option<
    unsafe extern "C" fn(
        context: *mut c_void,
        block: u32,
        page: u32,
        data: *const u8,
        data_len: u32,
        spare: *const u8,
        spare_len: u32,
    ) -> i32,
>;
/// Erases erase unit (NOR) or block (NAND) `unit`, and waits for it.
pub type flashfs_erase_fn = Option<unsafe extern "C" fn(context: *mut c_void, unit: u32) -> i32>;
/// Whether a NAND block carries a bad-block mark: 1 yes, 0 no, negative on error.
pub type flashfs_block_fn = Option<unsafe extern "C" fn(context: *mut c_void, block: u32) -> i32>;
/// Waits until every program before it is on the medium.
pub type flashfs_sync_fn = Option<unsafe extern "C" fn(context: *mut c_void) -> i32>;

/// A volume's flash and settings. Zero-initialize it, then fill in the medium, its geometry
/// and its callbacks. Callbacks return 0 (or a count where said) on success and a negative
/// error on failure: `FLASHFS_ERR_IO` from `prog`, `prog_page` or
/// `erase` says the part reported a failed program or erase (a worn block, which the file
/// system retires); any other negative value is a device failure that fails the operation.
/// The library copies the configuration: it need not outlive the call it is passed to.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct flashfs_config {
    /// Passed to every callback.
    pub context: *mut c_void,
    /// `FLASHFS_NOR` or `FLASHFS_NAND`.
    pub medium: u32,

    /// NOR: bytes per erase unit.
    pub unit_size: u32,
    /// NOR: erase units.
    pub units: u32,
    /// NOR: program granularity and alignment, in bytes.
    pub word_size: u32,
    /// NOR: the largest program a `prog` call may carry, which may not cross a multiple of
    /// it (SPI page program); 0 when any length may be programmed at once.
    pub program_page_size: u32,
    /// NOR: whether a programmed word may be programmed again to clear more bits.
    pub reprogrammable: bool,

    /// NAND: data bytes per page.
    pub page_size: u32,
    /// NAND: spare bytes per page free for the file system (at least 12).
    pub spare_size: u32,
    /// NAND: pages per block.
    pub pages_per_block: u32,
    /// NAND: blocks.
    pub blocks: u32,
    /// NAND: bit errors the part's ECC corrects per page (0: none, or unknown).
    pub ecc_bits: u32,

    /// Erase cycles each unit or block is rated for (0: `FLASHFS_DEFAULT_ENDURANCE`).
    pub endurance: u32,

    /// NOR: reads.
    pub read: flashfs_read_fn,
    /// NOR: programs.
    pub prog: flashfs_prog_fn,
    /// NAND: page reads.
    pub read_page: flashfs_read_page_fn,
    /// NAND: page programs.
    pub prog_page: flashfs_prog_page_fn,
    /// NAND: bad-block marks (NULL: no block is marked bad).
    pub is_bad: flashfs_block_fn,
    /// NAND: marks a block bad for good (NULL: retired blocks are found again as worn).
    pub mark_bad: flashfs_block_fn,
    /// Erases.
    pub erase: flashfs_erase_fn,
    /// A barrier for parts that buffer programs (NULL: none needed).
    pub sync: flashfs_sync_fn,

    /// NOR: bytes per file-system block, a power of two of at least 64 (0:
    /// `FLASHFS_DEFAULT_NOR_BLOCK`). NAND blocks are pages.
    pub block_size: u32,
    /// RAM for file blocks that small writes leave there until a sync, in bytes (0: every
    /// write programs its blocks at once). Each buffered block costs its size.
    pub write_buffer_bytes: u32,
    /// RAM for every cache and buffer of the volume, in bytes, shared out over them
    /// (`FsConfig::ram_budget`; the write buffer's share replaces `write_buffer_bytes`); 0:
    /// the microcontroller profile's settings.
    pub ram_budget: u32,
}

/// The part a configuration describes.
pub(crate) enum Part {
    Nor(NorSpec),
    Nand(NandSpec),
}

impl flashfs_config {
    fn endurance(&self) -> u32 {
        if self.endurance == 0 {
            FLASHFS_DEFAULT_ENDURANCE
        } else {
            self.endurance
        }
    }

    /// The part, checked: its geometry and the callbacks its medium needs.
    pub(crate) fn part(&self) -> Result<Part> {
        if self.erase.is_none() {
            return Err(Error::InvalidArgument("the erase callback is missing"));
        }
        let part = match self.medium {
            FLASHFS_NOR => {
                if self.read.is_none() || self.prog.is_none() {
                    return Err(Error::InvalidArgument(
                        "a NOR part needs read and prog callbacks",
                    ));
                }
                Part::Nor(NorSpec {
                    unit_size: self.unit_size,
                    units: self.units,
                    banks: 1,
                    word_size: self.word_size,
                    program_page: self.program_page_size,
                    reprogrammable: self.reprogrammable,
                    timing: NorTiming::UNTIMED,
                    endurance: self.endurance(),
                })
            }
            FLASHFS_NAND => {
                if self.read_page.is_none() || self.prog_page.is_none() {
                    return Err(Error::InvalidArgument(
                        "a NAND part needs read_page and prog_page callbacks",
                    ));
                }
                Part::Nand(NandSpec {
                    blocks: self.blocks,
                    pages_per_block: self.pages_per_block,
                    page_size: self.page_size,
                    spare_size: self.spare_size,
                    banks: 1,
                    cells: Cells::Slc,
                    ecc: EccSpec {
                        codeword: self.page_size,
                        correctable: self.ecc_bits,
                    },
                    timing: NandTiming::UNTIMED,
                    endurance: self.endurance(),
                    factory_bad_permille: 0,
                })
            }
            _ => {
                return Err(Error::InvalidArgument(
                    "medium is neither FLASHFS_NOR nor FLASHFS_NAND",
                ))
            }
        };
        let valid = match &part {
            Part::Nor(s) => s.validate(),
            Part::Nand(s) => s.validate(),
        };
        valid.map_err(|_| Error::InvalidArgument("the geometry describes no possible part"))?;
        Ok(part)
    }

    /// The NOR block size.
    pub(crate) fn nor_block(&self) -> u32 {
        if self.block_size == 0 {
            FLASHFS_DEFAULT_NOR_BLOCK
        } else {
            self.block_size
        }
    }

    /// The file system's settings: the microcontroller profile, with the caller's write
    /// buffer, or shared out of the caller's RAM budget.
    pub(crate) fn fs_config(&self) -> FsConfig {
        FsConfig {
            write_buffer_bytes: self.write_buffer_bytes as usize,
            ram_budget: (self.ram_budget > 0).then_some(self.ram_budget as usize),
            ..FsConfig::small_ram()
        }
    }
}
