//! The workloads of littlefs's benchmarks as concrete operations, the same for both
//! systems: sizes, the offsets of the random writes, and the bytes every write carries (so
//! that every read can be checked).

use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

/// Bytes per write and per read of the chunked workloads, as in littlefs's benchmarks.
pub const CHUNK: usize = 64;

/// One measured phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// 64-byte writes appending to one file.
    LinearWrite,
    /// 64-byte writes at random 64-byte-aligned offsets inside a file written beforehand.
    RandomWrite,
    /// Many small files, each created and written whole.
    SmallFiles,
    /// The linear file read back in 64-byte reads.
    LinearRead,
    /// 64-byte reads at the random writes' offsets.
    RandomRead,
    /// The small files read back.
    SmallRead,
    /// flashfs-hostile: the head of the linear file read back in 16-byte reads. A read of
    /// part of a block fetches the whole block and checks its checksum, where littlefs reads
    /// through a cache of a program page; flashfs keeps such blocks in its read cache
    /// (`FsConfig::read_cache_bytes`), so the block's next reads are from RAM.
    TinyRead,
    /// littlefs-hostile: 64-byte overwrites at the start of the linear file. littlefs keeps a
    /// file as an append-only list of blocks: a write anywhere rewrites the file from there
    /// to its end, a megabyte for each of these; flashfs rewrites the one block.
    HeadOverwrite,
    /// A mount of the volume the phases above left.
    Mount,
    /// A mount followed by one 64-byte write made durable.
    MountFirstWrite,
}

impl Workload {
    /// Every phase, in the order they run.
    pub const ALL: [Workload; 10] = [
        Workload::LinearWrite,
        Workload::RandomWrite,
        Workload::SmallFiles,
        Workload::LinearRead,
        Workload::RandomRead,
        Workload::SmallRead,
        Workload::TinyRead,
        Workload::HeadOverwrite,
        Workload::Mount,
        Workload::MountFirstWrite,
    ];

    /// The name in tables and JSON rows.
    pub fn name(self) -> &'static str {
        match self {
            Workload::LinearWrite => "linear-write",
            Workload::RandomWrite => "random-write",
            Workload::SmallFiles => "small-files",
            Workload::LinearRead => "linear-read",
            Workload::RandomRead => "random-read",
            Workload::SmallRead => "small-read",
            Workload::TinyRead => "tiny-read",
            Workload::HeadOverwrite => "head-overwrite",
            Workload::Mount => "mount",
            Workload::MountFirstWrite => "mount-first-write",
        }
    }

    /// Whether the phase writes (the sync setting applies to it).
    pub fn writes(self) -> bool {
        matches!(
            self,
            Workload::LinearWrite
                | Workload::RandomWrite
                | Workload::SmallFiles
                | Workload::HeadOverwrite
                | Workload::MountFirstWrite
        )
    }
}

/// What one run does on one device.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Size of the linear file.
    pub linear_bytes: u64,
    /// Size of the file the random writes land in.
    pub random_file: u64,
    /// Offset of each random write (multiples of [`CHUNK`]).
    pub random_offsets: Vec<u64>,
    /// Small files made.
    pub small_files: u32,
    /// Bytes per small file.
    pub small_bytes: usize,
    /// Bytes of the linear file's head read in [`TINY_READ`]-byte reads.
    pub tiny_read_bytes: u64,
    /// Overwrites of the linear file's first [`CHUNK`] bytes.
    pub head_overwrites: u64,
    /// A sync (fsync) after every write.
    pub sync: bool,
}

/// Bytes per read of the flashfs-hostile phase.
pub const TINY_READ: usize = 16;

impl Plan {
    /// The offsets of `writes` random writes in a file of `random_file` bytes, from `seed`.
    pub fn offsets(random_file: u64, writes: u64, seed: u64) -> Vec<u64> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let chunks = (random_file / CHUNK as u64).max(1);
        (0..writes)
            .map(|_| {
                ((u128::from(rng.next_u64()) * u128::from(chunks)) >> 64) as u64 * CHUNK as u64
            })
            .collect()
    }

    /// The bytes the `gen`-th write at `off` carries (`gen` 0: the file's first writing).
    pub fn chunk(off: u64, gen: u64) -> [u8; CHUNK] {
        let mut out = [0u8; CHUNK];
        for (i, b) in out.iter_mut().enumerate() {
            let x = (off + i as u64)
                .wrapping_mul(0x9E37_79B9)
                .wrapping_add(gen.wrapping_mul(0x85EB_CA6B));
            *b = (x >> 7) as u8;
        }
        out
    }

    /// The random file's content after the prefill and every random write.
    pub fn random_file_after(&self) -> Vec<u8> {
        let mut file = Vec::with_capacity(self.random_file as usize);
        for off in (0..self.random_file).step_by(CHUNK) {
            file.extend_from_slice(&Plan::chunk(off, 0));
        }
        for (i, &off) in self.random_offsets.iter().enumerate() {
            let at = off as usize;
            file[at..at + CHUNK].copy_from_slice(&Plan::chunk(off, i as u64 + 1));
        }
        file
    }

    /// The linear file's first [`CHUNK`] bytes after the `n`-th head overwrite (0: none).
    pub fn head_after(n: u64) -> [u8; CHUNK] {
        Plan::chunk(0, n)
    }

    /// The content of small file `i`.
    pub fn small_file(&self, i: u32) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.small_bytes);
        let mut off = u64::from(i) << 32;
        while out.len() < self.small_bytes {
            out.extend_from_slice(&Plan::chunk(off, 0));
            off += CHUNK as u64;
        }
        out.truncate(self.small_bytes);
        out
    }
}
