//! Applying an update's hunks to a file's text, in memory. Hunks are found in order, each
//! after the one before: its `@@` anchors first (each after the previous), then its context and
//! removed lines (exactly, else ignoring whitespace at the ends of lines, see `matching.rs`).
//! Context lines keep the file's own text, so a loosely matched line is not rewritten.

use super::matching::{closest, seek};
use super::patch::{Hunk, HunkLine};

/// `text` (the file `shown`, `\n` endings) with `hunks` applied.
pub(super) fn apply_hunks(text: &str, hunks: &[Hunk], shown: &str) -> Result<String, String> {
    let lines: Vec<&str> = if text.is_empty() {
        Vec::new()
    } else {
        text.strip_suffix('\n')
            .unwrap_or(text)
            .split('\n')
            .collect()
    };
    let mut out: Vec<&str> = Vec::with_capacity(lines.len());
    // Lines before `cursor` are settled: copied to `out` or replaced.
    let mut cursor = 0;
    for (index, hunk) in hunks.iter().enumerate() {
        let which = if hunks.len() == 1 {
            "the hunk".to_owned()
        } else {
            format!("hunk {} of {}", index + 1, hunks.len())
        };
        let mut from = cursor;
        for anchor in &hunk.anchors {
            match seek(&lines, &[anchor.as_str()], from, false) {
                Some(found) => from = found + 1,
                None => {
                    return Err(format!(
                        "{shown}: {which}: the line `@@ {anchor}` was not found{}{}",
                        after(cursor, &lines),
                        hint(text, anchor)
                    ));
                }
            }
        }
        let (start, used) = locate(&lines, hunk, from).ok_or_else(|| {
            let old = hunk.old_lines();
            let anchors = if hunk.anchors.is_empty() {
                String::new()
            } else {
                format!(" after `@@ {}`", hunk.anchors.join("` and `@@ "))
            };
            let listed: Vec<String> = old.iter().map(|line| format!("  {line}")).collect();
            format!(
                "{shown}: {which}: these lines were not found{anchors}{}{}:\n{}{}",
                after(cursor, &lines),
                if hunk.at_end {
                    " at the end of the file"
                } else {
                    ""
                },
                listed.join("\n"),
                hint(text, &old.join("\n"))
            )
        })?;
        out.extend_from_slice(&lines[cursor..start]);
        let mut at = start;
        for line in &hunk.lines[..used] {
            match line {
                HunkLine::Context(_) => {
                    out.push(lines[at]);
                    at += 1;
                }
                HunkLine::Removed(_) => at += 1,
                HunkLine::Added(text) => out.push(text),
            }
        }
        // Added lines after the empty context lines that were dropped to find the hunk.
        for line in &hunk.lines[used..] {
            if let HunkLine::Added(text) = line {
                out.push(text);
            }
        }
        cursor = at;
    }
    out.extend_from_slice(&lines[cursor..]);
    if out.is_empty() {
        return Ok(String::new());
    }
    let mut result = out.join("\n");
    // A file keeps its last newline, or its lack of one; a file that was empty gets one.
    if text.is_empty() || text.ends_with('\n') {
        result.push('\n');
    }
    Ok(result)
}

/// Where the hunk's old lines start (at or after `from`), and how many of its lines that
/// match covers: all of them, or all but trailing empty context lines, which models add for
/// a file's last newline. A hunk with no old lines adds its lines after its anchors, or at
/// the end of the file when it has none.
fn locate(lines: &[&str], hunk: &Hunk, from: usize) -> Option<(usize, usize)> {
    let old = hunk.old_lines();
    if old.is_empty() {
        let start = if hunk.anchors.is_empty() {
            lines.len()
        } else {
            from
        };
        return Some((start, hunk.lines.len()));
    }
    if let Some(start) = seek(lines, &old, from, hunk.at_end) {
        return Some((start, hunk.lines.len()));
    }
    let mut used = hunk.lines.len();
    while used > 0
        && matches!(&hunk.lines[used - 1], HunkLine::Context(text) if text.trim().is_empty())
    {
        used -= 1;
    }
    // Added lines after those empty lines stay; only the context is dropped.
    let kept: Vec<&str> = hunk.lines[..used]
        .iter()
        .filter_map(|line| match line {
            HunkLine::Context(text) | HunkLine::Removed(text) => Some(text.as_str()),
            HunkLine::Added(_) => None,
        })
        .collect();
    if used == hunk.lines.len() || kept.is_empty() {
        return None;
    }
    seek(lines, &kept, from, hunk.at_end).map(|start| (start, used))
}

