//! FlexFS's regions on MLC NAND: which segments go to SLC mode, what the volume holds in
//! each setting, and the cleaner's migration from SLC to MLC — checked on the simulator's
//! own record of each block's mode and through remounts, by scan and from a checkpoint.

mod common;

use common::*;
use flash::{CellMode, MlcNand, NandSim, NandSpec};
use flashfs::{BlockDevice, Ftl, FtlConfig, NandSegments, Regions};

fn mlc_spec(blocks: u32) -> NandSpec {
    NandSpec {
        blocks,
        cells: flash::Cells::Mlc {
            slc_mode: flash::NandTiming {
                read_ns: 20_000,
                program_ns: 200_000,
                erase_ns: 1_500_000,
                bus_byte_ns: 0,
            },
        },
        timing: flash::NandTiming {
            read_ns: 40_000,
            program_ns: 800_000,
            erase_ns: 1_500_000,
            bus_byte_ns: 0,
        },
        ..nand_spec()
    }
}

fn mlc(blocks: u32) -> NandSegments<NandSim> {
    let sim = NandSim::new(mlc_spec(blocks), flash::ImageMeta::new("test-mlc", 1)).unwrap();
    NandSegments::new(sim).unwrap()
}

fn config(regions: Regions) -> FtlConfig {
    let mut cfg = FtlConfig::default();
    cfg.log.regions = Some(regions);
    cfg
}

/// Every block of the segments in use, by the simulator's record: how many are in SLC mode
/// and how many in MLC mode.
fn modes_on_flash(ftl: &Ftl<NandSegments<NandSim>>) -> (u32, u32) {
    let log = ftl.log();
    let sim = log.device().flash();
    let mut slc = 0;
    let mut mlc = 0;
    for (seg, s) in log.segments().iter().enumerate() {
        if !s.in_use() {
            continue;
        }
        match sim.mode(seg as u32) {
            CellMode::Slc => slc += 1,
            CellMode::Mlc => mlc += 1,
        }
        // The log's record and the part's agree.
        assert_eq!(
            s.slc(),
            sim.mode(seg as u32) == CellMode::Slc,
            "segment {seg}"
        );
    }
    (slc, mlc)
}

/// Writes every sector `rounds` times, then reads each back.
fn fill(ftl: &mut Ftl<NandSegments<NandSim>>, rounds: u32) {
    let ss = ftl.sector_size();
    for v in 0..rounds {
        for s in 0..ftl.sectors() {
            ftl.write(s, &pattern(s, v, ss)).unwrap();
        }
        ftl.flush().unwrap();
    }
}

fn check(ftl: &mut Ftl<NandSegments<NandSim>>, version: u32) {
    let ss = ftl.sector_size();
    let mut buf = vec![0u8; ss];
    for s in 0..ftl.sectors() {
        ftl.read(s, &mut buf).unwrap();
        assert_eq!(buf, pattern(s, version, ss), "sector {s}");
    }
}

#[test]
fn mlc_only_writes_no_slc_segment() {
    let cfg = config(Regions::MlcOnly);
    let mut ftl = Ftl::format(mlc(24), cfg).unwrap();
    fill(&mut ftl, 3);
    assert_eq!(modes_on_flash(&ftl).0, 0);
    assert_eq!(ftl.log().region_segments().0, 0);
    assert_eq!(ftl.log().stats().migrated_slots, 0);
}

#[test]
fn slc_only_holds_half_and_writes_only_slc_segments() {
    let mlc_sectors = Ftl::format(mlc(24), config(Regions::MlcOnly))
        .unwrap()
        .sectors();
    let cfg = config(Regions::SlcOnly);
    let mut ftl = Ftl::format(mlc(24), cfg).unwrap();
    // 16 pages a block: 14 slots in MLC mode (the header's partner is never written), 7
    // LSB slots in SLC mode.
    assert!(
        ftl.sectors() * 2 <= mlc_sectors && ftl.sectors() * 3 >= mlc_sectors,
        "SLC volume {} sectors against MLC {mlc_sectors}",
        ftl.sectors()
    );
    fill(&mut ftl, 4);
    let (slc, mlc_segs) = modes_on_flash(&ftl);
    assert!(slc > 0);
    assert_eq!(mlc_segs, 0);
    check(&mut ftl, 3);
    let mut ftl = Ftl::mount(ftl.into_device(), cfg).unwrap();
    check(&mut ftl, 3);
}

