//! The file tools `read_file`, `write_file` and `list_dir`: paths are relative to the
//! conversation's cwd or absolute, and every failure becomes a result text for the model.
//! Under a sandbox, writes and reads follow its rules (`sandbox::paths`), and writes go through
//! directory handles that no symlink can redirect: both through `disk.rs`, which the edit
//! tools share.

use std::io::ErrorKind;
use std::path::PathBuf;

use serde_json::Value;
use tokio::io::AsyncReadExt;

use super::call::{ToolContext, ToolResult, optional_string, required_path, required_string};
use super::disk::{FileAccess, blocking};
use super::output::{CappedOutput, complete_utf8_prefix_len};
use crate::sandbox::paths as sandbox_paths;

/// Runs the file tool `name`; `run_tool` only sends the three names handled here.
pub(super) async fn run(name: &str, arguments: &Value, ctx: &ToolContext) -> ToolResult {
    let result = match name {
        "read_file" => read_file(arguments, ctx).await,
        "write_file" => write_file(arguments, ctx).await,
        _ => list_dir(arguments, ctx).await,
    };
    result.unwrap_or_else(ToolResult::failed)
}

async fn read_file(arguments: &Value, ctx: &ToolContext) -> Result<ToolResult, String> {
    let path = required_path(arguments)?;
    let (access, shown) = (FileAccess::of(ctx), PathBuf::from(path));
    let (file, metadata) = blocking(move || access.open_to_read(&shown))
        .await?
        .ok_or_else(|| format!("no such file: {path}"))?;
    let file = tokio::fs::File::from_std(file);
    // One byte past the cap tells a file that is too long apart from one that just fits, even
    // where the metadata has no size (/proc, devices).
    let cap = ctx.max_output_bytes;
    let mut bytes = Vec::new();
    file.take(cap as u64 + 1)
        .read_to_end(&mut bytes)
        .await
        .map_err(|error| format!("could not read {path}: {error}"))?;
    if bytes.len() <= cap {
        return Ok(ToolResult::completed(String::from_utf8_lossy(&bytes)));
    }
    bytes.truncate(complete_utf8_prefix_len(&bytes[..cap]));
    let shown = bytes.len();
    let note = if metadata.len() > cap as u64 {
        format!(
            "[... file cut: showing the first {shown} of {} bytes ...]",
            metadata.len()
        )
    } else {
        format!("[... file cut after its first {shown} bytes ...]")
    };
    let mut output = String::from_utf8_lossy(&bytes).into_owned();
    if !output.ends_with('\n') {
        output.push('\n');
    }
    output.push_str(&note);
    Ok(ToolResult::completed(output))
}

async fn write_file(arguments: &Value, ctx: &ToolContext) -> Result<ToolResult, String> {
    let path = required_path(arguments)?;
    let content = required_string(arguments, "content")?;
    let (access, shown, bytes) = (
        FileAccess::of(ctx),
        PathBuf::from(path),
        content.as_bytes().to_vec(),
    );
    blocking(move || access.write(&shown, &bytes)).await?;
    Ok(ToolResult::completed(format!(
        "wrote {} bytes to {path}",
        content.len()
    )))
}

