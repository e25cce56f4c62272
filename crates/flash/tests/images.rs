//! Images: everything a device is lives in its store, in RAM or in a sparse file; a reopened
//! image is the same device; damaged, truncated and foreign images give typed errors.

mod common;

use std::time::{Duration, Instant};

use common::*;
use flash::image::{image_len, read_header};
use flash::store::{FileStore, RamStore, Store};
use flash::{
    CellMode, Cells, DeviceClock, DeviceSpec, EccSpec, FlashError, ImageMeta, IoErrorKind, MlcNand,
    NandFlash, NandSim, NandSpec, NorFlash, NorSim, Nvram, NvramSim, PageAddr, Simulated,
    WearModel,
};
use proptest::prelude::*;

fn page<S: Store>(n: &mut NandSim<S>, b: u32, p: u32) -> flash::Result<Vec<u8>> {
    let mut d = vec![0u8; n.spec().page_size as usize];
    n.read_page(PageAddr::new(b, p), &mut d, &mut [])?;
    Ok(d)
}

// ---------------------------------------------------------------------------------------
// Round trips

#[test]
fn a_nor_image_reopens_as_the_same_device() {
    let spec = small_nor(false);
    let m = ImageMeta {
        wear: WearModel::AtLimit,
        ..ImageMeta::new("my-nor", 77)
    };
    let mut n = NorSim::new(spec, m.clone()).unwrap();
    n.program(0, &[1, 2, 3, 4]).unwrap();
    n.program(301, &[0; 8]).unwrap_err(); // unaligned
    n.program(512, &[0x0F; 256]).unwrap();
    n.erase(1).unwrap();
    n.erase(1).unwrap();
    let image = image_bytes(n.store());
    let mut r = NorSim::open(n.into_store()).unwrap();
    assert!(image_bytes(r.store()) == image, "opening changed the image");
    assert_eq!(*NorFlash::spec(&r), spec);
    assert_eq!(*r.meta(), m);
    assert_eq!(r.erase_counts(), vec![0, 2, 0, 0, 0, 0, 0, 0]);
    let mut b = [0u8; 4];
    r.read(0, &mut b).unwrap();
    assert_eq!(b, [1, 2, 3, 4]);
    // What was programmed stays programmed for the once-per-erase rule.
    assert_eq!(
        r.program(0, &[0; 4]),
        Err(FlashError::Reprogram { addr: 0 })
    );
    assert_eq!(
        r.program(512 + 252, &[0; 4]),
        Err(FlashError::Reprogram { addr: 764 })
    );
    r.program(4, &[0; 4]).unwrap();
    // A fresh device: counters and clock start over; the faults are off.
    assert_eq!(r.ops(), 1);
    assert_eq!(r.stats().programs, 1);
    assert!(r.now() < Duration::from_millis(1));
    assert!(r.faults().cut.is_none());
}

