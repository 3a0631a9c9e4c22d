//! The consumer half of the `$JS.API`: create (both subject forms, durable and ephemeral,
//! with nats-server's checks in its order), info, delete, list/names; and the revival of
//! a saved consumer (after a restart or a restore).

use super::*;

impl JsAccount {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn consumer_create(
        &mut self,
        cx: &Cx<'_>,
        stream_name: &str,
        name_tok: Option<&str>,
        filter_tok: &str,
        durable_endpoint: bool,
        p: &[u8],
        ts: Option<i64>,
    ) -> Res {
        const T: &str = "consumer_create_response";
        let e = |e| (e, T);
        if p.iter().all(u8::is_ascii_whitespace) {
            return Err(e(ApiError::invalid_json()));
        }
        let req: CreateConsumerReq = body(p).map_err(e)?;
        if req.stream_name != stream_name {
            return Err(e(ApiError::stream_mismatch()));
        }
        let mut cfg = req.config;
        let mismatch = || {
            e(ApiError::new(
                400,
                10017,
                "consumer name in subject does not match durable name in request",
            ))
        };
        let name = match name_tok {
            None => {
                if !cfg.durable_name.is_empty() {
                    return Err(e(ApiError::new(
                        400,
                        10020,
                        "consumer expected to be ephemeral but a durable name was set in request",
                    )));
                }
                if cfg.name.is_empty() {
                    random_name()
                } else {
                    cfg.name.clone()
                }
            }
            Some(n) if durable_endpoint => {
                if cfg.durable_name != n {
                    return Err(mismatch());
                }
                n.to_string()
            }
            Some(n) => {
                if (!cfg.durable_name.is_empty() && cfg.durable_name != n)
                    || (!cfg.name.is_empty() && cfg.name != n)
                {
                    return Err(mismatch());
                }
                if !filter_tok.is_empty() && cfg.filter_subject != filter_tok {
                    return Err(e(ApiError::new(
                        400,
                        10131,
                        "Consumer create request did not match filtered subject from create subject",
                    )));
                }
                cfg.name = n.to_string();
                n.to_string()
            }
        };
        if !valid_name(&name) {
            return Err(e(ApiError::new(
                400,
                10127,
                "consumer name can not contain path separators",
            )));
        }
        let durable = !cfg.durable_name.is_empty();
        let st = self
            .streams
            .get_mut(stream_name)
            .ok_or(e(ApiError::stream_not_found()))?;
        let server = srv_js_limits(cx.srv);
        let sel =
            crate::jetstream::limits::select_consumer(&self.limits, &cfg, &st.cfg).map_err(e)?;
        crate::jetstream::limits::default_ack_pending(sel.limits, server.max_ack_pending, &mut cfg);
        consumer::apply_server_limits(&mut cfg, &server);
        consumer::apply_defaults(&mut cfg, !durable);
        if let Some(c) = st.consumers.get(&name) {
            if c.cfg != cfg {
                consumer::check_update(&c.cfg, &cfg).map_err(e)?;
                // A replicated consumer's group changes its size through its leader, which
                // adds or removes members (`cluster/cgroups.rs`): its first members follow
                // from its origin, whatever the count is now. A consumer created before
                // origins were recorded keeps its size.
                use super::replica_consumers::group_size;
                let resized = group_size(&c.cfg, &st.cfg) != group_size(&cfg, &st.cfg);
                if st.replica.is_some() && resized && c.origin.is_none() {
                    let m = "consumer replica count can not be updated".to_string();
                    return Err(e(ApiError::consumer_create(m)));
                }
                // nats-server (`checkNewConsumerConfig`): a push consumer is taken over with a
                // new deliver subject only while nobody listens on its current one; a client
                // binding a bound durable gets 10013 and then reads `push_bound`.
                if c.cfg.deliver_subject != cfg.deliver_subject
                    && cx.has_interest(&c.cfg.deliver_subject)
                {
                    return Err(e(ApiError::new(400, 10013, "consumer name already in use")));
                }
            }
        }
        consumer::check_server_limits(&cfg, &server).map_err(e)?;
        // In a cluster nats-server's replica checks come first (an R3 consumer of an R1
        // stream is 10126 there, not the single server's 10074).
        if st.replica.is_some() {
            consumer::check_replicated(&cfg, &st.cfg).map_err(e)?;
        }
        consumer::check(&cfg, &st.cfg, sel.limits.max_ack_pending).map_err(e)?;
        if st.cfg.retention == Retention::Workqueue {
            for (n, c) in &st.consumers {
                if *n == name {
                    continue;
                }
                if c.cfg.filter_subject.is_empty() || cfg.filter_subject.is_empty() {
                    return Err(e(ApiError::new(
                        400,
                        10099,
                        "multiple non-filtered consumers not allowed on workqueue stream",
                    )));
                }
                if crate::subject::overlaps(
                    c.cfg.filter_subject.as_bytes(),
                    cfg.filter_subject.as_bytes(),
                ) {
                    return Err(e(ApiError::new(
                        400,
                        10100,
                        "filtered consumer not unique on workqueue stream",
                    )));
                }
            }
        }
        if let Some(c) = st.consumers.get_mut(&name) {
            if c.cfg != cfg {
                consumer::check_update(&c.cfg, &cfg).map_err(e)?;
                let moved = c.cfg.deliver_subject != cfg.deliver_subject;
                c.cfg = cfg;
                c.dirty = true;
                if moved {
                    c.redeliver_all_now(tokio::time::Instant::now());
                    let mut acked = Vec::new();
                    c.pump(cx, st.store.as_ref(), &mut acked);
                    retire(st, &acked);
                }
            }
            let c = &st.consumers[&name];
            save_consumer_meta(st, c).map_err(|er| e(ApiError::consumer_create(er)))?;
            return Ok(c.info_json(st, Some(T), Some(cx)));
        }
        // The stream's own limit, or the account's (per stream, as nats-server 2.9).
        let most = crate::jetstream::limits::consumers_per_stream(sel.limits, st.cfg.max_consumers);
        if most > 0 && !cfg.direct && st.consumer_count() as i64 >= most {
            return Err(e(ApiError::new(
                400,
                10026,
                "maximum consumers limit reached",
            )));
        }
        let mut c = Consumer::new(
            name.clone(),
            stream_name.to_string(),
            cfg,
            // A replicated stream's copies all take the log entry's time: the same
            // `created` everywhere.
            ts.unwrap_or_else(now_nanos),
            durable,
            st.store.as_ref(),
        );
        c.set_rate_burst(rate_burst(&st.cfg, cx.srv));
        // A replicated stream's consumer delivers only where its own group elects a
        // leader (`cluster/cgroups.rs`); the creation's answer waits for that leader.
        c.passive = st.replica.is_some();
        c.born_live = ts.is_some();
        save_consumer_meta(st, &c).map_err(|er| e(ApiError::consumer_create(er)))?;
        let out = c.info_json(st, Some(T), Some(cx));
        if st.replica.is_some() {
            self.hold = Some((stream_name.to_string(), name.clone()));
        }
        let leads = st.replica.as_ref().is_some_and(|r| r.leader);
        if st.replica.is_none() || leads {
            advisory::consumer_action(cx, stream_name, &name, Action::Create);
        }
        st.consumers.insert(name.clone(), c);
        let mut acked = Vec::new();
        if let Some(c) = st.consumers.get_mut(&name) {
            c.pump(cx, st.store.as_ref(), &mut acked);
        }
        retire(st, &acked);
        Ok(out)
    }

