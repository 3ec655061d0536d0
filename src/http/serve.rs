//! The connection loop under the router: accepts TCP connections and serves each with hyper
//! (HTTP/1.1 or HTTP/2), with the limits `axum::serve` does not offer. A client must send its
//! request headers within a timeout, and its body at a minimum pace (`slow_body`); connections
//! past a limit get a 503 instead of a file each; running out of files while accepting waits
//! instead of failing; and hyper's own error answers carry the API's JSON body
//! (`parse_errors`). With a certificate configured, every connection is TLS (the handshake
//! within the same header timeout). Each request carries a [`Peer`]: who connected, and
//! whether over TLS. It knows nothing about the routes.

use std::convert::Infallible;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::response::IntoResponse;
use hyper::body::Incoming;
use hyper::rt::Timer as _;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tower::ServiceExt as _;

use super::error::ApiError;
use super::parse_errors::JsonParseErrors;
use super::slow_body::{BodyPace, PacedBody};

/// The limits of the HTTP edge.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Connections served at once. Past it, a few more are answered 503 (`Retry-After`), and
    /// beyond those new ones wait in the kernel's queue until one ends.
    pub max_connections: usize,
    /// How long a client may take to send a request's headers (the first one from connecting,
    /// the next ones on a kept-alive connection from the previous answer), and how long a
    /// request's body may pause between two pieces.
    pub header_read_timeout: Duration,
    /// How fast a request's body must arrive, and within what total time.
    pub body_pace: BodyPace,
}

/// The connection a request came on, in its extensions.
#[derive(Debug, Clone, Copy)]
pub struct Peer {
    pub addr: std::net::SocketAddr,
    /// Served over TLS by this service (not by a proxy in front of it).
    pub tls: bool,
}

/// How long the loop waits before accepting again when the process is out of files.
const OUT_OF_FILES_PAUSE: Duration = Duration::from_millis(50);

/// Serves `app` on `listener` until `shutdown` completes; then stops accepting, lets each
/// connection finish its request in flight (event streams end through the app's own signal),
/// and returns once they are closed.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    tls: Option<tokio_rustls::TlsAcceptor>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let (stop_sender, stop) = watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_sender.send(true);
    });
    let counts = Arc::new(Counts::default());
    // Connections answered 503 also hold a file: only so many of them at once.
    let max_refusing = limits.max_connections / 8 + 4;
    let mut stopped = stop.clone();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopped.wait_for(|stop| *stop) => break,
        };
        let (stream, addr) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                pause_after_accept_error(&error).await;
                continue;
            }
        };
        // Event streams are many small writes: send each at once instead of waiting to
        // coalesce them (Nagle), which would delay live deltas.
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
        if counts.serving.load(Ordering::SeqCst) < limits.max_connections {
            let guard = Counted::new(&counts, Slot::Serving);
            let app = app.clone();
            let stop = stop.clone();
            let tls = tls.clone();
            tokio::spawn(async move {
                match tls {
                    None => {
                        let peer = Peer { addr, tls: false };
                        serve_connection(stream, peer, app, limits, stop).await;
                    }
                    Some(acceptor) => {
                        let handshake = acceptor.accept(stream);
                        match tokio::time::timeout(limits.header_read_timeout, handshake).await {
                            Ok(Ok(stream)) => {
                                let peer = Peer { addr, tls: true };
                                serve_connection(stream, peer, app, limits, stop).await;
                            }
                            Ok(Err(error)) => tracing::debug!(%error, "TLS handshake failed"),
                            Err(_) => tracing::debug!("no TLS handshake in time"),
                        }
                    }
                }
                drop(guard);
            });
        } else {
            let guard = Counted::new(&counts, Slot::Refusing);
            let tls = tls.clone();
            tokio::spawn(async move {
                match tls {
                    None => refuse_connection(stream, limits.header_read_timeout).await,
                    Some(acceptor) => {
                        let handshake = acceptor.accept(stream);
                        if let Ok(Ok(stream)) =
                            tokio::time::timeout(limits.header_read_timeout, handshake).await
                        {
                            refuse_connection(stream, limits.header_read_timeout).await;
                        }
                    }
                }
                drop(guard);
            });
            // Past the refusals too: accept nothing more until some connection ends.
            while counts.refusing.load(Ordering::SeqCst) >= max_refusing {
                let ended = counts.ended.notified();
                if counts.refusing.load(Ordering::SeqCst) < max_refusing {
                    break;
                }
                ended.await;
            }
        }
    }
    drop(listener);
    while counts.serving.load(Ordering::SeqCst) + counts.refusing.load(Ordering::SeqCst) > 0 {
        let ended = counts.ended.notified();
        if counts.serving.load(Ordering::SeqCst) + counts.refusing.load(Ordering::SeqCst) == 0 {
            break;
        }
        ended.await;
    }
}

