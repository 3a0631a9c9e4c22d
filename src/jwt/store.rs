//! The full resolver's directory of account JWTs, as nats-server's `DirJWTStore` keeps it
//! (`dirstore.go`, not sharded): one file `<account public key>.jwt` per account holding the
//! JWT as pushed; a deleted one renamed to `….jwt.deleted` (or removed with `hard_delete`).
//! The store's hash is the XOR of every JWT's SHA-256, which servers compare to know whether
//! they hold the same set; a pack is `key|jwt` lines.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const EXTENSION: &str = ".jwt";

/// What a delete does (`allow_delete`, `hard_delete`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delete {
    /// Refused: `allow_delete` is off.
    No,
    /// The file is renamed to `….jwt.deleted`.
    Rename,
    /// The file is removed.
    Hard,
}

/// The JWTs of one directory, indexed in memory (key → token).
pub struct DirStore {
    dir: PathBuf,
    delete: Delete,
    /// At most this many JWTs (`limit`; 0: no limit).
    limit: usize,
    jwts: BTreeMap<String, String>,
    /// A cache's store: a new JWT beyond `limit` evicts the least recently stored one
    /// (instead of being refused).
    evict: bool,
    /// When (and in which order) each JWT was stored, for eviction and the cache's `ttl`.
    stamps: std::collections::HashMap<String, (u64, std::time::Instant)>,
    next: u64,
}

/// Whether `key` names an account (an nkey starting with `A`), the only file names used.
pub fn is_account_key(key: &str) -> bool {
    key.starts_with('A')
        && nkeys::KeyPair::from_public_key(key)
            .is_ok_and(|k| k.key_pair_type() == nkeys::KeyPairType::Account)
}

/// `iat` and `jti` of a token, unverified: what `saveIfNewer` compares.
fn issued(token: &str) -> Option<(i64, String)> {
    let v = super::unverified_claims(token).ok()?;
    Some((
        v["iat"].as_i64().unwrap_or(0),
        v["jti"].as_str().unwrap_or("").to_string(),
    ))
}

/// Whether `new` should replace `old` as `saveIfNewer` decides: not the same JWT (the same
/// text, or the same `jti`) and not issued before it.
pub fn newer(old: &str, new: &str) -> bool {
    if old == new {
        return false;
    }
    match (issued(old), issued(new)) {
        (Some((old_iat, old_id)), Some((new_iat, new_id))) => {
            (old_id.is_empty() || old_id != new_id) && old_iat <= new_iat
        }
        (None, Some(_)) => true,
        _ => false,
    }
}