#[test]
fn the_baseline_writes_to_slc_and_migrates_to_mlc_when_space_runs_short() {
    let cfg = config(Regions::Baseline);
    let mut ftl = Ftl::format(mlc(24), cfg).unwrap();
    let mlc_sectors = Ftl::format(mlc(24), config(Regions::MlcOnly))
        .unwrap()
        .sectors();
    // Sized for MLC: SLC is where data arrives, not where it stays.
    assert_eq!(ftl.sectors(), mlc_sectors);
    // A tenth of the volume fits in SLC segments: nothing migrates yet.
    let ss = ftl.sector_size();
    let few = ftl.sectors() / 10;
    for s in 0..few {
        ftl.write(s, &pattern(s, 0, ss)).unwrap();
    }
    ftl.flush().unwrap();
    assert_eq!(ftl.log().stats().migrated_slots, 0);
    let (slc, _) = modes_on_flash(&ftl);
    assert!(slc > 0, "the writes went to SLC segments");
    // The whole volume does not: the cleaner moves SLC data to MLC segments.
    fill(&mut ftl, 3);
    let stats = *ftl.log().stats();
    assert!(stats.migrated_slots > 0, "{stats:?}");
    let (slc, mlc_segs) = modes_on_flash(&ftl);
    assert!(slc > 0 && mlc_segs > 0, "slc {slc} mlc {mlc_segs}");
    assert_eq!(ftl.log().region_segments(), (slc, mlc_segs));
    check(&mut ftl, 2);
    // A mount by scan finds each segment's mode in its header.
    let mut ftl = Ftl::mount(ftl.into_device(), cfg).unwrap();
    assert_eq!(modes_on_flash(&ftl), (slc, mlc_segs));
    check(&mut ftl, 2);
    // And the volume keeps working across both regions.
    fill(&mut ftl, 2);
    check(&mut ftl, 1);
}

#[test]
fn a_checkpoint_keeps_each_segments_mode() {
    let mut cfg = config(Regions::Baseline);
    cfg.log.checkpoint_min_segments = 64;
    let mut ftl = Ftl::format(mlc(64), cfg).unwrap();
    assert!(ftl.log().volume().anchors.is_some(), "keeps checkpoints");
    fill(&mut ftl, 3);
    let modes = modes_on_flash(&ftl);
    assert!(modes.0 > 0 && modes.1 > 0, "{modes:?}");
    let dev = ftl.close().unwrap();
    let mut ftl = Ftl::mount(dev, cfg).unwrap();
    assert!(ftl.log().restored(), "mounted from the checkpoint");
    // The table's record of each segment's mode agrees with the part's (the close may
    // have cleaned and opened segments since the counts above).
    let modes = modes_on_flash(&ftl);
    assert!(modes.0 > 0 && modes.1 > 0, "{modes:?}");
    check(&mut ftl, 2);
    fill(&mut ftl, 1);
    check(&mut ftl, 0);
}

#[test]
fn background_migration_moves_slc_data_to_mlc_in_idle_time() {
    let cfg = config(Regions::Background);
    // Enough free segments that the cleaner has no need to run: whatever moves, moves
    // because the device is idle.
    let mut ftl = Ftl::format(mlc(64), cfg).unwrap();
    let ss = ftl.sector_size();
    let some = ftl.sectors() / 10;
    for s in 0..some {
        ftl.write(s, &pattern(s, 0, ss)).unwrap();
    }
    ftl.flush().unwrap();
    let (slc, _) = modes_on_flash(&ftl);
    assert!(slc > 2, "full SLC segments before idling: {slc}");
    assert_eq!(ftl.log().stats().migrated_slots, 0);
    // Less idle time than the wait migrates nothing.
    ftl.idle(std::time::Duration::from_millis(900)).unwrap();
    assert_eq!(ftl.log().stats().migrated_slots, 0);
    ftl.idle(std::time::Duration::from_secs(60)).unwrap();
    assert!(ftl.log().stats().migrated_slots >= some / 2);
    // What is left in SLC is the open heads' segments.
    let (slc, mlc_segs) = modes_on_flash(&ftl);
    assert!(slc <= 2 && mlc_segs > 0, "slc {slc} mlc {mlc_segs}");
    for s in some..ftl.sectors() {
        ftl.write(s, &pattern(s, 0, ss)).unwrap();
    }
    ftl.flush().unwrap();
    let mut ftl = Ftl::mount(ftl.into_device(), cfg).unwrap();
    check(&mut ftl, 0);
}

