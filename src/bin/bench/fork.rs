//! `openvaala-bench fork`: fork and rewind latency over one long conversation. The conversation
//! is written through the store's own code (`Store::create_conversation`, with the records the
//! runtime writes for finished turns), indexed with `openvaala reindex`, and then forked and
//! rewound over HTTP by the release server.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use chrono::{DateTime, TimeDelta};
use clap::Args;
use openvaala::config::Config;
use openvaala::domain::user_item;
use openvaala::domain::{
    ForkedFrom, Item, ItemKind, ItemStatus, Message, MessageMode, MessageSource, MessageStatus,
    TurnStatus, new_id,
};
use openvaala::runtime::fork;
use openvaala::runtime::title::auto_title;
use openvaala::store::Store;
use openvaala::store::records::{ConversationCreated, MetaRecord, SessionCreated, SessionRecord};
use serde_json::{Value, json};

use super::server::{
    ServerProcess, http_client, proc_status_kb, reindex, server_binary, wait_until_quiet,
};
use super::stats::{mb, ms, percentile, thousands, verdict};
use super::text::{Rng, prose};

#[derive(Args)]
pub struct ForkArgs {
    /// Finished turns of the generated conversation; each is a user message and an answer, so
    /// the root session has twice as many items.
    #[arg(long, default_value_t = 5000)]
    turns: usize,
    /// Timed forks, and timed rewinds, after the warm-up requests.
    #[arg(long, default_value_t = 50)]
    requests: usize,
    /// Seed of the text generator: the same seed gives the same texts.
    #[arg(long, default_value_t = 7341)]
    seed: u64,
    /// Keep the data directory (its path is printed) instead of removing it.
    #[arg(long)]
    keep: bool,
}

/// Requests of each kind sent before the timed ones (after the first, cold, fork).
const WARMUPS: usize = 3;

/// The generated conversation.
struct Generated {
    conversation_id: String,
    root_session_id: String,
    items: usize,
    session_bytes: u64,
    /// The user message of the middle turn, which the rewinds go back to.
    rewind_to: String,
    rewind_text: String,
    /// Items before that message (what a rewind copies).
    items_before_rewind: usize,
    took: Duration,
}

/// Everything `fork` measured.
struct Results {
    generated: Generated,
    reindex: Duration,
    timed: Timed,
    rss_after_kb: u64,
    metadata_db_bytes: u64,
    /// The file part of a fork and of a rewind alone, done by this process (see
    /// `time_file_copies`).
    file_forks: FileCopies,
    file_rewinds: FileCopies,
}

/// The file part of copies done by the bench: the whole of each, and the write through
/// `Store::create_conversation_raw` (files written and fsynced, directory renamed) alone.
struct FileCopies {
    total: Vec<Duration>,
    write: Vec<Duration>,
}

/// What the server did, over HTTP.
struct Timed {
    /// The first fork: the server loads the conversation first.
    cold_fork: Duration,
    /// Answer times of forks and rewinds sent when the index had nothing left to do.
    forks: Vec<Duration>,
    rewinds: Vec<Duration>,
    /// From the request until the copy is found by a search (its search rows are copied in the
    /// background, after the answer).
    fork_searchable: Vec<Duration>,
    rewind_searchable: Vec<Duration>,
    /// Answer times of forks and rewinds sent back to back, and the time from the first of
    /// them until the last copy was found by a search.
    burst_forks: Vec<Duration>,
    burst_rewinds: Vec<Duration>,
    burst_fork_drain: Duration,
    burst_rewind_drain: Duration,
    fork_copy: Copy,
    rewind_copy: Copy,
}

/// The root session file of a fork.
struct Copy {
    bytes: u64,
    lines: usize,
}

pub fn fork(args: &ForkArgs) -> anyhow::Result<()> {
    if args.turns < 2 || args.requests == 0 {
        bail!("--turns must be at least 2 and --requests at least 1");
    }
    let server = server_binary()?;
    let dir = std::env::temp_dir().join(format!("openvaala-bench-fork-{}", uuid::Uuid::now_v7()));
    let data_dir = dir.join("data");
    fs::create_dir_all(&data_dir).with_context(|| format!("cannot create {}", dir.display()))?;
    eprintln!("data directory: {}", data_dir.display());
    let outcome = measure(args, &server, &data_dir, &dir.join("scratch"));
    if args.keep {
        eprintln!("kept {}", dir.display());
    } else {
        fs::remove_dir_all(&dir).with_context(|| format!("cannot remove {}", dir.display()))?;
    }
    print!("{}", results_table(&outcome?, args));
    Ok(())
}

