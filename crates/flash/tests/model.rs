//! Model tests: random operation sequences, valid and invalid, run on a small simulated part
//! and on a plain in-memory model of the medium's rules. Every result (data or exact error)
//! must agree, also across reopening the image.

mod common;

use common::*;
use flash::{
    CellMode, FlashError, MlcNand, NandFlash, NandSim, NandSpec, NorFlash, NorSim, NorSpec,
    PageAddr, Simulated, WearModel,
};
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------
// NOR

#[derive(Debug, Clone)]
enum NorOp {
    Read {
        addr: u64,
        len: usize,
    },
    /// Programs `mask` as is (`derived` false) or ANDed with what the model holds there, a
    /// program that clears bits only.
    Program {
        addr: u64,
        mask: Vec<u8>,
        derived: bool,
    },
    Erase {
        unit: u32,
        background: bool,
    },
    Reopen,
}

fn nor_spec(reprogrammable: bool, program_page: u32) -> NorSpec {
    NorSpec {
        unit_size: 64,
        units: 4,
        program_page,
        ..small_nor(reprogrammable)
    }
}

fn nor_op(cap: u64, word: u64) -> impl Strategy<Value = NorOp> {
    let addr = prop_oneof![
        3 => (0..cap / word).prop_map(move |w| w * word),
        1 => 0..cap + 8,
        1 => Just(u64::MAX - 2),
    ];
    let len = prop_oneof![3 => (0..4usize).prop_map(move |n| n * word as usize), 1 => 0..13usize];
    prop_oneof![
        2 => (addr.clone(), 0..20usize).prop_map(|(addr, len)| NorOp::Read { addr, len }),
        5 => (addr, len, any::<bool>(), any::<u8>()).prop_flat_map(|(addr, len, derived, _)| {
            prop::collection::vec(any::<u8>(), len)
                .prop_map(move |mask| NorOp::Program { addr, mask, derived })
        }),
        1 => (0..5u32, any::<bool>()).prop_map(|(unit, background)| NorOp::Erase { unit, background }),
        1 => Just(NorOp::Reopen),
    ]
}

struct NorModel {
    spec: NorSpec,
    bytes: Vec<u8>,
    programmed: Vec<bool>,
    erases: Vec<u32>,
    ops: u64,
}

impl NorModel {
    fn new(spec: NorSpec) -> Self {
        let cap = spec.capacity() as usize;
        NorModel {
            spec,
            bytes: vec![0xFF; cap],
            programmed: vec![false; cap / spec.word_size as usize],
            erases: vec![0; spec.units as usize],
            ops: 0,
        }
    }

    fn in_range(&self, addr: u64, len: usize) -> Result<(), FlashError> {
        match addr.checked_add(len as u64) {
            Some(e) if e <= self.spec.capacity() => Ok(()),
            _ => Err(FlashError::OutOfRange {
                addr,
                len: len as u64,
            }),
        }
    }

    fn read(&self, addr: u64, len: usize) -> Result<Vec<u8>, FlashError> {
        self.in_range(addr, len)?;
        Ok(self.bytes[addr as usize..addr as usize + len].to_vec())
    }

    fn program(&mut self, addr: u64, data: &[u8]) -> Result<(), FlashError> {
        self.in_range(addr, data.len())?;
        let w = self.spec.word_size as u64;
        if addr % w != 0 || data.len() as u64 % w != 0 {
            return Err(FlashError::Unaligned {
                addr,
                align: w as u32,
            });
        }
        if data.is_empty() {
            return Ok(());
        }
        let pp = self.spec.program_page as u64;
        let end = addr + data.len() as u64;
        if pp != 0 && addr / pp != (end - 1) / pp {
            return Err(FlashError::ProgramTooLong {
                addr,
                len: data.len() as u64,
                limit: pp as u32,
            });
        }
        for (i, &d) in data.iter().enumerate() {
            if d & !self.bytes[addr as usize + i] != 0 {
                return Err(FlashError::SetsBits {
                    addr: addr + i as u64,
                });
            }
        }
        let words = addr / w..end / w;
        if !self.spec.reprogrammable {
            if let Some(wd) = words.clone().find(|&wd| self.programmed[wd as usize]) {
                return Err(FlashError::Reprogram { addr: wd * w });
            }
        }
        for (i, &d) in data.iter().enumerate() {
            self.bytes[addr as usize + i] &= d;
        }
        for wd in words {
            self.programmed[wd as usize] = true;
        }
        self.ops += 1;
        Ok(())
    }

