//! A turn's tokens and cost, and a conversation's cost, as the terminal clients write them: the
//! web UI's wording and rounding, so that a figure reads the same wherever it is seen.

use crate::domain::TurnUsage;

/// `688 in (612 cached) · 61 out · cost 0.0123`: what a turn's model calls read (the part
/// read from the provider's prompt cache when there is one) and wrote, and what that cost when
/// the model has a price. `None` when no call reported anything (a turn stopped before its
/// model answered, a provider that counts nothing): a row of zeros would be a made-up figure.
pub fn turn_usage(usage: &TurnUsage) -> Option<String> {
    if usage.model_calls == usage.unreported_calls {
        return None;
    }
    let mut text = format!("{} in", tokens(usage.input_tokens));
    if usage.cached_input_tokens > 0 {
        text += &format!(" ({} cached)", tokens(usage.cached_input_tokens));
    }
    text += &format!(" · {} out", tokens(usage.output_tokens));
    if let Some(cost) = usage.cost {
        text += &format!(" · cost {}", turn_cost(cost));
    }
    Some(text)
}

/// 12.3k, 128k, 1.2M: short figures where space is tight (rounded half up, in whole numbers,
/// so no float rounding decides a digit).
pub fn tokens(n: u64) -> String {
    let short = |unit: u64, suffix: &str| {
        if n >= 10 * unit {
            format!("{}{suffix}", (n + unit / 2) / unit)
        } else {
            let tenths = (n * 10 + unit / 2) / unit;
            format!("{}.{}{suffix}", tenths / 10, tenths % 10)
        }
    };
    if n >= 1_000_000 {
        short(1_000_000, "M")
    } else if n >= 1_000 {
        short(1_000, "k")
    } else {
        n.to_string()
    }
}

/// A turn's cost in the currency units of the models' prices: cents where they matter, more
/// digits for the fractions of a cent one call costs.
pub fn turn_cost(cost: f64) -> String {
    if cost >= 1.0 {
        format!("{cost:.2}")
    } else if cost >= 0.01 {
        format!("{cost:.3}")
    } else {
        format!("{cost:.4}")
    }
}

/// `cost 1.25`: what a conversation's turns have cost so far.
pub fn conversation_cost(cost: f64) -> String {
    if cost >= 1.0 {
        format!("cost {cost:.2}")
    } else {
        format!("cost {cost:.4}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, cached: u64, output: u64, cost: Option<f64>) -> TurnUsage {
        TurnUsage {
            model_calls: 2,
            input_tokens: input,
            output_tokens: output,
            cached_input_tokens: cached,
            cost,
            ..TurnUsage::default()
        }
    }

    #[test]
    fn a_turn_shows_its_cached_part_and_cost_only_when_there_are_some() {
        let line = |u: TurnUsage| turn_usage(&u).unwrap();
        assert_eq!(
            line(usage(688, 612, 61, Some(0.0123))),
            "688 in (612 cached) · 61 out · cost 0.012"
        );
        assert_eq!(line(usage(688, 0, 61, None)), "688 in · 61 out");
        assert_eq!(
            line(usage(12_345, 10_000, 1_500, Some(0.000_333))),
            "12k in (10k cached) · 1.5k out · cost 0.0003"
        );
        assert_eq!(
            line(usage(5, 0, 1, Some(0.0))),
            "5 in · 1 out · cost 0.0000"
        );
    }

    #[test]
    fn a_turn_whose_calls_reported_nothing_shows_no_figures() {
        assert_eq!(turn_usage(&TurnUsage::default()), None);
        let unreported = TurnUsage {
            model_calls: 1,
            unreported_calls: 1,
            ..TurnUsage::default()
        };
        assert_eq!(turn_usage(&unreported), None);
    }

    #[test]
    fn token_counts_shorten_as_they_grow() {
        let shown: Vec<String> = [0, 999, 1_000, 1_050, 1_949, 9_999, 10_000, 128_400]
            .into_iter()
            .chain([999_999, 1_000_000, 1_250_000, 12_600_000])
            .map(tokens)
            .collect();
        assert_eq!(
            shown,
            [
                "0", "999", "1.0k", "1.1k", "1.9k", "10.0k", "10k", "128k", "1000k", "1.0M",
                "1.3M", "13M"
            ]
        );
    }

    #[test]
    fn costs_keep_the_digits_that_matter() {
        assert_eq!(turn_cost(2.346), "2.35");
        assert_eq!(turn_cost(0.0456), "0.046");
        assert_eq!(turn_cost(0.00123), "0.0012");
        assert_eq!(conversation_cost(12.5), "cost 12.50");
        assert_eq!(conversation_cost(0.0456), "cost 0.0456");
    }
}