fn measure(
    args: &ForkArgs,
    server: &Path,
    data_dir: &Path,
    scratch_dir: &Path,
) -> anyhow::Result<Results> {
    let store = Store::open(data_dir)?;
    let generated = generate(&store, args.turns, args.seed)?;
    eprintln!(
        "generated {} items ({:.1} MB) in {:.1} s",
        generated.items,
        generated.session_bytes as f64 / 1_048_576.0,
        generated.took.as_secs_f64()
    );
    let (indexed, reindex_took) = reindex(server, data_dir)?;
    if indexed != 1 {
        bail!("reindex indexed {indexed} conversations, not 1");
    }

    // The same file work without the server, for comparison: what a fork costs before the
    // index and the HTTP round trip. Measured first, on a disk with nothing left to write back.
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    let scratch = Store::open(scratch_dir)?;
    let file_forks = time_file_copies(&store, &scratch, &generated, None, args.requests)?;
    let file_rewinds = time_file_copies(
        &store,
        &scratch,
        &generated,
        Some(&generated.rewind_to),
        args.requests,
    )?;
    fs::remove_dir_all(scratch_dir)?;
    eprintln!(
        "file part alone: fork {:.1} ms, rewind {:.1} ms (medians)",
        ms(percentile(&file_forks.total, 0.50)),
        ms(percentile(&file_rewinds.total, 0.50))
    );
    let http = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut running = ServerProcess::start(server, data_dir)?;
    http.block_on(running.wait_until_healthy())?;
    let measured = http.block_on(time_forks(&running, &store, &generated, args));
    let rss_after_kb = proc_status_kb(running.pid(), "VmRSS")?;
    running.stop()?;
    let timed = measured?;
    Ok(Results {
        file_forks,
        file_rewinds,
        generated,
        reindex: reindex_took,
        timed,
        rss_after_kb,
        metadata_db_bytes: fs::metadata(store.index_path()).map_or(0, |m| m.len()),
    })
}

/// A word in the first answer of the generated conversation and in no vocabulary word, so a
/// search for it finds exactly the source and the copies whose search rows are in the index.
const SEARCH_MARKER: &str = "quetzalcoatl";
/// How long a copy may take to become searchable, and how often that is checked.
const SEARCHABLE_TIMEOUT: Duration = Duration::from_secs(120);
const SEARCHABLE_POLL: Duration = Duration::from_millis(10);
/// How long the server must have written nothing before the next one-at-a-time request: the
/// commit of a background copy is followed by a WAL checkpoint that writes tens of megabytes.
const QUIET: Duration = Duration::from_millis(200);

/// One cold fork, then forks and rewinds sent one at a time with the index idle (each waits
/// until the previous copy is searchable), then the same sent back to back. All sequential
/// over one kept-alive connection. Checks what was copied.
async fn time_forks(
    running: &ServerProcess,
    store: &Store,
    generated: &Generated,
    args: &ForkArgs,
) -> anyhow::Result<Timed> {
    let client = http_client()?;
    let source = format!(
        "{}/api/conversations/{}",
        running.base, generated.conversation_id
    );
    let search_url = format!("{}/api/conversations?q={SEARCH_MARKER}", running.base);
    let fork_request = (format!("{source}/fork"), json!({}));
    let rewind_request = (
        format!("{source}/rewind"),
        json!({ "message_id": generated.rewind_to }),
    );

    let started = Instant::now();
    let (cold_fork, first) = timed_post(&client, &fork_request.0, &fork_request.1).await?;
    let fork_copy = copied(&client, running, store, &first).await?;
    wait_searchable(&client, &search_url, &first).await?;
    eprintln!(
        "first fork (loads the conversation): {:.1} ms, searchable after {:.1} ms",
        ms(cold_fork),
        ms(started.elapsed())
    );
    if fork_copy.lines != generated.items {
        bail!(
            "the fork holds {} items, not {}",
            fork_copy.lines,
            generated.items
        );
    }

    let pid = running.pid();
    let (forks, fork_searchable) = one_at_a_time(
        &client,
        pid,
        &fork_request,
        &search_url,
        args.requests,
        |_| Ok(()),
    )
    .await?;
    let (rewinds, rewind_searchable) = one_at_a_time(
        &client,
        pid,
        &rewind_request,
        &search_url,
        args.requests,
        |answer| {
            if answer["text"] != generated.rewind_text.as_str() {
                bail!("the rewind did not give back the message's text: {answer}");
            }
            Ok(())
        },
    )
    .await?;
    // The copy of a rewind, checked once.
    let (_, answer) = timed_post(&client, &rewind_request.0, &rewind_request.1).await?;
    let rewind_copy = copied(&client, running, store, &answer).await?;
    wait_searchable(&client, &search_url, &answer).await?;
    if rewind_copy.lines != generated.items_before_rewind {
        bail!(
            "the rewind holds {} items, not {}",
            rewind_copy.lines,
            generated.items_before_rewind
        );
    }

    let (burst_forks, burst_fork_drain) =
        back_to_back(&client, &fork_request, &search_url, args.requests).await?;
    let (burst_rewinds, burst_rewind_drain) =
        back_to_back(&client, &rewind_request, &search_url, args.requests).await?;
    Ok(Timed {
        cold_fork,
        forks,
        rewinds,
        fork_searchable,
        rewind_searchable,
        burst_forks,
        burst_rewinds,
        burst_fork_drain,
        burst_rewind_drain,
        fork_copy,
        rewind_copy,
    })
}

