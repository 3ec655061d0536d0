//! The local API credential: a random token kept in the data directory (`local-token`,
//! readable by the service's user only) that every API request must carry, on loopback too.
//! Clients on the same machine (`openvaala chat`, `send`, `acp`) read it from the data
//! directory; a browser gets it once through the sign-in link (`openvaala token url`).
//!
//! It is what keeps tool processes out of the API: a sandboxed command cannot read the data
//! directory (the sandbox hides it) nor the service's environment, so whatever network it may
//! reach, it has nothing to show the API. Other users of the machine cannot read it either.

use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The file in the data directory.
pub const FILE: &str = "local-token";
/// 32 random bytes, as hex.
const TOKEN_BYTES: usize = 32;

/// Where `data_dir`'s credential is.
pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE)
}

/// The credential of `data_dir`, made on first use.
pub fn load_or_create(data_dir: &Path) -> io::Result<String> {
    load_or_create_secret(data_dir, FILE)
}

/// A secret of the service's in `data_dir/file` (the credential, the rules' key), made on first
/// use: written whole and flushed under another name, then linked into place, so a crash leaves
/// either no file or a whole one, and two instances starting at once agree on one.
pub fn load_or_create_secret(data_dir: &Path, file: &str) -> io::Result<String> {
    let path = data_dir.join(file);
    if let Some(token) = read_secret(&path)? {
        return Ok(token);
    }
    // Not there, or not a whole token: made anew.
    match fs::remove_file(&path) {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(error) => return Err(error),
    }
    let token = random_token()?;
    let temporary = data_dir.join(format!("{file}.{}.tmp", std::process::id()));
    let _ = fs::remove_file(&temporary);
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temporary)?;
    file.write_all(token.as_bytes())?;
    file.sync_all()?;
    drop(file);
    let linked = fs::hard_link(&temporary, &path);
    fs::remove_file(&temporary)?;
    match linked {
        Ok(()) => {
            fs::File::open(data_dir)?.sync_all()?;
            Ok(token)
        }
        // Another instance made it first: theirs counts.
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => read_secret(&path)?
            .ok_or_else(|| io::Error::other(format!("{} is not a whole secret", path.display()))),
        Err(error) => Err(error),
    }
}

/// The credential of `data_dir`, if it has a whole one (a file edited by hand may not). A file
/// others may read is made private.
pub fn read(data_dir: &Path) -> io::Result<Option<String>> {
    read_secret(&path(data_dir))
}

fn read_secret(path: &Path) -> io::Result<Option<String>> {
    let file = match fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    };
    let metadata = file.metadata()?;
    if metadata.permissions().mode() & 0o077 != 0 {
        let _ = fs::set_permissions(path, fs::Permissions::from_mode(0o600));
    }
    let mut token = String::new();
    file.take(1024).read_to_string(&mut token)?;
    let token = token.trim().to_owned();
    if token.len() == TOKEN_BYTES * 2 && token.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return Ok(Some(token));
    }
    Ok(None)
}

/// The kinds of client the service tells apart by the token they present: what an approval's
/// `decided_by` and a rule's `created_by` record (never a header the client sets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientKind {
    /// The web UI, signed in through its link.
    Web,
    /// `openvaala chat` and `openvaala send`.
    Cli,
    /// An editor through `openvaala acp`.
    Acp,
    /// Any client with the local token itself or `OPENVAALA_TOKEN` (curl, a script).
    Api,
}

impl ClientKind {
    pub const ALL: [ClientKind; 4] = [
        ClientKind::Web,
        ClientKind::Cli,
        ClientKind::Acp,
        ClientKind::Api,
    ];

    /// As recorded: `web`, `cli`, `acp`, `api`.
    pub fn name(self) -> &'static str {
        match self {
            ClientKind::Web => "web",
            ClientKind::Cli => "cli",
            ClientKind::Acp => "acp",
            ClientKind::Api => "api",
        }
    }
}

/// The token a client of `kind` presents, derived from a token the service accepts (the local
/// one, or the configured `OPENVAALA_TOKEN`): that token itself for `Api`, else a hash of it
/// and the kind. Whoever holds the base token can make each (they are the same user's); a
/// client holds only its own, so the service knows which kind answered.
pub fn client_token(local: &str, kind: ClientKind) -> String {
    use sha2::Digest;
    if kind == ClientKind::Api {
        return local.to_owned();
    }
    let digest = sha2::Sha256::digest(format!("openvaala-client:{}:{local}", kind.name()));
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn random_token() -> io::Result<String> {
    let mut bytes = [0u8; TOKEN_BYTES];
    fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_made_once_private_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
        let token = load_or_create(dir.path()).unwrap();
        assert_eq!(token.len(), 64);
        assert_eq!(load_or_create(dir.path()).unwrap(), token);
        let mode = fs::metadata(path(dir.path())).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // Nothing else is left beside it.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn each_client_kind_has_a_token_of_its_own() {
        let local = "ab".repeat(32);
        let tokens: Vec<String> = ClientKind::ALL
            .iter()
            .map(|kind| client_token(&local, *kind))
            .collect();
        assert_eq!(tokens[3], local);
        for (at, token) in tokens.iter().enumerate() {
            assert_eq!(token.len(), 64);
            assert!(!tokens[at + 1..].contains(token));
        }
    }

    #[test]
    fn a_damaged_file_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(path(dir.path()), "abc").unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
        let token = load_or_create(dir.path()).unwrap();
        assert_eq!(read(dir.path()).unwrap(), Some(token));
    }
}
