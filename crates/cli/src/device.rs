//! What the commands share about devices: preset look-up, one-line descriptions, friendly
//! errors, and simulators of any medium opened from an image.

use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};
use flash::preset::{self, Preset};
use flash::spec::NorSpec;
use flash::spec::{Cells, DeviceSpec};
use flash::store::Store;
use flash::{
    DeviceClock, FlashError, ImageMeta, IoErrorKind, NandFlash, NandSim, NorFlash, NorSim,
    NvramNor, NvramSim, Simulated,
};

use crate::units;

/// The preset called `name`, or an error that says where the names are.
pub fn lookup(name: &str) -> anyhow::Result<Preset> {
    preset::lookup(name)
        .map_err(|_| anyhow!("unknown preset '{name}' (`flashfs presets` lists them)"))
}

/// A media error in words; host I/O failures in the words of the operating system.
pub fn explain(e: FlashError) -> anyhow::Error {
    match e {
        FlashError::Io(kind) => anyhow!(match kind {
            IoErrorKind::NotFound => "no such file or directory",
            IoErrorKind::AlreadyExists => "file exists",
            IoErrorKind::PermissionDenied => "permission denied",
            IoErrorKind::NoSpace => "no space left on the host disk",
            IoErrorKind::UnexpectedEof => "file ends early",
            IoErrorKind::Other => "host I/O error",
        }),
        e => anyhow::Error::new(e),
    }
}

/// A host I/O error in words, without the OS error number.
pub fn io_error(e: std::io::Error) -> anyhow::Error {
    use std::io::ErrorKind as K;
    let text = match e.kind() {
        K::NotFound => "no such file or directory".to_string(),
        K::PermissionDenied => "permission denied".to_string(),
        K::AlreadyExists => "file exists".to_string(),
        _ => {
            let t = e.to_string();
            match t.find(" (os error") {
                Some(i) => t[..i].to_string(),
                None => t,
            }
        }
    };
    anyhow!(text)
}

/// Most RAM the tables of an image may take when it is opened (an image's header could
/// otherwise ask for any amount).
pub const MAX_TABLE_RAM: u64 = 1 << 30;

/// Refuses an image whose geometry would need more than [`MAX_TABLE_RAM`] to open.
pub fn check_ram(spec: &DeviceSpec) -> anyhow::Result<()> {
    let need = match spec {
        DeviceSpec::Nor(s) => {
            let bitmap = if s.reprogrammable {
                0
            } else {
                (s.capacity() / s.word_size as u64).div_ceil(8)
            };
            s.units as u64 * 8 + bitmap
        }
        DeviceSpec::Nand(s) => s.blocks as u64 * (8 + s.pages_per_block as u64),
        DeviceSpec::Nvram(_) => 0,
    };
    if need > MAX_TABLE_RAM {
        return Err(anyhow!(
            "the image's geometry needs {} of RAM to open (at most {})",
            units::bytes(need),
            units::bytes(MAX_TABLE_RAM)
        ));
    }
    Ok(())
}

/// Geometry in one line, e.g. `8192 blocks x 64 pages of 2048+34 B, 1 bank, SLC`.
pub fn geometry(spec: &DeviceSpec) -> String {
    match spec {
        DeviceSpec::Nor(s) => {
            let program = if s.program_page == 0 {
                String::new()
            } else {
                format!(", {} B program page", s.program_page)
            };
            format!(
                "{} units x {}, {} bank{}, {}-byte words{program}, {}",
                s.units,
                units::bytes(s.unit_size as u64),
                s.banks,
                plural(s.banks as u64),
                s.word_size,
                if s.reprogrammable {
                    "reprogrammable"
                } else {
                    "program once per erase"
                }
            )
        }
        DeviceSpec::Nand(s) => format!(
            "{} blocks x {} pages of {}+{} B, {} bank{}, {}, ECC {} bit{}/{} B",
            s.blocks,
            s.pages_per_block,
            s.page_size,
            s.spare_size,
            s.banks,
            plural(s.banks as u64),
            cells(s.cells),
            s.ecc.correctable,
            plural(s.ecc.correctable as u64),
            s.ecc.codeword
        ),
        DeviceSpec::Nvram(s) => format!(
            "{} byte-addressable, {}-byte words, written in place",
            units::bytes(s.size),
            s.word_size
        ),
    }
}

