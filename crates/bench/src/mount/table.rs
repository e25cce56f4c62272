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
        "goal: the same fill on larger parts should mount in the same time (checkpoint)",
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
     CONFIG      MOUNT ms  1ST WRITE ms  PAGE READS  HEAP KiB  RESTORED  ms/MiB\n"
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
        "{:<11} {:<23} {:<5} {:<7} {:<7} {:>5.1}  {:>10.1}  {:>6}  {:<10} {:>9.2}  {:>12.2}  {:>10}  {:>8.1}  {:<8}  {:>6.3}\n",
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
        r.first_write_ms,
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
         taken after a final sync; first write: a 4 KiB file created, written and synced (fs), \
         one sector written and flushed (ftl)\n",
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
        s.push_str("\ngoals (checkpoint mounts; time and heap on nand-1g, flatness across the part sizes run):\n");
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

/// The goals, each with what was measured and whether it is met.
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
    let mut out = Vec::new();
    let full: Vec<&&MountRow> = ckpt.iter().filter(|r| r.fill_pct >= 85.0).collect();
    if let Some(worst) = full.iter().map(|r| r.mount_ms).reduce(f64::max) {
        out.push(format!(
            "mount <= {GOAL_MOUNT_MS} ms at 90% full, clean or cut: worst {worst:.1} ms: {}",
            met(worst <= GOAL_MOUNT_MS)
        ));
    }
    if let Some(worst) = ckpt.iter().map(|r| r.mount_first_write_ms).reduce(f64::max) {
        out.push(format!(
            "mount + first write <= {GOAL_MOUNT_FIRST_WRITE_MS} ms: worst {worst:.1} ms: {}",
            met(worst <= GOAL_MOUNT_FIRST_WRITE_MS)
        ));
    }
    // Flatness over the fill levels: per layer, file set and ending.
    let mut worst_spread: Option<(f64, String)> = None;
    for r in ckpt.iter().filter(|r| r.experiment == "ryu-park") {
        let group: Vec<f64> = ckpt
            .iter()
            .filter(|o| {
                o.experiment == "ryu-park"
                    && o.mode == r.mode
                    && o.file_set == r.file_set
                    && o.ending == r.ending
            })
            .map(|o| o.mount_ms)
            .collect();
        let spread = spread(&group);
        if worst_spread.as_ref().is_none_or(|(w, _)| spread > *w) {
            worst_spread = Some((
                spread,
                format!(
                    "{} {} {}",
                    r.mode.name(),
                    r.file_set.map_or("sectors", |f| f.label()),
                    r.ending.name()
                ),
            ));
        }
    }
    if let Some((w, at)) = worst_spread {
        out.push(format!(
            "flat within ±{:.0}% from 10% to 90% full: worst spread ±{:.1}% ({at}): {}",
            GOAL_FLAT * 100.0,
            w * 100.0,
            met(w <= GOAL_FLAT)
        ));
    }
    // Flatness across sizes: the flat rows, checkpoint, per layer and ending.
    let flat: Vec<&MountRow> = rows
        .iter()
        .filter(|r| r.experiment == "flat" && r.config == "checkpoint")
        .collect();
    for mode in [super::Mode::Fs, super::Mode::Ftl] {
        for ending in [Ending::Clean, Ending::Cut] {
            let group: Vec<f64> = flat
                .iter()
                .filter(|r| r.mode == mode && r.ending == ending)
                .map(|r| r.mount_ms)
                .collect();
            if group.len() < 2 {
                continue;
            }
            let w = spread(&group);
            out.push(format!(
                "flat within ±{:.0}% across part sizes ({} {}): spread ±{:.1}% ({}): {}",
                GOAL_FLAT * 100.0,
                mode.name(),
                ending.name(),
                w * 100.0,
                group
                    .iter()
                    .map(|m| format!("{m:.1}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                met(w <= GOAL_FLAT)
            ));
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
