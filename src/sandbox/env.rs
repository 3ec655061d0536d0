//! The environment of tool processes: an allow-list, not the service's environment minus what
//! is known to be secret. The service's environment holds its credentials (provider keys,
//! `OPENVAALA_TOKEN`, whatever its unit file sets); a tool gets only what programs need to find
//! themselves, the user and the locale, plus the agent's own `env`.

use std::ffi::OsString;

/// Passed from the service's environment when set.
const PASSED: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "TMPDIR",
    "TZ",
];
/// Passed too: the locale's categories (`LC_ALL`, `LC_CTYPE`, …).
const PASSED_PREFIX: &str = "LC_";
/// When the service has no `PATH`, programs are still found in the usual places.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The environment of a tool process: the allowed part of the service's environment, then
/// `extra` (the agent's `env`), whose values win.
pub fn tool_environment(extra: &[(String, String)]) -> Vec<(OsString, OsString)> {
    let mut environment: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(name, _)| {
            name.to_str()
                .is_some_and(|name| PASSED.contains(&name) || name.starts_with(PASSED_PREFIX))
        })
        .collect();
    if !environment.iter().any(|(name, _)| name == "PATH") {
        environment.push(("PATH".into(), DEFAULT_PATH.into()));
    }
    for (name, value) in extra {
        environment.retain(|(known, _)| known != name.as_str());
        environment.push((name.into(), value.into()));
    }
    environment
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_allowed_variables_and_the_agents_own_pass() {
        // The test process's environment: HOME and PATH are set, a key-like name never passes.
        let environment = tool_environment(&[("EXTRA".into(), "1".into())]);
        let names: Vec<&str> = environment
            .iter()
            .map(|(name, _)| name.to_str().unwrap())
            .collect();
        assert!(names.contains(&"PATH"), "{names:?}");
        assert!(names.contains(&"EXTRA"), "{names:?}");
        for name in &names {
            assert!(
                PASSED.contains(name) || name.starts_with(PASSED_PREFIX) || *name == "EXTRA",
                "{name} passed"
            );
        }
        let environment = tool_environment(&[("PATH".into(), "/only".into())]);
        let paths: Vec<_> = environment
            .iter()
            .filter(|(name, _)| name == "PATH")
            .collect();
        assert_eq!(paths.len(), 1);
        assert_eq!(paths[0].1, "/only");
    }
}
