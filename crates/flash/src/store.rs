//! Where a simulated device keeps its bytes: RAM or a sparse file.
//!
//! A fresh store reads as zeros. Simulators keep flash data inverted, so erased flash (all
//! ones) is a hole that costs nothing: a 16 GiB NAND image only takes what was written.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;

use crate::error::{FlashError, Result};

/// A fixed-size byte array that outlives the simulator using it.
pub trait Store {
    /// Size in bytes.
    fn len(&self) -> u64;

    /// Whether the store is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reads `buf.len()` bytes at `off`.
    fn read(&self, off: u64, buf: &mut [u8]) -> Result<()>;

    /// Writes `data` at `off`.
    fn write(&mut self, off: u64, data: &[u8]) -> Result<()>;

    /// Sets `len` bytes at `off` to zero (a hole where the store supports them).
    fn zero(&mut self, off: u64, len: u64) -> Result<()>;

    /// Makes what was written durable on the host.
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
}

fn check(len: u64, off: u64, n: usize) -> Result<()> {
    match off.checked_add(n as u64) {
        Some(end) if end <= len => Ok(()),
        _ => Err(FlashError::OutOfRange {
            addr: off,
            len: n as u64,
        }),
    }
}

const CHUNK: u64 = 16 * 1024;

/// A sparse store in RAM: only chunks holding a non-zero byte take memory.
#[derive(Debug, Clone, Default)]
pub struct RamStore {
    len: u64,
    chunks: BTreeMap<u64, Box<[u8]>>,
}

impl RamStore {
    /// A zeroed store of `len` bytes.
    pub fn new(len: u64) -> Self {
        RamStore {
            len,
            chunks: BTreeMap::new(),
        }
    }

    /// Bytes of RAM the chunks take.
    pub fn resident_bytes(&self) -> u64 {
        self.chunks.len() as u64 * CHUNK
    }

    /// Splits `[off, off + n)` into (chunk index, offset in chunk, length) runs.
    fn runs(off: u64, n: usize) -> impl Iterator<Item = (u64, usize, usize)> {
        let end = off + n as u64;
        let mut at = off;
        core::iter::from_fn(move || {
            if at >= end {
                return None;
            }
            let idx = at / CHUNK;
            let inner = (at % CHUNK) as usize;
            let take = ((CHUNK - at % CHUNK).min(end - at)) as usize;
            at += take as u64;
            Some((idx, inner, take))
        })
    }
}

impl Store for RamStore {
    fn len(&self) -> u64 {
        self.len
    }

    fn read(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        check(self.len, off, buf.len())?;
        let mut done = 0;
        for (idx, inner, take) in Self::runs(off, buf.len()) {
            let out = &mut buf[done..done + take];
            match self.chunks.get(&idx) {
                Some(c) => out.copy_from_slice(&c[inner..inner + take]),
                None => out.fill(0),
            }
            done += take;
        }
        Ok(())
    }

    fn write(&mut self, off: u64, data: &[u8]) -> Result<()> {
        check(self.len, off, data.len())?;
        let mut done = 0;
        for (idx, inner, take) in Self::runs(off, data.len()) {
            let src = &data[done..done + take];
            done += take;
            if src.iter().all(|&b| b == 0) && !self.chunks.contains_key(&idx) {
                continue;
            }
            let c = self
                .chunks
                .entry(idx)
                .or_insert_with(|| alloc::vec![0u8; CHUNK as usize].into_boxed_slice());
            c[inner..inner + take].copy_from_slice(src);
        }
        Ok(())
    }

    fn zero(&mut self, off: u64, len: u64) -> Result<()> {
        check(self.len, off, len as usize)?;
        if off == 0 && len == self.len {
            self.chunks.clear();
            return Ok(());
        }
        for (idx, inner, take) in Self::runs(off, len as usize) {
            if take as u64 == CHUNK {
                self.chunks.remove(&idx);
            } else if let Some(c) = self.chunks.get_mut(&idx) {
                c[inner..inner + take].fill(0);
            }
        }
        Ok(())
    }
}

#[cfg(feature = "std")]
pub use file::FileStore;

