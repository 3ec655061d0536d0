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
use openvaala::domain::{
    Item, ItemKind, ItemStatus, Message, MessageMode, MessageSource, MessageStatus, TurnStatus,
    new_id,
};
use openvaala::runtime::title::auto_title;
use openvaala::runtime::user_item;
use openvaala::store::Store;
use openvaala::store::records::{ConversationCreated, MetaRecord, SessionCreated, SessionRecord};
use serde_json::{Value, json};

use super::text::{Rng, prose};
use super::{
    ServerProcess, http_client, mb, ms, percentile, proc_status_kb, reindex, server_binary,
    thousands, verdict,
};

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
    cold_fork: Duration,
    forks: Vec<Duration>,
    rewinds: Vec<Duration>,
    fork_copy: Copy,
    rewind_copy: Copy,
    rss_after_kb: u64,
    metadata_db_bytes: u64,
}

/// The root session file of a fork.
#[derive(Default)]
struct Copy {
    bytes: u64,
    lines: usize,
}

pub fn fork(args: &ForkArgs) -> anyhow::Result<()> {
    if args.turns < 2 || args.requests == 0 {
        bail!("--turns must be at least 2 and --requests at least 1");
    }
    let server = server_binary()?;
    let data_dir =
        std::env::temp_dir().join(format!("openvaala-bench-fork-{}", uuid::Uuid::now_v7()));
    fs::create_dir_all(&data_dir)
        .with_context(|| format!("cannot create {}", data_dir.display()))?;
    eprintln!("data directory: {}", data_dir.display());
    let outcome = measure(args, &server, &data_dir);
    if args.keep {
        eprintln!("kept {}", data_dir.display());
    } else {
        fs::remove_dir_all(&data_dir)
            .with_context(|| format!("cannot remove {}", data_dir.display()))?;
    }
    print!("{}", results_table(&outcome?, args));
    Ok(())
}

fn measure(args: &ForkArgs, server: &Path, data_dir: &Path) -> anyhow::Result<Results> {
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

    let http = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut running = ServerProcess::start(server, data_dir)?;
    http.block_on(running.wait_until_healthy())?;
    let measured = http.block_on(time_forks(&running, &store, &generated, args));
    let rss_after_kb = proc_status_kb(running.pid(), "VmRSS")?;
    running.stop()?;
    let (cold_fork, forks, rewinds, fork_copy, rewind_copy) = measured?;
    Ok(Results {
        generated,
        reindex: reindex_took,
        cold_fork,
        forks,
        rewinds,
        fork_copy,
        rewind_copy,
        rss_after_kb,
        metadata_db_bytes: fs::metadata(store.index_path()).map_or(0, |m| m.len()),
    })
}

type Timed = (Duration, Vec<Duration>, Vec<Duration>, Copy, Copy);

