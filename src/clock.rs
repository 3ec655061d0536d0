//! The kernel's monotonic clock, read with a system call of its own. The C library's clock
//! functions (which `std::time::Instant` and tokio's timers use) can be replaced in a process
//! — a preloaded library that fakes time, as libfaketime does — and then step with the faked
//! time; this clock cannot. Deadlines that decide a client's fate (a request body's pace) are
//! judged on it, so a step of the process's clock makes a timer wake early, never a request
//! fail.

use std::time::Duration;

/// Time since an arbitrary origin (the machine's boot, give or take), never going back.
pub fn kernel_monotonic() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only the timespec it is given, which lives on this stack.
    let failed = unsafe {
        libc::syscall(
            libc::SYS_clock_gettime,
            libc::CLOCK_MONOTONIC,
            &mut now as *mut libc::timespec,
        )
    } != 0;
    if failed {
        // Not expected on Linux; the library's clock is the next best.
        static ORIGIN: std::sync::LazyLock<std::time::Instant> =
            std::sync::LazyLock::new(std::time::Instant::now);
        return ORIGIN.elapsed();
    }
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_goes_on_with_the_librarys_clock() {
        let (kernel, library) = (kernel_monotonic(), std::time::Instant::now());
        std::thread::sleep(Duration::from_millis(20));
        let (kernel_passed, library_passed) = (kernel_monotonic() - kernel, library.elapsed());
        assert!(kernel_passed >= Duration::from_millis(20));
        let apart = kernel_passed.abs_diff(library_passed);
        assert!(
            apart < Duration::from_millis(50),
            "{kernel_passed:?} {library_passed:?}"
        );
    }
}
