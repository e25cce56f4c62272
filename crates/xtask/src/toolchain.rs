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
        let target_dir = dir.join("target");
        let mut cmd = Command::new(&self.cargo);
        cmd.current_dir(dir)
            .args(["build", "--release", "--locked", "--target", target])
            .args(["-Z", "build-std=core,alloc"])
            .arg("--target-dir")
            .arg(&target_dir)
            .env("RUSTC_BOOTSTRAP", "1")
            .env("RUSTC", &self.rustc);
        if !features.is_empty() {
            cmd.args(["--features", features]);
        }
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
        let built = target_dir
            .join(target)
            .join("release")
            .join("flashfs-firmware");
        let keep = target_dir.join("size");
        std::fs::create_dir_all(&keep)?;
        let elf = keep.join(format!("{target}-{name}.elf"));
        std::fs::copy(&built, &elf)
            .with_context(|| format!("copying {} to {}", built.display(), elf.display()))?;
        Ok(elf)
    }
}
