//! A behaviour suite for any `MsgStore` (file or memory): `run_all(&make)` where `make`
//! builds an empty store with the given limits. Each case ends by deleting its store.
//! Include it with `mod js_store_conformance;` from a test crate.

#![allow(dead_code)]

use natsd::jetstream::store::{
    msg_size, Discard, MsgStore, Purge, StoreError, StoreLimits, StreamState,
};
use std::collections::BTreeMap;
use std::time::Duration;

pub type Make<'a> = &'a dyn Fn(StoreLimits) -> Box<dyn MsgStore>;

const HDR: &[u8] = b"NATS/1.0\r\nA: b\r\n\r\n";

/// Every case, in order.
pub fn run_all(make: Make<'_>) {
    empty_store(make);
    store_and_load(make);
    load_next_and_last(make);
    remove_and_erase(make);
    purge_all(make);
    purge_filtered(make);
    purge_seq_and_keep(make);
    subjects_and_pending(make);
    seq_for_time(make);
    max_msgs(make);
    max_bytes(make);
    max_msgs_per_subject(make);
    combined_limits(make);
    update_limits(make);
    expire(make);
    durability_calls_and_delete(make);
    skip_to(make);
}

fn limits() -> StoreLimits {
    StoreLimits::default()
}

fn put(s: &dyn MsgStore, subject: &str, data: &str, ts: i64) -> u64 {
    match s.store(subject, None, data.as_bytes(), ts) {
        Ok(seq) => seq,
        Err(e) => panic!("store {subject}: {e}"),
    }
}

fn seqs_of(s: &dyn MsgStore, filter: Option<&str>) -> Vec<u64> {
    let mut out = Vec::new();
    let mut next = 0;
    while let Ok(m) = s.load_next(filter, next) {
        out.push(m.seq);
        next = m.seq + 1;
    }
    out
}

fn done(s: Box<dyn MsgStore>) {
    s.delete().expect("delete");
}

/// What one header-less message counts for in the stores `make` builds.
fn size_in(make: Make<'_>, subject: &str, data: &[u8]) -> u64 {
    let s = make(limits());
    let n = s.msg_size(subject, None, data);
    done(s);
    n
}

pub fn empty_store(make: Make<'_>) {
    let s = make(limits());
    assert_eq!(s.state(), StreamState::default());
    assert_eq!(s.load(1), Err(StoreError::NotFound));
    assert_eq!(s.load_next(None, 0), Err(StoreError::NotFound));
    assert_eq!(s.load_last(None), Err(StoreError::NotFound));
    assert_eq!(s.remove(1, false), Ok(false));
    assert!(s.subjects(None).is_empty());
    assert_eq!(s.num_pending(None, 0, false), 0);
    assert_eq!(s.seq_for_time(0), 1);
    assert_eq!(s.expire(i64::MAX), 0);
    done(s);
}

pub fn store_and_load(make: Make<'_>) {
    let s = make(limits());
    assert_eq!(s.store("a.b", None, b"one", 100), Ok(1));
    assert_eq!(s.store("a.c", Some(HDR), b"two", 200), Ok(2));
    assert_eq!(s.store("a.b", Some(b""), b"", 300), Ok(3));
    let m = s.load(1).expect("load 1");
    assert_eq!((m.subject.as_str(), m.seq, m.ts), ("a.b", 1, 100));
    assert_eq!((m.header, &m.data[..]), (None, &b"one"[..]));
    let m = s.load(2).expect("load 2");
    assert_eq!(m.header.as_deref(), Some(HDR));
    assert_eq!(&m.data[..], b"two");
    let m = s.load(3).expect("load 3");
    assert_eq!(m.header.as_deref(), Some(&b""[..]));
    assert!(m.data.is_empty());
    assert_eq!(s.load(0), Err(StoreError::NotFound));
    assert_eq!(s.load(4), Err(StoreError::NotFound));
    let bytes = s.msg_size("a.b", None, b"one")
        + s.msg_size("a.c", Some(HDR), b"two")
        + s.msg_size("a.b", Some(b""), b"");
    assert_eq!(
        s.state(),
        StreamState {
            msgs: 3,
            bytes,
            first_seq: 1,
            first_ts: 100,
            last_seq: 3,
            last_ts: 300,
            num_deleted: 0,
            num_subjects: 2,
        }
    );
    assert_eq!(m.size(), msg_size("a.b", Some(b""), b""));
    done(s);
}

