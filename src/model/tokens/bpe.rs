//! A compact byte-pair encoder that counts exactly as tiktoken does, for the two OpenAI
//! encodings the meter uses.
//!
//! tiktoken-rs keeps each encoding as two hash maps of 200,000 separately allocated byte
//! strings (about 48 MB resident for `o200k_base`); the meter only needs counts, so this keeps
//! the tokens as they are embedded in the binary (`*.bin` beside this file: the byte length of
//! every token in rank order, then their bytes), an offset per token and an open-addressing
//! table from bytes to rank: about 4 MB for `o200k_base`. The tables are tiktoken-rs's
//! (MIT), checked token by token against it in the tests.
//!
//! Encoding is tiktoken's: the text is split by the encoding's pattern, a piece that is a token
//! counts one, and any other piece is merged pair by pair, always the pair whose merged bytes
//! have the lowest rank (the leftmost among equals). The merge uses a heap, so a piece of n
//! bytes costs O(n log n) however it repeats, not the O(n²) of scanning for the lowest pair.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use fancy_regex::{Regex, RegexBuilder};

/// An encoding's tokens and pattern.
pub struct Encoding {
    /// The tokens' lengths (the first `offsets.len() - 1` bytes) and bytes, as embedded.
    data: &'static [u8],
    /// Where each token's bytes start in `data`, and one past the last.
    offsets: Vec<u32>,
    /// Open addressing by `hash(bytes)`: a rank in the low `RANK_BITS` and a tag of the hash
    /// above them (so that most misses are told without reading a token), or `EMPTY`.
    slots: Vec<u32>,
    longest: usize,
    pattern: Regex,
}

const EMPTY: u32 = u32::MAX;
/// Bits of a slot for the rank: both encodings have fewer than 2^18 tokens.
const RANK_BITS: u32 = 18;
const RANK_MASK: u32 = (1 << RANK_BITS) - 1;
/// The pattern's lazy DFA cache, per thread that counts: the regex crate's default (10 MB)
/// lets each grow to megabytes, more than the tables; this keeps the meter's memory small
/// at no cost in counting speed that the bench can see.
const DFA_SIZE_LIMIT: usize = 256 * 1024;

/// `o200k_base`'s split pattern, as tiktoken-rs has it.
pub const O200K_PATTERN: &str = tiktoken_rs::O200K_BASE_PAT_STR;
/// `cl100k_base`'s split pattern, as tiktoken-rs has it.
pub const CL100K_PATTERN: &str = "'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}++|\\p{N}{1,3}+| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*+|\\s++$|\\s*[\\r\\n]|\\s+(?!\\S)|\\s";

impl Encoding {
    /// Reads an embedded table: a little-endian u32 count, the count's byte lengths, then the
    /// tokens' bytes in rank order.
    pub fn new(data: &'static [u8], pattern: &str) -> Encoding {
        let count = u32::from_le_bytes(data[..4].try_into().expect("table header")) as usize;
        let lengths = &data[4..4 + count];
        let mut offsets = Vec::with_capacity(count + 1);
        let mut at = (4 + count) as u32;
        let mut longest = 0;
        for &length in lengths {
            offsets.push(at);
            at += u32::from(length);
            longest = longest.max(usize::from(length));
        }
        offsets.push(at);
        assert_eq!(at as usize, data.len(), "token table length");
        assert!(count < RANK_MASK as usize, "too many tokens for a slot");
        // At most four fifths full: the tags keep long probe runs cheap.
        let capacity = (count * 5 / 4).next_power_of_two();
        let mut encoding = Encoding {
            data,
            offsets,
            slots: vec![EMPTY; capacity],
            longest,
            pattern: RegexBuilder::new(pattern)
                .delegate_dfa_size_limit(DFA_SIZE_LIMIT)
                .build()
                .expect("token pattern"),
        };
        for rank in 0..count as u32 {
            let (mut slot, tag) = encoding.slot_of(encoding.token(rank));
            while encoding.slots[slot] != EMPTY {
                slot = (slot + 1) & (capacity - 1);
            }
            encoding.slots[slot] = tag | rank;
        }
        encoding
    }

