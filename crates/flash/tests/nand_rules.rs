//! NAND rules: a page is programmed once per erase, pages of a block go in order, buffers fit
//! the page, bad blocks are refused, and the bad-block marks (factory and software) are
//! facts of the image.

mod common;

use common::*;
use flash::{
    CellMode, FlashError, MlcNand, NandFlash, NandSim, NandSpec, PageAddr, Simulated, WearModel,
};

fn nand() -> NandSim {
    NandSim::new(small_nand(), meta(WearModel::Never)).unwrap()
}

fn read(n: &mut NandSim, at: PageAddr) -> flash::Result<(Vec<u8>, Vec<u8>)> {
    let (p, s) = (n.spec().page_size as usize, n.spec().spare_size as usize);
    let (mut d, mut sp) = (vec![0u8; p], vec![0u8; s]);
    n.read_page(at, &mut d, &mut sp)?;
    Ok((d, sp))
}

/// Runs `op`, which must fail with `want`, and checks it changed nothing.
fn refused<T: std::fmt::Debug>(
    n: &mut NandSim,
    want: FlashError,
    op: impl FnOnce(&mut NandSim) -> flash::Result<T>,
) {
    let before = image_bytes(n.store());
    let ops = n.ops();
    let r = op(n);
    assert_eq!(r.as_ref().err(), Some(&want), "{r:?}");
    assert_eq!(n.ops(), ops, "a refused operation counted as done");
    assert!(
        image_bytes(n.store()) == before,
        "a refused operation changed the image"
    );
}

#[test]
fn pages_round_trip_and_short_buffers_leave_the_rest_erased() {
    let mut n = nand();
    n.program_page(
        PageAddr::new(1, 0),
        &pattern(1, 0, 64),
        &[1, 2, 3, 4, 5, 6, 7, 8],
    )
    .unwrap();
    n.program_page(PageAddr::new(1, 1), b"abc", &[9]).unwrap();
    n.program_page(PageAddr::new(1, 2), &[], &[]).unwrap();
    let (d, s) = read(&mut n, PageAddr::new(1, 0)).unwrap();
    assert_eq!((d, s), (pattern(1, 0, 64), vec![1, 2, 3, 4, 5, 6, 7, 8]));
    let (d, s) = read(&mut n, PageAddr::new(1, 1)).unwrap();
    assert_eq!(&d[..3], b"abc");
    assert!(d[3..].iter().all(|&b| b == 0xFF));
    assert_eq!(s, [9, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]);
    // Reads may take any prefix of the data and of the spare area.
    let (mut d, mut s) = ([0u8; 2], [0u8; 1]);
    n.read_page(PageAddr::new(1, 1), &mut d, &mut s).unwrap();
    assert_eq!((d, s), ([b'a', b'b'], [9]));
    n.read_page(PageAddr::new(1, 1), &mut [], &mut []).unwrap();
    // Never-programmed pages read erased.
    let (d, s) = read(&mut n, PageAddr::new(7, 7)).unwrap();
    assert!(d.iter().chain(&s).all(|&b| b == 0xFF));
    assert_eq!(n.stats().programs, 3);
    assert_eq!(n.stats().bytes_programmed, 64 + 8 + 3 + 1);
}

#[test]
fn a_page_is_programmed_once_per_erase() {
    let mut n = nand();
    let at = PageAddr::new(2, 0);
    n.program_page(at, b"first", &[]).unwrap();
    refused(
        &mut n,
        FlashError::PageAlreadyProgrammed { block: 2, page: 0 },
        |n| n.program_page(at, b"first", &[]),
    );
    // Even an all-ones program uses the page up.
    n.program_page(PageAddr::new(2, 1), &[0xFF; 64], &[0xFF; 8])
        .unwrap();
    refused(
        &mut n,
        FlashError::PageAlreadyProgrammed { block: 2, page: 1 },
        |n| n.program_page(PageAddr::new(2, 1), &[0x00], &[]),
    );
    assert_eq!(&read(&mut n, at).unwrap().0[..5], b"first");
    n.erase_block(2).unwrap();
    n.program_page(at, b"again", &[]).unwrap();
    n.program_page(PageAddr::new(2, 1), b"too", &[]).unwrap();
    assert_eq!(&read(&mut n, at).unwrap().0[..5], b"again");
}

