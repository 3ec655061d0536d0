//! A Markdown file with a YAML front matter: `---`, YAML, `---`, then the body.

/// A file's front matter (a YAML mapping) and its body.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    pub front: yaml_serde::Mapping,
    pub body: String,
}

impl Document {
    /// A text value of the front matter; `Err` names the key when it is there but not text.
    pub fn text(&self, key: &str) -> Result<Option<String>, String> {
        match self.front.get(key) {
            None | Some(yaml_serde::Value::Null) => Ok(None),
            Some(yaml_serde::Value::String(text)) => Ok(Some(text.clone())),
            Some(_) => Err(format!("`{key}` must be text")),
        }
    }

    /// A list of names, written as a YAML list or as one text of names separated by commas
    /// or spaces (as `allowed-tools` is in the wild).
    pub fn names(&self, key: &str) -> Result<Option<Vec<String>>, String> {
        match self.front.get(key) {
            None | Some(yaml_serde::Value::Null) => Ok(None),
            Some(yaml_serde::Value::String(text)) => Ok(Some(
                text.split([',', ' '])
                    .map(str::trim)
                    .filter(|name| !name.is_empty())
                    .map(str::to_owned)
                    .collect(),
            )),
            Some(yaml_serde::Value::Sequence(items)) => items
                .iter()
                .map(|item| match item {
                    yaml_serde::Value::String(name) => Ok(name.trim().to_owned()),
                    _ => Err(format!("`{key}` must list names")),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(_) => Err(format!("`{key}` must be a list of names")),
        }
    }
}

/// Splits `text` into its front matter and body. A file without a front matter, or whose
/// front matter is not a YAML mapping, is an error that says so.
pub fn parse(text: &str) -> Result<Document, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return Err("no front matter (the file must start with a `---` line)".to_owned());
    };
    let (yaml, body) = match find_end(rest) {
        Some((end, after)) => (&rest[..end], &rest[after..]),
        None => return Err("the front matter has no closing `---` line".to_owned()),
    };
    let front = match yaml_serde::from_str::<yaml_serde::Value>(yaml) {
        Ok(yaml_serde::Value::Mapping(front)) => front,
        Ok(yaml_serde::Value::Null) => yaml_serde::Mapping::new(),
        Ok(_) => return Err("the front matter is not a YAML mapping of keys".to_owned()),
        Err(error) => return Err(format!("the front matter is not valid YAML: {error}")),
    };
    Ok(Document {
        front,
        body: body.trim_start_matches(['\r', '\n']).to_owned(),
    })
}

/// Where the closing `---` line starts, and where the body after it starts.
fn find_end(rest: &str) -> Option<(usize, usize)> {
    let mut start = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Some((start, start + line.len()));
        }
        start += line.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_front_matter_and_the_body_part_at_the_second_rule() {
        let document = parse(
            "---\nname: fmt\ndescription: \"Format: the code\"\nallowed-tools: Read, Grep\n---\n\n# Body\ntext\n",
        )
        .unwrap();
        assert_eq!(document.text("name").unwrap().as_deref(), Some("fmt"));
        assert_eq!(
            document.text("description").unwrap().as_deref(),
            Some("Format: the code")
        );
        assert_eq!(
            document.names("allowed-tools").unwrap(),
            Some(vec!["Read".to_owned(), "Grep".to_owned()])
        );
        assert_eq!(document.body, "# Body\ntext\n");
        let listed = parse("---\nallowed-tools: [shell, read_file]\n---\nbody").unwrap();
        assert_eq!(
            listed.names("allowed-tools").unwrap(),
            Some(vec!["shell".to_owned(), "read_file".to_owned()])
        );
    }

    #[test]
    fn a_file_without_a_proper_front_matter_says_what_is_wrong() {
        assert!(
            parse("# Just markdown")
                .unwrap_err()
                .contains("no front matter")
        );
        assert!(parse("---\nname: x\n").unwrap_err().contains("no closing"));
        assert!(
            parse("---\n- a\n- b\n---\n")
                .unwrap_err()
                .contains("not a YAML mapping")
        );
        assert!(
            parse("---\nname: [\n---\n")
                .unwrap_err()
                .contains("not valid YAML")
        );
        let wrong = parse("---\nname: 3\n---\n").unwrap();
        assert_eq!(wrong.text("name").unwrap_err(), "`name` must be text");
    }
}
