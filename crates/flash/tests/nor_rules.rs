//! NOR rules: programming only clears bits, once per erase on parts without reprogramming,
//! word-aligned, within a program page and within the device. Every violation is a typed
//! error that leaves the image and the operation count untouched.

mod common;

use common::*;
use flash::{FlashError, NorFlash, NorSim, Simulated, WearModel};

fn nor(reprogrammable: bool) -> NorSim {
    NorSim::new(small_nor(reprogrammable), meta(WearModel::Never)).unwrap()
}

fn read(n: &mut NorSim, addr: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    n.read(addr, &mut b).unwrap();
    b
}

/// Runs `op`, which must fail with `want`, and checks it changed nothing.
fn refused(n: &mut NorSim, want: FlashError, op: impl FnOnce(&mut NorSim) -> flash::Result<()>) {
    let before = image_bytes(n.store());
    let ops = n.ops();
    let stats = n.stats().clone();
    assert_eq!(op(n), Err(want));
    assert_eq!(n.ops(), ops, "a refused operation counted as done");
    assert_eq!(n.stats().programs, stats.programs);
    assert_eq!(n.stats().erases, stats.erases);
    assert!(
        image_bytes(n.store()) == before,
        "a refused operation changed the image"
    );
}

#[test]
fn a_fresh_part_is_erased() {
    for re in [true, false] {
        let mut n = nor(re);
        assert_eq!(read(&mut n, 0, 2048), vec![0xFF; 2048]);
        assert_eq!(n.erase_counts(), vec![0; 8]);
    }
}

#[test]
fn programming_a_zero_bit_to_one_is_refused() {
    for re in [true, false] {
        let mut n = nor(re);
        n.program(64, &[0x0F, 0xFF, 0xFF, 0xFF]).unwrap();
        // The second byte is fine; the first would set bits 4..8 of a 0x0F byte.
        refused(&mut n, FlashError::SetsBits { addr: 64 }, |n| {
            n.program(64, &[0xFF, 0xFF, 0xFF, 0xFF]).map(|_| ())
        });
        refused(&mut n, FlashError::SetsBits { addr: 64 }, |n| {
            n.program(64, &[0x1F, 0x00, 0x00, 0x00])
        });
        assert_eq!(read(&mut n, 64, 4), [0x0F, 0xFF, 0xFF, 0xFF]);
    }
    // The first offending byte is reported, not the first byte of the command.
    let mut n = nor(true);
    n.program(8, &[0xFF, 0xFF, 0x00, 0xFF]).unwrap();
    refused(&mut n, FlashError::SetsBits { addr: 10 }, |n| {
        n.program(8, &[0xFF, 0xFF, 0x01, 0xFF])
    });
}

#[test]
fn reprogramming_is_refused_without_multiwrite() {
    let mut n = nor(false);
    n.program(0, &[0xF0; 8]).unwrap();
    // Clearing more bits of a programmed word is still a second program.
    refused(&mut n, FlashError::Reprogram { addr: 0 }, |n| {
        n.program(0, &[0x00; 4])
    });
    // A command that overlaps the programmed range is refused at the first such word.
    refused(&mut n, FlashError::Reprogram { addr: 4 }, |n| {
        n.program(4, &[0x00; 8])
    });
    // Even a program that changes nothing programs the word.
    n.program(16, &[0xFF; 4]).unwrap();
    refused(&mut n, FlashError::Reprogram { addr: 16 }, |n| {
        n.program(16, &[0xFF; 4])
    });
    // Neighbours are free.
    n.program(8, &[0x12, 0x34, 0x56, 0x78]).unwrap();
    assert_eq!(
        read(&mut n, 0, 12),
        [0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0x12, 0x34, 0x56, 0x78]
    );
    // After an erase, every word of the unit may be programmed once more.
    n.erase(0).unwrap();
    n.program(0, &[0x00; 4]).unwrap();
    n.program(16, &[0x00; 4]).unwrap();
    assert_eq!(read(&mut n, 0, 4), [0; 4]);
}

#[test]
fn erase_of_one_unit_does_not_free_words_of_another() {
    let mut n = nor(false);
    n.program(0, &[0; 4]).unwrap();
    n.program(256, &[0; 4]).unwrap();
    n.erase(0).unwrap();
    n.program(0, &[1; 4]).unwrap();
    assert_eq!(
        n.program(256, &[0; 4]),
        Err(FlashError::Reprogram { addr: 256 })
    );
}

#[test]
fn reprogramming_ands_on_multiwrite_parts() {
    let mut n = nor(true);
    n.program(32, &[0xF0, 0xAA, 0xFF, 0x0F]).unwrap();
    n.program(32, &[0x30, 0xA0, 0x7F, 0x0F]).unwrap();
    assert_eq!(read(&mut n, 32, 4), [0x30, 0xA0, 0x7F, 0x0F]);
    n.program(32, &[0x00, 0x00, 0x00, 0x00]).unwrap();
    assert_eq!(read(&mut n, 32, 4), [0; 4]);
    assert_eq!(n.stats().programs, 3);
}

#[test]
fn unaligned_programs_are_refused() {
    for re in [true, false] {
        let mut n = nor(re);
        refused(&mut n, FlashError::Unaligned { addr: 1, align: 4 }, |n| {
            n.program(1, &[0; 4])
        });
        refused(&mut n, FlashError::Unaligned { addr: 0, align: 4 }, |n| {
            n.program(0, &[0; 3])
        });
        refused(&mut n, FlashError::Unaligned { addr: 6, align: 4 }, |n| {
            n.program(6, &[])
        });
        // An aligned empty program does nothing.
        n.program(4, &[]).unwrap();
        assert_eq!(n.ops(), 0);
        // Reads need no alignment.
        n.program(4, &[1, 2, 3, 4]).unwrap();
        assert_eq!(read(&mut n, 5, 2), [2, 3]);
    }
}

