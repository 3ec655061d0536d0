//! A repository's agent file as the table it is checked as: the file's, with the config's
//! table of the same name over it key by key (tables such as `permissions`, `shell_rules`,
//! `limits` and `env` entry by entry), and, when neither names a model, the model of the agent
//! it stands in for.

use crate::config::{AgentConfig, Config, ConfigError};
use crate::repo::agents::AgentFile;

/// The agent `file` defines, merged and checked by the config file's rules; `names` are the
/// agents it may name in `spawnable`. `Err` is the rule it breaks.
pub(super) fn agent(
    config: &Config,
    file: &AgentFile,
    names: &[String],
) -> Result<AgentConfig, String> {
    let mut table = file.table.clone();
    if let Some(own) = config.agent_tables.get(&file.name) {
        overlay(&mut table, own);
    }
    if !table.contains_key("model") {
        let model = super::safety::baseline(config, &file.name).model.clone();
        table.insert("model".to_owned(), toml::Value::from(model));
    }
    config
        .agent_from_table(&file.name, table, names, &file.path)
        .map_err(|error| match error {
            ConfigError::Invalid { key, message, .. } => format!("{key}: {message}"),
            ConfigError::Parse { message, .. } => message,
            ConfigError::Read { source, .. } => source.to_string(),
        })
}

/// `over`'s keys over `under`'s; a table in both is merged the same way.
fn overlay(under: &mut toml::Table, over: &toml::Table) {
    for (key, value) in over {
        match (under.get_mut(key), value) {
            (Some(toml::Value::Table(below)), toml::Value::Table(above)) => overlay(below, above),
            _ => {
                under.insert(key.clone(), value.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configs_keys_win_and_tables_merge_entry_by_entry() {
        let mut under: toml::Table = toml::from_str(
            "description = \"file\"\nsandbox = \"read_only\"\n\
             [permissions]\nwrite_file = \"deny\"\nshell = \"allow\"\n\
             [permissions.shell_rules]\n\"git *\" = \"allow\"\n",
        )
        .unwrap();
        let over: toml::Table = toml::from_str(
            "description = \"config\"\n[permissions]\nshell = \"ask\"\n\
             [permissions.shell_rules]\n\"rm *\" = \"deny\"\n",
        )
        .unwrap();
        overlay(&mut under, &over);
        let expected: toml::Table = toml::from_str(
            "description = \"config\"\nsandbox = \"read_only\"\n\
             [permissions]\nwrite_file = \"deny\"\nshell = \"ask\"\n\
             [permissions.shell_rules]\n\"git *\" = \"allow\"\n\"rm *\" = \"deny\"\n",
        )
        .unwrap();
        assert_eq!(under, expected);
    }
}
