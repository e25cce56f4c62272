//! The media traits: what each kind of memory lets software do.
//!
//! Implementations must refuse anything the real part would not do reliably (see
//! [`FlashError`](crate::FlashError)): that is what makes code tested on the simulators safe
//! on hardware. Reads take `&mut self` because a read costs device time and may suspend an
//! erase.

use core::time::Duration;

use crate::error::Result;
use crate::spec::{NandSpec, NorSpec, NvramSpec};

/// Time as the device sees it. Simulators keep a device clock; adapters for real hardware
/// keep the defaults (no clock) unless given one.
pub trait DeviceClock {
    /// Device time since the device was created or opened.
    fn now(&self) -> Duration {
        Duration::ZERO
    }

    /// Lets `d` of device time pass with no request (idle time: background erases finish).
    fn idle(&mut self, d: Duration) {
        let _ = d;
    }
}

/// NOR flash: random reads, programming clears bits, erase sets a whole unit to `0xFF`.
pub trait NorFlash: DeviceClock {
    /// The part.
    fn spec(&self) -> &NorSpec;

    /// Reads `buf.len()` bytes at byte address `addr`.
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<()>;

    /// Programs `data` at `addr`, which must be word-aligned and whole words long. Each bit
    /// of `data` that is 0 is cleared; a 1 over a cleared bit is an error, as is programming
    /// a word twice on a part that does not allow reprogramming.
    fn program(&mut self, addr: u64, data: &[u8]) -> Result<()>;

    /// Erases unit `unit` and waits for it.
    fn erase(&mut self, unit: u32) -> Result<()>;

    /// Starts erasing `unit` and returns at once: work on other banks proceeds meanwhile,
    /// work on the same bank waits for the erase (reads may suspend it where the part can).
    /// The default erases synchronously.
    fn start_erase(&mut self, unit: u32) -> Result<()> {
        self.erase(unit)
    }

    /// Waits until every program before it is on the medium (a barrier for parts that
    /// buffer writes).
    fn sync(&mut self) -> Result<()> {
        Ok(())
    }

    /// Whether a program writes its bytes as given, setting bits as well as clearing them
    /// (NVRAM seen as NOR, [`crate::NvramNor`]): a program over written bytes then leaves
    /// exactly the new ones, and a layout may take back part of a unit without erasing it
    /// whole. False by default: NOR's programs only clear bits.
    fn writes_in_place(&self) -> bool {
        false
    }
}

/// Where a NAND page is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PageAddr {
    /// Erase block.
    pub block: u32,
    /// Page within the block.
    pub page: u32,
}

impl PageAddr {
    /// The page `page` of block `block`.
    pub const fn new(block: u32, page: u32) -> Self {
        PageAddr { block, page }
    }
}

/// What a successful NAND read reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReadStatus {
    /// Bit errors the ECC corrected. Rising counts are the early warning of a wearing block.
    pub corrected_bits: u32,
}

/// NAND flash: page-sized reads and programs, one program per page per erase, in order.
pub trait NandFlash: DeviceClock {
    /// The part.
    fn spec(&self) -> &NandSpec;

    /// Reads the start of a page's data into `data` and the start of its spare area into
    /// `spare` (either may be empty). ECC corrects what it can; beyond that the buffers hold
    /// garbage and the call returns [`Uncorrectable`](crate::FlashError::Uncorrectable).
    fn read_page(&mut self, at: PageAddr, data: &mut [u8], spare: &mut [u8]) -> Result<ReadStatus>;

    /// Programs a page's data and spare area in one operation (shorter buffers leave the rest
    /// erased). The page must be erased, and above every page programmed in its block since
    /// the last erase.
    fn program_page(&mut self, at: PageAddr, data: &[u8], spare: &[u8]) -> Result<()>;

    /// Erases a block and waits for it.
    fn erase_block(&mut self, block: u32) -> Result<()>;

    /// Starts erasing a block and returns at once (see [`NorFlash::start_erase`]).
    fn start_erase(&mut self, block: u32) -> Result<()> {
        self.erase_block(block)
    }

    /// Whether the block carries a bad-block mark (from the factory or from
    /// [`mark_bad`](NandFlash::mark_bad)).
    fn is_bad(&mut self, block: u32) -> Result<bool>;

    /// Marks a block bad, for good.
    fn mark_bad(&mut self, block: u32) -> Result<()>;

    /// See [`NorFlash::sync`].
    fn sync(&mut self) -> Result<()> {
        Ok(())
    }

    /// The part as MLC NAND whose blocks take an SLC mode, if it is one (FlexFS's regions
    /// need it); `None` for every other part.
    fn as_mlc(&mut self) -> Option<&mut dyn MlcNand> {
        None
    }
}

/// How the cells of an MLC block are used between two erases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CellMode {
    /// All pages, two bits per cell, slower programs.
    #[default]
    Mlc,
    /// LSB pages only: half the capacity, SLC-like speed.
    Slc,
}

/// MLC NAND whose blocks can be used in SLC mode (FlexFS).
pub trait MlcNand: NandFlash {
    /// Chooses how an erased block will be used until its next erase. Changing the mode of a
    /// block that holds any programmed page is an error.
    fn set_mode(&mut self, block: u32, mode: CellMode) -> Result<()>;

    /// The mode a block is in.
    fn mode(&self, block: u32) -> CellMode;

    /// Whether `page` is an LSB page (usable in SLC mode).
    fn is_lsb(&self, page: u32) -> bool {
        page % 2 == 0
    }
}

/// Byte-addressable non-volatile memory: reads and writes in place, no erase.
pub trait Nvram: DeviceClock {
    /// The part.
    fn spec(&self) -> &NvramSpec;

    /// Reads `buf.len()` bytes at `addr`.
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<()>;

    /// Writes `data` at `addr`, in place. A power cut during the write may leave a prefix
    /// of it written.
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<()>;
}
