//! Token counts for the context meter (the last reported usage plus an estimate of what was
//! added since): OpenAI's BPE encodings (`o200k_base`, `cl100k_base`), and an approximation for
//! Anthropic's models, whose tokenizer is not published.
//!
//! The encoder is the `tiktoken` crate: its tables are compiled in (so counting works
//! offline) and compact (about 12 MiB for `o200k_base` where tiktoken-rs, which counts the
//! same, kept 42 MiB in 600,000 small allocations), and it counts several times faster.
//!
//! Counting is the cost the meter adds to a turn, so it is kept cheap: each encoding is built
//! on first use and shared (only the encodings the configured models use are ever built);
//! and a text of some length is encoded once and its count remembered (`MEMO`), so the
//! request overhead (instructions, AGENTS.md, tool schemas) and a history's items are not
//! encoded again every turn or every time a history is re-estimated (after a compaction, on
//! load). The encodings are let go when the service has no live conversation (`release`): an
//! idle service does not keep their 12 MiB, and the next conversation builds them again
//! (about 65 ms, on the blocking pool: `prepare`, `build`). The memo stays: it is small, and it
//! spares the next load of a conversation counting its whole history again.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, LazyLock, Mutex, PoisonError, RwLock};

use tiktoken::CoreBpe;

mod request;

use crate::config::{Config, Protocol, TokenizerName};
use crate::domain::{Item, ItemKind};

/// How a model's tokens are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Tokenizer {
    /// GPT-4o, GPT-4.1, GPT-5, o-series; also the default for models it cannot tell, since
    /// most current open models have vocabularies of that size too.
    #[default]
    O200kBase,
    /// GPT-4, GPT-3.5.
    Cl100kBase,
    /// Claude models, approximated by `cl100k_base`. Anthropic publishes no tokenizer for its
    /// current models. The one it has published (`@anthropic-ai/tokenizer` 0.0.4, for Claude 1
    /// and 2) counts the project's corpus (`tokens/corpus.txt`) at 835 tokens, `cl100k_base` at
    /// 837: +0.2 % overall, but English −2.5 % (154 / 158), Chinese +10.5 % (315 / 285) and
    /// code −5.6 % (368 / 390); `o200k_base` would be −10 % overall (754). Claude 3 and later
    /// count differently again, so this only matters until the first model call: Anthropic
    /// reports every request's input tokens, and the meter then shows `reported`.
    Anthropic,
}

/// Tokens of framing every message carries: OpenAI documents 3 per message (its start, role
/// separator and end) besides its content and its role's name, one token more; Anthropic
/// documents none, and is counted the same.
pub const MESSAGE_FRAMING: u64 = 4;

/// Texts longer than this are estimated by their length (`by_length`), not encoded. Encoding
/// is linear (see `parts`) but a long text still costs up to a few milliseconds per 100 KB,
/// on whatever thread asks; past this size, which ordinary messages, tool outputs and
/// instructions stay below, the count's precision is not worth that time.
pub const EXACT_MAX_BYTES: usize = 256 * 1024;
/// The estimate by length: one token per four bytes, rounded up. English prose encodes at
/// about 4.5 bytes a token and Chinese at about 3, so this errs a little high for prose,
/// which keeps compaction on the early side.
const BYTES_PER_TOKEN: u64 = 4;
/// Texts at least this long are counted on the blocking pool by `prepare`.
const BLOCKING_MIN_BYTES: usize = 16 * 1024;
/// Counts on the blocking pool at once: the pool is shared with file and database work, and
/// counting is CPU-bound.
static BLOCKING_COUNTS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);

/// Texts at least this long have their counts remembered; shorter ones cost less to encode
/// than to look up.
const MEMO_MIN_BYTES: usize = 256;
/// Counts remembered at most; the memo starts over when full (about 24 bytes an entry).
const MEMO_CAPACITY: usize = 100_000;

