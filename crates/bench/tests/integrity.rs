//! `flashfs bench integrity` measures what it says: fsck and a scrub read back every live
//! byte of the same volume, and the scrub after bit errors were planted moves the segments
//! holding them, losing nothing.

use flashfs_bench::integrity::{run_integrity, IntegrityOptions};

#[test]
fn fsck_and_scrub_read_the_volume_and_the_worn_scrub_moves_segments() {
    let opts = IntegrityOptions {
        fill_percent: 10,
        worn_pages: 6,
        ..IntegrityOptions::quick()
    };
    let rows = run_integrity(&opts, &mut |_, _| {}).unwrap();
    let ops: Vec<&str> = rows.iter().map(|r| r.op).collect();
    assert_eq!(ops, ["fsck", "scrub", "scrub-worn"]);
    for r in &rows {
        assert_eq!(r.lost, 0, "{r:?}");
        assert!(r.stored_mib > 10.0 && r.files > 20, "{r:?}");
        // Every stored byte is read: at least a page read per 2 KiB page of file data.
        assert!(r.page_reads as f64 >= r.stored_mib * 512.0, "{r:?}");
        assert!(r.device_ms > 0.0 && r.mib_per_s > 0.0, "{r:?}");
    }
    let (clean, worn) = (&rows[1], &rows[2]);
    assert_eq!((clean.corrected_bits, clean.refreshed), (0, 0), "{clean:?}");
    assert!(clean.slots as f64 >= clean.stored_mib * 512.0, "{clean:?}");
    // Each planted page is corrected where it is read; a live one's segment moves.
    assert!(worn.corrected_bits >= 1 && worn.refreshed >= 1, "{worn:?}");
    assert!(worn.refreshed <= 6, "{worn:?}");
}