    /// How many tokens the table has (special tokens aside).
    #[cfg(test)]
    pub fn token_count(&self) -> u32 {
        self.offsets.len() as u32 - 1
    }

    fn token(&self, rank: u32) -> &[u8] {
        let rank = rank as usize;
        &self.data[self.offsets[rank] as usize..self.offsets[rank + 1] as usize]
    }

    /// Where a token's bytes go in the table, and the tag of their hash.
    fn slot_of(&self, bytes: &[u8]) -> (usize, u32) {
        // FNV-1a: short keys.
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for &byte in bytes {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
        let slot = (hash ^ (hash >> 29)) as usize & (self.slots.len() - 1);
        let tag = ((hash >> 40) as u32) << RANK_BITS;
        (slot, tag)
    }

    /// The rank of a token's bytes, if they are one.
    pub fn rank(&self, bytes: &[u8]) -> Option<u32> {
        if bytes.len() > self.longest || bytes.is_empty() {
            return None;
        }
        let (mut slot, tag) = self.slot_of(bytes);
        loop {
            let entry = self.slots[slot];
            if entry == EMPTY {
                return None;
            }
            let rank = entry & RANK_MASK;
            if entry & !RANK_MASK == tag && self.token(rank) == bytes {
                return Some(rank);
            }
            slot = (slot + 1) & (self.slots.len() - 1);
        }
    }

    /// The tokens of a text without special tokens (tiktoken's `encode_ordinary(text).len()`);
    /// `None` when the pattern gives up (its backtracking is bounded) on some odd text.
    pub fn count(&self, text: &str) -> Option<u64> {
        let mut tokens = 0;
        for piece in self.pattern.find_iter(text) {
            let piece = piece.ok()?.as_str().as_bytes();
            tokens += match self.rank(piece) {
                Some(_) => 1,
                None => self.merged_count(piece),
            };
        }
        Some(tokens)
    }

    /// The tokens a piece merges into: each step merges the adjacent pair whose bytes
    /// together have the lowest rank (the leftmost among equal ranks), until no pair is a
    /// token. A heap holds the candidate pairs; a popped pair whose parts have changed since
    /// it was pushed is skipped.
    fn merged_count(&self, piece: &[u8]) -> u64 {
        let n = piece.len();
        if n < 2 {
            return n as u64;
        }
        // Parts as a linked list by start: `end[i]` is where the part starting at `i` ends,
        // `prev`/`next` its neighbours' starts (`usize::MAX` for none).
        let mut end: Vec<usize> = (1..=n).collect();
        let mut prev: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
        let mut next: Vec<usize> = (1..=n).collect();
        let mut alive = vec![true; n];
        let mut heap = BinaryHeap::new();
        for i in 0..n - 1 {
            if let Some(rank) = self.rank(&piece[i..i + 2]) {
                heap.push(Reverse((rank, i, i + 2)));
            }
        }
        let mut parts = n as u64;
        while let Some(Reverse((_, start, merged_end))) = heap.pop() {
            let right = next[start];
            if !alive[start] || right >= n || end[right] != merged_end {
                continue;
            }
            end[start] = merged_end;
            alive[right] = false;
            next[start] = next[right];
            if next[right] < n {
                prev[next[right]] = start;
            }
            parts -= 1;
            let after = next[start];
            if after < n
                && let Some(rank) = self.rank(&piece[start..end[after]])
            {
                heap.push(Reverse((rank, start, end[after])));
            }
            let before = prev[start];
            if before < n
                && let Some(rank) = self.rank(&piece[before..end[start]])
            {
                heap.push(Reverse((rank, before, end[start])));
            }
        }
        parts
    }
}
