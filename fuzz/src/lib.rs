//! What the fuzz targets run, as plain functions (so that tests and the seed-corpus generator
//! can call them too).
//!
//! - [`mount_image`]: the input is a device image — byte 0 picks the medium (even: NOR, odd:
//!   NAND), the rest is the medium's raw content, page by page (NAND: data then spare) —
//!   which is mounted as a block device; every sector is read, one is written, and the
//!   device is cleaned. Nothing may panic or hang.
//! - [`ops_under_faults`]: a [`Sequence`] of block-device operations runs on the torture
//!   harness's block device with a power cut at a chosen device operation and one fault kind
//!   besides; the remounts are checked against the harness's model.
//!
//! The seed corpus in `fuzz/corpus/` comes from [`seed_corpus`]; regenerate it with
//! `cargo test --manifest-path fuzz/Cargo.toml --lib -- --ignored write_seed_corpus`.

use arbitrary::Arbitrary;
use flash::{
    DeviceSpec, ImageMeta, NandFlash, NandSim, NandSpec, NorFlash, NorSim, NorSpec, PageAddr,
};
use flashfs::{BlockDevice, Ftl, FtlConfig, NandSegments, NorSegments};
use flashfs_bench::torture::{run_case, torture_device, Case, Fault, FtlTarget, Op, NOR_SECTOR};

/// The NOR part of [`mount_image`]: the SPI NOR preset with 8 units of 2 KiB.
pub fn nor_spec() -> NorSpec {
    match flash::preset::lookup("w25q64jv").map(|p| p.spec) {
        Ok(DeviceSpec::Nor(s)) => NorSpec {
            unit_size: 2048,
            units: 8,
            ..s
        },
        _ => unreachable!("w25q64jv is a NOR preset"),
    }
}

/// The NAND part of [`mount_image`]: small-page NAND with 8 blocks of 4 pages.
pub fn nand_spec() -> NandSpec {
    match flash::preset::lookup("nand-128m").map(|p| p.spec) {
        Ok(DeviceSpec::Nand(s)) => NandSpec {
            blocks: 8,
            pages_per_block: 4,
            factory_bad_permille: 0,
            ..s
        },
        _ => unreachable!("nand-128m is a NAND preset"),
    }
}

/// Builds the device an image input describes: each chunk that is not all ones is
/// programmed (NAND: data and spare of a page; NOR: a program page), the rest stays erased.
fn build(data: &[u8]) -> Option<Device> {
    let (&kind, bytes) = data.split_first()?;
    if kind % 2 == 1 {
        let spec = nand_spec();
        let mut sim = NandSim::new(spec, ImageMeta::new("fuzz", 1)).ok()?;
        let (ps, ss) = (spec.page_size as usize, spec.spare_size as usize);
        for (i, chunk) in bytes.chunks(ps + ss).enumerate() {
            let i = i as u32;
            if i >= spec.blocks * spec.pages_per_block {
                break;
            }
            if chunk.iter().all(|&b| b == 0xFF) {
                continue;
            }
            let (d, s) = chunk.split_at(ps.min(chunk.len()));
            let at = PageAddr::new(i / spec.pages_per_block, i % spec.pages_per_block);
            sim.program_page(at, d, s).ok()?;
        }
        Some(Device::Nand(NandSegments::new(sim).ok()?))
    } else {
        let spec = nor_spec();
        let mut sim = NorSim::new(spec, ImageMeta::new("fuzz", 1)).ok()?;
        let page = spec.program_page.max(spec.word_size) as usize;
        let cap = spec.capacity() as usize;
        for (i, chunk) in bytes[..bytes.len().min(cap)].chunks(page).enumerate() {
            let whole = chunk.len() - chunk.len() % spec.word_size as usize;
            if whole == 0 || chunk.iter().all(|&b| b == 0xFF) {
                continue;
            }
            sim.program((i * page) as u64, &chunk[..whole]).ok()?;
        }
        Some(Device::Nor(NorSegments::new(sim, 512).ok()?))
    }
}

