//! Damaged images: whatever bytes the flash holds, mounting and reading the block device
//! return data or a typed error — never a panic, never a hang.

mod common;

use common::*;
use flash::store::Store;
use flash::{NandSim, NorSim};
use flashfs::{BlockDevice, Ftl, FtlConfig, NandSegments, NorSegments};
use proptest::prelude::*;

fn written_nand() -> flash::store::RamStore {
    let mut ftl = Ftl::format(nand(), FtlConfig::default()).unwrap();
    let ss = ftl.sector_size();
    for round in 0..3u32 {
        for k in 0..ftl.sectors() {
            ftl.write(k, &pattern(k, round, ss)).unwrap();
        }
    }
    ftl.trim(3, 5).unwrap();
    ftl.into_device().into_inner().into_store()
}

fn written_nor() -> flash::store::RamStore {
    let mut ftl = Ftl::format(nor(true), FtlConfig::default()).unwrap();
    let ss = ftl.sector_size();
    for round in 0..3u32 {
        for k in 0..ftl.sectors() {
            ftl.write(k, &pattern(k, round, ss)).unwrap();
        }
    }
    ftl.into_device().into_inner().into_store()
}

/// Mounts and reads everything; any outcome but a panic is acceptable.
fn exercise<D: flashfs::Segments>(dev: D) {
    if let Ok(mut ftl) = Ftl::mount(dev, FtlConfig::default()) {
        let mut buf = vec![0u8; ftl.sector_size()];
        for k in 0..ftl.sectors() {
            let _ = ftl.read(k, &mut buf);
        }
        let _ = ftl.write(0, &buf);
        let _ = ftl.gc();
    }
}

/// Corrupts `hits` (offset, xor) pairs in the data area of an image (past its header and
/// tables, which the simulator checks itself).
fn damage(mut store: flash::store::RamStore, hits: &[(u64, u8)]) -> flash::store::RamStore {
    let len = store.len();
    for &(off, x) in hits {
        let at = 8192 + off % (len - 8192);
        let mut b = [0u8];
        store.read(at, &mut b).unwrap();
        store.write(at, &[b[0] ^ x.max(1)]).unwrap();
    }
    store
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn damaged_nand_never_panics(hits in proptest::collection::vec((any::<u64>(), any::<u8>()), 1..200)) {
        let store = damage(written_nand(), &hits);
        if let Ok(sim) = NandSim::open(store) {
            exercise(NandSegments::new(sim).unwrap());
        }
    }

    #[test]
    fn damaged_nor_never_panics(hits in proptest::collection::vec((any::<u64>(), any::<u8>()), 1..200)) {
        let store = damage(written_nor(), &hits);
        if let Ok(sim) = NorSim::open(store) {
            exercise(NorSegments::new(sim, 512).unwrap());
        }
    }
}

/// A volume whose headers say one erase unit per segment, on a part this build erases four
/// units at a time (an image of another layout), is refused, not read with the wrong layout.
#[test]
fn a_volume_of_another_segment_layout_is_refused() {
    use flash::NorFlash as _;
    use flashfs::media::tag::{SegHeader, Volume};
    use flashfs::Segments;
    let ftl = Ftl::format(nor_small_units(), FtlConfig::default()).unwrap();
    let sectors = ftl.sectors();
    let dev = ftl.into_device();
    assert_eq!(dev.units_per_segment(), 4);
    let geo = dev.geometry();
    let mut sim = dev.clone().into_inner();
    for seg in 0..geo.segments {
        sim.erase(seg * 4).unwrap();
    }
    let header = SegHeader {
        erase_count: 1,
        open_seq: 1,
        head: 0,
        slc: false,
        volume: Volume {
            format: 1,
            slot_shift: 9,
            unit_shift: 0,
            size: sectors as u32,
            anchors: None,
            regions: 0xFF,
        },
    };
    sim.program(0, &header.encode()).unwrap();
    match Ftl::mount(NorSegments::new(sim, 512).unwrap(), FtlConfig::default()) {
        Err(flashfs::Error::NotFormatted(why)) => {
            assert!(why.contains("units per segment"), "{why}")
        }
        Err(e) => panic!("refused for another reason: {e}"),
        Ok(_) => panic!("mounted a volume of another layout"),
    }
    // The same header with the right layout mounts.
    let mut sim = dev.into_inner();
    for seg in 0..geo.segments {
        sim.erase(seg * 4).unwrap();
    }
    let right = SegHeader {
        volume: Volume {
            unit_shift: 2,
            ..header.volume
        },
        ..header
    };
    sim.program(0, &right.encode()).unwrap();
    Ftl::mount(NorSegments::new(sim, 512).unwrap(), FtlConfig::default()).unwrap();
}

/// A case the property above found once data checksums made damaged NOR slots unreadable:
/// the cleaner met slots that no longer read, and a segment's count of used slots ran past
/// its slots.
#[test]
fn damaged_nor_regression_used_slots() {
    let hits = [
        (15018309403244495172, 0),
        (5959654163827925296, 0),
        (6343590430232467927, 245),
        (11051124322418062060, 28),
        (9461006163738832968, 5),
        (9193046063421765965, 211),
        (14793750429843128045, 107),
    ];
    let store = damage(written_nor(), &hits);
    if let Ok(sim) = NorSim::open(store) {
        exercise(NorSegments::new(sim, 512).unwrap());
    }
}

/// A volume whose every segment header is damaged is reported corrupt, not blank: headers
/// that do not read whole say a volume was there (found by the torture on a 7-segment NOR
/// part where one segment held a header, damaged at rest). A part with no header at all is
/// not formatted.
#[test]
fn a_volume_whose_headers_are_all_damaged_is_reported_damaged() {
    use flash::NorFlash as _;
    use flashfs::Segments;
    let dev = Ftl::format(nor(true), FtlConfig::default())
        .unwrap()
        .into_device();
    let (geo, units) = (dev.geometry(), dev.units_per_segment());
    let unit = dev.flash().spec().unit_size as u64;
    // Reopened from its store, as a later mount finds it: the background erases are done.
    let mut sim = NorSim::open(dev.into_inner().into_store()).unwrap();
    let mut damaged = 0;
    for seg in 0..geo.segments {
        let base = u64::from(seg * units) * unit;
        let mut word = [0u8; 4];
        sim.read(base, &mut word).unwrap();
        if word == [0xFF; 4] {
            continue;
        }
        // A bit of the header's first word cleared, as retention loss would: its CRC fails.
        let i = word.iter().position(|&b| b != 0).unwrap();
        word[i] &= word[i] - 1;
        sim.corrupt_at_rest(base, &word).unwrap();
        damaged += 1;
    }
    assert!(damaged > 0);
    match Ftl::mount(NorSegments::new(sim, 512).unwrap(), FtlConfig::default()) {
        Err(flashfs::Error::Corrupt(why)) => {
            assert!(why.contains("no segment header reads whole"), "{why}")
        }
        Err(e) => panic!("refused for another reason: {e}"),
        Ok(_) => panic!("mounted a volume without a readable header"),
    }
    assert!(matches!(
        Ftl::mount(nor(true), FtlConfig::default()),
        Err(flashfs::Error::NotFormatted(_))
    ));
}
