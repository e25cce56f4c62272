//! `flashfs mount` of the native file system, end to end through the kernel: a realistic
//! workload (a tree, large and small files, random writes, appends, rename over, truncation,
//! hard and symbolic links, modes, extended attributes, many processes at once), then an
//! unmount, `flashfs fsck`, and every byte compared after `flashfs get -r` and a remount.
//!
//! Needs /dev/fuse and `fusermount3` (Debian fuse3). Without them the test fails: it is
//! never skipped.

mod common;

use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{
    assert_clean, data, flashfs_bin, flip_bits_in_block, is_mounted, mount, nvram_image,
    require_fuse, run, wait_gone, Mounted,
};
use tempfile::TempDir;

/// A temporary directory holding an image formatted on `preset` and an empty mount point.
fn formatted(preset: &str) -> (TempDir, PathBuf, PathBuf) {
    let dir = TempDir::new().unwrap();
    let img = dir.path().join("dev.img");
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    run(Command::new(flashfs_bin())
        .args(["mkfs", "--preset", preset])
        .arg(&img));
    (dir, img, mnt)
}

fn unmount(mnt: &Path, pid: u32) {
    common::unmount(mnt);
    wait_gone(pid);
    assert!(!is_mounted(mnt));
}

/// What the tree should hold: path -> node.
#[derive(Debug, Clone, PartialEq)]
enum Node {
    File { data: Vec<u8>, mode: u32 },
    Dir { mode: u32 },
    Link(PathBuf),
}

type Model = BTreeMap<PathBuf, Node>;

/// Everything on `img`, copied out by `flashfs get -r` into a new directory in `dir`, as a
/// model.
fn copied_out(img: &Path, dir: &Path) -> Model {
    let back = dir.join("back");
    run(Command::new(flashfs_bin())
        .arg("get")
        .arg(img)
        .arg("/")
        .arg(&back)
        .arg("-r"));
    scan(&back)
}

/// What a tree on the host holds, as a model.
fn scan(root: &Path) -> Model {
    fn walk(root: &Path, dir: &Path, out: &mut Model) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            let mode = m.mode() & 0o7777;
            if m.file_type().is_symlink() {
                out.insert(rel, Node::Link(std::fs::read_link(&p).unwrap()));
            } else if m.is_dir() {
                out.insert(rel, Node::Dir { mode });
                walk(root, &p, out);
            } else {
                let data = std::fs::read(&p).unwrap();
                out.insert(rel, Node::File { data, mode });
            }
        }
    }
    let mut out = Model::new();
    walk(root, root, &mut out);
    out
}

fn compare(what: &str, got: &Model, want: &Model) {
    let gk: Vec<_> = got.keys().collect();
    let wk: Vec<_> = want.keys().collect();
    assert_eq!(gk, wk, "{what}: the names differ");
    for (p, w) in want {
        assert!(got[p] == *w, "{what}: {} differs", p.display());
    }
}

fn xattr_set(path: &Path, name: &str, value: &[u8]) -> std::io::Result<()> {
    let p = CString::new(path.as_os_str().as_bytes()).unwrap();
    let n = CString::new(name).unwrap();
    // SAFETY: the strings are NUL-terminated and the value's pointer and length match.
    let rc = unsafe {
        libc::setxattr(
            p.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn xattr_get(path: &Path, name: &str) -> std::io::Result<Vec<u8>> {
    let p = CString::new(path.as_os_str().as_bytes()).unwrap();
    let n = CString::new(name).unwrap();
    // SAFETY: a null buffer of size 0 asks for the size only.
    let size = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), std::ptr::null_mut(), 0) };
    if size < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut buf = vec![0u8; size as usize];
    // SAFETY: the buffer holds `size` bytes.
    let got = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if got < 0 {
        return Err(std::io::Error::last_os_error());
    }
    buf.truncate(got as usize);
    Ok(buf)
}