/// A device of [`mount_image`].
enum Device {
    Nor(NorSegments<NorSim>),
    Nand(NandSegments<NandSim>),
}

/// Mounts, reads every sector, writes one and cleans; returns how many sectors read back.
fn exercise<D: flashfs::Segments>(dev: D) -> u64 {
    let Ok(mut ftl) = Ftl::mount(dev, FtlConfig::default()) else {
        return 0;
    };
    let mut buf = vec![0u8; ftl.sector_size()];
    let mut ok = 0;
    for k in 0..ftl.sectors() {
        if ftl.read(k, &mut buf).is_ok() {
            ok += 1;
        }
    }
    if ftl.sectors() > 0 {
        let _ = ftl.write(0, &buf);
        let _ = ftl.flush();
        let _ = ftl.gc();
    }
    ok
}

/// The `mount_image` target: builds the image `data` describes, mounts it as a block device,
/// reads every sector. Returns the sectors that read back (0 when the mount failed).
pub fn mount_image(data: &[u8]) -> u64 {
    match build(data) {
        Some(Device::Nor(d)) => exercise(d),
        Some(Device::Nand(d)) => exercise(d),
        None => 0,
    }
}

/// One operation of a fuzzed sequence.
#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum FuzzOp {
    /// Writes `count % 4 + 1` sectors from `sector` (modulo the device).
    Write {
        /// First sector.
        sector: u16,
        /// Sectors, less one.
        count: u8,
    },
    /// Trims `count % 4 + 1` sectors from `sector`.
    Trim {
        /// First sector.
        sector: u16,
        /// Sectors, less one.
        count: u8,
    },
    /// Flushes.
    Flush,
}

/// The input of `ops_under_faults`.
#[derive(Debug, Clone, Arbitrary)]
pub struct Sequence {
    /// NAND (else NOR).
    pub nand: bool,
    /// Device operations before the power cut.
    pub cut: u16,
    /// Whether the cut tears its operation.
    pub torn: bool,
    /// Fault kind besides the cut (an index into [`FAULTS`]).
    pub fault: u8,
    /// Seed of the chained cut and of the fault's choices.
    pub seed: u32,
    /// The operations (at most [`MAX_OPS`] are run).
    pub ops: Vec<FuzzOp>,
}

/// Operations of a sequence that are run.
pub const MAX_OPS: usize = 300;

/// Fault kinds a sequence may pick: those the block device is expected to survive without a
/// violation. Silent program failures are left out: the block device does not read back what
/// it programs, so the torture already reports them.
pub const FAULTS: [Fault; 5] = [
    Fault::PowerCut,
    Fault::MountCut,
    Fault::EccWithin,
    Fault::EccBeyond,
    Fault::WearOut,
];

/// The operations a sequence decodes to on a device of `sectors` sectors: every write has its
/// own version, as the torture model requires.
pub fn decode(ops: &[FuzzOp], sectors: u64) -> Vec<Op> {
    let sectors = sectors.max(1);
    ops.iter()
        .take(MAX_OPS)
        .enumerate()
        .map(|(i, op)| match *op {
            FuzzOp::Write { sector, count } => {
                let sector = sector as u64 % sectors;
                Op::Write {
                    sector,
                    count: (count as u64 % 4 + 1).min(sectors - sector),
                    version: i as u32 + 1,
                }
            }
            FuzzOp::Trim { sector, count } => {
                let sector = sector as u64 % sectors;
                Op::Trim {
                    sector,
                    count: (count as u64 % 4 + 1).min(sectors - sector),
                }
            }
            FuzzOp::Flush => Op::Flush,
        })
        .collect()
}

/// The formatted block device on a preset's torture geometry.
fn formatted<D: flashfs::Segments>(dev: D) -> Option<D> {
    Some(Ftl::format(dev, FtlConfig::default()).ok()?.into_device())
}

