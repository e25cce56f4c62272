//! End-to-end tests of the `flashfs` command line.

mod common;

use std::path::Path;

use common::{fails, flashfs, has_keys, json_rows};
use predicates::prelude::*;
use tempfile::TempDir;

fn json_lines(stdout: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8(stdout.to_vec())
        .expect("stdout is UTF-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is a JSON object"))
        .collect()
}

fn info_json(image: &Path) -> serde_json::Value {
    let out = flashfs()
        .args(["sim", "info", "--json"])
        .arg(image)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let mut objs = json_lines(&out);
    assert_eq!(objs.len(), 1);
    objs.remove(0)
}

#[test]
fn presets_lists_every_preset_as_a_table() {
    let mut assert = flashfs().arg("presets").assert().success();
    for p in flash::preset::PRESETS {
        assert = assert.stdout(predicate::str::contains(p.name));
    }
    assert
        .stdout(predicate::str::contains("st10f280/N"))
        .stdout(predicate::str::contains("100,000 cycles"))
        .stdout(predicate::str::contains("source:"));
}

#[test]
fn presets_json_is_one_object_per_preset() {
    let out = flashfs().args(["presets", "--json"]).output().unwrap();
    assert!(out.status.success());
    let objs = json_lines(&out.stdout);
    assert_eq!(objs.len(), flash::preset::PRESETS.len());
    for (o, p) in objs.iter().zip(flash::preset::PRESETS) {
        assert_eq!(o["name"], p.name);
        assert_eq!(o["kind"], p.spec.kind());
        assert_eq!(o["capacity_bytes"], p.spec.capacity());
        assert!(o["timing_ns"].is_object() && o["geometry"].is_object());
        assert!(o["endurance_cycles"].as_u64().unwrap() > 0);
    }
    let nand = objs.iter().find(|o| o["name"] == "nand-1g").unwrap();
    assert_eq!(nand["ecc"]["correctable_bits"], 4);
    assert_eq!(nand["geometry"]["page_bytes"], 2048);
    let st = objs.iter().find(|o| o["name"] == "st10f280").unwrap();
    assert_eq!(st["variants"].as_array().unwrap().len(), 6);
}

#[test]
fn sim_create_then_info_round_trips() {
    let dir = TempDir::new().unwrap();
    for (preset, kind) in [
        ("nand-128m", "nand"),
        ("st10f280/8", "nor"),
        ("cy15b102q", "nvram"),
        ("mlc-flexfs", "mlc-nand"),
    ] {
        let img = dir.path().join(format!("{}.img", preset.replace('/', "-")));
        flashfs()
            .args(["sim", "create", "--seed", "5", "--preset", preset])
            .arg(&img)
            .assert()
            .success()
            .stdout(predicate::str::contains(format!(
                "created {}",
                img.display()
            )));
        let j = info_json(&img);
        let spec = flash::preset::lookup(preset).unwrap().spec;
        assert_eq!(j["preset"], preset);
        assert_eq!(j["kind"], kind);
        assert_eq!(j["seed"], 5);
        assert_eq!(j["capacity_bytes"], spec.capacity());
        assert_eq!(j["file_bytes"], flash::image::image_len(&spec));
        // Sparse: a fresh flash image takes far less than its size.
        if kind != "nvram" {
            assert!(
                j["allocated_bytes"].as_u64().unwrap() < j["file_bytes"].as_u64().unwrap() / 10
            );
            assert_eq!(j["erase_counts"]["max"], 0);
        }
        flashfs()
            .args(["sim", "info"])
            .arg(&img)
            .assert()
            .success()
            .stdout(predicate::str::contains(preset))
            .stdout(predicate::str::contains("allocated on disk"));
    }
    // Factory bad blocks follow from the seed and show in the info.
    let j = info_json(&dir.path().join("nand-128m.img"));
    assert!(j["bad_blocks"].as_u64().unwrap() > 0);
}

