//! The rules both backends follow when they read a list query or write a search row: the words
//! of a search, the cursor of a page and the part of a long message that is indexed.

use super::types::IndexError;

/// The most distinct words a search may have: each is one more condition on the index, and
/// SQLite limits how deep a query's expression tree may go.
pub const MAX_SEARCH_WORDS: usize = 32;
/// Only the start of a very long message is indexed for search, to keep the index and its
/// updates small; messages are rarely this long (tool output is not indexed at all).
const MAX_INDEXED_BYTES: usize = 8 * 1024;

/// The part of a text that search indexes: all of it, or its first [`MAX_INDEXED_BYTES`]
/// bytes cut at a character boundary.
pub(crate) fn indexed_text(text: &str) -> &str {
    if text.len() <= MAX_INDEXED_BYTES {
        return text;
    }
    &text[..crate::text::floor_char_boundary(text, MAX_INDEXED_BYTES)]
}

/// The distinct whitespace-separated words of a search, in order. A NUL byte is refused:
/// SQLite ends a text at it, so `"\0a"` would become an empty pattern that matches every
/// conversation. So is a search of more than [`MAX_SEARCH_WORDS`] words.
pub(crate) fn search_terms(search: &str) -> Result<Vec<&str>, IndexError> {
    if search.contains('\0') {
        return Err(IndexError::BadSearch(
            "q must not contain a NUL character".to_owned(),
        ));
    }
    let mut terms: Vec<&str> = Vec::new();
    for term in search.split_whitespace() {
        if !terms.contains(&term) {
            terms.push(term);
        }
    }
    if terms.len() > MAX_SEARCH_WORDS {
        return Err(IndexError::BadSearch(format!(
            "q has {} different words; a search may have at most {MAX_SEARCH_WORDS}",
            terms.len()
        )));
    }
    Ok(terms)
}

/// Characters of context a search snippet keeps before its first match, and in all.
const SNIPPET_BEFORE: usize = 60;
const SNIPPET_CHARS: usize = 200;

/// Matching messages a search reads per conversation to find one worth a snippet.
pub(crate) const SNIPPET_CANDIDATES: i64 = 4;

/// The snippet a search shows beside a conversation's `title`: from the first of `texts` (its
/// messages that match, in order) that, read as a person reads it (no demo directive lines,
/// no Markdown marks), still holds every term and says more than the title. A message that
/// starts with the title (the title came from it) is read from after it. `None` when none
/// does: the title alone says it.
pub(crate) fn snippet_beside_title(title: &str, texts: &[&str], terms: &[&str]) -> Option<String> {
    let holds_every_term = |text: &str| {
        let lower = text.to_lowercase();
        terms
            .iter()
            .all(|term| lower.contains(&term.to_lowercase()))
    };
    texts.iter().find_map(|text| {
        let readable = crate::readable::readable_lines(text).join(" ");
        let rest = readable
            .strip_prefix(title)
            .map_or(readable.as_str(), str::trim_start);
        if rest.is_empty() || !holds_every_term(rest) {
            return None;
        }
        let piece = snippet(rest, terms);
        let bare = piece.trim_matches('…').trim();
        (!bare.is_empty() && !title.contains(bare)).then_some(piece)
    })
}

/// A page's snippets: for each listed conversation (`key` as the backend names it in `rows`,
/// its id and title), the snippet beside its title from its matching rows, read in order.
pub(crate) fn page_snippets<'a, K: Eq + std::hash::Hash>(
    listed: impl IntoIterator<Item = (K, &'a String, &'a String)>,
    rows: impl IntoIterator<Item = (K, &'a str)>,
    terms: &[&str],
) -> std::collections::BTreeMap<String, String> {
    let mut texts: std::collections::HashMap<K, Vec<&str>> = std::collections::HashMap::new();
    for (key, text) in rows {
        texts.entry(key).or_default().push(text);
    }
    listed
        .into_iter()
        .filter_map(|(key, id, title)| {
            let piece = snippet_beside_title(title, texts.get(&key)?, terms)?;
            Some((id.clone(), piece))
        })
        .collect()
}

