//! Subject mappings (`mappings {}` at the top level for the global account, or in an
//! account): a published subject that matches a mapping's source is delivered as one of its
//! destinations, picked by weight (nats-server's `AddWeightedMappings` /
//! `selectMappedSubject`). Weights under 100 leave the rest of the messages on the original
//! subject; destinations scoped to a `cluster` replace the others on that cluster's servers.
//! Applied to what clients and leafnodes publish, before the publish permission check.

use crate::transform::Transform;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, RwLock};

/// One destination of a mapping as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapDest {
    pub subject: String,
    /// Percent, 0–100.
    pub weight: u8,
    /// Only on servers of this cluster.
    pub cluster: Option<String>,
}

/// One mapping as configured: its source and destinations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappingConfig {
    pub src: String,
    pub dests: Vec<MapDest>,
}

impl MappingConfig {
    /// `src: dest` (the whole traffic).
    pub fn simple(src: &str, dest: &str) -> Self {
        MappingConfig {
            src: src.to_string(),
            dests: vec![MapDest {
                subject: dest.to_string(),
                weight: 100,
                cluster: None,
            }],
        }
    }
}

/// A destination with its cumulative weight (picked when the roll is below it).
#[derive(Debug)]
struct Dest {
    tr: Transform,
    upto: u8,
}

#[derive(Debug)]
struct Mapping {
    src: String,
    /// The source has wildcards (matched by tokens, not by equality).
    wildcard: bool,
    dests: Vec<Dest>,
    by_cluster: BTreeMap<String, Vec<Dest>>,
}

/// A source and its destinations as installed: subject, cumulative weight, cluster.
pub type InstalledMapping = (String, Vec<(String, u8, Option<String>)>);

/// An account's compiled mappings, in configuration order (the first match wins).
#[derive(Debug, Default)]
pub struct Mappings {
    list: Vec<Mapping>,
}

