//! Unit tests of the sublist: matching, queues and weights, cache coherence, pruning,
//! concurrency.

use super::*;
use rand::rngs::StdRng;
use rand::SeedableRng;

/// Test entry: an id and a queue weight.
#[derive(Debug, Clone, PartialEq)]
struct E(u32, u32);

impl SubEntry for E {
    fn same(&self, other: &Self) -> bool {
        self.0 == other.0
    }
    fn weight(&self) -> u32 {
        self.1
    }
}

fn e(id: u32) -> E {
    E(id, 1)
}

fn ids(r: &SublistResult<E>) -> Vec<u32> {
    let mut v: Vec<u32> = r.psubs.iter().map(|x| x.0).collect();
    v.sort_unstable();
    v
}

fn trie_is_empty(s: &Sublist<E>) -> bool {
    s.trie_read().is_empty()
}

#[test]
fn sublist_is_send_and_sync() {
    fn assert_send_sync<S: Send + Sync>() {}
    assert_send_sync::<Sublist<E>>();
    assert_send_sync::<Arc<SublistResult<E>>>();
    let s: Sublist<E> = Sublist::default();
    assert!(format!("{s:?}").contains("count: 0"));
}

#[test]
fn literal_prefixes() {
    assert_eq!(literal_prefix(b"foo.bar"), None);
    assert_eq!(literal_prefix(b"a*b.c>"), None);
    assert_eq!(literal_prefix(b"foo.*.bar"), Some(&b"foo."[..]));
    assert_eq!(literal_prefix(b"foo.bar.>"), Some(&b"foo.bar."[..]));
    assert_eq!(literal_prefix(b">"), Some(&b""[..]));
    assert_eq!(literal_prefix(b"*.x"), Some(&b""[..]));
}

#[test]
fn literal_match() {
    let s = Sublist::new();
    s.insert(b"foo.bar", None, e(1)).unwrap();
    s.insert(b"foo.baz", None, e(2)).unwrap();
    s.insert(b"foo", None, e(3)).unwrap();
    assert_eq!(ids(&s.matches(b"foo.bar")), vec![1]);
    assert_eq!(ids(&s.matches(b"foo")), vec![3]);
    assert!(s.matches(b"foo.bar.baz").is_empty());
    assert!(s.matches(b"bar").is_empty());
    assert_eq!(s.count(), 3);
}

#[test]
fn pwc_matches_exactly_one_token() {
    let s = Sublist::new();
    s.insert(b"foo.*", None, e(1)).unwrap();
    s.insert(b"*.bar", None, e(2)).unwrap();
    s.insert(b"*", None, e(3)).unwrap();
    s.insert(b"foo.*.baz", None, e(4)).unwrap();
    assert_eq!(ids(&s.matches(b"foo.bar")), vec![1, 2]);
    assert_eq!(ids(&s.matches(b"foo")), vec![3]);
    assert!(s.matches(b"foo.bar.qux").is_empty());
    assert_eq!(ids(&s.matches(b"foo.x.baz")), vec![4]);
    assert!(s.matches(b"foo.baz").psubs.iter().all(|x| x.0 != 4));
}

#[test]
fn fwc_needs_at_least_one_token() {
    let s = Sublist::new();
    s.insert(b"foo.>", None, e(1)).unwrap();
    s.insert(b">", None, e(2)).unwrap();
    s.insert(b"foo.*.>", None, e(3)).unwrap();
    assert_eq!(ids(&s.matches(b"foo")), vec![2]);
    assert_eq!(ids(&s.matches(b"foo.bar")), vec![1, 2]);
    assert_eq!(ids(&s.matches(b"foo.bar.baz")), vec![1, 2, 3]);
    assert_eq!(ids(&s.matches(b"bar.baz")), vec![2]);
}

#[test]
fn invalid_match_subjects_match_nothing() {
    let s = Sublist::new();
    s.insert(b">", None, e(1)).unwrap();
    assert!(s.matches(b"").is_empty());
    assert!(s.matches(b"foo..bar").is_empty());
    assert!(s.matches(b"foo.").is_empty());
    assert!(!s.has_interest(b".foo"));
    assert_eq!(s.stats().num_cache, 0);
}

#[test]
fn wildcard_tokens_in_match_subject_are_literal() {
    let s = Sublist::new();
    s.insert(b"foo.bar", None, e(1)).unwrap();
    s.insert(b"foo.*", None, e(2)).unwrap();
    assert_eq!(ids(&s.matches(b"foo.*")), vec![2]);
}

