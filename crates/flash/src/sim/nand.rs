//! NAND flash simulator, SLC and MLC.
//!
//! ECC model: each page records the bit errors of its worst codeword that persist (injected,
//! or left by wear); every read adds transient flips drawn at the configured rate per
//! codeword. If the worst codeword has more errors than the ECC corrects, the read fails and
//! returns the data with those bits flipped. A torn or failed program, or an interrupted
//! erase, leaves a page that always fails ECC. Erased pages read as all ones.

use alloc::vec::Vec;

use super::core::{Core, Merge};
use super::impl_simulated;
use crate::error::{FlashError, Result};
use crate::fault::{mix, AgeReport, AtRest, Fate};
use crate::image::{
    image_len, ImageMeta, ERRORS, FACTORY_BAD, GARBAGE, MARKED_BAD, PROGRAMMED, SLC_MODE,
};
use crate::medium::{CellMode, MlcNand, NandFlash, PageAddr, ReadStatus};
use crate::spec::{Cells, DeviceSpec, NandSpec, NandTiming};
use crate::store::{RamStore, Store};

/// Bus time of `bytes` bytes.
fn bytes_ns(bytes: usize, per_byte: u64) -> u64 {
    (bytes as u64).saturating_mul(per_byte)
}

/// A simulated NAND part (SLC, or MLC with per-block SLC mode).
#[derive(Debug, Clone)]
pub struct NandSim<S = RamStore> {
    pub(super) core: Core<S>,
    spec: NandSpec,
    /// One state byte per page (see `image`), mirrored in the image.
    pages: Vec<u8>,
    /// Page reads of each block since its erase (read disturb; not kept in the image).
    reads: Vec<u32>,
}

impl NandSim<RamStore> {
    /// A fresh part in RAM; factory bad blocks follow from `meta.seed`.
    pub fn new(spec: NandSpec, meta: ImageMeta) -> Result<Self> {
        Self::format(
            RamStore::new(image_len(&DeviceSpec::Nand(spec))),
            spec,
            meta,
        )
    }
}

#[cfg(feature = "std")]
impl NandSim<crate::store::FileStore> {
    /// Creates a fresh part in a new sparse image file.
    pub fn create(path: &std::path::Path, spec: NandSpec, meta: ImageMeta) -> Result<Self> {
        let store = crate::store::FileStore::create(path, image_len(&DeviceSpec::Nand(spec)))?;
        Self::format(store, spec, meta)
    }
}

impl<S: Store> NandSim<S> {
    /// Lays a fresh part into `store`: all blocks erased, factory bad blocks marked (never
    /// block 0, which vendors guarantee).
    pub fn format(store: S, spec: NandSpec, meta: ImageMeta) -> Result<Self> {
        let seed = meta.seed;
        let core = Core::format(store, &DeviceSpec::Nand(spec), meta, spec.banks)?;
        let mut sim = Self::with(core, spec);
        for b in 1..spec.blocks {
            if mix(seed ^ mix(b as u64)) % 1000 < spec.factory_bad_permille as u64 {
                let mut m = sim.core.block(b)?;
                m.flags |= FACTORY_BAD;
                sim.core.set_block(b, m)?;
            }
        }
        Ok(sim)
    }

    /// Opens the NAND image in `store`.
    pub fn open(store: S) -> Result<Self> {
        let (core, spec) = Core::open(store, |s| match s {
            DeviceSpec::Nand(n) => n.banks,
            _ => 1,
        })?;
        let DeviceSpec::Nand(spec) = spec else {
            return Err(FlashError::ImageMismatch);
        };
        let mut sim = Self::with(core, spec);
        sim.reload()?;
        Ok(sim)
    }