#[test]
fn the_volume_records_its_setting_and_a_mount_may_override_it() {
    let mut ftl = Ftl::format(mlc(24), config(Regions::Baseline)).unwrap();
    fill(&mut ftl, 1);
    // Mounted without a setting: the volume's.
    let ftl = Ftl::mount(ftl.into_device(), FtlConfig::default()).unwrap();
    assert_eq!(ftl.log().regions(), Regions::Baseline);
    // Overridden for a session: its new segments are MLC, and the segments it opens
    // still belong to the volume (their headers repeat what the format recorded).
    let dev = ftl.into_device();
    let mut ftl = Ftl::mount(dev, config(Regions::MlcOnly)).unwrap();
    assert_eq!(ftl.log().regions(), Regions::MlcOnly);
    fill(&mut ftl, 3);
    check(&mut ftl, 2);
    let mut ftl = Ftl::mount(ftl.into_device(), FtlConfig::default()).unwrap();
    assert_eq!(ftl.log().regions(), Regions::Baseline);
    check(&mut ftl, 2);
    // A volume formatted without a setting gets the default of a part with an SLC mode;
    // on other parts it is MLC-only.
    let ftl = Ftl::format(mlc(24), FtlConfig::default()).unwrap();
    assert_eq!(ftl.log().regions(), Regions::MLC_DEFAULT);
    let slc_part = NandSim::new(nand_spec(), flash::ImageMeta::new("test-slc", 1)).unwrap();
    let ftl = Ftl::format(NandSegments::new(slc_part).unwrap(), FtlConfig::default()).unwrap();
    assert_eq!(ftl.log().regions(), Regions::MlcOnly);
}

/// Writes the first `n` sectors once, as version `v`, and flushes.
fn write_some(ftl: &mut Ftl<NandSegments<NandSim>>, n: u64, v: u32) {
    let ss = ftl.sector_size();
    for s in 0..n {
        ftl.write(s, &pattern(s, v, ss)).unwrap();
    }
    ftl.flush().unwrap();
}

#[test]
fn idle_time_given_in_slices_makes_one_window() {
    use std::time::Duration;
    let mut ftl = Ftl::format(mlc(64), config(Regions::Background)).unwrap();
    let some = ftl.sectors() / 10;
    write_some(&mut ftl, some, 0);
    // Two slices of 0.6 s with a write between: two windows, neither past the 1 s wait.
    ftl.idle(Duration::from_millis(600)).unwrap();
    ftl.write(0, &pattern(0, 1, ftl.sector_size())).unwrap();
    ftl.flush().unwrap();
    ftl.idle(Duration::from_millis(600)).unwrap();
    assert_eq!(ftl.log().stats().migrated_slots, 0);
    // Slices with nothing between add up: past the wait, migration runs.
    for _ in 0..20 {
        ftl.idle(Duration::from_millis(200)).unwrap();
    }
    assert!(ftl.log().stats().migrated_slots > 0);
}

#[test]
fn a_smaller_migration_share_moves_less_in_the_same_idle_time() {
    use std::time::Duration;
    let migrated = |share: u8| {
        let mut cfg = config(Regions::Background);
        cfg.log.migration_share = share;
        let mut ftl = Ftl::format(mlc(64), cfg).unwrap();
        let some = ftl.sectors() / 4;
        write_some(&mut ftl, some, 0);
        ftl.idle(Duration::from_millis(1300)).unwrap();
        ftl.log().stats().migrated_slots
    };
    let (full, tenth) = (migrated(100), migrated(10));
    assert!(tenth > 0 && full > 4 * tenth, "100%: {full}, 10%: {tenth}");
}

