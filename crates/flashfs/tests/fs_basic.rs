//! The native file system's POSIX behaviour on NOR and NAND, across remounts.

mod common;

use common::*;
use flashfs::fs::{FileType, RenameFlags, SetAttr, SetTime, Timespec, ROOT_INO};
use flashfs::{Error, Fs, FsConfig, Segments};

fn run<D: Segments>(dev: D, f: impl FnOnce(Fs<D>) -> Fs<D>) -> D {
    let fs = Fs::format(dev, FsConfig::default()).unwrap();
    let fs = f(fs);
    fs.unmount().unwrap()
}

fn remount<D: Segments>(fs: Fs<D>) -> Fs<D> {
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, FsConfig::default()).unwrap();
    let report = fs.check(false).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    fs
}

fn files_and_dirs<D: Segments>(mut fs: Fs<D>) -> Fs<D> {
    let bs = fs.block_size() as usize;
    let d = fs.mkdir(ROOT_INO, b"dir", 0o755, 1, 2).unwrap();
    assert_eq!(d.kind, FileType::Directory);
    assert_eq!(fs.getattr(ROOT_INO).unwrap().inode.nlink, 3);
    let f = fs.create(d.ino, b"file", 0o644, 1, 2).unwrap();
    let data: Vec<u8> = (0..3 * bs + 17).map(|i| (i * 7 % 251) as u8).collect();
    assert_eq!(fs.write(f.ino, 0, &data).unwrap(), data.len());
    // Overwrite the middle, unaligned.
    fs.write(f.ino, 100, b"hello").unwrap();
    let mut expect = data.clone();
    expect[100..105].copy_from_slice(b"hello");
    // A hole past the end reads as zeros.
    fs.write(f.ino, 10 * bs as u64, b"tail").unwrap();
    expect.resize(10 * bs, 0);
    expect.extend_from_slice(b"tail");
    let mut fs = remount(fs);
    let f = fs.lookup(d.ino, b"file").unwrap();
    assert_eq!(f.inode.size, expect.len() as u64);
    assert_eq!(fs.read_file(b"/dir/file").unwrap(), expect);
    // Truncate down, then up: the cut part reads as zeros.
    fs.setattr(
        f.ino,
        SetAttr {
            size: Some(50),
            ..Default::default()
        },
    )
    .unwrap();
    fs.setattr(
        f.ino,
        SetAttr {
            size: Some(200),
            ..Default::default()
        },
    )
    .unwrap();
    let mut want = expect[..50].to_vec();
    want.resize(200, 0);
    assert_eq!(fs.read_file(b"/dir/file").unwrap(), want);
    // Names.
    assert_eq!(fs.create(d.ino, b"file", 0o644, 0, 0), Err(Error::Exists));
    assert_eq!(
        fs.create(d.ino, &[b'x'; 256], 0o644, 0, 0),
        Err(Error::NameTooLong)
    );
    fs.create(d.ino, &[b'x'; 255], 0o644, 0, 0).unwrap();
    assert_eq!(fs.rmdir(ROOT_INO, b"dir"), Err(Error::NotEmpty));
    assert_eq!(fs.unlink(ROOT_INO, b"dir"), Err(Error::IsDir));
    // Links.
    fs.link(f.ino, ROOT_INO, b"hard").unwrap();
    assert_eq!(fs.getattr(f.ino).unwrap().inode.nlink, 2);
    fs.symlink(ROOT_INO, b"sym", b"dir/file", 0, 0).unwrap();
    let sym = fs.resolve(b"/sym").unwrap();
    assert_eq!(fs.readlink(sym).unwrap(), b"dir/file");
    assert_eq!(fs.resolve_follow(b"/sym").unwrap(), f.ino);
    let mut fs = remount(fs);
    fs.unlink(d.ino, b"file").unwrap();
    assert_eq!(fs.read_file(b"/hard").unwrap(), want);
    assert_eq!(fs.resolve_follow(b"/sym"), Err(Error::NotFound));
    fs
}

