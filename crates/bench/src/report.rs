//! Reports: the table in the paper's form, and one JSON object per row.

use std::fmt::Write as _;

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
    let mut widths = header.map(str::len);
    for c in &cells {
        for (w, s) in widths.iter_mut().zip(c.iter()) {
            *w = (*w).max(s.chars().count());
        }
    }
    let line = |out: &mut String, c: &[&str]| -> std::fmt::Result {
        let mut s = String::new();
        for (i, (cell, w)) in c.iter().zip(widths.iter()).enumerate() {
            if i > 0 {
                s.push_str("  ");
            }
            let pad = w - cell.chars().count();
            // Text left, numbers right.
            if i == 0 || i == 3 || i == 14 {
                s.push_str(cell);
                s.push_str(&" ".repeat(pad));
            } else {
                s.push_str(&" ".repeat(pad));
                s.push_str(cell);
            }
        }
        writeln!(out, "{}", s.trim_end())
    };
    line(&mut out, &header).map_err(w)?;
    let rule: Vec<String> = widths.iter().map(|&n| "-".repeat(n)).collect();
    line(
        &mut out,
        &rule.iter().map(String::as_str).collect::<Vec<_>>(),
    )
    .map_err(w)?;
    for c in &cells {
        line(&mut out, &c.iter().map(String::as_str).collect::<Vec<_>>()).map_err(w)?;
    }
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

/// One JSON object per row, one per line.
pub fn json_lines(rows: &[Row]) -> Result<String> {
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
    use super::group;

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(group(0), "0");
        assert_eq!(group(999), "999");
        assert_eq!(group(1_000), "1,000");
        assert_eq!(group(57_266), "57,266");
        assert_eq!(group(1_161_090), "1,161,090");
    }
}