    fn erase(&mut self, unit: u32) -> Result<(), FlashError> {
        if unit >= self.spec.units {
            return Err(FlashError::OutOfRange {
                addr: unit as u64,
                len: 1,
            });
        }
        let size = self.spec.unit_size as usize;
        let at = unit as usize * size;
        self.bytes[at..at + size].fill(0xFF);
        let w = self.spec.word_size as usize;
        self.programmed[at / w..(at + size) / w].fill(false);
        self.erases[unit as usize] += 1;
        self.ops += 1;
        Ok(())
    }
}

fn run_nor_model(spec: NorSpec, ops: Vec<NorOp>) -> Result<(), TestCaseError> {
    let mut sim = NorSim::new(spec, meta(WearModel::Never)).unwrap();
    let mut model = NorModel::new(spec);
    let mut base_ops = 0;
    for (i, op) in ops.into_iter().enumerate() {
        match op {
            NorOp::Read { addr, len } => {
                let mut buf = vec![0u8; len];
                let got = sim.read(addr, &mut buf).map(|_| buf);
                prop_assert_eq!(got, model.read(addr, len), "op {}", i);
            }
            NorOp::Program {
                addr,
                mask,
                derived,
            } => {
                let data: Vec<u8> = mask
                    .iter()
                    .enumerate()
                    .map(|(j, &m)| {
                        let at = addr.wrapping_add(j as u64) as usize;
                        match model.bytes.get(at) {
                            Some(&b) if derived => b & m,
                            _ => m,
                        }
                    })
                    .collect();
                prop_assert_eq!(
                    sim.program(addr, &data),
                    model.program(addr, &data),
                    "op {} {:?}",
                    i,
                    data
                );
            }
            NorOp::Erase { unit, background } => {
                let got = if background {
                    sim.start_erase(unit)
                } else {
                    sim.erase(unit)
                };
                prop_assert_eq!(got, model.erase(unit), "op {}", i);
            }
            NorOp::Reopen => {
                base_ops = model.ops;
                sim = NorSim::open(sim.into_store()).unwrap();
            }
        }
        prop_assert_eq!(sim.ops(), model.ops - base_ops, "op {}", i);
    }
    prop_assert_eq!(sim.erase_counts(), model.erases.clone());
    let mut all = vec![0u8; spec.capacity() as usize];
    sim.read(0, &mut all).unwrap();
    prop_assert_eq!(all, model.bytes);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn nor_with_multiwrite_follows_the_model(ops in prop::collection::vec(nor_op(256, 4), 1..60)) {
        run_nor_model(nor_spec(true, 0), ops)?;
    }

    #[test]
    fn nor_without_multiwrite_follows_the_model(ops in prop::collection::vec(nor_op(256, 4), 1..60)) {
        run_nor_model(nor_spec(false, 0), ops)?;
    }

    #[test]
    fn nor_with_program_pages_follows_the_model(ops in prop::collection::vec(nor_op(256, 4), 1..60)) {
        run_nor_model(nor_spec(false, 16), ops)?;
    }
}

// ---------------------------------------------------------------------------------------
// NAND

