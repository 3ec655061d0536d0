//! `openvaala-bench encoder`: the token encoder before (tiktoken-rs) and after (`tiktoken`'s
//! compact tables), in one run. The resident memory of the service after its first turn, with
//! the built-in demo model and with an OpenAI-named model (`gpt-4o`, answered by the fake
//! provider), for the release binary beside this one and, with `--before`, for a binary built
//! before the change; the memory each encoder adds on its own (`o200k_base`, in a fresh
//! process each); the time to count long runs of one character and long texts of other kinds;
//! and whether both encoders count the same on the corpus, generated prose and odd texts.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use openvaala::model::tokens::Tokenizer;

use super::fake_provider::{FakeProvider, Script};
use super::meter::{Resident, first_turn_then, openai_config};
use super::server::{proc_status_kb, server_binary};
use super::stats::{mb, thousands};
use super::text::{Rng, prose};

#[derive(Args)]
pub struct EncoderArgs {
    /// The `openvaala` binary of a build before the change, measured beside this build's.
    #[arg(long)]
    before: Option<PathBuf>,
    /// Megabytes of each long text that is timed.
    #[arg(long, default_value_t = 15)]
    run_mb: usize,
    /// Only build this encoder and print the resident memory it added (KiB): what the bench
    /// runs in a fresh process for each encoder.
    #[arg(long, hide = true)]
    rss_of: Option<Encoder>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Encoder {
    /// tiktoken-rs, whole texts counted in `parts`, as the meter did before.
    Before,
    /// The meter's encoder now (`Tokenizer::encode_count`).
    After,
}

impl Encoder {
    fn count(self, tokenizer: Tokenizer, text: &str) -> u64 {
        match self {
            Encoder::After => tokenizer.encode_count(text),
            Encoder::Before => reference_count(tokenizer, text),
        }
    }
}

/// What tiktoken-rs counts, whole texts counted in `parts`, as the meter did before.
#[cfg(feature = "reference-encoder")]
fn reference_count(tokenizer: Tokenizer, text: &str) -> u64 {
    let encoding = match tokenizer {
        Tokenizer::O200kBase => tiktoken_rs::o200k_base_singleton(),
        Tokenizer::Cl100kBase | Tokenizer::Anthropic => tiktoken_rs::cl100k_base_singleton(),
    };
    openvaala::model::tokens::parts(text)
        .map(|part| encoding.count_ordinary(part) as u64)
        .sum()
}

#[cfg(not(feature = "reference-encoder"))]
fn reference_count(_: Tokenizer, _: &str) -> u64 {
    unreachable!("`encoder` refuses to run without the reference encoder")
}

/// The target for resident memory after the first turn.
const RSS_TARGET_MIB: f64 = 25.0;
/// The corpus the unit tests count: English and Chinese prose, code, JSON, a transcript.
const CORPUS: &str = include_str!("../../model/tokens/corpus.txt");

pub fn encoder(args: &EncoderArgs) -> anyhow::Result<()> {
    if !cfg!(feature = "reference-encoder") {
        bail!(
            "this bench compares with tiktoken-rs, which the service does not link: build it with \
             `cargo run --release --features reference-encoder --bin openvaala-bench -- encoder`"
        );
    }
    if let Some(encoder) = args.rss_of {
        let before = own_rss_kb()?;
        encoder.count(Tokenizer::O200kBase, "warm up");
        println!("{}", own_rss_kb()?.saturating_sub(before));
        return Ok(());
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| Measurement | before (the `--before` binary; tiktoken-rs) | after (this build; tiktoken) | Target |\n|---|---|---|---|"
    );
    service_memory(args.before.as_deref(), &mut out)?;
    // Each encoder in a fresh process, so that neither finds the other's freed memory to reuse.
    let _ = writeln!(
        out,
        "| resident memory one encoder adds (`o200k_base`, built alone in a fresh process) | {:.1} MiB | {:.1} MiB | |",
        mb(encoder_rss_kb(Encoder::Before)?),
        mb(encoder_rss_kb(Encoder::After)?),
    );
    timings(args.run_mb, &mut out);
    same_counts(&mut out);
    print!("{out}");
    Ok(())
}

/// Resident memory after the first turn, with the demo model and with `gpt-4o`, for the
/// binary before the change (when given) and this build's.
fn service_memory(before: Option<&Path>, out: &mut String) -> anyhow::Result<()> {
    let after = server_binary()?;
    let dir =
        std::env::temp_dir().join(format!("openvaala-bench-encoder-{}", uuid::Uuid::now_v7()));
    fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let outcome = (|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let provider = FakeProvider::start(Script::Words { deltas: 20 })?;
        let configs = [
            ("the built-in demo model", None),
            (
                "an OpenAI-named model (`gpt-4o`)",
                Some(openai_config(&provider.base_url)),
            ),
        ];
        let shown = |resident: &Resident| {
            format!(
                "{:.1} MiB: {:.1} anonymous, {:.1} file pages",
                mb(resident.total),
                mb(resident.anon),
                mb(resident.file),
            )
        };
        for (index, (label, config)) in configs.iter().enumerate() {
            let mut after_turn = Vec::new();
            let mut unloaded = Vec::new();
            for (which, binary) in [("before", before), ("after", Some(after.as_path()))] {
                let Some(binary) = binary else {
                    after_turn.push("(no `--before`)".to_owned());
                    unloaded.push("(no `--before`)".to_owned());
                    continue;
                };
                let data_dir = dir.join(format!("data-{index}-{which}"));
                fs::create_dir_all(&data_dir)?;
                let (started, turn, left) = runtime.block_on(first_turn_then(
                    binary,
                    &data_dir,
                    config.as_deref(),
                    &dir,
                    true,
                ))?;
                after_turn.push(format!(
                    "{} (after start: {:.1})",
                    shown(&turn),
                    mb(started)
                ));
                unloaded.push(shown(&left.expect("measured until unloaded")));
            }
            let _ = writeln!(
                out,
                "| resident memory after the first turn, {label} | {} | {} | ≤ {RSS_TARGET_MIB} MiB |",
                after_turn[0], after_turn[1],
            );
            let _ = writeln!(
                out,
                "| and once its conversation left memory (`idle_unload_s = 2`) | {} | {} | |",
                unloaded[0], unloaded[1],
            );
        }
        anyhow::Ok(())
    })();
    fs::remove_dir_all(&dir).with_context(|| format!("cannot remove {}", dir.display()))?;
    outcome
}

