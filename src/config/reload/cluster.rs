//! The cluster block of a reload: which route URLs come and go, and the pool size, pinned
//! accounts and compression changes applied to live routes (`ClusterChange`).

use super::{opt_str, refuse};
use crate::config::ClusterOpts;

/// The cluster settings a reload changes on live routes, as nats-server 2.10+ applies them
/// (`reload.go` `clusterOption`): docs/nats-server-behaviour.md section 24.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterChange {
    /// The new `pool_size` (negative: one route per peer).
    pub pool_size: i32,
    /// The pool size changed: every pool route closes and is dialled again.
    pub pool_changed: bool,
    /// The new pinned accounts, the system account included while pooling (empty without).
    pub pinned: Vec<String>,
    /// Pinned accounts added (announced to the peers, then dialled) and removed (their
    /// routes close and are not dialled again).
    pub accounts_added: Vec<String>,
    pub accounts_removed: Vec<String>,
    /// The new compression settings, when they changed.
    pub compression: Option<crate::compress::CompressionOpts>,
}

/// The accounts with a route of their own: `accounts`, plus the system account, while the
/// cluster pools (nats-server 2.10+); none without pooling.
pub fn effective_pinned(c: &ClusterOpts, system_account: &str, no_system: bool) -> Vec<String> {
    if c.pool().is_none() {
        return Vec::new();
    }
    let mut v = c.pinned_accounts.clone();
    if !no_system && !v.iter().any(|a| a == system_account) {
        v.push(system_account.to_string());
    }
    v
}

/// What changes on live routes when the cluster's pool size, pinned accounts or compression
/// change (`sys`: the system account and `no_system_account`, old and new).
pub(super) fn cluster_settings_diff(
    old: &ClusterOpts,
    new: &ClusterOpts,
    old_sys: (&str, bool),
    sys: (&str, bool),
) -> Option<ClusterChange> {
    let old_pinned = effective_pinned(old, old_sys.0, old_sys.1);
    let pinned = effective_pinned(new, sys.0, sys.1);
    let pool_changed = old.pool() != new.pool();
    let added: Vec<String> = pinned
        .iter()
        .filter(|a| !old_pinned.contains(a))
        .cloned()
        .collect();
    let removed: Vec<String> = old_pinned
        .iter()
        .filter(|a| !pinned.contains(a))
        .cloned()
        .collect();
    let compression = (new.compression != old.compression).then(|| new.compression.clone());
    if !pool_changed && added.is_empty() && removed.is_empty() && compression.is_none() {
        return None;
    }
    Some(ClusterChange {
        pool_size: new.pool().map_or(-1, |n| n as i32),
        pool_changed,
        pinned,
        accounts_added: added,
        accounts_removed: removed,
        compression,
    })
}

/// The cluster block: `routes` (and, in `cluster_settings_diff`, pool, accounts and
/// compression) may change. Returns (added, removed) route URLs.
pub(super) fn cluster_diff(
    old: Option<&ClusterOpts>,
    new: Option<&ClusterOpts>,
) -> Result<(Vec<String>, Vec<String>), String> {
    let (old, new) = match (old, new) {
        (None, None) => return Ok((Vec::new(), Vec::new())),
        (Some(o), Some(n)) => (o, n),
        (o, n) => {
            let show = |c: Option<&ClusterOpts>| c.map_or("0".to_string(), |c| c.port.to_string());
            return Err(refuse("cluster port", show(o), show(n)));
        }
    };
    let ClusterOpts {
        name,
        host,
        port,
        advertise,
        no_advertise,
        routes,
        connect_retries,
        username,
        password,
        token,
        auth_timeout,
        ping_interval,
        ping_max,
        write_deadline,
        write_timeout,
        tls,
        pool_size,
        pinned_accounts,
        connect_backoff,
        compression,
    } = new;
    if connect_backoff != &old.connect_backoff {
        return Err(refuse(
            "cluster connect_backoff",
            old.connect_backoff,
            connect_backoff,
        ));
    }
    // pool_size, accounts and compression reload (`cluster_settings_diff`).
    let _ = (pool_size, pinned_accounts, compression);
    if name != &old.name {
        return Err(refuse("cluster name", opt_str(&old.name), opt_str(name)));
    }
    if host != &old.host {
        return Err(refuse("cluster host", &old.host, host));
    }
    if port != &old.port {
        return Err(refuse("cluster port", old.port, port));
    }
    if advertise != &old.advertise {
        return Err(refuse(
            "cluster advertise",
            opt_str(&old.advertise),
            opt_str(advertise),
        ));
    }
    if no_advertise != &old.no_advertise {
        return Err(refuse(
            "cluster no_advertise",
            old.no_advertise,
            no_advertise,
        ));
    }
    if connect_retries != &old.connect_retries {
        return Err(refuse(
            "cluster connect_retries",
            old.connect_retries,
            connect_retries,
        ));
    }
    if username != &old.username
        || password != &old.password
        || token != &old.token
        || auth_timeout != &old.auth_timeout
    {
        // Secrets are not logged.
        return Err("config reload not supported for cluster authorization".into());
    }
    if ping_interval != &old.ping_interval || ping_max != &old.ping_max {
        return Err("config reload not supported for cluster ping_interval/ping_max".into());
    }
    if write_deadline != &old.write_deadline || write_timeout != &old.write_timeout {
        return Err("config reload not supported for cluster write_deadline/write_timeout".into());
    }
    if differs_beyond_pins(tls, &old.tls) {
        return Err("config reload not supported for cluster tls".into());
    }
    let mut added = Vec::new();
    for r in routes {
        if !old.routes.contains(r) && !added.contains(r) {
            added.push(r.clone());
        }
    }
    let mut removed = Vec::new();
    for r in &old.routes {
        if !routes.contains(r) && !removed.contains(r) {
            removed.push(r.clone());
        }
    }
    Ok((added, removed))
}

