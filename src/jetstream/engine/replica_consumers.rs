//! The engine's side of a replicated stream's consumers (`cluster/cgroups.rs`): each
//! consumer has a Raft group of its own on the stream's peers. Its leader's copy delivers,
//! takes acks and runs timers; it sends its progress (`Consumer::state`) to the group when
//! it changes (at most every 100 ms, at once for a synchronous ack), and every member
//! restores it on the passive copy when the entry is applied. A member that comes to lead
//! takes over from the last progress it applied: what was delivered and not acknowledged
//! then is delivered again after its ack wait, as by nats-server; pull requests made to the
//! old leader are gone (clients pull again). Progress its predecessor committed that it
//! applies only after taking over is merged in (`Consumer::merge_committed`).

use super::replica::{Progress, ProgressEntry};
use super::*;

/// A replicated consumer's creation answer, held until its group has a leader (nats-server
/// answers from the consumer's leader, so a client may pull at once).
pub struct Held {
    stream: String,
    consumer: String,
    reply: String,
    since: Instant,
}

impl Held {
    pub fn new(stream: String, consumer: String, reply: &str) -> Held {
        Held {
            stream,
            consumer,
            reply: reply.to_string(),
            since: Instant::now(),
        }
    }
}

/// A held creation is answered after this even without a leader (as the consumer is).
const HOLD_AT_MOST: Duration = Duration::from_secs(5);
/// A held creation whose group is led by another node is answered after this.
const LED_ELSEWHERE: Duration = Duration::from_millis(300);

/// Who leads a consumer's group, as the cluster's tick sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Led {
    /// This node: its copy runs.
    Here,
    /// Another node, as this member knows it.
    Elsewhere,
    /// No leader known (or elected here, not yet followed).
    Unknown,
}

/// What the cluster needs to run a consumer's group.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumerDesc {
    pub name: String,
    pub created: i64,
    /// How many members its group has ([`group_size`]).
    pub replicas: usize,
    /// Created by a live log entry here (see `Consumer::born_live`).
    pub born_live: bool,
    pub memory: bool,
    pub origin: Option<crate::jetstream::persist::Origin>,
}

/// How many members a consumer's group has: `num_replicas`, the stream's when 0 (or more
/// than the stream's), 1 for an ephemeral of a limits stream without one — nats-server's
/// `ConsumerConfig.replicas`.
pub fn group_size(c: &ConsumerConfig, s: &StreamConfig) -> usize {
    let stream_r = s.num_replicas.max(1) as usize;
    match c.num_replicas.max(0) as usize {
        0 if c.durable_name.is_empty() && s.retention == Retention::Limits => 1,
        n if n == 0 || n > stream_r => stream_r,
        n => n,
    }
}

impl Engine {
    fn consumer_mut(&mut self, account: &str, stream: &str, name: &str) -> Option<&mut Consumer> {
        self.accounts
            .get_mut(account)?
            .streams
            .get_mut(stream)?
            .consumers
            .get_mut(name)
    }

    /// The consumers of this node's copy of a replicated stream.
    pub fn replica_consumers(&self, account: &str, stream: &str) -> Vec<ConsumerDesc> {
        let Some(st) = self
            .accounts
            .get(account)
            .and_then(|a| a.streams.get(stream))
        else {
            return Vec::new();
        };
        if st.replica.is_none() {
            return Vec::new();
        }
        st.consumers
            .values()
            .map(|c| ConsumerDesc {
                name: c.name.clone(),
                created: c.created,
                replicas: group_size(&c.cfg, &st.cfg),
                born_live: c.born_live,
                memory: st.cfg.storage == Storage::Memory || c.cfg.mem_storage,
                origin: c.origin,
            })
            .collect()
    }

    /// The consumer's group as the cluster's tick sees it: whether this node leads it, and
    /// CONSUMER INFO's `cluster`. A copy that comes to lead starts delivering from the
    /// progress it restored last; one that stops forgets the pull requests waiting here.
    pub fn set_consumer_leader(
        &mut self,
        srv: &Arc<ServerShared>,
        account: &str,
        stream: &str,
        name: &str,
        led: Led,
        cluster_json: Option<String>,
    ) {
        let leader = led == Led::Here;
        let Some(ja) = self.accounts.get_mut(account) else {
            return;
        };
        let Some(st) = ja.streams.get_mut(stream) else {
            return;
        };
        let Some(c) = st.consumers.get_mut(name) else {
            return;
        };
        if let Some(j) = cluster_json {
            c.cluster_json = j;
        }
        c.led_elsewhere = led == Led::Elsewhere;
        if c.passive != leader {
            return;
        }
        c.passive = !leader;
        c.last_active = Instant::now();
        c.replicated = leader.then(|| c.state());
        if !leader {
            c.waiting.clear();
            return;
        }
        tracing::debug!("JetStream: this server leads consumer {stream:?} > {name:?}");
        let cx = Cx::new(srv, &ja.acc);
        let mut acked = Vec::new();
        c.pump(&cx, st.store.as_ref(), &mut acked);
    }

