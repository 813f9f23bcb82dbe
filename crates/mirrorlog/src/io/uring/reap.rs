//! Reaping: each CQE fed to the operation in its slot — continued when short or retried,
//! finished otherwise — and the held members of a chain pushed again or finished with it.

use super::{FileCaching, UringIo};
use crate::io::{Completion, Done, IoError, Op};
use std::os::fd::{FromRawFd, OwnedFd};

impl UringIo {
    /// Handles one CQE, appending the completions it finishes (a failure also finishes the
    /// held members of its chain).
    pub(super) fn handle_into(&mut self, index: usize, res: i32, out: &mut Vec<Completion>) {
        if res == -libc::ECANCELED {
            let prev_in_flight = self
                .ops
                .get(index)
                .and_then(Option::as_ref)
                .and_then(|f| f.link_prev)
                .is_some_and(|p| self.ops.get(p).is_some_and(Option::is_some));
            if prev_in_flight {
                // The chain broke on a short or retried member that is being continued: run
                // this one when it completes.
                if let Some(Some(f)) = self.ops.get_mut(index) {
                    f.held = true;
                }
                return;
            }
        }
        let Some(completion) = self.handle(index, res) else {
            return;
        };
        let failed = completion.result.is_err();
        let successor = self.finished_next.take();
        out.push(completion);
        if let Some(mut n) = successor {
            if failed {
                // Held members never reach the kernel again: finish them here.
                while let Some(f) = self.ops.get(n).and_then(Option::as_ref) {
                    if !f.held {
                        break;
                    }
                    let kind = f.op.kind();
                    let following = f.link_next;
                    out.push(self.finish(n, Err(IoError::Canceled { op: kind })));
                    match following {
                        Some(x) => n = x,
                        None => break,
                    }
                }
            } else {
                if let Some(Some(f)) = self.ops.get_mut(n) {
                    f.link_prev = None;
                }
                // Push the held rest of the chain again, still linked.
                let held = self
                    .ops
                    .get(n)
                    .and_then(Option::as_ref)
                    .is_some_and(|f| f.held);
                if held {
                    self.push_chain_from(n);
                }
            }
        }
    }

    /// Handles one CQE; returns the completion if the operation finished.
    fn handle(&mut self, index: usize, res: i32) -> Option<Completion> {
        // `user_data` is always a slot index we set; anything else is ignored, not trusted.
        let inflight = self.ops.get_mut(index)?.as_mut()?;
        let kind = inflight.op.kind();
        if res < 0 {
            let errno = -res;
            if errno == libc::EINTR || errno == libc::EAGAIN {
                self.push(index);
                return None;
            }
            let error = match &inflight.op {
                // open(2) answers EINVAL to O_DIRECT on a filesystem without it (tmpfs).
                Op::Open { path, options }
                    if errno == libc::EINVAL
                        && options.direct
                        && self.caching == FileCaching::Direct =>
                {
                    IoError::DirectUnsupported { path: path.clone() }
                }
                _ => IoError::from_errno(kind, errno),
            };
            return Some(self.finish(index, Err(error)));
        }
        let n = res as usize;
        let result = match &inflight.op {
            Op::Open { options, .. } => {
                // SAFETY: a successful openat returns a new descriptor that nothing else owns.
                let fd = unsafe { OwnedFd::from_raw_fd(res) };
                let direct = options.direct;
                Ok(Done::Opened(self.add_file(fd, direct)))
            }
            Op::Write { offset, range, .. } => {
                if n == 0 && !range.is_empty() {
                    Err(IoError::WriteStalled {
                        offset: *offset + inflight.progress as u64,
                    })
                } else {
                    inflight.progress += n;
                    if inflight.progress < range.len() {
                        self.push(index);
                        return None;
                    }
                    Ok(Done::Transferred { bytes: range.len() })
                }
            }
            Op::Read { len, .. } => {
                inflight.progress += n;
                if n > 0 && inflight.progress < *len {
                    self.push(index);
                    return None;
                }
                Ok(Done::Transferred {
                    bytes: inflight.progress,
                })
            }
            _ => Ok(Done::Ok),
        };
        Some(self.finish(index, result))
    }

    fn finish(&mut self, index: usize, result: Result<Done, IoError>) -> Completion {
        let Some(inflight) = self.ops[index].take() else {
            unreachable!("slot {index} has no operation");
        };
        self.finished_next = inflight.link_next;
        self.free_ops.push(index);
        self.in_flight -= 1;
        if let Some(file) = inflight.op.file() {
            if let Some(Some(slot)) = self.files.get_mut(file.0 as usize) {
                slot.in_flight -= 1;
            }
        }
        let buf = match inflight.op {
            Op::Write { buf, .. } | Op::Read { buf, .. } => Some(buf),
            _ => None,
        };
        Completion {
            id: inflight.id,
            result,
            buf,
        }
    }
}
