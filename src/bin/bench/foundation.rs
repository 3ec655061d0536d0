//! `openvaala-bench foundation`: generates conversations through `Store::create_conversation`
//! (the records the runtime writes), then times `openvaala reindex`, the start of `openvaala
//! serve`, list and search requests over loopback, and the server's resident memory.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use chrono::{DateTime, TimeDelta, Utc};
use clap::Args;
use openvaala::config::Config;
use openvaala::domain::user_item;
use openvaala::domain::{
    Item, ItemKind, ItemStatus, Message, MessageMode, MessageSource, MessageStatus, TurnStatus,
    new_id,
};
use openvaala::runtime::title::auto_title;
use openvaala::store::Store;
use openvaala::store::records::{ConversationCreated, MetaRecord, SessionRecord};
use serde_json::Value;

use super::server::{ServerProcess, http_client, reindex, server_binary};
use super::stats::{mb, median, median_duration, ms, percentile, plural, thousands, verdict};
use super::text::{Rng, prose, sentence_case};

#[derive(Args)]
pub struct FoundationArgs {
    /// How many conversations to generate.
    #[arg(long, default_value_t = 100_000)]
    conversations: usize,
    /// How many times reindex and start are measured (the median is reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Where to generate the data directory [default: a fresh directory in the system temp dir].
    /// It must not exist or be empty, unless `--reuse` is given.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Keep the generated data directory instead of removing it at the end.
    #[arg(long)]
    keep: bool,
    /// Measure an existing data directory generated earlier (with `--keep`) instead of
    /// generating one; it is never removed.
    #[arg(long, requires = "data_dir")]
    reuse: bool,
    /// Threads writing conversations. Generation waits on fsync, not on the CPU, so this is
    /// well above the number of cores.
    #[arg(long, default_value_t = 16)]
    threads: usize,
    /// Seed of the text generator: the same seed gives the same texts.
    #[arg(long, default_value_t = 7341)]
    seed: u64,
}

/// The word a search should find in about 0.1 % of the conversations.
const RARE_WORD: &str = "zanzibar";
const RARE_PER_MILLE: u64 = 1;
/// The word a search should find in about 10 % of the conversations.
const COMMON_WORD: &str = "kubernetes";
const COMMON_PER_MILLE: u64 = 100;

/// Requests of each latency measurement, after the warm-up requests whose times are dropped.
const WARMUPS: usize = 10;
const LIST_REQUESTS: usize = 200;
const SEARCH_REQUESTS: usize = 100;

/// Everything `foundation` measured, printed as one table at the end.
#[derive(Default)]
struct Results {
    conversations: usize,
    generation: Option<Duration>,
    /// Conversations per second of each reindex, computed from its wall-clock time.
    reindex_rates: Vec<f64>,
    metadata_db_bytes: u64,
    first_start: Duration,
    starts: Vec<Duration>,
    stops: Vec<Duration>,
    rss_after_start_kb: Vec<u64>,
    rss_after_requests_kb: u64,
    peak_rss_kb: u64,
    list: Vec<Duration>,
    list_hits: usize,
    searches: Vec<SearchResult>,
}

struct SearchResult {
    word: &'static str,
    expected_matches: usize,
    hits_on_page: usize,
    latencies: Vec<Duration>,
}

pub fn foundation(args: &FoundationArgs) -> anyhow::Result<()> {
    if args.runs == 0 || args.threads == 0 {
        bail!("--runs and --threads must be at least 1");
    }
    let server = server_binary()?;
    let (data_dir, created) = prepare_data_dir(args)?;
    eprintln!("data directory: {}", data_dir.display());
    let outcome = measure(args, &server, &data_dir);
    if created && !args.keep {
        eprintln!("removing {}", data_dir.display());
        fs::remove_dir_all(&data_dir)
            .with_context(|| format!("cannot remove {}", data_dir.display()))?;
    }
    let results = outcome?;
    print!("{}", results_table(&results, args));
    Ok(())
}

