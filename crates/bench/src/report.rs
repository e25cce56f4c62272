//! Reports: the table in the paper's form, and one JSON object per row.

use std::fmt::Write as _;

use serde::Serialize;

use crate::error::{BenchError, Result};
use crate::kawaguchi::{describe_config, Experiment, KawaguchiOptions, Row};

fn opt_f(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.0}"))
}

fn opt_u(v: Option<u64>) -> String {
    v.map_or_else(|| "-".to_string(), group)
}

/// An integer with thousands separated by commas, as the paper prints them.
pub fn group(v: u64) -> String {
    let s = v.to_string();
    let head = s.len() % 3;
    let mut parts: Vec<&str> = Vec::new();
    if head > 0 {
        parts.push(&s[..head]);
    }
    let mut rest = &s[head..];
    while !rest.is_empty() {
        parts.push(&rest[..3]);
        rest = &rest[3..];
    }
    parts.join(",")
}

/// The table: the preset and configuration, then one line per row with the paper's figures
/// beside ours ("-" where the paper has none), then notes on rows that differ from the
/// configuration above or failed.
pub fn table(opts: &KawaguchiOptions, rows: &[Row]) -> Result<String> {
    let mut out = String::new();
    let w = |e: std::fmt::Error| BenchError::Report(e.to_string());
    for line in describe_config(opts)? {
        writeln!(out, "{line}").map_err(w)?;
    }
    writeln!(
        out,
        "paper: Kawaguchi et al. 1995 §3, Tables 4-7 (greedy, one segment for writes and cleaning, \
         unless noted) and the read figures of §3; 192 MB written per row"
    )
    .map_err(w)?;
    writeln!(out).map_err(w)?;
    let header = [
        "experiment",
        "util",
        "init MB",
        "policy",
        "sep head",
        "KB/s",
        "paper KB/s",
        "erased",
        "paper erased",
        "copied",
        "paper copied",
        "WAF",
        "spread",
        "wait %",
        "",
    ];
    let mut cells: Vec<[String; 15]> = Vec::new();
    let mut notes = Vec::new();
    let default_reserve = flashfs::LogConfig::default().reserve;
    for r in rows {
        let write = matches!(r.experiment, Experiment::Write(_));
        let mut why = Vec::new();
        if write && r.reserve != default_reserve {
            why.push(format!(
                "reserve lowered to {} segments so {:.2} MB of initial data fit ({:.1}% of raw)",
                r.reserve,
                r.initial_mb,
                r.raw_utilization * 100.0
            ));
        }
        if let Some(e) = &r.error {
            why.push(format!(
                "FAILED: {e}; figures cover the {:.2} MB written",
                r.mb_written
            ));
        }
        let note = if why.is_empty() {
            String::new()
        } else {
            let mark = format!("[{}]", notes.len() + 1);
            notes.push(format!("{mark} {}: {}", r.label(), why.join("; ")));
            mark
        };
        cells.push([
            r.experiment.name().to_string(),
            format!("{:.0}%", r.utilization * 100.0),
            format!("{:.2}", r.initial_mb),
            if write {
                r.policy.to_string()
            } else {
                "-".into()
            },
            if write {
                if r.separate_head { "yes" } else { "no" }.to_string()
            } else {
                "-".into()
            },
            format!("{:.0}", r.throughput_kbps),
            opt_f(r.paper_kbps),
            if write {
                group(r.erased_segments)
            } else {
                "-".into()
            },
            opt_u(r.paper_erased),
            if write {
                group(r.copied_blocks)
            } else {
                "-".into()
            },
            opt_u(r.paper_copied),
            if write {
                format!("{:.2}", r.waf)
            } else {
                "-".into()
            },
            if write {
                r.erase_spread.to_string()
            } else {
                "-".into()
            },
            if r.device_seconds > 0.0 {
                format!("{:.0}", r.wait_seconds * 100.0 / r.device_seconds)
            } else {
                "-".into()
            },
            note,
        ]);
    }
    let rows: Vec<Vec<String>> = cells.iter().map(|c| c.to_vec()).collect();
    out.push_str(&columns(&header, &rows, &[0, 3, 14]));
    writeln!(
        out,
        "wait %: share of the device time the host waited on banks busy erasing (device time \
         less the part's program and read time for the work done)"
    )
    .map_err(w)?;
    for n in notes {
        writeln!(out, "{n}").map_err(w)?;
    }
    Ok(out)
}

/// A table as text: the header, a rule, then one line per row; every column as wide as its
/// widest cell, the columns listed in `left` flush left (text) and the others flush right
/// (numbers), two spaces between columns, no trailing blanks.
pub fn columns(header: &[&str], rows: &[Vec<String>], left: &[usize]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, cell) in r.iter().enumerate() {
            if i >= widths.len() {
                widths.push(0);
            }
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| -> String {
        let mut s = String::new();
        for (i, (cell, w)) in cells.zip(widths.iter()).enumerate() {
            if i > 0 {
                s.push_str("  ");
            }
            let pad = " ".repeat(w - cell.chars().count());
            if left.contains(&i) {
                s.push_str(cell);
                s.push_str(&pad);
            } else {
                s.push_str(&pad);
                s.push_str(cell);
            }
        }
        let mut s = s.trim_end().to_string();
        s.push('\n');
        s
    };
    let mut out = line(&mut header.iter().copied());
    let rule: Vec<String> = widths.iter().map(|&n| "-".repeat(n)).collect();
    out.push_str(&line(&mut rule.iter().map(String::as_str)));
    for r in rows {
        out.push_str(&line(&mut r.iter().map(String::as_str)));
    }
    out
}

/// One JSON object per row, one per line (the rows of any benchmark).
pub fn json_lines<T: Serialize>(rows: &[T]) -> Result<String> {
    let mut out = String::new();
    for r in rows {
        let s = serde_json::to_string(r).map_err(|e| BenchError::Report(format!("json: {e}")))?;
        out.push_str(&s);
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{columns, group};

    #[test]
    fn columns_align_text_left_and_numbers_right() {
        let rows = vec![
            vec!["fax".to_string(), "7.5".to_string()],
            vec!["recorder".to_string(), "12.25".to_string()],
        ];
        let t = columns(&["workload", "pct"], &rows, &[0]);
        assert_eq!(
            t,
            "workload    pct\n--------  -----\nfax         7.5\nrecorder  12.25\n"
        );
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(group(0), "0");
        assert_eq!(group(999), "999");
        assert_eq!(group(1_000), "1,000");
        assert_eq!(group(57_266), "57,266");
        assert_eq!(group(1_161_090), "1,161,090");
    }
}
