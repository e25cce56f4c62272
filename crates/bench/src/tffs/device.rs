//! The devices of TFFS §5.1 and the simulated part under the file system, with the
//! simulator's own memory kept out of the heap figures.

use flash::preset;
use flash::{
    DeviceClock, DeviceSpec, ImageMeta, NandFlash, NandSpec, NorFlash, NorSim, NorSpec, Nvram,
    NvramSpec, PageAddr, ReadStatus,
};
use flashfs::NorSegments;
use serde::Serialize;

use crate::error::{BenchError, Context, Result};
use crate::heap::uncounted;

/// Bytes per block of the file system on NOR: the index's smallest node.
pub const NOR_BLOCK_BYTES: u32 = 512;

/// The paper's device configurations (Fig 6-10: "8192/64", "448/64", "448/2").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum DeviceKind {
    /// ST M29DW640D: 126 erase units of 64 KiB (the paper's "8192/64").
    #[serde(rename = "8192/64")]
    M29dw640d,
    /// ST10F280 on-chip flash: 7 units of 64 KiB ("448/64").
    #[serde(rename = "448/64")]
    St10f280,
    /// ST10F280 with 2 KiB units, 224 of them, the same timing ("448/2").
    #[serde(rename = "448/2")]
    St10f280Small,
}

impl DeviceKind {
    /// Every device, in the paper's order.
    pub const ALL: [DeviceKind; 3] = [
        DeviceKind::M29dw640d,
        DeviceKind::St10f280,
        DeviceKind::St10f280Small,
    ];

    /// The paper's label: KiB of flash / KiB per erase unit.
    pub fn label(self) -> &'static str {
        match self {
            DeviceKind::M29dw640d => "8192/64",
            DeviceKind::St10f280 => "448/64",
            DeviceKind::St10f280Small => "448/2",
        }
    }

    /// Parses a label.
    pub fn from_label(s: &str) -> Option<DeviceKind> {
        DeviceKind::ALL.into_iter().find(|d| d.label() == s)
    }

    /// The simulator preset.
    pub fn preset(self) -> &'static str {
        match self {
            DeviceKind::M29dw640d => "m29dw640d",
            DeviceKind::St10f280 => "st10f280",
            DeviceKind::St10f280Small => "st10f280/2",
        }
    }

    /// The part's geometry and timing.
    pub fn spec(self) -> Result<NorSpec> {
        let p = preset::lookup(self.preset())
            .map_err(|e| BenchError::InvalidOptions(format!("preset {}: {e}", self.preset())))?;
        match p.spec {
            DeviceSpec::Nor(s) => Ok(s),
            _ => Err(BenchError::InvalidOptions(format!(
                "preset {} is not NOR flash",
                self.preset()
            ))),
        }
    }

    /// RAM TFFS needed on this device (§5.1): 466 bytes for the 8 MB part, 109 bytes for the
    /// 0.5 MB one.
    pub fn paper_ram_bytes(self) -> u64 {
        match self {
            DeviceKind::M29dw640d => 466,
            DeviceKind::St10f280 | DeviceKind::St10f280Small => 109,
        }
    }

    /// A fresh simulated part as segments of the file system's blocks.
    pub fn build(self, seed: u64) -> Result<Dev> {
        let spec = self.spec()?;
        let sim = NorSim::new(spec, ImageMeta::new(self.preset(), seed))
            .context(|| format!("simulating the {}", self.preset()))?;
        NorSegments::new(Uncounted(sim), NOR_BLOCK_BYTES)
            .context(|| format!("segmenting the {}", self.preset()))
    }
}

/// The device under the file system in these runs.
pub type Dev = NorSegments<Uncounted<NorSim>>;

/// A NOR part whose every call runs [`uncounted`]: the simulator's own storage (its image
/// in RAM, allocated as the flash is written) is not the file system's heap.
#[derive(Debug, Clone)]
pub struct Uncounted<F>(pub F);

impl<F> Uncounted<F> {
    /// The part.
    pub fn inner(&self) -> &F {
        &self.0
    }
}

impl<F: DeviceClock> DeviceClock for Uncounted<F> {
    fn now(&self) -> core::time::Duration {
        uncounted(|| self.0.now())
    }

    fn idle(&mut self, d: core::time::Duration) {
        uncounted(|| self.0.idle(d))
    }
}

impl<F: NorFlash> NorFlash for Uncounted<F> {
    fn spec(&self) -> &NorSpec {
        self.0.spec()
    }

    fn read(&mut self, addr: u64, buf: &mut [u8]) -> flash::Result<()> {
        uncounted(|| self.0.read(addr, buf))
    }

    fn program(&mut self, addr: u64, data: &[u8]) -> flash::Result<()> {
        uncounted(|| self.0.program(addr, data))
    }

    fn erase(&mut self, unit: u32) -> flash::Result<()> {
        uncounted(|| self.0.erase(unit))
    }

    fn start_erase(&mut self, unit: u32) -> flash::Result<()> {
        uncounted(|| self.0.start_erase(unit))
    }

    fn sync(&mut self) -> flash::Result<()> {
        uncounted(|| self.0.sync())
    }

    fn writes_in_place(&self) -> bool {
        self.0.writes_in_place()
    }
}

impl<F: NandFlash> NandFlash for Uncounted<F> {
    fn spec(&self) -> &NandSpec {
        self.0.spec()
    }

    fn read_page(
        &mut self,
        at: PageAddr,
        data: &mut [u8],
        spare: &mut [u8],
    ) -> flash::Result<ReadStatus> {
        uncounted(|| self.0.read_page(at, data, spare))
    }

    fn program_page(&mut self, at: PageAddr, data: &[u8], spare: &[u8]) -> flash::Result<()> {
        uncounted(|| self.0.program_page(at, data, spare))
    }

    fn erase_block(&mut self, block: u32) -> flash::Result<()> {
        uncounted(|| self.0.erase_block(block))
    }

    fn start_erase(&mut self, block: u32) -> flash::Result<()> {
        uncounted(|| NandFlash::start_erase(&mut self.0, block))
    }

    fn is_bad(&mut self, block: u32) -> flash::Result<bool> {
        uncounted(|| self.0.is_bad(block))
    }

    fn mark_bad(&mut self, block: u32) -> flash::Result<()> {
        uncounted(|| self.0.mark_bad(block))
    }

    fn sync(&mut self) -> flash::Result<()> {
        uncounted(|| NandFlash::sync(&mut self.0))
    }

    fn as_mlc(&mut self) -> Option<&mut dyn flash::MlcNand> {
        self.0.as_mlc()
    }
}

impl<N: Nvram> Nvram for Uncounted<N> {
    fn spec(&self) -> &NvramSpec {
        self.0.spec()
    }

    fn read(&mut self, addr: u64, buf: &mut [u8]) -> flash::Result<()> {
        uncounted(|| self.0.read(addr, buf))
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> flash::Result<()> {
        uncounted(|| self.0.write(addr, data))
    }
}
