//! `flashfs ls`, `cat`, `get`, `put`, `rm`, `mkdir`, `mv`: files of the native file system on
//! an image, without mounting it (as mtools does for FAT images).
//!
//! The image is read through a view that keeps every write in memory; a command that
//! changes the volume writes the image back only once it has succeeded, so a command that
//! fails leaves the image file exactly as it was.

use std::io::Write;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};
use flash::store::FileStore;
use flashfs::fs::{Attr, FileType, Ino, SetAttr, SetTime, ROOT_INO};
use flashfs::{Fs, Segments};
use serde::Serialize;

use crate::device::{self, AtPath};
use crate::native::{self, AnyFs};
use crate::units::{bytes, count};
use crate::volume::{self, Format, ImageStore, Media};
use crate::Global;

/// Examples shown by the `--help` of each of these commands.
pub const EXAMPLES: &str = "\
Examples:
  flashfs mkfs dev.img --preset nand-128m        a native file system to work on
  flashfs mkdir dev.img /docs/old -p             make a directory and its parents
  flashfs put dev.img notes.txt /docs/           copy a host file in (into a directory)
  flashfs put dev.img src/ /src -r               copy a host tree in: modes, times, symlinks
  flashfs ls dev.img /docs -l                    list with modes, sizes and times
  flashfs ls dev.img / --json                    one JSON object per entry
  flashfs cat dev.img /docs/notes.txt            print a file
  flashfs get dev.img /src back/ -r              copy a tree out
  flashfs mv dev.img /docs/notes.txt /docs/old/  rename or move
  flashfs rm dev.img /src -r                     remove a tree

Paths on the image start at its root (`/`). The image is changed only when the command
succeeds: on any error it is left exactly as it was.";

/// Options of `flashfs ls`.
#[derive(Debug, clap::Args)]
pub struct LsArgs {
    /// The image file (only read).
    pub image: PathBuf,
    /// A directory or file on the image.
    #[arg(default_value = "/")]
    pub path: String,
    /// Long listing: type and permissions, links, owner, size, modification time.
    #[arg(short, long)]
    pub long: bool,
    /// One JSON object per entry instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Options of `flashfs cat`.
#[derive(Debug, clap::Args)]
pub struct CatArgs {
    /// The image file (only read).
    pub image: PathBuf,
    /// A file on the image.
    pub path: String,
}

/// Options of `flashfs get`.
#[derive(Debug, clap::Args)]
pub struct GetArgs {
    /// The image file (only read).
    pub image: PathBuf,
    /// What to copy, on the image.
    pub path: String,
    /// Where to copy it on the host (into it if it is a directory).
    pub dest: PathBuf,
    /// Copy directories and everything below them.
    #[arg(short, long)]
    pub recursive: bool,
}

/// Options of `flashfs put`.
#[derive(Debug, clap::Args)]
pub struct PutArgs {
    /// The image file.
    pub image: PathBuf,
    /// What to copy, on the host.
    pub src: PathBuf,
    /// Where to copy it on the image (into it if it is a directory).
    pub path: String,
    /// Copy directories and everything below them.
    #[arg(short, long)]
    pub recursive: bool,
}

/// Options of `flashfs rm`.
#[derive(Debug, clap::Args)]
pub struct RmArgs {
    /// The image file.
    pub image: PathBuf,
    /// What to remove, on the image.
    pub path: String,
    /// Remove directories and everything below them.
    #[arg(short, long)]
    pub recursive: bool,
}

/// Options of `flashfs mkdir`.
#[derive(Debug, clap::Args)]
pub struct MkdirArgs {
    /// The image file.
    pub image: PathBuf,
    /// The directory to make, on the image.
    pub path: String,
    /// Make missing parents too; an existing directory is no error.
    #[arg(short, long)]
    pub parents: bool,
}

/// Options of `flashfs mv`.
#[derive(Debug, clap::Args)]
pub struct MvArgs {
    /// The image file.
    pub image: PathBuf,
    /// What to move, on the image.
    pub from: String,
    /// Its new name (into it if it is a directory).
    pub to: String,
}

/// Bytes copied per read or write.
const CHUNK: usize = 1 << 20;

/// The native file system of an image, mounted over a view that keeps writes in memory.
pub(crate) struct Image {
    path: PathBuf,
    pub(crate) shown: String,
    pub(crate) fs: AnyFs<ImageStore>,
    /// The image file's owner, for what the command creates.
    owner: (u32, u32),
}

impl Image {
    pub(crate) fn open(path: &Path) -> anyhow::Result<Image> {
        let shown = device::shown(path);
        let images = volume::open_images(path, false)?;
        let meta = std::fs::metadata(path)
            .map_err(device::io_error)
            .with_context(|| shown.clone())?;
        let (media, format) = Media::open_probed(images).with_context(|| shown.clone())?;
        match format {
            Format::Native { .. } => {}
            Format::Unformatted => {
                return Err(anyhow!(
                    "{shown}: no flashfs volume on the image (`flashfs mkfs` formats one)"
                ))
            }
            Format::BlockDevice { .. } => {
                return Err(anyhow!(
                    "{shown}: the image holds a block device, not the native file system \
                     (`flashfs mount` serves it as one file)"
                ))
            }
        }
        let fs = AnyFs::mount(media, native::config(None, None)).with_context(|| {
            format!("{shown}: cannot mount the file system (`flashfs fsck` checks it)")
        })?;
        Ok(Image {
            path: path.to_path_buf(),
            shown,
            fs,
            owner: (meta.uid(), meta.gid()),
        })
    }

