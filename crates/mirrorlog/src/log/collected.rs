//! The batches a read collects, as slices of the buffers they were read into: a read whose
//! batches came from one buffer returns a slice of it (the one copy is the device buffer's into
//! that buffer); batches from several are joined once at the end.

use bytes::{Bytes, BytesMut};

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Collected {
    pieces: Vec<Bytes>,
    /// The piece being extended: its buffer and the range of it taken so far.
    run: Option<(Bytes, usize, usize)>,
    len: usize,
}

impl Collected {
    /// Bytes collected.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Adds `buf[from..to]`, which follows what was collected.
    pub(crate) fn push(&mut self, buf: &Bytes, from: usize, to: usize) {
        self.len += to - from;
        match &mut self.run {
            Some((b, _, end)) if b.as_ptr() == buf.as_ptr() && *end == from => *end = to,
            run => {
                if let Some((b, s, e)) = run.take() {
                    self.pieces.push(b.slice(s..e));
                }
                *run = Some((buf.clone(), from, to));
            }
        }
    }

    /// The collected bytes: a slice when they came from one buffer, else joined once.
    pub(crate) fn finish(mut self) -> Bytes {
        if let Some((b, s, e)) = self.run.take() {
            self.pieces.push(b.slice(s..e));
        }
        match self.pieces.len() {
            0 => Bytes::new(),
            1 => self.pieces.pop().unwrap_or_default(),
            _ => {
                let mut joined = BytesMut::with_capacity(self.len);
                for p in &self.pieces {
                    joined.extend_from_slice(p);
                }
                joined.freeze()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_buffer_is_a_slice_several_are_joined() {
        let a = Bytes::from((0u8..100).collect::<Vec<u8>>());
        let mut c = Collected::default();
        c.push(&a, 10, 20);
        c.push(&a, 20, 45);
        assert_eq!(c.len(), 35);
        let out = c.finish();
        assert_eq!(&out[..], &a[10..45]);
        assert_eq!(out.as_ptr(), a[10..].as_ptr(), "no copy");
        let b = Bytes::from(vec![7u8; 8]);
        let mut c = Collected::default();
        c.push(&a, 0, 4);
        c.push(&b, 0, 8);
        c.push(&a, 90, 100);
        let out = c.finish();
        assert_eq!(out.len(), 22);
        assert_eq!(&out[..4], &a[..4]);
        assert_eq!(&out[4..12], &b[..]);
        assert_eq!(&out[12..], &a[90..]);
    }
}
