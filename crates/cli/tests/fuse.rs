//! `flashfs mount` end to end: a FAT file system made, filled and checked by the standard
//! tools on the block device served through FUSE, across an unmount and a remount.
//!
//! Needs /dev/fuse, `fusermount3` (Debian fuse3), `mkfs.fat` and `fsck.fat` (dosfstools) and
//! `mcopy`, `mtype`, `mmd` (mtools). Without them the test fails: it is never skipped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

fn flashfs_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_flashfs"))
}

/// Fails the test, loudly, when something FUSE needs is missing.
fn require_tools() {
    assert!(
        Path::new("/dev/fuse").exists(),
        "/dev/fuse is missing: the FUSE test needs the fuse kernel module"
    );
    for tool in [
        "fusermount3",
        "mkfs.fat",
        "fsck.fat",
        "mcopy",
        "mtype",
        "mmd",
    ] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            found,
            "`{tool}` is missing: the FUSE test needs the Debian packages fuse3, dosfstools and mtools"
        );
    }
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("the command starts");
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Unmounts on drop, so that a failing test leaves no mount behind.
struct Mounted<'a>(&'a Path);

impl Drop for Mounted<'_> {
    fn drop(&mut self) {
        if is_mounted(self.0) {
            let _ = Command::new("fusermount3")
                .args(["-u", "-z"])
                .arg(self.0)
                .status();
        }
    }
}

fn is_mounted(dir: &Path) -> bool {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(1) == Some(dir.to_str().unwrap()))
}

/// Waits until process `pid` has ended (or only a zombie is left).
fn wait_gone(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return,
            Ok(stat) => {
                let state = stat
                    .rsplit(')')
                    .next()
                    .and_then(|r| r.split_whitespace().next());
                if state == Some("Z") {
                    return;
                }
            }
        }
        assert!(Instant::now() < deadline, "process {pid} did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn data(len: usize, seed: u32) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2_654_435_761).max(1);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

#[test]
fn fat_on_the_mounted_block_device_survives_unmount_and_remount() {
    require_tools();
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
    let pid: u32 = text
        .split("(process ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .and_then(|p| p.parse().ok())
        .expect("the mount process id");
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
    run(Command::new("fusermount3").arg("-u").arg(&mnt));
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
    run(Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string()));
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
    let pid: u32 = text
        .split("(process ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .and_then(|p| p.parse().ok())
        .expect("the mount process id");
    assert!(std::fs::OpenOptions::new().write(true).open(&disk).is_err());
    run(Command::new("fsck.fat").arg("-n").arg(&disk));
    run(Command::new("fusermount3").arg("-u").arg(&mnt));
    wait_gone(pid);
    drop(guard);
    assert!(
        std::fs::read(&img).unwrap() == before,
        "a read-only mount changed the image"
    );

    // The flash image itself checks clean.
    let out = Command::new(flashfs_bin())
        .arg("fsck")
        .arg(&img)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
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
