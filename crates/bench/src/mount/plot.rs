//! Plots of a run, as PNG and SVG: mount time against data stored (Ryu & Park), a panel
//! per ending, the scan dashed beside the checkpoint (after a cut its worst over a
//! checkpoint cycle, the cycle's mean dotted); and mount time against partition size
//! (FRASH) with the paper's 8.11 ms per MB.

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{Ending, MountRow};
use crate::error::Result;
use crate::plot::{err, register_font, COLORS, FONT};

/// FRASH's figure for YAFFS's scan, ms per MB of partition.
pub const FRASH_YAFFS_MS_PER_MB: f64 = 8.11;

/// How a line is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stroke {
    /// The checkpoint (its worst cut after a power cut).
    Solid,
    /// The scan.
    Dashed,
    /// The checkpoint's mean over a cycle's cuts.
    Dotted,
}

/// The lines of a panel: (label, color index, stroke, points).
type Lines = Vec<(String, usize, Stroke, Vec<(f64, f64)>)>;

/// The rows' lines, one per layer and data and configuration; with `means`, a dotted line
/// beside each checkpoint line of the mean over the cuts of each row's cycle.
fn lines_of(rows: &[&MountRow], x: impl Fn(&MountRow) -> f64, means: bool) -> Lines {
    let mut keys: Vec<(String, &'static str)> = Vec::new();
    for r in rows {
        let k = (
            format!(
                "{} {}",
                r.mode.name(),
                r.file_set.map_or("sectors", |f| f.label())
            ),
            r.config,
        );
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let mut groups: Vec<String> = Vec::new();
    for (g, _) in &keys {
        if !groups.contains(g) {
            groups.push(g.clone());
        }
    }
    let mut out = Lines::new();
    for (g, config) in &keys {
        let these: Vec<&MountRow> = rows
            .iter()
            .copied()
            .filter(|r| {
                r.config == *config
                    && format!(
                        "{} {}",
                        r.mode.name(),
                        r.file_set.map_or("sectors", |f| f.label())
                    ) == *g
            })
            .collect();
        let points = |y: &dyn Fn(&MountRow) -> f64| {
            let mut pts: Vec<(f64, f64)> = these.iter().map(|r| (x(r), y(r).max(0.1))).collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            pts
        };
        let color = groups.iter().position(|x| x == g).unwrap_or(0);
        if *config == "scan" {
            out.push((
                format!("{g}, scan"),
                color,
                Stroke::Dashed,
                points(&|r| r.mount_ms),
            ));
            continue;
        }
        let label = if means {
            format!("{g}, {config} (worst)")
        } else {
            format!("{g}, {config}")
        };
        out.push((label, color, Stroke::Solid, points(&|r| r.mount_ms)));
        if means {
            out.push((
                format!("{g}, {config} (mean)"),
                color,
                Stroke::Dotted,
                points(&|r| r.mount_ms_mean.unwrap_or(r.mount_ms)),
            ));
        }
    }
    out
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    caption: &str,
    x_desc: &str,
    lines: &Lines,
    reference: Option<(&str, Vec<(f64, f64)>)>,
) -> Result<()> {
    let max_x = lines
        .iter()
        .flat_map(|l| l.3.iter().map(|p| p.0))
        .fold(1.0f64, f64::max)
        * 1.05;
    let max_y = lines
        .iter()
        .flat_map(|l| l.3.iter().map(|p| p.1))
        .chain(reference.iter().flat_map(|r| r.1.iter().map(|p| p.1)))
        .fold(10.0f64, f64::max)
        * 2.0;
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FONT, 18))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..max_x, (1f64..max_y).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc("Mount, ms of device time (log)")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .draw()
        .map_err(err)?;
    for (label, ci, stroke, pts) in lines {
        let color = COLORS[ci % COLORS.len()];
        if *stroke != Stroke::Solid {
            let (dash, gap) = if *stroke == Stroke::Dashed {
                (6, 4)
            } else {
                (2, 3)
            };
            chart
                .draw_series(DashedLineSeries::new(
                    pts.clone(),
                    dash,
                    gap,
                    color.stroke_width(2),
                ))
                .map_err(err)?
                .label(label.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 8, y)], color.stroke_width(2))
                });
        } else {
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                .map_err(err)?
                .label(label.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(err)?;
    }
    if let Some((label, pts)) = reference {
        chart
            .draw_series(DashedLineSeries::new(pts, 3, 3, BLACK.stroke_width(1)))
            .map_err(err)?
            .label(label)
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(1)));
    }
    chart
        .configure_series_labels()
        .label_font((FONT, 12))
        .background_style(WHITE.mix(0.7))
        .border_style(BLACK)
        .position(SeriesLabelPosition::MiddleRight)
        .draw()
        .map_err(err)
}

