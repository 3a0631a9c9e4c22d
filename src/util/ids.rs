//! Random identifiers: nonces, generated names. (The server id is the public key of the
//! server's own nkey: `server::ServerKeys`.)

use rand::Rng;

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

/// nats-server's `getHashSize(x, out.len())` into `out`: the first bytes of SHA-256(`x`),
/// each mapped to `0-9A-Za-z` (byte % 62). At most 32 bytes are filled.
pub fn hash_into(x: &[u8], out: &mut [u8]) {
    const DIGITS: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let d = ring::digest::digest(&ring::digest::SHA256, x);
    for (o, b) in out.iter_mut().zip(d.as_ref()) {
        *o = DIGITS[(*b as usize) % DIGITS.len()];
    }
}

/// [`hash_into`] as a string of `n` characters.
pub fn hash_str(x: &[u8], n: usize) -> String {
    let mut out = vec![0u8; n.min(32)];
    hash_into(x, &mut out);
    out.into_iter().map(char::from).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn nonce_shape() {
        let n = super::nonce();
        assert_eq!(n.len(), 15);
        let raw = data_encoding::BASE64URL_NOPAD.decode(n.as_bytes());
        assert_eq!(raw.map(|r| r.len()), Ok(11));
        assert_ne!(n, super::nonce());
    }
}
