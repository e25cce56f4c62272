//! `bench frash --quick`: every row there, with the fields the JSON promises, and the FRASH
//! volume's mount after an unmount reading the NVRAM alone.

use flashfs_bench::frash::{run_frash, table, FrashOptions, FrashRow};

fn quick() -> (FrashOptions, Vec<FrashRow>) {
    let opts = FrashOptions::quick();
    let rows = run_frash(&opts, &mut |_, _, _| {}).unwrap();
    (opts, rows)
}

#[test]
fn the_quick_run_has_every_row_and_the_frash_mount_reads_no_nand() {
    let (opts, rows) = quick();
    let configs = ["nand-scan", "nand-checkpoint", "frash"];

    // Mount: every configuration, partition, file size, step and ending.
    for c in configs {
        for &mib in &opts.partitions_mib {
            for &kib in &opts.file_kib {
                for full in [false, true] {
                    for ending in ["clean", "cut"] {
                        let n = rows
                            .iter()
                            .filter(|r| {
                                r.experiment == "mount"
                                    && r.config == c
                                    && r.partition_mb.round() as u64 == mib
                                    && r.file_kb == kib as f64
                                    && r.full == Some(full)
                                    && r.ending == Some(ending)
                            })
                            .count();
                        assert_eq!(n, 1, "{c} {mib} MiB {kib} KiB full {full} {ending}");
                    }
                }
            }
        }
    }
    for r in rows.iter().filter(|r| r.experiment == "mount") {
        assert!(
            r.mount_ms > 0.0 && r.stored_mb > 0.0 && r.files > 0,
            "{r:?}"
        );
        assert!(r.ms_per_mb.is_some_and(|m| m > 0.0), "{r:?}");
        // The baseline scans; the others mount from a checkpoint.
        assert_eq!(r.restored, Some(r.config != "nand-scan"), "{r:?}");
        if r.full == Some(false) {
            assert!((r.stored_mb - opts.stored_mib as f64).abs() < 1e-9, "{r:?}");
        } else {
            // Full: 90% of what the NAND alone holds with checkpoints; without them, and
            // with the NVRAM beside it, the volume holds more.
            let p = r.fill_pct.unwrap();
            match r.config {
                "nand-checkpoint" => assert!((p - 90.0).abs() < 1.0, "{r:?}"),
                "nand-scan" => assert!(p > 80.0 && p < 90.0, "{r:?}"),
                _ => assert!(p > 20.0 && p < 90.0, "{r:?}"),
            }
        }
        if r.config == "frash" {
            // After an unmount the closed root describes the log: the mount reads the
            // NVRAM and not one NAND page.
            assert!(r.mount_nvram_bytes.is_some_and(|b| b > 0), "{r:?}");
            if r.ending == Some("clean") {
                assert_eq!(r.mount_nand_reads, Some(0), "{r:?}");
            }
            assert!(r.nvram_live_bytes.is_some_and(|b| b > 0), "{r:?}");
            assert!(r.nvram_bytes_per_file.is_some_and(|b| b > 0.0), "{r:?}");
        } else {
            assert!(r.mount_nand_reads.is_some_and(|n| n > 0), "{r:?}");
            assert_eq!(r.mount_nvram_bytes, Some(0), "{r:?}");
            assert_eq!(r.nvram_live_bytes, None, "{r:?}");
        }
    }
    // The scan reads every segment: more pages than a mount from the checkpoint.
    for r in rows
        .iter()
        .filter(|r| r.experiment == "mount" && r.config == "nand-checkpoint")
    {
        let scan = rows
            .iter()
            .find(|s| {
                s.experiment == "mount"
                    && s.config == "nand-scan"
                    && s.blocks == r.blocks
                    && s.file_kb == r.file_kb
                    && s.full == r.full
                    && s.ending == r.ending
            })
            .unwrap();
        assert!(
            r.mount_nand_reads < scan.mount_nand_reads,
            "{r:?} against {scan:?}"
        );
        // Every configuration holds the same data at each step.
        let frash = rows
            .iter()
            .find(|f| {
                f.experiment == "mount"
                    && f.config == "frash"
                    && f.blocks == r.blocks
                    && f.file_kb == r.file_kb
                    && f.full == r.full
                    && f.ending == r.ending
            })
            .unwrap();
        assert_eq!(r.stored_mb, scan.stored_mb, "{r:?} against {scan:?}");
        assert_eq!(r.stored_mb, frash.stored_mb, "{r:?} against {frash:?}");
    }

    // Ops: every configuration, op, size and sync setting.
    for c in configs {
        for &bytes in &opts.ops_small_bytes {
            for sync in ["each", "end"] {
                let ops: &[&str] = if bytes == 0 {
                    &["create", "delete"]
                } else {
                    &["create", "write", "read", "delete"]
                };
                for op in ops {
                    let r = rows
                        .iter()
                        .find(|r| {
                            r.experiment == "ops"
                                && r.config == c
                                && r.op == Some(op)
                                && r.sync == Some(sync)
                                && r.files == opts.ops_files
                                && r.file_kb == bytes as f64 / 1024.0
                        })
                        .unwrap_or_else(|| panic!("no {c} {op} {bytes} B sync {sync}"));
                    assert!(r.ops_per_s.is_some_and(|v| v > 0.0), "{r:?}");
                    assert_eq!(r.kbps.is_some(), bytes > 0, "{r:?}");
                    assert!(r.mount_ms > 0.0, "{r:?}");
                }
            }
        }
        for op in ["write", "read"] {
            let r = rows
                .iter()
                .find(|r| {
                    r.experiment == "ops" && r.config == c && r.op == Some(op) && r.files == 1
                })
                .unwrap_or_else(|| panic!("no {c} large {op}"));
            assert_eq!(r.file_kb, opts.ops_large_kib as f64, "{r:?}");
            assert!(r.kbps.is_some_and(|v| v > 0.0), "{r:?}");
        }
    }
    for r in rows.iter().filter(|r| r.experiment == "ops") {
        // Data pages go to the NAND but on frash, whose NVRAM takes the metadata and the
        // quick run's small files whole (each file's first 16 KiB: the large file's first
        // 16 KiB of 10 MiB).
        if r.op == Some("write") {
            let nand = r.nand_programs_per_op.unwrap();
            if r.config == "frash" && r.files > 1 {
                assert_eq!(nand, 0.0, "{r:?}");
            } else {
                assert!(nand > 0.0, "{r:?}");
            }
        }
        if r.config == "frash" {
            assert_eq!(r.nvram_file_bytes, Some(16 << 10), "{r:?}");
            if r.op != Some("read") {
                assert!(
                    r.nvram_bytes_written_per_op.is_some_and(|b| b > 0.0),
                    "{r:?}"
                );
            }
        } else {
            assert_eq!(r.nvram_file_bytes, None, "{r:?}");
        }
    }

    // The JSON rows carry the fields the issue names.
    for r in &rows {
        let v = serde_json::to_value(r).unwrap();
        for key in [
            "experiment",
            "config",
            "partition_mb",
            "stored_mb",
            "file_kb",
            "mount_ms",
        ] {
            assert!(v.get(key).is_some(), "{key} missing in {v}");
        }
        if r.experiment == "ops" {
            assert!(v.get("op").is_some(), "{v}");
            assert!(
                v.get("ops_per_s").is_some() || v.get("kbps").is_some(),
                "{v}"
            );
        }
    }

    // The table quotes the paper and judges the goals.
    let text = table::table(&opts, &rows, false);
    assert!(
        text.contains("YAFFS 8.11 ms/MB, FRASH 1.62 ms/MB"),
        "{text}"
    );
    assert!(text.contains("goals:"), "{text}");
    assert!(text.contains("frash mount <= 1 ms"), "{text}");
    assert!(text.contains("FRASH 5-10% slower than YAFFS"), "{text}");
}

/// `--nvram-file-bytes 0`: file data all on the NAND, metadata alone on the NVRAM.
#[test]
fn without_file_data_on_the_nvram_small_writes_program_the_nand() {
    let opts = FrashOptions {
        experiments: vec![flashfs_bench::frash::Experiment::Ops],
        configs: vec![flashfs_bench::frash::Config::Frash],
        nvram_file_bytes: Some(0),
        ..FrashOptions::quick()
    };
    let rows = run_frash(&opts, &mut |_, _, _| {}).unwrap();
    let writes: Vec<&FrashRow> = rows.iter().filter(|r| r.op == Some("write")).collect();
    assert!(!writes.is_empty());
    for r in writes {
        assert_eq!(r.nvram_file_bytes, Some(0), "{r:?}");
        assert!(r.nand_programs_per_op.is_some_and(|p| p > 0.0), "{r:?}");
    }
}
