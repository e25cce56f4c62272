//! littlefs on a flash simulator: the read, prog, erase and sync callbacks of
//! [`littlefs2::driver::Storage`] as a driver on a real part would implement them, so that
//! device time, reads, programs, erases and wear of littlefs are counted by the same
//! simulator code as flashfs's.
//!
//! littlefs2 fixes the geometry at compile time, so there is one storage type per preset
//! ([`W25q64jv`], [`W25n01gv`], [`Cy15b102q`], [`Nand1g`]). Each holds a [`Driver`] on a
//! [`Shared`] simulator: the benchmark keeps another handle on it to read the clock and the
//! counters while littlefs holds the storage.
//!
//! What the drivers do that littlefs's users do on real parts:
//! - NOR: programs are split at the part's program-page edges (the W25Q64JV wraps inside a
//!   256-byte page, and the simulator refuses a program that crosses one).
//! - NAND: the factory bad-block marks are read once, at attach, into a table; an erase or
//!   a program of a bad block, or an uncorrectable read, is reported to littlefs as
//!   corrupt, so that it relocates.
//! - FRAM: erase does nothing (the part has no erase); littlefs's blocks are a division of
//!   its bytes.

use std::cell::RefCell;
use std::rc::Rc;

use flash::{FlashError, NandFlash, NandSim, NorFlash, NorSim, Nvram, NvramSim, PageAddr};
use littlefs2::consts::{U128, U16, U2048, U256, U32, U64, U8};
use littlefs2::driver::Storage;
use littlefs2::io;

/// A simulator shared by littlefs's storage and the benchmark that reads its clock and
/// counters.
pub type Shared<S> = Rc<RefCell<S>>;

/// Wraps a simulator for sharing.
pub fn shared<S>(sim: S) -> Shared<S> {
    Rc::new(RefCell::new(sim))
}

/// The work of littlefs's callbacks on one kind of part; addresses are bytes from the
/// start of the device.
pub trait Driver {
    /// Reads `buf.len()` bytes at `off`.
    fn read(&mut self, off: u64, buf: &mut [u8]) -> flash::Result<()>;
    /// Programs `data` at `off` (within one littlefs block).
    fn prog(&mut self, off: u64, data: &[u8]) -> flash::Result<()>;
    /// Erases the erase unit `unit` (`unit_bytes` long).
    fn erase(&mut self, unit: u32) -> flash::Result<()>;
    /// Bytes per erase unit.
    fn unit_bytes(&self) -> u64;
    /// Waits until every program is on the medium.
    fn sync(&mut self) -> flash::Result<()>;
}

/// NOR flash: reads at any address, programs split at program-page edges.
#[derive(Debug, Clone)]
pub struct NorDriver(pub Shared<NorSim>);

impl Driver for NorDriver {
    fn read(&mut self, off: u64, buf: &mut [u8]) -> flash::Result<()> {
        self.0.borrow_mut().read(off, buf)
    }

    fn prog(&mut self, off: u64, data: &[u8]) -> flash::Result<()> {
        let mut sim = self.0.borrow_mut();
        let page = u64::from(sim.spec().program_page);
        let mut at = off;
        let mut rest = data;
        while !rest.is_empty() {
            let room = if page == 0 {
                rest.len()
            } else {
                (page - at % page) as usize
            };
            let (now, later) = rest.split_at(room.min(rest.len()));
            sim.program(at, now)?;
            at += now.len() as u64;
            rest = later;
        }
        Ok(())
    }

    fn erase(&mut self, unit: u32) -> flash::Result<()> {
        self.0.borrow_mut().erase(unit)
    }

    fn unit_bytes(&self) -> u64 {
        u64::from(self.0.borrow().spec().unit_size)
    }

    fn sync(&mut self) -> flash::Result<()> {
        NorFlash::sync(&mut *self.0.borrow_mut())
    }
}

/// NAND flash: whole pages, and a table of the bad blocks read at attach.
#[derive(Debug, Clone)]
pub struct NandDriver {
    sim: Shared<NandSim>,
    bad: Vec<bool>,
}

impl NandDriver {
    /// Attaches to a NAND simulator: reads every block's bad-block mark once.
    pub fn attach(sim: Shared<NandSim>) -> flash::Result<Self> {
        let blocks = sim.borrow().spec().blocks;
        let mut bad = Vec::with_capacity(blocks as usize);
        for b in 0..blocks {
            bad.push(sim.borrow_mut().is_bad(b)?);
        }
        Ok(NandDriver { sim, bad })
    }

    /// Blocks the table holds as bad.
    pub fn bad_blocks(&self) -> usize {
        self.bad.iter().filter(|b| **b).count()
    }

