//! Plots of a run, as PNG and SVG: throughput against cumulative MB written, one figure per
//! pattern (the paper's Figs 5-7), and the segment-utilization histogram after the
//! hot-and-cold run (Fig 8); and bar charts of any histogram ([`bar_chart`]).
//!
//! Text is drawn with DejaVu Sans, shipped in `assets/` (with its license) and embedded in
//! the binary, so PNGs render the same on machines without fonts.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{BenchError, Result};
use crate::kawaguchi::{Experiment, Row, HISTOGRAM_BINS};
use crate::workload::Pattern;

/// DejaVu Sans, the font of every plot.
static DEJAVU_SANS: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// The family name the plots use; registered on first use.
pub(crate) const FONT: &str = "sans-serif";

/// Registers the embedded font with plotters (once per process).
pub fn register_font() -> Result<()> {
    static DONE: OnceLock<bool> = OnceLock::new();
    let ok = *DONE.get_or_init(|| {
        plotters::style::register_font(FONT, FontStyle::Normal, DEJAVU_SANS).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(BenchError::Plot(
            "the embedded DejaVu Sans font could not be loaded".into(),
        ))
    }
}

pub(crate) fn err<E: std::fmt::Display>(e: E) -> BenchError {
    BenchError::Plot(e.to_string())
}

/// Draws a chart's legend: the series' labels in `size`-point type on a light box at
/// `position`.
pub(crate) fn draw_legend<'a, DB, CT>(
    chart: &mut ChartContext<'a, DB, CT>,
    size: u32,
    position: SeriesLabelPosition,
) -> Result<()>
where
    DB: DrawingBackend + 'a,
    CT: CoordTranslate,
{
    chart
        .configure_series_labels()
        .label_font((FONT, size))
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(position)
        .draw()
        .map_err(err)
}

pub(crate) const COLORS: [RGBColor; 6] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
];

/// Throughput of one pattern: a panel per (policy, head setting), a line per utilization;
/// the paper's average is a dashed line where it has one.
fn draw_throughput<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    pattern: Pattern,
    rows: &[&Row],
) -> Result<()> {
    root.fill(&WHITE).map_err(err)?;
    let mut configs: Vec<(&str, bool)> = Vec::new();
    for r in rows {
        if !configs.contains(&(r.policy, r.separate_head)) {
            configs.push((r.policy, r.separate_head));
        }
    }
    let mut utils: Vec<f64> = Vec::new();
    for r in rows {
        if !utils.iter().any(|u| (u - r.utilization).abs() < 1e-9) {
            utils.push(r.utilization);
        }
    }
    let preset = rows.first().map_or("", |r| r.preset.as_str());
    let title = format!(
        "{} write throughput vs MB written ({}, 4 KB writes)",
        match pattern {
            Pattern::Sequential => "Sequential",
            Pattern::Random => "Random",
            Pattern::HotCold => "Hot-and-cold 640-116",
        },
        preset
    );
    let root = root.titled(&title, (FONT, 26)).map_err(err)?;
    let max_mb = rows
        .iter()
        .flat_map(|r| r.samples.last())
        .map(|s| s.mb)
        .fold(1.0f64, f64::max);
    let max_kbps = rows
        .iter()
        .flat_map(|r| {
            r.samples
                .iter()
                .map(|s| s.kbps)
                .chain(r.paper_kbps)
                .collect::<Vec<_>>()
        })
        .fold(50.0f64, f64::max)
        * 1.6; // headroom for the legend
               // Policies down, head settings across.
    let mut policies: Vec<&str> = Vec::new();
    let mut heads: Vec<bool> = Vec::new();
    for &(p, h) in &configs {
        if !policies.contains(&p) {
            policies.push(p);
        }
        if !heads.contains(&h) {
            heads.push(h);
        }
    }
    let panels = root.split_evenly((policies.len().max(1), heads.len().max(1)));
    for (pi, &policy) in policies.iter().enumerate() {
        for (hi, &head) in heads.iter().enumerate() {
            let area = &panels[pi * heads.len() + hi];
            let caption = format!(
                "{policy}, {}",
                if head {
                    "separate cleaning head"
                } else {
                    "one head for writes and cleaning"
                }
            );
            let mut chart = ChartBuilder::on(area)
                .caption(caption, (FONT, 18))
                .margin(10)
                .x_label_area_size(40)
                .y_label_area_size(60)
                .build_cartesian_2d(0f64..max_mb, 0f64..max_kbps)
                .map_err(err)?;
            chart
                .configure_mesh()
                .x_desc("Cumulative MB written")
                .y_desc("Write throughput (KB/s)")
                .x_label_formatter(&|v| format!("{v:.0}"))
                .y_label_formatter(&|v| format!("{v:.0}"))
                .label_style((FONT, 13))
                .axis_desc_style((FONT, 14))
                .draw()
                .map_err(err)?;
            for (ui, &u) in utils.iter().enumerate() {
                let color = COLORS[ui % COLORS.len()];
                let Some(r) = rows.iter().find(|r| {
                    r.policy == policy
                        && r.separate_head == head
                        && (r.utilization - u).abs() < 1e-9
                }) else {
                    continue;
                };
                let pts: Vec<(f64, f64)> = r.samples.iter().map(|s| (s.mb, s.kbps)).collect();
                chart
                    .draw_series(LineSeries::new(pts, color.stroke_width(2)))
                    .map_err(err)?
                    .label(format!("{:.0}%", u * 100.0))
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                    });
                if let Some(p) = r.paper_kbps {
                    chart
                        .draw_series(DashedLineSeries::new(
                            vec![(0.0, p), (max_mb, p)],
                            6,
                            4,
                            color.stroke_width(1),
                        ))
                        .map_err(err)?
                        .label(format!("paper {:.0}% avg", u * 100.0))
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 8, y)], color.stroke_width(1))
                        });
                }
            }
            chart
                .configure_series_labels()
                .label_font((FONT, 13))
                .background_style(WHITE.mix(0.7))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperRight)
                .draw()
                .map_err(err)?;
        }
    }
    root.present().map_err(err)
}

