//! The arithmetic of the providers' prompt caches, as their documentation describes them, for
//! the fake provider of the `cache` bench (`cache_provider`). Pure: the caller hands in the
//! request's parts in order and the time, and gets the usage report the provider would send.
//!
//! Tokens are counted as a quarter of the bytes of each part's canonical JSON (the part as the
//! request's JSON parser read it, serialized again), summed in order: deterministic, and close
//! enough to a real tokenizer for shares and costs. A prefix is identified by a chained hash of
//! its parts (each link hashes the one before and the part's bytes), so two requests share a
//! cached prefix exactly when their first parts are the same bytes.
//!
//! - Anthropic Messages caches only at `cache_control` breakpoints (at most 4 a request, or the
//!   request is refused). The prefix ending at each breakpoint is written, unless it is shorter
//!   than the model's minimum; a later request reads back the longest prefix it starts with.
//!   The real service looks back from each breakpoint over about 20 earlier block boundaries for
//!   a prefix it holds; so does this one, at the boundaries of the blocks (tools, system blocks,
//!   message content blocks). Each entry lives 5 minutes (1 hour with `"ttl": "1h"`), renewed
//!   when read.
//! - OpenAI caches a prompt of 1,024 tokens or more in steps of 128 tokens, per
//!   `prompt_cache_key`: a request reads the longest stored step its prompt starts with. Without
//!   a key this cache stores nothing. (Real OpenAI still caches by prefix then, routed by a hash
//!   of the prompt's start, so a keyless request may hit there; the fake leaves that out so that
//!   `prompt_cache = "off"` is the uncached baseline.) Entries live 5 minutes (the low end of
//!   OpenAI's "5 to 10 minutes of inactivity"), or 24 hours with `prompt_cache_retention =
//!   "24h"`, renewed when read.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hasher};
use std::time::{Duration, Instant};

/// How many block boundaries before a breakpoint Anthropic checks for a cached prefix.
pub const LOOKBACK_BLOCKS: usize = 20;
/// At most this many `cache_control` breakpoints in one Anthropic request.
pub const MAX_BREAKPOINTS: usize = 4;
/// Anthropic's default cache lifetime, and the one a breakpoint asks for with `"ttl": "1h"`.
pub const FIVE_MINUTES: Duration = Duration::from_secs(5 * 60);
pub const ONE_HOUR: Duration = Duration::from_secs(60 * 60);
/// OpenAI's shortest cached prompt and its granularity, in tokens.
pub const OPENAI_MINIMUM: u64 = 1024;
pub const OPENAI_STEP: u64 = 128;
/// OpenAI's in-memory retention (the low end of what it documents), and the extended one.
pub const OPENAI_IN_MEMORY: Duration = Duration::from_secs(5 * 60);
pub const OPENAI_EXTENDED: Duration = Duration::from_secs(24 * 60 * 60);

/// Bytes per token of the approximation.
const BYTES_PER_TOKEN: u64 = 4;

pub fn tokens(bytes: usize) -> u64 {
    bytes as u64 / BYTES_PER_TOKEN
}

/// The shortest prefix Anthropic caches for a model, in tokens, as its documentation lists them
/// (4,096 for Opus 4.5 and Haiku 4.5, 2,048 for the older Haiku models, else 1,024): the
/// provider's side of the rule, kept apart from the service's own copy so the bench checks it.
pub fn anthropic_minimum(model: &str) -> u64 {
    if model.contains("opus-4-5") || model.contains("haiku-4-5") {
        4096
    } else if model.contains("haiku") {
        2048
    } else {
        1024
    }
}

/// The hash of a prefix extended by one more part.
fn link(previous: u64, bytes: &[u8]) -> u64 {
    // SipHash with fixed keys: the same bytes give the same digest in every run.
    let mut hasher = DefaultHasher::new();
    hasher.write_u64(previous);
    hasher.write(bytes);
    hasher.finish()
}

/// The start of every chain: what else must match for a prefix to be shared (the model).
pub fn seed(model: &str) -> u64 {
    link(0, model.as_bytes())
}

