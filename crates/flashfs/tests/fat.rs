//! A conventional file system (FAT, through the `fatfs` crate) runs unchanged on the block
//! device: it formats, stores a directory tree, and reads it back after a remount and after
//! power cuts at random points, where every file synced before the cut survives.

mod common;

use std::io::{Read, Write};

use common::pattern;
use flash::{Cells, EccSpec, ImageMeta, NandSim, NandSpec, NandTiming, Simulated};
use flashfs::stream::BlockStream;
use flashfs::{Ftl, FtlConfig, NandSegments};

fn spec() -> NandSpec {
    NandSpec {
        blocks: 160,
        pages_per_block: 32,
        page_size: 512,
        spare_size: 16,
        banks: 2,
        cells: Cells::Slc,
        ecc: EccSpec {
            codeword: 512,
            correctable: 1,
        },
        timing: NandTiming {
            read_ns: 16_000,
            program_ns: 200_000,
            erase_ns: 2_000_000,
            bus_byte_ns: 0,
        },
        endurance: 100_000,
        factory_bad_permille: 10,
    }
}

type Dev = NandSegments<NandSim>;

fn formatted() -> Dev {
    let sim = NandSim::new(spec(), ImageMeta::new("fat", 3)).unwrap();
    let ftl = Ftl::format(NandSegments::new(sim).unwrap(), FtlConfig::default()).unwrap();
    let mut stream = BlockStream::new(ftl);
    fatfs::format_volume(&mut stream, fatfs::FormatVolumeOptions::new()).unwrap();
    stream.into_inner().into_device()
}

/// The files the workload writes: (directory, name, size, version).
fn files() -> Vec<(String, String, usize, u32)> {
    (0..24u32)
        .map(|i| {
            (
                format!("dir{}", i % 4),
                format!("file{i}.bin"),
                [10, 700, 5000, 40_000][i as usize % 4],
                i,
            )
        })
        .collect()
}

/// Writes the files one by one, each synced; returns how many were synced before any error.
fn write_files(dev: Dev) -> (Dev, usize) {
    let mut done = 0;
    let ftl = Ftl::mount(dev, FtlConfig::default()).unwrap();
    let mut stream = BlockStream::new(ftl);
    let fs = match fatfs::FileSystem::new(&mut stream, fatfs::FsOptions::new()) {
        Ok(fs) => fs,
        Err(e) => panic!("FAT mount: {e}"),
    };
    let result: std::io::Result<()> = (|| {
        let root = fs.root_dir();
        for (dir, name, size, version) in files() {
            let d = match root.open_dir(&dir) {
                Ok(d) => d,
                Err(_) => root.create_dir(&dir)?,
            };
            let mut f = d.create_file(&name)?;
            f.truncate()?;
            f.write_all(&pattern(u64::from(version), version, size))?;
            f.flush()?;
            drop(f);
            done += 1;
        }
        Ok(())
    })();
    if result.is_ok() {
        // unmount writes what the FAT layer caches; the stream's flush makes it durable
        fs.unmount().unwrap();
        stream.flush().unwrap();
    } else {
        drop(fs);
    }
    (stream.into_inner().into_device(), done)
}

/// Checks the first `n` files read back exactly.
fn check_files(dev: Dev, n: usize) -> Dev {
    let ftl = Ftl::mount(dev, FtlConfig::default()).unwrap();
    let mut stream = BlockStream::new(ftl);
    let fs = fatfs::FileSystem::new(&mut stream, fatfs::FsOptions::new()).unwrap();
    {
        let root = fs.root_dir();
        for (dir, name, size, version) in files().into_iter().take(n) {
            let mut f = root
                .open_file(&format!("{dir}/{name}"))
                .unwrap_or_else(|e| panic!("{dir}/{name}: {e}"));
            let mut got = Vec::new();
            f.read_to_end(&mut got).unwrap();
            assert_eq!(
                got,
                pattern(u64::from(version), version, size),
                "{dir}/{name}"
            );
        }
    }
    drop(fs);
    stream.into_inner().into_device()
}

#[test]
fn fat_tree_round_trip_and_remount() {
    let (dev, done) = write_files(formatted());
    assert_eq!(done, files().len());
    let dev = check_files(dev, done);
    // A second session rewrites everything over the old tree.
    let (dev, done) = write_files(dev);
    assert_eq!(done, files().len());
    let dev = check_files(dev, done);
    assert!(dev.flash().stats().erases > 0);
}

#[test]
fn fat_files_synced_before_a_power_cut_survive() {
    let base = formatted();
    let (mut full, _) = write_files(base.clone());
    let total = full.flash_mut().ops() - base.flash().ops();
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for round in 0..24 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let k = x % total;
        let mut dev = base.clone();
        dev.flash_mut().schedule_cut(k, round % 2 == 1);
        let (mut dev, done) = write_files(dev);
        assert!(
            !dev.flash().is_powered(),
            "cut at {k} of {total} did not fire"
        );
        dev.flash_mut().reboot();
        check_files(dev, done);
    }
}
