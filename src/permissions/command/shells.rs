//! What the splitter's parts share: which shell reads a script, and why one could not be read.

/// Why a script could not be split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unparsed(pub String);

/// The shell that runs a script, which decides how it is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Shell {
    /// `sh`: dash on Debian, bash elsewhere. The script is read both ways, both readings must
    /// parse, and the commands of either count: dash runs `((rm -rf /))` as two subshells and
    /// `echo $'\' ; rm -rf / ; echo #'` as three commands, where bash runs neither `rm`.
    Sh,
    /// `bash -c`, `zsh -c`, `ksh -c`: read as bash.
    Bash,
}
