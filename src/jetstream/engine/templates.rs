//! Stream templates (deprecated in nats-server 2.9, still served by 2.9.10): the
//! `$JS.API.STREAM.TEMPLATE.{CREATE,INFO,DELETE}.<t>` and `NAMES` requests, the templates'
//! subscriptions, and the streams they create on demand: a message on a template subject that
//! no stream takes creates stream `<subject with . → _>` on that one subject with the
//! template's config and `template_owner`, up to `max_streams`, and is stored there.
//!
//! A template-owned stream does not subscribe its subject: every message reaches it through
//! its template's subscription, so none is lost or stored twice while the stream is being
//! created. Templates are kept in `<store_dir>/<account>/templates/<t>/meta.json`.

use super::{err_json, persist, Engine, Globals, JsAccount};
use crate::account::Subscription;
use crate::jetstream::consumer::Cx;
use crate::jetstream::types::{from_json, ApiError, Obj, StreamConfig};
use crate::jetstream::{handler, stream, subscribe, Event, EventKind, JsConfig, Queue};
use crate::server::ServerShared;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::Arc;

/// A template's configuration, as the API echoes it and as it is saved.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct TemplateConfig {
    #[serde(default)]
    pub name: String,
    pub config: StreamConfig,
    pub max_streams: u32,
}

/// The CREATE request: `config` may be missing (2.9.10 crashes; natsd refuses).
#[derive(Deserialize)]
struct CreateReq {
    #[serde(default)]
    name: String,
    #[serde(default)]
    config: Option<StreamConfig>,
    #[serde(default)]
    max_streams: u32,
}

pub struct Template {
    pub cfg: TemplateConfig,
    subs: Vec<Arc<Subscription>>,
    /// The streams it made, in order; a deleted one keeps its place (2.9.10 still lists it
    /// and counts it against `max_streams`). After a restart: the streams it owns.
    made: Vec<String>,
}