#[cfg(test)]
mod tests {
    use super::super::diff;
    use super::*;
    use crate::config::Options;

    #[test]
    fn cluster_routes_only() {
        let c = ClusterOpts {
            name: Some("C".into()),
            port: 6222,
            routes: vec!["nats-route://a:1".into(), "nats-route://b:1".into()],
            ..ClusterOpts::default()
        };
        let old = Options {
            cluster: Some(c.clone()),
            ..Options::default()
        };
        let mut c2 = c.clone();
        c2.routes = vec!["nats-route://b:1".into(), "nats-route://c:1".into()];
        let new = Options {
            cluster: Some(c2),
            ..Options::default()
        };
        let p = diff(&old, &new).expect("plan");
        assert_eq!(p.changed, ["cluster routes"]);
        assert_eq!(p.routes_added, ["nats-route://c:1"]);
        assert_eq!(p.routes_removed, ["nats-route://a:1"]);
        let mut c3 = c.clone();
        c3.port = 6223;
        let e = diff(
            &old,
            &Options {
                cluster: Some(c3),
                ..Options::default()
            },
        )
        .unwrap_err();
        assert_eq!(
            e,
            "config reload not supported for cluster port: old=6222, new=6223"
        );
        let mut c4 = c.clone();
        c4.name = Some("D".into());
        assert!(diff(
            &old,
            &Options {
                cluster: Some(c4),
                ..Options::default()
            }
        )
        .unwrap_err()
        .contains("cluster name"));
        let e = diff(&old, &Options::default()).unwrap_err();
        assert_eq!(
            e,
            "config reload not supported for cluster port: old=6222, new=0"
        );
    }

    /// Pool size, pinned accounts and compression reload (nats-server 2.10+ applies them to
    /// live routes); `Reloaded: cluster` names them, `connect_backoff` stays refused.
    #[test]
    fn cluster_pool_accounts_and_compression_reload() {
        use crate::compress::{CompressionMode, CompressionOpts};
        let c = ClusterOpts::default();
        let opts = |c: ClusterOpts| Options {
            cluster: Some(c),
            ..Options::default()
        };
        let old = opts(c.clone());
        let sys = old.system_account.clone();
        assert_eq!(diff(&old, &old.clone()).expect("plan").cluster, None);

        let mut n = c.clone();
        n.pool_size = 5;
        let p = diff(&old, &opts(n)).expect("plan");
        assert_eq!(p.changed, ["cluster"]);
        let ch = p.cluster.expect("change");
        assert!(ch.pool_changed);
        assert_eq!((ch.pool_size, ch.compression), (5, None));
        assert!(ch.accounts_added.is_empty() && ch.accounts_removed.is_empty());

        // 0 is the default size: no change.
        let mut n = c.clone();
        n.pool_size = 0;
        assert_eq!(diff(&old, &opts(n)).expect("plan").cluster, None);

        // No pool: the system account's route goes too.
        let mut n = c.clone();
        n.pool_size = -1;
        let ch = diff(&old, &opts(n)).expect("plan").cluster.expect("change");
        assert_eq!((ch.pool_size, ch.pinned.len()), (-1, 0));
        assert_eq!(ch.accounts_removed, std::slice::from_ref(&sys));

        let mut n = c.clone();
        n.pinned_accounts = vec!["A".into()];
        let ch = diff(&old, &opts(n.clone()))
            .expect("plan")
            .cluster
            .expect("change");
        assert!(!ch.pool_changed);
        assert_eq!(ch.accounts_added, ["A"]);
        assert_eq!(ch.pinned, ["A".to_string(), sys.clone()]);
        let ch = diff(&opts(n), &old).expect("plan").cluster.expect("change");
        assert_eq!(ch.accounts_removed, ["A"]);

        let mut n = c.clone();
        n.compression = CompressionOpts::new(CompressionMode::S2Fast);
        let p = diff(&old, &opts(n)).expect("plan");
        assert_eq!(p.changed, ["cluster"]);
        let ch = p.cluster.expect("change");
        assert_eq!(
            ch.compression.map(|c| c.mode),
            Some(CompressionMode::S2Fast)
        );
        assert!(!ch.pool_changed);

        let mut n = c.clone();
        n.connect_backoff = !c.connect_backoff;
        assert!(diff(&old, &opts(n))
            .unwrap_err()
            .contains("cluster connect_backoff"));
    }
}

/// Whether two `tls` blocks differ in more than `pinned_certs`, which a reload may change
/// (nats-server re-checks the connected peers: `recheckPinnedCerts`).
pub fn differs_beyond_pins(
    a: &Option<crate::tls::TlsOpts>,
    b: &Option<crate::tls::TlsOpts>,
) -> bool {
    let strip = |t: &Option<crate::tls::TlsOpts>| {
        t.clone().map(|mut t| {
            t.pinned_certs = None;
            t
        })
    };
    strip(a) != strip(b)
}

/// Which blocks' `pinned_certs` a reload changes: the cluster's, the gateway's (the
/// leafnodes block's cannot change on a reload, as in nats-server 2.15.1).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PinsChange {
    pub routes: bool,
    pub gateways: bool,
}

impl PinsChange {
    pub fn of(old: &crate::config::Options, new: &crate::config::Options) -> PinsChange {
        use crate::conn::ConnKind;
        let differ = |k| crate::tls::live_pins(old, k) != crate::tls::live_pins(new, k);
        PinsChange {
            routes: differ(ConnKind::Route),
            gateways: differ(ConnKind::Gateway),
        }
    }

    pub fn any(&self) -> bool {
        self.routes || self.gateways
    }
}
