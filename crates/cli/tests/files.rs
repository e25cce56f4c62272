//! End-to-end tests of the native file system on image files: `mkfs`, `info` and `fsck`
//! without `--ftl`, and `ls`, `cat`, `get`, `put`, `rm`, `mkdir`, `mv` on an image without
//! mounting it, including bad input (which must leave the image exactly as it was).

mod common;

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hasher};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use assert_cmd::Command;
use common::{data, fails, flashfs, flip_bits_in_block};
use tempfile::TempDir;

/// Runs a command that must succeed; returns its stdout.
fn ok(cmd: &mut Command) -> String {
    let out = cmd.assert().success().get_output().clone();
    String::from_utf8(out.stdout).expect("stdout is UTF-8")
}

/// Runs a command that must succeed; returns its stdout's bytes.
fn raw(cmd: &mut Command) -> Vec<u8> {
    cmd.assert().success().get_output().stdout.clone()
}

/// A digest of a file's bytes.
fn digest(path: &Path) -> u64 {
    let mut h = DefaultHasher::new();
    h.write(&std::fs::read(path).unwrap());
    h.finish()
}

fn mkfs(img: &Path, preset: &str) {
    let text = ok(flashfs().args(["mkfs", "--preset", preset]).arg(img));
    assert!(text.contains("native file system"), "{text}");
}

/// What a host tree holds: path -> (kind, mode, content or target, mtime).
type Tree = BTreeMap<PathBuf, (char, u32, Vec<u8>, i64)>;

fn tree(root: &Path) -> Tree {
    fn walk(root: &Path, dir: &Path, out: &mut Tree) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            let mode = m.mode() & 0o7777;
            if m.file_type().is_symlink() {
                let t = std::fs::read_link(&p).unwrap();
                out.insert(rel, ('l', 0, t.into_os_string().into_encoded_bytes(), 0));
            } else if m.is_dir() {
                out.insert(rel, ('d', mode, Vec::new(), m.mtime()));
                walk(root, &p, out);
            } else {
                out.insert(rel, ('f', mode, std::fs::read(&p).unwrap(), m.mtime()));
            }
        }
    }
    let mut out = Tree::new();
    walk(root, root, &mut out);
    out
}

/// A host tree of files of many sizes, modes and times, with symbolic links.
fn make_tree(root: &Path) {
    std::fs::create_dir_all(root.join("docs/old")).unwrap();
    std::fs::create_dir_all(root.join("empty")).unwrap();
    let files: [(&str, usize, u32); 6] = [
        ("docs/a.txt", 13, 0o644),
        ("docs/old/b.bin", 70_000, 0o600),
        ("docs/zero", 0, 0o640),
        ("big.bin", 2_500_000, 0o755),
        ("page.bin", 2048, 0o444),
        ("odd.bin", 12_345, 0o664),
    ];
    for (i, (name, len, mode)) in files.iter().enumerate() {
        let p = root.join(name);
        std::fs::write(&p, data(*len, i as u32 + 1)).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(*mode)).unwrap();
        let t = UNIX_EPOCH + Duration::from_secs(1_000_000_000 + i as u64 * 86_400);
        std::fs::File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_modified(t)
            .unwrap();
    }
    std::os::unix::fs::symlink("a.txt", root.join("docs/link")).unwrap();
    std::os::unix::fs::symlink("/nowhere/at/all", root.join("dangling")).unwrap();
    std::fs::set_permissions(
        root.join("docs/old"),
        std::fs::Permissions::from_mode(0o750),
    )
    .unwrap();
    let t = UNIX_EPOCH + Duration::from_secs(1_234_567_890);
    std::fs::File::open(root.join("docs/old"))
        .unwrap()
        .set_modified(t)
        .unwrap();
}

