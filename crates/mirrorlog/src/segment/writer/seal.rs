//! Sealing: the last partial page written, the file synced and trimmed to exactly its data (the
//! commit slots vanish), leaving what Kafka would hold; and the sealed segment's indexes.

use super::{Durable, SealedSegment, SegmentConfig, SegmentWriter};
use crate::format::Offset;
use crate::io::{self, AlignedBuf, BufferPool, FileId, Io, Op, PAGE_SIZE_BYTES};
use crate::segment::commit_record::COMMIT_SLOT_SIZE_BYTES;
use crate::segment::index::SegmentIndexes;
use crate::segment::{offset_index_path, time_index_path, SegmentError};
use std::path::Path;

impl SegmentWriter {
    /// A writer that owns nothing, holding the place of one being sealed by value. Every
    /// operation on it fails; it exists only until the log is dropped.
    #[must_use]
    pub fn placeholder(base_offset: Offset) -> Self {
        SegmentWriter {
            base_offset,
            config: SegmentConfig::default(),
            file: FileId(u32::MAX),
            data_region_bytes: 0,
            reserved_end: 0,
            data_len: 0,
            next_offset: base_offset,
            buf: AlignedBuf::empty(),
            buffer_bytes: 0,
            buf_start: 0,
            synced_pages_end: 0,
            durable: Durable {
                data_len: 0,
                next_offset: base_offset,
            },
            durable_tail: Vec::new(),
            sequence: 0,
            indexes: SegmentIndexes::new(base_offset, 4096),
            round: None,
            poisoned: Some(SegmentError::Io(crate::io::IoError::UnknownFile(FileId(
                u32::MAX,
            )))),
            pool: BufferPool::new(PAGE_SIZE_BYTES, 0),
            slot_pool: BufferPool::new(COMMIT_SLOT_SIZE_BYTES, 0),
            recent: std::collections::VecDeque::new(),
            spare: Vec::new(),
            segment_id: 0,
            journal_low: None,
            leaving: None,
        }
    }

    /// Closes the file without sealing (the segment is being deleted or was already cut).
    ///
    /// # Errors
    /// The close's failure.
    pub fn close(mut self, io: &mut dyn Io) -> Result<(), SegmentError> {
        self.return_buffers(io);
        let mut others = Vec::new();
        io::run(io, Op::Close { file: self.file }, &mut others)?.result?;
        Ok(())
    }

    /// Seals the segment: commits, writes the last partial page, syncs, truncates the file to its
    /// data, and closes. None of it needs new space; the index files are
    /// [`SealedSegment::write_indexes`].
    ///
    /// # Errors
    /// Any I/O failure (which poisons the segment).
    pub fn seal(mut self, io: &mut dyn Io) -> Result<SealedSegment, SegmentError> {
        self.commit(io)?;
        self.attach_buffer(io);
        let mut others = Vec::new();
        let tail_len = (self.data_len - self.buf_start) as usize;
        if tail_len > 0 {
            // The bytes past the data in the buffer are from an earlier use: zero them so the
            // padding of the last page is zeroes until the truncate below removes it.
            self.buf.as_mut_slice()[tail_len..PAGE_SIZE_BYTES].fill(0);
            let buf = std::mem::replace(&mut self.buf, AlignedBuf::new(PAGE_SIZE_BYTES));
            let written = io::run(
                io,
                Op::Write {
                    file: self.file,
                    offset: self.buf_start,
                    buf,
                    range: 0..PAGE_SIZE_BYTES,
                },
                &mut others,
            )?;
            if let Some(buf) = written.buf {
                io.recycle(buf);
            }
            written.result?;
        }
        self.return_buffers(io);
        for op in [
            Op::Fdatasync { file: self.file },
            Op::Truncate {
                file: self.file,
                len: self.data_len,
            },
            Op::Fdatasync { file: self.file },
            Op::Close { file: self.file },
        ] {
            io::run(io, op, &mut others)?.result?;
        }
        Ok(SealedSegment {
            base_offset: self.base_offset,
            next_offset: self.next_offset,
            data_len: self.data_len,
            indexes: self.indexes,
        })
    }
}

impl SealedSegment {
    /// Writes the `.index` and `.timeindex` of a sealed segment. Kept apart from
    /// [`SegmentWriter::seal`] because these are new files that need free space: a failure here
    /// (ENOSPC) leaves a sealed segment whose data is whole and readable, and whose index
    /// files recovery rebuilds.
    ///
    /// # Errors
    /// The I/O failure.
    pub fn write_indexes(&self, io: &mut dyn Io, dir: &Path) -> Result<(), SegmentError> {
        io::write_file(
            io,
            &offset_index_path(dir, self.base_offset),
            &self.indexes.encode_offset_index(),
        )?;
        io::write_file(
            io,
            &time_index_path(dir, self.base_offset),
            &self.indexes.encode_time_index(),
        )?;
        Ok(())
    }
}
