//! NOR flash simulator.

use alloc::vec::Vec;

use super::core::{Core, Merge};
use super::impl_simulated;
use crate::error::{FlashError, Result};
use crate::fault::{AgeReport, AtRest, Fate};
use crate::image::{image_len, ImageMeta};
use crate::medium::NorFlash;
use crate::spec::{DeviceSpec, NorSpec};
use crate::store::{RamStore, Store};

/// A simulated NOR part. With a reprogrammable part any word can be programmed again to
/// clear more bits; without, each word once per erase (tracked in the image).
#[derive(Debug, Clone)]
pub struct NorSim<S = RamStore> {
    pub(super) core: Core<S>,
    spec: NorSpec,
    /// One bit per word: programmed since the last erase (parts without reprogramming).
    programmed: Vec<u8>,
    /// Reads of each unit since its erase (read disturb; not kept in the image).
    reads: Vec<u32>,
}

impl NorSim<RamStore> {
    /// A fresh part in RAM.
    pub fn new(spec: NorSpec, meta: ImageMeta) -> Result<Self> {
        Self::format(RamStore::new(image_len(&DeviceSpec::Nor(spec))), spec, meta)
    }
}

#[cfg(feature = "std")]
impl NorSim<crate::store::FileStore> {
    /// Creates a fresh part in a new sparse image file.
    pub fn create(path: &std::path::Path, spec: NorSpec, meta: ImageMeta) -> Result<Self> {
        let store = crate::store::FileStore::create(path, image_len(&DeviceSpec::Nor(spec)))?;
        Self::format(store, spec, meta)
    }
}

impl<S: Store> NorSim<S> {
    /// Lays a fresh part into `store` (all units erased, no wear).
    pub fn format(store: S, spec: NorSpec, meta: ImageMeta) -> Result<Self> {
        let core = Core::format(store, &DeviceSpec::Nor(spec), meta, spec.banks)?;
        Ok(Self::with(core, spec))
    }

    /// Opens the NOR image in `store`.
    pub fn open(store: S) -> Result<Self> {
        let (core, spec) = Core::open(store, |s| match s {
            DeviceSpec::Nor(n) => n.banks,
            _ => 1,
        })?;
        let DeviceSpec::Nor(spec) = spec else {
            return Err(FlashError::ImageMismatch);
        };
        let mut sim = Self::with(core, spec);
        sim.reload()?;
        Ok(sim)
    }

    fn with(core: Core<S>, spec: NorSpec) -> Self {
        let words = spec.capacity() / spec.word_size as u64;
        let programmed = if spec.reprogrammable {
            Vec::new()
        } else {
            alloc::vec![0; words.div_ceil(8) as usize]
        };
        let reads = alloc::vec![0u32; spec.units as usize];
        NorSim {
            core,
            spec,
            programmed,
            reads,
        }
    }

    /// Overwrites stored bytes at rest (retention loss, read disturb, a stray program), for
    /// tests of the layers above: NOR has no ECC, so a read returns them as they are.
    pub fn corrupt_at_rest(&mut self, addr: u64, bytes: &[u8]) -> Result<()> {
        self.check_range(addr, bytes.len())?;
        self.core.write_data(addr, bytes)
    }

    /// Damages the stored bits of erase unit `unit` at rest as `cfg` says (see [`AtRest`]):
    /// NOR has no ECC, so they flip where they are — programmed bits lose charge and read 1
    /// (retention, worse with wear), erased bits gain it from reads of the unit and read 0
    /// (read disturb) — and a 512-byte run may lose all its charge and read as erased.
    pub fn age_unit(&mut self, unit: u32, cfg: &AtRest) -> Result<AgeReport> {
        let mut rep = AgeReport::default();
        if unit >= self.spec.units {
            return Err(FlashError::OutOfRange {
                addr: unit as u64,
                len: 1,
            });
        }
        let size = self.spec.unit_size as usize;
        let base = unit as u64 * size as u64;
        let erases = self.core.block(unit)?.erase_count;
        let scale = size as f64 / 512.0;
        let retention = cfg.mean(erases, self.spec.endurance, 0) * scale;
        let disturb = cfg.disturb * self.reads[unit as usize] as f64 * scale;
        let bits = size as u64 * 8;
        let lose = self.core.faults.flips(bits, retention / bits as f64);
        let gain = self.core.faults.flips(bits, disturb / bits as f64);
        let blank = cfg.erased > 0.0 && self.core.faults.chance(cfg.erased);
        if lose == 0 && gain == 0 && !blank {
            return Ok(rep);
        }
        let mut buf = alloc::vec![0u8; size];
        self.core.read_data(base, &mut buf)?;
        let mut flipped = 0u64;
        for k in 0..lose + gain {
            let bit = self.core.faults.below(bits);
            let (byte, mask) = ((bit / 8) as usize, 1u8 << (bit % 8));
            let is_one = buf[byte] & mask != 0;
            // Charge lost turns a 0 into a 1; charge gained a 1 into a 0.
            if (k < lose) != is_one {
                buf[byte] ^= mask;
                flipped += 1;
            }
        }
        if blank {
            let run = self.core.faults.below((size / 512).max(1) as u64) as usize * 512;
            let end = (run + 512).min(size);
            if buf[run..end].iter().any(|&b| b != 0xFF) {
                buf[run..end].fill(0xFF);
                rep.erased += 1;
            }
        }
        if flipped > 0 {
            rep.pages = 1;
            rep.bits = flipped;
        }
        if flipped > 0 || rep.erased > 0 {
            self.core.write_data(base, &buf)?;
        }
        Ok(rep)
    }

