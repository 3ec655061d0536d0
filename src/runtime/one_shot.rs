//! One model call without tools whose whole answer is its text: the title a `title_model`
//! writes, a completion an MCP server asks for. Nothing of it is stored as an item.

use std::sync::Arc;
use std::time::Duration;

use crate::model::{ModelClient, ModelEvent, ModelRequest, TokenUsage, reader};

/// The text the model wrote, and its provider's token report if it sent one.
#[derive(Debug)]
pub struct Written {
    pub text: String,
    pub usage: Option<TokenUsage>,
}

/// Streams `request` to its end within `timeout`; `Err` says why there is no text (`what`
/// names the model in it: "the title model").
pub async fn write(
    client: Arc<dyn ModelClient>,
    request: ModelRequest,
    timeout: Duration,
    what: &str,
) -> Result<Written, String> {
    tokio::time::timeout(timeout, async {
        let mut events = reader::read_ahead(client.stream(request));
        let mut written = Written {
            text: String::new(),
            usage: None,
        };
        while let Some(event) = events.recv().await {
            match event {
                Ok(ModelEvent::TextDelta(delta)) => written.text.push_str(&delta),
                Ok(ModelEvent::Usage(usage)) => written.usage = Some(usage),
                Ok(ModelEvent::Done) => return Ok(written),
                Ok(_) => {}
                Err(error) => return Err(crate::redact::model_error(error).to_string()),
            }
        }
        Err(format!("{what}'s stream ended early"))
    })
    .await
    .map_err(|_| format!("{what} took too long"))?
}
