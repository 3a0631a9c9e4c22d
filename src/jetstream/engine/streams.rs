//! The stream half of the `$JS.API`: create (with nats-server's checks and the account's
//! limits), update, info (subjects paging, deleted details, mirror/sources), delete, purge,
//! list/names, MSG.GET, MSG.DELETE and DIRECT.GET.

use super::*;
use crate::jetstream::limits;

impl JsAccount {
    pub(super) fn overlapping(&self, cfg: &StreamConfig) -> bool {
        self.streams
            .values()
            .filter(|s| s.cfg.name != cfg.name)
            .any(|s| {
                s.cfg.subjects.iter().any(|a| {
                    cfg.subjects
                        .iter()
                        .any(|b| crate::subject::overlaps(a.as_bytes(), b.as_bytes()))
                })
            })
    }

    pub(super) fn stream_create(
        &mut self,
        g: &Globals<'_>,
        srv: &Arc<ServerShared>,
        name: &str,
        p: &[u8],
    ) -> Res {
        self.stream_create_owned(g, srv, name, p, "")
    }

    /// A stream created by the API, or by stream template `owner` (then its `template_owner`
    /// from the start, so its creation advisory names the template as nats-server's does).
    pub(super) fn stream_create_owned(
        &mut self,
        g: &Globals<'_>,
        srv: &Arc<ServerShared>,
        name: &str,
        p: &[u8],
        owner: &str,
    ) -> Res {
        const T: &str = "stream_create_response";
        let e = |e| (e, T);
        if p.iter().all(u8::is_ascii_whitespace) {
            return Err(e(ApiError::invalid_json()));
        }
        let mut cfg: StreamConfig = body(p).map_err(e)?;
        if cfg.name != name {
            return Err(e(ApiError::stream_mismatch()));
        }
        stream::default_duplicates(&mut cfg, srv_js_limits(srv).duplicate_window);
        stream::apply_defaults(&mut cfg);
        cfg.template_owner = owner.to_string();
        if cfg.sealed {
            return Err(e(ApiError::stream_config(
                "stream configuration for create can not be sealed",
            )));
        }
        // As nats-server: the account's stream count and reservations come before the
        // configuration checks, its per-stream limits with them.
        let server = g.server_bytes(cfg.storage);
        let sel = self.limits.select(cfg.num_replicas).map_err(e)?;
        limits::check_create(sel, &self.streams, &cfg, server).map_err(e)?;
        stream::check(&cfg, srv.opts.max_payload, srv.opts.cluster.is_some()).map_err(e)?;
        stream::check_duplicates(&cfg, srv_js_limits(srv).duplicate_window).map_err(e)?;
        limits::check_config(sel.limits, &cfg).map_err(e)?;
        if let Some(s) = self.streams.get(name) {
            if s.cfg == cfg {
                let mut o = Obj::typed(T);
                s.info_fields(&mut o, None);
                return Ok(o.done());
            }
            return Err(e(ApiError::new(
                400,
                10058,
                "stream name already in use with a different configuration",
            )));
        }
        if self.overlapping(&cfg) {
            return Err(e(ApiError::new(
                400,
                10065,
                "subjects overlap with an existing stream",
            )));
        }
        let limits = stream::limits_of(&cfg);
        let (store, dir): (Box<dyn MsgStore>, Option<PathBuf>) = match cfg.storage {
            Storage::Memory => (Box::new(MemStore::new(limits)), None),
            Storage::File => {
                let dir = persist::stream_dir(&g.config.store_dir, &self.acc.name, name);
                let store = crate::jetstream::store::open::open_file(
                    &dir.join("msgs"),
                    limits,
                    g.config.sync,
                )
                .map_err(|er| e(ApiError::new(500, 10049, er.to_string())))?;
                (store, Some(dir))
            }
        };
        let created = now_nanos();
        if let Some(d) = &dir {
            let meta = StreamMeta {
                config: cfg.clone(),
                created,
            };
            persist::write_json(&d.join("meta.json"), &meta, true)
                .map_err(|er| e(ApiError::new(500, 10049, er)))?;
        }
        let mut st = Stream::new(cfg, created, store, dir);
        subscribe_stream(srv, &self.acc, g.tx, &mut st);
        let mut o = Obj::typed(T);
        st.info_fields(&mut o, None);
        o.field("did_create", &true);
        if let Ok(Some(f)) = crate::jetstream::mirror::parse(&st.cfg) {
            self.follows.insert(name.to_string(), f);
        }
        let template = st.cfg.template_owner.clone();
        self.streams.insert(name.to_string(), st);
        tracing::debug!(
            "JetStream: stream {name:?} created in account {:?}",
            self.acc.name
        );
        advisory::stream_action(&Cx::new(srv, &self.acc), name, &template, Action::Create);
        Ok(o.done())
    }

