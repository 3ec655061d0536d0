//! Running the server binary (`openvaala serve`, `openvaala reindex`) with nothing from the
//! user's setup, talking to it with the bench's token, and reading a process's CPU, memory
//! and writes from `/proc`.

use std::fs;
use std::io::Read as _;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// The health check is polled this often while the server starts.
const HEALTH_POLL: Duration = Duration::from_millis(2);
const START_TIMEOUT: Duration = Duration::from_secs(120);

pub(crate) fn http_client() -> anyhow::Result<reqwest::Client> {
    Ok(openvaala::tls::client_builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .default_headers(authorized())
        .build()?)
}

/// The token the servers this bench starts accept (`OPENVAALA_TOKEN`, one per bench run):
/// the service wants one on loopback too.
pub(crate) fn bench_token() -> &'static str {
    static TOKEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TOKEN.get_or_init(|| format!("bench-{}", uuid::Uuid::now_v7().simple()))
}

/// The headers every request of the bench carries: its token.
pub(crate) fn authorized() -> reqwest::header::HeaderMap {
    let mut headers = reqwest::header::HeaderMap::new();
    let value = format!("Bearer {}", bench_token());
    headers.insert(
        reqwest::header::AUTHORIZATION,
        reqwest::header::HeaderValue::from_str(&value).expect("the token is ASCII"),
    );
    headers
}

/// The `openvaala` binary built beside this one (`target/release/openvaala`).
pub(crate) fn server_binary() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find this executable")?;
    let server = exe.with_file_name("openvaala");
    if !server.is_file() {
        bail!(
            "{} not found: build it with `cargo build --release --bin openvaala --bin openvaala-bench`",
            server.display()
        );
    }
    if server.components().any(|c| c.as_os_str() == "debug") {
        eprintln!("warning: {} is a debug build", server.display());
    }
    Ok(server)
}

/// A command running the server binary with nothing from the user's setup: no config file
/// (so the built-in config), the bench's own token, logs at `warn`.
pub(crate) fn openvaala(server: &Path) -> Command {
    let mut command = Command::new(server);
    for name in [
        "HOME",
        "OPENVAALA_CONFIG",
        "OPENVAALA_HOME",
        "XDG_DATA_HOME",
    ] {
        command.env_remove(name);
    }
    command
        .env("OPENVAALA_TOKEN", bench_token())
        .env("OPENVAALA_LOG", "warn")
        .stdin(Stdio::null());
    command
}

/// Runs `openvaala reindex` and returns how many conversations it indexed and its wall-clock
/// time (process start to exit, so it includes opening and migrating the new database).
pub(crate) fn reindex(server: &Path, data_dir: &Path) -> anyhow::Result<(usize, Duration)> {
    let started = Instant::now();
    let output = openvaala(server)
        .arg("reindex")
        .arg("--data-dir")
        .arg(data_dir)
        .output()
        .context("cannot run openvaala reindex")?;
    let elapsed = started.elapsed();
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        bail!(
            "openvaala reindex failed ({}): {stdout}{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    // The last line reads "indexed N conversation(s), skipped M, in S s".
    let indexed = stdout
        .lines()
        .find_map(|line| line.strip_prefix("indexed "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|count| count.parse().ok())
        .with_context(|| format!("unexpected reindex output: {stdout}"))?;
    Ok((indexed, elapsed))
}

/// A running `openvaala serve`. Dropping it kills the process if it was not stopped, so an
/// error in the middle of a measurement leaves no server behind.
pub(crate) struct ServerProcess {
    server: PathBuf,
    data_dir: PathBuf,
    child: Child,
    pub(crate) base: String,
    spawned: Instant,
    log: PathBuf,
}

impl ServerProcess {
    /// Starts `openvaala serve` with the built-in config.
    pub(crate) fn start(server: &Path, data_dir: &Path) -> anyhow::Result<ServerProcess> {
        ServerProcess::spawn(server, data_dir, None)
    }

    /// Starts `openvaala serve --config FILE`.
    pub(crate) fn start_with_config(
        server: &Path,
        data_dir: &Path,
        config: &Path,
    ) -> anyhow::Result<ServerProcess> {
        ServerProcess::spawn(server, data_dir, Some(config))
    }

    pub(crate) fn spawn(
        server: &Path,
        data_dir: &Path,
        config: Option<&Path>,
    ) -> anyhow::Result<ServerProcess> {
        let port = free_port()?;
        let log = data_dir.join("bench-serve.log");
        let log_file = fs::File::create(&log)?;
        let mut command = openvaala(server);
        command
            .arg("serve")
            .arg("--data-dir")
            .arg(data_dir)
            .arg("--addr")
            .arg(format!("127.0.0.1:{port}"));
        if let Some(config) = config {
            command.arg("--config").arg(config);
        }
        let spawned = Instant::now();
        let child = command
            .stdout(log_file.try_clone()?)
            .stderr(log_file)
            .spawn()
            .context("cannot run openvaala serve")?;
        Ok(ServerProcess {
            server: server.to_owned(),
            data_dir: data_dir.to_owned(),
            child,
            base: format!("http://127.0.0.1:{port}"),
            spawned,
            log,
        })
    }

    /// Polls `GET /api/health` until it answers 200 and returns the time since the spawn.
    pub(crate) async fn wait_until_healthy(&mut self) -> anyhow::Result<Duration> {
        let client = http_client()?;
        let url = format!("{}/api/health", self.base);
        loop {
            let answer = client
                .get(&url)
                .timeout(Duration::from_secs(5))
                .send()
                .await;
            if answer.is_ok_and(|response| response.status() == reqwest::StatusCode::OK) {
                return Ok(self.spawned.elapsed());
            }
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "openvaala serve exited ({status}) before answering:\n{}",
                    fs::read_to_string(&self.log).unwrap_or_default()
                );
            }
            if self.spawned.elapsed() > START_TIMEOUT {
                bail!("openvaala serve did not answer /api/health within {START_TIMEOUT:?}");
            }
            tokio::time::sleep(HEALTH_POLL).await;
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn rss_kb(&self) -> anyhow::Result<u64> {
        proc_status_kb(self.child.id(), "VmRSS")
    }

    pub(crate) fn peak_rss_kb(&self) -> anyhow::Result<u64> {
        proc_status_kb(self.child.id(), "VmHWM")
    }

    /// SIGKILL, as a crash would (the process is reaped).
    pub(crate) fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// `openvaala serve stop`, then waits for the process to exit; returns the time taken.
    pub(crate) fn stop(mut self) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let status = openvaala(&self.server)
            .args(["serve", "stop", "--data-dir"])
            .arg(&self.data_dir)
            .stdout(Stdio::null())
            .status()
            .context("cannot run openvaala serve stop")?;
        if !status.success() {
            bail!("openvaala serve stop failed ({status})");
        }
        let exit = self.child.wait()?;
        if !exit.success() {
            eprintln!(
                "warning: openvaala serve exited with {exit}:\n{}",
                fs::read_to_string(&self.log).unwrap_or_default()
            );
        }
        Ok(started.elapsed())
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = fs::remove_file(&self.log);
    }
}

/// A port nobody listens on right now: bound, read, released.
pub(crate) fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?.port())
}