/// `WARMUPS + count` requests, each sent once the previous copy is searchable, the server has
/// stopped writing and the disk has written back (so the background index work of one does not
/// delay the next); returns
/// the answer times and the times until searchable of the last `count`.
async fn one_at_a_time(
    client: &reqwest::Client,
    pid: u32,
    (url, body): &(String, Value),
    search_url: &str,
    count: usize,
    check: impl Fn(&Value) -> anyhow::Result<()>,
) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let mut answers = Vec::with_capacity(count);
    let mut searchable = Vec::with_capacity(count);
    for request in 0..WARMUPS + count {
        let started = Instant::now();
        let (took, answer) = timed_post(client, url, body).await?;
        check(&answer)?;
        wait_searchable(client, search_url, &answer).await?;
        if request >= WARMUPS {
            answers.push(took);
            searchable.push(started.elapsed());
        }
        if !wait_until_quiet(pid, QUIET, SEARCHABLE_TIMEOUT).await? {
            eprintln!("warning: the server kept writing for {SEARCHABLE_TIMEOUT:?}");
        }
        // The copies add ~16 MB each to metadata.db; without this, the kernel's write-back of
        // the previous ones competes with the next fork's fsyncs and the numbers wander.
        // SAFETY: sync(2) takes no arguments and cannot fail.
        unsafe { libc::sync() };
    }
    eprintln!(
        "{}: median {:.1} ms, p90 {:.1} ms; searchable after {:.0} ms (median)",
        url.rsplit('/').next().unwrap_or(url),
        ms(percentile(&answers, 0.50)),
        ms(percentile(&answers, 0.90)),
        ms(percentile(&searchable, 0.50))
    );
    Ok((answers, searchable))
}

/// `count` requests sent back to back; returns their answer times and the time from the first
/// until the last copy was searchable.
async fn back_to_back(
    client: &reqwest::Client,
    (url, body): &(String, Value),
    search_url: &str,
    count: usize,
) -> anyhow::Result<(Vec<Duration>, Duration)> {
    let started = Instant::now();
    let mut answers = Vec::with_capacity(count);
    let mut last = Value::Null;
    for _ in 0..count {
        let (took, answer) = timed_post(client, url, body).await?;
        answers.push(took);
        last = answer;
    }
    wait_searchable(client, search_url, &last).await?;
    let drain = started.elapsed();
    eprintln!(
        "{} back to back: median {:.1} ms, p90 {:.1} ms; all searchable after {:.1} s",
        url.rsplit('/').next().unwrap_or(url),
        ms(percentile(&answers, 0.50)),
        ms(percentile(&answers, 0.90)),
        drain.as_secs_f64()
    );
    Ok((answers, drain))
}

/// Polls a search for `SEARCH_MARKER` until the conversation in `answer` is among the hits.
/// The newest conversations come first, so a new copy is on the first page.
async fn wait_searchable(
    client: &reqwest::Client,
    search_url: &str,
    answer: &Value,
) -> anyhow::Result<()> {
    let id = answer["conversation"]["id"]
        .as_str()
        .context("no conversation in the answer")?;
    let polls = SEARCHABLE_TIMEOUT.as_millis() / SEARCHABLE_POLL.as_millis();
    for _ in 0..polls {
        let page: Value = client.get(search_url).send().await?.json().await?;
        let found = page["conversations"]
            .as_array()
            .is_some_and(|hits| hits.iter().any(|hit| hit["id"] == id));
        if found {
            return Ok(());
        }
        tokio::time::sleep(SEARCHABLE_POLL).await;
    }
    bail!("{id} was not found by a search within {SEARCHABLE_TIMEOUT:?}")
}

