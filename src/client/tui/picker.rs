//! A list to choose from (`/resume`, `/rewind`, `/model`), narrowed by what is typed.

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Pick {
    Resume,
    /// `files`: the working directory is put back too.
    Rewind {
        files: bool,
    },
    Model,
    Agent,
}

pub struct Picker {
    pub kind: Pick,
    pub title: String,
    /// (what is shown, what choosing it gives).
    choices: Vec<(String, String)>,
    pub filter: String,
    pub selected: usize,
}

impl Picker {
    pub fn new(kind: Pick, title: &str, choices: Vec<(String, String)>) -> Picker {
        Picker {
            kind,
            title: title.to_owned(),
            choices,
            filter: String::new(),
            selected: 0,
        }
    }

    /// The choices whose label holds every word typed, case aside.
    pub fn visible(&self) -> Vec<&(String, String)> {
        let words: Vec<String> = self
            .filter
            .split_whitespace()
            .map(str::to_lowercase)
            .collect();
        self.choices
            .iter()
            .filter(|(label, _)| {
                let label = label.to_lowercase();
                words.iter().all(|word| label.contains(word))
            })
            .collect()
    }

    pub fn up(&mut self) {
        self.selected = self.selected.saturating_sub(1);
    }

    pub fn down(&mut self) {
        if self.selected + 1 < self.visible().len() {
            self.selected += 1;
        }
    }

    pub fn type_char(&mut self, c: char) {
        self.filter.push(c);
        self.selected = 0;
    }

    pub fn backspace(&mut self) {
        self.filter.pop();
        self.selected = 0;
    }

    pub fn chosen(&self) -> Option<(Pick, String)> {
        let visible = self.visible();
        let (_, value) = visible.get(self.selected)?;
        Some((self.kind, value.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typing_narrows_the_list() {
        let choices = vec![
            ("Fix the parser".to_owned(), "c_1".to_owned()),
            ("Write docs".to_owned(), "c_2".to_owned()),
        ];
        let mut picker = Picker::new(Pick::Resume, "resume", choices);
        picker.down();
        assert_eq!(picker.chosen(), Some((Pick::Resume, "c_2".to_owned())));
        for c in "PARS".chars() {
            picker.type_char(c);
        }
        assert_eq!(picker.visible().len(), 1);
        assert_eq!(picker.chosen(), Some((Pick::Resume, "c_1".to_owned())));
    }
}
