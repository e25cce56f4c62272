//! MLC NAND: LSB/MSB page pairs, blocks used in SLC mode (LSB pages only, faster) or MLC
//! mode, modes chosen only on erased blocks, and the FlexFS Table 1 latencies.

mod common;

use std::time::Duration;

use common::*;
use flash::{
    CellMode, DeviceClock, FlashError, MlcNand, NandFlash, NandSim, PageAddr, Simulated, WearModel,
};

fn mlc() -> NandSim {
    NandSim::new(small_mlc(), meta(WearModel::Never)).unwrap()
}

#[test]
fn lsb_pages_are_the_even_ones() {
    let n = mlc();
    assert!(n.is_lsb(0) && !n.is_lsb(1) && n.is_lsb(6) && !n.is_lsb(7));
}

#[test]
fn slc_mode_blocks_take_only_lsb_pages() {
    let mut n = mlc();
    assert_eq!(n.mode(1), CellMode::Mlc);
    n.set_mode(1, CellMode::Slc).unwrap();
    assert_eq!(n.mode(1), CellMode::Slc);
    assert_eq!(n.mode(0), CellMode::Mlc);
    for page in [1, 3, 7] {
        assert_eq!(
            n.program_page(PageAddr::new(1, page), b"msb", &[]),
            Err(FlashError::MsbInSlcMode { block: 1, page })
        );
    }
    for page in [0, 2, 6] {
        n.program_page(PageAddr::new(1, page), &pattern(1, page, 64), &[])
            .unwrap();
    }
    // LSB pages still go in order.
    assert_eq!(
        n.program_page(PageAddr::new(1, 4), b"x", &[]),
        Err(FlashError::OutOfOrder {
            block: 1,
            page: 4,
            highest: 6
        })
    );
    for page in [0, 2, 6] {
        let mut d = [0u8; 64];
        n.read_page(PageAddr::new(1, page), &mut d, &mut [])
            .unwrap();
        assert_eq!(d.to_vec(), pattern(1, page, 64));
    }
    // An MLC-mode block takes every page.
    for page in 0..8 {
        n.program_page(PageAddr::new(0, page), b"m", &[]).unwrap();
    }
    assert_eq!(n.stats().programs, 11);
}

#[test]
fn modes_change_only_on_erased_blocks_and_reset_on_erase() {
    let mut n = mlc();
    n.program_page(PageAddr::new(2, 0), b"data", &[]).unwrap();
    assert_eq!(
        n.set_mode(2, CellMode::Slc),
        Err(FlashError::ModeChangeNotErased { block: 2 })
    );
    // Even asking for the mode it has is a change request on a block holding data.
    assert_eq!(
        n.set_mode(2, CellMode::Mlc),
        Err(FlashError::ModeChangeNotErased { block: 2 })
    );
    assert_eq!(n.mode(2), CellMode::Mlc);
    n.erase_block(2).unwrap();
    n.set_mode(2, CellMode::Slc).unwrap();
    n.program_page(PageAddr::new(2, 0), b"slc", &[]).unwrap();
    assert_eq!(
        n.set_mode(2, CellMode::Mlc),
        Err(FlashError::ModeChangeNotErased { block: 2 })
    );
    // Back and forth while erased is fine.
    n.set_mode(3, CellMode::Slc).unwrap();
    n.set_mode(3, CellMode::Mlc).unwrap();
    n.set_mode(3, CellMode::Slc).unwrap();
    // An erase returns a block to MLC mode.
    n.erase_block(2).unwrap();
    assert_eq!(n.mode(2), CellMode::Mlc);
    n.program_page(PageAddr::new(2, 1), b"msb", &[]).unwrap();
    // Out of range and bad blocks are refused too.
    assert!(matches!(
        n.set_mode(8, CellMode::Slc),
        Err(FlashError::OutOfRange { .. })
    ));
    n.mark_bad(5).unwrap();
    assert_eq!(
        n.set_mode(5, CellMode::Slc),
        Err(FlashError::BadBlock { block: 5 })
    );
    assert_eq!(n.mode(99), CellMode::Mlc);
}

#[test]
fn modes_persist_across_reopen() {
    let mut n = mlc();
    n.set_mode(4, CellMode::Slc).unwrap();
    n.set_mode(6, CellMode::Slc).unwrap();
    n.program_page(PageAddr::new(6, 0), b"x", &[]).unwrap();
    let mut n = NandSim::open(n.into_store()).unwrap();
    assert_eq!(n.mode(4), CellMode::Slc);
    assert_eq!(n.mode(6), CellMode::Slc);
    assert_eq!(n.mode(5), CellMode::Mlc);
    assert_eq!(
        n.program_page(PageAddr::new(4, 1), b"x", &[]),
        Err(FlashError::MsbInSlcMode { block: 4, page: 1 })
    );
}

/// Device time taken by `f`.
fn took(n: &mut NandSim, f: impl FnOnce(&mut NandSim)) -> Duration {
    let t0 = n.now();
    f(n);
    n.now() - t0
}

