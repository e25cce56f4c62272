//! Simulators of every medium, built on one core: the image store, the device clock with
//! its banks, the counters and the fault injector.

mod banks;
mod core;
pub mod nand;
pub mod nor;
pub mod nvram;

use alloc::vec::Vec;

use crate::error::Result;
use crate::fault::{CutPoint, FaultConfig};
use crate::image::ImageMeta;
use crate::stats::Stats;

/// What every simulator offers beyond its medium's trait: counters, wear, faults, power.
pub trait Simulated {
    /// Work done since creation or opening.
    fn stats(&self) -> &Stats;

    /// Mutating operations done (programs, erases, writes, marks), the unit of cut points.
    fn ops(&self) -> u64;

    /// The faults being injected.
    fn faults(&self) -> &FaultConfig;

    /// Replaces the faults being injected (and reseeds their generator).
    fn set_faults(&mut self, config: FaultConfig);

    /// Cuts the power once `ops` more mutating operations have completed; with `torn`, the
    /// next one is left half done.
    fn schedule_cut(&mut self, ops: u64, torn: bool);

    /// Cuts the power now: background erases in progress are left partly done, buffered
    /// programs may be lost, and every call fails until [`reboot`](Simulated::reboot).
    fn power_cut(&mut self) -> Result<()>;

    /// Whether the device has power.
    fn is_powered(&self) -> bool;

    /// Restores power after a cut.
    fn reboot(&mut self);

    /// Erase count of every block (empty for NVRAM).
    fn erase_counts(&self) -> Vec<u32>;

    /// Who made the image.
    fn meta(&self) -> &ImageMeta;

    /// Makes the image durable on the host, with the background erases finished by now.
    fn flush(&mut self) -> Result<()>;
}

macro_rules! impl_simulated {
    ($sim:ident) => {
        impl<S: $crate::store::Store> $crate::sim::Simulated for $sim<S> {
            fn stats(&self) -> &$crate::stats::Stats {
                &self.core.stats
            }
            fn ops(&self) -> u64 {
                self.core.faults.ops
            }
            fn faults(&self) -> &$crate::fault::FaultConfig {
                &self.core.faults.config
            }
            fn set_faults(&mut self, config: $crate::fault::FaultConfig) {
                self.core.faults.reconfigure(config);
            }
            fn schedule_cut(&mut self, ops: u64, torn: bool) {
                let at = self.core.faults.ops + ops;
                self.core.faults.config.cut = Some($crate::fault::CutPoint {
                    after_ops: at,
                    torn,
                });
            }
            fn power_cut(&mut self) -> $crate::error::Result<()> {
                self.cut()
            }
            fn is_powered(&self) -> bool {
                self.core.faults.powered
            }
            fn reboot(&mut self) {
                self.core.reboot();
            }
            fn erase_counts(&self) -> alloc::vec::Vec<u32> {
                self.core.blocks.iter().map(|b| b.erase_count).collect()
            }
            fn meta(&self) -> &$crate::image::ImageMeta {
                &self.core.meta
            }
            fn flush(&mut self) -> $crate::error::Result<()> {
                self.settle()?;
                $crate::store::Store::flush(&mut self.core.store)
            }
        }

        impl<S: $crate::store::Store> $crate::medium::DeviceClock for $sim<S> {
            fn now(&self) -> core::time::Duration {
                core::time::Duration::from_nanos(self.core.banks.now)
            }
            fn idle(&mut self, d: core::time::Duration) {
                self.core
                    .banks
                    .idle(d.as_nanos().min(u64::MAX as u128) as u64);
                // Erases that finish meanwhile reach the medium now, so the image shows them
                // even if no other call follows. Should the store fail, the erase stays
                // pending and the next call that needs it reports the error.
                if self.core.faults.powered {
                    let _ = self.settle();
                }
            }
        }
    };
}
pub(crate) use impl_simulated;

/// A cut point as the absolute form the fault config stores.
pub fn cut_at(after_ops: u64, torn: bool) -> CutPoint {
    CutPoint { after_ops, torn }
}
