//! The side-by-side table: per device and sync setting, one line per workload with each
//! system's figure and, for costs, how many times flashfs is ahead.

use std::fmt::Write as _;

use super::meter::PeerRow;
use super::plan::Workload;
use super::PeersOptions;
use crate::error::{BenchError, Result};
use crate::report::{columns, group};

/// `littlefs / flashfs` for a cost (above 1: flashfs ahead), or "-" where either is 0.
fn ahead(flashfs: f64, littlefs: f64) -> String {
    if flashfs > 0.0 && littlefs > 0.0 {
        format!("{:.2}", littlefs / flashfs)
    } else {
        "-".into()
    }
}

fn f0(v: f64) -> String {
    group(v.round() as u64)
}

fn f0_or_none(v: f64) -> String {
    if v > 0.0 {
        f0(v)
    } else {
        "-".into()
    }
}

fn f2(v: f64) -> String {
    format!("{v:.2}")
}

fn find<'a>(
    rows: &'a [PeerRow],
    dev: &str,
    sync: bool,
    (sys, config): (&str, &str),
    w: Workload,
) -> Option<&'a PeerRow> {
    rows.iter().find(|r| {
        r.device == dev
            && r.sync == sync
            && r.system == sys
            && r.config == config
            && r.workload == w
    })
}

/// The table of `rows`, with what was run on which configuration above it.
pub fn table(opts: &PeersOptions, rows: &[PeerRow]) -> Result<String> {
    let w = |e: std::fmt::Error| BenchError::Report(e.to_string());
    let mut out = String::new();
    writeln!(
        out,
        "flashfs and littlefs on the same simulated parts; device time. Per run: a {} KiB file \
         in 64 B writes (at most an eighth of the part), {} random 64 B writes in a {} KiB file, \
         {} files of {} B (at most as many as 512 B blocks make an eighth of the part), the \
         same read back (checked), then flashfs-hostile tiny-read: {} KiB \
         of the first file in 16 B reads, littlefs-hostile head-overwrite: {} 64 B overwrites \
         at its start, a mount, a mount and one durable 64 B write.",
        opts.linear_bytes >> 10,
        opts.random_writes,
        opts.random_file >> 10,
        opts.small_files,
        opts.small_bytes,
        opts.tiny_read_bytes >> 10,
        opts.head_overwrites
    )
    .map_err(w)?;
    writeln!(
        out,
        "flashfs: native file system, access times off, {} B blocks on NOR and NVRAM, in the \
         configuration each table names (default: FsConfig::default; small-ram: \
         FsConfig::small_ram, the microcontroller profile). x: littlefs's figure / flashfs's \
         (above 1: flashfs ahead, below 1: behind).",
        crate::tffs::device::NOR_BLOCK_BYTES
    )
    .map_err(w)?;
    let header = [
        "workload",
        "ms fs",
        "ms lfs",
        "x",
        "KB/s fs",
        "KB/s lfs",
        "prog/B fs",
        "prog/B lfs",
        "x",
        "erases fs",
        "erases lfs",
        "p50 us fs",
        "p50 lfs",
        "p99.9 us fs",
        "p99.9 lfs",
        "x",
        "max us fs",
        "max lfs",
        "used KiB fs",
        "used KiB lfs",
    ];
    for &dev in &opts.devices {
        let name = dev.preset();
        writeln!(out).map_err(w)?;
        writeln!(out, "{name}: littlefs {}", dev.littlefs_geometry()).map_err(w)?;
        for (&sync, &cfg) in opts
            .syncs
            .iter()
            .flat_map(|s| opts.flashfs_configs.iter().map(move |c| (s, c)))
        {
            let mut cells = Vec::new();
            for wl in Workload::ALL {
                let lfs = find(rows, name, sync, ("littlefs", "default"), wl);
                let fs = find(rows, name, sync, ("flashfs", cfg.name()), wl);
                let get = |r: Option<&PeerRow>, f: fn(&PeerRow) -> f64| r.map(f);
                let pair = |f: fn(&PeerRow) -> f64, fmt: fn(f64) -> String| {
                    [
                        get(fs, f).map_or("-".into(), fmt),
                        get(lfs, f).map_or("-".into(), fmt),
                    ]
                };
                let ratio = |f: fn(&PeerRow) -> f64| match (get(fs, f), get(lfs, f)) {
                    (Some(a), Some(b)) => ahead(a, b),
                    _ => "-".into(),
                };
                let kbps = |r: &PeerRow| r.throughput_bps / 1e3;
                let mut line = vec![wl.name().to_string()];
                line.extend(pair(|r| r.device_ms, f2));
                line.push(ratio(|r| r.device_ms));
                line.extend(pair(kbps, f0_or_none));
                line.extend(pair(|r| r.prog_per_user_byte, f2));
                line.push(ratio(|r| r.prog_per_user_byte));
                line.extend(pair(|r| r.erases as f64, f0));
                line.extend(pair(|r| r.p50_us, f0));
                line.extend(pair(|r| r.p999_us, f0));
                line.push(ratio(|r| r.p999_us));
                line.extend(pair(|r| r.max_us, f0));
                line.extend(pair(|r| r.used_bytes as f64 / 1024.0, f0));
                cells.push(line);
            }
            writeln!(
                out,
                "{name}, {}, flashfs {}:",
                if sync {
                    "a sync after every write"
                } else {
                    "no sync per write"
                },
                cfg.name()
            )
            .map_err(w)?;
            out.push_str(&columns(&header, &cells, &[0]));
        }
        let fs_heap: Vec<String> = opts
            .flashfs_configs
            .iter()
            .filter_map(|c| {
                rows.iter()
                    .filter(|r| r.device == name && r.system == "flashfs" && r.config == c.name())
                    .map(|r| r.heap_bytes)
                    .max()
                    .map(|h| format!("{} B ({})", group(h), c.name()))
            })
            .collect();
        match fs_heap.is_empty() {
            false => writeln!(
                out,
                "RAM on {name}: flashfs heap high-water {}; littlefs buffers {} B",
                fs_heap.join(", "),
                group(dev.littlefs_buffers())
            ),
            true => writeln!(
                out,
                "{name}: no flashfs rows; littlefs alone (buffers {} B)",
                group(dev.littlefs_buffers())
            ),
        }
        .map_err(w)?;
    }
    Ok(out)
}
