//! Small helpers with no protocol knowledge: time formats in nats-server's styles, time zone
//! offsets from the system's zoneinfo, and random ids.

pub mod backoff;
pub mod http_get;
pub mod ids;
pub mod net;
pub mod small;
pub mod time;
pub mod tz;
pub mod writeback;

/// HashMap with foldhash: per-process seeded like std's, several times faster than SipHash on
/// the short keys of the hot maps (subject tokens, sids, interest keys).
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
