//! The device clock: preset latencies, bus time, banks that erase in parallel, erase suspend,
//! latency histograms and stats snapshots.

mod common;

use std::time::Duration;

use common::*;
use flash::stats::Stats;
use flash::{
    preset, DeviceClock, DeviceSpec, ImageMeta, NandFlash, NandSim, NorFlash, NorSim, Nvram,
    NvramSim, PageAddr, Simulated, WearModel,
};

const UNIT: u64 = 256 * 1024; // 28F008SA segment
const SEC: Duration = Duration::from_secs(1);

fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

fn ns(n: u64) -> Duration {
    Duration::from_nanos(n)
}

fn kawaguchi() -> NorSim {
    NorSim::new(nor_preset("28f008sa"), ImageMeta::new("28f008sa", 1)).unwrap()
}

fn erased_at(n: &mut NorSim, addr: u64) -> bool {
    let mut b = [0u8; 16];
    n.read(addr, &mut b).unwrap();
    b == [0xFF; 16]
}

#[test]
fn a_28f008sa_segment_erase_takes_one_second() {
    let mut n = kawaguchi();
    assert_eq!(n.now(), Duration::ZERO);
    n.program(0, &[0; 16]).unwrap();
    let t0 = n.now();
    n.erase(0).unwrap();
    assert_eq!(n.now() - t0, SEC);
    assert!(erased_at(&mut n, 0));
    assert_eq!(n.stats().erase_latency.max(), SEC);
}

#[test]
fn a_28f008sa_reads_at_4_mb_s_and_writes_at_400_kb_s() {
    let mut n = kawaguchi();
    let t0 = n.now();
    n.program(UNIT, &[0x55; 4000]).unwrap();
    // 1000 words of 10 us: 4000 B in 10 ms.
    assert_eq!(n.now() - t0, Duration::from_millis(10));
    let t0 = n.now();
    n.read(UNIT, &mut [0; 4000]).unwrap();
    // 1000 words of 1 us: 4000 B in 1 ms.
    assert_eq!(n.now() - t0, Duration::from_millis(1));
    // An unaligned read touches every word it overlaps.
    let t0 = n.now();
    n.read(UNIT + 3, &mut [0; 2]).unwrap();
    assert_eq!(n.now() - t0, us(2));
}

#[test]
fn erases_on_different_banks_overlap() {
    // 8 segments per bank: units 0 and 8 are on banks 0 and 1.
    let mut n = kawaguchi();
    n.program(0, &[0; 16]).unwrap();
    n.program(8 * UNIT, &[0; 16]).unwrap();
    let t0 = n.now();
    n.start_erase(0).unwrap();
    n.start_erase(8).unwrap();
    assert_eq!(n.now(), t0, "starting an erase does not wait for it");
    n.idle(SEC);
    assert!(erased_at(&mut n, 0));
    assert!(erased_at(&mut n, 8 * UNIT));
    // Two erases in one second plus two reads of 4 words (1 us each).
    assert_eq!(n.now() - t0, SEC + us(8));
    assert_eq!(n.erase_counts()[0], 1);
    assert_eq!(n.erase_counts()[8], 1);
}

#[test]
fn erases_on_the_same_bank_serialize() {
    let mut n = kawaguchi();
    n.start_erase(0).unwrap();
    n.start_erase(1).unwrap();
    // The second erase had to wait for the first.
    assert_eq!(n.now(), SEC);
    n.program(2 * UNIT, &[0; 4]).unwrap();
    assert_eq!(n.now(), 2 * SEC + us(10));
}

#[test]
fn a_program_waits_for_an_erase_on_its_bank_only() {
    let mut n = kawaguchi();
    n.start_erase(0).unwrap();
    n.program(8 * UNIT, &[0; 4]).unwrap();
    assert_eq!(n.now(), us(10), "another bank works during the erase");
    n.program(UNIT, &[0; 4]).unwrap();
    assert_eq!(n.now(), SEC + us(10), "the same bank waits for it");
}

#[test]
fn a_read_suspends_an_erase_on_its_bank() {
    let mut n = kawaguchi();
    n.program(UNIT, &[0x12, 0x34, 0x56, 0x78]).unwrap();
    let t0 = n.now();
    n.start_erase(0).unwrap();
    let mut b = [0u8; 4];
    n.read(UNIT, &mut b).unwrap();
    assert_eq!(b, [0x12, 0x34, 0x56, 0x78]);
    // Served at once: one word plus the suspend/resume cost of 20 us.
    assert_eq!(n.now() - t0, us(21));
    assert_eq!(n.stats().read_latency.max(), us(21));
    // The unit being erased cannot be read meanwhile, and trying costs no time.
    assert_eq!(
        n.read(10, &mut b),
        Err(flash::FlashError::Busy { block: 0 })
    );
    assert_eq!(n.now() - t0, us(21));
    // The erase ends 21 us late: a program on the bank waits that much longer.
    n.program(2 * UNIT, &[0; 4]).unwrap();
    assert_eq!(n.now() - t0, SEC + us(21) + us(10));
    assert!(erased_at(&mut n, 0));
}

