//! Splitting a shell command line into the simple commands it would run, so that a permission
//! rule (`"git push*" = "ask"`) is matched against each command on its own: `ls && git push`
//! must not slip past a rule for `git push*`.
//!
//! Scripts are read with `brush-parser`. Wrappers (`sudo`, `env`, `timeout`, …) are seen
//! through, and the scripts in words (`$(…)`, backquotes), process substitutions, `sh -c '…'`
//! and `eval` are split too: what runs is what a rule must see. Reporting a command too many is
//! safe, hiding one is not, so an `sh` script is read both as dash and as bash (`Shell`).
//!
//! Scripts the parser cannot read, or that it could read only with too much stack or time
//! (`reading`), are refused; callers treat a refusal as the strictest case.

use brush_parser::ParserOptions;
use brush_parser::ast::{
    Assignment, AssignmentName, AssignmentValue, Command, CommandPrefixOrSuffixItem,
    CompoundCommand, CompoundList, ExtendedTestExpr, IoFileRedirectTarget, IoRedirect,
    ProcessSubstitutionKind, RedirectList, SimpleCommand, SubshellCommand,
};
use brush_parser::word::{self, WordPiece, WordPieceWithSource};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use crate::permissions::runners;
use reading::parse;
use shells::Shell;
pub use shells::Unparsed;
use wrappers::{Unwrapped, unwrap};

mod reading;
mod shells;
mod wrappers;

/// Scripts inside scripts (`$(…)`, `sh -c`, `eval`) are split up to this depth.
const MAX_NESTING: usize = 10;
/// The split runs on a thread of its own with this stack, whatever stack the caller has left;
/// the bounds of `reading` keep the parser's recursion well within it.
const STACK_BYTES: usize = 32 << 20;

/// One simple command a script would run: its words after wrappers and leading variable
/// assignments are removed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CommandPart {
    pub words: Vec<String>,
    /// Why it runs other programs or code that a rule on its words cannot see (a starter like
    /// `setsid` around it, `BASH_ENV` set for it, an interpreter, `find -exec`, …), if it does.
    pub runner: Option<String>,
}

impl CommandPart {
    /// The words joined by single spaces: what a rule's pattern is matched against.
    pub fn text(&self) -> String {
        self.words.join(" ")
    }

    /// The rule a user remembers for this command by default: its exact text.
    pub fn suggested_rule(&self) -> String {
        self.text()
    }

    /// A broader rule offered beside the exact one: the program and its subcommand followed by
    /// `*` (`git push*`, `cargo test*`), only when that subcommand is the first word after the
    /// program's own options, and never for a part that runs other programs (a shell, an
    /// interpreter, `git` with `-c` or an alias: its `prog sub*` would allow anything).
    pub fn broader_rule(&self) -> Option<String> {
        if self.runner.is_some() {
            return None;
        }
        let (program, arguments) = self.words.split_first()?;
        let name = runners::base_name(program);
        let sub = if name == "git" {
            arguments.get(runners::git_command(arguments).0?)?
        } else {
            // Without options first: `cargo test --lib`, not `ls -la x`.
            arguments.first().filter(|word| !word.starts_with('-'))?
        };
        let broader = format!("{name} {sub}*");
        (is_plain_name(sub) && broader != format!("{}*", self.text())).then_some(broader)
    }
}

fn is_plain_name(word: &str) -> bool {
    word.starts_with(|c: char| c.is_ascii_alphabetic())
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == ':')
}

/// Every simple command in `script`, in order. Errors when the script cannot be parsed
/// (callers treat that as the strictest case).
pub fn command_parts(script: &str) -> Result<Vec<CommandPart>, Unparsed> {
    std::thread::scope(|scope| {
        let thread = std::thread::Builder::new()
            .name("command-parts".to_owned())
            .stack_size(STACK_BYTES)
            .spawn_scoped(scope, || Splitter::default().split(script, Shell::Sh, 0));
        match thread {
            // The parser has unchecked number conversions (`echo 99999999999>x`): a panic in
            // it is a script that cannot be split, not a failure of the caller.
            Ok(thread) => thread
                .join()
                .unwrap_or_else(|_| Err(Unparsed("the shell parser failed on it".to_owned()))),
            Err(error) => Err(Unparsed(format!("no thread to parse it: {error}"))),
        }
    })
}

