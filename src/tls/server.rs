//! HTTPS for the API (`[server] tls_cert` / `tls_key`): a rustls acceptor whose certificate is
//! read again when its files change, so a renewed certificate (certbot, a cron job) is served
//! from the next connection on, without a restart. A file that cannot be read or does not
//! parse leaves the previous certificate in use, and the log says why.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::config::TlsFiles;

/// The files are looked at again at most this often (a handshake costs far more than a stat,
/// but a burst of connections need not stat for each).
const RECHECK: Duration = Duration::from_secs(1);

/// The acceptor for `files`; fails when they cannot be read now (a start with a broken
/// certificate is refused rather than serving nothing).
pub fn acceptor(files: &TlsFiles) -> anyhow::Result<tokio_rustls::TlsAcceptor> {
    crate::tls::install_crypto_provider();
    let resolver = ReloadingCert::new(files.clone())?;
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

#[derive(Debug)]
struct ReloadingCert {
    files: TlsFiles,
    state: Mutex<Loaded>,
}

#[derive(Debug)]
struct Loaded {
    key: Arc<CertifiedKey>,
    /// The files' modification times when read.
    stamps: (Option<SystemTime>, Option<SystemTime>),
    checked: Instant,
}

impl ReloadingCert {
    fn new(files: TlsFiles) -> anyhow::Result<ReloadingCert> {
        let stamps = stamps(&files);
        let key = load(&files)?;
        Ok(ReloadingCert {
            files,
            state: Mutex::new(Loaded {
                key,
                stamps,
                checked: Instant::now(),
            }),
        })
    }

    /// The certificate to serve: read again first if a file changed since.
    fn current(&self) -> Arc<CertifiedKey> {
        let mut state = self.state.lock().expect("certificate state");
        if state.checked.elapsed() >= RECHECK {
            state.checked = Instant::now();
            let now = stamps(&self.files);
            if now != state.stamps {
                match load(&self.files) {
                    Ok(key) => {
                        tracing::info!(cert = %self.files.cert.display(), "serving the renewed TLS certificate");
                        state.key = key;
                        state.stamps = now;
                    }
                    // Half-written during a renewal, perhaps: tried again at the next check.
                    Err(error) => tracing::warn!(
                        error = format!("{error:#}"),
                        "the TLS certificate changed but cannot be used; serving the previous one"
                    ),
                }
            }
        }
        state.key.clone()
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

fn stamps(files: &TlsFiles) -> (Option<SystemTime>, Option<SystemTime>) {
    let modified = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    (modified(&files.cert), modified(&files.key))
}

fn load(files: &TlsFiles) -> anyhow::Result<Arc<CertifiedKey>> {
    let read = |path: &PathBuf| {
        std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
    };
    let cert_pem = read(&files.cert)?;
    let certs = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("{} is not a PEM certificate chain", files.cert.display()))?;
    if certs.is_empty() {
        anyhow::bail!("{} holds no certificate", files.cert.display());
    }
    let key = PrivateKeyDer::from_pem_slice(&read(&files.key)?)
        .with_context(|| format!("{} is not a PEM private key", files.key.display()))?;
    let signing = rustls::crypto::ring::sign::any_supported_type(&key)
        .with_context(|| format!("{} is not a key rustls can sign with", files.key.display()))?;
    let certified = CertifiedKey::new(certs, signing);
    certified.keys_match().with_context(|| {
        format!(
            "the key in {} does not belong to the certificate in {}",
            files.key.display(),
            files.cert.display()
        )
    })?;
    Ok(Arc::new(certified))
}