#[test]
fn sim_create_refuses_to_overwrite_without_force() {
    let dir = TempDir::new().unwrap();
    let img = dir.path().join("dev.img");
    flashfs()
        .args(["sim", "create", "--preset", "st10f280", "--seed", "1"])
        .arg(&img)
        .assert()
        .success();
    let line = fails(
        flashfs()
            .args(["sim", "create", "--preset", "nand-128m", "--seed", "2"])
            .arg(&img),
        1,
    );
    assert!(
        line.contains("exists") && line.contains("--force"),
        "{line}"
    );
    assert_eq!(info_json(&img)["preset"], "st10f280");

    // Not even a file that is not an image is overwritten.
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "keep me").unwrap();
    fails(
        flashfs()
            .args(["sim", "create", "--preset", "st10f280"])
            .arg(&text),
        1,
    );
    assert_eq!(std::fs::read_to_string(&text).unwrap(), "keep me");
}

#[test]
fn sim_create_force_replaces() {
    let dir = TempDir::new().unwrap();
    let img = dir.path().join("dev.img");
    flashfs()
        .args(["sim", "create", "--preset", "st10f280", "--seed", "1"])
        .arg(&img)
        .assert()
        .success();
    flashfs()
        .args([
            "sim", "create", "--preset", "w25n01gv", "--seed", "9", "--force",
        ])
        .arg(&img)
        .assert()
        .success();
    let j = info_json(&img);
    assert_eq!(
        (j["preset"].as_str(), j["seed"].as_u64()),
        (Some("w25n01gv"), Some(9))
    );
}

#[test]
fn sim_create_into_a_directory_is_refused() {
    let dir = TempDir::new().unwrap();
    let line = fails(
        flashfs()
            .args(["sim", "create", "--preset", "st10f280", "--force"])
            .arg(dir.path()),
        1,
    );
    assert!(line.contains("directory"), "{line}");
    let line = fails(
        flashfs()
            .args(["sim", "create", "--preset", "st10f280"])
            .arg(dir.path().join("no/such/dir.img")),
        1,
    );
    assert!(line.contains("no such file"), "{line}");
}

#[test]
fn sim_info_of_a_missing_image_is_one_line() {
    let dir = TempDir::new().unwrap();
    let line = fails(
        flashfs()
            .args(["sim", "info"])
            .arg(dir.path().join("missing.img")),
        1,
    );
    assert!(
        line.contains("missing.img") && line.contains("no such file"),
        "{line}"
    );
}

#[test]
fn sim_info_of_a_corrupt_image_is_one_line() {
    let dir = TempDir::new().unwrap();
    let img = dir.path().join("dev.img");
    flashfs()
        .args(["sim", "create", "--preset", "st10f280"])
        .arg(&img)
        .assert()
        .success();
    let good = std::fs::read(&img).unwrap();
    // Any damaged header byte is caught: magic, version, kind, name, geometry, checksum.
    for at in [0usize, 8, 12, 24, 60, 130, 250] {
        let mut bad = good.clone();
        bad[at] ^= 0x10;
        std::fs::write(&img, &bad).unwrap();
        let line = fails(flashfs().args(["sim", "info"]).arg(&img), 1);
        assert!(line.contains("bad device image"), "byte {at}: {line}");
    }
    // A truncated image.
    std::fs::write(&img, &good[..good.len() / 2]).unwrap();
    let line = fails(flashfs().args(["sim", "info"]).arg(&img), 1);
    assert!(line.contains("truncated"), "{line}");
}

#[test]
fn sim_info_of_a_file_that_is_not_an_image_is_one_line() {
    let dir = TempDir::new().unwrap();
    let short = dir.path().join("short.txt");
    std::fs::write(&short, "hello\n").unwrap();
    let line = fails(flashfs().args(["sim", "info"]).arg(&short), 1);
    assert!(line.contains("bad device image"), "{line}");
    let long = dir.path().join("zeros.bin");
    std::fs::write(&long, vec![0u8; 64 * 1024]).unwrap();
    let line = fails(flashfs().args(["sim", "info", "--json"]).arg(&long), 1);
    assert!(line.contains("bad magic"), "{line}");
    let line = fails(flashfs().args(["sim", "info"]).arg(dir.path()), 1);
    assert!(line.contains("not a regular file"), "{line}");
}

#[test]
fn a_wrong_preset_name_is_one_line() {
    let dir = TempDir::new().unwrap();
    let img = dir.path().join("dev.img");
    for name in ["nand-2g", "st10f280/3", ""] {
        let line = fails(
            flashfs()
                .args(["sim", "create", "--preset", name])
                .arg(&img),
            1,
        );
        assert!(line.contains("unknown preset"), "{line}");
    }
    assert!(!img.exists());
    let line = fails(flashfs().args(["demo", "--quick", "--preset", "nope"]), 1);
    assert!(line.contains("unknown preset 'nope'"), "{line}");
}

