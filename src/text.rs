//! Cutting text at byte offsets without splitting a UTF-8 character (std's own helpers are not
//! stable at our MSRV).

/// The largest char boundary of `text` at or before `index`.
pub fn floor_char_boundary(text: &str, index: usize) -> usize {
    if index >= text.len() {
        return text.len();
    }
    (0..=index)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0)
}

/// The smallest char boundary of `text` at or after `index`.
pub fn ceil_char_boundary(text: &str, index: usize) -> usize {
    (index..text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries_never_split_a_character() {
        let text = "aé€b"; // 1 + 2 + 3 + 1 bytes
        assert_eq!(floor_char_boundary(text, 2), 1);
        assert_eq!(ceil_char_boundary(text, 2), 3);
        assert_eq!(floor_char_boundary(text, 99), text.len());
        assert_eq!(ceil_char_boundary(text, text.len()), text.len());
    }
}
