//! Model streams are read on a thread of their own, ahead of the turn that consumes them.
//!
//! Why: reqwest hands a response body over one chunk at a time, each a hop between two tasks.
//! On the service's runtime those hops wait behind every other ready task, so when a turn has a
//! thousand SSE subscribers to serve, reading a provider's burst would take one scheduling round
//! per chunk. Read here, a burst is decoded at once and queued; the turn then takes everything
//! that has arrived in one go and sends clients one merged delta instead of thousands.

use std::sync::LazyLock;

use futures::StreamExt;
use tokio::runtime::{Builder, Handle};
use tokio::sync::mpsc;

use super::{ModelError, ModelEvent, ModelStream};

/// The events of one model call, in order, as they were read. The channel closes after the
/// stream's last event.
pub type ModelEvents = mpsc::UnboundedReceiver<Result<ModelEvent, ModelError>>;

/// The reader thread's runtime. Its connections (reqwest spawns them where a request is first
/// polled) live here too.
static READER: LazyLock<Handle> = LazyLock::new(|| {
    let runtime = Builder::new_current_thread()
        .enable_all()
        .thread_name("model-reader")
        .build()
        .expect("the model reader's runtime starts");
    let handle = runtime.handle().clone();
    std::thread::Builder::new()
        .name("model-reader".to_owned())
        .spawn(move || runtime.block_on(std::future::pending::<()>()))
        .expect("the model reader's thread starts");
    handle
});

/// Starts reading `stream` on the reader thread. Dropping the receiver stops the reading and
/// drops the stream (which closes its connection) without waiting for the next event.
pub fn read_ahead(mut stream: ModelStream) -> ModelEvents {
    let (sender, receiver) = mpsc::unbounded_channel();
    READER.spawn(async move {
        // One future for the whole stream: made anew per event, it would join and leave the
        // channel's list of waiters every time.
        let closed = sender.closed();
        tokio::pin!(closed);
        loop {
            tokio::select! {
                biased;
                () = &mut closed => return,
                next = stream.next() => match next {
                    Some(event) => {
                        if sender.send(event).is_err() {
                            return;
                        }
                    }
                    None => return,
                },
            }
        }
    });
    receiver
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn events_arrive_in_order_and_the_channel_closes_after_the_last() {
        let events = (0..100).map(|n| Ok(ModelEvent::TextDelta(n.to_string())));
        let mut received = read_ahead(futures::stream::iter(events).boxed());
        for n in 0..100 {
            assert_eq!(
                received.recv().await.expect("an event").expect("no error"),
                ModelEvent::TextDelta(n.to_string())
            );
        }
        assert!(received.recv().await.is_none());
    }

    #[tokio::test]
    async fn dropping_the_receiver_drops_a_stream_that_is_waiting() {
        let (dropped, was_dropped) = tokio::sync::oneshot::channel::<()>();
        // A stream that never yields and tells when it is dropped.
        let stream = futures::stream::pending::<Result<ModelEvent, ModelError>>()
            .map(move |event| {
                let _keep = &dropped;
                event
            })
            .boxed();
        drop(read_ahead(stream));
        tokio::time::timeout(std::time::Duration::from_secs(10), was_dropped)
            .await
            .expect("the stream is dropped soon")
            .expect_err("the stream is dropped, not answered");
    }
}
