//! Reading V4A patches, the format `apply_patch` takes:
//!
//! ```text
//! *** Begin Patch
//! *** Add File: path          every following line starts with `+`
//! *** Update File: path
//! *** Move to: new/path       optional: a rename
//! @@ fn anchor()              optional: the hunk is after this line (several narrow further)
//!  context line
//! -removed line
//! +added line
//! *** End of File             optional: the hunk ends the file
//! *** Delete File: path
//! *** End Patch
//! ```
//!
//! A file's body alone (the hunks of one update, the `+` lines of one new file) is what the
//! native form of the tool sends; [`parse_hunks`] and [`parse_added`] read those. Errors name
//! the line of the patch and what was expected there.

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File:";
const UPDATE: &str = "*** Update File:";
const DELETE: &str = "*** Delete File:";
const MOVE: &str = "*** Move to:";
const END_OF_FILE: &str = "*** End of File";

/// One file's change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum FileOp {
    Add {
        path: String,
        content: String,
    },
    Delete {
        path: String,
    },
    Update {
        path: String,
        move_to: Option<String>,
        hunks: Vec<Hunk>,
    },
}

impl FileOp {
    /// The paths the change writes or deletes: its file, and a move's destination.
    pub fn paths(&self) -> Vec<&str> {
        match self {
            FileOp::Add { path, .. } | FileOp::Delete { path } => vec![path],
            FileOp::Update { path, move_to, .. } => std::iter::once(path.as_str())
                .chain(move_to.as_deref())
                .collect(),
        }
    }
}

/// One hunk of an update: found after its anchors (in order), then its context and removed
/// lines replaced by its context and added lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Hunk {
    pub anchors: Vec<String>,
    pub lines: Vec<HunkLine>,
    /// The hunk ends the file (`*** End of File`).
    pub at_end: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum HunkLine {
    Context(String),
    Removed(String),
    Added(String),
}

impl Hunk {
    /// The lines the file must hold: context and removed lines, in order.
    pub fn old_lines(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter_map(|line| match line {
                HunkLine::Context(text) | HunkLine::Removed(text) => Some(text.as_str()),
                HunkLine::Added(_) => None,
            })
            .collect()
    }
}

/// A whole patch, `*** Begin Patch` to `*** End Patch`. A shell here-document around it
/// (`apply_patch <<'EOF'` … `EOF`), which models sometimes copy, is tolerated.
pub(super) fn parse_patch(input: &str) -> Result<Vec<FileOp>, String> {
    let all: Vec<&str> = input.lines().collect();
    let mut first = all
        .iter()
        .position(|line| !line.trim().is_empty())
        .unwrap_or(0);
    let mut last = all
        .iter()
        .rposition(|line| !line.trim().is_empty())
        .unwrap_or(0);
    let is = |index: usize, marker: &str| all.get(index).is_some_and(|l| l.trim() == marker);
    if !is(first, BEGIN) && all.get(first).is_some_and(|l| l.contains("<<")) {
        first = (first + 1..all.len())
            .find(|index| !all[*index].trim().is_empty())
            .unwrap_or(first);
        if !is(last, END) && last > first {
            last = (first..last)
                .rfind(|index| !all[*index].trim().is_empty())
                .unwrap_or(last);
        }
    }
    if !is(first, BEGIN) {
        return Err(format!("the patch must start with `{BEGIN}`"));
    }
    if last <= first || !is(last, END) {
        return Err(format!("the patch must end with `{END}`"));
    }
    let mut reader = Reader {
        lines: &all[..last],
        next: first + 1,
    };
    let mut ops = Vec::new();
    while let Some((number, line)) = reader.peek() {
        let line = line.trim_end();
        if line.is_empty() {
            reader.next += 1;
        } else if let Some(path) = line.strip_prefix(ADD) {
            reader.next += 1;
            let path = file_path(path, number)?;
            let content = reader.added_lines()?;
            ops.push(FileOp::Add { path, content });
        } else if let Some(path) = line.strip_prefix(DELETE) {
            reader.next += 1;
            ops.push(FileOp::Delete {
                path: file_path(path, number)?,
            });
        } else if let Some(path) = line.strip_prefix(UPDATE) {
            reader.next += 1;
            let path = file_path(path, number)?;
            let mut move_to = None;
            if let Some((number, line)) = reader.peek()
                && let Some(destination) = line.trim_end().strip_prefix(MOVE)
            {
                reader.next += 1;
                move_to = Some(file_path(destination, number)?);
            }
            let hunks = reader.hunks()?;
            if hunks.is_empty() && move_to.is_none() {
                return Err(format!(
                    "line {number} of the patch: `{UPDATE} {path}` has no hunk"
                ));
            }
            ops.push(FileOp::Update {
                path,
                move_to,
                hunks,
            });
        } else {
            return Err(format!(
                "line {number} of the patch: expected `{ADD}`, `{UPDATE}`, `{DELETE}` or \
                 `{END}`, found `{}`",
                shorten(line)
            ));
        }
    }
    if ops.is_empty() {
        return Err("the patch changes no file".to_owned());
    }
    Ok(ops)
}

