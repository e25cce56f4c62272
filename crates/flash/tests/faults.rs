//! Fault models: power cuts at an operation, torn programs and erases, interrupted background
//! erases, bit errors against the ECC, silent failures, reordered completion, wear-out and
//! timebombs. Every one is driven by `FaultConfig` or the `Simulated` controls.

mod common;

use std::time::Duration;

use common::*;
use flash::{
    CellMode, DeviceClock, FaultConfig, FlashError, MlcNand, NandFlash, NandSim, NandSpec,
    NorFlash, NorSim, PageAddr, Simulated, Timebomb, WearModel,
};

fn nand() -> NandSim {
    NandSim::new(small_nand(), meta(WearModel::Never)).unwrap()
}

fn nor(reprogrammable: bool) -> NorSim {
    NorSim::new(small_nor(reprogrammable), meta(WearModel::Never)).unwrap()
}

fn faults(f: impl FnOnce(&mut FaultConfig)) -> FaultConfig {
    let mut c = FaultConfig {
        seed: 42,
        ..Default::default()
    };
    f(&mut c);
    c
}

/// A page read: its data and spare, or the error.
fn page(n: &mut NandSim, b: u32, p: u32) -> flash::Result<(Vec<u8>, Vec<u8>)> {
    let (mut d, mut s) = (vec![0u8; 64], vec![0u8; 8]);
    n.read_page(PageAddr::new(b, p), &mut d, &mut s)?;
    Ok((d, s))
}

fn erased(r: &flash::Result<(Vec<u8>, Vec<u8>)>) -> bool {
    matches!(r, Ok((d, s)) if d.iter().chain(s).all(|&b| b == 0xFF))
}

fn nor_bytes(n: &mut NorSim, addr: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    n.read(addr, &mut b).unwrap();
    b
}

// ---------------------------------------------------------------------------------------
// Power cuts at an operation

#[derive(Debug, Clone, Copy)]
enum NandOp {
    Program(u32, u32),
    Erase(u32),
    Mark(u32),
    Read(u32, u32),
}

const NAND_SCRIPT: &[NandOp] = &[
    NandOp::Program(0, 0),
    NandOp::Program(0, 1),
    NandOp::Read(0, 0),
    NandOp::Program(4, 0),
    NandOp::Erase(0),
    NandOp::Read(0, 1),
    NandOp::Program(0, 0),
    NandOp::Mark(6),
    NandOp::Program(1, 3),
    NandOp::Erase(4),
    NandOp::Program(4, 2),
    NandOp::Read(4, 2),
];

fn run_nand(n: &mut NandSim, op: NandOp) -> flash::Result<()> {
    match op {
        NandOp::Program(b, p) => {
            n.program_page(PageAddr::new(b, p), &pattern(b, p, 64), &[b as u8, p as u8])
        }
        NandOp::Erase(b) => n.erase_block(b),
        NandOp::Mark(b) => n.mark_bad(b),
        NandOp::Read(b, p) => page(n, b, p).map(|_| ()),
    }
}

fn is_mutating(op: NandOp) -> bool {
    !matches!(op, NandOp::Read(..))
}

#[test]
fn a_nand_cut_after_k_ops_keeps_exactly_the_first_k() {
    let total = NAND_SCRIPT.iter().filter(|o| is_mutating(**o)).count() as u64;
    for k in 0..=total {
        let mut n = nand();
        n.schedule_cut(k, false);
        let mut reference = nand();
        let mut done = 0;
        let mut cut = false;
        for &op in NAND_SCRIPT {
            let r = run_nand(&mut n, op);
            if cut {
                assert_eq!(r, Err(FlashError::PowerLoss), "k={k}: {op:?} after the cut");
                continue;
            }
            if is_mutating(op) && done == k {
                assert_eq!(r, Err(FlashError::PowerLoss), "k={k}: {op:?} is the cut");
                assert!(!n.is_powered());
                cut = true;
                continue;
            }
            r.unwrap();
            run_nand(&mut reference, op).unwrap();
            done += is_mutating(op) as u64;
        }
        assert_eq!(cut, k < total, "k={k}");
        assert_eq!(n.ops(), k);
        if cut {
            // Every call fails until the reboot, reads and queries too.
            let mut buf = [0u8; 4];
            let dead = Err(FlashError::PowerLoss);
            assert_eq!(
                n.read_page(PageAddr::new(2, 0), &mut buf, &mut [])
                    .map(|_| ()),
                dead
            );
            assert_eq!(n.program_page(PageAddr::new(2, 0), b"x", &[]), dead);
            assert_eq!(n.erase_block(2), dead);
            assert_eq!(n.start_erase(2), dead);
            assert_eq!(n.is_bad(2).map(|_| ()), dead);
            assert_eq!(n.mark_bad(2), dead);
            assert_eq!(NandFlash::sync(&mut n), dead);
            assert_eq!(n.ops(), k);
        }
        assert!(
            image_bytes(n.store()) == image_bytes(reference.store()),
            "k={k}: the image is not that of the first {k} operations"
        );
        n.reboot();
        assert!(n.is_powered());
        for b in 0..8 {
            for p in 0..8 {
                assert_eq!(
                    page(&mut n, b, p),
                    page(&mut reference, b, p),
                    "k={k} ({b},{p})"
                );
            }
        }
        if cut {
            // The cut fired once: the device works again.
            n.program_page(PageAddr::new(7, 0), b"alive", &[]).unwrap();
        } else {
            // The script ended first: the cut still waits for the next operation.
            assert_eq!(
                n.program_page(PageAddr::new(7, 0), b"x", &[]),
                Err(FlashError::PowerLoss)
            );
        }
    }
}

