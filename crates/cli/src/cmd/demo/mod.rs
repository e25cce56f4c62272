//! `flashfs demo`: a simulated device exercised end to end, with what it measured.
//!
//! The demo drives the media layer directly (the file system layers above it are still
//! being built): it writes and verifies data across many erase units, wears a working set
//! with a hot/cold pattern, cuts the power at random operations and checks what survived,
//! injects bit errors within and beyond the ECC, then reports the device's own counters.

mod medium;
mod rng;

use std::collections::HashMap;
use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use flash::preset::{Preset, DEFAULT_PRESET};
use flash::stats::Histogram;
use flash::{FaultConfig, FlashError};
use indicatif::ProgressBar;

use self::medium::{Medium, Slot};
use self::rng::Rng;
use crate::device::{self, plural, Spread};
use crate::units::{bytes, count, duration, table};
use crate::Global;

/// Examples shown by `flashfs demo --help`.
pub const EXAMPLES: &str = "\
Examples:
  flashfs demo
  flashfs demo --quick --preset mlc-flexfs
  flashfs demo --preset st10f280/8 --seed 42";

/// Options of `flashfs demo`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The device to simulate (see `flashfs presets`).
    #[arg(long, value_name = "NAME", default_value = DEFAULT_PRESET)]
    pub preset: String,
    /// Seed of every random choice: data, cut points, torn operations, bit flips.
    #[arg(long, value_name = "S", default_value_t = 1)]
    pub seed: u64,
    /// A shorter run.
    #[arg(long)]
    pub quick: bool,
}

/// Runs the demo.
pub fn run(args: &Args, global: Global, out: &mut dyn Write) -> anyhow::Result<()> {
    let preset = device::lookup(&args.preset)?;
    let dev = Medium::new(preset.spec, preset.name, args.seed).map_err(device::explain)?;
    let mut demo = Demo {
        dev,
        preset,
        seed: args.seed,
        rng: Rng::new(rng::mix(args.seed ^ 0xD3)),
        out,
        bar: ProgressBar::hidden(),
        started: Instant::now(),
        user_bytes: 0,
        slc_programs: Histogram::default(),
        mlc_programs: Histogram::default(),
    };
    let plan = demo.plan(args.quick)?;
    if global.progress {
        let steps = 2 * plan.data.len() as u64 + plan.cycles + plan.trials + 1;
        demo.bar = global.progress_bar(steps, "{msg:>12} [{bar:40}] {pos}/{len} {elapsed}");
        demo.bar.set_message("start");
    }
    let result = demo.run(&plan);
    demo.bar.finish_and_clear();
    result
}

/// Which units each phase uses, and how much work it does.
struct Plan {
    data: Vec<u32>,
    wear: Vec<u32>,
    cut: Vec<u32>,
    flips: u32,
    bad_skipped: u64,
    bad_checks: u64,
    cycles: u64,
    trials: u64,
    flip_reads: u64,
}

/// The power-cut tallies.
#[derive(Default)]
struct Cuts {
    trials: u64,
    torn: u64,
    at_erase: u64,
    before: u64,
    refused: u64,
    clean_absent: u64,
    torn_detected: u64,
    torn_absent: u64,
    torn_complete: u64,
    torn_partial: u64,
    torn_erases: u64,
    paired: u64,
}

struct Demo<'a> {
    dev: Medium,
    preset: Preset,
    seed: u64,
    rng: Rng,
    out: &'a mut dyn Write,
    bar: ProgressBar,
    started: Instant,
    user_bytes: u64,
    slc_programs: Histogram,
    mlc_programs: Histogram,
}

/// Indent of the lines that continue a phase.
const MORE: &str = "               ";