type Res = Result<String, (ApiError, &'static str)>;

fn template_dir(config: &JsConfig, account: &str, name: &str) -> PathBuf {
    config.store_dir.join(account).join("templates").join(name)
}

fn create_err(d: impl Into<String>) -> (ApiError, &'static str) {
    (
        ApiError::new(500, 10066, d),
        "stream_template_create_response",
    )
}

impl Engine {
    /// `STREAM.TEMPLATE.…` requests of a JetStream account (`rest`: the tokens after
    /// `$JS.API.STREAM.TEMPLATE.`). `false`: not one (no answer, as nats-server).
    pub(super) fn template_request(
        &mut self,
        srv: &Arc<ServerShared>,
        ev: &Event,
        rest: &[&str],
    ) -> bool {
        let (config, tx) = (&self.config, &self.tx);
        let Some(ja) = self.accounts.get_mut(&*ev.acc) else {
            return false;
        };
        let res = match rest {
            ["NAMES"] => Ok(ja.template_names()),
            ["INFO", t] => ja.template_info(t),
            ["DELETE", t] => ja.template_delete(srv, config, t),
            ["CREATE", t] => ja.template_create(srv, config, tx, t, &ev.payload),
            _ => return false,
        };
        ja.api_total += 1;
        let out = res.unwrap_or_else(|(e, ty)| {
            ja.api_errors += 1;
            err_json(ty, &e, "")
        });
        super::admin::reply(srv, ev, &out);
        true
    }

    /// A message on template `t`'s subjects: into the stream the template made for its
    /// subject, made now if there is none yet and the template has room.
    pub(super) fn template_publish(&mut self, srv: &Arc<ServerShared>, ev: &Event, t: &str) {
        let usage = self.config.limits_set.then(|| self.usage());
        let g = Globals {
            config: &self.config,
            tx: &self.tx,
            usage,
            reserved: self.reserved(),
            elsewhere: &[],
        };
        let Some(ja) = self.accounts.get_mut(&*ev.acc) else {
            return;
        };
        let Some(tpl) = ja.templates.get(t) else {
            return;
        };

        let name = ev.subject.replace('.', "_");
        match ja.streams.get(&name) {
            Some(st) if st.cfg.template_owner == t => {}
            // A stream of its own takes the message through its subscription.
            Some(_) => return,
            None => {
                // Every matching template hears the message; the most specific one makes
                // the stream.
                if first_template(&ja.templates, &ev.subject) != Some(t) {
                    return;
                }
                let subj = ev.subject.as_bytes();
                let taken = ja.streams.values().any(|s| {
                    s.cfg
                        .subjects
                        .iter()
                        .any(|f| crate::subject::pattern_matches(f.as_bytes(), subj))
                });
                if taken {
                    return;
                }
                let made = tpl.made.len();
                if made >= tpl.cfg.max_streams as usize || name.contains(['/', '\\']) {
                    tracing::warn!(
                        "JETSTREAM - JetStream could not create stream for account {:?} on subject {:?}, at limit",
                        ja.acc.name,
                        ev.subject
                    );
                    return;
                }
                let mut cfg = tpl.cfg.config.clone();
                cfg.name = name.clone();
                cfg.subjects = vec![ev.subject.clone()];
                let body = serde_json::to_vec(&cfg).unwrap_or_default();
                if let Err((e, _)) = ja.stream_create_owned(&g, srv, &name, &body, t) {
                    tracing::warn!(
                        "JetStream: template {t:?}: stream {name:?} not created: {}",
                        e.description
                    );
                    return;
                }
                if let Some(tpl) = ja.templates.get_mut(t) {
                    tpl.made.push(name.clone());
                }
            }
        }
        let mut ev = Event {
            acc: ev.acc.clone(),
            kind: EventKind::Publish(Arc::from(name.as_str())),
            subject: ev.subject.clone(),
            reply: ev.reply.clone(),
            header: ev.header.clone(),
            payload: ev.payload.clone(),
            trace: None,
            ts: None,
        };
        let name: Arc<str> = Arc::from(name.as_str());
        if let Some(p) = ja.publish(&g, srv, &name, &mut ev) {
            self.pending_acks.push(p);
        }
    }
}

/// The template that takes a message on `subject`: of those with a matching subject, the one
/// whose filter has the fewest wildcards (a literal subject before `*` before `>`; 2.9.10
/// gave `t.x` to a template on `t.x` over one on `t.*`), then by name.
fn first_template<'a>(
    templates: &'a std::collections::BTreeMap<String, Template>,
    subject: &str,
) -> Option<&'a str> {
    let wildcards = |f: &str| {
        f.split('.')
            .map(|t| match t {
                ">" => 1000,
                "*" => 1,
                _ => 0,
            })
            .sum::<usize>()
    };
    templates
        .values()
        .filter_map(|t| {
            let best = t
                .cfg
                .config
                .subjects
                .iter()
                .filter(|f| crate::subject::pattern_matches(f.as_bytes(), subject.as_bytes()))
                .map(|f| wildcards(f))
                .min()?;
            Some((best, t.cfg.name.as_str()))
        })
        .min()
        .map(|(_, n)| n)
}

impl JsAccount {
    /// Recover the account's templates (at startup or when JetStream is enabled for it);
    /// a recovered stream whose template is gone is deleted, as nats-server does.
    pub(super) fn load_templates(
        &mut self,
        srv: &Arc<ServerShared>,
        config: &JsConfig,
        tx: &Queue,
    ) {
        let root = config.store_dir.join(&self.acc.name).join("templates");
        for name in persist::subdirs(&root) {
            match persist::read_json::<TemplateConfig>(&root.join(&name).join("meta.json")) {
                Ok(cfg) => self.add_template(srv, tx, cfg),
                Err(e) => tracing::warn!("JetStream: template {name:?} not restored: {e}"),
            }
        }
        let orphans: Vec<String> = self
            .streams
            .values()
            .filter(|s| {
                !s.cfg.template_owner.is_empty()
                    && !self.templates.contains_key(&s.cfg.template_owner)
            })
            .map(|s| s.cfg.name.clone())
            .collect();
        let acc = self.acc.clone();
        let cx = Cx::new(srv, &acc);
        for s in orphans {
            tracing::warn!("JetStream: stream {s:?} deleted: its template is gone");
            let _ = self.stream_delete(&cx, &s);
        }
    }