#[test]
fn a_nor_cut_after_k_ops_keeps_exactly_the_first_k() {
    let script: &[(&str, u64, u8)] = &[
        ("p", 0, 0x0F),
        ("p", 260, 0x00),
        ("p", 0, 0x0E), // a second program: refused without multiwrite
        ("e", 1, 0),
        ("p", 600, 0x55),
        ("p", 256, 0x11),
        ("r", 0, 0),
        ("e", 2, 0),
    ];
    for reprogrammable in [true, false] {
        let total = if reprogrammable { 7 } else { 6 };
        for k in 0..=total {
            let mut n = nor(reprogrammable);
            let mut reference = nor(reprogrammable);
            n.schedule_cut(k, false);
            let mut cut = false;
            for (i, &(what, at, v)) in script.iter().enumerate() {
                let run = |n: &mut NorSim| match what {
                    "p" => n.program(at, &[v; 8]),
                    "r" => n.read(at, &mut [0; 8]),
                    _ => n.erase(at as u32),
                };
                let r = run(&mut n);
                if cut {
                    assert_eq!(r, Err(FlashError::PowerLoss), "k={k} op {i}");
                    continue;
                }
                let mut probe = reference.clone();
                let want = run(&mut probe);
                if what != "r" && want.is_ok() && n.ops() == k && r.is_err() {
                    assert_eq!(r, Err(FlashError::PowerLoss), "k={k} op {i}");
                    cut = true;
                    continue;
                }
                reference = probe;
                // Refused operations are refused alike and are no cut points.
                assert_eq!(r, want, "k={k} op {i}");
            }
            assert_eq!(cut, k < total, "k={k}");
            if cut {
                assert_eq!(n.read(0, &mut [0; 4]), Err(FlashError::PowerLoss));
                assert_eq!(NorFlash::sync(&mut n), Err(FlashError::PowerLoss));
            }
            assert!(
                image_bytes(n.store()) == image_bytes(reference.store()),
                "k={k}"
            );
            n.reboot();
            assert_eq!(
                nor_bytes(&mut n, 0, 2048),
                nor_bytes(&mut reference, 0, 2048)
            );
        }
    }
}

#[test]
fn power_cut_now_and_reboot() {
    let mut n = nand();
    n.program_page(PageAddr::new(0, 0), b"kept", &[]).unwrap();
    n.power_cut().unwrap();
    assert!(!n.is_powered());
    assert_eq!(page(&mut n, 0, 0), Err(FlashError::PowerLoss));
    // A cut of a dead device changes nothing.
    n.power_cut().unwrap();
    n.reboot();
    assert_eq!(&page(&mut n, 0, 0).unwrap().0[..4], b"kept");
    assert_eq!(n.ops(), 1);
}

// ---------------------------------------------------------------------------------------
// Torn operations

#[test]
fn a_torn_nor_program_clears_only_some_of_its_bits() {
    for reprogrammable in [true, false] {
        let mut n = nor(reprogrammable);
        n.program(256, &[0xF0; 256]).unwrap();
        if reprogrammable {
            n.schedule_cut(0, true);
            // Asks to clear bits 6 and 7 of every byte; bits 4 and 5 stay, 0..4 are clear.
            assert_eq!(n.program(256, &[0x30; 256]), Err(FlashError::PowerLoss));
        } else {
            n.program(512 + 64, &[0xF0; 4]).unwrap();
            n.schedule_cut(0, true);
            assert_eq!(n.program(512, &[0x30; 64]), Err(FlashError::PowerLoss));
        }
        assert!(!n.is_powered());
        assert_eq!(n.ops(), if reprogrammable { 2 } else { 3 });
        n.reboot();
        let (at, len) = if reprogrammable {
            (256, 256)
        } else {
            (512, 64)
        };
        let got = nor_bytes(&mut n, at, len);
        let mut cleared = 0;
        for (i, &b) in got.iter().enumerate() {
            if reprogrammable {
                assert_eq!(b & 0x0F, 0, "byte {i}: {b:#x} set a cleared bit");
            }
            assert_eq!(
                b & 0x30,
                0x30,
                "byte {i}: {b:#x} cleared a bit not asked for"
            );
            cleared += (!b & 0xC0).count_ones();
        }
        let asked = 2 * len as u32;
        assert!(
            0 < cleared && cleared < asked,
            "{cleared} of {asked} bits cleared"
        );
        // The neighbours are untouched.
        assert_eq!(nor_bytes(&mut n, 0, 256), vec![0xFF; 256]);
        if reprogrammable {
            // A reprogrammable part can finish the job.
            n.program(256, &[0x30; 256]).unwrap();
            assert_eq!(nor_bytes(&mut n, 256, 256), vec![0x30; 256]);
        } else {
            assert_eq!(nor_bytes(&mut n, 512 + 64, 4), vec![0xF0; 4]);
            // The torn words were programmed, as far as the part is concerned.
            assert_eq!(
                n.program(512, &[0; 4]),
                Err(FlashError::Reprogram { addr: 512 })
            );
        }
    }
}