    /// Commits and writes what changed back into the image file (and the NVRAM image beside
    /// it, on two devices).
    pub(crate) fn save(self) -> anyhow::Result<()> {
        let shown = self.shown.clone();
        let images = self.fs.close().with_context(|| shown.clone())?;
        for (store, path) in images.with_paths(&self.path) {
            let shown = device::shown(&path);
            let ImageStore::ReadOnly(overlay) = store else {
                return Err(anyhow!("{shown}: the image was opened for writing"));
            };
            let mut file = FileStore::open(&path).at(&path)?;
            overlay
                .write_back(&mut file)
                .map_err(device::explain)
                .with_context(|| format!("{shown}: cannot write the image back"))?;
        }
        Ok(())
    }
}

/// `IMAGE:PATH`, for messages.
fn at(shown: &str, path: &[u8]) -> String {
    format!("{shown}:{}", String::from_utf8_lossy(path))
}

/// Runs `flashfs ls`.
pub fn ls(a: &LsArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let mut img = Image::open(&a.image)?;
    let shown = img.shown.clone();
    let path = a.path.as_bytes();
    crate::with_fs!(&mut img.fs, fs => list(fs, path, a, out)).with_context(|| at(&shown, path))
}

/// One entry of `ls --json`.
#[derive(Serialize)]
struct EntryJson {
    name: String,
    #[serde(rename = "type")]
    kind: &'static str,
    ino: u64,
    mode: String,
    perm: u32,
    nlink: u32,
    uid: u32,
    gid: u32,
    size: u64,
    blocks: u64,
    mtime: i64,
    mtime_nsec: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<String>,
}

fn list<D: Segments>(
    fs: &mut Fs<D>,
    path: &[u8],
    a: &LsArgs,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let attr = fs.stat_path(path)?;
    let dir_attr = if attr.kind == FileType::Symlink {
        let ino = fs.resolve_follow(path)?;
        fs.getattr(ino).ok()
    } else {
        Some(attr)
    };
    let mut entries: Vec<(Vec<u8>, Attr)> = Vec::new();
    match dir_attr {
        Some(d) if d.kind == FileType::Directory => {
            for e in fs.list_dir(path)? {
                let attr = fs.getattr(e.ino)?;
                entries.push((e.name, attr));
            }
            entries.sort_by(|x, y| x.0.cmp(&y.0));
        }
        _ => {
            let name = path
                .rsplit(|&b| b == b'/')
                .find(|p| !p.is_empty())
                .unwrap_or(b"/");
            entries.push((name.to_vec(), attr));
        }
    }
    let mut rows = Vec::new();
    for (name, attr) in entries {
        let shown_name = String::from_utf8_lossy(&name).into_owned();
        let target = if attr.kind == FileType::Symlink {
            Some(String::from_utf8_lossy(&fs.readlink(attr.ino)?).into_owned())
        } else {
            None
        };
        let i = &attr.inode;
        if a.json {
            let j = EntryJson {
                name: shown_name,
                kind: native::kind_name(attr.kind),
                ino: attr.ino,
                mode: native::mode_string(&attr),
                perm: i.mode & 0o7777,
                nlink: i.nlink,
                uid: i.uid,
                gid: i.gid,
                size: i.size,
                blocks: i.blocks,
                mtime: i.mtime.sec,
                mtime_nsec: i.mtime.nsec,
                target,
            };
            writeln!(out, "{}", serde_json::to_string(&j)?)?;
        } else if a.long {
            let name = match target {
                Some(t) => format!("{shown_name} -> {t}"),
                None => shown_name,
            };
            rows.push(vec![
                native::mode_string(&attr),
                i.nlink.to_string(),
                i.uid.to_string(),
                i.gid.to_string(),
                i.size.to_string(),
                utc(i.mtime.sec),
                name,
            ]);
        } else {
            writeln!(out, "{shown_name}")?;
        }
    }
    for l in crate::units::table(&rows) {
        writeln!(out, "{}", l.trim_end())?;
    }
    Ok(())
}

/// `YYYY-MM-DD HH:MM` in UTC.
fn utc(sec: i64) -> String {
    let days = sec.div_euclid(86_400);
    let rem = sec.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60
    )
}

