//! `flashfs tx`: transactions from a script, all or nothing, on an image.

mod common;

use std::path::Path;

use common::flashfs;
use tempfile::TempDir;

fn image(dir: &TempDir) -> std::path::PathBuf {
    let img = dir.path().join("tx.img");
    flashfs()
        .args(["mkfs", "--preset", "nand-128m", "-q"])
        .arg(&img)
        .assert()
        .success();
    img
}

fn tx(img: &Path, script: &str) -> std::process::Output {
    flashfs()
        .arg("tx")
        .arg(img)
        .arg("-")
        .write_stdin(script)
        .output()
        .unwrap()
}

fn cat(img: &Path, path: &str) -> Vec<u8> {
    flashfs()
        .arg("cat")
        .arg(img)
        .arg(path)
        .output()
        .unwrap()
        .stdout
}

#[test]
fn interleaved_transactions_commit_whole() {
    let dir = TempDir::new().unwrap();
    let img = image(&dir);
    let out = tx(
        &img,
        "begin a\nbegin b\na mkdir /d\na put /d/x hello\\n\nb put /y other\ncommit b\n\
         a append /d/x more\nabort_not_a_command_is_a_name put /z 1\n",
    );
    // The last line names a transaction that was never begun: nothing is saved.
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("line 8") && err.contains("no open transaction"),
        "{err}"
    );
    assert!(
        cat(&img, "/y").is_empty(),
        "nothing of a failed script lands"
    );
    let out = tx(
        &img,
        "begin a\nbegin b\na mkdir /d\na put /d/x hello\\n\nb put /y other\ncommit b\n\
         a append /d/x more\ncommit a\nbegin c\nc rm /y\nabort c\n",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("committed b (1 operation)"), "{text}");
    assert!(text.contains("committed a (3 operations)"), "{text}");
    assert!(text.contains("aborted c"), "{text}");
    assert_eq!(cat(&img, "/d/x"), b"hello\nmore");
    assert_eq!(cat(&img, "/y"), b"other", "the aborted removal left it");
    flashfs().arg("fsck").arg(&img).assert().code(0);
}

#[test]
fn conflicts_and_open_transactions_fail_and_change_nothing() {
    let dir = TempDir::new().unwrap();
    let img = image(&dir);
    let before = std::fs::read(&img).unwrap();
    for (script, says) in [
        (
            "begin a\nbegin b\na put /y 2\nb put /y 3\ncommit a\ncommit b\n",
            "conflict",
        ),
        ("begin a\na put /z 1\n", "still open"),
        ("begin a\na frob /z\n", "unknown command"),
    ] {
        let out = tx(&img, script);
        assert_eq!(out.status.code(), Some(1), "{script}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(says), "{script}: {err}");
        assert_eq!(
            std::fs::read(&img).unwrap(),
            before,
            "{script}: image changed"
        );
    }
}