    fn with(core: Core<S>, spec: NandSpec) -> Self {
        let pages = alloc::vec![0u8; (spec.blocks as usize) * spec.pages_per_block as usize];
        let reads = alloc::vec![0u32; spec.blocks as usize];
        NandSim {
            core,
            spec,
            pages,
            reads,
        }
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

    /// Makes `bits` bit errors persist in the worst codeword of a programmed page (retention
    /// loss, read disturb), for tests of ECC handling. Beyond the ECC's strength the page
    /// becomes unreadable.
    pub fn inject_bit_errors(&mut self, at: PageAddr, bits: u8) -> Result<()> {
        let i = self.index(at)?;
        if self.pages[i] & PROGRAMMED != 0 {
            let errs = (self.pages[i] & ERRORS).saturating_add(bits).min(ERRORS);
            self.set_state(i, (self.pages[i] & !ERRORS) | errs)?;
        }
        Ok(())
    }

    /// Overwrites stored bytes of a page at rest, `offset` counted from the start of its
    /// data area (the spare area follows the data), without the ECC noticing: the page keeps
    /// its state and reads back the new bytes as if they were good. Models damage ECC cannot
    /// see (a miscorrection, a program disturbed into another valid codeword), for tests of
    /// the layers above.
    pub fn corrupt_at_rest(&mut self, at: PageAddr, offset: usize, bytes: &[u8]) -> Result<()> {
        let i = self.index(at)?;
        if offset.saturating_add(bytes.len()) > self.stride() as usize {
            return Err(FlashError::OutOfRange {
                addr: offset as u64,
                len: bytes.len() as u64,
            });
        }
        self.core
            .write_data(i as u64 * self.stride() + offset as u64, bytes)
    }

    /// Makes a page read as erased (data and spare all ones, no ECC error), as a program
    /// that never took or charge lost from every cell leaves it.
    pub fn erase_page_at_rest(&mut self, at: PageAddr) -> Result<()> {
        let i = self.index(at)?;
        self.core
            .erase_data(i as u64 * self.stride(), self.stride())?;
        self.set_state(i, 0)
    }

    /// Damages the programmed pages of `block` at rest as `cfg` says (see [`AtRest`]): bit
    /// errors drawn per ECC codeword, from a mean that grows with the block's wear and with
    /// its reads since its erase, then the ECC applied to them — corrected within its
    /// strength (they persist, and reads count them), uncorrectable beyond it, or now and
    /// then miscorrected into other data that reads back without an error. A page may also
    /// lose all its charge and read as erased.
    pub fn age_block(&mut self, block: u32, cfg: &AtRest) -> Result<AgeReport> {
        let mut rep = AgeReport::default();
        let meta = self.core.block(block)?;
        if meta.is_bad() {
            return Ok(rep);
        }
        let cw = self.spec.ecc.codeword.max(1) as usize;
        let codewords = (self.spec.page_size as usize / cw).max(1);
        let mean = cfg.mean(
            meta.erase_count,
            self.spec.endurance,
            self.reads[block as usize],
        ) * cw as f64
            / 512.0;
        let bits = cw as u64 * 8;
        let t = self.spec.ecc.correctable;
        for i in self.block_pages(block) {
            let state = self.pages[i];
            if state & PROGRAMMED == 0 || state & GARBAGE != 0 {
                continue;
            }
            if cfg.erased > 0.0 && self.core.faults.chance(cfg.erased) {
                self.core
                    .erase_data(i as u64 * self.stride(), self.stride())?;
                self.set_state(i, 0)?;
                rep.erased += 1;
                continue;
            }
            let old = (state & ERRORS) as u32;
            let mut worst = (0, 0u32);
            let mut total = 0u32;
            for c in 0..codewords {
                let n = self.core.faults.flips(bits, mean / bits as f64);
                total = total.saturating_add(n);
                if n > worst.1 {
                    worst = (c, n);
                }
            }
            if total == 0 {
                continue;
            }
            rep.pages += 1;
            rep.bits += total as u64;
            let errs = old.saturating_add(worst.1);
            if errs <= t {
                self.set_state(i, (state & !ERRORS) | errs.min(ERRORS as u32) as u8)?;
                rep.corrected += 1;
            } else if cfg.miscorrection > 0.0 && self.core.faults.chance(cfg.miscorrection) {
                // The decoder lands on another codeword: the bits in error stay wrong and
                // up to t more are "corrected" wrongly; the ECC then reports nothing.
                let off = i as u64 * self.stride() + (worst.0 * cw) as u64;
                let mut buf = alloc::vec![0u8; cw];
                self.core.read_data(off, &mut buf)?;
                let wrong = errs.saturating_add(1 + self.core.faults.below(t as u64 + 1) as u32);
                self.core.faults.flip_bits(&mut buf, wrong);
                self.core.write_data(off, &buf)?;
                self.set_state(i, state & !ERRORS)?;
                rep.miscorrected += 1;
            } else {
                self.set_state(i, (state & !ERRORS) | errs.min(ERRORS as u32) as u8)?;
                rep.uncorrectable += 1;
            }
        }
        Ok(rep)
    }

    fn reload(&mut self) -> Result<()> {
        self.core
            .store
            .read(self.core.layout.page_table, &mut self.pages)
    }

    fn index(&self, at: PageAddr) -> Result<usize> {
        if at.block >= self.spec.blocks || at.page >= self.spec.pages_per_block {
            return Err(FlashError::OutOfRange {
                addr: at.block as u64 * self.spec.pages_per_block as u64 + at.page as u64,
                len: 1,
            });
        }
        Ok(at.block as usize * self.spec.pages_per_block as usize + at.page as usize)
    }

    fn set_state(&mut self, i: usize, state: u8) -> Result<()> {
        self.pages[i] = state;
        self.core.write_raw(
            self.core.layout.page_table + i as u64,
            &[state],
            Merge::Flags,
        )
    }

    fn stride(&self) -> u64 {
        (self.spec.page_size + self.spec.spare_size) as u64
    }

    fn timing(&self, block: u32) -> NandTiming {
        match self.spec.cells {
            Cells::Mlc { slc_mode } if self.core.blocks[block as usize].flags & SLC_MODE != 0 => {
                slc_mode
            }
            _ => self.spec.timing,
        }
    }

    fn block_pages(&self, block: u32) -> core::ops::Range<usize> {
        let ppb = self.spec.pages_per_block as usize;
        block as usize * ppb..(block as usize + 1) * ppb
    }

    /// Applies the erases that have finished in the background.
    pub(super) fn settle(&mut self) -> Result<()> {
        while let Some((bank, block)) = self.core.banks.next_finished() {
            self.erase_now(block)?;
            self.core.banks.done(bank);
        }
        Ok(())
    }

    fn erase_now(&mut self, block: u32) -> Result<()> {
        self.reads[block as usize] = 0;
        let len = self.spec.pages_per_block as u64 * self.stride();
        self.core.erase_data(block as u64 * len, len)?;
        let range = self.block_pages(block);
        self.pages[range.clone()].fill(0);
        self.core.store.zero(
            self.core.layout.page_table + range.start as u64,
            range.len() as u64,
        )?;
        let mut m = self.core.block(block)?;
        m.flags &= !SLC_MODE;
        self.core.set_block(block, m)
    }

    /// An interrupted or failed erase: some pages end erased (data and spare all ones), the
    /// rest unreadable.
    fn erase_partly(&mut self, block: u32) -> Result<()> {
        for i in self.block_pages(block) {
            if self.pages[i] != 0 {
                if self.core.faults.chance(0.5) {
                    self.core
                        .erase_data(i as u64 * self.stride(), self.stride())?;
                    self.set_state(i, 0)?;
                } else {
                    self.set_state(i, PROGRAMMED | GARBAGE)?;
                }
            }
        }
        Ok(())
    }

    /// A torn or failed program: the page (and, for an MSB page in MLC mode, its LSB
    /// partner, whose cells it shares) fails ECC.
    fn spoil(&mut self, at: PageAddr, i: usize) -> Result<()> {
        self.set_state(i, PROGRAMMED | GARBAGE)?;
        let mlc_mode =
            self.spec.is_mlc() && self.core.blocks[at.block as usize].flags & SLC_MODE == 0;
        if mlc_mode && at.page % 2 == 1 && self.pages[i - 1] & PROGRAMMED != 0 {
            self.set_state(i - 1, PROGRAMMED | GARBAGE)?;
        }
        Ok(())
    }

    pub(super) fn cut(&mut self) -> Result<()> {
        self.settle()?;
        for block in self.core.banks.interrupted() {
            self.erase_partly(block)?;
        }
        if self.core.lose_buffered()? {
            self.reload()?;
        }
        self.core.faults.powered = false;
        Ok(())
    }

    /// Checks a block may be used: in range and not marked bad.
    fn usable(&self, block: u32) -> Result<()> {
        if self.core.block(block)?.is_bad() {
            return Err(FlashError::BadBlock { block });
        }
        Ok(())
    }

    /// Waits for the bank of `block` and applies erases that finished.
    fn claim(&mut self, block: u32) -> Result<()> {
        self.core.banks.wait(self.spec.bank_of(block));
        self.settle()
    }

    fn erase_impl(&mut self, block: u32, background: bool) -> Result<()> {
        self.core.check_power()?;
        self.usable(block)?;
        self.claim(block)?;
        self.core.drain();
        let t = self.timing(block).erase_ns;
        let bank = self.spec.bank_of(block);
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
                self.core.wear(block)?;
                self.erase_partly(block)?;
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
                let before = self.core.block(block)?;
                let worn = self.core.faults.worn_out(
                    self.core.meta.wear,
                    block,
                    before.erase_count,
                    self.spec.endurance,
                );
                self.core.wear(block)?;
                self.core.stats.erases += 1;
                if worn {
                    self.erase_partly(block)?;
                    self.core.banks.run(bank, t);
                    self.core.stats.failed_erases += 1;
                    return Err(FlashError::EraseFailed { block });
                }
                self.core
                    .stats
                    .erase_latency
                    .record(core::time::Duration::from_nanos(t));
                if background {
                    self.core.banks.start_erase(bank, block, t);
                } else {
                    self.erase_now(block)?;
                    self.core.banks.run(bank, t);
                }
                Ok(())
            }
        }
    }
}

