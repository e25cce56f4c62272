//! NVRAM seen as NOR flash, so that the log (which needs erase units to turn over) runs on
//! it unchanged: the part is cut into units of [`unit_size`] bytes, an erase writes `0xFF`
//! over a unit, and a program writes its bytes in place.
//!
//! NVRAM could do more than NOR (set bits without an erase); the log never asks it to,
//! since every program it makes clears bits of erased or programmed bytes, so the program
//! below writes the bytes as given rather than reading them first to refuse what NOR would.
//! The part is reprogrammable in NOR's sense: a written word may be programmed again. A
//! power cut during a write leaves a prefix of it written (FRAM writes bytes in address
//! order), which the log sees as NOR's torn program or torn erase, and survives the same way.

use core::time::Duration;

use crate::error::{FlashError, Result};
use crate::medium::{DeviceClock, NorFlash, Nvram};
use crate::spec::{NorSpec, NorTiming};

/// Fewest bytes in a unit: a segment's header and tag summary cost the same whatever its
/// size, so smaller units would spend more of the part on them (15 slots of 512 bytes fill
/// 8 KiB to 98%).
pub const MIN_UNIT: u32 = 8 * 1024;

/// Most units the part is cut into: above this a unit grows (a power of two), so that what
/// the log keeps per segment in RAM stays bounded whatever the part's size.
pub const MAX_UNITS: u64 = 4096;

/// The unit an NVRAM part of `size` bytes is cut into: the smallest power of two from
/// [`MIN_UNIT`] that leaves at most [`MAX_UNITS`] units. A function of the size alone, so the
/// same part is cut the same way at every mount.
pub fn unit_size(size: u64) -> u32 {
    let mut unit = MIN_UNIT;
    while size / u64::from(unit) > MAX_UNITS && unit < (1 << 30) {
        unit *= 2;
    }
    unit
}

/// Bytes of `0xFF` an erase writes per command: a unit goes down in address order in
/// commands of this size (a cut leaves a prefix erased, as one long write would), from a
/// constant rather than a unit-sized buffer of RAM.
const ERASE_CHUNK: usize = 256;
const ERASED: [u8; ERASE_CHUNK] = [0xFF; ERASE_CHUNK];

/// An NVRAM part seen as reprogrammable NOR flash of [`unit_size`] units.
#[derive(Debug, Clone)]
pub struct NvramNor<N> {
    nvram: N,
    spec: NorSpec,
}

impl<N: Nvram> NvramNor<N> {
    /// Wraps `nvram`; fails if the part is smaller than one unit.
    pub fn new(nvram: N) -> Result<Self> {
        let s = *nvram.spec();
        let unit = unit_size(s.size);
        let units = u32::try_from(s.size / u64::from(unit))
            .map_err(|_| FlashError::BadSpec("NVRAM too large"))?;
        // Write cost of a unit, as the part charges it: a command per chunk.
        let write_ns = |bytes: u64| {
            let commands = bytes.div_ceil(ERASE_CHUNK as u64);
            commands
                .saturating_mul(s.command_ns)
                .saturating_add(bytes.div_ceil(u64::from(s.word_size.max(1))) * s.access_ns)
                .saturating_add(bytes.saturating_mul(s.bus_byte_ns))
        };
        let spec = NorSpec {
            unit_size: unit,
            units,
            banks: 1,
            word_size: s.word_size,
            program_page: 0,
            reprogrammable: true,
            timing: NorTiming {
                read_word_ns: s.access_ns,
                program_word_ns: s.access_ns,
                program_cmd_ns: s.command_ns,
                erase_ns: write_ns(u64::from(unit)),
                bus_byte_ns: s.bus_byte_ns,
                erase_suspend_ns: None,
            },
            endurance: u32::try_from(s.endurance).unwrap_or(u32::MAX),
        };
        spec.validate()?;
        Ok(NvramNor { nvram, spec })
    }

    /// The NVRAM part.
    pub fn nvram(&self) -> &N {
        &self.nvram
    }

    /// The NVRAM part, mutably.
    pub fn nvram_mut(&mut self) -> &mut N {
        &mut self.nvram
    }

    /// Gives the part back.
    pub fn into_inner(self) -> N {
        self.nvram
    }

    fn check(&self, addr: u64, len: usize) -> Result<()> {
        match addr.checked_add(len as u64) {
            Some(end) if end <= self.spec.capacity() => Ok(()),
            _ => Err(FlashError::OutOfRange {
                addr,
                len: len as u64,
            }),
        }
    }
}

impl<N: Nvram> DeviceClock for NvramNor<N> {
    fn now(&self) -> Duration {
        self.nvram.now()
    }

    fn idle(&mut self, d: Duration) {
        self.nvram.idle(d)
    }
}

impl<N: Nvram> NorFlash for NvramNor<N> {
    fn spec(&self) -> &NorSpec {
        &self.spec
    }

    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<()> {
        self.check(addr, buf.len())?;
        self.nvram.read(addr, buf)
    }