#[test]
fn preset_names_are_taken_in_any_case() {
    let dir = TempDir::new().unwrap();
    let img = dir.path().join("dev.img");
    flashfs()
        .args(["sim", "create", "--preset", "M29DW640D"])
        .arg(&img)
        .assert()
        .success();
    let out = flashfs().args(["sim", "info"]).arg(&img).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("m29dw640d"), "{text}");
}

#[test]
fn usage_errors_are_one_line_with_exit_code_2() {
    fails(flashfs().arg("frobnicate"), 2);
    fails(flashfs().args(["presets", "--bogus"]), 2);
    fails(flashfs().args(["sim", "create", "x.img"]), 2);
    fails(flashfs().args(["demo", "--seed", "minus-one"]), 2);
    fails(&mut flashfs(), 2);
    fails(flashfs().arg("sim"), 2);
}

#[test]
fn every_command_has_help_with_an_example() {
    for args in [
        &[][..],
        &["presets"][..],
        &["sim"][..],
        &["sim", "create"][..],
        &["sim", "info"][..],
        &["demo"][..],
        &["torture"][..],
        &["mkfs"][..],
        &["info"][..],
        &["fsck"][..],
        &["mount"][..],
        &["ls"][..],
        &["cat"][..],
        &["get"][..],
        &["put"][..],
        &["rm"][..],
        &["mkdir"][..],
        &["mv"][..],
        &["bench", "fuse"][..],
        &["bench", "tffs"][..],
        &["bench", "peers"][..],
        &["bench", "mount"][..],
        &["bench", "frash"][..],
        &["bench", "small-writes"][..],
    ] {
        flashfs()
            .args(args)
            .arg("--help")
            .assert()
            .success()
            .stdout(predicate::str::contains("Examples:"))
            .stdout(predicate::str::contains("flashfs "));
    }
}

fn demo_succeeds(preset: &str) -> String {
    demo_succeeds_with(preset, &[])
}