/// Runs `flashfs cat`.
pub fn cat(a: &CatArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let mut img = Image::open(&a.image)?;
    let shown = img.shown.clone();
    let path = a.path.as_bytes();
    crate::with_fs!(&mut img.fs, fs => {
        let ino = fs.resolve_follow(path)?;
        let attr = fs.getattr(ino)?;
        match attr.kind {
            FileType::Regular => copy_out(fs, ino, attr.inode.size, out, &mut |_| {}),
            FileType::Directory => Err(flashfs::Error::IsDir.into()),
            _ => Err(anyhow!("not a regular file")),
        }
    })
    .with_context(|| at(&shown, path))
}

/// Copies a file's bytes to `out`, calling `progress` with each chunk's length.
fn copy_out<D: Segments>(
    fs: &mut Fs<D>,
    ino: Ino,
    size: u64,
    out: &mut dyn Write,
    progress: &mut dyn FnMut(u64),
) -> anyhow::Result<()> {
    let mut buf = vec![0u8; CHUNK.min(size as usize).max(1)];
    let mut off = 0;
    while off < size {
        let n = fs.read(ino, off, &mut buf)?;
        if n == 0 {
            break;
        }
        out.write_all(&buf[..n])?;
        off += n as u64;
        progress(n as u64);
    }
    Ok(())
}

/// What a recursive copy did.
#[derive(Default)]
struct Copied {
    files: u64,
    dirs: u64,
    links: u64,
    bytes: u64,
    skipped: u64,
}

impl Copied {
    fn line(&self) -> String {
        let mut s = format!(
            "{} file{} ({}), {} director{}, {} symbolic link{}",
            count(self.files),
            device::plural(self.files),
            bytes(self.bytes),
            count(self.dirs),
            if self.dirs == 1 { "y" } else { "ies" },
            count(self.links),
            device::plural(self.links)
        );
        if self.skipped > 0 {
            s.push_str(&format!(
                "; {} special file{} (devices, FIFOs, sockets) skipped",
                count(self.skipped),
                device::plural(self.skipped)
            ));
        }
        s
    }
}

/// Runs `flashfs get`.
pub fn get(a: &GetArgs, global: Global, out: &mut dyn Write) -> anyhow::Result<()> {
    let mut img = Image::open(&a.image)?;
    let shown = img.shown.clone();
    let path = a.path.as_bytes();
    let copied = crate::with_fs!(&mut img.fs, fs => get_in(fs, a, global, &shown))?;
    if a.recursive {
        writeln!(
            out,
            "copied {} from {} to {}",
            copied.line(),
            at(&shown, path),
            device::shown(&a.dest)
        )?;
    }
    Ok(())
}