/// `SLC` or `MLC`.
pub fn cells(c: Cells) -> &'static str {
    match c {
        Cells::Slc => "SLC",
        Cells::Mlc { .. } => "MLC",
    }
}

/// `"s"` unless `n` is one.
pub fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// An image file opened for reading only: inspecting an image never changes it.
#[derive(Debug)]
pub struct ReadOnlyFile {
    file: File,
    len: u64,
}

impl ReadOnlyFile {
    /// Opens `path`, which must be a regular file.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        let file = File::open(path).map_err(io_error)?;
        let meta = file.metadata().map_err(io_error)?;
        if !meta.is_file() {
            return Err(anyhow!("not a regular file"));
        }
        Ok(ReadOnlyFile {
            file,
            len: meta.len(),
        })
    }

    /// Bytes the file takes on the host disk.
    pub fn allocated_bytes(&self) -> anyhow::Result<u64> {
        Ok(self.file.metadata().map_err(io_error)?.blocks() * 512)
    }
}

impl Store for ReadOnlyFile {
    fn len(&self) -> u64 {
        self.len
    }

    fn read(&self, off: u64, buf: &mut [u8]) -> flash::Result<()> {
        match off.checked_add(buf.len() as u64) {
            Some(end) if end <= self.len => Ok(self.file.read_exact_at(buf, off)?),
            _ => Err(FlashError::OutOfRange {
                addr: off,
                len: buf.len() as u64,
            }),
        }
    }

    fn write(&mut self, _: u64, _: &[u8]) -> flash::Result<()> {
        Err(FlashError::Io(IoErrorKind::PermissionDenied))
    }

    fn zero(&mut self, _: u64, _: u64) -> flash::Result<()> {
        Err(FlashError::Io(IoErrorKind::PermissionDenied))
    }
}

/// A part the log sees as NOR flash: NOR itself, or NVRAM cut into erase units
/// ([`NvramNor`]: a volume on NVRAM is laid out as on reprogrammable NOR, SPEC.md §2.2b).
pub enum NorPart<S: Store> {
    /// NOR flash.
    Flash(NorSim<S>),
    /// NVRAM.
    Nvram(NvramNor<NvramSim<S>>),
}

/// Calls `$f` with the simulator inside a [`NorPart`].
macro_rules! with_part {
    ($part:expr, $f:ident => $body:expr) => {
        match $part {
            NorPart::Flash($f) => $body,
            NorPart::Nvram($f) => $body,
        }
    };
}

impl<S: Store> NorPart<S> {
    /// Opens the NOR or NVRAM image in `store`.
    pub fn open(store: S) -> flash::Result<Self> {
        let (spec, _) = flash::image::read_header(&store)?;
        Ok(match spec {
            DeviceSpec::Nvram(_) => NorPart::Nvram(NvramNor::new(NvramSim::open(store)?)?),
            _ => NorPart::Flash(NorSim::open(store)?),
        })
    }

    /// Gives the image's store back.
    pub fn into_store(self) -> S {
        match self {
            NorPart::Flash(f) => f.into_store(),
            NorPart::Nvram(n) => n.into_inner().into_store(),
        }
    }
}

impl<S: Store> Simulated for NorPart<S> {
    fn stats(&self) -> &flash::stats::Stats {
        with_part!(self, f => f.stats())
    }
    fn ops(&self) -> u64 {
        with_part!(self, f => f.ops())
    }
    fn faults(&self) -> &flash::FaultConfig {
        with_part!(self, f => f.faults())
    }
    fn set_faults(&mut self, config: flash::FaultConfig) {
        with_part!(self, f => f.set_faults(config))
    }
    fn schedule_cut(&mut self, ops: u64, torn: bool) {
        with_part!(self, f => f.schedule_cut(ops, torn))
    }
    fn power_cut(&mut self) -> flash::Result<()> {
        with_part!(self, f => f.power_cut())
    }
    fn is_powered(&self) -> bool {
        with_part!(self, f => f.is_powered())
    }
    fn reboot(&mut self) {
        with_part!(self, f => f.reboot())
    }
    fn erase_counts(&self) -> Vec<u32> {
        with_part!(self, f => f.erase_counts())
    }
    fn meta(&self) -> &ImageMeta {
        with_part!(self, f => f.meta())
    }
    fn flush(&mut self) -> flash::Result<()> {
        with_part!(self, f => Simulated::flush(f))
    }
}

