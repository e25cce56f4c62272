//! Helpers shared by the command-line tests: running `flashfs`, the one-line error rule, test
//! data, and mounting through FUSE.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

/// The `flashfs` binary, ready to take arguments (no backtraces, no colour).
pub fn flashfs() -> assert_cmd::Command {
    let mut cmd = assert_cmd::cargo::cargo_bin_cmd!("flashfs");
    cmd.env_remove("RUST_BACKTRACE").env("NO_COLOR", "1");
    cmd
}

/// Runs a command that must fail with exit code `code` and one line on stderr; returns that
/// line.
pub fn fails(cmd: &mut assert_cmd::Command, code: i32) -> String {
    let out = cmd.assert().failure().code(code).get_output().clone();
    let stderr = String::from_utf8(out.stderr).expect("stderr is UTF-8");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "expected one line on stderr, got {stderr:?}"
    );
    assert!(lines[0].starts_with("flashfs: "), "{stderr:?}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("backtrace"),
        "{stderr:?}"
    );
    lines[0].to_string()
}

/// Runs a command that must succeed; returns what it printed on stdout.
pub fn stdout(cmd: &mut assert_cmd::Command) -> String {
    let out = cmd.assert().success().get_output().stdout.clone();
    String::from_utf8(out).expect("stdout is UTF-8")
}

/// What `flashfs info --json` prints about `image`: one object.
pub fn info_json(image: &Path) -> serde_json::Value {
    let text = stdout(flashfs().args(["info", "--json"]).arg(image));
    assert_eq!(text.lines().count(), 1, "{text}");
    serde_json::from_str(&text).unwrap()
}

/// Runs `flashfs fsck` (with `--repair` if `repair`): its exit code and output.
pub fn fsck(image: &Path, repair: bool) -> (i32, String) {
    let mut cmd = flashfs();
    cmd.arg("fsck").arg(image);
    if repair {
        cmd.arg("--repair");
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
    )
}

/// The NVRAM image of a volume on two devices whose NAND image is `image`: `image` with
/// `.nvram` appended.
pub fn nvram_image(image: &Path) -> PathBuf {
    let mut p = image.as_os_str().to_owned();
    p.push(".nvram");
    PathBuf::from(p)
}

/// Mounts `img` on `mnt` in the background with `extra` options; returns the serving
/// process.
pub fn mount(img: &Path, mnt: &Path, extra: &[&str]) -> u32 {
    let out = run(std::process::Command::new(flashfs_bin())
        .arg("mount")
        .arg(img)
        .arg(mnt)
        .args(extra));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(is_mounted(mnt), "{text}");
    mount_pid(&text)
}

/// Asserts that `flashfs fsck` finds `image` clean (exit code 0).
pub fn assert_clean(image: &Path) {
    let out = std::process::Command::new(flashfs_bin())
        .arg("fsck")
        .arg(image)
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

/// Runs a command that must succeed and print one JSON object per line; returns them.
pub fn json_rows(cmd: &mut assert_cmd::Command) -> Vec<serde_json::Value> {
    let out = cmd.output().expect("flashfs runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("stdout is UTF-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON object per line"))
        .collect()
}

/// Asserts that `row` has every one of `keys`.
pub fn has_keys(row: &serde_json::Value, keys: &[&str]) {
    for key in keys {
        assert!(row.get(key).is_some(), "missing {key} in {row}");
    }
}

/// `len` pseudo-random bytes (xorshift from `seed`).
pub fn data(len: usize, seed: u32) -> Vec<u8> {
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

/// The path of the `flashfs` binary, for `std::process::Command`.
pub fn flashfs_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_flashfs"))
}

/// Fails the test, loudly, when /dev/fuse, `fusermount3` or one of `tools` is missing: a
/// FUSE test is never skipped.
pub fn require_fuse(tools: &[&str]) {
    assert!(
        Path::new("/dev/fuse").exists(),
        "/dev/fuse is missing: the FUSE test needs the fuse kernel module"
    );
    for tool in std::iter::once(&"fusermount3").chain(tools) {
        let found = std::process::Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            found,
            "`{tool}` is missing: the FUSE tests need the Debian packages fuse3, dosfstools \
             and mtools"
        );
    }
}

/// Runs a command that must succeed.
pub fn run(cmd: &mut std::process::Command) -> Output {
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

/// Unmounts `mnt`, waiting while the kernel still holds a file of it: a `close` returns before
/// the file system's release of the file, so right after a large write the mount can be busy
/// for a moment.
pub fn unmount(mnt: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = std::process::Command::new("fusermount3")
            .arg("-u")
            .arg(mnt)
            .output()
            .expect("fusermount3 starts");
        if out.status.success() {
            return;
        }
        let busy = String::from_utf8_lossy(&out.stderr).contains("busy");
        assert!(
            busy && Instant::now() < deadline,
            "fusermount3 -u {} failed ({}): {}",
            mnt.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Unmounts on drop, so that a failing test leaves no mount behind.
pub struct Mounted<'a>(pub &'a Path);

impl Drop for Mounted<'_> {
    fn drop(&mut self) {
        if is_mounted(self.0) {
            let _ = std::process::Command::new("fusermount3")
                .args(["-u", "-z"])
                .arg(self.0)
                .status();
        }
    }
}

/// Whether something is mounted on `dir`.
pub fn is_mounted(dir: &Path) -> bool {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(1) == Some(dir.to_str().unwrap()))
}

/// Waits until process `pid` has ended (or only a zombie is left).
pub fn wait_gone(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(60);
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

/// The serving process a background `flashfs mount` names in its output.
pub fn mount_pid(stdout: &str) -> u32 {
    stdout
        .split("(process ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .and_then(|p| p.parse().ok())
        .expect("the mount process id")
}

/// Flips a few bits, at rest, in the stored block of a NOR image `img` that begins with the
/// file data `first` (at least 64 bytes; NOR flash is stored inverted in the image), and
/// nothing else.
pub fn flip_bits_in_block(img: &Path, first: &[u8]) {
    let mut bytes = std::fs::read(img).unwrap();
    let inverted: Vec<u8> = first[..64].iter().map(|x| !x).collect();
    let at = bytes
        .windows(64)
        .position(|w| w == inverted.as_slice())
        .expect("the block in the image");
    for x in &mut bytes[at + 100..at + 104] {
        *x ^= 0x10;
    }
    std::fs::write(img, &bytes).unwrap();
}
