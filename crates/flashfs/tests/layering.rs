//! No import circles: within each crate, no two modules of the same parent (`log` and
//! `media`, `fs::journal` and `fs::append`, …) reach each other through their `use`s and
//! paths, directly or round a longer loop, so that each layer and each room can be read on
//! its own and the one below never depends on the one above. A module using its parent
//! (`super::Fs`, the type whose methods it holds) is not a circle.
//!
//! The check reads the sources: paths from `crate::` and `super::`, and a parent's paths to
//! its children; test modules are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every module of the crate at `src`, by path (`""` for the root), with its file.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let rel = p.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(
                parts.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                parts.pop();
            }
            out.insert(parts.join("::"), p);
        }
    }
    out
}

/// The source without comments and `#[cfg(test)]` modules.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let mut src: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    while let Some(at) = src.find("#[cfg(test)]") {
        let rest = &src[at..];
        let Some(open) = rest.find('{') else { break };
        let is_mod = rest[..open].contains("mod ");
        let mut depth = 0;
        let mut end = at + open;
        for (i, c) in src[at + open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
            if depth == 0 {
                end = at + open + i + 1;
                break;
            }
        }
        let cut_to = if is_mod {
            end
        } else {
            at + "#[cfg(test)]".len()
        };
        src.replace_range(at..cut_to, "");
    }
    src
}

/// The module a path names from module `m` (the longest prefix that is a module).
fn resolve(m: &str, path: &[&str], mods: &BTreeMap<String, PathBuf>) -> Option<String> {
    let mut base: Vec<&str> = if m.is_empty() {
        Vec::new()
    } else {
        m.split("::").collect()
    };
    let mut rest = path;
    match rest.first() {
        Some(&"crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some(&"super") => {
            while rest.first() == Some(&"super") {
                base.pop();
                rest = &rest[1..];
            }
        }
        Some(&"self") => rest = &rest[1..],
        _ => {}
    }
    let full: Vec<&str> = base.iter().copied().chain(rest.iter().copied()).collect();
    (1..=full.len())
        .rev()
        .map(|i| full[..i].join("::"))
        .find(|c| mods.contains_key(c))
}

/// Each module's dependencies on the crate's other modules.
fn edges(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mods = modules(src);
    let mut out = BTreeMap::new();
    for (m, file) in &mods {
        let text = code(file);
        let mut deps = BTreeSet::new();
        let children: Vec<&str> = mods
            .keys()
            .filter_map(|o| {
                let rest = if m.is_empty() {
                    o.as_str()
                } else {
                    o.strip_prefix(m.as_str())?.strip_prefix("::")?
                };
                (!rest.is_empty() && !rest.contains("::")).then_some(rest)
            })
            .collect();
        // Paths as written, with `{a, b}` groups opened one level.
        let bytes = text.as_bytes();
        let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
        let mut i = 0;
        while i < bytes.len() {
            if !ident(bytes[i]) || (i > 0 && (ident(bytes[i - 1]) || bytes[i - 1] == b':')) {
                i += 1;
                continue;
            }
            let start = i;
            while i < bytes.len() && (ident(bytes[i]) || bytes[i] == b':') {
                i += 1;
            }
            let path: Vec<&str> = text[start..i]
                .split("::")
                .filter(|s| !s.is_empty())
                .collect();
            let Some(&first) = path.first() else { continue };
            let rooted = matches!(first, "crate" | "super" | "self") || children.contains(&first);
            if !rooted || path.len() < 2 && !text[start..i].ends_with("::") {
                continue;
            }
            let mut paths = vec![path.clone()];
            if text[start..i].ends_with("::") && bytes.get(i) == Some(&b'{') {
                let close = text[i..].find('}').map_or(text.len(), |c| i + c);
                for item in text[i + 1..close].split(',') {
                    let item = item.trim();
                    if let Some(name) = item.split("::").next().filter(|n| !n.is_empty()) {
                        let mut p = path.clone();
                        p.push(name);
                        paths.push(p);
                    }
                }
            }
            for p in paths {
                if let Some(d) = resolve(m, &p, &mods).filter(|d| d != m && !d.is_empty()) {
                    deps.insert(d);
                }
            }
        }
        out.insert(m.clone(), deps);
    }
    out
}

