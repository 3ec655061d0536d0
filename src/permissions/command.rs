//! Placeholder: replaced by the parser of shell commands.

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandPart {
    pub words: Vec<String>,
}
impl CommandPart {
    pub fn text(&self) -> String {
        self.words.join(" ")
    }
    pub fn suggested_rule(&self) -> String {
        format!("{}*", self.words.first().cloned().unwrap_or_default())
    }
}
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unparsed(pub String);
pub fn command_parts(script: &str) -> Result<Vec<CommandPart>, Unparsed> {
    Ok(script
        .split("&&")
        .map(|part| CommandPart {
            words: part.split_whitespace().map(str::to_owned).collect(),
        })
        .filter(|part| !part.words.is_empty())
        .collect())
}
