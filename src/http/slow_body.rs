//! A request body that must keep coming: one that arrives slower than a minimum rate, or has
//! not ended within a total time, fails its read (the handler's extractor answers 408
//! `request_timeout` in the JSON error shape), so a client that trickles a byte now and then cannot hold a connection
//! (and its file) for ever. The pause between two pieces is bounded apart (`serve`).

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use super::timer::KernelSleep;
use crate::clock::kernel_monotonic;
use axum::BoxError;
use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};

/// How fast a request body must arrive.
#[derive(Debug, Clone, Copy)]
pub struct BodyPace {
    /// The whole body must have arrived within this, from when its headers did.
    pub total: Duration,
    /// After `grace`, at least this many bytes a second on average (0: no minimum).
    pub min_bytes_per_s: u64,
    /// How long a body may take before the rate counts: a small body sent in one piece a
    /// moment after its headers is never cut.
    pub grace: Duration,
    /// The longest pause between two pieces (or before the first).
    pub pause: Duration,
}

/// Why a body was cut: it came too slowly. The extractor answers 408 for it (not 400: the
/// body may well be valid, and a client should send it again).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BodyTimeout(String);

/// A body read under a [`BodyPace`]. Its deadlines are judged on the kernel's monotonic clock
/// (`clock.rs`), and it sleeps on one (`timer::KernelSleep`): a step of the process's clock (a
/// faked clock) wakes it early at most, never cuts it.
pub struct PacedBody<B> {
    inner: B,
    pace: BodyPace,
    /// When its headers arrived, and when its last piece did, on the kernel's clock.
    started: Duration,
    last_piece: Duration,
    received: u64,
    /// Wakes the body when it is due (on the kernel's clock): the earliest of the total
    /// deadline, the pause's end and the moment what arrived so far falls below the rate.
    /// Moved on by every piece.
    wake: KernelSleep,
}

impl<B> PacedBody<B> {
    pub fn new(inner: B, pace: BodyPace) -> PacedBody<B> {
        let started = kernel_monotonic();
        let mut body = PacedBody {
            inner,
            pace,
            started,
            last_piece: started,
            received: 0,
            wake: KernelSleep::until(started),
        };
        body.wake.reset(body.cut_at());
        body
    }

    fn total_deadline(&self) -> Duration {
        self.started + self.pace.total
    }

    /// Until when the bytes received so far keep the body at the minimum rate.
    fn rate_deadline(&self) -> Option<Duration> {
        let rate = self.pace.min_bytes_per_s;
        (rate > 0).then(|| {
            let earned = Duration::from_secs_f64(self.received as f64 / rate as f64);
            self.started + self.pace.grace + earned
        })
    }

    fn pause_deadline(&self) -> Duration {
        self.last_piece + self.pace.pause
    }

    fn cut_at(&self) -> Duration {
        let due = self.total_deadline().min(self.pause_deadline());
        self.rate_deadline().map_or(due, |rate| rate.min(due))
    }

    /// The error that ends a body too slow at `now` (the kernel's clock), if it is.
    fn too_slow(&self, now: Duration) -> Option<BoxError> {
        let elapsed = now.saturating_sub(self.started);
        if now >= self.total_deadline() {
            return Some(Box::new(BodyTimeout(format!(
                "request body timeout: the body did not arrive within {} s",
                self.pace.total.as_secs()
            ))));
        }
        if now >= self.pause_deadline() {
            return Some(Box::new(BodyTimeout(format!(
                "request body timeout: nothing of the body came for {} s",
                self.pace.pause.as_secs()
            ))));
        }
        if self.rate_deadline().is_some_and(|deadline| now >= deadline) {
            return Some(Box::new(BodyTimeout(format!(
                "request body timeout: {} bytes in {:.1} s is slower than the minimum of {} bytes a second",
                self.received,
                elapsed.as_secs_f64(),
                self.pace.min_bytes_per_s
            ))));
        }
        None
    }
}

impl<B> Body for PacedBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let now = kernel_monotonic();
                if let Some(data) = frame.data_ref() {
                    this.received += data.len() as u64;
                    this.last_piece = now;
                }
                if !this.inner.is_end_stream()
                    && let Some(error) = this.too_slow(now)
                {
                    return Poll::Ready(Some(Err(error)));
                }
                let due = this.cut_at();
                this.wake.reset(due);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => Poll::Ready(Some(Err(error.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match Pin::new(&mut this.wake).poll(cx) {
                // Due on the kernel's clock, so always an error; the fallback only guards
                // against a deadline that moved meanwhile.
                Poll::Ready(()) => Poll::Ready(Some(Err(this
                    .too_slow(kernel_monotonic())
                    .unwrap_or_else(|| Box::new(BodyTimeout("request body timeout".to_owned())))))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pace() -> BodyPace {
        BodyPace {
            total: Duration::from_secs(60),
            min_bytes_per_s: 100,
            grace: Duration::from_secs(10),
            pause: Duration::from_secs(30),
        }
    }

    #[tokio::test]
    async fn a_body_below_the_rate_is_cut_once_its_allowance_runs_out() {
        let mut body = PacedBody::new(axum::body::Body::empty(), pace());
        assert!(body.too_slow(kernel_monotonic()).is_none());
        // 500 bytes buy 5 s past the 10 s of grace.
        body.received = 500;
        let start = body.started;
        assert!(body.too_slow(start + Duration::from_secs(14)).is_none());
        let error = body.too_slow(start + Duration::from_secs(15)).unwrap();
        assert!(error.to_string().contains("slower than the minimum of 100"));
    }

    #[tokio::test]
    async fn a_fast_body_is_still_cut_at_the_total_time() {
        let mut body = PacedBody::new(axum::body::Body::empty(), pace());
        body.received = 1_000_000;
        let start = body.started;
        body.last_piece = start + Duration::from_secs(58);
        assert!(body.too_slow(start + Duration::from_secs(59)).is_none());
        let error = body.too_slow(start + Duration::from_secs(60)).unwrap();
        assert!(error.to_string().contains("within 60 s"));
    }

    #[tokio::test]
    async fn no_minimum_rate_leaves_only_the_total_time() {
        let body = PacedBody::new(
            axum::body::Body::empty(),
            BodyPace {
                min_bytes_per_s: 0,
                pause: Duration::from_secs(120),
                ..pace()
            },
        );
        assert_eq!(body.cut_at(), body.started + Duration::from_secs(60));
    }

    #[tokio::test]
    async fn a_pause_between_pieces_is_bounded_from_the_last_piece() {
        let mut body = PacedBody::new(axum::body::Body::empty(), pace());
        body.received = 1_000_000;
        let start = body.started;
        assert!(body.too_slow(start + Duration::from_secs(29)).is_none());
        let error = body.too_slow(start + Duration::from_secs(30)).unwrap();
        assert!(
            error
                .to_string()
                .contains("nothing of the body came for 30 s")
        );
        body.last_piece = start + Duration::from_secs(25);
        assert!(body.too_slow(start + Duration::from_secs(54)).is_none());
    }
}
