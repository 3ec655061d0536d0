//! Records of the process groups that shell commands run in, one small file per running command
//! in `<data>/processes/`, so that a service restarted after a crash (kill -9, OOM) can kill the
//! groups its dead run left behind. It knows nothing about turns or what the commands do.
//!
//! A record names the group (the pid of its leader, `sh`) and the leader's identity: its start
//! time in clock ticks since boot (field 22 of `/proc/<pid>/stat`) and the boot id. A leftover
//! group is killed only while its leader is still that very process, so a pid reused since is
//! never signalled. Linux only, like the rest of the tools.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::text::floor_char_boundary;

/// The folder of the data directory that holds the records. The store neither lists nor
/// cleans it (unlike `tmp/`, which start-up empties).
const DIR_NAME: &str = "processes";
const RECORD_VERSION: u32 = 1;
/// Enough of the command to tell a person (and the log) what was running.
const COMMAND_PREVIEW_BYTES: usize = 200;

/// The records folder of one data directory.
#[derive(Debug, Clone)]
pub struct GroupRecords {
    dir: PathBuf,
    /// This boot's id, read once: it cannot change while the process runs.
    boot_id: String,
}

/// What `kill_leftovers` found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Leftovers {
    /// Groups whose leader was still alive, now sent SIGKILL.
    pub killed: usize,
    /// Records whose leader is gone (or is another process with a reused pid): nothing to kill.
    pub stale: usize,
    /// Record files that could not be read or parsed (removed all the same).
    pub unreadable: usize,
}

/// A record on disk for as long as this value lives: dropping it removes the file.
#[derive(Debug)]
pub struct RecordFile {
    path: PathBuf,
}

/// One record file's content: a JSON object, versioned like the store's records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct GroupRecord {
    v: u32,
    /// The process group's id, which is the pid of its leader.
    pgid: libc::pid_t,
    /// The leader's start time, in clock ticks since boot.
    start_time: u64,
    /// Start times restart at every boot; a record from another boot names nothing alive.
    boot_id: String,
    command: String,
}

/// At service start, while holding the data directory's lock and before any command runs:
/// kills the groups that a previous run of `data_dir` left running (each kill is logged).
/// Returns the folder this run records its own commands in.
pub fn take_over(data_dir: &Path) -> io::Result<GroupRecords> {
    let records = GroupRecords::open(data_dir)?;
    records.kill_leftovers()?;
    Ok(records)
}

impl GroupRecords {
    /// Records a command whose group leader `pgid` was just started. A record that cannot be
    /// written is logged, never an error of the command: only a crash of the service would then
    /// leave the group running.
    pub fn record_running(&self, pgid: libc::pid_t, command: &str) -> Option<RecordFile> {
        match self.write(pgid, command) {
            Ok(file) => Some(file),
            Err(error) => {
                tracing::warn!(%error, pgid, "cannot record a shell command's process group; a crash of the service would leave it running");
                None
            }
        }
    }

    /// Opens (and creates if needed) the records folder of a data directory.
    fn open(data_dir: &Path) -> io::Result<GroupRecords> {
        let dir = data_dir.join(DIR_NAME);
        fs::create_dir_all(&dir)?;
        Ok(GroupRecords {
            dir,
            boot_id: boot_id(),
        })
    }

    /// Writes the record of the group led by `pgid`, which must still exist (alive, or a zombie
    /// not yet reaped). The file is named after the leader's identity, so a pid reused within
    /// one run never shares a file with an earlier command.
    fn write(&self, pgid: libc::pid_t, command: &str) -> io::Result<RecordFile> {
        let start_time = start_time(pgid)?;
        let preview = &command[..floor_char_boundary(command, COMMAND_PREVIEW_BYTES)];
        let record = GroupRecord {
            v: RECORD_VERSION,
            pgid,
            start_time,
            boot_id: self.boot_id.clone(),
            command: preview.to_owned(),
        };
        let mut bytes = serde_json::to_vec(&record).map_err(io::Error::other)?;
        bytes.push(b'\n');
        // No fsync: the processes a record names do not survive the power loss it would guard
        // against, and a torn record is removed at the next start.
        let path = self.dir.join(format!("{pgid}-{start_time}.json"));
        fs::write(&path, bytes)?;
        Ok(RecordFile { path })
    }

