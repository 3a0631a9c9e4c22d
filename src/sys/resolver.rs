//! The full (NATS-based) account resolver, as nats-server's `DirAccResolver` runs it
//! (`accounts.go` `DirAccResolver.Start`): account JWTs live in a directory
//! (`jwt/store.rs`) and are managed through the system account, so the same requests reach
//! natsd and nats-server nodes alike:
//! - `$SYS.REQ.ACCOUNT.<key>.CLAIMS.UPDATE`, `$SYS.ACCOUNT.<key>.CLAIMS.UPDATE` and
//!   `$SYS.REQ.CLAIMS.UPDATE`: store a pushed account JWT (`jwt updated`);
//! - `$SYS.REQ.ACCOUNT.<key>.CLAIMS.LOOKUP`: answer with the stored JWT (empty: none);
//! - `$SYS.REQ.CLAIMS.LIST`: the stored account keys;
//! - `$SYS.REQ.CLAIMS.DELETE`: with `allow_delete`, the operator's signed request to delete
//!   accounts;
//! - `$SYS.REQ.CLAIMS.PACK` (queue group `responder`): a server sends the hash of its store
//!   every `interval`; one server that holds a different set answers with its JWTs, one
//!   `key|jwt` per message, then an empty message; the asker keeps the newer of each.
//!
//! Every change of the store is applied to the running accounts
//! (`server/jwt_accounts.rs`).

use super::Sys;
use crate::account::{Handler, Subscription};
use crate::config::{FullResolver, Resolver};
use crate::deliver::Msg;
use crate::jwt::store::{Delete, DirStore};
use crate::jwt::{self, Kind};
use crate::server::ServerShared;
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

const UPDATE: [&str; 3] = [
    "$SYS.REQ.ACCOUNT.*.CLAIMS.UPDATE",
    "$SYS.ACCOUNT.*.CLAIMS.UPDATE",
    "$SYS.REQ.CLAIMS.UPDATE",
];
const LOOKUP: &str = "$SYS.REQ.ACCOUNT.*.CLAIMS.LOOKUP";
const PACK: &str = "$SYS.REQ.CLAIMS.PACK";
const LIST: &str = "$SYS.REQ.CLAIMS.LIST";
const DELETE: &str = "$SYS.REQ.CLAIMS.DELETE";

/// The first pack request after startup. nats-server sends its first one after `interval`
/// and fetches an unknown account from the others when one of its users connects; natsd does
/// not fetch, so it asks early instead.
const FIRST_PACK: std::time::Duration = std::time::Duration::from_millis(500);

/// The running full resolver.
pub struct DirResolver {
    store: Mutex<DirStore>,
    opts: FullResolver,
    /// Where the answers to this server's pack requests come.
    pack_inbox: String,
    /// Changes saved to the store so far (each bumps it after its save).
    saved: AtomicU64,
    /// Held while the store is applied; the count of saved changes the last applied
    /// snapshot included. Concurrent pushes apply in turn, so an older snapshot never
    /// undoes a newer one, and a push whose change a later snapshot already carried waits
    /// for that apply instead of repeating it (a burst of N pushes costs a few applies, not N).
    applied: Mutex<u64>,
}

/// What a request handler needs: the server, the system services and the resolver.
#[derive(Clone)]
struct Ctx {
    srv: Weak<ServerShared>,
    sys: Weak<Sys>,
    res: Arc<DirResolver>,
}