    /// The store holding the image.
    pub fn store(&self) -> &S {
        &self.core.store
    }

    /// Gives the store back (to reopen the image later). Background erases still running
    /// complete first, as when the host waits for an idle device before letting it go; a
    /// host I/O error on that last write is left for the store's next user to meet.
    pub fn into_store(mut self) -> S {
        if self.core.faults.powered {
            self.core.banks.wait_all();
            let _ = self.settle();
        }
        self.core.store
    }

    fn reload(&mut self) -> Result<()> {
        if !self.programmed.is_empty() {
            self.core
                .store
                .read(self.core.layout.page_table, &mut self.programmed)?;
        }
        Ok(())
    }

    fn unit_of(&self, addr: u64) -> u32 {
        (addr / self.spec.unit_size as u64) as u32
    }

    fn check_range(&self, addr: u64, len: usize) -> Result<()> {
        match addr.checked_add(len as u64) {
            Some(end) if end <= self.spec.capacity() => Ok(()),
            _ => Err(FlashError::OutOfRange {
                addr,
                len: len as u64,
            }),
        }
    }

    fn word_programmed(&self, word: u64) -> bool {
        self.programmed[(word / 8) as usize] & (1 << (word % 8)) != 0
    }

    /// Marks words `[first, first + n)` programmed (or erased) in the bitmap and its image.
    fn mark_words(&mut self, first: u64, n: u64, programmed: bool) -> Result<()> {
        if self.programmed.is_empty() || n == 0 {
            return Ok(());
        }
        for w in first..first + n {
            let bit = 1 << (w % 8);
            let byte = &mut self.programmed[(w / 8) as usize];
            if programmed {
                *byte |= bit;
            } else {
                *byte &= !bit;
            }
        }
        let (lo, hi) = (first / 8, (first + n - 1) / 8 + 1);
        let bytes = self.programmed[lo as usize..hi as usize].to_vec();
        self.core
            .write_raw(self.core.layout.page_table + lo, &bytes, Merge::Flags)
    }

    /// Applies the erases that have finished in the background.
    pub(super) fn settle(&mut self) -> Result<()> {
        while let Some((bank, unit)) = self.core.banks.next_finished() {
            self.erase_now(unit)?;
            self.core.banks.done(bank);
        }
        Ok(())
    }

    fn erase_now(&mut self, unit: u32) -> Result<()> {
        self.reads[unit as usize] = 0;
        let size = self.spec.unit_size as u64;
        self.core.erase_data(unit as u64 * size, size)?;
        let wpu = size / self.spec.word_size as u64;
        self.mark_words(unit as u64 * wpu, wpu, false)
    }

    /// Leaves a unit partly erased: each byte erased, kept or scrambled. Every word counts as
    /// programmed, so a part without reprogramming refuses it until it is erased again.
    fn erase_partly(&mut self, unit: u32) -> Result<()> {
        let size = self.spec.unit_size as u64;
        let mut buf = alloc::vec![0u8; size as usize];
        self.core.read_data(unit as u64 * size, &mut buf)?;
        for b in buf.iter_mut() {
            match self.core.faults.below(4) {
                0 | 1 => *b = 0xFF,
                2 => {}
                _ => *b = self.core.faults.byte(),
            }
        }
        self.core.write_data(unit as u64 * size, &buf)?;
        let wpu = size / self.spec.word_size as u64;
        self.mark_words(unit as u64 * wpu, wpu, true)
    }

