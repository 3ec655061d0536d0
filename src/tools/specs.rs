//! Each built-in tool as the model sees it: its name, what it is for, and the JSON Schema of
//! its parameters. (An MCP server's tools come from the server, `mcp.rs`; which of these one
//! model is offered, and in which shape, is `offer.rs`'s.)

use serde_json::json;

use super::search;
use crate::model::ToolSpec;

/// The specs the model sees for the named tools (unknown names skipped), in the given order.
pub fn specs(names: &[String]) -> Vec<ToolSpec> {
    names.iter().filter_map(|name| spec(name)).collect()
}

pub(super) fn spec(name: &str) -> Option<ToolSpec> {
    let (name, description, parameters) = match name {
        "shell" => (
            "shell",
            "Run a shell command with `sh -c` in the conversation's working directory (stdin is \
             empty). Returns stdout and stderr interleaved as they were written; long output keeps \
             its head and tail. The exit code is reported separately. When the command ends, times \
             out or is interrupted, every process it started is killed, so background servers do \
             not outlive the call; to keep one running (a dev server, a watcher, a long build), \
             set `background`: the call answers at once with a process id and the first output, \
             and process_output, process_list and process_kill follow it.",
            json!({
                "type": "object",
                "properties": {
                    "command": {
                        "type": "string",
                        "description": "The command line, run with `sh -c`."
                    },
                    "timeout_s": {
                        "type": "number",
                        "description": "Seconds before the command is killed. Optional: defaults \
                                        to the configured limit, and cannot exceed it."
                    },
                    "escalate": {
                        "type": "string",
                        "description": "Optional: why this one command must run outside the \
                                        sandbox (to write outside the working directory, or to \
                                        use the network). A user is asked first; use it only \
                                        after the sandbox blocked the command."
                    },
                    "background": {
                        "type": "boolean",
                        "description": "Optional: run it in the background and answer at once \
                                        with its id and first output. It keeps running (no \
                                        timeout) until it exits, process_kill stops it or the \
                                        conversation ends."
                    }
                },
                "required": ["command"]
            }),
        ),
        "process_output" => (
            "process_output",
            "Read the output of a background process (started by `shell` with `background`) \
             written after the cursor `since` (0: from its start), and its status. The answer \
             ends with the cursor to read on from. Only recent output is kept in memory; a \
             note says when some was dropped.",
            json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "The process id (`p_…`)."},
                    "since": {
                        "type": "integer",
                        "description": "The cursor from the last read; 0 or absent: from the \
                                        start."
                    },
                    "wait_s": {
                        "type": "number",
                        "description": "Optional: wait up to this many seconds (at most 60) \
                                        for new output or for the process to end."
                    }
                },
                "required": ["id"]
            }),
        ),
        "process_list" => (
            "process_list",
            "List this conversation's background processes: id, command, status, exit code, \
             and the TCP ports a running one listens on.",
            json!({"type": "object", "properties": {}}),
        ),
        "process_kill" => (
            "process_kill",
            "Stop a background process and every process it started (its process group). \
             TERM by default, then KILL if it has not ended after 3 s.",
            json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "The process id (`p_…`)."},
                    "signal": {
                        "type": "string",
                        "enum": ["TERM", "KILL", "INT", "HUP"],
                        "description": "Optional: the signal to send (default TERM)."
                    }
                },
                "required": ["id"]
            }),
        ),
        "read_file" => (
            "read_file",
            "Read a file. Text comes as numbered lines (`cat -n` style: the line number, a tab, \
             the line), at most 2000 lines from `offset`; lines longer than 2000 characters are \
             cut, and a note at the end says how many lines follow and the offset to read on \
             from. A PNG, JPEG, GIF or WebP file comes as an image.",
            json!({
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": "Path relative to the working directory, or absolute."
                    },
                    "offset": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "Optional: the first line to show (1 is the first \
                                        line of the file)."
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "Optional: how many lines to show (default 2000)."
                    }
                },
                "required": ["path"]
            }),
        ),
        "write_file" => (
            "write_file",
            "Write a text file, replacing it if it exists and creating missing parent directories.",
            json!({
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": "Path relative to the working directory, or absolute."
                    },
                    "content": {
                        "type": "string",
                        "description": "The whole new content of the file."
                    }
                },
                "required": ["path", "content"]
            }),
        ),
        "edit_file" => (
            "edit_file",
            "Replace text in a file. `old_string` must match the file exactly, whitespace and \
             indentation included, and only once: include enough surrounding lines to make it \
             unique, or set `replace_all` to change every occurrence. When it does not match, \
             the error shows the file's closest lines with their numbers. An empty \
             `old_string` creates a missing file with `new_string` as its content. Write `\\n` \
             line endings: the file keeps its own (CRLF stays CRLF) and its encoding.",
            json!({
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": "Path relative to the working directory, or absolute."
                    },
                    "old_string": {
                        "type": "string",
                        "description": "The exact text to replace."
                    },
                    "new_string": {
                        "type": "string",
                        "description": "The text to put in its place."
                    },
                    "replace_all": {
                        "type": "boolean",
                        "description": "Optional: replace every occurrence (default false)."
                    }
                },
                "required": ["path", "old_string", "new_string"]
            }),
        ),
        "apply_patch" => (
            "apply_patch",
            "Change files with a patch, all or nothing: when any part fails, no file changes. \
             The format:\n\
             *** Begin Patch\n\
             *** Add File: hello.txt\n\
             +Hello world\n\
             *** Update File: src/app.py\n\
             *** Move to: src/main.py\n\
             @@ def greet():\n\
             -    print(\"Hi\")\n\
             +    print(\"Hello\")\n\
             *** Delete File: obsolete.txt\n\
             *** End Patch\n\
             Every line of an added file starts with `+`. An update is made of hunks: a line \
             starting with a space is context, `-` a removed line, `+` an added one; give about \
             3 lines of context around each change. `@@ line` (optional) names a line above a \
             hunk to find it, such as a function's signature; `*** End of File` after a hunk \
             anchors it at the end of the file; `*** Move to:` (optional) renames the file. \
             Paths are relative to the working directory.",
            json!({
                "type": "object",
                "properties": {
                    "input": {
                        "type": "string",
                        "description": "The whole patch, from `*** Begin Patch` to \
                                        `*** End Patch`."
                    }
                },
                "required": ["input"]
            }),
        ),
        "list_dir" => (
            "list_dir",
            "List a directory: one entry per line, sorted, directories ending with `/`.",
            json!({
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": "Path relative to the working directory, or absolute. \
                                        Optional: the working directory."
                    }
                }
            }),
        ),
        "grep" => (
            "grep",
            "Search file contents with a regular expression (Rust regex syntax, one line at a \
             time). Walks a directory like ripgrep: files that .gitignore or .ignore exclude, \
             hidden files and binary files are skipped. Results come sorted by path; past \
             `limit` a note says how many more there are.",
            json!({
                "type": "object",
                "properties": {
                    "pattern": {
                        "type": "string",
                        "description": "The regular expression, e.g. `fn\\s+main` or `TODO|FIXME`."
                    },
                    "path": {
                        "type": "string",
                        "description": "Optional: the file or directory to search, relative to \
                                        the working directory or absolute (default: the \
                                        working directory)."
                    },
                    "glob": {
                        "type": "string",
                        "description": "Optional: only files matching this glob: without a `/` \
                                        it matches the file name (`*.rs`, `*.{ts,tsx}`), with \
                                        one the path below `path` (`src/**/*.ts`)."
                    },
                    "case_insensitive": {
                        "type": "boolean",
                        "description": "Optional: ignore case (default false)."
                    },
                    "output_mode": {
                        "type": "string",
                        "enum": ["files_with_matches", "content", "count"],
                        "description": "Optional: `files_with_matches` (default) lists the \
                                        files that match; `content` shows the matching lines \
                                        as `path:line:text`; `count` gives `path:count`."
                    },
                    "context": {
                        "type": "integer",
                        "minimum": 0,
                        "maximum": search::MAX_CONTEXT,
                        "description": "Optional, content mode only: lines shown before and \
                                        after each match (as `path-line-text`)."
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": search::MAX_LIMIT,
                        "description": "Optional: the most files (or matching lines, in \
                                        content mode) shown (default 100)."
                    }
                },
                "required": ["pattern"]
            }),
        ),
        "glob" => (
            "glob",
            "Find files by path pattern, newest first (by modification time). Files that \
             .gitignore or .ignore exclude and hidden files (unless the pattern names them, \
             like `.github/**`) are left out; past `limit` a note says how many more there are.",
            json!({
                "type": "object",
                "properties": {
                    "pattern": {
                        "type": "string",
                        "description": "A glob matched against paths below `path`: `*` and `?` \
                                        stay within a directory, `**` crosses directories, \
                                        `{a,b}` chooses (`**/*.rs`, `src/**/*.{ts,tsx}`)."
                    },
                    "path": {
                        "type": "string",
                        "description": "Optional: the directory to search, relative to the \
                                        working directory or absolute (default: the working \
                                        directory)."
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": search::MAX_LIMIT,
                        "description": "Optional: the most paths shown (default 100)."
                    }
                },
                "required": ["pattern"]
            }),
        ),
        "spawn_agent" => (
            "spawn_agent",
            "Start a sub-agent on a task. It works in its own context, shares the working \
             directory, and reports back to you after each of its turns. Returns its session id.",
            json!({
                "type": "object",
                "properties": {
                    "agent": {
                        "type": "string",
                        "description": "The name of a configured agent."
                    },
                    "task": {
                        "type": "string",
                        "description": "The task, written so the sub-agent can work without asking."
                    },
                    "model": {
                        "type": "string",
                        "description": "Optional: the model to use instead of the default."
                    },
                    "include_history": {
                        "type": "string",
                        "enum": ["none", "last_turn", "all"],
                        "description": "Optional: how much of your completed history the \
                                        sub-agent starts with (default none)."
                    }
                },
                "required": ["agent", "task"]
            }),
        ),
        "send_message" => (
            "send_message",
            "Send a message to one of your sub-agents.",
            json!({
                "type": "object",
                "properties": {
                    "session_id": {
                        "type": "string",
                        "description": "The sub-agent's session id."
                    },
                    "text": {
                        "type": "string",
                        "description": "The message."
                    },
                    "mode": {
                        "type": "string",
                        "enum": ["steer", "queue"],
                        "description": "Optional: `steer` joins its running turn, `queue` waits \
                                        for the next one."
                    }
                },
                "required": ["session_id", "text"]
            }),
        ),
        "wait_agents" => (
            "wait_agents",
            "Wait until the given sub-agents finish their current turn, or until the timeout.",
            json!({
                "type": "object",
                "properties": {
                    "session_ids": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "The sub-agents' session ids."
                    },
                    "timeout_s": {
                        "type": "number",
                        "maximum": 3600,
                        "description": "Optional: the longest to wait, in seconds (at most 3600)."
                    }
                },
                "required": ["session_ids"]
            }),
        ),
        "interrupt_agent" => (
            "interrupt_agent",
            "Interrupt a sub-agent's running turn.",
            json!({
                "type": "object",
                "properties": {
                    "session_id": {
                        "type": "string",
                        "description": "The sub-agent's session id."
                    }
                },
                "required": ["session_id"]
            }),
        ),
        "list_agents" => (
            "list_agents",
            "List your sub-agents with their status and last message.",
            json!({"type": "object", "properties": {}}),
        ),
        "skill" => (
            "skill",
            "Load a skill: the instructions for a kind of task, as the Skills section of your \
             instructions lists them by name. Returns the skill's instructions and the paths of \
             the files that come with it (open them with `read_file` when the skill says to). \
             Load a skill before starting a task it matches.",
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The skill's name, as listed."}
                },
                "required": ["name"],
                "additionalProperties": false
            }),
        ),
        "update_plan" => (
            "update_plan",
            "Show the user your plan as a checklist of steps, and keep it current. Use it for \
             work of several steps: make the plan when you start, keep exactly one step \
             `in_progress` while you work on it, and call again as steps complete or the plan \
             changes (each call replaces the whole plan). Skip it for simple tasks of one or two \
             steps and for plain questions. The user sees the plan; it does not do the work.",
            json!({
                "type": "object",
                "properties": {
                    "explanation": {
                        "type": "string",
                        "description": "Optional: a sentence on the approach, or why the plan \
                                        changed."
                    },
                    "steps": {
                        "type": "array",
                        "description": "The whole plan, in order (at most 50 steps).",
                        "items": {
                            "type": "object",
                            "properties": {
                                "step": {
                                    "type": "string",
                                    "description": "What this step does, in a short sentence."
                                },
                                "status": {
                                    "type": "string",
                                    "enum": ["pending", "in_progress", "completed"]
                                }
                            },
                            "required": ["step", "status"]
                        }
                    }
                },
                "required": ["steps"]
            }),
        ),
        _ => return None,
    };
    Some(ToolSpec {
        name: name.into(),
        description: description.into(),
        parameters,
        native: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_follow_the_given_order_and_skip_unknown_names() {
        let names: Vec<String> = ["list_agents", "nope", "shell", "read_file"]
            .map(String::from)
            .to_vec();
        let specs = specs(&names);
        let spec_names: Vec<&str> = specs.iter().map(|spec| &*spec.name).collect();
        assert_eq!(spec_names, ["list_agents", "shell", "read_file"]);
    }

    #[test]
    fn every_tool_of_the_api_has_an_object_schema() {
        let names: Vec<String> = [
            "shell",
            "read_file",
            "write_file",
            "edit_file",
            "apply_patch",
            "list_dir",
            "grep",
            "glob",
            "spawn_agent",
            "send_message",
            "wait_agents",
            "interrupt_agent",
            "list_agents",
            "update_plan",
            "skill",
        ]
        .map(String::from)
        .to_vec();
        let specs = specs(&names);
        assert_eq!(specs.len(), names.len());
        for spec in specs {
            assert_eq!(spec.parameters["type"], "object", "{}", spec.name);
            assert!(spec.parameters["properties"].is_object(), "{}", spec.name);
            assert!(!spec.description.is_empty(), "{}", spec.name);
        }
    }
}