impl DirResolver {
    fn store(&self) -> MutexGuard<'_, DirStore> {
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Start the full resolver when the server runs one: store the preloads, subscribe to the
/// requests, and compare stores with the other servers every `interval`.
pub fn start(srv: &Arc<ServerShared>, sys: &Arc<Sys>, subs: &mut Vec<Arc<Subscription>>) {
    let Some(op) = srv.opts.operator.as_ref() else {
        return;
    };
    let Some(Resolver::Full(opts)) = op.resolver.clone() else {
        return;
    };
    let delete = match (opts.allow_delete, opts.hard_delete) {
        // nats-server's cache store removes what it drops (and deletes).
        _ if opts.cache.is_some() => Delete::Hard,
        (false, _) => Delete::No,
        (true, false) => Delete::Rename,
        (true, true) => Delete::Hard,
    };
    let opened = DirStore::open(&opts.dir, delete, opts.limit);
    let mut store = match opened.map(|s| {
        if opts.cache.is_some() {
            s.evicting()
        } else {
            s
        }
    }) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("DirResolver - {}: {e}", opts.dir.display());
            return;
        }
    };
    // The preloads (already merged with the directory at startup) go to the directory.
    for (k, t) in &op.preload {
        if let Err(e) = store.save_if_newer(k, t) {
            tracing::error!("DirResolver - storing preloaded account {k}: {e}");
        }
    }
    let res = Arc::new(DirResolver {
        store: Mutex::new(store),
        pack_inbox: format!("{}jwtpack", sys.inbox_prefix),
        saved: AtomicU64::new(0),
        applied: Mutex::new(0),
        opts,
    });
    let _ = srv.resolver.set(res.clone());
    let ctx = Ctx {
        srv: Arc::downgrade(srv),
        sys: Arc::downgrade(sys),
        res: res.clone(),
    };
    let mut sub = |subject: &str, queue: Option<&str>, f: fn(&Ctx, Req)| {
        let c = ctx.clone();
        let h: Handler = Arc::new(move |_, m: &Msg<'_>| {
            let req = Req {
                subject: String::from_utf8_lossy(m.subject).into_owned(),
                reply: m.reply.map(|r| String::from_utf8_lossy(r).into_owned()),
                payload: m.payload.to_vec(),
            };
            let Some(srv) = c.srv.upgrade() else { return };
            let c = c.clone();
            // Applying the store verifies every account JWT: off the async workers.
            srv.tasks.spawn(async move {
                let _ = tokio::task::spawn_blocking(move || f(&c, req)).await;
            });
        });
        match srv.subscribe_internal(&sys.acc, subject, queue, h) {
            Ok(s) => subs.push(s),
            Err(e) => tracing::error!("DirResolver - subscribing to {subject}: {e}"),
        }
    };
    for s in UPDATE {
        sub(s, None, update);
    }
    sub(LIST, None, list);
    sub(DELETE, None, delete_accounts);
    if let Some(ttl) = res.opts.cache {
        // A cache answers no lookups and syncs no packs; it forgets JWTs after `ttl`.
        if !ttl.is_zero() {
            srv.tasks.spawn(expire(srv.clone(), res.clone(), ttl));
        }
        tracing::info!(
            "Managing some jwt in exclusive directory {}",
            res.store().dir().display()
        );
        return;
    }
    sub(LOOKUP, None, lookup);
    sub(PACK, Some("responder"), pack);
    sub(&res.pack_inbox.clone(), None, merge);
    let (srv2, wsys) = (srv.clone(), Arc::downgrade(sys));
    srv.tasks.spawn(async move {
        let srv = srv2;
        // Soon after startup, then doubling up to `interval`: a server that joins with an
        // empty (or old) directory catches up within seconds of its routes forming.
        let every = res.opts.interval;
        let mut wait = FIRST_PACK.min(every);
        loop {
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = srv.shutdown_signal() => return,
            }
            wait = (wait * 2).min(every);
            let Some(sys) = wsys.upgrade() else { return };
            let hash = res.store().hash();
            tracing::debug!("DirResolver - Checking store state: {}", hex(&hash));
            // Not to this server's own responder (it holds the same set): one of the others.
            sys.publish_to_others(&srv, PACK, Some(&res.pack_inbox), &hash);
        }
    });
    tracing::info!(
        "Managing all jwt in exclusive directory {}",
        ctx.res.store().dir().display()
    );
}

/// A cache's `ttl`: JWTs stored longer ago are removed (and their accounts with them), as
/// nats-server's expiring store does.
async fn expire(srv: Arc<ServerShared>, res: Arc<DirResolver>, ttl: std::time::Duration) {
    let every = (ttl / 2).clamp(
        std::time::Duration::from_millis(100),
        std::time::Duration::from_secs(60),
    );
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = srv.shutdown_signal() => return,
        }
        let gone: Vec<String> = {
            let mut store = res.store();
            let keys = store.expired(ttl);
            keys.into_iter()
                .filter(|k| store.remove(k).unwrap_or(false))
                .collect()
        };
        if gone.is_empty() {
            continue;
        }
        tracing::debug!("DirResolver - cache expired {gone:?}");
        let (srv2, res2) = (srv.clone(), res.clone());
        let _ = tokio::task::spawn_blocking(move || apply(&srv2, &res2)).await;
    }
}

