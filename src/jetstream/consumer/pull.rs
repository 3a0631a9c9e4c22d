//! Pull requests (`$JS.API.CONSUMER.MSG.NEXT`): the request as it waits in a consumer, and
//! taking one in — parsed and checked against the consumer's limits as nats-server 2.9.10
//! does, refusals answered with its status messages.

use super::{later, nanos, Consumer, Cx};
use crate::jetstream::types::*;
use std::time::Duration;
use tokio::time::Instant;

#[derive(Debug)]
pub struct PullReq {
    pub reply: String,
    pub batch: i64,
    /// Bytes left (0: no limit).
    pub max_bytes: i64,
    pub expires: Option<Instant>,
    pub no_wait: bool,
    pub hb: Option<Duration>,
    pub last: Instant,
    pub delivered: i64,
}

impl PullReq {
    /// The `408 Request Timeout` status of an expired request, with what it still wanted.
    pub(super) fn timeout_header(&self) -> Vec<u8> {
        self.pending_header("408 Request Timeout")
    }

    /// `status` with the messages and bytes the request still wanted.
    pub(super) fn pending_header(&self, status: &str) -> Vec<u8> {
        let pm = self.batch.to_string();
        let pb = self.max_bytes.to_string();
        status_header(
            status,
            &[("Nats-Pending-Messages", &pm), ("Nats-Pending-Bytes", &pb)],
        )
    }
}

impl Consumer {
    /// Queue a pull request (`$JS.API.CONSUMER.MSG.NEXT`); answers refusals itself.
    pub fn add_pull(&mut self, cx: &Cx<'_>, reply: &str, body: &[u8], now: Instant) {
        self.last_active = now;
        let refuse = |status: &str| {
            let h = status_header(status, &[]);
            cx.send(reply, None, Some(&h), b"");
        };
        if self.is_push() {
            return refuse("409 Consumer is push based");
        }
        let text = std::str::from_utf8(body).unwrap_or("").trim();
        let (mut batch, mut expires, mut no_wait, mut max_bytes, mut hb) =
            (1i64, 0i64, false, 0i64, 0i64);
        if !text.is_empty() {
            if let Ok(n) = text.parse::<i64>() {
                batch = n;
            } else {
                match serde_json::from_str::<serde_json::Value>(text) {
                    Ok(v) if v.is_object() => {
                        let i = |k: &str| v.get(k).and_then(serde_json::Value::as_i64).unwrap_or(0);
                        batch = i("batch");
                        expires = i("expires");
                        max_bytes = i("max_bytes");
                        hb = i("idle_heartbeat");
                        no_wait = v
                            .get("no_wait")
                            .and_then(serde_json::Value::as_bool)
                            .unwrap_or(false);
                    }
                    _ => return refuse("400 Bad Request"),
                }
            }
        }
        if batch <= 0 {
            batch = 1;
        }
        if self.cfg.max_batch > 0 && batch > self.cfg.max_batch {
            return refuse(&format!(
                "409 Exceeded MaxRequestBatch of {}",
                self.cfg.max_batch
            ));
        }
        if self.cfg.max_expires > 0 && (expires == 0 || expires > self.cfg.max_expires) {
            return refuse(&format!(
                "409 Exceeded MaxRequestExpires of {}",
                crate::util::time::go_duration(nanos(self.cfg.max_expires))
            ));
        }
        if self.cfg.max_bytes > 0 && max_bytes > self.cfg.max_bytes {
            return refuse(&format!(
                "409 Exceeded MaxRequestMaxBytes of {}",
                self.cfg.max_bytes
            ));
        }
        // A heartbeat needs an expiry at least twice as long (none at all: too large too).
        if hb > 0 && (expires <= 0 || hb * 2 > expires) {
            return refuse("400 Bad Request - heartbeat value too large");
        }
        if self.waiting.len() as i64 >= self.cfg.max_waiting.max(1) {
            return refuse("409 Exceeded MaxWaiting");
        }
        self.waiting.push_back(PullReq {
            reply: reply.to_string(),
            batch,
            max_bytes,
            expires: (expires > 0).then(|| later(now, nanos(expires))),
            no_wait,
            hb: (hb > 0).then(|| nanos(hb)),
            last: now,
            delivered: 0,
        });
    }
}
