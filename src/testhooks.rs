//! Named points where a test can freeze this process, to place a fault at a precise moment
//! (the cluster tests pause an instance between two steps of a write, as a VM pause would).
//! `OPENVAALA_TEST_STOP_AT=<point>:<text>` makes the process stop itself (SIGSTOP) the first
//! time it reaches `<point>` with `<text>` in what it is about to do; a test resumes it with
//! SIGCONT. Unset (always, outside tests), each point costs one load of a static.
//! `OPENVAALA_TEST_NO_LANDLOCK=1` makes the process see a kernel without Landlock.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicBool, Ordering};

static STOP_AT: LazyLock<Option<(String, String)>> = LazyLock::new(|| {
    let value = std::env::var("OPENVAALA_TEST_STOP_AT").ok()?;
    let (point, text) = value.split_once(':')?;
    Some((point.to_owned(), text.to_owned()))
});

static STOPPED: AtomicBool = AtomicBool::new(false);

/// Stops the process here once, if a test asked for this point and `detail` contains its text.
pub fn stop_at(point: &str, detail: &[u8]) {
    let Some((wanted, text)) = STOP_AT.as_ref() else {
        return;
    };
    if wanted != point || memchr::memmem::find(detail, text.as_bytes()).is_none() {
        return;
    }
    if STOPPED.swap(true, Ordering::SeqCst) {
        return;
    }
    tracing::warn!(point, "stopping at a test's request");
    // SAFETY: raise has no preconditions; SIGSTOP stops the whole process until SIGCONT.
    unsafe {
        libc::raise(libc::SIGSTOP);
    }
}

/// Whether a test asked this process to see a kernel without Landlock.
pub fn landlock_hidden() -> bool {
    static HIDDEN: LazyLock<bool> =
        LazyLock::new(|| std::env::var_os("OPENVAALA_TEST_NO_LANDLOCK").is_some_and(|v| v == "1"));
    *HIDDEN
}