/// Runs this bench in a fresh process that builds one encoder, and reads what it added.
fn encoder_rss_kb(encoder: Encoder) -> anyhow::Result<u64> {
    let exe = std::env::current_exe().context("cannot find this executable")?;
    let name = match encoder {
        Encoder::Before => "before",
        Encoder::After => "after",
    };
    let output = Command::new(exe)
        .args(["encoder", "--rss-of", name])
        .output()
        .context("cannot run the encoder's process")?;
    if !output.status.success() {
        bail!(
            "the encoder's process failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let text = String::from_utf8_lossy(&output.stdout);
    text.trim()
        .parse()
        .with_context(|| format!("unexpected output: {text}"))
}

fn own_rss_kb() -> anyhow::Result<u64> {
    proc_status_kb(std::process::id(), "VmRSS")
}

/// The time each encoder takes for long texts: runs of one character (the byte-pair
/// encoder's worst case), random letters (a run whose parts all differ) and prose.
fn timings(run_mb: usize, out: &mut String) {
    let bytes = run_mb * 1024 * 1024;
    let mut rng = Rng::new(7341);
    let letters: String = (0..bytes)
        .map(|_| char::from(b'a' + rng.below(26) as u8))
        .collect();
    let mut text = String::new();
    while text.len() < bytes {
        text.push_str(&prose(&rng.sentences(2, 10)));
        text.push(' ');
    }
    let run_target = "well under 1 s";
    let texts = [
        (
            format!("a {run_mb} MB run of one character (`a`)"),
            "a".repeat(bytes),
            run_target,
        ),
        (
            format!("a {run_mb} MB run of spaces"),
            " ".repeat(bytes),
            run_target,
        ),
        (
            format!("{run_mb} MB of random letters, no spaces"),
            letters,
            "",
        ),
        (format!("{run_mb} MB of generated prose"), text, ""),
    ];
    for (label, text, target) in texts {
        let mut figures = Vec::new();
        for encoder in [Encoder::Before, Encoder::After] {
            // Built before the clock starts.
            encoder.count(Tokenizer::O200kBase, "warm up");
            let started = Instant::now();
            let count = encoder.count(Tokenizer::O200kBase, &text);
            figures.push((started.elapsed(), count));
        }
        let cell = |(time, count): (Duration, u64)| {
            format!(
                "{:.0} ms ({} tokens)",
                time.as_secs_f64() * 1e3,
                thousands(count)
            )
        };
        let _ = writeln!(
            out,
            "| counting {label}, `o200k_base` | {} | {} | {target} |",
            cell(figures[0]),
            cell(figures[1]),
        );
    }
}

/// Both encoders' counts of the corpus's paragraphs, the corpus whole and repeated, generated
/// prose and odd texts, for both encodings.
fn same_counts(out: &mut String) {
    let mut texts: Vec<String> = CORPUS
        .split("\n\n")
        .filter(|part| !part.is_empty())
        .map(str::to_owned)
        .collect();
    texts.push(CORPUS.to_owned());
    texts.push(CORPUS.repeat(20));
    let mut rng = Rng::new(11);
    texts.extend((0..2_000).map(|_| prose(&rng.sentences(1, 12))));
    for c in ["a", " ", "!", "\n", "的", "😀"] {
        texts.push(c.repeat(20_000));
    }
    texts
        .push("  indented\n\n\n   trailing   \r\n\t tabs 12345678 ünïcödé 👩‍💻 <|endoftext|>".into());
    let (mut tokens, mut differ) = (0, 0);
    for tokenizer in [Tokenizer::O200kBase, Tokenizer::Cl100kBase] {
        for text in &texts {
            let before = Encoder::Before.count(tokenizer, text);
            tokens += before;
            if Encoder::After.count(tokenizer, text) != before {
                differ += 1;
            }
        }
    }
    let _ = writeln!(
        out,
        "| texts counted differently, of {} (corpus, prose, odd texts; both encodings; {} tokens) | | {differ} | 0 |",
        thousands(2 * texts.len() as u64),
        thousands(tokens),
    );
}