#[test]
fn a_nand_image_reopens_as_the_same_device() {
    let spec = NandSpec {
        factory_bad_permille: 100,
        blocks: 32,
        ..small_mlc()
    };
    let mut n = NandSim::new(spec, ImageMeta::new("my-mlc", 3)).unwrap();
    let factory: Vec<bool> = (0..32).map(|b| n.is_bad(b).unwrap()).collect();
    assert!(factory.iter().any(|&b| b));
    let good: Vec<u32> = (0..32).filter(|&b| !factory[b as usize]).collect();
    let (a, b, c, d) = (good[0], good[1], good[2], good[3]);
    n.program_page(PageAddr::new(a, 0), &pattern(a, 0, 64), &[5; 8])
        .unwrap();
    n.program_page(PageAddr::new(a, 3), &pattern(a, 3, 64), &[])
        .unwrap();
    n.set_mode(b, CellMode::Slc).unwrap();
    n.program_page(PageAddr::new(b, 0), &pattern(b, 0, 64), &[])
        .unwrap();
    n.erase_block(c).unwrap();
    n.mark_bad(d).unwrap();
    n.inject_bit_errors(PageAddr::new(a, 3), 1).unwrap();
    n.schedule_cut(0, true);
    n.program_page(PageAddr::new(a, 4), b"torn", &[])
        .unwrap_err();
    n.reboot();
    let counts = n.erase_counts();
    let image = image_bytes(n.store());
    let mut r = NandSim::open(n.into_store()).unwrap();
    assert!(image_bytes(r.store()) == image);
    assert_eq!(*NandFlash::spec(&r), spec);
    assert_eq!(r.meta().name, "my-mlc");
    assert_eq!(r.erase_counts(), counts);
    assert_eq!(counts[c as usize], 1);
    for blk in 0..32 {
        assert_eq!(
            r.is_bad(blk).unwrap(),
            factory[blk as usize] || blk == d,
            "block {blk}"
        );
    }
    let mut sp = [0u8; 8];
    let mut dd = [0u8; 64];
    r.read_page(PageAddr::new(a, 0), &mut dd, &mut sp).unwrap();
    assert_eq!((dd.to_vec(), sp), (pattern(a, 0, 64), [5; 8]));
    let st = r.read_page(PageAddr::new(a, 3), &mut dd, &mut []).unwrap();
    assert_eq!((dd.to_vec(), st.corrected_bits), (pattern(a, 3, 64), 1));
    assert_eq!(
        page(&mut r, a, 4),
        Err(FlashError::Uncorrectable { block: a, page: 4 })
    );
    assert_eq!(
        r.program_page(PageAddr::new(a, 2), b"x", &[]),
        Err(FlashError::OutOfOrder {
            block: a,
            page: 2,
            highest: 4
        })
    );
    assert_eq!(r.mode(b), CellMode::Slc);
    assert_eq!(page(&mut r, b, 0).unwrap(), pattern(b, 0, 64));
}

#[test]
fn an_nvram_image_reopens_as_the_same_device() {
    let mut n = NvramSim::new(small_nvram(), ImageMeta::new("fram", 1)).unwrap();
    let mut b = [9u8; 8];
    n.read(100, &mut b).unwrap();
    assert_eq!(b, [0; 8], "NVRAM leaves the factory zeroed");
    n.write(100, b"in place").unwrap();
    n.write(102, b"XY").unwrap();
    let mut r = NvramSim::open(n.into_store()).unwrap();
    r.read(100, &mut b).unwrap();
    assert_eq!(&b, b"inXYlace");
    assert!(r.erase_counts().is_empty());
    assert!(matches!(
        r.write(1020, &[0; 5]),
        Err(FlashError::OutOfRange { .. })
    ));
}

#[test]
fn a_background_erase_that_finished_is_in_the_image() {
    // No call after the erase ends: idle time alone completes it.
    let mut n = NandSim::new(small_nand(), meta(WearModel::Never)).unwrap();
    n.program_page(PageAddr::new(1, 0), b"old", &[]).unwrap();
    n.start_erase(1).unwrap();
    n.idle(Duration::from_millis(5));
    let mut r = NandSim::open(n.store().clone()).unwrap();
    assert_eq!(page(&mut r, 1, 0).unwrap(), vec![0xFF; 64]);
    let mut m = NorSim::new(small_nor(false), meta(WearModel::Never)).unwrap();
    m.program(0, &[0; 16]).unwrap();
    m.start_erase(0).unwrap();
    m.idle(Duration::from_millis(5));
    let mut r = NorSim::open(m.store().clone()).unwrap();
    let mut b = [0u8; 16];
    r.read(0, &mut b).unwrap();
    assert_eq!(b, [0xFF; 16]);
    r.program(0, &[0; 16]).unwrap();
}

#[test]
fn handing_the_store_over_completes_running_erases() {
    let mut n = NandSim::new(small_nand(), meta(WearModel::Never)).unwrap();
    n.program_page(PageAddr::new(1, 0), b"old", &[]).unwrap();
    n.start_erase(1).unwrap();
    let mut r = NandSim::open(n.into_store()).unwrap();
    assert_eq!(page(&mut r, 1, 0).unwrap(), vec![0xFF; 64]);
    r.program_page(PageAddr::new(1, 0), b"new", &[]).unwrap();
}

