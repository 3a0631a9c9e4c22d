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

/// A random nonce for an INFO, as nats-server's: 11 random bytes in unpadded base64url
/// (15 characters that decode back to 11 bytes).
pub fn nonce() -> String {
    let raw: [u8; 11] = rand::rng().random();
    data_encoding::BASE64URL_NOPAD.encode(&raw)
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

    #[test]
    fn nonce_shape() {
        let n = super::nonce();
        assert_eq!(n.len(), 15);
        let raw = data_encoding::BASE64URL_NOPAD.decode(n.as_bytes());
        assert_eq!(raw.map(|r| r.len()), Ok(11));
        assert_ne!(n, super::nonce());
    }
}