#[test]
fn mkfs_makes_a_native_volume_that_info_and_fsck_describe() {
    let dir = TempDir::new().unwrap();
    let img = dir.path().join("dev.img");
    mkfs(&img, "nand-128m");
    let before = digest(&img);
    let out = ok(flashfs().args(["info", "--json"]).arg(&img));
    let j: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(j["format"], "native");
    assert_eq!(j["file_system"]["inodes"], 1);
    assert!(j["file_system"]["commits"].as_u64().unwrap() >= 1);
    assert!(j["file_system"]["index_height"].as_u64().unwrap() >= 1);
    // The mount read its free space from the map the format saved.
    assert_eq!(j["file_system"]["mounted_from_map"], true);
    assert!(j["file_system"]["space_map_blocks"].as_u64().unwrap() > 0);
    let cap = j["space"]["capacity_bytes"].as_u64().unwrap();
    assert!(cap > 100 << 20 && cap < 128 << 20, "{cap}");
    let text = ok(flashfs().arg("info").arg(&img));
    for row in [
        "native file system",
        "inodes",
        "commits",
        "index",
        "space",
        "free space    read from the saved map",
    ] {
        assert!(text.contains(row), "{row}: {text}");
    }
    let text = ok(flashfs().arg("fsck").arg(&img));
    assert!(text.contains("clean, 1 inode"), "{text}");
    assert_eq!(digest(&img), before, "info and fsck only read");
    let text = ok(flashfs().args(["fsck", "--repair"]).arg(&img));
    assert!(text.contains("clean"), "{text}");
    // NOR too, and NVRAM (laid out as NOR).
    for (name, preset) in [("nor.img", "w25q64jv"), ("fram.img", "cy15b102q")] {
        let img = dir.path().join(name);
        mkfs(&img, preset);
        let file = dir.path().join("note.txt");
        std::fs::write(&file, b"kept on the part").unwrap();
        ok(flashfs().arg("put").arg(&img).arg(&file).arg("/note.txt"));
        let text = ok(flashfs().arg("fsck").arg(&img));
        assert!(text.contains("clean, 2 inodes"), "{preset}: {text}");
        let back = dir.path().join("back.txt");
        ok(flashfs().arg("get").arg(&img).arg("/note.txt").arg(&back));
        assert_eq!(
            std::fs::read(&back).unwrap(),
            b"kept on the part",
            "{preset}"
        );
        std::fs::remove_file(&back).unwrap();
    }
}

#[test]
fn put_and_get_copy_trees_with_modes_times_and_links() {
    let dir = TempDir::new().unwrap();
    let img = dir.path().join("dev.img");
    let src = dir.path().join("src");
    make_tree(&src);
    mkfs(&img, "nand-128m");
    let text = ok(flashfs().arg("put").arg(&img).arg(&src).arg("/").arg("-r"));
    assert!(
        text.contains("6 files") && text.contains("4 directories") && text.contains("2 symbolic"),
        "{text}"
    );
    let back = dir.path().join("back");
    let text = ok(flashfs()
        .arg("get")
        .arg(&img)
        .arg("/src")
        .arg(&back)
        .arg("-r"));
    assert!(text.contains("6 files"), "{text}");
    assert_eq!(tree(&back), tree(&src), "the tree came back different");

    // ls: names, long form, JSON.
    let names = ok(flashfs().arg("ls").arg(&img).arg("/src/docs"));
    assert_eq!(names, "a.txt\nlink\nold\nzero\n");
    let long = ok(flashfs().arg("ls").arg(&img).arg("/src/docs").arg("-l"));
    assert!(
        long.contains("lrwxrwxrwx") && long.contains("link -> a.txt"),
        "{long}"
    );
    assert!(
        long.contains("drwxr-x---") && long.contains("2001-09-09"),
        "{long}"
    );
    let json = ok(flashfs().args(["ls", "--json"]).arg(&img).arg("/src"));
    let entries: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let big = entries.iter().find(|e| e["name"] == "big.bin").unwrap();
    assert_eq!(big["size"], 2_500_000);
    assert_eq!(big["type"], "file");
    assert_eq!(big["perm"], 0o755);
    let dangling = entries.iter().find(|e| e["name"] == "dangling").unwrap();
    assert_eq!(dangling["target"], "/nowhere/at/all");
    // ls of one file names it.
    assert_eq!(
        ok(flashfs().arg("ls").arg(&img).arg("/src/big.bin")),
        "big.bin\n"
    );

    // cat, through a symbolic link too.
    let a = raw(flashfs().arg("cat").arg(&img).arg("/src/docs/link"));
    assert_eq!(a, data(13, 1));
    let out = flashfs()
        .arg("cat")
        .arg(&img)
        .arg("/src/big.bin")
        .output()
        .unwrap();
    assert!(out.stdout == data(2_500_000, 4));

    // get of one file, into a directory and to a name.
    ok(flashfs()
        .arg("get")
        .arg(&img)
        .arg("/src/odd.bin")
        .arg(dir.path()));
    assert!(std::fs::read(dir.path().join("odd.bin")).unwrap() == data(12_345, 6));
    ok(flashfs()
        .arg("get")
        .arg(&img)
        .arg("/src/odd.bin")
        .arg(dir.path().join("renamed")));
    assert!(std::fs::read(dir.path().join("renamed")).unwrap() == data(12_345, 6));

    // put of one file replaces a file's content.
    let small = dir.path().join("small");
    std::fs::write(&small, b"short").unwrap();
    ok(flashfs()
        .arg("put")
        .arg(&img)
        .arg(&small)
        .arg("/src/big.bin"));
    assert_eq!(
        ok(flashfs().arg("cat").arg(&img).arg("/src/big.bin")),
        "short"
    );

    // mkdir -p, mv, rm -r.
    ok(flashfs().arg("mkdir").arg(&img).arg("/x/y/z").arg("-p"));
    ok(flashfs().arg("mkdir").arg(&img).arg("/x/y/z").arg("-p"));
    ok(flashfs().arg("mv").arg(&img).arg("/src/docs").arg("/x/y"));
    assert_eq!(ok(flashfs().arg("ls").arg(&img).arg("/x/y")), "docs\nz\n");
    ok(flashfs()
        .arg("mv")
        .arg(&img)
        .arg("/x/y/docs/a.txt")
        .arg("/x/renamed.txt"));
    assert_eq!(
        raw(flashfs().arg("cat").arg(&img).arg("/x/renamed.txt")),
        data(13, 1)
    );
    ok(flashfs().arg("rm").arg(&img).arg("/x/renamed.txt"));
    ok(flashfs().arg("rm").arg(&img).arg("/src").arg("-r"));
    assert_eq!(ok(flashfs().arg("ls").arg(&img)), "x\n");
    let text = ok(flashfs().arg("fsck").arg(&img));
    assert!(text.contains("clean"), "{text}");
}

