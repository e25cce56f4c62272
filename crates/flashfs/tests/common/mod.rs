//! Small devices and helpers shared by the tests.
#![allow(dead_code, unused_imports)]

use flash::{Cells, EccSpec, ImageMeta, NandSim, NandSpec, NandTiming, NorSim, NorSpec, NorTiming};
use flashfs::media::tag::{Tag, TagState};
use flashfs::media::HeaderState;
use flashfs::{Liveness, NandSegments, NorSegments, Owner, PageSource, SlotAddr};

/// A small NOR part: 16 units of 8 KiB in 2 banks, 4-byte words.
pub fn nor_spec(reprogrammable: bool) -> NorSpec {
    NorSpec {
        unit_size: 8 * 1024,
        units: 16,
        banks: 2,
        word_size: 4,
        program_page: 0,
        reprogrammable,
        timing: NorTiming {
            read_word_ns: 100,
            program_word_ns: 10_000,
            program_cmd_ns: 0,
            erase_ns: 100_000_000,
            bus_byte_ns: 0,
            erase_suspend_ns: Some(20_000),
        },
        endurance: 100_000,
    }
}

/// A small NAND part: 24 blocks of 16 pages of 512 B.
pub fn nand_spec() -> NandSpec {
    NandSpec {
        blocks: 24,
        pages_per_block: 16,
        page_size: 512,
        spare_size: 16,
        banks: 1,
        cells: Cells::Slc,
        ecc: EccSpec {
            codeword: 512,
            correctable: 1,
        },
        timing: NandTiming {
            read_ns: 25_000,
            program_ns: 200_000,
            erase_ns: 1_500_000,
            bus_byte_ns: 25,
        },
        endurance: 100_000,
        factory_bad_permille: 0,
    }
}

pub fn nor(reprogrammable: bool) -> NorSegments<NorSim> {
    nor_of(nor_spec(reprogrammable))
}

/// A NOR part of `spec`, in segments of 512-byte slots.
pub fn nor_of(spec: NorSpec) -> NorSegments<NorSim> {
    let sim = NorSim::new(spec, ImageMeta::new("test-nor", 1)).unwrap();
    NorSegments::new(sim, 512).unwrap()
}

/// A NOR part of small units: 64 units of 2 KiB in 2 banks, erased 4 at a time.
pub fn nor_small_units() -> NorSegments<NorSim> {
    nor_of(NorSpec {
        unit_size: 2 * 1024,
        units: 64,
        ..nor_spec(true)
    })
}

pub fn nand() -> NandSegments<NandSim> {
    let sim = NandSim::new(nand_spec(), ImageMeta::new("test-nand", 1)).unwrap();
    NandSegments::new(sim).unwrap()
}

/// A NAND part large enough that its volumes keep checkpoints: 300 blocks of 8 pages of
/// 512 bytes.
pub fn nand_checkpointed() -> NandSegments<NandSim> {
    nand_of(300, 8, "test-nand-300")
}

/// A NAND part of 300 blocks of 64 pages of 512 bytes: a free-space map of bits takes five
/// blocks, the block device's map five chunks, paged under checkpoints.
pub fn nand_of_300x64() -> NandSegments<NandSim> {
    nand_of(300, 64, "test-nand-300x64")
}

/// A NAND part of 260 blocks of 256 pages of 512 bytes: segments of 255 slots, longer than
/// the slots an anchor gives records.
pub fn nand_long_segments() -> NandSegments<NandSim> {
    nand_of(260, 256, "test-nand-260x256")
}

/// The small NAND part's pages with `blocks` blocks of `pages_per_block` pages, named `name`.
fn nand_of(blocks: u32, pages_per_block: u32, name: &str) -> NandSegments<NandSim> {
    let spec = NandSpec {
        blocks,
        pages_per_block,
        ..nand_spec()
    };
    let sim = NandSim::new(spec, ImageMeta::new(name, 1)).unwrap();
    NandSegments::new(sim).unwrap()
}

/// Deterministic sector content: sector number and version, repeated (the torture
/// harness's, so the tests and the harness agree on what each write holds).
pub use flashfs_bench::torture::pattern;

use flashfs::fs::{Atime, FileType, Ino, RecordFormat, Timespec, ROOT_INO};
use flashfs::{Fs, FsConfig, Segments};
use std::collections::BTreeMap;

/// A clock that stands still, so runs repeat exactly.
pub fn still_clock() -> Timespec {
    Timespec {
        sec: 1_700_000_000,
        nsec: 0,
    }
}

/// Creates the record file `name` of `format` in the root (mode 0644, owned by root);
/// returns its inode.
pub fn record_file<D: Segments>(fs: &mut Fs<D>, name: &[u8], format: RecordFormat) -> Ino {
    fs.create_records(ROOT_INO, name, format, 0o644, 0, 0)
        .unwrap()
        .ino
}

