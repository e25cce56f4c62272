//! A driver for an external SPI NOR part behind a memory-mapped flash controller, as many
//! microcontrollers have (reads through the memory-mapped window, program and erase by
//! commands to the controller's registers).
//!
//! The addresses and commands are those of no particular chip: the driver is a stub of
//! the right shape, there for the file system to call, so that its code is linked and
//! measured as a real firmware would have it. Every access is volatile, so the compiler
//! cannot see through the hardware and drop any code behind it.

use core::ptr;

use embedded_storage::nor_flash::{
    check_erase, check_read, check_write, ErrorType, MultiwriteNorFlash, NorFlash, NorFlashError,
    NorFlashErrorKind, ReadNorFlash,
};

/// Where the part's bytes appear in the address space.
const WINDOW: usize = 0x9000_0000;
/// The controller's registers.
const CTRL: usize = 0x4001_0000;
const REG_ADDR: usize = CTRL;
const REG_DATA: usize = CTRL + 0x04;
const REG_CMD: usize = CTRL + 0x08;
const REG_STATUS: usize = CTRL + 0x0C;
const CMD_PROGRAM: u32 = 0x02;
const CMD_ERASE_SECTOR: u32 = 0x20;
const STATUS_BUSY: u32 = 1 << 0;
const STATUS_FAILED: u32 = 1 << 1;
/// Where the firmware reports how its run ended, for a debugger to read.
const REG_RESULT: usize = CTRL + 0x10;

/// The part: 1 MiB, 4 KiB sectors, programmed a byte at a time, any number of times per
/// erase (programming only clears bits), as SPI NOR parts are.
pub const CAPACITY: usize = 1 << 20;

/// The NOR part.
#[derive(Debug)]
pub struct Nor {
    _private: (),
}

impl Nor {
    /// The driver of the one part the board has.
    pub fn take() -> Nor {
        Nor { _private: () }
    }

    fn wait(&self) -> Result<(), NorError> {
        loop {
            // SAFETY: the controller's status register (see the module's doc).
            let s = unsafe { ptr::read_volatile(REG_STATUS as *const u32) };
            if s & STATUS_BUSY == 0 {
                return if s & STATUS_FAILED == 0 {
                    Ok(())
                } else {
                    Err(NorError(NorFlashErrorKind::Other))
                };
            }
        }
    }

    fn command(&self, cmd: u32, addr: u32, data: u32) -> Result<(), NorError> {
        // SAFETY: the controller's registers (see the module's doc).
        unsafe {
            ptr::write_volatile(REG_ADDR as *mut u32, addr);
            ptr::write_volatile(REG_DATA as *mut u32, data);
            ptr::write_volatile(REG_CMD as *mut u32, cmd);
        }
        self.wait()
    }
}

/// A failed or refused flash operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NorError(NorFlashErrorKind);

impl NorFlashError for NorError {
    fn kind(&self) -> NorFlashErrorKind {
        self.0
    }
}

impl ErrorType for Nor {
    type Error = NorError;
}

impl ReadNorFlash for Nor {
    const READ_SIZE: usize = 1;

    fn read(&mut self, offset: u32, bytes: &mut [u8]) -> Result<(), NorError> {
        check_read(self, offset, bytes.len()).map_err(NorError)?;
        let at = (WINDOW + offset as usize) as *const u8;
        for (i, b) in bytes.iter_mut().enumerate() {
            // SAFETY: inside the part's memory-mapped window (checked above).
            *b = unsafe { ptr::read_volatile(at.add(i)) };
        }
        Ok(())
    }

    fn capacity(&self) -> usize {
        CAPACITY
    }
}

impl NorFlash for Nor {
    const WRITE_SIZE: usize = 1;
    const ERASE_SIZE: usize = 4096;

    fn erase(&mut self, from: u32, to: u32) -> Result<(), NorError> {
        check_erase(self, from, to).map_err(NorError)?;
        for sector in (from..to).step_by(Self::ERASE_SIZE) {
            self.command(CMD_ERASE_SECTOR, sector, 0)?;
        }
        Ok(())
    }

    fn write(&mut self, offset: u32, bytes: &[u8]) -> Result<(), NorError> {
        check_write(self, offset, bytes.len()).map_err(NorError)?;
        for (i, &b) in bytes.iter().enumerate() {
            self.command(CMD_PROGRAM, offset + i as u32, b as u32)?;
        }
        Ok(())
    }
}

/// Programming clears bits only, so a byte may be programmed again.
impl MultiwriteNorFlash for Nor {}

/// Tells the debugger how the run ended (0: all went well).
pub fn report(code: u32) {
    // SAFETY: the controller's result register (see the module's doc).
    unsafe { ptr::write_volatile(REG_RESULT as *mut u32, code) }
}