fn draw_ryu_park<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    rows: &[&MountRow],
) -> Result<()> {
    root.fill(&WHITE).map_err(err)?;
    let panels = root.split_evenly((1, 2));
    for (area, ending) in panels.iter().zip([Ending::Clean, Ending::Cut]) {
        let these: Vec<&MountRow> = rows
            .iter()
            .copied()
            .filter(|r| r.ending == ending)
            .collect();
        let caption = match ending {
            Ending::Clean => "after a clean unmount",
            Ending::Cut => "after a power cut (cuts over a checkpoint cycle)",
        };
        draw_panel(
            area,
            caption,
            "Data stored, MiB",
            &lines_of(&these, |r| r.stored_mib, ending == Ending::Cut),
            None,
        )?;
    }
    root.present().map_err(err)
}

fn draw_frash<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, rows: &[&MountRow]) -> Result<()> {
    root.fill(&WHITE).map_err(err)?;
    let panels = root.split_evenly((1, 2));
    let max_part = rows.iter().map(|r| r.partition_mib).fold(0.0, f64::max);
    let first = rows.iter().map(|r| r.stored_mib).fold(f64::MAX, f64::min);
    for (area, full) in panels.iter().zip([false, true]) {
        // Per partition, its lowest fill (the 2 MiB row) or its highest (full), clean.
        let these: Vec<&MountRow> = rows
            .iter()
            .copied()
            .filter(|r| r.ending == Ending::Clean && ((r.fill_pct >= 80.0) == full))
            .collect();
        let caption = if full {
            "partition full (clean unmount)".to_string()
        } else {
            format!("partition holding {first:.0} MiB (clean unmount)")
        };
        draw_panel(
            area,
            &caption,
            "Partition, MiB",
            &lines_of(&these, |r| r.partition_mib, false),
            Some((
                "FRASH: YAFFS 8.11 ms/MB",
                vec![
                    (0.0, 1.0),
                    (max_part, (max_part * FRASH_YAFFS_MS_PER_MB).max(1.0)),
                ],
            )),
        )?;
    }
    root.present().map_err(err)
}

/// Writes `mount-ryu-park` and `mount-frash` (PNG and SVG) into `dir` for the experiments
/// the rows hold, and returns the files written.
pub fn plot(rows: &[MountRow], dir: &Path) -> Result<Vec<PathBuf>> {
    register_font()?;
    std::fs::create_dir_all(dir)?;
    let mut files = Vec::new();
    let size = (1400, 560);
    let ryu: Vec<&MountRow> = rows.iter().filter(|r| r.experiment == "ryu-park").collect();
    if !ryu.is_empty() {
        let png = dir.join("mount-ryu-park.png");
        draw_ryu_park(BitMapBackend::new(&png, size).into_drawing_area(), &ryu)?;
        let svg = dir.join("mount-ryu-park.svg");
        draw_ryu_park(SVGBackend::new(&svg, size).into_drawing_area(), &ryu)?;
        files.extend([png, svg]);
    }
    let frash: Vec<&MountRow> = rows.iter().filter(|r| r.experiment == "frash").collect();
    if !frash.is_empty() {
        let png = dir.join("mount-frash.png");
        draw_frash(BitMapBackend::new(&png, size).into_drawing_area(), &frash)?;
        let svg = dir.join("mount-frash.svg");
        draw_frash(SVGBackend::new(&svg, size).into_drawing_area(), &frash)?;
        files.extend([png, svg]);
    }
    Ok(files)
}
