//! Explicit transactions (TFFS §4.5–4.7): isolation by start order, the atomic-operation
//! rule, the bounded identifier window, concurrent creators in one directory, deletions and
//! renames inside transactions, aborts that undo everything, power cuts during a commit,
//! reads inside a transaction that cost what they cost outside, and interleaved
//! transactions (byte, name and record operations) against a serial run.

mod common;

use std::collections::BTreeMap;

use common::*;
use flash::NorSpec;
use flashfs::fs::{Ino, RecordFormat, RenameFlags, SetAttr, Tid, XattrFlags, ROOT_INO};
use flashfs::{Error, Fs, FsConfig, Segments};
use flashfs_bench::torture::SimSegments;
use proptest::prelude::*;

fn fresh() -> Fs<impl SimSegments> {
    Fs::format(nor(true), fs_config()).unwrap()
}

fn data(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| {
            (i as u32)
                .wrapping_mul(31)
                .wrapping_add(u32::from(seed) * 7) as u8
        })
        .collect()
}

fn file<D: Segments>(fs: &mut Fs<D>, dir: Ino, name: &[u8], content: &[u8]) -> Ino {
    let a = fs.create(dir, name, 0o644, 0, 0).unwrap();
    fs.write(a.ino, 0, content).unwrap();
    a.ino
}

fn content<D: Segments>(fs: &mut Fs<D>, ino: Ino) -> flashfs::Result<Vec<u8>> {
    let size = fs.getattr(ino)?.inode.size;
    let mut buf = vec![0; size as usize];
    let n = fs.read(ino, 0, &mut buf)?;
    buf.truncate(n);
    Ok(buf)
}

fn clean<D: Segments>(fs: &mut Fs<D>) {
    assert_eq!(fs.transactions(), 0, "check with transactions open");
    let r = fs.check(false).unwrap();
    assert!(r.is_clean(), "fsck: {:?}", r.problems);
}

fn remount<D: Segments>(fs: Fs<D>) -> Fs<D> {
    Fs::mount(fs.unmount().unwrap(), fs_config()).unwrap()
}

#[test]
fn a_transaction_is_invisible_until_it_commits() {
    let mut fs = fresh();
    let f = file(&mut fs, ROOT_INO, b"f", b"old");
    fs.sync().unwrap();
    let observer = fs.begin().unwrap();
    let t = fs.begin().unwrap();
    let g = fs
        .in_tx(t, |fs| {
            fs.write(f, 0, b"new")?;
            let g = fs.create(ROOT_INO, b"g", 0o644, 0, 0)?.ino;
            fs.write(g, 0, &data(1, 5000))?;
            Ok(g)
        })
        .unwrap();
    // The transaction sees its own work.
    assert_eq!(fs.in_tx(t, |fs| content(fs, f)).unwrap(), b"new");
    assert_eq!(fs.in_tx(t, |fs| content(fs, g)).unwrap(), data(1, 5000));
    // fsck counts its sectors as in use.
    let r = fs.check(false).unwrap();
    assert!(
        r.is_clean(),
        "fsck with a transaction open: {:?}",
        r.problems
    );
    // An earlier transaction reads the version before it.
    assert_eq!(fs.in_tx(observer, |fs| content(fs, f)).unwrap(), b"old");
    assert_eq!(
        fs.in_tx(observer, |fs| fs.lookup(ROOT_INO, b"g")).err(),
        Some(Error::NotFound)
    );
    fs.commit_tx(observer).unwrap();
    // Nothing of it is on flash before its commit.
    let dev = fs.into_device();
    let mut fs = Fs::mount(dev.clone(), fs_config()).unwrap();
    assert_eq!(content(&mut fs, f).unwrap(), b"old");
    assert_eq!(fs.lookup(ROOT_INO, b"g").err(), Some(Error::NotFound));
    clean(&mut fs);
}

#[test]
fn committed_transactions_survive_a_remount() {
    let mut fs = fresh();
    let t = fs.begin().unwrap();
    fs.in_tx(t, |fs| {
        let d = fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0)?.ino;
        let f = fs.create(d, b"f", 0o644, 0, 0)?.ino;
        fs.write(f, 0, &data(2, 20_000))?;
        fs.setxattr(f, b"user.k", b"v", XattrFlags::default())?;
        Ok(())
    })
    .unwrap();
    assert_eq!(fs.transactions(), 1);
    fs.commit_tx(t).unwrap();
    assert_eq!(fs.transactions(), 0);
    // Durable at once: no sync before the power goes.
    let dev = fs.into_device();
    let mut fs = Fs::mount(dev, fs_config()).unwrap();
    let d = fs.lookup(ROOT_INO, b"d").unwrap().ino;
    let f = fs.lookup(d, b"f").unwrap().ino;
    assert_eq!(content(&mut fs, f).unwrap(), data(2, 20_000));
    assert_eq!(fs.getxattr(f, b"user.k").unwrap(), b"v");
    assert_eq!(fs.getattr(ROOT_INO).unwrap().inode.nlink, 3);
    clean(&mut fs);
}