fn xattr_list(path: &Path) -> Vec<String> {
    let p = CString::new(path.as_os_str().as_bytes()).unwrap();
    let mut buf = vec![0u8; 4096];
    // SAFETY: the buffer holds 4096 bytes.
    let n = unsafe { libc::listxattr(p.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    assert!(n >= 0, "listxattr: {}", std::io::Error::last_os_error());
    buf[..n as usize]
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

/// The workload, through the kernel; returns what the tree must hold.
fn workload(mnt: &Path) -> Model {
    let mut model = Model::new();
    let file = |model: &mut Model, rel: &str, data: Vec<u8>| {
        std::fs::write(mnt.join(rel), &data).unwrap();
        model.insert(rel.into(), Node::File { data, mode: 0o644 });
    };
    // A tree of small files.
    for d in 0..4 {
        let dir = format!("tree/d{d}");
        std::fs::create_dir_all(mnt.join(&dir)).unwrap();
        for f in 0..25 {
            let len = (d * 25 + f) * 97 % 5000;
            file(
                &mut model,
                &format!("{dir}/f{f}"),
                data(len, (d * 100 + f) as u32),
            );
        }
    }
    model.insert("tree".into(), Node::Dir { mode: 0o755 });
    for d in 0..4 {
        model.insert(format!("tree/d{d}").into(), Node::Dir { mode: 0o755 });
    }
    // Large files.
    file(&mut model, "big", data(24 << 20, 7));
    file(&mut model, "medium", data(3_000_001, 8));

    // Random writes over a file, mirrored.
    let mut r = data(1 << 20, 9);
    std::fs::write(mnt.join("random"), &r).unwrap();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(mnt.join("random"))
        .unwrap();
    let offsets = data(400 * 4, 10);
    for (i, o) in offsets.chunks(4).enumerate() {
        let off = u32::from_le_bytes(o.try_into().unwrap()) as usize % (1 << 20);
        let len = 1 + (i * 37) % 9000;
        let chunk = data(len, 1000 + i as u32);
        f.write_at(&chunk, off as u64).unwrap();
        if off + len > r.len() {
            r.resize(off + len, 0);
        }
        r[off..off + len].copy_from_slice(&chunk);
    }
    f.sync_all().unwrap();
    drop(f);
    model.insert(
        "random".into(),
        Node::File {
            data: r,
            mode: 0o644,
        },
    );

    // Appends.
    let mut log = Vec::new();
    for i in 0..50 {
        let line = format!("line {i}\n").repeat(i % 7 + 1);
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(mnt.join("append.log"))
            .unwrap();
        std::io::Write::write_all(&mut f, line.as_bytes()).unwrap();
        log.extend_from_slice(line.as_bytes());
    }
    model.insert(
        "append.log".into(),
        Node::File {
            data: log,
            mode: 0o644,
        },
    );

    // Rename over an existing file (the editor's save).
    file(&mut model, "config", b"old\n".to_vec());
    std::fs::write(mnt.join(".config.tmp"), b"new contents\n").unwrap();
    std::fs::rename(mnt.join(".config.tmp"), mnt.join("config")).unwrap();
    model.insert(
        "config".into(),
        Node::File {
            data: b"new contents\n".to_vec(),
            mode: 0o644,
        },
    );

    // Truncation, shorter and longer.
    let mut t = data(100_000, 11);
    std::fs::write(mnt.join("trunc"), &t).unwrap();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(mnt.join("trunc"))
        .unwrap();
    f.set_len(33_333).unwrap();
    f.set_len(50_000).unwrap();
    t.truncate(33_333);
    t.resize(50_000, 0);
    drop(f);
    model.insert(
        "trunc".into(),
        Node::File {
            data: t,
            mode: 0o644,
        },
    );

    // Hard links.
    std::fs::hard_link(mnt.join("medium"), mnt.join("tree/medium-link")).unwrap();
    assert_eq!(std::fs::metadata(mnt.join("medium")).unwrap().nlink(), 2);
    let Node::File { data: m, .. } = model["medium".as_ref() as &Path].clone() else {
        unreachable!()
    };
    model.insert(
        "tree/medium-link".into(),
        Node::File {
            data: m,
            mode: 0o644,
        },
    );

    // Symbolic links.
    std::os::unix::fs::symlink("../big", mnt.join("tree/to-big")).unwrap();
    std::os::unix::fs::symlink("/dangling/target", mnt.join("dangling")).unwrap();
    model.insert("tree/to-big".into(), Node::Link("../big".into()));
    model.insert("dangling".into(), Node::Link("/dangling/target".into()));
    assert_eq!(
        std::fs::read(mnt.join("tree/to-big")).unwrap().len(),
        24 << 20
    );

    // Modes.
    std::fs::set_permissions(mnt.join("trunc"), std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::set_permissions(mnt.join("tree/d1"), std::fs::Permissions::from_mode(0o700)).unwrap();
    if let Some(Node::File { mode, .. }) = model.get_mut(Path::new("trunc")) {
        *mode = 0o600;
    }
    model.insert("tree/d1".into(), Node::Dir { mode: 0o700 });

    // Extended attributes, with the size probe.
    let x = mnt.join("config");
    xattr_set(&x, "user.color", b"blue").unwrap();
    xattr_set(&x, "user.big", &data(3000, 12)).unwrap();
    assert_eq!(xattr_get(&x, "user.color").unwrap(), b"blue");
    assert_eq!(xattr_get(&x, "user.big").unwrap(), data(3000, 12));
    let mut names = xattr_list(&x);
    names.sort();
    assert_eq!(names, ["user.big", "user.color"]);
    assert_eq!(
        xattr_get(&x, "user.none").unwrap_err().raw_os_error(),
        Some(libc::ENODATA)
    );

    // A file unlinked while open keeps its data until closed.
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .read(true)
        .write(true)
        .truncate(true)
        .open(mnt.join("ghost"))
        .unwrap();
    std::io::Write::write_all(&mut f, &data(50_000, 13)).unwrap();
    std::fs::remove_file(mnt.join("ghost")).unwrap();
    let mut back = vec![0u8; 50_000];
    f.read_exact_at(&mut back, 0).unwrap();
    assert!(back == data(50_000, 13));
    drop(f);

    // Errors come back as their errno.
    let e = std::fs::remove_dir(mnt.join("tree")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOTEMPTY));
    let e = std::fs::create_dir(mnt.join("big")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EEXIST));
    let e = std::fs::read(mnt.join("nope")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOENT));

    // Many processes at once: writers in their own directories and on one shared log.
    let writers: Vec<_> = (0..6)
        .map(|w| {
            let script = format!(
                "set -e; mkdir -p par/w{w}; i=0; while [ $i -lt 30 ]; do \
                 i=$((i+1)); \
                 yes \"w{w}-$i\" | head -c $((i * 301)) > par/w{w}/f$i; \
                 echo \"w{w} $i\" >> par/shared.log; \
                 done; rm par/w{w}/f3; mv par/w{w}/f4 par/w{w}/moved"
            );
            Command::new("sh")
                .arg("-c")
                .arg(script)
                .current_dir(mnt)
                .spawn()
                .unwrap()
        })
        .collect();
    for mut w in writers {
        assert!(w.wait().unwrap().success());
    }
    model.insert("par".into(), Node::Dir { mode: 0o755 });
    for w in 0..6 {
        model.insert(format!("par/w{w}").into(), Node::Dir { mode: 0o755 });
        for i in 1..=30 {
            let name = match i {
                3 => continue,
                4 => "moved".to_string(),
                i => format!("f{i}"),
            };
            let mut content = format!("w{w}-{i}\n").into_bytes().repeat(i * 301);
            content.truncate(i * 301);
            model.insert(
                format!("par/w{w}/{name}").into(),
                Node::File {
                    data: content,
                    mode: 0o644,
                },
            );
        }
    }
    let shared = std::fs::read_to_string(mnt.join("par/shared.log")).unwrap();
    let mut lines: Vec<&str> = shared.lines().collect();
    lines.sort();
    let mut want: Vec<String> = (0..6)
        .flat_map(|w| (1..=30).map(move |i| format!("w{w} {i}")))
        .collect();
    want.sort();
    assert_eq!(
        lines, want,
        "appends from several processes were lost or torn"
    );
    model.insert(
        "par/shared.log".into(),
        Node::File {
            data: shared.into_bytes(),
            mode: 0o644,
        },
    );

    // Delete a part of the tree.
    std::fs::remove_dir_all(mnt.join("tree/d3")).unwrap();
    model.retain(|p, _| !p.starts_with("tree/d3"));
    model
}

#[test]
fn native_file_system_through_the_kernel_survives_unmount_fsck_and_remount() {
    require_fuse(&[]);
    let (dir, img, mnt) = formatted("nand-128m");
    let log = dir.path().join("mount.log");

    let pid = mount(&img, &mnt, &["--log", log.to_str().unwrap()]);
    let guard = Mounted(&mnt);
    let model = workload(&mnt);
    compare("while mounted", &scan(&mnt), &model);
    let st = run(Command::new("df").arg("-B1").arg(&mnt));
    assert!(String::from_utf8_lossy(&st.stdout).contains("dev.img"));
    unmount(&mnt, pid);
    drop(guard);
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("flushed and closed"), "{logged}");

    // The image checks clean.
    assert_clean(&img);

    // Every byte, copied out without mounting.
    compare("flashfs get -r", &copied_out(&img, dir.path()), &model);

    // Every byte, through a remount; the attributes are still there.
    let pid = mount(&img, &mnt, &[]);
    let guard = Mounted(&mnt);
    compare("after a remount", &scan(&mnt), &model);
    assert_eq!(
        xattr_get(&mnt.join("config"), "user.color").unwrap(),
        b"blue"
    );
    assert_eq!(std::fs::metadata(mnt.join("medium")).unwrap().nlink(), 2);
    unmount(&mnt, pid);
    drop(guard);

    // Read-only: every change refused with EROFS; the image is unchanged.
    let before = std::fs::read(&img).unwrap();
    let pid = mount(&img, &mnt, &["-o", "ro"]);
    let guard = Mounted(&mnt);
    let e = std::fs::write(mnt.join("new"), b"x").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS));
    let e = std::fs::create_dir(mnt.join("newdir")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS));
    let e = std::fs::remove_file(mnt.join("config")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS));
    assert_eq!(
        std::fs::read(mnt.join("config")).unwrap(),
        b"new contents\n"
    );
    unmount(&mnt, pid);
    drop(guard);
    assert!(
        std::fs::read(&img).unwrap() == before,
        "a read-only mount changed the image"
    );
}