    pub(super) fn consumer_info(&self, cx: &Cx<'_>, s: &str, c: &str) -> Res {
        const T: &str = "consumer_info_response";
        let st = self
            .streams
            .get(s)
            .ok_or((ApiError::stream_not_found(), T))?;
        let con = st
            .consumers
            .get(c)
            .ok_or((ApiError::consumer_not_found(), T))?;
        Ok(con.info_json(st, Some(T), Some(cx)))
    }

    pub(super) fn consumer_delete(&mut self, cx: &Cx<'_>, s: &str, c: &str) -> Res {
        const T: &str = "consumer_delete_response";
        let st = self
            .streams
            .get_mut(s)
            .ok_or((ApiError::stream_not_found(), T))?;
        let mut con = st
            .consumers
            .remove(c)
            .ok_or((ApiError::consumer_not_found(), T))?;
        con.deleted(cx);
        if let Some(d) = &st.dir {
            persist::remove_dir(&persist::consumer_dir(d, c));
        }
        // Messages only this consumer held back may go now.
        if st.cfg.retention == Retention::Interest {
            let all: Vec<u64> = {
                let mut v = Vec::new();
                let mut seq = 0;
                while let Ok(m) = st.store.load_next(None, seq) {
                    v.push(m.seq);
                    seq = m.seq + 1;
                    if v.len() >= 100_000 {
                        break;
                    }
                }
                v
            };
            retire(st, &all);
        }
        let mut o = Obj::typed(T);
        o.field("success", &true);
        Ok(o.done())
    }

    pub(super) fn consumer_list(&self, cx: &Cx<'_>, s: &str, p: &[u8], names: bool) -> Res {
        let t = if names {
            "consumer_names_response"
        } else {
            "consumer_list_response"
        };
        let req: ListReq = body(p).map_err(|e| (e, t))?;
        let st = self
            .streams
            .get(s)
            .ok_or((ApiError::stream_not_found(), t))?;
        let limit = if names { NAMES_LIMIT } else { LIST_LIMIT };
        let page = st.listed_consumers().skip(req.offset).take(limit);
        let mut o = Obj::typed(t);
        o.field("total", &st.consumer_count())
            .field("offset", &req.offset)
            .field("limit", &limit);
        if names {
            let v: Vec<&str> = page.map(|c| c.name.as_str()).collect();
            o.field("consumers", &(!v.is_empty()).then_some(v));
        } else {
            let v: Vec<String> = page.map(|c| c.info_json(st, None, Some(cx))).collect();
            o.raw("consumers", &format!("[{}]", v.join(",")));
        }
        Ok(o.done())
    }
}

/// A consumer of `st` from saved metadata (after a restart or a restore), with its progress
/// when there is one. Ephemerals are kept too (as nats-server): their inactivity clock
/// restarts.
pub(super) fn revive_consumer(
    st: &Stream,
    srv: &ServerShared,
    name: String,
    cfg: ConsumerConfig,
    created: i64,
    state: Option<ConsumerState>,
) -> Consumer {
    let durable = !cfg.durable_name.is_empty();
    let mut c = Consumer::new(
        name,
        st.cfg.name.clone(),
        cfg,
        created,
        durable,
        st.store.as_ref(),
    );
    c.set_rate_burst(rate_burst(&st.cfg, srv));
    if let Some(s) = state {
        c.restore(&s, st.store.as_ref());
    }
    c
}

/// The burst of a consumer's rate limiter: the stream's `max_msg_size`, else `max_payload`.
fn rate_burst(cfg: &StreamConfig, srv: &ServerShared) -> u64 {
    if cfg.max_msg_size > 0 {
        cfg.max_msg_size as u64
    } else {
        srv.opts.max_payload as u64
    }
}
