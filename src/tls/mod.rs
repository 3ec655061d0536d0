//! TLS for the service's clients and, when configured, for the API it serves. Everything runs
//! on ring: the process installs it as rustls' provider before the first client is built
//! (reqwest is built without a provider of its own, and panics on a client made before).
//! `server` serves the API over HTTPS.

pub mod server;

/// Makes ring the process's TLS provider; calling it again does nothing. Every place that
/// builds an HTTP client calls it, through [`client_builder`] or directly (the MCP and OTLP
/// transports build their clients inside their crates).
pub fn install_crypto_provider() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        // Another provider installed first (by a library) serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A builder for an HTTP client, with the process's TLS provider in place.
pub fn client_builder() -> reqwest::ClientBuilder {
    install_crypto_provider();
    reqwest::Client::builder()
}
