//! Plots of a run, as PNG and SVG, like the paper's figures: mount time against partition
//! size, a line per configuration and a panel per file size and fill (Figs 7 and 8), the
//! paper's YAFFS and FRASH slopes dashed; and the operations as bars, a chart per op and
//! sync setting, a bar per configuration and file size (Figs 9–11).

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

use super::table::{op_figure, PAPER_FRASH_MS_PER_MB, PAPER_YAFFS_MS_PER_MB};
use super::FrashRow;
use crate::error::Result;
use crate::plot::{draw_legend, err, grouped_bar_chart, register_font, BarPanel, COLORS, FONT};

/// A panel of the mount figure: its rows, caption and the lines in it.
struct Panel<'a> {
    caption: String,
    rows: Vec<&'a FrashRow>,
}

fn configs(rows: &[&FrashRow]) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = Vec::new();
    for r in rows {
        if !v.contains(&r.config) {
            v.push(r.config);
        }
    }
    v
}

fn draw_mount_panel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, p: &Panel) -> Result<()> {
    let max_x = p.rows.iter().map(|r| r.partition_mb).fold(1.0f64, f64::max) * 1.05;
    let max_y = p
        .rows
        .iter()
        .map(|r| r.mount_ms)
        .fold(PAPER_YAFFS_MS_PER_MB * max_x, f64::max)
        * 2.0;
    let min_y = p
        .rows
        .iter()
        .map(|r| r.mount_ms)
        .fold(1.0f64, f64::min)
        .max(1e-3)
        // Room below the lowest line for the legend.
        / 40.0;
    let mut chart = ChartBuilder::on(area)
        .caption(&p.caption, (FONT, 18))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..max_x, (min_y..max_y).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("Partition size, MiB")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_desc("Mount, ms of device time (log scale)")
        .y_label_formatter(&|v| {
            if *v >= 1.0 {
                format!("{v:.0}")
            } else {
                format!("{v}")
            }
        })
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .draw()
        .map_err(err)?;
    for (i, c) in configs(&p.rows).iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let mut pts: Vec<(f64, f64)> = p
            .rows
            .iter()
            .filter(|r| r.config == *c)
            .map(|r| (r.partition_mb, r.mount_ms.max(min_y)))
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(*c)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(pts.iter().map(|&q| Circle::new(q, 3, color.filled())))
            .map_err(err)?;
    }
    let grey = RGBColor(0x60, 0x60, 0x60);
    for (label, slope, width) in [
        ("paper: YAFFS 8.11 ms/MB", PAPER_YAFFS_MS_PER_MB, 2),
        ("paper: FRASH 1.62 ms/MB", PAPER_FRASH_MS_PER_MB, 1),
    ] {
        let pts: Vec<(f64, f64)> = (1..=20)
            .map(|i| {
                let x = max_x * f64::from(i) / 20.0;
                (x, slope * x)
            })
            .collect();
        chart
            .draw_series(DashedLineSeries::new(pts, 6, 4, grey.stroke_width(width)))
            .map_err(err)?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], grey.stroke_width(width))
            });
    }
    draw_legend(&mut chart, 12, SeriesLabelPosition::LowerRight)
}

fn draw_mounts<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, panels: &[Panel]) -> Result<()> {
    root.fill(&WHITE).map_err(err)?;
    let root = root
        .titled(
            "Mount after a clean unmount against partition size",
            (FONT, 22),
        )
        .map_err(err)?;
    let cols = panels.len().clamp(1, 2);
    let areas = root.split_evenly((panels.len().div_ceil(cols), cols));
    for (area, p) in areas.iter().zip(panels) {
        draw_mount_panel(area, p)?;
    }
    root.present().map_err(err)
}

/// The mount figure's panels: a panel per file size and step, clean mounts.
fn mount_panels(rows: &[FrashRow]) -> Vec<Panel<'_>> {
    let mut keys: Vec<(f64, bool)> = Vec::new();
    for r in rows.iter().filter(|r| r.experiment == "mount") {
        let k = (r.file_kb, r.full == Some(true));
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys.iter()
        .map(|&(kb, full)| {
            let these: Vec<&FrashRow> = rows
                .iter()
                .filter(|r| {
                    r.experiment == "mount"
                        && r.ending == Some("clean")
                        && r.file_kb == kb
                        && (r.full == Some(true)) == full
                })
                .collect();
            let stored = these.iter().map(|r| r.stored_mb).fold(f64::MAX, f64::min);
            Panel {
                caption: if full {
                    format!("files of {kb} KiB, full")
                } else {
                    format!("files of {kb} KiB, {stored:.0} MiB stored")
                },
                rows: these,
            }
        })
        .collect()
}

/// The ops charts: one per op and sync setting, a group per file size, a bar per
/// configuration.
fn ops_charts(rows: &[FrashRow], dir: &Path) -> Result<Vec<PathBuf>> {
    let ops: Vec<&FrashRow> = rows.iter().filter(|r| r.experiment == "ops").collect();
    let cfgs = configs(&ops);
    let mut files = Vec::new();
    for op in ["create", "delete", "write", "read"] {
        for sync in ["each", "end"] {
            let these: Vec<&&FrashRow> = ops
                .iter()
                .filter(|r| r.op == Some(op) && r.sync == Some(sync))
                .collect();
            if these.is_empty() {
                continue;
            }
            let mut sizes: Vec<f64> = Vec::new();
            for r in &these {
                if !sizes.contains(&r.file_kb) {
                    sizes.push(r.file_kb);
                }
            }
            let series = cfgs
                .iter()
                .map(|c| {
                    let v = sizes
                        .iter()
                        .map(|&kb| {
                            these
                                .iter()
                                .find(|r| r.config == *c && r.file_kb == kb)
                                .and_then(|r| op_figure(r))
                        })
                        .collect();
                    (c.to_string(), v)
                })
                .collect();
            let panel = BarPanel {
                title: format!("{op}, sync {sync}"),
                groups: sizes.iter().map(|kb| format!("{kb} KiB")).collect(),
                series,
                references: Vec::new(),
            };
            let unit = match op {
                "create" | "delete" => "files per second of device time",
                _ => "KiB per second of device time",
            };
            files.extend(grouped_bar_chart(
                dir,
                &format!("frash-{op}-{sync}"),
                &format!(
                    "{op} on {}, a bar per configuration",
                    these.first().map_or("", |r| r.nand_preset.as_str())
                ),
                unit,
                None,
                &[panel],
            )?);
        }
    }
    Ok(files)
}

/// Writes `frash-mount` and the `frash-<op>-<sync>` charts (PNG and SVG) into `dir` and
/// returns the files written.
pub fn plot(rows: &[FrashRow], dir: &Path) -> Result<Vec<PathBuf>> {
    register_font()?;
    std::fs::create_dir_all(dir)?;
    let mut files = Vec::new();
    let panels = mount_panels(rows);
    if !panels.is_empty() {
        let size = (1400, 500 * panels.len().div_ceil(2) as u32);
        let png = dir.join("frash-mount.png");
        draw_mounts(BitMapBackend::new(&png, size).into_drawing_area(), &panels)?;
        let svg = dir.join("frash-mount.svg");
        draw_mounts(SVGBackend::new(&svg, size).into_drawing_area(), &panels)?;
        files.extend([png, svg]);
    }
    files.extend(ops_charts(rows, dir)?);
    Ok(files)
}
