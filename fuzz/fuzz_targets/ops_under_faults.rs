//! An operation sequence decoded from the fuzz input runs on the block device with a power
//! cut at a chosen device operation (and a fault of the medium or the recovery); after the
//! remounts every sector must hold what the torture model allows.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: flashfs_fuzz::Sequence| {
    if let Err(violation) = flashfs_fuzz::ops_under_faults(&input) {
        panic!("{violation}");
    }
});
