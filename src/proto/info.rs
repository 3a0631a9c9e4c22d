//! JSON bodies of `INFO` and `CONNECT`: [`ServerInfo`] (one struct for the INFO a server sends
//! to clients, routes and gateways, with nats-server 2.9's field names, order and `omitempty`
//! rules, plus the 2.10 route fields), [`ConnectInfo`] (client CONNECT, with nats-server's
//! defaults for omitted fields) and [`RouteConnectInfo`] (route and gateway CONNECT).
//! Decoding is lenient like Go's: unknown fields are ignored, and `null` or a missing field
//! takes the default. Also the base64 used for `gateway_cmd_payload`. No I/O, no policy.

use bytes::{BufMut, BytesMut};
use serde::{Deserialize, Deserializer, Serialize};

/// `null` decodes as the type's default (Go leaves the zero value on `null`).
fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// For CONNECT's default-true flags: `null` keeps `true`, as Go's unmarshal into preset opts.
fn nullable_true<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(Option::<bool>::deserialize(d)?.unwrap_or(true))
}

fn is_false(b: &bool) -> bool {
    !*b
}
fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}
fn is_zero_u8(n: &u8) -> bool {
    *n == 0
}

/// Route import/export permissions (`{"allow":[…],"deny":[…]}`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SubjectPermission {
    #[serde(skip_serializing_if = "Vec::is_empty", deserialize_with = "nullable")]
    pub allow: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty", deserialize_with = "nullable")]
    pub deny: Vec<String>,
}

/// INFO sent by a server (to clients: `proto:1`; to routes: `proto:2`; gateways: `proto:0`).
/// Field order and omission rules are nats-server 2.9's `Info` struct; fields Go marks
/// `omitempty` are skipped when false / zero / empty.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerInfo {
    #[serde(deserialize_with = "nullable")]
    pub server_id: String,
    #[serde(deserialize_with = "nullable")]
    pub server_name: String,
    #[serde(deserialize_with = "nullable")]
    pub version: String,
    #[serde(deserialize_with = "nullable")]
    pub proto: i32,
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub git_commit: String,
    #[serde(deserialize_with = "nullable")]
    pub go: String,
    /// natsd's version on a natsd server's route INFO (nats-server has no such field and
    /// ignores it): a natsd peer gossips as natsd does (`cluster::mesh`).
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub natsd: String,
    #[serde(deserialize_with = "nullable")]
    pub host: String,
    #[serde(deserialize_with = "nullable")]
    pub port: u16,
    #[serde(deserialize_with = "nullable")]
    pub headers: bool,
    #[serde(skip_serializing_if = "is_false", deserialize_with = "nullable")]
    pub auth_required: bool,
    #[serde(skip_serializing_if = "is_false", deserialize_with = "nullable")]
    pub tls_required: bool,
    #[serde(skip_serializing_if = "is_false", deserialize_with = "nullable")]
    pub tls_verify: bool,
    #[serde(skip_serializing_if = "is_false", deserialize_with = "nullable")]
    pub tls_available: bool,
    /// Go's `int32`; `i64` here so callers need no narrowing casts.
    #[serde(deserialize_with = "nullable")]
    pub max_payload: i64,
    #[serde(skip_serializing_if = "is_false", deserialize_with = "nullable")]
    pub jetstream: bool,
    /// Route gossip URL (`nats-route://host:port/`), see spec §1.4.
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub ip: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_ip: Option<String>,
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub nonce: String,
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub cluster: String,
    #[serde(skip_serializing_if = "is_false", deserialize_with = "nullable")]
    pub cluster_dynamic: bool,
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub domain: String,
    #[serde(skip_serializing_if = "Vec::is_empty", deserialize_with = "nullable")]
    pub connect_urls: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty", deserialize_with = "nullable")]
    pub ws_connect_urls: Vec<String>,
    #[serde(skip_serializing_if = "is_false", deserialize_with = "nullable")]
    pub ldm: bool,

    // Route specific.
    #[serde(skip_serializing_if = "Option::is_none", deserialize_with = "nullable")]
    pub import: Option<SubjectPermission>,
    #[serde(skip_serializing_if = "Option::is_none", deserialize_with = "nullable")]
    pub export: Option<SubjectPermission>,
    #[serde(skip_serializing_if = "is_false", deserialize_with = "nullable")]
    pub lnoc: bool,
    #[serde(skip_serializing_if = "is_false", deserialize_with = "nullable")]
    pub lnocu: bool,
    #[serde(skip_serializing_if = "is_false", deserialize_with = "nullable")]
    pub info_on_connect: bool,
    #[serde(skip_serializing_if = "is_false", deserialize_with = "nullable")]
    pub connect_info: bool,
    /// 2.10 route pooling: the sender's pool size (absent without pools).
    #[serde(skip_serializing_if = "is_zero_u32", deserialize_with = "nullable")]
    pub route_pool_size: u32,
    #[serde(skip_serializing_if = "is_zero_u32", deserialize_with = "nullable")]
    pub route_pool_idx: u32,
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub route_account: String,
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub route_acc_add_reqid: String,
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub compression: String,
    /// 2.11 gossip of new routes: 0 default, 1 disabled, 2 override.
    #[serde(skip_serializing_if = "is_zero_u8", deserialize_with = "nullable")]
    pub gossip_mode: u8,

    // Gateway specific.
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub gateway: String,
    #[serde(skip_serializing_if = "Vec::is_empty", deserialize_with = "nullable")]
    pub gateway_urls: Vec<String>,
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub gateway_url: String,
    #[serde(skip_serializing_if = "is_zero_u8", deserialize_with = "nullable")]
    pub gateway_cmd: u8,
    /// Base64 (standard, padded) as Go encodes `[]byte`; see [`b64_encode`] / [`b64_decode`].
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub gateway_cmd_payload: String,
    #[serde(skip_serializing_if = "is_false", deserialize_with = "nullable")]
    pub gateway_nrp: bool,
    #[serde(skip_serializing_if = "is_false", deserialize_with = "nullable")]
    pub gateway_iom: bool,

    // Leafnode specific.
    #[serde(skip_serializing_if = "Vec::is_empty", deserialize_with = "nullable")]
    pub leafnode_urls: Vec<String>,
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub remote_account: String,
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub xkey: String,
}

