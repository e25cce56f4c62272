//! Real NOR flash through `embedded-storage`: any [`embedded_storage::nor_flash::NorFlash`]
//! is a [`NorFlash`] medium; a `MultiwriteNorFlash` one is a reprogrammable
//! one.
//!
//! The adapter translates, it does not police: the rules of the medium are the chip's own.
//! Reads of any alignment are widened to the chip's read size.

use embedded_storage::nor_flash::{self as es, NorFlashError, NorFlashErrorKind};

use crate::error::{FlashError, Result};
use crate::medium::{DeviceClock, NorFlash};
use crate::spec::{NorSpec, NorTiming};

/// A real NOR chip seen as a flashfs medium.
#[derive(Debug)]
pub struct EmbeddedNor<F> {
    flash: F,
    spec: NorSpec,
}

/// Endurance assumed when none is given: the common NOR datasheet figure.
pub const DEFAULT_ENDURANCE: u32 = 100_000;

fn map_err<E: NorFlashError>(e: E, addr: u64, len: usize, align: u32) -> FlashError {
    match e.kind() {
        NorFlashErrorKind::OutOfBounds => FlashError::OutOfRange {
            addr,
            len: len as u64,
        },
        NorFlashErrorKind::NotAligned => FlashError::Unaligned { addr, align },
        _ => FlashError::Device,
    }
}

impl<F: es::NorFlash> EmbeddedNor<F> {
    /// Wraps a chip whose words may be programmed once per erase.
    pub fn new(flash: F) -> Result<Self> {
        Self::build(flash, false)
    }

    fn build(flash: F, reprogrammable: bool) -> Result<Self> {
        let word = F::WRITE_SIZE as u32;
        let unit = F::ERASE_SIZE as u32;
        if F::ERASE_SIZE == 0 || flash.capacity() % F::ERASE_SIZE != 0 {
            return Err(FlashError::BadSpec(
                "capacity is not a whole number of erase units",
            ));
        }
        // Every byte address, including one past the last erase unit, must fit the trait's
        // u32 offsets.
        if flash.capacity() as u64 > u32::MAX as u64 {
            return Err(FlashError::BadSpec(
                "capacity beyond the 4 GiB embedded-storage can address",
            ));
        }
        let spec = NorSpec {
            unit_size: unit,
            units: (flash.capacity() / F::ERASE_SIZE) as u32,
            banks: 1,
            word_size: word,
            program_page: 0,
            reprogrammable,
            timing: NorTiming::UNTIMED,
            endurance: DEFAULT_ENDURANCE,
        };
        spec.validate()?;
        Ok(EmbeddedNor { flash, spec })
    }

    /// Sets the erase cycles the chip is rated for.
    pub fn with_endurance(mut self, cycles: u32) -> Self {
        self.spec.endurance = cycles.max(1);
        self
    }

    /// Gives the chip back.
    pub fn into_inner(self) -> F {
        self.flash
    }
}

impl<F: es::MultiwriteNorFlash> EmbeddedNor<F> {
    /// Wraps a chip whose words may be programmed again to clear more bits.
    pub fn multiwrite(flash: F) -> Result<Self> {
        Self::build(flash, true)
    }
}

impl<F: es::NorFlash> DeviceClock for EmbeddedNor<F> {}

impl<F: es::NorFlash> NorFlash for EmbeddedNor<F> {
    fn spec(&self) -> &NorSpec {
        &self.spec
    }

    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<()> {
        let end = addr
            .checked_add(buf.len() as u64)
            .filter(|&e| e <= self.spec.capacity());
        let Some(end) = end else {
            return Err(FlashError::OutOfRange {
                addr,
                len: buf.len() as u64,
            });
        };
        if buf.is_empty() {
            return Ok(());
        }
        let rs = F::READ_SIZE.max(1) as u64;
        let (lo, hi) = (addr / rs * rs, end.div_ceil(rs) * rs);
        if lo == addr && hi == end {
            return self
                .flash
                .read(addr as u32, buf)
                .map_err(|e| map_err(e, addr, buf.len(), rs as u32));
        }
        let mut wide = alloc::vec![0u8; (hi - lo) as usize];
        self.flash
            .read(lo as u32, &mut wide)
            .map_err(|e| map_err(e, lo, wide.len(), rs as u32))?;
        let from = (addr - lo) as usize;
        buf.copy_from_slice(&wide[from..from + buf.len()]);
        Ok(())
    }

    fn program(&mut self, addr: u64, data: &[u8]) -> Result<()> {
        let word = self.spec.word_size as u64;
        if addr % word != 0 || data.len() as u64 % word != 0 {
            return Err(FlashError::Unaligned {
                addr,
                align: self.spec.word_size,
            });
        }
        if addr
            .checked_add(data.len() as u64)
            .is_none_or(|e| e > self.spec.capacity())
        {
            return Err(FlashError::OutOfRange {
                addr,
                len: data.len() as u64,
            });
        }
        self.flash
            .write(addr as u32, data)
            .map_err(|e| map_err(e, addr, data.len(), word as u32))
    }