impl Demo<'_> {
    fn line(&mut self, text: impl AsRef<str>) -> anyhow::Result<()> {
        let out = &mut self.out;
        self.bar.suspend(|| writeln!(out, "{}", text.as_ref()))?;
        Ok(())
    }

    fn stage(&self, name: &'static str) {
        self.bar.set_message(name);
    }

    /// Picks the units of each phase, skipping bad blocks.
    fn plan(&mut self, quick: bool) -> anyhow::Result<Plan> {
        let n = self.dev.units();
        if n < 4 {
            bail!("the device has {n} erase units; the demo needs at least 4");
        }
        let unit_bytes = self.dev.slots(0) as u64 * self.dev.payload_max() as u64;
        let (write_budget, wear_budget, wear_ops) = if quick {
            (2u64 << 20, 16u64 << 20, 50_000u64)
        } else {
            (16u64 << 20, 512u64 << 20, 1_000_000u64)
        };
        let cut = if n >= 8 { 2 } else { 1 };
        let rest = n - 1 - cut;
        let wear = (rest / 4).clamp(1, 16);
        let data = (write_budget / unit_bytes.max(1)).clamp(1, (rest - wear) as u64) as u32;
        let need = data + wear + cut + 1;
        let mut good = Vec::with_capacity(need as usize);
        let mut bad = 0;
        let mut checks = 0;
        for u in 0..n {
            if good.len() == need as usize {
                break;
            }
            checks += self.dev.erasable() as u64 * self.dev.has_ecc() as u64;
            if self.dev.usable(u).map_err(device::explain)? {
                good.push(u);
            } else {
                bad += 1;
            }
        }
        if good.len() < 4 {
            bail!("the device has too few good blocks for the demo");
        }
        let short = need as usize - good.len();
        let data = data as usize - short.min(data as usize - 1);
        let flips = good[0];
        let cut_units = good[1..1 + cut as usize].to_vec();
        let wear_units = good[1 + cut as usize..1 + (cut + wear) as usize].to_vec();
        let data_units = good[1 + (cut + wear) as usize..][..data].to_vec();
        let cycles = (wear_budget / unit_bytes.max(1))
            .min(wear_ops / self.dev.slots(0).max(1) as u64)
            .clamp(8, if quick { 200 } else { 5000 });
        Ok(Plan {
            data: data_units,
            wear: wear_units,
            cut: cut_units,
            flips,
            bad_skipped: bad,
            bad_checks: checks,
            cycles,
            trials: if quick { 16 } else { 100 },
            flip_reads: if quick { 1000 } else { 8000 },
        })
    }

    fn run(&mut self, plan: &Plan) -> anyhow::Result<()> {
        let spec = self.preset.spec;
        self.line(format!(
            "flashfs demo: {} ({}, {}), simulated in RAM, seed {}",
            self.preset.name,
            spec.kind(),
            bytes(spec.capacity()),
            self.seed
        ))?;
        self.line(format!("  {}", self.preset.summary))?;
        self.line(format!("  geometry: {}", device::geometry(&spec)))?;
        self.line(
            "  The file system layers are under construction: this drives the simulated medium directly.",
        )?;
        if plan.bad_skipped > 0 {
            self.line(format!(
                "  {} factory-bad block{} skipped",
                plan.bad_skipped,
                plural(plan.bad_skipped)
            ))?;
        }
        self.line("")?;
        self.write_phase(plan)?;
        self.wear_phase(plan)?;
        self.cut_phase(plan)?;
        self.flip_phase(plan)?;
        self.final_check(plan)?;
        self.bar.finish_and_clear();
        self.report(plan)
    }

    fn unit_word(&self) -> &'static str {
        match self.dev {
            Medium::Nor(_) => "unit",
            Medium::Nand(_) => "block",
            Medium::Nvram(_) => "region",
        }
    }

    fn slot_word(&self) -> &'static str {
        match self.dev {
            Medium::Nand(_) => "page",
            _ => "record",
        }
    }

    /// Writes generation `gen` to every slot of `unit`, timing each program.
    fn fill(&mut self, unit: u32, gen: u32) -> anyhow::Result<u64> {
        let mut written = 0;
        let slc = self.dev.slc_mode(unit);
        for s in 0..self.dev.slots(unit) {
            let c = self.dev.content(self.seed, unit, s, gen);
            let t0 = self.dev.now();
            self.dev
                .write(unit, s, &c)
                .map_err(|e| self.op_error(e, unit, s))?;
            if self.dev.is_mlc() {
                let h = if slc {
                    &mut self.slc_programs
                } else {
                    &mut self.mlc_programs
                };
                h.record(self.dev.now() - t0);
            }
            written += c.len() as u64;
        }
        self.user_bytes += written;
        Ok(written)
    }

    /// Reads every slot of `unit` and checks it holds generation `gen`.
    fn verify(&mut self, unit: u32, gen: u32, phase: &str) -> anyhow::Result<u64> {
        let mut bytes = 0;
        for s in 0..self.dev.slots(unit) {
            let want = self.dev.content(self.seed, unit, s, gen);
            let (got, _) = self
                .dev
                .read(unit, s)
                .map_err(|e| self.op_error(e, unit, s))?;
            if got != Slot::Data(want.clone()) {
                bail!(
                    "check failed ({phase}): {} {s} of {} {unit} read back {}",
                    self.slot_word(),
                    self.unit_word(),
                    describe(&got)
                );
            }
            bytes += want.len() as u64;
        }
        Ok(bytes)
    }

    fn op_error(&self, e: FlashError, unit: u32, slot: u32) -> anyhow::Error {
        anyhow!(
            "{} {slot} of {} {unit}: {e}",
            self.slot_word(),
            self.unit_word()
        )
    }

    fn write_phase(&mut self, plan: &Plan) -> anyhow::Result<()> {
        self.stage("write");
        let mut written = 0;
        let mut slots = 0;
        for &u in &plan.data {
            written += self.fill(u, 0)?;
            slots += self.dev.slots(u) as u64;
            self.bar.inc(1);
        }
        self.stage("read back");
        let mut read = 0;
        for &u in &plan.data {
            read += self.verify(u, 0, "write")?;
            self.bar.inc(1);
        }
        debug_assert_eq!(read, written);
        let what = match self.dev {
            Medium::Nand(_) => "pages of data+spare",
            _ => "variable-size records (CRC-32C framed)",
        };
        self.line(format!(
            "1. write       {} {what} ({}) across {} {}s, read back: every byte verified",
            count(slots),
            bytes(written),
            plan.data.len(),
            self.unit_word()
        ))
    }

    fn wear_phase(&mut self, plan: &Plan) -> anyhow::Result<()> {
        self.stage("wear");
        let w = plan.wear.len();
        let hot = (w / 5).max(1);
        let mut gens: HashMap<u32, u32> = HashMap::new();
        let mut slots = 0;
        for _ in 0..plan.cycles {
            let i = if hot == w || self.rng.chance(0.8) {
                self.rng.below(hot as u64) as usize
            } else {
                hot + self.rng.below((w - hot) as u64) as usize
            };
            let u = plan.wear[i];
            let gen = gens.entry(u).or_insert(0);
            *gen += 1;
            let gen = *gen;
            if self.dev.erasable() {
                self.dev.erase(u).map_err(|e| self.op_error(e, u, 0))?;
            }
            if self.dev.is_mlc() {
                let slc = self.rng.chance(0.5);
                self.dev.set_slc(u, slc).map_err(device::explain)?;
            }
            self.fill(u, gen)?;
            self.verify(u, gen, "wear")?;
            slots += self.dev.slots(u) as u64;
            self.bar.inc(1);
        }
        let how = if self.dev.erasable() {
            "erase/rewrite cycles"
        } else {
            "in-place rewrites"
        };
        let skew = if hot < w {
            format!(
                ", 80% of them on {hot} hot {}{}",
                self.unit_word(),
                plural(hot as u64)
            )
        } else {
            String::new()
        };
        self.line(format!(
            "2. wear        {} {how} on {w} {}{}{skew}: {} {}s rewritten and verified",
            count(plan.cycles),
            self.unit_word(),
            plural(w as u64),
            count(slots),
            self.slot_word()
        ))?;
        if self.dev.is_mlc() {
            let (s, m) = (&self.slc_programs, &self.mlc_programs);
            let text = format!(
                "{MORE}MLC part, half the cycles in SLC mode (LSB pages only): program p50 {} in SLC mode ({} pages) vs {} in MLC mode ({} pages)",
                duration(s.percentile(50.0)),
                count(s.count()),
                duration(m.percentile(50.0)),
                count(m.count())
            );
            self.line(text)?;
        }
        Ok(())
    }

    fn cut_phase(&mut self, plan: &Plan) -> anyhow::Result<()> {
        self.stage("power cuts");
        let mut t = Cuts::default();
        for trial in 0..plan.trials {
            let u = plan.cut[trial as usize % plan.cut.len()];
            self.cut_trial(u, trial, &mut t)?;
            self.bar.inc(1);
        }
        let detect = if self.dev.has_ecc() {
            "ECC reports Uncorrectable"
        } else {
            "the record checksum fails"
        };
        let erases = if self.dev.erasable() {
            format!(", {} during an erase", t.at_erase)
        } else {
            String::new()
        };
        self.line(format!(
            "3. power cuts  {} cuts at random operations ({} torn mid-operation, {} before it started{erases})",
            t.trials,
            t.torn,
            t.trials - t.torn
        ))?;
        self.line(format!(
            "{MORE}{} operations completed before a cut: all read back intact after reboot",
            count(t.before)
        ))?;
        self.line(format!(
            "{MORE}cut before the operation: {} of {} left no trace",
            t.clean_absent,
            t.trials - t.torn
        ))?;
        let erases = if t.torn_erases > 0 {
            format!("; {} of the torn operations were erases", t.torn_erases)
        } else {
            String::new()
        };
        let mut torn = vec![format!("{} detected ({detect}{erases})", t.torn_detected)];
        if t.torn_absent > 0 {
            torn.push(format!("{} left no trace", t.torn_absent));
        }
        if t.torn_complete > 0 {
            torn.push(format!("{} completed anyway", t.torn_complete));
        }
        if t.torn_partial > 0 {
            torn.push(format!(
                "{} erase{} left every slot either erased or intact",
                t.torn_partial,
                plural(t.torn_partial)
            ));
        }
        self.line(format!("{MORE}torn operation: {}", torn.join(", ")))?;
        if t.paired > 0 {
            self.line(format!(
                "{MORE}{} torn MSB page{} also spoiled the LSB page that shares its cells (MLC mode; detected by ECC)",
                t.paired,
                plural(t.paired)
            ))?;
        }
        self.line(format!(
            "{MORE}while off, the device refused every call ({} of {} tried)",
            t.refused, t.trials
        ))
    }

    /// One power cut: fill a unit with generation 1, then erase it and write generation 2
    /// with the power cut after a random number of operations; reboot and check.
    fn cut_trial(&mut self, u: u32, trial: u64, t: &mut Cuts) -> anyhow::Result<()> {
        let slc = self.dev.is_mlc() && trial % 2 == 1;
        let gen_old = 2 * trial as u32 + 1;
        let gen_new = gen_old + 1;
        if self.dev.erasable() {
            self.dev.erase(u).map_err(|e| self.op_error(e, u, 0))?;
        }
        self.dev.set_slc(u, slc).map_err(device::explain)?;
        self.fill(u, gen_old)?;
        let slots = self.dev.slots(u);
        let e = self.dev.erasable() as u64;
        let m = (slots as u64).min(16);
        let total = m + e;
        let k = if e == 1 && self.rng.chance(0.25) {
            0
        } else {
            e + self.rng.below(m)
        };
        let torn = self.rng.chance(0.5);
        t.trials += 1;
        t.torn += torn as u64;
        t.at_erase += (e == 1 && k == 0) as u64;
        t.torn_erases += (e == 1 && k == 0 && torn) as u64;
        self.dev.sim_mut().schedule_cut(k, torn);
        for i in 0..total {
            let r = if i < e {
                self.dev.erase(u).and_then(|()| self.dev.set_slc(u, slc))
            } else {
                let s = (i - e) as u32;
                let c = self.dev.content(self.seed, u, s, gen_new);
                self.dev.write(u, s, &c)
            };
            match (i < k, r) {
                (true, Ok(())) => {}
                (true, Err(err)) => bail!("operation {i} failed before the cut at {k}: {err}"),
                (false, Err(FlashError::PowerLoss)) => break,
                (false, Ok(())) => bail!("the power was not cut at operation {k}"),
                (false, Err(err)) => {
                    bail!("the cut operation failed with '{err}', not a power loss")
                }
            }
        }
        if matches!(self.dev.read(u, 0), Err(FlashError::PowerLoss)) {
            t.refused += 1;
        }
        self.dev.sim_mut().reboot();
        t.before += k;

        let old = |d: &Self, s: u32| Slot::Data(d.dev.content(d.seed, u, s, gen_old));
        let new = |d: &Self, s: u32| Slot::Data(d.dev.content(d.seed, u, s, gen_new));
        let mut outcome = Outcome::default();
        if k < e {
            // The erase itself was cut.
            for s in 0..self.dev.slots(u) {
                let (got, _) = self
                    .dev
                    .read(u, s)
                    .map_err(|err| self.op_error(err, u, s))?;
                if got == old(self, s) {
                    outcome.old += 1;
                } else if got == Slot::Erased {
                    outcome.erased += 1;
                } else if got == Slot::Corrupt {
                    outcome.corrupt += 1;
                } else {
                    bail!(
                        "check failed (power cut during an erase): {} {s} read back {}",
                        self.slot_word(),
                        describe(&got)
                    );
                }
            }
            let n = self.dev.slots(u);
            match (torn, outcome) {
                (false, o) if o.old == n => t.clean_absent += 1,
                (false, _) => {
                    bail!("check failed: an erase cut before it started changed the unit")
                }
                (true, o) if o.corrupt > 0 => t.torn_detected += 1,
                (true, o) if o.old == n => t.torn_absent += 1,
                (true, o) if o.erased == n => t.torn_complete += 1,
                (true, _) => t.torn_partial += 1,
            }
            return Ok(());
        }
        let cut_slot = (k - e) as u32;
        let mut spoiled_partner = false;
        for s in 0..self.dev.slots(u) {
            let (got, _) = self
                .dev
                .read(u, s)
                .map_err(|err| self.op_error(err, u, s))?;
            let untouched = if self.dev.erasable() {
                Slot::Erased
            } else {
                old(self, s)
            };
            if s < cut_slot {
                if got == new(self, s) {
                    continue;
                }
                let partner = torn
                    && s + 1 == cut_slot
                    && got == Slot::Corrupt
                    && self.dev.paired_with_previous(u, cut_slot);
                if partner {
                    spoiled_partner = true;
                    continue;
                }
                bail!(
                    "check failed (power cut): {} {s}, written before the cut, read back {}",
                    self.slot_word(),
                    describe(&got)
                );
            } else if s == cut_slot {
                if got == untouched {
                    if torn {
                        t.torn_absent += 1;
                    } else {
                        t.clean_absent += 1;
                    }
                } else if !torn {
                    bail!(
                        "check failed: a program cut before it started left {}",
                        describe(&got)
                    );
                } else if got == Slot::Corrupt {
                    t.torn_detected += 1;
                } else if got == new(self, s) {
                    t.torn_complete += 1;
                } else {
                    bail!(
                        "check failed: a torn program left {} that passed its check",
                        describe(&got)
                    );
                }
            } else if got != untouched {
                bail!(
                    "check failed (power cut): {} {s}, after the cut, read back {}",
                    self.slot_word(),
                    describe(&got)
                );
            }
        }
        t.paired += spoiled_partner as u64;
        Ok(())
    }

    fn flip_phase(&mut self, plan: &Plan) -> anyhow::Result<()> {
        self.stage("bit flips");
        let u = plan.flips;
        if !self.dev.erasable() {
            self.bar.inc(1);
            return self.line(
                "4. bit flips   not modelled for NVRAM by the simulator (FRAM has no ECC here): skipped",
            );
        }
        self.dev.erase(u).map_err(|e| self.op_error(e, u, 0))?;
        self.dev.set_slc(u, false).map_err(device::explain)?;
        self.fill(u, 1)?;
        let slots = self.dev.slots(u);
        let mut first = 0;
        if let Some((t, codeword)) = self.dev.ecc() {
            self.line(format!(
                "4. bit flips   ECC corrects {t} bit{} per {codeword} B codeword",
                plural(t as u64)
            ))?;
            let n = (slots / 8).max(1);
            // Stuck errors the ECC can correct.
            let mut corrected = 0u64;
            for s in 0..n {
                self.dev
                    .inject_bit_errors(u, s, t as u8)
                    .map_err(device::explain)?;
                let (got, bits) = self.dev.read(u, s).map_err(|e| self.op_error(e, u, s))?;
                if got != Slot::Data(self.dev.content(self.seed, u, s, 1)) {
                    bail!("check failed: {t} bit errors (within ECC) were not corrected");
                }
                corrected += bits as u64;
            }
            self.line(format!(
                "{MORE}{t} stuck bit error{} in each of {n} pages: all corrected ({} bits), data intact",
                plural(t as u64),
                count(corrected)
            ))?;
            // One more than it can.
            let mut refused = 0;
            for s in n..2 * n {
                self.dev
                    .inject_bit_errors(u, s, t as u8 + 1)
                    .map_err(device::explain)?;
                let (got, _) = self.dev.read(u, s).map_err(|e| self.op_error(e, u, s))?;
                if got != Slot::Corrupt {
                    bail!(
                        "check failed: {} bit errors (beyond ECC) went unreported",
                        t + 1
                    );
                }
                refused += 1;
            }
            self.line(format!(
                "{MORE}{} stuck bit errors in each of {n} pages: all {refused} reads reported Uncorrectable",
                t + 1
            ))?;
            first = 2 * n;
        } else {
            self.line("4. bit flips   NOR has no ECC: every flipped bit reaches the reader")?;
        }
        // Random transient flips on reads.
        let pool = slots - first;
        let rate = match self.dev.ecc() {
            // About a third of the ECC's strength per codeword on average.
            Some((t, codeword)) => 0.3 * t as f64 / (codeword as f64 * 8.0),
            None => 0.1 / (self.dev.payload_max() as f64 * 8.0),
        };
        self.dev.sim_mut().set_faults(FaultConfig {
            seed: self.seed,
            bit_flip_rate: rate,
            ..FaultConfig::default()
        });
        let (mut ok, mut caught, mut wrong, mut bits) = (0u64, 0u64, 0u64, 0u64);
        for _ in 0..plan.flip_reads {
            let s = first + self.rng.below(pool as u64) as u32;
            let (got, corrected) = self.dev.read(u, s).map_err(|e| self.op_error(e, u, s))?;
            bits += corrected as u64;
            match got {
                Slot::Corrupt => caught += 1,
                Slot::Data(d) if d == self.dev.content(self.seed, u, s, 1) => ok += 1,
                _ => wrong += 1,
            }
        }
        self.dev.sim_mut().set_faults(FaultConfig::default());
        self.bar.inc(1);
        let rate = format!("{:.1e}", rate);
        if self.dev.has_ecc() {
            self.line(format!(
                "{MORE}random flips at {rate} per bit on {} reads: {} bits corrected, {} reads Uncorrectable, {} returned wrong data",
                count(plan.flip_reads),
                count(bits),
                count(caught),
                count(wrong)
            ))?;
        } else {
            self.line(format!(
                "{MORE}random flips at {rate} per bit on {} record reads: {} failed their checksum, {} intact, {} wrong data accepted",
                count(plan.flip_reads),
                count(caught),
                count(ok),
                count(wrong)
            ))?;
        }
        if wrong > 0 {
            bail!("check failed: {wrong} reads returned wrong data that passed ECC or checksum");
        }
        Ok(())
    }

    fn final_check(&mut self, plan: &Plan) -> anyhow::Result<()> {
        self.stage("final check");
        let mut read = 0;
        for &u in &plan.data {
            read += self.verify(u, 0, "final")?;
            self.bar.inc(1);
        }
        self.line(format!(
            "5. final check all {} of step 1 still intact after the wear, cuts and flips elsewhere",
            bytes(read)
        ))
    }

    fn report(&mut self, plan: &Plan) -> anyhow::Result<()> {
        let st = self.dev.sim().stats().clone();
        let nvram = !self.dev.erasable();
        self.line("")?;
        self.line(format!(
            "device time   {} (simulated)     host time {}",
            duration(self.dev.now()),
            duration(round_ms(self.started.elapsed()))
        ))?;
        let (program, programs) = if nvram {
            ("write", "writes")
        } else {
            ("program", "programs")
        };
        let mut work = format!(
            "reads {} ({}), {programs} {} ({})",
            count(st.reads),
            bytes(st.bytes_read),
            count(st.programs),
            bytes(st.bytes_programmed),
        );
        if !nvram {
            work.push_str(&format!(", erases {}", count(st.erases)));
        }
        self.line(format!("operations    {work}"))?;
        if plan.bad_checks > 0 {
            self.line(format!(
                "              (the reads include {} bad-block mark checks, which have no latency record)",
                count(plan.bad_checks)
            ))?;
        }
        self.line(format!(
            "              user data written {}, power cuts {}",
            bytes(self.user_bytes),
            plan.trials
        ))?;
        if self.dev.has_ecc() {
            self.line(format!(
                "ECC           {} bits corrected, {} uncorrectable reads",
                count(st.corrected_bits),
                count(st.uncorrectable_reads)
            ))?;
        }
        self.line("latency       (device time per operation, percentiles within 12.5%)")?;
        let mut rows = vec![vec![
            "".to_string(),
            "count".into(),
            "p50".into(),
            "p99".into(),
            "p99.9".into(),
            "max".into(),
        ]];
        let mut kinds = vec![("read", &st.read_latency), (program, &st.program_latency)];
        if !nvram {
            kinds.push(("erase", &st.erase_latency));
        }
        for (name, h) in kinds {
            if h.count() == 0 {
                continue;
            }
            rows.push(vec![
                format!("  {name}"),
                count(h.count()),
                duration(h.percentile(50.0)),
                duration(h.percentile(99.0)),
                duration(h.percentile(99.9)),
                duration(h.max()),
            ]);
        }
        for l in table(&rows) {
            self.line(format!("            {l}"))?;
        }
        let counts = self.dev.sim().erase_counts();
        if counts.is_empty() {
            return self.line("erase counts  none: NVRAM is written in place");
        }
        let used: Vec<u32> = plan
            .data
            .iter()
            .chain(&plan.wear)
            .chain(&plan.cut)
            .chain(std::iter::once(&plan.flips))
            .filter_map(|&u| counts.get(u as usize).copied())
            .collect();
        let all = Spread::of(&counts);
        let mine = Spread::of(&used);
        let word = self.unit_word();
        self.line(format!(
            "erase counts  the demo's {} {word}s: {}",
            used.len(),
            mine.line()
        ))?;
        self.line(format!(
            "              all {} {word}s: {}",
            counts.len(),
            all.line()
        ))?;
        let wear: Vec<u32> = plan
            .wear
            .iter()
            .filter_map(|&u| counts.get(u as usize).copied())
            .collect();
        self.line(format!(
            "              histogram of the {} wear-phase {word}{} (erases: {word}s)",
            wear.len(),
            plural(wear.len() as u64)
        ))?;
        let rows: Vec<Vec<String>> = device::histogram(&wear, 8, 40)
            .into_iter()
            .map(|(label, n, bar)| vec![format!("{MORE}{label}"), count(n), bar])
            .collect();
        for l in table(&rows) {
            self.line(l)?;
        }
        Ok(())
    }
}

/// What a slot held, for a failed check.
fn describe(s: &Slot) -> &'static str {
    match s {
        Slot::Erased => "erased bytes",
        Slot::Corrupt => "corrupt data",
        Slot::Data(_) => "different data",
    }
}

/// How the slots of a unit whose erase was cut look.
#[derive(Debug, Default, Clone, Copy)]
struct Outcome {
    old: u32,
    erased: u32,
    corrupt: u32,
}

fn round_ms(d: Duration) -> Duration {
    Duration::from_millis(d.as_millis() as u64)
}