/// `EIO`, as the kernel returns it.
const EIO: i32 = 5;

/// A file whose data was damaged on flash reads as EIO through the kernel, never as other
/// bytes; the file beside it reads whole.
#[test]
fn damaged_data_reads_as_eio_through_the_kernel() {
    require_fuse(&[]);
    let dir = TempDir::new().unwrap();
    let img = dir.path().join("dev.img");
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    run(Command::new(flashfs_bin())
        .args(["mkfs", "--preset", "w25q64jv"])
        .arg(&img));
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    let a: Vec<u8> = (0..8192).map(|i| b'A' + (i % 7) as u8).collect();
    let b = data(8192, 5);
    std::fs::write(src.join("a.bin"), &a).unwrap();
    std::fs::write(src.join("b.bin"), &b).unwrap();
    run(Command::new(flashfs_bin())
        .arg("put")
        .arg(&img)
        .arg(src.join("a.bin"))
        .arg("/a.bin"));
    run(Command::new(flashfs_bin())
        .arg("put")
        .arg(&img)
        .arg(src.join("b.bin"))
        .arg("/b.bin"));
    // Flip a few bits in a.bin's first block.
    flip_bits_in_block(&img, &a);

    let pid = mount(&img, &mnt, &[]);
    let guard = Mounted(&mnt);
    let err = std::fs::read(mnt.join("a.bin")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(EIO), "{err}");
    // The kernel's page after the damaged block reads right; the other file reads whole.
    let f = std::fs::File::open(mnt.join("a.bin")).unwrap();
    let mut tail = vec![0u8; 4096];
    f.read_exact_at(&mut tail, 4096).unwrap();
    assert_eq!(tail, a[4096..]);
    drop(f);
    assert_eq!(std::fs::read(mnt.join("b.bin")).unwrap(), b);
    unmount(&mnt, pid);
    drop(guard);
}