    /// On the consumer's leader: whether [`Engine::consumer_progress_due`] has something to
    /// send (the tick wakes the proposer only then).
    pub fn consumer_progress_pending(&self, account: &str, stream: &str, name: &str) -> bool {
        self.accounts
            .get(account)
            .and_then(|a| a.streams.get(stream))
            .and_then(|s| s.consumers.get(name))
            .filter(|c| !c.passive)
            .is_some_and(|c| !c.ack_replies.is_empty() || c.replicated.as_ref() != Some(&c.state()))
    }

    /// On the consumer's leader: its progress when it changed since it last went to the
    /// group (or synchronous acks wait for it), as a [`super::replica::CONSUMER_STATES`]
    /// entry's payload.
    pub fn consumer_progress_due(
        &mut self,
        account: &str,
        stream: &str,
        name: &str,
    ) -> Option<Vec<u8>> {
        let c = self
            .consumer_mut(account, stream, name)
            .filter(|c| !c.passive)?;
        let mut e = ProgressEntry::default();
        let state = c.state();
        if c.replicated.as_ref() != Some(&state) {
            c.replicated = Some(state.clone());
            e.states.push(Progress {
                name: c.name.clone(),
                state,
            });
        }
        e.replies.append(&mut c.ack_replies);
        (!e.states.is_empty() || !e.replies.is_empty())
            .then(|| serde_json::to_vec(&e).unwrap_or_default())
    }

    /// A committed entry of the consumer's group (or its snapshot): the passive copy takes
    /// the progress; every copy records it as committed (`group_applied`, which the stream's
    /// leader relays for retention). `mine`: this node proposed it and answers the
    /// synchronous acks it carries.
    pub fn apply_consumer_entry(
        &mut self,
        srv: &Arc<ServerShared>,
        account: &str,
        stream: &str,
        name: &str,
        payload: &[u8],
        mine: bool,
    ) {
        let e: ProgressEntry = match serde_json::from_slice(payload) {
            Ok(e) => e,
            Err(e) => {
                tracing::error!("JetStream: consumer {stream:?} > {name:?}: bad progress: {e}");
                return;
            }
        };
        let Some(ja) = self.accounts.get_mut(account) else {
            return;
        };
        if mine && !e.replies.is_empty() {
            let cx = Cx::new(srv, &ja.acc);
            for r in &e.replies {
                cx.send(r, None, None, b"");
            }
        }
        let Some(st) = ja.streams.get_mut(stream) else {
            return;
        };
        let Some(c) = st.consumers.get_mut(name) else {
            return;
        };
        for p in e.states.into_iter().filter(|p| p.name == name) {
            if c.passive {
                c.restore(&p.state, st.store.as_ref());
                c.last_active = Instant::now();
            } else if !mine {
                c.merge_committed(&p.state, st.store.as_ref());
            }
            c.group_applied = Some(p.state);
        }
    }

    /// The consumer group's snapshot: the progress it committed.
    pub fn consumer_snapshot(&self, account: &str, stream: &str, name: &str) -> Vec<u8> {
        let Some(c) = self
            .accounts
            .get(account)
            .and_then(|a| a.streams.get(stream))
            .and_then(|s| s.consumers.get(name))
        else {
            return Vec::new();
        };
        let Some(state) = c.group_applied.clone() else {
            return Vec::new();
        };
        let e = ProgressEntry {
            states: vec![Progress {
                name: name.to_string(),
                state,
            }],
            replies: Vec::new(),
        };
        serde_json::to_vec(&e).unwrap_or_default()
    }

    /// Answers the held creations whose consumer's group has a leader (or that waited
    /// [`HOLD_AT_MOST`]), with the consumer's info as it is now.
    pub fn answer_held(&mut self, srv: &Arc<ServerShared>) {
        const T: &str = "consumer_create_response";
        for ja in self.accounts.values_mut() {
            if ja.held.is_empty() {
                continue;
            }
            let acc = ja.acc.clone();
            let cx = Cx::new(srv, &acc);
            let streams = &ja.streams;
            ja.held.retain(|h| {
                let Some(st) = streams.get(&h.stream) else {
                    return false;
                };
                let Some(c) = st.consumers.get(&h.consumer) else {
                    return false;
                };
                // Led here (this copy runs it), or led elsewhere a while: the leader's own
                // tick has made its copy run by then. (Elected here but not yet followed,
                // it is not led: a pull request now would reach no active copy.)
                let waited = h.since.elapsed();
                let elsewhere = c.led_elsewhere && waited >= LED_ELSEWHERE;
                if c.passive && !elsewhere && waited < HOLD_AT_MOST {
                    return true;
                }
                let out = c.info_json(st, Some(T), Some(&cx));
                cx.send(&h.reply, None, None, out.as_bytes());
                false
            });
        }
    }
}
