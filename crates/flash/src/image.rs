//! The simulator image format: a self-describing header, a block table (wear and marks), a
//! page-state table, then the medium's bytes (flash inverted, so erased flash is a hole; NVRAM
//! as is, so zeroed NVRAM is one).
//!
//! ```text
//! offset 0      header (4 KiB)        magic "FLASHSIM", version, kind, wear model, seed,
//!                                     preset name, the whole spec, CRC-32C
//! offset 4096   block table           8 B per block: erase count (u32 LE), flags (u8), 0 x3
//! (4 KiB align) page table            NAND: 1 B per page; NOR without reprogramming: 1 bit
//!                                     per word ("programmed since erase"); else empty
//! (4 KiB align) data                  NOR: the bytes, inverted; NAND: per page, data then
//!                                     spare, inverted; NVRAM: the bytes
//! ```
//! Everything is little-endian. The simulator writes the tables through on every change, so
//! an image is consistent whenever the host process stops.

use alloc::string::String;

use crate::error::{FlashError, Result};
use crate::fault::WearModel;
use crate::spec::*;
use crate::store::Store;

const MAGIC: &[u8; 8] = b"FLASHSIM";
const VERSION: u32 = 1;
const HEADER_LEN: u64 = 4096;
const HEADER_USED: usize = 252;
const NAME_LEN: usize = 32;
const FIELDS: usize = 24;
const ALIGN: u64 = 4096;

/// Block flag: marked bad at the factory.
pub(crate) const FACTORY_BAD: u8 = 1;
/// Block flag: marked bad by software.
pub(crate) const MARKED_BAD: u8 = 2;
/// Block flag: an MLC block in SLC mode.
pub(crate) const SLC_MODE: u8 = 4;

/// Page state: programmed since the last erase.
pub(crate) const PROGRAMMED: u8 = 0x80;
/// Page state: the content fails ECC (torn program, failed program, interrupted erase).
pub(crate) const GARBAGE: u8 = 0x40;
/// Page state: persistent bit errors in the page's worst codeword.
pub(crate) const ERRORS: u8 = 0x3F;

/// Who made an image and how its blocks wear.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageMeta {
    /// Preset name (or a label for a custom geometry), at most 32 bytes.
    pub name: String,
    /// Seed of the choices fixed at creation (factory bad blocks).
    pub seed: u64,
    /// When worn blocks fail.
    pub wear: WearModel,
}

impl ImageMeta {
    /// Metadata for a device named `name`, with the default wear model.
    pub fn new(name: &str, seed: u64) -> Self {
        ImageMeta {
            name: name.into(),
            seed,
            wear: WearModel::default(),
        }
    }
}

/// Where each part of an image lies in its store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    pub blocks: u32,
    pub block_table: u64,
    pub page_table: u64,
    pub page_table_len: u64,
    pub data: u64,
    pub total: u64,
}

fn align(x: u64) -> u64 {
    x.div_ceil(ALIGN).saturating_mul(ALIGN)
}

impl Layout {
    /// The layout of `spec`. Total for any spec, valid or not (an invalid one is refused
    /// later): sizes saturate instead of overflowing, so a hostile geometry yields an image
    /// no store can hold rather than a panic.
    pub fn of(spec: &DeviceSpec) -> Layout {
        let (blocks, page_table_len, data_len) = match spec {
            DeviceSpec::Nor(s) => {
                let words = s.capacity() / s.word_size.max(1) as u64;
                let bitmap = if s.reprogrammable {
                    0
                } else {
                    words.div_ceil(8)
                };
                (s.units, bitmap, s.capacity())
            }
            DeviceSpec::Nand(s) => {
                let pages = s.blocks as u64 * s.pages_per_block as u64;
                let stride = s.page_size as u64 + s.spare_size as u64;
                (s.blocks, pages, pages.saturating_mul(stride))
            }
            DeviceSpec::Nvram(s) => (0, 0, s.size),
        };
        let block_table = HEADER_LEN;
        let page_table = block_table + align(blocks as u64 * 8);
        let data = page_table.saturating_add(align(page_table_len));
        Layout {
            blocks,
            block_table,
            page_table,
            page_table_len,
            data,
            total: data.saturating_add(align(data_len)),
        }
    }
}

/// Bytes an image of `spec` occupies (its apparent size; holes cost nothing).
pub fn image_len(spec: &DeviceSpec) -> u64 {
    Layout::of(spec).total
}

/// Per-block state kept in the block table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct BlockMeta {
    pub erase_count: u32,
    pub flags: u8,
}

