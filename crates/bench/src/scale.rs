//! Scale: how lookups and random reads cost as a directory and a file grow, on the
//! native file system. The index is a B+tree, so both should grow with the logarithm of
//! the entries (the tree's height), not with their number.
//!
//! Three experiments, on one preset (the 1 GiB NAND by default):
//!
//! - **directory**: files created in one directory, up to 100,000; at each checkpoint,
//!   lookups of random names with the node cache emptied before each, so every index level
//!   is read from flash.
//! - **big file**: one file written sequentially in 1 MiB writes to the volume's capacity
//!   (and then extended to 1 GiB with a hole if the flash holds less); at each checkpoint,
//!   random 4 KiB reads with the cache emptied before each.
//! - **fragmented file**: a file overwritten by random 4 KiB writes, so its extent map
//!   grows to tens of thousands of extents; random 4 KiB reads as above.
//!
//! Every figure is measured in device time and device page reads on the simulated part.

use flash::{DeviceSpec, ImageMeta, NandSim, Simulated};
use flashfs::fs::{Atime, Ino, SetAttr, ROOT_INO};
use flashfs::{Fs, FsConfig, NandSegments, Segments};
use serde::Serialize;

use crate::error::{BenchError, Context, Result};

/// What to run.
#[derive(Debug, Clone)]
pub struct ScaleOptions {
    /// Device preset (NAND).
    pub preset: String,
    /// Directory sizes to measure at, increasing.
    pub dir_checkpoints: Vec<u64>,
    /// File sizes (MiB) to measure the sequential file at, increasing; the last is the
    /// target size.
    pub file_checkpoints_mib: Vec<u64>,
    /// Size of the fragmented file, MiB.
    pub frag_file_mib: u64,
    /// Random overwrite counts to measure the fragmented file at, increasing.
    pub frag_checkpoints: Vec<u64>,
    /// Lookups or reads per measurement.
    pub samples: u64,
    /// Bytes of the block device's map pages kept in RAM ([`flashfs::FtlConfig::map_cache`]);
    /// `None`: the default. A read of a block whose map page is not cached reads the page.
    pub map_cache: Option<usize>,
    /// Seed of the random choices.
    pub seed: u64,
}

impl Default for ScaleOptions {
    fn default() -> Self {
        ScaleOptions {
            preset: "nand-1g".into(),
            dir_checkpoints: vec![1_000, 10_000, 100_000],
            file_checkpoints_mib: vec![16, 128, 1024],
            frag_file_mib: 64,
            frag_checkpoints: vec![1_000, 10_000, 50_000],
            samples: 500,
            map_cache: None,
            seed: 7,
        }
    }
}

impl ScaleOptions {
    /// A run of a few seconds on the 128 MiB NAND.
    pub fn quick() -> Self {
        ScaleOptions {
            preset: "nand-128m".into(),
            dir_checkpoints: vec![100, 1_000, 10_000],
            file_checkpoints_mib: vec![4, 16, 64],
            frag_file_mib: 8,
            frag_checkpoints: vec![100, 1_000, 5_000],
            samples: 200,
            ..ScaleOptions::default()
        }
    }
}

/// One measurement.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScaleRow {
    /// `directory`, `big-file` or `fragmented-file`.
    pub experiment: &'static str,
    /// Device preset.
    pub preset: String,
    /// Files in the directory, MiB of the file, or random overwrites done.
    pub n: u64,
    /// What `n` counts.
    pub unit: &'static str,
    /// MiB of file data written (file experiments; the rest of the size is a hole).
    pub data_mib: u64,
    /// The file's extents (file experiments).
    pub extents: u64,
    /// Levels of the index.
    pub index_height: usize,
    /// Device page reads per cold lookup or read.
    pub page_reads_per_op: f64,
    /// Of which index nodes (the rest is file data).
    pub node_reads_per_op: f64,
    /// Device time per cold lookup or read, microseconds.
    pub device_us_per_op: f64,
    /// Device time per file created or MiB written in the phase before, microseconds.
    pub device_us_per_build_op: f64,
}

