//! The demo's view of a device: erase units holding fixed-size slots, whatever the medium.
//!
//! A slot is a NAND page (data and spare), or on NOR and NVRAM a 256-byte record slot that
//! holds a variable-length record `[length: u16][payload][CRC-32C]`. Reads classify what they
//! find: erased, corrupt (ECC failure or bad checksum) or intact data.

use flash::spec::{Cells, DeviceSpec};
use flash::{
    CellMode, FlashError, ImageMeta, MlcNand, NandFlash, NandSim, NorFlash, NorSim, Nvram,
    NvramSim, PageAddr, Simulated,
};

use super::rng::{mix, Rng};

/// Bytes of a record slot on NOR and NVRAM.
const SLOT: u32 = 256;
/// Bytes of an NVRAM region, the demo's stand-in for an erase unit.
pub const REGION: u64 = 16 * 1024;
/// Record header and trailer bytes.
const FRAME: usize = 6;

/// A simulated device in RAM.
pub enum Medium {
    /// NOR flash.
    Nor(NorSim),
    /// NAND flash, SLC or MLC.
    Nand(NandSim),
    /// NVRAM.
    Nvram(NvramSim),
}

/// What a slot read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slot {
    /// Never written since the last erase.
    Erased,
    /// ECC failure (NAND) or a record whose length or checksum is wrong.
    Corrupt,
    /// Data that passed ECC or its checksum.
    Data(Vec<u8>),
}

fn crc32c(data: &[u8]) -> u32 {
    crc::Crc::<u32>::new(&crc::CRC_32_ISCSI).checksum(data)
}

impl Medium {
    /// A fresh device of `spec` in RAM.
    pub fn new(spec: DeviceSpec, name: &str, seed: u64) -> flash::Result<Medium> {
        let meta = ImageMeta::new(name, seed);
        Ok(match spec {
            DeviceSpec::Nor(s) => Medium::Nor(NorSim::new(s, meta)?),
            DeviceSpec::Nand(s) => Medium::Nand(NandSim::new(s, meta)?),
            DeviceSpec::Nvram(s) => Medium::Nvram(NvramSim::new(s, meta)?),
        })
    }

    /// The simulator's common interface.
    pub fn sim(&self) -> &dyn Simulated {
        match self {
            Medium::Nor(d) => d,
            Medium::Nand(d) => d,
            Medium::Nvram(d) => d,
        }
    }

    /// The simulator's common interface, mutably.
    pub fn sim_mut(&mut self) -> &mut dyn Simulated {
        match self {
            Medium::Nor(d) => d,
            Medium::Nand(d) => d,
            Medium::Nvram(d) => d,
        }
    }

    /// Device time so far.
    pub fn now(&self) -> std::time::Duration {
        use flash::DeviceClock;
        match self {
            Medium::Nor(d) => d.now(),
            Medium::Nand(d) => d.now(),
            Medium::Nvram(d) => d.now(),
        }
    }

    /// Erase units (NVRAM: regions of [`REGION`] bytes).
    pub fn units(&self) -> u32 {
        match self {
            Medium::Nor(d) => d.spec().units,
            Medium::Nand(d) => d.spec().blocks,
            Medium::Nvram(d) => (d.spec().size / REGION).min(u32::MAX as u64) as u32,
        }
    }

    /// Whether units are erased before they are written again.
    pub fn erasable(&self) -> bool {
        !matches!(self, Medium::Nvram(_))
    }

    /// Whether the part is MLC NAND.
    pub fn is_mlc(&self) -> bool {
        matches!(self, Medium::Nand(d) if matches!(d.spec().cells, Cells::Mlc { .. }))
    }

    /// Whether the part has ECC (NAND).
    pub fn has_ecc(&self) -> bool {
        matches!(self, Medium::Nand(_))
    }

    /// Bits the ECC corrects per codeword (NAND), and the codeword size.
    pub fn ecc(&self) -> Option<(u32, u32)> {
        match self {
            Medium::Nand(d) => Some((d.spec().ecc.correctable, d.spec().ecc.codeword)),
            _ => None,
        }
    }

    /// Bytes of one slot.
    fn slot_bytes(&self) -> u32 {
        match self {
            Medium::Nor(d) => SLOT.min(d.spec().unit_size),
            Medium::Nand(d) => d.spec().page_size + d.spec().spare_size,
            Medium::Nvram(_) => SLOT,
        }
    }

