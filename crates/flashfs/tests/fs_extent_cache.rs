//! Reads find a file's sectors through its extent map kept in RAM: the map must follow every
//! change of the file (writes, truncation, `fallocate`, punched holes, unlink while open,
//! remounts). Random operations on a few files, every read compared with a model.

mod common;

use common::*;
use flashfs::fs::{Ino, SetAttr, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, ROOT_INO};
use flashfs::{Fs, Segments};

/// A small deterministic generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const FILES: usize = 3;
const MAX_SIZE: u64 = 12 * 1024;

fn name(i: usize) -> Vec<u8> {
    format!("f{i}").into_bytes()
}

/// Reads `[off, off + len)` of `ino` and compares it with the model.
fn check_read<D: Segments>(
    fs: &mut Fs<D>,
    ino: Ino,
    model: &[u8],
    off: u64,
    len: u64,
    step: usize,
) {
    let mut buf = vec![0xA5; len as usize];
    let n = fs.read(ino, off, &mut buf).unwrap();
    let from = (off as usize).min(model.len());
    let to = ((off + len) as usize).min(model.len());
    assert_eq!(n, to - from, "step {step}: read length at {off}+{len}");
    assert!(
        buf[..n] == model[from..to],
        "step {step}: content at {off}+{len} differs from the model"
    );
}

fn random_operations<D: Segments>(dev: D, seed: u64) {
    let mut fs = Fs::format(dev, fs_config()).unwrap();
    let mut rng = Rng(seed);
    let mut inos: Vec<Ino> = Vec::new();
    let mut model: Vec<Vec<u8>> = Vec::new();
    for i in 0..FILES {
        inos.push(fs.create(ROOT_INO, &name(i), 0o644, 0, 0).unwrap().ino);
        model.push(Vec::new());
    }
    let bs = u64::from(fs.block_size());
    for step in 0..3000 {
        let f = rng.below(FILES as u64) as usize;
        let ino = inos[f];
        let size = model[f].len() as u64;
        match rng.below(20) {
            // Reads, most often: unaligned, whole blocks, past the end.
            0..=7 => {
                let off = rng.below(size + bs);
                let len = 1 + rng.below(3 * bs);
                check_read(&mut fs, ino, &model[f], off, len, step);
            }
            8 => {
                let b = rng.below(size / bs + 1);
                check_read(&mut fs, ino, &model[f], b * bs, bs, step);
            }
            // Writes: unaligned or whole blocks, in place or growing the file.
            9..=12 => {
                let off = rng.below(MAX_SIZE - 1);
                let off = if rng.below(2) == 0 {
                    off / bs * bs
                } else {
                    off
                };
                let len = (1 + rng.below(3 * bs)).min(MAX_SIZE - off);
                let data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                assert_eq!(fs.write(ino, off, &data).unwrap(), data.len());
                let m = &mut model[f];
                if m.len() < (off + len) as usize {
                    m.resize((off + len) as usize, 0);
                }
                m[off as usize..(off + len) as usize].copy_from_slice(&data);
            }
            // Truncation, down or up.
            13 => {
                let to = rng.below(MAX_SIZE);
                let set = SetAttr {
                    size: Some(to),
                    ..Default::default()
                };
                fs.setattr(ino, set).unwrap();
                model[f].resize(to as usize, 0);
            }
            // A punched hole.
            14 => {
                let off = rng.below(size + 1);
                let len = 1 + rng.below(4 * bs);
                let mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
                fs.fallocate(ino, mode, off, len).unwrap();
                let end = (off + len).min(size);
                if off < end {
                    model[f][off as usize..end as usize].fill(0);
                }
            }
            // Preallocation, with or without a new size.
            15 => {
                let off = rng.below(MAX_SIZE - 1);
                let len = (1 + rng.below(3 * bs)).min(MAX_SIZE - off);
                let keep = rng.below(2) == 0;
                let mode = if keep { FALLOC_FL_KEEP_SIZE } else { 0 };
                fs.fallocate(ino, mode, off, len).unwrap();
                if !keep && off + len > size {
                    model[f].resize((off + len) as usize, 0);
                }
            }
            // Unlinked while open: still readable and writable until the last close; then
            // a new file takes the name.
            16 => {
                fs.open(ino).unwrap();
                fs.unlink(ROOT_INO, &name(f)).unwrap();
                check_read(&mut fs, ino, &model[f], 0, size + bs, step);
                let data = vec![step as u8; bs as usize];
                fs.write(ino, 0, &data).unwrap();
                let mut m = model[f].clone();
                if m.len() < data.len() {
                    m.resize(data.len(), 0);
                }
                m[..data.len()].copy_from_slice(&data);
                check_read(&mut fs, ino, &m, 0, m.len() as u64 + bs, step);
                fs.release(ino).unwrap();
                inos[f] = fs.create(ROOT_INO, &name(f), 0o644, 0, 0).unwrap().ino;
                model[f].clear();
                check_read(&mut fs, inos[f], &model[f], 0, bs, step);
            }
            17 => fs.sync().unwrap(),
            // A remount: the maps start empty.
            18 => {
                let dev = fs.unmount().unwrap();
                fs = Fs::mount(dev, fs_config()).unwrap();
            }
            // The whole file.
            _ => check_read(&mut fs, ino, &model[f], 0, size, step),
        }
    }
    for f in 0..FILES {
        let size = model[f].len() as u64;
        check_read(&mut fs, inos[f], &model[f], 0, size + 1, usize::MAX);
    }
    let report = fs.check(false).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
}

#[test]
fn reads_follow_every_change_on_nand() {
    for seed in 1..=4u64 {
        random_operations(nand(), seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    }
}

#[test]
fn reads_follow_every_change_on_nor() {
    for seed in 1..=2u64 {
        random_operations(nor(false), seed.wrapping_mul(0x2545_f491_4f6c_dd1d));
    }
}