impl BlockMeta {
    fn encode(self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&self.erase_count.to_le_bytes());
        b[4] = self.flags;
        b
    }

    fn decode(b: &[u8]) -> BlockMeta {
        BlockMeta {
            erase_count: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            flags: b[4] & (FACTORY_BAD | MARKED_BAD | SLC_MODE),
        }
    }

    pub fn is_bad(self) -> bool {
        self.flags & (FACTORY_BAD | MARKED_BAD) != 0
    }
}

pub(crate) fn crc32c(data: &[u8]) -> u32 {
    crc::Crc::<u32>::new(&crc::CRC_32_ISCSI).checksum(data)
}

fn kind_code(spec: &DeviceSpec) -> u8 {
    match spec {
        DeviceSpec::Nor(_) => 1,
        DeviceSpec::Nand(_) => 2,
        DeviceSpec::Nvram(_) => 3,
    }
}

fn fields(spec: &DeviceSpec) -> [u64; FIELDS] {
    let mut f = [0u64; FIELDS];
    let v: &[u64] = match spec {
        DeviceSpec::Nor(s) => &[
            s.unit_size as u64,
            s.units as u64,
            s.banks as u64,
            s.word_size as u64,
            s.program_page as u64,
            s.reprogrammable as u64,
            s.timing.read_word_ns,
            s.timing.program_word_ns,
            s.timing.program_cmd_ns,
            s.timing.erase_ns,
            s.timing.bus_byte_ns,
            s.timing.erase_suspend_ns.unwrap_or(u64::MAX),
            s.endurance as u64,
        ],
        DeviceSpec::Nand(s) => {
            let slc = match s.cells {
                Cells::Slc => None,
                Cells::Mlc { slc_mode } => Some(slc_mode),
            };
            let t = slc.unwrap_or(NandTiming::UNTIMED);
            &[
                s.blocks as u64,
                s.pages_per_block as u64,
                s.page_size as u64,
                s.spare_size as u64,
                s.banks as u64,
                slc.is_some() as u64,
                s.ecc.codeword as u64,
                s.ecc.correctable as u64,
                s.timing.read_ns,
                s.timing.program_ns,
                s.timing.erase_ns,
                s.timing.bus_byte_ns,
                s.endurance as u64,
                s.factory_bad_permille as u64,
                t.read_ns,
                t.program_ns,
                t.erase_ns,
                t.bus_byte_ns,
            ]
        }
        DeviceSpec::Nvram(s) => &[
            s.size,
            s.word_size as u64,
            s.access_ns,
            s.command_ns,
            s.bus_byte_ns,
            s.endurance,
        ],
    };
    f[..v.len()].copy_from_slice(v);
    f
}

fn spec_from(kind: u8, f: &[u64; FIELDS]) -> Result<DeviceSpec> {
    let u =
        |i: usize| u32::try_from(f[i]).map_err(|_| FlashError::BadImage("a size field overflows"));
    let flag = |i: usize| match f[i] {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(FlashError::BadImage("a flag field is neither 0 nor 1")),
    };
    let spec = match kind {
        1 => DeviceSpec::Nor(NorSpec {
            unit_size: u(0)?,
            units: u(1)?,
            banks: u(2)?,
            word_size: u(3)?,
            program_page: u(4)?,
            reprogrammable: flag(5)?,
            timing: NorTiming {
                read_word_ns: f[6],
                program_word_ns: f[7],
                program_cmd_ns: f[8],
                erase_ns: f[9],
                bus_byte_ns: f[10],
                erase_suspend_ns: (f[11] != u64::MAX).then_some(f[11]),
            },
            endurance: u(12)?,
        }),
        2 => {
            let slc_mode = NandTiming {
                read_ns: f[14],
                program_ns: f[15],
                erase_ns: f[16],
                bus_byte_ns: f[17],
            };
            DeviceSpec::Nand(NandSpec {
                blocks: u(0)?,
                pages_per_block: u(1)?,
                page_size: u(2)?,
                spare_size: u(3)?,
                banks: u(4)?,
                cells: if flag(5)? {
                    Cells::Mlc { slc_mode }
                } else {
                    Cells::Slc
                },
                ecc: EccSpec {
                    codeword: u(6)?,
                    correctable: u(7)?,
                },
                timing: NandTiming {
                    read_ns: f[8],
                    program_ns: f[9],
                    erase_ns: f[10],
                    bus_byte_ns: f[11],
                },
                endurance: u(12)?,
                factory_bad_permille: u(13)?,
            })
        }
        3 => DeviceSpec::Nvram(NvramSpec {
            size: f[0],
            word_size: u(1)?,
            access_ns: f[2],
            command_ns: f[3],
            bus_byte_ns: f[4],
            endurance: f[5],
        }),
        _ => return Err(FlashError::BadImage("unknown medium kind")),
    };
    spec.validate()
        .map_err(|_| FlashError::BadImage("the recorded geometry is invalid"))?;
    Ok(spec)
}