#[test]
fn bad_input_is_one_line_and_leaves_the_image_as_it_was() {
    let dir = TempDir::new().unwrap();
    let img = dir.path().join("dev.img");
    let missing = dir.path().join("missing.img");
    // A missing image.
    for cmd in [
        vec!["ls"],
        vec!["cat", "/a"],
        vec!["rm", "/a"],
        vec!["mkdir", "/a"],
    ] {
        let mut c = flashfs();
        c.arg(cmd[0]).arg(&missing).args(&cmd[1..]);
        let line = fails(&mut c, 1);
        assert!(line.contains("no such file or directory"), "{line}");
    }
    let line = fails(flashfs().arg("fsck").arg(&missing), 8);
    assert!(line.contains("no such file"), "{line}");
    // Not an image at all.
    let junk = dir.path().join("junk.img");
    std::fs::write(&junk, vec![0x5a; 100_000]).unwrap();
    let line = fails(flashfs().arg("ls").arg(&junk), 1);
    assert!(line.contains("junk.img"), "{line}");
    // An image of a block device, and one never formatted.
    let blk = dir.path().join("blk.img");
    ok(flashfs()
        .args(["mkfs", "--ftl", "--preset", "w25q64jv"])
        .arg(&blk));
    let line = fails(flashfs().arg("ls").arg(&blk), 1);
    assert!(line.contains("holds a block device"), "{line}");
    let raw = dir.path().join("raw.img");
    ok(flashfs()
        .args(["sim", "create", "--preset", "w25q64jv"])
        .arg(&raw));
    let line = fails(flashfs().arg("cat").arg(&raw).arg("/x"), 1);
    assert!(line.contains("no flashfs volume"), "{line}");

    // Wrong paths and misuse, on a volume with files.
    mkfs(&img, "w25q64jv");
    let f = dir.path().join("f");
    std::fs::write(&f, data(5000, 9)).unwrap();
    ok(flashfs().arg("put").arg(&img).arg(&f).arg("/f"));
    ok(flashfs().arg("mkdir").arg(&img).arg("/d"));
    ok(flashfs().arg("put").arg(&img).arg(&f).arg("/d/g"));
    let before = digest(&img);
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["cat", "/nope"], "no such file or directory"),
        (vec!["cat", "/d"], "is a directory"),
        (vec!["ls", "/nope"], "no such file or directory"),
        (vec!["ls", "/f/x"], "not a directory"),
        (vec!["rm", "/nope"], "no such file or directory"),
        (vec!["rm", "/d"], "directory not empty"),
        (vec!["rm", "/"], "path names no entry"),
        (vec!["mkdir", "/d"], "file exists"),
        (vec!["mkdir", "/a/b"], "no such file or directory"),
        (vec!["mkdir", "/f/x", "-p"], "not a directory"),
        (vec!["mv", "/nope", "/x"], "no such file or directory"),
        (vec!["mv", "/d", "/d/g/x"], "not a directory"),
        (vec!["get", "/d", "/tmp"], "is a directory"),
        (vec!["get", "/nope", "/tmp"], "no such file or directory"),
    ];
    for (args, expect) in cases {
        let mut c = flashfs();
        c.arg(args[0]).arg(&img).args(&args[1..]);
        let line = fails(&mut c, 1);
        assert!(line.contains(expect), "{args:?}: {line}");
        assert_eq!(digest(&img), before, "{args:?} changed the image");
    }
    let line = fails(
        flashfs()
            .arg("put")
            .arg(&img)
            .arg(dir.path().join("nope"))
            .arg("/"),
        1,
    );
    assert!(line.contains("no such file or directory"), "{line}");
    let line = fails(flashfs().arg("put").arg(&img).arg(dir.path()).arg("/"), 1);
    assert!(line.contains("is a directory"), "{line}");

    // A full device: the copy fails half-way, and the image is as it was.
    let big = dir.path().join("big");
    std::fs::write(&big, data(12 << 20, 3)).unwrap();
    let tree_dir = dir.path().join("tree");
    std::fs::create_dir(&tree_dir).unwrap();
    std::fs::write(tree_dir.join("small"), b"fits").unwrap();
    std::fs::rename(&big, tree_dir.join("z-big")).unwrap();
    let line = fails(
        flashfs()
            .arg("put")
            .arg(&img)
            .arg(&tree_dir)
            .arg("/")
            .arg("-r"),
        1,
    );
    assert!(line.contains("no space left on device"), "{line}");
    assert_eq!(digest(&img), before, "a failed put changed the image");
    assert_eq!(ok(flashfs().arg("ls").arg(&img)), "d\nf\n");
    let text = ok(flashfs().arg("fsck").arg(&img));
    assert!(text.contains("clean"), "{text}");
}