/// The SLC and MLC segments in use and the bytes migrated so far, as `flashfs info` finds
/// them on an MLC image.
fn regions(img: &Path) -> (u64, u64, u64) {
    let out = run(Command::new(flashfs_bin())
        .arg("info")
        .arg(img)
        .arg("--json"));
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = info
        .pointer("/log/regions")
        .unwrap_or_else(|| panic!("no regions in {info}"));
    let n = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("no {k} in {r}"));
    (n("slc_segments"), n("mlc_segments"), n("migrated_bytes"))
}

/// A mount left alone gives the volume the time that passes as idle time: on MLC NAND with
/// background migration, data written to SLC segments moves to MLC ones once the mount has
/// been quiet for a second. The wait is the wall clock's, so each try leaves the mount
/// quiet for well over that, and a try the host held up is made again.
#[test]
fn a_quiet_mount_migrates_data_from_slc_to_mlc() {
    require_fuse(&[]);
    let dir = TempDir::new().unwrap();
    let img = dir.path().join("dev.img");
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    run(Command::new(flashfs_bin())
        .args([
            "mkfs",
            "--preset",
            "mlc-flexfs",
            "--blocks",
            "64",
            "--regions",
            "bm",
        ])
        .arg(&img));

    let pid = mount(&img, &mnt, &[]);
    let guard = Mounted(&mnt);
    let content = data(3 << 20, 21);
    let f = std::fs::File::create(mnt.join("big")).unwrap();
    std::io::Write::write_all(&mut &f, &content).unwrap();
    f.sync_all().unwrap();
    drop(f);
    unmount(&mnt, pid);
    drop(guard);
    let (slc, mlc, migrated) = regions(&img);
    assert!(
        slc >= 10 && mlc == 0 && migrated == 0,
        "written to SLC: {slc} SLC, {mlc} MLC, {migrated} B migrated"
    );

    let mut found = (slc, mlc, migrated);
    for _ in 0..5 {
        let pid = mount(&img, &mnt, &[]);
        let guard = Mounted(&mnt);
        std::thread::sleep(std::time::Duration::from_millis(3000));
        unmount(&mnt, pid);
        drop(guard);
        found = regions(&img);
        if found.1 > 0 {
            break;
        }
    }
    let (slc_after, mlc_after, migrated) = found;
    assert!(
        mlc_after > 0 && slc_after < slc,
        "nothing migrated: {slc} SLC segments before, {slc_after} SLC and {mlc_after} MLC after"
    );
    // The unmount recorded what the quiet time moved, though nothing else changed since
    // the last commit.
    assert!(migrated > 0, "info counts no migrated bytes");
    // The data reads back whole from its new place.
    let pid = mount(&img, &mnt, &["-o", "ro"]);
    let guard = Mounted(&mnt);
    assert!(std::fs::read(mnt.join("big")).unwrap() == content);
    unmount(&mnt, pid);
    drop(guard);
}