/// The `ops_under_faults` target: `Err` is a violation of the torture model.
pub fn ops_under_faults(input: &Sequence) -> Result<(), String> {
    let mut fault = FAULTS[input.fault as usize % FAULTS.len()];
    let case = |fault| Case {
        seed: input.seed as u64,
        cut: input.cut as u64,
        torn: input.torn,
        fault,
    };
    let r = if input.nand {
        let dev = torture_device("nand-128m").map_err(|e| e.to_string())?;
        let DeviceSpec::Nand(spec) = dev.spec else {
            return Err("nand-128m is not NAND".into());
        };
        let sim = NandSim::new(spec, ImageMeta::new(dev.preset, 1)).map_err(|e| e.to_string())?;
        let seg = NandSegments::new(sim).map_err(|e| e.to_string())?;
        let base = formatted(seg).ok_or("formatting the NAND device failed")?;
        let target = FtlTarget::mount(base, FtlConfig::default()).map_err(|e| e.to_string())?;
        let ops = decode(&input.ops, target.sectors());
        run_case(target, &ops, case(fault))
    } else {
        if fault
            .not_applicable(&torture_device("w25q64jv").map_err(|e| e.to_string())?.spec)
            .is_some()
        {
            fault = Fault::PowerCut;
        }
        let dev = torture_device("w25q64jv").map_err(|e| e.to_string())?;
        let DeviceSpec::Nor(spec) = dev.spec else {
            return Err("w25q64jv is not NOR".into());
        };
        let sim = NorSim::new(spec, ImageMeta::new(dev.preset, 1)).map_err(|e| e.to_string())?;
        let seg = NorSegments::new(sim, NOR_SECTOR).map_err(|e| e.to_string())?;
        let base = formatted(seg).ok_or("formatting the NOR device failed")?;
        let target = FtlTarget::mount(base, FtlConfig::default()).map_err(|e| e.to_string())?;
        let ops = decode(&input.ops, target.sectors());
        run_case(target, &ops, case(fault))
    };
    match r.violation {
        Some(v) => Err(format!("{} (case {:?})", v, case(fault))),
        None => Ok(()),
    }
}

/// The raw content of a device as a `mount_image` input: byte 0 is the medium, then every
/// page (NAND: data and spare; erased pages read as ones) or the whole NOR array.
fn dump<D: flashfs::Segments>(kind: u8, ftl: Ftl<D>, read: impl Fn(D) -> Vec<u8>) -> Vec<u8> {
    let mut v = vec![kind];
    v.extend(read(ftl.into_device()));
    v
}

/// Writes `rounds` rounds over every sector of a formatted device (sector k, round r holds
/// bytes `k + r`), then trims a few.
fn fill<D: flashfs::Segments>(dev: D, rounds: u8) -> Option<Ftl<D>> {
    let mut ftl = Ftl::format(dev, FtlConfig::default()).ok()?;
    let ss = ftl.sector_size();
    for r in 0..rounds {
        for k in 0..ftl.sectors() {
            ftl.write(k, &vec![(k as u8).wrapping_add(r); ss]).ok()?;
        }
    }
    if ftl.sectors() > 2 {
        ftl.trim(1, 2).ok()?;
    }
    ftl.flush().ok()?;
    Some(ftl)
}