    fn add_template(&mut self, srv: &ServerShared, tx: &Queue, cfg: TemplateConfig) {
        let accn: Arc<str> = Arc::from(self.acc.name.as_str());
        let kind = EventKind::Template(Arc::from(cfg.name.as_str()));
        let h = handler(tx.clone(), accn, kind, None);
        let subs = cfg
            .config
            .subjects
            .iter()
            .filter_map(|s| subscribe(srv, &self.acc, s, None, h.clone()))
            .collect();
        let made = self
            .streams
            .values()
            .filter(|s| s.cfg.template_owner == cfg.name)
            .map(|s| s.cfg.name.clone())
            .collect();
        self.templates
            .insert(cfg.name.clone(), Template { cfg, subs, made });
    }

    /// Withdraw every template's subscriptions (account closed or purged).
    pub(super) fn unsubscribe_templates(&mut self, srv: &ServerShared) {
        for t in self.templates.values_mut() {
            for s in t.subs.drain(..) {
                srv.unsubscribe_internal(&self.acc, &s);
            }
        }
    }

    fn template_json(&self, ty: &str, t: &Template) -> String {
        let mut o = Obj::typed(ty);
        o.field("config", &t.cfg).field("streams", &t.made);
        o.done()
    }

    fn template_names(&self) -> String {
        let names: Vec<&String> = self.templates.keys().collect();
        let mut o = Obj::typed("stream_template_names_response");
        o.field("total", &names.len())
            .field("offset", &0)
            .field("limit", &1024)
            .field("streams", &names);
        o.done()
    }

    fn template_info(&self, name: &str) -> Res {
        const T: &str = "stream_template_info_response";
        match self.templates.get(name) {
            Some(t) => Ok(self.template_json(T, t)),
            None => Err((ApiError::new(404, 10068, "template not found"), T)),
        }
    }

    fn template_create(
        &mut self,
        srv: &ServerShared,
        config: &JsConfig,
        tx: &Queue,
        name: &str,
        p: &[u8],
    ) -> Res {
        const T: &str = "stream_template_create_response";
        let req: CreateReq = from_json(p).map_err(|_| (ApiError::invalid_json(), T))?;
        if req.name != name {
            let d = "template name in subject does not match request";
            return Err((ApiError::new(400, 10073, d), T));
        }
        let Some(mut cfg) = req.config else {
            return Err(create_err("template config is required"));
        };
        if !cfg.name.is_empty() {
            return Err(create_err("template config name should be empty"));
        }
        if self.templates.contains_key(name) {
            return Err(create_err(format!(
                "template with name {name:?} already exists"
            )));
        }
        cfg.name = "_".into();
        stream::apply_defaults(&mut cfg);
        stream::check(&cfg, srv.opts.max_payload, srv.opts.cluster.is_some())
            .map_err(|e| (e, T))?;
        let tc = TemplateConfig {
            name: name.to_string(),
            config: cfg,
            max_streams: req.max_streams,
        };
        let dir = template_dir(config, &self.acc.name, name);
        persist::write_json(&dir.join("meta.json"), &tc, true)
            .map_err(|e| (ApiError::new(500, 10066, e), T))?;
        self.add_template(srv, tx, tc);
        match self.templates.get(name) {
            Some(t) => Ok(self.template_json(T, t)),
            None => Err(create_err("template not stored")),
        }
    }

    fn template_delete(&mut self, srv: &Arc<ServerShared>, config: &JsConfig, name: &str) -> Res {
        const T: &str = "stream_template_delete_response";
        let Some(mut t) = self.templates.remove(name) else {
            return Err((ApiError::new(404, 10068, "template not found"), T));
        };
        for s in t.subs.drain(..) {
            srv.unsubscribe_internal(&self.acc, &s);
        }
        let owned: Vec<String> = self
            .streams
            .values()
            .filter(|s| s.cfg.template_owner == name)
            .map(|s| s.cfg.name.clone())
            .collect();
        let acc = self.acc.clone();
        let cx = Cx::new(srv, &acc);
        for s in owned {
            let _ = self.stream_delete(&cx, &s);
        }
        persist::remove_dir(&template_dir(config, &self.acc.name, name));
        let mut o = Obj::typed(T);
        o.field("success", &true);
        Ok(o.done())
    }
}