#[derive(Debug, Clone)]
enum NandOp {
    Read {
        at: PageAddr,
        dlen: usize,
        slen: usize,
    },
    Program {
        at: PageAddr,
        dlen: usize,
        slen: usize,
        fill: u8,
    },
    Erase {
        block: u32,
        background: bool,
    },
    MarkBad(u32),
    IsBad(u32),
    SetMode(u32, bool),
    Reopen,
}

fn nand_spec(mlc: bool) -> NandSpec {
    let base = if mlc { small_mlc() } else { small_nand() };
    NandSpec {
        blocks: 4,
        pages_per_block: 6,
        page_size: 16,
        spare_size: 4,
        ecc: flash::EccSpec {
            codeword: 8,
            correctable: 1,
        },
        ..base
    }
}

fn nand_op() -> impl Strategy<Value = NandOp> {
    let at = prop_oneof![
        6 => (0..4u32, 0..6u32),
        1 => (0..6u32, 0..8u32),
    ]
    .prop_map(|(b, p)| PageAddr::new(b, p));
    let dlen = prop_oneof![3 => Just(16usize), 3 => 0..17usize, 1 => 0..20usize];
    let slen = prop_oneof![3 => 0..5usize, 1 => 0..7usize];
    let block = prop_oneof![5 => 0..4u32, 1 => 0..6u32];
    prop_oneof![
        3 => (at.clone(), dlen.clone(), slen.clone()).prop_map(|(at, dlen, slen)| NandOp::Read { at, dlen, slen }),
        5 => (at, dlen, slen, any::<u8>()).prop_map(|(at, dlen, slen, fill)| NandOp::Program { at, dlen, slen, fill }),
        2 => (block.clone(), any::<bool>()).prop_map(|(block, background)| NandOp::Erase { block, background }),
        1 => block.clone().prop_map(NandOp::MarkBad),
        1 => block.clone().prop_map(NandOp::IsBad),
        2 => (block, any::<bool>()).prop_map(|(b, slc)| NandOp::SetMode(b, slc)),
        1 => Just(NandOp::Reopen),
    ]
}

struct NandModel {
    spec: NandSpec,
    /// Programmed pages: data and spare as they read.
    pages: Vec<Option<(Vec<u8>, Vec<u8>)>>,
    bad: Vec<bool>,
    slc: Vec<bool>,
    erases: Vec<u32>,
    ops: u64,
}

impl NandModel {
    fn new(spec: NandSpec) -> Self {
        let b = spec.blocks as usize;
        NandModel {
            spec,
            pages: vec![None; b * spec.pages_per_block as usize],
            bad: vec![false; b],
            slc: vec![false; b],
            erases: vec![0; b],
            ops: 0,
        }
    }

    fn index(&self, at: PageAddr) -> Result<usize, FlashError> {
        let ppb = self.spec.pages_per_block;
        if at.block >= self.spec.blocks || at.page >= ppb {
            return Err(FlashError::OutOfRange {
                addr: at.block as u64 * ppb as u64 + at.page as u64,
                len: 1,
            });
        }
        Ok((at.block * ppb + at.page) as usize)
    }

    fn buffers(&self, dlen: usize, slen: usize) -> Result<(), FlashError> {
        if dlen > self.spec.page_size as usize || slen > self.spec.spare_size as usize {
            return Err(FlashError::BadBuffer {
                got: (dlen + slen) as u64,
                max: (self.spec.page_size + self.spec.spare_size) as u64,
            });
        }
        Ok(())
    }

    fn usable(&self, block: u32) -> Result<(), FlashError> {
        match self.bad.get(block as usize) {
            None => Err(FlashError::OutOfRange {
                addr: block as u64,
                len: 1,
            }),
            Some(true) => Err(FlashError::BadBlock { block }),
            Some(false) => Ok(()),
        }
    }

