//! The read cache of data blocks (`FsConfig::read_cache_bytes`): small reads fetch each
//! block once, and whatever changes a file's blocks — writes of every size, truncation, a
//! hole punched, removal and a new file on the freed blocks, a rename over a file, a
//! transaction's abort, a power cut — is seen by the next small read, never what the cache
//! held before. Each test reads in small pieces (every block through the cache) and
//! compares with what the file must hold.

mod common;

use common::*;
use flashfs::fs::{Ino, RenameFlags, SetAttr, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, ROOT_INO};
use flashfs::{Fs, FsConfig, Segments};

/// The tests' settings with a read cache of `bytes`.
fn config(bytes: usize) -> FsConfig {
    FsConfig {
        read_cache_bytes: bytes,
        ..fs_config()
    }
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 8) as u8)
        .collect()
}

/// The whole file, read in `piece`-byte reads.
fn read_in_pieces<D: Segments>(fs: &mut Fs<D>, ino: Ino, piece: usize) -> Vec<u8> {
    let size = fs.getattr(ino).unwrap().inode.size as usize;
    let mut out = vec![0u8; size];
    for (i, chunk) in out.chunks_mut(piece).enumerate() {
        let n = fs.read(ino, (i * piece) as u64, chunk).unwrap();
        assert_eq!(n, chunk.len());
    }
    out
}

/// Every part a test runs on: reprogrammable NOR (journal entries in place), NOR that is
/// not, and NAND.
fn on_every_part(test: impl Fn(&mut dyn FnMut() -> Box<dyn Run>)) {
    test(&mut || Box::new(Part(Some(nor(true)))));
    test(&mut || Box::new(Part(Some(nor(false)))));
    test(&mut || Box::new(Part(Some(nand()))));
}

/// A part, whatever its type, that a test body runs on.
trait Run {
    fn run(&mut self, config: FsConfig, body: &mut dyn FnMut(&mut dyn Body));
}

struct Part<D>(Option<D>);

impl<D: Segments> Run for Part<D> {
    fn run(&mut self, config: FsConfig, body: &mut dyn FnMut(&mut dyn Body)) {
        let fs = Fs::format(self.0.take().unwrap(), config).unwrap();
        let mut on = On {
            fs: Some(fs),
            config,
        };
        body(&mut on);
        let mut fs = on.fs.take().unwrap();
        let report = fs.check(false).unwrap();
        assert!(report.is_clean(), "{:?}", report.problems);
    }
}

/// What a test body does with the mounted file system, whatever the part.
trait Body {
    fn fs(&mut self) -> &mut dyn Ops;
    /// Cuts the power after a sync of nothing (what was not synced is lost) and mounts.
    fn cut_and_mount(&mut self);
}

struct On<D: Segments> {
    fs: Option<Fs<D>>,
    config: FsConfig,
}

impl<D: Segments> Body for On<D> {
    fn fs(&mut self) -> &mut dyn Ops {
        self.fs.as_mut().unwrap()
    }
    fn cut_and_mount(&mut self) {
        let dev = self.fs.take().unwrap().into_device();
        self.fs = Some(Fs::mount(dev, self.config).unwrap());
    }
}

/// The operations the tests use, object-safe.
trait Ops {
    fn bs(&self) -> usize;
    fn create(&mut self, name: &[u8]) -> Ino;
    fn write(&mut self, ino: Ino, off: u64, data: &[u8]);
    fn pieces(&mut self, ino: Ino, piece: usize) -> Vec<u8>;
    fn read_at(&mut self, ino: Ino, off: u64, buf: &mut [u8]) -> usize;
    fn truncate(&mut self, ino: Ino, size: u64);
    fn punch(&mut self, ino: Ino, off: u64, len: u64);
    fn unlink(&mut self, name: &[u8]);
    fn rename(&mut self, from: &[u8], to: &[u8]);
    fn lookup(&mut self, name: &[u8]) -> Ino;
    fn sync(&mut self);
    fn sectors(&mut self, ino: Ino) -> Vec<u64>;
    /// Writes in a transaction, reads there in small pieces, and aborts or commits it;
    /// returns what the read in the transaction saw.
    fn write_in_tx(&mut self, ino: Ino, off: u64, data: &[u8], commit: bool) -> Vec<u8>;
    fn cache(&self) -> flashfs::fs::ReadCacheStats;
    fn stats(&self) -> flashfs::fs::FsStats;
}