#[test]
fn a_torn_nand_program_leaves_an_unreadable_page() {
    let mut n = nand();
    n.program_page(PageAddr::new(2, 0), &pattern(2, 0, 64), &[])
        .unwrap();
    n.schedule_cut(0, true);
    assert_eq!(
        n.program_page(PageAddr::new(2, 1), &pattern(2, 1, 64), &[7]),
        Err(FlashError::PowerLoss)
    );
    assert_eq!(n.ops(), 2);
    n.reboot();
    assert_eq!(
        page(&mut n, 2, 1),
        Err(FlashError::Uncorrectable { block: 2, page: 1 })
    );
    assert_eq!(n.stats().uncorrectable_reads, 1);
    assert_eq!(page(&mut n, 2, 0).unwrap().0, pattern(2, 0, 64));
    // The page is used until the next erase; the ones above it are free.
    assert_eq!(
        n.program_page(PageAddr::new(2, 1), b"x", &[]),
        Err(FlashError::PageAlreadyProgrammed { block: 2, page: 1 })
    );
    n.program_page(PageAddr::new(2, 2), b"next", &[]).unwrap();
    n.erase_block(2).unwrap();
    n.program_page(PageAddr::new(2, 1), b"x", &[]).unwrap();
    assert_eq!(&page(&mut n, 2, 1).unwrap().0[..1], b"x");
}

fn full_nand_block(pages: u32) -> (NandSim, NandSpec) {
    let spec = NandSpec {
        pages_per_block: pages,
        ..small_nand()
    };
    let mut n = NandSim::new(spec, meta(WearModel::Never)).unwrap();
    for p in 0..pages {
        n.program_page(PageAddr::new(1, p), &pattern(1, p, 64), &[p as u8; 8])
            .unwrap();
        n.program_page(PageAddr::new(3, p), &pattern(3, p, 64), &[p as u8; 8])
            .unwrap();
    }
    (n, spec)
}

/// Checks block 1 of `n` is partly erased: some pages read erased, the others fail ECC.
fn assert_partly_erased(n: &mut NandSim, pages: u32) {
    let (mut gone, mut bad) = (0, 0);
    for p in 0..pages {
        let r = page(n, 1, p);
        if erased(&r) {
            gone += 1;
        } else {
            assert_eq!(
                r,
                Err(FlashError::Uncorrectable { block: 1, page: p }),
                "page {p}"
            );
            bad += 1;
        }
    }
    assert!(gone > 0 && bad > 0, "{gone} erased, {bad} unreadable");
    // The neighbour block is intact.
    for p in 0..pages {
        assert_eq!(page(n, 3, p).unwrap().0, pattern(3, p, 64));
    }
}

#[test]
fn a_torn_nand_erase_leaves_the_block_partly_erased() {
    let (mut n, _) = full_nand_block(64);
    n.schedule_cut(0, true);
    assert_eq!(n.erase_block(1), Err(FlashError::PowerLoss));
    n.reboot();
    assert_eq!(n.erase_counts()[1], 1, "a torn erase still wears the block");
    assert_partly_erased(&mut n, 64);
    // A full erase repairs the block, data and spare alike.
    n.erase_block(1).unwrap();
    for p in 0..64 {
        assert!(erased(&page(&mut n, 1, p)));
    }
    n.program_page(PageAddr::new(1, 0), b"ok", &[]).unwrap();
}

#[test]
fn pages_a_torn_erase_erased_are_really_erased() {
    // A page the interrupted erase did reach reads erased, and a short program of it shows
    // no old bytes through.
    let mut reached = 0;
    for seed in 0..16 {
        let mut n = nand();
        n.set_faults(FaultConfig {
            seed,
            ..Default::default()
        });
        n.program_page(PageAddr::new(1, 0), &[0x00; 64], &[0x00; 8])
            .unwrap();
        n.schedule_cut(0, true);
        n.erase_block(1).unwrap_err();
        n.reboot();
        let r = page(&mut n, 1, 0);
        if r.is_err() {
            assert_eq!(r, Err(FlashError::Uncorrectable { block: 1, page: 0 }));
            continue;
        }
        reached += 1;
        assert!(erased(&r), "seed {seed}: {r:?}");
        n.program_page(PageAddr::new(1, 0), b"xy", &[1]).unwrap();
        let (d, s) = page(&mut n, 1, 0).unwrap();
        assert_eq!(&d[..2], b"xy");
        assert!(d[2..].iter().all(|&b| b == 0xFF), "seed {seed}: {d:?}");
        assert!(s[1..].iter().all(|&b| b == 0xFF), "seed {seed}: {s:?}");
    }
    assert!(0 < reached && reached < 16, "{reached}");
}

