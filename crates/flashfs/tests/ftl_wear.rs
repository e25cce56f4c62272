//! Wear leveling, bad blocks and running out of space on the block device.

mod common;

use common::*;
use flash::{FaultConfig, ImageMeta, NandSim, Simulated, Timebomb, WearModel};
use flashfs::log::segment::SegState;
use flashfs::{BlockDevice, Error, Ftl, FtlConfig, LogConfig, NandSegments};

fn spread(counts: &[u32]) -> u32 {
    counts.iter().max().unwrap() - counts.iter().min().unwrap()
}

/// Fills the device with cold data, then rewrites a handful of sectors many times.
fn static_workload(wear_spread: u32) -> (u32, Vec<u32>) {
    let config = FtlConfig {
        log: LogConfig {
            wear_spread,
            ..LogConfig::default()
        },
        ..FtlConfig::default()
    };
    let mut ftl = Ftl::format(nand(), config).unwrap();
    let ss = ftl.sector_size();
    let n = ftl.sectors();
    for k in 0..n {
        ftl.write(k, &pattern(k, 0, ss)).unwrap();
    }
    for round in 1..=1500u32 {
        let k = u64::from(round) % 4;
        ftl.write(k, &pattern(k, round, ss)).unwrap();
    }
    let mut buf = vec![0u8; ss];
    for k in 4..n {
        ftl.read(k, &mut buf).unwrap();
        assert_eq!(buf, pattern(k, 0, ss), "cold sector {k} survived the moves");
    }
    let counts = ftl.log().device().flash().erase_counts();
    (spread(&counts), counts)
}

#[test]
fn static_leveling_bounds_the_erase_spread() {
    let bound = 8;
    let (with, counts) = static_workload(bound);
    let (without, _) = static_workload(0);
    // Each move may overshoot the bound by the erases of one cleaning round.
    assert!(
        with <= bound + 4,
        "spread {with} with leveling, counts {counts:?}"
    );
    assert!(
        without > 2 * with,
        "leveling off: spread {without}, on: {with}"
    );
}

/// Fills a part rated for `endurance` cycles with cold data, then rewrites a handful of
/// sectors until the most worn segment has `until` erases; returns the erase counts.
fn wear_until(until: u32, rated_cycles: u32, endurance: u32) -> Vec<u32> {
    let config = FtlConfig {
        log: LogConfig {
            wear_spread: 8,
            rated_cycles,
            ..LogConfig::default()
        },
        ..FtlConfig::default()
    };
    let spec = flash::NandSpec {
        endurance,
        ..nand_spec()
    };
    let sim = NandSim::new(spec, ImageMeta::new("rated", 1)).unwrap();
    let mut ftl = Ftl::format(NandSegments::new(sim).unwrap(), config).unwrap();
    let ss = ftl.sector_size();
    for k in 0..ftl.sectors() {
        ftl.write(k, &pattern(k, 0, ss)).unwrap();
    }
    let mut round = 0u32;
    while ftl.log().segments().iter().map(|s| s.erase_count).max() < Some(until) {
        round += 1;
        let k = u64::from(round) % 4;
        ftl.write(k, &pattern(k, round, ss)).unwrap();
    }
    ftl.log().device().flash().erase_counts()
}

/// Near the part's rated cycles the leveller narrows the spread it allows to the cycles
/// left, so when the first segment wears out the others are nearly there too. The rating
/// is the configuration's, or else the part's own.
#[test]
fn leveling_narrows_near_the_rated_cycles() {
    let rated = 40;
    let with = wear_until(rated, rated, 100_000);
    assert_eq!(wear_until(rated, 0, rated), with, "the part's own rating");
    let without = wear_until(rated, 0, 100_000);
    // One cleaning round may overshoot, as in the test above.
    assert!(spread(&with) <= 4, "rated {rated}: counts {with:?}");
    assert!(
        spread(&without) >= spread(&with) + 4,
        "unrated: counts {without:?}"
    );
    // The part did more work before its first segment wore out.
    let total = |c: &[u32]| c.iter().sum::<u32>();
    assert!(total(&with) > total(&without), "{with:?} vs {without:?}");
}

#[test]
fn factory_bad_blocks_are_never_used() {
    let spec = flash::NandSpec {
        factory_bad_permille: 100,
        blocks: 48,
        ..nand_spec()
    };
    let sim = NandSim::new(spec, ImageMeta::new("bad", 7)).unwrap();
    let bad: Vec<u32> = (0..spec.blocks)
        .filter(|&b| flash::NandFlash::is_bad(&mut sim.clone(), b).unwrap())
        .collect();
    assert!(!bad.is_empty());
    let mut ftl = Ftl::format(NandSegments::new(sim).unwrap(), FtlConfig::default()).unwrap();
    let ss = ftl.sector_size();
    for round in 0..6u32 {
        for k in 0..ftl.sectors() {
            ftl.write(k, &pattern(k, round, ss)).unwrap();
        }
    }
    let counts = ftl.log().device().flash().erase_counts();
    for b in &bad {
        assert_eq!(counts[*b as usize], 0, "bad block {b} was erased");
    }
    assert!(ftl.log().good_segments() as usize <= spec.blocks as usize - bad.len());
}