impl<D: Segments> Ops for Fs<D> {
    fn bs(&self) -> usize {
        self.block_size() as usize
    }
    fn create(&mut self, name: &[u8]) -> Ino {
        Fs::create(self, ROOT_INO, name, 0o644, 0, 0).unwrap().ino
    }
    fn write(&mut self, ino: Ino, off: u64, data: &[u8]) {
        assert_eq!(Fs::write(self, ino, off, data).unwrap(), data.len());
    }
    fn pieces(&mut self, ino: Ino, piece: usize) -> Vec<u8> {
        read_in_pieces(self, ino, piece)
    }
    fn read_at(&mut self, ino: Ino, off: u64, buf: &mut [u8]) -> usize {
        self.read(ino, off, buf).unwrap()
    }
    fn truncate(&mut self, ino: Ino, size: u64) {
        let set = SetAttr {
            size: Some(size),
            ..Default::default()
        };
        self.setattr(ino, set).unwrap();
    }
    fn punch(&mut self, ino: Ino, off: u64, len: u64) {
        let mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
        self.fallocate(ino, mode, off, len).unwrap();
    }
    fn unlink(&mut self, name: &[u8]) {
        Fs::unlink(self, ROOT_INO, name).unwrap();
    }
    fn rename(&mut self, from: &[u8], to: &[u8]) {
        Fs::rename(self, ROOT_INO, from, ROOT_INO, to, RenameFlags::default()).unwrap();
    }
    fn lookup(&mut self, name: &[u8]) -> Ino {
        Fs::lookup(self, ROOT_INO, name).unwrap().ino
    }
    fn sync(&mut self) {
        Fs::sync(self).unwrap();
    }
    fn sectors(&mut self, ino: Ino) -> Vec<u64> {
        self.extents(ino)
            .unwrap()
            .into_iter()
            .filter(|(_, e)| !e.unwritten)
            .flat_map(|(_, e)| e.start..e.start + e.len)
            .collect()
    }
    fn write_in_tx(&mut self, ino: Ino, off: u64, data: &[u8], commit: bool) -> Vec<u8> {
        let tid = self.begin().unwrap();
        let seen = self
            .in_tx(tid, |fs| {
                Fs::write(fs, ino, off, data)?;
                Ok(read_in_pieces(fs, ino, 48))
            })
            .unwrap();
        if commit {
            self.commit_tx(tid).unwrap();
        } else {
            self.abort(tid).unwrap();
        }
        seen
    }
    fn cache(&self) -> flashfs::fs::ReadCacheStats {
        self.read_cache_stats()
    }
    fn stats(&self) -> flashfs::fs::FsStats {
        Fs::stats(self)
    }
}

/// Small reads of a file fetch each of its blocks once; the rest come from RAM. Without
/// the cache none does.
#[test]
fn small_reads_fetch_each_block_once() {
    on_every_part(|part| {
        part().run(config(8 << 10), &mut |on| {
            let fs = on.fs();
            let bs = fs.bs();
            let data = pattern(1, 8 * bs);
            let f = fs.create(b"f");
            fs.write(f, 0, &data);
            fs.sync();
            assert_eq!(fs.pieces(f, 64), data);
            let st = fs.cache();
            assert_eq!(st.fills, 8, "{st:?}");
            assert_eq!(st.hits, (8 * bs / 64 - 8) as u64, "{st:?}");
            assert_eq!(st.bytes, 8 * bs, "{st:?}");
            assert_eq!(fs.stats().read_cache_bytes, 8 * bs as u64);
            assert_eq!(fs.stats().read_cache_hits, st.hits);
            // Read again: all from RAM.
            assert_eq!(fs.pieces(f, 64), data);
            assert_eq!(fs.cache().fills, 8);
        });
        part().run(config(0), &mut |on| {
            let fs = on.fs();
            let data = pattern(2, 4 * fs.bs());
            let f = fs.create(b"f");
            fs.write(f, 0, &data);
            assert_eq!(fs.pieces(f, 64), data);
            assert_eq!(fs.cache(), flashfs::fs::ReadCacheStats::default());
        });
    });
}

