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

/// Maps the binary's own code and constants page by page as they are used. The kernel maps a
/// file's neighbouring pages around each page fault (64 KiB at a time), so a binary whose
/// code for one request is spread over its whole text segment ends up with most of that
/// segment resident, though a turn touches a fraction of it: with a release build (no
/// whole-program optimization) about 27 MiB of a 40 MB text segment. `MADV_RANDOM` turns that
/// off for these mappings; a page never used stays out of the service's memory, at the cost
/// of one fault per page the first time it runs (a few thousand at start).
pub fn map_own_code_lazily() {
    #[cfg(target_os = "linux")]
    {
        let Ok(own) = std::env::current_exe() else {
            return;
        };
        let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
            return;
        };
        let own = own.to_string_lossy();
        for line in maps.lines() {
            // `start-end perms offset dev inode path`
            let mut fields = line.split_whitespace();
            let (Some(range), Some(_perms)) = (fields.next(), fields.next()) else {
                continue;
            };
            if fields.nth(3).is_none_or(|path| path != own) {
                continue;
            }
            let Some((start, end)) = range.split_once('-') else {
                continue;
            };
            let (Ok(start), Ok(end)) = (
                usize::from_str_radix(start, 16),
                usize::from_str_radix(end, 16),
            ) else {
                continue;
            };
            // SAFETY: an advice on a mapping this process has, as /proc/self/maps lists it;
            // it changes how pages are read in, never what they hold.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_RANDOM);
            }
        }
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
