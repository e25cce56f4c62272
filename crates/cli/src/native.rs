//! The native file system on an image: formatted or mounted on either kind of flash, its
//! figures for `info`, and the image given back, flushed, when it closes.

use flash::store::Store;
use flash::NandSim;
use flashfs::fs::{Attr, FileType, Timespec};
use flashfs::log::policy::Policy;
use flashfs::{Fs, FsConfig, NandSegments, NorSegments, Segments};
use serde::Serialize;

use crate::device::NorPart;
use crate::units::count;
use crate::volume::{
    self, ftl_log_usage, rewrap, Hybrid, HybridNor, Images, LogUsage, Media, Medium, Space,
};

/// The native file system on any medium.
// Two devices make the largest variant; a command holds one value of it at a time, so a
// box would only add a step to every call.
#[allow(clippy::large_enum_variant)]
pub enum AnyFs<S: Store> {
    /// On NOR flash.
    Nor(Fs<NorSegments<NorPart<S>>>),
    /// On NAND flash.
    Nand(Fs<NandSegments<NandSim<S>>>),
    /// On NVRAM beside NAND.
    Tiered(Fs<Hybrid<S>>),
    /// On NVRAM beside NOR.
    TieredNor(Fs<HybridNor<S>>),
}

/// Calls `$f` with the file system inside `$fs`, whatever the medium.
#[macro_export]
macro_rules! with_fs {
    ($fs:expr, $f:ident => $body:expr) => {
        match $fs {
            $crate::native::AnyFs::Nor($f) => $body,
            $crate::native::AnyFs::Nand($f) => $body,
            $crate::native::AnyFs::Tiered($f) => $body,
            $crate::native::AnyFs::TieredNor($f) => $body,
        }
    };
}

/// The file system's settings for the command line: the defaults, with the cleaner's
/// policy and reserve when given.
pub fn config(policy: Option<Policy>, reserve: Option<u32>) -> FsConfig {
    let mut c = FsConfig::default();
    if let Some(p) = policy {
        c.ftl.log.policy = p;
    }
    if let Some(r) = reserve {
        c.ftl.log.reserve = r;
    }
    c
}

/// What `info` shows of the native file system besides space.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NativeInfo {
    /// Bytes per block.
    pub block_size: u32,
    /// Blocks for files and metadata.
    pub blocks: u64,
    /// Blocks free.
    pub free_blocks: u64,
    /// Inodes in use.
    pub inodes: u64,
    /// Commits over the volume's life.
    pub commits: u64,
    /// Levels of the index.
    pub index_height: usize,
    /// File bytes written over the volume's life.
    pub user_bytes: u64,
    /// Bytes the log programmed for them over the volume's life.
    pub flash_bytes: u64,
    /// Write amplification so far (`None` before any write).
    pub write_amplification: Option<f64>,
    /// Whether this mount read its free space from the saved free-space map (not walking
    /// the index).
    pub mounted_from_map: bool,
    /// Blocks the saved free-space map takes (0: the volume keeps none).
    pub space_map_blocks: u64,
}

impl<S: Store + Send + 'static> AnyFs<S> {
    /// Formats the native file system on `media`.
    pub fn format(media: Media<S>, config: FsConfig) -> anyhow::Result<Self> {
        Ok(rewrap!(media, Media => AnyFs, s => Fs::format(s, config)?))
    }

    /// Mounts the native file system on `media`.
    pub fn mount(media: Media<S>, config: FsConfig) -> anyhow::Result<Self> {
        Ok(rewrap!(media, Media => AnyFs, s => Fs::mount(s, config)?))
    }

    /// Space, log usage and the file system's own figures.
    pub fn usage(&mut self) -> anyhow::Result<(Space, LogUsage, NativeInfo)> {
        with_fs!(self, fs => usage(fs))
    }

    /// Commits, flushes and gives the images' stores back, flushed.
    pub fn close(self) -> anyhow::Result<Images<S>> {
        with_fs!(self, fs => close(fs))
    }

    /// Gives the images' stores back without committing (what was not committed is lost,
    /// as after a power cut).
    pub fn abandon(self) -> Images<S> {
        with_fs!(self, fs => fs.into_device().into_images())
    }
}

