//! The block device's basic contract on NOR and NAND: what is written reads back, before and
//! after a remount; trims read as zeros; the cleaner keeps a full device writable.

mod common;

use common::*;
use flashfs::{BlockDevice, Error, Ftl, FtlConfig, Segments};

fn exercise<D: Segments>(dev: D, remount: impl Fn(D) -> D) {
    let mut ftl = Ftl::format(dev, FtlConfig::default()).unwrap();
    let ss = ftl.sector_size();
    let n = ftl.sectors();
    assert!(n > 10, "{n} sectors");
    let mut version = vec![0u32; n as usize];
    // Fill, then overwrite a hot subset many times so the cleaner must run.
    for k in 0..n {
        ftl.write(k, &pattern(k, 0, ss)).unwrap();
    }
    for round in 1..=20u32 {
        for k in (0..n).filter(|k| k % 3 == 0) {
            ftl.write(k, &pattern(k, round, ss)).unwrap();
            version[k as usize] = round;
        }
    }
    ftl.trim(1, 1).unwrap();
    ftl.flush().unwrap();
    assert!(ftl.log().stats().erases > 0);
    let check = |ftl: &mut Ftl<D>, version: &[u32]| {
        let mut buf = vec![0u8; ss];
        for k in 0..n {
            ftl.read(k, &mut buf).unwrap();
            if k == 1 {
                assert!(buf.iter().all(|&b| b == 0), "trimmed sector reads zeros");
            } else {
                assert_eq!(buf, pattern(k, version[k as usize], ss), "sector {k}");
            }
        }
    };
    check(&mut ftl, &version);
    let dev = remount(ftl.into_device());
    let mut ftl = Ftl::mount(dev, FtlConfig::default()).unwrap();
    assert_eq!(ftl.sectors(), n);
    check(&mut ftl, &version);
    // Still writable after the remount, and the trim persisted.
    for k in 0..n {
        if k != 1 {
            ftl.write(k, &pattern(k, 99, ss)).unwrap();
        }
    }
    let mut buf = vec![0u8; ss];
    ftl.read(n - 1, &mut buf).unwrap();
    assert_eq!(buf, pattern(n - 1, 99, ss));
    assert!(matches!(
        ftl.read(n, &mut buf),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        ftl.write(0, &buf[..ss - 1]),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn nor_round_trip_and_remount() {
    exercise(nor(true), |d| d);
}

#[test]
fn nor_without_reprogramming() {
    exercise(nor(false), |d| d);
}

#[test]
fn nand_round_trip_and_remount() {
    exercise(nand(), |d| d);
}

#[test]
fn mount_of_a_blank_device_is_refused() {
    assert!(matches!(
        Ftl::mount(nand(), FtlConfig::default()),
        Err(Error::NotFormatted(_))
    ));
}

/// The image is the truth: a block device written through a sparse image file, closed, and
/// reopened from the path by a fresh simulator reads back everything that was flushed.
#[test]
fn reopen_from_an_image_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ftl.img");
    let spec = nand_spec();
    let (n, ss) = {
        let sim =
            flash::NandSim::create(&path, spec, flash::ImageMeta::new("test-nand", 5)).unwrap();
        let mut ftl = Ftl::format(
            flashfs::NandSegments::new(sim).unwrap(),
            FtlConfig::default(),
        )
        .unwrap();
        let (n, ss) = (ftl.sectors(), ftl.sector_size());
        for round in 0..3u32 {
            for k in 0..n {
                ftl.write(k, &pattern(k, round, ss)).unwrap();
            }
        }
        ftl.trim(0, 2).unwrap();
        ftl.flush().unwrap();
        (n, ss)
    };
    let store = flash::store::FileStore::open(&path).unwrap();
    let sim = flash::NandSim::open(store).unwrap();
    let mut ftl = Ftl::mount(
        flashfs::NandSegments::new(sim).unwrap(),
        FtlConfig::default(),
    )
    .unwrap();
    let mut buf = vec![0u8; ss];
    for k in 0..n {
        ftl.read(k, &mut buf).unwrap();
        if k < 2 {
            assert!(buf.iter().all(|&b| b == 0), "trimmed sector {k}");
        } else {
            assert_eq!(buf, pattern(k, 2, ss), "sector {k}");
        }
    }
}