fn get_in<D: Segments>(
    fs: &mut Fs<D>,
    a: &GetArgs,
    global: Global,
    shown: &str,
) -> anyhow::Result<Copied> {
    let path = a.path.as_bytes();
    let ino = fs.resolve_follow(path).with_context(|| at(shown, path))?;
    let attr = fs.getattr(ino).with_context(|| at(shown, path))?;
    if attr.kind == FileType::Directory && !a.recursive {
        return Err(anyhow!(
            "{}: is a directory (`-r` copies it and everything below)",
            at(shown, path)
        ));
    }
    let name = base_name(path);
    let dest = if a.dest.is_dir() {
        match &name {
            Some(n) => a.dest.join(std::ffi::OsStr::from_bytes(n)),
            None => a.dest.clone(),
        }
    } else {
        a.dest.clone()
    };
    let total = if a.recursive {
        tree_bytes(fs, ino).with_context(|| at(shown, path))?
    } else {
        attr.inode.size
    };
    let bar = global.progress_bar(total, "copying {bar:40} {bytes}/{total_bytes} {eta}");
    let mut copied = Copied::default();
    let result = get_tree(
        fs,
        ino,
        &attr,
        path.to_vec(),
        &dest,
        shown,
        &bar,
        &mut copied,
    );
    bar.finish_and_clear();
    result.map(|()| copied)
}

/// Bytes of the regular files in the tree at `ino`.
fn tree_bytes<D: Segments>(fs: &mut Fs<D>, ino: Ino) -> anyhow::Result<u64> {
    let attr = fs.getattr(ino)?;
    match attr.kind {
        FileType::Regular => Ok(attr.inode.size),
        FileType::Directory => {
            let mut total = 0;
            for e in children(fs, ino)? {
                total += tree_bytes(fs, e.0)?;
            }
            Ok(total)
        }
        _ => Ok(0),
    }
}