/// Connections open now, by kind; `ended` wakes whoever waits for one to close.
#[derive(Default)]
struct Counts {
    serving: AtomicUsize,
    refusing: AtomicUsize,
    ended: Notify,
}

#[derive(Clone, Copy)]
enum Slot {
    Serving,
    Refusing,
}

/// One open connection, counted until dropped.
struct Counted {
    counts: Arc<Counts>,
    slot: Slot,
}

impl Counted {
    fn new(counts: &Arc<Counts>, slot: Slot) -> Counted {
        counts.counter(slot).fetch_add(1, Ordering::SeqCst);
        Counted {
            counts: counts.clone(),
            slot,
        }
    }
}

impl Counts {
    fn counter(&self, slot: Slot) -> &AtomicUsize {
        match slot {
            Slot::Serving => &self.serving,
            Slot::Refusing => &self.refusing,
        }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.counts
            .counter(self.slot)
            .fetch_sub(1, Ordering::SeqCst);
        self.counts.ended.notify_waiters();
    }
}

/// An accept that failed: out of files (the connection stays in the kernel's queue until one
/// is free, it is not refused), or a connection that went away before it was accepted.
async fn pause_after_accept_error(error: &std::io::Error) {
    match error.raw_os_error() {
        Some(libc::ECONNABORTED | libc::EINTR | libc::EPROTO) => {}
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM) => {
            tracing::warn!(%error, "cannot accept a connection now; waiting for a free file");
            tokio::time::sleep(OUT_OF_FILES_PAUSE).await;
        }
        _ => {
            tracing::warn!(%error, "accepting a connection failed");
            tokio::time::sleep(OUT_OF_FILES_PAUSE).await;
        }
    }
}

/// Serves one connection with the app until it closes, or until shutdown (after the request
/// in flight). Until the first request's headers have arrived, the connection lives at most
/// `header_read_timeout` (hyper's own timeout covers each HTTP/1 request after that, but not
/// the bytes it reads to tell HTTP/1 from HTTP/2).
async fn serve_connection<S>(
    stream: S,
    peer: Peer,
    app: Router,
    limits: ConnectionLimits,
    mut stop: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let header_read_timeout = limits.header_read_timeout;
    let first_request = Arc::new(AtomicBool::new(false));
    let seen = first_request.clone();
    let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
        seen.store(true, Ordering::Relaxed);
        request.extensions_mut().insert(peer);
        // A body that stalls, trickles or drags on fails its read (408) instead of holding
        // the connection forever.
        app.clone().oneshot(
            request.map(|body| axum::body::Body::new(PacedBody::new(body, limits.body_pace))),
        )
    });
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(super::timer::KernelTimer)
        .header_read_timeout(header_read_timeout);
    let io = TokioIo::new(JsonParseErrors::new(stream));
    let mut connection = pin!(builder.serve_connection_with_upgrades(io, service));
    let mut first_deadline = super::timer::KernelTimer.sleep(header_read_timeout);
    let mut deadline_done = false;
    let mut stopping = false;
    loop {
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(error) = result {
                    tracing::trace!(%error, "connection ended with an error");
                }
                return;
            }
            () = first_deadline.as_mut(), if !deadline_done => {
                deadline_done = true;
                if !first_request.load(Ordering::Relaxed) {
                    tracing::debug!("no request headers in time; closing the connection");
                    return;
                }
            }
            _ = stop.wait_for(|stop| *stop), if !stopping => {
                stopping = true;
                connection.as_mut().graceful_shutdown();
            }
        }
    }
}

/// Answers every request of a connection past the limit with 503 and `Retry-After`, then
/// closes it. The request is read first: closing a socket with unread data resets it, and the
/// client could lose the answer.
async fn refuse_connection<S>(stream: S, header_read_timeout: Duration)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(|_request: Request<Incoming>| async {
        let mut response = ApiError::Unavailable(
            "the service has too many connections open; retry shortly".to_owned(),
        )
        .into_response();
        response.headers_mut().insert(
            axum::http::header::CONNECTION,
            axum::http::HeaderValue::from_static("close"),
        );
        Ok::<_, Infallible>(response)
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .keep_alive(false)
        .timer(super::timer::KernelTimer)
        .header_read_timeout(header_read_timeout)
        .serve_connection(TokioIo::new(JsonParseErrors::new(stream)), service);
    let _ = tokio::time::timeout(header_read_timeout * 2, connection).await;
}