#[test]
fn pages_go_in_order_within_a_block() {
    let mut n = nand();
    // Skipping pages is allowed.
    n.program_page(PageAddr::new(3, 1), b"1", &[]).unwrap();
    n.program_page(PageAddr::new(3, 4), b"4", &[]).unwrap();
    refused(
        &mut n,
        FlashError::OutOfOrder {
            block: 3,
            page: 2,
            highest: 4,
        },
        |n| n.program_page(PageAddr::new(3, 2), b"2", &[]),
    );
    refused(
        &mut n,
        FlashError::OutOfOrder {
            block: 3,
            page: 0,
            highest: 4,
        },
        |n| n.program_page(PageAddr::new(3, 0), b"0", &[]),
    );
    // Order is per block.
    n.program_page(PageAddr::new(4, 0), b"0", &[]).unwrap();
    n.program_page(PageAddr::new(3, 7), b"7", &[]).unwrap();
    refused(
        &mut n,
        FlashError::OutOfOrder {
            block: 3,
            page: 5,
            highest: 7,
        },
        |n| n.program_page(PageAddr::new(3, 5), b"5", &[]),
    );
    n.erase_block(3).unwrap();
    n.program_page(PageAddr::new(3, 0), b"0", &[]).unwrap();
}

#[test]
fn buffers_longer_than_the_page_are_refused() {
    let mut n = nand();
    let at = PageAddr::new(0, 0);
    let bad = |got| FlashError::BadBuffer { got, max: 72 };
    refused(&mut n, bad(65), |n| n.program_page(at, &[0; 65], &[]));
    refused(&mut n, bad(73), |n| n.program_page(at, &[0; 64], &[0; 9]));
    refused(&mut n, bad(9), |n| n.program_page(at, &[], &[0; 9]));
    refused(&mut n, bad(65), |n| n.read_page(at, &mut [0; 65], &mut []));
    refused(&mut n, bad(9), |n| n.read_page(at, &mut [], &mut [0; 9]));
    // The page is still fresh.
    n.program_page(at, &[0; 64], &[0; 8]).unwrap();
}

#[test]
fn out_of_range_addresses_are_refused() {
    let mut n = nand();
    for at in [
        PageAddr::new(8, 0),
        PageAddr::new(0, 8),
        PageAddr::new(u32::MAX, u32::MAX),
    ] {
        let r = n.program_page(at, b"x", &[]);
        assert!(
            matches!(r, Err(FlashError::OutOfRange { .. })),
            "{at:?}: {r:?}"
        );
        let r = n.read_page(at, &mut [0; 4], &mut []);
        assert!(
            matches!(r, Err(FlashError::OutOfRange { .. })),
            "{at:?}: {r:?}"
        );
    }
    let oor = FlashError::OutOfRange { addr: 8, len: 1 };
    refused(&mut n, oor.clone(), |n| n.erase_block(8));
    refused(&mut n, oor.clone(), |n| n.start_erase(8));
    refused(&mut n, oor.clone(), |n| n.is_bad(8));
    refused(&mut n, oor.clone(), |n| n.mark_bad(8));
    assert_eq!(n.erase_counts(), vec![0; 8]);
}

#[test]
fn erase_wipes_data_spare_and_counts_wear() {
    let mut n = nand();
    for p in 0..8 {
        n.program_page(PageAddr::new(5, p), &pattern(5, p, 64), &[p as u8; 8])
            .unwrap();
        n.program_page(PageAddr::new(6, p), &pattern(6, p, 64), &[p as u8; 8])
            .unwrap();
    }
    n.erase_block(5).unwrap();
    for p in 0..8 {
        let (d, s) = read(&mut n, PageAddr::new(5, p)).unwrap();
        assert!(d.iter().chain(&s).all(|&b| b == 0xFF), "page {p}");
        let (d, s) = read(&mut n, PageAddr::new(6, p)).unwrap();
        assert_eq!((d, s), (pattern(6, p, 64), vec![p as u8; 8]));
    }
    assert_eq!(n.erase_counts(), vec![0, 0, 0, 0, 0, 1, 0, 0]);
    // Erasing an erased block is legal and still wears it.
    n.erase_block(5).unwrap();
    assert_eq!(n.erase_counts()[5], 2);
}

fn with_bad(permille: u32, blocks: u32, seed: u64) -> NandSim {
    let spec = NandSpec {
        blocks,
        banks: 1,
        factory_bad_permille: permille,
        ..small_nand()
    };
    NandSim::new(spec, flash::ImageMeta::new("bad", seed)).unwrap()
}

