//! A request body that must keep coming: one that arrives slower than a minimum rate, or has
//! not ended within a total time, fails its read (the handler's extractor answers 400 in the
//! JSON error shape), so a client that trickles a byte now and then cannot hold a connection
//! (and its file) for ever. The pause between two pieces is bounded apart (`serve`).

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::BoxError;
use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

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
}

/// A body read under a [`BodyPace`].
pub struct PacedBody<B> {
    inner: B,
    pace: BodyPace,
    started: Instant,
    received: u64,
    /// When the body is cut if nothing more arrives: the earlier of the total deadline and
    /// the moment what arrived so far falls below the rate. Moved on by every piece.
    cut_at: Pin<Box<Sleep>>,
}

impl<B> PacedBody<B> {
    pub fn new(inner: B, pace: BodyPace) -> PacedBody<B> {
        let started = Instant::now();
        let mut body = PacedBody {
            inner,
            pace,
            started,
            received: 0,
            cut_at: Box::pin(tokio::time::sleep_until(started)),
        };
        let cut_at = body.cut_at();
        body.cut_at.as_mut().reset(cut_at);
        body
    }

    fn total_deadline(&self) -> Instant {
        self.started + self.pace.total
    }

    /// Until when the bytes received so far keep the body at the minimum rate.
    fn rate_deadline(&self) -> Option<Instant> {
        let rate = self.pace.min_bytes_per_s;
        (rate > 0).then(|| {
            let earned = Duration::from_secs_f64(self.received as f64 / rate as f64);
            self.started + self.pace.grace + earned
        })
    }

    fn cut_at(&self) -> Instant {
        let total = self.total_deadline();
        self.rate_deadline().map_or(total, |rate| rate.min(total))
    }

    /// The error that ends a body too slow at `now`, if it is.
    fn too_slow(&self, now: Instant) -> Option<BoxError> {
        let elapsed = now.saturating_duration_since(self.started);
        if now >= self.total_deadline() {
            return Some(
                format!(
                    "request body timeout: the body did not arrive within {} s",
                    self.pace.total.as_secs()
                )
                .into(),
            );
        }
        if self.rate_deadline().is_some_and(|deadline| now >= deadline) {
            return Some(
                format!(
                    "request body timeout: {} bytes in {:.1} s is slower than the minimum of {} bytes a second",
                    self.received,
                    elapsed.as_secs_f64(),
                    self.pace.min_bytes_per_s
                )
                .into(),
            );
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
                if let Some(data) = frame.data_ref() {
                    this.received += data.len() as u64;
                }
                if !this.inner.is_end_stream()
                    && let Some(error) = this.too_slow(Instant::now())
                {
                    return Poll::Ready(Some(Err(error)));
                }
                let cut_at = this.cut_at();
                this.cut_at.as_mut().reset(cut_at);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => Poll::Ready(Some(Err(error.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match this.cut_at.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    let now = Instant::now();
                    // A timer fires at or after its instant, so this is always an error; the
                    // fallback only guards against a clock that disagrees.
                    let error = this
                        .too_slow(now)
                        .unwrap_or_else(|| "request body timeout".into());
                    Poll::Ready(Some(Err(error)))
                }
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
        }
    }

    #[tokio::test]
    async fn a_body_below_the_rate_is_cut_once_its_allowance_runs_out() {
        let mut body = PacedBody::new(axum::body::Body::empty(), pace());
        assert!(body.too_slow(Instant::now()).is_none());
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
                ..pace()
            },
        );
        assert_eq!(body.cut_at(), body.started + Duration::from_secs(60));
    }
}