#[test]
fn queue_groups_merge_by_name() {
    let s = Sublist::new();
    s.insert(b"foo.*", Some(b"q"), e(1)).unwrap();
    s.insert(b"foo.>", Some(b"q"), e(2)).unwrap();
    s.insert(b"foo.bar", Some(b"q"), e(3)).unwrap();
    s.insert(b"foo.bar", Some(b"other"), e(4)).unwrap();
    s.insert(b"foo.bar", None, e(5)).unwrap();
    let r = s.matches(b"foo.bar");
    assert_eq!(ids(&r), vec![5]);
    assert_eq!(r.qsubs.len(), 2);
    assert_eq!(r.len(), 3);
    let q = r.qsubs.iter().find(|g| g.name == "q").unwrap();
    let mut m: Vec<u32> = q.members.iter().map(|x| x.0).collect();
    m.sort_unstable();
    assert_eq!(m, vec![1, 2, 3]);
    assert_eq!(q.total_weight, 3);
    let o = r.qsubs.iter().find(|g| g.name == "other").unwrap();
    assert_eq!(o.members, vec![e(4)]);
}

#[test]
fn same_entry_on_two_subjects_appears_twice() {
    let s = Sublist::new();
    s.insert(b"foo.*", None, e(1)).unwrap();
    s.insert(b"foo.bar", None, e(1)).unwrap();
    assert_eq!(ids(&s.matches(b"foo.bar")), vec![1, 1]);
}

#[test]
fn weights_and_pick_distribution() {
    let s = Sublist::new();
    s.insert(b"work", Some(b"q"), E(1, 1)).unwrap();
    s.insert(b"work", Some(b"q"), E(2, 3)).unwrap();
    s.insert(b"work", Some(b"q"), E(3, 0)).unwrap();
    s.insert(b"*", Some(b"q"), E(4, 4)).unwrap();
    let r = s.matches(b"work");
    let g = &r.qsubs[0];
    assert_eq!(g.total_weight, 8);
    let mut rng = StdRng::seed_from_u64(7);
    let mut hits = [0u32; 5];
    let n = 80_000;
    for _ in 0..n {
        hits[g.pick(&mut rng).unwrap().0 as usize] += 1;
    }
    assert_eq!(hits[3], 0, "weight 0 is never picked");
    for (id, w) in [(1usize, 1.0), (2, 3.0), (4, 4.0)] {
        let expect = f64::from(n) * w / 8.0;
        let got = f64::from(hits[id]);
        assert!(
            (got - expect).abs() < expect * 0.05,
            "id {id}: {got} vs {expect}"
        );
    }
}

#[test]
fn pick_uniform_and_zero_weight() {
    let g = QueueGroup {
        name: Bytes::from_static(b"q"),
        members: vec![e(0), e(1), e(2), e(3)],
        total_weight: 4,
    };
    let mut rng = StdRng::seed_from_u64(1);
    let mut hits = [0u32; 4];
    for _ in 0..40_000 {
        hits[g.pick(&mut rng).unwrap().0 as usize] += 1;
    }
    assert!(
        hits.iter().all(|&h| (9_500..10_500).contains(&h)),
        "{hits:?}"
    );
    // Weights 0 and 2: the zero-weight member is never chosen.
    let g = QueueGroup {
        name: Bytes::from_static(b"q"),
        members: vec![E(0, 0), E(1, 2)],
        total_weight: 2,
    };
    assert!((0..1000).all(|_| g.pick(&mut rng).unwrap().0 == 1));
    let g = QueueGroup {
        name: Bytes::from_static(b"q"),
        members: vec![E(0, 0)],
        total_weight: 0,
    };
    assert!(g.pick(&mut rng).is_none());
}

#[test]
fn remove_and_not_found() {
    let s = Sublist::new();
    s.insert(b"foo.bar", None, e(1)).unwrap();
    s.insert(b"foo.bar", Some(b"q"), e(2)).unwrap();
    assert_eq!(
        s.remove(b"foo.bar", None, &e(2)),
        Err(SublistError::NotFound)
    );
    assert_eq!(
        s.remove(b"foo.bar", Some(b"x"), &e(2)),
        Err(SublistError::NotFound)
    );
    assert_eq!(
        s.remove(b"foo.baz", None, &e(1)),
        Err(SublistError::NotFound)
    );
    assert_eq!(s.remove(b"foo.*", None, &e(1)), Err(SublistError::NotFound));
    assert_eq!(s.remove(b"foo.bar", None, &e(1)), Ok(()));
    assert_eq!(
        s.remove(b"foo.bar", None, &e(1)),
        Err(SublistError::NotFound)
    );
    assert_eq!(s.remove(b"foo.bar", Some(b"q"), &e(2)), Ok(()));
    assert_eq!(s.count(), 0);
    assert!(trie_is_empty(&s));
    let st = s.stats();
    assert_eq!((st.num_inserts, st.num_removes), (2, 2));
}

