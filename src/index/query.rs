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
