//! What nats-server reads from a peer's certificate for `verify_and_map` and `pinned_certs`:
//! the subject alternative names (emails, DNS names, URIs), the subject as Go's
//! `pkix.Name.ToRDNSequence().String()` writes it, the subject's domain components, the
//! subject as an LDAP DN in RFC 4514 order, and the SHA-256 of the SubjectPublicKeyInfo.
//! A small DER reader: only the fields above are looked at.

use super::dn::{Attr, Dn, Rdn};

/// The parts of a peer certificate that identify it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerCert {
    pub emails: Vec<String>,
    pub dns_names: Vec<String>,
    pub uris: Vec<String>,
    /// Go's `cert.Subject.ToRDNSequence().String()` (only the nine attribute types Go's
    /// `pkix.Name` knows; `CN=…,OU=…,O=…,L=…,ST=…,C=…`).
    pub subject: String,
    /// The subject's `DC=` attributes in certificate order, joined with `,` (empty: none).
    pub dcs: String,
    /// The raw subject as an LDAP DN, last RDN first; `None` when an attribute type is not
    /// one the DN helper knows or a value is not a string (nats-server then skips DN matching).
    pub dn: Option<Dn>,
    /// Lower-case hex SHA-256 of the DER SubjectPublicKeyInfo (`pinned_certs`' key id).
    pub spki_sha256: String,
}

impl PeerCert {
    /// The names nats-server tries as they are, in its order: SAN emails, SAN DNS names,
    /// SAN URIs, the subject with its domain components appended (when it has any), the
    /// subject.
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .emails
            .iter()
            .chain(&self.dns_names)
            .chain(&self.uris)
            .cloned()
            .collect();
        if !self.dcs.is_empty() {
            v.push(format!("{},{}", self.subject, self.dcs));
        }
        v.push(self.subject.clone());
        v
    }
}

/// One DER element: its tag, its contents, and the whole encoding.
#[derive(Clone, Copy)]
struct Tlv<'a> {
    tag: u8,
    body: &'a [u8],
    raw: &'a [u8],
}

/// The first element of `b` and what follows it.
fn tlv(b: &[u8]) -> Result<(Tlv<'_>, &[u8]), String> {
    let bad = || "malformed certificate (DER)".to_string();
    let (&tag, rest) = b.split_first().ok_or_else(bad)?;
    if tag & 0x1f == 0x1f {
        return Err("malformed certificate (multi-byte DER tag)".into());
    }
    let (&l0, rest) = rest.split_first().ok_or_else(bad)?;
    let (len, rest) = if l0 < 0x80 {
        (l0 as usize, rest)
    } else {
        let n = (l0 & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return Err(bad());
        }
        let len = rest[..n].iter().fold(0usize, |a, &x| (a << 8) | x as usize);
        (len, &rest[n..])
    };
    if rest.len() < len {
        return Err(bad());
    }
    let head = b.len() - rest.len();
    Ok((
        Tlv {
            tag,
            body: &rest[..len],
            raw: &b[..head + len],
        },
        &rest[len..],
    ))
}

/// All elements of a constructed body.
fn items(mut b: &[u8]) -> Result<Vec<Tlv<'_>>, String> {
    let mut v = Vec::new();
    while !b.is_empty() {
        let (t, rest) = tlv(b)?;
        v.push(t);
        b = rest;
    }
    Ok(v)
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;
/// `subjectAltName` (2.5.29.17).
const SAN_OID: &[u8] = &[0x55, 0x1d, 0x11];
/// `domainComponent` (0.9.2342.19200300.100.1.25).
const DC_OID: &[u8] = &[0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19];

/// Go's short name of an attribute type (`pkix`' `attributeTypeNames`), for `id-at` (2.5.4.x).
fn pkix_name(oid: &[u8]) -> Option<&'static str> {
    match oid {
        [0x55, 0x04, n] => Some(match n {
            3 => "CN",
            5 => "SERIALNUMBER",
            6 => "C",
            7 => "L",
            8 => "ST",
            9 => "STREET",
            10 => "O",
            11 => "OU",
            17 => "POSTALCODE",
            _ => return None,
        }),
        _ => None,
    }
}