/// Segment utilization after a run: a panel per row, segments by live fraction.
fn draw_histogram<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    rows: &[&Row],
) -> Result<()> {
    root.fill(&WHITE).map_err(err)?;
    let root = root.titled(title, (FONT, 24)).map_err(err)?;
    let cols = if rows.len() > 1 { 2 } else { 1 };
    let nrows = rows.len().div_ceil(cols).max(1);
    let panels = root.split_evenly((nrows, cols));
    let ymax = rows
        .iter()
        .flat_map(|r| r.utilization_histogram.iter().copied())
        .max()
        .unwrap_or(1)
        .max(1)
        + 1;
    for (r, area) in rows.iter().zip(panels.iter()) {
        let caption = format!(
            "{}, {} ({} free)",
            r.policy,
            if r.separate_head {
                "separate cleaning head"
            } else {
                "one head"
            },
            r.free_segments
        );
        let mut chart = ChartBuilder::on(area)
            .caption(caption, (FONT, 17))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(
                (0u32..HISTOGRAM_BINS as u32 - 1).into_segmented(),
                0u32..ymax,
            )
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_desc("Segment utilization (live fraction)")
            .y_desc("Number of segments")
            .x_label_formatter(&|v| match v {
                SegmentValue::Exact(i) | SegmentValue::CenterOf(i) => {
                    let w = 1.0 / HISTOGRAM_BINS as f64;
                    format!("{:.1}-{:.1}", *i as f64 * w, (*i + 1) as f64 * w)
                }
                SegmentValue::Last => String::new(),
            })
            .label_style((FONT, 11))
            .axis_desc_style((FONT, 14))
            .draw()
            .map_err(err)?;
        chart
            .draw_series(
                Histogram::vertical(&chart)
                    .style(COLORS[0].filled())
                    .margin(3)
                    .data(
                        r.utilization_histogram
                            .iter()
                            .enumerate()
                            .map(|(i, &n)| (i as u32, n)),
                    ),
            )
            .map_err(err)?;
    }
    root.present().map_err(err)
}