impl ServerInfo {
    /// Append `INFO <json> \r\n` (Go's bytes, trailing space included), serialising straight
    /// into `buf`.
    pub fn write_to(&self, buf: &mut BytesMut) -> Result<(), serde_json::Error> {
        let start = buf.len();
        buf.put_slice(b"INFO ");
        let mut w = buf.writer();
        if let Err(e) = serde_json::to_writer(&mut w, self) {
            w.into_inner().truncate(start); // never leave half a frame
            return Err(e);
        }
        buf.put_slice(b" \r\n");
        Ok(())
    }
}

/// A client's CONNECT (`ClientOpts`). Omitted fields take nats-server's defaults:
/// `verbose`, `pedantic` and `echo` true, everything else false / empty / 0.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConnectInfo {
    #[serde(deserialize_with = "nullable_true")]
    pub echo: bool,
    #[serde(deserialize_with = "nullable_true")]
    pub verbose: bool,
    #[serde(deserialize_with = "nullable_true")]
    pub pedantic: bool,
    #[serde(deserialize_with = "nullable")]
    pub tls_required: bool,
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub nkey: String,
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub jwt: String,
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub sig: String,
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub auth_token: String,
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub user: String,
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub pass: String,
    #[serde(deserialize_with = "nullable")]
    pub name: String,
    #[serde(deserialize_with = "nullable")]
    pub lang: String,
    #[serde(deserialize_with = "nullable")]
    pub version: String,
    #[serde(deserialize_with = "nullable")]
    pub protocol: i32,
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub account: String,
    #[serde(skip_serializing_if = "is_false", deserialize_with = "nullable")]
    pub new_account: bool,
    #[serde(deserialize_with = "nullable")]
    pub headers: bool,
    #[serde(deserialize_with = "nullable")]
    pub no_responders: bool,
}

impl Default for ConnectInfo {
    fn default() -> Self {
        ConnectInfo {
            echo: true,
            verbose: true,
            pedantic: true,
            tls_required: false,
            nkey: String::new(),
            jwt: String::new(),
            sig: String::new(),
            auth_token: String::new(),
            user: String::new(),
            pass: String::new(),
            name: String::new(),
            lang: String::new(),
            version: String::new(),
            protocol: 0,
            account: String::new(),
            new_account: false,
            headers: false,
            no_responders: false,
        }
    }
}

impl ConnectInfo {
    /// Decode the raw JSON of an `Op::Connect`.
    pub fn from_json(json: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(json)
    }
}

