//! The shared store conformance suite (`tests/js_store_conformance`) against `MemStore`, so
//! memory and file streams behave the same through the `MsgStore` contract.

mod js_store_conformance;

use natsd::jetstream::store::memory::MemStore;
use natsd::jetstream::store::{MsgStore, StoreLimits};

#[test]
fn conformance_memstore() {
    let make = |limits: StoreLimits| -> Box<dyn MsgStore> { Box::new(MemStore::new(limits)) };
    js_store_conformance::run_all(&make);
}
