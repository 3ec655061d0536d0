//! How long the service takes to decode a provider's stream, apart from the network and the
//! rest of the turn: the Chat Completions chunks the fake provider sends, through the same
//! SSE parser and decoder a turn uses (`wire::events`, `ChatDecoder`). Measured twice: each
//! chunk in a read of its own (a provider that the service keeps up with) and all of them in
//! one read (a burst that piled up while the service was busy).

use std::time::{Duration, Instant};

use axum::body::Bytes;
use futures::StreamExt;
use openvaala::model::openai_chat::ChatDecoder;
use openvaala::model::wire::{self, Decoder};

use super::fake_provider::content_chunk;
use super::median_duration;

/// Times each way is measured; the median is reported.
const ROUNDS: usize = 7;

pub struct Decoding {
    pub chunks: usize,
    /// Median time for all chunks, each in a read of its own.
    pub one_per_read: Duration,
    /// Median time for all chunks in one read.
    pub one_read: Duration,
}

pub fn measure(chunks: usize) -> anyhow::Result<Decoding> {
    let pieces: Vec<Bytes> = (0..chunks)
        .map(|index| content_chunk(&format!("{index};")))
        .collect();
    let whole = Bytes::from(pieces.concat());
    let mut one_per_read = Vec::with_capacity(ROUNDS);
    let mut one_read = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        one_per_read.push(time_decoding(pieces.clone(), chunks)?);
        one_read.push(time_decoding(vec![whole.clone()], chunks)?);
    }
    Ok(Decoding {
        chunks,
        one_per_read: median_duration(&one_per_read),
        one_read: median_duration(&one_read),
    })
}

/// Decodes `reads` as one response body; checks that every chunk gave its delta.
fn time_decoding(reads: Vec<Bytes>, chunks: usize) -> anyhow::Result<Duration> {
    let body = futures::stream::iter(reads.into_iter().map(Ok::<_, std::io::Error>));
    let started = Instant::now();
    let mut decoder = ChatDecoder::default();
    let mut deltas = 0;
    futures::executor::block_on(async {
        let events = wire::events(body);
        futures::pin_mut!(events);
        while let Some(event) = events.next().await {
            deltas += decoder.decode(&event?)?.len();
        }
        anyhow::Ok(())
    })?;
    let elapsed = started.elapsed();
    anyhow::ensure!(
        deltas == chunks,
        "decoded {deltas} events from {chunks} chunks"
    );
    Ok(elapsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_chunk_decodes_to_its_delta_whether_read_alone_or_together() {
        let pieces: Vec<Bytes> = (0..50)
            .map(|index| content_chunk(&format!("{index};")))
            .collect();
        let whole = Bytes::from(pieces.concat());
        time_decoding(pieces, 50).expect("chunk by chunk");
        time_decoding(vec![whole.clone()], 50).expect("all at once");
        // A chunk short: the count check fails.
        assert!(time_decoding(vec![whole], 51).is_err());
    }
}
