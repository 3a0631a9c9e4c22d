//! `$JS.API.STREAM.RESTORE`: a stream rebuilt from a natsd snapshot sent as chunks, as
//! nats-server 2.9 takes one. The answer names `$JS.SNAPSHOT.RESTORE.<stream>.<id>`; each
//! chunk published there with a reply subject gets an empty answer; an empty chunk ends the
//! data and its reply gets the outcome, a `stream_create_response` (the stream info, or the
//! error). A chunk without a reply subject, or five seconds without a chunk, drops the
//! restore without an answer.
//!
//! Chunks are decoded as they come and their messages go straight into a staging store
//! (`<store_dir>/<account>/__restore__/<id>/msgs` for file streams, a memory store for
//! memory streams) with their own sequences and timestamps; nothing but the partial record
//! at a chunk's end is buffered. At the end the staging directory becomes the stream's
//! directory and the stream, with its consumers and their progress, is installed. Errors
//! found on the way are answered at the end (as nats-server, which only looks at the data
//! then); the staging data is dropped as soon as one is found.

use super::*;
use crate::jetstream::limits;
use crate::jetstream::snapshot::{ConsumerRec, Decoder, Head, Item};
use crate::jetstream::store::{open, StoreLimits};
use std::path::Path;

/// A restore that gets no chunk for this long is dropped (nats-server: 5 s).
const STALL: Duration = Duration::from_secs(5);
/// Where restores stage their files, under `<store_dir>/<account>/`.
const STAGING: &str = "__restore__";

/// One restore under way.
pub struct Restore {
    id: String,
    cfg: StreamConfig,
    /// A configuration check that failed: the answer at the end.
    cfg_err: Option<ApiError>,
    sub: Option<Arc<Subscription>>,
    last_active: Instant,
    started: Instant,
    /// When it started, for the completion advisory.
    started_at: std::time::SystemTime,
    dec: Decoder,
    store: Option<Box<dyn MsgStore>>,
    staging: Option<PathBuf>,
    head: Option<Head>,
    consumers: Vec<ConsumerRec>,
    failed: Option<ApiError>,
    bytes: u64,
}

#[derive(Deserialize, Default)]
struct RestoreReq {
    #[serde(default)]
    config: StreamConfig,
}

fn restore_failed(e: impl std::fmt::Display) -> ApiError {
    ApiError::new(500, 10062, format!("restore failed: {e}"))
}

/// Remove what earlier restores left behind (a crash in the middle of one).
pub fn clean_staging(store_dir: &Path, account: &str) {
    persist::remove_dir(&store_dir.join(account).join(STAGING));
}

impl Restore {
    /// Drop the staging data (the restore failed or was abandoned).
    fn discard(&mut self) {
        if let Some(s) = self.store.take() {
            if let Err(e) = s.delete() {
                tracing::warn!("JetStream: restore {}: staging store: {e}", self.id);
            }
        }
        if let Some(d) = self.staging.take() {
            persist::remove_dir(&d);
        }
    }

    pub(super) fn abort(mut self, srv: &ServerShared, acc: &Account) {
        self.discard();
        if let Some(s) = self.sub.take() {
            srv.unsubscribe_internal(acc, &s);
        }
    }

    fn fail(&mut self, e: ApiError) {
        if self.failed.is_none() {
            tracing::warn!(
                "JetStream: restore of stream {:?}: {}",
                self.cfg.name,
                e.description
            );
            self.failed = Some(e);
            self.discard();
        }
    }

