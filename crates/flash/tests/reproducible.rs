//! Reproducibility: a fault seed and an operation sequence determine everything — results,
//! the image byte for byte, the stats and the clock. Another seed gives another run.

mod common;

use std::time::Duration;

use common::*;
use flash::stats::Stats;
use flash::{
    CellMode, CutPoint, DeviceClock, FaultConfig, MlcNand, NandFlash, NandSim, NandSpec, NorFlash,
    NorSim, NorSpec, PageAddr, Simulated, Timebomb, WearModel,
};

/// Everything observable about a run.
#[derive(Debug, PartialEq)]
struct Run {
    results: Vec<String>,
    image: Vec<u8>,
    stats: Stats,
    erases: Vec<u32>,
    now: Duration,
}

fn config(seed: u64) -> FaultConfig {
    FaultConfig {
        seed,
        cut: Some(CutPoint {
            after_ops: 150,
            torn: true,
        }),
        bit_flip_rate: 2e-3,
        silent_program_rate: 0.02,
        silent_erase_rate: 0.02,
        reorder_window: 4,
        timebombs: vec![Timebomb {
            block: 5,
            at_erases: 3,
        }],
    }
}

fn nand_run(seed: u64) -> Run {
    let spec = NandSpec {
        endurance: 4,
        ..small_mlc()
    };
    let mut n = NandSim::new(spec, meta(WearModel::Gradual)).unwrap();
    n.set_faults(config(seed));
    let mut results = Vec::new();
    let mut log = |r: String| results.push(r);
    for round in 0..12u32 {
        for b in 0..8u32 {
            if round % 3 == 0 {
                log(format!("{:?}", n.set_mode(b, CellMode::Slc)));
            }
            for p in 0..8u32 {
                let data = pattern(b, p + round, 64);
                log(format!(
                    "{:?}",
                    n.program_page(PageAddr::new(b, p), &data, &[round as u8])
                ));
            }
            let mut d = [0u8; 64];
            for p in 0..8u32 {
                let r = n.read_page(PageAddr::new(b, p), &mut d, &mut []);
                log(format!("{r:?} {d:?}"));
            }
            if (b + round) % 2 == 0 {
                log(format!("{:?}", n.start_erase(b)));
            } else {
                log(format!("{:?}", n.erase_block(b)));
            }
            if !n.is_powered() {
                n.reboot();
                log("reboot".into());
            }
        }
        n.idle(Duration::from_micros(300));
    }
    let _ = n.power_cut();
    n.reboot();
    Run {
        results,
        image: image_bytes(n.store()),
        stats: n.stats().clone(),
        erases: n.erase_counts(),
        now: n.now(),
    }
}

fn nor_run(seed: u64) -> Run {
    let spec = NorSpec {
        endurance: 4,
        ..small_nor(false)
    };
    let mut n = NorSim::new(spec, meta(WearModel::Gradual)).unwrap();
    n.set_faults(FaultConfig {
        cut: Some(CutPoint {
            after_ops: 60,
            torn: true,
        }),
        ..config(seed)
    });
    let mut results = Vec::new();
    for round in 0..10u64 {
        for u in 0..8u64 {
            for w in 0..8 {
                let r = n.program(u * 256 + w * 4, &[(round * 8 + w) as u8; 4]);
                results.push(format!("{r:?}"));
            }
            let mut b = [0u8; 32];
            let r = n.read(u * 256, &mut b);
            results.push(format!("{r:?} {b:?}"));
            let r = if u % 2 == 0 {
                n.start_erase(u as u32)
            } else {
                n.erase(u as u32)
            };
            results.push(format!("{r:?}"));
            if !n.is_powered() {
                n.reboot();
            }
        }
    }
    let _ = n.power_cut();
    n.reboot();
    Run {
        results,
        image: image_bytes(n.store()),
        stats: n.stats().clone(),
        erases: n.erase_counts(),
        now: n.now(),
    }
}

#[test]
fn the_same_seed_replays_a_nand_run_exactly() {
    let a = nand_run(11);
    let b = nand_run(11);
    assert!(a == b, "two runs from seed 11 differ");
    // The faults did happen.
    assert!(a.stats.corrected_bits > 0);
    assert!(a.results.iter().any(|r| r.contains("PowerLoss")));
    assert!(a.results.iter().any(|r| r.contains("Failed")));
    assert!(a.results.iter().any(|r| r.contains("Uncorrectable")));
}

#[test]
fn another_seed_gives_another_nand_run() {
    let a = nand_run(11);
    let c = nand_run(12);
    assert!(a.image != c.image, "seeds 11 and 12 left the same image");
    assert_ne!(a.results, c.results);
    assert_ne!(a.stats, c.stats);
}

#[test]
fn the_same_seed_replays_a_nor_run_exactly() {
    let a = nor_run(5);
    assert!(a == nor_run(5));
    assert!(a.results.iter().any(|r| r.contains("PowerLoss")));
    let c = nor_run(6);
    assert!(a.image != c.image);
    assert_ne!(a.results, c.results);
}

#[test]
fn factory_bad_blocks_follow_the_image_seed_not_the_fault_seed() {
    let spec = NandSpec {
        blocks: 256,
        banks: 1,
        factory_bad_permille: 50,
        ..small_nand()
    };
    let bad = |image_seed, fault_seed| {
        let mut n = NandSim::new(spec, flash::ImageMeta::new("b", image_seed)).unwrap();
        n.set_faults(FaultConfig {
            seed: fault_seed,
            ..Default::default()
        });
        (0..256)
            .filter(|&b| n.is_bad(b).unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(bad(1, 1), bad(1, 2));
    assert_ne!(bad(1, 1), bad(2, 1));
}
