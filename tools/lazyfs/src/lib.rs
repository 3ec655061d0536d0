//! A lazy file system for power-cut tests: a FUSE passthrough over a backing directory in
//! which names, sizes set by truncation, modes and links change on disk at once, but the data
//! written to a file stays in memory until that file is fsynced. A cut (write `cut` to the
//! control file [`CONTROL_NAME`] in the mount's root) forgets every byte not synced, as a
//! power loss forgets what the page cache held: a file keeps what was synced, one created and
//! never synced is empty. `close` makes nothing durable. The kernel does not pass `sync` and
//! `syncfs` to a FUSE server (it sends `FUSE_SYNCFS` to virtiofs only): a program run with
//! [`hook::run`] has them write out the mount's pending data, as they would on a disk.

mod extents;
mod fs;
pub mod hook;

use std::io;
use std::path::Path;

pub use extents::Extents;
pub use fs::{CONTROL_NAME, Figures, LazyFs};
use fuser::{Config, MountOption, Session, SessionACL};

/// The session of `backing` mounted lazily on `mountpoint`, ready to serve (run it, or spawn
/// it on a thread of its own).
pub fn session(backing: &Path, mountpoint: &Path) -> io::Result<Session<LazyFs>> {
    let fs = LazyFs::new(backing)?;
    let notifier = fs.notifier_slot();
    let mut config = Config::default();
    config.mount_options = vec![MountOption::FSName("lazyfs".into()), MountOption::RW];
    // Any user: a tool the service runs may do so under another user id in a sandbox.
    config.acl = SessionACL::All;
    // Several requests at once: a request of a process waits on one of its own threads while
    // an fsync of another runs, and a cut's invalidation may need a write served meanwhile.
    config.n_threads = Some(4);
    let session = Session::new(fs, mountpoint, &config)?;
    let _ = notifier.set(session.notifier());
    Ok(session)
}
