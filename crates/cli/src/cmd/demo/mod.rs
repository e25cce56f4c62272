//! `flashfs demo`: the native file system end to end on a simulated device.
//!
//! It formats the device, stores a real directory tree and reads it back, runs a workload
//! while the power is cut at random device operations (remounting, checking with fsck and
//! comparing every byte with a model after each cut), then reports space, write
//! amplification and wear, and plots the erase counts and segment utilization.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use flash::preset::{Preset, DEFAULT_PRESET};
use flash::{DeviceSpec, ImageMeta, NandSim, NorSim, NvramNor, NvramSim};
use flashfs::media::tiered::Tiered;
use flashfs::{Fs, FsConfig, NandSegments, NorSegments};
use flashfs_bench::fs_cuts::{self, CutPlan};
use flashfs_bench::fswork::{self, FsOp, FsWorkload, Node, Tree};
use flashfs_bench::torture::SimSegments;

use crate::device::{self, Spread};
use crate::units::{bytes, count, duration};
use crate::volume;
use crate::Global;

/// Examples shown by `flashfs demo --help`.
pub const EXAMPLES: &str = "\
Examples:
  flashfs demo
  flashfs demo --quick --preset mlc-flexfs
  flashfs demo --preset nand-128m --nvram fram-8m    metadata and small files on FRAM beside NAND
  flashfs demo --preset w25q64jv --nvram cy15b102q   the same beside SPI NOR
  flashfs demo --tree ~/photos --plot out/ --seed 42";

/// Options of `flashfs demo`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The device to simulate (see `flashfs presets`).
    #[arg(long, value_name = "NAME", default_value = DEFAULT_PRESET)]
    pub preset: String,
    /// An NVRAM part beside the flash of --preset (SLC NAND or NOR), one volume on two
    /// devices as `mkfs --nvram` makes it: the metadata and small files' first 16 KiB on
    /// the NVRAM, the rest of the data on the flash.
    #[arg(long, value_name = "NAME")]
    pub nvram: Option<String>,
    /// Seed of every random choice: workload, cut points, torn operations.
    #[arg(long, value_name = "S", default_value_t = 1)]
    pub seed: u64,
    /// A shorter run.
    #[arg(long)]
    pub quick: bool,
    /// The directory tree to store (default: this project's sources, or a generated tree
    /// when they are not at hand).
    #[arg(long, value_name = "DIR")]
    pub tree: Option<PathBuf>,
    /// Where to write the plots.
    #[arg(long, value_name = "DIR", default_value = "flashfs-demo")]
    pub plot: PathBuf,
}

/// Files larger than this are left out of the stored tree.
const MAX_FILE: u64 = 1 << 20;

/// Runs the demo.
pub fn run(args: &Args, global: Global, out: &mut dyn Write) -> anyhow::Result<()> {
    let preset = device::lookup(&args.preset)?;
    device::check_ram(&preset.spec)?;
    let meta = ImageMeta::new(preset.name, args.seed);
    if let Some(name) = &args.nvram {
        let (nvram, nvram_spec) =
            volume::nvram_beside(&preset.spec, &format!("--preset {}", args.preset), name)?;
        let part = NvramSim::new(nvram_spec, ImageMeta::new(nvram.name, args.seed))
            .map_err(device::explain)?;
        let joined = |e: flashfs::Error| {
            anyhow::anyhow!(
                "--nvram {name} beside --preset {}: {e} (a larger NVRAM part, or a smaller \
                 flash, makes a volume)",
                args.preset
            )
        };
        let beside = Some(&nvram);
        return match preset.spec {
            DeviceSpec::Nor(spec) => {
                let sim = NorSim::new(spec, meta).map_err(device::explain)?;
                let nor = NorSegments::new(sim, 512).map_err(anyhow::Error::new)?;
                let dev = Tiered::nvram_beside_nor(part, nor).map_err(joined)?;
                demo(dev, &preset, beside, args, global, out)
            }
            DeviceSpec::Nand(spec) => {
                let sim = NandSim::new(spec, meta).map_err(device::explain)?;
                let dev = Tiered::nvram_beside_nand(part, sim).map_err(joined)?;
                demo(dev, &preset, beside, args, global, out)
            }
            DeviceSpec::Nvram(_) => bail!("--preset {} is NVRAM, not flash", args.preset),
        };
    }
    match preset.spec {
        DeviceSpec::Nor(spec) => {
            let sim = NorSim::new(spec, meta).map_err(device::explain)?;
            let dev = NorSegments::new(sim, 512).map_err(anyhow::Error::new)?;
            demo(dev, &preset, None, args, global, out)
        }
        DeviceSpec::Nand(spec) => {
            let sim = NandSim::new(spec, meta).map_err(device::explain)?;
            let dev = NandSegments::new(sim).map_err(anyhow::Error::new)?;
            demo(dev, &preset, None, args, global, out)
        }
        DeviceSpec::Nvram(spec) => {
            let sim = NvramSim::new(spec, meta).map_err(device::explain)?;
            let part = NvramNor::new(sim).map_err(device::explain)?;
            let dev = NorSegments::new(part, 512).map_err(anyhow::Error::new)?;
            demo(dev, &preset, None, args, global, out)
        }
    }
}