/// One request, copied out of the delivery.
struct Req {
    subject: String,
    reply: Option<String>,
    payload: Vec<u8>,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// nats-server's `respondToUpdate`: logged, and answered when there is a reply subject.
fn respond(ctx: &Ctx, reply: Option<&str>, acc: &str, msg: &str, err: Option<String>) {
    let (Some(srv), Some(sys)) = (ctx.srv.upgrade(), ctx.sys.upgrade()) else {
        return;
    };
    let mut body = json!({"server": sys.server_info(&srv)});
    match &err {
        None => {
            if acc.is_empty() {
                tracing::debug!("{msg}");
            } else {
                tracing::debug!("{msg} - {acc}");
            }
            body["data"] = json!({"account": acc, "code": 200, "message": msg});
        }
        Some(e) => {
            if acc.is_empty() {
                tracing::error!("{msg} - {e}");
            } else {
                tracing::error!("{msg} - {acc} - {e}");
            }
            let mut error = json!({"code": 500, "description": format!("{msg} - {e}")});
            if !acc.is_empty() {
                error["account"] = json!(acc);
            }
            body["error"] = error;
        }
    }
    if let Some(r) = reply {
        if let Some(o) = body["data"].as_object_mut().filter(|_| acc.is_empty()) {
            o.remove("account");
        }
        sys.publish(&srv, r, None, body.to_string().as_bytes());
    }
}

/// The store changed: the accounts follow.
fn changed(ctx: &Ctx) {
    let Some(srv) = ctx.srv.upgrade() else { return };
    apply(&srv, &ctx.res);
}

fn apply(srv: &Arc<ServerShared>, res: &DirResolver) {
    let mine = res.saved.fetch_add(1, Ordering::AcqRel) + 1;
    let mut applied = res.applied.lock().unwrap_or_else(|e| e.into_inner());
    if *applied >= mine {
        return; // an apply that began after our save carried it
    }
    // Every change counted up to here was saved before it was counted.
    let upto = res.saved.load(Ordering::Acquire);
    let all = res.store().all().clone();
    srv.apply_account_jwts(&all);
    *applied = upto;
}

/// Whether this server runs the full resolver and its directory lacks account `key` (a
/// user of it may be served once [`fetch`] found it).
pub fn may_fetch(srv: &ServerShared, key: &str) -> bool {
    if srv.url_resolver.get().is_some() {
        return super::url_resolver::may_fetch(srv, key);
    }
    srv.resolver
        .get()
        .is_some_and(|r| r.store().get(key).is_none())
}

/// nats-server's `DirAccResolver.Fetch` of an account the directory lacks, as a user of it
/// connects: ask every server (`$SYS.REQ.ACCOUNT.<key>.CLAIMS.LOOKUP`), take the first
/// answer within `timeout` that is an account JWT for `key`, store and apply it. True: the
/// account is now served.
pub async fn fetch(srv: &Arc<ServerShared>, key: &str) -> bool {
    if srv.url_resolver.get().is_some() {
        return super::url_resolver::fetch(srv, key).await;
    }
    let (Some(res), Some(sys)) = (srv.resolver.get().cloned(), srv.sys.get()) else {
        return false;
    };
    let valid = |b: &bytes::Bytes| {
        let token = String::from_utf8_lossy(b).trim().to_string();
        jwt::decode(&token, Kind::Account)
            .ok()
            .filter(|c| c.subject == key && c.validation_issues().is_none())
            .map(|_| token)
    };
    let subject = format!("$SYS.REQ.ACCOUNT.{key}.CLAIMS.LOOKUP");
    let timeout = res.opts.timeout;
    let answers = sys
        .gather(srv, &subject, b"", timeout, |got| {
            got.last().and_then(valid).is_some()
        })
        .await;
    let Some(token) = answers.iter().find_map(valid) else {
        tracing::debug!("DirResolver - fetching account {key}: no server has it");
        return false;
    };
    match res.store().save_if_newer(key, &token) {
        Ok(true) => {}
        Ok(false) => return true, // stored meanwhile (a push), and applied by it
        Err(e) => {
            tracing::error!("DirResolver - storing fetched account {key}: {e}");
            return false;
        }
    }
    tracing::debug!("DirResolver - fetched account {key}");
    let srv = srv.clone();
    let applied = tokio::task::spawn_blocking(move || apply(&srv, &res)).await;
    applied.is_ok()
}

fn update(ctx: &Ctx, req: Req) {
    let reply = req.reply.as_deref();
    let token = String::from_utf8_lossy(&req.payload).trim().to_string();
    let t: Vec<&str> = req.subject.split('.').collect();
    let named = match t[..] {
        ["$SYS", "REQ", "ACCOUNT", key, "CLAIMS", "UPDATE"] => Some(key),
        ["$SYS", "ACCOUNT", key, "CLAIMS", "UPDATE"] => Some(key),
        ["$SYS", "REQ", "CLAIMS", "UPDATE"] => None,
        _ => return,
    };
    // A cache words its answers its own way and takes updates of what it holds only.
    let cache = ctx.res.opts.cache.is_some();
    let (err, invalid, done) = if cache {
        (
            "jwt update cache resulted in error",
            "jwt update cache validation failed",
            "jwt updated cache",
        )
    } else {
        (
            "jwt update resulted in error",
            "jwt validation failed",
            "jwt updated",
        )
    };
    let claim = match jwt::decode(&token, Kind::Account) {
        Ok(c) => c,
        Err(e) => return respond(ctx, reply, "n/a", err, Some(e)),
    };
    let key = named.unwrap_or(&claim.subject);
    if claim.subject != key {
        let e = "subject does not match jwt content".to_string();
        return respond(ctx, reply, key, err, Some(e));
    }
    if cache && ctx.res.store().get(key).is_none() {
        return respond(ctx, reply, key, "jwt update cache skipped", None);
    }
    if let Some(why) = claim.validation_issues() {
        let e = format!("validation errors: [{why}]");
        return respond(ctx, reply, &claim.subject, invalid, Some(e));
    }
    let saved = ctx.res.store().save(key, &token);
    match saved {
        Err(e) => respond(ctx, reply, key, err, Some(e)),
        Ok(changes) => {
            if changes {
                changed(ctx);
            }
            respond(ctx, reply, key, done, None);
        }
    }
}

fn lookup(ctx: &Ctx, req: Req) {
    let Some(reply) = req.reply else { return };
    let t: Vec<&str> = req.subject.split('.').collect();
    let ["$SYS", "REQ", "ACCOUNT", key, "CLAIMS", "LOOKUP"] = t[..] else {
        return;
    };
    let (Some(srv), Some(sys)) = (ctx.srv.upgrade(), ctx.sys.upgrade()) else {
        return;
    };
    let found = ctx.res.store().get(key).map(str::to_string);
    if found.is_none() {
        // An empty answer tells the asker there is none here.
        tracing::debug!("DirResolver - Could not find account {key:?}");
    }
    sys.publish(&srv, &reply, None, found.unwrap_or_default().as_bytes());
}

fn pack(ctx: &Ctx, req: Req) {
    let Some(reply) = req.reply else { return };
    let (Some(srv), Some(sys)) = (ctx.srv.upgrade(), ctx.sys.upgrade()) else {
        return;
    };
    let (ours, lines) = {
        let s = ctx.res.store();
        (s.hash(), s.pack())
    };
    if req.payload == ours {
        tracing::debug!("DirResolver - Pack request matches hash {}", hex(&ours));
    } else {
        for l in &lines {
            sys.publish(&srv, &reply, None, l.as_bytes());
        }
        tracing::debug!(
            "DirResolver - Pack request hash {} - finished responding with hash {}",
            hex(&req.payload),
            hex(&ours)
        );
    }
    sys.publish(&srv, &reply, None, b"");
}

fn merge(ctx: &Ctx, req: Req) {
    if req.payload.is_empty() {
        return;
    }
    let text = String::from_utf8_lossy(&req.payload);
    let merged = ctx.res.store().merge(&text);
    match merged {
        Ok(keys) if !keys.is_empty() => {
            tracing::debug!("DirResolver - Merging changed {keys:?}");
            changed(ctx);
        }
        Ok(_) => {}
        Err(e) => tracing::error!("DirResolver - Merging resulted in error: {e}"),
    }
}

fn list(ctx: &Ctx, req: Req) {
    let Some(reply) = req.reply else { return };
    let (Some(srv), Some(sys)) = (ctx.srv.upgrade(), ctx.sys.upgrade()) else {
        return;
    };
    let ids: Vec<String> = ctx.res.store().all().keys().cloned().collect();
    tracing::debug!("list request responded with {} account ids", ids.len());
    let body = json!({"server": sys.server_info(&srv), "data": ids});
    sys.publish(&srv, &reply, None, body.to_string().as_bytes());
}

/// The operator's request to delete accounts (nats-server's `handleDeleteRequest`): a
/// generic JWT the operator (or one of its signing keys) signed about itself, listing
/// `accounts` in its `nats` data.
fn delete_accounts(ctx: &Ctx, req: Req) {
    let reply = req.reply.as_deref();
    let Some(srv) = ctx.srv.upgrade() else { return };
    let token = String::from_utf8_lossy(&req.payload).trim().to_string();
    let checked = check_delete(&srv, &ctx.res, &token);
    let keys = match checked {
        Ok(keys) => keys,
        Err((subject, e)) => {
            let msg = format!("delete accounts request by {subject} failed");
            return respond(ctx, reply, "", &msg, Some(e));
        }
    };
    let (mut done, mut errs) = (0, Vec::new());
    for k in &keys {
        match ctx.res.store().delete(k) {
            Ok(_) => done += 1,
            Err(e) => errs.push(e),
        }
    }
    changed(ctx);
    if errs.is_empty() {
        respond(ctx, reply, "", &format!("deleted {done} accounts"), None);
    } else {
        let msg = format!("deleted {done} accounts, failed for {}", errs.len());
        respond(ctx, reply, "", &msg, Some(errs.join("\n")));
    }
}

/// The accounts to delete, or who asked and why not.
type DeleteCheck = Result<Vec<String>, (String, String)>;

fn check_delete(srv: &ServerShared, res: &DirResolver, token: &str) -> DeleteCheck {
    let g = jwt::decode_generic(token).map_err(|e| (String::new(), e))?;
    let s = |k: &str| g[k].as_str().unwrap_or("").to_string();
    let (subject, issuer) = (s("sub"), s("iss"));
    let fail = |e: &str| Err((subject.clone(), e.to_string()));
    if !res.opts.allow_delete {
        return fail("delete must be enabled in server config");
    }
    if subject != issuer {
        return fail("not self signed");
    }
    if !operator_keys(srv).contains(&issuer) {
        return fail("not trusted");
    }
    let Some(list) = g["nats"]["accounts"].as_array() else {
        return fail("malformed request");
    };
    let sys = srv.system_account_name();
    let mut keys = Vec::new();
    for v in list {
        match v.as_str() {
            Some(k) if crate::jwt::store::is_account_key(k) && k != sys => keys.push(k.to_string()),
            Some(k) if k == sys => return fail("not allowed to delete system account"),
            _ => return fail("malformed request"),
        }
    }
    Ok(keys)
}

/// The first trusted operator's key and its signing keys (nats-server's `getOperatorKeys`).
fn operator_keys(srv: &ServerShared) -> Vec<String> {
    let live = srv.live_opts();
    let Some(op) = live.operator.as_ref() else {
        return Vec::new();
    };
    op.operators
        .first()
        .and_then(|t| jwt::decode(t, Kind::Operator).ok())
        .map(|c| {
            let mut keys = c.signing_keys();
            if c.nats["strict_signing_key_usage"].as_bool() != Some(true) {
                keys.push(c.subject.clone());
            }
            keys
        })
        .unwrap_or_default()
}
