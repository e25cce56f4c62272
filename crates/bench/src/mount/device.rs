//! The simulated parts the mount experiments run on: a NAND preset, or a partition of one
//! (the preset's pages and timing, fewer or more blocks), with the simulator's own storage
//! kept out of the heap figures.

use flash::{DeviceSpec, ImageMeta, NandSim, NandSpec};
use flashfs::{NandSegments, Segments};
use serde::Serialize;

use crate::error::{BenchError, Context, Result};
use crate::heap::uncounted;
use crate::tffs::device::Uncounted;

/// The device under the file system in these runs.
pub type Dev = NandSegments<Uncounted<NandSim>>;

/// A NAND part: a preset, or the preset's geometry and timing with another number of
/// blocks (a partition of it, or a larger part of the same family).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Part {
    /// Device preset (NAND).
    pub preset: String,
    /// Erase blocks, if not the preset's own.
    pub blocks: Option<u32>,
}

impl Part {
    /// The preset as it is.
    pub fn preset(name: &str) -> Part {
        Part {
            preset: name.into(),
            blocks: None,
        }
    }

    /// The preset's pages and timing with `blocks` erase blocks.
    pub fn with_blocks(name: &str, blocks: u32) -> Part {
        Part {
            preset: name.into(),
            blocks: Some(blocks),
        }
    }

    /// A partition of `mib` MiB of the preset (whole blocks, rounded down).
    pub fn partition_mib(name: &str, mib: u64) -> Result<Part> {
        let spec = Part::preset(name).spec()?;
        let block = u64::from(spec.pages_per_block) * u64::from(spec.page_size);
        let blocks = u32::try_from((mib << 20) / block)
            .map_err(|_| BenchError::InvalidOptions(format!("{mib} MiB of {name}")))?;
        Ok(Part::with_blocks(name, blocks))
    }

    /// The part's geometry and timing.
    pub fn spec(&self) -> Result<NandSpec> {
        let p =
            flash::preset::lookup(&self.preset).context(|| format!("preset {:?}", self.preset))?;
        let DeviceSpec::Nand(mut spec) = p.spec else {
            return Err(BenchError::InvalidOptions(format!(
                "preset {:?} is not NAND flash",
                self.preset
            )));
        };
        if let Some(b) = self.blocks {
            if b == 0 {
                return Err(BenchError::InvalidOptions("a part of 0 blocks".into()));
            }
            spec.blocks = b;
        }
        Ok(spec)
    }

    /// Bytes of data the part holds (pages only).
    pub fn capacity(&self) -> Result<u64> {
        Ok(self.spec()?.capacity())
    }

    /// The part's name in tables: the preset, with the blocks if they are not its own.
    pub fn label(&self) -> String {
        match self.blocks {
            Some(b) => format!("{}[{b} blocks]", self.preset),
            None => self.preset.clone(),
        }
    }

    /// A fresh simulated part as segments.
    pub fn build(&self, seed: u64) -> Result<Dev> {
        let sim = self.simulate(seed)?;
        uncounted(|| NandSegments::new(sim)).context(|| format!("segmenting {}", self.label()))
    }

    /// A fresh simulated part, its storage not counted as heap.
    pub fn simulate(&self, seed: u64) -> Result<Uncounted<NandSim>> {
        let spec = self.spec()?;
        uncounted(|| NandSim::new(spec, ImageMeta::new(&self.preset, seed)))
            .map(Uncounted)
            .context(|| format!("simulating {}", self.label()))
    }
}

/// A volume on simulated parts whose state can be copied and whose flash page reads are
/// counted: the NAND part alone ([`Dev`]), or NVRAM beside NAND (the FRASH benchmark's).
pub trait SimVolume: Segments + Clone {
    /// Page reads of the volume's flash so far (on a volume on two devices, of the
    /// flash alone: the NVRAM is read by the byte).
    fn page_reads(&self) -> u64;

    /// Bytes read from the volume's NVRAM so far (0 on a volume without one).
    fn fast_bytes_read(&self) -> u64 {
        0
    }
}

impl SimVolume for Dev {
    fn page_reads(&self) -> u64 {
        use flash::Simulated;
        self.flash().inner().stats().reads
    }
}

/// A copy of a volume's state, its storage not counted as heap.
pub fn copy<D: Clone>(dev: &D) -> D {
    uncounted(|| dev.clone())
}

/// Drops a part (or what holds one), its storage not counted as heap.
pub fn discard<T>(x: T) {
    uncounted(|| drop(x))
}

/// Device time now (on a volume on two devices, the one clock both advance).
pub fn now<D: Segments>(dev: &D) -> std::time::Duration {
    uncounted(|| dev.now())
}

/// Flash page reads so far.
pub fn reads<D: SimVolume>(dev: &D) -> u64 {
    dev.page_reads()
}

/// RAM the host has available (`MemAvailable`), if it can tell.
pub fn host_available_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Bytes of host RAM the simulator's image of `part` takes holding `stored` bytes of data:
/// its sparse store keeps only the chunks written to (erased flash reads as a hole), so the
/// data's pages with their spare areas, an eighth more for what else the log and the file
/// system write and keep (segment headers, checkpoints, metadata, dead pages not yet erased,
/// chunks an erase leaves partly used), and a state byte per page, in the image and beside
/// it; never more than the whole image.
pub fn image_bytes(part: &Part, stored: u64) -> Result<u64> {
    let spec = part.spec()?;
    let pages = u64::from(spec.blocks) * u64::from(spec.pages_per_block);
    let stride = u64::from(spec.page_size) + u64::from(spec.spare_size);
    let whole = pages * stride;
    let data = stored
        .min(spec.capacity())
        .div_ceil(u64::from(spec.page_size))
        * stride;
    Ok((data + data / 8).min(whole) + 2 * pages)
}

/// Why `part` would not fit in the host's RAM holding `stored` bytes of data, if it would
/// not: the run holds the image twice (the state measured and the copy mounted), with the
/// simulator's bookkeeping on top, so it asks for 2.5 times the image
/// ([`image_bytes`]).
pub fn too_big_for_ram(part: &Part, stored: u64) -> Result<Option<String>> {
    let need = image_bytes(part, stored)? / 2 * 5;
    Ok(match host_available_bytes() {
        Some(avail) if avail >= need => None,
        Some(avail) => Some(format!(
            "{} skipped: holding {} MiB the run needs about {} MiB of RAM, the host has {} MiB \
             available",
            part.label(),
            stored >> 20,
            need >> 20,
            avail >> 20
        )),
        None => Some(format!(
            "{} skipped: cannot tell how much RAM the host has (no /proc/meminfo)",
            part.label()
        )),
    })
}
