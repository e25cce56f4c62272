//! A device image built from the fuzz input (a small NOR or NAND part) is mounted as a block
//! device and every sector read: any outcome but a panic or a hang is acceptable.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    flashfs_fuzz::mount_image(data);
});