/// CONNECT on a route or gateway (`connectInfo` in nats-server's route.go); field order as Go
/// emits it. Gateways send it with `gateway` set and `echo:false`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RouteConnectInfo {
    #[serde(deserialize_with = "nullable")]
    pub echo: bool,
    #[serde(deserialize_with = "nullable")]
    pub verbose: bool,
    #[serde(deserialize_with = "nullable")]
    pub pedantic: bool,
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub user: String,
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub pass: String,
    #[serde(deserialize_with = "nullable")]
    pub tls_required: bool,
    #[serde(deserialize_with = "nullable")]
    pub headers: bool,
    /// The sender's server_id (not its server_name).
    #[serde(deserialize_with = "nullable")]
    pub name: String,
    #[serde(deserialize_with = "nullable")]
    pub cluster: String,
    #[serde(skip_serializing_if = "is_false", deserialize_with = "nullable")]
    pub cluster_dynamic: bool,
    #[serde(skip_serializing_if = "is_false", deserialize_with = "nullable")]
    pub lnoc: bool,
    #[serde(skip_serializing_if = "is_false", deserialize_with = "nullable")]
    pub lnocu: bool,
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub gateway: String,
    /// Never sent by servers: non-empty means a client dialled the route port (`WrongPort`).
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub lang: String,
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard padded base64, as Go's `encoding/json` encodes `[]byte`.
pub fn b64_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let b = [
            c[0],
            c.get(1).copied().unwrap_or(0),
            c.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= c.len() {
                out.push(B64[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Decode standard base64 (padding optional); `None` on any invalid input.
pub fn b64_decode(s: &str) -> Option<Vec<u8>> {
    let s = s.trim_end_matches('=').as_bytes();
    if s.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    for c in s.chunks(4) {
        let mut n = 0u32;
        for (i, &ch) in c.iter().enumerate() {
            let v = B64.iter().position(|&x| x == ch)? as u32;
            n |= v << (18 - 6 * i);
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..c.len() - 1]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_info_order_and_omission() {
        let info = ServerInfo {
            server_id: "NID".into(),
            server_name: "A".into(),
            version: "2.9.10".into(),
            proto: 1,
            go: "go1.19.8".into(),
            host: "0.0.0.0".into(),
            port: 4222,
            headers: true,
            max_payload: 1048576,
            client_id: Some(5),
            client_ip: Some("127.0.0.1".into()),
            cluster: "C1".into(),
            connect_urls: vec!["127.0.0.1:14222".into()],
            ..Default::default()
        };
        let json = serde_json::to_string(&info).unwrap();
        assert_eq!(
            json,
            r#"{"server_id":"NID","server_name":"A","version":"2.9.10","proto":1,"go":"go1.19.8","host":"0.0.0.0","port":4222,"headers":true,"max_payload":1048576,"client_id":5,"client_ip":"127.0.0.1","cluster":"C1","connect_urls":["127.0.0.1:14222"]}"#
        );
        let all = ServerInfo {
            auth_required: true,
            tls_required: true,
            tls_verify: true,
            tls_available: true,
            jetstream: true,
            ip: "nats-route://1.2.3.4:6222/".into(),
            nonce: "n".into(),
            ldm: true,
            ..info
        };
        let json = serde_json::to_string(&all).unwrap();
        let keys: Vec<&str> = json
            .split('"')
            .enumerate()
            .filter(|(i, _)| i % 2 == 1)
            .map(|(_, s)| s)
            .collect();
        let order = [
            "server_id",
            "server_name",
            "version",
            "proto",
            "go",
            "host",
            "port",
            "headers",
            "auth_required",
            "tls_required",
            "tls_verify",
            "tls_available",
            "max_payload",
            "jetstream",
            "ip",
            "client_id",
            "client_ip",
            "nonce",
            "cluster",
            "connect_urls",
            "ldm",
        ];
        let pos: Vec<usize> = order
            .iter()
            .map(|k| keys.iter().position(|x| x == k).unwrap())
            .collect();
        assert!(pos.windows(2).all(|w| w[0] < w[1]), "{json}");
        let mut buf = BytesMut::new();
        all.write_to(&mut buf).unwrap();
        assert_eq!(&buf[..], format!("INFO {json} \r\n").as_bytes());
    }

    #[test]
    fn route_info_from_go() {
        // spec §10.1, and a 2.9 gateway-gossip INFO with zero-valued fields (§10.1 note).
        let a = r#"{"server_id":"NC5BMG77NEBBAOTAFIAOGUSBZHL5OVADDCFZW77PCINDVXYYM4JOI3TD","server_name":"A","version":"2.9.10","proto":2,"go":"go1.19.8","host":"127.0.0.1","port":16222,"headers":true,"max_payload":1048576,"nonce":"K5YNmCwLmp2ZRG8","cluster":"C1","connect_urls":["127.0.0.1:14222"],"lnoc":true,"gateway_url":"127.0.0.1:17222"}"#;
        let i: ServerInfo = serde_json::from_str(a).unwrap();
        assert_eq!(
            (i.proto, i.port, i.lnoc, i.cluster.as_str()),
            (2, 16222, true, "C1")
        );
        assert_eq!(i.gateway_url, "127.0.0.1:17222");
        // Our encoder reproduces Go's bytes exactly for this INFO.
        assert_eq!(serde_json::to_string(&i).unwrap(), a);
        let g = r#"{"server_id":"","server_name":"","version":"","proto":0,"go":"","host":"","port":0,"headers":false,"max_payload":0,"gateway":"C1","gateway_cmd":2,"gateway_cmd_payload":"JEc=","unknown":{"x":[1]},"import":{"allow":["a.>"],"deny":null},"route_pool_size":3}"#;
        let i: ServerInfo = serde_json::from_str(g).unwrap();
        assert_eq!((i.gateway_cmd, i.route_pool_size), (2, 3));
        assert_eq!(b64_decode(&i.gateway_cmd_payload).unwrap(), b"$G");
        assert_eq!(i.import.unwrap().allow, vec!["a.>".to_string()]);
    }

    #[test]
    fn connect_defaults_and_real_clients() {
        let d: ConnectInfo = serde_json::from_str("{}").unwrap();
        assert!(d.verbose && d.pedantic && d.echo && !d.headers && d.protocol == 0);
        assert_eq!(d, ConnectInfo::default());

        let go = br#"{"verbose":false,"pedantic":false,"tls_required":false,"name":"","lang":"go","version":"1.31.0","protocol":1,"echo":true,"headers":true,"no_responders":true}"#;
        let c = ConnectInfo::from_json(go).unwrap();
        assert!(!c.verbose && !c.pedantic && c.echo && c.headers && c.no_responders);
        assert_eq!((c.lang.as_str(), c.protocol), ("go", 1));

        // async-nats 0.3x–0.5x: every Option field is sent, as null.
        let rs = br#"{"verbose":false,"pedantic":false,"jwt":null,"nkey":null,"sig":null,"name":null,"echo":false,"lang":"rust","version":"0.51.0","protocol":1,"tls_required":false,"user":"u","pass":"p","auth_token":null,"headers":true,"no_responders":true}"#;
        let c = ConnectInfo::from_json(rs).unwrap();
        assert!(!c.echo && c.headers && c.jwt.is_empty() && c.name.is_empty());
        assert_eq!((c.user.as_str(), c.pass.as_str()), ("u", "p"));

        // nats-py: json.dumps(sort_keys=True) with ", " / ": " separators.
        let py = br#"{"echo": true, "headers": true, "lang": "python3", "no_responders": true, "pedantic": false, "protocol": 1, "verbose": false, "version": "2.6.0", "auth_token": "s3cr3t"}"#;
        let c = ConnectInfo::from_json(py).unwrap();
        assert_eq!(
            (c.lang.as_str(), c.auth_token.as_str()),
            ("python3", "s3cr3t")
        );
        assert!(!c.verbose);

        // Old/minimal clients omit flags: defaults apply; null keeps the default-true flags.
        let c = ConnectInfo::from_json(
            br#"{"verbose":null,"lang":"c","user":"a","account":"X","new_account":true}"#,
        )
        .unwrap();
        assert!(c.verbose && c.pedantic && c.echo && c.new_account);
        assert!(ConnectInfo::from_json(b"not json").is_err());
        assert!(ConnectInfo::from_json(br#"{"protocol":"one"}"#).is_err());
    }

    #[test]
    fn route_connect() {
        let s = r#"{"echo":true,"verbose":false,"pedantic":false,"tls_required":false,"headers":true,"name":"NBC3P22MWUID2I733GBUFWOJSDUX5BFAXOSJ3DP5Y4SU5QIYEBRQ3JTY","cluster":"C1","lnoc":true}"#;
        let c: RouteConnectInfo = serde_json::from_str(s).unwrap();
        assert!(c.lnoc && c.headers && c.lang.is_empty());
        assert_eq!(serde_json::to_string(&c).unwrap(), s);
        let g = r#"{"echo":false,"verbose":false,"pedantic":false,"tls_required":false,"headers":false,"name":"NA5L","cluster":"","gateway":"C2"}"#;
        let c: RouteConnectInfo = serde_json::from_str(g).unwrap();
        assert_eq!(c.gateway, "C2");
        assert_eq!(serde_json::to_string(&c).unwrap(), g);
        let client: RouteConnectInfo =
            serde_json::from_str(r#"{"lang":"go","verbose":true}"#).unwrap();
        assert_eq!(client.lang, "go");
    }

    #[test]
    fn base64() {
        for (raw, enc) in [
            (&b""[..], ""),
            (b"$G", "JEc="),
            (b"$SYS", "JFNZUw=="),
            (b"abc", "YWJj"),
        ] {
            assert_eq!(b64_encode(raw), enc);
            assert_eq!(b64_decode(enc).unwrap(), raw);
        }
        assert_eq!(b64_decode("JEc").unwrap(), b"$G");
        assert!(b64_decode("J").is_none());
        assert!(b64_decode("J*c=").is_none());
    }
}