    /// The power goes: erases in progress are interrupted, buffered programs may be lost.
    pub(super) fn cut(&mut self) -> Result<()> {
        self.settle()?;
        for unit in self.core.banks.interrupted() {
            self.erase_partly(unit)?;
        }
        if self.core.lose_buffered()? {
            self.reload()?;
        }
        self.core.faults.powered = false;
        Ok(())
    }

    fn erase_impl(&mut self, unit: u32, background: bool) -> Result<()> {
        self.core.check_power()?;
        if unit >= self.spec.units {
            return Err(FlashError::OutOfRange {
                addr: unit as u64,
                len: 1,
            });
        }
        let bank = self.spec.bank_of(unit);
        self.core.banks.wait(bank);
        self.settle()?;
        self.core.drain();
        let t = self.spec.timing.erase_ns;
        match self
            .core
            .faults
            .begin(self.core.faults.config.silent_erase_rate)
        {
            Fate::Cut => {
                self.cut()?;
                Err(FlashError::PowerLoss)
            }
            Fate::Torn => {
                self.core.wear(unit)?;
                self.erase_partly(unit)?;
                self.cut()?;
                Err(FlashError::PowerLoss)
            }
            Fate::Silent => {
                // Looks like the real thing to the host, time included.
                if background {
                    self.core.banks.occupy(bank, t);
                } else {
                    self.core.banks.run(bank, t);
                }
                self.core.stats.erases += 1;
                self.core
                    .stats
                    .erase_latency
                    .record(core::time::Duration::from_nanos(t));
                Ok(())
            }
            Fate::Normal => {
                let before = self.core.block(unit)?;
                let worn = self.core.faults.worn_out(
                    self.core.meta.wear,
                    unit,
                    before.erase_count,
                    self.spec.endurance,
                );
                self.core.wear(unit)?;
                self.core.stats.erases += 1;
                if worn {
                    self.erase_partly(unit)?;
                    self.core.banks.run(bank, t);
                    self.core.stats.failed_erases += 1;
                    return Err(FlashError::EraseFailed { block: unit });
                }
                self.core
                    .stats
                    .erase_latency
                    .record(core::time::Duration::from_nanos(t));
                if background {
                    self.core.banks.start_erase(bank, unit, t);
                } else {
                    self.erase_now(unit)?;
                    self.core.banks.run(bank, t);
                }
                Ok(())
            }
        }
    }
}

impl_simulated!(NorSim);

impl<S: Store> NorFlash for NorSim<S> {
    fn spec(&self) -> &NorSpec {
        &self.spec
    }

    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<()> {
        self.core.check_power()?;
        self.check_range(addr, buf.len())?;
        if buf.is_empty() {
            return Ok(());
        }
        let t0 = self.core.banks.now;
        let (first, last) = (
            self.unit_of(addr),
            self.unit_of(addr + buf.len() as u64 - 1),
        );
        let word = self.spec.word_size as u64;
        let words = (addr + buf.len() as u64).div_ceil(word) - addr / word;
        let ns = words
            .saturating_mul(self.spec.timing.read_word_ns)
            .saturating_add((buf.len() as u64).saturating_mul(self.spec.timing.bus_byte_ns));
        let suspend = self.spec.timing.erase_suspend_ns;
        if suspend.is_some() {
            // An erase suspended for a read leaves its own unit unreadable; the other units
            // of its bank can be read.
            if let Some(u) =
                (first..=last).find(|&u| self.core.banks.erasing(self.spec.bank_of(u)) == Some(u))
            {
                return Err(FlashError::Busy { block: u });
            }
        }
        let banks = self.spec.bank_of(first)..=self.spec.bank_of(last);
        self.core.banks.read(banks, ns, suspend);
        self.settle()?;
        self.core.read_data(addr, buf)?;
        for u in first..=last {
            self.reads[u as usize] = self.reads[u as usize].saturating_add(1);
        }
        let rate = self.core.faults.config.bit_flip_rate;
        if rate > 0.0 {
            let n = self.core.faults.flips(buf.len() as u64 * 8, rate);
            self.core.faults.flip_bits(buf, n);
        }
        self.core.stats.reads += 1;
        self.core.stats.bytes_read += buf.len() as u64;
        self.core
            .stats
            .read_latency
            .record(core::time::Duration::from_nanos(self.core.banks.now - t0));
        Ok(())
    }

