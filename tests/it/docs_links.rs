//! The Markdown files' relative links: every one points at a file or folder of the
//! repository (a link's `#anchor` is not checked, only its path).

use std::path::{Path, PathBuf};

/// The Markdown files of the repository, but those of installed or vendored packages and of
/// build output.
fn markdown_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if !matches!(name.as_str(), "target" | "node_modules" | ".git" | "vendor") {
                markdown_files(&path, found);
            }
        } else if name.ends_with(".md") {
            found.push(path);
        }
    }
}

/// The targets of the inline links `[text](target)` of a Markdown text, outside code.
fn link_targets(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        // Inline code spans are not links.
        let outside_code: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        for piece in outside_code.split("](").skip(1) {
            if let Some(end) = piece.find(')') {
                targets.push(piece[..end].trim().to_owned());
            }
        }
    }
    targets
}

#[test]
fn every_relative_link_in_the_markdown_files_points_somewhere() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    markdown_files(root, &mut files);
    assert!(files.len() > 5, "the Markdown files were found: {files:?}");
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with('#') || target.starts_with("mailto:") {
                continue;
            }
            let path = target.split('#').next().unwrap();
            checked += 1;
            if !file.parent().unwrap().join(path).exists() {
                broken.push(format!(
                    "{}: ({target})",
                    file.strip_prefix(root).unwrap().display()
                ));
            }
        }
    }
    assert!(checked > 10, "only {checked} relative links were found");
    assert!(
        broken.is_empty(),
        "links to nothing:\n{}",
        broken.join("\n")
    );
}

#[test]
fn a_link_to_nothing_is_found() {
    let targets = link_targets("see [a](docs/a.md) and `[b](no.md)`\n```\n[c](x.md)\n```\n");
    assert_eq!(targets, ["docs/a.md"]);
}
