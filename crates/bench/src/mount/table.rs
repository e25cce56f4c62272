//! The rows as a table, with the papers' figures and the goals beside them.

use super::{Ending, MountReport, MountRow};

/// The papers' figures, quoted in the table's header.
pub const PAPERS: &[(&str, &str)] = &[
    (
        "ryu-park",
        "Ryu & Park: YAFFS2's mount (a scan) grows linearly with the data stored; with their \
         startup area the startup stays under 9 s at 1 GB",
    ),
    (
        "frash",
        "FRASH (Kim et al.): YAFFS's full-scan mount, 8.11 ms per MB of partition",
    ),
    (
        "flat",
        "goal: the same fill on larger parts, and the same data on a larger part, should \
         mount in the same time (checkpoint)",
    ),
    (
        "seek",
        "Ryu & Park's seek test: 1-byte reads at 0, 90, 20, 70, 40, 50, 60, 30, 80, 10, 100% \
         of a 321 MB file, right after the mount (unloaded) and again (loaded)",
    ),
];

/// The goals for a mount from the checkpoint on the 1 GiB NAND.
pub const GOAL_MOUNT_MS: f64 = 50.0;
/// Mount and first write together, ms.
pub const GOAL_MOUNT_FIRST_WRITE_MS: f64 = 60.0;
/// Heap of the mount, bytes.
pub const GOAL_HEAP_BYTES: u64 = 256 * 1024;
/// Spread allowed of the mount time from 10% to 90% full, and across sizes.
pub const GOAL_FLAT: f64 = 0.10;

fn heading() -> String {
    "EXPERIMENT  PART                    MODE  FILES   ENDING  FILL%  STORED MiB   FILES  \
     CONFIG      MOUNT ms  CUTS   MEAN ms  1ST WRITE ms  SWEEP ms  PAGE READS  HEAP KiB  \
     RESTORED  ms/MiB\n"
        .into()
}

fn part_label(r: &MountRow) -> String {
    if r.preset_blocks_default() {
        r.preset.clone()
    } else {
        format!("{}[{} blocks]", r.preset, r.blocks)
    }
}

fn line(r: &MountRow) -> String {
    let part = part_label(r);
    format!(
        "{:<11} {:<23} {:<5} {:<7} {:<7} {:>5.1}  {:>10.1}  {:>6}  {:<10} {:>9.2}  {:>4}  {:>8}  {:>12.2}  {:>8}  {:>10}  {:>8.1}  {:<8}  {:>6.3}\n",
        r.experiment,
        part,
        r.mode.name(),
        r.file_set.map_or("-", |f| f.label()),
        r.ending.name(),
        r.fill_pct,
        r.stored_mib,
        r.files,
        r.config,
        r.mount_ms,
        r.cut_points.map_or("-".into(), |n| n.to_string()),
        r.mount_ms_mean.map_or("-".into(), |m| format!("{m:.2}")),
        r.first_write_ms,
        r.sweep_ms.map_or("-".into(), |m| format!("{m:.2}")),
        r.page_reads,
        r.heap_bytes as f64 / 1024.0,
        if r.restored { "yes" } else { "no" },
        r.ms_per_mib,
    )
}

impl MountRow {
    /// Whether the part has its preset's own number of blocks.
    fn preset_blocks_default(&self) -> bool {
        flash::preset::lookup(&self.preset).is_ok_and(|p| match p.spec {
            flash::DeviceSpec::Nand(s) => s.blocks == self.blocks,
            _ => false,
        })
    }
}

/// The table: a header naming the configurations, then per experiment the papers' figure
/// and its rows (the scan, the baseline, before the checkpoint at every step), then the
/// goals as measured.
pub fn table(report: &MountReport, heap_counted: bool) -> String {
    let mut s = String::new();
    s.push_str(
        "mount time in device time; config `scan`: LogConfig::scan_mount (every header and tag \
         read, the baseline), `checkpoint`: the default configuration (mount from the \
         checkpoint, rolling forward after a power cut); clean: after unmount, cut: device \
         taken after a sync, without the close checkpoint: the checkpoint mount at CUTS points \
         spread over a checkpoint cycle, and every 16 slots' worth around its end (the \
         volume's data rewritten with the same bytes, synced every 16 slots' worth), its row \
         the worst of them (MOUNT ms, 1ST WRITE ms, \
         PAGE READS; HEAP KiB the largest) beside their mean (MEAN ms), the scan at the first \
         only (its cost does not depend on the cycle); first write: a 4 KiB file created, \
         written and synced (fs), one sector written and flushed (ftl); sweep (fs): the \
         look for data of free blocks a cut left, which a mount from the checkpoint leaves \
         to the commits after it (a map page each), finished at once after the first write \
         (on a cut row the largest of its cuts)\n",
    );
    if !heap_counted {
        s.push_str("heap not measured: the counting allocator is not installed\n");
    }
    for note in &report.notes {
        s.push_str(&format!("note: {note}\n"));
    }
    for &(exp, paper) in PAPERS {
        let rows: Vec<&MountRow> = report.rows.iter().filter(|r| r.experiment == exp).collect();
        if rows.is_empty() {
            continue;
        }
        s.push('\n');
        s.push_str(&format!("{exp}: {paper}\n"));
        if exp == "seek" {
            s.push_str(
                "PART                    FILE MiB  CONFIG      MOUNT ms  PAGE READS  MAPPING   SEEK ms\n",
            );
            for r in rows {
                s.push_str(&format!(
                    "{:<23} {:>8.1}  {:<10} {:>9.2}  {:>10}  {:<8}  {:>7.3}\n",
                    part_label(r),
                    r.stored_mib,
                    r.config,
                    r.mount_ms,
                    r.page_reads,
                    r.mapping.unwrap_or("-"),
                    r.seek_s.unwrap_or(0.0) * 1e3
                ));
            }
            continue;
        }
        s.push_str(&heading());
        for r in rows {
            s.push_str(&line(r));
        }
    }
    let goals = goals(&report.rows, heap_counted);
    if !goals.is_empty() {
        s.push_str(
            "\ngoals (checkpoint mounts; time and heap on nand-1g, flatness across the part \
             sizes run; after a cut, the worst of the cuts over a checkpoint cycle):\n",
        );
        for g in goals {
            s.push_str(&format!("  {g}\n"));
        }
    }
    s
}

