//! `${VAR}` in a server's command, arguments, environment, URL and headers, expanded from the
//! service's environment when the server starts (never stored expanded in the config).

/// `text` with every `${VAR}` replaced by the variable's value; an unset variable is an error
/// naming it (the config already checked the syntax).
pub fn expand(text: &str) -> Result<String, String> {
    expand_with(text, &mut |name| std::env::var(name).ok())
}

/// The names of the variables `text` refers to.
pub fn variables(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let _ = expand_with(text, &mut |name| {
        names.push(name.to_owned());
        Some(String::new())
    });
    names
}

fn expand_with(
    text: &str,
    lookup: &mut dyn FnMut(&str) -> Option<String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let name = &after[..end];
        let value =
            lookup(name).ok_or_else(|| format!("the environment variable `{name}` is not set"))?;
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_replaced_and_a_missing_one_is_named() {
        let mut lookup = |name: &str| (name == "TOKEN").then(|| "s3cret".to_owned());
        assert_eq!(
            expand_with("Bearer ${TOKEN}!", &mut lookup).unwrap(),
            "Bearer s3cret!"
        );
        assert_eq!(
            expand_with("plain $HOME", &mut lookup).unwrap(),
            "plain $HOME"
        );
        assert_eq!(
            expand_with("${NOPE}", &mut lookup).unwrap_err(),
            "the environment variable `NOPE` is not set"
        );
        assert_eq!(variables("a ${X} b ${Y_2}"), ["X", "Y_2"]);
    }
}
