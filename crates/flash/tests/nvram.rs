//! NVRAM: byte-addressable, written in place, no erase; a torn write leaves a prefix.

mod common;

use common::*;
use flash::{FaultConfig, FlashError, ImageMeta, Nvram, NvramSim, NvramSpec, Simulated};

fn fram() -> NvramSim {
    NvramSim::new(small_nvram(), ImageMeta::new("fram", 1)).unwrap()
}

fn read(n: &mut NvramSim, addr: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    n.read(addr, &mut b).unwrap();
    b
}

#[test]
fn writes_are_in_place_at_any_address() {
    let mut n = fram();
    n.write(1, &[0xFF; 5]).unwrap();
    n.write(2, &[0x00, 0x12]).unwrap();
    assert_eq!(read(&mut n, 0, 7), [0, 0xFF, 0x00, 0x12, 0xFF, 0xFF, 0]);
    // Bits go both ways: no erase needed.
    n.write(2, &[0xFF]).unwrap();
    assert_eq!(read(&mut n, 2, 1), [0xFF]);
    n.write(1023, &[7]).unwrap();
    n.write(0, &[]).unwrap();
    assert_eq!(n.stats().programs, 5);
    assert_eq!(n.ops(), 5);
}

#[test]
fn out_of_range_is_refused() {
    let mut n = fram();
    let oor = |addr, len| Err(FlashError::OutOfRange { addr, len });
    assert_eq!(n.write(1024, &[1]), oor(1024, 1));
    assert_eq!(n.write(1020, &[1; 5]), oor(1020, 5));
    assert_eq!(n.write(u64::MAX, &[1; 2]), oor(u64::MAX, 2));
    assert_eq!(n.read(1023, &mut [0; 2]), oor(1023, 2));
    assert_eq!(n.ops(), 0);
    let bad = NvramSpec {
        size: 0,
        ..small_nvram()
    };
    assert!(matches!(
        NvramSim::new(bad, ImageMeta::new("x", 1)),
        Err(FlashError::BadSpec(_))
    ));
    let huge = NvramSpec {
        size: u64::MAX,
        ..small_nvram()
    };
    assert!(matches!(
        NvramSim::new(huge, ImageMeta::new("x", 1)),
        Err(FlashError::BadSpec(_))
    ));
}

#[test]
fn a_torn_write_leaves_a_prefix() {
    let mut lengths = std::collections::BTreeSet::new();
    for seed in 0..24 {
        let mut n = fram();
        n.write(0, &[0x11; 32]).unwrap();
        n.set_faults(FaultConfig {
            seed,
            ..Default::default()
        });
        n.schedule_cut(0, true);
        assert_eq!(n.write(0, &[0x22; 32]), Err(FlashError::PowerLoss));
        assert_eq!(n.read(0, &mut [0; 1]), Err(FlashError::PowerLoss));
        n.reboot();
        let got = read(&mut n, 0, 32);
        let k = got.iter().take_while(|&&b| b == 0x22).count();
        assert!(got[k..].iter().all(|&b| b == 0x11), "seed {seed}: {got:?}");
        lengths.insert(k);
    }
    assert!(lengths.len() > 3, "{lengths:?}");
}

#[test]
fn a_cut_before_a_write_leaves_it_out() {
    let mut n = fram();
    n.write(0, b"one").unwrap();
    n.schedule_cut(1, false);
    n.write(3, b"two").unwrap();
    assert_eq!(n.write(6, b"three"), Err(FlashError::PowerLoss));
    n.reboot();
    assert_eq!(read(&mut n, 0, 11), b"onetwo\0\0\0\0\0");
}

#[test]
fn buffered_writes_lost_at_a_cut_leave_the_newest_surviving_bytes() {
    // Overlapping writes; whichever are lost, each byte holds the value of the latest
    // surviving write that covered it (or its old value).
    let mut some_lost = false;
    for seed in 0..24 {
        let mut n = fram();
        n.set_faults(FaultConfig {
            seed,
            reorder_window: 8,
            ..Default::default()
        });
        let writes: [(u64, u8, usize); 4] = [(0, 1, 8), (4, 2, 8), (2, 3, 4), (10, 4, 4)];
        for &(at, v, len) in &writes {
            n.write(at, &vec![v; len]).unwrap();
        }
        n.power_cut().unwrap();
        n.reboot();
        let got = read(&mut n, 0, 16);
        // Find a subset of surviving writes that explains the result.
        let explained = (0..16u32).any(|kept| {
            let mut want = [0u8; 16];
            for (i, &(at, v, len)) in writes.iter().enumerate() {
                if kept & (1 << i) != 0 {
                    want[at as usize..at as usize + len].fill(v);
                }
            }
            want[..] == got[..]
        });
        assert!(explained, "seed {seed}: {got:?}");
        some_lost |= got[..] != [1, 1, 3, 3, 3, 3, 2, 2, 2, 2, 4, 4, 4, 4, 0, 0];
    }
    assert!(some_lost);
}
