//! Volumes on two devices end to end: `mkfs --nvram` makes a flash image (NAND or NOR) and
//! an NVRAM image beside it (IMAGE.nvram), every command opens both as one volume, the
//! metadata lands on the NVRAM and the data on the flash, and what does not make a volume
//! is refused in one line with both images left as they were.

mod common;

use std::hash::{DefaultHasher, Hasher};
use std::path::Path;

use common::{data, fails, flashfs, fsck, info_json, nvram_image, stdout};
use flash::store::FileStore;
use flash::{NandSim, NvramSim};
use flashfs::media::tiered::Tiered;
use flashfs::{BlockDevice, Ftl, FtlConfig};
use predicates::prelude::*;
use tempfile::TempDir;

/// A digest of a file's bytes.
fn digest(path: &Path) -> u64 {
    let mut h = DefaultHasher::new();
    h.write(&std::fs::read(path).unwrap());
    h.finish()
}

/// Digests of both images of a volume on two devices.
fn digests(image: &Path) -> (u64, u64) {
    (digest(image), digest(&nvram_image(image)))
}

/// Writes `hello` to `path` on `image`, in a transaction.
fn put_hello(image: &Path, path: &str) {
    flashfs()
        .arg("tx")
        .arg(image)
        .arg("-")
        .write_stdin(format!("begin t\nt put {path} hello\ncommit t\n"))
        .assert()
        .success();
}

/// A bare device of `preset` at `path`, replacing what is there.
fn create(path: &Path, preset: &str) {
    flashfs()
        .args(["sim", "create", "--force", "--preset", preset])
        .arg(path)
        .assert()
        .success();
}

/// `mkfs` of nand-128m beside fram-8m, with `extra` options; what it printed.
fn mkfs(image: &Path, extra: &[&str]) -> String {
    stdout(
        flashfs()
            .args(["mkfs", "--preset", "nand-128m", "--nvram", "fram-8m"])
            .args(extra)
            .arg(image),
    )
}

