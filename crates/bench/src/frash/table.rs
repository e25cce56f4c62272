//! The rows as tables, the paper's figures beside ours, and the goals as measured.

use super::{Config, FrashOptions, FrashRow};
use crate::report::columns;

/// FRASH's figure for YAFFS's mount (a scan), ms per MB of partition.
pub const PAPER_YAFFS_MS_PER_MB: f64 = 8.11;
/// FRASH's figure for its own mount, ms per MB of partition.
pub const PAPER_FRASH_MS_PER_MB: f64 = 1.62;
/// The goal: a FRASH mount at most this long, ms of device time, at any size and fill.
pub const GOAL_MOUNT_MS: f64 = 1.0;
/// The goal: small-file writes at least this many times NAND-only's.
pub const GOAL_SMALL_WRITE_RATIO: f64 = 1.5;
/// What "equal" allows for large reads and writes, a share either way.
pub const EQUAL_WITHIN: f64 = 0.05;

/// The paper's figures for the operations (§7.3, §7.4), by op.
fn paper_op(op: &str, large: bool) -> &'static str {
    match (op, large) {
        ("create", _) => "FRASH 5-10% slower than YAFFS",
        ("delete", _) => "FRASH 3-6% slower than YAFFS",
        ("read", true) => "equal (lmdd: +0.2%)",
        ("write", true) => "equal (lmdd: -1.1%)",
        (_, false) => "equal (IOZone)",
        _ => "",
    }
}

fn configs(rows: &[FrashRow]) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = Vec::new();
    for r in rows {
        if !v.contains(&r.config) {
            v.push(r.config);
        }
    }
    v
}

fn f2(v: f64) -> String {
    format!("{v:.2}")
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

/// The row of `config` measured with `like`'s settings (its partition, file size, step,
/// ending, op and sync).
fn peer<'a>(rows: &'a [FrashRow], like: &FrashRow, config: &str) -> Option<&'a FrashRow> {
    rows.iter().find(|r| {
        r.config == config
            && r.experiment == like.experiment
            && r.blocks == like.blocks
            && r.file_kb == like.file_kb
            && r.full == like.full
            && r.ending == like.ending
            && r.op == like.op
            && r.sync == like.sync
    })
}

/// The mount rows of one ending, a line per file size, step and partition, the
/// configurations side by side.
fn mount_table(rows: &[FrashRow], ending: &str) -> String {
    let cfgs = configs(rows);
    let mut header: Vec<String> = vec!["file KiB".into(), "fill".into(), "part MiB".into()];
    for c in &cfgs {
        header.push(format!("{c} stored MiB"));
        header.push(format!("{c} ms"));
        header.push("ms/MiB".into());
        header.push("NAND reads".into());
    }
    header.push("frash NVRAM KiB read".into());
    let lead: Vec<&FrashRow> = rows
        .iter()
        .filter(|r| r.experiment == "mount" && r.ending == Some(ending) && r.config == cfgs[0])
        .collect();
    let mut lines = Vec::new();
    for l in lead {
        let mut line = mount_key(l);
        for c in &cfgs {
            match peer(rows, l, c) {
                Some(r) => {
                    line.push(format!("{:.1}", r.stored_mb));
                    line.push(f2(r.mount_ms));
                    line.push(opt(r.ms_per_mb, 3));
                    line.push(r.mount_nand_reads.map_or("-".into(), |n| n.to_string()));
                }
                None => line.extend(["-".into(), "-".into(), "-".into(), "-".into()]),
            }
        }
        line.push(
            peer(rows, l, "frash")
                .and_then(|r| r.mount_nvram_bytes)
                .map_or("-".into(), |b| format!("{:.1}", b as f64 / 1024.0)),
        );
        lines.push(line);
    }
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    columns(&header, &lines, &[1])
}