#[test]
fn locality_aware_migration_moves_rewritten_data_last() {
    use std::time::Duration;
    let mut cfg = config(Regions::Locality);
    // The block device tells rewritten sectors apart only with hot/cold separation.
    cfg.log.hot_cold = true;
    let mut ftl = Ftl::format(mlc(128), cfg).unwrap();
    let n = ftl.sectors() / 3;
    write_some(&mut ftl, n, 0);
    for v in 1..6 {
        write_some(&mut ftl, n / 20, v);
    }
    let hot = |ftl: &Ftl<NandSegments<NandSim>>| {
        ftl.log()
            .segments()
            .iter()
            .filter(|s| s.in_use() && s.hot())
            .count()
    };
    let before = hot(&ftl);
    assert!(
        before > 0,
        "rewritten sectors opened SLC segments of their own"
    );
    // A window long enough for some migration, not all: cold segments go first.
    ftl.idle(Duration::from_millis(1400)).unwrap();
    assert!(ftl.log().stats().migrated_slots > 0);
    assert_eq!(
        hot(&ftl),
        before,
        "no hot segment migrated while cold ones wait"
    );
    // Given time, everything is migrated, hot data last.
    ftl.idle(Duration::from_secs(120)).unwrap();
    assert!(hot(&ftl) <= 1, "only an open head may remain");
    let mut ftl = Ftl::mount(ftl.into_device(), cfg).unwrap();
    let ss = ftl.sector_size();
    let mut buf = vec![0u8; ss];
    for s in 0..n {
        ftl.read(s, &mut buf).unwrap();
        let v = if s < n / 20 { 5 } else { 0 };
        assert_eq!(buf, pattern(s, v, ss), "sector {s}");
    }
}

#[test]
fn a_lifetime_holds_the_slc_share_to_the_wear_budget() {
    let run = |rated: u32| {
        let ftl = decided(budgeted(rated));
        (ftl.log().wear_share(), ftl.log().stats().erases)
    };
    let (tight, tight_erases) = run(4);
    let (loose, loose_erases) = run(100_000);
    assert_eq!(
        loose, 1.0,
        "a part rated for many cycles sends everything to SLC"
    );
    assert!(tight < 0.5, "γ = {tight}");
    assert!(
        tight_erases < loose_erases,
        "{tight_erases} vs {loose_erases}"
    );
}

/// On a volume too full ever to have `clean_start` free segments, idle cleaning takes only
/// victims with more dead space than its own erases kill (an MSB page skipped in each open
/// segment at every erase): before, it cleaned segments of a slot or two of dead space
/// over and over, 4,093 erases in a minute of idle time on this part, wearing it for as
/// long as it idled — a quiet FUSE mount, say.
#[test]
fn idle_time_on_a_full_volume_settles() {
    use std::time::Duration;
    for regions in [Regions::Locality, Regions::MlcOnly] {
        let mut cfg = config(regions);
        cfg.log.checkpoint_min_segments = 0;
        cfg.map_cache = 1;
        let mut ftl = Ftl::format(mlc(24), cfg).unwrap();
        let n = ftl.sectors();
        write_some(&mut ftl, n, 0);
        write_some(&mut ftl, n / 3, 1);
        ftl.idle(Duration::from_secs(60)).unwrap();
        let erases = ftl.log().stats().erases;
        let used = ftl.idle(Duration::from_secs(60)).unwrap();
        let more = ftl.log().stats().erases - erases;
        assert!(more <= 2, "{regions:?}: {more} erases with nothing to gain");
        assert!(
            used < Duration::from_secs(1),
            "{regions:?}: {used:?} of work"
        );
    }
}

/// A volume written in four windows of half its sectors with idle time after each, then
/// a sector more: under [`budgeted`], both shares are decided and data migrated.
fn decided(cfg: FtlConfig) -> Ftl<NandSegments<NandSim>> {
    use std::time::Duration;
    let mut ftl = Ftl::format(mlc(64), cfg).unwrap();
    let n = ftl.sectors() / 2;
    for v in 0..4 {
        write_some(&mut ftl, n, v);
        ftl.idle(Duration::from_secs(10)).unwrap();
    }
    write_some(&mut ftl, 1, 9);
    ftl
}

/// Dynamic allocation under a wear budget (a lifetime of 100 s in windows of 10 s) on a
/// part rated for `rated` cycles.
fn budgeted(rated: u32) -> FtlConfig {
    let mut cfg = config(Regions::Dynamic);
    cfg.log.rated_cycles = rated;
    cfg.log.lifetime = Some(flashfs::Lifetime {
        min: std::time::Duration::from_secs(100),
        window: std::time::Duration::from_secs(10),
    });
    cfg
}