/// POSTs, expects 201, and returns the time from sending to the last body byte with the body.
async fn timed_post(
    client: &reqwest::Client,
    url: &str,
    body: &Value,
) -> anyhow::Result<(Duration, Value)> {
    let started = Instant::now();
    let response = client.post(url).json(body).send().await?;
    let status = response.status();
    let bytes = response.bytes().await?;
    let took = started.elapsed();
    if status != reqwest::StatusCode::CREATED {
        bail!(
            "POST {url} answered {status}: {}",
            String::from_utf8_lossy(&bytes)
        );
    }
    let answer = serde_json::from_slice(&bytes).with_context(|| format!("POST {url}: not JSON"))?;
    Ok((took, answer))
}

/// The size and line count of the root session file of the conversation in `answer`.
async fn copied(
    client: &reqwest::Client,
    running: &ServerProcess,
    store: &Store,
    answer: &Value,
) -> anyhow::Result<Copy> {
    let id = answer["conversation"]["id"]
        .as_str()
        .context("no conversation in the answer")?;
    let url = format!("{}/api/conversations/{id}", running.base);
    let conversation: Value = client.get(&url).send().await?.json().await?;
    let session = conversation["root_session_id"]
        .as_str()
        .context("no root session")?;
    let content = fs::read(store.session_path(id, session))?;
    Ok(Copy {
        bytes: content.len() as u64,
        lines: memchr::memchr_iter(b'\n', &content).count(),
    })
}

/// Does what the actor's `fork` does with files, `count` times, into a scratch store: read the
/// root session file, find the cut (for a rewind), rewrite the session id, and write the copy
/// through `Store::create_conversation_raw` (build in `tmp/`, fsync, rename, fsync). Returns
/// the time of each.
fn time_file_copies(
    source: &Store,
    scratch: &Store,
    generated: &Generated,
    rewind_to: Option<&str>,
    count: usize,
) -> anyhow::Result<FileCopies> {
    let config = Config::builtin();
    let path = source.session_path(&generated.conversation_id, &generated.root_session_id);
    let mut copies = FileCopies {
        total: Vec::with_capacity(count),
        write: Vec::with_capacity(count),
    };
    for _ in 0..count {
        let started = Instant::now();
        let content = fs::read(&path)?;
        let end = match rewind_to {
            Some(item_id) => fork::cut_offset(&content, &fork::Cut::BeforeItem(item_id)),
            None => content.len(),
        };
        let last = fork::last_item(&content[..end]).context("nothing to copy")?;
        let conversation_id = new_id("c");
        let session_id = new_id("s");
        let mut history = content[..end].to_vec();
        fork::rewrite_session_id(&mut history, &generated.root_session_id, &session_id);
        let created_at = chrono::Utc::now();
        let records = [
            MetaRecord::ConversationCreated {
                conversation: ConversationCreated {
                    id: conversation_id.clone(),
                    title: "copy (fork)".to_owned(),
                    created_at,
                    cwd: std::env::temp_dir().to_string_lossy().into_owned(),
                    agent: config.default_agent.clone(),
                    model: config.default_agent().model.clone(),
                    root_session_id: session_id.clone(),
                    forked_from: Some(ForkedFrom {
                        conversation_id: generated.conversation_id.clone(),
                        item_id: last.id,
                        worktree: None,
                    }),
                    mcp: Default::default(),
                    budget: Default::default(),
                },
            },
            MetaRecord::SessionCreated {
                session: SessionCreated {
                    id: session_id.clone(),
                    parent_id: None,
                    agent: config.default_agent.clone(),
                    model: config.default_agent().model.clone(),
                    task: None,
                    created_at,
                },
            },
        ];
        let writing = Instant::now();
        scratch.create_conversation_raw(
            &conversation_id,
            &records,
            &[(session_id.as_str(), &history[..])],
            None,
        )?;
        copies.write.push(writing.elapsed());
        copies.total.push(started.elapsed());
    }
    Ok(copies)
}