#[test]
fn invalid_subjects_and_queues_rejected() {
    let s = Sublist::new();
    let g = s.generation();
    for subj in [&b""[..], b"foo..bar", b"foo.", b"foo.>.bar", b"foo bar"] {
        assert_eq!(
            s.insert(subj, None, e(1)),
            Err(SublistError::InvalidSubject)
        );
        assert_eq!(
            s.remove(subj, None, &e(1)),
            Err(SublistError::InvalidSubject)
        );
    }
    for q in [&b""[..], b"a b", b"q\n"] {
        assert_eq!(
            s.insert(b"foo", Some(q), e(1)),
            Err(SublistError::InvalidQueue)
        );
    }
    assert_eq!(s.count(), 0);
    assert_eq!(s.generation(), g);
    assert_eq!(SublistError::NotFound.to_string(), "subscription not found");
}

#[test]
fn cache_sees_inserts_and_removes() {
    let s = Sublist::new();
    s.insert(b"foo.bar", None, e(1)).unwrap();
    assert_eq!(ids(&s.matches(b"foo.bar")), vec![1]);
    assert_eq!(ids(&s.matches(b"foo.baz")), Vec::<u32>::new());
    assert_eq!(s.stats().num_cache, 2);

    let g = s.generation();
    s.insert(b"foo.*", None, e(2)).unwrap();
    assert_ne!(s.generation(), g);
    assert_eq!(ids(&s.matches(b"foo.bar")), vec![1, 2]);
    assert_eq!(ids(&s.matches(b"foo.baz")), vec![2]);

    s.insert(b"foo.bar", None, e(3)).unwrap();
    assert_eq!(ids(&s.matches(b"foo.bar")), vec![1, 2, 3]);
    s.insert(b">", Some(b"q"), e(4)).unwrap();
    assert_eq!(s.matches(b"foo.baz").qsubs.len(), 1);

    let g = s.generation();
    s.remove(b"foo.*", None, &e(2)).unwrap();
    assert_ne!(s.generation(), g);
    assert_eq!(ids(&s.matches(b"foo.bar")), vec![1, 3]);
    assert_eq!(ids(&s.matches(b"foo.baz")), Vec::<u32>::new());
    s.remove(b"foo.bar", None, &e(1)).unwrap();
    assert_eq!(ids(&s.matches(b"foo.bar")), vec![3]);
    s.remove(b">", Some(b"q"), &e(4)).unwrap();
    assert!(s.matches(b"foo.baz").is_empty());
    assert!(!s.has_interest(b"foo.baz"));
    assert!(s.has_interest(b"foo.bar"));
}

#[test]
fn unrelated_changes_keep_cache() {
    let s = Sublist::new();
    s.insert(b"foo.bar", None, e(1)).unwrap();
    let a = s.matches(b"foo.bar");
    s.insert(b"baz.*", None, e(2)).unwrap();
    s.insert(b"other", None, e(3)).unwrap();
    s.remove(b"other", None, &e(3)).unwrap();
    let b = s.matches(b"foo.bar");
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(s.stats().num_cache, 1);
}

#[test]
fn cache_is_bounded() {
    let s = Sublist::new();
    s.insert(b">", None, e(1)).unwrap();
    for i in 0..10_000 {
        assert_eq!(s.matches(format!("s.{i}").as_bytes()).len(), 1);
    }
    let st = s.stats();
    assert!(
        st.num_cache as usize <= SHARDS * SHARD_MAX,
        "{}",
        st.num_cache
    );
    assert!(
        st.num_cache as usize >= SHARDS * SHARD_LOW / 2,
        "{}",
        st.num_cache
    );
    assert_eq!(st.num_matches, 10_000);
    assert_eq!(st.max_fanout, 1);
    assert_eq!(st.avg_fanout, 1.0);
    s.matches(b"s.9999");
    assert!(s.stats().cache_hit_rate > 0.0);
}

#[test]
fn has_interest_matches_matches() {
    let s = Sublist::new();
    s.insert(b"a.*.c", None, e(1)).unwrap();
    s.insert(b"x.>", Some(b"q"), e(2)).unwrap();
    for subj in ["a.b.c", "a.b", "a.b.c.d", "x", "x.y", "x.y.z", "q"] {
        let want = !s.matches(subj.as_bytes()).is_empty();
        s.cache.iter().for_each(|sh| sh.write().clear());
        assert_eq!(s.has_interest(subj.as_bytes()), want, "{subj}");
    }
}