type Dev = NandSegments<NandSim>;

fn device(preset: &str, seed: u64) -> Result<Dev> {
    let p = flash::preset::lookup(preset).context(|| format!("preset {preset:?}"))?;
    let DeviceSpec::Nand(spec) = p.spec else {
        return Err(BenchError::InvalidOptions(format!(
            "preset {preset:?} is not NAND flash"
        )));
    };
    let sim = NandSim::new(spec, ImageMeta::new(preset, seed)).context(|| "simulating".into())?;
    NandSegments::new(sim).context(|| "segmenting".into())
}

/// xorshift64*, for reproducible choices.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1)
    }
}

/// Device time now.
fn now(fs: &Fs<Dev>) -> std::time::Duration {
    fs.ftl().log().device().now()
}

/// Device microseconds per operation since `t0`, over `n` operations.
fn us_per(fs: &Fs<Dev>, t0: std::time::Duration, n: u64) -> f64 {
    (now(fs) - t0).as_secs_f64() * 1e6 / n.max(1) as f64
}

/// Cost of `ops` operations each run with a cold cache: page reads and device time per op.
fn cold<F>(fs: &mut Fs<Dev>, ops: u64, mut op: F) -> Result<(f64, f64)>
where
    F: FnMut(&mut Fs<Dev>, u64) -> flashfs::Result<()>,
{
    let reads0 = fs.ftl().log().device().flash().stats().reads;
    let t0 = now(fs);
    for i in 0..ops {
        fs.drop_caches();
        op(fs, i).context(|| "measured operation".into())?;
    }
    let reads = fs.ftl().log().device().flash().stats().reads - reads0;
    Ok((reads as f64 / ops as f64, us_per(fs, t0, ops)))
}

fn name(i: u64) -> Vec<u8> {
    format!("file-{i:08}").into_bytes()
}

