//! hyper answers a request it cannot parse by itself (400, 414 URI too long, 431 headers too
//! large), with an empty body, before any of our code sees the request. The API promises the
//! JSON error shape for every error (`docs/api.md`), so this wrapper of the connection's
//! socket recognises those answers as they are written (an error status with
//! `content-length: 0` and no `content-type`: our own error answers always have a JSON body)
//! and writes the same answer with the JSON body instead. Everything else passes through
//! untouched.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::api::errors::{ErrorBody, ErrorCode};

/// A socket whose hyper-made error answers get the API's JSON body.
pub struct JsonParseErrors<S> {
    inner: S,
    /// A rewritten answer still to be written, and how much of it is written.
    pending: Vec<u8>,
    written: usize,
}

impl<S> JsonParseErrors<S> {
    pub fn new(inner: S) -> JsonParseErrors<S> {
        JsonParseErrors {
            inner,
            pending: Vec::new(),
            written: 0,
        }
    }
}

/// hyper's bodiless error answers, by the start of their status line, with the code and
/// message of the body they get.
pub const ANSWERS: [(&[u8], ErrorCode, &str); 3] = [
    (
        b"HTTP/1.1 400 ",
        ErrorCode::InvalidRequest,
        "the request is not valid HTTP",
    ),
    (
        b"HTTP/1.1 414 ",
        ErrorCode::TooLarge,
        "the request target is too long",
    ),
    (
        b"HTTP/1.1 431 ",
        ErrorCode::TooLarge,
        "the request headers are too large",
    ),
];

/// The answer to write instead of `head`, if `head` is one of hyper's bodiless error answers.
pub fn rewrite(head: &[u8]) -> Option<Vec<u8>> {
    let (status, code, message) = ANSWERS
        .into_iter()
        .find(|(status, _, _)| head.starts_with(status))?;
    let text = std::str::from_utf8(head).ok()?;
    let lower = text.to_ascii_lowercase();
    let bodiless = lower.ends_with("\r\n\r\n")
        && lower.contains("\r\ncontent-length: 0\r\n")
        && !lower.contains("\r\ncontent-type:");
    if !bodiless {
        return None;
    }
    let status_line = &text[..text.find("\r\n")?];
    debug_assert!(status_line.as_bytes().starts_with(status));
    let body =
        serde_json::to_string(&ErrorBody::new(code, message)).expect("an error body is plain JSON");
    Some(
        format!(
            "{status_line}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

impl<S: AsyncWrite + Unpin> JsonParseErrors<S> {
    /// Writes what is left of a rewritten answer.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.pending.len() {
            let n =
                ready!(Pin::new(&mut self.inner).poll_write(cx, &self.pending[self.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        self.pending.clear();
        self.written = 0;
        Poll::Ready(Ok(()))
    }

    /// Takes `bytes` as written when they are an answer to rewrite (the rewrite goes out
    /// instead); `None` when they are to be written as they are.
    fn take_rewritten(
        &mut self,
        cx: &mut Context<'_>,
        bytes: &[u8],
    ) -> Option<Poll<io::Result<usize>>> {
        let replacement = rewrite(bytes)?;
        self.pending = replacement;
        self.written = 0;
        Some(match self.poll_pending(cx) {
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            // Written, or under way (flush and shutdown finish it): either way hyper's bytes
            // count as taken.
            _ => Poll::Ready(Ok(bytes.len())),
        })
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for JsonParseErrors<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for JsonParseErrors<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        if let Some(taken) = this.take_rewritten(cx, buf) {
            return taken;
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        // hyper writes an answer's head as the first slice; an error answer has nothing else.
        let mut filled = bufs.iter().filter(|buf| !buf.is_empty());
        if let (Some(first), None) = (filled.next(), filled.next())
            && let Some(taken) = this.take_rewritten(cx, first)
        {
            return taken;
        }
        Pin::new(&mut this.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::rewrite;

    #[test]
    fn hypers_bodiless_error_answers_get_a_json_body_and_others_pass() {
        let head = b"HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        let rewritten = String::from_utf8(rewrite(head).unwrap()).unwrap();
        let (head, body) = rewritten.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"));
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["error"]["code"], "too_large");

        // Our own answers (with a JSON body), successes, and body bytes pass untouched.
        for passing in [
            &b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 12\r\n\r\n",
            b"{\"error\": 1}",
        ] {
            assert!(rewrite(passing).is_none());
        }
    }
}
