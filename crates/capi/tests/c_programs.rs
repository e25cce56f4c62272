//! The C programs, compiled with the system's C compiler (`cc`, or `$CC`) against the
//! header and the static library, and run: the example, and the power-cut test on a NOR
//! and a NAND RAM flash written in C.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The static library this test was built with: `cargo test` leaves it beside the test.
fn library() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    let lib = exe.with_file_name("libflashfs_c.a");
    assert!(lib.exists(), "{} is missing", lib.display());
    lib
}

/// Compiles `sources` (relative to the crate) into a program; panics with the compiler's
/// output if it fails.
fn compile(name: &str, sources: &[&str]) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let mut cmd = Command::new(&cc);
    cmd.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1"])
        .arg("-I")
        .arg(dir.join("include"))
        .arg("-I")
        .arg(dir.join("tests/c"));
    for s in sources {
        cmd.arg(dir.join(s));
    }
    // What a Rust static library needs of the system's libraries on Linux.
    cmd.arg(library())
        .args([
            "-lgcc_s",
            "-lutil",
            "-lrt",
            "-lpthread",
            "-lm",
            "-ldl",
            "-lc",
        ])
        .arg("-o")
        .arg(&out);
    let r = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cc}: {e} (scripts/test-all installs gcc)"));
    assert!(
        r.status.success(),
        "{cc} failed on {sources:?}:\n{}",
        String::from_utf8_lossy(&r.stderr)
    );
    out
}

/// Runs a program; returns its standard output, panicking with both outputs if it fails.
fn run(program: &Path, args: &[&str]) -> String {
    run_with(program, args, &[])
}

/// [`run`] with environment variables set.
fn run_with(program: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let r = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run the program");
    let (out, err) = (
        String::from_utf8_lossy(&r.stdout),
        String::from_utf8_lossy(&r.stderr),
    );
    assert!(
        r.status.success(),
        "{} {args:?} failed:\n{out}{err}",
        program.display()
    );
    // A panic inside the library is caught at the boundary and returned as an error, which
    // the programs may take for the power cut's: its message on stderr is the tell.
    assert!(
        !err.contains("panicked"),
        "{} {args:?}: the library panicked:\n{err}",
        program.display()
    );
    out.into_owned()
}

#[test]
fn the_example_formats_writes_remounts_and_lists() {
    let out = run(&compile("hello", &["examples/hello.c"]), &[]);
    assert!(out.contains("/last holds records 2 to 5"), "{out}");
    assert!(out.contains("/cfg/net 8"), "{out}");
    assert!(out.contains("/cfg/sensor.log 120"), "{out}");
    assert!(out.contains("first line: t=0 temp=20"), "{out}");
}

/// Runs the power-cut program on `medium`: it cuts the power at every callback of its
/// workload and says how many.
fn power_cuts(medium: &str) {
    power_cuts_with(medium, &format!("powercut-{medium}"), &[]);
}

/// [`power_cuts`] with environment variables set for the program, compiled as `name` (each
/// test its own: tests run side by side).
fn power_cuts_with(medium: &str, name: &str, env: &[(&str, &str)]) {
    let program = compile(name, &["tests/c/powercut.c", "tests/c/ramflash.c"]);
    let out = run_with(&program, &[medium], env);
    println!("{out}");
    let cuts: u64 = out
        .split_whitespace()
        .skip_while(|w| !w.ends_with(';'))
        .nth(1)
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no count of cuts in {out:?}"));
    assert!(cuts > 500, "only {cuts} cuts: {out}");
}

#[test]
fn a_power_cut_at_every_callback_of_a_nor_workload_loses_nothing_acknowledged() {
    power_cuts("nor");
}

#[test]
fn a_power_cut_at_every_callback_of_a_nand_workload_loses_nothing_acknowledged() {
    power_cuts("nand");
}

/// The same on NOR with every cache and buffer shared out of an 8 KiB RAM budget
/// (`flashfs_config::ram_budget`).
#[test]
fn a_power_cut_at_every_callback_under_a_ram_budget_loses_nothing_acknowledged() {
    power_cuts_with(
        "nor",
        "powercut-nor-budget",
        &[("POWERCUT_RAM_BUDGET", "8192")],
    );
}
