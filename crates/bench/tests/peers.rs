//! littlefs on the simulated presets: it formats, mounts, writes and reads back a file, and
//! the simulator counts its work.

use flash::{DeviceClock, DeviceSpec, ImageMeta, NandSim, NorSim, NvramSim, Simulated};
use flashfs_bench::peers::littlefs::{shared, Cy15b102q, LfsDevice, Shared, W25n01gv, W25q64jv};
use littlefs2::fs::Filesystem;
use littlefs2::path::PathBuf;

fn spec(name: &str) -> DeviceSpec {
    flash::preset::lookup(name).unwrap().spec
}

/// Formats, mounts, writes 10,000 bytes in 64-byte writes, remounts and reads them back.
fn round_trip<D: LfsDevice>(sim: &Shared<impl Simulated + 'static>, storage: &mut D) {
    Filesystem::format(storage).unwrap();
    let path = PathBuf::try_from("/data.bin").unwrap();
    let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
    {
        let mut alloc = Filesystem::allocate();
        let fs = Filesystem::mount(&mut alloc, storage).unwrap();
        fs.create_file_and_then(&path, |f| {
            for chunk in data.chunks(64) {
                assert_eq!(f.write(chunk)?, chunk.len());
            }
            Ok(())
        })
        .unwrap();
    }
    let before = sim.borrow().stats().clone();
    assert!(before.programs > 0 && before.bytes_programmed >= data.len() as u64);
    let mut alloc = Filesystem::allocate();
    let fs = Filesystem::mount(&mut alloc, storage).unwrap();
    let back = fs.read::<16384>(&path).unwrap();
    assert_eq!(&back[..], &data[..]);
    let after = sim.borrow().stats().since(&before);
    assert!(after.reads > 0 && after.bytes_read >= data.len() as u64);
    assert_eq!(
        after.programs, 0,
        "a read-only mount and read program nothing"
    );
}

#[test]
fn littlefs_round_trips_on_nor() {
    let DeviceSpec::Nor(s) = spec("w25q64jv") else {
        panic!("w25q64jv is NOR")
    };
    let sim = shared(NorSim::new(s, ImageMeta::new("w25q64jv", 1)).unwrap());
    let mut storage = W25q64jv::attach(sim.clone()).unwrap();
    round_trip(&sim, &mut storage);
    assert!(sim.borrow().stats().erases > 0);
    assert!(sim.borrow().now() > std::time::Duration::ZERO);
    assert!(storage.last_error().is_none());
}

#[test]
fn littlefs_round_trips_on_nand() {
    let DeviceSpec::Nand(s) = spec("w25n01gv") else {
        panic!("w25n01gv is NAND")
    };
    let sim = shared(NandSim::new(s, ImageMeta::new("w25n01gv", 1)).unwrap());
    let mut storage = W25n01gv::attach(sim.clone()).unwrap();
    round_trip(&sim, &mut storage);
    let st = sim.borrow().stats().clone();
    assert!(st.erases > 0);
    assert_eq!(st.bytes_programmed % 2048, 0, "whole pages only");
}

#[test]
fn littlefs_round_trips_on_fram() {
    let DeviceSpec::Nvram(s) = spec("cy15b102q") else {
        panic!("cy15b102q is NVRAM")
    };
    let sim = shared(NvramSim::new(s, ImageMeta::new("cy15b102q", 1)).unwrap());
    let mut storage = Cy15b102q::attach(sim.clone()).unwrap();
    round_trip(&sim, &mut storage);
    assert_eq!(sim.borrow().stats().erases, 0, "FRAM has nothing to erase");
}