impl_simulated!(NandSim);

impl<S: Store> NandFlash for NandSim<S> {
    fn spec(&self) -> &NandSpec {
        &self.spec
    }

    fn read_page(&mut self, at: PageAddr, data: &mut [u8], spare: &mut [u8]) -> Result<ReadStatus> {
        self.core.check_power()?;
        let i = self.index(at)?;
        if data.len() > self.spec.page_size as usize || spare.len() > self.spec.spare_size as usize
        {
            return Err(FlashError::BadBuffer {
                got: (data.len() + spare.len()) as u64,
                max: (self.spec.page_size + self.spec.spare_size) as u64,
            });
        }
        self.usable(at.block)?;
        let t0 = self.core.banks.now;
        self.claim(at.block)?;
        let t = self.timing(at.block);
        self.core.banks.run(
            self.spec.bank_of(at.block),
            t.read_ns
                .saturating_add(bytes_ns(data.len() + spare.len(), t.bus_byte_ns)),
        );
        self.core.stats.reads += 1;
        self.reads[at.block as usize] = self.reads[at.block as usize].saturating_add(1);
        self.core.stats.bytes_read += (data.len() + spare.len()) as u64;
        self.core
            .stats
            .read_latency
            .record(core::time::Duration::from_nanos(self.core.banks.now - t0));
        let off = i as u64 * self.stride();
        self.core.read_data(off, data)?;
        self.core
            .read_data(off + self.spec.page_size as u64, spare)?;
        let state = self.pages[i];
        if state & PROGRAMMED == 0 {
            return Ok(ReadStatus::default());
        }
        let codewords = self.spec.page_size / self.spec.ecc.codeword;
        let bits = self.spec.ecc.codeword as u64 * 8;
        let rate = self.core.faults.config.bit_flip_rate;
        let mut worst = (state & ERRORS) as u32;
        let mut total = worst;
        for _ in 0..codewords {
            let flips = self.core.faults.flips(bits, rate);
            total = total.saturating_add(flips);
            worst = worst.max(flips.saturating_add((state & ERRORS) as u32));
        }
        if state & GARBAGE != 0 || worst > self.spec.ecc.correctable {
            let n = if state & GARBAGE != 0 {
                (data.len() as u32 * 2).max(8)
            } else {
                total
            };
            self.core.faults.flip_bits(data, n);
            self.core.faults.flip_bits(spare, n / 8 + 1);
            self.core.stats.uncorrectable_reads += 1;
            return Err(FlashError::Uncorrectable {
                block: at.block,
                page: at.page,
            });
        }
        self.core.stats.corrected_bits += total as u64;
        Ok(ReadStatus {
            corrected_bits: total,
        })
    }

