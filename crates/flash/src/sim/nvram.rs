//! NVRAM (FRAM) simulator: byte-addressable, written in place, no erase.

use super::core::Core;
use super::impl_simulated;
use crate::error::{FlashError, Result};
use crate::fault::Fate;
use crate::image::{image_len, ImageMeta};
use crate::medium::Nvram;
use crate::spec::{DeviceSpec, NvramSpec};
use crate::store::{RamStore, Store};

/// A simulated NVRAM part. A torn write leaves a prefix of the data written, as FRAM writes
/// bytes in address order.
#[derive(Debug, Clone)]
pub struct NvramSim<S = RamStore> {
    pub(super) core: Core<S>,
    spec: NvramSpec,
}

impl NvramSim<RamStore> {
    /// A fresh part in RAM (all bytes zero).
    pub fn new(spec: NvramSpec, meta: ImageMeta) -> Result<Self> {
        Self::format(
            RamStore::new(image_len(&DeviceSpec::Nvram(spec))),
            spec,
            meta,
        )
    }
}

#[cfg(feature = "std")]
impl NvramSim<crate::store::FileStore> {
    /// Creates a fresh part in a new sparse image file.
    pub fn create(path: &std::path::Path, spec: NvramSpec, meta: ImageMeta) -> Result<Self> {
        let store = crate::store::FileStore::create(path, image_len(&DeviceSpec::Nvram(spec)))?;
        Self::format(store, spec, meta)
    }
}

impl<S: Store> NvramSim<S> {
    /// Lays a fresh part into `store`.
    pub fn format(store: S, spec: NvramSpec, meta: ImageMeta) -> Result<Self> {
        // NVRAM leaves the factory zeroed: a blank store.
        let core = Core::format(store, &DeviceSpec::Nvram(spec), meta, 1)?;
        Ok(NvramSim { core, spec })
    }

    /// Opens the NVRAM image in `store`.
    pub fn open(store: S) -> Result<Self> {
        let (core, spec) = Core::open(store, |_| 1)?;
        let DeviceSpec::Nvram(spec) = spec else {
            return Err(FlashError::ImageMismatch);
        };
        Ok(NvramSim { core, spec })
    }

    /// The store holding the image.
    pub fn store(&self) -> &S {
        &self.core.store
    }

    /// Gives the store back (to reopen the image later).
    pub fn into_store(self) -> S {
        self.core.store
    }

    fn check(&self, addr: u64, len: usize) -> Result<()> {
        match addr.checked_add(len as u64) {
            Some(end) if end <= self.spec.size => Ok(()),
            _ => Err(FlashError::OutOfRange {
                addr,
                len: len as u64,
            }),
        }
    }

    fn cost(&self, len: usize) -> u64 {
        let words = (len as u64).div_ceil(self.spec.word_size as u64);
        self.spec
            .command_ns
            .saturating_add(words.saturating_mul(self.spec.access_ns))
            .saturating_add((len as u64).saturating_mul(self.spec.bus_byte_ns))
    }

    /// Nothing runs in the background on NVRAM.
    pub(super) fn settle(&mut self) -> Result<()> {
        Ok(())
    }

    /// Charges a write of `len` bytes to the clock and the counters.
    fn account_write(&mut self, len: usize) {
        let ns = self.cost(len);
        self.core.banks.run(0, ns);
        self.core.stats.programs += 1;
        self.core.stats.bytes_programmed += len as u64;
        self.core
            .stats
            .program_latency
            .record(core::time::Duration::from_nanos(ns));
    }

    pub(super) fn cut(&mut self) -> Result<()> {
        self.core.lose_buffered()?;
        self.core.faults.powered = false;
        Ok(())
    }
}

impl_simulated!(NvramSim);

impl<S: Store> Nvram for NvramSim<S> {
    fn spec(&self) -> &NvramSpec {
        &self.spec
    }

    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<()> {
        self.core.check_power()?;
        self.check(addr, buf.len())?;
        let ns = self.cost(buf.len());
        self.core.banks.run(0, ns);
        self.core.read_data(addr, buf)?;
        self.core.stats.reads += 1;
        self.core.stats.bytes_read += buf.len() as u64;
        self.core
            .stats
            .read_latency
            .record(core::time::Duration::from_nanos(ns));
        Ok(())
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<()> {
        self.core.check_power()?;
        self.check(addr, data.len())?;
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
                let n = self.core.faults.below(data.len() as u64 + 1) as usize;
                self.core.begin_program();
                self.core.write_data(addr, &data[..n])?;
                self.core.end_program();
                self.cut()?;
                Err(FlashError::PowerLoss)
            }
            Fate::Silent => {
                // Looks like the real thing to the host, time included.
                self.account_write(data.len());
                Ok(())
            }
            Fate::Normal => {
                self.core.begin_program();
                self.core.write_data(addr, data)?;
                self.core.end_program();
                self.account_write(data.len());
                Ok(())
            }
        }
    }
}
