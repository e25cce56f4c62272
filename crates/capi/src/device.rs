//! The caller's flash, through its callbacks, as a medium of the `flash` crate.
//!
//! Like the `embedded-storage` adapter, it translates and does not police: the part's rules
//! are the part's own. Buffers passed to callbacks are the library's, valid for the call.

use core::ffi::c_void;

use flash::{
    DeviceClock, FlashError, NandFlash, NandSpec, NorFlash, NorSpec, PageAddr, ReadStatus,
};

use crate::config::flashfs_config;
use crate::error::flashfs_error::{FLASHFS_ERR_BADMSG, FLASHFS_ERR_IO};

type Result<T> = core::result::Result<T, FlashError>;

/// What a failed program or erase callback means: `FLASHFS_ERR_IO` is the part's own
/// "status fail" (a worn block), anything else a failure of the device or its bus.
fn failed(code: i32, worn: FlashError) -> FlashError {
    if code == FLASHFS_ERR_IO.code() {
        worn
    } else {
        FlashError::Device
    }
}

fn len32(len: usize) -> Result<u32> {
    u32::try_from(len).map_err(|_| FlashError::BadBuffer {
        got: len as u64,
        max: u64::from(u32::MAX),
    })
}

/// A NOR part behind C callbacks.
#[derive(Debug)]
pub(crate) struct CNor {
    config: flashfs_config,
    spec: NorSpec,
}

impl CNor {
    /// The part `config` describes (checked by `flashfs_config::part`).
    pub(crate) fn new(config: flashfs_config, spec: NorSpec) -> Self {
        CNor { config, spec }
    }

    fn unit_of(&self, addr: u64) -> u32 {
        (addr / u64::from(self.spec.unit_size)) as u32
    }
}

impl DeviceClock for CNor {}

impl NorFlash for CNor {
    fn spec(&self) -> &NorSpec {
        &self.spec
    }

    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<()> {
        let read = self.config.read.ok_or(FlashError::Device)?;
        let len = len32(buf.len())?;
        // SAFETY: the caller's callback, given its context and a buffer of `len` bytes.
        match unsafe { read(self.config.context, addr, buf.as_mut_ptr(), len) } {
            0.. => Ok(()),
            _ => Err(FlashError::Device),
        }
    }

    fn program(&mut self, addr: u64, data: &[u8]) -> Result<()> {
        let prog = self.config.prog.ok_or(FlashError::Device)?;
        let len = len32(data.len())?;
        // SAFETY: as for `read`; the data is only read.
        match unsafe { prog(self.config.context, addr, data.as_ptr(), len) } {
            0.. => Ok(()),
            e => Err(failed(
                e,
                FlashError::ProgramFailed {
                    block: self.unit_of(addr),
                },
            )),
        }
    }

    fn erase(&mut self, unit: u32) -> Result<()> {
        erase(&self.config, unit)
    }

    fn sync(&mut self) -> Result<()> {
        sync(&self.config)
    }
}

fn erase(config: &flashfs_config, unit: u32) -> Result<()> {
    let erase = config.erase.ok_or(FlashError::Device)?;
    // SAFETY: the caller's callback and context.
    match unsafe { erase(config.context, unit) } {
        0.. => Ok(()),
        e => Err(failed(e, FlashError::EraseFailed { block: unit })),
    }
}

fn sync(config: &flashfs_config) -> Result<()> {
    let Some(sync) = config.sync else {
        return Ok(());
    };
    // SAFETY: the caller's callback and context.
    match unsafe { sync(config.context) } {
        0.. => Ok(()),
        _ => Err(FlashError::Device),
    }
}

/// A NAND part behind C callbacks.
#[derive(Debug)]
pub(crate) struct CNand {
    config: flashfs_config,
    spec: NandSpec,
}

impl CNand {
    /// The part `config` describes (checked by `flashfs_config::part`).
    pub(crate) fn new(config: flashfs_config, spec: NandSpec) -> Self {
        CNand { config, spec }
    }

    fn context(&self) -> *mut c_void {
        self.config.context
    }
}

impl DeviceClock for CNand {}

impl NandFlash for CNand {
    fn spec(&self) -> &NandSpec {
        &self.spec
    }

    fn read_page(&mut self, at: PageAddr, data: &mut [u8], spare: &mut [u8]) -> Result<ReadStatus> {
        let read = self.config.read_page.ok_or(FlashError::Device)?;
        let (dl, sl) = (len32(data.len())?, len32(spare.len())?);
        // SAFETY: the caller's callback, given buffers of the lengths it is told.
        let r = unsafe {
            read(
                self.context(),
                at.block,
                at.page,
                data.as_mut_ptr(),
                dl,
                spare.as_mut_ptr(),
                sl,
            )
        };
        match r {
            0.. => Ok(ReadStatus {
                corrected_bits: r as u32,
            }),
            e if e == FLASHFS_ERR_BADMSG.code() => Err(FlashError::Uncorrectable {
                block: at.block,
                page: at.page,
            }),
            _ => Err(FlashError::Device),
        }
    }

    fn program_page(&mut self, at: PageAddr, data: &[u8], spare: &[u8]) -> Result<()> {
        let prog = self.config.prog_page.ok_or(FlashError::Device)?;
        let (dl, sl) = (len32(data.len())?, len32(spare.len())?);
        // SAFETY: as for `read_page`; the buffers are only read.
        let r = unsafe {
            prog(
                self.context(),
                at.block,
                at.page,
                data.as_ptr(),
                dl,
                spare.as_ptr(),
                sl,
            )
        };
        match r {
            0.. => Ok(()),
            e => Err(failed(e, FlashError::ProgramFailed { block: at.block })),
        }
    }

    fn erase_block(&mut self, block: u32) -> Result<()> {
        erase(&self.config, block)
    }

    fn is_bad(&mut self, block: u32) -> Result<bool> {
        let Some(is_bad) = self.config.is_bad else {
            return Ok(false);
        };
        // SAFETY: the caller's callback and context.
        match unsafe { is_bad(self.context(), block) } {
            0 => Ok(false),
            1.. => Ok(true),
            _ => Err(FlashError::Device),
        }
    }

    fn mark_bad(&mut self, block: u32) -> Result<()> {
        let Some(mark_bad) = self.config.mark_bad else {
            return Ok(());
        };
        // SAFETY: the caller's callback and context.
        match unsafe { mark_bad(self.context(), block) } {
            0.. => Ok(()),
            _ => Err(FlashError::Device),
        }
    }

    fn sync(&mut self) -> Result<()> {
        sync(&self.config)
    }
}
