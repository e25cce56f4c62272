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

/// How the effect of a buffered store write is taken back when its program is lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Merge {
    /// Flash cells (stored inverted): a program only sets store bits, and any program of the
    /// same cells that survives sets them again (it asked for them cleared too).
    Cells,
    /// State flags owned by one program: the bits it set go.
    Flags,
    /// Bytes written in place (NVRAM): they go back to what they were, where no later
    /// surviving write covers them.
    Bytes,
}

/// One store write of a buffered program.
#[derive(Debug, Clone)]
struct Write {
    off: u64,
    old: Vec<u8>,
    new: Vec<u8>,
    merge: Merge,
}

impl Write {
    fn overlap(&self, off: u64, len: usize) -> Option<(usize, usize, usize)> {
        let lo = self.off.max(off);
        let hi = (self.off + self.new.len() as u64).min(off + len as u64);
        (lo < hi).then(|| {
            (
                (lo - off) as usize,
                (lo - self.off) as usize,
                (hi - lo) as usize,
            )
        })
    }
}

/// Store writes of one program.
type UndoGroup = Vec<Write>;

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
    /// How data-area writes merge (cells for flash, bytes for NVRAM).
    data_merge: Merge,
    /// Whether the data area holds the medium's bytes inverted: flash erases to all ones,
    /// NVRAM leaves the factory zeroed, and either way the blank state is a hole.
    invert: bool,
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
        Ok(Self::with(store, spec, layout, meta, blocks, banks))
    }

    /// Opens the image in `store`.
    pub fn open(store: S, banks_of: impl Fn(&DeviceSpec) -> u32) -> Result<(Self, DeviceSpec)> {
        let (spec, meta) = image::read_header(&store)?;
        let layout = Layout::of(&spec);
        let blocks = image::load_blocks(&store, &layout)?;
        let banks = banks_of(&spec);
        Ok((Self::with(store, &spec, layout, meta, blocks, banks), spec))
    }

    fn with(
        store: S,
        spec: &DeviceSpec,
        layout: Layout,
        meta: ImageMeta,
        blocks: Vec<BlockMeta>,
        banks: u32,
    ) -> Self {
        let flash = !matches!(spec, DeviceSpec::Nvram(_));
        Core {
            data_merge: if flash { Merge::Cells } else { Merge::Bytes },
            invert: flash,
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
    pub fn write_raw(&mut self, off: u64, bytes: &[u8], merge: Merge) -> Result<()> {
        if let Some(g) = &mut self.group {
            let mut old = alloc::vec![0u8; bytes.len()];
            self.store.read(off, &mut old)?;
            g.push(Write {
                off,
                old,
                new: bytes.to_vec(),
                merge,
            });
        }
        self.store.write(off, bytes)
    }

    /// Reads medium bytes at `off` within the data area.
    pub fn read_data(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        self.store.read(self.layout.data + off, buf)?;
        if self.invert {
            buf.iter_mut().for_each(|b| *b = !*b);
        }
        Ok(())
    }

    /// Writes medium bytes at `off` within the data area.
    pub fn write_data(&mut self, off: u64, data: &[u8]) -> Result<()> {
        if self.invert {
            let inv: Vec<u8> = data.iter().map(|b| !b).collect();
            self.write_raw(self.layout.data + off, &inv, self.data_merge)
        } else {
            self.write_raw(self.layout.data + off, data, self.data_merge)
        }
    }

    /// Sets medium bytes to the blank state (flash: erased, all ones).
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

    /// At a power cut, each buffered program is lost with probability one half. The others
    /// stay, whole: a lost program takes back only what no surviving one also did, so the
    /// medium holds the effect of the surviving programs applied in order. Returns whether
    /// any was lost, so the caller reloads what it caches of the store.
    pub fn lose_buffered(&mut self) -> Result<bool> {
        self.group = None;
        let groups: Vec<UndoGroup> = self.undo.drain(..).collect();
        let mut lost = alloc::vec![false; groups.len()];
        for l in lost.iter_mut().rev() {
            *l = self.faults.chance(0.5);
        }
        for (i, g) in groups.iter().enumerate().rev() {
            if !lost[i] {
                continue;
            }
            let later_kept = || {
                groups[i + 1..]
                    .iter()
                    .zip(&lost[i + 1..])
                    .filter(|(_, &l)| !l)
                    .flat_map(|(g, _)| g.iter())
            };
            for w in g.iter().rev() {
                let mut cur = alloc::vec![0u8; w.new.len()];
                self.store.read(w.off, &mut cur)?;
                // Per byte: the bits later surviving writes set, and whether any covers it.
                let mut keep = alloc::vec![0u8; cur.len()];
                let mut covered = alloc::vec![false; cur.len()];
                for k in later_kept() {
                    if let Some((at, from, n)) = k.overlap(w.off, cur.len()) {
                        for (d, s) in keep[at..at + n].iter_mut().zip(&k.new[from..from + n]) {
                            *d |= s;
                        }
                        covered[at..at + n].fill(true);
                    }
                }
                let bytes = cur
                    .iter_mut()
                    .zip(&w.new)
                    .zip(&w.old)
                    .zip(&keep)
                    .zip(&covered);
                for ((((c, &new), &old), &keep), &covered) in bytes {
                    match w.merge {
                        Merge::Cells => *c &= !(new & !old & !keep),
                        Merge::Flags => *c &= !(new & !old),
                        Merge::Bytes if !covered => *c = old,
                        Merge::Bytes => {}
                    }
                }
                self.store.write(w.off, &cur)?;
            }
        }
        Ok(lost.iter().any(|&l| l))
    }

    pub fn reboot(&mut self) {
        self.faults.powered = true;
        self.banks.reset();
    }
}