pub fn load_next_and_last(make: Make<'_>) {
    let s = make(limits());
    for (i, subj) in ["a.x", "b.y", "a.z", "b.y", "c", "a.x.deep"]
        .iter()
        .enumerate()
    {
        put(&*s, subj, &format!("m{i}"), i as i64);
    }
    assert_eq!(seqs_of(&*s, None), vec![1, 2, 3, 4, 5, 6]);
    assert_eq!(seqs_of(&*s, Some(">")), vec![1, 2, 3, 4, 5, 6]);
    assert_eq!(seqs_of(&*s, Some("a.*")), vec![1, 3]);
    assert_eq!(seqs_of(&*s, Some("a.>")), vec![1, 3, 6]);
    assert_eq!(seqs_of(&*s, Some("b.y")), vec![2, 4]);
    assert_eq!(seqs_of(&*s, Some("*")), vec![5]);
    assert_eq!(seqs_of(&*s, Some("nope")), Vec::<u64>::new());
    assert_eq!(seqs_of(&*s, Some("z.*")), Vec::<u64>::new());
    assert_eq!(s.load_next(Some("b.y"), 3).map(|m| m.seq), Ok(4));
    assert_eq!(s.load_next(Some("b.y"), 5), Err(StoreError::NotFound));
    assert_eq!(s.load_next(None, 7), Err(StoreError::NotFound));
    assert_eq!(s.load_last(None).map(|m| m.seq), Ok(6));
    assert_eq!(s.load_last(Some("a.*")).map(|m| m.seq), Ok(3));
    assert_eq!(s.load_last(Some("b.y")).map(|m| m.seq), Ok(4));
    assert_eq!(
        s.load_last(Some("*.y")).map(|m| (m.seq, m.data)),
        Ok((4, "m3".into()))
    );
    assert_eq!(s.load_last(Some("q")), Err(StoreError::NotFound));
    // The newest of a subject removed: load_last falls back to the previous one.
    assert_eq!(s.remove(4, false), Ok(true));
    assert_eq!(s.load_last(Some("b.y")).map(|m| m.seq), Ok(2));
    assert_eq!(s.remove(1, false), Ok(true));
    assert_eq!(s.load_next(Some("a.*"), 0).map(|m| m.seq), Ok(3));
    assert_eq!(s.load_next(Some("a.x"), 0), Err(StoreError::NotFound));
    done(s);
}

pub fn remove_and_erase(make: Make<'_>) {
    let s = make(limits());
    for i in 1..=5 {
        put(&*s, &format!("s.{i}"), "secret-data", i);
    }
    assert_eq!(s.remove(3, false), Ok(true));
    assert_eq!(s.remove(3, false), Ok(false));
    assert_eq!(s.load(3), Err(StoreError::NotFound));
    let st = s.state();
    assert_eq!(
        (
            st.msgs,
            st.first_seq,
            st.last_seq,
            st.num_deleted,
            st.num_subjects
        ),
        (4, 1, 5, 1, 4)
    );
    assert_eq!(s.remove(1, true), Ok(true));
    assert_eq!(s.remove(4, true), Ok(true));
    let st = s.state();
    assert_eq!(
        (
            st.msgs,
            st.first_seq,
            st.first_ts,
            st.last_seq,
            st.num_deleted
        ),
        (2, 2, 2, 5, 2)
    );
    assert_eq!(s.load(4), Err(StoreError::NotFound));
    // Removing the newest keeps last_seq; removing everything leaves first = last + 1.
    assert_eq!(s.remove(5, false), Ok(true));
    assert_eq!(s.state().last_seq, 5);
    assert_eq!(s.remove(2, false), Ok(true));
    let st = s.state();
    assert_eq!(
        (
            st.msgs,
            st.bytes,
            st.first_seq,
            st.last_seq,
            st.num_deleted,
            st.num_subjects
        ),
        (0, 0, 6, 5, 0, 0)
    );
    assert_eq!(put(&*s, "s.6", "x", 6), 6);
    assert_eq!(s.state().first_seq, 6);
    done(s);
}