    /// Payload bytes one slot carries at most.
    pub fn payload_max(&self) -> usize {
        match self {
            Medium::Nand(_) => self.slot_bytes() as usize,
            Medium::Nor(d) => {
                let word = d.spec().word_size as usize;
                (self.slot_bytes() as usize / word * word).saturating_sub(FRAME)
            }
            Medium::Nvram(_) => self.slot_bytes() as usize - FRAME,
        }
    }

    /// Slots in `unit` as it is used now (an SLC-mode MLC block has only its LSB pages).
    pub fn slots(&self, unit: u32) -> u32 {
        match self {
            Medium::Nor(d) => d.spec().unit_size / self.slot_bytes(),
            Medium::Nand(d) => match d.mode(unit) {
                CellMode::Slc if self.is_mlc() => d.spec().pages_per_block / 2,
                _ => d.spec().pages_per_block,
            },
            Medium::Nvram(_) => (REGION / SLOT as u64) as u32,
        }
    }

    /// Whether `unit` is in SLC mode (MLC parts).
    pub fn slc_mode(&self, unit: u32) -> bool {
        matches!(self, Medium::Nand(d) if self.is_mlc() && d.mode(unit) == CellMode::Slc)
    }

    /// The NAND page of a slot (an SLC-mode block uses its LSB pages, the even ones).
    fn page(&self, unit: u32, slot: u32) -> PageAddr {
        let page = if self.slc_mode(unit) { 2 * slot } else { slot };
        PageAddr::new(unit, page)
    }

    /// Whether a torn program of `slot` may also spoil the slot below it: an MSB page in an
    /// MLC-mode block shares its cells with the LSB page below.
    pub fn paired_with_previous(&self, unit: u32, slot: u32) -> bool {
        self.is_mlc() && !self.slc_mode(unit) && slot % 2 == 1
    }

    /// Whether the unit is usable (NAND: not marked bad).
    pub fn usable(&mut self, unit: u32) -> flash::Result<bool> {
        match self {
            Medium::Nand(d) => Ok(!d.is_bad(unit)?),
            _ => Ok(true),
        }
    }

    /// Chooses the cell mode of an erased MLC block.
    pub fn set_slc(&mut self, unit: u32, slc: bool) -> flash::Result<()> {
        match self {
            Medium::Nand(d) if self_is_mlc(d) => {
                d.set_mode(unit, if slc { CellMode::Slc } else { CellMode::Mlc })
            }
            _ => Ok(()),
        }
    }

    /// Erases a unit (NVRAM has nothing to erase).
    pub fn erase(&mut self, unit: u32) -> flash::Result<()> {
        match self {
            Medium::Nor(d) => d.erase(unit),
            Medium::Nand(d) => d.erase_block(unit),
            Medium::Nvram(_) => Ok(()),
        }
    }

    /// The bytes generation `gen` of a slot holds: a NAND page (data, then a spare tag) or a
    /// record payload of a length that varies from slot to slot.
    pub fn content(&self, seed: u64, unit: u32, slot: u32, gen: u32) -> Vec<u8> {
        let key = mix(seed ^ mix(((unit as u64) << 32) | slot as u64) ^ mix(gen as u64 + 1));
        let mut rng = Rng::new(key);
        match self {
            Medium::Nand(d) => {
                let page = d.spec().page_size as usize;
                let mut buf = vec![0u8; self.slot_bytes() as usize];
                rng.fill(&mut buf);
                // Realistic data is not all noise: a run of zeros in many pages.
                if key % 3 == 0 {
                    let from = (key >> 8) as usize % page;
                    let to = (from + page / 4).min(page);
                    buf[from..to].fill(0);
                }
                // The spare area starts with a tag: generation, unit, slot.
                let tag = [gen, unit, slot];
                for (i, v) in tag.iter().enumerate() {
                    let at = page + 4 * i;
                    if at + 4 <= buf.len() {
                        buf[at..at + 4].copy_from_slice(&v.to_le_bytes());
                    }
                }
                buf
            }
            _ => {
                let max = self.payload_max();
                let min = 8.min(max);
                let len = min + (rng.next() as usize) % (max - min + 1);
                let mut buf = vec![0u8; len];
                rng.fill(&mut buf);
                buf
            }
        }
    }