/// A host file or directory to store.
enum Host {
    Dir(String),
    File(String, Vec<u8>),
}

/// The tree to store: `dir`'s files up to `budget` bytes (build output, hidden entries,
/// symbolic links and files over 1 MiB left out), or a generated one.
fn host_tree(dir: Option<&Path>, budget: u64, seed: u64) -> anyhow::Result<(String, Vec<Host>)> {
    let default = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let (root, explicit) = match dir {
        Some(d) => (d.to_path_buf(), true),
        None => (default, false),
    };
    if root.is_dir() {
        let mut out = Vec::new();
        let mut total = 0;
        let mut stack = vec![(root.clone(), String::from("tree"))];
        out.push(Host::Dir("tree".into()));
        while let Some((d, name)) = stack.pop() {
            let mut entries: Vec<_> = std::fs::read_dir(&d)
                .with_context(|| format!("reading {}", d.display()))?
                .collect::<Result<_, _>>()?;
            entries.sort_by_key(|e| e.file_name());
            for e in entries {
                let file_name = e.file_name().to_string_lossy().into_owned();
                if file_name.starts_with('.') || file_name == "target" || file_name.contains('/') {
                    continue;
                }
                let ty = e.file_type()?;
                let path = format!("{name}/{file_name}");
                if ty.is_dir() {
                    out.push(Host::Dir(path.clone()));
                    stack.push((e.path(), path));
                } else if ty.is_file() {
                    let len = e.metadata()?.len();
                    if len > MAX_FILE || total + len > budget {
                        continue;
                    }
                    total += len;
                    out.push(Host::File(path, std::fs::read(e.path())?));
                }
            }
        }
        let shown = std::fs::canonicalize(&root).unwrap_or(root);
        return Ok((shown.display().to_string(), out));
    }
    if explicit {
        bail!("{}: not a directory", root.display());
    }
    // A generated tree: directories of files of many sizes.
    let mut out = vec![Host::Dir("tree".into())];
    let mut total = 0;
    let mut i = 0u32;
    while total < budget {
        let d = format!("tree/d{}", i / 40);
        if i % 40 == 0 {
            out.push(Host::Dir(d.clone()));
        }
        let len = [100usize, 3000, 20_000, 150_000][(i % 4) as usize];
        out.push(Host::File(
            format!("{d}/f{i}"),
            fswork::content(seed as u32 ^ i, 0, len),
        ));
        total += len as u64;
        i += 1;
    }
    Ok(("a generated tree".into(), out))
}