/// One content block of an Anthropic request, in the order the cache sees them (tools, then
/// system, then messages), its `cache_control` taken out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub canonical: String,
    /// The lifetime its `cache_control` asks for, when it carries one.
    pub breakpoint: Option<Duration>,
}

/// Anthropic's usage report: the three input counts add up to the request's input.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AnthropicUsage {
    pub input_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub cache_read_input_tokens: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooManyBreakpoints(pub usize);

#[derive(Debug, Clone, Copy)]
struct Entry {
    expires: Instant,
    lifetime: Duration,
}

impl Entry {
    fn new(lifetime: Duration, now: Instant) -> Entry {
        Entry {
            expires: now + lifetime,
            lifetime,
        }
    }
}

/// An organization's Anthropic cache: the prefixes written at breakpoints, by digest.
#[derive(Debug, Default)]
pub struct AnthropicCache {
    entries: HashMap<u64, Entry>,
}

impl AnthropicCache {
    /// Accounts for one request of `model` (`minimum`: its shortest cacheable prefix, in
    /// tokens) whose blocks are `blocks`, at `now`: reads the longest live prefix found looking
    /// back from each breakpoint, writes the prefixes at its breakpoints.
    pub fn request(
        &mut self,
        model: &str,
        blocks: &[Block],
        minimum: u64,
        now: Instant,
    ) -> Result<AnthropicUsage, TooManyBreakpoints> {
        let breakpoints: Vec<usize> = (0..blocks.len())
            .filter(|&index| blocks[index].breakpoint.is_some())
            .collect();
        if breakpoints.len() > MAX_BREAKPOINTS {
            return Err(TooManyBreakpoints(breakpoints.len()));
        }
        // The digest and length (in tokens) of the prefix ending with each block.
        let mut digests = Vec::with_capacity(blocks.len());
        let mut ends = Vec::with_capacity(blocks.len());
        let (mut digest, mut bytes) = (seed(model), 0);
        for block in blocks {
            digest = link(digest, block.canonical.as_bytes());
            bytes += block.canonical.len();
            digests.push(digest);
            ends.push(tokens(bytes));
        }
        let total = tokens(bytes);
        let live = |entries: &HashMap<u64, Entry>, index: usize| {
            entries
                .get(&digests[index])
                .is_some_and(|entry| entry.expires > now)
        };
        // The furthest block boundary whose prefix is cached, within reach of a breakpoint.
        let read_through = breakpoints
            .iter()
            .filter_map(|&breakpoint| {
                (breakpoint.saturating_sub(LOOKBACK_BLOCKS)..=breakpoint)
                    .rev()
                    .find(|&index| live(&self.entries, index))
            })
            .max();
        let read = read_through.map_or(0, |index| ends[index]);
        if let Some(index) = read_through
            && let Some(entry) = self.entries.get_mut(&digests[index])
        {
            *entry = Entry::new(entry.lifetime, now);
        }
        let mut written_through = read;
        for &index in &breakpoints {
            if ends[index] < minimum || ends[index] <= read {
                continue;
            }
            let lifetime = blocks[index].breakpoint.unwrap_or(FIVE_MINUTES);
            self.entries
                .insert(digests[index], Entry::new(lifetime, now));
            written_through = written_through.max(ends[index]);
        }
        let written = written_through - read;
        Ok(AnthropicUsage {
            input_tokens: total - read - written,
            cache_creation_input_tokens: written,
            cache_read_input_tokens: read,
        })
    }
}

/// OpenAI's usage report: `prompt_tokens` includes `cached_tokens`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenaiUsage {
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
}

/// OpenAI's cache: prompt prefixes at every 128-token step from 1,024 on, per cache key.
#[derive(Debug, Default)]
pub struct OpenaiCache {
    entries: HashMap<(String, u64), Entry>,
}