    /// Writes `content` to a slot: one program (or NVRAM write).
    pub fn write(&mut self, unit: u32, slot: u32, content: &[u8]) -> flash::Result<()> {
        let slot_bytes = self.slot_bytes() as u64;
        match self {
            Medium::Nand(d) => {
                let page = d.spec().page_size as usize;
                let at = if d.mode(unit) == CellMode::Slc && self_is_mlc(d) {
                    PageAddr::new(unit, 2 * slot)
                } else {
                    PageAddr::new(unit, slot)
                };
                d.program_page(at, &content[..page], &content[page..])
            }
            Medium::Nor(d) => {
                let word = d.spec().word_size as usize;
                let mut rec = frame(content);
                rec.resize(rec.len().div_ceil(word) * word, 0xFF);
                let addr = unit as u64 * d.spec().unit_size as u64 + slot as u64 * slot_bytes;
                d.program(addr, &rec)
            }
            Medium::Nvram(d) => {
                let addr = unit as u64 * REGION + slot as u64 * slot_bytes;
                d.write(addr, &frame(content))
            }
        }
    }

    /// Reads a slot back; also returns the bits ECC corrected.
    pub fn read(&mut self, unit: u32, slot: u32) -> flash::Result<(Slot, u32)> {
        let slot_bytes = self.slot_bytes();
        let at = self.page(unit, slot);
        match self {
            Medium::Nand(d) => {
                let page = d.spec().page_size as usize;
                let mut buf = vec![0u8; slot_bytes as usize];
                let (data, spare) = buf.split_at_mut(page);
                match d.read_page(at, data, spare) {
                    Ok(status) => {
                        let slot = if buf.iter().all(|&b| b == 0xFF) {
                            Slot::Erased
                        } else {
                            Slot::Data(buf)
                        };
                        Ok((slot, status.corrected_bits))
                    }
                    Err(FlashError::Uncorrectable { .. }) => Ok((Slot::Corrupt, 0)),
                    Err(e) => Err(e),
                }
            }
            Medium::Nor(d) => {
                let mut buf = vec![0u8; slot_bytes as usize];
                let addr =
                    unit as u64 * d.spec().unit_size as u64 + slot as u64 * slot_bytes as u64;
                d.read(addr, &mut buf)?;
                Ok((unframe(&buf), 0))
            }
            Medium::Nvram(d) => {
                let mut buf = vec![0u8; slot_bytes as usize];
                d.read(
                    unit as u64 * REGION + slot as u64 * slot_bytes as u64,
                    &mut buf,
                )?;
                Ok((unframe(&buf), 0))
            }
        }
    }

    /// Makes `bits` bit errors persist in a NAND page (retention loss); other media ignore it.
    pub fn inject_bit_errors(&mut self, unit: u32, slot: u32, bits: u8) -> flash::Result<()> {
        let at = self.page(unit, slot);
        match self {
            Medium::Nand(d) => d.inject_bit_errors(at, bits),
            _ => Ok(()),
        }
    }
}

fn self_is_mlc(d: &NandSim) -> bool {
    matches!(d.spec().cells, Cells::Mlc { .. })
}

/// `[length: u16 LE][payload][CRC-32C of length and payload, LE]`.
fn frame(payload: &[u8]) -> Vec<u8> {
    let mut rec = Vec::with_capacity(payload.len() + FRAME);
    rec.extend_from_slice(&(payload.len() as u16).to_le_bytes());
    rec.extend_from_slice(payload);
    let crc = crc32c(&rec);
    rec.extend_from_slice(&crc.to_le_bytes());
    rec
}

/// Reads a record slot: erased, corrupt, or the payload.
fn unframe(buf: &[u8]) -> Slot {
    if buf.iter().all(|&b| b == 0xFF) {
        return Slot::Erased;
    }
    let len = u16::from_le_bytes([buf[0], buf[1]]) as usize;
    if len + FRAME > buf.len() {
        return Slot::Corrupt;
    }
    let body = &buf[..2 + len];
    let crc = u32::from_le_bytes([buf[2 + len], buf[3 + len], buf[4 + len], buf[5 + len]]);
    if crc != crc32c(body) {
        return Slot::Corrupt;
    }
    Slot::Data(buf[2..2 + len].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_damage_is_caught() {
        let payload: Vec<u8> = (0..100u8).collect();
        let mut slot = frame(&payload);
        slot.resize(SLOT as usize, 0xFF);
        assert_eq!(unframe(&slot), Slot::Data(payload));
        assert_eq!(unframe(&[0xFF; SLOT as usize]), Slot::Erased);
        slot[50] ^= 4;
        assert_eq!(unframe(&slot), Slot::Corrupt);
        let mut huge = vec![0u8; SLOT as usize];
        huge[0] = 0xFF;
        huge[1] = 0x7F;
        assert_eq!(unframe(&huge), Slot::Corrupt);
    }
}
