//! Binary forms of a log entry and of an AppendEntries request: the bulk of a group's
//! traffic and log, which openraft's serde (JSON, payloads as base64 text) made cost 4/3
//! of the bytes and an encode and a parse on every hop and every log write.
//!
//! - **entry**: `u64 term | u64 leader node | u64 index | u8 kind | rest`; kind `0` blank
//!   (no rest), `1` normal (rest = the payload's bytes), `2` membership (rest = its JSON).
//! - **append request** (`AEB` RPCs, sent to peers whose hello says `raft_bin`): `u32 len |
//!   JSON {vote, prev_log_id, leader_commit}`, `u32 count`, then per entry `u32 len | entry`.
//!
//! Integers are little endian. Decoding checks every length against what is left and
//! answers an error, never a panic; normal payloads are slices of the received buffer.

use bytes::Bytes;
use openraft::raft::AppendEntriesRequest;
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, Vote};
use serde::{Deserialize, Serialize};

use super::{Bin, NodeId, TypeConfig};

const BLANK: u8 = 0;
const NORMAL: u8 = 1;
const MEMBERSHIP: u8 = 2;
const ENTRY_HEAD: usize = 25;

/// Appends entry `e`'s binary form to `out`.
pub(crate) fn encode_entry(out: &mut Vec<u8>, e: &Entry<TypeConfig>) -> Result<(), String> {
    if let Some(payload) = encode_entry_head(out, e)? {
        out.extend_from_slice(payload);
    }
    Ok(())
}

/// Appends entry `e`'s binary form to `out`, except a normal entry's payload, which it
/// returns: the form is what `out` got followed by those bytes (a writer sends them from
/// the entry's own buffer instead of copying them).
pub(crate) fn encode_entry_head<'a>(
    out: &mut Vec<u8>,
    e: &'a Entry<TypeConfig>,
) -> Result<Option<&'a [u8]>, String> {
    out.extend_from_slice(&e.log_id.leader_id.term.to_le_bytes());
    out.extend_from_slice(&e.log_id.leader_id.node_id.to_le_bytes());
    out.extend_from_slice(&e.log_id.index.to_le_bytes());
    match &e.payload {
        EntryPayload::Blank => out.push(BLANK),
        EntryPayload::Normal(d) => {
            out.push(NORMAL);
            return Ok(Some(&d.0));
        }
        EntryPayload::Membership(m) => {
            out.push(MEMBERSHIP);
            serde_json::to_writer(&mut *out, m).map_err(|e| format!("membership entry: {e}"))?;
        }
    }
    Ok(None)
}

/// The length [`encode_entry`] gives (exact for blank and normal entries).
fn entry_len_hint(e: &Entry<TypeConfig>) -> usize {
    ENTRY_HEAD
        + match &e.payload {
            EntryPayload::Normal(d) => d.0.len(),
            _ => 64,
        }
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// An entry from its binary form; a normal payload is a slice of `b`.
pub(crate) fn decode_entry(b: &Bytes) -> Result<Entry<TypeConfig>, String> {
    if b.len() < ENTRY_HEAD {
        return Err(format!("raft entry of {} bytes is too short", b.len()));
    }
    let log_id = LogId::new(
        CommittedLeaderId::new(u64_at(b, 0), u64_at(b, 8)),
        u64_at(b, 16),
    );
    let rest = b.slice(ENTRY_HEAD..);
    let payload = match b[24] {
        BLANK if rest.is_empty() => EntryPayload::Blank,
        NORMAL => EntryPayload::Normal(Bin(rest)),
        MEMBERSHIP => EntryPayload::Membership(
            serde_json::from_slice(&rest).map_err(|e| format!("membership entry: {e}"))?,
        ),
        k => return Err(format!("raft entry of unknown kind {k}")),
    };
    Ok(Entry { log_id, payload })
}

#[derive(Serialize, Deserialize)]
struct Head {
    vote: Vote<NodeId>,
    prev_log_id: Option<LogId<NodeId>>,
    leader_commit: Option<LogId<NodeId>>,
}

/// An AppendEntries request in its binary form.
#[cfg(test)]
pub(crate) fn encode_append(req: &AppendEntriesRequest<TypeConfig>) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    encode_append_into(&mut out, req)?;
    Ok(out)
}

/// Appends the binary form of `req` to `out`.
pub(crate) fn encode_append_into(
    out: &mut Vec<u8>,
    req: &AppendEntriesRequest<TypeConfig>,
) -> Result<(), String> {
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    serde_json::to_writer(
        &mut *out,
        &Head {
            vote: req.vote,
            prev_log_id: req.prev_log_id,
            leader_commit: req.leader_commit,
        },
    )
    .map_err(|e| format!("append head: {e}"))?;
    let head_len = (out.len() - at - 4) as u32;
    out[at..at + 4].copy_from_slice(&head_len.to_le_bytes());
    let size: usize = req.entries.iter().map(|e| 4 + entry_len_hint(e)).sum();
    out.reserve(4 + size);
    out.extend_from_slice(&(req.entries.len() as u32).to_le_bytes());
    for e in &req.entries {
        let at = out.len();
        out.extend_from_slice(&[0; 4]);
        encode_entry(out, e)?;
        let len =
            u32::try_from(out.len() - at - 4).map_err(|_| "raft entry over 4 GiB".to_string())?;
        out[at..at + 4].copy_from_slice(&len.to_le_bytes());
    }
    Ok(())
}