    fn program(&mut self, addr: u64, data: &[u8]) -> Result<()> {
        self.core.check_power()?;
        self.check_range(addr, data.len())?;
        let word = self.spec.word_size as u64;
        if addr % word != 0 || data.len() as u64 % word != 0 {
            return Err(FlashError::Unaligned {
                addr,
                align: self.spec.word_size,
            });
        }
        if data.is_empty() {
            return Ok(());
        }
        let end = addr + data.len() as u64;
        let page = self.spec.program_page as u64;
        if page != 0 && addr / page != (end - 1) / page {
            return Err(FlashError::ProgramTooLong {
                addr,
                len: data.len() as u64,
                limit: self.spec.program_page,
            });
        }
        let (first, last) = (self.unit_of(addr), self.unit_of(end - 1));
        let t0 = self.core.banks.now;
        for u in first..=last {
            self.core.banks.wait(self.spec.bank_of(u));
        }
        self.settle()?;
        let mut old = alloc::vec![0u8; data.len()];
        self.core.read_data(addr, &mut old)?;
        if let Some(i) = data.iter().zip(&old).position(|(d, o)| d & !o != 0) {
            return Err(FlashError::SetsBits {
                addr: addr + i as u64,
            });
        }
        let first_word = addr / word;
        let nwords = data.len() as u64 / word;
        if !self.programmed.is_empty() {
            if let Some(w) = (first_word..first_word + nwords).find(|&w| self.word_programmed(w)) {
                return Err(FlashError::Reprogram { addr: w * word });
            }
        }
        let tm = &self.spec.timing;
        let ns = tm
            .program_cmd_ns
            .saturating_add(nwords.saturating_mul(tm.program_word_ns))
            .saturating_add((data.len() as u64).saturating_mul(tm.bus_byte_ns));
        let bank = self.spec.bank_of(first);
        match self
            .core
            .faults
            .begin(self.core.faults.config.silent_program_rate)
        {
            Fate::Cut => {
                self.cut()?;
                Err(FlashError::PowerLoss)
            }
            Fate::Torn => {
                // A random subset of the bits to clear got cleared.
                let torn: Vec<u8> = data
                    .iter()
                    .zip(&old)
                    .map(|(d, o)| o & !((o & !d) & self.core.faults.byte()))
                    .collect();
                self.core.begin_program();
                self.core.write_data(addr, &torn)?;
                self.mark_words(first_word, nwords, true)?;
                self.core.end_program();
                self.cut()?;
                Err(FlashError::PowerLoss)
            }
            Fate::Silent => {
                // Looks like the real thing to the host, time included.
                self.core.banks.run(bank, ns);
                self.core.stats.programs += 1;
                self.core.stats.bytes_programmed += data.len() as u64;
                self.core
                    .stats
                    .program_latency
                    .record(core::time::Duration::from_nanos(self.core.banks.now - t0));
                Ok(())
            }
            Fate::Normal => {
                let erases = self.core.block(first)?.erase_count;
                let worn = self.core.faults.worn_out(
                    self.core.meta.wear,
                    first,
                    erases,
                    self.spec.endurance,
                );
                let written: Vec<u8> = if worn {
                    data.iter()
                        .zip(&old)
                        .map(|(d, o)| o & !((o & !d) & self.core.faults.byte()))
                        .collect()
                } else {
                    data.to_vec()
                };
                self.core.begin_program();
                self.core.write_data(addr, &written)?;
                self.mark_words(first_word, nwords, true)?;
                self.core.end_program();
                self.core.banks.run(bank, ns);
                self.core.stats.programs += 1;
                self.core.stats.bytes_programmed += data.len() as u64;
                self.core
                    .stats
                    .program_latency
                    .record(core::time::Duration::from_nanos(self.core.banks.now - t0));
                if worn {
                    self.core.stats.failed_programs += 1;
                    return Err(FlashError::ProgramFailed { block: first });
                }
                Ok(())
            }
        }
    }

    fn erase(&mut self, unit: u32) -> Result<()> {
        self.erase_impl(unit, false)
    }

    fn start_erase(&mut self, unit: u32) -> Result<()> {
        self.erase_impl(unit, true)
    }

    fn sync(&mut self) -> Result<()> {
        self.core.check_power()?;
        self.core.drain();
        Ok(())
    }
}