/// ` after line N` when the search started past the file's first line.
fn after(cursor: usize, lines: &[&str]) -> String {
    if cursor == 0 || lines.is_empty() {
        String::new()
    } else {
        format!(" after line {cursor} (where the previous hunk ended)")
    }
}

/// The file's lines closest to `wanted`, as the end of an error.
fn hint(text: &str, wanted: &str) -> String {
    match closest(text, wanted) {
        Some(lines) => format!("\nThe closest lines of the file:\n{lines}"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::patch::parse_hunks;
    use super::*;

    #[track_caller]
    fn apply(text: &str, diff: &str) -> Result<String, String> {
        apply_hunks(text, &parse_hunks(diff).unwrap(), "f.rs")
    }

    #[test]
    fn hunks_apply_in_order_after_their_anchors() {
        let text = "fn a() {\n    x();\n}\nfn b() {\n    x();\n}\n";
        let changed = apply(text, "@@ fn b() {\n-    x();\n+    y();\n").unwrap();
        assert_eq!(changed, "fn a() {\n    x();\n}\nfn b() {\n    y();\n}\n");

        // Without an anchor the first match wins; a second hunk searches after the first.
        let changed = apply(
            text,
            " fn a() {\n-    x();\n+    z();\n@@\n-    x();\n+    w();\n",
        )
        .unwrap();
        assert_eq!(changed, "fn a() {\n    z();\n}\nfn b() {\n    w();\n}\n");
    }

    #[test]
    fn end_of_file_hunks_match_the_last_lines() {
        let text = "x\ny\nx\n";
        let changed = apply(text, "-x\n+z\n*** End of File\n").unwrap();
        assert_eq!(changed, "x\ny\nz\n");
        // A file without a last newline keeps that.
        let changed = apply("a\nb", " a\n-b\n+c\n").unwrap();
        assert_eq!(changed, "a\nc");
        // Pure additions go after the anchor, or at the end.
        assert_eq!(apply("a\nb\n", "@@ a\n+a2\n").unwrap(), "a\na2\nb\n");
        assert_eq!(apply("a\nb\n", "+c\n").unwrap(), "a\nb\nc\n");
        assert_eq!(apply("", "+c\n").unwrap(), "c\n");
        assert_eq!(apply("a\n", "-a\n").unwrap(), "");
    }

    #[test]
    fn whitespace_at_line_ends_is_forgiven_and_the_files_lines_kept() {
        let text = "    if ok {  \n\treturn;\n    }\n";
        let changed = apply(text, "     if ok {\n-    return;\n+    return 1;\n").unwrap();
        assert_eq!(changed, "    if ok {  \n    return 1;\n    }\n");
        // A trailing empty context line the file does not have is dropped.
        let changed = apply("a\nb\n", " a\n-b\n+c\n \n").unwrap();
        assert_eq!(changed, "a\nc\n");
    }

    #[test]
    fn what_is_not_found_is_named_with_the_closest_lines() {
        let text = "fn main() {\n    let total = 1;\n}\n";
        let error = apply(
            text,
            "@@ fn main() {\n-    let totl = 1;\n+    let t = 2;\n",
        )
        .unwrap_err();
        assert_eq!(
            error,
            "f.rs: the hunk: these lines were not found after `@@ fn main() {`:\n      \
             let totl = 1;\nThe closest lines of the file:\n     2\t    let total = 1;"
        );
        let error = apply(text, "@@ fn other()\n-x\n").unwrap_err();
        assert!(
            error.starts_with("f.rs: the hunk: the line `@@ fn other()` was not found"),
            "{error}"
        );
        let error = apply(text, "-}\n+};\n@@\n-fn main() {\n").unwrap_err();
        assert!(
            error.starts_with(
                "f.rs: hunk 2 of 2: these lines were not found after line 3 (where the \
                 previous hunk ended):\n  fn main() {"
            ),
            "{error}"
        );
    }
}