/// Raises this process's soft limit of open files to at least `wanted` (within the hard
/// limit) and returns the limit now in force. Children inherit it, so a server started
/// afterwards can accept as many connections as the bench opens.
pub(crate) fn raise_open_file_limit(wanted: u64) -> anyhow::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit(2) writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        bail!(
            "cannot read the open-file limit: {}",
            std::io::Error::last_os_error()
        );
    }
    if limit.rlim_cur >= wanted {
        return Ok(limit.rlim_cur);
    }
    limit.rlim_cur = wanted.min(limit.rlim_max);
    // SAFETY: setrlimit(2) reads the struct we own; a soft limit within the hard one is allowed.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
        bail!(
            "cannot raise the open-file limit to {}: {}",
            limit.rlim_cur,
            std::io::Error::last_os_error()
        );
    }
    Ok(limit.rlim_cur)
}

/// The CPU time (user + system) a process has used so far, from `/proc/<pid>/stat`.
pub(crate) fn proc_cpu(pid: u32) -> anyhow::Result<Duration> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name in parentheses may hold spaces; the fields after it are plain. utime
    // and stime are fields 14 and 15, i.e. the 12th and 13th after the name.
    let after_name = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .with_context(|| format!("unexpected /proc/{pid}/stat"))?;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks: u64 = match (fields.get(11), fields.get(12)) {
        (Some(user), Some(system)) => user.parse::<u64>()? + system.parse::<u64>()?,
        _ => bail!("unexpected /proc/{pid}/stat"),
    };
    // SAFETY: sysconf(3) only reads a configuration value.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Ok(Duration::from_secs_f64(ticks as f64 / per_second as f64))
}

/// Waits until a process has written nothing (`wchar` of `/proc/<pid>/io`, which counts writes
/// into the page cache too) for `quiet`, polling every 10 ms, or until `timeout`. Returns whether
/// it became quiet. Background work after an answer (an index job, a WAL checkpoint) shows up
/// as writes.
pub(crate) async fn wait_until_quiet(
    pid: u32,
    quiet: Duration,
    timeout: Duration,
) -> anyhow::Result<bool> {
    const POLL: Duration = Duration::from_millis(10);
    let written = || -> anyhow::Result<u64> {
        let io = fs::read_to_string(format!("/proc/{pid}/io"))?;
        io.lines()
            .find_map(|line| line.strip_prefix("wchar:"))
            .and_then(|value| value.trim().parse().ok())
            .with_context(|| format!("no wchar in /proc/{pid}/io"))
    };
    let started = Instant::now();
    let mut last = written()?;
    let mut unchanged_since = Instant::now();
    while started.elapsed() < timeout {
        tokio::time::sleep(POLL).await;
        let now = written()?;
        if now != last {
            last = now;
            unchanged_since = Instant::now();
        } else if unchanged_since.elapsed() >= quiet {
            return Ok(true);
        }
    }
    Ok(false)
}

/// A `kB` field of `/proc/<pid>/status` (`VmRSS`, `VmHWM`).
pub(crate) fn proc_status_kb(pid: u32, field: &str) -> anyhow::Result<u64> {
    let mut status = String::new();
    fs::File::open(format!("/proc/{pid}/status"))?.read_to_string(&mut status)?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| value.split_whitespace().next()?.parse().ok())
        .with_context(|| format!("no {field} in /proc/{pid}/status"))
}