/// Mean ms per MiB of the clean mounts holding the first step's few MiB (the paper's
/// Fig. 7 setting), by configuration and file size.
pub fn mean_ms_per_mb(rows: &[FrashRow], config: &str, file_kb: f64) -> Option<f64> {
    let v: Vec<f64> = rows
        .iter()
        .filter(|r| {
            r.experiment == "mount"
                && r.config == config
                && r.file_kb == file_kb
                && r.ending == Some("clean")
                && r.full == Some(false)
        })
        .filter_map(|r| r.ms_per_mb)
        .collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn file_sizes(rows: &[FrashRow], experiment: &str) -> Vec<f64> {
    let mut v: Vec<f64> = Vec::new();
    for r in rows.iter().filter(|r| r.experiment == experiment) {
        if !v.contains(&r.file_kb) {
            v.push(r.file_kb);
        }
    }
    v
}

fn heap_table(rows: &[FrashRow]) -> String {
    let cfgs = configs(rows);
    let mut header: Vec<String> = vec![
        "file KiB".into(),
        "fill".into(),
        "part MiB".into(),
        "files".into(),
    ];
    for c in &cfgs {
        header.push(format!("{c} heap KiB"));
        header.push("held KiB".into());
    }
    for h in ["frash NVRAM live KiB", "written KiB", "B/file", "KiB/MiB"] {
        header.push(h.into());
    }
    let mut lines = Vec::new();
    for l in rows
        .iter()
        .filter(|r| r.experiment == "mount" && r.ending == Some("clean") && r.config == cfgs[0])
    {
        let mut line = mount_key(l);
        line.push(l.files.to_string());
        let kib = |b: Option<u64>| b.map_or("-".into(), |b| format!("{:.1}", b as f64 / 1024.0));
        for c in &cfgs {
            let r = peer(rows, l, c);
            line.push(kib(r.and_then(|r| r.heap_bytes)));
            line.push(kib(r.and_then(|r| r.heap_held_bytes)));
        }
        let f = peer(rows, l, "frash");
        line.push(kib(f.and_then(|r| r.nvram_live_bytes)));
        line.push(kib(f.and_then(|r| r.nvram_used_bytes)));
        line.push(opt(f.and_then(|r| r.nvram_bytes_per_file), 0));
        line.push(opt(
            f.and_then(|r| r.nvram_bytes_per_mb.map(|b| b / 1024.0)),
            1,
        ));
        lines.push(line);
    }
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    columns(&header, &lines, &[1])
}

/// The figure an op is judged on: operations per second for create and delete, KiB per
/// second for read and write.
pub fn op_figure(r: &FrashRow) -> Option<f64> {
    match r.op {
        Some("create" | "delete") => r.ops_per_s,
        _ => r.kbps,
    }
}

fn ops_table(rows: &[FrashRow]) -> String {
    let cfgs = configs(rows);
    let mut header: Vec<String> =
        vec!["op".into(), "file KiB".into(), "sync".into(), "unit".into()];
    for c in &cfgs {
        header.push((*c).into());
    }
    for h in [
        "frash/nand-ckpt",
        "frash/nand-scan",
        "NAND prog/op scan,ckpt,frash",
        "frash NVRAM B/op",
        "frash NVRAM time %",
        "paper",
    ] {
        header.push(h.into());
    }
    let lead = cfgs[0];
    let mut lines = Vec::new();
    for l in rows
        .iter()
        .filter(|r| r.experiment == "ops" && r.config == lead)
    {
        let op = l.op.unwrap_or("-");
        let large = l.files == 1;
        let mut line = vec![
            op.to_string(),
            format!("{}", l.file_kb),
            l.sync.unwrap_or("-").to_string(),
            match op {
                "create" | "delete" => "ops/s",
                _ => "KiB/s",
            }
            .to_string(),
        ];
        for c in &cfgs {
            line.push(opt(peer(rows, l, c).and_then(op_figure), 1));
        }
        let fig = |c: &str| peer(rows, l, c).and_then(op_figure);
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.3}", a / b),
            _ => "-".into(),
        };
        line.push(ratio(fig("frash"), fig("nand-checkpoint")));
        line.push(ratio(fig("frash"), fig("nand-scan")));
        let progs: Vec<String> = ["nand-scan", "nand-checkpoint", "frash"]
            .iter()
            .map(|c| opt(peer(rows, l, c).and_then(|r| r.nand_programs_per_op), 2))
            .collect();
        line.push(progs.join(","));
        let f = peer(rows, l, "frash");
        line.push(opt(f.and_then(|r| r.nvram_bytes_written_per_op), 0));
        line.push(opt(f.and_then(|r| r.nvram_time_pct), 1));
        line.push(paper_op(op, large).into());
        lines.push(line);
    }
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    columns(&header, &lines, &[0, 2, 3, 7, 10])
}