#[test]
fn reading_what_a_later_transaction_committed_aborts() {
    let mut fs = fresh();
    let f = file(&mut fs, ROOT_INO, b"f", b"one");
    let early = fs.begin().unwrap();
    let late = fs.begin().unwrap();
    fs.in_tx(late, |fs| fs.write(f, 0, b"two")).unwrap();
    // Still open: the earlier transaction reads the version before it.
    assert_eq!(fs.in_tx(early, |fs| content(fs, f)).unwrap(), b"one");
    fs.commit_tx(late).unwrap();
    // Committed by a later transaction: the earlier one cannot see it, nor not see it.
    assert_eq!(
        fs.in_tx(early, |fs| content(fs, f)).err(),
        Some(Error::Conflict)
    );
    assert_eq!(Error::Conflict.errno(), 35);
    // Aborted: every further use says so, until the caller ends it.
    assert_eq!(
        fs.in_tx(early, |fs| fs.getattr(ROOT_INO)).err(),
        Some(Error::Conflict)
    );
    assert_eq!(fs.commit_tx(early).err(), Some(Error::Conflict));
    assert_eq!(fs.abort(early).err(), Some(Error::BadHandle));
    assert_eq!(content(&mut fs, f).unwrap(), b"two");
    clean(&mut fs);
}

#[test]
fn reading_what_an_earlier_open_transaction_changed_aborts() {
    let mut fs = fresh();
    let f = file(&mut fs, ROOT_INO, b"f", b"one");
    let early = fs.begin().unwrap();
    let late = fs.begin().unwrap();
    fs.in_tx(early, |fs| fs.write(f, 0, b"two")).unwrap();
    assert_eq!(
        fs.in_tx(late, |fs| content(fs, f)).err(),
        Some(Error::Conflict)
    );
    fs.abort(late).unwrap();
    fs.commit_tx(early).unwrap();
    assert_eq!(content(&mut fs, f).unwrap(), b"two");
    clean(&mut fs);
}

#[test]
fn writing_what_a_later_transaction_read_aborts() {
    let mut fs = fresh();
    let f = file(&mut fs, ROOT_INO, b"f", b"one");
    let g = file(&mut fs, ROOT_INO, b"g", b"gee");
    let early = fs.begin().unwrap();
    let late = fs.begin().unwrap();
    assert_eq!(fs.in_tx(late, |fs| content(fs, f)).unwrap(), b"one");
    // The earlier transaction wrote something else first: all of it goes.
    fs.in_tx(early, |fs| fs.write(g, 0, b"GEE")).unwrap();
    assert_eq!(
        fs.in_tx(early, |fs| fs.write(f, 0, b"two")).err(),
        Some(Error::Conflict)
    );
    fs.abort(early).unwrap();
    fs.commit_tx(late).unwrap();
    assert_eq!(content(&mut fs, f).unwrap(), b"one");
    assert_eq!(content(&mut fs, g).unwrap(), b"gee");
    // A later reader that committed still counts.
    let early = fs.begin().unwrap();
    let late = fs.begin().unwrap();
    fs.in_tx(late, |fs| content(fs, f)).unwrap();
    fs.commit_tx(late).unwrap();
    assert_eq!(
        fs.in_tx(early, |fs| fs.write(f, 0, b"x")).err(),
        Some(Error::Conflict)
    );
    fs.abort(early).unwrap();
    clean(&mut fs);
}

#[test]
fn two_open_transactions_never_change_one_inode() {
    let mut fs = fresh();
    let f = file(&mut fs, ROOT_INO, b"f", b"one");
    let early = fs.begin().unwrap();
    let late = fs.begin().unwrap();
    fs.in_tx(late, |fs| fs.write(f, 0, b"late")).unwrap();
    // The earlier may read the version before the later's change, not change it too.
    assert_eq!(
        fs.in_tx(early, |fs| fs.write(f, 0, b"early")).err(),
        Some(Error::Conflict)
    );
    fs.abort(early).unwrap();
    fs.commit_tx(late).unwrap();
    assert_eq!(content(&mut fs, f).unwrap(), b"late");
    clean(&mut fs);
}

#[test]
fn atomic_operations_on_what_an_open_transaction_changed_are_refused() {
    let mut fs = fresh();
    let f = file(&mut fs, ROOT_INO, b"f", b"one");
    let g = file(&mut fs, ROOT_INO, b"g", b"gee");
    fs.sync().unwrap();
    let t = fs.begin().unwrap();
    fs.in_tx(t, |fs| {
        fs.write(f, 0, b"two")?;
        fs.create(ROOT_INO, b"new", 0o644, 0, 0)
    })
    .unwrap();
    assert_eq!(fs.write(f, 0, b"three").err(), Some(Error::Conflict));
    assert_eq!(content(&mut fs, f).err(), Some(Error::Conflict));
    assert_eq!(fs.unlink(ROOT_INO, b"f").err(), Some(Error::Conflict));
    assert_eq!(
        fs.create(ROOT_INO, b"new", 0o644, 0, 0).err(),
        Some(Error::Conflict)
    );
    // Listing the directory a transaction adds to would show its committed version only.
    assert_eq!(fs.readdir(ROOT_INO, 0, 100).err(), Some(Error::Conflict));
    // Untouched files and other names of the same directory are free to use.
    fs.write(g, 0, b"GEE").unwrap();
    let h = file(&mut fs, ROOT_INO, b"h", b"aitch");
    fs.commit_tx(t).unwrap();
    assert_eq!(content(&mut fs, f).unwrap(), b"two");
    assert_eq!(content(&mut fs, g).unwrap(), b"GEE");
    assert_eq!(content(&mut fs, h).unwrap(), b"aitch");
    fs.write(f, 0, b"three").unwrap();
    let (d, _) = dump(&mut fs).unwrap();
    assert!(d.contains_key(&b"/new"[..]));
    clean(&mut fs);
}