    fn read(
        &self,
        at: PageAddr,
        dlen: usize,
        slen: usize,
    ) -> Result<(Vec<u8>, Vec<u8>), FlashError> {
        let i = self.index(at)?;
        self.buffers(dlen, slen)?;
        self.usable(at.block)?;
        Ok(match &self.pages[i] {
            Some((d, s)) => (d[..dlen].to_vec(), s[..slen].to_vec()),
            None => (vec![0xFF; dlen], vec![0xFF; slen]),
        })
    }

    fn program(&mut self, at: PageAddr, data: &[u8], spare: &[u8]) -> Result<(), FlashError> {
        let i = self.index(at)?;
        self.buffers(data.len(), spare.len())?;
        self.usable(at.block)?;
        if self.slc[at.block as usize] && at.page % 2 == 1 {
            return Err(FlashError::MsbInSlcMode {
                block: at.block,
                page: at.page,
            });
        }
        if self.pages[i].is_some() {
            return Err(FlashError::PageAlreadyProgrammed {
                block: at.block,
                page: at.page,
            });
        }
        let ppb = self.spec.pages_per_block;
        if let Some(h) = (at.page + 1..ppb)
            .rev()
            .find(|&p| self.pages[(at.block * ppb + p) as usize].is_some())
        {
            return Err(FlashError::OutOfOrder {
                block: at.block,
                page: at.page,
                highest: h,
            });
        }
        let mut d = vec![0xFF; self.spec.page_size as usize];
        d[..data.len()].copy_from_slice(data);
        let mut s = vec![0xFF; self.spec.spare_size as usize];
        s[..spare.len()].copy_from_slice(spare);
        self.pages[i] = Some((d, s));
        self.ops += 1;
        Ok(())
    }

    fn erase(&mut self, block: u32) -> Result<(), FlashError> {
        self.usable(block)?;
        let ppb = self.spec.pages_per_block as usize;
        self.pages[block as usize * ppb..(block as usize + 1) * ppb].fill(None);
        self.slc[block as usize] = false;
        self.erases[block as usize] += 1;
        self.ops += 1;
        Ok(())
    }

    fn mark_bad(&mut self, block: u32) -> Result<(), FlashError> {
        *self
            .bad
            .get_mut(block as usize)
            .ok_or(FlashError::OutOfRange {
                addr: block as u64,
                len: 1,
            })? = true;
        self.ops += 1;
        Ok(())
    }

    fn is_bad(&self, block: u32) -> Result<bool, FlashError> {
        self.bad
            .get(block as usize)
            .copied()
            .ok_or(FlashError::OutOfRange {
                addr: block as u64,
                len: 1,
            })
    }

    fn set_mode(&mut self, block: u32, slc: bool) -> Result<(), FlashError> {
        if !self.spec.is_mlc() {
            return Err(FlashError::BadSpec("cell modes exist only on MLC parts"));
        }
        self.usable(block)?;
        let ppb = self.spec.pages_per_block as usize;
        if self.pages[block as usize * ppb..(block as usize + 1) * ppb]
            .iter()
            .any(|p| p.is_some())
        {
            return Err(FlashError::ModeChangeNotErased { block });
        }
        self.slc[block as usize] = slc;
        Ok(())
    }
}