impl OpenaiCache {
    /// Accounts for one request whose prompt is `parts` in order (each a canonical JSON text),
    /// with its `prompt_cache_key` and lifetime, at `now`.
    pub fn request(
        &mut self,
        model: &str,
        parts: &[String],
        key: Option<&str>,
        lifetime: Duration,
        now: Instant,
    ) -> OpenaiUsage {
        let prompt: Vec<u8> = parts.concat().into_bytes();
        let prompt_tokens = tokens(prompt.len());
        let Some(key) = key else {
            return OpenaiUsage {
                prompt_tokens,
                cached_tokens: 0,
            };
        };
        // The digest of the prompt's first `OPENAI_STEP * n` tokens, for every n that fits.
        let step_bytes = (OPENAI_STEP * BYTES_PER_TOKEN) as usize;
        let mut digest = seed(model);
        let steps: Vec<(u64, u64)> = prompt
            .chunks_exact(step_bytes)
            .enumerate()
            .map(|(index, chunk)| {
                digest = link(digest, chunk);
                ((index as u64 + 1) * OPENAI_STEP, digest)
            })
            .filter(|&(length, _)| length >= OPENAI_MINIMUM)
            .collect();
        let cached_step = steps.iter().rev().find(|(_, digest)| {
            self.entries
                .get(&(key.to_owned(), *digest))
                .is_some_and(|entry| entry.expires > now)
        });
        let cached_tokens = cached_step.map_or(0, |(length, _)| *length);
        for (_, digest) in &steps {
            self.entries
                .insert((key.to_owned(), *digest), Entry::new(lifetime, now));
        }
        OpenaiUsage {
            prompt_tokens,
            cached_tokens,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODEL: &str = "claude-sonnet-4-5";

    /// A block of `tokens` tokens whose bytes are `fill`.
    fn block(fill: char, tokens: usize) -> Block {
        Block {
            canonical: fill.to_string().repeat(tokens * 4),
            breakpoint: None,
        }
    }

    fn marked(mut block: Block, lifetime: Duration) -> Block {
        block.breakpoint = Some(lifetime);
        block
    }

    fn usage(input: u64, written: u64, read: u64) -> AnthropicUsage {
        AnthropicUsage {
            input_tokens: input,
            cache_creation_input_tokens: written,
            cache_read_input_tokens: read,
        }
    }

    #[test]
    fn a_prefix_is_written_at_its_breakpoint_and_read_back_by_a_longer_request() {
        let mut cache = AnthropicCache::default();
        let now = Instant::now();
        // tools + system (1,500 tokens, marked), one message (100, marked).
        let first = vec![
            block('t', 1000),
            marked(block('s', 500), FIVE_MINUTES),
            marked(block('u', 100), FIVE_MINUTES),
        ];
        assert_eq!(
            cache.request(MODEL, &first, 1024, now),
            Ok(usage(0, 1600, 0))
        );
        // The next call: the same, the answer and a tool result after it, the mark moved on.
        let second = vec![
            block('t', 1000),
            marked(block('s', 500), FIVE_MINUTES),
            block('u', 100),
            block('a', 50),
            marked(block('r', 30), FIVE_MINUTES),
        ];
        assert_eq!(
            cache.request(MODEL, &second, 1024, now + Duration::from_secs(10)),
            Ok(usage(0, 80, 1600))
        );
    }

    #[test]
    fn a_changed_block_misses_everything_after_it() {
        let mut cache = AnthropicCache::default();
        let now = Instant::now();
        let first = vec![
            marked(block('s', 2000), FIVE_MINUTES),
            marked(block('u', 100), FIVE_MINUTES),
        ];
        cache.request(MODEL, &first, 1024, now).unwrap();
        // The message changed: only the system prefix is read.
        let changed = vec![
            marked(block('s', 2000), FIVE_MINUTES),
            marked(block('x', 100), FIVE_MINUTES),
        ];
        assert_eq!(
            cache.request(MODEL, &changed, 1024, now),
            Ok(usage(0, 100, 2000))
        );
        // The system changed: nothing is read.
        let other = vec![
            marked(block('S', 2000), FIVE_MINUTES),
            marked(block('u', 100), FIVE_MINUTES),
        ];
        assert_eq!(
            cache.request(MODEL, &other, 1024, now),
            Ok(usage(0, 2100, 0))
        );
        // Another model shares nothing.
        assert_eq!(
            cache.request("claude-opus-4-1", &first, 1024, now),
            Ok(usage(0, 2100, 0))
        );
    }

    #[test]
    fn entries_expire_after_their_lifetime_unless_read() {
        let mut cache = AnthropicCache::default();
        let now = Instant::now();
        let short = vec![marked(block('s', 2000), FIVE_MINUTES)];
        let long = vec![marked(block('l', 2000), ONE_HOUR)];
        cache.request(MODEL, &short, 1024, now).unwrap();
        cache.request(MODEL, &long, 1024, now).unwrap();
        // Read at 4 minutes: renewed until 9.
        let at = |minutes: u64| now + Duration::from_secs(minutes * 60);
        assert_eq!(
            cache.request(MODEL, &short, 1024, at(4)),
            Ok(usage(0, 0, 2000))
        );
        assert_eq!(
            cache.request(MODEL, &short, 1024, at(8)),
            Ok(usage(0, 0, 2000))
        );
        // Gone 5 minutes after its last read, and written again.
        assert_eq!(
            cache.request(MODEL, &short, 1024, at(14)),
            Ok(usage(0, 2000, 0))
        );
        // The hour-long one lives through its hour, and 61 minutes after that read it is gone.
        assert_eq!(
            cache.request(MODEL, &long, 1024, at(59)),
            Ok(usage(0, 0, 2000))
        );
        assert_eq!(
            cache.request(MODEL, &long, 1024, at(59 + 61)),
            Ok(usage(0, 2000, 0))
        );
    }

    #[test]
    fn a_prefix_below_the_minimum_is_not_cached() {
        let mut cache = AnthropicCache::default();
        let now = Instant::now();
        let short = vec![
            marked(block('s', 1000), FIVE_MINUTES),
            marked(block('u', 1000), FIVE_MINUTES),
        ];
        // The first breakpoint's 1,000 tokens are below 1,024: only the whole is written.
        assert_eq!(
            cache.request(MODEL, &short, 1024, now),
            Ok(usage(0, 2000, 0))
        );
        // With a 4,096-token minimum nothing is.
        let mut strict = AnthropicCache::default();
        assert_eq!(
            strict.request(MODEL, &short, 4096, now),
            Ok(usage(2000, 0, 0))
        );
        assert_eq!(
            strict.request(MODEL, &short, 4096, now),
            Ok(usage(2000, 0, 0))
        );
    }

    #[test]
    fn four_breakpoints_are_taken_and_a_fifth_refused() {
        let mut cache = AnthropicCache::default();
        let now = Instant::now();
        let mut blocks: Vec<Block> = ['a', 'b', 'c', 'd']
            .into_iter()
            .map(|fill| marked(block(fill, 1100), FIVE_MINUTES))
            .collect();
        assert_eq!(
            cache.request(MODEL, &blocks, 1024, now),
            Ok(usage(0, 4400, 0))
        );
        blocks.push(marked(block('e', 10), FIVE_MINUTES));
        assert_eq!(
            cache.request(MODEL, &blocks, 1024, now),
            Err(TooManyBreakpoints(5))
        );
    }

    #[test]
    fn the_lookback_reaches_twenty_blocks_before_a_breakpoint() {
        let mut cache = AnthropicCache::default();
        let now = Instant::now();
        let mut blocks = vec![marked(block('s', 2000), FIVE_MINUTES)];
        cache.request(MODEL, &blocks, 1024, now).unwrap();
        blocks[0].breakpoint = None;
        // 20 blocks later the written prefix is still found; 21 later it is not.
        blocks.extend((0..19).map(|_| block('m', 10)));
        blocks.push(marked(block('m', 10), FIVE_MINUTES));
        assert_eq!(
            cache.request(MODEL, &blocks, 1024, now),
            Ok(usage(0, 200, 2000))
        );
        let mut beyond = blocks.clone();
        beyond.last_mut().unwrap().breakpoint = None;
        beyond.push(marked(block('n', 10), FIVE_MINUTES));
        let mut fresh = AnthropicCache::default();
        fresh
            .request(MODEL, &[marked(block('s', 2000), FIVE_MINUTES)], 1024, now)
            .unwrap();
        assert_eq!(
            fresh.request(MODEL, &beyond, 1024, now),
            Ok(usage(0, 2210, 0))
        );
    }

    fn parts(tokens_each: &[(char, usize)]) -> Vec<String> {
        tokens_each
            .iter()
            .map(|&(fill, tokens)| fill.to_string().repeat(tokens * 4))
            .collect()
    }

    #[test]
    fn openai_reads_the_longest_step_of_128_tokens_from_1024_on() {
        let mut cache = OpenaiCache::default();
        let now = Instant::now();
        let first = parts(&[('s', 1500)]);
        assert_eq!(
            cache.request("gpt", &first, Some("k"), OPENAI_IN_MEMORY, now),
            OpenaiUsage {
                prompt_tokens: 1500,
                cached_tokens: 0
            }
        );
        // 1,500 tokens were stored as far as 1,408 (11 steps of 128).
        let longer = parts(&[('s', 1500), ('u', 300)]);
        assert_eq!(
            cache.request("gpt", &longer, Some("k"), OPENAI_IN_MEMORY, now),
            OpenaiUsage {
                prompt_tokens: 1800,
                cached_tokens: 1408
            }
        );
        // A change at token 1,100 leaves the 1,024-token step.
        let changed = parts(&[('s', 1100), ('x', 700)]);
        assert_eq!(
            cache
                .request("gpt", &changed, Some("k"), OPENAI_IN_MEMORY, now)
                .cached_tokens,
            1024
        );
        // A change before 1,024 tokens leaves nothing.
        let early = parts(&[('s', 1000), ('y', 800)]);
        assert_eq!(
            cache
                .request("gpt", &early, Some("k"), OPENAI_IN_MEMORY, now)
                .cached_tokens,
            0
        );
    }

    #[test]
    fn openai_caches_nothing_below_1024_tokens_or_without_a_key() {
        let mut cache = OpenaiCache::default();
        let now = Instant::now();
        let short = parts(&[('s', 1023)]);
        cache.request("gpt", &short, Some("k"), OPENAI_IN_MEMORY, now);
        assert_eq!(
            cache
                .request("gpt", &short, Some("k"), OPENAI_IN_MEMORY, now)
                .cached_tokens,
            0
        );
        let long = parts(&[('s', 3000)]);
        for _ in 0..2 {
            assert_eq!(
                cache
                    .request("gpt", &long, None, OPENAI_IN_MEMORY, now)
                    .cached_tokens,
                0
            );
        }
        // Another key does not see this key's entries.
        cache.request("gpt", &long, Some("a"), OPENAI_IN_MEMORY, now);
        assert_eq!(
            cache
                .request("gpt", &long, Some("b"), OPENAI_IN_MEMORY, now)
                .cached_tokens,
            0
        );
        assert_eq!(
            cache
                .request("gpt", &long, Some("a"), OPENAI_IN_MEMORY, now)
                .cached_tokens,
            2944
        );
    }

    #[test]
    fn openai_entries_expire_with_their_retention() {
        let mut cache = OpenaiCache::default();
        let now = Instant::now();
        let prompt = parts(&[('s', 2048)]);
        cache.request("gpt", &prompt, Some("k"), OPENAI_IN_MEMORY, now);
        let later = now + OPENAI_IN_MEMORY + Duration::from_secs(1);
        assert_eq!(
            cache
                .request("gpt", &prompt, Some("k"), OPENAI_IN_MEMORY, later)
                .cached_tokens,
            0
        );
        cache.request("gpt", &prompt, Some("d"), OPENAI_EXTENDED, now);
        assert_eq!(
            cache
                .request("gpt", &prompt, Some("d"), OPENAI_EXTENDED, later)
                .cached_tokens,
            2048
        );
    }
}