async fn list_dir(arguments: &Value, ctx: &ToolContext) -> Result<ToolResult, String> {
    let (full_path, shown): (PathBuf, String) = match optional_string(arguments, "path")? {
        Some(path) if !path.is_empty() => (ctx.cwd.join(path), path.to_owned()),
        _ => (ctx.cwd.clone(), ctx.cwd.display().to_string()),
    };
    if ctx.sandbox.enforced() {
        let (policy, cwd, listed) = (ctx.sandbox.clone(), ctx.cwd.clone(), full_path.clone());
        blocking(move || sandbox_paths::check_read(&policy, &cwd, &listed)).await?;
    }
    let mut entries =
        tokio::fs::read_dir(&full_path)
            .await
            .map_err(|error| match error.kind() {
                ErrorKind::NotFound => format!("no such directory: {shown}"),
                ErrorKind::NotADirectory => format!("{shown} is not a directory"),
                _ => format!("could not list {shown}: {error}"),
            })?;
    let mut names = Vec::new();
    while let Some(entry) = entries
        .next_entry()
        .await
        .map_err(|error| format!("could not list {shown}: {error}"))?
    {
        let mut name = entry.file_name().to_string_lossy().into_owned();
        // Following symlinks: a link to a directory is entered like one, so it lists like one.
        if tokio::fs::metadata(entry.path())
            .await
            .is_ok_and(|metadata| metadata.is_dir())
        {
            name.push('/');
        }
        names.push(name);
    }
    if names.is_empty() {
        return Ok(ToolResult::completed("(empty directory)"));
    }
    names.sort();
    let mut output = CappedOutput::new(ctx.max_output_bytes);
    output.push(&names.join("\n"));
    Ok(ToolResult::completed(output.finish()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::ToolStatus;
    use super::super::tests::context;
    use super::*;

    async fn call(name: &str, arguments: Value, ctx: &ToolContext) -> ToolResult {
        run(name, &arguments, ctx).await
    }

    #[tokio::test]
    async fn write_then_read_a_file_in_new_directories() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(dir.path());
        let written = call(
            "write_file",
            json!({"path": "a/b/notes.txt", "content": "héllo\n"}),
            &ctx,
        )
        .await;
        assert_eq!(written.status, ToolStatus::Completed);
        assert_eq!(written.output, "wrote 7 bytes to a/b/notes.txt");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a/b/notes.txt")).unwrap(),
            "héllo\n"
        );

        let read = call("read_file", json!({"path": "a/b/notes.txt"}), &ctx).await;
        assert_eq!(read.status, ToolStatus::Completed);
        assert_eq!(read.output, "héllo\n");
        assert_eq!(read.exit_code, None);
    }

    #[tokio::test]
    async fn read_an_absolute_path() {
        let dir = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        let file = other.path().join("x.txt");
        std::fs::write(&file, "elsewhere").unwrap();
        let read = call(
            "read_file",
            json!({"path": file.to_str().unwrap()}),
            &context(dir.path()),
        )
        .await;
        assert_eq!(read.status, ToolStatus::Completed);
        assert_eq!(read.output, "elsewhere");
    }

    #[tokio::test]
    async fn read_file_errors() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(dir.path());
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        #[track_caller]
        fn check(result: ToolResult, expected: &str) {
            assert_eq!(result.status, ToolStatus::Failed);
            assert_eq!(result.output, expected);
        }
        check(
            call("read_file", json!({"path": "missing.txt"}), &ctx).await,
            "no such file: missing.txt",
        );
        check(
            call("read_file", json!({"path": "sub"}), &ctx).await,
            "sub is a directory",
        );
        let fifo = std::ffi::CString::new(dir.path().join("fifo").to_str().unwrap()).unwrap();
        // SAFETY: mkfifo only reads the NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        check(
            call("read_file", json!({"path": "fifo"}), &ctx).await,
            "fifo is not a regular file",
        );
        check(
            call("read_file", json!({}), &ctx).await,
            "missing required parameter `path` (a string)",
        );
        check(
            call("read_file", json!({"path": ""}), &ctx).await,
            "parameter `path` must not be empty",
        );
    }

    #[tokio::test]
    async fn read_file_caps_long_files_and_decodes_lossily() {
        let dir = tempfile::tempdir().unwrap();
        let mut ctx = context(dir.path());
        ctx.max_output_bytes = 10;
        std::fs::write(dir.path().join("long.txt"), "0123456789abcdef").unwrap();
        let read = call("read_file", json!({"path": "long.txt"}), &ctx).await;
        assert_eq!(read.status, ToolStatus::Completed);
        assert_eq!(
            read.output,
            "0123456789\n[... file cut: showing the first 10 of 16 bytes ...]"
        );

        // The cap falls inside "€": the character is dropped whole, not half-decoded.
        std::fs::write(dir.path().join("euro.txt"), "012345678€€").unwrap();
        let read = call("read_file", json!({"path": "euro.txt"}), &ctx).await;
        assert!(
            read.output
                .starts_with("012345678\n[... file cut: showing the first 9 of 15")
        );

        std::fs::write(dir.path().join("binary.bin"), b"ok\xff\xfe").unwrap();
        let read = call("read_file", json!({"path": "binary.bin"}), &ctx).await;
        assert_eq!(read.status, ToolStatus::Completed);
        assert_eq!(read.output, "ok\u{FFFD}\u{FFFD}");
    }

    #[tokio::test]
    async fn write_file_errors() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(dir.path());
        std::fs::write(dir.path().join("plain"), "").unwrap();
        let result = call(
            "write_file",
            json!({"path": "plain/inside.txt", "content": "x"}),
            &ctx,
        )
        .await;
        assert_eq!(result.status, ToolStatus::Failed);
        assert!(
            result
                .output
                .starts_with("could not write plain/inside.txt: "),
            "{}",
            result.output
        );

        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let result = call("write_file", json!({"path": "sub", "content": "x"}), &ctx).await;
        assert_eq!(result.status, ToolStatus::Failed);
        assert!(
            result.output.starts_with("could not write sub: "),
            "{}",
            result.output
        );

        let result = call("write_file", json!({"path": "x.txt"}), &ctx).await;
        assert_eq!(result.status, ToolStatus::Failed);
        assert_eq!(
            result.output,
            "missing required parameter `content` (a string)"
        );
    }

    #[tokio::test]
    async fn list_dir_sorts_and_marks_directories() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(dir.path());
        std::fs::create_dir_all(dir.path().join("src/tools")).unwrap();
        std::fs::write(dir.path().join("b.txt"), "").unwrap();
        std::fs::write(dir.path().join("a.txt"), "").unwrap();
        std::fs::write(dir.path().join("src/lib.rs"), "").unwrap();
        std::os::unix::fs::symlink(dir.path().join("src"), dir.path().join("link")).unwrap();

        let listed = call("list_dir", json!({}), &ctx).await;
        assert_eq!(listed.status, ToolStatus::Completed);
        assert_eq!(listed.output, "a.txt\nb.txt\nlink/\nsrc/");

        let listed = call("list_dir", json!({"path": "src"}), &ctx).await;
        assert_eq!(listed.output, "lib.rs\ntools/");

        let listed = call("list_dir", json!({"path": "src/tools"}), &ctx).await;
        assert_eq!(listed.output, "(empty directory)");
    }

    #[tokio::test]
    async fn list_dir_errors() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(dir.path());
        std::fs::write(dir.path().join("a.txt"), "").unwrap();
        #[track_caller]
        fn check(result: ToolResult, expected: &str) {
            assert_eq!(result.status, ToolStatus::Failed);
            assert_eq!(result.output, expected);
        }
        check(
            call("list_dir", json!({"path": "nowhere"}), &ctx).await,
            "no such directory: nowhere",
        );
        check(
            call("list_dir", json!({"path": "a.txt"}), &ctx).await,
            "a.txt is not a directory",
        );
        check(
            call("list_dir", json!({"path": 7}), &ctx).await,
            "parameter `path` must be a string, not a number",
        );
    }
}