fn renames<D: Segments>(mut fs: Fs<D>) -> Fs<D> {
    fs.mkdir_path(b"/a").unwrap();
    fs.mkdir_path(b"/a/b").unwrap();
    fs.write_file(b"/a/b/x", b"x").unwrap();
    fs.write_file(b"/y", b"y").unwrap();
    assert_eq!(
        fs.rename_path(b"/a", b"/a/b/c"),
        Err(Error::InvalidArgument("a directory into its own subtree"))
    );
    fs.rename_path(b"/y", b"/a/b/x").unwrap();
    assert_eq!(fs.read_file(b"/a/b/x").unwrap(), b"y");
    assert_eq!(fs.stat_path(b"/y"), Err(Error::NotFound));
    fs.mkdir_path(b"/z").unwrap();
    fs.rename_path(b"/a/b", b"/z/b").unwrap();
    assert_eq!(fs.stat_path(b"/a").unwrap().inode.nlink, 2);
    assert_eq!(fs.stat_path(b"/z").unwrap().inode.nlink, 3);
    let zb = fs.resolve(b"/z/b").unwrap();
    assert_eq!(
        fs.lookup(zb, b"..").unwrap().ino,
        fs.resolve(b"/z").unwrap()
    );
    let z = fs.resolve(b"/z").unwrap();
    fs.write_file(b"/q", b"q").unwrap();
    let flags = RenameFlags {
        no_replace: true,
        ..Default::default()
    };
    assert_eq!(
        fs.rename(ROOT_INO, b"q", z, b"b", flags),
        Err(Error::Exists)
    );
    let flags = RenameFlags {
        exchange: true,
        ..Default::default()
    };
    fs.rename(ROOT_INO, b"q", z, b"b", flags).unwrap();
    assert_eq!(fs.stat_path(b"/q").unwrap().kind, FileType::Directory);
    assert_eq!(fs.read_file(b"/z/b").unwrap(), b"q");
    assert_eq!(fs.stat_path(b"/z").unwrap().inode.nlink, 2);
    assert_eq!(fs.getattr(ROOT_INO).unwrap().inode.nlink, 5);
    remount(fs)
}

