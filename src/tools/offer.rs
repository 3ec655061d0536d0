//! The tool list a model is offered: the agent's tools in their order, with the edit operation
//! (`edit_file` in an agent's list) in the shape the model knows best: its provider's own tool
//! where the protocol has one, else a function.

use crate::config::{EditTool, Protocol};
use crate::model::{NativeTool, ToolSpec};

/// The name of the edit operation in an agent's `tools`, and of its function shape.
pub const EDIT_TOOL: &str = "edit_file";

/// How the edit operation is offered to one model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EditShape {
    /// `edit_file {path, old_string, new_string, replace_all?}`.
    EditFile,
    /// `edit_file`, and beside it `apply_patch {input}`: a whole V4A patch as a function's
    /// argument, for models trained on it.
    ApplyPatchFunction,
    /// A tool the provider defines itself.
    Native(NativeTool),
}

impl EditShape {
    /// The shape for a model of `protocol` with the `edit_tool` setting.
    pub fn for_model(protocol: Protocol, setting: EditTool) -> EditShape {
        match (setting, protocol) {
            (EditTool::Native, Protocol::OpenaiResponses) => {
                EditShape::Native(NativeTool::ApplyPatch)
            }
            (EditTool::Native, Protocol::AnthropicMessages) => {
                EditShape::Native(NativeTool::TextEditor)
            }
            (EditTool::ApplyPatch, _) => EditShape::ApplyPatchFunction,
            _ => EditShape::EditFile,
        }
    }
}

/// The specs of the named tools (unknown names skipped), in the given order, the edit
/// operation in `edit`'s shape.
pub fn offered(names: &[String], edit: EditShape) -> Vec<ToolSpec> {
    names
        .iter()
        .flat_map(|name| match (name.as_str(), edit) {
            (EDIT_TOOL, EditShape::Native(native)) => vec![native.spec()],
            (EDIT_TOOL, EditShape::ApplyPatchFunction) => [
                super::specs::spec(EDIT_TOOL),
                super::specs::spec("apply_patch"),
            ]
            .into_iter()
            .flatten()
            .collect(),
            // Background processes are followed with tools of their own.
            ("shell", _) => std::iter::once("shell")
                .chain(super::background::tool::FOLLOW_TOOLS)
                .filter_map(super::specs::spec)
                .collect(),
            _ => super::specs::spec(name).into_iter().collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_protocol_gets_its_own_edit_tool() {
        let names: Vec<String> = ["read_file", EDIT_TOOL].map(String::from).to_vec();
        let shape = |protocol, setting| {
            let specs = offered(&names, EditShape::for_model(protocol, setting));
            let edit = specs[1].clone();
            (edit.name.into_owned(), edit.native)
        };
        assert_eq!(
            shape(Protocol::OpenaiResponses, EditTool::Native),
            ("apply_patch".into(), Some(NativeTool::ApplyPatch))
        );
        assert_eq!(
            shape(Protocol::AnthropicMessages, EditTool::Native),
            (
                "str_replace_based_edit_tool".into(),
                Some(NativeTool::TextEditor)
            )
        );
        assert_eq!(
            shape(Protocol::OpenaiChat, EditTool::Native),
            (EDIT_TOOL.into(), None)
        );
        assert_eq!(
            shape(Protocol::OpenaiResponses, EditTool::EditFile),
            (EDIT_TOOL.into(), None)
        );
        // The patch function comes beside edit_file.
        let both = offered(
            &names,
            EditShape::for_model(Protocol::AnthropicMessages, EditTool::ApplyPatch),
        );
        let both: Vec<&str> = both.iter().map(|spec| &*spec.name).collect();
        assert_eq!(both, ["read_file", EDIT_TOOL, "apply_patch"]);
    }
}