impl DirStore {
    /// Open (creating it if need be) the directory and read every `*.jwt` in it.
    pub fn open(dir: &Path, delete: Delete, limit: usize) -> Result<DirStore, String> {
        if dir.exists() && !dir.is_dir() {
            return Err("dir needs to point to an accessible directory".into());
        }
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut jwts = BTreeMap::new();
        let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(key) = name.strip_suffix(EXTENSION) else {
                continue;
            };
            if !is_account_key(key) {
                continue;
            }
            match std::fs::read_to_string(entry.path()) {
                Ok(t) if !t.trim().is_empty() => {
                    jwts.insert(key.to_string(), t.trim().to_string());
                }
                Ok(_) => {}
                Err(e) => tracing::error!("DirResolver - reading {}: {e}", entry.path().display()),
            }
        }
        let now = std::time::Instant::now();
        let stamps = jwts
            .keys()
            .enumerate()
            .map(|(i, k)| (k.clone(), (i as u64, now)))
            .collect();
        Ok(DirStore {
            dir: dir.to_path_buf(),
            delete,
            limit,
            next: jwts.len() as u64,
            jwts,
            evict: false,
            stamps,
        })
    }

    /// A cache's store (nats-server's expiring store): beyond `limit`, the least recently
    /// stored JWT makes room.
    pub fn evicting(mut self) -> Self {
        self.evict = true;
        self
    }

    /// The keys stored longer ago than `ttl`.
    pub fn expired(&self, ttl: std::time::Duration) -> Vec<String> {
        let now = std::time::Instant::now();
        self.stamps
            .iter()
            .filter(|(_, (_, at))| now.duration_since(*at) >= ttl)
            .map(|(k, _)| k.clone())
            .collect()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}{EXTENSION}"))
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.jwts.get(key).map(String::as_str)
    }

    /// Every stored JWT by account key, in key order.
    pub fn all(&self) -> &BTreeMap<String, String> {
        &self.jwts
    }

    /// Store `token` for `key` (an update: it replaces whatever is there). Ok(true) when the
    /// stored JWT changed.
    pub fn save(&mut self, key: &str, token: &str) -> Result<bool, String> {
        if !is_account_key(key) {
            return Err("invalid public key".into());
        }
        if token.is_empty() {
            return Err("invalid JWT".into());
        }
        match self.jwts.get(key) {
            Some(old) if old == token => {
                // nats-server's expiring store tracks the write all the same: the JWT
                // becomes the most recent and its `ttl` starts again.
                if self.evict {
                    self.stamp(key);
                }
                return Ok(false);
            }
            None if self.limit > 0 && self.jwts.len() >= self.limit && !self.evict => {
                return Err("jwt store is full".into())
            }
            None if self.limit > 0 && self.jwts.len() >= self.limit => {
                let oldest = self.stamps.iter().min_by_key(|(_, (n, _))| *n);
                if let Some(k) = oldest.map(|(k, _)| k.clone()) {
                    tracing::debug!("DirResolver - cache full: evicting account {k}");
                    self.remove(&k)?;
                }
            }
            _ => {}
        }
        std::fs::write(self.path(key), token).map_err(|e| format!("{key}: {e}"))?;
        self.jwts.insert(key.to_string(), token.to_string());
        self.stamp(key);
        Ok(true)
    }

    /// `key` becomes the most recently stored, its `ttl` starting now.
    fn stamp(&mut self, key: &str) {
        self.next += 1;
        let stamp = (self.next, std::time::Instant::now());
        self.stamps.insert(key.to_string(), stamp);
    }

    /// Store `token` unless what is stored is the same JWT (`jti`) or was issued later, as
    /// nats-server merges packs and preloads.
    pub fn save_if_newer(&mut self, key: &str, token: &str) -> Result<bool, String> {
        issued(token).ok_or("invalid JWT")?;
        if self.jwts.get(key).is_some_and(|old| !newer(old, token)) {
            return Ok(false);
        }
        self.save(key, token)
    }

    /// Delete `key`'s JWT (renamed or removed); Ok(true) when there was one.
    pub fn delete(&mut self, key: &str) -> Result<bool, String> {
        let path = self.path(key);
        let done = match self.delete {
            Delete::No => return Err("store is not set up to for delete".into()),
            Delete::Rename => {
                let mut to = path.clone().into_os_string();
                to.push(".deleted");
                std::fs::rename(&path, to)
            }
            Delete::Hard => std::fs::remove_file(&path),
        };
        self.stamps.remove(key);
        match done {
            Ok(()) => Ok(self.jwts.remove(key).is_some()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Ok(self.jwts.remove(key).is_some())
            }
            Err(e) => Err(format!("{key}: {e}")),
        }
    }

    /// Remove `key`'s JWT whatever the delete setting (a cache's eviction and expiry).
    pub fn remove(&mut self, key: &str) -> Result<bool, String> {
        self.stamps.remove(key);
        match std::fs::remove_file(self.path(key)) {
            Ok(()) => Ok(self.jwts.remove(key).is_some()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Ok(self.jwts.remove(key).is_some())
            }
            Err(e) => Err(format!("{key}: {e}")),
        }
    }

    /// The XOR of every stored JWT's SHA-256 (nats-server's `Hash`).
    pub fn hash(&self) -> [u8; 32] {
        let mut h = [0u8; 32];
        for t in self.jwts.values() {
            let d = ring::digest::digest(&ring::digest::SHA256, t.as_bytes());
            for (a, b) in h.iter_mut().zip(d.as_ref()) {
                *a ^= b;
            }
        }
        h
    }

    /// The pack lines `key|jwt`, one per stored JWT (nats-server sends one per message).
    pub fn pack(&self) -> Vec<String> {
        self.jwts.iter().map(|(k, t)| format!("{k}|{t}")).collect()
    }

    /// Merge a pack message (`key|jwt` lines) with `save_if_newer`; the keys that changed.
    pub fn merge(&mut self, pack: &str) -> Result<Vec<String>, String> {
        let mut changed = Vec::new();
        for line in pack.split('\n').filter(|l| !l.is_empty()) {
            let parts: Vec<&str> = line.split('|').collect();
            let [key, token] = parts[..] else {
                return Err(format!(
                    "line in package didn't contain 2 entries: {line:?}"
                ));
            };
            if !is_account_key(key) {
                return Err("key to merge is not a valid public account key".into());
            }
            if self.save_if_newer(key, token)? {
                changed.push(key.to_string());
            }
        }
        Ok(changed)
    }
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
