//! Numbers for people: sizes, durations and counts.

/// A size in binary units: `256 KiB`, `1 GiB`, `1.03 GiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut unit = 0;
    let mut scale = 1u64;
    while unit + 1 < UNITS.len() && n >= scale * 1024 {
        scale *= 1024;
        unit += 1;
    }
    if n % scale == 0 {
        format!("{} {}", n / scale, UNITS[unit])
    } else {
        format!("{} {}", significant(n as f64 / scale as f64), UNITS[unit])
    }
}

/// A device time given in nanoseconds: `85 ns`, `1.28 us`, `1.5 ms`, `2 min 3.4 s`.
pub fn ns(n: u64) -> String {
    let v = n as f64;
    if n < 1_000 {
        format!("{n} ns")
    } else if n < 1_000_000 {
        format!("{} us", significant(v / 1e3))
    } else if n < 1_000_000_000 {
        format!("{} ms", significant(v / 1e6))
    } else if n < 60_000_000_000 {
        format!("{} s", significant(v / 1e9))
    } else if n < 3_600_000_000_000 {
        let s = n / 1_000_000_000;
        format!("{} min {} s", s / 60, s % 60)
    } else {
        let m = n / 60_000_000_000;
        format!("{} h {} min", m / 60, m % 60)
    }
}

/// A duration, as [`ns`] does.
pub fn duration(d: std::time::Duration) -> String {
    ns(d.as_nanos().min(u64::MAX as u128) as u64)
}

/// A count with thousands separators: `100,000`.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A count that may be astronomically large (endurance of FRAM): `100,000`, `1e15`.
pub fn big_count(n: u64) -> String {
    if n < 1_000_000_000 {
        return count(n);
    }
    let exp = (n as f64).log10().floor() as i32;
    let mantissa = n as f64 / 10f64.powi(exp);
    if (mantissa - 1.0).abs() < 1e-9 {
        format!("1e{exp}")
    } else {
        format!("{}e{exp}", significant(mantissa))
    }
}

/// A value with three significant digits and no trailing zeros.
pub fn significant(v: f64) -> String {
    let s = if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Left-aligned columns separated by two spaces; the last column is not padded.
pub fn table(rows: &[Vec<String>]) -> Vec<String> {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    rows.iter()
        .map(|r| {
            let mut line = String::new();
            for (c, cell) in r.iter().enumerate() {
                if c + 1 == r.len() {
                    line.push_str(cell);
                } else {
                    line.push_str(cell);
                    let pad = widths[c] - cell.chars().count() + 2;
                    line.extend(std::iter::repeat_n(' ', pad));
                }
            }
            line.trim_end().to_string()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(256 * 1024), "256 KiB");
        assert_eq!(bytes(448 * 1024), "448 KiB");
        assert_eq!(bytes(1 << 30), "1 GiB");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(u64::MAX), "16384 PiB");
    }

    #[test]
    fn times() {
        assert_eq!(ns(85), "85 ns");
        assert_eq!(ns(1280), "1.28 us");
        assert_eq!(ns(25_000), "25 us");
        assert_eq!(ns(1_500_000), "1.5 ms");
        assert_eq!(ns(800_000_000), "800 ms");
        assert_eq!(ns(1_500_000_000), "1.5 s");
        assert_eq!(ns(125_000_000_000), "2 min 5 s");
        assert_eq!(ns(7_500_000_000_000), "2 h 5 min");
    }

    #[test]
    fn counts() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(100_000), "100,000");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(big_count(1_000_000_000_000_000), "1e15");
        assert_eq!(big_count(100_000_000_000_000), "1e14");
        assert_eq!(big_count(10_000), "10,000");
    }

    #[test]
    fn tables_align() {
        let t = table(&[
            vec!["a".into(), "bb".into(), "c".into()],
            vec!["aaa".into(), "b".into(), "".into()],
        ]);
        assert_eq!(t, vec!["a    bb  c", "aaa  b"]);
    }
}