/// A mount under a RAM budget (`--ram-budget`, in KiB) serves files whole: many small
/// files and a large one written, read back through the kernel, then after an unmount
/// checked by `fsck` and read again; a budget that is not a number is one line of error.
#[test]
fn a_mount_under_a_ram_budget_keeps_every_byte() {
    require_fuse(&[]);
    let (_dir, img, mnt) = formatted("nand-128m");
    let big = data(4 << 20, 5);
    let pid = mount(&img, &mnt, &["--ram-budget", "32"]);
    let guard = Mounted(&mnt);
    for i in 0..200u32 {
        std::fs::write(mnt.join(format!("f{i}")), data(700, i)).unwrap();
    }
    std::fs::write(mnt.join("big"), &big).unwrap();
    assert!(std::fs::read(mnt.join("big")).unwrap() == big);
    unmount(&mnt, pid);
    drop(guard);
    run(Command::new(flashfs_bin()).arg("fsck").arg(&img));
    let pid = mount(&img, &mnt, &["--ram-budget", "32", "-o", "ro"]);
    let guard = Mounted(&mnt);
    for i in 0..200u32 {
        assert_eq!(
            std::fs::read(mnt.join(format!("f{i}"))).unwrap(),
            data(700, i)
        );
    }
    assert!(std::fs::read(mnt.join("big")).unwrap() == big);
    unmount(&mnt, pid);
    drop(guard);
    let out = Command::new(flashfs_bin())
        .arg("mount")
        .arg(&img)
        .arg(&mnt)
        .args(["--ram-budget", "lots"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim().lines().count(),
        1
    );
}

/// A volume on two devices (NVRAM beside NAND, two images) mounts whole: the workload,
/// an unmount, fsck, every byte copied out and through a remount; a read-only mount
/// changes neither image.
#[test]
fn a_volume_on_two_devices_mounts_through_the_kernel() {
    require_fuse(&[]);
    let dir = TempDir::new().unwrap();
    let img = dir.path().join("dev.img");
    let nvram = nvram_image(&img);
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    run(Command::new(flashfs_bin())
        .args(["mkfs", "--preset", "nand-128m", "--nvram", "fram-8m"])
        .arg(&img));
    let fresh = std::fs::read(&nvram).unwrap();

    let pid = mount(&img, &mnt, &[]);
    let guard = Mounted(&mnt);
    let model = workload(&mnt);
    compare("while mounted", &scan(&mnt), &model);
    unmount(&mnt, pid);
    drop(guard);
    assert!(
        std::fs::read(&nvram).unwrap() != fresh,
        "the mount wrote no metadata to the NVRAM image"
    );

    assert_clean(&img);
    compare("flashfs get -r", &copied_out(&img, dir.path()), &model);

    let before = (std::fs::read(&img).unwrap(), std::fs::read(&nvram).unwrap());
    let pid = mount(&img, &mnt, &["-o", "ro"]);
    let guard = Mounted(&mnt);
    compare("after a read-only remount", &scan(&mnt), &model);
    let e = std::fs::write(mnt.join("new"), b"x").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS));
    unmount(&mnt, pid);
    drop(guard);
    assert!(
        std::fs::read(&img).unwrap() == before.0 && std::fs::read(&nvram).unwrap() == before.1,
        "a read-only mount changed an image"
    );
}
