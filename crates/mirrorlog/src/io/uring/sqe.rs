//! Building the submission queue entry of an in-flight operation: one opcode per [`Op`], for the
//! rest of a transfer that a short completion left (the offset and length advance with it).

use super::{FileCaching, UringIo};
use crate::io::{FallocateMode, Op};
use io_uring::{opcode, squeue, types};

impl UringIo {
    /// The SQE for the (rest of the) operation in slot `index`.
    pub(super) fn entry(&mut self, index: usize) -> squeue::Entry {
        let Some(inflight) = self.ops[index].as_mut() else {
            unreachable!("slot {index} has no operation");
        };
        let fd = types::Fd(inflight.fd);
        let progress = inflight.progress;
        let caching = self.caching;
        let cap = self.transfer_cap;
        let entry = match &mut inflight.op {
            Op::Open { options, .. } => {
                let mut flags = libc::O_CLOEXEC;
                flags |= if options.write {
                    libc::O_RDWR
                } else {
                    libc::O_RDONLY
                };
                if options.create {
                    flags |= libc::O_CREAT;
                }
                if options.direct && caching == FileCaching::Direct {
                    flags |= libc::O_DIRECT;
                }
                if options.directory {
                    flags = libc::O_CLOEXEC | libc::O_RDONLY | libc::O_DIRECTORY;
                }
                let path = inflight.paths[0]
                    .as_ref()
                    .map_or(std::ptr::null(), |p| p.as_ptr());
                opcode::OpenAt::new(types::Fd(libc::AT_FDCWD), path)
                    .flags(flags)
                    .mode(0o644)
                    .build()
            }
            Op::Write {
                offset, buf, range, ..
            } => {
                let start = range.start + progress;
                let len = (range.end - start).min(cap);
                // `start` is within the buffer: `validate` checked the range.
                let ptr = buf.as_ptr().wrapping_add(start);
                match buf.fixed.filter(|t| t.ring == self.ring_id) {
                    Some(tag) => opcode::WriteFixed::new(fd, ptr, len as u32, tag.index)
                        .offset(*offset + progress as u64)
                        .build(),
                    None => opcode::Write::new(fd, ptr, len as u32)
                        .offset(*offset + progress as u64)
                        .build(),
                }
            }
            Op::Read {
                offset, buf, len, ..
            } => {
                let rest = (*len - progress).min(cap);
                let ptr = buf.as_mut_ptr().wrapping_add(progress);
                match buf.fixed.filter(|t| t.ring == self.ring_id) {
                    Some(tag) => opcode::ReadFixed::new(fd, ptr, rest as u32, tag.index)
                        .offset(*offset + progress as u64)
                        .build(),
                    None => opcode::Read::new(fd, ptr, rest as u32)
                        .offset(*offset + progress as u64)
                        .build(),
                }
            }
            Op::Fdatasync { .. } => opcode::Fsync::new(fd)
                .flags(types::FsyncFlags::DATASYNC)
                .build(),
            Op::Fsync { .. } => opcode::Fsync::new(fd).build(),
            Op::Fallocate {
                offset, len, mode, ..
            } => opcode::Fallocate::new(fd, *len)
                .offset(*offset)
                .mode(match mode {
                    FallocateMode::Extend => 0,
                    FallocateMode::KeepSize => libc::FALLOC_FL_KEEP_SIZE,
                })
                .build(),
            Op::Truncate { len, .. } => opcode::Ftruncate::new(fd, *len).build(),
            Op::Rename { .. } => {
                let from = inflight.paths[0]
                    .as_ref()
                    .map_or(std::ptr::null(), |p| p.as_ptr());
                let to = inflight.paths[1]
                    .as_ref()
                    .map_or(std::ptr::null(), |p| p.as_ptr());
                opcode::RenameAt::new(
                    types::Fd(libc::AT_FDCWD),
                    from,
                    types::Fd(libc::AT_FDCWD),
                    to,
                )
                .build()
            }
            Op::Unlink { .. } => {
                let path = inflight.paths[0]
                    .as_ref()
                    .map_or(std::ptr::null(), |p| p.as_ptr());
                opcode::UnlinkAt::new(types::Fd(libc::AT_FDCWD), path).build()
            }
            Op::Close { .. } => opcode::Close::new(fd).build(),
            Op::WaitDoorbell { doorbell } => {
                opcode::PollAdd::new(types::Fd(doorbell.raw()), libc::POLLIN as u32).build()
            }
        };
        entry.user_data(index as u64)
    }
}