    /// Apply one decoded record to the staging store.
    fn apply(&mut self, g: &Globals<'_>, account: &str, item: Item) -> Result<(), ApiError> {
        match item {
            Item::Head(h) => {
                if h.stream != self.cfg.name {
                    return Err(restore_failed("stream names do not match"));
                }
                let store: Box<dyn MsgStore> = match self.cfg.storage {
                    Storage::Memory => Box::new(MemStore::new(StoreLimits::default())),
                    Storage::File => {
                        let dir = g
                            .config
                            .store_dir
                            .join(account)
                            .join(STAGING)
                            .join(&self.id);
                        self.staging = Some(dir.clone());
                        open::open_file(&dir.join("msgs"), StoreLimits::default(), g.config.sync)
                            .map_err(restore_failed)?
                    }
                };
                store
                    .skip_to(h.first_seq, h.last_ts)
                    .map_err(restore_failed)?;
                self.store = Some(store);
                self.head = Some(*h);
            }
            Item::Consumer(c) => self.consumers.push(*c),
            Item::Msg(m) => {
                let store = self
                    .store
                    .as_ref()
                    .ok_or_else(|| restore_failed("no store"))?;
                store.skip_to(m.seq, m.ts).map_err(restore_failed)?;
                let seq = store
                    .store(&m.subject, m.header.as_deref(), &m.data, m.ts)
                    .map_err(restore_failed)?;
                if seq != m.seq {
                    return Err(restore_failed(format!(
                        "message {} stored at sequence {seq}",
                        m.seq
                    )));
                }
            }
            Item::End => {
                if let (Some(store), Some(h)) = (&self.store, &self.head) {
                    store
                        .skip_to(h.last_seq + 1, h.last_ts)
                        .map_err(restore_failed)?;
                }
            }
        }
        Ok(())
    }
}

impl JsAccount {
    pub(super) fn stream_restore(
        &mut self,
        g: &Globals<'_>,
        srv: &Arc<ServerShared>,
        name: &str,
        p: &[u8],
    ) -> Res {
        const T: &str = "stream_restore_response";
        if super::snapshots::is_empty_request(p) {
            return Err((ApiError::bad_request(), T));
        }
        let req: RestoreReq = super::snapshots::go_body(p).map_err(|e| (e, T))?;
        let mut cfg = req.config;
        if cfg.name.is_empty() {
            cfg.name = name.to_string();
        }
        if self.streams.contains_key(name) {
            return Err((
                ApiError::new(400, 10130, "stream name already in use, cannot restore"),
                T,
            ));
        }
        stream::apply_defaults(&mut cfg);
        // As nats-server: a bad configuration is answered once the data is in.
        let cfg_err = stream::check(&cfg, srv.opts.max_payload, srv.opts.cluster.is_some()).err();
        let id = format!("{}{}", random_name(), random_name());
        let subject = format!("$JS.SNAPSHOT.RESTORE.{}.{id}", cfg.name);
        let h = handler(
            g.tx.clone(),
            Arc::from(self.acc.name.as_str()),
            EventKind::Api,
            None,
        );
        let sub = subscribe(srv, &self.acc, &subject, None, h);
        if sub.is_none() {
            return Err((
                ApiError::new(
                    500,
                    10042,
                    "JetStream unable to subscribe to restore snapshot",
                ),
                T,
            ));
        }
        tracing::info!(
            "Starting restore for stream '{} > {}'",
            self.acc.name,
            cfg.name
        );
        let now = Instant::now();
        self.transfers.restores.push(Restore {
            id,
            cfg,
            cfg_err,
            sub,
            last_active: now,
            started: now,
            started_at: std::time::SystemTime::now(),
            dec: Decoder::new(),
            store: None,
            staging: None,
            head: None,
            consumers: Vec::new(),
            failed: None,
            bytes: 0,
        });
        crate::jetstream::advisory::restore_create(&Cx::new(srv, &self.acc), name);
        let mut o = Obj::typed(T);
        o.field("deliver_subject", &subject);
        Ok(o.done())
    }

