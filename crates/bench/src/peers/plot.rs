//! Plots of a run, as PNG and SVG, per device: the throughput of every phase for both
//! systems (a panel per sync setting, bars on a log scale: the phases differ by thousands),
//! and the distribution of write latency (a panel per sync setting, a line per write phase
//! and system: the share of operations done within a device time, on a log scale). flashfs
//! is drawn in the first configuration run (the default one, where both ran).

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{PeerRow, Workload};
use crate::error::Result;
use crate::plot::{draw_legend, err, register_font, COLORS, FONT};

/// The phases whose throughput is drawn: all but the mounts (which have none).
const THROUGHPUT: [Workload; 8] = [
    Workload::LinearWrite,
    Workload::RandomWrite,
    Workload::SmallFiles,
    Workload::HeadOverwrite,
    Workload::LinearRead,
    Workload::RandomRead,
    Workload::SmallRead,
    Workload::TinyRead,
];

/// The phases whose latency distribution is drawn.
const LATENCY: [Workload; 4] = [
    Workload::LinearWrite,
    Workload::RandomWrite,
    Workload::SmallFiles,
    Workload::HeadOverwrite,
];

const SYSTEMS: [&str; 2] = ["flashfs", "littlefs"];

fn sync_title(sync: bool) -> &'static str {
    if sync {
        "a sync after every write"
    } else {
        "no sync per write"
    }
}

/// The sync settings the rows hold, without first.
fn syncs(rows: &[&PeerRow]) -> Vec<bool> {
    let mut v: Vec<bool> = rows.iter().map(|r| r.sync).collect();
    v.sort_unstable();
    v.dedup();
    v
}

fn row<'a>(
    rows: &[&'a PeerRow],
    sync: bool,
    system: &str,
    workload: Workload,
) -> Option<&'a PeerRow> {
    rows.iter()
        .copied()
        .find(|r| r.sync == sync && r.system == system && r.workload == workload)
}

/// Throughput per phase, KB/s of device time, a bar per system, log scale.
fn draw_throughput<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    device: &str,
    rows: &[&PeerRow],
) -> Result<()> {
    root.fill(&WHITE).map_err(err)?;
    let root = root
        .titled(
            &format!("{device}: throughput in device time (log scale)"),
            (FONT, 24),
        )
        .map_err(err)?;
    let syncs = syncs(rows);
    let kbs: Vec<f64> = rows
        .iter()
        .map(|r| r.throughput_bps / 1e3)
        .filter(|&v| v > 0.0)
        .collect();
    let lo = kbs.iter().copied().fold(f64::INFINITY, f64::min).min(1.0) / 2.0;
    let hi = kbs.iter().copied().fold(0.0f64, f64::max).max(1.0) * 3.0;
    let areas = root.split_evenly((1, syncs.len().max(1)));
    for (&sync, area) in syncs.iter().zip(areas.iter()) {
        let groups = THROUGHPUT.len();
        let mut chart = ChartBuilder::on(area)
            .caption(sync_title(sync), (FONT, 18))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..groups as f64, (lo..hi).log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(2 * groups + 1)
            .x_label_formatter(&|v| {
                let i = v.floor();
                if (v - i - 0.5).abs() < 1e-6 {
                    THROUGHPUT
                        .get(i as usize)
                        .map_or(String::new(), |w| w.name().to_string())
                } else {
                    String::new()
                }
            })
            .y_desc("KB/s of device time")
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 14))
            .draw()
            .map_err(err)?;
        let width = 0.8 / SYSTEMS.len() as f64;
        for (si, system) in SYSTEMS.iter().enumerate() {
            let color = COLORS[si];
            let bars: Vec<Rectangle<(f64, f64)>> = THROUGHPUT
                .iter()
                .enumerate()
                .filter_map(|(g, &w)| {
                    let v = row(rows, sync, system, w)?.throughput_bps / 1e3;
                    let x0 = g as f64 + 0.1 + si as f64 * width;
                    (v > 0.0)
                        .then(|| Rectangle::new([(x0, lo), (x0 + width * 0.9, v)], color.filled()))
                })
                .collect();
            if bars.is_empty() {
                continue;
            }
            chart
                .draw_series(bars)
                .map_err(err)?
                .label(*system)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
        }
        draw_legend(&mut chart, 12, SeriesLabelPosition::UpperRight)?;
    }
    root.present().map_err(err)
}