#[test]
fn a_torn_nor_erase_leaves_the_unit_partly_erased() {
    for reprogrammable in [true, false] {
        let mut n = nor(reprogrammable);
        n.program(256, &[0x5A; 256]).unwrap();
        n.program(512, &[0x5A; 256]).unwrap();
        n.schedule_cut(0, true);
        assert_eq!(n.erase(1), Err(FlashError::PowerLoss));
        n.reboot();
        assert_eq!(n.erase_counts()[1], 1);
        let got = nor_bytes(&mut n, 256, 256);
        let ones = got.iter().filter(|&&b| b == 0xFF).count();
        let old = got.iter().filter(|&&b| b == 0x5A).count();
        assert!(ones > 0 && ones < 256, "{ones} bytes erased");
        assert!(old > 0 && old < 256, "{old} bytes kept");
        assert_eq!(nor_bytes(&mut n, 512, 256), vec![0x5A; 256]);
        if !reprogrammable {
            // Half-erased words are not fit to program.
            assert_eq!(
                n.program(256, &[0; 4]),
                Err(FlashError::Reprogram { addr: 256 })
            );
        }
        n.erase(1).unwrap();
        assert_eq!(nor_bytes(&mut n, 256, 256), vec![0xFF; 256]);
        n.program(256, &[0; 4]).unwrap();
    }
}

#[test]
fn a_torn_bad_block_mark_either_happened_or_not() {
    let mut marked = 0;
    for seed in 0..16 {
        let mut n = nand();
        n.set_faults(FaultConfig {
            seed,
            ..Default::default()
        });
        n.schedule_cut(0, true);
        assert_eq!(n.mark_bad(3), Err(FlashError::PowerLoss));
        n.reboot();
        marked += n.is_bad(3).unwrap() as u32;
        assert!(!n.is_bad(2).unwrap());
    }
    assert!(0 < marked && marked < 16, "{marked}");
}

// ---------------------------------------------------------------------------------------
// Background erases and cuts

#[test]
fn a_cut_interrupts_a_background_nand_erase() {
    let (mut n, _) = full_nand_block(64);
    n.start_erase(1).unwrap();
    // Half the erase time passes: work on the other bank, then the power goes.
    n.idle(Duration::from_micros(500));
    n.power_cut().unwrap();
    n.reboot();
    assert_eq!(n.erase_counts()[1], 1);
    assert_partly_erased(&mut n, 64);
}

#[test]
fn a_scheduled_cut_interrupts_a_background_erase_too() {
    let (mut n, _) = full_nand_block(64);
    n.start_erase(1).unwrap();
    n.schedule_cut(0, false);
    // Block 4 is on the other bank: the program does not wait for the erase.
    assert_eq!(
        n.program_page(PageAddr::new(4, 0), b"x", &[]),
        Err(FlashError::PowerLoss)
    );
    n.reboot();
    assert_partly_erased(&mut n, 64);
}

#[test]
fn a_background_erase_that_finished_before_the_cut_is_complete() {
    let (mut n, _) = full_nand_block(64);
    n.start_erase(1).unwrap();
    n.idle(Duration::from_millis(1));
    n.power_cut().unwrap();
    n.reboot();
    for p in 0..64 {
        assert!(erased(&page(&mut n, 1, p)), "page {p}");
    }
}

#[test]
fn background_nor_erases_under_cuts() {
    // Interrupted.
    let mut n = nor(true);
    n.program(256, &[0x5A; 256]).unwrap();
    n.start_erase(1).unwrap();
    n.power_cut().unwrap();
    n.reboot();
    let got = nor_bytes(&mut n, 256, 256);
    let ones = got.iter().filter(|&&b| b == 0xFF).count();
    assert!(ones > 0 && ones < 256, "{ones}");
    // Finished.
    let mut n = nor(false);
    n.program(256, &[0x5A; 256]).unwrap();
    n.start_erase(1).unwrap();
    n.idle(Duration::from_millis(1));
    n.power_cut().unwrap();
    n.reboot();
    assert_eq!(nor_bytes(&mut n, 256, 256), vec![0xFF; 256]);
    n.program(256, &[0; 256]).unwrap();
}

// ---------------------------------------------------------------------------------------
// Bit errors and ECC

