//! Micro-benchmark of the read path: random 4 KiB reads of a 64 MiB file on the simulated
//! `nand-1g` part, in memory, without FUSE.
//!
//! `cargo run --release -p flashfs --example read_path [ops]`

use std::time::Instant;

use flash::preset::lookup;
use flash::DeviceSpec;
use flash::{ImageMeta, NandSim};
use flashfs::fs::ROOT_INO;
use flashfs::{Fs, FsConfig, NandSegments};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ops: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000);
    let DeviceSpec::Nand(spec) = lookup("nand-1g")?.spec else {
        return Err("nand-1g is not NAND".into());
    };
    let sim = NandSim::new(spec, ImageMeta::new("nand-1g", 1))?;
    let mut config = FsConfig::default();
    if let Some(kib) = std::env::args()
        .nth(2)
        .and_then(|s| s.parse::<usize>().ok())
    {
        config.tree.cache_bytes = kib << 10;
    }
    let mut fs = Fs::format(NandSegments::new(sim)?, config)?;
    let f = fs.create(ROOT_INO, b"seq.bin", 0o644, 0, 0)?;
    let mut buf = vec![0u8; 1 << 20];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for b in buf.iter_mut() {
        *b = next() as u8;
    }
    for i in 0..64u64 {
        fs.write(f.ino, i << 20, &buf)?;
    }
    let blocks = 64 * 256;
    for _ in 0..8192 {
        fs.write(f.ino, next() % blocks * 4096, &buf[..4096])?;
    }
    fs.fsync(f.ino, false)?;
    let mut b = vec![0u8; 4096];
    let t = Instant::now();
    for _ in 0..ops {
        fs.read(f.ino, next() % blocks * 4096, &mut b)?;
    }
    let d = t.elapsed();
    println!("{:?}", fs.index_stats());
    println!(
        "{ops} random 4 KiB reads: {:.2} us each, {:.0} ops/s",
        d.as_secs_f64() * 1e6 / ops as f64,
        ops as f64 / d.as_secs_f64()
    );
    Ok(())
}