fn measure(args: &FoundationArgs, server: &Path, data_dir: &Path) -> anyhow::Result<Results> {
    let mut results = Results::default();
    let store = Store::open(data_dir)?;
    if args.reuse {
        results.conversations = store.conversation_ids()?.len();
        eprintln!(
            "reusing {} conversations in {}",
            results.conversations,
            data_dir.display()
        );
    } else {
        let started = Instant::now();
        generate(&store, args.conversations, args.threads, args.seed)?;
        results.generation = Some(started.elapsed());
        results.conversations = args.conversations;
    }

    for run in 1..=args.runs {
        let (indexed, elapsed) = reindex(server, data_dir)?;
        if indexed != results.conversations {
            eprintln!(
                "warning: reindex indexed {indexed} conversations, expected {}",
                results.conversations
            );
        }
        let rate = indexed as f64 / elapsed.as_secs_f64();
        eprintln!(
            "reindex {run}/{}: {indexed} conversations in {:.2} s ({rate:.0}/s)",
            args.runs,
            elapsed.as_secs_f64()
        );
        results.reindex_rates.push(rate);
    }
    results.metadata_db_bytes = fs::metadata(store.index_path()).map_or(0, |m| m.len());

    let http = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // The first start after a reindex finds no record of a clean shutdown and reconciles the
    // whole index with the directories; it is measured apart from ordinary starts.
    let mut running = ServerProcess::start(server, data_dir)?;
    results.first_start = http.block_on(running.wait_until_healthy())?;
    eprintln!(
        "first start after reindex: {:.1} ms",
        ms(results.first_start)
    );
    running.stop()?;

    for run in 1..=args.runs {
        let mut running = ServerProcess::start(server, data_dir)?;
        let start = http.block_on(running.wait_until_healthy())?;
        let rss = running.rss_kb()?;
        eprintln!(
            "start {run}/{}: {:.1} ms, {:.1} MB resident",
            args.runs,
            ms(start),
            mb(rss)
        );
        results.starts.push(start);
        results.rss_after_start_kb.push(rss);
        if run == args.runs {
            http.block_on(measure_requests(&running, args, &mut results))?;
            results.rss_after_requests_kb = running.rss_kb()?;
            results.peak_rss_kb = running.peak_rss_kb()?;
        }
        results.stops.push(running.stop()?);
    }
    Ok(results)
}

/// Times the first page of the list and a search for the rare and the common word.
async fn measure_requests(
    running: &ServerProcess,
    args: &FoundationArgs,
    results: &mut Results,
) -> anyhow::Result<()> {
    let client = http_client()?;
    let list_url = format!("{}/api/conversations", running.base);
    let (latencies, page) = time_requests(&client, &list_url, LIST_REQUESTS).await?;
    results.list_hits = page_conversations(&page);
    eprintln!(
        "list: p50 {:.2} ms, p99 {:.2} ms",
        ms(percentile(&latencies, 0.50)),
        ms(percentile(&latencies, 0.99))
    );
    results.list = latencies;

    let (rare_matches, common_matches) = expected_matches(args.seed, results.conversations);
    for (word, expected_matches) in [(RARE_WORD, rare_matches), (COMMON_WORD, common_matches)] {
        let url = format!("{list_url}?q={word}");
        let (latencies, page) = time_requests(&client, &url, SEARCH_REQUESTS).await?;
        let result = SearchResult {
            word,
            expected_matches,
            hits_on_page: page_conversations(&page),
            latencies,
        };
        eprintln!(
            "search `{word}`: p50 {:.2} ms, p99 {:.2} ms, {} on the first page",
            ms(percentile(&result.latencies, 0.50)),
            ms(percentile(&result.latencies, 0.99)),
            result.hits_on_page
        );
        results.searches.push(result);
    }
    Ok(())
}

/// Sends `WARMUPS + count` sequential GETs over one kept-alive connection and returns the
/// times of the last `count` (request sent to body read) and the last body.
async fn time_requests(
    client: &reqwest::Client,
    url: &str,
    count: usize,
) -> anyhow::Result<(Vec<Duration>, Value)> {
    let mut latencies = Vec::with_capacity(count);
    let mut body = Vec::new();
    for request in 0..WARMUPS + count {
        let started = Instant::now();
        let response = client.get(url).send().await?;
        let status = response.status();
        let bytes = response.bytes().await?;
        let elapsed = started.elapsed();
        if !status.is_success() {
            bail!(
                "GET {url} answered {status}: {}",
                String::from_utf8_lossy(&bytes)
            );
        }
        if request >= WARMUPS {
            latencies.push(elapsed);
        }
        body = bytes.to_vec();
    }
    let page = serde_json::from_slice(&body).with_context(|| format!("GET {url}: not JSON"))?;
    Ok((latencies, page))
}