/// The block device's counters record keeps what migration moved and FlexFS's shares
/// across remounts (what `flashfs info` shows), and a session that decides neither share
/// leaves the recorded ones as they were.
#[test]
fn the_counters_record_keeps_what_migration_moved_and_the_shares() {
    let cfg = budgeted(4);
    let ftl = decided(cfg);
    let ss = ftl.sector_size() as u64;
    let migrated = ftl.log().stats().migrated_slots;
    assert!(migrated > 0);
    let before = ftl.lifetime().unwrap();
    assert_eq!(before.migrated_bytes, migrated * ss);
    let shares = before.shares.expect("an MLC part has shares");
    assert!(shares.gamma() < 0.5, "γ = {}", shares.gamma());
    let wear = flashfs::Shares::new(1.0, ftl.log().wear_share());
    assert_eq!(shares.gamma(), wear.gamma(), "γ is the wear budget's");
    let mut ftl = Ftl::mount(ftl.close().unwrap(), cfg).unwrap();
    let after = ftl.lifetime().unwrap();
    assert!(ftl.lifetime_complete());
    assert_eq!(
        (after.migrated_bytes, after.shares, after.flash_bytes),
        (before.migrated_bytes, Some(shares), before.flash_bytes + ss),
        "the close wrote one record"
    );
    // A session that reads and idles a little decides nothing: the shares stand.
    let mut buf = vec![0u8; ss as usize];
    for s in 0..ftl.sectors() / 2 {
        ftl.read(s, &mut buf).unwrap();
        assert_eq!(buf, pattern(s, if s == 0 { 9 } else { 3 }, ss as usize));
    }
    ftl.idle(std::time::Duration::from_millis(500)).unwrap();
    let ftl = Ftl::mount(ftl.close().unwrap(), cfg).unwrap();
    assert_eq!(ftl.lifetime().unwrap().shares, Some(shares));
    // On a part without an SLC mode there are none, and nothing migrates.
    let slc_part = NandSim::new(nand_spec(), flash::ImageMeta::new("test-slc", 1)).unwrap();
    let mut ftl = Ftl::format(NandSegments::new(slc_part).unwrap(), FtlConfig::default()).unwrap();
    fill(&mut ftl, 2);
    let ftl = Ftl::mount(ftl.close().unwrap(), FtlConfig::default()).unwrap();
    let l = ftl.lifetime().unwrap();
    assert_eq!((l.migrated_bytes, l.shares), (0, None));
}

/// The file system's superblock keeps them too, and an unmount after idle time that
/// migrated (nothing else changed since the last commit) records what it moved.
#[test]
fn the_superblock_keeps_what_migration_moved_and_the_shares() {
    use flashfs::fs::ROOT_INO;
    use flashfs::{Fs, FsConfig};
    let fs_cfg = FsConfig {
        ftl: budgeted(4),
        ..fs_config()
    };
    let mut fs = Fs::format(mlc(64), fs_cfg).unwrap();
    let bs = fs.block_size() as usize;
    let a = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap();
    for v in 0..4 {
        fs.write(a.ino, 0, &pattern(7, v, 40 * bs)).unwrap();
        fs.sync().unwrap();
        fs.idle(std::time::Duration::from_secs(10)).unwrap();
    }
    let migrated = fs.ftl().log().stats().migrated_slots;
    assert!(migrated > 0);
    let before = fs.lifetime();
    assert_eq!(before.migrated_bytes, migrated * bs as u64);
    assert!(before.shares.is_some());
    // More idle time after the last commit: the unmount records what it moved.
    fs.write(a.ino, 0, &pattern(7, 9, 40 * bs)).unwrap();
    fs.sync().unwrap();
    fs.idle(std::time::Duration::from_secs(30)).unwrap();
    let migrated = fs.ftl().log().stats().migrated_slots;
    let expected = fs.lifetime();
    assert!(expected.migrated_bytes > before.migrated_bytes);
    let mut fs = Fs::mount(fs.unmount().unwrap(), fs_cfg).unwrap();
    let after = fs.lifetime();
    assert_eq!(after.migrated_bytes, migrated * bs as u64);
    assert_eq!(after.shares, expected.shares);
    let mut buf = vec![0u8; 40 * bs];
    fs.read(a.ino, 0, &mut buf).unwrap();
    assert_eq!(buf, pattern(7, 9, 40 * bs));
}