/// Draws every plot of a run into `dir` (created if missing) and returns the files written:
/// `kawaguchi-throughput-<pattern>.{png,svg}` for each pattern run, and
/// `kawaguchi-segment-utilization.{png,svg}` for the hot-and-cold rows at their highest
/// utilization (or the last pattern's, if hot-and-cold was not run).
pub fn plot_all(rows: &[Row], dir: &Path) -> Result<Vec<PathBuf>> {
    register_font()?;
    std::fs::create_dir_all(dir)?;
    let mut files = Vec::new();
    let mut patterns: Vec<Pattern> = Vec::new();
    for r in rows {
        if let Experiment::Write(p) = r.experiment {
            if !patterns.contains(&p) {
                patterns.push(p);
            }
        }
    }
    for &p in &patterns {
        let these: Vec<&Row> = rows
            .iter()
            .filter(|r| r.experiment == Experiment::Write(p))
            .collect();
        let heads = {
            let mut h: Vec<bool> = these.iter().map(|r| r.separate_head).collect();
            h.dedup();
            h.sort();
            h.dedup();
            h.len()
        };
        let policies = {
            let mut v: Vec<&str> = Vec::new();
            for r in &these {
                if !v.contains(&r.policy) {
                    v.push(r.policy);
                }
            }
            v.len()
        };
        let size = (
            560 * heads.max(1) as u32 + 40,
            360 * policies.max(1) as u32 + 60,
        );
        let name = format!("kawaguchi-throughput-{}", p.name());
        let png = dir.join(format!("{name}.png"));
        draw_throughput(
            BitMapBackend::new(&png, size).into_drawing_area(),
            p,
            &these,
        )?;
        let svg = dir.join(format!("{name}.svg"));
        draw_throughput(SVGBackend::new(&svg, size).into_drawing_area(), p, &these)?;
        files.push(png);
        files.push(svg);
    }
    let hist_pattern = if patterns.contains(&Pattern::HotCold) {
        Some(Pattern::HotCold)
    } else {
        patterns.last().copied()
    };
    if let Some(p) = hist_pattern {
        let these: Vec<&Row> = rows
            .iter()
            .filter(|r| r.experiment == Experiment::Write(p))
            .collect();
        let top = these.iter().map(|r| r.utilization).fold(0.0, f64::max);
        let these: Vec<&Row> = these
            .into_iter()
            .filter(|r| (r.utilization - top).abs() < 1e-9)
            .collect();
        if !these.is_empty() {
            let title = format!(
                "Segment utilization after the {} test at {:.0}% ({:.1} MB written)",
                if p == Pattern::HotCold {
                    "640-116".to_string()
                } else {
                    p.name().to_string()
                },
                top * 100.0,
                these[0].mb_written
            );
            let cols = if these.len() > 1 { 2 } else { 1 };
            let size = (
                520 * cols as u32 + 40,
                320 * these.len().div_ceil(cols) as u32 + 60,
            );
            let name = "kawaguchi-segment-utilization";
            let png = dir.join(format!("{name}.png"));
            draw_histogram(
                BitMapBackend::new(&png, size).into_drawing_area(),
                &title,
                &these,
            )?;
            let svg = dir.join(format!("{name}.svg"));
            draw_histogram(
                SVGBackend::new(&svg, size).into_drawing_area(),
                &title,
                &these,
            )?;
            files.push(png);
            files.push(svg);
        }
    }
    Ok(files)
}

