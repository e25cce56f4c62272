//! Filling a volume to a share of its capacity: files of a file set on the native file
//! system, or sectors written in order on the block device. The data follow a fixed
//! pattern, so that what a mount gives back can be checked.

use flashfs::fs::ROOT_INO;
use flashfs::{BlockDevice, Fs, Ftl, Segments};
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use super::device::Dev;
use crate::error::{BenchError, Context, Result};

/// Bytes of the repeating data pattern.
const PATTERN: usize = 1 << 20;
/// Bytes written per call.
pub const CHUNK: usize = 64 * 1024;
/// Sectors written per call on the block device (at most [`CHUNK`] bytes' worth).
const SECTOR_BATCH: usize = 64;

/// `PATTERN` random bytes, then their first bytes again, so that a piece of up to a chunk
/// (or a batch of sectors) starting anywhere in the first `PATTERN` is contiguous and a
/// file's byte at `x` is the same whichever piece it is read or written in.
pub struct Pattern(Vec<u8>);

impl Pattern {
    /// The pattern of seed `seed`.
    pub fn new(seed: u64) -> Pattern {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let tail = CHUNK.max(SECTOR_BATCH * 4096);
        let mut v = vec![0u8; PATTERN + tail];
        rng.fill_bytes(&mut v[..PATTERN]);
        v.copy_within(..tail, PATTERN);
        Pattern(v)
    }

    /// `len` bytes (at most a chunk) of file `file` from offset `off`.
    pub fn file(&self, file: u64, off: u64, len: usize) -> &[u8] {
        let start = (file.wrapping_mul(104_729).wrapping_add(off) % PATTERN as u64) as usize;
        &self.0[start..start + len]
    }

    /// `len` bytes from sector `sector` on, sectors of `sector_size` bytes.
    pub fn sectors(&self, sector: u64, sector_size: usize, len: usize) -> &[u8] {
        let start = (sector.wrapping_mul(sector_size as u64) % PATTERN as u64) as usize;
        &self.0[start..start + len]
    }
}

/// The two file sets of Ryu & Park's experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum FileSet {
    /// Files of 359.5 KiB on average, sizes drawn uniformly from half to one and a half
    /// times that.
    #[serde(rename = "359.5k")]
    Small,
    /// Files of 5.9 MiB each.
    #[serde(rename = "5.9m")]
    Large,
}

impl FileSet {
    /// Both, in the paper's order.
    pub const ALL: [FileSet; 2] = [FileSet::Small, FileSet::Large];

    /// Mean file size, bytes (the paper's KB and MB taken as KiB and MiB).
    pub fn mean_bytes(self) -> u64 {
        match self {
            FileSet::Small => 359 * 1024 + 512,
            FileSet::Large => 5 * (1 << 20) + (1 << 20) * 9 / 10,
        }
    }

    /// The label in tables and JSON.
    pub fn label(self) -> &'static str {
        match self {
            FileSet::Small => "359.5k",
            FileSet::Large => "5.9m",
        }
    }

    /// Parses a label (`359.5k`, `5.9m`, or `small`, `large`).
    pub fn from_name(s: &str) -> Option<FileSet> {
        match s {
            "359.5k" | "small" => Some(FileSet::Small),
            "5.9m" | "large" => Some(FileSet::Large),
            _ => None,
        }
    }

    /// The size of the next file.
    fn draw(self, rng: &mut Xoshiro256PlusPlus) -> u64 {
        let mean = self.mean_bytes();
        match self {
            FileSet::Small => mean / 2 + rng.next_u64() % (mean + 1),
            FileSet::Large => mean,
        }
    }
}

/// A file written: its number (its name and its data follow from it) and size.
#[derive(Debug, Clone, Copy)]
pub struct FileDone {
    /// Number of the file.
    pub n: u64,
    /// Bytes.
    pub size: u64,
}

/// The name of file `n`.
pub fn file_name(n: u64) -> Vec<u8> {
    format!("file-{n:06}").into_bytes()
}

/// The sizes of the files a fill writes.
#[derive(Debug, Clone, Copy)]
enum Sizes {
    /// Drawn as the file set draws them.
    Set(FileSet),
    /// All of these bytes.
    Fixed(u64),
}

/// Files of a file set written on a native file system, up to a number of bytes.
pub struct FsFill {
    sizes: Sizes,
    rng: Xoshiro256PlusPlus,
    /// Every file written, in order.
    pub files: Vec<FileDone>,
    /// Bytes of file data written.
    pub stored: u64,
    since_sync: u64,
}

impl FsFill {
    /// Nothing written yet.
    pub fn new(set: FileSet, seed: u64) -> FsFill {
        FsFill::with_sizes(Sizes::Set(set), seed)
    }

    /// Nothing written yet; files of `bytes` each (at least one byte).
    pub fn fixed(bytes: u64, seed: u64) -> FsFill {
        FsFill::with_sizes(Sizes::Fixed(bytes.max(1)), seed)
    }

    fn with_sizes(sizes: Sizes, seed: u64) -> FsFill {
        FsFill {
            sizes,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            files: Vec::new(),
            stored: 0,
            since_sync: 0,
        }
    }