#[test]
fn the_identifier_window_fills_and_identifiers_are_reused() {
    let config = FsConfig {
        tid_window: 4,
        ..fs_config()
    };
    let mut fs = Fs::format(nor(true), config).unwrap();
    let f = file(&mut fs, ROOT_INO, b"f", b"one");
    let tids: Vec<Tid> = (0..4).map(|_| fs.begin().unwrap()).collect();
    assert_eq!(tids, [1, 2, 3, 4]);
    assert_eq!(fs.begin().err(), Some(Error::TooManyTransactions));
    assert_eq!(Error::TooManyTransactions.errno(), 11);
    fs.abort(1).unwrap();
    let again = fs.begin().unwrap();
    assert_eq!(again, 1);
    // Reused, but later than every other: order follows starts, not numbers.
    fs.in_tx(again, |fs| content(fs, f)).unwrap();
    assert_eq!(
        fs.in_tx(2, |fs| fs.write(f, 0, b"x")).err(),
        Some(Error::Conflict)
    );
    assert_eq!(fs.begin().err(), Some(Error::TooManyTransactions));
    for t in [2, 3, 4] {
        fs.abort(t).unwrap();
    }
    fs.in_tx(again, |fs| fs.write(f, 0, b"two")).unwrap();
    fs.commit_tx(again).unwrap();
    assert_eq!(fs.begin().unwrap(), 2);
    assert_eq!(fs.abort(99).err(), Some(Error::BadHandle));
    assert_eq!(fs.in_tx(99, |fs| fs.sync()).err(), Some(Error::BadHandle));
    fs.abort(2).unwrap();
    assert_eq!(content(&mut fs, f).unwrap(), b"two");
    clean(&mut fs);
}

/// Three transactions each create a file and a directory in one directory, and commit in
/// every order.
#[test]
fn creators_in_one_directory_commit_in_any_order() {
    let orders = [
        [0, 1, 2],
        [0, 2, 1],
        [1, 0, 2],
        [1, 2, 0],
        [2, 0, 1],
        [2, 1, 0],
    ];
    for order in orders {
        let mut fs = fresh();
        let d = fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap().ino;
        fs.sync().unwrap();
        let tids: Vec<Tid> = (0..3).map(|_| fs.begin().unwrap()).collect();
        for (i, &t) in tids.iter().enumerate() {
            fs.in_tx(t, |fs| {
                let f = fs.create(d, format!("f{i}").as_bytes(), 0o644, 0, 0)?.ino;
                fs.write(f, 0, &data(i as u8, 3000 + i))?;
                fs.mkdir(d, format!("sub{i}").as_bytes(), 0o755, 0, 0)?;
                Ok(())
            })
            .unwrap();
        }
        // Names another transaction holds are not visible, nor takeable.
        assert_eq!(
            fs.in_tx(tids[2], |fs| fs.lookup(d, b"f0")).err(),
            Some(Error::Conflict),
            "{order:?}"
        );
        // That aborted the third: it starts again, later than the others.
        fs.abort(tids[2]).unwrap();
        let tids = [tids[0], tids[1], fs.begin().unwrap()];
        fs.in_tx(tids[2], |fs| {
            let f = fs.create(d, b"f2", 0o644, 0, 0)?.ino;
            fs.write(f, 0, &data(2, 3002))?;
            fs.mkdir(d, b"sub2", 0o755, 0, 0)?;
            Ok(())
        })
        .unwrap();
        for i in order {
            fs.commit_tx(tids[i]).unwrap();
        }
        let mut fs = remount(fs);
        assert_eq!(fs.getattr(d).unwrap().inode.nlink, 5, "{order:?}");
        for i in 0..3u8 {
            let f = fs.lookup(d, format!("f{i}").as_bytes()).unwrap().ino;
            assert_eq!(content(&mut fs, f).unwrap(), data(i, 3000 + usize::from(i)));
            fs.lookup(d, format!("sub{i}").as_bytes()).unwrap();
        }
        let (listing, inodes) = dump(&mut fs).unwrap();
        assert_eq!(listing.len(), 8, "{order:?}");
        assert_eq!(fs.statfs().files, inodes as u64);
        clean(&mut fs);
    }
}