/// Blocks that wear out mid-run are retired; acknowledged data survives; when the spares
/// run out the device reports an error instead of losing data or hanging.
#[test]
fn worn_out_blocks_are_retired_without_losing_data() {
    let mut sim = NandSim::new(
        nand_spec(),
        ImageMeta {
            wear: WearModel::Never,
            ..ImageMeta::new("t", 1)
        },
    )
    .unwrap();
    let timebombs = (2..8)
        .map(|b| Timebomb {
            block: b,
            at_erases: 3 + b,
        })
        .collect();
    sim.set_faults(FaultConfig {
        timebombs,
        ..FaultConfig::default()
    });
    let config = FtlConfig {
        sectors: Some(120),
        ..FtlConfig::default()
    };
    let mut ftl = Ftl::format(NandSegments::new(sim).unwrap(), config).unwrap();
    let ss = ftl.sector_size();
    let mut version = vec![0u32; 120];
    for round in 1..=40u32 {
        for k in 0..120u64 {
            ftl.write(k, &pattern(k, round, ss)).unwrap();
            version[k as usize] = round;
        }
    }
    // Every block whose time came was retired. A block may outlive its bomb by staying the
    // open segment of a head that never fills (sequential overwrites leave the cleaner
    // nothing to copy), so at least five of the six.
    let counts = ftl.log().device().flash().erase_counts();
    let segs = ftl.log().segments();
    for b in 2..8usize {
        if counts[b] >= 3 + b as u32 {
            assert_eq!(segs[b].state, SegState::Bad, "block {b}, counts {counts:?}");
        }
    }
    assert!(
        ftl.log().stats().retired >= 5,
        "retired {}",
        ftl.log().stats().retired
    );
    let mut ftl = Ftl::mount(ftl.into_device(), config).unwrap();
    let mut buf = vec![0u8; ss];
    for k in 0..120u64 {
        ftl.read(k, &mut buf).unwrap();
        assert_eq!(buf, pattern(k, version[k as usize], ss), "sector {k}");
    }
}

#[test]
fn running_out_of_spares_is_an_error_not_a_hang() {
    let mut sim = NandSim::new(
        nand_spec(),
        ImageMeta {
            wear: WearModel::AtLimit,
            ..ImageMeta::new("t", 1)
        },
    )
    .unwrap();
    // Every block wears out quickly.
    sim.set_faults(FaultConfig {
        timebombs: (0..24)
            .map(|b| Timebomb {
                block: b,
                at_erases: 6,
            })
            .collect(),
        ..FaultConfig::default()
    });
    let mut ftl = Ftl::format(NandSegments::new(sim).unwrap(), FtlConfig::default()).unwrap();
    let ss = ftl.sector_size();
    let n = ftl.sectors();
    let mut failed = None;
    'outer: for round in 1..=200u32 {
        for k in 0..n {
            if let Err(e) = ftl.write(k, &pattern(k, round, ss)) {
                failed = Some(e);
                break 'outer;
            }
        }
    }
    let e = failed.expect("the device wore out");
    assert!(matches!(e, Error::NoSpace | Error::ReadOnly), "{e}");
    assert!(e.errno() == 28 || e.errno() == 30);
}

#[test]
fn exported_size_is_checked() {
    let too_big = FtlConfig {
        sectors: Some(1_000_000),
        ..FtlConfig::default()
    };
    assert!(matches!(
        Ftl::format(nand(), too_big),
        Err(Error::InvalidArgument(_))
    ));
    let ftl = Ftl::format(nand(), FtlConfig::default()).unwrap();
    // The reserve and one segment per head stay out of the user's reach.
    let geo = ftl.log().geometry();
    assert!(ftl.sectors() < u64::from(geo.segments * geo.slots));
}

/// A page that becomes unreadable: its sector fails with EIO (also after a remount, never
/// showing an older version), its block is retired once the cleaner has moved everything
/// else out, and writing the sector again heals it.
#[test]
fn an_unreadable_page_is_reported_and_its_block_retired() {
    let mut ftl = Ftl::format(nand(), FtlConfig::default()).unwrap();
    let ss = ftl.sector_size();
    let n = ftl.sectors();
    // Two versions of everything, so an older copy of each sector exists somewhere.
    for round in 0..2u32 {
        for k in 0..n {
            ftl.write(k, &pattern(k, round, ss)).unwrap();
        }
    }
    let victim = ftl
        .log()
        .segments()
        .iter()
        .position(|s| s.state == flashfs::log::segment::SegState::Full && s.live() > 2)
        .unwrap() as u32;
    // Push slot 1 of that segment past what ECC corrects.
    let dev = ftl.log_mut().device_mut();
    let at = dev.slot_page(victim, 1);
    dev.flash_mut().inject_bit_errors(at, 30).unwrap();
    let mut buf = vec![0u8; ss];
    let mut failed = Vec::new();
    for k in 0..n {
        match ftl.read(k, &mut buf) {
            Ok(()) => assert_eq!(buf, pattern(k, 1, ss), "sector {k}"),
            Err(e) if e.is_unreadable() => failed.push(k),
            Err(e) => panic!("sector {k}: {e}"),
        }
    }
    assert_eq!(
        failed.len(),
        1,
        "exactly the damaged sector fails: {failed:?}"
    );
    let lost = failed[0];
    ftl.gc().unwrap();
    assert!(ftl.log().stats().retired >= 1, "the block was retired");
    let mut ftl = Ftl::mount(ftl.into_device(), FtlConfig::default()).unwrap();
    for k in 0..n {
        let r = ftl.read(k, &mut buf);
        if k == lost {
            assert!(
                matches!(r, Err(Error::Damaged(d)) if d.sector == Some(k)),
                "still lost after the remount, not an old version: {r:?}"
            );
        } else {
            r.unwrap();
            assert_eq!(buf, pattern(k, 1, ss), "sector {k} after the remount");
        }
    }
    ftl.write(lost, &pattern(lost, 7, ss)).unwrap();
    ftl.read(lost, &mut buf).unwrap();
    assert_eq!(buf, pattern(lost, 7, ss));
}
