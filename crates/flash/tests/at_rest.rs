//! Damage at rest: retention loss and read disturb between uses, with NAND's ECC applied.

mod common;

use common::*;
use flash::{
    AtRest, FaultConfig, FlashError, ImageMeta, NandFlash, NandSim, NorFlash, NorSim, PageAddr,
    Simulated,
};

fn data(page: u32) -> Vec<u8> {
    (0..64).map(|i| (i as u32 * 31 + page * 7) as u8).collect()
}

fn written_nand(seed: u64) -> NandSim {
    let mut n = NandSim::new(small_nand(), ImageMeta::new("t", 1)).unwrap();
    n.set_faults(FaultConfig {
        seed,
        ..FaultConfig::default()
    });
    for p in 0..8 {
        n.program_page(PageAddr::new(1, p), &data(p), &[p as u8; 4])
            .unwrap();
    }
    n
}

/// What each page of block 1 reads as: right data, an ECC failure, or wrong data passed.
fn outcomes(n: &mut NandSim) -> (u32, u32, u32) {
    let (mut right, mut failed, mut wrong) = (0, 0, 0);
    for p in 0..8 {
        let mut buf = vec![0u8; 64];
        match n.read_page(PageAddr::new(1, p), &mut buf, &mut []) {
            Ok(_) if buf == data(p) => right += 1,
            Ok(_) => wrong += 1,
            Err(FlashError::Uncorrectable { .. }) => failed += 1,
            Err(e) => panic!("{e}"),
        }
    }
    (right, failed, wrong)
}

#[test]
fn nand_errors_within_the_ecc_are_corrected_and_beyond_it_fail() {
    let cfg = AtRest {
        retention: 40.0,
        ..AtRest::default()
    };
    let mut seen = (0, 0);
    for seed in 0..20 {
        let mut n = written_nand(seed);
        let rep = n.age_block(1, &cfg).unwrap();
        assert_eq!(
            rep.pages,
            rep.corrected + rep.uncorrectable + rep.miscorrected
        );
        assert_eq!(rep.miscorrected, 0);
        let (right, failed, wrong) = outcomes(&mut n);
        assert_eq!(wrong, 0, "without miscorrection no wrong data passes");
        assert_eq!(failed as u64, rep.uncorrectable, "seed {seed}");
        assert_eq!(right as u64, 8 - rep.uncorrectable);
        seen.0 += rep.corrected;
        seen.1 += rep.uncorrectable;
    }
    assert!(seen.0 > 0 && seen.1 > 0, "both outcomes drawn: {seen:?}");
    // Corrected errors are reported by the reads that meet them.
    let mut counted = false;
    for seed in 0..20 {
        let mut n = written_nand(seed);
        let rep = n.age_block(1, &cfg).unwrap();
        let before = n.stats().corrected_bits;
        outcomes(&mut n);
        if rep.corrected > 0 {
            assert!(n.stats().corrected_bits > before, "seed {seed}");
            counted = true;
        }
    }
    assert!(counted);
}

#[test]
fn nand_miscorrection_passes_wrong_data_and_erased_pages_read_erased() {
    let mut n = written_nand(9);
    let rep = n
        .age_block(
            1,
            &AtRest {
                retention: 400.0,
                miscorrection: 1.0,
                ..AtRest::default()
            },
        )
        .unwrap();
    assert_eq!(rep.miscorrected, 8);
    assert_eq!(outcomes(&mut n), (0, 0, 8));
    let mut n = written_nand(9);
    let rep = n
        .age_block(
            1,
            &AtRest {
                erased: 1.0,
                ..AtRest::default()
            },
        )
        .unwrap();
    assert_eq!(rep.erased, 8);
    let mut buf = vec![0u8; 64];
    let mut spare = vec![0u8; 8];
    n.read_page(PageAddr::new(1, 3), &mut buf, &mut spare)
        .unwrap();
    assert!(buf.iter().chain(&spare).all(|&b| b == 0xFF));
}

#[test]
fn read_disturb_grows_with_reads_and_an_erase_resets_it() {
    let cfg = AtRest {
        disturb: 0.5,
        ..AtRest::default()
    };
    let mut n = written_nand(1);
    assert_eq!(
        n.age_block(1, &cfg).unwrap().bits,
        0,
        "no reads, no disturb"
    );
    for _ in 0..20 {
        n.read_page(PageAddr::new(1, 0), &mut [0u8; 64], &mut [])
            .ok();
    }
    assert!(n.age_block(1, &cfg).unwrap().bits > 0);
    n.erase_block(1).unwrap();
    n.program_page(PageAddr::new(1, 0), &data(0), &[]).unwrap();
    assert_eq!(n.age_block(1, &cfg).unwrap().bits, 0);
}

#[test]
fn nor_retention_clears_charge_and_wear_makes_it_worse() {
    let mut nor = NorSim::new(small_nor(true), ImageMeta::new("t", 1)).unwrap();
    nor.set_faults(FaultConfig {
        seed: 5,
        ..FaultConfig::default()
    });
    // Unit 1: half programmed to zeros, half erased.
    nor.program(256, &[0u8; 128]).unwrap();
    let cfg = AtRest {
        retention: 20.0,
        ..AtRest::default()
    };
    let rep = nor.age_unit(1, &cfg).unwrap();
    assert!(rep.bits > 0);
    let mut buf = [0u8; 256];
    nor.read(256, &mut buf).unwrap();
    let ones: u32 = buf[..128].iter().map(|b| b.count_ones()).sum();
    assert_eq!(ones as u64, rep.bits, "programmed bits lost charge");
    assert!(
        buf[128..].iter().all(|&b| b == 0xFF),
        "erased cells kept none"
    );
    // A unit at its rated endurance (5 erases) loses more.
    let worn = AtRest {
        retention: 1.0,
        wear_factor: 100.0,
        ..AtRest::default()
    };
    let (mut fresh_bits, mut worn_bits) = (0, 0);
    for round in 0..5 {
        nor.erase(2).unwrap();
        nor.program(2 * 256, &[0u8; 256]).unwrap();
        let r = nor.age_unit(2, &worn).unwrap().bits;
        if round == 0 {
            fresh_bits = r;
        }
        worn_bits = r;
    }
    assert!(worn_bits > fresh_bits, "{fresh_bits} then {worn_bits}");
}