#[test]
fn a_read_across_two_erasing_banks_suspends_both() {
    let mut n = kawaguchi();
    n.start_erase(0).unwrap();
    n.start_erase(9).unwrap();
    // Units 7 (bank 0) and 8 (bank 1), neither being erased.
    n.read(8 * UNIT - 4, &mut [0; 8]).unwrap();
    assert_eq!(n.now(), us(2) + us(20));
    // Both erases were held up by the read.
    n.program(10 * UNIT, &[0; 4]).unwrap();
    assert_eq!(n.now(), SEC + us(22) + us(10));
    n.program(UNIT, &[0; 4]).unwrap();
    assert_eq!(n.now(), SEC + us(22) + us(20));
}

#[test]
fn without_erase_suspend_a_read_waits_for_the_erase() {
    // ST10F280: one bank, no suspend, 1.5 s erases, 50 ns reads of 16-bit words.
    let mut n = NorSim::new(nor_preset("st10f280"), ImageMeta::new("st10f280", 1)).unwrap();
    n.program(65536, &[0xAB, 0xCD]).unwrap();
    let t0 = n.now();
    assert_eq!(t0, us(16));
    n.start_erase(0).unwrap();
    let mut b = [0u8; 2];
    n.read(65536, &mut b).unwrap();
    assert_eq!(b, [0xAB, 0xCD]);
    assert_eq!(n.now() - t0, Duration::from_millis(1500) + ns(50));
    // Reading the unit that was being erased waits too, and finds it erased.
    n.start_erase(0).unwrap();
    n.read(0, &mut b).unwrap();
    assert_eq!(b, [0xFF, 0xFF]);
}

#[test]
fn serial_nor_pays_for_the_bus() {
    // W25Q64JV: 0.4 ms page program, 45 ms sector erase, 19 ns per byte on the bus.
    let mut n = NorSim::new(nor_preset("w25q64jv"), ImageMeta::new("w25q64jv", 1)).unwrap();
    n.program(0, &[0; 256]).unwrap();
    assert_eq!(n.now(), us(400) + ns(256 * 19));
    let t0 = n.now();
    n.read(0, &mut [0; 100]).unwrap();
    assert_eq!(n.now() - t0, ns(1900));
    let t0 = n.now();
    n.erase(0).unwrap();
    assert_eq!(n.now() - t0, Duration::from_millis(45));
}

#[test]
fn nand_latency_is_the_preset_figure_plus_bus_bytes() {
    // nand-1g: tR 25 us, tPROG 200 us, tBERS 1.5 ms, 25 ns per byte.
    let spec = nand_preset("nand-1g");
    let mut n = NandSim::new(spec, ImageMeta::new("nand-1g", 1)).unwrap();
    let at = PageAddr::new(1, 0);
    let t0 = n.now();
    n.program_page(at, &[0; 2048], &[0; 34]).unwrap();
    assert_eq!(n.now() - t0, us(200) + ns(2082 * 25));
    let t0 = n.now();
    n.program_page(PageAddr::new(1, 1), &[0; 100], &[]).unwrap();
    assert_eq!(n.now() - t0, us(200) + ns(100 * 25));
    let t0 = n.now();
    n.read_page(at, &mut [0; 2048], &mut [0; 34]).unwrap();
    assert_eq!(n.now() - t0, us(25) + ns(2082 * 25));
    let t0 = n.now();
    n.read_page(at, &mut [0; 512], &mut [0; 4]).unwrap();
    assert_eq!(n.now() - t0, us(25) + ns(516 * 25));
    let t0 = n.now();
    n.erase_block(1).unwrap();
    assert_eq!(n.now() - t0, us(1500));
    // nand-128m quotes driver-level figures: no bus time on top.
    let spec = nand_preset("nand-128m");
    let mut n = NandSim::new(spec, ImageMeta::new("nand-128m", 1)).unwrap();
    n.program_page(at, &[0; 512], &[0; 12]).unwrap();
    assert_eq!(n.now(), us(200));
    n.read_page(at, &mut [0; 512], &mut [0; 12]).unwrap();
    assert_eq!(n.now(), us(216));
    n.erase_block(1).unwrap();
    assert_eq!(n.now(), us(2216));
}

#[test]
fn nand_banks_overlap_and_reads_wait_for_their_bank() {
    // The small part: 2 banks of 4 blocks, 1 ms erases, 100 us programs, 10 us reads, 10 ns/B.
    let mut n = NandSim::new(small_nand(), meta(WearModel::Never)).unwrap();
    n.start_erase(0).unwrap();
    n.program_page(PageAddr::new(4, 0), &[0; 10], &[]).unwrap();
    assert_eq!(n.now(), us(100) + ns(100));
    n.read_page(PageAddr::new(1, 0), &mut [0; 10], &mut [])
        .unwrap();
    assert_eq!(n.now(), us(1000) + us(10) + ns(100));
    let mut m = NandSim::new(small_nand(), meta(WearModel::Never)).unwrap();
    m.start_erase(0).unwrap();
    m.start_erase(4).unwrap();
    m.idle(us(1000));
    assert_eq!(m.now(), us(1000));
    m.start_erase(1).unwrap();
    assert_eq!(m.now(), us(1000), "bank 0 was free again");
}

