//! `openvaala-bench grep`: what a search costs an agent. A tree of 10,000 source-like files of a
//! few KB (100 folders, a `.gitignore`d build folder beside them, the word searched for in about
//! one file in a hundred) is searched with the `grep` tool, warm (the tree in the page cache),
//! in each output mode, through `tools::run_tool` as a turn calls it, under the default sandbox
//! (its read rules checked on every file) and with `sandbox = "off"`; `glob` is timed beside it.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use clap::Args;
use openvaala::config::SandboxMode;
use openvaala::tools::{SandboxPolicy, ToolContext, ToolStatus, run_tool};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::stats::{median_duration, ms, percentile, thousands, verdict};

#[derive(Args)]
pub struct GrepArgs {
    /// Files in the tree.
    #[arg(long, default_value_t = 10_000)]
    files: usize,
    /// Bytes per file.
    #[arg(long, default_value_t = 4_000)]
    file_bytes: usize,
    /// Timed searches per case, after the warm-up.
    #[arg(long, default_value_t = 30)]
    runs: usize,
}

/// A warm search of the whole tree, at the median.
const TARGET: Duration = Duration::from_millis(100);
const WARM_UP: usize = 3;
/// One file in this many holds the word searched for.
const MATCH_EVERY: usize = 97;

pub fn grep(args: &GrepArgs) -> anyhow::Result<()> {
    ensure!(
        args.files > 0 && args.runs > 0,
        "--files and --runs must be at least 1"
    );
    let root = std::env::temp_dir().join(format!("openvaala-bench-grep-{}", std::process::id()));
    let result = run(args, &root);
    let _ = std::fs::remove_dir_all(&root);
    print!("{}", result?);
    Ok(())
}

/// A file's text: lines of code-like text, `needle_word` in one line of every
/// [`MATCH_EVERY`]th file.
fn content(n: usize, size: usize) -> String {
    let mut text = String::with_capacity(size + 100);
    let mut line = 0;
    while text.len() < size {
        if n.is_multiple_of(MATCH_EVERY) && line == 7 {
            let _ = writeln!(text, "    let needle_word = lookup({n}, {line});");
        } else {
            let _ = writeln!(
                text,
                "    let value_{line} = compute(input_{n}, {line}) + offset; // step {line}"
            );
        }
        line += 1;
    }
    text
}

fn seed(tree: &Path, args: &GrepArgs) -> anyhow::Result<usize> {
    let mut matching = 0;
    for n in 0..args.files {
        let path = tree
            .join(format!("src/m{:03}", n / 100))
            .join(format!("f{n:05}.rs"));
        std::fs::create_dir_all(path.parent().context("in a folder")?)?;
        std::fs::write(&path, content(n, args.file_bytes))?;
        matching += usize::from(n.is_multiple_of(MATCH_EVERY));
    }
    // Ignored files the walk must not even open.
    std::fs::write(tree.join(".gitignore"), "target/\n")?;
    for n in 0..100 {
        let path = tree.join(format!("target/debug/g{n:03}.rs"));
        std::fs::create_dir_all(path.parent().context("in a folder")?)?;
        std::fs::write(&path, content(0, args.file_bytes))?;
    }
    Ok(matching)
}

fn run(args: &GrepArgs, root: &Path) -> anyhow::Result<String> {
    let tree = root.join("tree");
    let matching = seed(&tree, args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let context = |mode: SandboxMode| ToolContext {
        background: None,
        cwd: tree.clone(),
        shell_timeout: Duration::from_secs(30),
        max_output_bytes: 64 * 1024,
        process_records: None,
        sandbox: SandboxPolicy {
            mode,
            ..SandboxPolicy::default()
        },
        mcp: None,
    };
    let time = |name: &str, arguments: Value, ctx: &ToolContext| -> anyhow::Result<Vec<Duration>> {
        let (live, _chunks) = tokio::sync::mpsc::unbounded_channel();
        let cancel = CancellationToken::new();
        let mut samples = Vec::with_capacity(args.runs);
        for round in 0..WARM_UP + args.runs {
            let started = Instant::now();
            let result = runtime.block_on(run_tool(name, &arguments, ctx, &live, &cancel));
            let elapsed = started.elapsed();
            ensure!(
                result.status == ToolStatus::Completed,
                "{name} {arguments}: {}",
                result.output
            );
            if round == 0 && name == "grep" && arguments["output_mode"].is_null() {
                let found = result.output.lines().count();
                ensure!(
                    found == matching.min(100) + usize::from(matching > 100),
                    "{matching} files should match, the search found:\n{}",
                    result.output
                );
            }
            if round >= WARM_UP {
                samples.push(elapsed);
            }
        }
        Ok(samples)
    };
    let sandboxed = context(SandboxMode::WorkspaceWrite);
    let cases: Vec<(String, Vec<Duration>, bool)> = vec![
        (
            "`grep needle_word` (files_with_matches), sandboxed".to_owned(),
            time("grep", json!({"pattern": "needle_word"}), &sandboxed)?,
            true,
        ),
        (
            "the same, `sandbox = \"off\"`".to_owned(),
            time(
                "grep",
                json!({"pattern": "needle_word"}),
                &context(SandboxMode::Off),
            )?,
            false,
        ),
        (
            "`output_mode = \"content\"`, sandboxed".to_owned(),
            time(
                "grep",
                json!({"pattern": "needle_word", "output_mode": "content"}),
                &sandboxed,
            )?,
            false,
        ),
        (
            "`output_mode = \"count\"` of a word in every line, case-insensitive".to_owned(),
            time(
                "grep",
                json!({"pattern": "COMPUTE", "output_mode": "count", "case_insensitive": true}),
                &sandboxed,
            )?,
            false,
        ),
        (
            "`glob **/*.rs`, sandboxed".to_owned(),
            time("glob", json!({"pattern": "**/*.rs"}), &sandboxed)?,
            false,
        ),
    ];
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} files of {} bytes ({matching} matching), {} runs each after {WARM_UP} warm-ups, {} threads available\n",
        thousands(args.files as u64),
        thousands(args.file_bytes as u64),
        args.runs,
        std::thread::available_parallelism().map_or(1, |n| n.get()),
    );
    let _ = writeln!(
        out,
        "| Measurement | median / p90 | Target | |\n|---|---|---|---|"
    );
    for (label, samples, targeted) in cases {
        let median = median_duration(&samples);
        let (target, met) = if targeted {
            (
                format!("< {} ms", TARGET.as_millis()),
                verdict(median < TARGET),
            )
        } else {
            (String::new(), "")
        };
        let _ = writeln!(
            out,
            "| {label} | {:.1} / {:.1} ms | {target} | {met} |",
            ms(median),
            ms(percentile(&samples, 0.9)),
        );
    }
    Ok(out)
}