/// Reads a `u32` length at `*at` and the bytes after it, moving `*at` past them.
fn take(b: &Bytes, at: &mut usize, what: &str) -> Result<Bytes, String> {
    let Some(len) = b.get(*at..*at + 4) else {
        return Err(format!("append request cut short before {what}"));
    };
    let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
    let start = *at + 4;
    if b.len() - start < len {
        return Err(format!(
            "append request's {what} claims {len} bytes, {} left",
            b.len() - start
        ));
    }
    *at = start + len;
    Ok(b.slice(start..start + len))
}

/// An AppendEntries request from its binary form.
pub(crate) fn decode_append(b: Bytes) -> Result<AppendEntriesRequest<TypeConfig>, String> {
    let mut at = 0;
    let head = take(&b, &mut at, "head")?;
    let head: Head = serde_json::from_slice(&head).map_err(|e| format!("append head: {e}"))?;
    let Some(n) = b.get(at..at + 4) else {
        return Err("append request cut short before its entry count".into());
    };
    let n = u32::from_le_bytes([n[0], n[1], n[2], n[3]]) as usize;
    at += 4;
    // Each entry takes at least its length and head: a bad count cannot make us reserve
    // more than the body could hold.
    if n > (b.len() - at) / (4 + ENTRY_HEAD) {
        return Err(format!(
            "append request claims {n} entries in {} bytes",
            b.len()
        ));
    }
    let mut entries = Vec::with_capacity(n);
    for _ in 0..n {
        entries.push(decode_entry(&take(&b, &mut at, "entry")?)?);
    }
    if at != b.len() {
        return Err(format!(
            "{} stray bytes after the append request",
            b.len() - at
        ));
    }
    Ok(AppendEntriesRequest {
        vote: head.vote,
        prev_log_id: head.prev_log_id,
        entries,
        leader_commit: head.leader_commit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{BasicNode, Membership};
    use std::collections::{BTreeMap, BTreeSet};

    fn entries() -> Vec<Entry<TypeConfig>> {
        let lid = |t, n, i| LogId::new(CommittedLeaderId::new(t, n), i);
        let nodes: BTreeMap<NodeId, BasicNode> =
            [(1, BasicNode::new("a")), (2, BasicNode::new("b"))].into();
        let m = Membership::new(vec![BTreeSet::from([1, 2])], nodes);
        vec![
            Entry {
                log_id: lid(1, 1, 1),
                payload: EntryPayload::Blank,
            },
            Entry {
                log_id: lid(1, 1, 2),
                payload: EntryPayload::Membership(m),
            },
            Entry {
                log_id: lid(2, u64::MAX, 3),
                payload: EntryPayload::Normal(Bin(Bytes::from_static(b"\x00\xffpayload"))),
            },
            Entry {
                log_id: lid(2, 7, 4),
                payload: EntryPayload::Normal(Bin(Bytes::new())),
            },
        ]
    }

    fn request(entries: Vec<Entry<TypeConfig>>) -> AppendEntriesRequest<TypeConfig> {
        AppendEntriesRequest {
            vote: Vote::new_committed(2, 1),
            prev_log_id: Some(LogId::new(CommittedLeaderId::new(1, 1), 0)),
            entries,
            leader_commit: None,
        }
    }

    #[test]
    fn entries_and_requests_round_trip() {
        for e in entries() {
            let mut b = Vec::new();
            encode_entry(&mut b, &e).expect("encode");
            assert_eq!(decode_entry(&Bytes::from(b)).expect("decode"), e);
        }
        for n in 0..=4 {
            let req = request(entries().into_iter().take(n).collect());
            let b = encode_append(&req).expect("encode");
            let back = decode_append(Bytes::from(b)).expect("decode");
            assert_eq!(
                serde_json::to_string(&back).ok(),
                serde_json::to_string(&req).ok()
            );
        }
    }

    /// The transport encodes into a buffer it reuses: what a request leaves there never
    /// leaks into the next one, and a request appended after other bytes decodes alone.
    #[test]
    fn a_reused_buffer_encodes_each_request_as_a_fresh_one_does() {
        let big = request(entries());
        let small = request(entries().into_iter().take(1).collect());
        let mut buf = Vec::new();
        encode_append_into(&mut buf, &big).expect("encode");
        buf.clear();
        encode_append_into(&mut buf, &small).expect("encode");
        assert_eq!(buf, encode_append(&small).expect("encode"));
        buf.extend_from_slice(b"\x01\x02\x03");
        let at = buf.len();
        encode_append_into(&mut buf, &big).expect("encode");
        let back = decode_append(Bytes::copy_from_slice(&buf[at..])).expect("decode");
        assert_eq!(
            serde_json::to_string(&back).ok(),
            serde_json::to_string(&big).ok()
        );
    }

    /// Every truncation and every single-byte change of a valid request is an error or a
    /// request, never a panic, and a huge claimed count allocates nothing.
    #[test]
    fn damaged_requests_are_errors_not_panics() {
        let b = encode_append(&request(entries())).expect("encode");
        for cut in 0..b.len() {
            assert!(decode_append(Bytes::copy_from_slice(&b[..cut])).is_err());
        }
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let mut d = b.clone();
            let i = (rng as usize) % d.len();
            d[i] = (rng >> 32) as u8;
            let _ = decode_append(Bytes::from(d));
        }
        let head_end = 4 + u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
        let mut huge = b[..head_end].to_vec();
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_append(Bytes::from(huge)).is_err());
        assert!(decode_entry(&Bytes::from_static(&[0; 24])).is_err());
        let mut bad_kind = vec![0u8; 25];
        bad_kind[24] = 9;
        assert!(decode_entry(&Bytes::from(bad_kind)).is_err());
    }
}