/// The tables: the configuration, the mounts after a clean unmount and after a cut, the
/// heap and NVRAM use, the operations, then the goals.
pub fn table(opts: &FrashOptions, rows: &[FrashRow], heap_counted: bool) -> String {
    let mut s = String::new();
    let access = opts
        .nvram_access_ns
        .map_or("its preset's access time".to_string(), |ns| {
            format!("{ns} ns per access")
        });
    s.push_str(&format!(
        "FRASH: partitions of {} ({} pages and timing, that many blocks); frash: {} beside \
         the NAND ({access}); configs nand-scan (NAND only, no checkpoints, mounted by a scan: \
         YAFFS's way), nand-checkpoint (NAND only, the default: mounted from the checkpoint), \
         frash (metadata on the NVRAM, and each file's first {} KiB while data takes under \
         half of it; the rest of the data on the NAND); native file system, default \
         configuration; all times are device time\n",
        opts.nand_preset,
        opts.nand_preset,
        opts.nvram_preset,
        Config::Frash
            .fs_config(opts.nvram_file_bytes)
            .fast_tier_file_bytes as f64
            / 1024.0
    ));
    if !heap_counted {
        s.push_str("heap not measured: the counting allocator is not installed\n");
    }
    if rows.iter().any(|r| r.experiment == "mount") {
        s.push_str(&format!(
            "\nmount after a clean unmount, partitions holding {} MiB (\"few MiB\") and full \
             ({}% of what the NAND alone holds, the same data in every configuration; the \
             paper's Figs 7 and 8); NAND reads: pages the mount read\n",
            opts.stored_mib, opts.full_pct
        ));
        s.push_str(&mount_table(rows, "clean"));
        s.push_str(&format!(
            "\nmean ms per MiB of partition, clean mounts holding {} MiB (paper, Fig. 7, about \
             2 MB: YAFFS {PAPER_YAFFS_MS_PER_MB} ms/MB, FRASH {PAPER_FRASH_MS_PER_MB} ms/MB):\n",
            opts.stored_mib
        ));
        for kb in file_sizes(rows, "mount") {
            let parts: Vec<String> = configs(rows)
                .iter()
                .map(|c| format!("{c} {}", opt(mean_ms_per_mb(rows, c, kb), 3)))
                .collect();
            s.push_str(&format!("  files of {kb} KiB: {}\n", parts.join(", ")));
        }
        s.push_str(
            "\nmount after a power cut right after the fill's last sync (no unmount \
             checkpoint; one cut, not the worst of a checkpoint cycle as in bench mount)\n",
        );
        s.push_str(&mount_table(rows, "cut"));
        s.push_str(
            "\nheap of the clean mount (high-water mark, and held once it returned) and what \
             the frash volume keeps on the NVRAM (live slots, slots written; per file and \
             per MiB of file data)\n",
        );
        s.push_str(&heap_table(rows));
    }
    if rows.iter().any(|r| r.experiment == "ops") {
        let part = rows
            .iter()
            .find(|r| r.experiment == "ops")
            .map_or(0.0, |r| r.partition_mb);
        let volume = if opts.ops_one_volume {
            "one volume, every group in turn on what the groups before left"
        } else {
            "a fresh volume per group (file size and sync setting; the large file)"
        };
        s.push_str(&format!(
            "\noperations on {part:.0} MiB, {volume}: {} files per small-file phase in a \
             directory of their own (create: create, write, close; write: overwrite whole; \
             read: after a remount; delete: unlink), sync after each operation (each) or at \
             the end of the phase (end); a {} KiB file in 64 KiB writes, one sync, read back \
             after a remount; NAND prog/op: pages programmed per operation\n",
            opts.ops_files, opts.ops_large_kib
        ));
        s.push_str(&ops_table(rows));
    }
    let g = goals(rows);
    if !g.is_empty() {
        s.push_str("\ngoals:\n");
        for line in g {
            s.push_str(&format!("  {line}\n"));
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
pub fn goals(rows: &[FrashRow]) -> Vec<String> {
    let mut out = Vec::new();
    let frash_clean: Vec<&FrashRow> = rows
        .iter()
        .filter(|r| r.experiment == "mount" && r.config == "frash" && r.ending == Some("clean"))
        .collect();
    if let Some(worst) = frash_clean
        .iter()
        .max_by(|a, b| a.mount_ms.total_cmp(&b.mount_ms))
    {
        let nand: u64 = frash_clean.iter().filter_map(|r| r.mount_nand_reads).sum();
        out.push(format!(
            "frash mount <= {GOAL_MOUNT_MS} ms at any partition size and fill (clean): {} — \
             at most {:.3} ms ({:.0} MiB partition, {} KiB files, {:.1} MiB stored), NAND \
             pages read by these mounts: {nand}",
            met(worst.mount_ms <= GOAL_MOUNT_MS),
            worst.mount_ms,
            worst.partition_mb,
            worst.file_kb,
            worst.stored_mb
        ));
    }
    if let Some(worst) = rows
        .iter()
        .filter(|r| r.experiment == "mount" && r.config == "frash" && r.ending == Some("cut"))
        .max_by(|a, b| a.mount_ms.total_cmp(&b.mount_ms))
    {
        out.push(format!(
            "(after a power cut, not a goal: frash mounts in at most {:.3} ms, {} NAND pages \
             read; {:.0} MiB partition, {} KiB files)",
            worst.mount_ms,
            worst.mount_nand_reads.unwrap_or(0),
            worst.partition_mb,
            worst.file_kb
        ));
    }
    // Operations: frash against each NAND-only configuration run.
    let ratios_to_nand = |r: &FrashRow| -> Vec<(f64, &'static str)> {
        let Some(f) = op_figure(r) else {
            return Vec::new();
        };
        ["nand-scan", "nand-checkpoint"]
            .iter()
            .filter_map(|c| Some((f / op_figure(peer(rows, r, c)?)?, *c)))
            .collect()
    };
    let frash_ops: Vec<&FrashRow> = rows
        .iter()
        .filter(|r| r.experiment == "ops" && r.config == "frash")
        .collect();
    let judge = |what: &str, pick: &dyn Fn(&FrashRow) -> bool, ok: &dyn Fn(f64) -> bool| {
        let mut rs: Vec<(f64, &'static str, &FrashRow)> = frash_ops
            .iter()
            .filter(|r| pick(r))
            .flat_map(|r| ratios_to_nand(r).into_iter().map(|(x, c)| (x, c, *r)))
            .collect();
        if rs.is_empty() {
            return None;
        }
        rs.sort_by(|a, b| a.0.total_cmp(&b.0));
        let all = rs.iter().all(|x| ok(x.0));
        let (lo, hi) = (rs[0], rs[rs.len() - 1]);
        let at = |x: &(f64, &str, &FrashRow)| {
            format!(
                "{:.3}x {} ({} KiB, sync {})",
                x.0,
                x.1,
                x.2.file_kb,
                x.2.sync.unwrap_or("-")
            )
        };
        Some(format!(
            "{what}: {} — frash from {} to {}",
            met(all),
            at(&lo),
            at(&hi)
        ))
    };
    let small = |r: &FrashRow| r.files > 1;
    out.extend(judge(
        "create faster than NAND-only (against each NAND-only config)",
        &|r| small(r) && r.op == Some("create"),
        &|x| x > 1.0,
    ));
    out.extend(judge(
        "delete faster than NAND-only",
        &|r| small(r) && r.op == Some("delete"),
        &|x| x > 1.0,
    ));
    out.extend(judge(
        &format!("small-file writes >= {GOAL_SMALL_WRITE_RATIO}x NAND-only (overwrites, KiB/s)"),
        &|r| small(r) && r.op == Some("write"),
        &|x| x >= GOAL_SMALL_WRITE_RATIO,
    ));
    let equal = |x: f64| (x - 1.0).abs() <= EQUAL_WITHIN;
    out.extend(judge(
        &format!(
            "large reads equal to NAND-only (within {:.0}%)",
            EQUAL_WITHIN * 100.0
        ),
        &|r| !small(r) && r.op == Some("read"),
        &equal,
    ));
    out.extend(judge(
        &format!(
            "large writes equal to NAND-only (within {:.0}%)",
            EQUAL_WITHIN * 100.0
        ),
        &|r| !small(r) && r.op == Some("write"),
        &equal,
    ));
    out
}

/// The columns that name a mount row: file size, fill, partition size.
fn mount_key(l: &FrashRow) -> Vec<String> {
    let fill = if l.full == Some(true) {
        "full"
    } else {
        "few MiB"
    };
    vec![
        format!("{}", l.file_kb),
        fill.into(),
        format!("{:.0}", l.partition_mb),
    ]
}
