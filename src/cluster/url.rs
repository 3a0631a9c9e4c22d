//! Route URLs: `nats-route://[user:pass@]host:port[/]`, `nats://…`, `tls://…` or a bare
//! `host:port`. Pure parsing; resolution lives in `discovery`.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RouteUrl {
    pub user: Option<String>,
    pub pass: Option<String>,
    pub host: String,
    pub port: u16,
}

pub const DEFAULT_ROUTE_PORT: u16 = 6222;

impl RouteUrl {
    pub fn parse(s: &str) -> Result<RouteUrl, String> {
        let t = s.trim();
        let rest = match t.split_once("://") {
            Some((scheme, rest)) => {
                let scheme = scheme.to_ascii_lowercase();
                if !matches!(scheme.as_str(), "nats-route" | "nats" | "route" | "tls") {
                    return Err(format!("route URL {s:?}: unsupported scheme {scheme:?}"));
                }
                rest
            }
            None => t,
        };
        let rest = rest.trim_end_matches('/');
        let (userinfo, hostport) = match rest.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, rest),
        };
        let (user, pass) = match userinfo {
            Some(u) => match u.split_once(':') {
                Some((a, b)) => (Some(a.to_string()), Some(b.to_string())),
                None => (Some(u.to_string()), None),
            },
            None => (None, None),
        };
        let (host, port) = if let Some(h) = hostport.strip_prefix('[') {
            // [v6]:port
            let (h, p) = h
                .split_once(']')
                .ok_or_else(|| format!("route URL {s:?}: bad IPv6 host"))?;
            (h.to_string(), p.strip_prefix(':').unwrap_or(""))
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), p),
                None => (hostport.to_string(), ""),
            }
        };
        if host.is_empty() {
            return Err(format!("route URL {s:?}: missing host"));
        }
        let port = if port.is_empty() {
            DEFAULT_ROUTE_PORT
        } else {
            port.parse()
                .map_err(|_| format!("route URL {s:?}: bad port {port:?}"))?
        };
        Ok(RouteUrl {
            user,
            pass,
            host,
            port,
        })
    }
}

impl fmt::Display for RouteUrl {
    /// Without credentials: safe to log.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "nats-route://[{}]:{}", self.host, self.port)
        } else {
            write!(f, "nats-route://{}:{}", self.host, self.port)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        let u = RouteUrl::parse("nats-route://ruser:T0pS3cr3t@seed.ns.svc:6222/").expect("ok");
        assert_eq!(u.user.as_deref(), Some("ruser"));
        assert_eq!(u.pass.as_deref(), Some("T0pS3cr3t"));
        assert_eq!(u.host, "seed.ns.svc");
        assert_eq!(u.port, 6222);
        let u = RouteUrl::parse("nats://127.0.0.1:16222").expect("ok");
        assert_eq!(
            (u.host.as_str(), u.port, u.user.clone()),
            ("127.0.0.1", 16222, None)
        );
        assert_eq!(RouteUrl::parse("host").expect("ok").port, 6222);
        assert_eq!(RouteUrl::parse("[::1]:7").expect("ok").host, "::1");
        assert!(RouteUrl::parse("http://x:1").is_err());
        assert!(RouteUrl::parse("nats://:1").is_err());
        assert!(RouteUrl::parse("nats://x:99999").is_err());
        assert_eq!(u.to_string(), "nats-route://127.0.0.1:16222");
    }
}