#[test]
fn deletions_and_renames_inside_transactions() {
    let mut fs = fresh();
    let a = file(&mut fs, ROOT_INO, b"a", &data(1, 9000));
    file(&mut fs, ROOT_INO, b"b", b"bee");
    let d = fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap().ino;
    let e = fs.mkdir(ROOT_INO, b"e", 0o755, 0, 0).unwrap().ino;
    file(&mut fs, d, b"inner", b"in");
    fs.sync().unwrap();
    let before = dump(&mut fs).unwrap().0;
    let free_before = fs.statfs().blocks_free;
    let observer = fs.begin().unwrap();
    let t = fs.begin().unwrap();
    fs.in_tx(t, |fs| {
        fs.unlink(ROOT_INO, b"b")?;
        fs.rename(ROOT_INO, b"a", d, b"moved", RenameFlags::default())?;
        fs.unlink(d, b"inner")?;
        fs.rename(ROOT_INO, b"d", e, b"d2", RenameFlags::default())?;
        fs.rmdir(ROOT_INO, b"e")
            .map(|_| ())
            .or_else(|err| match err {
                Error::NotEmpty => Ok(()),
                err => Err(err),
            })?;
        Ok(())
    })
    .unwrap();
    // Inside: the new names.
    fs.in_tx(t, |fs| {
        assert_eq!(fs.lookup(ROOT_INO, b"b").err(), Some(Error::NotFound));
        assert_eq!(fs.lookup(e, b"d2")?.ino, d);
        assert_eq!(fs.lookup(d, b"moved")?.ino, a);
        assert_eq!(fs.getattr(e)?.inode.nlink, 3);
        assert_eq!(fs.getattr(ROOT_INO)?.inode.nlink, 3);
        Ok(())
    })
    .unwrap();
    // An earlier transaction still sees the old ones.
    fs.in_tx(observer, |fs| {
        assert_eq!(fs.lookup(ROOT_INO, b"a")?.ino, a);
        assert_eq!(fs.lookup(d, b"inner")?.kind, flashfs::fs::FileType::Regular);
        Ok(())
    })
    .unwrap();
    fs.commit_tx(observer).unwrap();
    fs.commit_tx(t).unwrap();
    let after = dump(&mut fs).unwrap().0;
    assert_ne!(before, after);
    let paths: Vec<&[u8]> = after.keys().map(Vec::as_slice).collect();
    assert_eq!(paths, [&b"/"[..], b"/e", b"/e/d2", b"/e/d2/moved"]);
    assert!(fs.statfs().blocks_free > free_before - 2);
    let mut fs = remount(fs);
    assert_eq!(dump(&mut fs).unwrap().0, after);
    assert_eq!(content(&mut fs, a).unwrap(), data(1, 9000));
    // Then delete everything in one more transaction.
    let t = fs.begin().unwrap();
    fs.in_tx(t, |fs| {
        fs.unlink(d, b"moved")?;
        fs.rmdir(e, b"d2")?;
        fs.rmdir(ROOT_INO, b"e")
    })
    .unwrap();
    fs.commit_tx(t).unwrap();
    let mut fs = remount(fs);
    assert_eq!(dump(&mut fs).unwrap().0.len(), 1);
    assert_eq!(fs.statfs().files, 1);
    clean(&mut fs);
}

#[test]
fn an_abort_undoes_everything() {
    let mut fs = fresh();
    let a = file(&mut fs, ROOT_INO, b"a", &data(1, 8000));
    file(&mut fs, ROOT_INO, b"b", b"bee");
    fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap();
    fs.sync().unwrap();
    let before = dump(&mut fs).unwrap().0;
    let statfs = fs.statfs();
    let t = fs.begin().unwrap();
    fs.in_tx(t, |fs| {
        fs.write(a, 4096, &data(2, 10_000))?;
        fs.setattr(
            a,
            flashfs::fs::SetAttr {
                size: Some(100),
                ..Default::default()
            },
        )?;
        let c = fs.create(ROOT_INO, b"c", 0o644, 0, 0)?.ino;
        fs.write(c, 0, &data(3, 15_000))?;
        fs.setxattr(c, b"user.x", b"y", XattrFlags::default())?;
        fs.unlink(ROOT_INO, b"b")?;
        fs.rmdir(ROOT_INO, b"d")?;
        fs.mkdir(ROOT_INO, b"d2", 0o755, 0, 0)?;
        fs.rename(ROOT_INO, b"a", ROOT_INO, b"a2", RenameFlags::default())?;
        Ok(())
    })
    .unwrap();
    assert!(fs.statfs().blocks_free < statfs.blocks_free);
    fs.abort(t).unwrap();
    assert_eq!(fs.statfs(), statfs);
    assert_eq!(dump(&mut fs).unwrap().0, before);
    clean(&mut fs);
    let mut fs = remount(fs);
    assert_eq!(dump(&mut fs).unwrap().0, before);
    assert_eq!(fs.statfs(), statfs);
    clean(&mut fs);
}

/// Record and name operations of every kind, on the files of
/// [`record_and_name_operations_inside_transactions`].
fn record_changes<D: Segments>(fs: &mut Fs<D>, log: Ino, book: Ino) -> flashfs::Result<()> {
    for i in 1..=4u8 {
        fs.record_add(log, &[b'0' + i; 8])?;
    }
    fs.record_update(book, 0, b"alice, with a much longer entry")?;
    fs.record_remove_first(book)?;
    let n = fs.create_int(ROOT_INO, 7, 0o644, 0, 0)?.ino;
    fs.make_records(n, RecordFormat::fixed(4))?;
    fs.record_add(n, b"1234")?;
    fs.flat_create(b"a long flat name for a file", 0o644, 0, 0)?;
    Ok(())
}

