//! Finding lines in a file, and helping a model that looked for text the file does not hold:
//! [`seek`] finds a run of lines, exactly first, then ignoring whitespace at the ends of lines
//! (models often drop or add it); [`closest`] shows the file's lines most like what was looked
//! for, numbered, so the model can correct its next call.

use std::collections::HashMap;

/// How strictly two lines must agree, from the strictest: tried in this order over the whole
/// search range, so a looser reading never wins over a stricter one further down.
const PASSES: [fn(&str, &str) -> bool; 3] = [
    |file, wanted| file == wanted,
    |file, wanted| file.trim_end() == wanted.trim_end(),
    |file, wanted| file.trim() == wanted.trim(),
];

/// The first index `i >= from` where `wanted` matches `lines[i..]`, by the strictest pass that
/// finds one. With `at_end`, a match that ends the file is tried first.
pub(super) fn seek(lines: &[&str], wanted: &[&str], from: usize, at_end: bool) -> Option<usize> {
    if wanted.len() > lines.len() {
        return None;
    }
    let last_start = lines.len() - wanted.len();
    let matches_at = |start: usize, same: fn(&str, &str) -> bool| {
        lines[start..start + wanted.len()]
            .iter()
            .zip(wanted)
            .all(|(file, wanted)| same(file, wanted))
    };
    if at_end && last_start >= from && PASSES.iter().any(|same| matches_at(last_start, *same)) {
        return Some(last_start);
    }
    PASSES
        .iter()
        .find_map(|same| (from..=last_start).find(|start| matches_at(*start, *same)))
}

/// How many lines of context a hint shows at most per candidate.
const HINT_LINES: usize = 6;
/// How many candidates a hint shows.
const HINT_CANDIDATES: usize = 3;
/// Longer lines are cut in a hint.
const HINT_LINE_CHARS: usize = 200;

/// The lines of `text` most like the first line of `wanted` that has text, each with the lines
/// after it (as many as `wanted` has, up to a few), numbered from 1. `None` when no line is
/// alike enough to help.
pub(super) fn closest(text: &str, wanted: &str) -> Option<String> {
    let first = wanted
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())?;
    let wanted_lines = wanted.lines().count().clamp(1, HINT_LINES);
    let lines: Vec<&str> = text.lines().collect();
    let target = bigrams(first);
    let mut scored: Vec<(f64, usize)> = lines
        .iter()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(index, line)| (similarity(&target, first, line.trim()), index))
        .filter(|(score, _)| *score >= 0.5)
        .collect();
    // The best first; among equals, the earliest.
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut shown: Vec<(usize, usize)> = Vec::new();
    for (_, index) in scored {
        if shown.len() == HINT_CANDIDATES {
            break;
        }
        // A candidate inside one already shown adds nothing.
        if shown
            .iter()
            .any(|(start, end)| (*start..*end).contains(&index))
        {
            continue;
        }
        shown.push((index, (index + wanted_lines).min(lines.len())));
    }
    if shown.is_empty() {
        return None;
    }
    let blocks: Vec<String> = shown
        .iter()
        .map(|(start, end)| numbered(&lines[*start..*end], *start + 1))
        .collect();
    Some(blocks.join("\n  ...\n"))
}

/// `lines` numbered from `first` like `cat -n`, long lines cut.
pub(super) fn numbered(lines: &[&str], first: usize) -> String {
    let mut out = String::new();
    for (offset, line) in lines.iter().enumerate() {
        if offset > 0 {
            out.push('\n');
        }
        let shown: String = line.chars().take(HINT_LINE_CHARS).collect();
        let cut = if shown.len() < line.len() { "…" } else { "" };
        out.push_str(&format!("{:>6}\t{shown}{cut}", first + offset));
    }
    out
}

/// The character pairs of `text`, counted.
fn bigrams(text: &str) -> HashMap<(char, char), usize> {
    let chars: Vec<char> = text.chars().collect();
    let mut counts = HashMap::new();
    for pair in chars.windows(2) {
        *counts.entry((pair[0], pair[1])).or_insert(0) += 1;
    }
    counts
}

/// How alike two lines are, from 0 to 1: the share of character pairs they have in common
/// (Dice's coefficient), or equality for lines too short to have pairs.
fn similarity(target: &HashMap<(char, char), usize>, wanted: &str, line: &str) -> f64 {
    if wanted == line {
        return 1.0;
    }
    let mut candidate = bigrams(line);
    let (wanted_pairs, line_pairs): (usize, usize) =
        (target.values().sum(), candidate.values().sum());
    if wanted_pairs == 0 || line_pairs == 0 {
        return 0.0;
    }
    let mut shared = 0;
    for (pair, count) in target {
        if let Some(other) = candidate.get_mut(pair) {
            let common = (*count).min(*other);
            shared += common;
            *other -= common;
        }
    }
    2.0 * shared as f64 / (wanted_pairs + line_pairs) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seek_prefers_exact_then_trailing_then_surrounding_whitespace() {
        let lines = ["fn a() {", "  x  ", "}", "  x", "x"];
        assert_eq!(seek(&lines, &["x"], 0, false), Some(4));
        assert_eq!(seek(&lines, &["  x"], 0, false), Some(3));
        assert_eq!(seek(&lines, &["  x", "}"], 0, false), Some(1));
        assert_eq!(seek(&lines, &["  x  "], 2, false), Some(3));
        assert_eq!(seek(&lines, &["\tx"], 0, false), Some(1));
        assert_eq!(seek(&lines, &["fn a() {", "x"], 0, false), Some(0));
        assert_eq!(seek(&lines, &["y"], 0, false), None);
        assert_eq!(seek(&lines, &["x"], 5, false), None);
        // At the end first, else anywhere after `from`.
        assert_eq!(seek(&lines, &["  x"], 0, true), Some(4));
        assert_eq!(seek(&lines, &["}"], 0, true), Some(2));
        assert_eq!(seek(&[], &["x"], 0, true), None);
    }

    #[test]
    fn closest_numbers_the_most_similar_lines() {
        let text = "use std::io;\n\nfn main() {\n    let x = 1;\n    println!(\"{x}\");\n}\n";
        let hint = closest(text, "    let x = 2;\n    println!(\"{x}\");").unwrap();
        assert_eq!(
            hint,
            "     4\t    let x = 1;\n     5\t    println!(\"{x}\");"
        );
        assert_eq!(closest(text, "completely different words"), None);
        assert_eq!(closest(text, "\n  \n"), None);
    }
}
