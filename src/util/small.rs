//! [`SmallBytes`]: an owned byte string kept inline up to 22 bytes (boxed beyond), for map keys
//! that are mostly short (subject tokens, subjects): 24 bytes and no allocation when short.
//! It hashes and compares as the `[u8]` it holds, so maps keyed by it are looked up by `&[u8]`.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

/// Longest string kept inline.
const INLINE: usize = 22;

#[derive(Clone)]
pub enum SmallBytes {
    Inline { len: u8, buf: [u8; INLINE] },
    Heap(Box<[u8]>),
}

const _: () = assert!(std::mem::size_of::<SmallBytes>() == 24);

impl SmallBytes {
    pub fn new(b: &[u8]) -> Self {
        if b.len() <= INLINE {
            let mut buf = [0u8; INLINE];
            buf[..b.len()].copy_from_slice(b);
            SmallBytes::Inline {
                len: b.len() as u8,
                buf,
            }
        } else {
            SmallBytes::Heap(Box::from(b))
        }
    }

    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            SmallBytes::Inline { len, buf } => &buf[..usize::from(*len)],
            SmallBytes::Heap(b) => b,
        }
    }
}

impl Deref for SmallBytes {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl Borrow<[u8]> for SmallBytes {
    #[inline]
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl From<&[u8]> for SmallBytes {
    fn from(b: &[u8]) -> Self {
        SmallBytes::new(b)
    }
}

impl Hash for SmallBytes {
    /// As the `[u8]` it holds (maps look it up by `&[u8]`).
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state)
    }
}

impl PartialEq for SmallBytes {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for SmallBytes {}

impl fmt::Debug for SmallBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn inline_and_heap_hold_their_bytes() {
        for n in [0, 1, 21, 22, 23, 100] {
            let v: Vec<u8> = (0..n as u8).collect();
            let s = SmallBytes::new(&v);
            assert_eq!(s.as_bytes(), &v[..]);
            assert_eq!(matches!(s, SmallBytes::Heap(_)), n > INLINE);
            assert_eq!(s.clone(), s);
        }
    }

    #[test]
    fn looked_up_by_slice() {
        let mut m: HashMap<SmallBytes, u32> = HashMap::new();
        m.insert(SmallBytes::new(b"foo"), 1);
        m.insert(SmallBytes::new(&[b'x'; 40]), 2);
        assert_eq!(m.get(&b"foo"[..]), Some(&1));
        assert_eq!(m.get(&[b'x'; 40][..]), Some(&2));
        assert_eq!(m.get(&b"fo"[..]), None);
    }
}
