//! The input box's text: several lines, a cursor, the usual line-editing keys, and the history
//! of sent messages. Pure, so every key is tested without a terminal.

/// The text being typed, as characters (the cursor moves by character, not by byte).
#[derive(Default)]
pub struct Editor {
    chars: Vec<char>,
    cursor: usize,
    /// Messages sent, oldest first, and where Up/Down is in them (`None`: the draft).
    history: Vec<String>,
    browsing: Option<usize>,
    draft: String,
}

impl Editor {
    pub fn text(&self) -> String {
        self.chars.iter().collect()
    }

    pub fn is_empty(&self) -> bool {
        self.chars.is_empty()
    }

    /// Replaces the text, the cursor at its end.
    pub fn set(&mut self, text: &str) {
        self.chars = text.chars().collect();
        self.cursor = self.chars.len();
    }

    /// Takes the text out to send it, and keeps it in the history.
    pub fn take(&mut self) -> String {
        let text = self.text();
        self.chars.clear();
        self.cursor = 0;
        self.browsing = None;
        if !text.trim().is_empty() && self.history.last() != Some(&text) {
            self.history.push(text.clone());
        }
        text
    }

    pub fn insert(&mut self, c: char) {
        self.chars.insert(self.cursor, c);
        self.cursor += 1;
    }

    /// A pasted block, kept whole: line ends made `\n`, tabs and indentation as they are.
    pub fn paste(&mut self, text: &str) {
        let text = text.replace("\r\n", "\n").replace('\r', "\n");
        for c in text.chars() {
            self.insert(c);
        }
    }

    pub fn backspace(&mut self) {
        if self.cursor > 0 {
            self.cursor -= 1;
            self.chars.remove(self.cursor);
        }
    }

    pub fn delete(&mut self) {
        if self.cursor < self.chars.len() {
            self.chars.remove(self.cursor);
        }
    }

    pub fn left(&mut self) {
        self.cursor = self.cursor.saturating_sub(1);
    }

    pub fn right(&mut self) {
        self.cursor = (self.cursor + 1).min(self.chars.len());
    }

    fn line_start(&self) -> usize {
        self.chars[..self.cursor]
            .iter()
            .rposition(|&c| c == '\n')
            .map_or(0, |at| at + 1)
    }

    fn line_end(&self) -> usize {
        self.chars[self.cursor..]
            .iter()
            .position(|&c| c == '\n')
            .map_or(self.chars.len(), |at| self.cursor + at)
    }

    pub fn home(&mut self) {
        self.cursor = self.line_start();
    }

    pub fn end(&mut self) {
        self.cursor = self.line_end();
    }

    /// Ctrl-U: the line up to the cursor goes.
    pub fn kill_to_start(&mut self) {
        let start = self.line_start();
        self.chars.drain(start..self.cursor);
        self.cursor = start;
    }

    /// Ctrl-K: the line from the cursor goes.
    pub fn kill_to_end(&mut self) {
        let end = self.line_end();
        self.chars.drain(self.cursor..end);
    }

    /// Ctrl-W: the word before the cursor (and the blanks after it) goes.
    pub fn kill_word(&mut self) {
        let mut start = self.cursor;
        while start > 0 && self.chars[start - 1].is_whitespace() {
            start -= 1;
        }
        while start > 0 && !self.chars[start - 1].is_whitespace() {
            start -= 1;
        }
        self.chars.drain(start..self.cursor);
        self.cursor = start;
    }

    /// Up: the line above, or from the first line the previous message of the history.
    pub fn up(&mut self) {
        let start = self.line_start();
        if start == 0 {
            self.history_back();
            return;
        }
        let column = self.cursor - start;
        let above = self.chars[..start - 1]
            .iter()
            .rposition(|&c| c == '\n')
            .map_or(0, |at| at + 1);
        self.cursor = above + column.min(start - 1 - above);
    }

    /// Down: the line below, or from the last line the next message of the history.
    pub fn down(&mut self) {
        let end = self.line_end();
        if end == self.chars.len() {
            self.history_forward();
            return;
        }
        let column = self.cursor - self.line_start();
        let below = end + 1;
        let below_end = self.chars[below..]
            .iter()
            .position(|&c| c == '\n')
            .map_or(self.chars.len(), |at| below + at);
        self.cursor = below + column.min(below_end - below);
    }

    fn history_back(&mut self) {
        let at = match self.browsing {
            Some(0) => return,
            Some(at) => at - 1,
            None if self.history.is_empty() => return,
            None => {
                self.draft = self.text();
                self.history.len() - 1
            }
        };
        self.browsing = Some(at);
        let text = self.history[at].clone();
        self.set(&text);
    }

    fn history_forward(&mut self) {
        let Some(at) = self.browsing else {
            return;
        };
        if at + 1 < self.history.len() {
            self.browsing = Some(at + 1);
            let text = self.history[at + 1].clone();
            self.set(&text);
        } else {
            self.browsing = None;
            let draft = std::mem::take(&mut self.draft);
            self.set(&draft);
        }
    }

    /// The cursor as (line, column in characters).
    pub fn cursor_position(&self) -> (usize, usize) {
        let line = self.chars[..self.cursor]
            .iter()
            .filter(|&&c| c == '\n')
            .count();
        (line, self.cursor - self.line_start())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(text: &str) -> Editor {
        let mut editor = Editor::default();
        for c in text.chars() {
            editor.insert(c);
        }
        editor
    }

    #[test]
    fn arrow_keys_move_the_cursor_instead_of_typing_escape_codes() {
        let mut editor = typed("fix the typo");
        editor.left();
        editor.left();
        editor.insert('X');
        assert_eq!(editor.text(), "fix the tyXpo");
        editor.home();
        editor.insert('>');
        editor.end();
        editor.backspace();
        assert_eq!(editor.text(), ">fix the tyXp");
    }

    #[test]
    fn line_editing_keys() {
        let mut editor = typed("one two three");
        editor.kill_word();
        assert_eq!(editor.text(), "one two ");
        editor.left();
        editor.left();
        editor.kill_to_end();
        assert_eq!(editor.text(), "one tw");
        editor.kill_to_start();
        assert_eq!(editor.text(), "");
        editor.paste("a\r\n    b");
        editor.home();
        editor.delete();
        assert_eq!(editor.text(), "a\n   b");
    }

    #[test]
    fn up_and_down_move_between_lines_then_through_the_history() {
        let mut editor = typed("first");
        editor.take();
        editor.paste("line one\nline two");
        editor.up();
        assert_eq!(editor.cursor_position(), (0, 8));
        editor.up();
        assert_eq!(editor.text(), "first");
        editor.down();
        assert_eq!(editor.text(), "line one\nline two");
    }
}