fn u(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn the_native_file_system_keeps_its_metadata_and_small_files_on_the_nvram_and_the_rest_on_the_nand()
{
    let dir = TempDir::new().unwrap();
    let img = dir.path().join("dev.img");
    let text = mkfs(&img, &[]);
    assert!(text.contains("native file system"), "{text}");
    assert!(text.contains("fram-8m"), "{text}");
    assert!(text.contains("dev.img.nvram"), "{text}");
    assert!(nvram_image(&img).is_file());
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        2,
        "mkfs left the two images and nothing else"
    );

    // A tree in, without mounting.
    let host = dir.path().join("host");
    std::fs::create_dir_all(host.join("sub")).unwrap();
    for i in 0..30u32 {
        let d = data(3000 + i as usize * 100, i + 1);
        let at = if i % 2 == 0 { "" } else { "sub/" };
        std::fs::write(host.join(format!("{at}f{i}")), d).unwrap();
    }
    // Files' first 16 KiB go to the NVRAM while it has room: the rest of a large one, to
    // the NAND.
    std::fs::write(host.join("big"), data(80 << 10, 99)).unwrap();
    let stored = 64u64 << 10;
    let before = digests(&img);
    flashfs()
        .arg("put")
        .arg(&img)
        .arg(&host)
        .arg("/tree")
        .arg("-r")
        .assert()
        .success();
    let after = digests(&img);
    assert_ne!(after.0, before.0, "the data went to the NAND image");
    assert_ne!(after.1, before.1, "the metadata went to the NVRAM image");

    // Commands that only read change neither image.
    flashfs()
        .args(["ls", "-l"])
        .arg(&img)
        .arg("/tree/sub")
        .assert()
        .success()
        .stdout(predicate::str::contains("f1"));
    flashfs()
        .arg("cat")
        .arg(&img)
        .arg("/tree/f4")
        .assert()
        .success()
        .stdout(predicate::eq(data(3400, 5)));
    let (code, out) = fsck(&img, false);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("clean"), "{out}");
    let info = info_json(&img);
    assert_eq!(digests(&img), after, "reading changed an image");

    // Both parts described, and the segments on each.
    assert_eq!(info["preset"], "nand-128m");
    assert_eq!(info["kind"], "nand");
    assert_eq!(info["format"], "native");
    let nvram = &info["nvram"];
    assert_eq!(nvram["preset"], "fram-8m");
    assert_eq!(nvram["kind"], "nvram");
    assert_eq!(u(&nvram["capacity_bytes"]), 8 << 20);
    assert_eq!(
        nvram["image"].as_str().unwrap(),
        nvram_image(&img).display().to_string()
    );
    let log = &info["log"];
    let tiers = &log["tiers"];
    assert!(u(&tiers["fast_segments"]) > 0, "{tiers}");
    assert_eq!(
        u(&tiers["fast_segments"]) + u(&tiers["bulk_segments"]),
        u(&log["segments"])
    );
    assert!(u(&tiers["bulk_segments"]) <= 512, "{tiers}");
    // The index, the checkpoint and the small files live on the NVRAM; the NAND holds the
    // large file's blocks past its first 16 KiB and nothing else.
    assert!(u(&tiers["fast_live_bytes"]) > 0, "{tiers}");
    assert!(u(&tiers["fast_segments_in_use"]) > 0, "{tiers}");
    let bulk = u(&tiers["bulk_live_bytes"]);
    assert!(
        (stored..stored * 11 / 10).contains(&bulk),
        "{bulk} bytes live on the NAND for {stored} of data: {tiers}"
    );
    assert_eq!(
        u(&tiers["fast_live_slots"]) + u(&tiers["bulk_live_slots"]),
        u(&log["live_slots"])
    );
    // A clean unmount left a checkpoint, on the NVRAM: the mount read it.
    assert_eq!(log["mounted_from"], "checkpoint");

    let text = flashfs().arg("info").arg(&img).output().unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    for row in ["nvram image", "nvram preset", "nvram geometry", "tiers"] {
        assert!(
            text.lines().any(|l| l.starts_with(row)),
            "no {row} row: {text}"
        );
    }

    // Changes: rm, mkdir, mv, a transaction; then every byte back out.
    flashfs()
        .arg("rm")
        .arg(&img)
        .arg("/tree/f0")
        .assert()
        .success();
    flashfs()
        .args(["mkdir", "-p"])
        .arg(&img)
        .arg("/a/b")
        .assert()
        .success();
    flashfs()
        .arg("mv")
        .arg(&img)
        .arg("/tree/f2")
        .arg("/a/b/moved")
        .assert()
        .success();
    put_hello(&img, "/a/note");
    let back = dir.path().join("back");
    flashfs()
        .arg("get")
        .arg(&img)
        .arg("/")
        .arg(&back)
        .arg("-r")
        .assert()
        .success();
    assert_eq!(std::fs::read(back.join("a/note")).unwrap(), b"hello");
    assert_eq!(
        std::fs::read(back.join("a/b/moved")).unwrap(),
        data(3200, 3)
    );
    assert!(!back.join("tree/f0").exists());
    for i in 3..30u32 {
        let at = if i % 2 == 0 { "" } else { "sub/" };
        assert_eq!(
            std::fs::read(back.join(format!("tree/{at}f{i}"))).unwrap(),
            data(3000 + i as usize * 100, i + 1),
            "f{i}"
        );
    }
    flashfs().arg("scrub").arg(&img).assert().success();
    let (code, out) = fsck(&img, false);
    assert_eq!(code, 0, "{out}");

    // A volume on one device shows neither.
    let plain = dir.path().join("plain.img");
    stdout(
        flashfs()
            .args(["mkfs", "--preset", "nand-128m"])
            .arg(&plain),
    );
    let info = info_json(&plain);
    assert!(info["nvram"].is_null(), "{info}");
    assert!(info["log"]["tiers"].is_null(), "{info}");
}

#[test]
fn the_block_device_on_two_devices_is_the_librarys() {
    let dir = TempDir::new().unwrap();
    let img = dir.path().join("blk.img");
    let text = mkfs(&img, &["--ftl", "--sectors", "4096"]);
    assert!(
        text.contains("block device (FTL) of 4,096 sectors x 512 B"),
        "{text}"
    );
    // The library opens the two images as the command line does, and writes sectors.
    let nand = NandSim::open(FileStore::open(&img).unwrap()).unwrap();
    let nvram = NvramSim::open(FileStore::open(&nvram_image(&img)).unwrap()).unwrap();
    let dev = Tiered::nvram_beside_nand(nvram, nand).unwrap();
    let mut ftl = Ftl::mount(dev, FtlConfig::default()).unwrap();
    for s in (0..4096u64).step_by(7) {
        ftl.write(s, &data(512, s as u32 + 1)).unwrap();
    }
    let (fast, bulk) = ftl.close().unwrap().into_inner();
    let mut store = fast.into_inner().into_inner().into_store();
    flash::store::Store::flush(&mut store).unwrap();
    let mut store = bulk.into_inner().into_store();
    flash::store::Store::flush(&mut store).unwrap();

    let (code, out) = fsck(&img, false);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("clean, 586 of 4,096 sectors in use"), "{out}");
    let info = info_json(&img);
    assert_eq!(info["format"], "ftl");
    assert_eq!(u(&info["space"]["used_bytes"]), 586 * 512);
    assert_eq!(info["nvram"]["preset"], "fram-8m");
    let tiers = &info["log"]["tiers"];
    assert!(u(&tiers["fast_live_bytes"]) > 0, "{tiers}");
    assert!(u(&tiers["bulk_live_bytes"]) >= 586 * 512, "{tiers}");
    flashfs()
        .arg("scrub")
        .arg(&img)
        .assert()
        .success()
        .stdout(predicate::str::contains("0 slots lost"));
}

