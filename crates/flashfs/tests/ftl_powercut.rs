//! Power cuts at every device operation of small workloads, clean and torn: after each, the
//! remounted block device holds, in every sector, the value at the last acknowledged flush or
//! one written since — never torn data, never something older — and keeps working.

mod common;

use common::*;
use flash::FaultConfig;
use flashfs::{BlockDevice, Error, Ftl, FtlConfig, NandSegments, NorSegments, Regions, Segments};
use flashfs_bench::torture::{apply, read_all, versions, workload, Model, Op, SimSegments as Sim};

/// Runs `ops` on a fresh copy of `base`, cutting the power after `cut` device operations
/// (`None`: never). Returns the device (rebooted) and the model of what may be read.
fn run_until_cut<D: Sim>(
    base: &D,
    ops: &[Op],
    cut: Option<(u64, bool)>,
    faults: &FaultConfig,
    cfg: FtlConfig,
) -> (D, Model, bool) {
    let mut dev = base.clone();
    dev.sim_mut().set_faults(faults.clone());
    let mut ftl = Ftl::mount(dev, cfg).expect("mount of the formatted device");
    if let Some((k, torn)) = cut {
        ftl.log_mut().device_mut().sim_mut().schedule_cut(k, torn);
    }
    let mut model = Model::new(ftl.sectors());
    let mut was_cut = false;
    for &op in ops {
        model.issue(op);
        match apply(&mut ftl, op) {
            Ok(()) => {
                if op.is_barrier() {
                    model.flushed();
                }
            }
            Err(Error::Flash(flash::FlashError::PowerLoss)) => {
                was_cut = true;
                break;
            }
            Err(e) => panic!("op {op:?} failed: {e}"),
        }
    }
    let mut dev = ftl.into_device();
    dev.sim_mut().reboot();
    (dev, model, was_cut)
}

fn check_cut_at<D: Sim>(
    base: &D,
    ops: &[Op],
    vers: &[Vec<u32>],
    k: u64,
    torn: bool,
    faults: &FaultConfig,
    cfg: FtlConfig,
) -> bool {
    let (dev, mut model, was_cut) = run_until_cut(base, ops, Some((k, torn)), faults, cfg);
    let mut ftl = Ftl::mount(dev, cfg)
        .unwrap_or_else(|e| panic!("mount after cut at {k} (torn {torn}): {e}"));
    let read = read_all(&mut ftl, vers).unwrap_or_else(|e| panic!("cut at {k} (torn {torn}): {e}"));
    model
        .check_after_cut(&read)
        .unwrap_or_else(|e| panic!("cut at {k} (torn {torn}): {e}"));
    // The recovered device takes new writes and survives another remount.
    model.settle(&read);
    let ss = ftl.sector_size();
    for s in (0..ftl.sectors()).step_by(7) {
        ftl.write(s, &pattern(s, 1_000_000, ss))
            .unwrap_or_else(|e| panic!("write after cut at {k}: {e}"));
    }
    ftl.flush().unwrap();
    let mut ftl = Ftl::mount(ftl.into_device(), cfg).unwrap();
    let mut buf = vec![0u8; ss];
    for s in 0..ftl.sectors() {
        ftl.read(s, &mut buf).unwrap();
        if s % 7 == 0 {
            assert_eq!(
                buf,
                pattern(s, 1_000_000, ss),
                "sector {s} after recovery write, cut at {k}"
            );
        }
    }
    was_cut
}

/// Cuts at every operation, clean and torn, and checks each recovery.
fn every_cut<D: Sim>(base: D, seed: u64, nops: usize, faults: FaultConfig) -> u64 {
    every_cut_with(base, seed, nops, faults, FtlConfig::default())
}

/// [`every_cut`] with the block device configured as `cfg` at every mount.
fn every_cut_with<D: Sim>(
    base: D,
    seed: u64,
    nops: usize,
    faults: FaultConfig,
    cfg: FtlConfig,
) -> u64 {
    let sectors = Ftl::mount(base.clone(), cfg).unwrap().sectors();
    let ops = workload(seed, sectors.min(40), nops);
    let vers = versions(&ops, sectors);
    // Count the device operations the whole workload takes.
    let (dev, _, _) = run_until_cut(&base, &ops, None, &faults, cfg);
    let total = dev.sim().ops() - base.sim().ops();
    assert!(
        total > nops as u64,
        "workload too small: {total} device ops"
    );
    let mut cuts = 0;
    for k in 0..total {
        for torn in [false, true] {
            assert!(
                check_cut_at(&base, &ops, &vers, k, torn, &faults, cfg),
                "cut at {k} never fired"
            );
            cuts += 1;
        }
    }
    cuts
}