/// One cold fork (the server loads the conversation first), then warm-ups and the timed forks
/// and rewinds, sequential over one kept-alive connection. Checks what was copied.
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
    let fork_url = format!("{source}/fork");
    let rewind_url = format!("{source}/rewind");
    let rewind_body = json!({ "message_id": generated.rewind_to });

    let (cold_fork, first) = timed_post(&client, &fork_url, &json!({})).await?;
    eprintln!(
        "first fork (loads the conversation): {:.1} ms",
        ms(cold_fork)
    );
    let fork_copy = copied(&client, running, store, &first).await?;
    if fork_copy.lines != generated.items {
        bail!(
            "the fork holds {} items, not {}",
            fork_copy.lines,
            generated.items
        );
    }

    let mut forks = Vec::with_capacity(args.requests);
    for request in 0..WARMUPS + args.requests {
        let (took, _) = timed_post(&client, &fork_url, &json!({})).await?;
        if request >= WARMUPS {
            forks.push(took);
        }
    }
    eprintln!(
        "fork: median {:.1} ms, p90 {:.1} ms",
        ms(percentile(&forks, 0.50)),
        ms(percentile(&forks, 0.90))
    );

    let mut rewinds = Vec::with_capacity(args.requests);
    let mut rewind_copy = Copy::default();
    for request in 0..WARMUPS + args.requests {
        let (took, answer) = timed_post(&client, &rewind_url, &rewind_body).await?;
        if request == 0 {
            if answer["text"] != generated.rewind_text.as_str() {
                bail!("the rewind did not give back the message's text: {answer}");
            }
            rewind_copy = copied(&client, running, store, &answer).await?;
            if rewind_copy.lines != generated.items_before_rewind {
                bail!(
                    "the rewind holds {} items, not {}",
                    rewind_copy.lines,
                    generated.items_before_rewind
                );
            }
        }
        if request >= WARMUPS {
            rewinds.push(took);
        }
    }
    eprintln!(
        "rewind: median {:.1} ms, p90 {:.1} ms",
        ms(percentile(&rewinds, 0.50)),
        ms(percentile(&rewinds, 0.90))
    );
    Ok((cold_fork, forks, rewinds, fork_copy, rewind_copy))
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
            id: new_id("m"),
            session_id: root_session_id.clone(),
            text: text_of_about(&mut rng, 200, 800),
            mode: MessageMode::Steer,
            source: MessageSource::User,
            from_session_id: None,
            status: MessageStatus::Started,
            created_at: at,
            images: Vec::new(),
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
                kind: ItemKind::AgentMessage {
                    text: text_of_about(&mut rng, 200, 800),
                },
            },
        });
        meta.push(MetaRecord::MessageAccepted {
            message: message.clone(),
            idempotency_key: None,
        });
        meta.push(MetaRecord::TurnStarted {
            session_id: root_session_id.clone(),
            turn_id: turn_id.clone(),
            message_ids: vec![message.id.clone()],
            at,
        });
        meta.push(MetaRecord::TurnEnded {
            session_id: root_session_id.clone(),
            turn_id,
            status: TurnStatus::Completed,
            error: None,
            at: at + TimeDelta::seconds(21),
        });
    }
    let head = [
        MetaRecord::ConversationCreated {
            conversation: ConversationCreated {
                id: conversation_id.clone(),
                title: auto_title(&first_text),
                created_at,
                cwd,
                agent: agent.clone(),
                model: model.clone(),
                root_session_id: root_session_id.clone(),
                forked_from: None,
            },
        },
        MetaRecord::SessionCreated {
            session: SessionCreated {
                id: root_session_id.clone(),
                parent_id: None,
                agent,
                model,
                task: None,
                created_at,
            },
        },
    ];
    let records: Vec<MetaRecord> = head.into_iter().chain(meta).collect();
    store.create_conversation(
        &conversation_id,
        &records,
        &[(root_session_id.as_str(), &items[..])],
    )?;
    let session_bytes = fs::metadata(store.session_path(&conversation_id, &root_session_id))?.len();
    Ok(Generated {
        conversation_id,
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
    let requests = args.requests;
    let _ = writeln!(
        out,
        "\n## Fork benchmark: one conversation of {} items\n",
        thousands(generated.items as u64)
    );
    let _ = writeln!(out, "| Measurement | Result | Target | |");
    let _ = writeln!(out, "|---|---|---|---|");
    let fork_median = percentile(&results.forks, 0.50);
    let _ = writeln!(
        out,
        "| `POST …/fork`, {} items copied (median / p90 of {requests}) | {:.1} / {:.1} ms | < 50 ms | {} |",
        thousands(results.fork_copy.lines as u64),
        ms(fork_median),
        ms(percentile(&results.forks, 0.90)),
        verdict(ms(fork_median) < 50.0)
    );
    let rewind_median = percentile(&results.rewinds, 0.50);
    let _ = writeln!(
        out,
        "| `POST …/rewind` to the middle, {} items copied (median / p90 of {requests}) | {:.1} / {:.1} ms | < 50 ms | {} |",
        thousands(results.rewind_copy.lines as u64),
        ms(rewind_median),
        ms(percentile(&results.rewinds, 0.90)),
        verdict(ms(rewind_median) < 50.0)
    );

    let _ = writeln!(out, "\nFor information:\n");
    let _ = writeln!(out, "| Measurement | Result |");
    let _ = writeln!(out, "|---|---|");
    let _ = writeln!(
        out,
        "| source root session file | {:.2} MB |",
        generated.session_bytes as f64 / 1_048_576.0
    );
    let _ = writeln!(
        out,
        "| copied file: fork / rewind | {:.2} / {:.2} MB |",
        results.fork_copy.bytes as f64 / 1_048_576.0,
        results.rewind_copy.bytes as f64 / 1_048_576.0
    );
    let _ = writeln!(
        out,
        "| first fork (the server loads the conversation first) | {:.1} ms |",
        ms(results.cold_fork)
    );
    let _ = writeln!(
        out,
        "| generation through `Store::create_conversation` / `openvaala reindex` | {:.2} / {:.2} s |",
        generated.took.as_secs_f64(),
        results.reindex.as_secs_f64()
    );
    let copies = 1 + 2 * (WARMUPS + requests);
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