/// The destination for a wildcard source that maps a subject to itself: `*` tokens as
/// `$1`, `$2`, … (nats-server's `transformTokenize`).
fn identity_dest(src: &str) -> String {
    let mut n = 0;
    src.split('.')
        .map(|t| {
            if t == "*" {
                n += 1;
                format!("${n}")
            } else {
                t.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(".")
}

impl Mappings {
    /// Compile `configs` with nats-server's checks (its error texts).
    pub fn build(configs: &[MappingConfig]) -> Result<Mappings, String> {
        let mut list: Vec<Mapping> = Vec::new();
        for c in configs {
            let m = compile(c)?;
            match list.iter_mut().find(|x| x.src == m.src) {
                Some(old) => *old = m,
                None => list.push(m),
            }
        }
        Ok(Mappings { list })
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Each source's destinations as installed (what nats-server's `/accountz` shows): the
    /// plain ones, then each cluster's, with their cumulative weights.
    pub fn installed(&self) -> Vec<InstalledMapping> {
        self.list
            .iter()
            .map(|m| {
                let mut dests: Vec<(String, u8, Option<String>)> = m
                    .dests
                    .iter()
                    .map(|d| (d.tr.dest().to_string(), d.upto, None))
                    .collect();
                for (cl, v) in &m.by_cluster {
                    dests.extend(
                        v.iter()
                            .map(|d| (d.tr.dest().to_string(), d.upto, Some(cl.clone()))),
                    );
                }
                (m.src.clone(), dests)
            })
            .collect()
    }

    /// The subject a message published on `subject` goes to on a server of `cluster`, when
    /// a mapping applies (`Some`, possibly `subject` itself for the unmapped share).
    pub fn select(&self, subject: &str, cluster: &str) -> Option<String> {
        self.select_with(subject, &|| cluster.to_string())
    }

    /// `select`, asking for the cluster's name only when a mapping is scoped by cluster.
    fn select_with(&self, subject: &str, cluster: &dyn Fn() -> String) -> Option<String> {
        let m = self.list.iter().find(|m| {
            if m.wildcard {
                crate::subject::subset_match(subject.as_bytes(), m.src.as_bytes())
            } else {
                m.src == subject
            }
        })?;
        let dests = if m.by_cluster.is_empty() {
            &m.dests
        } else {
            m.by_cluster.get(&cluster()).unwrap_or(&m.dests)
        };
        let d = match dests.as_slice() {
            [only] if only.upto == 100 => only,
            _ => {
                let roll = (rand::random::<u32>() % 100) as u8;
                dests.iter().find(|d| roll < d.upto)?
            }
        };
        d.tr.apply(subject)
    }
}

fn compile(c: &MappingConfig) -> Result<Mapping, String> {
    if !crate::subject::is_valid_subject(c.src.as_bytes()) {
        return Err("invalid subject".into());
    }
    let wildcard = crate::subject::has_wildcard(c.src.as_bytes());
    let mut seen = std::collections::HashSet::new();
    let mut totals: BTreeMap<Option<&str>, u32> = BTreeMap::new();
    let mut plain: Vec<(Transform, u8)> = Vec::new();
    let mut scoped: BTreeMap<String, Vec<(Transform, u8)>> = BTreeMap::new();
    for d in &c.dests {
        if !seen.insert(d.subject.as_str()) {
            return Err(format!("duplicate entry for {:?}", d.subject));
        }
        if d.weight > 100 {
            return Err("individual weights need to be <= 100".into());
        }
        let t = totals.entry(d.cluster.as_deref()).or_default();
        *t += u32::from(d.weight);
        if *t > 100 {
            return Err("total weight needs to be <= 100".into());
        }
        let tr = Transform::new(&c.src, &d.subject)?;
        match &d.cluster {
            None => plain.push((tr, d.weight)),
            Some(cl) => scoped.entry(cl.clone()).or_default().push((tr, d.weight)),
        }
    }
    let has_src = seen.contains(c.src.as_str());
    let finish = |mut v: Vec<(Transform, u8)>| -> Result<Vec<Dest>, String> {
        let total: u32 = v.iter().map(|d| u32::from(d.1)).sum();
        // The rest stays on the original subject, unless that was listed (then it is lost).
        if total != 100 && !has_src {
            let rest = if v.is_empty() { 100 } else { 100 - total as u8 };
            let dest = if wildcard {
                identity_dest(&c.src)
            } else {
                c.src.clone()
            };
            v.push((Transform::new(&c.src, &dest)?, rest));
        }
        v.sort_by_key(|d| d.1);
        let mut upto = 0u8;
        Ok(v.into_iter()
            .map(|(tr, w)| {
                upto = upto.saturating_add(w);
                Dest { tr, upto }
            })
            .collect())
    };
    let dests = finish(plain)?;
    let mut by_cluster = BTreeMap::new();
    for (cl, v) in scoped {
        by_cluster.insert(cl, finish(v)?);
    }
    Ok(Mapping {
        src: c.src.clone(),
        wildcard,
        dests,
        by_cluster,
    })
}

/// An account's mappings as the publish path reads them: one flag to test, the list behind
/// a lock only when there is one.
#[derive(Debug, Default)]
pub struct AccountMappings {
    any: AtomicBool,
    list: RwLock<Option<Arc<Mappings>>>,
}

impl AccountMappings {
    /// Install (or clear, with `None` or an empty list) the account's mappings.
    pub fn set(&self, m: Option<Mappings>) {
        let m = m.filter(|m| !m.is_empty()).map(Arc::new);
        self.any.store(m.is_some(), Relaxed);
        *self.list.write().unwrap_or_else(|e| e.into_inner()) = m;
    }

    /// The mapped subject for `subject` (bytes off the wire), if a mapping applies and
    /// changes it.
    pub fn map(&self, subject: &[u8], cluster: &dyn Fn() -> String) -> Option<Vec<u8>> {
        if !self.any.load(Relaxed) {
            return None;
        }
        let list = self
            .list
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()?;
        let s = std::str::from_utf8(subject).ok()?;
        list.select_with(s, cluster)
            .filter(|m| m.as_bytes() != subject)
            .map(String::into_bytes)
    }
}

impl AccountMappings {
    /// Every mapping's source subject (what a hub tells its leaves it takes: nats-server
    /// puts them in each leaf's subject map, `forceAddToSmap`).
    pub fn sources(&self) -> Vec<String> {
        self.current()
            .map(|l| l.list.iter().map(|m| m.src.clone()).collect())
            .unwrap_or_default()
    }

    /// Whether `subject` is a mapping's source, exactly.
    pub fn is_source(&self, subject: &[u8]) -> bool {
        self.current()
            .is_some_and(|l| l.list.iter().any(|m| m.src.as_bytes() == subject))
    }

    fn current(&self) -> Option<Arc<Mappings>> {
        if !self.any.load(Relaxed) {
            return None;
        }
        self.list.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Give every account of the server its configured mappings (none for the others).
pub fn install(accounts: &crate::account::Accounts, opts: &crate::config::Options) {
    for acc in accounts.all() {
        let m = opts.account_mappings.get(&acc.name).map(|c| {
            Mappings::build(c).unwrap_or_else(|e| {
                // Checked when the config was read; a bad one applies no mapping.
                tracing::error!("Account {:?}: subject mappings: {e}", acc.name);
                Mappings::default()
            })
        });
        acc.mappings.set(m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dest(subject: &str, weight: u8, cluster: Option<&str>) -> MapDest {
        MapDest {
            subject: subject.into(),
            weight,
            cluster: cluster.map(str::to_string),
        }
    }

    fn weighted(src: &str, dests: Vec<MapDest>) -> Result<Mappings, String> {
        Mappings::build(&[MappingConfig {
            src: src.into(),
            dests,
        }])
    }

    #[test]
    fn simple_and_wildcard_mappings() {
        let m = Mappings::build(&[
            MappingConfig::simple("foo", "bar"),
            MappingConfig::simple("orders.*.*", "o.$2.$1"),
        ])
        .expect("valid");
        assert_eq!(m.select("foo", "").as_deref(), Some("bar"));
        assert_eq!(m.select("foo.x", ""), None);
        assert_eq!(m.select("orders.a.b", "").as_deref(), Some("o.b.a"));
        assert_eq!(m.select("orders.a", ""), None);
    }

    #[test]
    fn weights_split_traffic_and_the_rest_stays() {
        let m = weighted("w", vec![dest("a", 30, None), dest("b", 30, None)]).expect("valid");
        let mut seen = BTreeMap::new();
        for _ in 0..3000 {
            *seen.entry(m.select("w", "").expect("mapped")).or_insert(0) += 1;
        }
        // 30/30/40 of 3000: each far from 0 and from all.
        assert_eq!(seen.len(), 3, "{seen:?}");
        for (k, n) in &seen {
            assert!((500..1500).contains(n), "{k}: {n} of 3000");
        }
        // Listing the source itself means the remainder is dropped (no implicit entry).
        let m = weighted("w", vec![dest("a", 50, None), dest("w", 10, None)]).expect("valid");
        let mut none = 0;
        for _ in 0..2000 {
            if m.select("w", "").is_none() {
                none += 1;
            }
        }
        assert!(none > 0, "40% matches no destination");
    }

    #[test]
    fn cluster_scoped_destinations_replace_the_others_on_that_cluster() {
        let m = weighted(
            "c",
            vec![dest("all", 100, None), dest("east", 100, Some("E"))],
        )
        .expect("valid");
        assert_eq!(m.select("c", "E").as_deref(), Some("east"));
        assert_eq!(m.select("c", "W").as_deref(), Some("all"));
        assert_eq!(m.select("c", "").as_deref(), Some("all"));
    }

    #[test]
    fn nats_server_checks() {
        let err = |r: Result<Mappings, String>| r.expect_err("refused");
        assert_eq!(
            err(weighted(
                "x",
                vec![dest("a", 60, None), dest("b", 50, None)]
            )),
            "total weight needs to be <= 100"
        );
        assert_eq!(
            err(weighted("x", vec![dest("a", 101, None)])),
            "individual weights need to be <= 100"
        );
        assert_eq!(
            err(weighted(
                "x",
                vec![dest("a", 10, None), dest("a", 10, None)]
            )),
            "duplicate entry for \"a\""
        );
        // Per cluster, the totals are separate.
        weighted("x", vec![dest("a", 100, None), dest("b", 100, Some("C"))]).expect("valid");
    }

    #[test]
    fn a_later_mapping_of_the_same_source_replaces_the_earlier() {
        let m = Mappings::build(&[
            MappingConfig::simple("foo", "bar"),
            MappingConfig::simple("foo", "baz"),
        ])
        .expect("valid");
        assert_eq!(m.select("foo", "").as_deref(), Some("baz"));
    }

    #[test]
    fn account_mappings_report_only_changes() {
        let a = AccountMappings::default();
        assert_eq!(a.map(b"foo", &String::new), None);
        a.set(Some(
            Mappings::build(&[MappingConfig::simple("foo.*", "foo.$1")]).expect("valid"),
        ));
        assert_eq!(a.map(b"foo.x", &String::new), None);
        a.set(Some(
            Mappings::build(&[MappingConfig::simple("foo", "bar")]).expect("valid"),
        ));
        assert_eq!(a.map(b"foo", &String::new).as_deref(), Some(&b"bar"[..]));
        a.set(None);
        assert_eq!(a.map(b"foo", &String::new), None);
    }
}
