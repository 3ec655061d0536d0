//! One output pipe of a child process, read as text: a chunk at a time, never splitting a
//! UTF-8 character between two chunks.

use tokio::io::{AsyncRead, AsyncReadExt};

use super::output::complete_utf8_prefix_len;

const READ_CHUNK_BYTES: usize = 8192;

/// One output pipe of the command, decoded to text as it is read.
pub(crate) struct Pipe<R> {
    /// `None` once the pipe reached its end (or failed, which ends it too).
    reader: Option<R>,
    buffer: Vec<u8>,
    /// The start of a UTF-8 character whose remaining bytes have not arrived yet.
    pending: Vec<u8>,
}

impl<R: AsyncRead + Unpin> Pipe<R> {
    pub(crate) fn new(reader: Option<R>) -> Pipe<R> {
        Pipe {
            reader,
            buffer: vec![0; READ_CHUNK_BYTES],
            pending: Vec::new(),
        }
    }

    pub(crate) fn is_open(&self) -> bool {
        self.reader.is_some()
    }

    /// Reads the next chunk as text. Cancel safe, as `select!` needs: the only await is the read,
    /// which loses no data when cancelled.
    pub(crate) async fn next_text(&mut self) -> String {
        let Some(reader) = self.reader.as_mut() else {
            return String::new();
        };
        match reader.read(&mut self.buffer).await {
            Ok(read) if read > 0 => {
                self.pending.extend_from_slice(&self.buffer[..read]);
                let complete = complete_utf8_prefix_len(&self.pending);
                let text = String::from_utf8_lossy(&self.pending[..complete]).into_owned();
                self.pending.drain(..complete);
                text
            }
            _ => {
                // The end: a character still incomplete now never will be.
                self.reader = None;
                let text = String::from_utf8_lossy(&self.pending).into_owned();
                self.pending.clear();
                text
            }
        }
    }
}