fn run_nand_model(spec: NandSpec, ops: Vec<NandOp>) -> Result<(), TestCaseError> {
    let mut sim = NandSim::new(spec, meta(WearModel::Never)).unwrap();
    let mut model = NandModel::new(spec);
    let mut base_ops = 0;
    // Blocks erasing in the background: their mode resets when the erase is done, which
    // the next call that gets to work on their bank (it waits for the erase) makes sure of.
    let mut erasing: Vec<u32> = Vec::new();
    for (i, op) in ops.into_iter().enumerate() {
        let touched = match &op {
            NandOp::Read { at, .. } | NandOp::Program { at, .. } => Some(at.block),
            NandOp::Erase { block, .. }
            | NandOp::MarkBad(block)
            | NandOp::IsBad(block)
            | NandOp::SetMode(block, _) => Some(*block),
            NandOp::Reopen => None,
        };
        // Calls refused for their arguments return before they wait for the bank.
        let mut started = None;
        let claimed = |r: &Result<(), FlashError>| match r {
            Ok(()) => true,
            Err(e) => matches!(
                e,
                FlashError::MsbInSlcMode { .. }
                    | FlashError::PageAlreadyProgrammed { .. }
                    | FlashError::OutOfOrder { .. }
                    | FlashError::ModeChangeNotErased { .. }
            ),
        };
        let mut result: Result<(), FlashError> = Ok(());
        match op {
            NandOp::Read { at, dlen, slen } => {
                let (mut d, mut s) = (vec![0u8; dlen], vec![0u8; slen]);
                let got = sim.read_page(at, &mut d, &mut s).map(|st| {
                    assert_eq!(st.corrected_bits, 0);
                    (d, s)
                });
                result = got.clone().map(|_| ());
                prop_assert_eq!(got, model.read(at, dlen, slen), "op {}", i);
            }
            NandOp::Program {
                at,
                dlen,
                slen,
                fill,
            } => {
                let data: Vec<u8> = (0..dlen).map(|j| fill.wrapping_add(j as u8)).collect();
                let spare: Vec<u8> = (0..slen).map(|j| fill ^ j as u8).collect();
                result = sim.program_page(at, &data, &spare);
                prop_assert_eq!(result.clone(), model.program(at, &data, &spare), "op {}", i);
            }
            NandOp::Erase { block, background } => {
                let got = if background {
                    sim.start_erase(block)
                } else {
                    sim.erase_block(block)
                };
                result = got.clone();
                if background && got.is_ok() {
                    started = Some(block);
                }
                prop_assert_eq!(got, model.erase(block), "op {}", i);
            }
            NandOp::MarkBad(b) => {
                result = sim.mark_bad(b);
                prop_assert_eq!(result.clone(), model.mark_bad(b), "op {}", i);
            }
            NandOp::IsBad(b) => {
                let got = sim.is_bad(b);
                result = got.clone().map(|_| ());
                prop_assert_eq!(got, model.is_bad(b), "op {}", i);
            }
            NandOp::SetMode(b, slc) => {
                let mode = if slc { CellMode::Slc } else { CellMode::Mlc };
                result = sim.set_mode(b, mode);
                prop_assert_eq!(result.clone(), model.set_mode(b, slc), "op {}", i);
            }
            NandOp::Reopen => {
                base_ops = model.ops;
                sim = NandSim::open(sim.into_store()).unwrap();
                erasing.clear();
            }
        }
        if let Some(b) = touched {
            if claimed(&result) {
                erasing.retain(|&e| spec.bank_of(e) != spec.bank_of(b));
            }
        }
        erasing.extend(started);
        prop_assert_eq!(sim.ops(), model.ops - base_ops, "op {}", i);
        for b in (0..spec.blocks).filter(|b| !erasing.contains(b)) {
            prop_assert_eq!(
                sim.mode(b) == CellMode::Slc,
                model.slc[b as usize],
                "op {} block {}",
                i,
                b
            );
        }
    }
    prop_assert_eq!(sim.erase_counts(), model.erases.clone());
    for b in 0..spec.blocks {
        for p in 0..spec.pages_per_block {
            let at = PageAddr::new(b, p);
            let (mut d, mut s) = (vec![0u8; 16], vec![0u8; 4]);
            let got = sim.read_page(at, &mut d, &mut s).map(|_| (d, s));
            prop_assert_eq!(got, model.read(at, 16, 4));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn slc_nand_follows_the_model(ops in prop::collection::vec(nand_op(), 1..80)) {
        run_nand_model(nand_spec(false), ops)?;
    }

    #[test]
    fn mlc_nand_follows_the_model(ops in prop::collection::vec(nand_op(), 1..80)) {
        run_nand_model(nand_spec(true), ops)?;
    }
}
