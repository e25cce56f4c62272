//! The extent maps of recently read files, kept in RAM so that a read finds its sectors
//! without walking the index.
//!
//! A file's map is loaded whole, by one walk of its extent items, the first time it is read,
//! and then follows every change of those items: each insertion and removal of an extent
//! item is mirrored here as it is made in the index (or, if the index reports an error,
//! the file's map is dropped). Deleting a file drops its map, and rebuilding the RAM state
//! from the committed index (mount, or the return to the last commit after a failed one)
//! drops them all. Maps are bounded in number of files ([`FsConfig::extent_maps`], 0 for
//! none: every read then walks the index) and in total extents; a file with more extents
//! than the budget is read through the index, as if it had no map.
//!
//! [`FsConfig::extent_maps`]: super::FsConfig::extent_maps

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use super::layout::{Extent, Ino};

/// Files whose maps are kept at most, by default.
pub(super) const FILES: usize = 8;
/// Extents kept at most, over all files, by default.
pub(super) const EXTENTS: usize = 1 << 16;
/// Bytes of RAM an extent kept takes, about: its entry in a file's map.
pub(super) const EXTENT_BYTES: usize = 48;

/// One file's map.
#[derive(Debug)]
enum Map {
    /// Every extent of the file, by first block.
    Loaded(BTreeMap<u64, Extent>),
    /// The file has more extents than the budget: not kept.
    TooLarge,
}

#[derive(Debug)]
struct Entry {
    map: Map,
    /// Use clock at the last look-up.
    used: u64,
}

/// Extent maps of a few files (see the module documentation).
#[derive(Debug)]
pub(super) struct ExtentCache {
    files: BTreeMap<Ino, Entry>,
    /// Files whose maps are kept at most (0: none).
    max_files: usize,
    /// Extents kept at most, over all files.
    max_extents: usize,
    /// Extents held, over all files.
    extents: usize,
    clock: u64,
    /// While an operation of a transaction runs: no map is used or loaded, and every
    /// change drops the file's map, so no map ever shows a transaction's extents.
    pub bypass: bool,
}

/// What the cache knows of a file.
pub(super) enum Known<'a> {
    /// Nothing: its map must be loaded.
    Nothing,
    /// Its map is not kept: look in the index.
    TooLarge,
    /// Its map.
    Map(&'a BTreeMap<u64, Extent>),
}

impl Default for ExtentCache {
    fn default() -> Self {
        ExtentCache::new(FILES, EXTENTS)
    }
}

impl ExtentCache {
    /// An empty cache that keeps the maps of up to `max_files` files (0: none), and up to
    /// `max_extents` extents over all of them.
    pub fn new(max_files: usize, max_extents: usize) -> ExtentCache {
        ExtentCache {
            files: BTreeMap::new(),
            max_files,
            max_extents,
            extents: 0,
            clock: 0,
            bypass: false,
        }
    }

    /// Extents kept at most, over all files: a file with more is read through the index.
    pub fn max_extents(&self) -> usize {
        self.max_extents
    }

    /// What is known of `ino`'s extents, marked as just used.
    pub fn get(&mut self, ino: Ino) -> Known<'_> {
        if self.bypass || self.max_files == 0 {
            return Known::TooLarge;
        }
        self.clock += 1;
        match self.files.get_mut(&ino) {
            None => Known::Nothing,
            Some(e) => {
                e.used = self.clock;
                match &e.map {
                    Map::Loaded(m) => Known::Map(m),
                    Map::TooLarge => Known::TooLarge,
                }
            }
        }
    }

    /// Keeps `ino`'s whole map (`None`: it has more extents than the budget), unloading the
    /// least recently used maps to make room.
    pub fn load(&mut self, ino: Ino, map: Option<BTreeMap<u64, Extent>>) {
        self.forget(ino);
        if self.bypass || self.max_files == 0 {
            return;
        }
        let n = map.as_ref().map_or(0, BTreeMap::len);
        while !self.files.is_empty()
            && (self.files.len() >= self.max_files || self.extents + n > self.max_extents)
        {
            let oldest = self
                .files
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(i, _)| *i);
            if let Some(i) = oldest {
                self.forget(i);
            }
        }
        self.clock += 1;
        self.extents += n;
        let map = match map {
            Some(m) => Map::Loaded(m),
            None => Map::TooLarge,
        };
        self.files.insert(
            ino,
            Entry {
                map,
                used: self.clock,
            },
        );
    }

    /// Records that the index now maps `ino`'s blocks from `b` to `e`.
    pub fn insert(&mut self, ino: Ino, b: u64, e: Extent) {
        if self.bypass {
            return self.forget(ino);
        }
        if let Some(Entry {
            map: Map::Loaded(m),
            ..
        }) = self.files.get_mut(&ino)
        {
            if m.insert(b, e).is_none() {
                self.extents += 1;
                if self.extents > self.max_extents {
                    self.forget(ino);
                }
            }
        }
    }

    /// Records that the index no longer has `ino`'s extent item at block `b`.
    pub fn remove(&mut self, ino: Ino, b: u64) {
        if self.bypass {
            return self.forget(ino);
        }
        if let Some(Entry {
            map: Map::Loaded(m),
            ..
        }) = self.files.get_mut(&ino)
        {
            if m.remove(&b).is_some() {
                self.extents -= 1;
            }
        }
    }

    /// Drops what is known of `ino`.
    pub fn forget(&mut self, ino: Ino) {
        if let Some(Entry {
            map: Map::Loaded(m),
            ..
        }) = self.files.remove(&ino)
        {
            self.extents -= m.len();
        }
    }

    /// Drops every map.
    pub fn clear(&mut self) {
        self.files.clear();
        self.extents = 0;
    }
}

/// The extents of `map` that overlap blocks `[b0, b1)`, by first block.
pub(super) fn overlapping(map: &BTreeMap<u64, Extent>, b0: u64, b1: u64) -> Vec<(u64, Extent)> {
    let mut out = Vec::new();
    if let Some((&b, &e)) = map.range(..b0).next_back() {
        if b + e.len > b0 {
            out.push((b, e));
        }
    }
    out.extend(map.range(b0..b1).map(|(&b, &e)| (b, e)));
    out
}