#[test]
fn nvram_timing() {
    let DeviceSpec::Nvram(fram) = preset::lookup("fram-8m").unwrap().spec else {
        panic!()
    };
    let mut n = NvramSim::new(fram, ImageMeta::new("fram-8m", 1)).unwrap();
    n.write(0, &[1; 100]).unwrap();
    assert_eq!(n.now(), ns(50 * 85));
    n.read(0, &mut [0; 3]).unwrap();
    assert_eq!(n.now(), ns(52 * 85));
    let DeviceSpec::Nvram(spi) = preset::lookup("cy15b102q").unwrap().spec else {
        panic!()
    };
    let mut n = NvramSim::new(spi, ImageMeta::new("cy15b102q", 1)).unwrap();
    n.write(0, &[1; 10]).unwrap();
    assert_eq!(n.now(), ns(1280 + 3200));
}

#[test]
fn latency_histograms_give_percentiles() {
    // nand-128m: 16 us reads; a read behind a 2 ms erase waits for it.
    let spec = nand_preset("nand-128m");
    let mut n = NandSim::new(spec, ImageMeta::new("nand-128m", 1)).unwrap();
    n.program_page(PageAddr::new(1, 0), &[7; 512], &[]).unwrap();
    let mut buf = [0u8; 512];
    for i in 0..100 {
        if i == 50 || i == 90 {
            n.start_erase(2).unwrap();
        }
        n.read_page(PageAddr::new(1, 0), &mut buf, &mut []).unwrap();
    }
    let h = &n.stats().read_latency;
    assert_eq!(h.count(), 100);
    assert_eq!(h.max(), us(2016));
    let p50 = h.percentile(50.0);
    assert!(p50 >= us(16) && p50 <= us(18), "{p50:?}");
    assert_eq!(h.percentile(99.0), us(2016));
    assert!(h.percentile(98.0) <= us(18));
    assert_eq!(h.mean(), ns((98 * 16_000 + 2 * 2_016_000) / 100));
    let p = &n.stats().program_latency;
    assert_eq!((p.count(), p.max()), (1, us(200)));
    let e = &n.stats().erase_latency;
    assert_eq!(
        (e.count(), e.max(), e.percentile(50.0)),
        (2, us(2000), us(2000))
    );
}

#[test]
fn stats_since_gives_the_work_of_a_run() {
    let mut n = NandSim::new(small_nand(), meta(WearModel::Never)).unwrap();
    n.program_page(PageAddr::new(0, 0), &[0; 64], &[]).unwrap();
    n.read_page(PageAddr::new(0, 0), &mut [0; 64], &mut [])
        .unwrap();
    let before: Stats = n.stats().clone();
    for p in 1..4 {
        n.program_page(PageAddr::new(0, p), &[0; 32], &[0; 8])
            .unwrap();
    }
    n.read_page(PageAddr::new(0, 1), &mut [0; 16], &mut [])
        .unwrap();
    n.erase_block(3).unwrap();
    n.mark_bad(5).unwrap();
    let d = n.stats().since(&before);
    assert_eq!((d.programs, d.reads, d.erases, d.marked_bad), (3, 1, 1, 1));
    assert_eq!((d.bytes_programmed, d.bytes_read), (120, 16));
    assert_eq!(d.program_latency.count(), 3);
    assert_eq!(d.read_latency.count(), 1);
    // Within the histogram's 12.5% resolution.
    let p50 = d.read_latency.percentile(50.0);
    assert!(p50 >= us(10) + ns(160) && p50 <= us(12), "{p50:?}");
    assert_eq!(d.erase_latency.count(), 1);
    // Nothing since now.
    let none = n.stats().since(n.stats());
    assert_eq!(
        (none.programs, none.reads, none.read_latency.count()),
        (0, 0, 0)
    );
    // A snapshot taken later than the stats it is subtracted from is misuse: no panic.
    let _ = before.since(n.stats());
}

#[test]
fn the_clock_saturates_instead_of_overflowing() {
    let mut n = NandSim::new(small_nand(), meta(WearModel::Never)).unwrap();
    n.idle(Duration::MAX);
    n.idle(Duration::MAX);
    n.program_page(PageAddr::new(0, 0), b"x", &[]).unwrap();
    n.read_page(PageAddr::new(0, 0), &mut [0; 1], &mut [])
        .unwrap();
    n.start_erase(0).unwrap();
    n.erase_block(1).unwrap();
    assert_eq!(n.now(), ns(u64::MAX));
    let mut m = kawaguchi();
    m.idle(Duration::MAX);
    m.start_erase(0).unwrap();
    m.read(UNIT, &mut [0; 4]).unwrap();
    m.program(UNIT, &[0; 4]).unwrap();
}