#[test]
fn record_and_name_operations_inside_transactions() {
    let mut fs = fresh();
    let log = record_file(&mut fs, b"log", RecordFormat::cyclic(3, 8));
    let book = record_file(&mut fs, b"book", RecordFormat::variable());
    fs.record_add(log, b"record-0").unwrap();
    fs.record_add(book, b"alice").unwrap();
    fs.record_add(book, b"bob").unwrap();
    let other = file(&mut fs, ROOT_INO, b"other", b"untouched");
    fs.sync().unwrap();
    let before = dump(&mut fs).unwrap().0;

    // Everything a transaction does to records and names, then an abort: nothing happened.
    let t = fs.begin().unwrap();
    fs.in_tx(t, |fs| record_changes(fs, log, book)).unwrap();
    // Outside the transaction: the name it is creating is off limits until it ends, the
    // other names are not.
    assert_eq!(fs.lookup_int(ROOT_INO, 7).err(), Some(Error::Conflict));
    assert_eq!(fs.lookup(ROOT_INO, b"other").unwrap().ino, other);
    fs.abort(t).unwrap();
    assert_eq!(dump(&mut fs).unwrap().0, before);
    clean(&mut fs);

    // The same, committed: all of it, across a remount.
    let t = fs.begin().unwrap();
    fs.in_tx(t, |fs| record_changes(fs, log, book)).unwrap();
    fs.commit_tx(t).unwrap();
    let mut fs = remount(fs);
    // The cyclic file kept its newest three.
    let kept: Vec<Vec<u8>> = fs
        .record_list(log)
        .unwrap()
        .into_iter()
        .map(|(_, r)| r)
        .collect();
    assert_eq!(kept, vec![vec![b'2'; 8], vec![b'3'; 8], vec![b'4'; 8]]);
    let book_now: Vec<Vec<u8>> = fs
        .record_list(book)
        .unwrap()
        .into_iter()
        .map(|(_, r)| r)
        .collect();
    assert_eq!(book_now, vec![b"bob".to_vec()]);
    let n = fs.lookup_int(ROOT_INO, 7).unwrap().ino;
    assert_eq!(fs.record_read(n, 0).unwrap(), b"1234");
    fs.flat_lookup(b"a long flat name for a file").unwrap();
    clean(&mut fs);
}

#[test]
fn records_follow_the_isolation_rules() {
    let mut fs = fresh();
    let f = record_file(&mut fs, b"r", RecordFormat::fixed(4));
    fs.record_add(f, b"zero").unwrap();
    fs.sync().unwrap();
    let early = fs.begin().unwrap();
    let late = fs.begin().unwrap();
    fs.in_tx(late, |fs| fs.record_add(f, b"late").map(|_| ()))
        .unwrap();
    // An atomic record operation on a file an open transaction changed is refused.
    assert_eq!(fs.record_add(f, b"atom"), Err(Error::Conflict));
    // While the later one is open the earlier one reads the file as it was (it comes first
    // in the serial order).
    assert_eq!(fs.in_tx(early, |fs| fs.records(f)).unwrap(), 1);
    fs.commit_tx(late).unwrap();
    assert_eq!(fs.record_read(f, 1).unwrap(), b"late");
    // Once the later one committed, a read of the file it changed (a record's read checks
    // the file's record numbers) aborts the earlier one.
    assert_eq!(
        fs.in_tx(early, |fs| fs.record_read(f, 0)),
        Err(Error::Conflict)
    );
    // Undone; the identifier stays taken until the caller ends it.
    assert_eq!(fs.commit_tx(early), Err(Error::Conflict));
    assert_eq!(fs.transactions(), 0);
    assert_eq!(fs.records(f).unwrap(), 2);
    clean(&mut fs);
}

#[test]
fn a_conflict_undoes_the_whole_transaction() {
    let mut fs = fresh();
    let f = file(&mut fs, ROOT_INO, b"f", b"one");
    fs.sync().unwrap();
    let before = dump(&mut fs).unwrap().0;
    let statfs = fs.statfs();
    let early = fs.begin().unwrap();
    let late = fs.begin().unwrap();
    fs.in_tx(early, |fs| {
        let g = fs.create(ROOT_INO, b"g", 0o644, 0, 0)?.ino;
        fs.write(g, 0, &data(5, 15_000)).map(drop)
    })
    .unwrap();
    fs.in_tx(late, |fs| content(fs, f)).unwrap();
    assert_eq!(
        fs.in_tx(early, |fs| fs.write(f, 0, b"x")).err(),
        Some(Error::Conflict)
    );
    // Undone at once, though the identifier stays taken; its names are free again.
    assert_eq!(fs.statfs(), statfs);
    assert_eq!(fs.transactions(), 2);
    assert_eq!(fs.lookup(ROOT_INO, b"g").err(), Some(Error::NotFound));
    fs.commit_tx(late).unwrap();
    assert_eq!(fs.commit_tx(early).err(), Some(Error::Conflict));
    assert_eq!(dump(&mut fs).unwrap().0, before);
    clean(&mut fs);
}

#[test]
fn a_failed_operation_inside_a_transaction_is_undone_alone() {
    let mut fs = fresh();
    let t = fs.begin().unwrap();
    let x = fs
        .in_tx(t, |fs| {
            let x = fs.create(ROOT_INO, b"x", 0o644, 0, 0)?.ino;
            fs.write(x, 0, b"kept")?;
            Ok(x)
        })
        .unwrap();
    let statfs = fs.statfs();
    let r = fs.in_tx(t, |fs| {
        let y = fs.create(ROOT_INO, b"y", 0o644, 0, 0)?.ino;
        fs.write(y, 0, &data(1, 10_000))?;
        fs.write(x, 0, b"lost")?;
        fs.create(ROOT_INO, b"x", 0o644, 0, 0)
    });
    assert_eq!(r.err(), Some(Error::Exists));
    assert_eq!(fs.statfs(), statfs);
    fs.commit_tx(t).unwrap();
    let paths: Vec<Vec<u8>> = dump(&mut fs).unwrap().0.into_keys().collect();
    assert_eq!(paths, [b"/".to_vec(), b"/x".to_vec()]);
    assert_eq!(content(&mut fs, x).unwrap(), b"kept");
    clean(&mut fs);
}