/// Splits scripts, remembering each one split: both readings of a script find the same
/// scripts in its words, which would otherwise be split twice at every level of nesting.
#[derive(Default)]
struct Splitter {
    done: RefCell<HashMap<(String, Shell), Vec<CommandPart>>>,
}

impl Splitter {
    fn split(
        &self,
        script: &str,
        shell: Shell,
        depth: usize,
    ) -> Result<Vec<CommandPart>, Unparsed> {
        if depth > MAX_NESTING {
            return Err(Unparsed(format!(
                "scripts nested more than {MAX_NESTING} deep"
            )));
        }
        let key = (script.to_owned(), shell);
        if let Some(parts) = self.done.borrow().get(&key) {
            return Ok(parts.clone());
        }
        let readings: &[bool] = match shell {
            Shell::Sh => &[true, false],
            Shell::Bash => &[false],
        };
        let mut parts: Vec<CommandPart> = Vec::new();
        for &dash in readings {
            // dash has neither `$'…'` nor `$[…]`: with an empty `""` after the `$`, the parser
            // reads them as dash does, a `$` then a quoted string or a `[`.
            let text = if dash {
                script.replace("$'", "$\"\"'").replace("$[", "$\"\"[")
            } else {
                script.to_owned()
            };
            let (program, options) = parse(&text, dash)?;
            let walker = Walker {
                splitter: self,
                script: &text,
                shell,
                dash,
                depth,
                options,
            };
            let mut found = Vec::new();
            for list in &program.complete_commands {
                walker.list(list, &mut found)?;
            }
            // A command both readings find is one command.
            let known: HashSet<CommandPart> = parts.iter().cloned().collect();
            parts.extend(found.into_iter().filter(|part| !known.contains(part)));
        }
        self.done.borrow_mut().insert(key, parts.clone());
        Ok(parts)
    }
}

/// Walks one parsed script, appending the parts it finds to `out`.
struct Walker<'a> {
    splitter: &'a Splitter,
    script: &'a str,
    shell: Shell,
    /// Whether this is the dash reading of an `sh` script.
    dash: bool,
    depth: usize,
    options: ParserOptions,
}

type Walked = Result<(), Unparsed>;

