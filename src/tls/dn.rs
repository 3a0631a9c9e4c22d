//! Distinguished names as nats-server's LDAP helper (`internal/ldap`) reads and compares them
//! for `verify_and_map`: a configured user name parsed as an RFC 4514 DN, equal to a
//! certificate's subject RDN by RDN, or holding the same RDNs in any order.

/// One `type=value` pair.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attr {
    pub kind: String,
    pub value: String,
}

/// A relative DN: one or more pairs joined with `+`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rdn {
    pub attrs: Vec<Attr>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dn {
    pub rdns: Vec<Rdn>,
}

impl Attr {
    /// The type compares without case, the value exactly.
    fn same(&self, o: &Attr) -> bool {
        self.kind.eq_ignore_ascii_case(&o.kind) && self.value == o.value
    }
}

impl Rdn {
    /// As many pairs, each found in the other (order within the RDN does not matter).
    fn same(&self, o: &Rdn) -> bool {
        let has_all = |a: &Rdn, b: &Rdn| b.attrs.iter().all(|x| a.attrs.iter().any(|y| y.same(x)));
        self.attrs.len() == o.attrs.len() && has_all(self, o) && has_all(o, self)
    }
}

impl Dn {
    /// RFC 4517 distinguishedNameMatch: the same RDNs in the same positions.
    pub fn equal(&self, o: &Dn) -> bool {
        self.rdns.len() == o.rdns.len() && self.rdns.iter().zip(&o.rdns).all(|(a, b)| a.same(b))
    }

    /// The same RDNs in any order.
    pub fn rdns_match(&self, o: &Dn) -> bool {
        if self.rdns.len() != o.rdns.len() {
            return false;
        }
        let mut used = vec![false; o.rdns.len()];
        self.rdns.iter().all(|r| {
            let hit = o
                .rdns
                .iter()
                .enumerate()
                .position(|(j, x)| !used[j] && r.same(x));
            hit.map(|j| used[j] = true).is_some()
        })
    }

    /// Parses `s` as nats-server's helper does (RFC 4514 with `\` escapes of specials or of
    /// two hex digits; unescaped spaces around values dropped; `#` BER values refused).
    pub fn parse(s: &str) -> Result<Dn, String> {
        let b = s.as_bytes();
        let mut dn = Dn::default();
        let mut rdn = Rdn::default();
        let mut buf: Vec<u8> = Vec::new();
        let mut kind = String::new();
        let mut escaping = false;
        let mut trailing = 0usize;
        let take = |buf: &mut Vec<u8>, trailing: &mut usize| {
            let keep = buf.len() - *trailing;
            let v = String::from_utf8_lossy(&buf[..keep]).into_owned();
            buf.clear();
            *trailing = 0;
            v
        };
        let mut i = 0;
        while i < b.len() {
            let c = b[i];
            if escaping {
                trailing = 0;
                escaping = false;
                if b" \"#+,;<=>\\".contains(&c) {
                    buf.push(c);
                    i += 1;
                    continue;
                }
                let hex = b.get(i..i + 2).ok_or("got corrupted escaped character")?;
                let byte = std::str::from_utf8(hex)
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or("failed to decode escaped character")?;
                buf.push(byte);
                i += 2;
                continue;
            }
            match c {
                b'\\' => {
                    trailing = 0;
                    escaping = true;
                }
                b'=' => {
                    kind = take(&mut buf, &mut trailing);
                    if b.get(i + 1) == Some(&b'#') {
                        return Err("unsupported BER encoding".into());
                    }
                }
                b',' | b'+' => {
                    if kind.is_empty() {
                        return Err("incomplete type, value pair".into());
                    }
                    let value = take(&mut buf, &mut trailing);
                    rdn.attrs.push(Attr {
                        kind: std::mem::take(&mut kind),
                        value,
                    });
                    if c == b',' {
                        dn.rdns.push(std::mem::take(&mut rdn));
                    }
                }
                b' ' if buf.is_empty() => {}
                _ => {
                    if c == b' ' {
                        trailing += 1;
                    } else {
                        trailing = 0;
                    }
                    buf.push(c);
                }
            }
            i += 1;
        }
        if !buf.is_empty() {
            if kind.is_empty() {
                return Err("DN ended with incomplete type, value pair".into());
            }
            let value = take(&mut buf, &mut trailing);
            rdn.attrs.push(Attr { kind, value });
            dn.rdns.push(rdn);
        }
        Ok(dn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(k: &str, v: &str) -> Attr {
        Attr {
            kind: k.into(),
            value: v.into(),
        }
    }

    #[test]
    fn parses_as_nats_servers_ldap_helper() {
        let dn = Dn::parse("CN=example.com, OU=NATS.io+OU=Ops ,O=Synadia\\, Inc\\2e").unwrap();
        assert_eq!(dn.rdns.len(), 3);
        assert_eq!(dn.rdns[0].attrs, vec![a("CN", "example.com")]);
        assert_eq!(dn.rdns[1].attrs, vec![a("OU", "NATS.io"), a("OU", "Ops")]);
        assert_eq!(dn.rdns[2].attrs, vec![a("O", "Synadia, Inc.")]);
        for bad in ["alice", "a@b.com", "CN=#0403", "=x,", "CN=x\\4"] {
            assert!(Dn::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn equal_by_position_and_match_in_any_order() {
        let x = Dn::parse("CN=a,OU=b+O=c,C=US").unwrap();
        let y = Dn::parse("cn=a,O=c+OU=b,c=US").unwrap();
        let z = Dn::parse("C=US,CN=a,O=c+OU=b").unwrap();
        assert!(x.equal(&y));
        assert!(!x.equal(&z));
        assert!(x.rdns_match(&z) && z.rdns_match(&x));
        // Values compare exactly; the RDN count must agree.
        assert!(!x.rdns_match(&Dn::parse("CN=A,OU=b+O=c,C=US").unwrap()));
        assert!(!x.rdns_match(&Dn::parse("CN=a,C=US").unwrap()));
    }
}
