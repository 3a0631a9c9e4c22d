//! A minimal HTTP/1.1 GET over TCP or TLS (`http://`, `https://`), for the URL account
//! resolver (nats-server's `URLAccResolver` fetches `base + account key` and takes a 200's
//! body as the JWT). One request per connection (`Connection: close`); bodies by
//! `Content-Length`, chunked, or to the end; everything bounded by `MAX` bytes and the
//! caller's deadline. The same exchange runs over either stream.

use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_rustls::TlsConnector;

/// The most a response (head and body) may take.
pub const MAX: usize = 1 << 20;

/// Where a `http[s]://host[:port]/path` URL points.
#[derive(Debug, PartialEq, Eq)]
pub struct Target {
    /// `https`: the exchange runs over TLS.
    pub tls: bool,
    pub host: String,
    pub port: u16,
    pub path: String,
}

impl Target {
    /// `None` unless the URL is `http://` or `https://` with a host (and, if given, a valid
    /// port; else 80 or 443).
    pub fn parse(url: &str) -> Option<Target> {
        let (tls, rest) = match url.strip_prefix("https://") {
            Some(rest) => (true, rest),
            None => (false, url.strip_prefix("http://")?),
        };
        let (auth, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if auth.contains('@') {
            return None;
        }
        let (host, port) = match auth.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => (h, p.parse().ok()?),
            _ => (auth, if tls { 443 } else { 80 }),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() || path.contains(char::is_whitespace) {
            return None;
        }
        Some(Target {
            tls,
            host: host.to_string(),
            port,
            path: path.to_string(),
        })
    }
}

/// GET `url` (`https` through `tls`, which verifies the server): the body of a 200 answer;
/// otherwise what went wrong, as nats-server words it after `could not fetch <url>: ` (the
/// status line's code and text, or `Get "url": ` and Go's words for the error).
pub async fn get(
    url: &str,
    tls: Option<&TlsConnector>,
    timeout: Duration,
) -> Result<Vec<u8>, String> {
    let t = Target::parse(url).ok_or_else(|| format!("not an http:// or https:// URL: {url:?}"))?;
    let fetched = tokio::time::timeout(timeout, fetch(&t, tls)).await;
    let fetched = fetched.unwrap_or_else(|_| {
        Err("context deadline exceeded (Client.Timeout exceeded while awaiting headers)".into())
    });
    parse_response(&fetched.map_err(|e| format!("Get {url:?}: {e}"))?)
}

/// The whole response to a GET of `t`.
async fn fetch(t: &Target, tls: Option<&TlsConnector>) -> Result<Vec<u8>, String> {
    let s = tokio::net::TcpStream::connect((t.host.as_str(), t.port))
        .await
        .map_err(|e| format!("dial tcp {}:{}: {e}", t.host, t.port))?;
    if !t.tls {
        return exchange(s, t).await.map_err(|e| e.to_string());
    }
    let tls = tls.ok_or("https needs a TLS configuration")?;
    let name = crate::tls::server_name(&t.host)?;
    let s = tls
        .connect(name, s)
        .await
        .map_err(|e| crate::tls::go_client_error(&e))?;
    exchange(s, t)
        .await
        .map_err(|e| crate::tls::go_client_error(&e))
}

/// Send the request for `t` on `s` and read the response until the server closes.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut s: S,
    t: &Target,
) -> std::io::Result<Vec<u8>> {
    let host = if t.host.contains(':') {
        format!("[{}]:{}", t.host, t.port)
    } else {
        format!("{}:{}", t.host, t.port)
    };
    let req = format!(
        "GET {} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: natsd\r\nAccept: */*\r\nConnection: close\r\n\r\n",
        t.path
    );
    s.write_all(req.as_bytes()).await?;
    s.flush().await?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = match s.read(&mut chunk).await {
            Ok(n) => n,
            // A TLS server that closes without close_notify: Go reads that as the end too.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !buf.is_empty() => 0,
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Ok(buf);
        }
        if buf.len() + n > MAX {
            return Err(std::io::Error::other(format!(
                "response larger than {MAX} bytes"
            )));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// A whole response: the body of a 200, else the status (`404 Not Found`).
pub fn parse_response(buf: &[u8]) -> Result<Vec<u8>, String> {
    let end = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("malformed HTTP response")?;
    let head = std::str::from_utf8(&buf[..end]).map_err(|_| "malformed HTTP response")?;
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or("");
    let mut parts = status.splitn(3, ' ');
    let (version, code) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if !version.starts_with("HTTP/1.") || code.len() != 3 {
        return Err("malformed HTTP response".into());
    }
    if code != "200" {
        let text = parts.next().unwrap_or("");
        return Err(format!("{code} {text}").trim_end().to_string());
    }
    let (mut length, mut chunked) = (None, false);
    for l in lines {
        let Some((k, v)) = l.split_once(':') else {
            continue;
        };
        let v = v.trim();
        if k.eq_ignore_ascii_case("content-length") {
            length = Some(v.parse::<usize>().map_err(|_| "bad Content-Length")?);
        } else if k.eq_ignore_ascii_case("transfer-encoding") {
            chunked = v.to_ascii_lowercase().contains("chunked");
        }
    }
    let body = &buf[end + 4..];
    if chunked {
        return dechunk(body);
    }
    match length {
        Some(n) if n > body.len() => Err("unexpected EOF".into()),
        Some(n) => Ok(body[..n].to_vec()),
        None => Ok(body.to_vec()),
    }
}

fn dechunk(mut b: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let eol = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("malformed chunked body")?;
        let size = std::str::from_utf8(&b[..eol])
            .ok()
            .and_then(|l| usize::from_str_radix(l.split(';').next()?.trim(), 16).ok())
            .ok_or("malformed chunk size")?;
        b = &b[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if b.len() < size + 2 {
            return Err("unexpected EOF".into());
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_split_into_host_port_and_path() {
        let t = Target::parse("http://h.example:9090/jwt/v1/accounts/").expect("url");
        assert_eq!(
            (t.host.as_str(), t.port, t.path.as_str()),
            ("h.example", 9090, "/jwt/v1/accounts/")
        );
        let t = Target::parse("http://[::1]:80/a").expect("url");
        assert_eq!((t.host.as_str(), t.port), ("::1", 80));
        assert_eq!(
            Target::parse("http://h").map(|t| (t.port, t.path)),
            Some((80, "/".into()))
        );
        let t = Target::parse("https://127.0.0.1/jwt/").expect("url");
        assert_eq!((t.tls, t.port, t.path.as_str()), (true, 443, "/jwt/"));
        assert!(!Target::parse("http://h:1/").expect("url").tls);
        for bad in [
            "ftp://h/",
            "h:1/",
            "http:///x",
            "http://h:x/",
            "http://u:p@h/",
            "http://h/a b",
        ] {
            assert_eq!(Target::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn responses_give_the_body_of_a_200_or_the_status() {
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcdef";
        assert_eq!(parse_response(ok), Ok(b"abc".to_vec()));
        let to_end = b"HTTP/1.0 200 OK\r\nServer: x\r\n\r\neyJ.x.y\n";
        assert_eq!(parse_response(to_end), Ok(b"eyJ.x.y\n".to_vec()));
        let chunked =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=1\r\nde\r\n0\r\n\r\n";
        assert_eq!(parse_response(chunked), Ok(b"abcde".to_vec()));
        let missing = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(parse_response(missing), Err("404 Not Found".into()));
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc").is_err());
        assert!(parse_response(b"garbage").is_err());
        assert!(
            parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_err()
        );
    }
}