#[cfg(feature = "std")]
mod file {
    use super::*;
    use std::fs::{File, OpenOptions};
    use std::os::unix::fs::FileExt;
    use std::path::Path;

    /// A store in a sparse host file.
    #[derive(Debug)]
    pub struct FileStore {
        file: File,
        len: u64,
    }

    impl FileStore {
        /// Creates a new file of `len` bytes; fails if it exists.
        pub fn create(path: &Path, len: u64) -> Result<Self> {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(path)?;
            file.set_len(len)?;
            Ok(FileStore { file, len })
        }

        /// Opens an existing file for reading and writing.
        pub fn open(path: &Path) -> Result<Self> {
            let file = OpenOptions::new().read(true).write(true).open(path)?;
            let len = file.metadata()?.len();
            Ok(FileStore { file, len })
        }

        /// Bytes the file takes on the host disk.
        pub fn allocated_bytes(&self) -> Result<u64> {
            use std::os::unix::fs::MetadataExt;
            Ok(self.file.metadata()?.blocks() * 512)
        }
    }

    impl Store for FileStore {
        fn len(&self) -> u64 {
            self.len
        }

        fn read(&self, off: u64, buf: &mut [u8]) -> Result<()> {
            check(self.len, off, buf.len())?;
            Ok(self.file.read_exact_at(buf, off)?)
        }

        fn write(&mut self, off: u64, data: &[u8]) -> Result<()> {
            check(self.len, off, data.len())?;
            Ok(self.file.write_all_at(data, off)?)
        }

        fn zero(&mut self, off: u64, len: u64) -> Result<()> {
            check(self.len, off, len as usize)?;
            if off == 0 && len == self.len {
                // Truncating frees everything, on any host file system.
                self.file.set_len(0)?;
                self.file.set_len(len)?;
                return Ok(());
            }
            // Whole host blocks become holes; the ragged ends are written as zeros.
            const HOST: u64 = 4096;
            let start = off.div_ceil(HOST) * HOST;
            let end = (off + len) / HOST * HOST;
            if end > start && punch_hole(&self.file, start, end - start) {
                write_zeros(&self.file, off, start - off)?;
                write_zeros(&self.file, end, off + len - end)?;
                Ok(())
            } else {
                write_zeros(&self.file, off, len)
            }
        }

        fn flush(&mut self) -> Result<()> {
            Ok(self.file.sync_data()?)
        }
    }

    fn write_zeros(file: &File, mut off: u64, mut len: u64) -> Result<()> {
        let zeros = [0u8; 4096];
        while len > 0 {
            let n = len.min(zeros.len() as u64);
            file.write_all_at(&zeros[..n as usize], off)?;
            off += n;
            len -= n;
        }
        Ok(())
    }

    #[cfg(target_os = "linux")]
    fn punch_hole(file: &File, off: u64, len: u64) -> bool {
        use std::os::fd::AsRawFd;
        // SAFETY: fallocate only reads its integer arguments; the descriptor is open.
        let rc = unsafe {
            libc::fallocate(
                file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                off as libc::off_t,
                len as libc::off_t,
            )
        };
        rc == 0
    }

    #[cfg(not(target_os = "linux"))]
    fn punch_hole(_: &File, _: u64, _: u64) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ram_store_is_sparse_and_exact() {
        let mut s = RamStore::new(1 << 40);
        let mut buf = [9u8; 100];
        s.read(12345, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 0));
        let data: alloc::vec::Vec<u8> = (0..40000u32).map(|i| (i % 251) as u8 + 1).collect();
        s.write(CHUNK - 7, &data).unwrap();
        let mut back = alloc::vec![0u8; data.len()];
        s.read(CHUNK - 7, &mut back).unwrap();
        assert_eq!(back, data);
        assert!(s.resident_bytes() <= 4 * CHUNK);
        s.zero(0, 8 * CHUNK).unwrap();
        assert_eq!(s.resident_bytes(), 0);
        assert!(s.write((1 << 40) - 1, &[1, 2]).is_err());
        assert!(s.read(u64::MAX, &mut [0]).is_err());
    }
}
