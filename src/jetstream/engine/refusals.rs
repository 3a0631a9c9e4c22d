//! API requests refused before they reach a handler: accounts without JetStream, and
//! requests that need a newer JetStream API level than natsd offers.

use super::{err_json, Engine};
use crate::jetstream::consumer::Cx;
use crate::jetstream::types::{header, ApiError};
use crate::jetstream::{advisory, Event};
use crate::server::ServerShared;
use std::sync::Arc;

/// The JetStream API level natsd implements (nats-server's `JSApiLevel`; 2.11 brought level
/// 1). A request whose `Nats-Required-Api-Level` header asks for more is refused.
pub const API_LEVEL: u32 = 0;
/// The header that asks for a minimum API level.
const REQUIRED_LEVEL: &str = "Nats-Required-Api-Level";

/// The response type (and the fields an error answer carries beside `error`) of the
/// request `t` (the subject's tokens after `$JS.API.`); `None`: no answer. `system`: the
/// system account, which answers everything but INFO as one type (2.15.1).
fn response_type(t: &[&str], system: bool) -> Option<(&'static str, &'static str)> {
    Some(match t {
        ["INFO"] => ("account_info_response", ""),
        ["ACCOUNT", ..] => return None, // a malformed purge: 2.15.1 is silent too
        _ if system => ("system_response", ""),
        ["STREAM", "CREATE", ..] => ("stream_create_response", ""),
        ["STREAM", "UPDATE", ..] => ("stream_update_response", ""),
        ["STREAM", "INFO", ..] => (
            "stream_info_response",
            "\"total\":0,\"offset\":0,\"limit\":0",
        ),
        ["STREAM", "DELETE", ..] => ("stream_delete_response", ""),
        ["STREAM", "PURGE", ..] => ("stream_purge_response", "\"purged\":0"),
        ["STREAM", "SNAPSHOT", ..] => ("stream_snapshot_response", ""),
        ["STREAM", "RESTORE", ..] => ("stream_restore_response", "\"deliver_subject\":\"\""),
        ["STREAM", "NAMES"] => (
            "stream_names_response",
            "\"total\":0,\"offset\":0,\"limit\":0,\"streams\":null",
        ),
        ["STREAM", "LIST"] => (
            "stream_list_response",
            "\"total\":0,\"offset\":0,\"limit\":0,\"streams\":null",
        ),
        ["STREAM", "TEMPLATE", "NAMES"] => (
            "stream_template_names_response",
            "\"total\":0,\"offset\":0,\"limit\":0,\"streams\":null",
        ),
        ["STREAM", "TEMPLATE", op @ ("CREATE" | "INFO" | "DELETE"), _] => match *op {
            "CREATE" => ("stream_template_create_response", ""),
            "INFO" => ("stream_template_info_response", ""),
            _ => ("stream_template_delete_response", ""),
        },
        ["STREAM", "MSG", "GET", ..] => ("stream_msg_get_response", ""),
        ["STREAM", "MSG", "DELETE", ..] => ("stream_msg_delete_response", ""),
        ["CONSUMER", "CREATE", ..] | ["CONSUMER", "DURABLE", "CREATE", ..] => {
            ("consumer_create_response", "")
        }
        ["CONSUMER", "INFO", ..] => ("consumer_info_response", ""),
        ["CONSUMER", "DELETE", ..] => ("consumer_delete_response", ""),
        ["CONSUMER", "NAMES", ..] => ("consumer_names_response", ""),
        ["CONSUMER", "LIST", ..] => ("consumer_list_response", ""),
        _ => return None,
    })
}

/// Answer request `ev` with error `e`, typed for its subject.
fn refuse(srv: &Arc<ServerShared>, ev: &Event, e: &ApiError) {
    let (Some(reply), Some(acc)) = (ev.reply.as_deref(), srv.accounts.get(&ev.acc)) else {
        return;
    };
    let rest = ev.subject.strip_prefix("$JS.API.").unwrap_or("");
    let t: Vec<&str> = rest.split('.').collect();
    let system = acc.name == srv.system_account_name();
    let Some((ty, extra)) = response_type(&t, system) else {
        return;
    };
    let cx = Cx::new(srv, &acc);
    let out = err_json(ty, e, extra);
    cx.send(reply, None, None, out.as_bytes());
    advisory::api_audit(&cx, &ev.subject, &ev.payload, &out);
}

impl Engine {
    /// A request in an account without JetStream: 503 10039.
    pub(super) fn not_enabled(srv: &Arc<ServerShared>, ev: &Event) {
        let e = ApiError::new(503, 10039, "JetStream not enabled for account");
        refuse(srv, ev, &e);
    }

    /// A request that needs a newer API level (nats-server's `errorOnRequiredApiLevel`):
    /// answered 412 10185, as nats-server answers a level above its own — a 2.11+ mirror
    /// or source then asks again without the newer consumer options. `true`: handled (in
    /// a cluster only the meta leader answers; the others drop it).
    pub(super) fn api_level_refused(&self, srv: &Arc<ServerShared>, ev: &Event) -> bool {
        let Some(level) = header(ev.header.as_deref(), REQUIRED_LEVEL) else {
            return false;
        };
        // nats-server: an empty value asks for nothing; one that is not a number is refused.
        if level.is_empty()
            || level
                .parse::<i64>()
                .is_ok_and(|l| l <= i64::from(API_LEVEL))
        {
            return false;
        }
        if self.cluster.as_ref().is_some_and(|c| !c.is_meta_leader()) {
            return true;
        }
        let e = ApiError::new(412, 10185, "JetStream minimum api level required");
        refuse(srv, ev, &e);
        true
    }
}