// ---------------------------------------------------------------------------------------------
// Generating the conversation.

/// Writes one conversation of `turns` finished turns through `Store::create_conversation`: the
/// records `Runtime::create_conversation` and the actor write for each turn (message accepted,
/// turn started, turn ended) and, in the root session, a user message and an agent message of
/// 200–800 bytes each.
fn generate(store: &Store, turns: usize, seed: u64) -> anyhow::Result<Generated> {
    let started = Instant::now();
    let config = Config::builtin();
    let agent = config.default_agent.clone();
    let model = config.default_agent().model.clone();
    let cwd = std::env::temp_dir().to_string_lossy().into_owned();
    let mut rng = Rng::new(seed);
    let conversation_id = new_id("c");
    let root_session_id = new_id("s");
    let created_at = DateTime::from_timestamp(1_735_689_600, 0).expect("valid time");

    let mut meta = Vec::with_capacity(2 + 3 * turns);
    let mut items = Vec::with_capacity(2 * turns);
    let rewind_turn = turns / 2;
    let mut rewind_to = String::new();
    let mut rewind_text = String::new();
    let mut first_text = String::new();
    for turn in 0..turns {
        let at = created_at + TimeDelta::seconds(turn as i64 * 90);
        let turn_id = new_id("t");
        let message = Message {
            hooks: Vec::new(),
            id: new_id("m"),
            session_id: root_session_id.clone(),
            text: text_of_about(&mut rng, 200, 800),
            mode: MessageMode::Steer,
            source: MessageSource::User,
            from_session_id: None,
            status: MessageStatus::Started,
            created_at: at,
            images: Vec::new(),
            command: None,
        };
        if turn == 0 {
            first_text = message.text.clone();
        }
        if turn == rewind_turn {
            rewind_to = message.id.clone();
            rewind_text = message.text.clone();
        }
        let seq = 2 * turn as u64 + 1;
        items.push(SessionRecord::Item {
            item: user_item(&message, &turn_id, seq),
        });
        items.push(SessionRecord::Item {
            item: Item {
                id: new_id("m"),
                session_id: root_session_id.clone(),
                turn_id: turn_id.clone(),
                seq: seq + 1,
                created_at: at + TimeDelta::seconds(20),
                status: ItemStatus::Completed,
                compacted: false,
                step: None,
                kind: ItemKind::AgentMessage {
                    text: if turn == 0 {
                        format!("{} The {SEARCH_MARKER}.", text_of_about(&mut rng, 200, 800))
                    } else {
                        text_of_about(&mut rng, 200, 800)
                    },
                },
            },
        });
        meta.push(MetaRecord::MessageAccepted {
            message: message.clone(),
            idempotency_key: None,
            turn_id: None,
        });
        meta.push(MetaRecord::TurnStarted {
            session_id: root_session_id.clone(),
            turn_id: turn_id.clone(),
            message_ids: vec![message.id.clone()],
            at,
            retry_of: None,
        });
        meta.push(MetaRecord::TurnEnded {
            session_id: root_session_id.clone(),
            turn_id,
            status: TurnStatus::Completed,
            error: None,
            error_code: None,
            at: at + TimeDelta::seconds(21),
            usage: None,
        });
    }
    let head = MetaRecord::conversation_start(ConversationCreated {
        id: conversation_id.clone(),
        title: auto_title(&first_text),
        created_at,
        cwd,
        agent: agent.clone(),
        model: model.clone(),
        root_session_id: root_session_id.clone(),
        forked_from: None,
        mcp: Default::default(),
        budget: Default::default(),
    });
    let records: Vec<MetaRecord> = head.into_iter().chain(meta).collect();
    store.create_conversation(
        &conversation_id,
        &records,
        &[(root_session_id.as_str(), &items[..])],
        None,
    )?;
    let session_bytes = fs::metadata(store.session_path(&conversation_id, &root_session_id))?.len();
    Ok(Generated {
        conversation_id,
        root_session_id,
        items: items.len(),
        session_bytes,
        rewind_to,
        rewind_text,
        items_before_rewind: 2 * rewind_turn,
        took: started.elapsed(),
    })
}

/// Prose of `min` to `max` bytes, aimed at a length drawn between them; whole sentences, so it
/// may end up to one sentence past that length.
fn text_of_about(rng: &mut Rng, min: u64, max: u64) -> String {
    let target = (min + rng.below(max - min + 1)) as usize;
    let mut words = Vec::new();
    // A sentence has at least five words, so this ends long before the bound.
    for _ in 0..max {
        words.extend(rng.sentences(1, 1));
        let text = prose(&words);
        if text.len() >= target {
            return text;
        }
    }
    prose(&words)
}