    fn page_of(&self, off: u64) -> (PageAddr, usize) {
        let spec = *self.sim.borrow().spec();
        let page = off / u64::from(spec.page_size);
        let at = PageAddr::new(
            (page / u64::from(spec.pages_per_block)) as u32,
            (page % u64::from(spec.pages_per_block)) as u32,
        );
        (at, spec.page_size as usize)
    }

    fn check(&self, block: u32) -> flash::Result<()> {
        if self.bad.get(block as usize).copied().unwrap_or(false) {
            return Err(FlashError::BadBlock { block });
        }
        Ok(())
    }
}

impl Driver for NandDriver {
    fn read(&mut self, off: u64, buf: &mut [u8]) -> flash::Result<()> {
        let (first, page) = self.page_of(off);
        let ppb = self.sim.borrow().spec().pages_per_block;
        for (i, chunk) in buf.chunks_mut(page).enumerate() {
            let n = first.page + i as u32;
            let at = PageAddr::new(first.block + n / ppb, n % ppb);
            self.sim.borrow_mut().read_page(at, chunk, &mut [])?;
        }
        Ok(())
    }

    fn prog(&mut self, off: u64, data: &[u8]) -> flash::Result<()> {
        let (first, page) = self.page_of(off);
        self.check(first.block)?;
        for (i, chunk) in data.chunks(page).enumerate() {
            let at = PageAddr::new(first.block, first.page + i as u32);
            self.sim.borrow_mut().program_page(at, chunk, &[])?;
        }
        Ok(())
    }

    fn erase(&mut self, unit: u32) -> flash::Result<()> {
        self.check(unit)?;
        self.sim.borrow_mut().erase_block(unit)
    }

    fn unit_bytes(&self) -> u64 {
        let spec = *self.sim.borrow().spec();
        u64::from(spec.page_size) * u64::from(spec.pages_per_block)
    }

    fn sync(&mut self) -> flash::Result<()> {
        NandFlash::sync(&mut *self.sim.borrow_mut())
    }
}

/// FRAM: reads and writes in place; nothing to erase.
#[derive(Debug, Clone)]
pub struct NvramDriver(pub Shared<NvramSim>);

impl Driver for NvramDriver {
    fn read(&mut self, off: u64, buf: &mut [u8]) -> flash::Result<()> {
        self.0.borrow_mut().read(off, buf)
    }

    fn prog(&mut self, off: u64, data: &[u8]) -> flash::Result<()> {
        self.0.borrow_mut().write(off, data)
    }

    fn erase(&mut self, _unit: u32) -> flash::Result<()> {
        Ok(())
    }

    fn unit_bytes(&self) -> u64 {
        u64::MAX
    }

    fn sync(&mut self) -> flash::Result<()> {
        Ok(())
    }
}

/// What littlefs is told when a callback fails: a bad block or data the ECC could not
/// correct is corrupt (littlefs relocates), anything else is an I/O error.
pub fn lfs_error(e: &FlashError) -> io::Error {
    match e {
        FlashError::BadBlock { .. }
        | FlashError::ProgramFailed { .. }
        | FlashError::EraseFailed { .. }
        | FlashError::Uncorrectable { .. } => io::Error::CORRUPTION,
        _ => io::Error::IO,
    }
}

/// One preset's littlefs configuration, as text for reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LfsGeometry {
    /// littlefs `read_size`.
    pub read_size: usize,
    /// littlefs `prog_size`.
    pub prog_size: usize,
    /// littlefs `block_size`.
    pub block_size: usize,
    /// littlefs `block_count`.
    pub block_count: usize,
    /// littlefs `cache_size`.
    pub cache_size: usize,
    /// littlefs `lookahead_size` (bytes).
    pub lookahead_size: usize,
    /// littlefs `block_cycles`.
    pub block_cycles: isize,
}

impl core::fmt::Display for LfsGeometry {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "read {} B, prog {} B, block {} B x {}, cache {} B, lookahead {} B, block_cycles {}",
            self.read_size,
            self.prog_size,
            self.block_size,
            self.block_count,
            self.cache_size,
            self.lookahead_size,
            self.block_cycles
        )
    }
}

/// A littlefs storage on a simulated preset, with its driver and its compile-time geometry.
pub trait LfsDevice: Storage + Sized {
    /// The simulator.
    type Sim;
    /// Its driver.
    type Driver: Driver;
    /// The preset's name.
    const PRESET: &'static str;
    /// Attaches littlefs's storage to a simulator of the preset.
    fn attach(sim: Shared<Self::Sim>) -> flash::Result<Self>;
    /// The flash error behind the last callback littlefs saw fail.
    fn last_error(&self) -> Option<&FlashError>;
    /// The configuration littlefs runs with.
    fn geometry() -> LfsGeometry {
        LfsGeometry {
            read_size: Self::READ_SIZE,
            prog_size: Self::WRITE_SIZE,
            block_size: Self::BLOCK_SIZE,
            block_count: Self::BLOCK_COUNT,
            cache_size: <Self::CACHE_SIZE as typenum::Unsigned>::USIZE,
            lookahead_size: 8 * <Self::LOOKAHEAD_SIZE as typenum::Unsigned>::USIZE,
            block_cycles: Self::BLOCK_CYCLES,
        }
    }
}