/// The quick benchmark: every phase of both systems gives a row with work in it, on every
/// default device (the FRAM included: flashfs lays it out as NOR) and both sync settings,
/// and the table names every device.
#[test]
fn the_quick_peer_benchmark_measures_every_phase() {
    use flashfs_bench::peers::{run_peers, table::table, PeerDevice, PeersOptions, Workload};
    let opts = PeersOptions::quick();
    let rows = run_peers(&opts, &mut |_, _, _| {}).unwrap();
    for dev in PeerDevice::DEFAULT {
        for sync in [false, true] {
            for (system, config) in [
                ("littlefs", "default"),
                ("flashfs", "default"),
                ("flashfs", "small-ram"),
            ] {
                for w in Workload::ALL {
                    let r = rows
                        .iter()
                        .find(|r| {
                            r.device == dev.preset()
                                && r.sync == sync
                                && r.system == system
                                && r.config == config
                                && r.workload == w
                        })
                        .unwrap_or_else(|| panic!("no row {dev:?} {sync} {system} {config} {w:?}"));
                    assert!(r.ops > 0 && r.device_ms > 0.0, "{r:?}");
                    assert!(r.reads > 0 || w.writes(), "{r:?}");
                    if w.writes() {
                        assert!(r.bytes_programmed > 0, "{r:?}");
                    }
                    let mount = matches!(w, Workload::Mount | Workload::MountFirstWrite);
                    assert_eq!(r.mount_ms.is_some(), mount, "{r:?}");
                    assert_eq!(r.throughput_bps > 0.0, w != Workload::Mount, "{r:?}");
                    assert!(r.p50_us <= r.p999_us && r.p999_us <= r.max_us, "{r:?}");
                    assert!(r.used_bytes > 0, "{r:?}");
                }
            }
        }
    }
    let t = table(&opts, &rows).unwrap();
    for dev in PeerDevice::DEFAULT {
        assert!(
            t.contains(&format!("{}: littlefs read", dev.preset())),
            "{t}"
        );
    }
    // Both of flashfs's configurations have their tables and their RAM beside littlefs's.
    assert!(
        t.contains("w25q64jv, no sync per write, flashfs small-ram:"),
        "{t}"
    );
    assert!(
        t.contains("(default), ") && t.contains(" B (small-ram); littlefs buffers"),
        "{t}"
    );
    // The small-RAM profile uses less heap than the default on every part.
    for dev in ["w25q64jv", "w25n01gv"] {
        let heap = |config: &str| {
            rows.iter()
                .filter(|r| r.device == dev && r.system == "flashfs" && r.config == config)
                .map(|r| r.heap_bytes)
                .max()
                .unwrap()
        };
        assert!(heap("small-ram") <= heap("default"), "{dev}");
    }
}

/// `flashfs_configs` chooses which of flashfs's configurations run.
#[test]
fn the_peer_benchmark_runs_the_flashfs_configurations_asked_for() {
    use flashfs_bench::peers::{run_peers, FlashfsConfig, PeerDevice, PeersOptions};
    let opts = PeersOptions {
        devices: vec![PeerDevice::W25q64jv],
        syncs: vec![false],
        flashfs_configs: vec![FlashfsConfig::SmallRam],
        ..PeersOptions::quick()
    };
    let rows = run_peers(&opts, &mut |_, _, _| {}).unwrap();
    assert!(rows.iter().any(|r| r.system == "flashfs"));
    assert!(rows
        .iter()
        .all(|r| r.system == "littlefs" || r.config == "small-ram"));
    assert_eq!(
        FlashfsConfig::from_name("small-ram"),
        Some(FlashfsConfig::SmallRam)
    );
    let none = PeersOptions {
        flashfs_configs: vec![],
        ..opts
    };
    assert!(run_peers(&none, &mut |_, _, _| {}).is_err());
}

/// Cuts over littlefs's synced random writes: every cut is counted in exactly one outcome.
#[test]
fn littlefs_cuts_count_every_cut_once() {
    use flashfs_bench::peers::{run_littlefs_cuts, PeerDevice, PeersOptions};
    let opts = PeersOptions {
        random_writes: 8,
        ..PeersOptions::quick()
    };
    for dev in [PeerDevice::W25q64jv, PeerDevice::W25n01gv] {
        let reports = run_littlefs_cuts(&opts, dev, 12).unwrap();
        assert_eq!(reports.len(), 2);
        for r in &reports {
            assert!(r.workload_ops > 0 && r.cuts > 0, "{r:?}");
            assert_eq!(
                r.survived + r.mount_failed + r.unreadable + r.wrong_content,
                r.cuts,
                "{r:?}"
            );
            assert_eq!(r.first_failure.is_some(), r.survived < r.cuts, "{r:?}");
        }
        assert!(!reports[0].torn && reports[1].torn);
    }
}

/// The plan fits the part: the linear file and the small files take at most an eighth of it
/// each (the small files a 512-byte block apiece), so both systems fit on the 256 KiB FRAM.
#[test]
fn the_plan_scales_to_small_parts() {
    use flashfs_bench::peers::PeersOptions;
    let opts = PeersOptions::default();
    let fram = opts.plan(256 << 10, false);
    assert_eq!((fram.linear_bytes, fram.small_files), (32 << 10, 64));
    let nor = opts.plan(8 << 20, true);
    assert_eq!((nor.linear_bytes, nor.small_files), (1 << 20, 128));
    assert!(nor.sync && !fram.sync);
}