#[test]
fn names_longer_than_the_header_field_are_refused() {
    let long = "x".repeat(33);
    let r = NandSim::new(small_nand(), ImageMeta::new(&long, 1));
    assert!(matches!(r, Err(FlashError::BadSpec(_))), "{:?}", r.err());
    let n = NandSim::new(small_nand(), ImageMeta::new(&long[..32], 1)).unwrap();
    assert_eq!(
        NandSim::open(n.into_store()).unwrap().meta().name,
        long[..32]
    );
}

#[test]
fn every_preset_makes_an_image_that_reopens() {
    for p in flash::preset::PRESETS {
        let name = p.name;
        let m = ImageMeta::new(name, 1);
        let store = match p.spec {
            DeviceSpec::Nor(s) => {
                let mut n = NorSim::new(s, m).unwrap();
                n.program(0, &vec![0; s.word_size as usize]).unwrap();
                n.into_store()
            }
            DeviceSpec::Nand(s) => {
                let mut n = NandSim::new(s, m).unwrap();
                n.program_page(PageAddr::new(0, 0), b"x", &[]).unwrap();
                n.into_store()
            }
            DeviceSpec::Nvram(s) => {
                let mut n = NvramSim::new(s, m).unwrap();
                n.write(0, b"x").unwrap();
                n.into_store()
            }
        };
        let (spec, meta) = read_header(&store).unwrap();
        assert_eq!(spec, p.spec, "{name}");
        assert_eq!(meta.name, name);
        assert_eq!(store.len(), image_len(&p.spec));
        // 1 GiB devices cost only what was written.
        assert!(
            store.resident_bytes() < 3 << 20,
            "{name}: {}",
            store.resident_bytes()
        );
        match p.spec {
            DeviceSpec::Nor(_) => drop(NorSim::open(store).unwrap()),
            DeviceSpec::Nand(_) => drop(NandSim::open(store).unwrap()),
            DeviceSpec::Nvram(_) => drop(NvramSim::open(store).unwrap()),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Files

#[test]
fn file_images_create_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nand.img");
    let mut n = NandSim::create(&path, small_nand(), ImageMeta::new("file", 1)).unwrap();
    n.program_page(PageAddr::new(2, 0), &pattern(2, 0, 64), &[1; 8])
        .unwrap();
    n.erase_block(3).unwrap();
    n.flush().unwrap();
    drop(n);
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        image_len(&DeviceSpec::Nand(small_nand()))
    );
    let mut r = NandSim::open(FileStore::open(&path).unwrap()).unwrap();
    assert_eq!(page(&mut r, 2, 0).unwrap(), pattern(2, 0, 64));
    assert_eq!(r.erase_counts()[3], 1);
    // Creating over an existing image is refused; opening nothing is an I/O error.
    let again = NandSim::create(&path, small_nand(), ImageMeta::new("file", 1));
    assert!(
        matches!(again, Err(FlashError::Io(IoErrorKind::AlreadyExists))),
        "{again:?}"
    );
    let none = FileStore::open(&dir.path().join("missing.img"));
    assert!(
        matches!(none, Err(FlashError::Io(IoErrorKind::NotFound))),
        "{none:?}"
    );

    let path = dir.path().join("nor.img");
    let mut n = NorSim::create(&path, small_nor(false), ImageMeta::new("nor", 1)).unwrap();
    n.program(8, &[0xAB; 4]).unwrap();
    drop(n);
    let mut r = NorSim::open(FileStore::open(&path).unwrap()).unwrap();
    let mut b = [0u8; 4];
    r.read(8, &mut b).unwrap();
    assert_eq!(b, [0xAB; 4]);
    assert_eq!(
        r.program(8, &[0; 4]),
        Err(FlashError::Reprogram { addr: 8 })
    );

    let path = dir.path().join("fram.img");
    let mut n = NvramSim::create(&path, small_nvram(), ImageMeta::new("fram", 1)).unwrap();
    n.write(5, b"hi").unwrap();
    drop(n);
    let mut r = NvramSim::open(FileStore::open(&path).unwrap()).unwrap();
    let mut b = [0u8; 2];
    r.read(5, &mut b).unwrap();
    assert_eq!(&b, b"hi");
}

#[test]
fn formatting_a_used_store_starts_from_blank() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("reuse.img");
    let spec = nand_preset("nand-1g");
    let mut n = NandSim::create(&path, spec, ImageMeta::new("old", 1)).unwrap();
    for b in 1..4 {
        if !n.is_bad(b).unwrap() {
            for p in 0..64 {
                n.program_page(PageAddr::new(b, p), &[0; 2048], &[0; 34])
                    .unwrap();
            }
        }
    }
    let used = n.store().allocated_bytes().unwrap();
    drop(n);
    let store = FileStore::open(&path).unwrap();
    let mut n = NandSim::format(store, spec, ImageMeta::new("new", 2)).unwrap();
    let fresh = n.store().allocated_bytes().unwrap();
    assert!(fresh < used / 4, "{used} -> {fresh}");
    for b in 1..4 {
        if !n.is_bad(b).unwrap() {
            assert_eq!(page(&mut n, b, 0).unwrap(), vec![0xFF; 2048]);
        }
    }
    assert_eq!(n.meta().name, "new");
    assert!(n.erase_counts().iter().all(|&c| c == 0));
    // In RAM too.
    let mut r = NandSim::new(small_nand(), ImageMeta::new("old", 1)).unwrap();
    r.program_page(PageAddr::new(0, 0), b"x", &[]).unwrap();
    r.erase_block(1).unwrap();
    let mut r = NandSim::format(r.into_store(), small_nand(), ImageMeta::new("new", 1)).unwrap();
    assert_eq!(page(&mut r, 0, 0).unwrap(), vec![0xFF; 64]);
    assert_eq!(r.erase_counts(), vec![0; 8]);
}

