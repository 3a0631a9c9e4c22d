//! Account `exports` and `imports` (streams and services) as options, the subject mapping an
//! import applies, and the cross-account checks nats-server 2.9 makes when it adds imports
//! (texts as nats-server prints them; see `docs/nats-server-behaviour.md`).

use crate::subject;
use std::collections::BTreeMap;
use std::time::Duration;

/// How long a service export's response mapping lives when nothing says otherwise
/// (nats-server's `DEFAULT_SERVICE_EXPORT_RESPONSE_THRESHOLD`).
pub const DEFAULT_RESPONSE_THRESHOLD: Duration = Duration::from_secs(120);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkKind {
    Stream,
    Service,
}

impl LinkKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LinkKind::Stream => "stream",
            LinkKind::Service => "service",
        }
    }
}

/// How many responses one request to a service export may get.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ResponseType {
    /// One: the mapping ends with the first response.
    #[default]
    Singleton,
    /// Several, until the response threshold.
    Stream,
    /// Several, until the response threshold.
    Chunked,
}

impl ResponseType {
    /// The name `/accountz` shows (nats-server's jwt `ResponseType`).
    pub fn jwt_name(self) -> &'static str {
        match self {
            ResponseType::Singleton => "Singleton",
            ResponseType::Stream => "Streamed",
            ResponseType::Chunked => "Chunked",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Export {
    pub kind: LinkKind,
    pub subject: String,
    /// Only these accounts may import it; `None` means every account.
    pub accounts: Option<Vec<String>>,
    pub response_type: ResponseType,
    pub response_threshold: Option<Duration>,
    /// Services: a traced request keeps being traced in the exporting account
    /// (`allow_trace`, nats-server 2.11+).
    pub allow_trace: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Import {
    pub kind: LinkKind,
    /// The exporting account.
    pub account: String,
    /// The subject in the exporting account.
    pub subject: String,
    /// Streams: messages appear under `prefix.<subject>`.
    pub prefix: Option<String>,
    /// Streams: the subject messages appear under; services: the local subject requests are
    /// published to.
    pub to: Option<String>,
    /// Streams: a traced message keeps being traced in the importing account
    /// (`allow_trace`, nats-server 2.11+).
    pub allow_trace: bool,
    /// Services: the requester's details go with the request (nats-server's `share`; set by
    /// natsd only on the `$JS.API.>` import of a server without JetStream).
    pub share: bool,
}

impl Import {
    /// The subject in the importing account: where a stream's messages appear, or where a
    /// service's requests are published.
    pub fn local_subject(&self) -> String {
        match (self.kind, &self.prefix, &self.to) {
            (LinkKind::Stream, Some(p), _) => format!("{p}.{}", self.subject),
            (_, _, Some(to)) => to.clone(),
            _ => self.subject.clone(),
        }
    }
}

/// One account's exports and imports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AccountLinks {
    pub exports: Vec<Export>,
    pub imports: Vec<Import>,
}

/// Links by account name (only accounts that have some).
pub type Links = BTreeMap<String, AccountLinks>;

/// A failed check, and where it points: the account and its import (or export) index.
#[derive(Debug, PartialEq, Eq)]
pub struct LinkError {
    pub account: String,
    pub import: Option<usize>,
    pub export: Option<usize>,
    pub msg: String,
}

/// Map `subj` (matched by `from`) onto `to`: the tokens `from`'s wildcards matched fill `to`'s
/// wildcards in order (a `>` takes the rest). A literal `to` is the result as is. `subj` may
/// itself hold wildcards (a subscription's subject), which are carried over.
pub fn map_subject(from: &str, to: &str, subj: &str) -> String {
    if !subject::has_wildcard(to.as_bytes()) {
        return to.to_string();
    }
    let st: Vec<&str> = subj.split('.').collect();
    let mut caught: Vec<String> = Vec::new();
    for (i, f) in from.split('.').enumerate() {
        match f {
            "*" => caught.push(st.get(i).copied().unwrap_or("*").to_string()),
            ">" => {
                let rest = st.get(i..).map(|r| r.join(".")).unwrap_or_default();
                caught.push(if rest.is_empty() { ">".into() } else { rest });
                break;
            }
            _ => {}
        }
    }
    let mut it = caught.into_iter();
    to.split('.')
        .map(|t| match t {
            "*" | ">" => it.next().unwrap_or_else(|| t.to_string()),
            _ => t.to_string(),
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// True when `to` can take what `from`'s wildcards match: the same number of `*` and a `>`
/// in both or neither (or `to` is literal).
fn mappable(from: &str, to: &str) -> bool {
    if !subject::has_wildcard(to.as_bytes()) {
        return true;
    }
    let count = |s: &str, w: &str| s.split('.').filter(|t| *t == w).count();
    count(from, "*") == count(to, "*") && count(from, ">") == count(to, ">")
}

fn valid(s: &str) -> bool {
    subject::is_valid_subject(s.as_bytes())
}

/// The export of `acc` that lets `importer` import `subject` of `kind`, if any.
fn authorized<'a>(
    links: &'a Links,
    acc: &str,
    kind: LinkKind,
    subject: &str,
    importer: &str,
) -> Option<&'a Export> {
    links.get(acc)?.exports.iter().find(|e| {
        e.kind == kind
            && subject::subset_match(subject.as_bytes(), e.subject.as_bytes())
            && e.accounts
                .as_ref()
                .is_none_or(|a| a.iter().any(|x| x == importer))
    })
}

/// The export an import uses (after [`validate`] passed).
pub fn export_for<'a>(links: &'a Links, importer: &str, im: &Import) -> Option<&'a Export> {
    authorized(links, &im.account, im.kind, &im.subject, importer)
}

/// Check every account's links against the accounts that exist and each other, as
/// nats-server does when it adds them.
pub fn validate(accounts: &[String], links: &Links) -> Result<(), LinkError> {
    let exists = |a: &str| a == "$G" || a == "$SYS" || accounts.iter().any(|x| x == a);
    for (name, l) in links {
        let err = |import: Option<usize>, export: Option<usize>, msg: String| LinkError {
            account: name.clone(),
            import,
            export,
            msg,
        };
        for (i, e) in l.exports.iter().enumerate() {
            if !valid(&e.subject) {
                return Err(err(
                    None,
                    Some(i),
                    format!(
                        "Error adding {} export {:?}: invalid subject",
                        e.kind.as_str(),
                        e.subject
                    ),
                ));
            }
            for a in e.accounts.iter().flatten() {
                if !exists(a) {
                    return Err(err(
                        None,
                        Some(i),
                        format!("{a:?} account not defined for {} export", e.kind.as_str()),
                    ));
                }
            }
        }
        let mut service_locals: Vec<(String, &Import)> = Vec::new();
        for (i, im) in l.imports.iter().enumerate() {
            let kind = im.kind.as_str();
            if !exists(&im.account) {
                return Err(err(
                    Some(i),
                    None,
                    format!("{:?} account not defined for {kind} import", im.account),
                ));
            }
            let adding = |what: &str| {
                err(
                    Some(i),
                    None,
                    format!("Error adding {kind} import {:?}: {what}", im.subject),
                )
            };
            // An invalid subject is never authorized (nats-server's text for it too).
            if authorized(links, &im.account, im.kind, &im.subject, name).is_none() {
                return Err(adding(&format!("{kind} import not authorized")));
            }
            match im.kind {
                LinkKind::Stream => {
                    if im.prefix.is_some() && im.to.is_some() {
                        return Err(err(
                            Some(i),
                            None,
                            "Stream import can not have a 'prefix' and a 'to' property".into(),
                        ));
                    }
                    if let Some(p) = &im.prefix {
                        if subject::has_wildcard(p.as_bytes()) {
                            return Err(adding(
                                "stream import prefix can not contain wildcard tokens",
                            ));
                        }
                        if !valid(p) {
                            return Err(adding("invalid prefix"));
                        }
                    }
                    if l.imports[..i].iter().any(|o| {
                        o.kind == LinkKind::Stream
                            && o.account == im.account
                            && o.subject == im.subject
                    }) {
                        return Err(adding("stream import already exists"));
                    }
                }
                LinkKind::Service => {}
            }
            if let Some(to) = &im.to {
                let (from, target) = match im.kind {
                    LinkKind::Stream => (&im.subject, to),
                    LinkKind::Service => (to, &im.subject),
                };
                if !valid(to) || !mappable(from, target) {
                    return Err(adding(&format!(
                        "failed to create mapping transform for {kind} import subject {to:?} to \
                         {:?}: invalid subject",
                        im.subject
                    )));
                }
            }
            if im.kind == LinkKind::Service {
                let local = im.local_subject();
                if let Some((_, prev)) = service_locals.iter().find(|(s, _)| *s == local) {
                    return Err(err(
                        Some(i),
                        None,
                        format!(
                            "Duplicate service import subject {local:?}, previously used in \
                             import for account {:?}, subject {:?}",
                            prev.account, prev.subject
                        ),
                    ));
                }
                if forms_cycle(links, (name, i), &local, &im.account, &im.subject) {
                    return Err(adding("import forms a cycle"));
                }
                service_locals.push((local, im));
            }
        }
    }
    Ok(())
}

/// True when following service imports from (`to_acc`, `to_subject`) leads back to `acc` on
/// a subject overlapping `local`: a request would go round forever. Only imports added before
/// this one count (accounts in name order, then imports in file order), so the import that
/// closes a cycle is the one refused, as nats-server refuses it while adding.
fn forms_cycle(
    links: &Links,
    (acc, idx): (&str, usize),
    local: &str,
    to_acc: &str,
    to_subject: &str,
) -> bool {
    let mut stack = vec![(to_acc.to_string(), to_subject.to_string())];
    let mut seen = 0usize;
    while let Some((a, s)) = stack.pop() {
        seen += 1;
        if seen > 10_000 {
            return true;
        }
        if a == acc && subject::overlaps(s.as_bytes(), local.as_bytes()) {
            return true;
        }
        let Some(l) = links.get(&a) else { continue };
        let added = l
            .imports
            .iter()
            .enumerate()
            .filter(|(j, _)| a.as_str() < acc || (a == acc && *j < idx));
        for (_, im) in added.filter(|(_, i)| i.kind == LinkKind::Service) {
            let il = im.local_subject();
            if subject::overlaps(il.as_bytes(), s.as_bytes()) {
                stack.push((im.account.clone(), im.subject.clone()));
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(account: &str, subject: &str, to: Option<&str>) -> Import {
        Import {
            kind: LinkKind::Service,
            account: account.into(),
            subject: subject.into(),
            prefix: None,
            allow_trace: false,
            to: to.map(Into::into),
            share: false,
        }
    }

    fn export(kind: LinkKind, subject: &str) -> Export {
        Export {
            kind,
            subject: subject.into(),
            accounts: None,
            response_type: ResponseType::Singleton,
            response_threshold: None,
            allow_trace: false,
        }
    }

    #[test]
    fn mapping() {
        assert_eq!(map_subject("x.>", "p.x.>", "x.1.2"), "p.x.1.2");
        assert_eq!(map_subject("p.x.>", "x.>", "p.x.*"), "x.*");
        assert_eq!(map_subject("s.*", "t.*", "s.a"), "t.a");
        assert_eq!(map_subject("a.*", "req.x", "a.b"), "req.x");
        assert_eq!(map_subject("a.*.b.*", "c.*.*", "a.1.b.2"), "c.1.2");
        assert!(!mappable("s.*", "t.>"));
        assert!(mappable("a.*", "req.x"));
    }

    #[test]
    fn cycle_is_refused_and_plain_mutual_imports_are_not() {
        let accounts = vec!["A".to_string(), "B".to_string()];
        let mut links = Links::new();
        links.insert(
            "A".into(),
            AccountLinks {
                exports: vec![export(LinkKind::Service, "req.x")],
                imports: vec![svc("B", "req.y", Some("req.x"))],
            },
        );
        links.insert(
            "B".into(),
            AccountLinks {
                exports: vec![export(LinkKind::Service, "req.y")],
                imports: vec![svc("A", "req.x", Some("req.y"))],
            },
        );
        let e = validate(&accounts, &links).expect_err("cycle");
        assert_eq!(
            e.msg,
            "Error adding service import \"req.x\": import forms a cycle"
        );
        assert_eq!((e.account.as_str(), e.import), ("B", Some(0)));
        links.get_mut("A").expect("A").imports = vec![svc("B", "req.y", None)];
        links.get_mut("B").expect("B").imports = vec![svc("A", "req.x", None)];
        assert_eq!(validate(&accounts, &links), Ok(()));
    }
}