#[test]
fn churn_prunes_the_trie() {
    use std::io::Write;
    let s = Sublist::new();
    let n = 1_000_000u32;
    let mut subj = Vec::with_capacity(32);
    let mut subject = |i: u32| {
        subj.clear();
        let _ = write!(subj, "churn.{}.{}", i % 1000, i);
        subj.clone()
    };
    for i in 0..n {
        s.insert(&subject(i), None, e(i)).unwrap();
        if i % 100 == 0 {
            assert_eq!(s.matches(&subject(i)).len(), 1);
            s.insert(b"churn.*.>", Some(b"q"), e(i)).unwrap();
            s.remove(b"churn.*.>", Some(b"q"), &e(i)).unwrap();
        }
    }
    assert_eq!(s.count(), n as usize);
    for i in 0..n {
        s.remove(&subject(i), None, &e(i)).unwrap();
    }
    assert_eq!(s.count(), 0);
    assert!(trie_is_empty(&s));
    assert!(s.matches(&subject(0)).is_empty());
}

#[test]
fn for_each_visits_everything() {
    let s = Sublist::new();
    s.insert(b"foo.bar", None, e(1)).unwrap();
    s.insert(b"foo.*", Some(b"q"), e(2)).unwrap();
    s.insert(b">", None, e(3)).unwrap();
    s.insert(b"foo.>", Some(b"q"), e(4)).unwrap();
    let mut seen = Vec::new();
    s.for_each(|subj, q, x| {
        // The callback may use the sublist: no lock is held.
        assert!(s.count() == 4);
        seen.push((
            String::from_utf8_lossy(subj).into_owned(),
            q.map(|q| String::from_utf8_lossy(q).into_owned()),
            x.0,
        ));
    });
    seen.sort_by_key(|x| x.2);
    let q = || Some("q".to_string());
    assert_eq!(
        seen,
        vec![
            ("foo.bar".into(), None, 1),
            ("foo.*".into(), q(), 2),
            (">".into(), None, 3),
            ("foo.>".into(), q(), 4),
        ]
    );
}

#[test]
fn concurrent_inserts_and_matches() {
    let s = Arc::new(Sublist::new());
    s.insert(b"conc.>", None, e(u32::MAX)).unwrap();
    std::thread::scope(|sc| {
        for t in 0..4u32 {
            let s = &s;
            sc.spawn(move || {
                for i in 0..2_000u32 {
                    let id = t * 10_000 + i;
                    let subj = format!("conc.{t}.{i}");
                    s.insert(subj.as_bytes(), None, e(id)).unwrap();
                    // Our own insert is visible immediately, cached or not.
                    let r = s.matches(subj.as_bytes());
                    assert!(r.psubs.iter().any(|x| x.0 == id));
                    if i % 2 == 0 {
                        s.remove(subj.as_bytes(), None, &e(id)).unwrap();
                        assert_eq!(s.matches(subj.as_bytes()).len(), 1);
                    }
                }
            });
        }
        for _ in 0..2 {
            let s = &s;
            sc.spawn(move || {
                for i in 0..20_000u32 {
                    let subj = format!("conc.{}.{}", i % 4, i % 2_000);
                    assert!(!s.matches(subj.as_bytes()).is_empty());
                }
            });
        }
    });
    assert_eq!(s.count(), 1 + 4 * 1_000);
    for t in 0..4u32 {
        for i in 0..2_000u32 {
            let want = if i % 2 == 0 { 1 } else { 2 };
            assert_eq!(s.matches(format!("conc.{t}.{i}").as_bytes()).len(), want);
        }
    }
}

#[test]
fn fold_exact_sees_only_the_pattern_as_stored() {
    let s: Sublist<E> = Sublist::new();
    s.insert(b"a.b", None, e(1)).unwrap();
    s.insert(b"a.b", None, e(2)).unwrap();
    s.insert(b"a.*", None, e(3)).unwrap();
    s.insert(b"a.b", Some(b"q"), E(4, 5)).unwrap();
    let ids = |subject: &[u8], q: Option<&[u8]>| {
        s.fold_exact(subject, q, Vec::new(), |mut v, x| {
            v.push(x.0);
            v
        })
    };
    assert_eq!(ids(b"a.b", None), vec![1, 2]);
    assert_eq!(ids(b"a.*", None), vec![3]);
    assert_eq!(ids(b"a.b", Some(b"q")), vec![4]);
    assert!(ids(b"a.b", Some(b"r")).is_empty());
    assert!(ids(b"a", None).is_empty());
    assert!(ids(b"a.b.c", None).is_empty());
    assert!(ids(b"a.>", None).is_empty());
}