/// Texts longer than this are encoded in parts, cut between a word and the space after it
/// (where the encodings' split patterns cut anyway, so the count is the same).
const PART_BYTES: usize = 8 * 1024;
/// The longest run of characters of one kind (spaces, or no spaces) encoded whole. The
/// encodings' split patterns keep such a run as one piece, and a piece's byte-pair merge costs
/// more than linear time in its length (quadratic in tiktoken-rs, O(n log n) with a large
/// constant here: 15 MB of one character as one piece took 12 s). A longer run is cut every
/// this many bytes; only such runs, which ordinary text does not have, count differently from
/// a whole encoding.
const RUN_MAX_BYTES: usize = 512;

/// Remembered counts by (tokenizer, hash of the text).
static MEMO: LazyLock<Mutex<HashMap<(Tokenizer, u64), u64>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The encodings, each built on first use.
static O200K_BASE: Encoding = Encoding::new(tiktoken::encoding::o200k_base);
static CL100K_BASE: Encoding = Encoding::new(tiktoken::encoding::cl100k_base);

/// A compiled-in encoding: built when first needed, shared, and dropped by `release` (a
/// count still running keeps its own reference until it ends).
struct Encoding {
    build: fn() -> CoreBpe,
    built: RwLock<Option<Arc<CoreBpe>>>,
}

impl Encoding {
    const fn new(build: fn() -> CoreBpe) -> Encoding {
        Encoding {
            build,
            built: RwLock::new(None),
        }
    }

    fn get(&self) -> Arc<CoreBpe> {
        if let Some(built) = self
            .built
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
        {
            return built.clone();
        }
        let mut slot = self.built.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(built) = slot.as_ref() {
            return built.clone();
        }
        let encoding = Arc::new((self.build)());
        *slot = Some(encoding.clone());
        drop(slot);
        // Building parses the vocabulary into a hash map of 200,000 small allocations before
        // packing it into the compact tables; glibc keeps the freed map (about 10 MB) unless
        // asked to give it back.
        crate::memory::return_freed_memory();
        encoding
    }

    fn is_built(&self) -> bool {
        self.built
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    fn release(&self) {
        let built = self
            .built
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        drop(built);
    }
}

/// Lets go of the built encodings (when no conversation is live: `Shared::after_unload`, which
/// then hands the freed memory back to the system).
pub fn release() {
    O200K_BASE.release();
    CL100K_BASE.release();
}

impl Tokenizer {
    /// The tokenizer of a configured model: its `tokenizer` key, else what its protocol and
    /// name say (Anthropic's protocol or a `claude` name → Anthropic; an OpenAI model name
    /// tiktoken-rs knows → its encoding; anything else → `o200k_base`).
    pub fn for_model(config: &Config, model_id: &str) -> Tokenizer {
        let Some(model) = config.model(model_id) else {
            return Tokenizer::default();
        };
        if let Some(name) = model.tokenizer {
            return match name {
                TokenizerName::O200kBase => Tokenizer::O200kBase,
                TokenizerName::Cl100kBase => Tokenizer::Cl100kBase,
                TokenizerName::Anthropic => Tokenizer::Anthropic,
            };
        }
        let anthropic_protocol = config
            .providers
            .get(&model.provider)
            .is_some_and(|provider| provider.protocol == Protocol::AnthropicMessages);
        Tokenizer::for_name(&model.name, anthropic_protocol)
    }

    fn for_name(name: &str, anthropic_protocol: bool) -> Tokenizer {
        if anthropic_protocol || name.to_ascii_lowercase().contains("claude") {
            return Tokenizer::Anthropic;
        }
        match tiktoken::model_to_encoding(name) {
            Some("cl100k_base") => Tokenizer::Cl100kBase,
            _ => Tokenizer::O200kBase,
        }
    }

    /// The tokens of a text: encoded (and remembered, when long), or past `EXACT_MAX_BYTES`
    /// estimated by its length.
    pub fn count(self, text: &str) -> u64 {
        if text.len() > EXACT_MAX_BYTES {
            return by_length(text);
        }
        if text.len() < MEMO_MIN_BYTES {
            return self.encode_count(text);
        }
        let key = self.memo_key(text);
        if let Some(&count) = MEMO.lock().expect("token memo lock").get(&key) {
            return count;
        }
        let count = self.encode_count(text);
        let mut memo = MEMO.lock().expect("token memo lock");
        if memo.len() >= MEMO_CAPACITY {
            memo.clear();
        }
        memo.insert(key, count);
        count
    }

