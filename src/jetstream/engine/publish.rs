//! The message path of a JetStream account: a publish into a stream (limits, the PubAck,
//! republish, interest retention, the consumers' deliveries), an acknowledgement, a flow
//! control answer.

use super::*;

impl JsAccount {
    /// Store a publish; a stored one returns its ack, to be sent after the stream's flush.
    pub(super) fn publish(
        &mut self,
        g: &Globals<'_>,
        srv: &Arc<ServerShared>,
        stream_name: &Arc<str>,
        ev: &mut Event,
    ) -> Option<PendingAck> {
        let acc = self.acc.clone();
        let cx = Cx::new(srv, &acc);
        let size = ev.msg_bytes();
        let room = crate::jetstream::limits::room(
            &self.limits,
            &self.streams,
            stream_name,
            size,
            &mut self.usage_bound,
        );
        let st = self.streams.get_mut(&**stream_name)?;
        let now = ev.ts.unwrap_or_else(now_nanos);
        let trace = ev.trace.take();
        if let Some(t) = trace.as_deref().filter(|t| t.trace_only()) {
            // Trace-only: the checks, not the store, and no PubAck.
            let hdr = ev.header.as_deref();
            match st.check(&ev.subject, hdr, size as usize, now) {
                Ok(None) => t.stored(&ev.subject, no_interest(st, &ev.subject)),
                Ok(Some(_)) => t.refused(None, MSG_ID_DUPLICATE.into()),
                Err(e) => t.refused(None, trace_error(&e, hdr)),
            }
            return None;
        }
        // The header for the trace's error text (the store takes the event's).
        let traced_hdr = trace.as_ref().and(ev.header.clone());
        // As nats-server: refused once the usage is over the limit (the message that
        // crosses it is still taken).
        let over = g.usage.is_some_and(|(mem, file)| match st.cfg.storage {
            Storage::Memory => mem as i64 > g.config.max_memory,
            Storage::File => file as i64 > g.config.max_storage,
        });
        let res = if over {
            Err(ApiError::new(503, 10023, "insufficient resources"))
        } else if let Err(e) = room {
            Err(e)
        } else if let Ok(Some(room)) = room {
            // Over the account's limit once stored: taken back (nats-server 2.9.10).
            let prev_id = st.last_msg_id.clone();
            let hdr = ev.header.clone();
            match st.accept(&ev.subject, hdr.clone(), ev.payload.clone(), now) {
                Ok(Stored::New(seq)) => crate::jetstream::limits::take_back_if_over(
                    &acc.name,
                    st,
                    room,
                    seq,
                    hdr.as_deref(),
                    prev_id,
                )
                .map(|()| Stored::New(seq)),
                other => other,
            }
        } else {
            st.accept(
                &ev.subject,
                ev.header.take(),
                std::mem::take(&mut ev.payload),
                now,
            )
        };
        if st.ack_prefix.is_empty() {
            // `{"stream":<name>[, "domain":<domain>], "seq":` — the stream's name never changes.
            let json = |s: &str| serde_json::to_string(s).unwrap_or_default();
            let domain = g.config.domain.as_deref().map(json);
            st.ack_prefix = format!(
                "{{\"stream\":{}{}, \"seq\":",
                json(&st.cfg.name),
                domain
                    .map(|d| format!(", \"domain\":{d}"))
                    .unwrap_or_default()
            );
        }
        let ack = match &res {
            Ok(Stored::New(seq)) => format!("{}{seq}}}", st.ack_prefix),
            Ok(Stored::Duplicate(seq)) => format!("{}{seq},\"duplicate\": true}}", st.ack_prefix),
            Err(e) => {
                let mut o = Obj::new();
                o.field("error", e)
                    .raw(
                        "stream",
                        &serde_json::to_string(&st.cfg.name).unwrap_or_default(),
                    )
                    .field("seq", &0);
                o.done()
            }
        };
        if let Some(t) = &trace {
            match &res {
                Ok(Stored::New(_)) => t.stored(&ev.subject, no_interest(st, &ev.subject)),
                Ok(Stored::Duplicate(_)) => t.refused(None, MSG_ID_DUPLICATE.into()),
                Err(e) => {
                    // Refused by the store itself (past the checks): nats-server names the
                    // subject.
                    let at_store = e.err_code == 10077;
                    let subject = at_store.then_some(ev.subject.as_str());
                    t.refused(subject, trace_error(e, traced_hdr.as_deref()));
                }
            }
        }
        let reply = ev.reply.as_deref().filter(|_| !st.cfg.no_ack);
        let Ok(Stored::New(seq)) = res else {
            if let Some(reply) = reply {
                cx.send(reply, None, None, ack.as_bytes());
            }
            return None;
        };
        for r in st.take_republished() {
            cx.send(&r.subject, None, Some(&r.header), &r.payload);
        }
        let reply = reply.is_some().then(|| ev.reply.take()).flatten();
        let pending = PendingAck {
            account: ev.acc.clone(),
            stream: stream_name.clone(),
            reply,
            ack,
        };
        // Interest retention keeps nothing nobody wants.
        if no_interest(st, &ev.subject) {
            let _ = st.store.remove(seq, false);
            return Some(pending);
        }
        let mut acked = Vec::new();
        for c in st.consumers.values_mut() {
            c.pump(&cx, st.store.as_ref(), &mut acked);
        }
        retire(st, &acked);
        Some(pending)
    }