#[test]
fn injected_bit_errors_within_the_ecc_are_corrected_beyond_are_not() {
    // 2 correctable bits per codeword.
    let mut n = nand();
    let at = PageAddr::new(1, 0);
    n.program_page(at, &pattern(1, 0, 64), &[3; 8]).unwrap();
    n.inject_bit_errors(at, 2).unwrap();
    let (mut d, mut s) = ([0u8; 64], [0u8; 8]);
    let st = n.read_page(at, &mut d, &mut s).unwrap();
    assert_eq!(st.corrected_bits, 2);
    assert_eq!((d.to_vec(), s), (pattern(1, 0, 64), [3; 8]));
    assert_eq!(n.stats().corrected_bits, 2);
    // The errors persist: every read corrects them again.
    assert_eq!(n.read_page(at, &mut d, &mut s).unwrap().corrected_bits, 2);
    assert_eq!(n.stats().corrected_bits, 4);
    n.inject_bit_errors(at, 1).unwrap();
    assert_eq!(
        n.read_page(at, &mut d, &mut s),
        Err(FlashError::Uncorrectable { block: 1, page: 0 })
    );
    assert_ne!(
        d.to_vec(),
        pattern(1, 0, 64),
        "uncorrectable data came back clean"
    );
    assert_eq!(n.stats().uncorrectable_reads, 1);
    // Saturating: many more errors are still just uncorrectable.
    n.inject_bit_errors(at, 255).unwrap();
    assert!(n.read_page(at, &mut d, &mut s).is_err());
    // The errors are in the image.
    let mut n = NandSim::open(n.into_store()).unwrap();
    assert!(n.read_page(at, &mut d, &mut s).is_err());
    // An erase clears them; erased pages have none to inject.
    n.erase_block(1).unwrap();
    n.inject_bit_errors(at, 5).unwrap();
    assert_eq!(n.read_page(at, &mut d, &mut s).unwrap().corrected_bits, 0);
    n.program_page(at, b"fresh", &[]).unwrap();
    assert_eq!(n.read_page(at, &mut d, &mut s).unwrap().corrected_bits, 0);
    assert!(matches!(
        n.inject_bit_errors(PageAddr::new(8, 0), 1),
        Err(FlashError::OutOfRange { .. })
    ));
}