impl Walker<'_> {
    fn list(&self, list: &CompoundList, out: &mut Vec<CommandPart>) -> Walked {
        for item in &list.0 {
            for (_, pipeline) in item.0.iter() {
                for command in &pipeline.seq {
                    self.command(command, out)?;
                }
            }
        }
        Ok(())
    }

    fn command(&self, command: &Command, out: &mut Vec<CommandPart>) -> Walked {
        match command {
            Command::Simple(simple) => self.simple(simple, out),
            Command::Compound(compound, redirects) => {
                self.compound(compound, out)?;
                self.redirects(redirects.as_ref(), out)
            }
            Command::Function(definition) => {
                self.compound(&definition.body.0, out)?;
                self.redirects(definition.body.1.as_ref(), out)
            }
            Command::ExtendedTest(test, redirects) => {
                self.test(&test.expr, out)?;
                self.redirects(redirects.as_ref(), out)
            }
        }
    }

    fn compound(&self, compound: &CompoundCommand, out: &mut Vec<CommandPart>) -> Walked {
        match compound {
            CompoundCommand::Arithmetic(arithmetic) => self.embedded(&arithmetic.expr.value, out),
            CompoundCommand::ArithmeticForClause(clause) => {
                let exprs = [&clause.initializer, &clause.condition, &clause.updater];
                for expr in exprs.into_iter().flatten() {
                    self.embedded(&expr.value, out)?;
                }
                self.list(&clause.body.list, out)
            }
            CompoundCommand::BraceGroup(group) => self.list(&group.list, out),
            CompoundCommand::Subshell(subshell) => self.list(&subshell.list, out),
            CompoundCommand::ForClause(clause) => {
                for value in clause.values.iter().flatten() {
                    self.word(&value.value, out)?;
                }
                self.list(&clause.body.list, out)
            }
            CompoundCommand::CaseClause(clause) => {
                self.word(&clause.value.value, out)?;
                for case in &clause.cases {
                    for pattern in &case.patterns {
                        self.word(&pattern.value, out)?;
                    }
                    if let Some(list) = &case.cmd {
                        self.list(list, out)?;
                    }
                }
                Ok(())
            }
            CompoundCommand::IfClause(clause) => {
                self.list(&clause.condition, out)?;
                self.list(&clause.then, out)?;
                for branch in clause.elses.iter().flatten() {
                    if let Some(condition) = &branch.condition {
                        self.list(condition, out)?;
                    }
                    self.list(&branch.body, out)?;
                }
                Ok(())
            }
            CompoundCommand::WhileClause(clause) | CompoundCommand::UntilClause(clause) => {
                self.list(&clause.0, out)?;
                self.list(&clause.1.list, out)
            }
            CompoundCommand::Coprocess(coprocess) => self.command(&coprocess.body, out),
        }
    }

    /// The command's own part comes first, then the parts of the scripts in its words and
    /// redirections, which the shell runs before it.
    fn simple(&self, simple: &SimpleCommand, out: &mut Vec<CommandPart>) -> Walked {
        let mut words = Vec::new();
        let mut inner = Vec::new();
        // `BASH_ENV=x sh`: a variable that makes the command run other code.
        let mut runner: Option<String> = None;
        for item in simple.prefix.iter().flat_map(|prefix| &prefix.0) {
            match item {
                CommandPrefixOrSuffixItem::AssignmentWord(assignment, _) => {
                    let name = match &assignment.name {
                        AssignmentName::VariableName(name)
                        | AssignmentName::ArrayElementName(name, _) => name,
                    };
                    if runner.is_none() {
                        runner = runners::variable_runs_code(name);
                    }
                    self.assignment(assignment, &mut inner)?;
                }
                other => self.item(other, &mut words, &mut inner)?,
            }
        }
        if let Some(name) = &simple.word_or_name {
            words.push(self.word(&name.value, &mut inner)?);
        }
        for item in simple.suffix.iter().flat_map(|suffix| &suffix.0) {
            self.item(item, &mut words, &mut inner)?;
        }
        let seen = unwrap(words);
        let runner = runner.or(seen.runner);
        match seen.unwrapped {
            Unwrapped::Command(words) if words.is_empty() => {}
            Unwrapped::Command(words) => {
                let runner = runner.or_else(|| runners::program_runs_code(&words));
                // `find -exec rm {} ;` runs `rm`: a rule sees it as a part of its own.
                let found: Vec<CommandPart> = runners::find_commands(&words)
                    .into_iter()
                    .filter_map(|inner| match unwrap(inner).unwrapped {
                        Unwrapped::Command(words) => Some(CommandPart {
                            words,
                            runner: runner.clone(),
                        }),
                        Unwrapped::Script(..) => None,
                    })
                    .collect();
                out.push(CommandPart { words, runner });
                out.extend(found);
            }
            Unwrapped::Script(script, shell) => {
                let mut parts = self.split(&script, shell)?;
                // What a starter or a variable makes run, runs as it says.
                if let Some(reason) = runner {
                    for part in &mut parts {
                        part.runner.get_or_insert_with(|| reason.clone());
                    }
                }
                out.extend(parts);
            }
        }
        out.append(&mut inner);
        Ok(())
    }

    fn item(
        &self,
        item: &CommandPrefixOrSuffixItem,
        words: &mut Vec<String>,
        out: &mut Vec<CommandPart>,
    ) -> Walked {
        match item {
            CommandPrefixOrSuffixItem::IoRedirect(redirect) => self.redirect(redirect, out),
            CommandPrefixOrSuffixItem::Word(word)
            | CommandPrefixOrSuffixItem::AssignmentWord(_, word) => {
                words.push(self.word(&word.value, out)?);
                Ok(())
            }
            CommandPrefixOrSuffixItem::ProcessSubstitution(kind, subshell) => {
                words.push(self.process_substitution_text(kind, subshell));
                self.list(&subshell.list, out)
            }
        }
    }

    fn assignment(&self, assignment: &Assignment, out: &mut Vec<CommandPart>) -> Walked {
        match &assignment.value {
            AssignmentValue::Scalar(value) => self.word(&value.value, out).map(drop),
            AssignmentValue::Array(elements) => {
                for (key, value) in elements {
                    for word in key.iter().chain([value]) {
                        self.word(&word.value, out)?;
                    }
                }
                Ok(())
            }
        }
    }

    /// `<(ls)` as written: the script's text from the parser's character positions.
    fn process_substitution_text(
        &self,
        kind: &ProcessSubstitutionKind,
        subshell: &SubshellCommand,
    ) -> String {
        let sign = match kind {
            ProcessSubstitutionKind::Read => '<',
            ProcessSubstitutionKind::Write => '>',
        };
        let (start, end) = (subshell.loc.start.index, subshell.loc.end.index);
        let body: String = self
            .script
            .chars()
            .skip(start)
            .take(end.saturating_sub(start))
            .collect();
        format!("{sign}{body}")
    }

    fn redirects(&self, redirects: Option<&RedirectList>, out: &mut Vec<CommandPart>) -> Walked {
        for redirect in redirects.iter().flat_map(|list| &list.0) {
            self.redirect(redirect, out)?;
        }
        Ok(())
    }

    fn redirect(&self, redirect: &IoRedirect, out: &mut Vec<CommandPart>) -> Walked {
        match redirect {
            IoRedirect::File(_, _, target) => match target {
                IoFileRedirectTarget::Filename(word) | IoFileRedirectTarget::Duplicate(word) => {
                    self.word(&word.value, out).map(drop)
                }
                IoFileRedirectTarget::Fd(_) => Ok(()),
                IoFileRedirectTarget::ProcessSubstitution(_, subshell) => {
                    self.list(&subshell.list, out)
                }
            },
            IoRedirect::HereDocument(_, doc) if doc.requires_expansion => {
                let pieces = word::parse_heredoc(&doc.doc.value, &self.options)
                    .map_err(|error| Unparsed(format!("a here-document: {error}")))?;
                self.pieces(&pieces, &doc.doc.value, &mut String::new(), out)
            }
            IoRedirect::HereDocument(..) => Ok(()),
            IoRedirect::HereString(_, word) | IoRedirect::OutputAndError(word, _) => {
                self.word(&word.value, out).map(drop)
            }
        }
    }

    fn test(&self, expr: &ExtendedTestExpr, out: &mut Vec<CommandPart>) -> Walked {
        match expr {
            ExtendedTestExpr::And(left, right) | ExtendedTestExpr::Or(left, right) => {
                self.test(left, out)?;
                self.test(right, out)
            }
            ExtendedTestExpr::Not(inner) | ExtendedTestExpr::Parenthesized(inner) => {
                self.test(inner, out)
            }
            ExtendedTestExpr::UnaryTest(_, word) => self.word(&word.value, out).map(drop),
            ExtendedTestExpr::BinaryTest(_, left, right) => {
                self.word(&left.value, out)?;
                self.word(&right.value, out).map(drop)
            }
        }
    }

    /// The word without its quoting, expansions kept as written; the scripts it holds go to
    /// `out`.
    fn word(&self, raw: &str, out: &mut Vec<CommandPart>) -> Result<String, Unparsed> {
        let pieces = word::parse(raw, &self.options)
            .map_err(|error| Unparsed(format!("the word `{raw}`: {error}")))?;
        let mut text = String::new();
        self.pieces(&pieces, raw, &mut text, out)?;
        Ok(text)
    }

    fn pieces(
        &self,
        pieces: &[WordPieceWithSource],
        raw: &str,
        text: &mut String,
        out: &mut Vec<CommandPart>,
    ) -> Walked {
        for piece in pieces {
            let source = raw.get(piece.start_index..piece.end_index).unwrap_or("");
            match &piece.piece {
                WordPiece::Text(literal) | WordPiece::SingleQuotedText(literal) => {
                    text.push_str(literal);
                }
                // `$'\x72m'` stays as written: a reader sees an expansion, not a plain `rm`.
                WordPiece::AnsiCQuotedText(_) => text.push_str(source),
                WordPiece::DoubleQuotedSequence(inner) => self.pieces(inner, raw, text, out)?,
                // bash translates `$"…"`; dash reads a `$` and a quoted string.
                WordPiece::GettextDoubleQuotedSequence(inner) => {
                    text.push_str(if self.dash { "$" } else { "" });
                    self.pieces(inner, raw, text, out)?;
                }
                WordPiece::EscapeSequence(escape) if escape == "\\\n" => {}
                WordPiece::EscapeSequence(escape) => {
                    text.push_str(escape.strip_prefix('\\').unwrap_or(escape));
                }
                WordPiece::TildeExpansion(_) => text.push_str(source),
                WordPiece::ParameterExpansion(_) => {
                    text.push_str(source);
                    // `${x:-$(rm y)}`: the operand is a word of its own.
                    let operand = source.strip_prefix("${").and_then(|s| s.strip_suffix('}'));
                    self.embedded(operand.unwrap_or(""), out)?;
                }
                WordPiece::CommandSubstitution(script)
                | WordPiece::BackquotedCommandSubstitution(script) => {
                    text.push_str(source);
                    out.extend(self.split(script, None)?);
                }
                WordPiece::ArithmeticExpression(expr) => {
                    text.push_str(source);
                    self.embedded(&expr.value, out)?;
                }
            }
        }
        Ok(())
    }

    /// A script inside this one, run by `shell` or by this script's own.
    fn split(&self, script: &str, shell: Option<Shell>) -> Result<Vec<CommandPart>, Unparsed> {
        let shell = shell.unwrap_or(self.shell);
        self.splitter.split(script, shell, self.depth + 1)
    }

    /// Text the parser leaves raw (arithmetic, a parameter's operand) may still hold `$(…)`.
    fn embedded(&self, raw: &str, out: &mut Vec<CommandPart>) -> Walked {
        if raw.contains("$(") || raw.contains('`') {
            self.word(raw, out)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(script: &str) -> Vec<String> {
        let parts = command_parts(script).unwrap_or_else(|error| panic!("{script:?}: {error:?}"));
        parts.iter().map(CommandPart::text).collect()
    }

    fn nested(open: &str, inner: &str, close: &str, depth: usize) -> String {
        format!("{}{inner}{}", open.repeat(depth), close.repeat(depth))
    }

    #[test]
    fn lists_pipelines_and_sequences_split_into_their_commands() {
        assert_eq!(texts("ls | grep x && rm y"), ["ls", "grep x", "rm y"]);
        assert_eq!(texts("a && b || c"), ["a", "b", "c"]);
        assert_eq!(texts("a; b\nc"), ["a", "b", "c"]);
        assert_eq!(texts("sleep 1 & echo done"), ["sleep 1", "echo done"]);
        assert_eq!(
            texts("! git diff --quiet | cat"),
            ["git diff --quiet", "cat"]
        );
    }

    #[test]
    fn groups_and_compound_commands_split_into_their_bodies() {
        let script = "(cd x && make); { echo a; echo b; }";
        assert_eq!(texts(script), ["cd x", "make", "echo a", "echo b"]);
        let script = "if test -f x; then rm x; elif true; then :; else echo no; fi";
        assert_eq!(texts(script), ["test -f x", "rm x", "true", ":", "echo no"]);
        let script = "while read l; do echo $l; done < f; until false; do sleep 1; done";
        assert_eq!(texts(script), ["read l", "echo $l", "false", "sleep 1"]);
        assert_eq!(texts("for f in $(ls); do rm $f; done"), ["ls", "rm $f"]);
        let script = "case $x in a|b) rm a;; *) echo b;; esac";
        assert_eq!(texts(script), ["rm a", "echo b"]);
        assert_eq!(texts("f() { rm -rf /; }; f"), ["rm -rf /", "f"]);
        assert_eq!(texts("function g { git push; }"), ["git push"]);
    }

    #[test]
    fn commands_of_either_reading_of_sh_count() {
        // dash runs `((…))` as two subshells, bash as arithmetic; `[[` is a command in dash.
        assert_eq!(texts("((rm -rf /))"), ["rm -rf /"]);
        assert_eq!(texts("[[ -f x ]] && echo y"), ["[[ -f x ]]", "echo y"]);
        // Only bash runs this `rm`, only dash (which has no `$'…'` nor `$[…]`) the next two.
        let parts = ["echo $\\; rm -rf / #", "echo $'\\''", "rm -rf /"];
        assert_eq!(texts("echo $'\\''; rm -rf / #'"), parts);
        let parts = [
            "echo $\\",
            "rm -rf /",
            "echo",
            "echo $'\\' ; rm -rf / ; echo #'",
        ];
        assert_eq!(texts("echo $'\\' ; rm -rf / ; echo #'"), parts);
        let parts = ["echo $[", "rm -rf /", "]", "echo $[ ; rm -rf / ; ]"];
        assert_eq!(texts("echo $[ ; rm -rf / ; ]"), parts);
        assert_eq!(texts("coproc rm x"), ["coproc rm x", "rm x"]);
        // What dash cannot parse, `sh -c` does not run there.
        for script in ["diff <(ls a) <(ls b)", "cat <<< x", "a=(1 2)", "a |& b"] {
            assert!(command_parts(script).is_err(), "{script:?}");
        }
    }

    #[test]
    fn bash_scripts_are_read_as_bash() {
        let parts = ["diff <(ls a) >(sort b)", "ls a", "sort b"];
        assert_eq!(texts("bash -c 'diff <(ls a) >(sort b)'"), parts);
        assert_eq!(texts("bash -c 'cat <<< \"$(whoami)\"'"), ["cat", "whoami"]);
        let script = "bash -c 'for ((i=0; i<3; i++)); do echo $i; done'";
        assert_eq!(texts(script), ["echo $i"]);
        let script = "zsh -c 'a=(1 $(rm d)) && [[ $(id -u) == 0 ]]'";
        assert_eq!(texts(script), ["rm d", "id -u"]);
        assert_eq!(texts("bash -c 'cat < <(ls) | wc'"), ["cat", "ls", "wc"]);
        assert_eq!(texts("bash -c '((x++))'; bash -c 'coproc rm x'"), ["rm x"]);
    }

    #[test]
    fn wrappers_are_seen_through() {
        assert_eq!(texts("sudo rm -rf /tmp/x"), ["rm -rf /tmp/x"]);
        assert_eq!(texts("sudo -u bob -E rm x"), ["rm x"]);
        assert_eq!(
            texts("/usr/bin/sudo -iu root --chdir=/ -- A=1 rm x"),
            ["rm x"]
        );
        assert_eq!(texts("timeout 5 git push origin"), ["git push origin"]);
        assert_eq!(
            texts("timeout -s KILL -k 10 --foreground 5m make"),
            ["make"]
        );
        assert_eq!(texts("env -i FOO=1 BAR=2 git push"), ["git push"]);
        assert_eq!(texts("env -u HOME -C /tmp - ls"), ["ls"]);
        assert_eq!(texts("env -S 'rm -rf' /x"), ["rm -rf /x"]);
        assert_eq!(texts("nice -n 10 make; nice -5 make"), ["make", "make"]);
        assert_eq!(
            texts("nohup make & command git status"),
            ["make", "git status"]
        );
        assert_eq!(
            texts("exec -a x git status; time -p make"),
            ["git status", "make"]
        );
        assert_eq!(texts("stdbuf -oL -e 0 make"), ["make"]);
        assert_eq!(
            texts("xargs -0 -n 1 rm -f; xargs -I {} mv {} /t"),
            ["rm -f", "mv {} /t"]
        );
        let script = "sudo nice -n 5 timeout 10 nohup env A=1 time xargs git push";
        assert_eq!(texts(script), ["git push"]);
        assert_eq!(texts("FOO=1 BAR='a b' cargo test"), ["cargo test"]);
    }

    #[test]
    fn a_wrapper_with_nothing_to_run_is_what_runs() {
        assert_eq!(texts("sudo -s"), ["sudo -s"]);
        assert_eq!(texts("find . | xargs"), ["find .", "xargs"]);
        assert_eq!(texts("command -v git"), ["command -v git"]);
        assert_eq!(texts("sudo -e /etc/hosts"), ["sudo -e /etc/hosts"]);
        assert_eq!(texts("exec > log"), ["exec"]);
    }

    #[test]
    fn shell_scripts_and_eval_are_split() {
        let parts = ["git status", "git push"];
        assert_eq!(texts("bash -c 'git status && git push'"), parts);
        assert_eq!(texts("sh -c \"rm -rf /\""), ["rm -rf /"]);
        assert_eq!(texts("bash -lc 'make test'"), ["make test"]);
        assert_eq!(texts("bash -ec 'a; b' name arg"), ["a", "b"]);
        assert_eq!(
            texts("zsh -c x; dash -c y; /bin/sh -o errexit -c z"),
            ["x", "y", "z"]
        );
        assert_eq!(texts("bash -c \"sh -c 'git push'\""), ["git push"]);
        assert_eq!(texts("bash script.sh; sh"), ["bash script.sh", "sh"]);
        assert_eq!(
            texts("eval \"rm -rf /\" && eval git push"),
            ["rm -rf /", "git push"]
        );
        assert_eq!(texts("xargs sh -c 'rm \"$1\"' _"), ["rm $1"]);
        assert_eq!(
            texts("trap 'rm -f $t' EXIT; trap - INT"),
            ["rm -f $t", "trap - INT"]
        );
    }

    #[test]
    fn words_are_unquoted_and_expansions_kept_as_written() {
        assert_eq!(texts("'git' \"push\""), ["git push"]);
        assert_eq!(
            texts("echo \"$HOME\" ${USER} ~/x"),
            ["echo $HOME ${USER} ~/x"]
        );
        assert_eq!(
            texts("echo \"it's\" a\\ b \"a\\b\""),
            ["echo it's a b a\\b"]
        );
        // dash reads `$'…'` as a `$` and a quoted string, bash as one string: both count.
        let parts = ["echo $\\x72m $((1+2))", "echo $'\\x72m' $((1+2))"];
        assert_eq!(texts("echo $'\\x72m' $((1+2))"), parts);
        assert_eq!(texts("bash -c \"echo $'\\x72m'\""), ["echo $'\\x72m'"]);
        assert_eq!(texts("g\\\nit push"), ["git push"]);
    }

    #[test]
    fn scripts_inside_words_are_split_too() {
        assert_eq!(texts("echo $(rm -rf /)"), ["echo $(rm -rf /)", "rm -rf /"]);
        assert_eq!(
            texts("echo `whoami` \"$(date)\""),
            ["echo `whoami` $(date)", "whoami", "date"]
        );
        let parts = ["echo $(cat $(ls))", "cat $(ls)", "ls"];
        assert_eq!(texts("echo $(cat $(ls))"), parts);
        assert_eq!(texts("X=$(rm a) make; Y=`rm b`"), ["make", "rm a", "rm b"]);
        assert_eq!(texts("echo ${x:-$(rm b)}"), ["echo ${x:-$(rm b)}", "rm b"]);
        assert_eq!(
            texts("echo $((1 + $(wc -l < f)))"),
            ["echo $((1 + $(wc -l < f)))", "wc -l"]
        );
        assert_eq!(texts("cat > \"$(mktemp)\""), ["cat", "mktemp"]);
        assert_eq!(texts("cat <<EOF\nhi $(rm c)\nEOF\n"), ["cat", "rm c"]);
        assert_eq!(texts("cat <<'EOF'\nhi $(rm c)\nEOF\n"), ["cat"]);
        assert_eq!(
            texts("case $(uname) in $(id)) ls;; esac"),
            ["uname", "id", "ls"]
        );
    }

    #[test]
    fn redirections_are_not_words() {
        assert_eq!(texts("echo hi > out.txt 2>&1"), ["echo hi"]);
        assert_eq!(texts("cat < in >> out; > empty"), ["cat"]);
        assert_eq!(texts("{ make; } 2> log"), ["make"]);
    }

    #[test]
    fn scripts_with_nothing_to_run_give_no_parts() {
        for script in [
            "",
            "  \n\t",
            "# rm -rf /",
            "# a\n  # b\n",
            "X=1 Y=2",
            "> out",
        ] {
            assert_eq!(texts(script), Vec::<String>::new(), "{script:?}");
        }
    }

    #[test]
    fn parts_suggest_a_rule_of_program_and_subcommand() {
        let parts = |script: &str| command_parts(script).unwrap();
        let rule = |script: &str| parts(script)[0].suggested_rule();
        let broader = |script: &str| parts(script)[0].broader_rule();
        // By default the exact command; a broader `prog sub*` only where the subcommand comes
        // right after the program (its own options first for git), and never for a program
        // that runs others.
        assert_eq!(rule("git push origin main"), "git push origin main");
        assert_eq!(
            broader("git push origin main").as_deref(),
            Some("git push*")
        );
        assert_eq!(broader("git -C repo push").as_deref(), Some("git push*"));
        assert_eq!(broader("cargo test --lib").as_deref(), Some("cargo test*"));
        assert_eq!(broader("sudo npm run build:prod"), None);
        assert_eq!(broader("ls -la"), None);
        assert_eq!(broader("rm -rf /tmp/x"), None);
        assert_eq!(broader("python3 -m pytest"), None);
        assert_eq!(broader("git x"), None);
        assert_eq!(broader("cargo test"), None);
        let part = CommandPart {
            words: vec!["git".into(), "log".into(), "-1".into()],
            runner: None,
        };
        assert_eq!(part.text(), "git log -1");
    }

    #[test]
    fn scripts_that_cannot_be_parsed_are_refused() {
        for script in [
            "echo 'abc",
            "echo \"abc",
            "echo $(ls",
            "if true; then ls",
            ")",
            "a &&",
        ] {
            assert!(command_parts(script).is_err(), "{script:?}");
        }
        // Too deep to follow: the caller applies its strictest rule instead.
        let deep = nested("echo $(", "ls", ")", 16);
        assert!(command_parts(&deep).unwrap_err().0.contains("nested"));
        assert_eq!(texts(&nested("echo $(", "ls", ")", 5)).len(), 6);
        assert!(command_parts(&format!("{}ls", "eval ".repeat(16))).is_err());
    }

    #[test]
    fn hostile_scripts_are_refused_without_panicking_or_recursing_without_bound() {
        let refused = [
            // Numbers too big for the parser, which panics on them.
            "echo 99999999999>x".to_owned(),
            "echo ~99999999999999999999999".to_owned(),
            // Unterminated.
            "\0\\".to_owned(),
            "$((".to_owned(),
            "cat <<EOF".to_owned(),
            (0u8..=255).map(char::from).collect(),
            // Beyond the bounds of length, nesting and backtracking.
            "a".repeat(reading::MAX_SCRIPT_BYTES + 1),
            nested("(", "ls", ")", 10_000),
            nested("( ", "ls", ")", 30),
            nested("echo $(", "ls", ")", 5_000),
            nested("echo $(", "ls", ")", 250),
            nested("\"${x:-", "", "}\"", 300),
            nested("case x in y) ", "ls", "", 20),
            nested("case x in y) ", "ls;;", " esac", 20),
        ];
        for script in &refused {
            let start = script.chars().take(40).collect::<String>();
            assert!(command_parts(script).is_err(), "{start:?}");
        }
        // Within them, the answer is whole.
        let script = "echo a; ".repeat(reading::MAX_SCRIPT_BYTES / 8);
        assert_eq!(texts(&script).len(), 8192);
        assert_eq!(texts(&nested("{ ", "ls", "; }", 250)), ["ls"]);
        assert_eq!(texts(&nested("if a; then ", "ls", "; fi", 250)).len(), 251);
        let script = format!("bash -c 'cat <(x); [[ {}a ]]'", "a && ".repeat(12_000));
        assert_eq!(texts(&script), ["cat <(x)", "x"]);
        let script = format!("bash -c '[[ {}a ]]; [[ $(ls) ]]'", "! ".repeat(250));
        assert_eq!(texts(&script), ["ls"]);
    }
}
