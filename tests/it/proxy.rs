//! A TCP proxy between two cluster instances: the link a test breaks. It forwards bytes both
//! ways to a target set after it starts (so an instance can be advertised at the proxy's
//! address before it listens), and can freeze every connection (bytes stop, sockets stay open:
//! a hung NAT, a paused VM's network) or reset them (RST, as a dropped NAT entry answers).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub struct Proxy {
    pub addr: SocketAddr,
    target: Arc<Mutex<Option<SocketAddr>>>,
    frozen: watch::Sender<bool>,
    /// Bumped to reset every connection open now.
    resets: watch::Sender<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Proxy {
    pub async fn start() -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let target = Arc::new(Mutex::new(None));
        let (frozen, _) = watch::channel(false);
        let (resets, _) = watch::channel(0);
        let task = tokio::spawn(accept(
            listener,
            target.clone(),
            frozen.clone(),
            resets.clone(),
        ));
        Proxy {
            addr,
            target,
            frozen,
            resets,
            task,
        }
    }

    pub fn forward_to(&self, target: &str) {
        *self.target.lock().unwrap() = Some(target.parse().expect("a host:port"));
    }

    pub fn freeze(&self, frozen: bool) {
        self.frozen.send_replace(frozen);
    }

    pub fn reset(&self) {
        self.resets.send_modify(|resets| *resets += 1);
    }
}

async fn accept(
    listener: TcpListener,
    target: Arc<Mutex<Option<SocketAddr>>>,
    frozen: watch::Sender<bool>,
    resets: watch::Sender<u64>,
) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            return;
        };
        let Some(to) = *target.lock().unwrap() else {
            continue;
        };
        let (frozen, resets) = (frozen.subscribe(), resets.subscribe());
        tokio::spawn(async move {
            let Ok(server) = TcpStream::connect(to).await else {
                return;
            };
            link(client, server, frozen, resets).await;
        });
    }
}

/// Carries one connection until either side closes it or a reset comes.
async fn link(
    client: TcpStream,
    server: TcpStream,
    frozen: watch::Receiver<bool>,
    mut resets: watch::Receiver<u64>,
) {
    resets.borrow_and_update();
    // Closed by a reset, each socket sends RST rather than FIN.
    let _ = client.set_zero_linger();
    let _ = server.set_zero_linger();
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = pump(client_read, server_write, frozen.clone());
    let down = pump(server_read, client_write, frozen);
    tokio::select! {
        (client_write, server_write) = async { tokio::join!(up, down) } => {
            drop((client_write, server_write));
        }
        // The pumps own the halves: dropping them closes both sockets, with RST.
        _ = resets.changed() => {}
    }
}

/// Copies one direction, holding the bytes while frozen; gives the writing half back.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut frozen: watch::Receiver<bool>,
) -> tokio::net::tcp::OwnedWriteHalf {
    let mut buffer = vec![0; 16 * 1024];
    loop {
        while *frozen.borrow_and_update() {
            if frozen.changed().await.is_err() {
                return to;
            }
        }
        let read = tokio::select! {
            read = from.read(&mut buffer) => read,
            _ = frozen.changed() => continue,
        };
        let Ok(read) = read else { return to };
        if read == 0 {
            let _ = to.shutdown().await;
            return to;
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            return to;
        }
    }
}

/// How long a test waits for a stream to end at most: a few times the silence after which a
/// forwarder gives a link up.
pub const STREAM_END_WAIT: Duration = Duration::from_secs(15);