    pub(super) fn stream_update(
        &mut self,
        g: &Globals<'_>,
        srv: &Arc<ServerShared>,
        name: &str,
        p: &[u8],
    ) -> Res {
        const T: &str = "stream_update_response";
        let e = |e| (e, T);
        if p.iter().all(u8::is_ascii_whitespace) {
            return Err(e(ApiError::invalid_json()));
        }
        let mut cfg: StreamConfig = body(p).map_err(e)?;
        if cfg.name != name {
            return Err(e(ApiError::stream_mismatch()));
        }
        if !self.streams.contains_key(name) {
            return Err(e(ApiError::stream_not_found()));
        }
        stream::default_duplicates(&mut cfg, srv_js_limits(srv).duplicate_window);
        stream::apply_defaults(&mut cfg);
        stream::check(&cfg, srv.opts.max_payload, srv.opts.cluster.is_some()).map_err(e)?;
        stream::check_duplicates(&cfg, srv_js_limits(srv).duplicate_window).map_err(e)?;
        if let Some(old) = self.streams.get(name) {
            let sel = limits::select_update(&self.limits, &old.cfg, &cfg).map_err(e)?;
            limits::check_config(sel.limits, &cfg).map_err(e)?;
        }
        if self.overlapping(&cfg) {
            return Err(e(ApiError::new(
                400,
                10065,
                "subjects overlap with an existing stream",
            )));
        }
        let acc = self.acc.clone();
        let Some(old) = self.streams.get(name).map(|s| &s.cfg) else {
            return Err(e(ApiError::stream_not_found()));
        };
        stream::check_update(old, &cfg).map_err(e)?;
        crate::jetstream::mirror::check_update(old, &cfg).map_err(e)?;
        let server = g.server_bytes(cfg.storage);
        let sel = limits::select_update(&self.limits, old, &cfg).map_err(e)?;
        limits::check_update(sel, &self.streams, old, &cfg, server).map_err(e)?;
        let Some(st) = self.streams.get_mut(name) else {
            return Err(e(ApiError::stream_not_found()));
        };
        st.store
            .update_limits(stream::limits_of(&cfg))
            .map_err(|er| e(ApiError::stream_config(er.to_string())))?;
        if let Some(d) = &st.dir {
            let meta = StreamMeta {
                config: cfg.clone(),
                created: st.created,
            };
            persist::write_json(&d.join("meta.json"), &meta, true)
                .map_err(|er| e(ApiError::stream_config(er)))?;
        }
        st.cfg = cfg;
        unsubscribe_stream(srv, &acc, st);
        subscribe_stream(srv, &acc, g.tx, st);
        match crate::jetstream::mirror::parse(&st.cfg) {
            Ok(Some(mut f)) => {
                if let Some(old) = self.follows.remove(name) {
                    f.carry_over(old);
                }
                self.follows.insert(name.to_string(), f);
            }
            _ => {
                self.follows.remove(name);
            }
        }
        let mut o = Obj::typed(T);
        st.info_fields(&mut o, None);
        advisory::stream_action(&Cx::new(srv, &acc), name, "", Action::Modify);
        Ok(o.done())
    }

    pub(super) fn stream_info(&self, name: &str, p: &[u8]) -> Res {
        const T: &str = "stream_info_response";
        let req: InfoReq = body(p).map_err(|e| (e, T))?;
        let st = self
            .streams
            .get(name)
            .ok_or((ApiError::stream_not_found(), T))?;
        let mut o = Obj::typed(T);
        // With a subjects filter that matches: the subjects in pages of 100 000, sorted, from
        // `offset`, with `total`/`offset`/`limit` (as nats-server 2.9.10); otherwise zeros.
        let subs = match req.subjects_filter.as_deref().filter(|f| !f.is_empty()) {
            Some(f) => st.store.subjects(Some(f)),
            None => Default::default(),
        };
        if subs.is_empty() {
            o.field("total", &0).field("offset", &0).field("limit", &0);
            st.info_fields_with(&mut o, None, req.deleted_details);
        } else {
            o.field("total", &subs.len())
                .field("offset", &req.offset)
                .field("limit", &MAX_SUBJECT_DETAILS);
            if req.offset == 0 && subs.len() <= MAX_SUBJECT_DETAILS {
                st.info_fields_with(&mut o, Some(&subs), req.deleted_details);
            } else {
                let page: std::collections::BTreeMap<String, u64> = subs
                    .into_iter()
                    .skip(req.offset)
                    .take(MAX_SUBJECT_DETAILS)
                    .collect();
                st.info_fields_with(&mut o, Some(&page), req.deleted_details);
            }
        }
        if let Some(f) = self.follows.get(name) {
            f.info_fields(&mut o, &self.streams);
        }
        Ok(o.done())
    }

