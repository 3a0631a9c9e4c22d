//! The `js` entry of a traced message a stream takes (nats-server's `addJetStreamEvent`,
//! `updateJetStreamEvent`, `sendEventFromJetStream`). The stream's handler adds the entry and
//! hands a [`JsSlot`] to the JetStream engine with the message; the engine reports what the
//! stream did ([`JsSlot::done`]) — in place or later from its task. The event is sent once both
//! the fan-out has finished with the message and the stream has reported, by whichever comes
//! second (nats-server's `ready` counter).

use super::{Event, MsgTrace};
use crate::deliver::Fanout;
use crate::fabric::Fabric;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// What the stream did with a traced message.
#[derive(Debug, Default)]
struct Outcome {
    /// Set once the message passed the stream's checks.
    subject: String,
    nointerest: bool,
    error: String,
}

#[derive(Default)]
struct State {
    outcome: Option<Outcome>,
    /// The trace, once the fan-out has finished with the message.
    parked: Option<(Box<MsgTrace>, Arc<dyn Fabric>)>,
}

/// Shared by a traced message's trace and the engine's copy of the message.
pub struct JsSlot {
    trace_only: bool,
    state: Mutex<State>,
}

impl std::fmt::Debug for JsSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsSlot")
            .field("trace_only", &self.trace_only)
            .finish()
    }
}

/// A stream named `stream` takes the traced message in `fan` (none: `None`): its `js` entry is
/// added, to be completed by the engine through the returned slot. A message a second stream
/// takes (through an import) is not traced there (nats-server keeps one `js` entry).
pub fn begin(fan: &mut Fanout, stream: &str) -> Option<Arc<JsSlot>> {
    let t = fan.msg_trace.as_deref_mut()?;
    if t.js.is_some() {
        return None;
    }
    let slot = Arc::new(JsSlot {
        trace_only: t.trace_only,
        state: Mutex::new(State::default()),
    });
    t.js_at = t.events.len();
    t.events.push(Event::Js {
        ts: SystemTime::now(),
        stream: stream.to_string(),
        subject: String::new(),
        nointerest: false,
        error: String::new(),
    });
    t.js = Some(slot.clone());
    Some(slot)
}

impl JsSlot {
    /// Trace only: the stream checks the message but does not store it, nor acknowledge it.
    pub fn trace_only(&self) -> bool {
        self.trace_only
    }

    /// The stream took the message as `subject` (`nointerest`: an interest-retention stream
    /// nobody wants it from).
    pub fn stored(&self, subject: &str, nointerest: bool) {
        self.done(Outcome {
            subject: subject.to_string(),
            nointerest,
            error: String::new(),
        });
    }

    /// The stream refused the message: `subject` when it was refused at the store (past the
    /// header checks), as nats-server reports it.
    pub fn refused(&self, subject: Option<&str>, error: String) {
        self.done(Outcome {
            subject: subject.unwrap_or_default().to_string(),
            nointerest: false,
            error,
        });
    }

    fn done(&self, outcome: Outcome) {
        let parked = {
            let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            match s.parked.take() {
                Some(p) => Some((p, outcome)),
                None => {
                    s.outcome = Some(outcome);
                    None
                }
            }
        };
        if let Some(((mut t, fabric), outcome)) = parked {
            t.complete_js(outcome);
            let fabric2 = fabric.clone();
            super::send(&t, &fabric, |acc, m| {
                crate::internal::publish(fabric2, acc, m);
            });
        }
    }
}

impl MsgTrace {
    fn complete_js(&mut self, o: Outcome) {
        if let Some(Event::Js {
            ts,
            subject,
            nointerest,
            error,
            ..
        }) = self.events.get_mut(self.js_at)
        {
            *ts = SystemTime::now();
            *subject = o.subject;
            *nointerest = o.nointerest;
            *error = o.error;
        }
    }
}

/// The fan-out finished with a traced message that a stream took: `Some(t)` back when the
/// stream has reported (send now), else the trace waits in the slot for the engine.
pub(super) fn fan_done(mut t: Box<MsgTrace>, fabric: &Arc<dyn Fabric>) -> Option<Box<MsgTrace>> {
    // Taken out of the trace: a trace parked in its slot does not keep the slot alive (a
    // message the engine drops unreported frees both).
    let Some(slot) = t.js.take() else {
        return Some(t);
    };
    let mut s = slot.state.lock().unwrap_or_else(|e| e.into_inner());
    match s.outcome.take() {
        Some(o) => {
            drop(s);
            t.complete_js(o);
            Some(t)
        }
        None => {
            s.parked = Some((t, fabric.clone()));
            None
        }
    }
}