    fn encoding(self) -> &'static Encoding {
        match self {
            Tokenizer::O200kBase => &O200K_BASE,
            Tokenizer::Cl100kBase | Tokenizer::Anthropic => &CL100K_BASE,
        }
    }

    /// Remembered counts are the encoding's: Anthropic's estimate shares `cl100k_base`'s.
    fn memo_key(self, text: &str) -> (Tokenizer, u64) {
        let encoding = match self {
            Tokenizer::Anthropic => Tokenizer::Cl100kBase,
            other => other,
        };
        let mut hasher = std::hash::DefaultHasher::new();
        text.hash(&mut hasher);
        (encoding, hasher.finish())
    }

    /// Builds the encodings of `tokenizers` not built yet, on the blocking pool, so that the
    /// counts of the meter, which run where it is kept (a conversation's actor, a turn's
    /// task), find them ready: before a conversation is created or loaded (its actor counts
    /// its history at once). One read of a lock each when they are built.
    pub async fn build(tokenizers: &[Tokenizer]) {
        let unbuilt: Vec<Tokenizer> = tokenizers
            .iter()
            .copied()
            .filter(|tokenizer| !tokenizer.encoding().is_built())
            .collect();
        if unbuilt.is_empty() {
            return;
        }
        let _ = tokio::task::spawn_blocking(move || {
            for tokenizer in unbuilt {
                tokenizer.encoding().get();
            }
        })
        .await;
    }

    /// `build`, then counts a long text for each of `tokenizers` on the blocking pool (at most
    /// `BLOCKING_COUNTS` at once), so that the meter's own counts of it find it remembered
    /// and do not hold up an async worker. Short texts and texts estimated by length are
    /// cheap and left alone.
    pub async fn prepare(tokenizers: &[Tokenizer], text: &str) {
        Tokenizer::build(tokenizers).await;
        if !(BLOCKING_MIN_BYTES..=EXACT_MAX_BYTES).contains(&text.len()) {
            return;
        }
        let Ok(_permit) = BLOCKING_COUNTS.acquire().await else {
            return;
        };
        let text = text.to_owned();
        let tokenizers = tokenizers.to_vec();
        let _ = tokio::task::spawn_blocking(move || {
            for tokenizer in tokenizers {
                tokenizer.count(&text);
            }
        })
        .await;
    }

    /// The tokenizers a service counts with: every configured model's, and the default one
    /// (a session's meter starts with it until its model's is set).
    pub fn configured(config: &Config) -> Vec<Tokenizer> {
        let mut tokenizers = vec![Tokenizer::default()];
        for id in config.models.keys() {
            let tokenizer = Tokenizer::for_model(config, id);
            let tokenizer = match tokenizer {
                Tokenizer::Anthropic => Tokenizer::Cl100kBase,
                other => other,
            };
            if !tokenizers.contains(&tokenizer) {
                tokenizers.push(tokenizer);
            }
        }
        tokenizers
    }

    /// Encodes the text (no memo), in parts (see `parts`), so that the work is linear in the
    /// text's length whatever it holds. A part equal to the one before it (a long run of one
    /// character is cut into equal parts) is not counted again.
    pub fn encode_count(self, text: &str) -> u64 {
        let encoding = self.encoding().get();
        let mut last: Option<(&str, u64)> = None;
        parts(text)
            .map(|part| match last {
                Some((previous, count)) if previous == part => count,
                _ => {
                    // Special tokens' text (`<|endoftext|>`) counts as ordinary text, as a
                    // provider counts a message that contains it.
                    let count = encoding.count(part) as u64;
                    last = Some((part, count));
                    count
                }
            })
            .sum()
    }

