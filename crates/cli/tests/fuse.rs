//! `flashfs mount` end to end: a FAT file system made, filled and checked by the standard
//! tools on the block device served through FUSE, across an unmount and a remount.
//!
//! Needs /dev/fuse, `fusermount3` (Debian fuse3), `mkfs.fat` and `fsck.fat` (dosfstools) and
//! `mcopy`, `mtype`, `mmd` (mtools). Without them the test fails: it is never skipped.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{
    assert_clean, data, flashfs_bin, info_json, is_mounted, mount, mount_pid, require_fuse, run,
    unmount, wait_gone, Mounted,
};
use tempfile::TempDir;

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn fat_on_the_mounted_block_device_survives_unmount_and_remount() {
    require_fuse(&["mkfs.fat", "fsck.fat", "mcopy", "mtype", "mmd"]);
    let dir = TempDir::new().unwrap();
    let img = dir.path().join("dev.img");
    let mnt = dir.path().join("mnt");
    let log = dir.path().join("mount.log");
    std::fs::create_dir(&mnt).unwrap();
    run(Command::new(flashfs_bin())
        .args([
            "mkfs",
            "--ftl",
            "--preset",
            "nand-128m",
            "--sectors",
            "16384",
        ])
        .arg(&img));

    // Background mount: returns once live.
    let out = run(Command::new(flashfs_bin())
        .arg("mount")
        .arg(&img)
        .arg(&mnt)
        .arg("--log")
        .arg(&log));
    let guard = Mounted(&mnt);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("mounted "), "{text}");
    let pid = mount_pid(&text);
    assert!(is_mounted(&mnt));
    let disk = mnt.join("disk.img");
    assert_eq!(std::fs::metadata(&disk).unwrap().len(), 16384 * 512);
    let names: Vec<_> = std::fs::read_dir(&mnt)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("disk.img")]);
    // The device has the size it has.
    let f = std::fs::OpenOptions::new().write(true).open(&disk).unwrap();
    assert!(f.set_len(4096).is_err(), "truncation must be refused");
    drop(f);

    // FAT, made, filled and checked by the standard tools.
    run(Command::new("mkfs.fat").arg("-n").arg("FLASHFS").arg(&disk));
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("big.bin", data(1_500_000, 1)),
        ("odd.bin", data(12_345, 2)),
        ("hello.txt", b"hello, flash\n".to_vec()),
    ];
    for (name, bytes) in &files {
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    run(Command::new("mmd").arg("-i").arg(&disk).arg("::/sub"));
    for (name, _) in &files {
        run(Command::new("mcopy")
            .arg("-i")
            .arg(&disk)
            .arg(dir.path().join(name))
            .arg("::/sub/"));
    }
    run(Command::new("fsck.fat").arg("-n").arg(&disk));

    // Unmount from outside: the mount process flushes, closes the image and ends.
    unmount(&mnt);
    wait_gone(pid);
    assert!(!is_mounted(&mnt));
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("flushed and closed"), "{logged}");
    drop(guard);

    // Remount in the foreground; a signal unmounts it.
    let child: Child = Command::new(flashfs_bin())
        .arg("mount")
        .arg("-f")
        .arg(&img)
        .arg(&mnt)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let guard = Mounted(&mnt);
    wait_for("the remount", || is_mounted(&mnt) && disk.exists());
    run(Command::new("fsck.fat").arg("-n").arg(&disk));
    let typed = run(Command::new("mtype")
        .arg("-i")
        .arg(&disk)
        .arg("::/sub/hello.txt"));
    assert_eq!(typed.stdout, b"hello, flash\n");
    for (name, bytes) in &files {
        let back = dir.path().join(format!("{name}.back"));
        run(Command::new("mcopy")
            .arg("-i")
            .arg(&disk)
            .arg(format!("::/sub/{name}"))
            .arg(&back));
        assert!(std::fs::read(&back).unwrap() == *bytes, "{name} differs");
    }
    // The shell's own `kill`: a bare Debian has no /bin/kill (procps).
    run(Command::new("sh").args(["-c", &format!("kill -TERM {}", child.id())]));
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("unmounted") && text.contains("flushed and closed"),
        "{text}"
    );
    assert!(!is_mounted(&mnt));
    drop(guard);

    // Read-only: writes are refused and the image does not change.
    let before = std::fs::read(&img).unwrap();
    let out = run(Command::new(flashfs_bin())
        .arg("mount")
        .arg(&img)
        .arg(&mnt)
        .args(["-o", "ro"]));
    let guard = Mounted(&mnt);
    let text = String::from_utf8(out.stdout).unwrap();
    let pid = mount_pid(&text);
    assert!(std::fs::OpenOptions::new().write(true).open(&disk).is_err());
    run(Command::new("fsck.fat").arg("-n").arg(&disk));
    unmount(&mnt);
    wait_gone(pid);
    drop(guard);
    assert!(
        std::fs::read(&img).unwrap() == before,
        "a read-only mount changed the image"
    );

    // The flash image itself checks clean.
    assert_clean(&img);
}

