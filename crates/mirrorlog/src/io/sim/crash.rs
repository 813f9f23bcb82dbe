//! The power cut: the disk a crash leaves ([`SimIo::crash`], [`SimIo::crash_with`]) and the
//! namespace model behind it — each file has an identity; a directory's entries become durable
//! when it is fsynced; unlinked or replaced files are kept while a durable name still refers
//! to them, for a power cut to bring back.

use super::{CrashModel, SimConfig, SimFile, SimIo, Unsynced, SECTOR_SIZE_BYTES};
use std::path::Path;

impl SimIo {
    /// The disk a power cut would leave now: each file with its durable bytes, nothing open,
    /// nothing in flight. The configuration carries over with `seed`.
    #[must_use]
    pub fn crash(&self, seed: u64) -> SimIo {
        self.crash_with(seed, CrashModel::DropUnsynced)
    }

    /// The disk a power cut would leave under `model`; every random choice comes from `seed`.
    #[must_use]
    pub fn crash_with(&self, seed: u64, model: CrashModel) -> SimIo {
        // The machine that comes back has no faults planned and no power cut ahead.
        let mut after = SimIo::new(SimConfig {
            seed,
            power_cut_after_ops: None,
            faults: Vec::new(),
            ..self.config.clone()
        });
        for (path, id) in &self.durable_names {
            let Some(file) = self
                .files
                .values()
                .find(|f| f.id == *id)
                .or_else(|| self.orphans.get(id))
            else {
                continue;
            };
            let mut image = file.durable.clone();
            if model == CrashModel::Torn {
                for change in &file.unsynced {
                    match change {
                        Unsynced::Resize { len } => {
                            if after.random(2) == 0 {
                                super::resize_zeroed(&mut image, *len as usize);
                            }
                        }
                        Unsynced::Write { offset, bytes } => match after.random(3) {
                            0 => {}
                            choice => {
                                let end = *offset as usize + bytes.len();
                                if image.len() < end {
                                    super::resize_zeroed(&mut image, end);
                                }
                                for (i, sector) in bytes.chunks(SECTOR_SIZE_BYTES).enumerate() {
                                    let at = *offset as usize + i * SECTOR_SIZE_BYTES;
                                    let fate = if choice == 1 { 1 } else { after.random(3) };
                                    let target = &mut image[at..at + sector.len()];
                                    match fate {
                                        0 => {}
                                        1 => target.copy_from_slice(sector),
                                        _ => {
                                            for b in target.iter_mut() {
                                                *b = after.random(256) as u8;
                                            }
                                        }
                                    }
                                }
                            }
                        },
                    }
                }
            }
            let id = after.next_file_id;
            after.next_file_id += 1;
            after.files.insert(
                path.clone(),
                SimFile {
                    id,
                    data: image.clone(),
                    durable: image,
                    reserved_bytes: 0,
                    unsynced: Vec::new(),
                },
            );
            after.durable_names.insert(path.clone(), id);
        }
        after
    }

    /// The file at `path` (an open file's: created if it was unlinked meanwhile).
    pub(super) fn file_mut(&mut self, path: &Path) -> &mut SimFile {
        if !self.files.contains_key(path) {
            let f = self.new_file();
            self.files.insert(path.to_path_buf(), f);
        }
        self.files.entry(path.to_path_buf()).or_default()
    }

    /// A new, empty file's identity.
    pub(super) fn new_file(&mut self) -> SimFile {
        let id = self.next_file_id;
        self.next_file_id += 1;
        SimFile {
            id,
            ..SimFile::default()
        }
    }

    /// `file` leaves the namespace (unlinked, or replaced by a rename): kept while a durable
    /// name still refers to it, for a power cut to bring back.
    pub(super) fn forget(&mut self, file: SimFile) {
        if self.durable_names.values().any(|&id| id == file.id) {
            self.orphans.insert(file.id, file);
        }
    }

    /// An fsync of directory `dir`: its entries as they are now become the durable ones.
    pub(super) fn sync_dir(&mut self, dir: &Path) {
        self.durable_names.retain(|p, _| p.parent() != Some(dir));
        for (p, f) in &self.files {
            if p.parent() == Some(dir) {
                self.durable_names.insert(p.clone(), f.id);
            }
        }
        let named: std::collections::BTreeSet<u64> = self.durable_names.values().copied().collect();
        self.orphans.retain(|id, _| named.contains(id));
    }
}
