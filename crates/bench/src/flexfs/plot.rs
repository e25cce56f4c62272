//! Plots of a run, as PNG and SVG, like FlexFS's Figs 10–12: write throughput against
//! utilization, a panel per experiment, a line per setting.

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

use super::FlexfsRow;
use crate::error::Result;
use crate::plot::{err, register_font, COLORS, FONT};

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    experiment: &str,
    rows: &[&FlexfsRow],
) -> Result<()> {
    let max_y = rows
        .iter()
        .flat_map(|r| r.curve.iter().map(|p| p.1 / 1e3))
        .fold(1.0f64, f64::max)
        * 1.15;
    let mut chart = ChartBuilder::on(area)
        .caption(experiment, (FONT, 18))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..100f64, 0f64..max_y)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("Utilization of MLC capacity, %")
        .y_desc("Write throughput, MB/s of device time")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .draw()
        .map_err(err)?;
    for (i, r) in rows.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let pts: Vec<(f64, f64)> = r.curve.iter().map(|&(u, k)| (u, k / 1e3)).collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(r.config)
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
    for r in rows {
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