    fn program(&mut self, addr: u64, data: &[u8]) -> Result<()> {
        let word = u64::from(self.spec.word_size);
        if addr % word != 0 || data.len() as u64 % word != 0 {
            return Err(FlashError::Unaligned {
                addr,
                align: self.spec.word_size,
            });
        }
        self.check(addr, data.len())?;
        self.nvram.write(addr, data)
    }

    fn erase(&mut self, unit: u32) -> Result<()> {
        if unit >= self.spec.units {
            return Err(FlashError::OutOfRange {
                addr: u64::from(unit),
                len: 1,
            });
        }
        let at = u64::from(unit) * u64::from(self.spec.unit_size);
        let end = at + u64::from(self.spec.unit_size);
        // Units are multiples of the chunk (powers of two from 8 KiB).
        (at..end)
            .step_by(ERASE_CHUNK)
            .try_for_each(|a| self.nvram.write(a, &ERASED))
    }

    fn writes_in_place(&self) -> bool {
        true
    }
}

impl<N: Nvram + crate::sim::Simulated> crate::sim::Simulated for NvramNor<N> {
    fn stats(&self) -> &crate::stats::Stats {
        self.nvram.stats()
    }
    fn ops(&self) -> u64 {
        self.nvram.ops()
    }
    fn faults(&self) -> &crate::fault::FaultConfig {
        self.nvram.faults()
    }
    fn set_faults(&mut self, config: crate::fault::FaultConfig) {
        self.nvram.set_faults(config)
    }
    fn schedule_cut(&mut self, ops: u64, torn: bool) {
        self.nvram.schedule_cut(ops, torn)
    }
    fn power_cut(&mut self) -> Result<()> {
        self.nvram.power_cut()
    }
    fn is_powered(&self) -> bool {
        self.nvram.is_powered()
    }
    fn reboot(&mut self) {
        self.nvram.reboot()
    }
    fn erase_counts(&self) -> alloc::vec::Vec<u32> {
        self.nvram.erase_counts()
    }
    fn meta(&self) -> &crate::image::ImageMeta {
        self.nvram.meta()
    }
    fn flush(&mut self) -> Result<()> {
        self.nvram.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::ImageMeta;
    use crate::preset;
    use crate::spec::DeviceSpec;
    use crate::NvramSim;

    fn part(name: &str) -> NvramNor<NvramSim> {
        let DeviceSpec::Nvram(spec) = preset::lookup(name).unwrap().spec else {
            panic!("{name} is not NVRAM")
        };
        NvramNor::new(NvramSim::new(spec, ImageMeta::new(name, 1)).unwrap()).unwrap()
    }

    #[test]
    fn units_are_at_least_8_kib_and_at_most_4096() {
        assert_eq!(unit_size(256 << 10), 8 << 10);
        assert_eq!(unit_size(8 << 20), 8 << 10);
        assert_eq!(unit_size(64 << 20), 16 << 10);
        assert_eq!(unit_size(16 << 30), 4 << 20);
        let fram = part("fram-8m");
        assert_eq!((fram.spec().units, fram.spec().word_size), (1024, 2));
        assert_eq!(part("cy15b102q").spec().units, 32);
    }

    #[test]
    fn an_erase_sets_the_unit_to_ff_and_a_program_writes_in_place() {
        let mut nor = part("cy15b102q");
        // A fresh NVRAM reads zero: a unit reads erased only once erased.
        let mut buf = [0xAAu8; 4];
        nor.read(8192, &mut buf).unwrap();
        assert_eq!(buf, [0; 4]);
        nor.erase(1).unwrap();
        nor.read(8192 - 2, &mut buf).unwrap();
        assert_eq!(buf, [0, 0, 0xFF, 0xFF]);
        nor.program(8193, &[0x0F]).unwrap();
        nor.program(8193, &[0x00]).unwrap();
        nor.read(8192, &mut buf).unwrap();
        assert_eq!(buf, [0xFF, 0x00, 0xFF, 0xFF]);
        let ns = nor.spec().timing.erase_ns;
        assert_eq!(ns, 32 * 1280 + 8192 * 320, "an erase costs a unit's writes");
        let before = nor.nvram().now();
        nor.erase(2).unwrap();
        assert_eq!((nor.nvram().now() - before).as_nanos(), u128::from(ns));
    }

    #[test]
    fn out_of_range_and_unaligned_requests_are_refused() {
        let mut nor = part("fram-8m");
        let end = nor.spec().capacity();
        assert!(matches!(
            nor.read(end - 1, &mut [0; 2]),
            Err(FlashError::OutOfRange { .. })
        ));
        assert!(matches!(
            nor.program(1, &[0, 0]),
            Err(FlashError::Unaligned { .. })
        ));
        assert!(matches!(
            nor.program(0, &[0]),
            Err(FlashError::Unaligned { .. })
        ));
        assert!(matches!(
            nor.erase(1024),
            Err(FlashError::OutOfRange { .. })
        ));
    }
}