impl<S: Store> DeviceClock for NorPart<S> {
    fn now(&self) -> std::time::Duration {
        with_part!(self, f => f.now())
    }

    fn idle(&mut self, d: std::time::Duration) {
        with_part!(self, f => f.idle(d))
    }
}

impl<S: Store> NorFlash for NorPart<S> {
    fn spec(&self) -> &NorSpec {
        with_part!(self, f => f.spec())
    }

    fn read(&mut self, addr: u64, buf: &mut [u8]) -> flash::Result<()> {
        with_part!(self, f => f.read(addr, buf))
    }

    fn program(&mut self, addr: u64, data: &[u8]) -> flash::Result<()> {
        with_part!(self, f => f.program(addr, data))
    }

    fn erase(&mut self, unit: u32) -> flash::Result<()> {
        with_part!(self, f => f.erase(unit))
    }

    fn start_erase(&mut self, unit: u32) -> flash::Result<()> {
        with_part!(self, f => f.start_erase(unit))
    }

    fn sync(&mut self) -> flash::Result<()> {
        with_part!(self, f => NorFlash::sync(f))
    }

    fn writes_in_place(&self) -> bool {
        with_part!(self, f => f.writes_in_place())
    }
}

/// A simulator of whichever medium an image holds.
pub enum AnySim<S: Store> {
    /// NOR flash.
    Nor(NorSim<S>),
    /// NAND flash, SLC or MLC.
    Nand(NandSim<S>),
    /// NVRAM.
    Nvram(NvramSim<S>),
}

impl<S: Store> AnySim<S> {
    /// Opens the image in `store`, whatever medium it holds.
    pub fn open(store: S) -> flash::Result<(Self, DeviceSpec)> {
        let (spec, _) = flash::image::read_header(&store)?;
        let sim = match spec {
            DeviceSpec::Nor(_) => AnySim::Nor(NorSim::open(store)?),
            DeviceSpec::Nand(_) => AnySim::Nand(NandSim::open(store)?),
            DeviceSpec::Nvram(_) => AnySim::Nvram(NvramSim::open(store)?),
        };
        Ok((sim, spec))
    }

    /// The simulator's common interface.
    pub fn sim(&self) -> &dyn Simulated {
        match self {
            AnySim::Nor(s) => s,
            AnySim::Nand(s) => s,
            AnySim::Nvram(s) => s,
        }
    }

    /// Blocks marked bad (factory or later); none on NOR and NVRAM.
    pub fn bad_blocks(&mut self) -> flash::Result<u64> {
        match self {
            AnySim::Nand(s) => bad_blocks(s),
            _ => Ok(0),
        }
    }
}

/// Blocks of `nand` marked bad (factory or later).
pub fn bad_blocks<F: NandFlash>(nand: &mut F) -> flash::Result<u64> {
    let mut bad = 0;
    for b in 0..nand.spec().blocks {
        bad += nand.is_bad(b)? as u64;
    }
    Ok(bad)
}

/// Erase counts summarised.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Spread {
    /// Blocks counted.
    pub blocks: u64,
    /// Fewest erases of any block.
    pub min: u32,
    /// Mean erases per block.
    pub mean: f64,
    /// Most erases of any block.
    pub max: u32,
    /// Standard deviation of the erase counts.
    pub stddev: f64,
}

impl Spread {
    /// The spread of `counts` (all zero when empty).
    pub fn of(counts: &[u32]) -> Spread {
        let w = flash::stats::WearSpread::of(counts);
        Spread {
            blocks: w.blocks,
            min: w.min,
            mean: w.mean,
            max: w.max,
            stddev: w.stddev,
        }
    }