#[test]
fn fsck_reports_a_damaged_volume_on_its_own_lines() {
    let dir = TempDir::new().unwrap();
    let img = dir.path().join("dev.img");
    mkfs(&img, "w25q64jv");
    let src = dir.path().join("src");
    make_tree(&src);
    ok(flashfs().arg("put").arg(&img).arg(&src).arg("/").arg("-r"));
    // Damage the flash where the volume lives, past the image header: every slot that was
    // written is fair game.
    let mut bytes = std::fs::read(&img).unwrap();
    let written: Vec<usize> = (4096..bytes.len())
        .step_by(512)
        .filter(|&at| bytes[at..at + 512].iter().any(|&b| b != 0xff && b != 0))
        .collect();
    assert!(written.len() > 100, "{}", written.len());
    for at in written.iter().step_by(7) {
        for b in &mut bytes[at + 100..at + 140] {
            *b ^= 0x5a;
        }
    }
    std::fs::write(&img, &bytes).unwrap();
    let out = flashfs().arg("fsck").arg(&img).output().unwrap();
    let code = out.status.code().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(code == 4 || code == 8, "exit {code}: {text}");
    if code == 4 {
        assert!(
            text.lines().count() >= 2 || text.contains("does not mount"),
            "{text}"
        );
        for l in text.lines() {
            assert!(l.starts_with("dev.img: ") || l.contains("dev.img"), "{l}");
        }
    }
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    eprintln!("{text}");
}