/// File-system settings of the tests: a still clock, and reads that write nothing.
pub fn fs_config() -> FsConfig {
    FsConfig {
        atime: Atime::Never,
        clock: still_clock,
        ..FsConfig::default()
    }
}

/// What a path holds, as a caller sees it (inode numbers left out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    File(Vec<u8>),
    /// A record file: the numbers of its oldest record and of the next one added, and its
    /// records.
    Records(u64, u64, Vec<Vec<u8>>),
    Dir,
    Symlink(Vec<u8>),
    Other(FileType),
}

/// One path of a volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub content: Content,
    pub nlink: u32,
    /// Permission bits.
    pub perm: u32,
    pub size: u64,
    pub xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
}

/// Every path of the volume from the root (the root is `/`), with what it holds; and the
/// number of distinct inodes seen. Also checks what the dump passes by: `.` and `..` of
/// every directory, listings resumed from every cookie, and attributes against content.
pub fn dump<D: Segments>(fs: &mut Fs<D>) -> Result<(BTreeMap<Vec<u8>, Entry>, usize), String> {
    let mut out = BTreeMap::new();
    let mut inodes = std::collections::BTreeSet::new();
    let mut stack: Vec<(Vec<u8>, Ino, Ino)> = vec![(b"/".to_vec(), ROOT_INO, ROOT_INO)];
    let e = |what: &str, path: &[u8], err: flashfs::Error| {
        format!("{what} of {}: {err}", String::from_utf8_lossy(path))
    };
    while let Some((path, ino, parent)) = stack.pop() {
        if out.len() > 100_000 {
            return Err(String::from("more than 100000 paths: a directory loop"));
        }
        inodes.insert(ino);
        let attr = fs.getattr(ino).map_err(|x| e("getattr", &path, x))?;
        let content = match attr.kind {
            FileType::Regular if fs.record_info(ino).is_ok() => {
                let info = fs
                    .record_info(ino)
                    .map_err(|x| e("record info", &path, x))?;
                let list = fs
                    .record_list(ino)
                    .map_err(|x| e("record list", &path, x))?;
                if list.first().is_some_and(|r| r.0 != info.first) {
                    return Err(format!(
                        "records of {} misnumbered",
                        String::from_utf8_lossy(&path)
                    ));
                }
                Content::Records(
                    info.first,
                    info.next,
                    list.into_iter().map(|r| r.1).collect(),
                )
            }
            FileType::Regular => {
                let mut buf = vec![0; attr.inode.size as usize];
                let n = fs.read(ino, 0, &mut buf).map_err(|x| e("read", &path, x))?;
                if n != buf.len() {
                    return Err(format!("short read of {}", String::from_utf8_lossy(&path)));
                }
                Content::File(buf)
            }
            FileType::Symlink => {
                Content::Symlink(fs.readlink(ino).map_err(|x| e("readlink", &path, x))?)
            }
            FileType::Directory => {
                let mut cookie = 0;
                let mut seen = 0;
                loop {
                    let batch = fs
                        .readdir(ino, cookie, 3)
                        .map_err(|x| e("readdir", &path, x))?;
                    let Some(last) = batch.last() else { break };
                    cookie = last.cookie;
                    for d in batch {
                        seen += 1;
                        if d.name == b"." || d.name == b".." {
                            let want = if d.name == b"." { ino } else { parent };
                            if d.ino != want || d.kind != FileType::Directory {
                                return Err(format!(
                                    "{} of {} names {} not {want}",
                                    String::from_utf8_lossy(&d.name),
                                    String::from_utf8_lossy(&path),
                                    d.ino
                                ));
                            }
                            continue;
                        }
                        let mut p = path.clone();
                        if p != b"/" {
                            p.push(b'/');
                        }
                        p.extend_from_slice(&d.name);
                        let a = fs.lookup(ino, &d.name).map_err(|x| e("lookup", &p, x))?;
                        if a.ino != d.ino || a.kind != d.kind {
                            return Err(format!(
                                "listing and lookup of {} disagree",
                                String::from_utf8_lossy(&p)
                            ));
                        }
                        stack.push((p, d.ino, ino));
                    }
                    if seen > 100_000 {
                        return Err(String::from("endless directory listing"));
                    }
                }
                let dotdot = fs
                    .lookup(ino, b"..")
                    .map_err(|x| e("lookup ..", &path, x))?;
                if dotdot.ino != parent {
                    return Err(format!(
                        ".. of {} is {} not {parent}",
                        String::from_utf8_lossy(&path),
                        dotdot.ino
                    ));
                }
                Content::Dir
            }
            k => Content::Other(k),
        };
        let mut xattrs = BTreeMap::new();
        for name in fs.listxattr(ino).map_err(|x| e("listxattr", &path, x))? {
            let v = fs
                .getxattr(ino, &name)
                .map_err(|x| e("getxattr", &path, x))?;
            xattrs.insert(name, v);
        }
        out.insert(
            path,
            Entry {
                content,
                nlink: attr.inode.nlink,
                perm: attr.inode.mode & 0o7777,
                size: attr.inode.size,
                xattrs,
            },
        );
    }
    Ok((out, inodes.len()))
}