    pub(super) fn stream_delete(&mut self, cx: &Cx<'_>, name: &str) -> Res {
        const T: &str = "stream_delete_response";
        let mut st = self
            .streams
            .remove(name)
            .ok_or((ApiError::stream_not_found(), T))?;
        unsubscribe_stream(cx.srv, &self.acc, &mut st);
        self.follows.remove(name);
        for c in st.consumers.values_mut() {
            c.deleted(cx);
        }
        if let Err(e) = st.store.delete() {
            tracing::warn!("JetStream: stream {name:?} store delete: {e}");
        }
        if let Some(d) = &st.dir {
            persist::remove_dir(d);
        }
        advisory::stream_action(cx, name, &st.cfg.template_owner, Action::Delete);
        let mut o = Obj::typed(T);
        o.field("success", &true);
        Ok(o.done())
    }

    pub(super) fn stream_purge(&mut self, name: &str, p: &[u8]) -> Res {
        const T: &str = "stream_purge_response";
        let req: PurgeReq = body(p).map_err(|e| (e, T))?;
        let st = self
            .streams
            .get_mut(name)
            .ok_or((ApiError::stream_not_found(), T))?;
        if st.cfg.deny_purge {
            return Err((ApiError::new(500, 10110, "stream purge not permitted"), T));
        }
        if st.cfg.sealed {
            return Err((ApiError::sealed(), T));
        }
        if req.seq.is_some() && req.keep.is_some() {
            return Err((ApiError::bad_request(), T));
        }
        if let Some(f) = &req.filter {
            if !f.is_empty() && !crate::subject::is_valid_subject(f.as_bytes()) {
                return Err((ApiError::bad_request(), T));
            }
        }
        let filter = req.filter.clone().filter(|f| !f.is_empty());
        // nats-server 2.9: an unfiltered purge to sequence 1 (or 0) without keep is a full
        // purge (the stores' contract: below 1 is nothing).
        let seq = req.seq.filter(|&s| {
            s > 1 || filter.as_deref().is_some_and(|f| f != ">") || req.keep.is_some()
        });
        let n = st
            .store
            .purge(&Purge {
                filter,
                seq,
                keep: req.keep,
            })
            .map_err(|e| (ApiError::new(500, 10068, e.to_string()), T))?;
        let first = st.store.state().first_seq;
        for c in st.consumers.values_mut() {
            if c.sseq < first {
                c.sseq = first;
            }
            let gone: Vec<u64> = c
                .pending
                .keys()
                .copied()
                .filter(|s| st.store.load(*s).is_err())
                .collect();
            for s in gone {
                c.pending.remove(&s);
                c.rdc.remove(&s);
            }
            c.dirty = true;
        }
        let mut o = Obj::typed(T);
        o.field("success", &true).field("purged", &n);
        Ok(o.done())
    }

    pub(super) fn stream_list(&self, p: &[u8], names: bool) -> Res {
        let t = if names {
            "stream_names_response"
        } else {
            "stream_list_response"
        };
        let req: ListReq = body(p).map_err(|e| (e, t))?;
        let matching: Vec<&Stream> = self
            .streams
            .values()
            .filter(|s| match req.subject.as_deref().filter(|x| !x.is_empty()) {
                None => true,
                Some(f) => s
                    .cfg
                    .subjects
                    .iter()
                    .any(|x| crate::subject::overlaps(x.as_bytes(), f.as_bytes())),
            })
            .collect();
        let limit = if names { NAMES_LIMIT } else { LIST_LIMIT };
        let page = matching.iter().skip(req.offset).take(limit);
        let mut o = Obj::typed(t);
        o.field("total", &matching.len())
            .field("offset", &req.offset)
            .field("limit", &limit);
        if names {
            let v: Vec<&str> = page.map(|s| s.cfg.name.as_str()).collect();
            // Go's nil slice: `null` when there are none.
            o.field("streams", &(!v.is_empty()).then_some(v));
        } else {
            let v: Vec<String> = page
                .map(|s| {
                    let mut x = Obj::new();
                    s.info_fields(&mut x, None);
                    x.done()
                })
                .collect();
            o.raw("streams", &format!("[{}]", v.join(",")));
        }
        Ok(o.done())
    }