/// The hunks of one file's update, alone (the native form's `diff` of an `update_file`).
pub(super) fn parse_hunks(diff: &str) -> Result<Vec<Hunk>, String> {
    let lines: Vec<&str> = diff.lines().collect();
    let mut reader = Reader {
        lines: &lines,
        next: 0,
    };
    let hunks = reader.hunks()?;
    if let Some((number, line)) = reader.peek() {
        return Err(format!(
            "line {number} of the diff: unexpected `{}`",
            shorten(line)
        ));
    }
    if hunks.is_empty() {
        return Err("the diff has no hunk".to_owned());
    }
    Ok(hunks)
}

/// The content of a new file given as `+` lines alone (the native form's `create_file`).
pub(super) fn parse_added(diff: &str) -> Result<String, String> {
    let lines: Vec<&str> = diff.lines().collect();
    let mut reader = Reader {
        lines: &lines,
        next: 0,
    };
    reader.added_lines()
}

/// The patch's lines, read in order; numbers in messages are 1-based.
struct Reader<'a> {
    lines: &'a [&'a str],
    next: usize,
}

impl<'a> Reader<'a> {
    fn peek(&self) -> Option<(usize, &'a str)> {
        self.lines.get(self.next).map(|line| (self.next + 1, *line))
    }

    /// A new file's `+` lines, up to the next file's header; its text ends with a newline.
    fn added_lines(&mut self) -> Result<String, String> {
        let mut content = String::new();
        while let Some((number, line)) = self.peek() {
            if line.starts_with("*** ") {
                break;
            }
            let Some(text) = line.strip_prefix('+') else {
                return Err(format!(
                    "line {number} of the patch: every line of an added file must start with \
                     `+`, found `{}`",
                    shorten(line)
                ));
            };
            content.push_str(text);
            content.push('\n');
            self.next += 1;
        }
        Ok(content)
    }

    /// An update's hunks, up to the next file's header.
    fn hunks(&mut self) -> Result<Vec<Hunk>, String> {
        let mut hunks: Vec<Hunk> = Vec::new();
        let mut current = Hunk::default();
        // Whether `current` was opened by an `@@` line (a first hunk may go without one).
        let mut opened = false;
        while let Some((number, line)) = self.peek() {
            if line.trim_end() == END_OF_FILE {
                self.next += 1;
                current.at_end = true;
                if !current.lines.is_empty() {
                    hunks.push(std::mem::take(&mut current));
                }
                opened = false;
                continue;
            }
            if line.starts_with("*** ") {
                break;
            }
            self.next += 1;
            if let Some(anchor) = line.strip_prefix("@@") {
                if !current.lines.is_empty() {
                    hunks.push(std::mem::take(&mut current));
                }
                opened = true;
                // `@@ -12,3 +12,4 @@` (a unified diff's header) carries no anchor text.
                let anchor = anchor.trim();
                if !anchor.is_empty() && !anchor.ends_with("@@") {
                    current.anchors.push(anchor.to_owned());
                }
                continue;
            }
            let hunk_line = match line.chars().next() {
                Some(' ') => HunkLine::Context(line[1..].to_owned()),
                Some('-') => HunkLine::Removed(line[1..].to_owned()),
                Some('+') => HunkLine::Added(line[1..].to_owned()),
                // An empty line is an empty context line whose space was dropped.
                None => HunkLine::Context(String::new()),
                Some(_) => {
                    return Err(format!(
                        "line {number} of the patch: a line of a hunk must start with ` `, `-` \
                         or `+`, or be `@@ …`; found `{}`",
                        shorten(line)
                    ));
                }
            };
            current.lines.push(hunk_line);
        }
        if !current.lines.is_empty() {
            hunks.push(current);
        } else if opened && !current.anchors.is_empty() {
            return Err(format!(
                "the hunk after `@@ {}` has no lines",
                current.anchors.join(" / ")
            ));
        }
        Ok(hunks)
    }
}

fn file_path(text: &str, number: usize) -> Result<String, String> {
    let path = text.trim();
    if path.is_empty() {
        return Err(format!("line {number} of the patch: the path is missing"));
    }
    Ok(path.to_owned())
}

