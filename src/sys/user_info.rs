//! `$SYS.REQ.USER.INFO` (nats-server 2.10+ `userInfoReq`): a user asks who it is. Every
//! account imports it from the system account as `$SYS.REQ.USER.<acc>.INFO`, shared, so
//! the request carries `Nats-Request-Info` naming the requester's connection (`id`); this
//! server alone answers (the subscription is not advertised: the requester's server relays
//! the request) with `{"server": …, "data": {"user", "account", "account_name",
//! "user_name", "permissions", "expires"}}` — the last three only when set.

use super::account::USER_INFO_ALL;
use super::Sys;
use crate::account::{Handler, Subscription};
use crate::deliver::Msg;
use crate::server::ServerShared;
use serde_json::{json, Value};
use std::sync::Arc;

/// Subscribe, in the system account, to the requests the imports relay here.
pub fn start(srv: &Arc<ServerShared>, sys: &Arc<Sys>, subs: &mut Vec<Arc<Subscription>>) {
    let (wsrv, wsys) = (Arc::downgrade(srv), Arc::downgrade(sys));
    let h: Handler = Arc::new(move |_, m: &Msg<'_>| {
        let (Some(srv), Some(sys)) = (wsrv.upgrade(), wsys.upgrade()) else {
            return;
        };
        let Some(reply) = m.reply.map(|r| String::from_utf8_lossy(r).into_owned()) else {
            return;
        };
        let info = m.header.and_then(request_info);
        let tasks = srv.tasks.clone();
        tasks.spawn(async move {
            let body = answer(&srv, &sys, info.as_ref());
            sys.publish(&srv, &reply, None, body.to_string().as_bytes());
        });
    });
    match crate::imports::subscribe_local(&**srv, &sys.acc, USER_INFO_ALL, h) {
        Ok(s) => subs.push(s),
        Err(e) => tracing::error!("$SYS user info: {e}"),
    }
}

/// The `Nats-Request-Info` JSON of a request's header.
fn request_info(header: &[u8]) -> Option<Value> {
    let text = std::str::from_utf8(header).ok()?;
    let line = text
        .split("\r\n")
        .find_map(|l| l.strip_prefix("Nats-Request-Info:"))?;
    serde_json::from_str(line.trim()).ok()
}

fn answer(srv: &ServerShared, sys: &Sys, info: Option<&Value>) -> Value {
    let mut body = json!({"server": sys.server_info(srv)});
    let Some(info) = info else {
        body["error"] = json!({"code": 400});
        return body;
    };
    let account = info["acc"].as_str().unwrap_or_default().to_string();
    let conn = info["id"].as_u64().and_then(|cid| srv.client(cid));
    let mut data = json!({"user": "", "account": account});
    if !account.is_empty() && srv.accounts.get(&account).is_some() {
        data["account_name"] = json!(account_name(srv, &account));
    }
    if let Some(c) = conn {
        let m = c.meta().clone();
        data["user"] = json!(m.user);
        if !m.name_tag.is_empty() {
            data["user_name"] = json!(m.name_tag);
        }
        if let Some(p) = &m.permissions {
            data["permissions"] = (**p).clone();
        }
        if m.expires > 0 {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            let left = std::time::Duration::from_secs(m.expires.max(0) as u64).saturating_sub(now);
            // Whole seconds, as nats-server's `claimExpiration` (a Go duration: nanoseconds).
            if left.as_secs() > 0 {
                data["expires"] = json!(left.as_secs() * 1_000_000_000);
            }
        }
    }
    body["data"] = data;
    body
}

/// nats-server's `getNameTag`: an account JWT's `name`, else the account's name.
fn account_name(srv: &ServerShared, account: &str) -> String {
    let live = srv.live_opts();
    live.operator
        .as_ref()
        .and_then(|op| op.preload.iter().find(|(k, _)| k == account))
        .and_then(|(_, t)| crate::jwt::decode(t, crate::jwt::Kind::Account).ok())
        .map(|c| c.name)
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| account.to_string())
}