#[test]
fn a_16_gib_nand_image_is_sparse_and_opens_fast() {
    let spec = NandSpec {
        blocks: 65536,
        pages_per_block: 64,
        page_size: 4096,
        spare_size: 128,
        banks: 4,
        cells: Cells::Slc,
        ecc: EccSpec {
            codeword: 1024,
            correctable: 8,
        },
        timing: small_timing(),
        endurance: 3000,
        factory_bad_permille: 2,
    };
    assert_eq!(spec.capacity(), 16 << 30);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.img");
    let t0 = Instant::now();
    let mut n = NandSim::create(&path, spec, ImageMeta::new("big", 9)).unwrap();
    let created = t0.elapsed();
    let fresh = n.store().allocated_bytes().unwrap();
    // Header and a few block-table entries (the factory bad blocks).
    assert!(
        fresh < 1 << 20,
        "{fresh} bytes allocated by a fresh 16 GiB image"
    );
    for b in [1u32, 30_000, 65_535] {
        if !n.is_bad(b).unwrap() {
            n.program_page(PageAddr::new(b, 0), &vec![0x42; 4096], &[1; 128])
                .unwrap();
        }
    }
    n.flush().unwrap();
    let used = n.store().allocated_bytes().unwrap();
    assert!(used < fresh + (64 << 10), "{used}");
    assert!(std::fs::metadata(&path).unwrap().len() > 16 << 30);
    drop(n);
    let t0 = Instant::now();
    let mut r = NandSim::open(FileStore::open(&path).unwrap()).unwrap();
    let opened = t0.elapsed();
    assert!(created < Duration::from_secs(3), "{created:?}");
    assert!(opened < Duration::from_secs(2), "{opened:?}");
    if !r.is_bad(30_000).unwrap() {
        assert_eq!(page(&mut r, 30_000, 0).unwrap(), vec![0x42; 4096]);
    }
    let good = (40_000..).find(|&b| !r.is_bad(b).unwrap()).unwrap();
    assert_eq!(page(&mut r, good, 63).unwrap(), vec![0xFF; 4096]);
    assert_eq!(r.erase_counts().len(), 65536);
}

