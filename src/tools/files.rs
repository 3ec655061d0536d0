//! The file tools `read_file`, `write_file` and `list_dir`: paths are relative to the
//! conversation's cwd or absolute, and every failure becomes a result text for the model.
//! `read_file` shows a text file as numbered lines (`numbered.rs`) and an image as an image
//! (`image_file.rs`).
//! Under a sandbox, writes and reads follow its rules (`sandbox::paths`), and writes go through
//! directory handles that no symlink can redirect: both through `disk.rs`, which the edit
//! tools share.

use std::io::{BufRead, BufReader, ErrorKind, Read};
use std::path::PathBuf;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::call::{
    ToolContext, ToolResult, optional_count, optional_string, required_path, required_string,
};
use super::disk::{FileAccess, blocking};
use super::image_file;
use super::numbered::{DEFAULT_LIMIT, Numbered, Window, numbered};
use super::output::CappedOutput;
use crate::sandbox::paths as sandbox_paths;

/// Bytes read at a time: a 64 KB read is enough to tell an image by its first bytes.
const READ_BUFFER: usize = 64 * 1024;
/// The largest line number or count taken: the largest whole number a JSON number (a double)
/// holds exactly.
const MAX_LINES: u64 = 1 << 53;

/// Runs the file tool `name`; `run_tool` only sends the three names handled here. `cancel`
/// stops a long read (`run_tool` answers at once; this ends the work left on its thread).
pub(super) async fn run(
    name: &str,
    arguments: &Value,
    ctx: &ToolContext,
    cancel: &CancellationToken,
) -> ToolResult {
    let result = match name {
        "read_file" => read_file(arguments, ctx, cancel).await,
        "write_file" => write_file(arguments, ctx).await,
        _ => list_dir(arguments, ctx).await,
    };
    result.unwrap_or_else(ToolResult::failed)
}

async fn read_file(
    arguments: &Value,
    ctx: &ToolContext,
    cancel: &CancellationToken,
) -> Result<ToolResult, String> {
    let path = required_path(arguments)?;
    let window = Window {
        offset: optional_count(arguments, "offset", 1..=MAX_LINES)?.unwrap_or(1),
        limit: optional_count(arguments, "limit", 1..=MAX_LINES)?.unwrap_or(DEFAULT_LIMIT),
    };
    let (access, shown, cap) = (FileAccess::of(ctx), path.to_owned(), ctx.max_output_bytes);
    let cancel = cancel.clone();
    blocking(move || {
        let (file, metadata) = access
            .open_to_read(&PathBuf::from(&shown))?
            .ok_or_else(|| format!("no such file: {shown}"))?;
        let could_not = |error: std::io::Error| format!("could not read {shown}: {error}");
        // A device (`/dev/zero`) may never end, nor hold a newline: only its first bytes.
        let limit = if metadata.is_file() {
            u64::MAX
        } else {
            cap as u64
        };
        let mut reader = BufReader::with_capacity(READ_BUFFER, file.take(limit));
        let head = reader.fill_buf().map_err(could_not)?;
        if let Some(media_type) = image_file::media_type(head) {
            return image_file::read(reader, &shown, media_type);
        }
        match numbered(reader, window, cap, &cancel).map_err(could_not)? {
            Numbered::Text(text) => Ok(ToolResult::completed(text)),
            Numbered::Empty => Ok(ToolResult::completed("(empty file)")),
            Numbered::PastEnd { lines } => Err(format!(
                "offset {} is past the end of {shown}, which has {}",
                window.offset,
                match lines {
                    1 => "1 line".to_owned(),
                    lines => format!("{lines} lines"),
                }
            )),
        }
    })
    .await
}