fn formatted_nor(reprogrammable: bool) -> NorSegments<flash::NorSim> {
    let ftl = Ftl::format(nor(reprogrammable), FtlConfig::default()).unwrap();
    ftl.into_device()
}

fn formatted_nand() -> NandSegments<flash::NandSim> {
    let ftl = Ftl::format(nand(), FtlConfig::default()).unwrap();
    ftl.into_device()
}

#[test]
fn every_cut_on_reprogrammable_nor() {
    let cuts = every_cut(formatted_nor(true), 1, 120, FaultConfig::default());
    assert!(cuts > 200);
}

/// Segments of several erase units: a cut between (or tearing) the erases of one segment's
/// units must not leave its header vouching for slots already scrambled.
#[test]
fn every_cut_on_nor_of_small_units() {
    let dev = nor_small_units();
    assert_eq!(dev.units_per_segment(), 4);
    let base = Ftl::format(dev, FtlConfig::default())
        .unwrap()
        .into_device();
    let before = base.sim().stats().erases;
    let sectors = Ftl::mount(base.clone(), FtlConfig::default())
        .unwrap()
        .sectors();
    let ops = workload(5, sectors.min(40), 300);
    let (dev, _, _) = run_until_cut(
        &base,
        &ops,
        None,
        &FaultConfig::default(),
        FtlConfig::default(),
    );
    let erases = dev.sim().stats().erases - before;
    assert!(
        erases >= 8,
        "the workload must erase segments: {erases} unit erases"
    );
    every_cut(base, 5, 300, FaultConfig::default());
}

/// A small SPI NOR part (the W25Q64JV's program page and word, 16 units of 8 KiB): its tag
/// entries wait in RAM and go down a program page at a time (SPEC.md §2.2), so a cut may
/// leave several slots programmed under erased or torn entries, and a head resumed after it
/// must start past all of them.
fn formatted_spi_nor() -> NorSegments<flash::NorSim> {
    let spec = flash::NorSpec {
        word_size: 1,
        program_page: 256,
        banks: 1,
        ..nor_spec(true)
    };
    Ftl::format(nor_of(spec), FtlConfig::default())
        .unwrap()
        .into_device()
}

#[test]
fn every_cut_on_spi_nor_whose_tag_entries_wait() {
    let cuts = every_cut(formatted_spi_nor(), 6, 150, FaultConfig::default());
    assert!(cuts > 200);
}

#[test]
fn chained_random_cuts_on_spi_nor() {
    chained_cuts(formatted_spi_nor(), 0..8);
}

#[test]
fn every_cut_on_nor_without_reprogramming() {
    every_cut(formatted_nor(false), 2, 120, FaultConfig::default());
}

#[test]
fn every_cut_on_nand() {
    every_cut(formatted_nand(), 3, 120, FaultConfig::default());
}

#[test]
fn every_cut_on_nand_that_reorders_unflushed_programs() {
    let faults = FaultConfig {
        seed: 9,
        reorder_window: 8,
        ..FaultConfig::default()
    };
    every_cut(formatted_nand(), 4, 120, faults);
}

/// Random workloads, each cut several times at random points (clean or torn), remounted and
/// continued after each cut: the recovery must always be able to go on writing.
fn chained_cuts<D: Sim>(base: D, seeds: std::ops::Range<u64>) {
    chained_cuts_with(base, seeds, FtlConfig::default())
}

