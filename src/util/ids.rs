//! Random identifiers: the 56-character server id (`N…`, base32 like an nkey public key).

use rand::Rng;

const BASE32: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/// A fresh server id: `N` followed by 55 base32 characters, the shape of nats-server's ids.
pub fn server_id() -> String {
    let mut rng = rand::rng();
    let mut s = String::with_capacity(56);
    s.push('N');
    for _ in 0..55 {
        s.push(BASE32[rng.random_range(0..32)] as char);
    }
    s
}

/// A random nonce for an INFO (nats-server: 15 characters of base64url).
pub fn nonce() -> String {
    const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut rng = rand::rng();
    (0..15)
        .map(|_| B64[rng.random_range(0..64)] as char)
        .collect()
}

/// A random cluster name for a server whose cluster name is not configured (dynamic).
pub fn cluster_name() -> String {
    alnum(22)
}

/// `n` random letters and digits (generated names, NUID-shaped ids).
pub fn alnum(n: usize) -> String {
    const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    (0..n)
        .map(|_| ALNUM[rng.random_range(0..ALNUM.len())] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn server_id_shape() {
        let id = super::server_id();
        assert_eq!(id.len(), 56);
        assert!(id.starts_with('N'));
        assert!(id.bytes().all(|b| super::BASE32.contains(&b)));
        assert_ne!(id, super::server_id());
    }
}