/// Shows the paths of a dump and their sizes, for failure messages.
pub fn show(d: &BTreeMap<Vec<u8>, Entry>) -> String {
    d.iter()
        .map(|(p, e)| {
            let kind = match &e.content {
                Content::File(_) => "f",
                Content::Records(..) => "r",
                Content::Dir => "d",
                Content::Symlink(_) => "l",
                Content::Other(_) => "o",
            };
            format!(
                "{} {kind} size {} nlink {} perm {:o} xattrs {}\n",
                String::from_utf8_lossy(p),
                e.size,
                e.nlink,
                e.perm,
                e.xattrs.len()
            )
        })
        .collect()
}

/// Where two dumps differ, for failure messages.
pub fn diff(a: &BTreeMap<Vec<u8>, Entry>, b: &BTreeMap<Vec<u8>, Entry>) -> String {
    let mut out = String::new();
    for k in a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))) {
        let p = String::from_utf8_lossy(k);
        match (a.get(k), b.get(k)) {
            (Some(x), Some(y)) if x == y => {}
            (Some(x), Some(y)) => {
                if let (Content::File(u), Content::File(v)) = (&x.content, &y.content) {
                    if let Some(i) = u.iter().zip(v).position(|(p, q)| p != q) {
                        out += &format!("  {p}: content differs from byte {i}\n");
                    }
                }
                if let (Content::Records(f, _, u), Content::Records(g, _, v)) =
                    (&x.content, &y.content)
                {
                    let lens = |r: &[Vec<u8>]| r.iter().map(Vec::len).collect::<Vec<_>>();
                    if x.content != y.content {
                        out +=
                            &format!(
                            "  {p}: records from {f}, lengths {:?} vs from {g}, lengths {:?}{}\n",
                            lens(u),
                            lens(v),
                            if u == v { " (same records)" } else { " (records differ)" }
                        );
                    }
                }
                if (x.size, x.nlink, x.perm) != (y.size, y.nlink, y.perm) {
                    out += &format!(
                        "  {p}: size/nlink/perm {:?} vs {:?}\n",
                        (x.size, x.nlink, x.perm),
                        (y.size, y.nlink, y.perm)
                    );
                }
                if x.xattrs != y.xattrs {
                    out += &format!("  {p}: attributes differ\n");
                }
                if std::mem::discriminant(&x.content) != std::mem::discriminant(&y.content) {
                    out += &format!("  {p}: type differs\n");
                }
            }
            (x, _) => {
                out += &format!(
                    "  {p}: only in {}\n",
                    if x.is_some() {
                        "the first"
                    } else {
                        "the second"
                    }
                )
            }
        }
    }
    out
}

/// A log owner whose keys are overwritten: only each key's latest slot is live.
#[derive(Default)]
pub struct Latest(pub std::collections::HashMap<u32, SlotAddr>);

impl Owner for Latest {
    fn is_live(
        &mut self,
        tag: &Tag,
        at: SlotAddr,
        _: u64,
        _: &mut dyn PageSource,
    ) -> flashfs::Result<Liveness> {
        Ok(if self.0.get(&tag.key) == Some(&at) {
            Liveness::Live
        } else {
            Liveness::Dead
        })
    }
    fn moved(
        &mut self,
        tag: &Tag,
        _: SlotAddr,
        to: SlotAddr,
        _: &mut dyn PageSource,
    ) -> flashfs::Result<()> {
        self.0.insert(tag.key, to);
        Ok(())
    }
}

/// Every valid tag on `dev`, with its segment and slot.
pub fn valid_tags<D: Segments>(dev: &mut D) -> Vec<(u32, u32, Tag)> {
    let geo = dev.geometry();
    let mut tags = vec![TagState::Erased; geo.slots as usize];
    let mut out = Vec::new();
    for seg in 0..geo.segments {
        if !matches!(dev.read_header(seg), Ok(HeaderState::Valid(_))) {
            continue;
        }
        dev.read_tags(seg, &mut tags).unwrap();
        for (slot, t) in tags.iter().enumerate() {
            if let TagState::Valid(t) = t {
                out.push((seg, slot as u32, *t));
            }
        }
    }
    out
}
