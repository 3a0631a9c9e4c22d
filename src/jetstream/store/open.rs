//! The one place a stream with `storage: file` gets its message store.
//!
//! INTEGRATOR: this branch has no file store yet, so `open_file` returns a [`MemStore`]
//! (file streams keep their metadata and consumers on disk but lose their messages on a
//! restart). When `store/file.rs` lands, replace the body with
//! `file::FileStore::open(dir, limits, sync).map(|s| Box::new(s) as Box<dyn MsgStore>)`.

use super::memory::MemStore;
use super::{MsgStore, StoreError, StoreLimits, SyncPolicy};
use std::path::Path;

/// Open (or create) the file store of one stream in `dir` (`<stream dir>/msgs`).
pub fn open_file(
    dir: &Path,
    limits: StoreLimits,
    sync: SyncPolicy,
) -> Result<Box<dyn MsgStore>, StoreError> {
    let _ = (dir, sync);
    Ok(Box::new(MemStore::new(limits)))
}

/// Whether `open_file` keeps messages across restarts (false until the file store is wired).
pub const FILE_STORE_PERSISTS: bool = false;