/// A bar chart: one bar per `(label, value)`, labels along the x axis.
fn draw_bars<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    bars: &[(String, u64)],
) -> Result<()> {
    root.fill(&WHITE).map_err(err)?;
    let root = root.titled(title, (FONT, 22)).map_err(err)?;
    let n = bars.len().max(1) as u32;
    let ymax = bars.iter().map(|b| b.1).max().unwrap_or(0).max(1);
    // Headroom above the tallest bar, and whole numbers on the axis.
    let ymax = ymax + ymax.div_ceil(10);
    let mut chart = ChartBuilder::on(&root)
        .margin(15)
        .x_label_area_size(50)
        .y_label_area_size(60)
        .build_cartesian_2d((0u32..n - 1).into_segmented(), 0u64..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_labels(bars.len().max(1))
        .x_label_formatter(&|v| match v {
            SegmentValue::Exact(i) | SegmentValue::CenterOf(i) => bars
                .get(*i as usize)
                .map(|b| b.0.clone())
                .unwrap_or_default(),
            SegmentValue::Last => String::new(),
        })
        .y_label_formatter(&|v| format!("{v}"))
        .label_style((FONT, 12))
        .axis_desc_style((FONT, 14))
        .draw()
        .map_err(err)?;
    chart
        .draw_series(
            Histogram::vertical(&chart)
                .style(COLORS[0].filled())
                .margin(3)
                .data(bars.iter().enumerate().map(|(i, b)| (i as u32, b.1))),
        )
        .map_err(err)?;
    root.present().map_err(err)
}

/// Writes a bar chart as `<dir>/<name>.png` and `<dir>/<name>.svg` (creating `dir` if
/// missing) and returns the two files: one bar per `(label, value)`, e.g. the rows of a
/// histogram.
pub fn bar_chart(
    dir: &Path,
    name: &str,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    bars: &[(String, u64)],
) -> Result<Vec<PathBuf>> {
    register_font()?;
    std::fs::create_dir_all(dir)?;
    let size = (160 + 60 * bars.len().max(8) as u32, 420);
    let png = dir.join(format!("{name}.png"));
    draw_bars(
        BitMapBackend::new(&png, size).into_drawing_area(),
        title,
        x_desc,
        y_desc,
        bars,
    )?;
    let svg = dir.join(format!("{name}.svg"));
    draw_bars(
        SVGBackend::new(&svg, size).into_drawing_area(),
        title,
        x_desc,
        y_desc,
        bars,
    )?;
    Ok(vec![png, svg])
}

/// One panel of a grouped bar chart: groups along the x axis (e.g. devices), one bar per
/// series in each group (e.g. configurations), and reference lines (e.g. a paper's figure).
#[derive(Debug, Clone, PartialEq)]
pub struct BarPanel {
    /// The panel's caption.
    pub title: String,
    /// Group labels, left to right.
    pub groups: Vec<String>,
    /// Series: a name and one value per group (`None`: no bar, "n/a" drawn instead).
    pub series: Vec<(String, Vec<Option<f64>>)>,
    /// Horizontal reference lines: label and value, drawn dashed.
    pub references: Vec<(String, f64)>,
}

/// Grouped bars: a panel per [`BarPanel`], side by side, with a common y axis.
fn draw_grouped<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    y_desc: &str,
    y_max: f64,
    panels: &[BarPanel],
) -> Result<()> {
    root.fill(&WHITE).map_err(err)?;
    let root = root.titled(title, (FONT, 24)).map_err(err)?;
    let areas = root.split_evenly((1, panels.len().max(1)));
    for (p, area) in panels.iter().zip(areas.iter()) {
        let groups = p.groups.len().max(1);
        let series = p.series.len().max(1);
        let mut chart = ChartBuilder::on(area)
            .caption(&p.title, (FONT, 18))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..groups as f64, 0f64..y_max)
            .map_err(err)?;
        // Ticks fall on the halves, the groups' centres, where the group names go.
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(2 * groups + 1)
            .x_label_formatter(&|v| {
                let i = v.floor();
                if (v - i - 0.5).abs() < 1e-6 {
                    p.groups.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .y_desc(y_desc)
            .y_label_formatter(&|v| format!("{v}"))
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 14))
            .draw()
            .map_err(err)?;
        let width = 0.8 / series as f64;
        for (si, (name, values)) in p.series.iter().enumerate() {
            let color = COLORS[si % COLORS.len()];
            let bars: Vec<Rectangle<(f64, f64)>> = values
                .iter()
                .enumerate()
                .filter_map(|(g, v)| {
                    let x0 = g as f64 + 0.1 + si as f64 * width;
                    v.map(|v| {
                        Rectangle::new(
                            [(x0, 0.0), (x0 + width * 0.9, v.min(y_max))],
                            color.filled(),
                        )
                    })
                })
                .collect();
            chart
                .draw_series(bars)
                .map_err(err)?
                .label(name.clone())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
            let missing: Vec<Text<(f64, f64), String>> = values
                .iter()
                .enumerate()
                .filter(|(_, v)| v.is_none())
                .map(|(g, _)| {
                    let x0 = g as f64 + 0.1 + si as f64 * width;
                    Text::new(
                        "n/a".to_string(),
                        (x0, y_max * 0.02),
                        (FONT, 11).into_font(),
                    )
                })
                .collect();
            chart.draw_series(missing).map_err(err)?;
        }
        for (ri, (label, v)) in p.references.iter().enumerate() {
            let color = RGBColor(0x40, 0x40, 0x40);
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(0.0, *v), (groups as f64, *v)],
                    6,
                    4,
                    color.stroke_width(1 + ri as u32 % 2),
                ))
                .map_err(err)?
                .label(label.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 12, y)], color.stroke_width(1))
                });
        }
        draw_legend(&mut chart, 12, SeriesLabelPosition::UpperRight)?;
    }
    root.present().map_err(err)
}

/// Writes a grouped bar chart as `<dir>/<name>.png` and `<dir>/<name>.svg` (creating `dir`
/// if missing) and returns the two files: the panels side by side, a y axis from 0 to
/// `y_max` (`None`: a little above the tallest bar or reference line).
pub fn grouped_bar_chart(
    dir: &Path,
    name: &str,
    title: &str,
    y_desc: &str,
    y_max: Option<f64>,
    panels: &[BarPanel],
) -> Result<Vec<PathBuf>> {
    register_font()?;
    std::fs::create_dir_all(dir)?;
    let top = y_max.unwrap_or_else(|| {
        let m = panels
            .iter()
            .flat_map(|p| {
                p.series
                    .iter()
                    .flat_map(|s| s.1.iter().flatten().copied())
                    .chain(p.references.iter().map(|r| r.1))
            })
            .fold(0.0f64, f64::max);
        if m > 0.0 {
            m * 1.35
        } else {
            1.0
        }
    });
    let size = (40 + 520 * panels.len().max(1) as u32, 480);
    let png = dir.join(format!("{name}.png"));
    draw_grouped(
        BitMapBackend::new(&png, size).into_drawing_area(),
        title,
        y_desc,
        top,
        panels,
    )?;
    let svg = dir.join(format!("{name}.svg"));
    draw_grouped(
        SVGBackend::new(&svg, size).into_drawing_area(),
        title,
        y_desc,
        top,
        panels,
    )?;
    Ok(vec![png, svg])
}
