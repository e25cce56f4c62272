//! End-to-end tests of `flashfs mkfs`, `info` and `fsck`: volumes on image files, bad input,
//! and images that must come out of a failed or read-only command exactly as they went in.

mod common;

use std::hash::{DefaultHasher, Hasher};
use std::io::Read;
use std::path::Path;

use common::{fails, flashfs, fsck, info_json};
use flash::store::FileStore;
use flash::NandSim;
use flashfs::{BlockDevice, Ftl, FtlConfig, NandSegments};
use predicates::prelude::*;
use tempfile::TempDir;

/// A digest of a file's bytes.
fn digest(path: &Path) -> (u64, u64) {
    let mut f = std::fs::File::open(path).unwrap();
    let mut h = DefaultHasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut len = 0;
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        h.write(&buf[..n]);
        len += n as u64;
    }
    (len, h.finish())
}

fn mkfs(image: &Path, preset: &str, extra: &[&str]) {
    flashfs()
        .args(["mkfs", "--ftl", "--preset", preset])
        .args(extra)
        .arg(image)
        .assert()
        .success()
        .stdout(predicate::str::contains("formatted"));
}

/// The block device of a NAND image, mounted in this process.
fn open_nand(image: &Path) -> Ftl<NandSegments<NandSim<FileStore>>> {
    let sim = NandSim::open(FileStore::open(image).unwrap()).unwrap();
    Ftl::mount(NandSegments::new(sim).unwrap(), FtlConfig::default()).unwrap()
}

fn close_nand(ftl: Ftl<NandSegments<NandSim<FileStore>>>) {
    let mut store = ftl.close().unwrap().into_inner().into_store();
    flash::store::Store::flush(&mut store).unwrap();
}

/// Leaves the block device as a power cut after a flush would: without its close.
fn cut_nand(mut ftl: Ftl<NandSegments<NandSim<FileStore>>>) {
    ftl.flush().unwrap();
    let mut store = ftl.into_device().into_inner().into_store();
    flash::store::Store::flush(&mut store).unwrap();
}

fn pattern(sector: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (sector as usize * 31 + i * 7 + 1) as u8)
        .collect()
}

#[test]
fn mkfs_ftl_makes_a_clean_volume_that_info_describes() {
    let dir = TempDir::new().unwrap();
    let img = dir.path().join("nor.img");
    mkfs(&img, "w25q64jv", &["--sectors", "4000"]);
    let before = digest(&img);
    let j = info_json(&img);
    assert_eq!(j["preset"], "w25q64jv");
    assert_eq!(j["format"], "ftl");
    assert_eq!(j["space"]["capacity_bytes"], 4000 * 512);
    assert_eq!(j["space"]["used_bytes"], 0);
    assert_eq!(j["log"]["slot_bytes"], 512);
    // Nothing written yet: the counters are known, and zero.
    assert_eq!(j["writes"]["user_bytes"], 0);
    assert!(j["write_amplification"].is_null());
    assert!(j["write_amplification_note"].is_null());
    // The format erased every unit once.
    assert_eq!(j["erase_counts"]["min"], 1);
    assert_eq!(j["erase_counts"]["max"], 1);
    let used: u64 = j["segment_utilization_histogram"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["count"].as_u64().unwrap())
        .sum();
    assert_eq!(used, j["log"]["segments_in_use"].as_u64().unwrap());
    flashfs()
        .arg("info")
        .arg(&img)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "block device (FTL), 512 B sectors",
        ))
        .stdout(predicate::str::contains("segment-utilization histogram"))
        .stdout(predicate::str::contains("erase-count histogram"));
    // In use: the two checkpoint anchors, and the segments holding the checkpoint (mostly
    // its segment table) and the counters record.
    let free = j["log"]["free_segments"].as_u64().unwrap();
    assert_eq!(
        free,
        512 - 2 - j["log"]["segments_in_use"].as_u64().unwrap()
    );
    assert!(free >= 500, "{free}");
    // fsck compares the checkpoint with a scan, after which the checkpoint's pages are dead.
    let (code, line) = fsck(&img, false);
    assert_eq!(code, 0, "{line}");
    let clean = format!("{}: clean, 0 of 4,000 sectors in use, ", img.display());
    assert!(line.starts_with(&clean), "{line}");
    assert!(line.ends_with(" of 512 segments free\n"), "{line}");
    // 4 KiB units of SPI NOR are erased four at a time: a segment of 30 slots instead of 7.
    assert_eq!(j["log"]["units_per_segment"], 4);
    assert_eq!(j["log"]["slots_per_segment"], 30);
    assert_eq!(fsck(&img, true).0, 0);
    // Neither info nor fsck changed a byte.
    assert_eq!(digest(&img), before);
}