macro_rules! lfs_storage {
    (
        $(#[$doc:meta])*
        $name:ident, $preset:literal, $sim:ty, $driver:ty, attach $attach:expr,
        read $read:expr, prog $prog:expr, block $block:expr, count $count:expr,
        cache $cache:ty, lookahead $lookahead:ty
    ) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name {
            driver: $driver,
            last_error: Option<FlashError>,
        }

        impl $name {
            fn fail(&mut self, e: FlashError) -> io::Error {
                let out = lfs_error(&e);
                self.last_error = Some(e);
                out
            }
        }

        impl LfsDevice for $name {
            type Sim = $sim;
            type Driver = $driver;
            const PRESET: &'static str = $preset;

            fn attach(sim: Shared<$sim>) -> flash::Result<Self> {
                let attach: fn(Shared<$sim>) -> flash::Result<$driver> = $attach;
                Ok($name {
                    driver: attach(sim)?,
                    last_error: None,
                })
            }

            fn last_error(&self) -> Option<&FlashError> {
                self.last_error.as_ref()
            }
        }

        impl Storage for $name {
            const READ_SIZE: usize = $read;
            const WRITE_SIZE: usize = $prog;
            const BLOCK_SIZE: usize = $block;
            const BLOCK_COUNT: usize = $count;
            const BLOCK_CYCLES: isize = 500;
            type CACHE_SIZE = $cache;
            type LOOKAHEAD_SIZE = $lookahead;

            fn read(&mut self, off: usize, buf: &mut [u8]) -> io::Result<usize> {
                let r = self.driver.read(off as u64, buf);
                r.map(|()| buf.len()).map_err(|e| self.fail(e))
            }

            fn write(&mut self, off: usize, data: &[u8]) -> io::Result<usize> {
                let r = self.driver.prog(off as u64, data);
                r.map(|()| data.len()).map_err(|e| self.fail(e))
            }

            fn erase(&mut self, off: usize, len: usize) -> io::Result<usize> {
                let unit = self.driver.unit_bytes();
                let mut at = off as u64;
                while unit != u64::MAX && at < (off + len) as u64 {
                    let r = self.driver.erase((at / unit) as u32);
                    r.map_err(|e| self.fail(e))?;
                    at += unit;
                }
                Ok(len)
            }
        }
    };
}

lfs_storage!(
    /// littlefs on the Winbond W25Q64JV SPI NOR (`w25q64jv`): a block is a 4 KiB sector;
    /// byte reads and programs (the part's own granularity), a cache of one 256-byte
    /// program page, a lookahead bitmap covering all 2,048 blocks.
    W25q64jv, "w25q64jv", NorSim, NorDriver, attach |s| Ok(NorDriver(s)),
    read 1, prog 1, block 4096, count 2048, cache U256, lookahead U32
);

lfs_storage!(
    /// littlefs on the Winbond W25N01GV SPI NAND (`w25n01gv`): a block is a 128 KiB erase
    /// block; reads and programs of whole 2 KiB pages, a cache of one page, a lookahead
    /// bitmap covering all 1,024 blocks.
    W25n01gv, "w25n01gv", NandSim, NandDriver, attach NandDriver::attach,
    read 2048, prog 2048, block 131072, count 1024, cache U2048, lookahead U16
);

lfs_storage!(
    /// littlefs on the 1 GiB SLC NAND (`nand-1g`): as [`W25n01gv`], with 8,192 blocks and
    /// a lookahead bitmap covering all of them.
    Nand1g, "nand-1g", NandSim, NandDriver, attach NandDriver::attach,
    read 2048, prog 2048, block 131072, count 8192, cache U2048, lookahead U128
);

lfs_storage!(
    /// littlefs on the Cypress CY15B102Q SPI FRAM (`cy15b102q`): the 256 KiB are cut into
    /// 512 blocks of 512 bytes (the part has no erase unit; small blocks waste least on
    /// small files); byte reads and programs, a 64-byte cache, a lookahead bitmap covering
    /// all blocks.
    Cy15b102q, "cy15b102q", NvramSim, NvramDriver, attach |s| Ok(NvramDriver(s)),
    read 1, prog 1, block 512, count 512, cache U64, lookahead U8
);
