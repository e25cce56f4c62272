//! `flashfs tx IMAGE SCRIPT`: transactions on an image from a script, one command a line.
//!
//! ```text
//! begin a                      # open transaction a (names are the script's own)
//! a put /notes/today hello     # replace a file's content (created if missing)
//! a append /log one more line\n
//! a mkdir /archive
//! a mv /notes/today /archive/today
//! a rm /notes/old
//! commit a                     # all of a, durable, or none of it
//! abort b                      # undo everything b did
//! ```
//!
//! Several transactions may be open at once; they are isolated as the library isolates
//! them (in the order they began). A line that fails stops the script: the error is one
//! line naming it, and the image is left exactly as it was. Text after a path runs to the
//! end of the line, with `\n`, `\t` and `\\` escapes.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::PathBuf;

use anyhow::{anyhow, bail, Context};
use flashfs::fs::Tid;
use flashfs::{Fs, Segments};

use super::files::Image;

/// Examples shown by `flashfs tx --help`.
pub const EXAMPLES: &str = "\
Examples:
  flashfs tx dev.img script.txt          run the transactions of a script
  printf 'begin a\\na put /x hello\\ncommit a\\n' | flashfs tx dev.img -

Script lines: `begin T`, `commit T`, `abort T`, and `T put PATH TEXT`, `T append PATH TEXT`,
`T mkdir PATH`, `T rm PATH`, `T mv FROM TO` inside transaction T; `#` starts a comment.";

/// Options of `flashfs tx`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The image holding the native file system.
    pub image: PathBuf,
    /// The script (`-` for standard input).
    pub script: PathBuf,
}

/// Runs `flashfs tx`.
pub fn run(a: &Args, out: &mut dyn Write) -> anyhow::Result<()> {
    let mut text = String::new();
    if a.script.as_os_str() == "-" {
        std::io::stdin().read_to_string(&mut text)?;
    } else {
        text = std::fs::read_to_string(&a.script)
            .with_context(|| format!("reading {}", a.script.display()))?;
    }
    let script = parse(&text)?;
    let mut img = Image::open(&a.image)?;
    let shown = img.shown.clone();
    let done = crate::with_fs!(&mut img.fs, fs => execute(fs, &script, out))
        .with_context(|| shown.clone())?;
    img.save()?;
    writeln!(out, "{shown}: {done}")?;
    Ok(())
}

/// One line of a script.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Line {
    Begin(String),
    Commit(String),
    Abort(String),
    Op(String, Op),
}

/// An operation inside a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Append(Vec<u8>, Vec<u8>),
    Mkdir(Vec<u8>),
    Rm(Vec<u8>),
    Mv(Vec<u8>, Vec<u8>),
}

/// Text with its escapes decoded.
fn unescape(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match (c, c == '\\') {
            (_, true) => match chars.next() {
                Some('n') => out.push(b'\n'),
                Some('t') => out.push(b'\t'),
                Some(o) => out.extend(o.to_string().as_bytes()),
                None => out.push(b'\\'),
            },
            (c, false) => out.extend(c.to_string().as_bytes()),
        }
    }
    out
}

/// The script's lines (numbered from 1), or the first line that does not parse.
fn parse(text: &str) -> anyhow::Result<Vec<(usize, Line)>> {
    let mut lines = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim_start();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.splitn(3, ' ');
        let (first, second) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
        let rest = words.next().unwrap_or("");
        let need = |w: &str, what: &str| -> anyhow::Result<()> {
            if w.is_empty() {
                bail!("line {n}: {what} missing");
            }
            Ok(())
        };
        let parsed = match first {
            "begin" | "commit" | "abort" => {
                need(second, "transaction name")?;
                if !rest.trim().is_empty() {
                    bail!("line {n}: `{first}` takes only a transaction name");
                }
                let t = second.to_string();
                match first {
                    "begin" => Line::Begin(t),
                    "commit" => Line::Commit(t),
                    _ => Line::Abort(t),
                }
            }
            t => {
                need(second, "command")?;
                let (path, text) = rest.split_once(' ').unwrap_or((rest, ""));
                let text = text.trim_end_matches(['\r']);
                need(path, "path")?;
                let p = path.as_bytes().to_vec();
                let op = match second {
                    "put" => Op::Put(p, unescape(text)),
                    "append" => Op::Append(p, unescape(text)),
                    "mkdir" | "rm" if !text.trim().is_empty() => {
                        bail!("line {n}: `{second}` takes only a path")
                    }
                    "mkdir" => Op::Mkdir(p),
                    "rm" => Op::Rm(p),
                    "mv" => {
                        need(text.trim(), "target path")?;
                        Op::Mv(p, text.trim().as_bytes().to_vec())
                    }
                    other => bail!("line {n}: unknown command `{other}`"),
                };
                Line::Op(t.to_string(), op)
            }
        };
        lines.push((n, parsed));
    }
    Ok(lines)
}

