//! When a delivery is tried again: five tries over about ten minutes (at about 0 s, 30 s,
//! 2 min, 5 min and 10 min), each wait moved by up to a fifth either way so that deliveries
//! that failed together do not all come back at once.
//!
//! `OPENVAALA_WEBHOOK_BACKOFF_MS`, read at start, replaces the first wait (30 s) and scales the
//! others with it. It is for tests, which cannot wait minutes; a service in use leaves it
//! unset.

use std::time::Duration;

use sha2::{Digest, Sha256};

/// Tries of one delivery, the first included.
pub const MAX_ATTEMPTS: u32 = 5;

/// The wait after each failed try but the last, in units of the first wait.
const STEPS: [u32; MAX_ATTEMPTS as usize - 1] = [1, 3, 6, 10];

/// The first wait unless the environment says.
const UNIT: Duration = Duration::from_secs(30);

/// The variable that shortens the waits for tests.
pub const ENV: &str = "OPENVAALA_WEBHOOK_BACKOFF_MS";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    unit: Duration,
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff { unit: UNIT }
    }
}

impl Backoff {
    /// The schedule `OPENVAALA_WEBHOOK_BACKOFF_MS` asks for, or the default one.
    pub fn from_env() -> Result<Backoff, String> {
        match std::env::var(ENV) {
            Err(_) => Ok(Backoff::default()),
            Ok(text) => Backoff::from_text(&text),
        }
    }

    fn from_text(text: &str) -> Result<Backoff, String> {
        match text.trim().parse::<u64>() {
            Ok(ms) if ms > 0 => Ok(Backoff {
                unit: Duration::from_millis(ms),
            }),
            _ => Err(format!(
                "{ENV} must be a whole number of milliseconds above 0 (the first wait between \
                 webhook tries, for tests), not `{text}`"
            )),
        }
    }

    /// The wait before the next try of delivery `id` after its `failed`-th failed try; `None`
    /// once it has had its last try.
    pub fn after(&self, failed: u32, id: &str) -> Option<Duration> {
        let step = STEPS.get(usize::try_from(failed.checked_sub(1)?).ok()?)?;
        let wait = self.unit * *step;
        Some(wait.mul_f64(1.0 + jitter(id, failed)))
    }
}

/// A fraction in [-0.2, 0.2), the same for the same delivery and try (so a test can know it)
/// but spread across deliveries.
fn jitter(id: &str, failed: u32) -> f64 {
    let digest = Sha256::new()
        .chain_update(id.as_bytes())
        .chain_update(failed.to_le_bytes())
        .finalize();
    let spread = u16::from_le_bytes([digest[0], digest[1]]);
    (f64::from(spread) / 65536.0 - 0.5) * 0.4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_tries_over_about_ten_minutes_with_jitter() {
        let backoff = Backoff::default();
        for id in ["msg_a", "msg_b", "msg_c"] {
            let waits: Vec<Duration> = (1..MAX_ATTEMPTS)
                .map(|failed| backoff.after(failed, id).unwrap())
                .collect();
            let nominal = [30, 90, 180, 300];
            for (wait, nominal) in waits.iter().zip(nominal) {
                let nominal = Duration::from_secs(nominal);
                assert!(
                    *wait >= nominal.mul_f64(0.8) && *wait < nominal.mul_f64(1.2),
                    "{wait:?} against {nominal:?}"
                );
            }
            let total: Duration = waits.iter().sum();
            assert!(
                (Duration::from_secs(8 * 60)..Duration::from_secs(12 * 60)).contains(&total),
                "the last try comes about 10 minutes after the first: {total:?}"
            );
            assert_eq!(backoff.after(MAX_ATTEMPTS, id), None, "five tries at most");
            assert_eq!(backoff.after(0, id), None);
        }
        // The same try of another delivery comes at another moment.
        assert_ne!(backoff.after(1, "msg_a"), backoff.after(1, "msg_b"));
        assert_eq!(backoff.after(1, "msg_a"), backoff.after(1, "msg_a"));
    }

    #[test]
    fn the_test_setting_scales_the_schedule_and_refuses_nonsense() {
        let backoff = Backoff::from_text("50").unwrap();
        let first = backoff.after(1, "msg_a").unwrap();
        assert!(
            (Duration::from_millis(40)..Duration::from_millis(60)).contains(&first),
            "{first:?}"
        );
        let last = backoff.after(4, "msg_a").unwrap();
        assert!(
            (Duration::from_millis(400)..Duration::from_millis(600)).contains(&last),
            "{last:?}"
        );
        for bad in ["", "0", "-5", "fast", "1.5"] {
            let error = Backoff::from_text(bad).unwrap_err();
            assert!(error.contains(ENV), "{error}");
        }
    }
}