fn met(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "NOT met"
    }
}

/// Mount time of a row, ms, or (`mean`) the mean over its cuts where it has them.
fn mount_ms(r: &MountRow, mean: bool) -> f64 {
    if mean {
        r.mount_ms_mean.unwrap_or(r.mount_ms)
    } else {
        r.mount_ms
    }
}

/// A row's layer and data: `fs 359.5k` or `ftl sectors`.
fn data_label(r: &MountRow) -> String {
    format!(
        "{} {}",
        r.mode.name(),
        r.file_set.map_or("sectors", |f| f.label())
    )
}

/// The goals, each with what was measured and whether it is met. A `cut` row's
/// figures are the worst of its cuts over a checkpoint cycle, so every goal after a cut is
/// judged on the worst cut, not on where one cut happened to fall.
pub fn goals(rows: &[MountRow], heap_counted: bool) -> Vec<String> {
    let ckpt: Vec<&MountRow> = rows
        .iter()
        .filter(|r| {
            r.config == "checkpoint"
                && r.experiment != "seek"
                && r.preset == "nand-1g"
                && r.blocks == 8192
        })
        .collect();
    let cycle_note = |ending: Ending| match ending {
        Ending::Clean => "",
        Ending::Cut => ", the worst of each cycle",
    };
    let mut out = Vec::new();
    let full: Vec<&&MountRow> = ckpt.iter().filter(|r| r.fill_pct >= 85.0).collect();
    if let Some(worst) = full.iter().map(|r| r.mount_ms).reduce(f64::max) {
        out.push(format!(
            "mount <= {GOAL_MOUNT_MS} ms at 90% full, clean or cut (cut: the worst of a \
             checkpoint cycle): worst {worst:.1} ms: {}",
            met(worst <= GOAL_MOUNT_MS)
        ));
    }
    if let Some(worst) = ckpt.iter().map(|r| r.mount_first_write_ms).reduce(f64::max) {
        out.push(format!(
            "mount + first write <= {GOAL_MOUNT_FIRST_WRITE_MS} ms: worst {worst:.1} ms: {}",
            met(worst <= GOAL_MOUNT_FIRST_WRITE_MS)
        ));
    }
    // Flatness over the fill levels: per layer, file set and ending; after a cut on the
    // worst of each cycle, with the spread of the cycles' means beside it.
    for ending in [Ending::Clean, Ending::Cut] {
        let mut worst: Option<(f64, f64, String)> = None;
        let series: Vec<&&MountRow> = ckpt
            .iter()
            .filter(|r| r.experiment == "ryu-park" && r.ending == ending)
            .collect();
        for r in &series {
            let group: Vec<&&&MountRow> = series
                .iter()
                .filter(|o| o.mode == r.mode && o.file_set == r.file_set)
                .collect();
            let at_worst = spread(&group.iter().map(|o| mount_ms(o, false)).collect::<Vec<_>>());
            let of_means = spread(&group.iter().map(|o| mount_ms(o, true)).collect::<Vec<_>>());
            if worst.as_ref().is_none_or(|(w, _, _)| at_worst > *w) {
                let range = group
                    .iter()
                    .map(|o| o.mount_ms)
                    .fold((f64::MAX, f64::MIN), |(lo, hi), m| (lo.min(m), hi.max(m)));
                worst = Some((
                    at_worst,
                    of_means,
                    format!("{}, {:.1}-{:.1} ms", data_label(r), range.0, range.1),
                ));
            }
        }
        if let Some((w, m, at)) = worst {
            let means = match ending {
                Ending::Clean => String::new(),
                Ending::Cut => format!("; the cycles' means: ±{:.1}%", m * 100.0),
            };
            out.push(format!(
                "flat within ±{:.0}% from 10% to 90% full ({}{}): worst spread ±{:.1}% ({at}){means}: {}",
                GOAL_FLAT * 100.0,
                ending.name(),
                cycle_note(ending),
                w * 100.0,
                met(w <= GOAL_FLAT)
            ));
        }
    }
    // Flatness across sizes: the flat rows at the same fill, checkpoint, per layer and
    // ending.
    let flat: Vec<&MountRow> = rows
        .iter()
        .filter(|r| r.experiment == "flat" && r.config == "checkpoint")
        .collect();
    // Per preset, parts of the same pages and timing, sizes apart: the goal, that the cost
    // does not grow with the part. Then every part, whatever its pages, for information: a
    // part of smaller, faster pages mounts faster for that alone, in more page reads.
    let mut presets: Vec<&str> = flat.iter().map(|r| r.preset.as_str()).collect();
    presets.sort_unstable();
    presets.dedup();
    for mode in [super::Mode::Fs, super::Mode::Ftl] {
        for ending in [Ending::Clean, Ending::Cut] {
            let of = |preset: Option<&str>| -> Vec<&MountRow> {
                flat.iter()
                    .copied()
                    .filter(|r| r.mode == mode && r.ending == ending && r.same_data_as.is_none())
                    .filter(|r| preset.is_none_or(|p| r.preset == p))
                    .collect()
            };
            let mut groups: Vec<(Option<&str>, Vec<&MountRow>)> =
                presets.iter().map(|&p| (Some(p), of(Some(p)))).collect();
            if presets.len() > 1 {
                groups.push((None, of(None)));
            }
            for (preset, group) in groups {
                if group.len() < 2 {
                    continue;
                }
                let times: Vec<f64> = group.iter().map(|r| r.mount_ms).collect();
                let w = spread(&times);
                let (what, verdict) = match preset {
                    Some(p) => (format!("{p}'s pages"), met(w <= GOAL_FLAT).to_string()),
                    None => (
                        "every part, whatever its pages".into(),
                        "for information (parts of other pages and timing)".into(),
                    ),
                };
                out.push(format!(
                    "flat within ±{:.0}% across part sizes, {what} ({} {}{}): spread ±{:.1}% \
                     ({}): {verdict}",
                    GOAL_FLAT * 100.0,
                    mode.name(),
                    ending.name(),
                    cycle_note(ending),
                    w * 100.0,
                    group
                        .iter()
                        .map(|r| format!(
                            "{} {:.1} ms, {} reads",
                            part_label(r),
                            r.mount_ms,
                            r.page_reads
                        ))
                        .collect::<Vec<_>>()
                        .join(", "),
                ));
            }
        }
    }
    if heap_counted {
        if let Some(worst) = ckpt.iter().map(|r| r.heap_bytes).max() {
            out.push(format!(
                "heap <= {} KiB: worst {:.0} KiB: {}",
                GOAL_HEAP_BYTES / 1024,
                worst as f64 / 1024.0,
                met(worst <= GOAL_HEAP_BYTES)
            ));
        }
    }
    // The same data on a larger part: mount and heap within the flat goal of the part
    // whose data it holds.
    let mut bigs: Vec<&&MountRow> = flat.iter().filter(|r| r.same_data_as.is_some()).collect();
    bigs.sort_by_key(|r| (r.mode == super::Mode::Ftl, r.ending == Ending::Cut));
    for big in bigs {
        let Some(like) = flat.iter().find(|r| {
            r.same_data_as.is_none()
                && Some(part_label(r)) == big.same_data_as
                && r.mode == big.mode
                && r.ending == big.ending
        }) else {
            continue;
        };
        let rel = |a: f64, b: f64| if a > 0.0 { (b - a) / a } else { 0.0 };
        let dm = rel(like.mount_ms, big.mount_ms);
        let mut ok = dm.abs() <= GOAL_FLAT;
        let mut line = format!(
            "{} within ±{:.0}% of {} with the same data ({} {}{}): mount {:.1} -> {:.1} ms \
             ({:+.1}%)",
            part_label(big),
            GOAL_FLAT * 100.0,
            part_label(like),
            big.mode.name(),
            big.ending.name(),
            cycle_note(big.ending),
            like.mount_ms,
            big.mount_ms,
            dm * 100.0
        );
        if heap_counted {
            let dh = rel(like.heap_bytes as f64, big.heap_bytes as f64);
            ok &= dh.abs() <= GOAL_FLAT;
            line.push_str(&format!(
                ", heap {:.0} -> {:.0} KiB ({:+.1}%)",
                like.heap_bytes as f64 / 1024.0,
                big.heap_bytes as f64 / 1024.0,
                dh * 100.0
            ));
        }
        line.push_str(&format!(": {}", met(ok)));
        out.push(line);
    }
    out
}

/// Half the range over the mean: the ± by which the values stray from their middle.
fn spread(v: &[f64]) -> f64 {
    let (Some(lo), Some(hi)) = (
        v.iter().copied().reduce(f64::min),
        v.iter().copied().reduce(f64::max),
    ) else {
        return 0.0;
    };
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    if mean <= 0.0 {
        return 0.0;
    }
    (hi - lo) / 2.0 / mean
}