#[test]
fn programs_may_not_cross_a_program_page() {
    let spec = nor_preset("w25q64jv");
    assert_eq!(spec.program_page, 256);
    let mut n = NorSim::new(spec, meta(WearModel::Never)).unwrap();
    n.program(0, &[0x11; 256]).unwrap();
    n.program(256 + 100, &[0x22; 156]).unwrap();
    let too_long = |addr, len| FlashError::ProgramTooLong {
        addr,
        len,
        limit: 256,
    };
    refused(&mut n, too_long(1024 + 255, 2), |n| {
        n.program(1024 + 255, &[0; 2])
    });
    refused(&mut n, too_long(2048, 257), |n| n.program(2048, &[0; 257]));
    refused(&mut n, too_long(4096 - 1, 2), |n| {
        n.program(4096 - 1, &[0; 2])
    });
    assert_eq!(read(&mut n, 0, 1), [0x11]);
    assert_eq!(read(&mut n, 511, 1), [0x22]);
    assert_eq!(read(&mut n, 512, 1), [0xFF]);
    // Parts without a program page take commands of any length.
    let mut big = NorSim::new(nor_preset("m29dw640d"), meta(WearModel::Never)).unwrap();
    big.program(100, &vec![0; 4096]).unwrap();
}

#[test]
fn out_of_range_accesses_are_refused() {
    for re in [true, false] {
        let mut n = nor(re);
        let cap = 2048;
        let oor = |addr, len| FlashError::OutOfRange { addr, len };
        let mut b = [0u8; 2];
        assert_eq!(n.read(cap - 1, &mut b), Err(oor(cap - 1, 2)));
        assert_eq!(n.read(cap, &mut b[..1]), Err(oor(cap, 1)));
        assert_eq!(n.read(u64::MAX, &mut b), Err(oor(u64::MAX, 2)));
        assert_eq!(n.read(u64::MAX - 1, &mut b), Err(oor(u64::MAX - 1, 2)));
        refused(&mut n, oor(cap, 4), |n| n.program(cap, &[0; 4]));
        refused(&mut n, oor(cap - 4, 8), |n| n.program(cap - 4, &[0; 8]));
        refused(&mut n, oor(u64::MAX - 3, 4), |n| {
            n.program(u64::MAX - 3, &[0; 4])
        });
        refused(&mut n, oor(8, 1), |n| n.erase(8));
        refused(&mut n, oor(u32::MAX as u64, 1), |n| n.start_erase(u32::MAX));
        // The last byte and an empty read at the very end are fine.
        n.read(cap - 1, &mut b[..1]).unwrap();
        n.read(cap, &mut []).unwrap();
        n.program(cap - 4, &[0; 4]).unwrap();
    }
}

#[test]
fn erase_restores_ones_and_counts_wear() {
    let mut n = nor(false);
    for u in 0..8u64 {
        n.program(u * 256, &[0u8; 256]).unwrap();
    }
    n.erase(3).unwrap();
    n.erase(3).unwrap();
    n.erase(5).unwrap();
    for u in 0..8u64 {
        let want = if u == 3 || u == 5 { 0xFF } else { 0x00 };
        assert_eq!(read(&mut n, u * 256, 256), vec![want; 256], "unit {u}");
    }
    assert_eq!(n.erase_counts(), vec![0, 0, 0, 2, 0, 1, 0, 0]);
    assert_eq!(n.stats().erases, 3);
    assert_eq!(n.stats().programs, 8);
    assert_eq!(n.stats().bytes_programmed, 2048);
}

#[test]
fn reads_and_programs_may_span_units() {
    let mut n = nor(false);
    let data: Vec<u8> = (0..64u8).collect();
    n.program(256 - 32, &data).unwrap();
    assert_eq!(read(&mut n, 256 - 32, 64), data);
    // Units 0 and 1 sit in different banks from units 4..8: a span over the bank boundary.
    n.program(4 * 256 - 8, &[0; 16]).unwrap();
    assert_eq!(read(&mut n, 4 * 256 - 8, 16), vec![0; 16]);
}

#[test]
fn invalid_specs_are_refused_not_panicked_on() {
    let bad = [
        flash::NorSpec {
            word_size: 0,
            ..small_nor(true)
        },
        flash::NorSpec {
            word_size: 3,
            ..small_nor(true)
        },
        flash::NorSpec {
            units: 0,
            ..small_nor(true)
        },
        flash::NorSpec {
            banks: 0,
            ..small_nor(true)
        },
        flash::NorSpec {
            banks: 3,
            ..small_nor(true)
        },
        flash::NorSpec {
            banks: 16,
            ..small_nor(true)
        },
        flash::NorSpec {
            unit_size: 254,
            ..small_nor(true)
        },
        flash::NorSpec {
            program_page: 6,
            ..small_nor(true)
        },
        flash::NorSpec {
            program_page: 512,
            ..small_nor(true)
        },
        flash::NorSpec {
            endurance: 0,
            ..small_nor(true)
        },
        flash::NorSpec {
            unit_size: u32::MAX - 3,
            units: u32::MAX,
            banks: 1,
            ..small_nor(false)
        },
    ];
    for spec in bad {
        assert!(
            matches!(
                NorSim::new(spec, meta(WearModel::Never)),
                Err(FlashError::BadSpec(_))
            ),
            "{spec:?}"
        );
    }
}