#[test]
fn fsck_names_the_damaged_file_and_get_refuses_its_bytes() {
    let dir = TempDir::new().unwrap();
    let img = dir.path().join("dev.img");
    mkfs(&img, "w25q64jv");
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    let a: Vec<u8> = (0..8192).map(|i| b'A' + (i % 7) as u8).collect();
    let b: Vec<u8> = (0..8192).map(|i| b'a' + (i % 5) as u8).collect();
    std::fs::write(src.join("a.bin"), &a).unwrap();
    std::fs::write(src.join("b.bin"), &b).unwrap();
    ok(flashfs().arg("put").arg(&img).arg(&src).arg("/").arg("-r"));
    // Flip a few bits in a.bin's first block; nothing else is touched.
    flip_bits_in_block(&img, &a);

    let out = flashfs().arg("fsck").arg(&img).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(4), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].contains("dev.img: /src/a.bin (inode ") && lines[0].contains("bytes 0-511"),
        "{text}"
    );
    // The damaged file is an error on one line, never wrong bytes; the other reads whole.
    let line = fails(
        flashfs()
            .arg("get")
            .arg(&img)
            .arg("/src/a.bin")
            .arg(dir.path().join("a.out")),
        1,
    );
    assert!(
        line.contains("/src/a.bin") && line.contains("damaged data"),
        "{line}"
    );
    assert_eq!(raw(flashfs().arg("cat").arg(&img).arg("/src/b.bin")), b);
}

#[test]
fn scrub_reads_everything_back_and_names_the_lost_file() {
    let dir = TempDir::new().unwrap();
    let img = dir.path().join("dev.img");
    mkfs(&img, "w25q64jv");
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    let a: Vec<u8> = (0..8192).map(|i| b'A' + (i % 7) as u8).collect();
    let b: Vec<u8> = (0..8192).map(|i| b'a' + (i % 5) as u8).collect();
    std::fs::write(src.join("a.bin"), &a).unwrap();
    std::fs::write(src.join("b.bin"), &b).unwrap();
    ok(flashfs().arg("put").arg(&img).arg(&src).arg("/").arg("-r"));
    // An undamaged volume: everything read, nothing lost.
    let out = flashfs().arg("scrub").arg(&img).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains(" 0 slots lost"), "{text}");
    // Bits flipped in a.bin's first block.
    flip_bits_in_block(&img, &a);
    let out = flashfs().arg("scrub").arg(&img).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(4), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("dev.img: lost: /src/a.bin (inode ") && l.contains("bytes 0-511")),
        "{text}"
    );
    assert!(
        text.lines().last().unwrap().contains(" 1 slot lost"),
        "{text}"
    );
    // The loss stays recorded: the file fails, the other reads whole, and fsck agrees.
    fails(
        flashfs()
            .arg("get")
            .arg(&img)
            .arg("/src/a.bin")
            .arg(dir.path().join("a.out")),
        1,
    );
    assert_eq!(raw(flashfs().arg("cat").arg(&img).arg("/src/b.bin")), b);
    let out = flashfs().arg("fsck").arg(&img).output().unwrap();
    assert_eq!(out.status.code(), Some(4));
}

#[test]
fn mkfs_records_the_regions_of_an_mlc_part_and_every_command_keeps_them() {
    let dir = TempDir::new().unwrap();
    let img = dir.path().join("mlc.img");
    let src = dir.path().join("src");
    make_tree(&src);
    ok(flashfs()
        .args(["mkfs", "--preset", "mlc-flexfs", "--regions", "bm"])
        .arg(&img));
    ok(flashfs().arg("put").arg(&img).arg(&src).arg("/").arg("-r"));
    let text = ok(flashfs().arg("info").arg(&img));
    let line = text.lines().find(|l| l.starts_with("regions")).unwrap();
    assert!(
        line.contains("bm:") && !line.contains(" 0 segments in SLC"),
        "{line}"
    );
    // Nothing idled, so nothing migrated; bm sends all new data to SLC and no wear budget
    // holds it back.
    assert!(
        line.contains("0 B migrated from SLC to MLC so far") && line.contains("α 1.00, γ 1.00"),
        "{line}"
    );
    let text = ok(flashfs().arg("fsck").arg(&img));
    assert!(text.contains("clean"), "{text}");
    // Only MLC NAND has an SLC mode.
    let line = fails(
        flashfs()
            .args(["mkfs", "--preset", "nand-128m", "--regions", "slc-only"])
            .arg(dir.path().join("slc.img")),
        1,
    );
    assert!(line.contains("only on MLC NAND"), "{line}");
}