pub fn purge_all(make: Make<'_>) {
    let s = make(limits());
    for i in 1..=10 {
        put(&*s, if i % 2 == 0 { "even" } else { "odd" }, "d", i);
    }
    assert_eq!(s.purge(&Purge::default()), Ok(10));
    let st = s.state();
    assert_eq!(
        (
            st.msgs,
            st.bytes,
            st.first_seq,
            st.last_seq,
            st.num_subjects
        ),
        (0, 0, 11, 10, 0)
    );
    assert!(s.subjects(None).is_empty());
    assert_eq!(s.load_next(None, 0), Err(StoreError::NotFound));
    assert_eq!(s.purge(&Purge::default()), Ok(0));
    assert_eq!(put(&*s, "odd", "d", 11), 11);
    assert_eq!(s.state().first_seq, 11);
    // `>` as the filter is a full purge.
    let p = Purge {
        filter: Some(">".into()),
        ..Purge::default()
    };
    assert_eq!(s.purge(&p), Ok(1));
    assert_eq!((s.state().first_seq, s.state().last_seq), (12, 11));
    done(s);
}

pub fn purge_filtered(make: Make<'_>) {
    let s = make(limits());
    for i in 1..=10 {
        put(&*s, if i % 2 == 0 { "k.even" } else { "k.odd" }, "d", i);
    }
    let p = |f: &str| Purge {
        filter: Some(f.into()),
        ..Purge::default()
    };
    assert_eq!(s.purge(&p("k.odd")), Ok(5));
    assert_eq!(seqs_of(&*s, None), vec![2, 4, 6, 8, 10]);
    let st = s.state();
    assert_eq!(
        (
            st.msgs,
            st.first_seq,
            st.last_seq,
            st.num_deleted,
            st.num_subjects
        ),
        (5, 2, 10, 4, 1)
    );
    assert_eq!(s.purge(&p("nothing.*")), Ok(0));
    assert_eq!(s.purge(&p("k.*")), Ok(5));
    let st = s.state();
    assert_eq!((st.msgs, st.first_seq, st.last_seq), (0, 11, 10));
    done(s);
}

pub fn purge_seq_and_keep(make: Make<'_>) {
    let s = make(limits());
    for i in 1..=10 {
        put(&*s, if i % 2 == 0 { "even" } else { "odd" }, "d", i);
    }
    // Below a sequence (exclusive).
    let n = s.purge(&Purge {
        seq: Some(4),
        ..Purge::default()
    });
    assert_eq!(n, Ok(3));
    assert_eq!(s.state().first_seq, 4);
    // Filter + sequence: the filter's messages below it.
    let n = s.purge(&Purge {
        filter: Some("odd".into()),
        seq: Some(8),
        ..Purge::default()
    });
    assert_eq!(n, Ok(2)); // 5, 7
    assert_eq!(seqs_of(&*s, None), vec![4, 6, 8, 9, 10]);
    // Filter + keep: the filter's newest N stay.
    let n = s.purge(&Purge {
        filter: Some("even".into()),
        keep: Some(1),
        ..Purge::default()
    });
    assert_eq!(n, Ok(3)); // 4, 6, 8
    assert_eq!(seqs_of(&*s, None), vec![9, 10]);
    // Keep more than there is: nothing goes.
    assert_eq!(
        s.purge(&Purge {
            keep: Some(5),
            ..Purge::default()
        }),
        Ok(0)
    );
    for i in 11..=14 {
        put(&*s, "odd", "d", i);
    }
    // Keep the newest N overall.
    assert_eq!(
        s.purge(&Purge {
            keep: Some(2),
            ..Purge::default()
        }),
        Ok(4)
    );
    assert_eq!(seqs_of(&*s, None), vec![13, 14]);
    assert_eq!(s.state().first_seq, 13);
    // Sequence beyond the last: everything goes, the stream continues from there.
    assert_eq!(
        s.purge(&Purge {
            seq: Some(20),
            ..Purge::default()
        }),
        Ok(2)
    );
    let st = s.state();
    assert_eq!((st.msgs, st.first_seq, st.last_seq), (0, 20, 19));
    assert_eq!(put(&*s, "x", "d", 20), 20);
    done(s);
}