    /// An item's tokens as a model reads them, in two parts: what the model wrote (its text,
    /// or a tool call's name and arguments) with the message framing, and what the runtime
    /// added to it (a tool call's output). A provider's report covers the first part of the
    /// answer it reports, never the second.
    pub fn item_tokens(self, item: &Item) -> (u64, u64) {
        match &item.kind {
            ItemKind::UserMessage { text, hooks, .. } => {
                let context = crate::domain::hook_context(hooks).unwrap_or_default();
                (self.count(text) + self.count(&context) + MESSAGE_FRAMING, 0)
            }
            ItemKind::AgentMessage { text }
            | ItemKind::Summary { text, .. }
            | ItemKind::Notice { text }
            | ItemKind::Reasoning { text, .. } => (self.count(text) + MESSAGE_FRAMING, 0),
            ItemKind::ToolCall {
                name,
                arguments,
                output,
                ..
            } => (
                self.count(name) + self.count(&arguments.to_string()) + MESSAGE_FRAMING,
                self.count(output),
            ),
            // Never sent to the model (`Item::sent_to_model`).
            ItemKind::Plan { .. } => (0, 0),
        }
    }
}

/// `text` in parts to encode one by one: cut before a space that follows a letter or digit once
/// a part has `PART_BYTES`, and inside any run of one kind of character longer than
/// `RUN_MAX_BYTES`. Public so that the bench can count with another encoder over the same
/// parts.
pub fn parts(text: &str) -> impl Iterator<Item = &str> {
    let mut start = 0;
    let mut run_start = 0;
    let mut previous: Option<char> = None;
    let mut chars = text.char_indices();
    std::iter::from_fn(move || {
        if start >= text.len() {
            return None;
        }
        for (at, c) in chars.by_ref() {
            let kind_changed = previous.is_some_and(|p| p.is_whitespace() != c.is_whitespace());
            if kind_changed {
                run_start = at;
            }
            let between_words = c == ' ' && previous.is_some_and(char::is_alphanumeric);
            let cut = (between_words && at - start >= PART_BYTES)
                || (at - run_start >= RUN_MAX_BYTES && at > start);
            previous = Some(c);
            if cut {
                let part = &text[start..at];
                start = at;
                run_start = at;
                return Some(part);
            }
        }
        let part = &text[start..];
        start = text.len();
        Some(part)
    })
}