/// Runs the demo on `dev`, a simulated `preset`, with the `nvram` part beside it if any.
fn demo<D: SimSegments>(
    dev: D,
    preset: &Preset,
    nvram: Option<&Preset>,
    args: &Args,
    global: Global,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let spec = preset.spec;
    let (budget, n_ops, cuts) = if args.quick {
        (2u64 << 20, 600, 10)
    } else {
        (16u64 << 20, 20_000, 200)
    };
    let bar = global.progress_bar(n_ops as u64, "{msg:>12} [{bar:40}] {pos}/{len} {elapsed}");
    let say = |out: &mut dyn Write, text: String| -> anyhow::Result<()> {
        bar.suspend(|| writeln!(out, "{text}"))?;
        Ok(())
    };
    say(
        out,
        format!(
            "flashfs demo: {} ({}, {}), simulated in RAM, seed {}",
            preset.name,
            spec.kind(),
            bytes(spec.capacity()),
            args.seed
        ),
    )?;
    say(out, format!("  {}", preset.summary))?;
    say(out, format!("  geometry: {}", device::geometry(&spec)))?;
    if let Some(n) = nvram {
        say(
            out,
            format!(
                "  beside it {} ({}, {}), one volume on two devices: {}",
                n.name,
                n.spec.kind(),
                bytes(n.spec.capacity()),
                n.summary
            ),
        )?;
    }
    say(out, String::new())?;

    // 1. Format.
    bar.set_message("format");
    let config = FsConfig::default();
    let t0 = dev.now();
    let mut fs = Fs::format(dev, config).context("formatting the file system")?;
    let st = fs.statfs();
    say(
        out,
        format!(
            "1. format      native file system: {} blocks of {} ({}) for files, {} in device time",
            count(st.blocks),
            bytes(st.block_size as u64),
            bytes(st.blocks * st.block_size as u64),
            duration(fs.ftl().log().device().now() - t0)
        ),
    )?;

    // 2. Store a tree (at most a quarter of the volume) and read it back.
    bar.set_message("store");
    let capacity = st.blocks * u64::from(st.block_size);
    let (source, host) = host_tree(args.tree.as_deref(), budget.min(capacity / 4), args.seed)?;
    let files = host.iter().filter(|h| matches!(h, Host::File(..))).count() as u64;
    bar.set_length(files + n_ops as u64);
    let mut model = Tree::new();
    let mut stored = 0u64;
    let t0 = fs.ftl().log().device().now();
    for h in &host {
        match h {
            Host::Dir(p) => {
                fs.mkdir_path(format!("/{p}").as_bytes())
                    .with_context(|| format!("mkdir /{p}"))?;
                model.insert(p.clone(), Node::Dir);
            }
            Host::File(p, data) => {
                fs.write_file(format!("/{p}").as_bytes(), data)
                    .with_context(|| format!("storing /{p}"))?;
                model.insert(p.clone(), Node::File(data.clone()));
                stored += data.len() as u64;
                bar.inc(1);
            }
        }
    }
    fs.sync().context("sync")?;
    let store_time = fs.ftl().log().device().now() - t0;
    let (found, read) = fswork::snapshot(&mut fs).context("reading the tree back")?;
    if found != model {
        bail!(
            "the stored tree reads back wrong: {}",
            fswork::describe_difference(&model, &found)
        );
    }
    say(
        out,
        format!(
            "2. store       {} files ({}) in {} directories from {source}: {} in device time;\n\
             \x20              read back, {} compared: every byte verified",
            count(files),
            bytes(stored),
            count(host.len() as u64 - files),
            duration(store_time),
            bytes(read)
        ),
    )?;

    // 3. A workload under power cuts.
    bar.set_message("power cuts");
    let workload = FsWorkload::Mixed;
    // Files of the workload stay within a few percent of the volume.
    let (max_write, max_file) = (
        (capacity / 64).clamp(512, 16 << 10) as u32,
        (capacity / 32).clamp(4096, 256 << 10),
    );
    let ops = workload.ops(args.seed, n_ops, max_write, max_file);
    let written: u64 = ops
        .iter()
        .map(|o| match o {
            FsOp::Write { len, .. } | FsOp::Append { len, .. } => *len as u64,
            _ => 0,
        })
        .sum();
    let plan = CutPlan {
        cuts,
        torn_share: 0.5,
        recovery_cut_share: 0.25,
        seed: args.seed,
    };
    let base = bar.position();
    let (mut report, fs, model) = fs_cuts::run_with_cuts(fs, model, config, &ops, plan, &mut |i| {
        bar.set_position(base + i as u64)
    })
    .context("the power-cut workload")?;
    let mut fs = fs_cuts::check_clean_remount(fs, config, &model, &mut report)
        .context("the final remount")?;
    bar.finish_and_clear();
    say(
        out,
        format!(
            "3. power cuts  {} operations of `{}` ({} acknowledged, {} refused for space) with {} cuts ({} torn, {} chained \
             into the recovery from the cut before):\n\
             \x20              {} remounts, fsck clean after each, {} compared with the model, {} \
             violation{}",
            count(ops.len() as u64),
            workload.name(),
            count(report.ops_acknowledged),
            count(report.no_space),
            count(report.cuts),
            count(report.torn),
            count(report.chained_cuts),
            count(report.remounts),
            bytes(report.bytes_verified),
            count(report.violations.len() as u64),
            device::plural(report.violations.len() as u64)
        ),
    )?;
    for v in report.violations.iter().take(5) {
        say(out, format!("               violation: {v}"))?;
    }

    // 4. Space, write amplification and wear.
    let st = fs.statfs();
    let usage = volume::log_usage(fs.ftl().log());
    let dev = fs.ftl().log().device();
    let sim = dev.sim();
    let programmed = sim.stats().bytes_programmed;
    // On two devices the NVRAM is the first of the supply's parts.
    let nvram_written = nvram.map(|_| dev.sims()[0].stats().bytes_programmed);
    let user = stored + written;
    let counts = sim.erase_counts();
    let spread = Spread::of(&counts);
    let height = fs.index_height().context("index height")?;
    say(
        out,
        format!(
            "4. space       {} of {} used, {} free; {} inodes; index height {}; {} commits",
            bytes((st.blocks - st.blocks_free) * st.block_size as u64),
            bytes(st.blocks * st.block_size as u64),
            bytes(st.blocks_free * st.block_size as u64),
            count(st.files),
            height,
            count(fs.commit_count())
        ),
    )?;
    say(
        out,
        format!(
            "5. writes      {} written by the user, {} programmed on flash{}{}: write amplification {:.2}{}",
            bytes(user),
            bytes(programmed),
            if matches!(spec, DeviceSpec::Nand(_)) {
                " (pages with their spare bytes)"
            } else {
                ""
            },
            nvram_written.map_or(String::new(), |n| format!(", {} written to the NVRAM", bytes(n))),
            programmed as f64 / user.max(1) as f64,
            nvram_written.map_or(String::new(), |n| format!(
                " on the flash, {:.2} counting the NVRAM",
                (programmed + n) as f64 / user.max(1) as f64
            ))
        ),
    )?;
    if let Some(t) = &usage.tiers {
        say(
            out,
            format!(
                "               tiers: {} segments on the NVRAM ({} live: metadata, small files), \
                 {} on the flash ({} live)",
                count(t.fast_segments),
                bytes(t.fast_live_bytes),
                count(t.bulk_segments),
                bytes(t.bulk_live_bytes)
            ),
        )?;
    }
    say(
        out,
        format!(
            "6. wear        erase counts over {} blocks: {}; {} segments in use, {} free",
            count(counts.len() as u64),
            spread.line(),
            count(usage.segments_in_use),
            count(usage.free_segments)
        ),
    )?;

    // 5. Plots.
    let erase_bars: Vec<(String, u64)> = device::histogram(&counts, 10, 40)
        .into_iter()
        .map(|(label, n, _)| (label.replace(',', ""), n))
        .collect();
    let util_bars: Vec<(String, u64)> = usage
        .utilization_histogram
        .iter()
        .enumerate()
        .map(|(i, &n)| (format!("{}-{}%", i * 10, (i + 1) * 10), n))
        .collect();
    let mut plots = flashfs_bench::plot::bar_chart(
        &args.plot,
        "erase-counts",
        &format!("Erase counts after the demo, {}", preset.name),
        "Erases",
        "Blocks",
        &erase_bars,
    )
    .with_context(|| device::shown(&args.plot))?;
    plots.extend(
        flashfs_bench::plot::bar_chart(
            &args.plot,
            "segment-utilization",
            &format!("Segment utilization after the demo, {}", preset.name),
            "Live fraction",
            "Segments in use",
            &util_bars,
        )
        .with_context(|| device::shown(&args.plot))?,
    );
    say(
        out,
        format!(
            "7. plots       {}",
            plots
                .iter()
                .map(|p| device::shown(p))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    )?;
    let device_time = fs.ftl().log().device().now();
    fs.check(false).context("final check")?;
    drop(fs.unmount().context("unmount")?);
    say(
        out,
        format!(
            "\ndone in {} ({} of device time)",
            duration(started.elapsed()),
            duration(device_time)
        ),
    )?;
    if !report.violations.is_empty() {
        bail!(
            "{} violation(s) of the power-cut rules",
            report.violations.len()
        );
    }
    Ok(())
}