/// Runs the three experiments; `progress` hears (experiment, done, total).
pub fn run_scale(
    opts: &ScaleOptions,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<Vec<ScaleRow>> {
    let mut rows = Vec::new();
    rows.extend(directory(opts, progress)?);
    rows.extend(big_file(opts, progress)?);
    rows.extend(fragmented(opts, progress)?);
    Ok(rows)
}

/// The default configuration but for access times: a read that updates one dirties the
/// index path to the inode, which then stays in RAM until the next commit and would hide
/// the cold reads measured here.
fn fs_on(opts: &ScaleOptions) -> Result<Fs<Dev>> {
    let mut config = FsConfig {
        atime: Atime::Never,
        ..FsConfig::default()
    };
    if let Some(bytes) = opts.map_cache {
        config.ftl.map_cache = bytes;
    }
    Fs::format(device(&opts.preset, opts.seed)?, config).context(|| "mkfs".into())
}

fn directory(
    opts: &ScaleOptions,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<Vec<ScaleRow>> {
    let mut fs = fs_on(opts)?;
    let dir = fs
        .mkdir(ROOT_INO, b"d", 0o755, 0, 0)
        .context(|| "mkdir".into())?
        .ino;
    let total = opts.dir_checkpoints.last().copied().unwrap_or(0);
    let mut rng = Rng(opts.seed | 1);
    let mut rows = Vec::new();
    let mut made = 0;
    for &n in &opts.dir_checkpoints {
        let t0 = now(&fs);
        let before = made;
        while made < n {
            fs.create(dir, &name(made), 0o644, 0, 0)
                .context(|| format!("creating file {made}"))?;
            made += 1;
            if made % 1000 == 0 {
                progress("directory", made, total);
            }
        }
        fs.sync().context(|| "sync".into())?;
        let build = us_per(&fs, t0, made - before);
        let height = fs.index_height().context(|| "height".into())?;
        let (reads, us) = cold(&mut fs, opts.samples, |fs, _| {
            fs.lookup(dir, &name(rng.below(made))).map(drop)
        })?;
        rows.push(ScaleRow {
            experiment: "directory",
            preset: opts.preset.clone(),
            n,
            unit: "files",
            data_mib: 0,
            extents: 0,
            index_height: height,
            page_reads_per_op: reads,
            node_reads_per_op: reads,
            device_us_per_op: us,
            device_us_per_build_op: build,
        });
    }
    Ok(rows)
}

/// Random cold 4 KiB reads of a file: (page reads, node reads, device µs) per read.
fn random_reads(
    fs: &mut Fs<Dev>,
    ino: Ino,
    size: u64,
    samples: u64,
    rng: &mut Rng,
) -> Result<(f64, f64, f64)> {
    let bs = u64::from(fs.block_size());
    let mut buf = vec![0u8; 4096];
    let written = fs.extents(ino).context(|| "extents".into())?;
    let (reads, us) = cold(fs, samples, |fs, _| {
        let off = rng.below(size / 4096) * 4096;
        fs.read(ino, off, &mut buf).map(drop)
    })?;
    // Data pages per read: a 4 KiB read of written blocks reads 4096 / block size pages.
    let data = if written.is_empty() {
        0.0
    } else {
        (4096 / bs.min(4096)) as f64
    };
    Ok((reads, (reads - data).max(0.0), us))
}

fn big_file(
    opts: &ScaleOptions,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<Vec<ScaleRow>> {
    let mut fs = fs_on(opts)?;
    let ino = fs
        .create(ROOT_INO, b"big", 0o644, 0, 0)
        .context(|| "create".into())?
        .ino;
    let st = fs.statfs();
    // Leave a twentieth of the space free: the file system's own reserve and slack.
    let fits = st.blocks_free * u64::from(st.block_size) / 20 * 19 / (1 << 20);
    let target = opts.file_checkpoints_mib.last().copied().unwrap_or(0);
    let mut rng = Rng(opts.seed | 1);
    let chunk: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
    let mut rows = Vec::new();
    let mut mib = 0;
    for &n in &opts.file_checkpoints_mib {
        let t0 = now(&fs);
        let before = mib;
        while mib < n.min(fits) {
            fs.write(ino, mib << 20, &chunk)
                .context(|| format!("writing MiB {mib}"))?;
            mib += 1;
            progress("big file", mib, target.min(fits));
        }
        if n > fits {
            // The flash holds less than the file's size: the rest is a hole.
            fs.setattr(
                ino,
                SetAttr {
                    size: Some(n << 20),
                    ..Default::default()
                },
            )
            .context(|| "extending".into())?;
        }
        fs.sync().context(|| "sync".into())?;
        let build = us_per(&fs, t0, mib - before);
        let extents = fs.extents(ino).context(|| "extents".into())?.len() as u64;
        let height = fs.index_height().context(|| "height".into())?;
        let (reads, nodes, us) =
            random_reads(&mut fs, ino, mib.max(1) << 20, opts.samples, &mut rng)?;
        rows.push(ScaleRow {
            experiment: "big-file",
            preset: opts.preset.clone(),
            n,
            unit: "MiB",
            data_mib: mib,
            extents,
            index_height: height,
            page_reads_per_op: reads,
            node_reads_per_op: nodes,
            device_us_per_op: us,
            device_us_per_build_op: build,
        });
    }
    Ok(rows)
}

fn fragmented(
    opts: &ScaleOptions,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<Vec<ScaleRow>> {
    let mut fs = fs_on(opts)?;
    let ino = fs
        .create(ROOT_INO, b"frag", 0o644, 0, 0)
        .context(|| "create".into())?
        .ino;
    let size = opts.frag_file_mib << 20;
    let chunk = vec![0x5Au8; 1 << 20];
    for m in 0..opts.frag_file_mib {
        fs.write(ino, m << 20, &chunk)
            .context(|| "writing".into())?;
    }
    let total = opts.frag_checkpoints.last().copied().unwrap_or(0);
    let mut rng = Rng(opts.seed ^ 0x9E37_79B9 | 1);
    let page = vec![0xA5u8; 4096];
    let mut rows = Vec::new();
    let mut done = 0;
    for &n in &opts.frag_checkpoints {
        let t0 = now(&fs);
        let before = done;
        while done < n {
            let off = rng.below(size / 4096) * 4096;
            fs.write(ino, off, &page).context(|| "overwriting".into())?;
            done += 1;
            if done % 500 == 0 {
                progress("fragmented file", done, total);
            }
        }
        fs.sync().context(|| "sync".into())?;
        let build = us_per(&fs, t0, done - before);
        let extents = fs.extents(ino).context(|| "extents".into())?.len() as u64;
        let height = fs.index_height().context(|| "height".into())?;
        let (reads, nodes, us) = random_reads(&mut fs, ino, size, opts.samples, &mut rng)?;
        rows.push(ScaleRow {
            experiment: "fragmented-file",
            preset: opts.preset.clone(),
            n,
            unit: "random 4 KiB overwrites",
            data_mib: opts.frag_file_mib,
            extents,
            index_height: height,
            page_reads_per_op: reads,
            node_reads_per_op: nodes,
            device_us_per_op: us,
            device_us_per_build_op: build,
        });
    }
    Ok(rows)
}

/// The rows as a table.
pub fn table(rows: &[ScaleRow]) -> String {
    let mut s = String::new();
    s.push_str("EXPERIMENT        PRESET     N       UNIT                     DATA MiB  EXTENTS  HEIGHT  PAGE READS/OP  NODE READS/OP  DEVICE us/OP  BUILD us/OP\n");
    for r in rows {
        s.push_str(&format!(
            "{:<17} {:<10} {:<7} {:<24} {:>8}  {:>7}  {:>6}  {:>13.2}  {:>13.2}  {:>12.1}  {:>11.1}\n",
            r.experiment,
            r.preset,
            r.n,
            r.unit,
            r.data_mib,
            r.extents,
            r.index_height,
            r.page_reads_per_op,
            r.node_reads_per_op,
            r.device_us_per_op,
            r.device_us_per_build_op
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> ScaleOptions {
        ScaleOptions {
            preset: "nand-128m".into(),
            dir_checkpoints: vec![20],
            file_checkpoints_mib: vec![1],
            frag_file_mib: 4,
            frag_checkpoints: vec![300],
            samples: 50,
            ..ScaleOptions::default()
        }
    }

    fn row<'a>(rows: &'a [ScaleRow], experiment: &str) -> &'a ScaleRow {
        rows.iter().find(|r| r.experiment == experiment).unwrap()
    }

    /// Each experiment gives its row; with the block device's map held to one page in RAM,
    /// the fragmented file's reads read map pages from flash that the default keeps.
    #[test]
    fn a_map_held_to_one_page_costs_the_fragmented_file_map_page_reads() {
        let rows = run_scale(&small(), &mut |_, _, _| {}).unwrap();
        assert_eq!(rows.len(), 3);
        let frag = row(&rows, "fragmented-file");
        assert!(frag.extents > 1, "{frag:?}");
        // A 4 KiB read of 2 KiB blocks reads two data pages, and index nodes.
        assert!(frag.page_reads_per_op > 2.0, "{frag:?}");
        let tight = ScaleOptions {
            map_cache: Some(0),
            ..small()
        };
        let tight_rows = run_scale(&tight, &mut |_, _, _| {}).unwrap();
        let tight_frag = row(&tight_rows, "fragmented-file");
        assert_eq!(tight_frag.extents, frag.extents);
        assert!(
            tight_frag.page_reads_per_op > frag.page_reads_per_op,
            "{tight_frag:?} against {frag:?}"
        );
    }
}
