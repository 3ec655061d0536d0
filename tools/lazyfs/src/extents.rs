//! The data written to one file and not yet synced: byte ranges that do not overlap, each
//! the newest bytes written there. A read lays them over what the backing file holds; an
//! fsync writes them to it; a power cut forgets them.

use std::collections::BTreeMap;

#[derive(Debug, Default)]
pub struct Extents {
    /// Start offset → bytes. No two ranges overlap or touch: touching ones are merged, so a
    /// file written by appends is one range however many writes made it.
    ranges: BTreeMap<u64, Vec<u8>>,
}

impl Extents {
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// How many bytes wait to be synced.
    pub fn len(&self) -> u64 {
        self.ranges.values().map(|bytes| bytes.len() as u64).sum()
    }

    /// The offset just past the last pending byte (0 when none).
    pub fn end(&self) -> u64 {
        self.ranges
            .last_key_value()
            .map_or(0, |(start, bytes)| start + bytes.len() as u64)
    }

    /// Records `data` written at `offset`, over anything pending there.
    pub fn write(&mut self, offset: u64, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let end = offset + data.len() as u64;
        // The common case, an append right after the last range, extends it in place.
        if let Some((start, bytes)) = self.ranges.last_key_value()
            && start + bytes.len() as u64 == offset
        {
            let start = *start;
            self.ranges
                .get_mut(&start)
                .expect("the last range")
                .extend_from_slice(data);
            return;
        }
        // Every range that overlaps or touches [offset, end) is merged with the new bytes.
        let touching: Vec<u64> = self
            .ranges
            .range(..=end)
            .rev()
            .take_while(|(start, bytes)| *start + bytes.len() as u64 >= offset)
            .map(|(start, _)| *start)
            .collect();
        let mut merged_start = offset;
        let mut merged_end = end;
        for start in &touching {
            let len = self.ranges[start].len() as u64;
            merged_start = merged_start.min(*start);
            merged_end = merged_end.max(start + len);
        }
        let mut merged = vec![0; (merged_end - merged_start) as usize];
        for start in touching {
            let old = self.ranges.remove(&start).expect("a touching range");
            let at = (start - merged_start) as usize;
            merged[at..at + old.len()].copy_from_slice(&old);
        }
        let at = (offset - merged_start) as usize;
        merged[at..at + data.len()].copy_from_slice(data);
        self.ranges.insert(merged_start, merged);
    }

    /// Forgets every pending byte at or past `len` (the file was truncated there).
    pub fn truncate(&mut self, len: u64) {
        let _ = self.ranges.split_off(&len);
        if let Some((start, bytes)) = self.ranges.last_key_value()
            && start + bytes.len() as u64 > len
        {
            let start = *start;
            self.ranges
                .get_mut(&start)
                .expect("the last range")
                .truncate((len - start) as usize);
        }
    }

    /// Copies the pending bytes that fall in `[offset, offset + buf.len())` over `buf`.
    pub fn overlay(&self, offset: u64, buf: &mut [u8]) {
        let end = offset + buf.len() as u64;
        for (start, bytes) in self.ranges.range(..end) {
            let range_end = start + bytes.len() as u64;
            if range_end <= offset {
                continue;
            }
            let from = offset.max(*start);
            let to = end.min(range_end);
            buf[(from - offset) as usize..(to - offset) as usize]
                .copy_from_slice(&bytes[(from - start) as usize..(to - start) as usize]);
        }
    }

    /// The pending ranges, in order, to be written out.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &[u8])> {
        self.ranges
            .iter()
            .map(|(start, bytes)| (*start, bytes.as_slice()))
    }

    pub fn clear(&mut self) {
        self.ranges.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a file of `size` bytes, all zero on disk, reads as with the pending bytes over it.
    fn view(extents: &Extents, size: usize) -> Vec<u8> {
        let mut buf = vec![0; size];
        extents.overlay(0, &mut buf);
        buf
    }

    #[test]
    fn appends_make_one_range() {
        let mut extents = Extents::default();
        for chunk in [b"ab".as_slice(), b"cd", b"ef"] {
            extents.write(extents.end(), chunk);
        }
        assert_eq!(extents.iter().count(), 1);
        assert_eq!(view(&extents, 6), b"abcdef");
        assert_eq!(extents.len(), 6);
    }

    #[test]
    fn the_newest_write_wins_where_writes_overlap() {
        let mut extents = Extents::default();
        extents.write(2, b"cccc");
        extents.write(0, b"aaa");
        extents.write(5, b"bbb");
        extents.write(10, b"z");
        assert_eq!(view(&extents, 11), b"aaaccbbb\0\0z");
        // Two ranges: [0, 8) merged from the first three, and the lone byte at 10.
        assert_eq!(extents.iter().count(), 2);
        extents.write(3, b"X");
        assert_eq!(view(&extents, 11), b"aaaXcbbb\0\0z");
        // A write that covers everything replaces it.
        extents.write(0, b"0123456789ab");
        assert_eq!(
            extents.iter().collect::<Vec<_>>(),
            vec![(0, b"0123456789ab".as_slice())]
        );
    }

    #[test]
    fn a_write_bridging_two_ranges_merges_them() {
        let mut extents = Extents::default();
        extents.write(0, b"aa");
        extents.write(4, b"bb");
        extents.write(2, b"--");
        assert_eq!(
            extents.iter().collect::<Vec<_>>(),
            vec![(0, b"aa--bb".as_slice())]
        );
    }

    #[test]
    fn truncation_drops_what_lies_past_it() {
        let mut extents = Extents::default();
        extents.write(0, b"abcdef");
        extents.write(10, b"xyz");
        extents.truncate(4);
        assert_eq!(extents.end(), 4);
        assert_eq!(view(&extents, 4), b"abcd");
        extents.truncate(0);
        assert!(extents.is_empty());
    }

    #[test]
    fn overlay_reads_a_window() {
        let mut extents = Extents::default();
        extents.write(3, b"hello");
        let mut buf = *b"........";
        extents.overlay(5, &mut buf);
        assert_eq!(&buf, b"llo.....");
        let mut buf = *b"..";
        extents.overlay(0, &mut buf);
        assert_eq!(&buf, b"..");
    }
}
