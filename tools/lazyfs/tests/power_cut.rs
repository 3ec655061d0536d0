//! The lazy file system mounted for real (needs /dev/fuse and root): what survives a cut.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use lazyfs::CONTROL_NAME;

/// A backing directory and the lazy mount over it, unmounted when dropped.
struct Mount {
    dir: PathBuf,
    mountpoint: PathBuf,
    session: Option<fuser::BackgroundSession>,
}

impl Mount {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("lazyfs-test-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let (backing, mountpoint) = (dir.join("backing"), dir.join("mount"));
        fs::create_dir_all(&backing).unwrap();
        fs::create_dir_all(&mountpoint).unwrap();
        let session = lazyfs::session(&backing, &mountpoint)
            .unwrap_or_else(|error| panic!("cannot mount (needs /dev/fuse and root): {error}"))
            .spawn()
            .unwrap();
        Self {
            dir,
            mountpoint,
            session: Some(session),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.mountpoint.join(name)
    }

    fn backing(&self, name: &str) -> PathBuf {
        self.dir.join("backing").join(name)
    }

    fn control(&self, command: &str) {
        let mut file = OpenOptions::new()
            .write(true)
            .open(self.path(CONTROL_NAME))
            .unwrap();
        file.write_all(command.as_bytes()).unwrap();
    }

    fn cut(&self) {
        self.control("cut");
    }

    fn figure(&self, name: &str) -> u64 {
        let text = fs::read_to_string(self.path(CONTROL_NAME)).unwrap();
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {text:?}"))
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Some(session) = self.session.take() {
            let _ = session.umount_and_join();
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn read(path: &Path) -> String {
    String::from_utf8(fs::read(path).unwrap()).unwrap()
}

#[test]
fn only_the_fsynced_part_survives_a_cut() {
    let mount = Mount::new("fsynced");
    let path = mount.path("log");
    let mut file = File::create(&path).unwrap();
    file.write_all(b"first line\n").unwrap();
    file.sync_all().unwrap();
    file.write_all(b"second line\n").unwrap();
    // Reads and the size see the unsynced data; the backing file has only the synced part.
    assert_eq!(read(&path), "first line\nsecond line\n");
    assert_eq!(fs::metadata(&path).unwrap().len(), 23);
    assert_eq!(read(&mount.backing("log")), "first line\n");
    assert_eq!(mount.figure("pending_bytes"), 12);
    // close() persists nothing.
    drop(file);
    mount.cut();
    assert_eq!(read(&path), "first line\n");
    assert_eq!(fs::metadata(&path).unwrap().len(), 11);
    assert_eq!(mount.figure("pending_bytes"), 0);
    assert_eq!(mount.figure("dropped_bytes"), 12);
    // fdatasync counts as fsync.
    let file = OpenOptions::new().append(true).open(&path).unwrap();
    (&file).write_all(b"third\n").unwrap();
    file.sync_data().unwrap();
    mount.cut();
    assert_eq!(read(&path), "first line\nthird\n");
}

#[test]
fn a_file_never_synced_is_empty_after_a_cut_and_one_extended_keeps_its_synced_length() {
    let mount = Mount::new("lengths");
    fs::write(mount.path("new"), b"never synced").unwrap();
    let old = File::create(mount.path("old")).unwrap();
    old.write_all_at(b"0123456789", 0).unwrap();
    old.sync_all().unwrap();
    old.write_all_at(b"abcdefghij", 10).unwrap();
    // An overwrite inside the synced part is lost too.
    old.write_all_at(b"XY", 2).unwrap();
    assert_eq!(read(&mount.path("old")), "01XY456789abcdefghij");
    mount.cut();
    assert_eq!(fs::metadata(mount.path("new")).unwrap().len(), 0);
    assert_eq!(read(&mount.path("old")), "0123456789");
}

#[test]
fn names_change_at_once_and_data_follows_its_file() {
    let mount = Mount::new("names");
    // Written under a temporary name and renamed without an fsync: the name survives, the
    // data does not (the mistake a power-cut test is for).
    fs::write(mount.path("careless.tmp"), b"data").unwrap();
    fs::rename(mount.path("careless.tmp"), mount.path("careless")).unwrap();
    // The same with an fsync before the rename: whole.
    let mut file = File::create(mount.path("careful.tmp")).unwrap();
    file.write_all(b"data").unwrap();
    file.sync_all().unwrap();
    drop(file);
    fs::rename(mount.path("careful.tmp"), mount.path("careful")).unwrap();
    // A hard link to a synced file, then the first name removed.
    let mut file = File::create(mount.path("first")).unwrap();
    file.write_all(b"linked").unwrap();
    file.sync_all().unwrap();
    fs::hard_link(mount.path("first"), mount.path("second")).unwrap();
    fs::remove_file(mount.path("first")).unwrap();
    fs::create_dir(mount.path("dir")).unwrap();
    std::os::unix::fs::symlink("careful", mount.path("link")).unwrap();
    mount.cut();
    assert_eq!(read(&mount.path("careless")), "");
    assert!(!mount.path("careless.tmp").exists());
    assert_eq!(read(&mount.path("careful")), "data");
    assert_eq!(read(&mount.path("second")), "linked");
    assert!(!mount.path("first").exists());
    assert!(mount.path("dir").is_dir());
    assert_eq!(read(&mount.path("link")), "data");
    let mut names: Vec<String> = fs::read_dir(&mount.mountpoint)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    // The control file is not listed.
    assert_eq!(names, ["careful", "careless", "dir", "link", "second"]);
}

#[test]
fn a_truncation_is_on_disk_at_once() {
    let mount = Mount::new("truncate");
    let path = mount.path("file");
    let file = File::create(&path).unwrap();
    file.write_all_at(b"abcdef", 0).unwrap();
    file.sync_all().unwrap();
    file.write_all_at(b"ghij", 6).unwrap();
    file.set_len(3).unwrap();
    assert_eq!(read(&path), "abc");
    mount.cut();
    assert_eq!(read(&path), "abc");
    // Truncated past the pending data: the zeros are there, the data is not.
    file.write_all_at(b"xyz", 3).unwrap();
    file.set_len(8).unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"abcxyz\0\0");
    mount.cut();
    assert_eq!(fs::read(&path).unwrap(), b"abc\0\0\0\0\0");
}

#[test]
fn sync_writes_everything_out() {
    let mount = Mount::new("sync");
    fs::write(mount.path("a"), b"one").unwrap();
    fs::write(mount.path("b"), b"two").unwrap();
    mount.control("sync");
    let a = OpenOptions::new()
        .write(true)
        .open(mount.path("a"))
        .unwrap();
    a.write_all_at(b"ONE", 0).unwrap();
    // A truncating open (as fs::write does) is on disk at once, its data is not.
    fs::write(mount.path("b"), b"three").unwrap();
    mount.cut();
    assert_eq!(read(&mount.path("a")), "one");
    assert_eq!(read(&mount.path("b")), "");
    assert_eq!(mount.figure("synced_bytes"), 6);
}

#[test]
fn a_program_run_with_the_hook_makes_data_durable_with_syncfs() {
    let mount = Mount::new("hook");
    let run = |script: &str| {
        let status = Command::new(env!("CARGO_BIN_EXE_lazyfs"))
            .arg("run")
            .arg(&mount.mountpoint)
            .args(["sh", "-c", script])
            .current_dir(&mount.mountpoint)
            .status()
            .unwrap();
        assert!(status.success(), "{script}: {status}");
    };
    // `sync -f` is syncfs(2) on the file's file system; plain `sync` is sync(2).
    run("printf flushed > a && sync -f a");
    run("printf whole > b && sync");
    run("printf lost > c");
    // syncfs of another file system leaves this one's data pending.
    run("printf lost > d && sync -f /");
    mount.cut();
    assert_eq!(read(&mount.path("a")), "flushed");
    assert_eq!(read(&mount.path("b")), "whole");
    assert_eq!(read(&mount.path("c")), "");
    assert_eq!(read(&mount.path("d")), "");
}