/// The circles among siblings: modules grouped by their ancestor at each depth, a
/// module's use of its own ancestors left out.
fn circles(src: &Path) -> Vec<Vec<String>> {
    let edges = edges(src);
    let depth_max = edges
        .keys()
        .map(|m| m.split("::").count())
        .max()
        .unwrap_or(1);
    let mut found = Vec::new();
    for depth in 1..=depth_max {
        let top = |m: &str| m.split("::").take(depth).collect::<Vec<_>>().join("::");
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, ds) in &edges {
            let ta = top(a);
            for d in ds {
                let td = top(d);
                let related = ta == td
                    || ta.starts_with(&format!("{td}::"))
                    || td.starts_with(&format!("{ta}::"));
                if !related && !ta.is_empty() && !td.is_empty() {
                    g.entry(ta.clone()).or_default().insert(td);
                }
            }
        }
        // A module that reaches itself is in a circle.
        for start in g.keys() {
            let mut seen = BTreeSet::new();
            let mut stack: Vec<&String> = g[start].iter().collect();
            while let Some(n) = stack.pop() {
                if n == start {
                    let mut c = vec![start.clone()];
                    c.extend(g[start].iter().cloned());
                    found.push(c);
                    break;
                }
                if seen.insert(n.clone()) {
                    stack.extend(g.get(n).into_iter().flatten());
                }
            }
        }
    }
    found
}

fn crate_src(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(name)
        .join("src")
}

#[test]
fn no_crate_has_an_import_circle() {
    for name in ["flash", "flashfs", "bench", "cli"] {
        let src = crate_src(name);
        let c = circles(&src);
        assert!(c.is_empty(), "{name}: import circles {c:?}");
        assert!(edges(&src).len() > 3, "{name}: no modules read");
    }
}

/// The check finds a circle where there is one: `log` and `media` used each other before
/// the slot format moved to `media::tag`.
#[test]
fn the_check_finds_a_circle() {
    let dir = std::env::temp_dir().join(format!("flashfs-layering-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("log")).unwrap();
    std::fs::write(dir.join("lib.rs"), "pub mod log;\npub mod media;\n").unwrap();
    std::fs::write(
        dir.join("log/mod.rs"),
        "pub mod tag;\nuse crate::media::Segments;\n",
    )
    .unwrap();
    std::fs::write(dir.join("log/tag.rs"), "pub struct Tag;\n").unwrap();
    std::fs::write(
        dir.join("media.rs"),
        "use crate::log::tag::Tag;\npub trait Segments {}\n",
    )
    .unwrap();
    let c = circles(&dir);
    assert!(!c.is_empty(), "no circle found");
    std::fs::write(dir.join("media.rs"), "pub trait Segments {}\n").unwrap();
    assert!(circles(&dir).is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The modules of `flashfs` that encode bytes on flash, one per layer (SPEC.md names them),
/// and the one other that turns integers into bytes.
const FORMAT_MODULES: [&str; 5] = [
    "media::tag",
    "log::checkpoint",
    "ftl::layout",
    "index::node",
    "fs::layout",
];
/// A sequence number packed into 40 bits in RAM (`Seq40`), not on flash.
const PACKED_IN_RAM: &str = "log::segment";

/// Each layer's bytes on flash are encoded in one module of that layer: outside those,
/// no code of `flashfs` converts integers to or from bytes.
#[test]
fn bytes_on_flash_are_encoded_only_in_each_layers_format_module() {
    let mods = modules(&crate_src("flashfs"));
    let converts = |m: &str| {
        let text = code(&mods[m]);
        [
            "to_le_bytes(",
            "from_le_bytes(",
            "to_be_bytes(",
            "from_be_bytes(",
        ]
        .iter()
        .any(|c| text.contains(c))
    };
    let in_format = |m: &str| {
        FORMAT_MODULES
            .iter()
            .any(|f| m == *f || m.starts_with(&format!("{f}::")))
    };
    let strays: Vec<&String> = mods
        .keys()
        // Files of tests (`index::spare_tests`) build bytes to damage.
        .filter(|m| !m.ends_with("tests"))
        .filter(|m| !in_format(m) && *m != PACKED_IN_RAM && converts(m))
        .collect();
    assert!(
        strays.is_empty(),
        "bytes encoded outside the format modules: {strays:?}"
    );
    for f in FORMAT_MODULES {
        assert!(converts(f), "{f} encodes nothing: the list is stale");
    }
}