/// An attribute value as Go's `encoding/asn1` gives it to an `any`: a string for the string
/// types, `None` for anything else.
fn string_value(t: &Tlv<'_>) -> Option<String> {
    match t.tag {
        // UTF8String, NumericString, PrintableString, T61String, IA5String
        12 | 18 | 19 | 20 | 22 => Some(String::from_utf8_lossy(t.body).into_owned()),
        // BMPString (UCS-2, big endian)
        30 => {
            let units: Vec<u16> = t
                .body
                .chunks(2)
                .map(|c| u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))
                .collect();
            Some(String::from_utf16_lossy(&units))
        }
        _ => None,
    }
}

/// A Name's RDNs in certificate order: each a list of (type OID, value).
type RawRdns<'a> = Vec<Vec<(&'a [u8], Tlv<'a>)>>;

fn rdns<'a>(name: &Tlv<'a>) -> Result<RawRdns<'a>, String> {
    let mut out = Vec::new();
    for set in items(name.body)? {
        if set.tag != SET {
            return Err("malformed certificate subject".into());
        }
        let mut rdn = Vec::new();
        for atv in items(set.body)? {
            let parts = items(atv.body)?;
            match parts.as_slice() {
                [oid, value] if oid.tag == OID => rdn.push((oid.body, *value)),
                _ => return Err("malformed certificate subject".into()),
            }
        }
        out.push(rdn);
    }
    Ok(out)
}

/// Go's `pkix.Name` filled from the RDNs, then `ToRDNSequence().String()`: known types are
/// gathered per type (CN and SERIALNUMBER: the last one wins), written most specific first
/// (`SERIALNUMBER`, `CN`, `OU`, … `C`), several values of one type as one multi-valued RDN (`+`).
fn go_subject(rdns: &RawRdns<'_>) -> String {
    // ToRDNSequence's order; String() writes it reversed.
    const ORDER: [&str; 9] = [
        "C",
        "ST",
        "L",
        "STREET",
        "POSTALCODE",
        "O",
        "OU",
        "CN",
        "SERIALNUMBER",
    ];
    let mut by_type: Vec<Vec<String>> = vec![Vec::new(); ORDER.len()];
    for (oid, v) in rdns.iter().flatten() {
        let (Some(name), Some(value)) = (pkix_name(oid), string_value(v)) else {
            continue;
        };
        let Some(i) = ORDER.iter().position(|n| *n == name) else {
            continue;
        };
        if name == "CN" || name == "SERIALNUMBER" {
            by_type[i] = vec![value];
        } else {
            by_type[i].push(value);
        }
    }
    let mut rdn_strings = Vec::new();
    for (i, values) in by_type.iter().enumerate() {
        // CN and SERIALNUMBER only when not empty; other types whenever present.
        let single = ORDER[i] == "CN" || ORDER[i] == "SERIALNUMBER";
        if values.is_empty() || (single && values[0].is_empty()) {
            continue;
        }
        let atvs: Vec<String> = values
            .iter()
            .map(|v| format!("{}={}", ORDER[i], go_escape(v)))
            .collect();
        rdn_strings.push(atvs.join("+"));
    }
    rdn_strings.reverse();
    rdn_strings.join(",")
}

