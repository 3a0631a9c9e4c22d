//! Consumers' metadata and progress written to their stream's directory (file streams):
//! the states that changed, at the engine's save interval and at shutdown; the metadata
//! when a consumer is created.

use super::*;

pub(super) fn save_states(st: &mut Stream, sync: bool) {
    let Some(dir) = &st.dir else {
        return;
    };
    for c in st.consumers.values_mut() {
        if !c.dirty {
            continue;
        }
        let p = persist::consumer_dir(dir, &c.name).join("state.json");
        match persist::write_json(&p, &c.state(), sync) {
            Ok(()) => c.dirty = false,
            Err(e) => tracing::error!("JetStream: consumer state not saved: {e}"),
        }
    }
}

pub(super) fn save_consumer_meta(st: &Stream, c: &Consumer) -> Result<(), String> {
    save_consumer_meta_in(st.dir.as_deref(), c)
}

/// As [`save_consumer_meta`], in its stream's directory `dir` (none: a memory stream).
pub(super) fn save_consumer_meta_in(dir: Option<&Path>, c: &Consumer) -> Result<(), String> {
    let Some(dir) = dir else {
        return Ok(());
    };
    // Ephemerals too: nats-server keeps them on disk and recovers them after a restart.
    let cdir = persist::consumer_dir(dir, &c.name);
    persist::write_json(
        &cdir.join("meta.json"),
        &ConsumerMeta {
            name: c.name.clone(),
            config: c.cfg.clone(),
            created: c.created,
            origin: c.origin,
        },
        true,
    )?;
    persist::write_json(&cdir.join("state.json"), &c.state(), false)
}
