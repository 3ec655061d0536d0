//! What every section's check shares: the [`Validator`] they are methods of (each section's
//! file adds its own), the [`ConfigError`] they return and the name lists in their messages.
//! Kept apart from the front (`config/mod.rs`), which calls into the sections, so that the
//! sections use no module that uses them.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{}: cannot read: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    /// Bad TOML, a wrong type, a missing field or an unknown key; toml's message names the key,
    /// line and column.
    #[error("{}{message}", Origin(path.as_deref()))]
    Parse {
        path: Option<PathBuf>,
        message: String,
    },
    /// Well-formed TOML that breaks a rule; `key` is the dotted path of the offending key.
    #[error("{}{key}: {message}", Origin(path.as_deref()))]
    Invalid {
        path: Option<PathBuf>,
        key: String,
        message: String,
    },
}

impl ConfigError {
    /// The dotted key a validation error is about.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid { key, .. } => Some(key),
            ConfigError::Read { .. } | ConfigError::Parse { .. } => None,
        }
    }
}

/// Prefixes an error with the file it is about, if any.
struct Origin<'a>(Option<&'a Path>);

impl fmt::Display for Origin<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(path) => write!(f, "{}: ", path.display()),
            None => Ok(()),
        }
    }
}

/// Turns the file's shape into a [`Config`](super::Config), checking the rules toml cannot: names that must
/// exist, reserved names and value ranges. Sections are checked in dependency order (providers,
/// models, agents) so each check can rely on the previous ones.
pub(super) struct Validator<'a> {
    pub(super) source: Option<&'a Path>,
}

impl Validator<'_> {
    /// `path` as given when absolute, else in the config file's folder.
    pub(super) fn beside_config(&self, path: &str) -> std::path::PathBuf {
        match self.source.and_then(Path::parent) {
            Some(dir) if Path::new(path).is_relative() => dir.join(path),
            _ => std::path::PathBuf::from(path),
        }
    }

    pub(super) fn invalid(
        &self,
        key: impl Into<String>,
        message: impl Into<String>,
    ) -> ConfigError {
        ConfigError::Invalid {
            path: self.source.map(Path::to_path_buf),
            key: key.into(),
            message: message.into(),
        }
    }
}

/// Names for a message, such as the known ones next to an unknown one: `a, b, c`.
pub(super) fn join_names<T: AsRef<str>>(names: impl Iterator<Item = T>) -> String {
    names
        .map(|name| name.as_ref().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