/// A piece of `text` around the first place one of `terms` occurs (compared without case),
/// on one line, cut at word boundaries and marked `…` where it was cut. The words are not
/// marked: the client knows them.
pub(crate) fn snippet(text: &str, terms: &[&str]) -> String {
    let chars: Vec<char> = text.chars().collect();
    let lower: Vec<char> = chars
        .iter()
        .map(|c| c.to_lowercase().next().unwrap_or(*c))
        .collect();
    let first = terms
        .iter()
        .filter_map(|term| {
            let term: Vec<char> = term.chars().flat_map(char::to_lowercase).collect();
            (!term.is_empty())
                .then(|| {
                    lower
                        .windows(term.len())
                        .position(|window| window == term.as_slice())
                })
                .flatten()
        })
        .min()
        .unwrap_or(0);
    let mut start = first.saturating_sub(SNIPPET_BEFORE);
    let mut end = (start + SNIPPET_CHARS).min(chars.len());
    // Whole words at the cuts (unless a word is longer than the margin).
    if start > 0
        && let Some(space) = chars[start..first].iter().position(|c| c.is_whitespace())
    {
        start += space + 1;
    }
    if end < chars.len()
        && let Some(space) = chars[first..end].iter().rposition(|c| c.is_whitespace())
    {
        end = first + space;
    }
    let body: String = chars[start..end]
        .iter()
        .map(|c| if c.is_whitespace() { ' ' } else { *c })
        .collect();
    let body = body
        .split(' ')
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let before = if start > 0 { "…" } else { "" };
    let after = if end < chars.len() { "…" } else { "" };
    format!("{before}{body}{after}")
}

pub(crate) fn encode_cursor(updated_at: i64, id: String) -> String {
    format!("{updated_at}.{id}")
}

pub(crate) fn decode_cursor(cursor: &str) -> Result<(i64, String), IndexError> {
    let (updated_at, id) = cursor.split_once('.').ok_or(IndexError::BadCursor)?;
    let updated_at = updated_at.parse().map_err(|_| IndexError::BadCursor)?;
    Ok((updated_at, id.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Index;
    use crate::index::types::{ArchivedFilter, ListQuery};

    #[test]
    fn a_snippet_is_the_text_around_the_first_match_on_one_line() {
        assert_eq!(
            snippet("Short text with\nthe Needle in it", &["needle"]),
            "Short text with the Needle in it"
        );
        let long = format!(
            "{} the needle here {}",
            "word ".repeat(40),
            "tail ".repeat(60)
        );
        let cut = snippet(&long, &["NEEDLE"]);
        assert!(cut.starts_with('…') && cut.ends_with('…'), "{cut}");
        assert!(cut.contains("the needle here"), "{cut}");
        assert!(cut.chars().count() <= SNIPPET_CHARS + 2, "{cut}");
        // Cut on words: no half word at either end.
        assert!(
            cut.trim_matches('…')
                .split(' ')
                .all(|w| w == "word" || w == "tail" || ["the", "needle", "here"].contains(&w)),
            "{cut}"
        );
        // The earliest of several words; none found: the start.
        assert!(snippet(&long, &["here", "needle"]).contains("the needle"));
        assert!(snippet("abc", &["zzz"]).starts_with("abc"));
        // Characters whose lower case is longer do not shift the match.
        assert_eq!(snippet("İstanbul trip", &["trip"]), "İstanbul trip");
    }

    #[tokio::test]
    async fn searches_up_to_the_word_limit_run_and_longer_or_nul_ones_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open(&dir.path().join("metadata.db")).await.unwrap();
        let search = |q: String| ListQuery {
            archived: ArchivedFilter::All,
            search: Some(q),
            limit: 10,
            cursor: None,
        };
        let mut words: Vec<String> = (0..MAX_SEARCH_WORDS / 2)
            .map(|n| format!("word{n}"))
            .collect();
        words.extend((0..MAX_SEARCH_WORDS / 2).map(|n| format!("{n}")));
        assert!(index.list(&search(words.join(" "))).await.is_ok());
        words.push("one-more".to_owned());
        assert!(matches!(
            index.list(&search(words.join(" "))).await,
            Err(IndexError::BadSearch(_))
        ));
        // Repeated words count once.
        let repeated = vec!["same"; 500].join(" ");
        assert!(index.list(&search(repeated)).await.is_ok());
        for q in ["\0a", "a\0", "\0"] {
            assert!(matches!(
                index.list(&search(q.to_owned())).await,
                Err(IndexError::BadSearch(_))
            ));
        }
        index.close().await;
    }
}