async fn write_file(arguments: &Value, ctx: &ToolContext) -> Result<ToolResult, String> {
    let path = required_path(arguments)?;
    let content = required_string(arguments, "content")?;
    let (access, shown, bytes) = (
        FileAccess::of(ctx),
        PathBuf::from(path),
        content.as_bytes().to_vec(),
    );
    blocking(move || access.write(&shown, &bytes, None)).await?;
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
        run(name, &arguments, ctx, &CancellationToken::new()).await
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
        assert_eq!(read.output, "     1\théllo");
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
        assert_eq!(read.output, "     1\telsewhere");
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
        ctx.max_output_bytes = 40;
        std::fs::write(dir.path().join("long.txt"), "one\ntwo\nthree\nfour\nfive\n").unwrap();
        let read = call("read_file", json!({"path": "long.txt"}), &ctx).await;
        assert_eq!(read.status, ToolStatus::Completed);
        assert_eq!(
            read.output,
            "     1\tone\n     2\ttwo\n     3\tthree\n[... 2 more lines: call read_file with \
             offset=4 to read on ...]"
        );

        // The cap falls inside "€": the character is dropped whole, not half-decoded.
        ctx.max_output_bytes = 10;
        std::fs::write(dir.path().join("euro.txt"), "€€€€€").unwrap();
        let read = call("read_file", json!({"path": "euro.txt"}), &ctx).await;
        assert_eq!(read.output, "     1\t€ [... line cut: 15 bytes long ...]");

        ctx.max_output_bytes = 100;
        std::fs::write(dir.path().join("binary.bin"), b"ok\xff\xfe").unwrap();
        let read = call("read_file", json!({"path": "binary.bin"}), &ctx).await;
        assert_eq!(read.status, ToolStatus::Completed);
        assert_eq!(read.output, "     1\tok\u{FFFD}\u{FFFD}");
    }

    #[tokio::test]
    async fn read_file_takes_an_offset_and_a_limit() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(dir.path());
        let file: String = (1..=3000).map(|n| format!("line {n}\n")).collect();
        std::fs::write(dir.path().join("big.txt"), file).unwrap();
        let read = call(
            "read_file",
            json!({"path": "big.txt", "offset": 10, "limit": 3}),
            &ctx,
        )
        .await;
        assert_eq!(read.status, ToolStatus::Completed);
        assert_eq!(
            read.output,
            "    10\tline 10\n    11\tline 11\n    12\tline 12\n[... 2988 more lines: call \
             read_file with offset=13 to read on ...]"
        );
        // Without a limit, the first 2000 lines.
        let read = call("read_file", json!({"path": "big.txt"}), &ctx).await;
        let lines: Vec<&str> = read.output.lines().collect();
        assert_eq!(lines.len(), 2001);
        assert_eq!(lines[1999], "  2000\tline 2000");
        assert_eq!(
            lines[2000],
            "[... 1000 more lines: call read_file with offset=2001 to read on ...]"
        );
        let read = call(
            "read_file",
            json!({"path": "big.txt", "offset": 2999}),
            &ctx,
        )
        .await;
        assert_eq!(read.output, "  2999\tline 2999\n  3000\tline 3000");
    }

    #[tokio::test]
    async fn read_file_offsets_past_the_end_and_empty_files() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(dir.path());
        std::fs::write(dir.path().join("three.txt"), "a\nb\nc\n").unwrap();
        std::fs::write(dir.path().join("one.txt"), "a").unwrap();
        std::fs::write(dir.path().join("empty.txt"), "").unwrap();
        #[track_caller]
        fn check(result: ToolResult, status: ToolStatus, expected: &str) {
            assert_eq!(result.status, status);
            assert_eq!(result.output, expected);
        }
        check(
            call("read_file", json!({"path": "three.txt", "offset": 4}), &ctx).await,
            ToolStatus::Failed,
            "offset 4 is past the end of three.txt, which has 3 lines",
        );
        check(
            call("read_file", json!({"path": "one.txt", "offset": 9}), &ctx).await,
            ToolStatus::Failed,
            "offset 9 is past the end of one.txt, which has 1 line",
        );
        check(
            call("read_file", json!({"path": "empty.txt"}), &ctx).await,
            ToolStatus::Completed,
            "(empty file)",
        );
        check(
            call("read_file", json!({"path": "empty.txt", "offset": 2}), &ctx).await,
            ToolStatus::Failed,
            "offset 2 is past the end of empty.txt, which has 0 lines",
        );
        check(
            call("read_file", json!({"path": "three.txt", "offset": 0}), &ctx).await,
            ToolStatus::Failed,
            "parameter `offset` must be a whole number from 1 to 9007199254740992",
        );
        check(
            call(
                "read_file",
                json!({"path": "three.txt", "limit": 1.5}),
                &ctx,
            )
            .await,
            ToolStatus::Failed,
            "parameter `limit` must be a whole number from 1 to 9007199254740992",
        );
    }

    #[tokio::test]
    async fn read_file_shows_crlf_lines_without_the_cr_and_cuts_long_lines() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(dir.path());
        let long = "y".repeat(5000);
        std::fs::write(
            dir.path().join("dos.txt"),
            format!("first\r\n{long}\r\nlast\r\n"),
        )
        .unwrap();
        let read = call("read_file", json!({"path": "dos.txt"}), &ctx).await;
        assert_eq!(
            read.output,
            format!(
                "     1\tfirst\n     2\t{} [... line cut: 5000 bytes long ...]\n     3\tlast\n\
                 [the lines end with CRLF (\\r\\n); the \\r is not shown]",
                &long[..2000]
            )
        );
    }

    #[tokio::test]
    async fn read_file_returns_an_image_as_an_image() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(dir.path());
        let png = super::super::image_file::test_png(64, 32);
        std::fs::write(dir.path().join("logo.png"), &png).unwrap();
        // Named as text, it is still an image: the bytes decide.
        std::fs::write(dir.path().join("logo.txt"), &png).unwrap();
        for path in ["logo.png", "logo.txt"] {
            let read = call("read_file", json!({"path": path}), &ctx).await;
            assert_eq!(read.status, ToolStatus::Completed);
            assert_eq!(read.output, "[image: image/png, 64x32, 33 bytes]");
            assert_eq!(read.images.len(), 1);
            assert_eq!(read.images[0].media_type, "image/png");
        }
        std::fs::write(
            dir.path().join("huge.png"),
            super::super::image_file::test_png(9000, 9000),
        )
        .unwrap();
        let read = call("read_file", json!({"path": "huge.png"}), &ctx).await;
        assert_eq!(read.status, ToolStatus::Failed);
        assert!(read.images.is_empty());
        assert!(
            read.output
                .starts_with("huge.png cannot be sent to a model: the image is 9000 × 9000"),
            "{}",
            read.output
        );
    }

    #[tokio::test]
    async fn read_file_reads_only_the_beginning_of_a_device() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = context(dir.path());
        let read = call("read_file", json!({"path": "/dev/zero"}), &ctx).await;
        assert_eq!(read.status, ToolStatus::Completed);
        assert_eq!(
            read.output,
            format!(
                "     1\t{} [... line cut: 65536 bytes long ...]",
                "\0".repeat(2000)
            )
        );
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