    /// Writes files until `target` bytes are stored (the last one cut to fit) and syncs;
    /// `progress` hears the bytes stored.
    pub fn to<D: Segments>(
        &mut self,
        fs: &mut Fs<D>,
        pat: &Pattern,
        target: u64,
        progress: &mut dyn FnMut(u64),
    ) -> Result<()> {
        while self.stored < target {
            let n = self.files.len() as u64;
            let size = match self.sizes {
                Sizes::Set(set) => set.draw(&mut self.rng),
                Sizes::Fixed(b) => b,
            }
            .min(target - self.stored);
            let ino = fs
                .create(ROOT_INO, &file_name(n), 0o644, 0, 0)
                .context(|| format!("creating file {n}"))?
                .ino;
            let mut off = 0;
            while off < size {
                let len = (size - off).min(CHUNK as u64) as usize;
                fs.write(ino, off, pat.file(n, off, len))
                    .context(|| format!("writing file {n} at {off}"))?;
                off += len as u64;
            }
            self.files.push(FileDone { n, size });
            self.stored += size;
            self.since_sync += size;
            // A commit now and then, as an application's fsyncs would, keeps the
            // file system's dirty state bounded.
            if self.since_sync >= 16 << 20 {
                fs.sync().context(|| "sync".into())?;
                self.since_sync = 0;
            }
            progress(self.stored);
        }
        fs.sync().context(|| "sync".into())?;
        self.since_sync = 0;
        Ok(())
    }
}

/// Reads back the first and the last file written and compares them with the pattern.
pub fn check_files<D: Segments>(fs: &mut Fs<D>, pat: &Pattern, files: &[FileDone]) -> Result<()> {
    let (Some(first), Some(last)) = (files.first(), files.last()) else {
        return Ok(());
    };
    let mut buf = vec![0u8; CHUNK];
    for f in [first, last] {
        let attr = fs
            .lookup(ROOT_INO, &file_name(f.n))
            .context(|| format!("looking up file {} after the mount", f.n))?;
        let ino = attr.ino;
        if attr.inode.size != f.size {
            return Err(BenchError::Mismatch(format!(
                "file {} is {} bytes after the mount, {} were written",
                f.n, attr.inode.size, f.size
            )));
        }
        // Its first and its last chunk.
        for off in [0, f.size.saturating_sub(CHUNK as u64)] {
            let len = (f.size - off).min(CHUNK as u64) as usize;
            let got = fs
                .read(ino, off, &mut buf[..len])
                .context(|| format!("reading file {} after the mount", f.n))?;
            if got != len || buf[..len] != *pat.file(f.n, off, len) {
                return Err(BenchError::Mismatch(format!(
                    "file {} at {off} after the mount",
                    f.n
                )));
            }
        }
    }
    Ok(())
}

/// Sectors written in order on a block device, up to a number of sectors.
#[derive(Debug, Default)]
pub struct FtlFill {
    /// Sectors written (0 … `sectors` − 1).
    pub sectors: u64,
}

impl FtlFill {
    /// Writes sectors in order until `target` are written, and flushes; `progress` hears
    /// the bytes stored.
    pub fn to(
        &mut self,
        ftl: &mut Ftl<Dev>,
        pat: &Pattern,
        target: u64,
        progress: &mut dyn FnMut(u64),
    ) -> Result<()> {
        let ss = ftl.sector_size();
        let batch = (SECTOR_BATCH * ss).min(CHUNK.max(SECTOR_BATCH * 4096)) / ss;
        while self.sectors < target {
            let n = (target - self.sectors).min(batch as u64) as usize;
            ftl.write(self.sectors, pat.sectors(self.sectors, ss, n * ss))
                .context(|| format!("writing sector {}", self.sectors))?;
            self.sectors += n as u64;
            if self.sectors % (1 << 14) < n as u64 {
                progress(self.sectors * ss as u64);
            }
        }
        ftl.flush().context(|| "flush".into())?;
        progress(self.sectors * ss as u64);
        Ok(())
    }
}

/// Reads back sectors written in order and compares them with the pattern.
pub fn check_sectors(ftl: &mut Ftl<Dev>, pat: &Pattern, sectors: &[u64]) -> Result<()> {
    let ss = ftl.sector_size();
    let mut buf = vec![0u8; ss];
    for &s in sectors {
        ftl.read(s, &mut buf)
            .context(|| format!("reading sector {s} after the mount"))?;
        if buf != *pat.sectors(s, ss, ss) {
            return Err(BenchError::Mismatch(format!("sector {s} after the mount")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_reads_the_same_in_any_pieces() {
        // File 150's chunks straddle the pattern's end: read back at an offset other than
        // the one written, its bytes must still be the ones written.
        let pat = Pattern::new(2006);
        let (n, size) = (150u64, 2_170_110u64);
        let mut written = Vec::new();
        let mut off = 0;
        while off < size {
            let len = (size - off).min(CHUNK as u64) as usize;
            written.extend_from_slice(pat.file(n, off, len));
            off += len as u64;
        }
        for off in [0, 1, 2_104_574, size - 100, 1_000_003] {
            let len = (size - off).min(CHUNK as u64) as usize;
            assert_eq!(
                pat.file(n, off, len),
                &written[off as usize..off as usize + len],
                "at {off}"
            );
        }
    }
}