    /// One chunk of restore `id` (an empty one ends it).
    pub(super) fn restore_chunk(
        &mut self,
        g: &Globals<'_>,
        srv: &Arc<ServerShared>,
        id: &str,
        ev: &Event,
    ) {
        let Some(i) = self.transfers.restores.iter().position(|r| r.id == id) else {
            return;
        };
        let Some(reply) = ev.reply.as_deref() else {
            let r = self.transfers.restores.swap_remove(i);
            tracing::warn!(
                "restore for stream '{} > {}' requires reply subject for each chunk",
                self.acc.name,
                r.cfg.name
            );
            r.abort(srv, &self.acc);
            return;
        };
        let acc = self.acc.clone();
        let cx = Cx::new(srv, &acc);
        if ev.payload.is_empty() {
            let r = self.transfers.restores.swap_remove(i);
            let (name, start, bytes) = (r.cfg.name.clone(), r.started_at, r.bytes);
            let out = self.finish_restore(g, srv, r);
            cx.send(reply, None, None, out.as_bytes());
            // As nats-server 2.9: once the data is in, whether the restore worked or not.
            crate::jetstream::advisory::restore_complete(&cx, &name, start, bytes);
            return;
        }
        let r = &mut self.transfers.restores[i];
        r.last_active = Instant::now();
        r.bytes += ev.payload.len() as u64;
        let (used, max) = match (r.cfg.storage, g.usage) {
            (Storage::Memory, u) => (u.map_or(0, |u| u.0), g.config.max_memory),
            (Storage::File, u) => (u.map_or(0, |u| u.1), g.config.max_storage),
        };
        if max > 0 && (used + r.bytes) as i64 > max {
            // Answered at once, and the restore is over: the answer nats-server's code has
            // for this (its 2.9.10 let a 20 KB restore through `max_file_store: 8000`).
            let r = self.transfers.restores.swap_remove(i);
            r.abort(srv, &acc);
            let mut o = Obj::typed("stream_create_response");
            o.field(
                "error",
                &ApiError::new(503, 10023, "insufficient resources"),
            );
            cx.send(reply, None, None, o.done().as_bytes());
            return;
        }
        if r.failed.is_none() && r.cfg_err.is_none() {
            r.dec.feed(&ev.payload);
            loop {
                let step = match r.dec.next_item() {
                    Ok(Some(item)) => r.apply(g, &acc.name, item),
                    Ok(None) => break,
                    Err(e) => Err(restore_failed(format!("snapshot corrupt: {e}"))),
                };
                if let Err(e) = step {
                    r.fail(e);
                    break;
                }
            }
        }
        cx.send(reply, None, None, b"");
    }

    /// The end of the data: the stream is installed, or the error. Returns the answer.
    fn finish_restore(
        &mut self,
        g: &Globals<'_>,
        srv: &Arc<ServerShared>,
        mut r: Restore,
    ) -> String {
        const T: &str = "stream_create_response";
        if let Some(s) = r.sub.take() {
            srv.unsubscribe_internal(&self.acc, &s);
        }
        let name = r.cfg.name.clone();
        let res = self.install(g, srv, &mut r);
        let mut o = Obj::typed(T);
        match res {
            Ok(()) => {
                if let Some(st) = self.streams.get(&name) {
                    st.info_fields(&mut o, None);
                }
                tracing::info!(
                    "Completed restore of {} bytes for stream '{} > {name}' in {:?}",
                    r.bytes,
                    self.acc.name,
                    r.started.elapsed()
                );
            }
            Err(e) => {
                r.discard();
                tracing::warn!(
                    "Restore failed for {} bytes for stream '{} > {name}': {}",
                    r.bytes,
                    self.acc.name,
                    e.description
                );
                o.field("error", &e);
            }
        }
        o.done()
    }

