//! A faulty provider: every kind of fault a provider shows — rate limits, server
//! errors, cut streams, silence mid-answer, garbage instead of events, malformed chunks, a
//! stream without its completion marker, rejections — ends its turn properly, in each of the
//! three protocols: transient faults are retried until the answer comes (`completed`),
//! rejections and exhausted retries end `failed`, and nothing is left running.

use crate::fake_provider::{FakeProvider, Reply, Setup, Wire};

/// One fault: the replies the provider gives to the turn's calls, and how the turn must end.
struct Fault {
    name: &'static str,
    replies: Vec<Reply>,
    ends: &'static str,
}

fn faults() -> Vec<Fault> {
    let answer = || Reply::text("Recovered answer.");
    let long = "A longer answer that is cut somewhere in the middle of it.";
    vec![
        Fault {
            name: "429 with Retry-After",
            replies: vec![Reply::rate_limited("0"), answer()],
            ends: "completed",
        },
        Fault {
            name: "500",
            replies: vec![Reply::status(500), answer()],
            ends: "completed",
        },
        Fault {
            name: "502 then 503",
            replies: vec![Reply::status(502), Reply::status(503), answer()],
            ends: "completed",
        },
        Fault {
            name: "stream cut mid-answer",
            replies: vec![Reply::cut_after(long, 3), answer()],
            ends: "completed",
        },
        Fault {
            name: "silence mid-answer",
            replies: vec![
                Reply::StallAfter {
                    text: long.to_owned(),
                    chunks: 2,
                },
                answer(),
            ],
            ends: "completed",
        },
        Fault {
            name: "garbage instead of events",
            replies: vec![Reply::Garbage, answer()],
            ends: "completed",
        },
        Fault {
            name: "malformed chunk",
            replies: vec![Reply::MalformedChunk, answer()],
            ends: "completed",
        },
        Fault {
            name: "no completion marker",
            replies: vec![Reply::end_after(long, 2), answer()],
            ends: "completed",
        },
        Fault {
            name: "400 rejected",
            replies: vec![Reply::rejected(400, "the request is malformed")],
            ends: "failed",
        },
        Fault {
            name: "401 unauthorized",
            replies: vec![Reply::rejected(401, "invalid api key")],
            ends: "failed",
        },
        Fault {
            name: "500 every time",
            replies: (0..10).map(|_| Reply::status(500)).collect(),
            ends: "failed",
        },
    ]
}

async fn every_fault_ends_its_turn(wire: Wire) {
    let fake = FakeProvider::start(wire).await;
    // Silence counts as a transient error after 300 ms without data.
    let config = fake.config().replace(
        "max_delay_ms = 50",
        "max_delay_ms = 50\nchunk_timeout_ms = 300",
    );
    let setup = Setup::start_with(fake, config, Vec::new()).await;
    let mut ended = Vec::new();
    for fault in faults() {
        for reply in fault.replies {
            setup.fake.push(reply);
        }
        let run = setup.turn(fault.name).await;
        let status = run.ended()["status"].as_str().unwrap().to_owned();
        assert_eq!(
            status, fault.ends,
            "{wire:?}, {}: {:?}",
            fault.name, run.events
        );
        assert_eq!(setup.fake.remaining(), 0, "{wire:?}, {}", fault.name);
        if status == "completed" {
            assert_eq!(
                run.completed("agent_message").last().unwrap()["text"],
                "Recovered answer.",
                "{wire:?}, {}",
                fault.name
            );
        }
        ended.push(status);
    }
    // Nothing stays running: not the conversation, not an item.
    let (_, conversation) = setup
        .server
        .get(&format!("/api/conversations/{}", setup.id))
        .await;
    assert_eq!(conversation["status"], "idle");
    let running: Vec<_> = setup
        .items()
        .await
        .into_iter()
        .filter(|item| item["status"] == "running")
        .collect();
    assert!(running.is_empty(), "{running:?}");
    let completed = ended.iter().filter(|s| *s == "completed").count();
    eprintln!(
        "faulty provider, {wire:?}: {} turns, {completed} completed after retries, {} failed as they should, 0 left running",
        ended.len(),
        ended.len() - completed
    );
}

#[tokio::test]
async fn every_provider_fault_ends_its_turn_properly_openai_chat() {
    every_fault_ends_its_turn(Wire::OpenaiChat).await;
}

#[tokio::test]
async fn every_provider_fault_ends_its_turn_properly_openai_responses() {
    every_fault_ends_its_turn(Wire::OpenaiResponses).await;
}

#[tokio::test]
async fn every_provider_fault_ends_its_turn_properly_anthropic_messages() {
    every_fault_ends_its_turn(Wire::AnthropicMessages).await;
}
