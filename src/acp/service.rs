//! Finding the service `openvaala acp` talks to, and starting one for the data directory when
//! none runs there.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::client::api::Api;
use crate::credential::ClientKind;
use crate::store::Store;
use crate::store::lock;

/// How long a service started here may take to answer.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Whether the service answers `GET /api/health`.
pub async fn answers(api: &Api) -> bool {
    api.health().await.is_ok()
}

/// Starts `openvaala serve` for `data_dir` in a process group of its own (an editor that ends
/// the agent's group must not end the service the browser also uses), then returns a client
/// of it once it answers. Says so on stderr: stdout is the protocol's.
pub async fn start(data_dir: &Path, token: Option<String>) -> anyhow::Result<Api> {
    use std::os::unix::process::CommandExt as _;
    let exe = std::env::current_exe()?;
    std::fs::create_dir_all(data_dir)?;
    eprintln!(
        "openvaala acp: no service runs for {}; starting one (`openvaala serve --data-dir {}`)",
        data_dir.display(),
        data_dir.display()
    );
    let log_path = data_dir.join("acp-started-service.log");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)?;
    let mut child = std::process::Command::new(exe)
        .arg("serve")
        .arg("--data-dir")
        .arg(data_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .process_group(0)
        .spawn()?;
    let lock_path = Store::lock_path_in(data_dir);
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            anyhow::bail!(
                "the service it started exited ({status}); its log is {}",
                log_path.display()
            );
        }
        let running = lock::holder(&lock_path).ok().flatten();
        if let Some(url) = running.and_then(|owner| owner.url()) {
            // The service made its local token before it answered.
            let token = token
                .clone()
                .or_else(|| crate::credential::read(data_dir).ok().flatten())
                .map(|base| crate::credential::client_token(&base, ClientKind::Acp));
            let api = Api::new(&url, token);
            if answers(&api).await && api.has_token() {
                eprintln!("openvaala acp: the service is serving on {url}");
                return Ok(api);
            }
        }
        if started.elapsed() > START_TIMEOUT {
            anyhow::bail!(
                "the service it started did not answer within {} s; its log is {}",
                START_TIMEOUT.as_secs(),
                log_path.display()
            );
        }
        // Polling the lock file and the health route: the service has no other way to say it
        // is ready, and this runs once at start.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
