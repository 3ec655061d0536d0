//! Where the full-screen chat's events come from: a task that reads the conversation's
//! stream (reconnecting with `Last-Event-ID`, `client::stream`) and hands each event, and each
//! change of the connection, to the app.

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::client::api::{Api, ApiError};
use crate::client::events::ServerEvent;
use crate::client::stream::{self, Events, Next};

pub enum Feed {
    /// Boxed: an event (a snapshot) is large, the other feeds small.
    Event(Box<ServerEvent>),
    /// The stream ended; a new one is being opened.
    Reconnecting,
    Reconnected,
    Lost(String),
}

/// Opens the conversation's stream and starts the task that reads it; `from_start`: from
/// the conversation's first event (one just created here), else from its `snapshot`.
pub async fn follow(
    api: &Api,
    id: &str,
    from_start: bool,
) -> Result<(mpsc::UnboundedReceiver<Feed>, JoinHandle<()>), ApiError> {
    let mut events = if from_start {
        stream::from_first_event(api, id).await?
    } else {
        Events::new(api, id, Vec::new(), api.events(id, None).await?)
    };
    let (sender, receiver) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        loop {
            let feed = match events.pull().await {
                Some(event) => Feed::Event(Box::new(event)),
                None => {
                    if sender.send(Feed::Reconnecting).is_err() {
                        return;
                    }
                    match events.next().await {
                        Next::Event(event) => Feed::Event(event),
                        Next::Reconnected => Feed::Reconnected,
                        Next::Lost(why) => {
                            let _ = sender.send(Feed::Lost(why));
                            return;
                        }
                    }
                }
            };
            if sender.send(feed).is_err() {
                return;
            }
        }
    });
    Ok((receiver, task))
}