fn bad_blocks(n: &mut NandSim) -> Vec<u32> {
    (0..n.spec().blocks)
        .filter(|&b| n.is_bad(b).unwrap())
        .collect()
}

#[test]
fn factory_bad_blocks_follow_the_permille_and_the_seed() {
    // The W25N01GV allows up to 20 of its 1024 blocks bad.
    let spec = nand_preset("w25n01gv");
    let mut total = 0;
    for seed in 0..8 {
        let mut n = NandSim::new(spec, flash::ImageMeta::new("w25n01gv", seed)).unwrap();
        let bad = bad_blocks(&mut n).len();
        assert!((3..=45).contains(&bad), "seed {seed}: {bad} bad blocks");
        total += bad;
    }
    // 8 x 1024 blocks at 19 per thousand: about 156.
    assert!((110..=200).contains(&total), "{total}");
    // The same seed gives the same blocks; another seed others.
    let a = bad_blocks(&mut with_bad(100, 256, 5));
    let b = bad_blocks(&mut with_bad(100, 256, 5));
    let c = bad_blocks(&mut with_bad(100, 256, 6));
    assert_eq!(a, b);
    assert_ne!(a, c);
    // None at all when the part has none.
    assert!(bad_blocks(&mut with_bad(0, 256, 5)).is_empty());
}

#[test]
fn block_zero_is_never_factory_bad() {
    let mut blocks_bad = 0;
    for seed in 0..300 {
        let mut n = with_bad(100, 16, seed);
        assert!(!n.is_bad(0).unwrap(), "seed {seed}");
        blocks_bad += bad_blocks(&mut n).len();
    }
    // 300 x 15 candidate blocks at 10%: the mark does fall on the others.
    assert!((300..=600).contains(&blocks_bad), "{blocks_bad}");
}

#[test]
fn bad_blocks_are_refused_for_program_erase_and_read() {
    let mut n = with_bad(100, 64, 3);
    let bad = bad_blocks(&mut n);
    assert!(!bad.is_empty());
    for b in bad {
        let e = FlashError::BadBlock { block: b };
        refused(&mut n, e.clone(), |n| {
            n.program_page(PageAddr::new(b, 0), b"x", &[])
        });
        refused(&mut n, e.clone(), |n| n.erase_block(b));
        refused(&mut n, e.clone(), |n| n.start_erase(b));
        refused(&mut n, e.clone(), |n| {
            n.read_page(PageAddr::new(b, 0), &mut [0; 4], &mut [])
        });
    }
}

#[test]
fn mark_bad_is_refused_use_and_persists_across_reopen() {
    let mut n = nand();
    n.program_page(PageAddr::new(4, 0), b"data", &[]).unwrap();
    assert!(!n.is_bad(4).unwrap());
    n.mark_bad(4).unwrap();
    assert!(n.is_bad(4).unwrap());
    assert_eq!(n.stats().marked_bad, 1);
    assert_eq!(n.ops(), 2, "a bad-block mark is a mutating operation");
    let e = FlashError::BadBlock { block: 4 };
    assert_eq!(
        n.read_page(PageAddr::new(4, 0), &mut [0; 4], &mut []),
        Err(e.clone())
    );
    assert_eq!(
        n.program_page(PageAddr::new(4, 1), b"x", &[]),
        Err(e.clone())
    );
    assert_eq!(n.erase_block(4), Err(e.clone()));
    // Marking twice is harmless.
    n.mark_bad(4).unwrap();
    let mut n = NandSim::open(n.into_store()).unwrap();
    assert!(n.is_bad(4).unwrap());
    assert_eq!(n.erase_block(4), Err(e));
    assert_eq!(bad_blocks(&mut n), vec![4]);
}

#[test]
fn cell_modes_exist_only_on_mlc_parts() {
    let mut n = nand();
    let r = n.set_mode(0, CellMode::Slc);
    assert!(matches!(r, Err(FlashError::BadSpec(_))), "{r:?}");
    let r = n.set_mode(0, CellMode::Mlc);
    assert!(matches!(r, Err(FlashError::BadSpec(_))), "{r:?}");
    assert_eq!(n.mode(0), CellMode::Mlc);
    // Without SLC mode, odd pages are ordinary pages.
    n.program_page(PageAddr::new(0, 1), b"odd", &[]).unwrap();
}