/// Power cuts at every device operation of a transaction's commit: the volume mounts clean,
/// with none of the transaction or all of it.
fn cut_every_commit_op<D: SimSegments>(dev: D) {
    let config = fs_config();
    let mut fs = Fs::format(dev, config).unwrap();
    file(&mut fs, ROOT_INO, b"a", &data(1, 6000));
    file(&mut fs, ROOT_INO, b"b", b"bee");
    fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap();
    let base = fs.unmount().unwrap();
    let work = |fs: &mut Fs<D>| {
        let t = fs.begin().unwrap();
        fs.in_tx(t, |fs| {
            let a = fs.lookup(ROOT_INO, b"a")?.ino;
            fs.write(a, 1000, &data(2, 5000))?;
            let d = fs.lookup(ROOT_INO, b"d")?.ino;
            let c = fs.create(d, b"c", 0o644, 0, 0)?.ino;
            fs.write(c, 0, &data(3, 3000))?;
            fs.unlink(ROOT_INO, b"b")?;
            fs.rename(ROOT_INO, b"a", d, b"a", RenameFlags::default())
        })
        .unwrap();
        t
    };
    let ops = |fs: &mut Fs<D>| fs.ftl_mut().log_mut().device_mut().sim().ops();
    // The reference: states before and after, and the commit's device operations.
    let mut fs = Fs::mount(base.clone(), config).unwrap();
    let old = dump(&mut fs).unwrap().0;
    let t = work(&mut fs);
    let start = ops(&mut fs);
    fs.commit_tx(t).unwrap();
    let total = ops(&mut fs) - start;
    assert!(total >= 2, "{total} operations");
    let new = dump(&mut fs).unwrap().0;
    assert_ne!(old, new);
    let mut seen = [false; 2];
    for k in 0..=total {
        for torn in [false, true] {
            let mut fs = Fs::mount(base.clone(), config).unwrap();
            let t = work(&mut fs);
            fs.ftl_mut()
                .log_mut()
                .device_mut()
                .sim_mut()
                .schedule_cut(k, torn);
            let r = fs.commit_tx(t);
            let powered = fs.ftl_mut().log_mut().device_mut().sim().is_powered();
            assert_eq!(powered, k >= total, "cut {k} of {total}");
            if powered {
                r.unwrap();
            }
            let mut dev = fs.into_device();
            dev.sim_mut().set_faults(Default::default());
            dev.sim_mut().reboot();
            let what = format!("cut after {k} of {total} (torn {torn})");
            let mut fs = Fs::mount(dev, config).unwrap_or_else(|e| panic!("{what}: {e}"));
            let r = fs.check(false).unwrap();
            assert!(r.is_clean(), "{what}: {:?}", r.problems);
            let (got, inodes) = dump(&mut fs).unwrap();
            assert_eq!(fs.statfs().files, inodes as u64, "{what}");
            if got == old {
                seen[0] = true;
            } else if got == new {
                seen[1] = true;
            } else {
                panic!("{what}: neither before nor after:\n{}", show(&got));
            }
            if powered {
                assert_eq!(got, new, "{what}: acknowledged but lost");
            }
        }
    }
    assert_eq!(seen, [true, true]);
}

#[test]
fn power_cuts_during_a_commit_on_nor() {
    cut_every_commit_op(nor(false));
}

#[test]
fn power_cuts_during_a_commit_on_reprogrammable_nor() {
    cut_every_commit_op(nor(true));
}

#[test]
fn power_cuts_during_a_commit_on_nand() {
    cut_every_commit_op(nand());
}

/// Device reads of `f`, the node caches dropped first.
fn reads_of<D: SimSegments, T>(fs: &mut Fs<D>, f: impl FnOnce(&mut Fs<D>) -> T) -> (u64, T) {
    fs.drop_caches();
    let before = fs.ftl().log().device().sim().stats().reads;
    let out = f(fs);
    (fs.ftl().log().device().sim().stats().reads - before, out)
}

/// A NOR part of 1 MiB.
fn large() -> Fs<impl SimSegments> {
    let spec = NorSpec {
        units: 128,
        ..nor_spec(true)
    };
    Fs::format(nor_of(spec), fs_config()).unwrap()
}

#[test]
fn a_read_inside_a_transaction_costs_what_it_costs_outside() {
    // A file of records in a few hundred append blocks: a few hundred extents, many
    // leaves of them. Inside a transaction, finding a record's block used to walk every
    // extent from the file's first (or after the block) to merge them with the
    // transaction's changes.
    let mut fs = large();
    let r = record_file(&mut fs, b"calls", RecordFormat::variable());
    fs.sync().unwrap();
    for i in 0..600u32 {
        fs.record_add(r, &data(i as u8, 200)).unwrap();
        if i % 2 == 1 {
            fs.sync().unwrap();
        }
    }
    // Written out, so that dropping the caches leaves every node on flash.
    fs.checkpoint().unwrap();
    let blocks = fs.getattr(r).unwrap().inode.blocks;
    assert!(blocks >= 230, "{blocks} append blocks");
    let height = fs.index_height().unwrap() as u64;
    for n in [0, 300, 599] {
        let (outside, want) = reads_of(&mut fs, |fs| fs.record_read(r, n).unwrap());
        let tid = fs.begin().unwrap();
        // The transaction's own change to the file: its reads merge the overlay too.
        fs.in_tx(tid, |fs| fs.record_update(r, 1, b"changed"))
            .unwrap();
        let (inside, got) = reads_of(&mut fs, |fs| fs.in_tx(tid, |fs| fs.record_read(r, n)));
        fs.abort(tid).unwrap();
        assert_eq!(got.unwrap(), want, "record {n}");
        assert!(
            inside <= outside + height,
            "record {n}: {inside} reads inside a transaction, {outside} outside (height {height})"
        );
    }
}

