//! Reading a script with `brush-parser` within bounds: the parser recurses once per level of
//! nesting and backtracks exponentially on some, so a script beyond these bounds is refused
//! rather than risk the service's stack or minutes of CPU.

use brush_parser::ast::Program;
use brush_parser::{ParserOptions, Token};

use super::shells::Unparsed;

/// Parsing takes time in proportion to length (about two milliseconds a KiB, debug build).
pub(super) const MAX_SCRIPT_BYTES: usize = 64 * 1024;
/// The tokenizer recurses once per `$(`, `${` or `$[` nested in another, so their total count
/// bounds its depth.
const MAX_EXPANSIONS: usize = 256;
/// The parser recurses once per compound command (`(`, `{`, `if`, `case`, loops …) nested in
/// another; their total count bounds its depth.
const MAX_COMPOUNDS: usize = 256;
/// Bound on the script's length times 2 per `case` and per `( (` (in bash): the parser tries a
/// `case` item's body again as the last item, and `( (` as arithmetic before subshells, so a
/// nesting of them that fails to parse takes about twice as long for each.
const MAX_PARSE_WORK: u64 = 1 << 17;

/// The script's syntax tree, read as POSIX sh (when `sh`) or as bash, and the options to read
/// its words with.
pub(super) fn parse(script: &str, sh: bool) -> Result<(Program, ParserOptions), Unparsed> {
    if script.len() > MAX_SCRIPT_BYTES {
        return Err(Unparsed(format!("longer than {MAX_SCRIPT_BYTES} bytes")));
    }
    let expansions: usize = ["$(", "${", "$["]
        .iter()
        .map(|open| script.matches(open).count())
        .sum();
    if expansions > MAX_EXPANSIONS {
        return Err(Unparsed(format!(
            "more than {MAX_EXPANSIONS} `$(`, `${{` or `$[`"
        )));
    }
    let options = parser_options(sh);
    let tokens = brush_parser::uncached_tokenize_str(script, &options.tokenizer_options())
        .map_err(|error| Unparsed(error.to_string()))?;
    check_tokens(&tokens, sh, script.len())?;
    let program = brush_parser::parse_tokens(&tokens, &options)
        .map_err(|error| Unparsed(error.to_string()))?;
    Ok((program, word_options(&options)))
}

fn parser_options(sh: bool) -> ParserOptions {
    ParserOptions {
        enable_extended_globbing: false,
        posix_mode: sh,
        sh_mode: sh,
        ..ParserOptions::default()
    }
}

/// Words are read the bash way in either reading, so that bash's `$'…'` quoting is seen.
fn word_options(options: &ParserOptions) -> ParserOptions {
    ParserOptions {
        posix_mode: false,
        sh_mode: false,
        ..options.clone()
    }
}

fn check_tokens(tokens: &[Token], sh: bool, length: usize) -> Result<(), Unparsed> {
    const COMPOUND_WORDS: [&str; 10] = [
        "{", "if", "for", "while", "until", "case", "select", "coproc", "[[", "!",
    ];
    let (mut compounds, mut cases, mut paren_pairs) = (0usize, 0u32, 0u32);
    let mut after_paren = false;
    for token in tokens {
        let paren = matches!(token, Token::Operator(operator, _) if operator == "(");
        match token {
            Token::Operator(..) if paren => {
                compounds += 1;
                paren_pairs += u32::from(after_paren && !sh);
            }
            Token::Word(word, _) if COMPOUND_WORDS.contains(&word.as_str()) => {
                compounds += 1;
                cases += u32::from(word == "case");
            }
            _ => {}
        }
        after_paren = paren;
    }
    if compounds > MAX_COMPOUNDS {
        return Err(Unparsed(format!(
            "more than {MAX_COMPOUNDS} compound commands"
        )));
    }
    let work = 2u64
        .saturating_pow(cases.saturating_add(paren_pairs))
        .saturating_mul(length as u64);
    if work > MAX_PARSE_WORK {
        return Err(Unparsed(format!(
            "too long for its {cases} `case` and {paren_pairs} `( (`"
        )));
    }
    Ok(())
}
