//! `openvaala-bench checkpoints`: what checkpoints cost. A working tree of 10,000 files and
//! 200 MB is snapshotted once (every file hashed and stored), then, many times over, one file
//! changes and the snapshot after the tool call is timed: the walk, the stat comparison that
//! spares the 9,999 unchanged files from being read, hashing the one changed file, and writing
//! the new manifest. Then 100 files change and a restore putting them back is timed (with its
//! safety snapshot, fsynced journal and files, and the snapshot after it).

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use openvaala::checkpoints::restore::CallRecord;
use openvaala::checkpoints::{Checkpoints, Limits, RestoreOptions};

use super::stats::{median_duration, ms, percentile, thousands, verdict};

#[derive(Args)]
pub struct CheckpointsArgs {
    /// Files in the working tree.
    #[arg(long, default_value_t = 10_000)]
    files: usize,
    /// Their total size, in MB (10^6 bytes).
    #[arg(long, default_value_t = 200)]
    mb: usize,
    /// Snapshots timed after a one-file change.
    #[arg(long, default_value_t = 100)]
    snapshots: usize,
    /// Restores of 100 changed files timed.
    #[arg(long, default_value_t = 10)]
    restores: usize,
}

const TARGET: Duration = Duration::from_millis(20);
const RESTORED_FILES: usize = 100;

pub fn checkpoints(args: &CheckpointsArgs) -> anyhow::Result<()> {
    let root = std::env::temp_dir().join(format!(
        "openvaala-bench-checkpoints-{}",
        std::process::id()
    ));
    let result = run(args, &root);
    let _ = std::fs::remove_dir_all(&root);
    print!("{}", result?);
    Ok(())
}

fn file_path(tree: &Path, n: usize) -> std::path::PathBuf {
    tree.join(format!("d{:03}", n / 100))
        .join(format!("f{n:05}.txt"))
}

/// A file's content: `size` bytes of text unique to (`n`, `version`), so no two dedupe.
fn content(n: usize, version: usize, size: usize) -> Vec<u8> {
    let line = format!("file {n} version {version}: the quick brown fox jumps over the lazy dog\n");
    line.as_bytes().iter().copied().cycle().take(size).collect()
}

fn run(args: &CheckpointsArgs, root: &Path) -> anyhow::Result<String> {
    let tree = root.join("tree");
    let data = root.join("data");
    let size = args.mb * 1_000_000 / args.files;
    for n in 0..args.files {
        let path = file_path(&tree, n);
        std::fs::create_dir_all(path.parent().expect("in a folder"))?;
        std::fs::write(&path, content(n, 0, size))?;
    }
    std::fs::create_dir_all(&data)?;
    let checkpoints = Checkpoints::open(&data, Limits::default());
    let started = Instant::now();
    checkpoints.snapshot(&tree).map_err(anyhow::Error::msg)?;
    let first = started.elapsed();
    // Files written just before the first snapshot are too recent for their times to be
    // trusted; the second snapshot reads them once more, and from then on none is read.
    std::thread::sleep(Duration::from_millis(150));
    checkpoints.snapshot(&tree).map_err(anyhow::Error::msg)?;

    let mut after_call = Vec::with_capacity(args.snapshots);
    let mut after_call_cpu = Vec::with_capacity(args.snapshots);
    for round in 0..args.snapshots {
        let n = (round * 7919) % args.files;
        std::fs::write(file_path(&tree, n), content(n, round + 1, size))?;
        let (started, cpu) = (Instant::now(), process_cpu());
        let changes = checkpoints.after_call(&tree).map_err(anyhow::Error::msg)?;
        after_call.push(started.elapsed());
        after_call_cpu.push(process_cpu().saturating_sub(cpu));
        anyhow::ensure!(
            changes.modified.len() == 1,
            "one file changed, the snapshot saw {:?}",
            changes
        );
    }
    let mut unchanged = Vec::with_capacity(args.snapshots);
    for _ in 0..args.snapshots.min(20) {
        let started = Instant::now();
        checkpoints.after_call(&tree).map_err(anyhow::Error::msg)?;
        unchanged.push(started.elapsed());
    }

    let mut restores = Vec::with_capacity(args.restores);
    for round in 0..args.restores {
        checkpoints.snapshot(&tree).map_err(anyhow::Error::msg)?;
        for k in 0..RESTORED_FILES {
            let n = (k * 97 + round) % args.files;
            std::fs::write(file_path(&tree, n), content(n, 1_000 + round, size))?;
        }
        let changes = checkpoints.after_call(&tree).map_err(anyhow::Error::msg)?;
        let record = CallRecord {
            before: changes.before,
            after: changes.after,
            paths: changes.modified,
        };
        anyhow::ensure!(record.paths.len() == RESTORED_FILES, "100 files changed");
        let started = Instant::now();
        let outcome = checkpoints
            .restore(&tree, "c_bench", &[record], RestoreOptions::default())
            .context("restore")?;
        restores.push(started.elapsed());
        anyhow::ensure!(outcome.restored.len() == RESTORED_FILES && outcome.conflicts.is_empty());
    }

    let stored = du(&data.join("checkpoints"))?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| Measurement | Result | Target | |\n|---|---|---|---|"
    );
    let _ = writeln!(
        out,
        "| snapshot after a tool call that changed one file ({} files, {} MB): median / p99 of {} | {:.1} / {:.1} ms | < {} ms | {} |",
        thousands(args.files as u64),
        args.mb,
        args.snapshots,
        ms(median_duration(&after_call)),
        ms(percentile(&after_call, 0.99)),
        TARGET.as_millis(),
        verdict(median_duration(&after_call) < TARGET),
    );
    let _ = writeln!(
        out,
        "| the same, CPU time of every thread of the process (steadier on a busy machine): median | {:.1} ms | | |",
        ms(median_duration(&after_call_cpu)),
    );
    let _ = writeln!(
        out,
        "| snapshot after a tool call that changed nothing: median | {:.1} ms | | |",
        ms(median_duration(&unchanged)),
    );
    let _ = writeln!(
        out,
        "| restore of {RESTORED_FILES} changed files (safety snapshot, journal, files fsynced, snapshot after): median / max of {} | {:.1} / {:.1} ms | | |",
        args.restores,
        ms(median_duration(&restores)),
        ms(restores.iter().max().copied().unwrap_or_default()),
    );
    let _ = writeln!(
        out,
        "| first snapshot (every file hashed and stored) | {:.0} ms | | |",
        ms(first)
    );
    let _ = writeln!(
        out,
        "| store size after the run | {:.0} MB | | |",
        stored as f64 / 1e6
    );
    Ok(out)
}

/// Bytes under a directory.
fn du(dir: &Path) -> anyhow::Result<u64> {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        for entry in std::fs::read_dir(&current)? {
            let entry = entry?;
            let meta = entry.metadata()?;
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                total += meta.len();
            }
        }
    }
    Ok(total)
}

/// CPU time the whole process (every thread) has used so far.
fn process_cpu() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given, which lives on this stack.
    unsafe {
        libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut now);
    }
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}