    /// Kills the group of every record whose leader is still the process it names, then
    /// removes the record. Only for start-up, under the data directory's lock: every record
    /// present then belongs to a run that is dead.
    fn kill_leftovers(&self) -> io::Result<Leftovers> {
        let mut leftovers = Leftovers::default();
        for (path, record) in self.list()? {
            match record {
                Some(record) if record.names_a_live_leader(&self.boot_id) => {
                    kill_group(record.pgid);
                    leftovers.killed += 1;
                    tracing::warn!(
                        pgid = record.pgid,
                        command = %record.command,
                        "killed a shell command that a previous run left running"
                    );
                }
                Some(_) => leftovers.stale += 1,
                None => {
                    leftovers.unreadable += 1;
                    tracing::warn!(path = %path.display(), "removing an unreadable process record");
                }
            }
            if let Err(error) = fs::remove_file(&path) {
                tracing::warn!(path = %path.display(), %error, "cannot remove a process record");
            }
        }
        Ok(leftovers)
    }

    /// Every record file with its content (`None` when it cannot be read or parsed).
    fn list(&self) -> io::Result<Vec<(PathBuf, Option<GroupRecord>)>> {
        let mut records = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            let path = entry?.path();
            if path.extension().is_none_or(|extension| extension != "json") {
                continue;
            }
            let record = fs::read(&path)
                .ok()
                .and_then(|bytes| serde_json::from_slice::<GroupRecord>(&bytes).ok());
            records.push((path, record));
        }
        Ok(records)
    }
}

impl GroupRecord {
    /// Whether the record's leader is alive (or an unreaped zombie whose group may live on)
    /// and is the same process: same boot, same start time.
    fn names_a_live_leader(&self, current_boot: &str) -> bool {
        self.pgid > 1
            && self.boot_id == current_boot
            && start_time(self.pgid).is_ok_and(|start_time| start_time == self.start_time)
    }
}

impl Drop for RecordFile {
    fn drop(&mut self) {
        if let Err(error) = fs::remove_file(&self.path) {
            tracing::warn!(path = %self.path.display(), %error, "cannot remove a process record");
        }
    }
}