    pub(super) fn ack(&mut self, srv: &Arc<ServerShared>, ev: &Event) {
        let t: Vec<&str> = ev.subject.split('.').collect();
        // $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>
        if t.len() != 9 {
            return;
        }
        let (s, c) = (t[2], t[3]);
        let Ok(seq) = t[5].parse::<u64>() else {
            return;
        };
        let (dc, dseq) = (t[4].parse().unwrap_or(0), t[6].parse().unwrap_or(0));
        let acc = self.acc.clone();
        let cx = Cx::new(srv, &acc);
        let Some(st) = self.streams.get_mut(s) else {
            return;
        };
        let Some(con) = st.consumers.get_mut(c).filter(|c| !c.passive) else {
            return;
        };
        let now = Instant::now();
        let mut done = con.ack(&cx, (seq, dseq, dc), &ev.payload, now);
        let text = std::str::from_utf8(&ev.payload).unwrap_or("").trim();
        if let Some(rest) = text.strip_prefix("+NXT") {
            if let Some(r) = ev.reply.as_deref() {
                con.add_pull(&cx, r, rest.trim().as_bytes(), now);
            }
        } else if let Some(r) = ev.reply.as_deref() {
            // A synchronous ack (`AckSync`, double ack) gets an empty answer; on a replicated
            // stream once the replicas have it (`engine/replica.rs`), so that it outlives a
            // change of leader.
            if st.replica.is_some() {
                con.ack_replies.push(r.to_string());
            } else {
                cx.send(r, None, None, b"");
            }
        }
        con.pump(&cx, st.store.as_ref(), &mut done);
        retire(st, &done);
    }

    pub(super) fn flow_control(&mut self, srv: &Arc<ServerShared>, ev: &Event) {
        let t: Vec<&str> = ev.subject.split('.').collect();
        if t.len() < 5 {
            return;
        }
        let acc = self.acc.clone();
        let cx = Cx::new(srv, &acc);
        let Some(st) = self.streams.get_mut(t[2]) else {
            return;
        };
        let Some(con) = st.consumers.get_mut(t[3]).filter(|c| !c.passive) else {
            return;
        };
        con.flow_control_reply(&ev.subject);
        let mut acked = Vec::new();
        con.pump(&cx, st.store.as_ref(), &mut acked);
        retire(st, &acked);
    }
}

/// An interest-retention stream none of whose consumers wants `subject`.
fn no_interest(st: &Stream, subject: &str) -> bool {
    st.cfg.retention == Retention::Interest && !st.consumers.values().any(|c| c.wants(subject))
}

/// nats-server's trace text for a duplicate (`errMsgIdDuplicate`).
const MSG_ID_DUPLICATE: &str = "msgid is duplicate";

/// The `error` of a traced publish's `js` entry: nats-server's own text where it differs from
/// the PubAck's (the expected-header checks), else the PubAck's description.
fn trace_error(e: &ApiError, hdr: Option<&[u8]>) -> String {
    let expected = |k: &str| crate::jetstream::types::header(hdr, k).unwrap_or_default();
    let actual = e.description.rsplit(": ").next().unwrap_or_default();
    match e.err_code {
        10071 => {
            let seq = expected("Nats-Expected-Last-Sequence");
            if !seq.is_empty() && seq != actual {
                format!("last sequence mismatch: {seq} vs {actual}")
            } else {
                let seq = expected("Nats-Expected-Last-Subject-Sequence");
                format!("last sequence by subject mismatch: {seq} vs {actual}")
            }
        }
        10070 => format!(
            "last msgid mismatch: {:?} vs {actual:?}",
            expected("Nats-Expected-Last-Msg-Id")
        ),
        _ => e.description.clone(),
    }
}