#[test]
fn mkfs_on_nor_takes_a_sector_size_and_a_reserve() {
    let dir = TempDir::new().unwrap();
    let small = dir.path().join("a.img");
    let big = dir.path().join("b.img");
    mkfs(
        &small,
        "28f008sa",
        &["--sector-size", "4096", "--reserve", "8"],
    );
    mkfs(&big, "28f008sa", &["--sector-size", "4096"]);
    let (a, b) = (info_json(&small), info_json(&big));
    assert_eq!(a["log"]["slot_bytes"], 4096);
    // Six more segments held back, of 63 slots each.
    assert_eq!(
        b["space"]["capacity_bytes"].as_u64().unwrap()
            - a["space"]["capacity_bytes"].as_u64().unwrap(),
        6 * 63 * 4096
    );
    assert_eq!(fsck(&small, false).0, 0);
}

#[test]
fn info_reports_what_was_written_and_plots_both_histograms() {
    let dir = TempDir::new().unwrap();
    let img = dir.path().join("nand.img");
    mkfs(&img, "nand-128m", &["--sectors", "2048"]);
    let mut ftl = open_nand(&img);
    for round in 0..3u64 {
        for s in 0..2048u64 {
            ftl.write(s, &pattern(s + round, 512)).unwrap();
        }
    }
    close_nand(ftl);
    let before = digest(&img);
    let plots = dir.path().join("plots");
    let j = {
        let out = flashfs()
            .args(["info", "--json", "--plot"])
            .arg(&plots)
            .arg(&img)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        serde_json::from_slice::<serde_json::Value>(&out).unwrap()
    };
    assert_eq!(j["space"]["used_bytes"], 2048 * 512);
    assert_eq!(j["space"]["free_bytes"], 0);
    // Every sector, the block device's counters record and the checkpoint's pages.
    assert_eq!(j["log"]["mounted_from"], "checkpoint");
    let pages = j["log"]["checkpoint_slots"].as_u64().unwrap();
    assert!(pages > 0);
    assert_eq!(j["log"]["live_slots"], 2048 + 1 + pages);
    // The mount's heap is counted (the binary's allocator counts), and the mount read no
    // map page: the checkpoint's segment table counted the live slots.
    let heap = j["log"]["mount_heap_bytes"].as_u64().unwrap();
    let map = j["log"]["map_cache_bytes"].as_u64().unwrap();
    assert!(heap > 0 && map == 0, "heap {heap}, map {map}");
    // The data fills at least 2048 segments' worth of slots; segments left with nothing
    // live are free after the mount, and dead slots beside live ones are reclaimable.
    let per_segment = j["log"]["slots_per_segment"].as_u64().unwrap();
    assert!(j["log"]["segments_in_use"].as_u64().unwrap() >= 2048 / per_segment);
    assert!(j["log"]["reclaimable_slots"].as_u64().unwrap() < 2 * 2048);
    assert!(j["log"]["newest_sequence"].as_u64().unwrap() >= 3 * 2048);
    // The block device's counters: every sector write, and at least as many programs.
    assert_eq!(j["writes"]["user_bytes"], 3 * 2048 * 512);
    let flash = j["writes"]["flash_bytes"].as_u64().unwrap();
    assert!(flash > 3 * 2048 * 512, "{flash}");
    let wa = j["write_amplification"].as_f64().unwrap();
    assert!((wa - flash as f64 / (3 * 2048 * 512) as f64).abs() < 1e-9);
    assert!(j["write_amplification_note"].is_null());
    assert_eq!(j["plots"].as_array().unwrap().len(), 4);
    for name in ["erase-counts", "segment-utilization"] {
        let png = std::fs::read(plots.join(format!("{name}.png"))).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let svg = std::fs::read_to_string(plots.join(format!("{name}.svg"))).unwrap();
        assert!(svg.contains("<svg"), "{name}.svg");
    }
    assert_eq!(digest(&img), before, "info --plot changed the image");
}