    fn load_for(st: &Stream, req: &GetReq) -> Result<crate::jetstream::store::StoredMsg, ApiError> {
        match (&req.last_by_subj, &req.next_by_subj) {
            (Some(_), _) if req.seq > 0 => Err(ApiError::bad_request()),
            (Some(s), None) => st
                .store
                .load_last(Some(s))
                .map_err(|_| ApiError::no_message()),
            (None, Some(s)) => st
                .store
                .load_next(Some(s), req.seq)
                .map_err(|_| ApiError::no_message()),
            (None, None) if req.seq > 0 => {
                st.store.load(req.seq).map_err(|_| ApiError::no_message())
            }
            _ => Err(ApiError::bad_request()),
        }
    }

    pub(super) fn msg_get(&self, name: &str, p: &[u8]) -> Res {
        const T: &str = "stream_msg_get_response";
        let req: GetReq = body(p).map_err(|e| (e, T))?;
        let st = self
            .streams
            .get(name)
            .ok_or((ApiError::stream_not_found(), T))?;
        let m = Self::load_for(st, &req).map_err(|e| (e, T))?;
        let mut o = Obj::typed(T);
        o.raw("message", &Stream::msg_json(&m));
        Ok(o.done())
    }

    pub(super) fn msg_delete(&mut self, name: &str, p: &[u8]) -> Res {
        const T: &str = "stream_msg_delete_response";
        if super::snapshots::is_empty_request(p) {
            return Err((ApiError::bad_request(), T));
        }
        let req: DeleteReq = body(p).map_err(|e| (e, T))?;
        let st = self
            .streams
            .get_mut(name)
            .ok_or((ApiError::stream_not_found(), T))?;
        if st.cfg.deny_delete {
            return Err((ApiError::new(500, 10057, "message delete not permitted"), T));
        }
        if st.cfg.sealed {
            return Err((ApiError::sealed(), T));
        }
        // As nats-server 2.9.10 and 2.15.1: a sequence that is not there is 400 10043, except
        // that the file store reports 0 and past-the-end sequences as store errors.
        let not_found = || {
            let d = format!("sequence {} not found", req.seq);
            (ApiError::new(400, 10043, d), T)
        };
        let file = st.cfg.storage == Storage::File;
        if req.seq == 0 || req.seq > st.store.state().last_seq {
            return Err(match (file, req.seq) {
                (false, _) => not_found(),
                (true, 0) => (ApiError::new(500, 10057, "no message found"), T),
                (true, _) => (ApiError::new(500, 10057, "stream store EOF"), T),
            });
        }
        match st.store.remove(req.seq, !req.no_erase) {
            Ok(true) => {}
            Ok(false) => return Err(not_found()),
            Err(e) => return Err((ApiError::new(500, 10057, e.to_string()), T)),
        }
        for c in st.consumers.values_mut() {
            if c.pending.remove(&req.seq).is_some() {
                c.rdc.remove(&req.seq);
                c.dirty = true;
            }
        }
        let mut o = Obj::typed(T);
        o.field("success", &true);
        Ok(o.done())
    }

    pub(super) fn direct_get(&self, cx: &Cx<'_>, reply: &str, name: &str, subj: &str, p: &[u8]) {
        let Some(st) = self.streams.get(name).filter(|st| st.cfg.allow_direct) else {
            super::no_responders(cx, reply);
            return;
        };
        let req = if !subj.is_empty() {
            GetReq {
                last_by_subj: Some(subj.to_string()),
                ..Default::default()
            }
        } else {
            match from_json::<GetReq>(p) {
                Ok(r) if !p.iter().all(u8::is_ascii_whitespace) => r,
                _ => {
                    let h = status_header("408 Malformed Request", &[]);
                    cx.send(reply, None, Some(&h), b"");
                    return;
                }
            }
        };
        match Self::load_for(st, &req) {
            Ok(m) => {
                let seq = m.seq.to_string();
                let ts = time_str(m.ts);
                let h = with_headers(
                    m.header.as_deref(),
                    &[
                        ("Nats-Stream", &st.cfg.name),
                        ("Nats-Subject", &m.subject),
                        ("Nats-Sequence", &seq),
                        ("Nats-Time-Stamp", &ts),
                    ],
                );
                cx.send(reply, None, Some(&h), &m.data);
            }
            Err(e) if e.err_code == 10003 => {
                let h = status_header("408 Malformed Request", &[]);
                cx.send(reply, None, Some(&h), b"");
            }
            Err(_) => {
                let h = status_header("404 Message Not Found", &[]);
                cx.send(reply, None, Some(&h), b"");
            }
        }
    }
}
