//! The toolchain that builds for Thumb: a rustc with the library's source (to build `core`
//! and `alloc` for the target: `-Z build-std`, allowed on a stable compiler by
//! `RUSTC_BOOTSTRAP=1`) and LLVM's linker.
//!
//! By default Debian's (`rustc-web`, `cargo-web`, `rust-web-src`, `lld`), whose rustc is at
//! /usr/bin/rustc; `FLASHFS_THUMB_RUSTC` and `FLASHFS_THUMB_CARGO` name others (a rustup
//! toolchain with the `rust-src` component, say).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::{need, output_of};

/// The linker the firmware's `.cargo/config.toml` names.
const LINKER: &str = "ld.lld";

/// Where the Thumb toolchain is.
#[derive(Debug)]
pub struct Toolchain {
    rustc: PathBuf,
    cargo: PathBuf,
}

fn from_env(var: &str, default: &str) -> PathBuf {
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(default))
}

/// Whether `name` is an executable file in a directory of `PATH`.
fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
        .unwrap_or(false)
}

impl Toolchain {
    /// Finds the toolchain and checks it has what the build needs.
    pub fn find() -> Result<Toolchain> {
        let rustc = from_env("FLASHFS_THUMB_RUSTC", "/usr/bin/rustc");
        let cargo = from_env("FLASHFS_THUMB_CARGO", "/usr/bin/cargo");
        need(&rustc, "rustc")?;
        need(&cargo, "cargo")?;
        let sysroot = output_of(Command::new(&rustc).args(["--print", "sysroot"]))?;
        let core = Path::new(&sysroot).join("lib/rustlib/src/rust/library/core/Cargo.toml");
        need(&core, "library source (rust-web-src)")?;
        if !on_path(LINKER) {
            bail!(
                "the Thumb toolchain is missing: no {LINKER} on PATH (run scripts/setup-thumb, \
                 or as root: apt-get install lld)"
            );
        }
        Ok(Toolchain { rustc, cargo })
    }

    /// Builds the firmware in `dir` for `target` with `features`, and returns the ELF, kept
    /// as `target/size/<target>-<name>.elf` (the builds share cargo's output directory).
    pub fn build_firmware(
        &self,
        dir: &Path,
        target: &str,
        name: &str,
        features: &str,
    ) -> Result<PathBuf> {
        let mut args = vec!["-p", "flashfs-firmware"];
        if !features.is_empty() {
            args.extend(["--features", features]);
        }
        let release = self.cargo_build(dir, target, name, &args)?;
        keep(dir, &release.join("flashfs-firmware"), target, name)
    }

    /// Builds the C library (`firmware/clib`, the C API with the firmware's heap) for
    /// `target`, and links what its API reaches into an ELF as a firmware's link would
    /// (`--gc-sections`, every `flashfs_` function kept, the C library's own functions left
    /// to the firmware): kept as `target/size/<target>-c-library.elf`.
    pub fn build_c_library(&self, dir: &Path, target: &str) -> Result<PathBuf> {
        let name = "c-library";
        let release = self.cargo_build(dir, target, name, &["-p", "flashfs-clib"])?;
        let archive = release.join("libflashfs_clib.a");
        let bytes =
            std::fs::read(&archive).with_context(|| format!("reading {}", archive.display()))?;
        let api = crate::elf::api_symbols(&bytes, "flashfs_")
            .with_context(|| format!("reading the symbols of {}", archive.display()))?;
        if api.is_empty() {
            bail!("{} exports no flashfs_ function", archive.display());
        }
        let linked = release.join("flashfs-c-library.elf");
        let mut cmd = Command::new(LINKER);
        cmd.args([
            "-m",
            "armelf",
            "--gc-sections",
            "--unresolved-symbols=ignore-all",
        ])
        .args(["-e", "flashfs_mount", "-o"])
        .arg(&linked);
        for f in &api {
            cmd.args(["-u", f]);
        }
        cmd.arg(&archive);
        output_of(&mut cmd)?;
        keep(dir, &linked, target, name)
    }

    /// Runs the Thumb cargo in `dir` for `target` with `args`; returns its release directory.
    fn cargo_build(&self, dir: &Path, target: &str, name: &str, args: &[&str]) -> Result<PathBuf> {
        let target_dir = dir.join("target");
        let mut cmd = Command::new(&self.cargo);
        cmd.current_dir(dir)
            .args(["build", "--release", "--locked", "--target", target])
            .args(["-Z", "build-std=core,alloc"])
            // `core`'s and `alloc`'s algorithms (sorts above all) in their smaller forms, as a
            // firmware built for size wants them: 25 KB less text on thumbv7em.
            .args(["-Z", "build-std-features=optimize_for_size"])
            .arg("--target-dir")
            .arg(&target_dir)
            .args(args)
            .env("RUSTC_BOOTSTRAP", "1")
            .env("RUSTC", &self.rustc);
        // Settings of the cargo that runs this task, meant for the host build.
        for var in [
            "RUSTC_WRAPPER",
            "RUSTC_WORKSPACE_WRAPPER",
            "RUSTFLAGS",
            "CARGO_ENCODED_RUSTFLAGS",
            "CARGO_BUILD_TARGET",
            "CARGO_BUILD_RUSTFLAGS",
            "CARGO_TARGET_DIR",
            "CARGO_BUILD_TARGET_DIR",
            "RUSTUP_TOOLCHAIN",
        ] {
            cmd.env_remove(var);
        }
        let out = cmd
            .output()
            .with_context(|| format!("running {}", self.cargo.display()))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = err.lines().rev().take(40).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            bail!(
                "the firmware did not build for {target} ({name}):\n{}",
                tail.join("\n")
            );
        }
        Ok(target_dir.join(target).join("release"))
    }
}

/// Copies a built ELF to `target/size/<target>-<name>.elf`, where it stays between builds
/// that share cargo's output directory.
fn keep(dir: &Path, built: &Path, target: &str, name: &str) -> Result<PathBuf> {
    let keep = dir.join("target").join("size");
    std::fs::create_dir_all(&keep)?;
    let elf = keep.join(format!("{target}-{name}.elf"));
    std::fs::copy(built, &elf)
        .with_context(|| format!("copying {} to {}", built.display(), elf.display()))?;
    Ok(elf)
}