/// Runs the script on `fs`; returns what it did, in words.
fn execute<D: Segments>(
    fs: &mut Fs<D>,
    script: &[(usize, Line)],
    out: &mut dyn Write,
) -> anyhow::Result<String> {
    let mut open: BTreeMap<String, (Tid, usize)> = BTreeMap::new();
    let (mut committed, mut aborted) = (0, 0);
    for (n, line) in script {
        let tid = |open: &BTreeMap<String, (Tid, usize)>, t: &str| {
            open.get(t)
                .map(|&(tid, _)| tid)
                .ok_or_else(|| anyhow!("line {n}: no open transaction `{t}`"))
        };
        match line {
            Line::Begin(t) => {
                if open.contains_key(t) {
                    bail!("line {n}: transaction `{t}` is already open");
                }
                let id = fs.begin().with_context(|| format!("line {n}: begin {t}"))?;
                open.insert(t.clone(), (id, 0));
            }
            Line::Commit(t) => {
                let id = tid(&open, t)?;
                fs.commit_tx(id)
                    .with_context(|| format!("line {n}: commit {t}"))?;
                let (_, ops) = open.remove(t).unwrap_or((id, 0));
                writeln!(out, "committed {t} ({ops} operation{})", plural(ops))?;
                committed += 1;
            }
            Line::Abort(t) => {
                let id = tid(&open, t)?;
                fs.abort(id)
                    .with_context(|| format!("line {n}: abort {t}"))?;
                open.remove(t);
                writeln!(out, "aborted {t}")?;
                aborted += 1;
            }
            Line::Op(t, op) => {
                let id = tid(&open, t)?;
                fs.in_tx(id, |fs| apply(fs, op))
                    .with_context(|| format!("line {n}: {t}"))?;
                if let Some(e) = open.get_mut(t) {
                    e.1 += 1;
                }
            }
        }
    }
    if let Some(t) = open.keys().next() {
        bail!("transaction `{t}` is still open at the end of the script (commit or abort it)");
    }
    Ok(format!(
        "{committed} transaction{} committed, {aborted} aborted",
        plural(committed)
    ))
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// One operation, inside a transaction.
fn apply<D: Segments>(fs: &mut Fs<D>, op: &Op) -> flashfs::Result<()> {
    match op {
        Op::Put(path, data) => fs.write_file(path, data).map(drop),
        Op::Append(path, data) => {
            let ino = fs.resolve_follow(path)?;
            fs.append(ino, data).map(drop)
        }
        Op::Mkdir(path) => fs.mkdir_path(path).map(drop),
        Op::Rm(path) => fs.remove_path(path),
        Op::Mv(from, to) => fs.rename_path(from, to),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_parse_and_bad_lines_are_named() {
        let s = parse("# hi\nbegin a\na put /x hello world\\n\na mv /x /y\ncommit a\n").unwrap();
        assert_eq!(s.len(), 4);
        assert_eq!(
            s[1],
            (
                3,
                Line::Op(
                    "a".into(),
                    Op::Put(b"/x".to_vec(), b"hello world\n".to_vec())
                )
            )
        );
        assert_eq!(s[3], (5, Line::Commit("a".into())));
        let e = parse("begin a\na frob /x\n").unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("frob"), "{e}");
        assert!(parse("commit\n")
            .unwrap_err()
            .to_string()
            .contains("line 1"));
        assert!(parse("a mv /x\n")
            .unwrap_err()
            .to_string()
            .contains("target"));
    }
}
