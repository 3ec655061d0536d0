//! Text as a person reads it: one line without control characters, without Markdown's marks,
//! without `[[…]]` cues, and without the lines that only drive the demo model. Titles and
//! search snippets are made of it.

/// A line as one line of a sidebar shows it: control characters (a NUL, a tab, a line
/// break) become spaces.
pub fn without_controls(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// The lines of a message as a person reads them: not blank, without Markdown's marks and
/// `[[…]]` markers, and without the lines that only drive the demo model (`/echo hi`).
pub fn readable_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(|line| without_markdown(&without_markers(&without_controls(line))))
        .filter(|line| !line.is_empty() && !crate::model::demo::is_directive(line))
        .collect()
}

/// A line without `[[…]]` markers (a scripted model's cues, never what a message says).
pub fn without_markers(line: &str) -> String {
    let mut kept = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(start) = rest.find("[[") {
        let Some(length) = rest[start..].find("]]") else {
            break;
        };
        kept.push_str(&rest[..start]);
        rest = &rest[start + length + 2..];
    }
    kept.push_str(rest);
    kept
}

/// The line as read, without Markdown's marks: a heading's `#`s, a quote's `>`, a list's
/// bullet or number, and emphasis and code marks (`**`, `__`, `~~`, `` ` ``).
pub fn without_markdown(line: &str) -> String {
    let mut rest = line.trim_start();
    loop {
        let before = rest;
        rest = rest
            .trim_start_matches('#')
            .trim_start_matches('>')
            .trim_start();
        for bullet in ["- ", "* ", "+ "] {
            rest = rest.strip_prefix(bullet).unwrap_or(rest);
        }
        if let Some((number, after)) = rest.split_once(". ")
            && !number.is_empty()
            && number.chars().all(|c| c.is_ascii_digit())
        {
            rest = after;
        }
        if rest == before {
            break;
        }
    }
    let mut text = rest.to_owned();
    for mark in ["**", "__", "~~", "`"] {
        text = text.replace(mark, "");
    }
    text.trim().to_owned()
}