// ---------------------------------------------------------------------------------------------
// The results table.

fn results_table(results: &Results, args: &ForkArgs) -> String {
    let mut out = String::new();
    let generated = &results.generated;
    let timed = &results.timed;
    let requests = args.requests;
    let _ = writeln!(
        out,
        "\n## Fork benchmark: one conversation of {} items\n",
        thousands(generated.items as u64)
    );
    let _ = writeln!(out, "| Measurement | Result | Target | |");
    let _ = writeln!(out, "|---|---|---|---|");
    let rows = [
        (
            "`POST …/fork`",
            timed.fork_copy.lines,
            &timed.forks,
            "one at a time",
        ),
        (
            "`POST …/rewind` to the middle",
            timed.rewind_copy.lines,
            &timed.rewinds,
            "one at a time",
        ),
        (
            "`POST …/fork`",
            timed.fork_copy.lines,
            &timed.burst_forks,
            "back to back",
        ),
        (
            "`POST …/rewind` to the middle",
            timed.rewind_copy.lines,
            &timed.burst_rewinds,
            "back to back",
        ),
    ];
    for (request, items, latencies, how) in rows {
        let median = percentile(latencies, 0.50);
        let _ = writeln!(
            out,
            "| {request}, {} items copied, {how} (median / p90 of {requests}) | {:.1} / {:.1} ms | < 50 ms | {} |",
            thousands(items as u64),
            ms(median),
            ms(percentile(latencies, 0.90)),
            verdict(ms(median) < 50.0)
        );
    }

    let _ = writeln!(out, "\nFor information:\n");
    let _ = writeln!(out, "| Measurement | Result |");
    let _ = writeln!(out, "|---|---|");
    let _ = writeln!(
        out,
        "| request → the copy is found by a search, one at a time: fork / rewind (medians) | {:.0} / {:.0} ms |",
        ms(percentile(&timed.fork_searchable, 0.50)),
        ms(percentile(&timed.rewind_searchable, 0.50))
    );
    let _ = writeln!(
        out,
        "| {requests} back-to-back requests → the last copy is found by a search: forks / rewinds | {:.1} / {:.1} s |",
        timed.burst_fork_drain.as_secs_f64(),
        timed.burst_rewind_drain.as_secs_f64()
    );
    let _ = writeln!(
        out,
        "| the file part alone, in the bench process (read, cut, rewrite ids, write + fsync): fork / rewind (medians of {requests}) | {:.1} / {:.1} ms |",
        ms(percentile(&results.file_forks.total, 0.50)),
        ms(percentile(&results.file_rewinds.total, 0.50))
    );
    let _ = writeln!(
        out,
        "| … of which `Store::create_conversation_raw` (write, fsync files and directories, rename): fork / rewind | {:.1} / {:.1} ms |",
        ms(percentile(&results.file_forks.write, 0.50)),
        ms(percentile(&results.file_rewinds.write, 0.50))
    );
    let _ = writeln!(
        out,
        "| first fork (the server loads the conversation first) | {:.1} ms |",
        ms(timed.cold_fork)
    );
    let _ = writeln!(
        out,
        "| source root session file / copied file of a fork / of a rewind | {:.2} / {:.2} / {:.2} MB |",
        generated.session_bytes as f64 / 1_048_576.0,
        timed.fork_copy.bytes as f64 / 1_048_576.0,
        timed.rewind_copy.bytes as f64 / 1_048_576.0
    );
    let _ = writeln!(
        out,
        "| generation through `Store::create_conversation` / `openvaala reindex` | {:.2} / {:.2} s |",
        generated.took.as_secs_f64(),
        results.reindex.as_secs_f64()
    );
    let copies = 2 + 2 * (WARMUPS + 2 * requests);
    let _ = writeln!(
        out,
        "| after {copies} copies: metadata.db / server RSS | {:.1} MB / {:.1} MB |",
        results.metadata_db_bytes as f64 / 1_048_576.0,
        mb(results.rss_after_kb)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_have_about_the_asked_length() {
        let mut rng = Rng::new(1);
        for _ in 0..200 {
            let text = text_of_about(&mut rng, 200, 800);
            assert!((200..1000).contains(&text.len()), "{}", text.len());
        }
    }
}
