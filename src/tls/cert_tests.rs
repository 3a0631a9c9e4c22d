//! Tests of the peer-certificate reader: SANs, the subject as Go's string and as an LDAP DN,
//! and the SPKI SHA-256 that `pinned_certs` compares, on certificates made with rcgen and on
//! hand-built DER.

use super::*;
use rcgen::{CertificateParams, DnType, KeyPair, PublicKeyData, SanType};

fn der(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut v = vec![tag];
    if body.len() < 0x80 {
        v.push(body.len() as u8);
    } else {
        v.extend_from_slice(&[0x82, (body.len() >> 8) as u8, body.len() as u8]);
    }
    v.extend_from_slice(body);
    v
}

/// A Name: RDNs in certificate order, each a list of (2.5.4.x or DC, UTF8String value).
fn name(rdns: &[&[(u8, &str)]]) -> Vec<u8> {
    let mut sets = Vec::new();
    for rdn in rdns {
        let mut atvs = Vec::new();
        for (t, v) in *rdn {
            let oid = if *t == 0 {
                der(OID, DC_OID)
            } else {
                der(OID, &[0x55, 0x04, *t])
            };
            atvs.extend(der(SEQUENCE, &[oid, der(12, v.as_bytes())].concat()));
        }
        sets.extend(der(SET, &atvs));
    }
    der(SEQUENCE, &sets)
}

fn subject_of(rdns: &[&[(u8, &str)]]) -> (String, String, Option<Dn>) {
    let n = name(rdns);
    let (t, _) = tlv(&n).unwrap();
    let r = rdns_of(&t);
    let dcs = r
        .iter()
        .flatten()
        .filter(|(o, _)| *o == DC_OID)
        .filter_map(|(_, v)| string_value(v))
        .collect::<Vec<_>>()
        .join(",");
    (go_subject(&r), dcs, ldap_dn(&r))
}

fn rdns_of<'a>(t: &Tlv<'a>) -> RawRdns<'a> {
    rdns(t).unwrap()
}

#[test]
fn subject_string_as_go_writes_it() {
    // Certificate order C, ST, L, O, OU, CN; Go writes the most specific first.
    let (s, dcs, dn) = subject_of(&[
        &[(6, "US")],
        &[(8, "CA")],
        &[(7, "Los Angeles")],
        &[(10, "Synadia")],
        &[(11, "NATS.io")],
        &[(3, "example.com")],
    ]);
    assert_eq!(
        s,
        "CN=example.com,OU=NATS.io,O=Synadia,L=Los Angeles,ST=CA,C=US"
    );
    assert_eq!(dcs, "");
    let want = Dn::parse("CN=example.com,OU=NATS.io,O=Synadia,L=Los Angeles,ST=CA,C=US").unwrap();
    assert!(dn.unwrap().equal(&want));
    // Go's fixed order whatever the certificate's; one type's values share an RDN;
    // the last CN wins; DC is not part of the string (it is added separately).
    let (s, dcs, dn) = subject_of(&[
        &[(3, "first")],
        &[(0, "io")],
        &[(11, "b")],
        &[(0, "nats")],
        &[(11, "a"), (3, "last")],
        &[(10, "Acme, Inc.")],
    ]);
    assert_eq!(s, "CN=last,OU=b+OU=a,O=Acme\\, Inc.");
    assert_eq!(dcs, "io,nats");
    // The DN keeps every attribute, last RDN first, attributes of an RDN reversed.
    let dn = dn.unwrap();
    assert_eq!(dn.rdns.len(), 6);
    assert_eq!(dn.rdns[0].attrs[0].value, "Acme, Inc.");
    assert_eq!(dn.rdns[1].attrs[0].kind, "CN");
    assert_eq!(dn.rdns[5].attrs[0].value, "first");
    // Escapes: specials anywhere, a space at either end, `#` only first.
    let (s, _, _) = subject_of(&[&[(3, " #a+b;c<d>\"e\\ ")], &[(10, "#x#")]]);
    assert_eq!(s, "CN=\\ #a\\+b\\;c\\<d\\>\\\"e\\\\\\ ,O=\\#x#");
    // As nats-server 2.15.1 mapped the subject `C=US/OU=b/emailAddress=x@y.z/OU=a/CN=first/
    // serialNumber=42/CN=n` (openssl's order): SERIALNUMBER first, the email dropped.
    let (s, _, dn) = subject_of(&[
        &[(6, "US")],
        &[(11, "b")],
        &[(42, "x@y.z")],
        &[(11, "a")],
        &[(3, "first")],
        &[(5, "42")],
        &[(3, "n")],
    ]);
    assert_eq!(s, "SERIALNUMBER=42,CN=n,OU=b+OU=a,C=US");
    assert_eq!(dn, None);
    // An attribute type the DN helper does not know: no DN (the string drops it).
    let (s, _, dn) = subject_of(&[&[(42, "x")], &[(3, "y")]]);
    assert_eq!((s.as_str(), dn), ("CN=y", None));
}

#[test]
fn reads_sans_subject_and_spki_of_a_certificate() {
    let mut p = CertificateParams::new(vec!["Node.Example.com".to_string()]).unwrap();
    p.subject_alt_names
        .push(SanType::Rfc822Name("alice@example.com".try_into().unwrap()));
    p.subject_alt_names
        .push(SanType::URI("nats://u.example.com".try_into().unwrap()));
    p.subject_alt_names
        .push(SanType::IpAddress([127, 0, 0, 1].into()));
    p.distinguished_name = rcgen::DistinguishedName::new();
    p.distinguished_name.push(DnType::CountryName, "US");
    p.distinguished_name.push(DnType::CommonName, "alice");
    let key = KeyPair::generate().unwrap();
    let cert = p.self_signed(&key).unwrap();
    let pc = parse(cert.der()).unwrap();
    assert_eq!(pc.emails, vec!["alice@example.com"]);
    assert_eq!(pc.dns_names, vec!["Node.Example.com"]);
    assert_eq!(pc.uris, vec!["nats://u.example.com"]);
    assert_eq!(pc.subject, "CN=alice,C=US");
    let d = ring::digest::digest(&ring::digest::SHA256, &key.subject_public_key_info());
    assert_eq!(pc.spki_sha256, data_encoding::HEXLOWER.encode(d.as_ref()));
    // Garbage is an error, not a panic.
    for bad in [
        &b""[..],
        b"\x30",
        b"\x30\x84\xff\xff\xff\xff",
        b"\x30\x03\x30\x01\x00",
    ] {
        assert!(parse(bad).is_err());
    }
    assert!(parse(&cert.der()[..cert.der().len() / 2]).is_err());
}
