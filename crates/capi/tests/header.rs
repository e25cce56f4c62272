//! The checked-in header is what cbindgen generates from the source: an API change that
//! forgets the header fails here.
//!
//! `FLASHFS_BLESS=1 cargo test -p flashfs-capi --test header` writes it anew.

use std::path::Path;

#[test]
fn the_checked_in_header_is_the_one_the_source_generates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut generated);
    let path = dir.join("include/flashfs.h");
    if std::env::var_os("FLASHFS_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write the header");
        return;
    }
    let checked_in = std::fs::read(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "include/flashfs.h is stale: regenerate it with \
         FLASHFS_BLESS=1 cargo test -p flashfs-capi --test header"
    );
}