/// The entries of a directory but `.` and `..`, as (inode, name).
fn children<D: Segments>(fs: &mut Fs<D>, dir: Ino) -> anyhow::Result<Vec<(Ino, Vec<u8>)>> {
    let mut out = Vec::new();
    let mut cookie = 0;
    loop {
        let batch = fs.readdir(dir, cookie, 256)?;
        let Some(last) = batch.last() else { break };
        cookie = last.cookie;
        out.extend(
            batch
                .into_iter()
                .filter(|e| e.name != b"." && e.name != b"..")
                .map(|e| (e.ino, e.name)),
        );
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn get_tree<D: Segments>(
    fs: &mut Fs<D>,
    ino: Ino,
    attr: &Attr,
    path: Vec<u8>,
    dest: &Path,
    shown: &str,
    bar: &indicatif::ProgressBar,
    copied: &mut Copied,
) -> anyhow::Result<()> {
    let host = |e: std::io::Error| device::io_error(e).context(device::shown(dest));
    let mode = attr.inode.mode & 0o7777;
    let mtime = native::system_time(attr.inode.mtime);
    match attr.kind {
        FileType::Regular => {
            let mut f = std::fs::File::create(dest).map_err(host)?;
            copy_out(fs, ino, attr.inode.size, &mut f, &mut |n| bar.inc(n))
                .with_context(|| at(shown, &path))?;
            f.set_permissions(std::fs::Permissions::from_mode(mode))
                .map_err(host)?;
            f.set_modified(mtime).map_err(host)?;
            copied.files += 1;
            copied.bytes += attr.inode.size;
        }
        FileType::Symlink => {
            let target = fs.readlink(ino).with_context(|| at(shown, &path))?;
            std::os::unix::fs::symlink(std::ffi::OsString::from_vec(target), dest).map_err(host)?;
            copied.links += 1;
        }
        FileType::Directory => {
            match std::fs::create_dir(dest) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dest.is_dir() => {}
                Err(e) => return Err(host(e)),
            }
            for (child, name) in children(fs, ino).with_context(|| at(shown, &path))? {
                let mut p = path.clone();
                if !p.ends_with(b"/") {
                    p.push(b'/');
                }
                p.extend_from_slice(&name);
                let cattr = fs.getattr(child).with_context(|| at(shown, &p))?;
                let d = dest.join(std::ffi::OsStr::from_bytes(&name));
                get_tree(fs, child, &cattr, p, &d, shown, bar, copied)?;
            }
            std::fs::set_permissions(dest, std::fs::Permissions::from_mode(mode)).map_err(host)?;
            std::fs::File::open(dest)
                .and_then(|f| f.set_modified(mtime))
                .map_err(host)?;
            copied.dirs += 1;
        }
        _ => copied.skipped += 1,
    }
    Ok(())
}

/// The last component of a path on the image, if it has one.
fn base_name(path: &[u8]) -> Option<Vec<u8>> {
    path.split(|&b| b == b'/')
        .rfind(|p| !p.is_empty() && *p != b"." && *p != b"..")
        .map(<[u8]>::to_vec)
}

/// Runs `flashfs put`.
pub fn put(a: &PutArgs, global: Global, out: &mut dyn Write) -> anyhow::Result<()> {
    let src_shown = device::shown(&a.src);
    let meta = std::fs::symlink_metadata(&a.src)
        .map_err(device::io_error)
        .with_context(|| src_shown.clone())?;
    if meta.is_dir() && !a.recursive {
        return Err(anyhow!(
            "{src_shown}: is a directory (`-r` copies it and everything below)"
        ));
    }
    let total = host_bytes(&a.src).with_context(|| src_shown.clone())?;
    let mut img = Image::open(&a.image)?;
    let shown = img.shown.clone();
    let bar = global.progress_bar(total, "copying {bar:40} {bytes}/{total_bytes} {eta}");
    let copied = crate::with_fs!(&mut img.fs, fs => put_in(fs, a, &shown, &bar));
    bar.finish_and_clear();
    let copied = copied?;
    img.save()?;
    if a.recursive {
        writeln!(
            out,
            "copied {} from {src_shown} to {}",
            copied.line(),
            at(&shown, a.path.as_bytes())
        )?;
    }
    Ok(())
}

/// Bytes of the regular files in the host tree at `path` (symbolic links not followed).
fn host_bytes(path: &Path) -> anyhow::Result<u64> {
    let meta = std::fs::symlink_metadata(path).map_err(device::io_error)?;
    if meta.is_dir() {
        let mut total = 0;
        for e in std::fs::read_dir(path).map_err(device::io_error)? {
            let e = e.map_err(device::io_error)?;
            total += host_bytes(&e.path()).with_context(|| device::shown(&e.path()))?;
        }
        Ok(total)
    } else if meta.is_file() {
        Ok(meta.len())
    } else {
        Ok(0)
    }
}

fn put_in<D: Segments>(
    fs: &mut Fs<D>,
    a: &PutArgs,
    shown: &str,
    bar: &indicatif::ProgressBar,
) -> anyhow::Result<Copied> {
    let path = a.path.as_bytes();
    let name = a
        .src
        .file_name()
        .map(|n| n.as_bytes().to_vec())
        .ok_or_else(|| anyhow!("{}: names no file", device::shown(&a.src)))?;
    // Into an existing directory, or as the path named.
    let (dir, name, shown_path) = match fs.resolve_follow(path) {
        Ok(ino) if fs.getattr(ino)?.kind == FileType::Directory => {
            let mut p = path.to_vec();
            if !p.ends_with(b"/") {
                p.push(b'/');
            }
            p.extend_from_slice(&name);
            (ino, name, p)
        }
        _ => {
            let (dir, n) = fs.resolve_parent(path).with_context(|| at(shown, path))?;
            (dir, n.to_vec(), path.to_vec())
        }
    };
    let mut copied = Copied::default();
    put_tree(fs, dir, &name, &a.src, &shown_path, shown, bar, &mut copied)?;
    Ok(copied)
}

#[allow(clippy::too_many_arguments)]
fn put_tree<D: Segments>(
    fs: &mut Fs<D>,
    dir: Ino,
    name: &[u8],
    src: &Path,
    path: &[u8],
    shown: &str,
    bar: &indicatif::ProgressBar,
    copied: &mut Copied,
) -> anyhow::Result<()> {
    let src_shown = || device::shown(src);
    let img = || at(shown, path);
    let meta = std::fs::symlink_metadata(src)
        .map_err(device::io_error)
        .with_context(src_shown)?;
    let mode = meta.mode() & 0o7777;
    let mtime = meta
        .modified()
        .map(native::timespec)
        .map_err(device::io_error)
        .with_context(src_shown)?;
    let (uid, gid) = (meta.uid(), meta.gid());
    let times = SetAttr {
        mtime: Some(SetTime::At(mtime)),
        atime: Some(SetTime::At(mtime)),
        ..SetAttr::default()
    };
    let ft = meta.file_type();
    if ft.is_symlink() {
        let target = std::fs::read_link(src)
            .map_err(device::io_error)
            .with_context(src_shown)?;
        remove_existing(fs, dir, name, false).with_context(img)?;
        let attr = fs
            .symlink(dir, name, target.as_os_str().as_bytes(), uid, gid)
            .with_context(img)?;
        fs.setattr(attr.ino, times).with_context(img)?;
        copied.links += 1;
    } else if ft.is_dir() {
        let ino = match fs.lookup(dir, name) {
            Ok(a) if a.kind == FileType::Directory => a.ino,
            Ok(_) => return Err(anyhow!("{}: exists and is not a directory", img())),
            Err(flashfs::Error::NotFound) => {
                fs.mkdir(dir, name, mode, uid, gid).with_context(img)?.ino
            }
            Err(e) => return Err(anyhow::Error::new(e).context(img())),
        };
        let mut entries: Vec<_> = std::fs::read_dir(src)
            .map_err(device::io_error)
            .with_context(src_shown)?
            .collect::<Result<_, _>>()
            .map_err(device::io_error)
            .with_context(src_shown)?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let n = e.file_name();
            let mut p = path.to_vec();
            if !p.ends_with(b"/") {
                p.push(b'/');
            }
            p.extend_from_slice(n.as_bytes());
            put_tree(fs, ino, n.as_bytes(), &e.path(), &p, shown, bar, copied)?;
        }
        fs.setattr(
            ino,
            SetAttr {
                mode: Some(mode),
                ..times
            },
        )
        .with_context(img)?;
        copied.dirs += 1;
    } else if ft.is_file() {
        let mut f = std::fs::File::open(src)
            .map_err(device::io_error)
            .with_context(src_shown)?;
        remove_existing(fs, dir, name, true).with_context(img)?;
        let ino = match fs.lookup(dir, name) {
            Ok(a) => {
                fs.setattr(
                    a.ino,
                    SetAttr {
                        size: Some(0),
                        ..SetAttr::default()
                    },
                )
                .with_context(img)?;
                a.ino
            }
            Err(flashfs::Error::NotFound) => {
                fs.create(dir, name, mode, uid, gid).with_context(img)?.ino
            }
            Err(e) => return Err(anyhow::Error::new(e).context(img())),
        };
        let mut buf = vec![0u8; CHUNK];
        let mut off = 0u64;
        loop {
            let n = read_full(&mut f, &mut buf)
                .map_err(device::io_error)
                .with_context(src_shown)?;
            if n == 0 {
                break;
            }
            fs.write(ino, off, &buf[..n]).with_context(img)?;
            off += n as u64;
            bar.inc(n as u64);
        }
        fs.setattr(
            ino,
            SetAttr {
                mode: Some(mode),
                ..times
            },
        )
        .with_context(img)?;
        copied.files += 1;
        copied.bytes += off;
    } else {
        copied.skipped += 1;
    }
    Ok(())
}