#[test]
fn mkfs_refuses_what_makes_no_volume_on_two_devices() {
    let dir = TempDir::new().unwrap();
    let img = dir.path().join("dev.img");
    let refused = [
        (
            "fram-8m",
            "fram-8m",
            &[][..],
            "--preset fram-8m is NVRAM: a volume on two devices keeps its data on SLC NAND or NOR",
        ),
        (
            "nand-128m",
            "nand-128m",
            &[],
            "--nvram nand-128m is SLC NAND, not NVRAM",
        ),
        (
            "mlc-flexfs",
            "fram-8m",
            &[],
            "--preset mlc-flexfs is MLC NAND",
        ),
        // 256 KiB NOR segments of 500 slots: the 256 KiB FRAM holds one.
        (
            "28f008sa",
            "cy15b102q",
            &[],
            "cannot hold 3 segments of the flash's",
        ),
        ("nand-128m", "fram-9m", &[], "unknown preset 'fram-9m'"),
        (
            "nand-1g",
            "cy15b102q",
            &[],
            "cannot hold 3 segments of the flash's",
        ),
        (
            "nand-128m",
            "fram-8m",
            &["--ftl", "--sector-size", "1024"],
            "a sector is a page",
        ),
        (
            "nand-128m",
            "fram-8m",
            &["--regions", "bm"],
            "SLC mode exists only on MLC NAND",
        ),
    ];
    for (preset, nvram, extra, expect) in refused {
        let line = fails(
            flashfs()
                .args(["mkfs", "--preset", preset, "--nvram", nvram])
                .args(extra)
                .arg(&img),
            1,
        );
        assert!(line.contains(expect), "{preset} {nvram} {extra:?}: {line}");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "{preset} {nvram} {extra:?} left a file"
        );
    }
    // A small NAND fits beside the small FRAM.
    flashfs()
        .args([
            "mkfs",
            "--preset",
            "nand-128m",
            "--blocks",
            "512",
            "--nvram",
            "cy15b102q",
        ])
        .arg(&img)
        .assert()
        .success();
    assert_eq!(info_json(&img)["nvram"]["preset"], "cy15b102q");

    // An NVRAM image beside IMAGE is replaced only with --force, or removed when the new
    // volume lies on one device.
    let nvram = nvram_image(&img);
    std::fs::remove_file(&img).unwrap();
    let kept = digest(&nvram);
    let line = fails(
        flashfs().args(["mkfs", "--preset", "nand-128m"]).arg(&img),
        1,
    );
    assert!(
        line.contains("dev.img.nvram: file exists (use --force to replace it)"),
        "{line}"
    );
    assert!(!img.exists());
    assert_eq!(digest(&nvram), kept);
    flashfs()
        .args(["mkfs", "--force", "--preset", "nand-128m"])
        .arg(&img)
        .assert()
        .success();
    assert!(!nvram.exists(), "the stale NVRAM image was left beside");
    let (code, out) = fsck(&img, false);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn images_that_do_not_make_the_volume_fail_in_one_line_and_stay_as_they_were() {
    let dir = TempDir::new().unwrap();
    let img = dir.path().join("dev.img");
    let nvram = nvram_image(&img);
    mkfs(&img, &[]);
    put_hello(&img, "/x");
    let kept = dir.path().join("kept.nvram");
    std::fs::rename(&nvram, &kept).unwrap();
    let nand = digest(&img);

    let check = |expect: &str| {
        let line = fails(flashfs().arg("ls").arg(&img).arg("/"), 1);
        assert!(line.contains(expect), "{line}");
        let line = fails(flashfs().arg("info").arg(&img), 1);
        assert!(line.contains(expect), "{line}");
        let line = fails(flashfs().args(["fsck", "--repair"]).arg(&img), 8);
        assert!(line.contains(expect), "{line}");
        let line = fails(flashfs().args(["put"]).arg(&img).arg(&kept).arg("/k"), 1);
        assert!(line.contains(expect), "{line}");
        assert_eq!(digest(&img), nand, "{expect}: the NAND image changed");
    };
    // The NVRAM image is missing.
    check("the volume lies on two devices, and its NVRAM image");
    // A NAND image where the NVRAM image belongs.
    create(&nvram, "nand-128m");
    check("dev.img.nvram is SLC NAND, not NVRAM");
    // A fresh NVRAM image.
    create(&nvram, "fram-8m");
    check("the NVRAM image holds no volume, but the flash image does");
    // Another volume's NVRAM image.
    let other = dir.path().join("other.img");
    mkfs(&other, &["--ftl"]);
    std::fs::copy(nvram_image(&other), &nvram).unwrap();
    check("hold different volumes");
    // An NVRAM part too small for the NAND's segments.
    create(&nvram, "cy15b102q");
    check("cannot hold 3 segments of the flash's");
    // A directory.
    std::fs::remove_file(&nvram).unwrap();
    std::fs::create_dir(&nvram).unwrap();
    check("dev.img.nvram: not a regular file");
    std::fs::remove_dir(&nvram).unwrap();

    // Back together, the volume is whole.
    std::fs::rename(&kept, &nvram).unwrap();
    flashfs()
        .arg("cat")
        .arg(&img)
        .arg("/x")
        .assert()
        .success()
        .stdout("hello");

    // A volume on one device with a stray NVRAM image beside it.
    let plain = dir.path().join("plain.img");
    stdout(
        flashfs()
            .args(["mkfs", "--preset", "nand-128m"])
            .arg(&plain),
    );
    std::fs::copy(&nvram, nvram_image(&plain)).unwrap();
    let line = fails(flashfs().arg("ls").arg(&plain).arg("/"), 1);
    assert!(
        line.contains("the flash image holds a volume of its own"),
        "{line}"
    );
}