    fn install(
        &mut self,
        g: &Globals<'_>,
        srv: &Arc<ServerShared>,
        r: &mut Restore,
    ) -> Result<(), ApiError> {
        if let Some(e) = r.failed.take() {
            return Err(e);
        }
        if let Some(e) = r.cfg_err.take() {
            return Err(e);
        }
        r.dec
            .finish()
            .map_err(|e| restore_failed(format!("snapshot corrupt: {e}")))?;
        let cfg = r.cfg.clone();
        if self.streams.contains_key(&cfg.name) {
            return Err(restore_failed("stream name already in use"));
        }
        if self.overlapping(&cfg) {
            return Err(ApiError::new(
                400,
                10065,
                "subjects overlap with an existing stream",
            ));
        }
        // natsd's rule: a restore counts against the account's limits as a stream create.
        let sel = self.limits.select(cfg.num_replicas)?;
        limits::check_create(sel, &self.streams, &cfg, g.server_bytes(cfg.storage))?;
        limits::check_config(sel.limits, &cfg)?;
        let (Some(head), Some(staged)) = (r.head.take(), r.store.take()) else {
            return Err(restore_failed("snapshot without a head record"));
        };
        for c in &r.consumers {
            let ack_pending = limits::select_consumer(&self.limits, &c.config, &cfg)
                .map_or(-1, |s| s.limits.max_ack_pending);
            consumer::check(&c.config, &cfg, ack_pending).map_err(|e| {
                restore_failed(format!(
                    "error restoring consumer [{:?}]: {}",
                    c.name, e.description
                ))
            })?;
        }
        let limits = stream::limits_of(&cfg);
        let (store, dir) = match cfg.storage {
            Storage::Memory => {
                staged.update_limits(limits).map_err(restore_failed)?;
                (staged, None)
            }
            Storage::File => {
                staged.sync().map_err(restore_failed)?;
                drop(staged);
                let staging = r
                    .staging
                    .take()
                    .ok_or_else(|| restore_failed("no staging directory"))?;
                let dir = persist::stream_dir(&g.config.store_dir, &self.acc.name, &cfg.name);
                persist::remove_dir(&dir);
                if let Some(parent) = dir.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| {
                        restore_failed(format!("creating {}: {e}", parent.display()))
                    })?;
                }
                if let Err(e) = std::fs::rename(&staging, &dir) {
                    persist::remove_dir(&staging);
                    return Err(restore_failed(format!(
                        "moving {} to {}: {e}",
                        staging.display(),
                        dir.display()
                    )));
                }
                let meta = StreamMeta {
                    config: cfg.clone(),
                    created: head.created,
                };
                let opened = persist::write_json(&dir.join("meta.json"), &meta, true)
                    .map_err(restore_failed)
                    .and_then(|()| {
                        open::open_file(&dir.join("msgs"), limits, g.config.sync)
                            .map_err(restore_failed)
                    });
                match opened {
                    Ok(s) => (s, Some(dir)),
                    Err(e) => {
                        persist::remove_dir(&dir);
                        return Err(e);
                    }
                }
            }
        };
        let mut st = Stream::new(cfg, head.created, store, dir);
        st.rebuild_dedupe(now_nanos());
        for rec in std::mem::take(&mut r.consumers) {
            let c = super::consumers::revive_consumer(
                &st,
                srv,
                rec.name.clone(),
                rec.config,
                rec.created,
                Some(rec.state),
            );
            if let Err(e) = save_consumer_meta(&st, &c) {
                tracing::error!("JetStream: restored consumer {:?} not saved: {e}", rec.name);
            }
            st.consumers.insert(rec.name, c);
        }
        subscribe_stream(srv, &self.acc, g.tx, &mut st);
        // A restored mirror or source goes on after what it holds, as after a restart.
        if let Ok(Some(mut f)) = crate::jetstream::mirror::parse(&st.cfg) {
            f.recover(&st);
            self.follows.insert(st.cfg.name.clone(), f);
        }
        // As nats-server's standalone mode: a restored stream is announced as created.
        crate::jetstream::advisory::stream_action(
            &Cx::new(srv, &self.acc),
            &st.cfg.name,
            &st.cfg.template_owner,
            crate::jetstream::advisory::Action::Create,
        );
        self.streams.insert(st.cfg.name.clone(), st);
        Ok(())
    }

    /// Restores without a chunk for [`STALL`] are dropped (no answer: nobody asks).
    pub(super) fn expire_restores(&mut self, srv: &Arc<ServerShared>) {
        let now = Instant::now();
        for i in (0..self.transfers.restores.len()).rev() {
            if now.duration_since(self.transfers.restores[i].last_active) >= STALL {
                let r = self.transfers.restores.swap_remove(i);
                tracing::warn!(
                    "restore for stream '{} > {}' is stalled",
                    self.acc.name,
                    r.cfg.name
                );
                r.abort(srv, &self.acc);
            }
        }
    }
}