    fn program_page(&mut self, at: PageAddr, data: &[u8], spare: &[u8]) -> Result<()> {
        self.core.check_power()?;
        let i = self.index(at)?;
        if data.len() > self.spec.page_size as usize || spare.len() > self.spec.spare_size as usize
        {
            return Err(FlashError::BadBuffer {
                got: (data.len() + spare.len()) as u64,
                max: (self.spec.page_size + self.spec.spare_size) as u64,
            });
        }
        self.usable(at.block)?;
        let t0 = self.core.banks.now;
        self.claim(at.block)?;
        if self.core.blocks[at.block as usize].flags & SLC_MODE != 0 && at.page % 2 == 1 {
            return Err(FlashError::MsbInSlcMode {
                block: at.block,
                page: at.page,
            });
        }
        if self.pages[i] & PROGRAMMED != 0 {
            return Err(FlashError::PageAlreadyProgrammed {
                block: at.block,
                page: at.page,
            });
        }
        let range = self.block_pages(at.block);
        if let Some(h) = self.pages[i + 1..range.end]
            .iter()
            .rposition(|&s| s & PROGRAMMED != 0)
        {
            return Err(FlashError::OutOfOrder {
                block: at.block,
                page: at.page,
                highest: at.page + 1 + h as u32,
            });
        }
        let t = self.timing(at.block);
        let bank = self.spec.bank_of(at.block);
        let off = i as u64 * self.stride();
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
                self.core.begin_program();
                self.core.write_data(off, data)?;
                self.spoil(at, i)?;
                self.core.end_program();
                self.cut()?;
                Err(FlashError::PowerLoss)
            }
            Fate::Silent => {
                // Looks like the real thing to the host, time included.
                self.core.banks.run(
                    bank,
                    t.program_ns
                        .saturating_add(bytes_ns(data.len() + spare.len(), t.bus_byte_ns)),
                );
                self.core.stats.programs += 1;
                self.core.stats.bytes_programmed += (data.len() + spare.len()) as u64;
                self.core
                    .stats
                    .program_latency
                    .record(core::time::Duration::from_nanos(self.core.banks.now - t0));
                Ok(())
            }
            Fate::Normal => {
                let erases = self.core.block(at.block)?.erase_count;
                let worn = self.core.faults.worn_out(
                    self.core.meta.wear,
                    at.block,
                    erases,
                    self.spec.endurance,
                );
                self.core.begin_program();
                self.core.write_data(off, data)?;
                self.core
                    .write_data(off + self.spec.page_size as u64, spare)?;
                if worn {
                    self.spoil(at, i)?;
                } else {
                    self.set_state(i, PROGRAMMED)?;
                }
                self.core.end_program();
                self.core.banks.run(
                    bank,
                    t.program_ns
                        .saturating_add(bytes_ns(data.len() + spare.len(), t.bus_byte_ns)),
                );
                self.core.stats.programs += 1;
                self.core.stats.bytes_programmed += (data.len() + spare.len()) as u64;
                self.core
                    .stats
                    .program_latency
                    .record(core::time::Duration::from_nanos(self.core.banks.now - t0));
                if worn {
                    self.core.stats.failed_programs += 1;
                    return Err(FlashError::ProgramFailed { block: at.block });
                }
                Ok(())
            }
        }
    }

    fn erase_block(&mut self, block: u32) -> Result<()> {
        self.erase_impl(block, false)
    }

    fn start_erase(&mut self, block: u32) -> Result<()> {
        self.erase_impl(block, true)
    }

    fn is_bad(&mut self, block: u32) -> Result<bool> {
        self.core.check_power()?;
        self.core.block(block)?;
        self.claim(block)?;
        let m = self.core.block(block)?;
        let t = self.timing(block);
        self.core.banks.run(
            self.spec.bank_of(block),
            t.read_ns.saturating_add(t.bus_byte_ns),
        );
        self.core.stats.reads += 1;
        Ok(m.is_bad())
    }

    fn mark_bad(&mut self, block: u32) -> Result<()> {
        self.core.check_power()?;
        self.core.block(block)?;
        // An erase finishing on the bank rewrites the block's record: read it after.
        self.claim(block)?;
        let mut m = self.core.block(block)?;
        let fate = self.core.faults.begin(0.0);
        if fate == Fate::Cut || (fate == Fate::Torn && self.core.faults.chance(0.5)) {
            self.cut()?;
            return Err(FlashError::PowerLoss);
        }
        m.flags |= MARKED_BAD;
        self.core.set_block(block, m)?;
        self.core.stats.marked_bad += 1;
        if fate == Fate::Torn {
            self.cut()?;
            return Err(FlashError::PowerLoss);
        }
        let t = self.timing(block);
        self.core.banks.run(self.spec.bank_of(block), t.program_ns);
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.core.check_power()?;
        self.core.drain();
        Ok(())
    }

    fn as_mlc(&mut self) -> Option<&mut dyn MlcNand> {
        self.spec.is_mlc().then_some(self as &mut dyn MlcNand)
    }
}

impl<S: Store> MlcNand for NandSim<S> {
    fn set_mode(&mut self, block: u32, mode: CellMode) -> Result<()> {
        self.core.check_power()?;
        if !self.spec.is_mlc() {
            return Err(FlashError::BadSpec("cell modes exist only on MLC parts"));
        }
        self.usable(block)?;
        self.claim(block)?;
        if self.pages[self.block_pages(block)].iter().any(|&s| s != 0) {
            return Err(FlashError::ModeChangeNotErased { block });
        }
        let mut m = self.core.block(block)?;
        match mode {
            CellMode::Slc => m.flags |= SLC_MODE,
            CellMode::Mlc => m.flags &= !SLC_MODE,
        }
        self.core.set_block(block, m)
    }

    fn mode(&self, block: u32) -> CellMode {
        match self.core.blocks.get(block as usize) {
            Some(m) if m.flags & SLC_MODE != 0 => CellMode::Slc,
            _ => CellMode::Mlc,
        }
    }
}
