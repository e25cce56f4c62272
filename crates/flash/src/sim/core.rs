//! State every simulator shares: the store and its layout, the block table, the clock, the
//! counters, the faults, and the programs a reordering device has not yet completed.

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use super::banks::Banks;
use crate::error::{FlashError, Result};
use crate::fault::{FaultConfig, Faults};
use crate::image::{self, BlockMeta, ImageMeta, Layout};
use crate::spec::DeviceSpec;
use crate::stats::Stats;
use crate::store::Store;

/// Store writes of one program, with the bytes they replaced.
type UndoGroup = Vec<(u64, Vec<u8>)>;

#[derive(Debug, Clone)]
pub(crate) struct Core<S> {
    pub store: S,
    pub layout: Layout,
    pub meta: ImageMeta,
    pub blocks: Vec<BlockMeta>,
    pub banks: Banks,
    pub stats: Stats,
    pub faults: Faults,
    undo: VecDeque<UndoGroup>,
    group: Option<UndoGroup>,
}

impl<S: Store> Core<S> {
    /// Lays a fresh image of `spec` into `store`, erasing whatever it held.
    pub fn format(mut store: S, spec: &DeviceSpec, meta: ImageMeta, banks: u32) -> Result<Self> {
        spec.validate()?;
        let layout = Layout::of(spec);
        if store.len() < layout.total {
            return Err(FlashError::BadSpec("the store is smaller than the image"));
        }
        store.zero(0, layout.total)?;
        image::write_header(&mut store, spec, &meta)?;
        let blocks = alloc::vec![BlockMeta::default(); layout.blocks as usize];
        Ok(Self::with(store, layout, meta, blocks, banks))
    }

    /// Opens the image in `store`.
    pub fn open(store: S, banks_of: impl Fn(&DeviceSpec) -> u32) -> Result<(Self, DeviceSpec)> {
        let (spec, meta) = image::read_header(&store)?;
        let layout = Layout::of(&spec);
        let blocks = image::load_blocks(&store, &layout)?;
        let banks = banks_of(&spec);
        Ok((Self::with(store, layout, meta, blocks, banks), spec))
    }

    fn with(store: S, layout: Layout, meta: ImageMeta, blocks: Vec<BlockMeta>, banks: u32) -> Self {
        Core {
            store,
            layout,
            meta,
            blocks,
            banks: Banks::new(banks),
            stats: Stats::default(),
            faults: Faults::new(FaultConfig::default()),
            undo: VecDeque::new(),
            group: None,
        }
    }

    pub fn check_power(&self) -> Result<()> {
        if self.faults.powered {
            Ok(())
        } else {
            Err(FlashError::PowerLoss)
        }
    }

    pub fn block(&self, block: u32) -> Result<BlockMeta> {
        self.blocks
            .get(block as usize)
            .copied()
            .ok_or(FlashError::OutOfRange {
                addr: block as u64,
                len: 1,
            })
    }

    pub fn set_block(&mut self, block: u32, m: BlockMeta) -> Result<()> {
        self.blocks[block as usize] = m;
        image::save_block(&mut self.store, &self.layout, block, m)
    }

    /// Counts an erase of `block` in its wear record.
    pub fn wear(&mut self, block: u32) -> Result<BlockMeta> {
        let mut m = self.block(block)?;
        m.erase_count = m.erase_count.saturating_add(1);
        self.set_block(block, m)?;
        Ok(m)
    }

    /// Writes raw store bytes, remembering what they replaced while a program is buffered.
    pub fn write_raw(&mut self, off: u64, bytes: &[u8]) -> Result<()> {
        if let Some(g) = &mut self.group {
            let mut old = alloc::vec![0u8; bytes.len()];
            self.store.read(off, &mut old)?;
            g.push((off, old));
        }
        self.store.write(off, bytes)
    }

    /// Reads medium bytes at `off` within the data area (stored inverted).
    pub fn read_data(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        self.store.read(self.layout.data + off, buf)?;
        buf.iter_mut().for_each(|b| *b = !*b);
        Ok(())
    }

    /// Writes medium bytes at `off` within the data area.
    pub fn write_data(&mut self, off: u64, data: &[u8]) -> Result<()> {
        let inv: Vec<u8> = data.iter().map(|b| !b).collect();
        self.write_raw(self.layout.data + off, &inv)
    }

    /// Sets medium bytes to the erased state (all ones).
    pub fn erase_data(&mut self, off: u64, len: u64) -> Result<()> {
        self.store.zero(self.layout.data + off, len)
    }

    /// Starts remembering the store writes of one program (when the device reorders).
    pub fn begin_program(&mut self) {
        if self.faults.config.reorder_window > 0 {
            self.group = Some(Vec::new());
        }
    }

    /// Ends a program: it joins the buffered ones; the oldest beyond the window are durable.
    pub fn end_program(&mut self) {
        if let Some(g) = self.group.take() {
            self.undo.push_back(g);
            while self.undo.len() > self.faults.config.reorder_window {
                self.undo.pop_front();
            }
        }
    }

    /// A barrier: every buffered program is durable.
    pub fn drain(&mut self) {
        self.group = None;
        self.undo.clear();
    }

    /// At a power cut, each buffered program is lost with probability one half. Returns
    /// whether any was, so the caller reloads what it caches of the store.
    pub fn lose_buffered(&mut self) -> Result<bool> {
        self.group = None;
        let mut lost = false;
        while let Some(g) = self.undo.pop_back() {
            if self.faults.chance(0.5) {
                lost = true;
                for (off, old) in g.iter().rev() {
                    self.store.write(*off, old)?;
                }
            }
        }
        Ok(lost)
    }

    pub fn reboot(&mut self) {
        self.faults.powered = true;
        self.banks.reset();
    }
}
