//! The paths a call of a file tool reads or writes, as the model wrote them (relative to the
//! working directory, or absolute): what the permissions match remembered rules against, one
//! subject per path.

use serde_json::Value;

/// Every path the call touches; the working directory (`""`) for a search without a path, and
/// nothing for a call whose arguments cannot be read.
pub fn touched_paths(name: &str, arguments: &Value) -> Vec<String> {
    let path = arguments.get("path").and_then(Value::as_str);
    match name {
        "grep" | "glob" | "list_dir" => vec![path.unwrap_or_default().to_owned()],
        // Every file a patch touches; the text editor's `view` reads its `path`.
        _ if crate::permissions::policy::EDIT_TOOLS.contains(&name) => {
            let edited = super::edited_paths(name, arguments);
            if edited.is_empty() {
                path.map(str::to_owned).into_iter().collect()
            } else {
                edited
            }
        }
        _ => path.map(str::to_owned).into_iter().collect(),
    }
}
