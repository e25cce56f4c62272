//! Typed errors of the media layer.
//!
//! Every rule of a medium that a caller can break is a distinct variant, so a bug in a layer
//! above shows up as a precise error instead of silently corrupted data.

use core::fmt;

/// What went wrong in a media operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlashError {
    /// The device lost power (an injected cut); every call fails until it is rebooted.
    PowerLoss,
    /// An address or length falls outside the device.
    OutOfRange {
        /// First byte (or page/block index, per the operation) that was asked for.
        addr: u64,
        /// Length of the access.
        len: u64,
    },
    /// An access is not aligned to the unit the device requires.
    Unaligned {
        /// Offending address.
        addr: u64,
        /// Required alignment in bytes.
        align: u32,
    },
    /// A NOR program tried to turn a 0 bit into a 1 (only erase sets bits).
    SetsBits {
        /// Byte address where the first such bit is.
        addr: u64,
    },
    /// A word was programmed again on a device that does not allow reprogramming.
    Reprogram {
        /// Byte address of the word.
        addr: u64,
    },
    /// A NAND page was programmed a second time since its block's last erase.
    PageAlreadyProgrammed {
        /// Block index.
        block: u32,
        /// Page index within the block.
        page: u32,
    },
    /// A NAND page was programmed below the highest page already programmed in its block.
    OutOfOrder {
        /// Block index.
        block: u32,
        /// Page that was asked for.
        page: u32,
        /// Highest page programmed so far.
        highest: u32,
    },
    /// An MSB page was programmed in a block used in SLC mode.
    MsbInSlcMode {
        /// Block index.
        block: u32,
        /// Page index within the block.
        page: u32,
    },
    /// The cell mode of a block can only change while the block is fully erased.
    ModeChangeNotErased {
        /// Block index.
        block: u32,
    },
    /// A program command moved more bytes than the device's program buffer holds, or crossed
    /// the boundary of a program page.
    ProgramTooLong {
        /// Byte address.
        addr: u64,
        /// Bytes asked for.
        len: u64,
        /// Program page size of the device.
        limit: u32,
    },
    /// The block is marked bad; it may not be programmed, erased or read.
    BadBlock {
        /// Block index.
        block: u32,
    },
    /// The device reported a failed program (status fail): the block is worn or defective.
    ProgramFailed {
        /// Block (erase unit) index.
        block: u32,
    },
    /// The device reported a failed erase: the block is worn or defective.
    EraseFailed {
        /// Block (erase unit) index.
        block: u32,
    },
    /// More bit errors than the ECC corrects; the data returned is not trustworthy.
    Uncorrectable {
        /// Block index.
        block: u32,
        /// Page index within the block.
        page: u32,
    },
    /// The block is being erased in the background; its content cannot be accessed yet.
    Busy {
        /// Block (erase unit) index.
        block: u32,
    },
    /// A buffer has the wrong size for the operation.
    BadBuffer {
        /// Bytes given.
        got: u64,
        /// Bytes the operation takes at most.
        max: u64,
    },
    /// An image file is corrupt, truncated, of another kind or another version.
    BadImage(&'static str),
    /// An image does not hold the device that was asked for.
    ImageMismatch,
    /// An invalid device specification (a geometry that cannot exist).
    BadSpec(&'static str),
    /// No preset has this name.
    UnknownPreset,
    /// The backing store failed (an I/O error of the host).
    Io(IoErrorKind),
    /// The underlying real device reported an error.
    Device,
}

/// Host I/O failures, kept small so the type works without `std`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoErrorKind {
    /// The file does not exist.
    NotFound,
    /// The file already exists.
    AlreadyExists,
    /// Permission denied.
    PermissionDenied,
    /// The host disk is full.
    NoSpace,
    /// The file ended before the data did.
    UnexpectedEof,
    /// Any other failure.
    Other,
}

impl fmt::Display for FlashError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use FlashError::*;
        match self {
            PowerLoss => write!(f, "device lost power"),
            OutOfRange { addr, len } => write!(f, "access of {len} at {addr:#x} is out of range"),
            Unaligned { addr, align } => {
                write!(f, "access at {addr:#x} is not aligned to {align} bytes")
            }
            SetsBits { addr } => write!(f, "program at {addr:#x} would set a cleared bit (0->1)"),
            Reprogram { addr } => write!(
                f,
                "word at {addr:#x} programmed twice on a device without reprogramming"
            ),
            PageAlreadyProgrammed { block, page } => {
                write!(f, "page {page} of block {block} is already programmed")
            }
            OutOfOrder {
                block,
                page,
                highest,
            } => write!(
                f,
                "page {page} of block {block} programmed after page {highest} (pages go in order)"
            ),
            MsbInSlcMode { block, page } => {
                write!(
                    f,
                    "MSB page {page} of SLC-mode block {block} cannot be programmed"
                )
            }
            ModeChangeNotErased { block } => {
                write!(f, "cell mode of block {block} changed while it holds data")
            }
            ProgramTooLong { addr, len, limit } => write!(
                f,
                "program of {len} bytes at {addr:#x} crosses a {limit}-byte program page"
            ),
            BadBlock { block } => write!(f, "block {block} is marked bad"),
            ProgramFailed { block } => write!(f, "program failed in block {block}"),
            EraseFailed { block } => write!(f, "erase of block {block} failed"),
            Uncorrectable { block, page } => {
                write!(
                    f,
                    "uncorrectable bit errors in page {page} of block {block}"
                )
            }
            Busy { block } => write!(f, "block {block} is being erased"),
            BadBuffer { got, max } => write!(f, "buffer of {got} bytes, at most {max} allowed"),
            BadImage(why) => write!(f, "bad device image: {why}"),
            ImageMismatch => write!(f, "the image holds a different device"),
            BadSpec(why) => write!(f, "invalid device specification: {why}"),
            UnknownPreset => write!(f, "unknown device preset"),
            Io(kind) => write!(f, "host I/O error: {kind:?}"),
            Device => write!(f, "the flash device reported an error"),
        }
    }
}

impl core::error::Error for FlashError {}

#[cfg(feature = "std")]
impl From<std::io::Error> for FlashError {
    fn from(e: std::io::Error) -> Self {
        use std::io::ErrorKind as K;
        FlashError::Io(match e.kind() {
            K::NotFound => IoErrorKind::NotFound,
            K::AlreadyExists => IoErrorKind::AlreadyExists,
            K::PermissionDenied => IoErrorKind::PermissionDenied,
            K::StorageFull => IoErrorKind::NoSpace,
            K::UnexpectedEof => IoErrorKind::UnexpectedEof,
            _ => IoErrorKind::Other,
        })
    }
}

/// Result of a media operation.
pub type Result<T> = core::result::Result<T, FlashError>;
