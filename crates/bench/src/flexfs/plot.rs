//! Plots of a run, as PNG and SVG, like FlexFS's figures, a panel per experiment and a
//! line per setting: write throughput against utilization (Figs 10–12), the CDF of write
//! response times (Fig 13), mean erases per block over time (Figs 14–15).

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

use super::FlexfsRow;
use crate::error::Result;
use crate::plot::{err, register_font, COLORS, FONT};

/// What a panel's axes show, by experiment: x label, y label, the factor the curve's y
/// values are drawn at, and whether x is drawn on a log scale (as log10 of the value).
fn axes(experiment: &str) -> (&'static str, &'static str, f64, bool) {
    match experiment {
        "response" => (
            "Write response time, µs of device time (log scale)",
            "Share of writes",
            1.0,
            true,
        ),
        "endurance" => (
            "Time, s of device time",
            "Mean erases per block",
            1.0,
            false,
        ),
        _ => (
            "Utilization of MLC capacity, %",
            "Write throughput, MB/s of device time",
            1e-3,
            false,
        ),
    }
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    experiment: &str,
    rows: &[&FlexfsRow],
) -> Result<()> {
    let (x_desc, y_desc, scale, log_x) = axes(experiment);
    let pts = |r: &FlexfsRow| -> Vec<(f64, f64)> {
        let x = |v: f64| if log_x { v.max(1.0).log10() } else { v };
        r.curve.iter().map(|&(v, y)| (x(v), y * scale)).collect()
    };
    let all: Vec<(f64, f64)> = rows.iter().flat_map(|r| pts(r)).collect();
    let (min_x, max_x) = match experiment {
        "response" => (
            all.iter().map(|p| p.0).fold(f64::MAX, f64::min).floor(),
            all.iter().map(|p| p.0).fold(1.0f64, f64::max).ceil(),
        ),
        "endurance" => (0.0, all.iter().map(|p| p.0).fold(1.0f64, f64::max) * 1.05),
        _ => (0.0, 100.0),
    };
    let max_y = all.iter().map(|p| p.1).fold(1.0f64, f64::max) * 1.15;
    let mut chart = ChartBuilder::on(area)
        .caption(experiment, (FONT, 18))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(min_x.min(max_x - 1.0)..max_x, 0f64..max_y)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&|v| {
            if log_x {
                format!("{:.0}", 10f64.powf(*v))
            } else {
                format!("{v:.0}")
            }
        })
        .y_label_formatter(&|v| format!("{v:.1}"))
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .draw()
        .map_err(err)?;
    for (i, r) in rows.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let pts = pts(r);
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(r.config.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .label_font((FONT, 12))
        .background_style(WHITE.mix(0.7))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerLeft)
        .draw()
        .map_err(err)
}

fn draw<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, rows: &[FlexfsRow]) -> Result<()> {
    root.fill(&WHITE).map_err(err)?;
    let mut experiments: Vec<&str> = Vec::new();
    // The trace has no curve.
    for r in rows.iter().filter(|r| !r.curve.is_empty()) {
        if !experiments.contains(&r.experiment) {
            experiments.push(r.experiment);
        }
    }
    let cols = experiments.len().clamp(1, 2);
    let panels = root.split_evenly((experiments.len().div_ceil(cols), cols));
    for (area, e) in panels.iter().zip(&experiments) {
        let these: Vec<&FlexfsRow> = rows.iter().filter(|r| r.experiment == *e).collect();
        draw_panel(area, e, &these)?;
    }
    root.present().map_err(err)
}

/// Writes `flexfs-throughput` (PNG and SVG) into `dir` and returns the files written.
pub fn plot(rows: &[FlexfsRow], dir: &Path) -> Result<Vec<PathBuf>> {
    register_font()?;
    std::fs::create_dir_all(dir)?;
    let size = (1400, 1000);
    let png = dir.join("flexfs-throughput.png");
    draw(BitMapBackend::new(&png, size).into_drawing_area(), rows)?;
    let svg = dir.join("flexfs-throughput.svg");
    draw(SVGBackend::new(&svg, size).into_drawing_area(), rows)?;
    Ok(vec![png, svg])
}