#[test]
fn erasing_gives_the_space_back() {
    let dir = tempfile::tempdir().unwrap();
    // Pages of 4 KiB with no spare: blocks are whole host blocks and leave no ragged ends.
    let aligned = NandSpec {
        page_size: 4096,
        spare_size: 0,
        ecc: EccSpec {
            codeword: 512,
            correctable: 4,
        },
        ..small_nand()
    };
    // The 1 GiB large-page preset: 2082 B per page, blocks straddle host blocks.
    let ragged = nand_preset("nand-1g");
    for (i, spec) in [aligned, ragged].into_iter().enumerate() {
        let path = dir.path().join(format!("{i}.img"));
        let mut n = NandSim::create(&path, spec, ImageMeta::new("space", 1)).unwrap();
        // A block that is not factory-bad.
        let b = (1..spec.blocks).find(|&b| !n.is_bad(b).unwrap()).unwrap();
        // A first erase brings the block's table entries into the file.
        n.erase_block(b).unwrap();
        let base = n.store().allocated_bytes().unwrap();
        let data = vec![0u8; spec.page_size as usize];
        for p in 0..spec.pages_per_block {
            n.program_page(PageAddr::new(b, p), &data, &[]).unwrap();
        }
        let block = spec.pages_per_block as u64 * spec.page_size as u64;
        let full = n.store().allocated_bytes().unwrap();
        assert!(full >= base + block, "{i}: {base} -> {full}");
        n.erase_block(b).unwrap();
        let after = n.store().allocated_bytes().unwrap();
        // At most the ragged ends (two host blocks) remain.
        assert!(after <= base + 2 * 4096, "{i}: {base} -> {full} -> {after}");
        if i == 0 {
            assert_eq!(after, base, "{i}: {base} -> {full}");
        }
    }
    // NOR too.
    let path = dir.path().join("nor.img");
    let spec = nor_preset("m29dw640d");
    let mut n = NorSim::create(&path, spec, ImageMeta::new("nor", 1)).unwrap();
    n.erase(1).unwrap();
    let base = n.store().allocated_bytes().unwrap();
    n.program(65536, &vec![0u8; 65536]).unwrap();
    assert!(n.store().allocated_bytes().unwrap() >= base + 65536);
    n.erase(1).unwrap();
    assert!(n.store().allocated_bytes().unwrap() <= base);
}

// ---------------------------------------------------------------------------------------
// Damaged and foreign images

fn small_nand_image() -> RamStore {
    let mut n = NandSim::new(small_nand(), ImageMeta::new("victim", 1)).unwrap();
    n.program_page(PageAddr::new(1, 0), b"data", &[]).unwrap();
    n.into_store()
}

fn small_nor_image() -> RamStore {
    NorSim::new(small_nor(false), ImageMeta::new("victim", 1))
        .unwrap()
        .into_store()
}

fn poke(s: &mut RamStore, at: u64, v: u8) {
    s.write(at, &[v]).unwrap();
}

fn peek(s: &RamStore, at: u64) -> u8 {
    let mut b = [0u8];
    s.read(at, &mut b).unwrap();
    b[0]
}

/// Recomputes the header checksum, so a corruption reaches the fields behind it.
fn reseal(s: &mut RamStore) {
    let mut h = [0u8; 248];
    s.read(0, &mut h).unwrap();
    let crc = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI).checksum(&h);
    s.write(248, &crc.to_le_bytes()).unwrap();
}

#[test]
fn every_damaged_header_byte_is_a_bad_image() {
    let good = small_nand_image();
    for at in 0..252 {
        for flip in [0x01, 0x80, 0xFF] {
            let mut s = good.clone();
            let v = peek(&s, at) ^ flip;
            poke(&mut s, at, v);
            let r = NandSim::open(s);
            assert!(
                matches!(r, Err(FlashError::BadImage(_))),
                "byte {at} ^ {flip:#x}: {:?}",
                r.err()
            );
        }
    }
    // The rest of the header block is reserved and ignored.
    let mut s = good.clone();
    poke(&mut s, 300, 0xEE);
    poke(&mut s, 4095, 0xEE);
    NandSim::open(s).unwrap();
}