/// NVRAM beside SPI NOR (the W25Q64JV and the CY15B102Q FRAM, both on one SPI bus in a
/// device): the same commands, small files on the NVRAM, a large file's rest on the NOR;
/// the NOR image alone is refused rather than mounted without its metadata.
#[test]
fn nvram_beside_nor_is_a_volume_too() {
    let dir = TempDir::new().unwrap();
    let img = dir.path().join("dev.img");
    let text = stdout(
        flashfs()
            .args(["mkfs", "--preset", "w25q64jv", "--nvram", "cy15b102q"])
            .arg(&img),
    );
    assert!(
        text.contains("16 segments on the NVRAM for metadata, 512 on the flash for data"),
        "{text}"
    );
    let host = dir.path().join("host");
    std::fs::create_dir_all(&host).unwrap();
    for i in 0..6u32 {
        std::fs::write(host.join(format!("f{i}")), data(900 + i as usize, i + 1)).unwrap();
    }
    std::fs::write(host.join("big"), data(100 << 10, 77)).unwrap();
    let before = digests(&img);
    flashfs()
        .arg("put")
        .arg(&img)
        .arg(&host)
        .arg("/h")
        .arg("-r")
        .assert()
        .success();
    let after = digests(&img);
    assert_ne!(
        after.0, before.0,
        "the large file's rest went to the NOR image"
    );
    assert_ne!(after.1, before.1, "the metadata went to the NVRAM image");

    let info = info_json(&img);
    assert_eq!(info["kind"], "nor");
    assert_eq!(info["nvram"]["preset"], "cy15b102q");
    let tiers = &info["log"]["tiers"];
    let bulk = u(&tiers["bulk_live_bytes"]);
    let rest = (100u64 - 16) << 10;
    assert!(
        (rest..rest * 11 / 10).contains(&bulk),
        "{bulk} bytes live on the NOR for {rest} of the large file's rest: {tiers}"
    );
    assert_eq!(info["log"]["mounted_from"], "checkpoint");
    let (code, out) = fsck(&img, false);
    assert_eq!(code, 0, "{out}");
    let back = dir.path().join("back");
    flashfs()
        .arg("get")
        .arg(&img)
        .arg("/h")
        .arg(&back)
        .arg("-r")
        .assert()
        .success();
    assert_eq!(
        std::fs::read(back.join("big")).unwrap(),
        data(100 << 10, 77)
    );
    assert_eq!(std::fs::read(back.join("f5")).unwrap(), data(905, 6));
    assert_eq!(digests(&img), after, "reading changed an image");

    // The NOR image without its NVRAM holds no volume of its own.
    std::fs::rename(nvram_image(&img), dir.path().join("kept.nvram")).unwrap();
    let line = fails(flashfs().args(["ls"]).arg(&img).arg("/h"), 1);
    assert!(
        line.contains("it lies on two devices, and its NVRAM image"),
        "{line}"
    );
    assert_eq!(digest(&img), after.0, "the NOR image alone was changed");
}