/// A cache of one block holds one block: every other block read evicts it.
#[test]
fn a_cache_of_one_block_evicts_as_it_goes() {
    on_every_part(|part| {
        part().run(config(512), &mut |on| {
            let fs = on.fs();
            let bs = fs.bs();
            assert_eq!(bs, 512, "the test parts' blocks");
            let a = fs.create(b"a");
            let b = fs.create(b"b");
            fs.write(a, 0, &pattern(3, 3 * bs));
            fs.write(b, 0, &pattern(4, 3 * bs));
            // Interleaved: each read of one file evicts the other's block.
            for off in (0..3 * bs).step_by(100) {
                for (ino, seed) in [(a, 3), (b, 4)] {
                    let mut x = [0u8; 10];
                    let n = fs.read_at(ino, off as u64, &mut x);
                    assert_eq!(x[..n], pattern(seed, 3 * bs)[off..off + n]);
                }
            }
            let st = fs.cache();
            assert_eq!((st.blocks, st.high_water), (1, 512), "{st:?}");
            assert_eq!(st.hits, 0, "{st:?}");
        });
    });
}

/// Writes of every kind over blocks the cache holds are read back: journaled small writes,
/// writes that leave their block waiting in RAM, whole blocks, writes across blocks, and
/// the same once the waiting blocks are programmed.
#[test]
fn writes_over_cached_blocks_are_read_back() {
    for buffers in [FsConfig::default().write_buffer_bytes, 0] {
        on_every_part(|part| {
            let c = FsConfig {
                write_buffer_bytes: buffers,
                ..config(8 << 10)
            };
            part().run(c, &mut |on| {
                let fs = on.fs();
                let bs = fs.bs();
                let f = fs.create(b"f");
                let mut want = pattern(5, 6 * bs);
                fs.write(f, 0, &want);
                fs.sync();
                let writes: [(usize, usize); 7] = [
                    (bs + 10, 16),          // journaled small write
                    (2 * bs + 100, bs / 2), // ends inside its block: waits in RAM
                    (3 * bs, bs),           // a whole block
                    (bs - 7, 2 * bs),       // across blocks
                    (5 * bs + 3, 5),        // small, at the end
                    (2 * bs + 200, 8),      // into the block waiting in RAM
                    (6 * bs - 1, bs + 1),   // grows the file
                ];
                for (i, &(off, len)) in writes.iter().enumerate() {
                    assert_eq!(fs.pieces(f, 64), want, "before write {i}");
                    let data = pattern(100 + i as u8, len);
                    fs.write(f, off as u64, &data);
                    if want.len() < off + len {
                        want.resize(off + len, 0);
                    }
                    want[off..off + len].copy_from_slice(&data);
                    assert_eq!(fs.pieces(f, 64), want, "after write {i}");
                    assert_eq!(fs.pieces(f, 7), want, "after write {i}, 7-byte reads");
                }
                fs.sync();
                assert_eq!(fs.pieces(f, 64), want, "after the sync");
                on.cut_and_mount();
                assert_eq!(on.fs().pieces(f, 64), want, "after a remount");
            });
        });
    }
}

/// Truncating cached blocks away and growing the file again reads zeros past the cut.
#[test]
fn truncation_of_cached_blocks_reads_zeros_past_the_cut() {
    on_every_part(|part| {
        part().run(config(8 << 10), &mut |on| {
            let fs = on.fs();
            let bs = fs.bs();
            let f = fs.create(b"f");
            let mut want = pattern(6, 5 * bs);
            fs.write(f, 0, &want);
            assert_eq!(fs.pieces(f, 64), want);
            let cut = bs + bs / 2;
            fs.truncate(f, cut as u64);
            want.truncate(cut);
            assert_eq!(fs.pieces(f, 64), want);
            fs.truncate(f, 5 * bs as u64);
            want.resize(5 * bs, 0);
            assert_eq!(fs.pieces(f, 64), want);
            fs.truncate(f, 0);
            fs.write(f, 0, b"again");
            assert_eq!(fs.pieces(f, 2), b"again");
        });
    });
}

/// A hole punched through cached blocks reads as zeros.
#[test]
fn a_hole_punched_in_cached_blocks_reads_zeros() {
    on_every_part(|part| {
        part().run(config(8 << 10), &mut |on| {
            let fs = on.fs();
            let bs = fs.bs();
            let f = fs.create(b"f");
            let mut want = pattern(7, 6 * bs);
            fs.write(f, 0, &want);
            fs.sync();
            assert_eq!(fs.pieces(f, 64), want);
            let (off, len) = (bs / 2, 3 * bs);
            fs.punch(f, off as u64, len as u64);
            want[off..off + len].fill(0);
            assert_eq!(fs.pieces(f, 64), want);
        });
    });
}

