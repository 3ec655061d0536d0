//! Percentiles and medians of the samples, and the formatting of the results (milliseconds,
//! megabytes, thousands, a target met or not).

use std::time::Duration;

pub(crate) fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "**not met**" }
}

pub(crate) fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

pub(crate) fn mb(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

/// The nearest-rank percentile of unsorted samples (`fraction` in 0..=1).
pub(crate) fn percentile(samples: &[Duration], fraction: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let rank = ((fraction * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// The nearest-rank percentile of sorted microsecond samples.
pub(crate) fn percentile_us(sorted: &[u32], fraction: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((fraction * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

pub(crate) fn median_duration(samples: &[Duration]) -> Duration {
    Duration::from_secs_f64(median(
        &samples
            .iter()
            .map(Duration::as_secs_f64)
            .collect::<Vec<_>>(),
    ))
}

pub(crate) fn median(samples: &[f64]) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[middle]
    } else {
        (sorted[middle - 1] + sorted[middle]) / 2.0
    }
}

pub(crate) fn plural(count: usize, noun: &str) -> String {
    let count_text = thousands(count as u64);
    if count == 1 {
        format!("{count_text} {noun}")
    } else {
        format!("{count_text} {noun}s")
    }
}

pub(crate) fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::new();
    for (position, digit) in digits.chars().enumerate() {
        if position > 0 && (digits.len() - position).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let samples: Vec<_> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&samples, 0.50), Duration::from_millis(50));
        assert_eq!(percentile(&samples, 0.99), Duration::from_millis(99));
        assert_eq!(median(&[3.0, 1.0, 2.0, 4.0]), 2.5);
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn microsecond_percentiles_use_the_nearest_rank() {
        let sorted: Vec<u32> = (1..=100).collect();
        assert_eq!(percentile_us(&sorted, 0.99), 99);
        assert_eq!(percentile_us(&[], 0.5), 0);
    }
}