/// SIGKILL to every process of the group. Never for 0 or 1: `kill(-0)` would signal our own
/// group and `kill(-1)` every process.
pub fn kill_group(pgid: libc::pid_t) {
    if pgid > 1 {
        // SAFETY: kill(2) touches no memory of ours; a group that is already gone gives ESRCH.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

/// Field 22 of `/proc/<pid>/stat`: when the process started, in clock ticks since boot.
fn start_time(pid: libc::pid_t) -> io::Result<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat"))?;
    parse_start_time(&stat)
        .ok_or_else(|| io::Error::other(format!("no start time in /proc/{pid}/stat")))
}

/// The name (field 2) is in parentheses and may itself hold spaces or `)`, so the fields are
/// counted from the last `)`: what follows starts at field 3.
fn parse_start_time(stat: &str) -> Option<u64> {
    let (_, after_name) = stat.rsplit_once(')')?;
    after_name.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// This boot's id; empty if the kernel does not tell (then start times alone decide).
fn boot_id() -> String {
    fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|id| id.trim().to_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    use super::*;

    /// Long enough for a slow CI machine; a passing test never waits for it.
    const PATIENCE: Duration = Duration::from_secs(10);

    /// A child in a process group of its own, as the shell tool starts `sh`; killed (the whole
    /// group) and reaped when dropped, so a failing test leaves nothing running.
    struct Leader {
        child: Child,
    }

    impl Leader {
        fn start(script: &str) -> Leader {
            let child = Command::new("sh")
                .arg("-c")
                .arg(script)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .process_group(0)
                .spawn()
                .unwrap();
            Leader { child }
        }

        fn pid(&self) -> libc::pid_t {
            libc::pid_t::try_from(self.child.id()).unwrap()
        }

        fn first_line(&mut self) -> String {
            let stdout = self.child.stdout.take().unwrap();
            let mut line = String::new();
            BufReader::new(stdout).read_line(&mut line).unwrap();
            line.trim().to_owned()
        }

        fn is_running(&mut self) -> bool {
            self.child.try_wait().unwrap().is_none()
        }
    }

    impl Drop for Leader {
        fn drop(&mut self) {
            kill_group(self.pid());
            let _ = self.child.wait();
        }
    }

    /// Waits until `pid` is gone. A killed process whose parent died stays a zombie until its
    /// new parent reaps it: dead, so it counts as gone.
    fn wait_until_gone(pid: libc::pid_t) {
        let gone = || {
            fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
                stat.rsplit_once(')')
                    .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
            })
        };
        let deadline = Instant::now() + PATIENCE;
        while !gone() {
            assert!(Instant::now() < deadline, "process {pid} is still alive");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn file_names(records: &GroupRecords) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(&records.dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_record_lives_as_long_as_its_file_value() {
        let data = tempfile::tempdir().unwrap();
        let records = GroupRecords::open(data.path()).unwrap();
        let leader = Leader::start("exec sleep 300");
        let pid = leader.pid();

        let file = records.write(pid, "exec sleep 300").unwrap();
        let start = start_time(pid).unwrap();
        assert_eq!(file_names(&records), [format!("{pid}-{start}.json")]);
        let listed = records.list().unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(
            listed[0].1,
            Some(GroupRecord {
                v: RECORD_VERSION,
                pgid: pid,
                start_time: start,
                boot_id: boot_id(),
                command: "exec sleep 300".to_owned(),
            })
        );

        drop(file);
        assert!(records.list().unwrap().is_empty());
    }

    #[test]
    fn long_commands_are_cut_on_a_character_boundary() {
        let data = tempfile::tempdir().unwrap();
        let records = GroupRecords::open(data.path()).unwrap();
        let leader = Leader::start("exec sleep 300");
        let command = format!("a{}", "é".repeat(COMMAND_PREVIEW_BYTES));
        let _file = records.write(leader.pid(), &command).unwrap();
        let (_, record) = records.list().unwrap().pop().unwrap();
        let kept = record.unwrap().command;
        assert_eq!(kept.len(), COMMAND_PREVIEW_BYTES - 1);
        assert!(command.starts_with(&kept));
    }

    #[test]
    fn a_record_names_its_leader_only_while_that_process_lives() {
        let data = tempfile::tempdir().unwrap();
        let records = GroupRecords::open(data.path()).unwrap();
        let mut leader = Leader::start("exec sleep 300");
        let _file = records.write(leader.pid(), "sleep").unwrap();
        let (_, record) = records.list().unwrap().pop().unwrap();
        let record = record.unwrap();
        let boot = boot_id();
        assert!(record.names_a_live_leader(&boot));

        // The same pid with another start time or boot is another process.
        let reused = GroupRecord {
            start_time: record.start_time + 1,
            ..record.clone()
        };
        assert!(!reused.names_a_live_leader(&boot));
        assert!(!record.names_a_live_leader("another boot"));

        kill_group(leader.pid());
        leader.child.wait().unwrap();
        assert!(!record.names_a_live_leader(&boot));
    }

    #[test]
    fn leftovers_are_killed_with_their_whole_group_and_removed() {
        let data = tempfile::tempdir().unwrap();
        let records = GroupRecords::open(data.path()).unwrap();
        // sh prints the pid of its background child, then waits for it.
        let mut leader = Leader::start("sleep 300 & echo $!; wait");
        let grandchild: libc::pid_t = leader.first_line().parse().unwrap();
        // As a crash leaves it: the record stays on disk.
        std::mem::forget(records.write(leader.pid(), "sleep 300 &").unwrap());

        let leftovers = records.kill_leftovers().unwrap();
        assert_eq!(
            leftovers,
            Leftovers {
                killed: 1,
                ..Leftovers::default()
            }
        );
        let status = leader.child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        wait_until_gone(grandchild);
        assert!(file_names(&records).is_empty());
    }

    #[test]
    fn leftovers_never_kill_a_reused_pid_and_torn_records_are_removed() {
        let data = tempfile::tempdir().unwrap();
        let records = GroupRecords::open(data.path()).unwrap();
        let mut stranger = Leader::start("exec sleep 300");
        let pid = stranger.pid();
        let other_process = GroupRecord {
            v: RECORD_VERSION,
            pgid: pid,
            start_time: start_time(pid).unwrap() + 1,
            boot_id: boot_id(),
            command: "an earlier command".to_owned(),
        };
        let other_boot = GroupRecord {
            start_time: start_time(pid).unwrap(),
            boot_id: "another boot".to_owned(),
            ..other_process.clone()
        };
        for (name, record) in [("a.json", &other_process), ("b.json", &other_boot)] {
            fs::write(records.dir.join(name), serde_json::to_vec(record).unwrap()).unwrap();
        }
        fs::write(records.dir.join("c.json"), r#"{"v":1,"pgid":12"#).unwrap();
        // Only `.json` files are records.
        fs::write(records.dir.join("notes.txt"), "not a record").unwrap();

        let leftovers = records.kill_leftovers().unwrap();
        assert_eq!(
            leftovers,
            Leftovers {
                killed: 0,
                stale: 2,
                unreadable: 1
            }
        );
        assert!(stranger.is_running());
        assert_eq!(file_names(&records), ["notes.txt"]);
    }

    #[test]
    fn start_time_is_field_22_even_when_the_name_holds_parentheses() {
        let stat = "4242 (a) b (c)) S 1 4242 4242 0 -1 4194304 100 0 0 0 0 0 0 0 20 0 1 0 987654 \
                    2461696 200 18446744073709551615";
        assert_eq!(parse_start_time(stat), Some(987654));
        assert_eq!(parse_start_time("4242 (sh) S 1"), None);
        assert_eq!(parse_start_time("garbage"), None);
        let own = fs::read_to_string("/proc/self/stat").unwrap();
        assert!(parse_start_time(&own).is_some());
    }
}
