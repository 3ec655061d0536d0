//! Giving freed memory back to the system.

/// Returns the allocator's free pages to the system. glibc keeps freed memory in its arenas
/// (one per thread that allocated) and gives it back only at the top of the heap; after a busy
/// hour, or after building a tokenizer's tables out of many small allocations, that can be
/// most of the process's memory.
pub fn return_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists; it may be called at any
    // time from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
}