#[test]
fn a_listing_inside_a_transaction_reads_only_what_it_returns() {
    // Listing the first names of a large directory used to merge the whole rest of it
    // with the transaction's changes before returning any.
    let mut fs = large();
    for i in 0..1500 {
        fs.mknod(ROOT_INO, format!("f{i}").as_bytes(), 0o100644, 0, 0, 0)
            .unwrap();
    }
    fs.checkpoint().unwrap();
    let height = fs.index_height().unwrap() as u64;
    let (outside, want) = reads_of(&mut fs, |fs| fs.readdir(ROOT_INO, 0, 8).unwrap());
    let tid = fs.begin().unwrap();
    fs.in_tx(tid, |fs| fs.mknod(ROOT_INO, b"new", 0o100644, 0, 0, 0))
        .unwrap();
    let (inside, got) = reads_of(&mut fs, |fs| fs.in_tx(tid, |fs| fs.readdir(ROOT_INO, 0, 8)));
    fs.abort(tid).unwrap();
    let names = |l: &[flashfs::fs::DirEntry]| l.iter().map(|e| e.name.clone()).collect::<Vec<_>>();
    let got = got.unwrap();
    assert_eq!(got.len(), want.len());
    assert!(names(&got)
        .iter()
        .all(|n| names(&want).contains(n) || n == b"new"));
    assert!(
        inside <= outside + height,
        "{inside} reads inside a transaction, {outside} outside (height {height})"
    );
}

// Interleaved transactions against a serial run of the committed ones in start order.

const NAMES: [&[u8]; 4] = [b"a", b"b", b"c", b"d"];

#[derive(Debug, Clone)]
enum Op {
    Read(usize),
    Write(usize, u16, u16, u8),
    /// Sets a file's size.
    Truncate(usize, u16),
    Create(usize),
    Unlink(usize),
    Rename(usize, usize),
    List,
    /// Adds a record of `len` bytes to the record file.
    RecordAdd(u16, u8),
    /// Reads the record file's record `k` (counting from its oldest, modulo its count).
    RecordRead(u16),
    /// Updates record `k` as `RecordRead` counts, to `len` bytes.
    RecordUpdate(u16, u16, u8),
    /// Removes the record file's oldest record.
    RecordRemoveFirst,
}

#[derive(Debug, Clone)]
enum Step {
    /// In slot `s`: begin if empty, else run the operation.
    Run(usize, Op),
    Commit(usize),
    Abort(usize),
}

/// What an operation returned: data, or an errno.
type Outcome = Result<Vec<u8>, i32>;

/// A transaction's operations and what they returned.
type Log = Vec<(Op, Outcome)>;

fn run_op<D: Segments>(fs: &mut Fs<D>, op: &Op) -> flashfs::Result<Vec<u8>> {
    match *op {
        Op::Read(n) => {
            let ino = fs.lookup(ROOT_INO, NAMES[n])?.ino;
            content(fs, ino)
        }
        Op::Write(n, off, len, seed) => {
            let ino = fs.lookup(ROOT_INO, NAMES[n])?.ino;
            fs.write(ino, u64::from(off), &data(seed, usize::from(len)))?;
            Ok(Vec::new())
        }
        Op::Truncate(n, size) => {
            let ino = fs.lookup(ROOT_INO, NAMES[n])?.ino;
            let set = SetAttr {
                size: Some(u64::from(size)),
                ..SetAttr::default()
            };
            fs.setattr(ino, set).map(|_| Vec::new())
        }
        Op::Create(n) => fs
            .create(ROOT_INO, NAMES[n], 0o644, 0, 0)
            .map(|_| Vec::new()),
        Op::Unlink(n) => fs.unlink(ROOT_INO, NAMES[n]).map(|_| Vec::new()),
        Op::Rename(a, b) => fs
            .rename(
                ROOT_INO,
                NAMES[a],
                ROOT_INO,
                NAMES[b],
                RenameFlags::default(),
            )
            .map(|_| Vec::new()),
        Op::List => {
            let mut names: Vec<Vec<u8>> = fs
                .readdir(ROOT_INO, 0, 100)?
                .into_iter()
                .map(|e| e.name)
                .filter(|n| n != b"." && n != b"..")
                .collect();
            names.sort();
            Ok(names.concat())
        }
        Op::RecordAdd(len, seed) => {
            let ino = fs.lookup(ROOT_INO, RECORDS)?.ino;
            fs.record_add(ino, &data(seed, usize::from(len)))
                .map(|n| n.to_le_bytes().to_vec())
        }
        Op::RecordRead(k) => {
            let ino = fs.lookup(ROOT_INO, RECORDS)?.ino;
            let n = nth_record(fs, ino, k)?;
            fs.record_read(ino, n)
        }
        Op::RecordUpdate(k, len, seed) => {
            let ino = fs.lookup(ROOT_INO, RECORDS)?.ino;
            let n = nth_record(fs, ino, k)?;
            fs.record_update(ino, n, &data(seed, usize::from(len)))
                .map(|()| Vec::new())
        }
        Op::RecordRemoveFirst => {
            let ino = fs.lookup(ROOT_INO, RECORDS)?.ino;
            fs.record_remove_first(ino).map(|()| Vec::new())
        }
    }
}

