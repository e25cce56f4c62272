//! Property test: random reads, writes, trims, flushes, remounts after a cut and after a
//! close on the block device agree with a plain array of sectors — with and without
//! checkpoints.

mod common;

use common::*;
use flashfs::{BlockDevice, Ftl, FtlConfig, Segments};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Write {
        sector: u64,
        count: u64,
        seed: u32,
    },
    Read {
        sector: u64,
        count: u64,
    },
    Trim {
        sector: u64,
        count: u64,
    },
    Flush,
    Remount,
    /// Close (a checkpoint, where the volume keeps them) and mount again.
    Close,
    Gc,
}

fn op(sectors: u64) -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..sectors, 1..4u64, any::<u32>()).prop_map(move |(s, c, seed)| Op::Write { sector: s, count: c.min(sectors - s), seed }),
        4 => (0..sectors, 1..4u64).prop_map(move |(s, c)| Op::Read { sector: s, count: c.min(sectors - s) }),
        1 => (0..sectors, 1..8u64).prop_map(move |(s, c)| Op::Trim { sector: s, count: c.min(sectors - s) }),
        1 => Just(Op::Flush),
        1 => Just(Op::Remount),
        1 => Just(Op::Close),
        1 => Just(Op::Gc),
    ]
}

fn run<D: Segments>(dev: D, ops: &[Op]) -> Result<(), TestCaseError> {
    run_with(dev, ops, FtlConfig::default())
}

fn run_with<D: Segments>(dev: D, ops: &[Op], config: FtlConfig) -> Result<(), TestCaseError> {
    let mut ftl = Ftl::format(dev, config).unwrap();
    let ss = ftl.sector_size();
    let mut model = vec![vec![0u8; ss]; ftl.sectors() as usize];
    for op in ops {
        match *op {
            Op::Write {
                sector,
                count,
                seed,
            } => {
                let mut data = Vec::new();
                for k in sector..sector + count {
                    let p = pattern(k, seed, ss);
                    model[k as usize].clone_from(&p);
                    data.extend(p);
                }
                ftl.write(sector, &data).unwrap();
            }
            Op::Read { sector, count } => {
                let mut buf = vec![0u8; ss * count as usize];
                ftl.read(sector, &mut buf).unwrap();
                for (i, chunk) in buf.chunks(ss).enumerate() {
                    prop_assert_eq!(
                        chunk,
                        &model[sector as usize + i][..],
                        "sector {}",
                        sector + i as u64
                    );
                }
            }
            Op::Trim { sector, count } => {
                ftl.trim(sector, count).unwrap();
                for k in sector..sector + count {
                    model[k as usize].fill(0);
                }
            }
            Op::Flush => ftl.flush().unwrap(),
            Op::Remount => ftl = Ftl::mount(ftl.into_device(), config).unwrap(),
            Op::Close => {
                let keeps = ftl.log().volume().anchors.is_some();
                ftl = Ftl::mount(ftl.close().unwrap(), config).unwrap();
                prop_assert_eq!(ftl.log().restored(), keeps, "mount after a close");
            }
            Op::Gc => ftl.gc().unwrap(),
        }
    }
    let mut ftl = Ftl::mount(ftl.into_device(), config).unwrap();
    let mut buf = vec![0u8; ss];
    for (k, want) in model.iter().enumerate() {
        ftl.read(k as u64, &mut buf).unwrap();
        prop_assert_eq!(&buf, want, "sector {} after the final remount", k);
    }
    Ok(())
}

proptest! {
    // 48 cases in the suite; PROPTEST_CASES=N for a longer soak.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(48),
        ..ProptestConfig::default()
    })]

    #[test]
    fn nor_matches_model(ops in proptest::collection::vec(op(120), 1..400)) {
        run(nor(true), &ops)?;
    }

    #[test]
    fn nand_matches_model(ops in proptest::collection::vec(op(100), 1..400)) {
        run(nand(), &ops)?;
    }

    #[test]
    fn nand_with_checkpoints_matches_model(ops in proptest::collection::vec(op(1900), 1..600)) {
        run(nand_checkpointed(), &ops)?;
    }

    /// A map cache of two pages: nearly every access reads a map page back from the
    /// checkpoint, and the changed pages force one every few writes.
    #[test]
    fn nand_with_a_two_page_map_cache_matches_model(
        ops in proptest::collection::vec(op(1900), 1..600)
    ) {
        run_with(nand_checkpointed(), &ops, FtlConfig { map_cache: 1024, ..FtlConfig::default() })?;
    }
}