/// The seed corpus: (target, file name, content). Images of a freshly formatted and of a
/// written device on each medium; operation sequences from a fixed generator.
pub fn seed_corpus() -> Vec<(&'static str, String, Vec<u8>)> {
    let mut out = Vec::new();
    let nand = |rounds| {
        let sim = NandSim::new(nand_spec(), ImageMeta::new("fuzz", 1)).ok()?;
        let ftl = fill(NandSegments::new(sim).ok()?, rounds)?;
        Some(dump(1, ftl, |d: NandSegments<NandSim>| {
            let mut sim = d.into_inner();
            let s = *sim.spec();
            let mut v = Vec::new();
            for b in 0..s.blocks {
                for p in 0..s.pages_per_block {
                    let mut data = vec![0u8; s.page_size as usize];
                    let mut spare = vec![0u8; s.spare_size as usize];
                    if sim
                        .read_page(PageAddr::new(b, p), &mut data, &mut spare)
                        .is_err()
                    {
                        data.fill(0xFF);
                        spare.fill(0xFF);
                    }
                    v.extend(data);
                    v.extend(spare);
                }
            }
            v
        }))
    };
    let nor = |rounds| {
        let sim = NorSim::new(nor_spec(), ImageMeta::new("fuzz", 1)).ok()?;
        let ftl = fill(NorSegments::new(sim, 512).ok()?, rounds)?;
        Some(dump(0, ftl, |d: NorSegments<NorSim>| {
            let mut sim = d.into_inner();
            let mut v = vec![0u8; sim.spec().capacity() as usize];
            if sim.read(0, &mut v).is_err() {
                v.clear();
            }
            v
        }))
    };
    for (name, image) in [
        ("nand-formatted", nand(0)),
        ("nand-written", nand(3)),
        ("nor-formatted", nor(0)),
        ("nor-written", nor(3)),
    ] {
        if let Some(image) = image {
            out.push(("mount_image", name.to_string(), image));
        }
    }
    // Operation sequences: bytes from a fixed xorshift generator, which `Arbitrary` decodes
    // into sequences of a few hundred operations.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for (i, len) in [64usize, 256, 1024, 2048].into_iter().enumerate() {
        let bytes = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        out.push(("ops_under_faults", format!("sequence-{i}"), bytes));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regenerates `fuzz/corpus/` (run on demand, see the crate documentation).
    #[test]
    #[ignore]
    fn write_seed_corpus() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
        for (target, name, bytes) in seed_corpus() {
            let dir = root.join(target);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(name), bytes).unwrap();
        }
    }

    #[test]
    fn written_images_mount_and_read_back() {
        let corpus = seed_corpus();
        let images: Vec<_> = corpus.iter().filter(|c| c.0 == "mount_image").collect();
        assert_eq!(images.len(), 4);
        for (_, name, bytes) in images {
            let read = mount_image(bytes);
            assert!(read > 0, "{name}: no sector read back");
        }
        // Damage is survived: every byte of the written NAND image inverted in places.
        let (_, _, nand) = corpus.iter().find(|c| c.1 == "nand-written").unwrap();
        let mut bad = nand.clone();
        for b in bad.iter_mut().skip(1).step_by(97) {
            *b = !*b;
        }
        mount_image(&bad);
        mount_image(&[]);
        mount_image(&[1, 0, 0, 0]);
    }

    #[test]
    fn sequences_run_clean_under_every_fault() {
        let seq = Sequence {
            nand: true,
            cut: 40,
            torn: true,
            fault: 1,
            seed: 3,
            ops: (0..120)
                .map(|i| match i % 5 {
                    4 => FuzzOp::Flush,
                    3 => FuzzOp::Trim {
                        sector: i * 7,
                        count: 1,
                    },
                    _ => FuzzOp::Write {
                        sector: i * 13,
                        count: i as u8,
                    },
                })
                .collect(),
        };
        for fault in 0..FAULTS.len() as u8 {
            for nand in [false, true] {
                let s = Sequence {
                    fault,
                    nand,
                    ..seq.clone()
                };
                assert_eq!(ops_under_faults(&s), Ok(()), "{s:?}");
            }
        }
        let ops = decode(&seq.ops, 10);
        assert!(ops.iter().all(|op| match *op {
            Op::Write { sector, count, .. } | Op::Trim { sector, count } =>
                count >= 1 && sector + count <= 10,
            Op::Flush | Op::Checkpoint | Op::Idle { .. } => true,
        }));
    }
}