fn attrs_and_xattrs<D: Segments>(mut fs: Fs<D>) -> Fs<D> {
    let f = fs.write_file(b"/f", b"data").unwrap();
    let t = Timespec {
        sec: 1_000_000,
        nsec: 5,
    };
    let a = fs
        .setattr(
            f.ino,
            SetAttr {
                mode: Some(0o4755),
                uid: Some(7),
                atime: Some(SetTime::At(t)),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(a.inode.mode, 0o104_755);
    assert_eq!(a.inode.atime, t);
    assert_eq!(a.inode.uid, 7);
    let big = vec![0xAB; 3000];
    fs.setxattr(f.ino, b"user.big", &big, Default::default())
        .unwrap();
    fs.setxattr(f.ino, b"trusted.t", b"", Default::default())
        .unwrap();
    assert_eq!(
        fs.setxattr(f.ino, b"other.x", b"", Default::default()),
        Err(Error::Unsupported("attribute namespace"))
    );
    let mut fs = remount(fs);
    assert_eq!(fs.getxattr(f.ino, b"user.big").unwrap(), big);
    assert_eq!(
        fs.listxattr(f.ino).unwrap(),
        vec![b"trusted.t".to_vec(), b"user.big".to_vec()]
    );
    fs.removexattr(f.ino, b"user.big").unwrap();
    assert_eq!(fs.getxattr(f.ino, b"user.big"), Err(Error::NoAttribute));
    let p = fs.mknod(ROOT_INO, b"fifo", 0o010_644, 0, 0, 0).unwrap();
    assert_eq!(p.kind, FileType::Fifo);
    let c = fs.mknod(ROOT_INO, b"tty", 0o020_600, 0x0501, 0, 0).unwrap();
    assert_eq!(c.inode.rdev, 0x0501);
    fs
}

fn unlink_while_open<D: Segments>(mut fs: Fs<D>) -> Fs<D> {
    let f = fs.write_file(b"/open", &vec![9; 5000]).unwrap();
    let before = fs.statfs().blocks_free;
    fs.open(f.ino).unwrap();
    fs.unlink(ROOT_INO, b"open").unwrap();
    let mut buf = vec![0; 5000];
    assert_eq!(fs.read(f.ino, 0, &mut buf).unwrap(), 5000);
    assert_eq!(buf, vec![9; 5000]);
    fs.sync().unwrap();
    fs.release(f.ino).unwrap();
    fs.sync().unwrap();
    assert_eq!(fs.getattr(f.ino), Err(Error::NotFound));
    assert!(fs.statfs().blocks_free > before);
    fs
}

#[test]
fn files_and_directories_nor() {
    run(nor(true), files_and_dirs);
    run(nor(false), files_and_dirs);
}

#[test]
fn files_and_directories_nand() {
    run(nand(), files_and_dirs);
}

#[test]
fn files_and_directories_on_media_chosen_at_run_time() {
    // One instantiation of the file system over both media, as the C library has it.
    let media: [Box<dyn Segments>; 2] = [Box::new(nor(false)), Box::new(nand())];
    for dev in media {
        run(dev, files_and_dirs);
    }
}

#[test]
fn renames_nor_nand() {
    run(nor(false), renames);
    run(nand(), renames);
}

#[test]
fn attributes_nor_nand() {
    run(nor(true), attrs_and_xattrs);
    run(nand(), attrs_and_xattrs);
}

#[test]
fn unlinked_open_file_keeps_data_until_closed() {
    run(nand(), unlink_while_open);
    run(nor(false), unlink_while_open);
}

#[test]
fn lifetime_counters_survive_remounts() {
    let mut fs = Fs::format(nand(), FsConfig::default()).unwrap();
    assert_eq!(fs.lifetime().write_amplification(), None);
    fs.write_file(b"/a", &vec![1; 10_000]).unwrap();
    fs.sync().unwrap();
    let mut fs = remount(fs);
    let l = fs.lifetime();
    assert_eq!(l.user_bytes, 10_000);
    let wa = l.write_amplification().unwrap();
    assert!(wa > 1.0 && wa < 10.0, "write amplification {wa}");
    fs.write_file(b"/b", &vec![2; 5_000]).unwrap();
    fs.sync().unwrap();
    let fs = remount(fs);
    assert_eq!(fs.lifetime().user_bytes, 15_000);
    assert!(fs.lifetime().flash_bytes > l.flash_bytes);
}

/// A mount reads every index node (to find free space), but keeps few: the walk must not
/// fill the node cache, and the heap, with nodes no later operation needs more than another.
#[test]
fn a_mount_walks_the_index_without_filling_the_node_cache() {
    let mut fs = Fs::format(nand_checkpointed(), FsConfig::default()).unwrap();
    for i in 0..2000u32 {
        let name = format!("a-file-with-a-long-name-{i:05}");
        let ino = fs
            .create(ROOT_INO, name.as_bytes(), 0o644, 0, 0)
            .unwrap()
            .ino;
        if i == 1999 {
            fs.write(ino, 0, &i.to_le_bytes()).unwrap();
        }
    }
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev.clone(), FsConfig::default()).unwrap();
    let after_mount = fs.index_stats().cache_bytes;
    // Every node, read once on purpose, fills the cache far beyond what the mount kept.
    fs.check(false).unwrap();
    let whole = Fs::mount(dev, FsConfig::default())
        .map(|mut f| {
            for i in 0..2000u32 {
                let name = format!("a-file-with-a-long-name-{i:05}");
                f.lookup(ROOT_INO, name.as_bytes()).unwrap();
            }
            f.index_stats().cache_bytes
        })
        .unwrap();
    assert!(
        after_mount <= 32 * 1024 && whole > 4 * after_mount,
        "cache after the mount {after_mount} B, after lookups of every file {whole} B"
    );
    // The mounted volume works as before.
    let ino = fs
        .lookup(ROOT_INO, b"a-file-with-a-long-name-01999")
        .unwrap()
        .ino;
    let mut buf = [0; 4];
    fs.read(ino, 0, &mut buf).unwrap();
    assert_eq!(u32::from_le_bytes(buf), 1999);
}