/// A file removed after its blocks were cached, and new files written on the blocks it
/// freed: they read as what they were written with. The cache holds every block read (the
/// test parts are small), and the rounds go on until a new file has taken a sector whose
/// old content the cache holds.
#[test]
fn new_files_on_the_blocks_of_a_removed_one_read_their_own_data() {
    on_every_part(|part| {
        part().run(config(1 << 20), &mut |on| {
            let fs = on.fs();
            let bs = fs.bs();
            let mut cached = std::collections::BTreeSet::new();
            let mut reused = 0;
            for round in 0..200u32 {
                let seed = (round % 256) as u8;
                let old = fs.create(b"old");
                let old_data = pattern(seed, 16 * bs);
                fs.write(old, 0, &old_data);
                fs.sync();
                assert_eq!(fs.pieces(old, 64), old_data);
                cached.extend(fs.sectors(old));
                fs.unlink(b"old");
                fs.sync();
                let new = fs.create(b"new");
                let new_data = pattern(seed.wrapping_add(128), 16 * bs);
                fs.write(new, 0, &new_data);
                let sectors = fs.sectors(new);
                reused += sectors.iter().filter(|k| cached.contains(k)).count();
                let seen = fs.pieces(new, 64);
                assert_eq!(seen, new_data, "round {round} (inodes {old} then {new})");
                cached.extend(sectors);
                fs.unlink(b"new");
                fs.sync();
                if reused >= 64 {
                    break;
                }
            }
            assert!(
                reused >= 64,
                "new blocks took {reused} freed cached sectors"
            );
        });
    });
}

/// A file renamed over a cached one: its name reads the new file's data.
#[test]
fn a_rename_over_a_cached_file_reads_the_new_one() {
    on_every_part(|part| {
        part().run(config(8 << 10), &mut |on| {
            let fs = on.fs();
            let bs = fs.bs();
            let a = fs.create(b"a");
            fs.write(a, 0, &pattern(8, 3 * bs));
            let b = fs.create(b"b");
            fs.write(b, 0, &pattern(9, 2 * bs + 5));
            assert_eq!(fs.pieces(a, 64), pattern(8, 3 * bs));
            fs.rename(b"b", b"a");
            let now = fs.lookup(b"a");
            assert_eq!(fs.pieces(now, 64), pattern(9, 2 * bs + 5));
        });
    });
}

/// Blocks read inside a transaction that wrote them are not what the file holds after the
/// transaction aborts; after a commit they are.
#[test]
fn an_aborted_transaction_s_blocks_are_not_read_after_it() {
    on_every_part(|part| {
        part().run(config(8 << 10), &mut |on| {
            let fs = on.fs();
            let bs = fs.bs();
            let f = fs.create(b"f");
            let mut want = pattern(10, 4 * bs);
            fs.write(f, 0, &want);
            fs.sync();
            assert_eq!(fs.pieces(f, 64), want);
            let data = pattern(11, 2 * bs);
            let mut changed = want.clone();
            changed[bs / 2..bs / 2 + data.len()].copy_from_slice(&data);
            let seen = fs.write_in_tx(f, bs as u64 / 2, &data, false);
            assert_eq!(seen, changed, "inside the transaction");
            assert_eq!(fs.pieces(f, 64), want, "after its abort");
            let small = pattern(12, 8);
            let seen = fs.write_in_tx(f, 3, &small, true);
            want[3..11].copy_from_slice(&small);
            assert_eq!(seen, want, "inside the transaction");
            assert_eq!(fs.pieces(f, 64), want, "after its commit");
        });
    });
}

/// What was cached after the last sync is gone after a power cut: the mount reads what
/// the volume holds.
#[test]
fn a_power_cut_forgets_what_the_cache_held() {
    on_every_part(|part| {
        part().run(config(8 << 10), &mut |on| {
            let fs = on.fs();
            let bs = fs.bs();
            let f = fs.create(b"f");
            let synced = pattern(13, 4 * bs);
            fs.write(f, 0, &synced);
            fs.sync();
            assert_eq!(fs.pieces(f, 64), synced);
            fs.write(f, 0, &pattern(14, 4 * bs));
            assert_eq!(fs.pieces(f, 64), pattern(14, 4 * bs));
            on.cut_and_mount();
            assert_eq!(on.fs().cache(), flashfs::fs::ReadCacheStats::default());
            assert_eq!(on.fs().pieces(f, 64), synced);
        });
    });
}