/// The estimate of a text past `EXACT_MAX_BYTES`: its bytes over `BYTES_PER_TOKEN`, rounded
/// up.
fn by_length(text: &str) -> u64 {
    (text.len() as u64).div_ceil(BYTES_PER_TOKEN)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const CORPUS: &str = include_str!("tokens/corpus.txt");

    /// An idle service lets go of the encodings; the next count builds them again and counts
    /// the same. (Other tests count meanwhile: each keeps the encoding it got, or builds it.)
    #[test]
    fn released_encodings_are_built_again_and_count_the_same() {
        let text = messages().join("\n\n");
        let counts: Vec<u64> = [Tokenizer::O200kBase, Tokenizer::Cl100kBase]
            .iter()
            .map(|tokenizer| tokenizer.encode_count(&text))
            .collect();
        let before = O200K_BASE.get();
        release();
        let rebuilt = O200K_BASE.get();
        assert!(
            !Arc::ptr_eq(&before, &rebuilt),
            "the encoding was not let go"
        );
        assert_eq!(
            [Tokenizer::O200kBase, Tokenizer::Cl100kBase]
                .iter()
                .map(|tokenizer| tokenizer.encode_count(&text))
                .collect::<Vec<_>>(),
            counts
        );
    }

    /// The corpus in items the size of messages: paragraphs, code blocks.
    fn messages() -> Vec<&'static str> {
        CORPUS
            .split("\n\n")
            .filter(|part| !part.is_empty())
            .collect()
    }

    #[test]
    fn the_estimate_is_within_two_percent_of_the_encoding() {
        for (tokenizer, exact) in [
            (Tokenizer::O200kBase, tiktoken_rs::o200k_base().unwrap()),
            (Tokenizer::Cl100kBase, tiktoken_rs::cl100k_base().unwrap()),
        ] {
            // Counted message by message (as the meter counts items), against the whole
            // corpus encoded at once by a fresh encoder.
            let estimate: u64 = messages().iter().map(|text| tokenizer.count(text)).sum();
            let exact = exact.encode_ordinary(CORPUS).len() as f64;
            let error = (estimate as f64 - exact) / exact;
            assert!(
                error.abs() <= 0.02,
                "{tokenizer:?}: estimate {estimate}, exact {exact}, error {:.2} %",
                error * 100.0
            );
            // A remembered count is the count.
            let long = messages()
                .into_iter()
                .max_by_key(|text| text.len())
                .unwrap();
            assert!(long.len() >= MEMO_MIN_BYTES);
            assert_eq!(tokenizer.count(long), tokenizer.count(long));
            assert_eq!(tokenizer.count(long), tokenizer.encode_count(long));
        }
    }

    /// Counting in parts gives what one encoding of the whole gives, on ordinary text, long
    /// texts (cut between words) included.
    #[test]
    fn counts_are_tiktokens_on_english_chinese_and_code() {
        let zh = CORPUS.find("代理").unwrap();
        let code = CORPUS.find("```rust").unwrap();
        let long = CORPUS.repeat(12);
        assert!(long.len() > 3 * PART_BYTES);
        let samples = [
            CORPUS,
            &CORPUS[..zh],
            &CORPUS[zh..code],
            &CORPUS[code..],
            &long,
            "  indented\n\n\n   trailing   \r\n\t tabs 12345678 ünïcödé 👩‍💻",
            "Pneumonoultramicroscopicsilicovolcanoconiosis",
            &"ab1 ".repeat(3_000),
            &"aGVsbG8gd29ybGQ=".repeat(30),
        ];
        for (tokenizer, exact) in [
            (Tokenizer::O200kBase, tiktoken_rs::o200k_base().unwrap()),
            (Tokenizer::Cl100kBase, tiktoken_rs::cl100k_base().unwrap()),
        ] {
            for text in samples {
                assert_eq!(
                    tokenizer.encode_count(text),
                    exact.encode_ordinary(text).len() as u64,
                    "{tokenizer:?} on {:?}",
                    &text[..text.len().min(40)]
                );
            }
        }
    }

    /// A long run of one kind of character is cut, so it costs linear time, and counts close
    /// to what a whole encoding gives.
    #[test]
    fn long_runs_are_counted_in_parts_close_to_the_whole() {
        let exact = tiktoken_rs::o200k_base().unwrap();
        for text in [
            "a".repeat(6_000),
            "Pneumonoultramicroscopicsilicovolcanoconiosis".repeat(60),
            " ".repeat(6_000),
            "!".repeat(6_000),
        ] {
            let whole = exact.encode_ordinary(&text).len() as f64;
            let parts = Tokenizer::O200kBase.encode_count(&text) as f64;
            assert!(
                (parts - whole).abs() <= whole * 0.05 + 2.0,
                "{parts} vs {whole}"
            );
        }
        assert!(parts(&"x".repeat(10 * RUN_MAX_BYTES)).all(|p| p.len() <= RUN_MAX_BYTES));
    }

    #[test]
    fn a_text_past_the_exact_limit_is_estimated_by_its_length() {
        let exact = "a".repeat(EXACT_MAX_BYTES);
        assert_eq!(
            Tokenizer::O200kBase.count(&exact),
            Tokenizer::O200kBase.encode_count(&exact)
        );
        let long = "ab".repeat(EXACT_MAX_BYTES);
        let expected = (long.len() as u64).div_ceil(BYTES_PER_TOKEN);
        assert_eq!(Tokenizer::O200kBase.count(&long), expected);
        assert_eq!(Tokenizer::Anthropic.count(&long), expected);
    }

    /// tiktoken-rs, the encoder the meter counted with before, over the same parts.
    fn previous_count(tokenizer: Tokenizer, text: &str) -> u64 {
        let encoding = match tokenizer {
            Tokenizer::O200kBase => tiktoken_rs::o200k_base_singleton(),
            Tokenizer::Cl100kBase | Tokenizer::Anthropic => tiktoken_rs::cl100k_base_singleton(),
        };
        parts(text)
            .map(|part| encoding.count_ordinary(part) as u64)
            .sum()
    }

    /// Texts of many scripts and kinds, drawn from fragments at random (a fixed seed): words,
    /// CJK, emoji with joiners and modifiers, combining marks, digits, punctuation, special
    /// tokens' text and every kind of space, in varied lengths.
    fn mixed_texts(count: usize) -> Vec<String> {
        #[rustfmt::skip]
        const FRAGMENTS: &[&str] = &[
            "a", "Z", "the", " quick", "Brown", "fox's", " I'LL", "é", "ü", "ß", "ǅ", "ʰ", "Ⅻ",
            "的", "是", "中文", "日本", "アイ", "한국", "Жя", "عربي", "שלום", "हिन्दी", "ไทย", "👩\u{200d}💻",
            "😀", "🇫🇮", "👍🏽", "e\u{301}", "\u{200d}", " ", "  ", "\n", "\r\n", "\t", "\u{a0}",
            "\u{3000}", "0", "9", "12345", "3.14", "!", "?!", ".", ",", "\"", "(", ")", "{", "}",
            "/", "\\", "-", "_", "=>", "::", "<|endoftext|>", "<|endofprompt|>",
        ];
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        (0..count)
            .map(|_| {
                let fragments = 1 + next() % 80;
                (0..fragments)
                    .map(|_| FRAGMENTS[(next() % FRAGMENTS.len() as u64) as usize])
                    .collect()
            })
            .collect()
    }

    /// The encoder counts exactly what the previous one (tiktoken-rs) counted, on the corpus
    /// and its parts, on thousands of mixed texts, and on long runs of one character, which
    /// both count in the same parts.
    #[test]
    fn counts_are_the_previous_encoders_on_varied_text() {
        let long = CORPUS.repeat(12);
        let mut samples: Vec<String> = messages().into_iter().map(str::to_owned).collect();
        samples.extend([CORPUS.to_owned(), long]);
        samples.extend(mixed_texts(3_000));
        for c in ["a", " ", "!", "\n", "7", "的", "😀", "\u{a0}"] {
            samples.push(c.repeat(5_000));
        }
        samples.push(format!("{}x", " ".repeat(5_000)));
        samples.push("abc".repeat(2_000));
        for tokenizer in [Tokenizer::O200kBase, Tokenizer::Cl100kBase] {
            for text in &samples {
                assert_eq!(
                    tokenizer.encode_count(text),
                    previous_count(tokenizer, text),
                    "{tokenizer:?} on {:?}",
                    text.chars().take(40).collect::<String>()
                );
            }
        }
    }

    /// Model names map to the encodings the previous mapping (tiktoken-rs's) gave them.
    #[test]
    fn model_names_get_the_previous_encodings() {
        #[rustfmt::skip]
        let names = [
            "gpt-4o", "gpt-4o-mini", "gpt-4o-2024-08-06", "chatgpt-4o-latest", "gpt-4.1",
            "gpt-4.5-preview", "gpt-5", "gpt-5-mini", "o1", "o1-preview", "o3-mini", "o4-mini",
            "gpt-oss-120b", "gpt-4", "gpt-4-0613", "gpt-4-32k", "gpt-4-turbo", "gpt-3.5-turbo",
            "gpt-35-turbo", "ft:gpt-3.5-turbo:acme::x", "ft:gpt-4o:acme::x",
            "text-embedding-ada-002", "text-embedding-3-small", "davinci-002", "text-davinci-003",
            "gpt2", "llama3.1", "qwen2.5-coder:7b", "deepseek-v3", "mistral-large", "anything",
        ];
        for name in names {
            let previous = match tiktoken_rs::tokenizer::get_tokenizer(name) {
                Some(tiktoken_rs::tokenizer::Tokenizer::Cl100kBase) => Tokenizer::Cl100kBase,
                _ => Tokenizer::O200kBase,
            };
            assert_eq!(Tokenizer::for_name(name, false), previous, "{name}");
        }
    }

    /// The worst texts up to the exact limit, and a run of one character far past it, are
    /// counted, and count what the previous encoder counted over the same parts. (How long
    /// they take is measured by `openvaala-bench encoder`.)
    #[test]
    fn odd_and_long_texts_are_counted_as_before() {
        let spaces = format!("{}x", " ".repeat(EXACT_MAX_BYTES - 1));
        let same = "a".repeat(EXACT_MAX_BYTES);
        let lines = "\n \t".repeat(EXACT_MAX_BYTES / 3);
        let run = "a".repeat(2 * 1024 * 1024);
        for text in [&spaces, &same, &lines, &run] {
            let count = Tokenizer::O200kBase.encode_count(text);
            assert!(count > 0 && count <= text.len() as u64);
            assert_eq!(count, previous_count(Tokenizer::O200kBase, text));
        }
    }

    #[tokio::test]
    async fn a_long_text_prepared_on_the_blocking_pool_is_remembered() {
        let text = "Context windows fill up; the meter counts what was added. ".repeat(400);
        assert!(text.len() >= BLOCKING_MIN_BYTES);
        let key = Tokenizer::Anthropic.memo_key(&text);
        MEMO.lock().unwrap().remove(&key);
        Tokenizer::prepare(&[Tokenizer::Cl100kBase], &text).await;
        let remembered = MEMO.lock().unwrap().get(&key).copied();
        assert_eq!(remembered, Some(Tokenizer::Cl100kBase.encode_count(&text)));
        // Anthropic's estimate is cl100k_base's: it finds the same count.
        assert_eq!(Tokenizer::Anthropic.count(&text), remembered.unwrap());
    }

    #[test]
    fn anthropic_is_close_to_claudes_published_tokenizer() {
        // What Anthropic's published tokenizer (`@anthropic-ai/tokenizer` 0.0.4, Claude 1 and
        // 2) counts for the corpus and its parts, measured with its `countTokens`.
        let zh = CORPUS.find("代理").unwrap();
        let code = CORPUS.find("```rust").unwrap();
        for (text, claude, error) in [
            (CORPUS, 835.0, 0.01),
            (&CORPUS[..zh], 158.0, 0.03),
            (&CORPUS[zh..code], 285.0, 0.11),
            (&CORPUS[code..], 390.0, 0.06),
        ] {
            let estimate = Tokenizer::Anthropic.encode_count(text) as f64;
            assert!(
                (estimate - claude).abs() / claude <= error,
                "{estimate} against {claude}"
            );
        }
    }

    #[test]
    fn models_get_their_family_encoding() {
        let check = |name: &str, anthropic: bool, expected: Tokenizer| {
            assert_eq!(Tokenizer::for_name(name, anthropic), expected, "{name}");
        };
        check("gpt-4o-mini", false, Tokenizer::O200kBase);
        check("gpt-5", false, Tokenizer::O200kBase);
        check("o3-mini", false, Tokenizer::O200kBase);
        check("gpt-4-turbo", false, Tokenizer::Cl100kBase);
        check("gpt-3.5-turbo", false, Tokenizer::Cl100kBase);
        check("claude-sonnet-4-5", false, Tokenizer::Anthropic);
        check("anything", true, Tokenizer::Anthropic);
        check("qwen2.5-coder:7b", false, Tokenizer::O200kBase);
    }

    #[test]
    fn a_tool_call_counts_its_call_and_its_output_apart() {
        let item = Item {
            id: "m_1".into(),
            session_id: "s".into(),
            turn_id: "t".into(),
            seq: 1,
            created_at: crate::domain::now(),
            status: crate::domain::ItemStatus::Completed,
            compacted: false,
            step: Some(1),
            kind: ItemKind::ToolCall {
                hooks: Vec::new(),
                call_id: "c".into(),
                name: "shell".into(),
                arguments: json!({"command": "ls -l"}),
                output: "total 0\n".into(),
                exit_code: Some(0),
                files: None,
                images: Vec::new(),
                denied: false,
            },
        };
        let tokenizer = Tokenizer::O200kBase;
        let (call, result) = tokenizer.item_tokens(&item);
        assert_eq!(
            call,
            tokenizer.count("shell") + tokenizer.count(r#"{"command":"ls -l"}"#) + MESSAGE_FRAMING
        );
        assert_eq!(result, tokenizer.count("total 0\n"));
    }
}