/// The record file of the interleaved runs: its records start in append blocks.
const RECORDS: &[u8] = b"r";

/// The number of the record `k` places after the oldest, modulo the count.
fn nth_record<D: Segments>(fs: &mut Fs<D>, ino: Ino, k: u16) -> flashfs::Result<u64> {
    let info = fs.record_info(ino)?;
    match info.count() {
        0 => Err(Error::NotFound),
        c => Ok(info.first + u64::from(k) % c),
    }
}

fn setup<D: Segments>(fs: &mut Fs<D>) {
    file(fs, ROOT_INO, b"a", &data(9, 3000));
    file(fs, ROOT_INO, b"b", b"bee");
    // Records added a few at a time, each batch a journal commit: on reprogrammable NOR
    // they go to append blocks, several blocks' worth.
    fs.sync().unwrap();
    let r = record_file(fs, RECORDS, RecordFormat::variable());
    fs.sync().unwrap();
    for i in 0..48u8 {
        fs.record_add(r, &data(i, 40 + usize::from(i) * 3)).unwrap();
        if i % 4 == 3 {
            fs.sync().unwrap();
        }
    }
}

fn contents<D: Segments>(fs: &mut Fs<D>) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut out = BTreeMap::new();
    for n in NAMES.into_iter().chain([RECORDS]) {
        if let Ok(a) = fs.lookup(ROOT_INO, n) {
            out.insert(n.to_vec(), content(fs, a.ino).unwrap());
        }
    }
    out
}

fn serial_matches(steps: &[Step]) -> Result<(), TestCaseError> {
    let mut fs = Fs::format(nor(true), fs_config()).unwrap();
    setup(&mut fs);
    fs.sync().unwrap();
    let statfs = fs.statfs();
    // Per slot: the transaction, its start and what its operations returned.
    let mut slots: BTreeMap<usize, (Tid, u64, Log)> = BTreeMap::new();
    let mut started = 0u64;
    let mut committed: Vec<(u64, Log)> = Vec::new();
    for step in steps {
        match step {
            Step::Run(s, op) => {
                let Some((tid, _, log)) = slots.get_mut(s) else {
                    let tid = fs.begin().unwrap();
                    started += 1;
                    slots.insert(*s, (tid, started, Vec::new()));
                    continue;
                };
                match fs.in_tx(*tid, |fs| run_op(fs, op)) {
                    Err(Error::Conflict) => {
                        let (tid, ..) = slots.remove(s).unwrap();
                        fs.abort(tid).unwrap();
                    }
                    r => log.push((op.clone(), r.map_err(|e| e.errno()))),
                }
            }
            Step::Commit(s) => {
                if let Some((tid, start, log)) = slots.remove(s) {
                    match fs.commit_tx(tid) {
                        Ok(()) => committed.push((start, log)),
                        Err(Error::Conflict) => {}
                        Err(e) => panic!("commit: {e}"),
                    }
                }
            }
            Step::Abort(s) => {
                if let Some((tid, ..)) = slots.remove(s) {
                    fs.abort(tid).unwrap();
                }
            }
        }
    }
    for (_, (tid, ..)) in slots {
        fs.abort(tid).unwrap();
    }
    let got = contents(&mut fs);
    clean(&mut fs);
    // The serial run, in start order.
    committed.sort_by_key(|c| c.0);
    let mut serial = Fs::format(nor(true), fs_config()).unwrap();
    setup(&mut serial);
    for (start, log) in &committed {
        for (op, outcome) in log {
            let r = run_op(&mut serial, op).map_err(|e| e.errno());
            prop_assert_eq!(&r, outcome, "transaction {} op {:?}", start, op);
        }
    }
    prop_assert_eq!(got, contents(&mut serial));
    if committed.is_empty() {
        prop_assert_eq!(fs.statfs(), statfs);
    }
    let mut fs = remount(fs);
    prop_assert_eq!(contents(&mut fs), contents(&mut serial));
    clean(&mut fs);
    Ok(())
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..4usize).prop_map(Op::Read),
        3 => (0..4usize, 0..6000u16, 1..5000u16, any::<u8>())
            .prop_map(|(n, o, l, s)| Op::Write(n, o, l, s)),
        1 => (0..4usize, 0..8000u16).prop_map(|(n, s)| Op::Truncate(n, s)),
        2 => (0..4usize).prop_map(Op::Create),
        1 => (0..4usize).prop_map(Op::Unlink),
        1 => (0..4usize, 0..4usize).prop_map(|(a, b)| Op::Rename(a, b)),
        1 => Just(Op::List),
        2 => (1..300u16, any::<u8>()).prop_map(|(l, s)| Op::RecordAdd(l, s)),
        3 => any::<u16>().prop_map(Op::RecordRead),
        1 => (any::<u16>(), 0..300u16, any::<u8>()).prop_map(|(k, l, s)| Op::RecordUpdate(k, l, s)),
        1 => Just(Op::RecordRemoveFirst),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        12 => (0..3usize, op()).prop_map(|(s, o)| Step::Run(s, o)),
        2 => (0..3usize).prop_map(Step::Commit),
        1 => (0..3usize).prop_map(Step::Abort),
    ]
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(32)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn interleaved_transactions_match_a_serial_run(steps in proptest::collection::vec(step(), 1..100)) {
        serial_matches(&steps)?;
    }
}