#[test]
fn info_says_when_a_session_ended_without_a_close() {
    let dir = TempDir::new().unwrap();
    let img = dir.path().join("nand.img");
    mkfs(&img, "nand-128m", &["--sectors", "256"]);
    let mut ftl = open_nand(&img);
    for s in 0..256u64 {
        ftl.write(s, &pattern(s, 512)).unwrap();
    }
    close_nand(ftl);
    let mut ftl = open_nand(&img);
    for s in 0..100u64 {
        ftl.write(s, &pattern(s + 1, 512)).unwrap();
    }
    cut_nand(ftl);
    let j = info_json(&img);
    // The counters are those of the last close, and say so.
    assert_eq!(j["writes"]["user_bytes"], 256 * 512);
    assert!(j["write_amplification_note"]
        .as_str()
        .unwrap()
        .contains("last clean close"));
    flashfs()
        .arg("info")
        .arg(&img)
        .assert()
        .success()
        .stdout(predicate::str::contains("128 KiB written to sectors"))
        .stdout(predicate::str::contains("as of the last clean close"));
}

#[test]
fn mkfs_refuses_an_existing_image_without_force() {
    let dir = TempDir::new().unwrap();
    let img = dir.path().join("dev.img");
    mkfs(&img, "st10f280", &[]);
    let before = digest(&img);
    let line = fails(
        flashfs()
            .args(["mkfs", "--ftl", "--preset", "w25q64jv"])
            .arg(&img),
        1,
    );
    assert!(
        line.contains("exists") && line.contains("--force"),
        "{line}"
    );
    assert_eq!(digest(&img), before);
    // A failing format does not replace the image, even with --force.
    let line = fails(
        flashfs()
            .args([
                "mkfs",
                "--ftl",
                "--force",
                "--preset",
                "w25q64jv",
                "--sectors",
                "99999999",
            ])
            .arg(&img),
        1,
    );
    assert!(
        line.contains("more sectors than the flash can hold"),
        "{line}"
    );
    assert_eq!(digest(&img), before);
    mkfs(&img, "w25q64jv", &["--force"]);
    assert_eq!(info_json(&img)["preset"], "w25q64jv");
    // Nothing but the image is left in the directory.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("dev.img")]);
}

#[test]
fn mkfs_refuses_bad_options_in_one_line_and_writes_nothing() {
    let dir = TempDir::new().unwrap();
    let img = dir.path().join("dev.img");
    for (args, expect) in [
        (
            &["--ftl", "--preset", "nand-2g"][..],
            "unknown preset 'nand-2g'",
        ),
        (
            &["--ftl", "--preset", "fram-8m", "--blocks", "4"][..],
            "apply to flash, not NVRAM",
        ),
        (
            &["--ftl", "--preset", "fram-8m", "--sector-size", "100"][..],
            "power of two",
        ),
        (
            &["--ftl", "--preset", "nand-128m", "--sector-size", "4096"][..],
            "a sector is a page",
        ),
        (
            &["--ftl", "--preset", "w25q64jv", "--sector-size", "1000"][..],
            "power of two",
        ),
        (
            &["--ftl", "--preset", "w25q64jv", "--reserve", "1"][..],
            "at least 2",
        ),
        (
            &["--ftl", "--preset", "w25q64jv", "--sectors", "0"][..],
            "at least one sector",
        ),
        (
            &["--ftl", "--preset", "w25q64jv", "--sectors", "99999999"][..],
            "more sectors",
        ),
        (
            &["--preset", "w25q64jv", "--sectors", "10"][..],
            "add --ftl",
        ),
    ] {
        let line = fails(flashfs().arg("mkfs").args(args).arg(&img), 1);
        assert!(line.contains(expect), "{args:?}: {line}");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "{args:?} left a file"
        );
    }
    let line = fails(
        flashfs()
            .args(["mkfs", "--ftl", "--preset", "w25q64jv"])
            .arg(dir.path().join("no/such/dev.img")),
        1,
    );
    assert!(line.contains("no such file or directory"), "{line}");
    fails(flashfs().args(["mkfs", "dev.img"]), 2);
}