#[test]
fn flexfs_table_1_latencies() {
    // FlexFS Table 1 (us): MLC_LSB (SLC mode) read 409, write 431, erase 872; MLC_BOTH
    // (MLC mode) read 403, write 994, erase 872. Measured at the driver: no extra bus time.
    let spec = nand_preset("mlc-flexfs");
    let mut n = NandSim::new(spec, flash::ImageMeta::new("mlc-flexfs", 1)).unwrap();
    let page = vec![0x3C; 4096];
    let us = Duration::from_micros;
    let (slc, mlc) = (10, 11);
    n.set_mode(slc, CellMode::Slc).unwrap();
    let t = took(&mut n, |n| {
        n.program_page(PageAddr::new(slc, 0), &page, &[1; 70])
            .unwrap()
    });
    assert_eq!(t, us(431));
    let t = took(&mut n, |n| {
        n.program_page(PageAddr::new(mlc, 0), &page, &[1; 70])
            .unwrap()
    });
    assert_eq!(t, us(994));
    let t = took(&mut n, |n| {
        n.program_page(PageAddr::new(mlc, 1), &page, &[]).unwrap()
    });
    assert_eq!(t, us(994));
    let mut buf = vec![0u8; 4096];
    let t = took(&mut n, |n| {
        n.read_page(PageAddr::new(slc, 0), &mut buf, &mut [])
            .unwrap();
    });
    assert_eq!(t, us(409));
    let t = took(&mut n, |n| {
        n.read_page(PageAddr::new(mlc, 1), &mut buf, &mut [])
            .unwrap();
    });
    assert_eq!(t, us(403));
    assert_eq!(buf, page);
    let t = took(&mut n, |n| n.erase_block(slc).unwrap());
    assert_eq!(t, us(872));
    let t = took(&mut n, |n| n.erase_block(mlc).unwrap());
    assert_eq!(t, us(872));
    // SLC mode halves the block and more than doubles write speed.
    let slc_block = 64.0 * 4096.0 / 431e-6;
    let mlc_block = 128.0 * 4096.0 / 994e-6;
    assert!(slc_block / mlc_block > 1.1);
}

#[test]
fn a_torn_msb_program_destroys_its_lsb_partner() {
    let mut n = mlc();
    for p in 0..3 {
        n.program_page(PageAddr::new(1, p), &pattern(1, p, 64), &[])
            .unwrap();
    }
    n.schedule_cut(0, true);
    assert_eq!(
        n.program_page(PageAddr::new(1, 3), &pattern(1, 3, 64), &[]),
        Err(FlashError::PowerLoss)
    );
    n.reboot();
    let mut d = [0u8; 64];
    let unreadable = |p| FlashError::Uncorrectable { block: 1, page: p };
    assert_eq!(
        n.read_page(PageAddr::new(1, 3), &mut d, &mut []),
        Err(unreadable(3))
    );
    // Page 2 shares its cells with page 3.
    assert_eq!(
        n.read_page(PageAddr::new(1, 2), &mut d, &mut []),
        Err(unreadable(2))
    );
    // The pair before is intact.
    for p in 0..2 {
        n.read_page(PageAddr::new(1, p), &mut d, &mut []).unwrap();
        assert_eq!(d.to_vec(), pattern(1, p, 64));
    }
}

#[test]
fn a_torn_lsb_program_or_slc_mode_program_harms_only_its_page() {
    let mut n = mlc();
    n.program_page(PageAddr::new(1, 0), b"keep", &[]).unwrap();
    n.program_page(PageAddr::new(1, 1), b"keep", &[]).unwrap();
    n.schedule_cut(0, true);
    assert_eq!(
        n.program_page(PageAddr::new(1, 2), b"torn", &[]),
        Err(FlashError::PowerLoss)
    );
    n.reboot();
    n.set_mode(2, CellMode::Slc).unwrap();
    n.program_page(PageAddr::new(2, 0), b"keep", &[]).unwrap();
    n.schedule_cut(0, true);
    assert_eq!(
        n.program_page(PageAddr::new(2, 2), b"torn", &[]),
        Err(FlashError::PowerLoss)
    );
    n.reboot();
    let mut d = [0u8; 4];
    for (b, p) in [(1, 0), (1, 1), (2, 0)] {
        n.read_page(PageAddr::new(b, p), &mut d, &mut []).unwrap();
        assert_eq!(&d, b"keep");
    }
    for (b, p) in [(1, 2), (2, 2)] {
        assert_eq!(
            n.read_page(PageAddr::new(b, p), &mut d, &mut []),
            Err(FlashError::Uncorrectable { block: b, page: p })
        );
    }
}

#[test]
fn a_failed_msb_program_in_mlc_mode_also_spoils_its_partner() {
    let mut n = mlc();
    n.program_page(PageAddr::new(3, 0), b"lsb", &[]).unwrap();
    n.program_page(PageAddr::new(4, 0), b"lsb", &[]).unwrap();
    // Block 3 wears out between its LSB and MSB programs.
    n.set_faults(flash::FaultConfig {
        timebombs: vec![flash::Timebomb {
            block: 3,
            at_erases: 0,
        }],
        ..Default::default()
    });
    assert_eq!(
        n.program_page(PageAddr::new(3, 1), b"msb", &[]),
        Err(FlashError::ProgramFailed { block: 3 })
    );
    assert_eq!(n.stats().failed_programs, 1);
    let mut d = [0u8; 3];
    for p in [0, 1] {
        assert_eq!(
            n.read_page(PageAddr::new(3, p), &mut d, &mut []),
            Err(FlashError::Uncorrectable { block: 3, page: p })
        );
    }
    n.read_page(PageAddr::new(4, 0), &mut d, &mut []).unwrap();
    assert_eq!(&d, b"lsb");
}