/// Writes the header of a new image.
pub(crate) fn write_header<S: Store>(
    store: &mut S,
    spec: &DeviceSpec,
    meta: &ImageMeta,
) -> Result<()> {
    if meta.name.len() > NAME_LEN {
        return Err(FlashError::BadSpec("image name longer than 32 bytes"));
    }
    let mut h = [0u8; HEADER_USED];
    h[0..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[12] = kind_code(spec);
    h[13] = meta.wear.code();
    h[16..24].copy_from_slice(&meta.seed.to_le_bytes());
    h[24..24 + meta.name.len()].copy_from_slice(meta.name.as_bytes());
    for (i, v) in fields(spec).iter().enumerate() {
        let at = 56 + i * 8;
        h[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }
    let crc = crc32c(&h[..248]);
    h[248..252].copy_from_slice(&crc.to_le_bytes());
    store.write(0, &h)
}

/// Reads and checks the header of an image.
pub fn read_header<S: Store>(store: &S) -> Result<(DeviceSpec, ImageMeta)> {
    if store.len() < HEADER_LEN {
        return Err(FlashError::BadImage("shorter than its header"));
    }
    let mut h = [0u8; HEADER_USED];
    store.read(0, &mut h)?;
    if &h[0..8] != MAGIC {
        return Err(FlashError::BadImage(
            "not a flash simulator image (bad magic)",
        ));
    }
    let crc = u32::from_le_bytes([h[248], h[249], h[250], h[251]]);
    if crc != crc32c(&h[..248]) {
        return Err(FlashError::BadImage("header checksum mismatch"));
    }
    let version = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
    if version != VERSION {
        return Err(FlashError::BadImage("unsupported image version"));
    }
    let mut f = [0u64; FIELDS];
    for (i, v) in f.iter_mut().enumerate() {
        let at = 56 + i * 8;
        *v = u64::from_le_bytes(
            h[at..at + 8]
                .try_into()
                .map_err(|_| FlashError::BadImage("header"))?,
        );
    }
    let spec = spec_from(h[12], &f)?;
    let wear = WearModel::from_code(h[13]).ok_or(FlashError::BadImage("unknown wear model"))?;
    let name_end = h[24..56].iter().position(|&b| b == 0).unwrap_or(NAME_LEN);
    let name = core::str::from_utf8(&h[24..24 + name_end])
        .map_err(|_| FlashError::BadImage("preset name is not UTF-8"))?
        .into();
    let seed = u64::from_le_bytes(
        h[16..24]
            .try_into()
            .map_err(|_| FlashError::BadImage("header"))?,
    );
    if store.len() < Layout::of(&spec).total {
        return Err(FlashError::BadImage("truncated: shorter than its geometry"));
    }
    Ok((spec, ImageMeta { name, seed, wear }))
}

pub(crate) fn load_blocks<S: Store>(
    store: &S,
    layout: &Layout,
) -> Result<alloc::vec::Vec<BlockMeta>> {
    let mut raw = alloc::vec![0u8; layout.blocks as usize * 8];
    store.read(layout.block_table, &mut raw)?;
    Ok(raw.chunks_exact(8).map(BlockMeta::decode).collect())
}

pub(crate) fn save_block<S: Store>(
    store: &mut S,
    layout: &Layout,
    block: u32,
    m: BlockMeta,
) -> Result<()> {
    store.write(layout.block_table + block as u64 * 8, &m.encode())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preset::PRESETS;
    use crate::store::RamStore;

    #[test]
    fn header_round_trips_every_preset() {
        for p in PRESETS {
            let mut s = RamStore::new(image_len(&p.spec));
            let meta = ImageMeta::new(p.name, 99);
            write_header(&mut s, &p.spec, &meta).unwrap();
            let (spec, back) = read_header(&s).unwrap();
            assert_eq!(spec, p.spec, "{}", p.name);
            assert_eq!(back, meta);
        }
    }

    #[test]
    fn damaged_headers_are_refused() {
        let p = &PRESETS[0];
        let mut s = RamStore::new(image_len(&p.spec));
        write_header(&mut s, &p.spec, &ImageMeta::new(p.name, 1)).unwrap();
        for at in 0..HEADER_USED as u64 {
            let mut t = s.clone();
            let mut b = [0u8];
            t.read(at, &mut b).unwrap();
            t.write(at, &[b[0] ^ 0x10]).unwrap();
            assert!(
                matches!(read_header(&t), Err(FlashError::BadImage(_))),
                "byte {at}"
            );
        }
        let short = RamStore::new(100);
        assert!(read_header(&short).is_err());
    }
}