fn page_conversations(page: &Value) -> usize {
    page["conversations"].as_array().map_or(0, Vec::len)
}

// ---------------------------------------------------------------------------------------------
// Generating the data directory.

/// Returns the data directory and whether this run created it (and so may remove it).
fn prepare_data_dir(args: &FoundationArgs) -> anyhow::Result<(PathBuf, bool)> {
    let dir = match &args.data_dir {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir().join(format!("openvaala-bench-{}", uuid::Uuid::now_v7())),
    };
    if args.reuse {
        if !dir.join("conversations").is_dir() {
            bail!("--reuse: {} holds no conversations", dir.display());
        }
        return Ok((dir, false));
    }
    let existed = dir.exists();
    if existed && fs::read_dir(&dir)?.next().is_some() {
        bail!(
            "{} is not empty: remove it, or measure it as it is with --reuse",
            dir.display()
        );
    }
    fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok((dir, !existed))
}

/// Writes `count` conversations with `threads` threads, each through the store's own
/// `create_conversation` (build in `tmp/`, fsync, rename), printing progress every two seconds.
fn generate(store: &Store, count: usize, threads: usize, seed: u64) -> anyhow::Result<()> {
    let config = Config::builtin();
    let agent = config.default_agent.clone();
    let model = config.default_agent().model.clone();
    let cwd = std::env::temp_dir().to_string_lossy().into_owned();
    let next = AtomicUsize::new(0);
    let written = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let first_error: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    let started = Instant::now();
    eprintln!("generating {count} conversations with {threads} threads…");
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                while !failed.load(Ordering::Relaxed) {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    if index >= count {
                        return;
                    }
                    let plan = ConversationPlan::new(seed, index);
                    let outcome = write_conversation(store, &plan, &agent, &model, &cwd);
                    if let Err(error) = outcome {
                        failed.store(true, Ordering::Relaxed);
                        first_error.lock().expect("error slot").get_or_insert(error);
                        return;
                    }
                    written.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        let mut last_report = Instant::now();
        while written.load(Ordering::Relaxed) < count && !failed.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
            if last_report.elapsed() >= Duration::from_secs(2) {
                last_report = Instant::now();
                let done = written.load(Ordering::Relaxed);
                eprintln!(
                    "  {done}/{count} ({:.0}/s)",
                    done as f64 / started.elapsed().as_secs_f64()
                );
            }
        }
    });
    if let Some(error) = first_error.into_inner().expect("error slot") {
        return Err(error.context("cannot generate the data directory"));
    }
    eprintln!(
        "generated {count} conversations in {:.1} s ({:.0}/s)",
        started.elapsed().as_secs_f64(),
        count as f64 / started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// What one finished conversation looks like: a user message, one completed turn, an answer.
struct ConversationPlan {
    user_text: String,
    agent_text: String,
    created_at: DateTime<Utc>,
    /// How long its one turn took.
    turn: TimeDelta,
    has_rare: bool,
    has_common: bool,
}

impl ConversationPlan {
    /// The plan of conversation `index`: it depends only on the seed and the index, so any
    /// thread can build any conversation and the counts of matches can be recomputed.
    fn new(seed: u64, index: usize) -> ConversationPlan {
        let mut rng = Rng::new(seed ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let has_rare = rng.below(1000) < RARE_PER_MILLE;
        let has_common = rng.below(1000) < COMMON_PER_MILLE;

        // The first line becomes the title; most messages say more after it.
        let mut first_line = rng.words(3, 9);
        let mut body = if rng.below(10) < 7 {
            rng.sentences(1, 4)
        } else {
            Vec::new()
        };
        let mut agent_words = rng.sentences(2, 8);
        if has_rare {
            let target = if rng.below(3) == 0 || body.is_empty() {
                &mut first_line
            } else {
                &mut body
            };
            insert_at_random(&mut rng, target, RARE_WORD);
        }
        if has_common {
            let target = match rng.below(3) {
                0 => &mut first_line,
                1 if !body.is_empty() => &mut body,
                _ => &mut agent_words,
            };
            insert_at_random(&mut rng, target, COMMON_WORD);
        }
        let mut user_text = sentence_case(&first_line);
        if rng.below(4) == 0 {
            user_text.push('?');
        }
        if !body.is_empty() {
            user_text.push_str("\n\n");
            user_text.push_str(&prose(&body));
        }

        // About one conversation every four minutes, going back from the start of 2025.
        let base = DateTime::<Utc>::from_timestamp(1_735_689_600, 0).expect("valid time");
        let created_at = base
            + TimeDelta::seconds(index as i64 * 240 + rng.below(240) as i64)
            + TimeDelta::microseconds(rng.below(1_000_000) as i64);
        ConversationPlan {
            user_text,
            agent_text: prose(&agent_words),
            created_at,
            turn: TimeDelta::milliseconds(800 + rng.below(90_000) as i64),
            has_rare,
            has_common,
        }
    }
}

/// Builds and stores the records `Runtime::create_conversation` and the end of the first turn
/// would have written for this plan.
fn write_conversation(
    store: &Store,
    plan: &ConversationPlan,
    agent: &str,
    model: &str,
    cwd: &str,
) -> anyhow::Result<()> {
    let conversation_id = new_id("c");
    let root_session_id = new_id("s");
    let turn_id = new_id("t");
    let created_at = plan.created_at;
    let ended_at = created_at + plan.turn;
    let message = Message {
        hooks: Vec::new(),
        id: new_id("m"),
        session_id: root_session_id.clone(),
        text: plan.user_text.clone(),
        mode: MessageMode::Steer,
        source: MessageSource::User,
        from_session_id: None,
        status: MessageStatus::Started,
        created_at,
        images: Vec::new(),
        command: None,
    };
    let mut records = MetaRecord::conversation_start(ConversationCreated {
        id: conversation_id.clone(),
        title: auto_title(&message.text),
        created_at,
        cwd: cwd.to_owned(),
        agent: agent.to_owned(),
        model: model.to_owned(),
        root_session_id: root_session_id.clone(),
        forked_from: None,
        mcp: Default::default(),
        budget: Default::default(),
    });
    records.extend([
        MetaRecord::MessageAccepted {
            message: message.clone(),
            idempotency_key: None,
            turn_id: None,
        },
        MetaRecord::TurnStarted {
            session_id: root_session_id.clone(),
            turn_id: turn_id.clone(),
            message_ids: vec![message.id.clone()],
            at: created_at,
            retry_of: None,
        },
        MetaRecord::TurnEnded {
            session_id: root_session_id.clone(),
            turn_id: turn_id.clone(),
            status: TurnStatus::Completed,
            error: None,
            error_code: None,
            at: ended_at,
            usage: None,
        },
    ]);
    let answer = Item {
        id: new_id("m"),
        session_id: root_session_id.clone(),
        turn_id: turn_id.clone(),
        seq: 2,
        created_at: created_at + TimeDelta::milliseconds(400),
        status: ItemStatus::Completed,
        compacted: false,
        step: None,
        kind: ItemKind::AgentMessage {
            text: plan.agent_text.clone(),
        },
    };
    let session_records = [
        SessionRecord::Item {
            item: user_item(&message, &turn_id, 1),
        },
        SessionRecord::Item { item: answer },
    ];
    store.create_conversation(
        &conversation_id,
        &records,
        &[(root_session_id.as_str(), &session_records[..])],
        None,
    )?;
    Ok(())
}

/// How many of the first `count` conversations contain the rare and the common word.
fn expected_matches(seed: u64, count: usize) -> (usize, usize) {
    (0..count)
        .map(|index| ConversationPlan::new(seed, index))
        .fold((0, 0), |(rare, common), plan| {
            (
                rare + usize::from(plan.has_rare),
                common + usize::from(plan.has_common),
            )
        })
}

fn insert_at_random(rng: &mut Rng, words: &mut Vec<&'static str>, word: &'static str) {
    let position = rng.below(words.len() as u64 + 1) as usize;
    words.insert(position, word);
}

// ---------------------------------------------------------------------------------------------
// The results table.

fn results_table(results: &Results, args: &FoundationArgs) -> String {
    let mut out = String::new();
    let runs = args.runs;
    let _ = writeln!(
        out,
        "\n## Foundation benchmark: {} conversations\n",
        thousands(results.conversations as u64)
    );
    let _ = writeln!(out, "| Measurement | Result | Target | |");
    let _ = writeln!(out, "|---|---|---|---|");

    let start = median_duration(&results.starts);
    let _ = writeln!(
        out,
        "| start → `/api/health` 200 (median of {runs}; min–max) | {:.1} ms ({:.1}–{:.1}) | < 200 ms | {} |",
        ms(start),
        ms(*results.starts.iter().min().expect("a start")),
        ms(*results.starts.iter().max().expect("a start")),
        verdict(ms(start) < 200.0)
    );
    let list_p50 = percentile(&results.list, 0.50);
    let _ = writeln!(
        out,
        "| list, first page of {} (p50 / p99 of {LIST_REQUESTS}) | {:.2} / {:.2} ms | < 5 ms | {} |",
        results.list_hits,
        ms(list_p50),
        ms(percentile(&results.list, 0.99)),
        verdict(ms(list_p50) < 5.0)
    );
    for search in &results.searches {
        let p50 = percentile(&search.latencies, 0.50);
        let _ = writeln!(
            out,
            "| search `{}`: {} match, {} on the first page (p50 / p99 of {SEARCH_REQUESTS}) | {:.2} / {:.2} ms | < 20 ms | {} |",
            search.word,
            plural(search.expected_matches, "conversation"),
            search.hits_on_page,
            ms(p50),
            ms(percentile(&search.latencies, 0.99)),
            verdict(ms(p50) < 20.0)
        );
    }
    let rate = median(&results.reindex_rates);
    let _ = writeln!(
        out,
        "| reindex (median of {runs}; min–max) | {} conv/s ({}–{}) | ≥ 5,000 conv/s | {} |",
        thousands(rate as u64),
        thousands(
            results
                .reindex_rates
                .iter()
                .copied()
                .fold(f64::MAX, f64::min) as u64
        ),
        thousands(results.reindex_rates.iter().copied().fold(0.0, f64::max) as u64),
        verdict(rate >= 5_000.0)
    );
    let rss_start = median(
        &results
            .rss_after_start_kb
            .iter()
            .map(|&kb| kb as f64)
            .collect::<Vec<_>>(),
    );
    let _ = writeln!(
        out,
        "| RSS right after start (median of {runs}) | {:.1} MB | < 40 MB | {} |",
        rss_start / 1024.0,
        verdict(rss_start / 1024.0 < 40.0)
    );
    let _ = writeln!(
        out,
        "| RSS after the list and search requests (peak {:.1} MB) | {:.1} MB | < 40 MB | {} |",
        mb(results.peak_rss_kb),
        mb(results.rss_after_requests_kb),
        verdict(mb(results.rss_after_requests_kb) < 40.0)
    );

    let _ = writeln!(out, "\nFor information:\n");
    let _ = writeln!(out, "| Measurement | Result |");
    let _ = writeln!(out, "|---|---|");
    if let Some(generation) = results.generation {
        let _ = writeln!(
            out,
            "| generation through `Store::create_conversation` ({} threads) | {:.1} s ({} conv/s) |",
            args.threads,
            generation.as_secs_f64(),
            thousands((results.conversations as f64 / generation.as_secs_f64()) as u64)
        );
    }
    let _ = writeln!(
        out,
        "| first start after a reindex (reconciles the whole index) | {:.1} ms |",
        ms(results.first_start)
    );
    let _ = writeln!(
        out,
        "| `serve stop` until the process exited (median of {runs}) | {:.1} ms |",
        ms(median_duration(&results.stops))
    );
    let _ = writeln!(
        out,
        "| metadata.db size | {:.1} MB |",
        results.metadata_db_bytes as f64 / 1_048_576.0
    );
    out
}

#[cfg(test)]
mod tests {
    use super::super::text::WORDS;
    use super::*;

    #[test]
    fn no_vocabulary_word_contains_a_searched_word() {
        for word in WORDS.iter() {
            assert!(
                !word.contains(RARE_WORD) && !word.contains(COMMON_WORD),
                "{word}"
            );
        }
    }

    #[test]
    fn plans_depend_only_on_seed_and_index() {
        let first = ConversationPlan::new(1, 42);
        let again = ConversationPlan::new(1, 42);
        assert_eq!(first.user_text, again.user_text);
        assert_eq!(first.created_at, again.created_at);
        assert_ne!(first.user_text, ConversationPlan::new(1, 43).user_text);
    }

    #[test]
    fn searched_words_appear_about_as_often_as_intended() {
        let (rare, common) = expected_matches(7341, 100_000);
        assert!((50..200).contains(&rare), "{rare}");
        assert!((9_000..11_000).contains(&common), "{common}");
    }
}