fn demo_succeeds_with(preset: &str, extra: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = flashfs()
        .args(["demo", "--quick", "--preset", preset])
        .args(extra)
        .arg("--plot")
        .arg(dir.path())
        .assert()
        .success()
        .get_output()
        .clone();
    let text = String::from_utf8(out.stdout).unwrap();
    for step in [
        "1. format",
        "2. store",
        "every byte verified",
        "3. power cuts",
        "fsck clean after each",
        " 0 violations",
        "4. space",
        "5. writes",
        "write amplification",
        "6. wear",
        "7. plots",
    ] {
        assert!(text.contains(step), "{preset}: no '{step}' in\n{text}");
    }
    for plot in ["erase-counts", "segment-utilization"] {
        for ext in ["png", "svg"] {
            let f = dir.path().join(format!("{plot}.{ext}"));
            assert!(f.metadata().unwrap().len() > 0, "{}", f.display());
        }
    }
    // Progress bars never reach a pipe.
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[test]
fn demo_quick_on_nor() {
    let text = demo_succeeds("m29dw640d");
    assert!(text.contains("blocks of 512 B"), "{text}");
}

#[test]
fn demo_quick_on_nand_and_mlc() {
    let text = demo_succeeds("nand-128m");
    assert!(text.contains("pages with their spare bytes"), "{text}");
    demo_succeeds("mlc-flexfs");
}

#[test]
fn demo_runs_on_nvram() {
    demo_succeeds("cy15b102q");
}

/// `--nvram` runs the demo on a volume on two devices, NVRAM beside NAND or NOR, and says
/// what each part took; a pair that makes no volume is refused in one line.
#[test]
fn demo_runs_on_nvram_beside_the_flash() {
    for (flash, nvram) in [("nand-128m", "fram-8m"), ("w25q64jv", "cy15b102q")] {
        let text = demo_succeeds_with(flash, &["--nvram", nvram]);
        for expect in [
            format!("beside it {nvram} (nvram"),
            "written to the NVRAM".into(),
            "counting the NVRAM".into(),
            "segments on the NVRAM (".into(),
        ] {
            assert!(
                text.contains(&expect),
                "{flash}+{nvram}: no '{expect}' in\n{text}"
            );
        }
    }
    let line = fails(
        flashfs().args([
            "demo",
            "--quick",
            "--preset",
            "nand-1g",
            "--nvram",
            "cy15b102q",
        ]),
        1,
    );
    assert!(line.contains("part too small for one segment"), "{line}");
    let line = fails(
        flashfs().args([
            "demo",
            "--quick",
            "--preset",
            "fram-8m",
            "--nvram",
            "cy15b102q",
        ]),
        1,
    );
    assert!(line.contains("keeps its data on SLC NAND or NOR"), "{line}");
}

#[test]
fn demo_is_repeatable_from_its_seed() {
    let dir = tempfile::tempdir().unwrap();
    let run = |seed: &str| {
        let out = flashfs()
            .args([
                "demo", "--quick", "--preset", "w25q64jv", "--seed", seed, "--plot",
            ])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success());
        // Everything but the host time is a function of the seed.
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .filter(|l| !l.contains("done in"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(run("7"), run("7"));
    assert_ne!(run("7"), run("8"));
}

#[test]
fn bench_kawaguchi_prints_measured_rows_as_json() {
    let rows = json_rows(
        flashfs()
            .args(["bench", "kawaguchi", "--mb", "2", "--pattern", "sequential"])
            .args(["--util", "30", "--policy", "greedy", "--json"]),
    );
    // Two head settings for the one write row, then the two read rows.
    assert_eq!(rows.len(), 4);
    let w = &rows[0];
    has_keys(
        w,
        &[
            "experiment",
            "utilization",
            "policy",
            "separate_head",
            "throughput_kbps",
            "paper_kbps",
            "erased_segments",
            "copied_blocks",
            "waf",
        ],
    );
    assert_eq!(w["experiment"], "sequential");
    assert_eq!(w["paper_kbps"], 231.0);
    assert!(w["throughput_kbps"].as_f64().unwrap() > 0.0);
    assert!(w["waf"].as_f64().unwrap() >= 1.0);
}

#[test]
fn bench_tffs_prints_measured_rows_as_json() {
    let rows = json_rows(
        flashfs()
            .args(["bench", "tffs", "--device", "448/2", "--config", "default"])
            .args(["--workload", "fax", "--workload", "recorder"])
            .args(["--cycles", "16", "--check-cycles", "0", "--json"]),
    );
    assert_eq!(rows.len(), 2);
    for r in &rows {
        has_keys(
            r,
            &[
                "workload",
                "device",
                "config",
                "capacity_pct",
                "endurance_pct",
                "erasures_per_unit",
                "reclaim_eff",
                "heap_bytes",
            ],
        );
        assert_eq!(r["device"], "448/2");
        assert_eq!(r["cycle_limit"], 16);
        let e = r["endurance_pct"].as_f64().unwrap();
        assert!(e > 0.0 && e < 100.0, "{r}");
        let eff = r["reclaim_eff"].as_f64().unwrap();
        assert!(eff > 0.0 && eff <= 1.0, "{r}");
        // The binary counts its heap.
        assert!(r["heap_bytes"].as_u64().unwrap() > 0, "{r}");
    }
    assert_eq!(rows[0]["workload"], "fax");
    assert_eq!(rows[1]["workload"], "recorder");
}

#[test]
fn bench_flexfs_quick_rows_as_json() {
    let rows = json_rows(
        flashfs()
            .args(["bench", "flexfs", "--quick", "--json"])
            .args(["--experiment", "response", "--experiment", "endurance"])
            .args([
                "--experiment",
                "trace",
                "--config",
                "slc-only",
                "--config",
                "da",
            ]),
    );
    // Four response runs, two endurance runs, the trace under two settings.
    assert_eq!(rows.len(), 8);
    for r in &rows {
        has_keys(
            r,
            &["experiment", "config", "utilization_pct", "write_kbps"],
        );
        assert!(r["write_kbps"].as_f64().unwrap() > 0.0, "{r}");
    }
    let of = |e: &'static str| rows.iter().filter(move |r| r["experiment"] == e);
    for r in of("response") {
        has_keys(r, &["p50_us", "p99_us", "p999_us", "max_us"]);
    }
    for r in of("endurance") {
        has_keys(r, &["erase_mean", "erase_sigma", "lifetime_met"]);
    }
    let wm = of("endurance").find(|r| r["config"] == "da+wm").unwrap();
    assert_eq!(wm["lifetime_met"], true, "{wm}");
    for r in of("trace") {
        has_keys(r, &["read_kbps", "read_us", "write_us"]);
    }
}

#[test]
fn bench_small_writes_quick_rows_as_json() {
    let rows = json_rows(
        flashfs()
            .args(["bench", "small-writes", "--quick", "--pattern", "append"])
            .args(["--sync", "end", "--json"]),
    );
    // Two parts, two write sizes, write-back on and off.
    assert_eq!(rows.len(), 8);
    for r in &rows {
        has_keys(
            r,
            &[
                "device",
                "pattern",
                "write_bytes",
                "sync",
                "write_buffer_bytes",
                "prog_per_user_byte",
                "programs_per_sync",
                "device_s",
                "p99_write_us",
                "heap_bytes",
            ],
        );
        assert_eq!(r["pattern"], "append");
        assert_eq!(r["sync"], "end");
        assert!(r["device_s"].as_f64().unwrap() > 0.0, "{r}");
        // The binary counts the heap.
        assert!(r["heap_bytes"].as_u64().unwrap() > 0, "{r}");
    }
    // Write-back of the partial block: 64-byte appends program about a byte per byte (in
    // the quick run's 16 KiB, with the checkpoint's own slots and the trim of the journal
    // block the create took); without it, a block per append.
    let ppb = |dev: &str, buffers: u64| {
        rows.iter()
            .find(|r| {
                r["device"] == dev && r["write_bytes"] == 64 && r["write_buffer_bytes"] == buffers
            })
            .unwrap()["prog_per_user_byte"]
            .as_f64()
            .unwrap()
    };
    for dev in ["w25q64jv", "w25n01gv"] {
        let default = ::flashfs::FsConfig::default().write_buffer_bytes as u64;
        let (on, off) = (ppb(dev, default), ppb(dev, 0));
        assert!(
            on < 1.6 && on * 4.0 < off,
            "{dev}: {on} with, {off} without"
        );
    }
}

#[test]
fn bench_peers_half_full_prints_three_systems_and_the_floor() {
    let rows = json_rows(
        flashfs()
            .args(["bench", "peers", "--half-full", "--device", "w25q64jv"])
            .arg("--json"),
    );
    let systems: Vec<&str> = rows.iter().map(|r| r["system"].as_str().unwrap()).collect();
    assert_eq!(systems, ["flashfs", "flashfs-scan", "littlefs"]);
    for r in &rows {
        has_keys(
            r,
            &[
                "device",
                "stored_bytes",
                "mount_ms",
                "first_write_ms",
                "page_reads",
            ],
        );
        // Half of the 8 MiB part, give or take the volume's overhead.
        let stored = r["stored_bytes"].as_u64().unwrap();
        assert!((3 << 20..=5 << 20).contains(&stored), "{r}");
    }
    // The floor is flashfs's, and no mount beats it.
    let floor = rows[0]["floor_ms"].as_f64().unwrap();
    assert!(floor > 0.0 && rows[0]["mount_first_write_ms"].as_f64().unwrap() >= floor);
    assert!(rows[1]["floor_ms"].is_null() && rows[2]["floor_ms"].is_null());
}

#[test]
fn bench_peers_prints_both_systems_rows_as_json() {
    let rows = json_rows(
        flashfs()
            .args(["bench", "peers", "--quick", "--device", "w25n01gv"])
            .args(["--sync", "on", "--json"]),
    );
    // Ten phases for littlefs and for each of flashfs's two configurations, the two
    // hostile ones among them.
    assert_eq!(rows.len(), 30);
    for w in ["tiny-read", "head-overwrite"] {
        assert_eq!(rows.iter().filter(|r| r["workload"] == w).count(), 3, "{w}");
    }
    for config in ["default", "small-ram"] {
        let of = |r: &&serde_json::Value| r["system"] == "flashfs" && r["config"] == config;
        assert_eq!(rows.iter().filter(of).count(), 10, "{config}");
    }
    for r in &rows {
        has_keys(
            r,
            &[
                "device",
                "workload",
                "system",
                "throughput_bps",
                "prog_per_user_byte",
                "erases",
                "mount_ms",
                "p50_us",
                "p99_us",
                "p999_us",
                "max_us",
                "heap_bytes",
            ],
        );
        assert_eq!(r["device"], "w25n01gv");
        assert_eq!(r["sync"], true);
        // The binary counts flashfs's heap; littlefs's figure is its buffers.
        assert!(r["heap_bytes"].as_u64().unwrap() > 0, "{r}");
    }
    assert_eq!(rows[0]["system"], "littlefs");
    assert_eq!(rows[0]["workload"], "linear-write");
    let last = &rows[29];
    assert_eq!(last["system"], "flashfs");
    assert_eq!(last["workload"], "mount-first-write");
    assert!(last["mount_ms"].as_f64().unwrap() > 0.0);
}

#[test]
fn bench_mount_prints_scan_and_checkpoint_rows_as_json() {
    let rows = json_rows(
        flashfs()
            .args(["bench", "mount", "--quick", "--experiment", "ryu-park"])
            .args(["--mode", "ftl", "--json"]),
    );
    // Two fill levels x two endings x scan and checkpoint.
    assert_eq!(rows.len(), 8);
    for r in &rows {
        has_keys(
            r,
            &[
                "experiment",
                "preset",
                "config",
                "mode",
                "ending",
                "stored_mib",
                "files",
                "mount_ms",
                "first_write_ms",
                "page_reads",
                "heap_bytes",
                "restored",
            ],
        );
        assert_eq!(r["experiment"], "ryu-park");
        assert_eq!(r["mode"], "ftl");
        assert_eq!(r["restored"], r["config"] == "checkpoint", "{r}");
        // The binary counts the mount's heap.
        assert!(r["heap_bytes"].as_u64().unwrap() > 0, "{r}");
        // After a cut, the checkpoint's row is the worst of cuts over a checkpoint cycle.
        if r["ending"] == "cut" && r["config"] == "checkpoint" {
            has_keys(r, &["cut_points", "mount_ms_mean", "worst_at_pct"]);
            assert!(r["cut_points"].as_u64().unwrap() >= 2, "{r}");
            assert!(r["mount_ms_mean"].as_f64() <= r["mount_ms"].as_f64(), "{r}");
        }
    }
    let reads = |config: &str| {
        rows.iter()
            .filter(|r| r["config"] == config)
            .map(|r| r["page_reads"].as_u64().unwrap())
            .max()
            .unwrap()
    };
    assert!(reads("checkpoint") < reads("scan"));
}

#[test]
fn bench_frash_prints_mount_rows_of_three_configs_as_json() {
    let rows = json_rows(
        flashfs()
            .args(["bench", "frash", "--quick", "--experiment", "mount"])
            .args(["--partition", "8", "--file-kib", "10", "--json"]),
    );
    // Three configurations x two steps x two endings.
    assert_eq!(rows.len(), 12);
    for r in &rows {
        has_keys(
            r,
            &[
                "experiment",
                "config",
                "partition_mb",
                "stored_mb",
                "file_kb",
                "mount_ms",
                "ms_per_mb",
                "mount_nand_reads",
                "heap_bytes",
            ],
        );
        assert_eq!(r["experiment"], "mount");
        // The binary counts the mount's heap.
        assert!(r["heap_bytes"].as_u64().unwrap() > 0, "{r}");
        if r["config"] == "frash" && r["ending"] == "clean" {
            assert_eq!(r["mount_nand_reads"], 0, "{r}");
        }
    }
}

#[test]
fn bench_mount_refuses_a_full_volume_in_one_line() {
    fails(flashfs().args(["bench", "mount", "--fill", "100"]), 1);
}

#[test]
fn bench_mount_refuses_a_same_data_part_it_cannot_read_in_one_line() {
    // The last is NAND, but the quick run's flat parts are of nand-128m: it would hold
    // nothing to compare.
    for bad in [
        "nand-128m",
        "nand-128m:many",
        "no-such-part:64",
        "w25q64jv:64",
        "w25n01gv:2048",
    ] {
        fails(
            flashfs().args(["bench", "mount", "--quick", "--same-data", bad]),
            1,
        );
    }
}

/// `--same-data PRESET:BLOCKS` names the larger part that holds what the flat part of its
/// preset holds; `none` runs none.
#[test]
fn bench_mount_runs_the_same_data_parts_named() {
    let flat = |same: &[&str]| {
        let mut cmd = flashfs();
        cmd.args(["bench", "mount", "--quick", "--experiment", "flat"])
            .args(["--mode", "ftl", "--cut-points", "1", "--json"]);
        for s in same {
            cmd.args(["--same-data", s]);
        }
        json_rows(&mut cmd)
    };
    let rows = flat(&["nand-128m:1536"]);
    let big: Vec<_> = rows
        .iter()
        .filter(|r| r["same_data_as"] != serde_json::Value::Null)
        .collect();
    assert!(!big.is_empty());
    for r in &big {
        assert_eq!(r["blocks"], 1536, "{r}");
        assert_eq!(r["same_data_as"], "nand-128m[1024 blocks]", "{r}");
    }
    let rows = flat(&["none"]);
    assert!(rows
        .iter()
        .all(|r| r["same_data_as"] == serde_json::Value::Null));
}

#[test]
fn bench_peers_refuses_zero_random_writes_in_one_line() {
    fails(
        flashfs().args(["bench", "peers", "--random-writes", "0"]),
        1,
    );
}

#[test]
fn bench_tffs_refuses_a_zero_cycle_limit_in_one_line() {
    fails(flashfs().args(["bench", "tffs", "--cycles", "0"]), 1);
}

#[test]
fn bench_refuses_bad_options_in_one_line() {
    fails(flashfs().args(["bench", "kawaguchi", "--util", "150"]), 1);
}

#[test]
fn torture_prints_measured_counts_as_json_and_finds_no_violation() {
    let out = flashfs()
        .args([
            "torture",
            "--preset",
            "nand-128m",
            "--fault",
            "power-cut",
            "--workload",
            "database",
            "--cuts",
            "20",
            "--json",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let objs = json_lines(&out);
    assert_eq!(objs.len(), 1);
    let o = &objs[0];
    assert_eq!(o["preset"], "nand-128m");
    assert_eq!(o["target"], "ftl");
    assert_eq!(o["kind"], "power-cut");
    assert_eq!(o["workload"], "database");
    assert_eq!(o["cases"], 20);
    assert_eq!(o["violations"], 0);
    assert_eq!(o["reproducers"].as_array().map(Vec::len), Some(0));
    let cuts = o["cuts"].as_u64().unwrap();
    let remounts = o["remounts"].as_u64().unwrap();
    // Each case cuts once or twice and remounts two or three times, reading every sector.
    assert!((20..=40).contains(&cuts), "{o}");
    assert!(o["idle_cuts"].as_u64().unwrap() <= cuts, "{o}");
    assert!((40..=60).contains(&remounts), "{o}");
    let sector_bytes = o["sectors"].as_u64().unwrap() * o["sector_size"].as_u64().unwrap();
    assert_eq!(
        o["bytes_verified"].as_u64().unwrap(),
        remounts * sector_bytes
    );
}

/// NVRAM beside NAND as one volume: its geometry is listed, its cuts fall on both parts and
/// the total says how many fell on the NVRAM.
#[test]
fn torture_runs_nvram_beside_nand_as_one_volume() {
    let out = flashfs()
        .args([
            "torture",
            "--preset",
            "nand-128m+fram-8m",
            "--fault",
            "power-cut",
            "--workload",
            "mixed",
            "--workload",
            "fs-database",
            "--cuts",
            "10",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    for target in ["ftl", "fs"] {
        let geometry = format!("nand-128m+fram-8m {target}: NAND 48 blocks x 16 pages x 512 B");
        assert!(text.contains(&geometry), "{text}");
    }
    assert!(text.contains("beside NVRAM"), "{text}");
    let total = text.lines().find(|l| l.starts_with("total:")).unwrap();
    assert!(
        total.contains("20 cases") && total.contains("0 violations"),
        "{total}"
    );
    // "(…, N on an NVRAM beside the flash)": some of the cuts, not all.
    let cuts: u64 = total["total: 20 cases, ".len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let nvram: u64 = total
        .split(" on an NVRAM beside the flash")
        .next()
        .and_then(|l| l.rsplit(' ').next())
        .unwrap()
        .parse()
        .unwrap();
    assert!(cuts >= 20 && nvram > 0 && nvram < cuts, "{total}");
}

#[test]
fn torture_refuses_bad_options_in_one_line() {
    let line = fails(
        flashfs().args(["torture", "--preset", "fram-8m", "--fault", "at-rest"]),
        1,
    );
    assert!(line.contains("no damage at rest on NVRAM"), "{line}");
    // A volume on two devices the torture does not know: the known ones are named.
    let line = fails(
        flashfs().args(["torture", "--preset", "nand-1g+fram-8m"]),
        1,
    );
    assert!(line.contains("nand-128m+fram-8m"), "{line}");
    fails(flashfs().args(["torture", "--torn"]), 2);
    fails(flashfs().args(["torture", "--workload", "nope"]), 2);
    fails(flashfs().args(["torture", "--fault", "nope"]), 2);
    // NOR has no ECC: a run of nothing but ECC faults on NOR has nothing to do.
    let line = fails(
        flashfs().args(["torture", "--preset", "w25q64jv", "--fault", "ecc-within"]),
        1,
    );
    assert!(
        line.contains("does not apply") || line.contains("no selected fault"),
        "{line}"
    );
}

#[test]
fn torture_reports_each_fault_kind_in_its_own_row_with_media_counts() {
    let out = flashfs()
        .args([
            "torture",
            "--preset",
            "nand-128m",
            "--preset",
            "w25q64jv",
            "--fault",
            "mount-cut",
            "--fault",
            "ecc-within",
            "--fault",
            "ecc-beyond",
            "--fault",
            "wear-out",
            "--fault",
            "bad-blocks",
            "--workload",
            "kawaguchi-random",
            "--cuts",
            "5",
            "--ops",
            "80",
            "--json",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let objs = json_lines(&out);
    let rows: Vec<(String, String)> = objs
        .iter()
        .map(|o| {
            (
                o["preset"].as_str().unwrap().to_string(),
                o["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    // NOR keeps only the kinds that apply to it.
    let want = [
        ("nand-128m", "mount-cut"),
        ("nand-128m", "ecc-within"),
        ("nand-128m", "ecc-beyond"),
        ("nand-128m", "wear-out"),
        ("nand-128m", "bad-blocks"),
        ("w25q64jv", "mount-cut"),
        ("w25q64jv", "wear-out"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(p, k)| (p.to_string(), k.to_string()))
        .collect();
    assert_eq!(rows, want);
    for o in &objs {
        assert_eq!(o["workload"], "kawaguchi-random", "{o}");
        assert_eq!(o["cases"], 5, "{o}");
        assert_eq!(o["violations"], 0, "{o}");
        for field in [
            "cuts",
            "remounts",
            "bytes_verified",
            "media_errors",
            "rolled_back",
            "typed_errors",
            "mount_errors",
        ] {
            assert!(o[field].is_u64(), "{field} in {o}");
        }
        assert!(o["bytes_verified"].as_u64().unwrap() > 0, "{o}");
        if o["kind"] == "ecc-within" {
            assert_eq!(o["media_errors"], 0, "{o}");
            assert_eq!(o["typed_errors"], 0, "{o}");
        }
    }
}

#[test]
fn torture_violations_print_a_reproducer_that_replays_the_case() {
    // Silent program failures lose data the block device acknowledged when nothing reads
    // programs back: the torture says so.
    let out = flashfs()
        .args([
            "torture",
            "--preset",
            "nand-128m",
            "--fault",
            "silent-unverified",
            "--workload",
            "append-log",
            "--cuts",
            "10",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let line = stdout
        .lines()
        .find(|l| l.starts_with("violation: nand-128m ftl silent-unverified append-log seed "))
        .unwrap_or_else(|| panic!("no violation line: {stdout}"));
    let repro = stdout
        .lines()
        .find_map(|l| l.strip_prefix("  reproduce: "))
        .unwrap();
    assert!(
        repro.starts_with(
            "flashfs torture --preset nand-128m --target ftl --fault silent-unverified --workload append-log --seed "
        ),
        "{repro}"
    );
    // The reproducer replays exactly that case, with the same violation.
    let args: Vec<&str> = repro.split_whitespace().skip(1).collect();
    let again = flashfs().args(&args).output().unwrap();
    assert_eq!(again.status.code(), Some(1));
    let again = String::from_utf8(again.stdout).unwrap();
    assert!(again.contains(line), "{line}\n{again}");
    assert!(again.contains(" 1 "), "one case: {again}");
}
