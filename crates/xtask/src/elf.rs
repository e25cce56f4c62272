//! What a firmware ELF holds: its sections' sizes as `size` counts them, and its symbols'.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use object::elf::{SHF_ALLOC, SHF_WRITE};
use object::{Object, ObjectSection, ObjectSymbol, SectionFlags, SectionKind, SymbolKind};
use serde::Serialize;

/// The symbol of the firmware's static heap (firmware/src/main.rs).
pub const HEAP_SYMBOL: &str = "FLASHFS_HEAP";

/// Sizes of one ELF.
#[derive(Debug, Clone, Default)]
pub struct Measure {
    /// Bytes of code and read-only data (loaded, not writable): `size`'s text.
    pub text: u64,
    /// Bytes of initialized static data: in RAM, and its image in flash.
    pub data: u64,
    /// Bytes of zeroed static data, the heap's array included.
    pub bss: u64,
    /// Bytes of the heap's array, if the ELF has one.
    pub heap: u64,
    /// Sized symbols in the text sections, largest first.
    pub symbols: Vec<Symbol>,
}

/// A function or read-only object in the text.
#[derive(Debug, Clone, Serialize)]
pub struct Symbol {
    /// The demangled name, without its hash.
    pub name: String,
    /// The crate it comes from: `[outlined]` for the code LLVM's machine outliner shares
    /// between functions of any crate (`OUTLINED_FUNCTION_n`), `[runtime]` for other
    /// unmangled names (compiler built-ins such as `memcpy`, the reset handler, the vector
    /// table).
    #[serde(rename = "crate")]
    pub krate: String,
    /// Bytes.
    pub bytes: u64,
}

/// Bytes by crate.
#[derive(Debug, Clone, Serialize)]
pub struct CrateSize {
    /// The crate, or `[no symbol]` for text no sized symbol covers (literals, padding).
    #[serde(rename = "crate")]
    pub krate: String,
    /// Bytes.
    pub bytes: u64,
}

/// Reads the sizes of the ELF at `path`.
pub fn measure(path: &Path) -> Result<Measure> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let file =
        object::File::parse(&*bytes).with_context(|| format!("parsing {}", path.display()))?;
    let mut m = Measure::default();
    let mut text_sections = Vec::new();
    for s in file.sections() {
        let SectionFlags::Elf { sh_flags } = s.flags() else {
            continue;
        };
        if sh_flags & u64::from(SHF_ALLOC) == 0 {
            continue;
        }
        // SHT_NOBITS: the file holds none of its bytes.
        let nobits = matches!(
            s.kind(),
            SectionKind::UninitializedData | SectionKind::UninitializedTls
        );
        if nobits {
            m.bss += s.size();
        } else if sh_flags & u64::from(SHF_WRITE) != 0 {
            m.data += s.size();
        } else {
            m.text += s.size();
            text_sections.push(s.index());
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for sym in file.symbols() {
        let name = sym.name().unwrap_or("");
        if name == HEAP_SYMBOL {
            m.heap = sym.size();
        }
        let Some(section) = sym.section_index() else {
            continue;
        };
        if sym.size() == 0
            || !text_sections.contains(&section)
            || !matches!(sym.kind(), SymbolKind::Text | SymbolKind::Data)
            || !seen.insert((sym.address() & !1, sym.size()))
        {
            continue;
        }
        let name = format!("{:#}", rustc_demangle::demangle(name));
        m.symbols.push(Symbol {
            krate: crate_of(&name),
            name,
            bytes: sym.size(),
        });
    }
    m.symbols
        .sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.name.cmp(&b.name)));
    Ok(m)
}

/// The global functions a static library (`ar` archive) defines whose names start with
/// `prefix`, from its members' symbol tables.
pub fn api_symbols(archive: &[u8], prefix: &str) -> Result<Vec<String>> {
    let ar = object::read::archive::ArchiveFile::parse(archive)?;
    let mut names = std::collections::BTreeSet::new();
    for member in ar.members() {
        let member = member?;
        // Members sit at any offset of the archive (the `unaligned` feature reads them).
        let Ok(file) = object::File::parse(member.data(archive)?) else {
            continue; // not an object (the archive's own metadata)
        };
        for sym in file.symbols() {
            let name = sym.name().unwrap_or("");
            if sym.is_global() && !sym.is_undefined() && name.starts_with(prefix) {
                names.insert(name.to_string());
            }
        }
    }
    Ok(names.into_iter().collect())
}

/// The crate a demangled name belongs to: the first path segment, looking through the
/// `<` of a trait implementation (`<flashfs::fs::Fs<D>>::write` is flashfs's; a generic of
/// `core` instantiated for a flashfs type is `core`'s, as `cargo bloat` counts it).
pub fn crate_of(name: &str) -> String {
    if name.starts_with("OUTLINED_FUNCTION") {
        return "[outlined]".to_string();
    }
    let s = name.trim_start_matches(['<', '&', '*', '(', '[']);
    let s = s
        .trim_start_matches("mut ")
        .trim_start_matches("const ")
        .trim_start_matches("dyn ");
    match s.find("::") {
        Some(i) if s[..i].chars().all(|c| c.is_alphanumeric() || c == '_') => s[..i].to_string(),
        _ => "[runtime]".to_string(),
    }
}

impl Measure {
    /// Bytes of static RAM but the heap's array.
    pub fn ram_without_heap(&self) -> u64 {
        (self.data + self.bss).saturating_sub(self.heap)
    }

    /// Text bytes by crate, largest first; what no sized symbol covers is `[no symbol]`.
    pub fn crates(&self) -> Vec<CrateSize> {
        let mut by = BTreeMap::<&str, u64>::new();
        for s in &self.symbols {
            *by.entry(&s.krate).or_default() += s.bytes;
        }
        let covered: u64 = by.values().sum();
        let mut out: Vec<CrateSize> = by
            .into_iter()
            .map(|(k, bytes)| CrateSize {
                krate: k.to_string(),
                bytes,
            })
            .collect();
        out.push(CrateSize {
            krate: "[no symbol]".into(),
            bytes: self.text.saturating_sub(covered),
        });
        out.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.krate.cmp(&b.krate)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::crate_of;

    #[test]
    fn crates_of_names() {
        assert_eq!(crate_of("<flashfs::fs::Fs<D>>::write"), "flashfs");
        assert_eq!(
            crate_of("<alloc::vec::Vec<u8> as core::clone::Clone>::clone"),
            "alloc"
        );
        assert_eq!(
            crate_of("core::slice::sort::unstable::quicksort::<flashfs::index::NodePtr>"),
            "core"
        );
        assert_eq!(crate_of("<&mut flash::X as flash::Y>::f"), "flash");
        assert_eq!(crate_of("memcpy"), "[runtime]");
        assert_eq!(crate_of("OUTLINED_FUNCTION_12"), "[outlined]");
        assert_eq!(crate_of("__aeabi_memcpy4"), "[runtime]");
    }
}