/// Go's `RDNSequence.String` value escaping.
fn go_escape(v: &str) -> String {
    let n = v.chars().count();
    let mut out = String::with_capacity(v.len());
    for (k, c) in v.chars().enumerate() {
        let escape = match c {
            ',' | '+' | '"' | '\\' | '<' | '>' | ';' => true,
            ' ' => k == 0 || k + 1 == n,
            '#' => k == 0,
            _ => false,
        };
        if escape {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The subject as nats-server's LDAP helper reads a raw subject: RDNs and their attributes
/// in reverse, every type a known short name and every value a string.
fn ldap_dn(rdns: &RawRdns<'_>) -> Option<Dn> {
    let mut dn = Dn::default();
    for rdn in rdns.iter().rev() {
        if rdn.is_empty() {
            continue;
        }
        let mut r = Rdn::default();
        for (oid, v) in rdn.iter().rev() {
            let name = if *oid == DC_OID {
                "DC"
            } else {
                pkix_name(oid)?
            };
            r.attrs.push(Attr {
                kind: name.to_string(),
                value: string_value(v)?,
            });
        }
        dn.rdns.push(r);
    }
    Some(dn)
}

/// The subject alternative names: (emails, DNS names, URIs).
type Sans = (Vec<String>, Vec<String>, Vec<String>);

fn sans(extensions: &Tlv<'_>) -> Result<Sans, String> {
    let mut out = Sans::default();
    // [3] EXPLICIT Extensions ::= SEQUENCE OF Extension
    let (list, _) = tlv(extensions.body)?;
    for ext in items(list.body)? {
        let parts = items(ext.body)?;
        let (Some(oid), Some(value)) = (parts.first(), parts.last()) else {
            continue;
        };
        if oid.tag != OID || oid.body != SAN_OID {
            continue;
        }
        let (names, _) = tlv(value.body)?;
        for n in items(names.body)? {
            let s = String::from_utf8_lossy(n.body).into_owned();
            match n.tag {
                0x81 => out.0.push(s),
                0x82 => out.1.push(s),
                0x86 => out.2.push(s),
                _ => {}
            }
        }
    }
    Ok(out)
}

/// The TBSCertificate's fields of a DER certificate, the version left out: serialNumber,
/// signature, issuer, validity, subject, subjectPublicKeyInfo, then the optional ones.
fn tbs_fields(der: &[u8]) -> Result<Vec<Tlv<'_>>, String> {
    let (cert, _) = tlv(der)?;
    let (tbs, _) = tlv(cert.body)?;
    if cert.tag != SEQUENCE || tbs.tag != SEQUENCE {
        return Err("malformed certificate".into());
    }
    let mut fields = items(tbs.body)?;
    if fields.first().is_some_and(|f| f.tag == 0xa0) {
        fields.remove(0);
    }
    if fields.len() < 6 {
        return Err("malformed certificate (short TBSCertificate)".into());
    }
    Ok(fields)
}

/// The DER SubjectPublicKeyInfo of a DER certificate.
pub fn spki(der: &[u8]) -> Result<&[u8], String> {
    Ok(tbs_fields(der)?[5].raw)
}

/// The raw DER issuer and subject names of a DER certificate.
pub fn issuer_and_subject(der: &[u8]) -> Result<(&[u8], &[u8]), String> {
    let f = tbs_fields(der)?;
    Ok((f[2].raw, f[4].raw))
}

/// A DER certificate as PEM, as Go's `pem.EncodeToMemory` writes it (64-column base64).
pub fn pem(der: &[u8]) -> String {
    let b64 = data_encoding::BASE64.encode(der);
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

/// The chain a verified client certificate was checked along, as Go's `VerifiedChains[0]`:
/// the certificates the client presented, then the CA certificates of `cas` that issued the
/// last one, up to a self-signed root (or the first issuer not among them).
pub fn verified_chain(presented: &[Vec<u8>], cas: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut chain: Vec<Vec<u8>> = presented.to_vec();
    while chain.len() < presented.len() + 8 {
        let Some(Ok((issuer, subject))) = chain.last().map(|c| issuer_and_subject(c)) else {
            break;
        };
        if issuer == subject {
            break;
        }
        let next = cas.iter().find(|ca| {
            issuer_and_subject(ca).is_ok_and(|(_, s)| s == issuer) && !chain.contains(ca)
        });
        match next {
            Some(ca) => chain.push(ca.clone()),
            None => break,
        }
    }
    chain
}

/// Reads a DER certificate.
pub fn parse(der: &[u8]) -> Result<PeerCert, String> {
    let fields = tbs_fields(der)?;
    let (subject, spki) = (&fields[4], &fields[5]);
    let mut pc = PeerCert::default();
    for rest in &fields[6..] {
        if rest.tag == 0xa3 {
            (pc.emails, pc.dns_names, pc.uris) = sans(rest)?;
        }
    }
    let subject_rdns = rdns(subject)?;
    pc.subject = go_subject(&subject_rdns);
    pc.dcs = subject_rdns
        .iter()
        .flatten()
        .filter(|(oid, _)| *oid == DC_OID)
        .filter_map(|(_, v)| string_value(v))
        .map(|v| format!("DC={v}"))
        .collect::<Vec<_>>()
        .join(",");
    pc.dn = ldap_dn(&subject_rdns);
    let d = ring::digest::digest(&ring::digest::SHA256, spki.raw);
    pc.spki_sha256 = data_encoding::HEXLOWER.encode(d.as_ref());
    Ok(pc)
}

#[cfg(test)]
#[path = "cert_tests.rs"]
mod tests;