#[test]
fn missing_images_fail_in_one_line() {
    let dir = TempDir::new().unwrap();
    let missing = dir.path().join("missing.img");
    let line = fails(flashfs().arg("info").arg(&missing), 1);
    assert!(
        line.contains("missing.img: no such file or directory"),
        "{line}"
    );
    let line = fails(flashfs().arg("fsck").arg(&missing), 8);
    assert!(
        line.contains("missing.img: no such file or directory"),
        "{line}"
    );
    let line = fails(flashfs().arg("fsck").arg(dir.path()), 8);
    assert!(line.contains("not a regular file"), "{line}");
    fails(flashfs().args(["fsck", "--bogus"]), 16);
    assert!(!missing.exists());
}

#[test]
fn corrupt_images_fail_in_one_line_and_stay_as_they_were() {
    let dir = TempDir::new().unwrap();
    let img = dir.path().join("dev.img");
    mkfs(&img, "st10f280", &[]);
    let mut bytes = std::fs::read(&img).unwrap();
    bytes[12] ^= 0x10;
    std::fs::write(&img, &bytes).unwrap();
    let before = digest(&img);
    let line = fails(flashfs().arg("info").arg(&img), 1);
    assert!(line.contains("bad device image"), "{line}");
    let line = fails(flashfs().arg("fsck").arg(&img), 8);
    assert!(line.contains("bad device image"), "{line}");
    let line = fails(flashfs().args(["fsck", "--repair"]).arg(&img), 8);
    assert!(line.contains("bad device image"), "{line}");
    assert_eq!(digest(&img), before);
    // Not an image at all.
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "keep me").unwrap();
    let line = fails(flashfs().arg("info").arg(&text), 1);
    assert!(line.contains("bad device image"), "{line}");
    fails(flashfs().arg("fsck").arg(&text), 8);
    assert_eq!(std::fs::read_to_string(&text).unwrap(), "keep me");
}

#[test]
fn an_unformatted_image_is_described_but_not_checked() {
    let dir = TempDir::new().unwrap();
    let img = dir.path().join("dev.img");
    flashfs()
        .args(["sim", "create", "--preset", "w25q64jv"])
        .arg(&img)
        .assert()
        .success();
    let before = digest(&img);
    let j = info_json(&img);
    assert_eq!(j["format"], "unformatted");
    assert!(j["space"].is_null() && j["log"].is_null());
    let line = fails(flashfs().arg("fsck").arg(&img), 8);
    assert!(line.contains("no flashfs volume"), "{line}");
    assert_eq!(digest(&img), before);
}

