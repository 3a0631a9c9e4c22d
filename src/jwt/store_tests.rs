//! Tests of the full resolver's JWT directory: files by key, merges by `iat`/`jti`, the
//! XOR-of-SHA-256 hash, deletes (renamed or removed) and the `limit`.

use super::*;
use nkeys::KeyPair;
use serde_json::json;

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "natsd-dirstore-{name}-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn account(acc: &KeyPair, op: &KeyPair, iat: i64, jti: &str) -> String {
    let c = json!({"sub": acc.public_key(), "iat": iat, "jti": jti,
        "nats": {"type": "account", "version": 2}});
    crate::jwt::encode(&c, op).expect("account JWT")
}

#[test]
fn saved_jwts_are_files_named_by_key_and_read_back_on_open() {
    let (op, a) = (KeyPair::new_operator(), KeyPair::new_account());
    let dir = temp_dir("open");
    let mut s = DirStore::open(&dir, Delete::No, 0).expect("open");
    let t = account(&a, &op, 10, "one");
    assert_eq!(s.save(&a.public_key(), &t), Ok(true));
    assert_eq!(
        s.save(&a.public_key(), &t),
        Ok(false),
        "same JWT: no change"
    );
    let file = dir.join(format!("{}.jwt", a.public_key()));
    assert_eq!(std::fs::read_to_string(&file).expect("file"), t);
    std::fs::write(dir.join("README"), "not a JWT").expect("write");
    let again = DirStore::open(&dir, Delete::No, 0).expect("reopen");
    assert_eq!(again.get(&a.public_key()), Some(t.as_str()));
    assert_eq!(again.all().len(), 1);
    assert_eq!(again.hash(), s.hash());
    assert!(s.save("not-a-key", &t).is_err());
    assert!(s.delete(&a.public_key()).is_err(), "allow_delete is off");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_file_where_the_directory_should_be_is_refused() {
    let dir = temp_dir("file");
    std::fs::write(&dir, "x").expect("write");
    let e = DirStore::open(&dir, Delete::No, 0).err();
    assert_eq!(
        e.as_deref(),
        Some("dir needs to point to an accessible directory")
    );
    let _ = std::fs::remove_file(&dir);
}

#[test]
fn merge_keeps_the_newer_jwt_and_the_hash_follows_the_contents() {
    let (op, a, b) = (
        KeyPair::new_operator(),
        KeyPair::new_account(),
        KeyPair::new_account(),
    );
    let (d1, d2) = (temp_dir("m1"), temp_dir("m2"));
    let mut s1 = DirStore::open(&d1, Delete::No, 0).expect("open");
    let mut s2 = DirStore::open(&d2, Delete::No, 0).expect("open");
    let (old, new) = (account(&a, &op, 10, "old"), account(&a, &op, 20, "new"));
    s1.save(&a.public_key(), &new).expect("save");
    s1.save(&b.public_key(), &account(&b, &op, 5, "b"))
        .expect("save");
    s2.save(&a.public_key(), &old).expect("save");
    assert_ne!(s1.hash(), s2.hash());
    // An older JWT does not replace a newer one…
    let stale = format!("{}|{old}", a.public_key());
    assert_eq!(s1.merge(&stale), Ok(vec![]));
    // … and a pack brings the other store level.
    let changed = s2.merge(&s1.pack().join("\n")).expect("merge");
    assert_eq!(changed.len(), 2);
    assert_eq!(s1.hash(), s2.hash());
    assert_eq!(s2.get(&a.public_key()), Some(new.as_str()));
    assert!(s2.merge("no separator").is_err());
    assert!(s2.merge(&format!("{}|{new}", op.public_key())).is_err());
    let _ = std::fs::remove_dir_all(&d1);
    let _ = std::fs::remove_dir_all(&d2);
}

#[test]
fn delete_renames_or_removes_and_the_limit_is_enforced() {
    let (op, a, b) = (
        KeyPair::new_operator(),
        KeyPair::new_account(),
        KeyPair::new_account(),
    );
    for (mode, kept) in [(Delete::Rename, true), (Delete::Hard, false)] {
        let dir = temp_dir("del");
        let mut s = DirStore::open(&dir, mode, 1).expect("open");
        s.save(&a.public_key(), &account(&a, &op, 1, "a"))
            .expect("save");
        assert_eq!(
            s.save(&b.public_key(), &account(&b, &op, 1, "b")),
            Err("jwt store is full".into())
        );
        assert_eq!(s.delete(&a.public_key()), Ok(true));
        assert_eq!(s.delete(&a.public_key()), Ok(false));
        let renamed = dir.join(format!("{}.jwt.deleted", a.public_key()));
        assert_eq!(renamed.exists(), kept, "{mode:?}");
        assert!(DirStore::open(&dir, mode, 1)
            .expect("reopen")
            .all()
            .is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn a_cache_store_evicts_the_least_recently_stored_beyond_its_limit() {
    let op = KeyPair::new_operator();
    let (a, b, c) = (
        KeyPair::new_account(),
        KeyPair::new_account(),
        KeyPair::new_account(),
    );
    let dir = temp_dir("evict");
    let mut s = DirStore::open(&dir, Delete::Hard, 2)
        .expect("open")
        .evicting();
    s.save(&a.public_key(), &account(&a, &op, 1, "a"))
        .expect("a");
    s.save(&b.public_key(), &account(&b, &op, 1, "b"))
        .expect("b");
    // Storing A again makes B the least recent.
    s.save(&a.public_key(), &account(&a, &op, 2, "a2"))
        .expect("a2");
    assert_eq!(s.save(&c.public_key(), &account(&c, &op, 1, "c")), Ok(true));
    let keys: Vec<&String> = s.all().keys().collect();
    assert_eq!(keys.len(), 2);
    assert!(s.get(&b.public_key()).is_none(), "B was evicted");
    assert!(!dir.join(format!("{}{EXTENSION}", b.public_key())).exists());
    // The same JWT stored again changes nothing but makes it the most recent: A (stored
    // before C) stays when B comes back and C goes.
    let a2 = account(&a, &op, 2, "a2");
    assert_eq!(s.save(&a.public_key(), &a2), Ok(false));
    assert_eq!(s.save(&b.public_key(), &account(&b, &op, 1, "b")), Ok(true));
    assert!(s.get(&c.public_key()).is_none(), "C was the least recent");
    assert!(s.get(&a.public_key()).is_some(), "A was stored again");
    // Without eviction a full store refuses.
    let dir2 = temp_dir("full");
    let mut f = DirStore::open(&dir2, Delete::No, 1).expect("open");
    f.save(&a.public_key(), &account(&a, &op, 1, "a"))
        .expect("a");
    assert!(f.save(&b.public_key(), &account(&b, &op, 1, "b")).is_err());
    // Expiry: everything is older than no time at all, nothing older than an hour.
    assert_eq!(
        s.expired(std::time::Duration::from_secs(3600)),
        Vec::<String>::new()
    );
    assert_eq!(s.expired(std::time::Duration::ZERO).len(), 2);
    for d in [dir, dir2] {
        let _ = std::fs::remove_dir_all(&d);
    }
}
