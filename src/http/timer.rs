//! hyper's timer (how long a connection may take to send its request headers), with its
//! deadlines judged on the kernel's monotonic clock (`crate::clock`). tokio's timers run on the
//! process's clock, which a preloaded library can fake and step: on a step they would all
//! fire at once, and hyper would close connections whose headers were still arriving. Here a
//! timer that fires early sleeps on for what really remains.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::rt::{Sleep, Timer};

use crate::clock::kernel_monotonic;

#[derive(Clone, Debug, Default)]
pub struct KernelTimer;

impl Timer for KernelTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Sleep>> {
        Box::pin(KernelSleep::until(kernel_monotonic() + duration))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn Sleep>> {
        // The deadline was reckoned a moment ago on the process's clock: what remains of it
        // now is waited on the kernel's.
        let remaining = deadline.saturating_duration_since(Instant::now());
        Box::pin(KernelSleep::until(kernel_monotonic() + remaining))
    }
}

/// A sleep until a moment on the kernel's clock (`due`, as `kernel_monotonic` tells time).
pub struct KernelSleep {
    due: Duration,
    sleep: Pin<Box<tokio::time::Sleep>>,
}

impl KernelSleep {
    pub fn until(due: Duration) -> KernelSleep {
        let mut sleep = KernelSleep {
            due,
            sleep: Box::pin(tokio::time::sleep(Duration::ZERO)),
        };
        sleep.reset(due);
        sleep
    }

    /// Sleeps until `due` instead.
    pub fn reset(&mut self, due: Duration) {
        self.due = due;
        let remaining = due.saturating_sub(kernel_monotonic());
        self.sleep
            .as_mut()
            .reset(tokio::time::Instant::now() + remaining);
    }
}

impl Future for KernelSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            if self.sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            if kernel_monotonic() >= self.due {
                return Poll::Ready(());
            }
            // Woken early (the process's clock stepped): asleep again for what remains.
            let due = self.due;
            self.reset(due);
        }
    }
}

impl Sleep for KernelSleep {}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_sleep_ends_once_its_time_has_passed_on_the_kernels_clock() {
        let started = kernel_monotonic();
        KernelTimer.sleep(Duration::from_millis(30)).await;
        assert!(kernel_monotonic() - started >= Duration::from_millis(30));
        let started = kernel_monotonic();
        KernelTimer
            .sleep_until(Instant::now() + Duration::from_millis(20))
            .await;
        assert!(kernel_monotonic() - started >= Duration::from_millis(19));
    }
}