/// The block device of a volume on two devices (NVRAM beside NAND, two images) served as
/// one file: what is written through the kernel reads back after an unmount and a
/// remount, its data on the NAND and its metadata on the NVRAM.
#[test]
fn the_block_device_on_two_devices_is_served_as_one_file() {
    require_fuse(&[]);
    let dir = TempDir::new().unwrap();
    let img = dir.path().join("blk.img");
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    run(Command::new(flashfs_bin())
        .args(["mkfs", "--ftl", "--sectors", "8192"])
        .args(["--preset", "nand-128m", "--nvram", "fram-8m"])
        .arg(&img));
    let bytes = data(8192 * 512, 7);
    let pid = mount(&img, &mnt, &[]);
    let guard = Mounted(&mnt);
    let disk = mnt.join("disk.img");
    // Written in place (the device has its size: truncation is refused), in requests of
    // up to 1 MiB.
    let mut f = std::fs::OpenOptions::new().write(true).open(&disk).unwrap();
    std::io::Write::write_all(&mut f, &bytes).unwrap();
    drop(f);
    unmount(&mnt);
    wait_gone(pid);
    drop(guard);

    let info = info_json(&img);
    assert_eq!(info["space"]["used_bytes"], 8192 * 512, "{info}");
    let tiers = &info["log"]["tiers"];
    assert!(tiers["fast_live_bytes"].as_u64().unwrap() > 0, "{tiers}");
    assert!(
        tiers["bulk_live_bytes"].as_u64().unwrap() >= 8192 * 512,
        "data went to the NVRAM: {tiers}"
    );

    let pid = mount(&img, &mnt, &["-o", "ro"]);
    let guard = Mounted(&mnt);
    assert!(
        std::fs::read(&disk).unwrap() == bytes,
        "the device reads back wrong"
    );
    unmount(&mnt);
    wait_gone(pid);
    drop(guard);
    assert_clean(&img);
}

#[test]
fn mount_refuses_bad_input_in_one_line() {
    let dir = TempDir::new().unwrap();
    let img = dir.path().join("dev.img");
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let fails = |args: &[&std::ffi::OsStr], expect: &str| {
        let out = Command::new(flashfs_bin()).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("flashfs: ") && err.contains(expect),
            "{args:?}: {err}"
        );
    };
    let m = std::ffi::OsStr::new("mount");
    fails(
        &[m, img.as_os_str(), mnt.as_os_str()],
        "no such file or directory",
    );
    run(Command::new(flashfs_bin())
        .args(["sim", "create", "--preset", "w25q64jv"])
        .arg(&img));
    fails(&[m, img.as_os_str(), mnt.as_os_str()], "no flashfs volume");
    fails(
        &[m, img.as_os_str(), dir.path().join("nowhere").as_os_str()],
        "no such file or directory",
    );
    fails(&[m, img.as_os_str(), img.as_os_str()], "not a directory");
    fails(
        &[
            m,
            img.as_os_str(),
            mnt.as_os_str(),
            "-o".as_ref(),
            "bogus".as_ref(),
        ],
        "unknown mount option 'bogus'",
    );
    fails(
        &[
            m,
            img.as_os_str(),
            mnt.as_os_str(),
            "--policy".as_ref(),
            "lru".as_ref(),
        ],
        "unknown policy 'lru'",
    );
    assert!(!is_mounted(&mnt));
}