/// A line as an error shows it: at most 80 characters.
fn shorten(line: &str) -> String {
    let mut shown: String = line.chars().take(80).collect();
    if shown.len() < line.len() {
        shown.push('…');
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(text: &str) -> HunkLine {
        HunkLine::Context(text.to_owned())
    }
    fn removed(text: &str) -> HunkLine {
        HunkLine::Removed(text.to_owned())
    }
    fn added(text: &str) -> HunkLine {
        HunkLine::Added(text.to_owned())
    }

    #[test]
    fn every_kind_of_file_change_is_read() {
        let patch = "*** Begin Patch\n\
                     *** Add File: new.txt\n\
                     +one\n\
                     +\n\
                     *** Update File: src/a.rs\n\
                     *** Move to: src/b.rs\n\
                     @@ fn main() {\n\
                     \x20    let x = 1;\n\
                     -    run(x);\n\
                     +    run(x + 1);\n\
                     \n\
                     @@ impl A\n\
                     @@     fn f()\n\
                     -old\n\
                     +new\n\
                     *** End of File\n\
                     *** Delete File: gone.txt\n\
                     *** End Patch\n";
        let ops = parse_patch(patch).unwrap();
        assert_eq!(
            ops,
            [
                FileOp::Add {
                    path: "new.txt".into(),
                    content: "one\n\n".into()
                },
                FileOp::Update {
                    path: "src/a.rs".into(),
                    move_to: Some("src/b.rs".into()),
                    hunks: vec![
                        Hunk {
                            anchors: vec!["fn main() {".into()],
                            lines: vec![
                                context("    let x = 1;"),
                                removed("    run(x);"),
                                added("    run(x + 1);"),
                                context(""),
                            ],
                            at_end: false,
                        },
                        Hunk {
                            anchors: vec!["impl A".into(), "fn f()".into()],
                            lines: vec![removed("old"), added("new")],
                            at_end: true,
                        },
                    ],
                },
                FileOp::Delete {
                    path: "gone.txt".into()
                },
            ]
        );
        assert_eq!(ops[1].paths(), ["src/a.rs", "src/b.rs"]);
    }

    #[test]
    fn a_here_document_and_a_first_hunk_without_anchor_are_tolerated() {
        let patch = "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: a\n x\n-y\n+z\n\
                     *** End Patch\nEOF\n";
        let ops = parse_patch(patch).unwrap();
        assert_eq!(
            ops,
            [FileOp::Update {
                path: "a".into(),
                move_to: None,
                hunks: vec![Hunk {
                    anchors: vec![],
                    lines: vec![context("x"), removed("y"), added("z")],
                    at_end: false
                }]
            }]
        );
    }

    #[test]
    fn malformed_patches_name_the_line() {
        for (patch, expected) in [
            (
                "*** Update File: a\n",
                "the patch must start with `*** Begin Patch`",
            ),
            (
                "*** Begin Patch\n*** Delete File: a\n",
                "the patch must end with `*** End Patch`",
            ),
            (
                "*** Begin Patch\n*** End Patch",
                "the patch changes no file",
            ),
            (
                "*** Begin Patch\n*** Frobnicate: a\n*** End Patch",
                "line 2 of the patch: expected `*** Add File:`, `*** Update File:`, \
                 `*** Delete File:` or `*** End Patch`, found `*** Frobnicate: a`",
            ),
            (
                "*** Begin Patch\n*** Add File: a\nno plus\n*** End Patch",
                "line 3 of the patch: every line of an added file must start with `+`, found \
                 `no plus`",
            ),
            (
                "*** Begin Patch\n*** Update File: a\n@@\n x\n?y\n*** End Patch",
                "line 5 of the patch: a line of a hunk must start with ` `, `-` or `+`, or be \
                 `@@ …`; found `?y`",
            ),
            (
                "*** Begin Patch\n*** Update File: a\n*** End Patch",
                "line 2 of the patch: `*** Update File: a` has no hunk",
            ),
            (
                "*** Begin Patch\n*** Add File:  \n*** End Patch",
                "line 2 of the patch: the path is missing",
            ),
        ] {
            assert_eq!(parse_patch(patch).unwrap_err(), expected, "{patch}");
        }
    }

    #[test]
    fn native_bodies_are_read_alone() {
        assert_eq!(parse_added("+a\n+b").unwrap(), "a\nb\n");
        assert_eq!(parse_added("").unwrap(), "");
        assert!(parse_added("a").is_err());
        let hunks = parse_hunks("@@ fn f\n-a\n+b\n*** End of File\n").unwrap();
        assert_eq!(hunks.len(), 1);
        assert!(hunks[0].at_end);
        assert_eq!(hunks[0].old_lines(), ["a"]);
        assert_eq!(parse_hunks("").unwrap_err(), "the diff has no hunk");
        assert_eq!(
            parse_hunks(" a\n*** Delete File: b").unwrap_err(),
            "line 2 of the diff: unexpected `*** Delete File: b`"
        );
    }
}