/// Removes what `name` names in `dir` unless it is a regular file that `keep_file` lets the
/// copy overwrite; a directory is never replaced.
fn remove_existing<D: Segments>(
    fs: &mut Fs<D>,
    dir: Ino,
    name: &[u8],
    keep_file: bool,
) -> flashfs::Result<()> {
    match fs.lookup(dir, name) {
        Ok(a) if a.kind == FileType::Directory => Err(flashfs::Error::IsDir),
        Ok(a) if a.kind == FileType::Regular && keep_file => Ok(()),
        Ok(_) => fs.unlink(dir, name),
        Err(flashfs::Error::NotFound) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Reads until `buf` is full or the file ends.
fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    use std::io::Read;
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Runs `flashfs rm`.
pub fn rm(a: &RmArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let _ = out;
    let mut img = Image::open(&a.image)?;
    let shown = img.shown.clone();
    let path = a.path.as_bytes();
    crate::with_fs!(&mut img.fs, fs => {
        let (dir, name) = fs.resolve_parent(path)?;
        let attr = fs.lookup(dir, name)?;
        if attr.ino == ROOT_INO || name == b"." || name == b".." {
            return Err(anyhow!("{}: the root directory stays", at(&shown, path)));
        }
        if attr.kind == FileType::Directory && !a.recursive {
            fs.rmdir(dir, name).map_err(|e| match e {
                flashfs::Error::NotEmpty => anyhow!("directory not empty (`-r` removes it and everything below)"),
                e => e.into(),
            })
        } else {
            remove_tree(fs, dir, name)
        }
    })
    .with_context(|| at(&shown, path))?;
    img.save()
}

fn remove_tree<D: Segments>(fs: &mut Fs<D>, dir: Ino, name: &[u8]) -> anyhow::Result<()> {
    let attr = fs.lookup(dir, name)?;
    if attr.kind == FileType::Directory {
        for (_, child) in children(fs, attr.ino)? {
            remove_tree(fs, attr.ino, &child)?;
        }
        fs.rmdir(dir, name)?;
    } else {
        fs.unlink(dir, name)?;
    }
    Ok(())
}

/// Runs `flashfs mkdir`.
pub fn mkdir(a: &MkdirArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let _ = out;
    let mut img = Image::open(&a.image)?;
    let shown = img.shown.clone();
    let (uid, gid) = img.owner;
    let path = a.path.as_bytes();
    crate::with_fs!(&mut img.fs, fs => {
        if a.parents {
            let mut dir = ROOT_INO;
            let mut prefix = Vec::new();
            for part in path.split(|&b| b == b'/').filter(|p| !p.is_empty() && *p != b".") {
                prefix.push(b'/');
                prefix.extend_from_slice(part);
                dir = match fs.lookup(dir, part) {
                    Ok(a) if a.kind == FileType::Directory => a.ino,
                    Ok(a) if a.kind == FileType::Symlink => {
                        let ino = fs.resolve_follow(&prefix)?;
                        if fs.getattr(ino)?.kind != FileType::Directory {
                            return Err(flashfs::Error::NotDir.into());
                        }
                        ino
                    }
                    Ok(_) => return Err(flashfs::Error::NotDir.into()),
                    Err(flashfs::Error::NotFound) => fs.mkdir(dir, part, 0o755, uid, gid)?.ino,
                    Err(e) => return Err(e.into()),
                };
            }
            Ok(())
        } else {
            let (dir, name) = fs.resolve_parent(path)?;
            fs.mkdir(dir, name, 0o755, uid, gid).map(drop).map_err(anyhow::Error::new)
        }
    })
    .with_context(|| at(&shown, path))?;
    img.save()
}

/// Runs `flashfs mv`.
pub fn mv(a: &MvArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let _ = out;
    let mut img = Image::open(&a.image)?;
    let shown = img.shown.clone();
    let (from, to) = (a.from.as_bytes(), a.to.as_bytes());
    crate::with_fs!(&mut img.fs, fs => {
        let (d1, n1) = fs.resolve_parent(from).with_context(|| at(&shown, from))?;
        fs.lookup(d1, n1).with_context(|| at(&shown, from))?;
        let (d2, n2) = match fs.resolve_follow(to) {
            Ok(ino) if fs.getattr(ino)?.kind == FileType::Directory => (ino, n1.to_vec()),
            _ => {
                let (d, n) = fs.resolve_parent(to).with_context(|| at(&shown, to))?;
                (d, n.to_vec())
            }
        };
        fs.rename(d1, n1, d2, &n2, Default::default())
            .with_context(|| format!("{} -> {}", at(&shown, from), String::from_utf8_lossy(to)))
    })?;
    img.save()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_print_in_utc() {
        assert_eq!(utc(0), "1970-01-01 00:00");
        assert_eq!(utc(951_782_400 + 3_661), "2000-02-29 01:01");
        assert_eq!(utc(-60), "1969-12-31 23:59");
    }

    #[test]
    fn base_names_skip_slashes_and_dots() {
        assert_eq!(base_name(b"/a/b/"), Some(b"b".to_vec()));
        assert_eq!(base_name(b"/"), None);
        assert_eq!(base_name(b"x/."), Some(b"x".to_vec()));
    }
}
