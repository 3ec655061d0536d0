//! Giving freed memory back to the system.

/// Blocks at least this large get pages of their own (`mmap`), given back to the system as
/// soon as they are freed.
const MMAP_THRESHOLD: i32 = 1 << 20;

/// Fixes the size from which glibc maps a block on its own. By default glibc raises it after
/// such a block is freed (up to 32 MiB): the token encodings' tables (an 8 MiB table among
/// them), built after the vocabulary's parse freed its large blocks, then landed at the top
/// of a thread's heap, where `malloc_trim` does not reach, and an idle service kept their
/// 12 MiB after letting go of them. Fixed, blocks of a megabyte or more come and go on their
/// own pages; smaller ones, which the hot paths allocate, stay in the heaps.
pub fn keep_big_blocks_apart() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; called first thing in main, before
    // other threads exist.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
    }
}

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
