//! The process's open-file limit and the caps derived from it. Every live conversation and
//! every connection holds files; the service raises its soft limit to the hard one at start and
//! sizes its caps so that, whatever `ulimit -n` says, it answers 503 before the system says
//! "too many open files".

use crate::config::ServerConfig;

/// Files kept for what is not a conversation or a connection: the index's SQLite connections
/// (a database and a WAL file each), the listener, the runtime's own descriptors, provider
/// connections and shell pipes of running turns.
pub const RESERVED_FILES: u64 = 64;
/// A live conversation holds its `metadata.jsonl` and the session files it wrote to; counted
/// with room for a running turn's provider connection or shell pipes.
pub const FILES_PER_CONVERSATION: u64 = 4;
/// Above this, more live conversations cost memory for little gain: loading one from disk
/// takes about a millisecond.
pub const MAX_DEFAULT_LIVE: u64 = 1000;

/// What the service may hold at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    pub open_files: u64,
    pub max_live_conversations: usize,
    pub max_connections: usize,
}

/// Raises the soft open-file limit to the hard limit and returns the limit now in force.
pub fn raise_open_file_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed to them.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 1024;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    limit.rlim_cur
}

/// The caps for an open-file limit: a quarter of what is left after the reserve for
/// connections, half for live conversations (at [`FILES_PER_CONVERSATION`] each), unless the
/// configuration sets them.
pub fn caps(open_files: u64, server: &ServerConfig) -> Caps {
    let budget = open_files.saturating_sub(RESERVED_FILES).max(16);
    let connections = (budget / 4).max(4);
    let live = (budget / 2 / FILES_PER_CONVERSATION).clamp(2, MAX_DEFAULT_LIVE);
    Caps {
        open_files,
        max_live_conversations: server.max_live_conversations.unwrap_or(live as usize),
        max_connections: server.max_connections.unwrap_or(connections as usize),
    }
}

/// Which resource of the machine an I/O error says ran out, if any. Such a failure passes: it
/// gets 503 (retry shortly), not 500.
pub fn exhausted(error: &std::io::Error) -> Option<&'static str> {
    match error.raw_os_error()? {
        libc::EMFILE | libc::ENFILE => Some("open files"),
        libc::ENOSPC | libc::EDQUOT => Some("disk space"),
        libc::ENOMEM | libc::ENOBUFS => Some("memory"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_fit_inside_the_open_file_limit() {
        for open_files in [64, 256, 1024, 4096, 20_000, 1 << 20] {
            let caps = caps(open_files, &ServerConfig::default());
            let files = RESERVED_FILES
                + caps.max_connections as u64
                + caps.max_live_conversations as u64 * FILES_PER_CONVERSATION;
            assert!(
                open_files < 128 || files <= open_files,
                "{open_files}: {caps:?} needs {files}"
            );
            assert!(caps.max_live_conversations >= 2 && caps.max_connections >= 4);
        }
        let configured = ServerConfig {
            max_live_conversations: Some(7),
            max_connections: Some(9),
            ..ServerConfig::default()
        };
        let caps = caps(1024, &configured);
        assert_eq!((caps.max_live_conversations, caps.max_connections), (7, 9));
    }
}