    fn erase(&mut self, unit: u32) -> Result<()> {
        if unit >= self.spec.units {
            return Err(FlashError::OutOfRange {
                addr: unit as u64,
                len: 1,
            });
        }
        let from = unit * self.spec.unit_size;
        self.flash
            .erase(from, from + self.spec.unit_size)
            .map_err(|e| {
                map_err(
                    e,
                    from as u64,
                    self.spec.unit_size as usize,
                    self.spec.unit_size,
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;
    use embedded_storage::nor_flash::{ErrorType, MultiwriteNorFlash, ReadNorFlash};

    /// A strict in-memory chip: 4-byte reads and writes, 1 KiB sectors; without `MULTI`,
    /// each word once per erase.
    struct MemChip<const MULTI: bool> {
        bytes: Vec<u8>,
        written: Vec<bool>,
    }

    #[derive(Debug)]
    struct ChipError(NorFlashErrorKind);
    impl NorFlashError for ChipError {
        fn kind(&self) -> NorFlashErrorKind {
            self.0
        }
    }

    impl<const M: bool> MemChip<M> {
        fn new() -> Self {
            MemChip {
                bytes: alloc::vec![0xFF; 8192],
                written: alloc::vec![false; 2048],
            }
        }
    }
    impl<const M: bool> ErrorType for MemChip<M> {
        type Error = ChipError;
    }
    impl<const M: bool> ReadNorFlash for MemChip<M> {
        const READ_SIZE: usize = 4;
        fn read(&mut self, offset: u32, bytes: &mut [u8]) -> core::result::Result<(), ChipError> {
            let o = offset as usize;
            if o % 4 != 0 || bytes.len() % 4 != 0 {
                return Err(ChipError(NorFlashErrorKind::NotAligned));
            }
            let src = self
                .bytes
                .get(o..o + bytes.len())
                .ok_or(ChipError(NorFlashErrorKind::OutOfBounds))?;
            bytes.copy_from_slice(src);
            Ok(())
        }
        fn capacity(&self) -> usize {
            self.bytes.len()
        }
    }
    impl<const M: bool> es::NorFlash for MemChip<M> {
        const WRITE_SIZE: usize = 4;
        const ERASE_SIZE: usize = 1024;
        fn erase(&mut self, from: u32, to: u32) -> core::result::Result<(), ChipError> {
            let (f, t) = (from as usize, to as usize);
            if f % 1024 != 0 || t % 1024 != 0 {
                return Err(ChipError(NorFlashErrorKind::NotAligned));
            }
            self.bytes[f..t].fill(0xFF);
            self.written[f / 4..t / 4].fill(false);
            Ok(())
        }
        fn write(&mut self, offset: u32, bytes: &[u8]) -> core::result::Result<(), ChipError> {
            let o = offset as usize;
            for (i, b) in bytes.iter().enumerate() {
                let w = (o + i) / 4;
                if !M && self.written[w] {
                    return Err(ChipError(NorFlashErrorKind::Other));
                }
                self.bytes[o + i] &= b;
            }
            self.written[o / 4..(o + bytes.len()) / 4].fill(true);
            Ok(())
        }
    }
    impl MultiwriteNorFlash for MemChip<true> {}

    #[test]
    fn geometry_follows_the_chip() {
        let nor = EmbeddedNor::new(MemChip::<false>::new()).unwrap();
        let s = nor.spec();
        assert_eq!(
            (s.unit_size, s.units, s.word_size, s.reprogrammable),
            (1024, 8, 4, false)
        );
        let multi = EmbeddedNor::multiwrite(MemChip::<true>::new())
            .unwrap()
            .with_endurance(10);
        assert!(multi.spec().reprogrammable);
        assert_eq!(multi.spec().endurance, 10);
    }

    #[test]
    fn reads_of_any_alignment_and_programs_round_trip() {
        let mut nor = EmbeddedNor::new(MemChip::<false>::new()).unwrap();
        nor.program(1024, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        let mut b = [0u8; 5];
        nor.read(1025, &mut b).unwrap();
        assert_eq!(b, [2, 3, 4, 5, 6]);
        assert_eq!(nor.program(1024, &[0; 4]), Err(FlashError::Device)); // once per erase
        assert_eq!(
            nor.program(1, &[0; 4]),
            Err(FlashError::Unaligned { addr: 1, align: 4 })
        );
        assert!(matches!(
            nor.program(8192, &[0; 4]),
            Err(FlashError::OutOfRange { .. })
        ));
        assert!(matches!(
            nor.read(8190, &mut b),
            Err(FlashError::OutOfRange { .. })
        ));
        nor.erase(1).unwrap();
        nor.read(1024, &mut b).unwrap();
        assert_eq!(b, [0xFF; 5]);
        assert!(matches!(nor.erase(8), Err(FlashError::OutOfRange { .. })));
    }

    /// A chip that claims more than `u32` offsets reach.
    struct HugeChip;
    impl ErrorType for HugeChip {
        type Error = ChipError;
    }
    impl ReadNorFlash for HugeChip {
        const READ_SIZE: usize = 1;
        fn read(&mut self, _: u32, _: &mut [u8]) -> core::result::Result<(), ChipError> {
            Ok(())
        }
        fn capacity(&self) -> usize {
            (u32::MAX as usize).saturating_add(1)
        }
    }
    impl es::NorFlash for HugeChip {
        const WRITE_SIZE: usize = 1;
        const ERASE_SIZE: usize = 4096;
        fn erase(&mut self, _: u32, _: u32) -> core::result::Result<(), ChipError> {
            Ok(())
        }
        fn write(&mut self, _: u32, _: &[u8]) -> core::result::Result<(), ChipError> {
            Ok(())
        }
    }

    #[test]
    fn chips_beyond_u32_offsets_are_refused() {
        assert!(matches!(
            EmbeddedNor::new(HugeChip),
            Err(FlashError::BadSpec(_))
        ));
    }

    #[test]
    fn multiwrite_chips_reprogram() {
        let mut nor = EmbeddedNor::multiwrite(MemChip::<true>::new()).unwrap();
        nor.program(0, &[0xF0; 4]).unwrap();
        nor.program(0, &[0x30; 4]).unwrap();
        let mut b = [0u8; 4];
        nor.read(0, &mut b).unwrap();
        assert_eq!(b, [0x30; 4]);
    }
}