#[test]
fn damage_behind_a_valid_checksum_is_still_refused() {
    let good = small_nand_image();
    let cases: &[(u64, &[u8], &str)] = &[
        (8, &2u32.to_le_bytes(), "version"),
        (12, &[9], "kind"),
        (13, &[7], "wear model"),
        (24, &[0xFF, 0xFE], "name"),
        (56, &0u64.to_le_bytes(), "zero blocks"),
        (56, &u64::MAX.to_le_bytes(), "blocks overflow u32"),
        (56 + 8 * 5, &2u64.to_le_bytes(), "cells flag"),
        (56 + 8 * 6, &7u64.to_le_bytes(), "codeword"),
        (56 + 8 * 2, &(u32::MAX as u64).to_le_bytes(), "page size"),
        (56 + 8 * 3, &(u32::MAX as u64).to_le_bytes(), "spare size"),
    ];
    for &(at, bytes, what) in cases {
        let mut s = good.clone();
        s.write(at, bytes).unwrap();
        reseal(&mut s);
        let r = NandSim::open(s);
        assert!(
            matches!(r, Err(FlashError::BadImage(_))),
            "{what}: {:?}",
            r.err()
        );
    }
    // A larger geometry than the file holds is a truncated image.
    let mut s = good.clone();
    s.write(56, &16u64.to_le_bytes()).unwrap();
    reseal(&mut s);
    assert_eq!(
        NandSim::open(s).err(),
        Some(FlashError::BadImage("truncated: shorter than its geometry"))
    );
}

#[test]
fn truncated_and_empty_images_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.img");
    drop(NandSim::create(&path, small_nand(), ImageMeta::new("t", 1)).unwrap());
    let full = std::fs::metadata(&path).unwrap().len();
    for len in [full - 1, full / 2, 4097, 4096, 100, 0] {
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len)
            .unwrap();
        let r = NandSim::open(FileStore::open(&path).unwrap());
        assert!(
            matches!(r, Err(FlashError::BadImage(_))),
            "{len}: {:?}",
            r.err()
        );
    }
    let junk = dir.path().join("junk.img");
    std::fs::write(&junk, vec![0x5A; 10_000]).unwrap();
    let r = NorSim::open(FileStore::open(&junk).unwrap());
    assert!(matches!(r, Err(FlashError::BadImage(_))), "{:?}", r.err());
}

#[test]
fn an_image_of_another_medium_is_a_mismatch() {
    assert_eq!(
        NorSim::open(small_nand_image()).err(),
        Some(FlashError::ImageMismatch)
    );
    assert_eq!(
        NvramSim::open(small_nand_image()).err(),
        Some(FlashError::ImageMismatch)
    );
    assert_eq!(
        NandSim::open(small_nor_image()).err(),
        Some(FlashError::ImageMismatch)
    );
    let fram = NvramSim::new(small_nvram(), ImageMeta::new("f", 1))
        .unwrap()
        .into_store();
    assert_eq!(
        NandSim::open(fram.clone()).err(),
        Some(FlashError::ImageMismatch)
    );
    assert_eq!(NorSim::open(fram).err(), Some(FlashError::ImageMismatch));
    // On disk as well.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nand.img");
    drop(NandSim::create(&path, small_nand(), ImageMeta::new("n", 1)).unwrap());
    assert_eq!(
        NorSim::open(FileStore::open(&path).unwrap()).err(),
        Some(FlashError::ImageMismatch)
    );
}