/// [`chained_cuts`] with the block device configured as `cfg` at every mount.
fn chained_cuts_with<D: Sim>(base: D, seeds: std::ops::Range<u64>, cfg: FtlConfig) {
    let sectors = Ftl::mount(base.clone(), cfg).unwrap().sectors();
    for seed in seeds {
        let ops = workload(seed, sectors, 400);
        let vers = versions(&ops, sectors);
        let mut dev = base.clone();
        let mut x = seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1;
        let mut at = 0;
        let mut model = Model::new(sectors);
        while at < ops.len() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut ftl =
                Ftl::mount(dev, cfg).unwrap_or_else(|e| panic!("seed {seed}: mount: {e}"));
            let read = read_all(&mut ftl, &vers)
                .unwrap_or_else(|e| panic!("seed {seed} before op {at}: {e}"));
            model
                .check_after_cut(&read)
                .unwrap_or_else(|e| panic!("seed {seed} before op {at}: {e}"));
            model.settle(&read);
            ftl.log_mut()
                .device_mut()
                .sim_mut()
                .schedule_cut(x % 300, x % 2 == 0);
            while at < ops.len() {
                let op = ops[at];
                model.issue(op);
                at += 1;
                match apply(&mut ftl, op) {
                    Ok(()) if op.is_barrier() => model.flushed(),
                    // Idle time, in which background migration moves SLC data to MLC.
                    Ok(())
                        if matches!(
                            cfg.log.regions,
                            Some(Regions::Background | Regions::Dynamic)
                        ) && at % 53 == 0 =>
                    {
                        ftl.idle(std::time::Duration::from_secs(3))
                            .map(|_| ())
                            .or_else(|e| match e {
                                Error::Flash(flash::FlashError::PowerLoss) => Ok(()),
                                e => Err(e),
                            })
                            .unwrap()
                    }
                    Ok(()) if at % 97 == 0 => ftl
                        .gc()
                        .or_else(|e| match e {
                            Error::Flash(flash::FlashError::PowerLoss) => Ok(()),
                            e => Err(e),
                        })
                        .unwrap(),
                    Ok(()) => {}
                    Err(Error::Flash(flash::FlashError::PowerLoss)) => break,
                    Err(e) => panic!("seed {seed} op {at} {op:?}: {e}"),
                }
                if !ftl.log().device().sim().is_powered() {
                    break;
                }
            }
            dev = ftl.into_device();
            dev.sim_mut().reboot();
        }
    }
}

#[test]
fn chained_random_cuts_on_banked_nor() {
    chained_cuts(formatted_nor(true), 0..12);
}

#[test]
fn chained_random_cuts_on_nand() {
    chained_cuts(formatted_nand(), 100..112);
}

/// MLC NAND: a torn MSB program spoils its LSB partner. Data a flush acknowledged must never
/// sit in an LSB page whose partner is still to be programmed (regression: it did, and torn
/// cuts lost flushed sectors).
fn formatted_mlc() -> NandSegments<flash::NandSim> {
    formatted_mlc_with(FtlConfig::default())
}

fn formatted_mlc_with(cfg: FtlConfig) -> NandSegments<flash::NandSim> {
    let mlc = flash::NandTiming {
        read_ns: 400_000,
        program_ns: 430_000,
        erase_ns: 870_000,
        bus_byte_ns: 0,
    };
    let spec = flash::NandSpec {
        cells: flash::Cells::Mlc { slc_mode: mlc },
        ..common::nand_spec()
    };
    let sim = flash::NandSim::new(spec, flash::ImageMeta::new("test-mlc", 1)).unwrap();
    Ftl::format(NandSegments::new(sim).unwrap(), cfg)
        .unwrap()
        .into_device()
}

#[test]
fn every_cut_on_mlc_nand() {
    every_cut(formatted_mlc(), 5, 120, FaultConfig::default());
}

#[test]
fn chained_random_cuts_on_mlc_nand() {
    chained_cuts(formatted_mlc(), 200..212);
}

/// The block device with FlexFS's regions: SLC segments for writes, MLC ones for the
/// cleaner's survivors.
fn regions(regions: Regions) -> FtlConfig {
    let mut cfg = FtlConfig::default();
    cfg.log.regions = Some(regions);
    cfg
}

#[test]
fn every_cut_on_mlc_nand_with_slc_and_mlc_regions() {
    let cfg = regions(Regions::Baseline);
    every_cut_with(formatted_mlc_with(cfg), 6, 120, FaultConfig::default(), cfg);
}

#[test]
fn every_cut_on_mlc_nand_in_slc_mode() {
    let cfg = regions(Regions::SlcOnly);
    every_cut_with(formatted_mlc_with(cfg), 7, 120, FaultConfig::default(), cfg);
}

#[test]
fn chained_random_cuts_on_mlc_nand_with_slc_and_mlc_regions() {
    let cfg = regions(Regions::Baseline);
    chained_cuts_with(formatted_mlc_with(cfg), 300..312, cfg);
}

#[test]
fn chained_random_cuts_on_mlc_nand_with_background_migration() {
    let cfg = regions(Regions::Background);
    chained_cuts_with(formatted_mlc_with(cfg), 400..412, cfg);
}

#[test]
fn chained_random_cuts_on_mlc_nand_with_dynamic_allocation() {
    let cfg = regions(Regions::Dynamic);
    chained_cuts_with(formatted_mlc_with(cfg), 500..512, cfg);
}