/// Space, log usage and the file system's own figures of `fs`.
pub fn usage<D: Segments>(fs: &mut Fs<D>) -> anyhow::Result<(Space, LogUsage, NativeInfo)> {
    let st = fs.statfs();
    let bs = u64::from(st.block_size);
    let used = st.blocks - st.blocks_free;
    let space = Space {
        capacity_bytes: st.blocks * bs,
        used_bytes: used * bs,
        free_bytes: st.blocks_free * bs,
        detail: format!(
            "{} of {} blocks of {} B in use",
            count(used),
            count(st.blocks),
            count(bs)
        ),
    };
    let info = NativeInfo {
        block_size: st.block_size,
        blocks: st.blocks,
        free_blocks: st.blocks_free,
        inodes: st.files,
        commits: fs.commit_count(),
        index_height: fs.index_height()?,
        user_bytes: fs.lifetime().user_bytes,
        flash_bytes: fs.lifetime().flash_bytes,
        write_amplification: fs.lifetime().write_amplification(),
        mounted_from_map: fs.stats().mounted_from_map,
        space_map_blocks: fs.space_map_blocks(),
    };
    let mut log = ftl_log_usage(fs.ftl());
    if let Some(r) = &mut log.regions {
        r.record(Some(&fs.lifetime()));
    }
    Ok((space, log, info))
}

/// Commits `fs`, makes the images durable and gives their stores back.
pub fn close<D: Medium>(fs: Fs<D>) -> anyhow::Result<Images<D::Store>> {
    volume::release(fs.unmount()?)
}

/// A file-system time as the host's.
pub fn system_time(t: Timespec) -> std::time::SystemTime {
    use std::time::{Duration, UNIX_EPOCH};
    let nsec = Duration::from_nanos(u64::from(t.nsec.min(999_999_999)));
    if t.sec >= 0 {
        UNIX_EPOCH + Duration::from_secs(t.sec as u64) + nsec
    } else {
        UNIX_EPOCH - Duration::from_secs(t.sec.unsigned_abs()) + nsec
    }
}

/// A host time as the file system's.
pub fn timespec(t: std::time::SystemTime) -> Timespec {
    match t.duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => Timespec {
            sec: d.as_secs() as i64,
            nsec: d.subsec_nanos(),
        },
        Err(e) => {
            let d = e.duration();
            let (mut sec, mut nsec) = (-(d.as_secs() as i64), d.subsec_nanos());
            if nsec > 0 {
                sec -= 1;
                nsec = 1_000_000_000 - nsec;
            }
            Timespec { sec, nsec }
        }
    }
}

/// `ls -l`'s type and permission letters, e.g. `drwxr-xr-x`.
pub fn mode_string(attr: &Attr) -> String {
    let t = match attr.kind {
        FileType::Regular => '-',
        FileType::Directory => 'd',
        FileType::Symlink => 'l',
        FileType::Fifo => 'p',
        FileType::Socket => 's',
        FileType::CharDevice => 'c',
        FileType::BlockDevice => 'b',
    };
    let m = attr.inode.mode;
    let mut s = String::with_capacity(10);
    s.push(t);
    for (shift, special, lower, upper) in [(6, 0o4000, 's', 'S'), (3, 0o2000, 's', 'S')] {
        let bits = (m >> shift) & 7;
        s.push(if bits & 4 != 0 { 'r' } else { '-' });
        s.push(if bits & 2 != 0 { 'w' } else { '-' });
        s.push(match (bits & 1 != 0, m & special != 0) {
            (true, true) => lower,
            (false, true) => upper,
            (true, false) => 'x',
            (false, false) => '-',
        });
    }
    let bits = m & 7;
    s.push(if bits & 4 != 0 { 'r' } else { '-' });
    s.push(if bits & 2 != 0 { 'w' } else { '-' });
    s.push(match (bits & 1 != 0, m & 0o1000 != 0) {
        (true, true) => 't',
        (false, true) => 'T',
        (true, false) => 'x',
        (false, false) => '-',
    });
    s
}

/// The name of a file type, for JSON.
pub fn kind_name(kind: FileType) -> &'static str {
    match kind {
        FileType::Regular => "file",
        FileType::Directory => "directory",
        FileType::Symlink => "symlink",
        FileType::Fifo => "fifo",
        FileType::Socket => "socket",
        FileType::CharDevice => "char-device",
        FileType::BlockDevice => "block-device",
    }
}