#[test]
fn hostile_tables_are_survived() {
    // Arbitrary bytes in the block and page tables are odd states, not crashes.
    let mut s = small_nand_image();
    let junk: Vec<u8> = (0..8192u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    s.write(4096, &junk).unwrap();
    let mut n = NandSim::open(s).unwrap();
    for b in 0..8 {
        let _ = n.is_bad(b);
        let _ = n.set_mode(b, CellMode::Slc);
        for p in 0..8 {
            let _ = n.read_page(PageAddr::new(b, p), &mut [0; 64], &mut [0; 8]);
            let _ = n.program_page(PageAddr::new(b, p), b"x", &[]);
        }
        let _ = n.erase_block(b);
    }
    let mut s = small_nor_image();
    s.write(8192, &junk[..4096]).unwrap();
    let mut n = NorSim::open(s).unwrap();
    for w in 0..512u64 {
        let _ = n.program(w * 4, &[0; 4]);
    }
}

/// Opens whatever `s` is and, if it opens, works it a little: nothing may panic.
fn try_everything(s: RamStore) -> flash::Result<()> {
    let (spec, _) = read_header(&s)?;
    let kind = spec.kind();
    match spec {
        DeviceSpec::Nand(sp) => {
            let mut n = NandSim::open(s)?;
            assert!(kind.contains("nand"));
            let last = PageAddr::new(sp.blocks - 1, sp.pages_per_block - 1);
            for at in [PageAddr::new(0, 0), last] {
                let _ = n.program_page(at, b"abc", b"d");
                let _ = n.read_page(at, &mut [0; 3], &mut [0; 1]);
            }
            let _ = n.erase_block(sp.blocks - 1);
            let _ = n.set_mode(0, CellMode::Slc);
        }
        DeviceSpec::Nor(sp) => {
            let mut n = NorSim::open(s)?;
            let w = sp.word_size as usize;
            let _ = n.program(0, &vec![0; w]);
            let _ = n.read(sp.capacity() - 1, &mut [0]);
            let _ = n.erase(0);
            let _ = n.start_erase(sp.units - 1);
            let _ = n.read(0, &mut [0; 3]);
            let _ = n.program(sp.capacity() - w as u64, &vec![0; w]);
            n.schedule_cut(0, true);
            let _ = n.erase(sp.units - 1);
        }
        DeviceSpec::Nvram(_) => {
            let mut n = NvramSim::open(s)?;
            let _ = n.write(0, b"abc");
        }
    }
    Ok(())
}

/// The image `s` with its header placed in a (sparse) store as large as the header says,
/// when that is small enough to try, so the geometry itself is exercised.
fn fit(s: &RamStore) -> RamStore {
    let Ok((spec, _)) = read_header(&RamStore::clone(s)).or_else(|e| match e {
        FlashError::BadImage("truncated: shorter than its geometry") => {
            let mut h = vec![0u8; 4096];
            s.read(0, &mut h).unwrap();
            let mut big = RamStore::new(1 << 40);
            big.write(0, &h).unwrap();
            read_header(&big)
        }
        e => Err(e),
    }) else {
        return s.clone();
    };
    let len = image_len(&spec);
    if len > 1 << 30 {
        return s.clone();
    }
    let mut h = vec![0u8; 4096];
    s.read(0, &mut h).unwrap();
    let mut out = RamStore::new(len);
    out.write(0, &h).unwrap();
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn random_header_damage_never_panics(
        nand in any::<bool>(),
        hits in prop::collection::vec((0u64..260, any::<u8>()), 1..6),
    ) {
        let mut s = if nand { small_nand_image() } else { small_nor_image() };
        let before = s.clone();
        for &(at, v) in &hits {
            poke(&mut s, at, v);
        }
        let changed = (0..252).any(|at| peek(&s, at) != peek(&before, at));
        let r = try_everything(s);
        if changed {
            prop_assert!(matches!(r, Err(FlashError::BadImage(_))), "{:?}", r);
        } else {
            prop_assert!(r.is_ok(), "{:?}", r);
        }
    }

    #[test]
    fn random_geometry_behind_a_valid_checksum_never_panics(
        nand in any::<bool>(),
        fields in prop::collection::vec((0u64..24, prop_oneof![
            Just(0u64), Just(1), Just(2), Just(3), Just(4), Just(64), Just(1024),
            Just(u32::MAX as u64), Just(u32::MAX as u64 + 1), Just(u64::MAX),
            Just(u64::MAX - 1), 0u64..100_000, any::<u64>(),
        ]), 1..4),
        wear in 0u8..4,
    ) {
        let mut s = if nand { small_nand_image() } else { small_nor_image() };
        for (field, value) in fields {
            s.write(56 + 8 * field, &value.to_le_bytes()).unwrap();
        }
        poke(&mut s, 13, wear);
        reseal(&mut s);
        let _ = try_everything(s.clone());
        let _ = try_everything(fit(&s));
    }
}