    /// `min 0, mean 1.25, max 9, stddev 2.1`.
    pub fn line(&self) -> String {
        format!(
            "min {}, mean {:.2}, max {}, stddev {:.2}",
            units::count(self.min as u64),
            self.mean,
            units::count(self.max as u64),
            self.stddev
        )
    }
}

/// A text histogram of erase counts: at most `bins` rows of `low-high  ####  blocks`.
pub fn histogram(counts: &[u32], bins: u32, width: usize) -> Vec<(String, u64, String)> {
    let (Some(&lo), Some(&hi)) = (counts.iter().min(), counts.iter().max()) else {
        return Vec::new();
    };
    let span = (hi - lo) as u64 + 1;
    let bins = (bins.max(1) as u64).min(span);
    let size = span.div_ceil(bins);
    let bins = span.div_ceil(size);
    let mut tally = vec![0u64; bins as usize];
    for &c in counts {
        tally[((c - lo) as u64 / size) as usize] += 1;
    }
    let most = tally.iter().copied().max().unwrap_or(1).max(1);
    tally
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let from = lo as u64 + i as u64 * size;
            let to = (from + size - 1).min(hi as u64);
            let label = if from == to {
                units::count(from)
            } else {
                format!("{}-{}", units::count(from), units::count(to))
            };
            let bar = if n == 0 {
                0
            } else {
                ((n as f64 / most as f64) * width as f64).ceil() as usize
            };
            (label, n, "#".repeat(bar))
        })
        .collect()
}

/// Checks that an image may be created at `path`: refuses a directory, and an existing file
/// unless `force`. Returns whether a file is there (to be replaced).
pub fn check_target(path: &Path, force: bool) -> anyhow::Result<bool> {
    let shown = shown(path);
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => Err(anyhow!("{shown}: is a directory")),
        Ok(_) if !force => Err(anyhow!("{shown}: file exists (use --force to replace it)")),
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io_error(e).context(shown)),
    }
}

/// Creates a fresh image of `preset` at `path`, which must not exist: every block erased and
/// unworn, factory bad blocks from `seed`. Nothing is left behind on failure.
pub fn create_image(path: &Path, preset: &Preset, seed: u64) -> anyhow::Result<()> {
    let meta = ImageMeta::new(preset.name, seed);
    let made = match preset.spec {
        DeviceSpec::Nor(s) => NorSim::create(path, s, meta).and_then(|mut d| d.flush()),
        DeviceSpec::Nand(s) => NandSim::create(path, s, meta).and_then(|mut d| d.flush()),
        DeviceSpec::Nvram(s) => NvramSim::create(path, s, meta).and_then(|mut d| d.flush()),
    };
    if let Err(e) = made {
        // Do not leave a half-made image behind (but never remove what was there before).
        if !matches!(e, FlashError::Io(IoErrorKind::AlreadyExists)) {
            let _ = std::fs::remove_file(path);
        }
        return Err(explain(e).context(shown(path)));
    }
    Ok(())
}

/// `path` for messages.
pub fn shown(path: &Path) -> String {
    PathBuf::from(path).display().to_string()
}

/// Adds the image path to an error.
pub trait AtPath<T> {
    /// The error, prefixed with `path: `.
    fn at(self, path: &Path) -> anyhow::Result<T>;
}

impl<T> AtPath<T> for flash::Result<T> {
    fn at(self, path: &Path) -> anyhow::Result<T> {
        self.map_err(explain).with_context(|| shown(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_and_histogram() {
        let s = Spread::of(&[1, 1, 3, 3]);
        assert_eq!((s.min, s.max, s.mean, s.stddev), (1, 3, 2.0, 1.0));
        assert_eq!(Spread::of(&[]), Spread::default());
        let h = histogram(&[0, 0, 0, 5, 9], 4, 10);
        assert_eq!(h.len(), 4);
        assert_eq!(h[0], ("0-2".to_string(), 3, "#".repeat(10)));
        assert_eq!(h.iter().map(|r| r.1).sum::<u64>(), 5);
        let flat = histogram(&[7; 10], 8, 10);
        assert_eq!(flat, vec![("7".to_string(), 10, "#".repeat(10))]);
        assert!(histogram(&[], 8, 10).is_empty());
    }
}
