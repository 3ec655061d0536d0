//! A real PostgreSQL server for the cluster benchmark and the cluster tests, started by them:
//! `initdb` into a temporary directory, then `pg_ctl start` on a free loopback port.
//! PostgreSQL refuses to run as root, so as root its commands run as the `postgres` user
//! (Debian's package creates it). `.ci/run` installs Debian's `postgresql` when it is missing.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A running PostgreSQL server; stopped (immediately) and removed when dropped.
pub struct Postgres {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
    dir: PathBuf,
}

impl Postgres {
    pub fn start() -> Postgres {
        let bin = binaries();
        let dir = std::env::temp_dir().join(format!("openvaala-pg-{}", uuid::Uuid::now_v7()));
        std::fs::create_dir(&dir).expect("a temporary directory");
        if as_root() {
            let uid = user_id("postgres");
            std::os::unix::fs::chown(&dir, Some(uid), None).expect("chown to postgres");
        }
        let data = dir.join("data");
        run(
            &bin,
            "initdb",
            &[
                "-D",
                data.to_str().unwrap(),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        );
        let port = free_port();
        let server = Postgres {
            bin,
            data,
            port,
            dir,
        };
        server.resume();
        server
    }

    /// `postgres://…` of the server's `postgres` database.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Copies this server's `postgres` database (schema and rows) into `target`'s, which must
    /// be fresh: what a backup restored elsewhere holds.
    pub fn copy_into(&self, target: &Postgres) {
        let dump = command(&self.bin, "pg_dump")
            .args(["--dbname", &self.url(), "--no-owner"])
            .output()
            .unwrap_or_else(|error| panic!("cannot run pg_dump: {error}"));
        assert!(
            dump.status.success(),
            "pg_dump failed: {}",
            String::from_utf8_lossy(&dump.stderr)
        );
        let mut restore = command(&target.bin, "psql")
            .args([
                "--dbname",
                &target.url(),
                "--quiet",
                "-v",
                "ON_ERROR_STOP=1",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot run psql: {error}"));
        use std::io::Write as _;
        restore
            .stdin
            .take()
            .expect("psql's input")
            .write_all(&dump.stdout)
            .expect("psql reads the dump");
        let restored = restore.wait_with_output().expect("psql ends");
        assert!(
            restored.status.success(),
            "psql failed: {}",
            String::from_utf8_lossy(&restored.stderr)
        );
    }

    /// Stops the server (fast: open connections are cut), as an outage would.
    pub fn stop(&self) {
        run(
            &self.bin,
            "pg_ctl",
            &[
                "-D",
                self.data.to_str().unwrap(),
                "-m",
                "fast",
                "-w",
                "stop",
            ],
        );
    }

    /// Freezes the whole server (`true`: SIGSTOP to the postmaster and every backend, as a
    /// paused VM would be) or lets it go on (`false`: SIGCONT). Connections stay open.
    pub fn freeze(&self, frozen: bool) {
        let pid_file = std::fs::read_to_string(self.data.join("postmaster.pid"))
            .expect("a running PostgreSQL has a postmaster.pid");
        let postmaster: i32 = pid_file
            .lines()
            .next()
            .and_then(|line| line.trim().parse().ok())
            .expect("postmaster.pid starts with its pid");
        let mut pids = vec![postmaster];
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // The parent's pid is the second field after the command's closing parenthesis.
            let parent = stat
                .rsplit_once(") ")
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|ppid| ppid.parse::<i32>().ok());
            if parent == Some(postmaster) {
                pids.push(pid);
            }
        }
        let signal = if frozen { libc::SIGSTOP } else { libc::SIGCONT };
        for pid in pids {
            // SAFETY: kill(2) sends a signal; it touches no memory of this process.
            unsafe {
                libc::kill(pid, signal);
            }
        }
    }

    /// Starts the server again on the same port, with the same data.
    pub fn resume(&self) {
        let options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -k {} -c max_connections=200",
            self.port,
            self.data.parent().unwrap().display()
        );
        let log = self.data.parent().unwrap().join("postgres.log");
        run(
            &self.bin,
            "pg_ctl",
            &[
                "-D",
                self.data.to_str().unwrap(),
                "-l",
                log.to_str().unwrap(),
                "-o",
                &options,
                "-w",
                "start",
            ],
        );
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = command(&self.bin, "pg_ctl")
            .args(["-D", self.data.to_str().unwrap(), "-m", "immediate", "stop"])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Where PostgreSQL's server programs are: on PATH, else Debian's versioned directory.
fn binaries() -> PathBuf {
    if let Ok(output) = Command::new("sh")
        .args(["-c", "command -v initdb"])
        .output()
        && output.status.success()
    {
        let path = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
        // Through a link to the version's own folder, which holds pg_dump and psql too.
        let path = std::fs::canonicalize(&path).unwrap_or(path);
        if let Some(dir) = path.parent() {
            return dir.to_owned();
        }
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL is not installed: apt-get install -y postgresql (.ci/run does it)")
        .filter_map(|entry| Some(entry.ok()?.path().join("bin")))
        .filter(|bin| bin.join("initdb").exists())
        .collect();
    versions.sort();
    versions
        .pop()
        .expect("no PostgreSQL server programs under /usr/lib/postgresql")
}

fn as_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn user_id(name: &str) -> u32 {
    let output = Command::new("id")
        .args(["-u", name])
        .output()
        .expect("id runs");
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("no `{name}` user to run PostgreSQL as"))
}

fn command(bin: &Path, program: &str) -> Command {
    let program = bin.join(program);
    if as_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

fn run(bin: &Path, program: &str, args: &[&str]) {
    let output = command(bin, program)
        .args(args)
        .output()
        .unwrap_or_else(|error| panic!("cannot run {program}: {error}"));
    assert!(
        output.status.success(),
        "{program} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free port")
}