/// Write latency distributions: a line per write phase and system (flashfs solid,
/// littlefs dashed), device time per operation on a log scale.
fn draw_latency<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    device: &str,
    rows: &[&PeerRow],
) -> Result<()> {
    root.fill(&WHITE).map_err(err)?;
    let root = root
        .titled(
            &format!(
                "{device}: device time per write operation, distribution (flashfs thick, littlefs dashed)"
            ),
            (FONT, 24),
        )
        .map_err(err)?;
    let syncs = syncs(rows);
    let points = rows
        .iter()
        .filter(|r| LATENCY.contains(&r.workload))
        .flat_map(|r| r.latency_cdf.iter().map(|p| p.0))
        .filter(|&v| v > 0.0);
    let (lo, hi) = points.fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    let (lo, hi) = if hi > 0.0 {
        (lo / 2.0, hi * 2.0)
    } else {
        (0.1, 10.0)
    };
    let areas = root.split_evenly((1, syncs.len().max(1)));
    for (&sync, area) in syncs.iter().zip(areas.iter()) {
        let mut chart = ChartBuilder::on(area)
            .caption(sync_title(sync), (FONT, 18))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d((lo..hi).log_scale(), 0f64..1.0)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("device time per operation, µs")
            .y_desc("share of operations")
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 14))
            .draw()
            .map_err(err)?;
        for (wi, &w) in LATENCY.iter().enumerate() {
            let color = COLORS[wi];
            for (si, system) in SYSTEMS.iter().enumerate() {
                let Some(r) = row(rows, sync, system, w) else {
                    continue;
                };
                // A step per sampled percentile: the share stays until the next sample's
                // time. Operations that took no device time (kept in RAM) sit at the left
                // edge.
                let mut pts: Vec<(f64, f64)> = Vec::new();
                for &(us, q) in &r.latency_cdf {
                    let x = us.max(lo);
                    if let Some(&(_, prev)) = pts.last() {
                        pts.push((x, prev));
                    }
                    pts.push((x, q));
                }
                let label = format!("{} {}", system, w.name());
                let style = color.stroke_width(if si == 0 { 3 } else { 1 });
                let series = if si == 0 {
                    chart
                        .draw_series(LineSeries::new(pts, style))
                        .map_err(err)?
                } else {
                    chart
                        .draw_series(DashedLineSeries::new(pts, 8, 5, style))
                        .map_err(err)?
                };
                series
                    .label(label)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], style));
            }
        }
        draw_legend(&mut chart, 11, SeriesLabelPosition::LowerRight)?;
    }
    root.present().map_err(err)
}

/// Writes `peers-throughput-<device>` and `peers-latency-<device>` (PNG and SVG) into `dir`
/// for every device the rows hold, and returns the files written.
pub fn plot(rows: &[PeerRow], dir: &Path) -> Result<Vec<PathBuf>> {
    register_font()?;
    std::fs::create_dir_all(dir)?;
    let mut devices: Vec<&str> = Vec::new();
    for r in rows {
        if !devices.contains(&r.device.as_str()) {
            devices.push(&r.device);
        }
    }
    let mut files = Vec::new();
    for device in devices {
        let of: Vec<&PeerRow> = rows.iter().filter(|r| r.device == device).collect();
        let size = (40 + 700 * syncs(&of).len().max(1) as u32, 520);
        let name = format!("peers-throughput-{device}");
        let png = dir.join(format!("{name}.png"));
        draw_throughput(
            BitMapBackend::new(&png, size).into_drawing_area(),
            device,
            &of,
        )?;
        let svg = dir.join(format!("{name}.svg"));
        draw_throughput(SVGBackend::new(&svg, size).into_drawing_area(), device, &of)?;
        files.extend([png, svg]);
        let name = format!("peers-latency-{device}");
        let png = dir.join(format!("{name}.png"));
        draw_latency(
            BitMapBackend::new(&png, size).into_drawing_area(),
            device,
            &of,
        )?;
        let svg = dir.join(format!("{name}.svg"));
        draw_latency(SVGBackend::new(&svg, size).into_drawing_area(), device, &of)?;
        files.extend([png, svg]);
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peers::{run_peers, PeerDevice, PeersOptions};

    #[test]
    fn a_quick_run_plots_both_figures_per_device() {
        let mut opts = PeersOptions::quick();
        opts.devices = vec![PeerDevice::W25n01gv];
        let rows = run_peers(&opts, &mut |_, _, _| {}).unwrap();
        let dir = std::env::temp_dir().join(format!("flashfs-peers-plot-{}", std::process::id()));
        let files = plot(&rows, &dir).unwrap();
        assert_eq!(files.len(), 4);
        for f in &files {
            assert!(
                std::fs::metadata(f).unwrap().len() > 1000,
                "{}",
                f.display()
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