#[test]
fn transient_bit_flips_are_corrected_and_counted() {
    let spec = nand_preset("nand-1g"); // 4 bits per 512 B
    let mut n = NandSim::new(spec, flash::ImageMeta::new("nand-1g", 1)).unwrap();
    let data = pattern(1, 0, 2048);
    n.program_page(PageAddr::new(1, 0), &data, &[]).unwrap();
    // About 0.4 flips per 512 B codeword per read.
    n.set_faults(faults(|c| c.bit_flip_rate = 1e-4));
    let mut sum = 0u64;
    let mut buf = vec![0u8; 2048];
    let mut uncorrectable = 0;
    for _ in 0..300 {
        match n.read_page(PageAddr::new(1, 0), &mut buf, &mut []) {
            Ok(st) => {
                assert_eq!(buf, data);
                sum += st.corrected_bits as u64;
            }
            Err(FlashError::Uncorrectable { .. }) => uncorrectable += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(n.stats().corrected_bits, sum);
    assert_eq!(n.stats().uncorrectable_reads, uncorrectable);
    // 300 reads x 4 codewords x 0.41 = about 490.
    assert!((350..650).contains(&sum), "{sum}");
    assert!(uncorrectable <= 2, "{uncorrectable}");
    // Erased pages do not flip.
    let st = n.read_page(PageAddr::new(2, 0), &mut buf, &mut []).unwrap();
    assert_eq!(st.corrected_bits, 0);
    // At a high rate every read fails.
    n.set_faults(faults(|c| c.bit_flip_rate = 1e-2));
    for _ in 0..20 {
        assert!(n.read_page(PageAddr::new(1, 0), &mut buf, &mut []).is_err());
    }
}

#[test]
fn nor_has_no_ecc_bit_flips_reach_the_reader() {
    let mut n = nor(true);
    n.program(0, &[0x00; 2048]).unwrap();
    n.set_faults(faults(|c| c.bit_flip_rate = 0.01));
    let got = nor_bytes(&mut n, 0, 2048);
    let flips: u32 = got.iter().map(|b| b.count_ones()).sum();
    assert!((80..260).contains(&flips), "{flips}"); // ~164 expected
                                                    // Transient: the cells are intact.
    n.set_faults(FaultConfig::default());
    assert_eq!(nor_bytes(&mut n, 0, 2048), vec![0; 2048]);
}

// ---------------------------------------------------------------------------------------
// Silent failures

#[test]
fn silent_nand_programs_and_erases_report_ok_and_change_nothing() {
    let mut n = nand();
    n.program_page(PageAddr::new(1, 0), b"old", &[]).unwrap();
    n.set_faults(faults(|c| {
        c.silent_program_rate = 1.0;
        c.silent_erase_rate = 1.0;
    }));
    let image = image_bytes(n.store());
    let t0 = n.now();
    n.program_page(PageAddr::new(2, 0), &pattern(2, 0, 64), &[1; 8])
        .unwrap();
    n.erase_block(1).unwrap();
    n.start_erase(1).unwrap();
    assert!(
        image_bytes(n.store()) == image,
        "a silent failure changed the image"
    );
    assert_eq!(n.ops(), 4);
    assert_eq!((n.stats().programs, n.stats().erases), (2, 2));
    assert_eq!(n.erase_counts()[1], 0);
    assert!(
        n.now() > t0,
        "a silent failure takes the time of the real thing"
    );
    assert!(erased(&page(&mut n, 2, 0)));
    assert_eq!(&page(&mut n, 1, 0).unwrap().0[..3], b"old");
    // Nothing happened, so the page is still free.
    n.set_faults(FaultConfig::default());
    n.program_page(PageAddr::new(2, 0), b"new", &[]).unwrap();
}

#[test]
fn silent_programs_take_the_time_of_real_ones() {
    let mut n = nand();
    let t0 = n.now();
    n.program_page(PageAddr::new(1, 0), &[0; 64], &[0; 8])
        .unwrap();
    let real = n.now() - t0;
    n.set_faults(faults(|c| c.silent_program_rate = 1.0));
    let t0 = n.now();
    n.program_page(PageAddr::new(1, 1), &[0; 64], &[0; 8])
        .unwrap();
    assert_eq!(n.now() - t0, real);
}

#[test]
fn silent_nor_programs_and_erases_report_ok_and_change_nothing() {
    let mut n = nor(false);
    n.program(0, &[0x00; 8]).unwrap();
    n.set_faults(faults(|c| {
        c.silent_program_rate = 1.0;
        c.silent_erase_rate = 1.0;
    }));
    let image = image_bytes(n.store());
    n.program(256, &[0x00; 8]).unwrap();
    n.erase(0).unwrap();
    assert!(image_bytes(n.store()) == image);
    assert_eq!(nor_bytes(&mut n, 0, 8), vec![0; 8]);
    assert_eq!(nor_bytes(&mut n, 256, 8), vec![0xFF; 8]);
    assert_eq!(n.erase_counts()[0], 0);
    n.set_faults(FaultConfig::default());
    // The silent program did not use the words up.
    n.program(256, &[0x11; 8]).unwrap();
}

#[test]
fn silent_rates_between_zero_and_one_drop_some() {
    let mut n = nand();
    n.set_faults(faults(|c| c.silent_program_rate = 0.5));
    for p in 0..8 {
        n.program_page(PageAddr::new(0, p), b"x", &[]).unwrap();
    }
    let lost = (0..8).filter(|&p| erased(&page(&mut n, 0, p))).count();
    assert!(0 < lost && lost < 8, "{lost}");
}

// ---------------------------------------------------------------------------------------
// Reordered completion

#[test]
fn a_cut_loses_a_subset_of_the_unsynced_nand_programs() {
    let window = 4;
    let (mut some_lost, mut some_kept) = (false, false);
    for seed in 0..16 {
        let mut n = nand();
        n.set_faults(FaultConfig {
            seed,
            reorder_window: window,
            ..Default::default()
        });
        for p in 0..8 {
            n.program_page(PageAddr::new(0, p), &pattern(0, p, 64), &[])
                .unwrap();
        }
        for p in 0..4 {
            n.program_page(PageAddr::new(5, p), &pattern(5, p, 64), &[])
                .unwrap();
        }
        n.power_cut().unwrap();
        n.reboot();
        // Older than the window: durable.
        for p in 0..8 {
            assert_eq!(
                page(&mut n, 0, p).unwrap().0,
                pattern(0, p, 64),
                "seed {seed}"
            );
        }
        // In the window: each entirely there or entirely absent.
        for p in 0..4 {
            let r = page(&mut n, 5, p);
            if erased(&r) {
                some_lost = true;
            } else {
                assert_eq!(r.unwrap().0, pattern(5, p, 64));
                some_kept = true;
            }
        }
        // What is in the image after the cut is what a reopen sees.
        let reopened = NandSim::open(n.store().clone()).unwrap();
        assert!(image_bytes(reopened.store()) == image_bytes(n.store()));
    }
    assert!(some_lost && some_kept);
}

#[test]
fn nothing_synced_is_lost() {
    for seed in 0..8 {
        let mut n = nand();
        n.set_faults(FaultConfig {
            seed,
            reorder_window: 8,
            ..Default::default()
        });
        for p in 0..6 {
            n.program_page(PageAddr::new(2, p), &pattern(2, p, 64), &[])
                .unwrap();
        }
        NandFlash::sync(&mut n).unwrap();
        n.power_cut().unwrap();
        n.reboot();
        for p in 0..6 {
            assert_eq!(page(&mut n, 2, p).unwrap().0, pattern(2, p, 64));
        }
        // An erase is a barrier too.
        let mut n = nor(true);
        n.set_faults(FaultConfig {
            seed,
            reorder_window: 8,
            ..Default::default()
        });
        n.program(0, &[0; 64]).unwrap();
        n.erase(7).unwrap();
        n.power_cut().unwrap();
        n.reboot();
        assert_eq!(nor_bytes(&mut n, 0, 64), vec![0; 64]);
    }
}

#[test]
fn lost_nor_programs_leave_a_state_that_existed() {
    // Program i rewrites a status word (clearing bit i too: the one in-place write NOR
    // allows), the records before it unchanged, and its own record i. Surviving programs
    // apply whole, so the unit must read as it stood after one of the programs (the latest
    // survivor), whichever others were lost.
    let len = |i: usize| 4 + 4 * (i + 1);
    let mut states = vec![vec![0xFFu8; len(3)]];
    for i in 0..4 {
        let mut s = states[i].clone();
        s[0] &= !(1 << i);
        s[4 + 4 * i..8 + 4 * i].fill(i as u8);
        states.push(s);
    }
    let mut outcomes = std::collections::BTreeSet::new();
    for seed in 0..32 {
        let mut n = nor(true);
        n.set_faults(FaultConfig {
            seed,
            reorder_window: 8,
            ..Default::default()
        });
        for i in 0..4 {
            n.program(0, &states[i + 1][..len(i)]).unwrap();
        }
        n.power_cut().unwrap();
        n.reboot();
        let got = nor_bytes(&mut n, 0, len(3));
        let Some(at) = states.iter().position(|s| *s == got) else {
            panic!("seed {seed}: {got:?} is no state the programs passed through");
        };
        outcomes.insert(at);
    }
    // Sometimes the last survived, sometimes it was lost.
    assert!(outcomes.len() > 1 && outcomes.contains(&4), "{outcomes:?}");
}

#[test]
fn lost_programs_on_a_part_without_multiwrite_free_exactly_their_words() {
    // Neighbouring words share a byte of the "programmed" record in the image.
    let mut seen_lost = false;
    for seed in 0..16 {
        let mut n = nor(false);
        n.set_faults(FaultConfig {
            seed,
            reorder_window: 8,
            ..Default::default()
        });
        for w in 0..8u64 {
            n.program(w * 4, &[w as u8; 4]).unwrap();
        }
        n.power_cut().unwrap();
        n.reboot();
        let mut n = NorSim::open(n.into_store()).unwrap();
        for w in 0..8u64 {
            let there = nor_bytes(&mut n, w * 4, 4) == [w as u8; 4];
            let again = n.program(w * 4, &[0; 4]);
            if there {
                assert_eq!(
                    again,
                    Err(FlashError::Reprogram { addr: w * 4 }),
                    "seed {seed} word {w}"
                );
            } else {
                seen_lost = true;
                assert_eq!(
                    again,
                    Ok(()),
                    "seed {seed}: lost word {w} still counts as programmed"
                );
            }
        }
    }
    assert!(seen_lost);
}

// ---------------------------------------------------------------------------------------
// Wear-out and timebombs

#[test]
fn at_limit_wear_fails_programs_and_erases_at_the_endurance() {
    // Endurance 5.
    let mut n = NandSim::new(small_nand(), meta(WearModel::AtLimit)).unwrap();
    for _ in 0..5 {
        n.program_page(PageAddr::new(1, 0), b"x", &[]).unwrap();
        n.erase_block(1).unwrap();
    }
    assert_eq!(n.erase_counts()[1], 5);
    assert_eq!(
        n.program_page(PageAddr::new(1, 0), b"x", &[]),
        Err(FlashError::ProgramFailed { block: 1 })
    );
    assert!(matches!(
        page(&mut n, 1, 0),
        Err(FlashError::Uncorrectable { .. })
    ));
    assert_eq!(n.erase_block(1), Err(FlashError::EraseFailed { block: 1 }));
    assert_eq!(
        n.erase_counts()[1],
        6,
        "a failed erase still wore the block"
    );
    assert_eq!((n.stats().failed_programs, n.stats().failed_erases), (1, 1));
    // Other blocks are fine.
    n.program_page(PageAddr::new(2, 0), b"y", &[]).unwrap();
    n.erase_block(2).unwrap();
    // The counts are in the image: a reopened part is just as worn.
    let mut n = NandSim::open(n.into_store()).unwrap();
    assert_eq!(n.erase_counts(), vec![0, 6, 1, 0, 0, 0, 0, 0]);
    assert_eq!(n.erase_block(1), Err(FlashError::EraseFailed { block: 1 }));
}

#[test]
fn at_limit_wear_on_nor() {
    let mut n = NorSim::new(small_nor(true), meta(WearModel::AtLimit)).unwrap();
    for _ in 0..5 {
        n.program(0, &[0; 4]).unwrap();
        n.erase(0).unwrap();
    }
    // A failed program clears some of its bits, not all.
    assert_eq!(
        n.program(0, &[0; 256]),
        Err(FlashError::ProgramFailed { block: 0 })
    );
    let got = nor_bytes(&mut n, 0, 256);
    let zeros: u32 = got.iter().map(|b| b.count_zeros()).sum();
    assert!(0 < zeros && zeros < 2048, "{zeros}");
    assert_eq!(n.erase(0), Err(FlashError::EraseFailed { block: 0 }));
    assert_ne!(
        nor_bytes(&mut n, 0, 256),
        vec![0xFF; 256],
        "a failed erase looked complete"
    );
    let n = NorSim::open(n.into_store()).unwrap();
    assert_eq!(n.erase_counts()[0], 6);
}

#[test]
fn never_wear_only_counts() {
    let mut n = NorSim::new(small_nor(false), meta(WearModel::Never)).unwrap();
    for _ in 0..50 {
        n.program(0, &[0; 4]).unwrap();
        n.erase(0).unwrap();
    }
    assert_eq!(n.erase_counts()[0], 50);
    assert_eq!(n.stats().failed_erases + n.stats().failed_programs, 0);
    let mut m = NandSim::new(small_nand(), meta(WearModel::Never)).unwrap();
    for _ in 0..50 {
        m.program_page(PageAddr::new(0, 0), b"x", &[]).unwrap();
        m.erase_block(0).unwrap();
    }
    assert_eq!(m.erase_counts()[0], 50);
}

#[test]
fn gradual_wear_fails_more_often_past_the_endurance() {
    // Endurance 5: no failure before 5 erases, sure failure from 10.
    let spec = NandSpec {
        blocks: 64,
        banks: 1,
        pages_per_block: 16,
        ..small_nand()
    };
    let mut n = NandSim::new(spec, meta(WearModel::Gradual)).unwrap();
    n.set_faults(faults(|_| {}));
    let mut failures_at = vec![0u32; 12];
    for b in 0..64 {
        for cycle in 0..12u32 {
            // A fresh page each cycle: a failed erase may leave the earlier ones programmed.
            let program = n.program_page(PageAddr::new(b, cycle), b"x", &[]);
            let erase = n.erase_block(b);
            match cycle {
                0..5 => {
                    assert_eq!(program, Ok(()));
                    assert_eq!(erase, Ok(()));
                }
                10.. => {
                    assert_eq!(program, Err(FlashError::ProgramFailed { block: b }));
                    assert_eq!(erase, Err(FlashError::EraseFailed { block: b }));
                }
                _ => {
                    for r in [&program, &erase] {
                        assert!(
                            matches!(
                                r,
                                Ok(())
                                    | Err(FlashError::ProgramFailed { .. }
                                        | FlashError::EraseFailed { .. })
                            ),
                            "{r:?}"
                        );
                    }
                }
            }
            failures_at[cycle as usize] += program.is_err() as u32 + erase.is_err() as u32;
        }
    }
    // 128 draws at each count: 0%, 20%, 40%, 60%, 80% failure probability.
    assert_eq!(failures_at[5], 0, "{failures_at:?}");
    let mid = &failures_at[6..10];
    assert!(
        (10..45).contains(&mid[0]) && (85..120).contains(&mid[3]),
        "{failures_at:?}"
    );
    assert!(
        mid[0] < mid[1] && mid[1] < mid[2] && mid[2] < mid[3],
        "{failures_at:?}"
    );
    let n = NandSim::open(n.into_store()).unwrap();
    assert!(n.erase_counts().iter().all(|&c| c == 12));
}

#[test]
fn timebombs_wear_out_one_block_early() {
    let mut n = NandSim::new(small_nand(), meta(WearModel::Never)).unwrap();
    n.set_faults(faults(|c| {
        c.timebombs = vec![Timebomb {
            block: 2,
            at_erases: 2,
        }]
    }));
    for _ in 0..2 {
        n.program_page(PageAddr::new(2, 0), b"x", &[]).unwrap();
        n.erase_block(2).unwrap();
    }
    assert_eq!(
        n.program_page(PageAddr::new(2, 0), b"x", &[]),
        Err(FlashError::ProgramFailed { block: 2 })
    );
    assert_eq!(n.erase_block(2), Err(FlashError::EraseFailed { block: 2 }));
    for _ in 0..4 {
        n.program_page(PageAddr::new(3, 0), b"x", &[]).unwrap();
        n.erase_block(3).unwrap();
    }
    let mut n = NorSim::new(small_nor(true), meta(WearModel::Never)).unwrap();
    n.set_faults(faults(|c| {
        c.timebombs = vec![Timebomb {
            block: 1,
            at_erases: 1,
        }]
    }));
    n.program(256, &[0; 4]).unwrap();
    n.erase(1).unwrap();
    assert_eq!(
        n.program(256, &[0; 4]),
        Err(FlashError::ProgramFailed { block: 1 })
    );
    assert_eq!(n.erase(1), Err(FlashError::EraseFailed { block: 1 }));
    n.program(0, &[0; 4]).unwrap();
}

#[test]
fn slc_mode_survives_a_cut_and_mode_changes_are_not_cut_points() {
    let mut n = NandSim::new(small_mlc(), meta(WearModel::Never)).unwrap();
    n.schedule_cut(0, false);
    n.set_mode(1, CellMode::Slc).unwrap();
    assert_eq!(n.ops(), 0);
    assert_eq!(
        n.program_page(PageAddr::new(1, 0), b"x", &[]),
        Err(FlashError::PowerLoss)
    );
    n.reboot();
    assert_eq!(n.mode(1), CellMode::Slc);
}