#[test]
fn fsck_finds_unreadable_sectors_and_repair_makes_them_read_as_zeros() {
    let dir = TempDir::new().unwrap();
    let img = dir.path().join("nand.img");
    mkfs(&img, "nand-128m", &["--sectors", "256"]);
    let mut ftl = open_nand(&img);
    for s in 0..256u64 {
        ftl.write(s, &pattern(s, 512)).unwrap();
    }
    // The second slot of a full segment decays while mounted (the first of the first
    // segment holds the counters record, not a sector): reading it fails, and the block
    // device records the sector as lost (it keeps failing after a remount).
    // A full segment of sectors (not of the format's checkpoint pages).
    use flashfs::media::tag::{Kind, TagState};
    let slots = ftl.log().geometry().slots;
    let full: Vec<u32> = (0..ftl.log().segments().len() as u32)
        .filter(|&i| ftl.log().segments()[i as usize].live() == slots)
        .collect();
    let mut tags = vec![TagState::Erased; slots as usize];
    let seg = full
        .into_iter()
        .find(|&i| {
            flashfs::Segments::read_tags(ftl.log_mut().device_mut(), i, &mut tags).unwrap();
            matches!(tags[1], TagState::Valid(t) if t.kind == Kind::Sector)
        })
        .expect("a full segment of sectors");
    let dev = ftl.log_mut().device_mut();
    let at = dev.slot_page(seg, 1);
    dev.flash_mut().inject_bit_errors(at, 8).unwrap();
    let mut buf = vec![0u8; 512];
    let failing: Vec<u64> = (0..256u64)
        .filter(|&s| ftl.read(s, &mut buf).is_err())
        .collect();
    assert_eq!(failing.len(), 1);
    close_nand(ftl);

    let before = digest(&img);
    let (code, out) = fsck(&img, false);
    assert_eq!(code, 4, "{out}");
    assert!(
        out.contains("1 unreadable sector (data lost)") && out.contains("--repair"),
        "{out}"
    );
    assert_eq!(
        digest(&img),
        before,
        "fsck without --repair changed the image"
    );
    let (code, out) = fsck(&img, true);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("now read as zeros"), "{out}");
    let (code, out) = fsck(&img, false);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("clean, 255 of 256 sectors in use"), "{out}");
    assert_eq!(fsck(&img, true).0, 0);
    // Every other sector kept its data; the lost one reads as zeros.
    let mut ftl = open_nand(&img);
    for s in 0..256u64 {
        ftl.read(s, &mut buf).unwrap();
        if s == failing[0] {
            assert!(buf.iter().all(|&b| b == 0), "sector {s} reads as zeros");
        } else {
            assert_eq!(buf, pattern(s, 512), "sector {s}");
        }
    }
}

#[test]
fn mkfs_takes_a_custom_geometry() {
    let dir = TempDir::new().unwrap();
    let image = dir.path().join("custom.img");
    mkfs(
        &image,
        "nand-128m",
        &["--blocks", "300", "--block-size", "16"],
    );
    let j = info_json(&image);
    let geometry = j["geometry"].as_str().unwrap();
    assert!(geometry.starts_with("300 blocks x 16 pages"), "{geometry}");
    // 15 slots in each of the 278 segments left after the cleaner's reserve, the bad-block
    // spares, the open heads, the two checkpoint anchors and the two their records move to,
    // and room for two checkpoints (5 segments each), less one for the block device's
    // counters record.
    assert_eq!(
        j["space"]["detail"], "0 of 4,169 sectors of 512 B in use",
        "{j}"
    );
    let nor = dir.path().join("nor.img");
    mkfs(
        &nor,
        "28f008sa",
        &["--blocks", "32", "--block-size", "65536"],
    );
    let j = info_json(&nor);
    assert!(
        j["geometry"]
            .as_str()
            .unwrap()
            .starts_with("32 units x 64 KiB"),
        "{j}"
    );
    // A geometry no device has: one line, nothing made.
    let bad = dir.path().join("bad.img");
    let line = fails(
        flashfs()
            .args(["mkfs", "--preset", "nand-128m", "--block-size", "0"])
            .arg(&bad),
        1,
    );
    assert!(line.contains("geometry"), "{line}");
    assert!(!bad.exists());
}

/// `info` says why a mount scans: a device too small to keep checkpoints, or one whose map
/// is too large for a checkpoint root to name its directory (1 GiB of 512-byte pages,
/// SPEC.md §3.5), beside one that keeps them.
#[test]
fn info_says_whether_the_volume_keeps_checkpoints() {
    let dir = TempDir::new().unwrap();
    for (preset, extra, kept) in [
        ("nand-128m", &[][..], "kept"),
        ("28f008sa", &[][..], "none"),
        ("nand-128m", &["--blocks", "65536"][..], "too-large"),
    ] {
        let img = dir.path().join(format!("{kept}.img"));
        mkfs(&img, preset, extra);
        let j = info_json(&img);
        assert_eq!(j["log"]["checkpoints"], kept, "{preset} {extra:?}");
        let text = flashfs().arg("info").arg(&img).assert().success();
        let out = String::from_utf8(text.get_output().stdout.clone()).unwrap();
        let want = match kept {
            "kept" => "from the checkpoint",
            "none" => "keeps no checkpoints",
            _ => "no checkpoint root can name",
        };
        assert!(out.contains(want), "{preset} {extra:?}: {out}");
    }
}
