//! Generated text for the data the benchmarks write: a small vocabulary and a seeded PRNG, so
//! the same seed gives the same texts and any thread can build any piece.

use std::sync::LazyLock;

pub fn sentence_case(words: &[&str]) -> String {
    let mut text = words.join(" ");
    if let Some(first) = text.get(..1) {
        let upper = first.to_ascii_uppercase();
        text.replace_range(..1, &upper);
    }
    text
}

/// Words with sentence ends marked by "." entries, as `Rng::sentences` makes them.
pub fn prose(words: &[&str]) -> String {
    let mut text = String::new();
    for sentence in words.split(|w| *w == ".").filter(|s| !s.is_empty()) {
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(&sentence_case(sentence));
        text.push('.');
    }
    text
}

/// splitmix64: small, fast and plenty for varied text. Not for anything secret.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..bound` (`bound` > 0; the tiny modulo bias does not matter here).
    pub fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }

    pub fn words(&mut self, min: u64, max: u64) -> Vec<&'static str> {
        let count = min + self.below(max - min + 1);
        (0..count)
            .map(|_| WORDS[self.below(WORDS.len() as u64) as usize])
            .collect()
    }

    /// Sentences of 5 to 16 words, each followed by a "." entry.
    pub fn sentences(&mut self, min: u64, max: u64) -> Vec<&'static str> {
        let count = min + self.below(max - min + 1);
        let mut words = Vec::new();
        for _ in 0..count {
            words.extend(self.words(5, 16));
            words.push(".");
        }
        words
    }
}

/// The vocabulary of generated texts, one word per space. No word contains the words that
/// `foundation` searches for (`RARE_WORD`, `COMMON_WORD`), so a search for either finds exactly
/// the conversations it was put in (checked by a test there).
const VOCABULARY: &str = "
    the a an and or but if then when while because so to of in on for with from by about into
    over after before is are was be can could should would will does did have has not no yes
    it this that these those we you they i my our your their what why how which where who all
    some each every more less most again still only just also very please help fix add remove
    rename refactor explain write read test tests build run runs check update upgrade install
    configure debug trace log logs error errors warning panic crash failure bug issue feature
    function method class struct enum trait module crate package library binary script command
    shell terminal file files folder path directory config setting option flag argument value
    type string number list array map table row column query index cache memory disk network
    socket request response server client service endpoint route handler middleware token
    session user account password login permission role team project release version branch
    commit merge rebase review pull push pipeline container image cluster node pod volume
    secret certificate proxy timeout retry latency throughput benchmark profile performance
    slow fast quick large small new old broken missing wrong correct simple complex async
    thread lock mutex channel stream event queue worker job task schedule cron backup restore
    sqlite postgres redis json yaml toml csv markdown html css javascript typescript python
    rust golang java compiler linker macro generic lifetime borrow closure iterator parser
    lexer schema record field document report summary draft email letter meeting plan budget
    invoice customer order payment shipping recipe garden travel train flight hotel weather
    music guitar piano photo camera book story poem translate finnish english german french
    spanish grammar word sentence paragraph chapter today tomorrow yesterday week month year
    morning evening minute hour first second last next previous example sample template
    diagram chart graph color font layout button window dialog mobile desktop browser keyboard
    mouse screen
";

pub static WORDS: LazyLock<Vec<&str>> = LazyLock::new(|| VOCABULARY.split_whitespace().collect());
