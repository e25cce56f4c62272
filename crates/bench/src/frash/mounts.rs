//! The mount experiment: each configuration's volume filled step by step on each partition,
//! and at every step mounted from a copy of its state, after a clean unmount and after a
//! power cut.

use flashfs::Fs;

use super::volume::{fast_tier_bytes, hybrid, nvram_spec, Config, Volume};
use super::{Experiment, FrashOptions, FrashRow, MIB};
use crate::error::{Context, Result};
use crate::mount::{copy, discard, fs_mount_checked, in_series, FsFill, Measured, Part, Pattern};

/// Runs the experiment: for each file size, partition and configuration, a series.
pub(super) fn run(
    opts: &FrashOptions,
    pat: &Pattern,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<Vec<FrashRow>> {
    let nvram = nvram_spec(&opts.nvram_preset, opts.nvram_access_ns)?;
    let mut rows = Vec::new();
    for &kib in &opts.file_kib {
        for &mib in &opts.partitions_mib {
            let part = opts.partition(Some(mib))?;
            // Every configuration holds the same data: the few MiB, then the share of what
            // the NAND alone holds (the FRASH volume would hold more, its NVRAM counted).
            let full = nand_capacity(&part, opts.seed)? / 100 * u64::from(opts.full_pct);
            for &config in &opts.configs {
                let s = Series {
                    opts,
                    part: &part,
                    config,
                    file_bytes: kib * 1024,
                    targets: [opts.stored_mib << 20, full],
                };
                let label = format!("{} {}[{mib} MiB] {kib} KiB", config.name(), part.preset);
                let mut p = |done, total| progress(&label, done, total);
                let got = match config {
                    Config::Frash => s.run(hybrid(&part, &nvram, opts.seed)?, pat, &mut p),
                    _ => s.run(part.build(opts.seed)?, pat, &mut p),
                };
                rows.extend(got.map_err(|e| in_series(&label, e))?);
            }
        }
    }
    Ok(rows)
}

/// The capacity of the NAND-only volume on `part` (default configuration), bytes.
fn nand_capacity(part: &Part, seed: u64) -> Result<u64> {
    let fs = Fs::format(part.build(seed)?, Config::NandCheckpoint.fs_config(None))
        .context(|| format!("mkfs {}", part.label()))?;
    let st = fs.statfs();
    discard(fs);
    Ok(st.blocks * u64::from(st.block_size))
}

/// One volume filled to the first step, then full.
struct Series<'a> {
    opts: &'a FrashOptions,
    part: &'a Part,
    config: Config,
    file_bytes: u64,
    /// Bytes stored at each step.
    targets: [u64; 2],
}

impl Series<'_> {
    fn run<D: Volume>(
        &self,
        dev: D,
        pat: &Pattern,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Vec<FrashRow>> {
        let config = self.config.fs_config(self.opts.nvram_file_bytes);
        let mut fs = Fs::format(dev, config).context(|| "mkfs".into())?;
        let st = fs.statfs();
        let capacity = st.blocks * u64::from(st.block_size);
        let targets = self.targets;
        let mut fill = FsFill::fixed(self.file_bytes, self.opts.seed);
        let mut rows = Vec::new();
        for (step, target) in targets.into_iter().enumerate() {
            fill.to(&mut fs, pat, target, &mut |done| progress(done, targets[1]))?;
            // A power cut right after the fill's last sync: the device as it stands, without
            // the unmount's checkpoint.
            let cut = copy(fs.ftl().log().device());
            let m = fs_mount_checked(&cut, config, pat, &fill.files)?;
            discard(cut);
            let full = step == 1;
            let mut cut_row = self.row(m, "cut", full, capacity, &fill)?;
            let state = fs.unmount().context(|| "unmount".into())?;
            let m = fs_mount_checked(&state, config, pat, &fill.files)?;
            let mut clean_row = self.row(m, "clean", full, capacity, &fill)?;
            fs = Fs::mount(state, config).context(|| "mount".into())?;
            if self.config == Config::Frash {
                // What the metadata of the files takes on the NVRAM, as the mount found it.
                let (live, used) = fast_tier_bytes(&fs);
                let files = fill.files.len().max(1) as f64;
                let mb = fill.stored as f64 / MIB;
                for r in [&mut cut_row, &mut clean_row] {
                    r.nvram_live_bytes = Some(live);
                    r.nvram_used_bytes = Some(used);
                    r.nvram_bytes_per_file = Some(live as f64 / files);
                    r.nvram_bytes_per_mb = Some(live as f64 / mb.max(f64::MIN_POSITIVE));
                }
            }
            rows.push(cut_row);
            rows.push(clean_row);
        }
        discard(fs);
        Ok(rows)
    }

    fn row(
        &self,
        m: Measured,
        ending: &'static str,
        full: bool,
        capacity: u64,
        fill: &FsFill,
    ) -> Result<FrashRow> {
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        let mut r = FrashRow::new(Experiment::Mount, self.config, self.opts, self.part)?;
        r.stored_mb = fill.stored as f64 / MIB;
        r.files = fill.files.len() as u64;
        r.file_kb = self.file_bytes as f64 / 1024.0;
        r.fill_pct = Some(fill.stored as f64 * 100.0 / capacity as f64);
        r.full = Some(full);
        r.ending = Some(ending);
        r.mount_ms = ms(m.mount);
        r.ms_per_mb = Some(r.mount_ms / r.partition_mb);
        r.mount_nand_reads = Some(m.page_reads);
        r.mount_nvram_bytes = Some(m.nvram_bytes_read);
        r.restored = Some(m.restored);
        r.first_write_ms = Some(ms(m.first_write));
        r.heap_bytes = Some(m.heap);
        r.heap_held_bytes = Some(m.heap_held);
        Ok(r)
    }
}
