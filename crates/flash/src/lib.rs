//! Flash media for flashfs: the traits every medium implements, faithful simulators of the
//! parts the flash file system literature measured (and today's common parts), and an adapter
//! for real NOR chips through `embedded-storage`.
//!
//! The simulators are strict: anything the real part would not do reliably — setting a bit
//! by programming NOR, programming a NAND page twice or out of order, touching an MSB page of
//! an SLC-mode block, using a bad block — is an error. They keep a device clock (with banks
//! that erase in parallel), count every operation, record wear in the image, and inject
//! faults from a seed: power cuts after any operation, torn programs and erases, bit flips
//! against an ECC model, silent failures, reordered completion and worn-out blocks.
//!
//! ```
//! use flash::{preset, NandFlash, NandSim, PageAddr, ImageMeta, DeviceSpec, Simulated};
//! let DeviceSpec::Nand(spec) = preset::lookup("nand-128m")?.spec else { unreachable!() };
//! let mut nand = NandSim::new(spec, ImageMeta::new("nand-128m", 1))?;
//! nand.program_page(PageAddr::new(0, 0), b"hello", &[])?;
//! let mut buf = [0u8; 5];
//! nand.read_page(PageAddr::new(0, 0), &mut buf, &mut [])?;
//! assert_eq!(&buf, b"hello");
//! assert!(nand.program_page(PageAddr::new(0, 0), b"again", &[]).is_err());
//! assert_eq!(nand.stats().programs, 1);
//! # Ok::<(), flash::FlashError>(())
//! ```
#![cfg_attr(not(feature = "std"), no_std)]
#![deny(missing_docs)]

extern crate alloc;

pub mod adapter;
#[cfg(feature = "async")]
pub mod blocking;
mod error;
pub mod fault;
pub mod image;
mod medium;
pub mod nvram_nor;
pub mod preset;
pub mod sim;
pub mod spec;
pub mod stats;
pub mod store;

pub use error::{FlashError, IoErrorKind, Result};
pub use fault::{AgeReport, AtRest, CutPoint, FaultConfig, Timebomb, WearModel};
pub use image::ImageMeta;
pub use medium::{
    CellMode, DeviceClock, MlcNand, NandFlash, NorFlash, Nvram, PageAddr, ReadStatus,
};
pub use nvram_nor::NvramNor;
pub use sim::nand::NandSim;
pub use sim::nor::NorSim;
pub use sim::nvram::NvramSim;
pub use sim::Simulated;
pub use spec::{Cells, DeviceSpec, EccSpec, NandSpec, NandTiming, NorSpec, NorTiming, NvramSpec};
