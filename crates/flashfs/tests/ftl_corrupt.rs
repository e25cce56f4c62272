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
