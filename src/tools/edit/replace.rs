//! Exact replacement, as `edit_file` and the text editor's `str_replace` do it: the old text
//! must occur exactly once (or every occurrence is replaced when asked); otherwise an error
//! that lets the model correct itself: how many matches and where, or the file's closest lines.

use super::matching::{closest, numbered, seek};

/// How many matches' lines an error names.
const SHOWN_MATCHES: usize = 10;

/// What the parameters are called in the tool the model used, for its error messages.
#[derive(Debug, Clone, Copy)]
pub(super) struct Names {
    pub old: &'static str,
    pub new: &'static str,
    /// The flag that replaces every occurrence, when the tool has one.
    pub all: Option<&'static str>,
}

/// The text after a replacement, and where it landed.
#[derive(Debug)]
pub(super) struct Replaced {
    pub text: String,
    /// The lines (1-based, inclusive, in the new text) each replacement covers.
    pub spans: Vec<(usize, usize)>,
}

/// Replaces `old` (not empty) by `new` in `text`, the file `shown`.
pub(super) fn replace(
    text: &str,
    old: &str,
    new: &str,
    all: bool,
    shown: &str,
    names: Names,
) -> Result<Replaced, String> {
    let starts: Vec<usize> = text.match_indices(old).map(|(start, _)| start).collect();
    if starts.is_empty() {
        return Err(not_found(text, old, shown, names));
    }
    if starts.len() > 1 && !all {
        // A few lines say where; thousands would flood the model's context.
        let mut lines: Vec<String> = starts
            .iter()
            .take(SHOWN_MATCHES)
            .map(|start| line_of(text, *start).to_string())
            .collect();
        if starts.len() > SHOWN_MATCHES {
            lines.push("…".to_owned());
        }
        let advice = match names.all {
            Some(flag) => format!("give more context or set {flag}"),
            None => "give more context to make it unique".to_owned(),
        };
        return Err(format!(
            "found {} matches of {} in {shown} (at lines {}); {advice}",
            starts.len(),
            names.old,
            lines.join(", ")
        ));
    }
    let mut result = String::with_capacity(text.len());
    let mut spans = Vec::with_capacity(starts.len());
    let mut copied = 0;
    // Lines counted incrementally, so many replacements do not rescan the text.
    let mut line = 1;
    let new_lines = new.matches('\n').count();
    let covered = if new.is_empty() {
        1
    } else {
        new_lines + usize::from(!new.ends_with('\n'))
    };
    for start in starts {
        line += text[copied..start].matches('\n').count();
        result.push_str(&text[copied..start]);
        result.push_str(new);
        spans.push((line, line + covered.max(1) - 1));
        line += new_lines;
        copied = start + old.len();
    }
    result.push_str(&text[copied..]);
    Ok(Replaced {
        text: result,
        spans,
    })
}

/// The 1-based line of the byte `at` of `text`.
fn line_of(text: &str, at: usize) -> usize {
    text[..at].matches('\n').count() + 1
}

/// `lines 3-5` or `line 3`, for each span, joined.
pub(super) fn describe_spans(spans: &[(usize, usize)]) -> String {
    let parts: Vec<String> = spans
        .iter()
        .map(|(start, end)| {
            if start == end {
                start.to_string()
            } else {
                format!("{start}-{end}")
            }
        })
        .collect();
    let single = spans.len() == 1 && spans[0].0 == spans[0].1;
    format!(
        "{} {}",
        if single { "line" } else { "lines" },
        parts.join(", ")
    )
}

/// Why `old` was not found in `text`: where it would match if whitespace at the ends of its
/// lines were ignored, else the file's closest lines.
fn not_found(text: &str, old: &str, shown: &str, names: Names) -> String {
    let head = format!("{} was not found in {shown}", names.old);
    let lines: Vec<&str> = text.lines().collect();
    let wanted: Vec<&str> = old.lines().collect();
    if !wanted.is_empty()
        && let Some(start) = seek(&lines, &wanted, 0, false)
    {
        let end = start + wanted.len();
        return format!(
            "{head}; it matches lines {}-{} only if whitespace at the ends of lines is \
             ignored; copy those lines exactly:\n{}",
            start + 1,
            end,
            numbered(&lines[start..end], start + 1)
        );
    }
    match closest(text, old) {
        Some(hint) => format!(
            "{head}. The closest lines of {shown} (line numbers first, then a tab):\n{hint}"
        ),
        None => format!("{head}, and no line of {shown} is like its first line"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EDIT: Names = Names {
        old: "old_string",
        new: "new_string",
        all: Some("replace_all"),
    };

    #[test]
    fn a_unique_match_is_replaced_and_located() {
        let text = "a\nb\nc\nd\n";
        let replaced = replace(text, "b\nc\n", "B\nC\nC2\n", false, "x.rs", EDIT).unwrap();
        assert_eq!(replaced.text, "a\nB\nC\nC2\nd\n");
        assert_eq!(replaced.spans, [(2, 4)]);
        assert_eq!(describe_spans(&replaced.spans), "lines 2-4");

        let replaced = replace(text, "c", "", false, "x.rs", EDIT).unwrap();
        assert_eq!(replaced.text, "a\nb\n\nd\n");
        assert_eq!(describe_spans(&replaced.spans), "line 3");
    }

    #[test]
    fn several_matches_need_replace_all() {
        let text = "x = 1\ny = 2\nx = 1\n\nx = 1";
        let error = replace(text, "x = 1", "x = 3", false, "x.rs", EDIT).unwrap_err();
        assert_eq!(
            error,
            "found 3 matches of old_string in x.rs (at lines 1, 3, 5); give more context or \
             set replace_all"
        );
        let replaced = replace(text, "x = 1", "x = 3\n#", true, "x.rs", EDIT).unwrap();
        assert_eq!(replaced.text, "x = 3\n#\ny = 2\nx = 3\n#\n\nx = 3\n#");
        assert_eq!(replaced.spans, [(1, 2), (4, 5), (7, 8)]);
        assert_eq!(describe_spans(&replaced.spans), "lines 1-2, 4-5, 7-8");

        let many = "x\n".repeat(12);
        let error = replace(&many, "x", "y", false, "x.rs", EDIT).unwrap_err();
        assert_eq!(
            error,
            "found 12 matches of old_string in x.rs (at lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, …); \
             give more context or set replace_all"
        );
    }

    #[test]
    fn a_missing_match_shows_the_closest_lines() {
        let text = "fn main() {\n    let total = 1;\n    run(total);\n}\n";
        let error =
            replace(text, "let totl = 1;\nrun(totl);", "", false, "m.rs", EDIT).unwrap_err();
        assert_eq!(
            error,
            "old_string was not found in m.rs. The closest lines of m.rs (line numbers first, \
             then a tab):\n     2\t    let total = 1;\n     3\t    run(total);"
        );

        let error = replace(
            text,
            "let total = 1;  \nrun(total);",
            "",
            false,
            "m.rs",
            EDIT,
        )
        .unwrap_err();
        assert!(
            error.starts_with(
                "old_string was not found in m.rs; it matches lines 2-3 only if whitespace"
            ),
            "{error}"
        );
        assert!(error.ends_with("     2\t    let total = 1;\n     3\t    run(total);"));

        let error = replace(text, "zzzz qqqq", "", false, "m.rs", EDIT).unwrap_err();
        assert_eq!(
            error,
            "old_string was not found in m.rs, and no line of m.rs is like its first line"
        );
    }
}