pub fn subjects_and_pending(make: Make<'_>) {
    let s = make(limits());
    let subjects = ["o.1", "o.2", "o.1", "p.1", "o.1", "o.2.x"];
    for (i, subj) in subjects.iter().enumerate() {
        put(&*s, subj, "d", i as i64);
    }
    let want: BTreeMap<String, u64> = [("o.1", 3), ("o.2", 1), ("p.1", 1), ("o.2.x", 1)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    assert_eq!(s.subjects(None), want);
    assert_eq!(s.subjects(Some(">")), want);
    let o: BTreeMap<String, u64> = [("o.1".to_string(), 3), ("o.2".to_string(), 1)].into();
    assert_eq!(s.subjects(Some("o.*")), o);
    assert_eq!(s.subjects(Some("o.1")).get("o.1"), Some(&3));
    assert!(s.subjects(Some("zz")).is_empty());
    assert_eq!(s.state().num_subjects, 4);

    assert_eq!(s.num_pending(None, 0, false), 6);
    assert_eq!(s.num_pending(None, 1, false), 6);
    assert_eq!(s.num_pending(None, 4, false), 3);
    assert_eq!(s.num_pending(None, 2, false), 5);
    assert_eq!(s.num_pending(None, 7, false), 0);
    assert_eq!(s.num_pending(Some("o.1"), 0, false), 3);
    assert_eq!(s.num_pending(Some("o.1"), 2, false), 2);
    assert_eq!(s.num_pending(Some("o.*"), 3, false), 2);
    assert_eq!(s.num_pending(Some("o.>"), 0, false), 5);
    assert_eq!(s.num_pending(Some("none"), 0, false), 0);
    // Last per subject.
    assert_eq!(s.num_pending(None, 0, true), 4);
    assert_eq!(s.num_pending(Some("o.*"), 0, true), 2);
    assert_eq!(s.num_pending(Some("o.>"), 5, true), 2); // o.1@5, o.2.x@6
    assert_eq!(s.num_pending(Some("o.*"), 6, true), 0);
    // Counts follow removals.
    assert_eq!(s.remove(5, false), Ok(true));
    assert_eq!(s.subjects(Some("o.1")).get("o.1"), Some(&2));
    assert_eq!(s.num_pending(Some("o.1"), 4, false), 0);
    assert_eq!(s.num_pending(Some("o.1"), 0, true), 1);
    assert_eq!(s.remove(4, false), Ok(true));
    assert!(s.subjects(Some("p.1")).is_empty());
    assert_eq!(s.state().num_subjects, 3);
    done(s);
}

pub fn seq_for_time(make: Make<'_>) {
    let s = make(limits());
    for i in 1..=5 {
        put(&*s, "t", "d", i * 100);
    }
    assert_eq!(s.seq_for_time(0), 1);
    assert_eq!(s.seq_for_time(100), 1);
    assert_eq!(s.seq_for_time(101), 2);
    assert_eq!(s.seq_for_time(300), 3);
    assert_eq!(s.seq_for_time(500), 5);
    assert_eq!(s.seq_for_time(501), 6);
    assert_eq!(s.remove(3, false), Ok(true));
    assert_eq!(s.seq_for_time(250), 4);
    done(s);
}

pub fn max_msgs(make: Make<'_>) {
    let s = make(StoreLimits {
        max_msgs: 3,
        ..limits()
    });
    for i in 1..=5 {
        assert_eq!(s.store("m", None, b"d", i), Ok(i as u64));
    }
    assert_eq!(seqs_of(&*s, None), vec![3, 4, 5]);
    let st = s.state();
    assert_eq!((st.msgs, st.first_seq, st.last_seq), (3, 3, 5));
    done(s);

    let s = make(StoreLimits {
        max_msgs: 3,
        discard: Discard::New,
        ..limits()
    });
    for i in 1..=3 {
        assert_eq!(s.store("m", None, b"d", i), Ok(i as u64));
    }
    assert_eq!(s.store("m", None, b"d", 4), Err(StoreError::MaxMsgs));
    let st = s.state();
    assert_eq!((st.msgs, st.first_seq, st.last_seq), (3, 1, 3));
    assert_eq!(s.remove(1, false), Ok(true));
    assert_eq!(s.store("m", None, b"d", 5), Ok(4));
    done(s);
}

pub fn max_bytes(make: Make<'_>) {
    let one = size_in(make, "b", b"0123456789");
    let s = make(StoreLimits {
        max_bytes: (one * 3) as i64,
        ..limits()
    });
    for i in 1..=5 {
        put(&*s, "b", "0123456789", i);
    }
    let st = s.state();
    assert_eq!((st.msgs, st.bytes, st.first_seq), (3, one * 3, 3));
    // A bigger message pushes out as many as needed.
    put(&*s, "b", &"x".repeat(10 + 2 * one as usize), 6);
    assert_eq!(seqs_of(&*s, None), vec![6]);
    done(s);

    let s = make(StoreLimits {
        max_bytes: (one * 3) as i64,
        discard: Discard::New,
        ..limits()
    });
    for i in 1..=3 {
        put(&*s, "b", "0123456789", i);
    }
    assert_eq!(
        s.store("b", None, b"0123456789", 4),
        Err(StoreError::MaxBytes)
    );
    assert_eq!(s.store("b", None, b"", 4), Err(StoreError::MaxBytes));
    assert_eq!(s.state().msgs, 3);
    assert_eq!(s.purge(&Purge::default()), Ok(3));
    assert_eq!(s.store("b", None, b"0123456789", 5), Ok(4));
    done(s);
}

pub fn max_msgs_per_subject(make: Make<'_>) {
    for discard in [Discard::Old, Discard::New] {
        let s = make(StoreLimits {
            max_msgs_per_subject: 2,
            discard,
            ..limits()
        });
        for i in 1..=6 {
            put(
                &*s,
                if i % 3 == 0 { "kv.b" } else { "kv.a" },
                &i.to_string(),
                i,
            );
        }
        // kv.a: 1 2 4 5 -> 4 5; kv.b: 3 6.
        assert_eq!(seqs_of(&*s, None), vec![3, 4, 5, 6], "{discard:?}");
        assert_eq!(s.subjects(None).get("kv.a"), Some(&2));
        assert_eq!(s.load_next(Some("kv.a"), 0).map(|m| m.data), Ok("4".into()));
        let st = s.state();
        assert_eq!(
            (st.msgs, st.first_seq, st.last_seq, st.num_deleted),
            (4, 3, 6, 0)
        );
        done(s);
    }
    // Per subject 1, the latest value of each key.
    let s = make(StoreLimits {
        max_msgs_per_subject: 1,
        ..limits()
    });
    for i in 1..=100 {
        put(&*s, &format!("k.{}", i % 7), &i.to_string(), i);
    }
    assert_eq!(s.state().msgs, 7);
    assert_eq!(s.load_last(Some("k.3")).map(|m| m.data), Ok("94".into()));
    assert_eq!(s.num_pending(None, 0, true), 7);
    done(s);
}

pub fn combined_limits(make: Make<'_>) {
    // Per subject first, then the stream-wide count, then bytes.
    let one = size_in(make, "c.a", b"d");
    let s = make(StoreLimits {
        max_msgs: 4,
        max_bytes: (one * 3) as i64,
        max_msgs_per_subject: 2,
        ..limits()
    });
    for i in 1..=6 {
        put(&*s, if i % 2 == 0 { "c.a" } else { "c.b" }, "d", i);
    }
    assert_eq!(seqs_of(&*s, None), vec![4, 5, 6]);
    assert_eq!(s.subjects(None).get("c.a"), Some(&2));
    done(s);
    // Discard new: the stream-wide limit refuses, the per-subject limit still drops the oldest.
    let s = make(StoreLimits {
        max_msgs: 3,
        max_msgs_per_subject: 1,
        discard: Discard::New,
        ..limits()
    });
    put(&*s, "n.a", "1", 1);
    put(&*s, "n.a", "2", 2);
    put(&*s, "n.b", "3", 3);
    put(&*s, "n.c", "4", 4);
    assert_eq!(seqs_of(&*s, None), vec![2, 3, 4]);
    assert_eq!(s.store("n.a", None, b"5", 5), Err(StoreError::MaxMsgs));
    assert_eq!(s.store("n.d", None, b"5", 5), Err(StoreError::MaxMsgs));
    assert_eq!(s.state().last_seq, 4);
    done(s);
}

pub fn update_limits(make: Make<'_>) {
    let s = make(limits());
    for i in 1..=10 {
        put(&*s, if i <= 5 { "u.a" } else { "u.b" }, "d", i);
    }
    s.update_limits(StoreLimits {
        max_msgs_per_subject: 3,
        ..limits()
    })
    .expect("update");
    assert_eq!(seqs_of(&*s, None), vec![3, 4, 5, 8, 9, 10]);
    s.update_limits(StoreLimits {
        max_msgs: 4,
        ..limits()
    })
    .expect("update");
    assert_eq!(seqs_of(&*s, None), vec![5, 8, 9, 10]);
    let one = size_in(make, "u.b", b"d");
    s.update_limits(StoreLimits {
        max_bytes: (one * 2) as i64,
        discard: Discard::New,
        ..limits()
    })
    .expect("update");
    assert_eq!(seqs_of(&*s, None), vec![9, 10]);
    assert_eq!(s.store("u.b", None, b"d", 11), Err(StoreError::MaxBytes));
    s.update_limits(limits()).expect("update");
    assert_eq!(s.store("u.b", None, b"d", 11), Ok(11));
    done(s);
}

pub fn expire(make: Make<'_>) {
    let sec = 1_000_000_000i64;
    let s = make(StoreLimits {
        max_age: Duration::from_secs(10),
        ..limits()
    });
    for i in 1..=5 {
        put(&*s, "e", "d", i * sec);
    }
    assert_eq!(s.expire(5 * sec), 0);
    // At 13.5 s, messages stored at 1, 2 and 3 s are older than 10 s.
    assert_eq!(s.expire(13 * sec + sec / 2), 3);
    assert_eq!(seqs_of(&*s, None), vec![4, 5]);
    assert_eq!(s.expire(100 * sec), 2);
    let st = s.state();
    assert_eq!((st.msgs, st.first_seq, st.last_seq), (0, 6, 5));
    done(s);
    // No max_age: nothing expires.
    let s = make(limits());
    put(&*s, "e", "d", 1);
    assert_eq!(s.expire(i64::MAX), 0);
    done(s);
}

pub fn durability_calls_and_delete(make: Make<'_>) {
    let s = make(limits());
    put(&*s, "d", "x", 1);
    s.flush().expect("flush");
    s.sync().expect("sync");
    assert_eq!(s.load(1).map(|m| m.data), Ok("x".into()));
    s.delete().expect("delete");
    assert_eq!(s.store("d", None, b"x", 2), Err(StoreError::Closed));
    assert_eq!(s.load(1), Err(StoreError::Closed));
    assert_eq!(s.flush(), Err(StoreError::Closed));
}

/// `skip_to` (restoring a snapshot): sequences skipped are deleted ones; the first sequence
/// moves when the store is empty; the last timestamp is the one given.
fn skip_to(make: Make<'_>) {
    let s = make(limits());
    s.skip_to(5, 50).expect("skip on empty");
    let st = s.state();
    assert_eq!(
        (st.msgs, st.first_seq, st.last_seq, st.last_ts),
        (0, 5, 4, 50)
    );
    skip_to_scenario(&*s);
    assert_eq!(seqs_of(&*s, None), vec![5, 9]);
    assert_eq!(put(&*s, "a", "z", 100), 12);
    done(s);
}

/// On a store where `skip_to(5, 50)` was just called: messages at 5 and 9, the last
/// sequence 11 (what restoring a snapshot with gaps does); checks the state.
pub fn skip_to_scenario(s: &dyn MsgStore) {
    assert_eq!(put(s, "a", "x", 60), 5);
    s.skip_to(9, 60).expect("skip a gap");
    assert_eq!(put(s, "b", "y", 90), 9);
    s.skip_to(3, 1).expect("skip backwards is nothing");
    s.skip_to(10, 1).expect("skip to the next is nothing");
    s.skip_to(12, 95).expect("skip at the end");
    assert_skipped_state(s);
}

/// The state [`skip_to_scenario`] leaves.
pub fn assert_skipped_state(s: &dyn MsgStore) {
    let st = s.state();
    let got = (
        st.msgs,
        st.first_seq,
        st.last_seq,
        st.last_ts,
        st.num_deleted,
    );
    assert_eq!(got, (2, 5, 11, 95, 5));
}
