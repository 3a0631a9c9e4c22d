//! The one place a stream with `storage: file` gets its message store.

use super::file::FileStore;
use super::{MsgStore, StoreError, StoreLimits, SyncPolicy};
use std::path::Path;

/// Open (creating or recovering) the file store of one stream in `dir` (`<stream dir>/msgs`).
pub fn open_file(
    dir: &Path,
    limits: StoreLimits,
    sync: SyncPolicy,
) -> Result<Box<dyn MsgStore>, StoreError> {
    FileStore::open(dir, limits, sync).map(|s| Box::new(s) as Box<dyn MsgStore>)
}
