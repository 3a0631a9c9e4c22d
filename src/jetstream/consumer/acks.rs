//! Acknowledgements of a consumer's deliveries (`+ACK`, `+NXT`, `+TERM`, `-NAK` with its
//! delay, `+WPI`), and handing everything pending to a new push subscriber.

use super::*;

impl Consumer {
    /// An acknowledgement for stream sequence `seq`, sent to the ack subject of delivery
    /// `dseq` (its `dc`th); returns the stream sequences now done with (acknowledged or
    /// terminated). As nats-server 2.9: the term advisory goes out for any term, the nak
    /// advisory and the sampled ack metric only for a message still pending, all with the
    /// sequences and count of the ack subject.
    pub fn ack(
        &mut self,
        cx: &Cx<'_>,
        (seq, dseq, dc): (u64, u64, u64),
        body: &[u8],
        now: Instant,
    ) -> Vec<u64> {
        let body = std::str::from_utf8(body).unwrap_or("").trim();
        let (verb, rest) = match body.split_once(' ') {
            Some((v, r)) => (v, r.trim()),
            None => (body, ""),
        };
        self.last_active = now;
        match verb {
            "" | "+ACK" | "+NXT" | "+TERM" => {
                let d = self.delivery(seq, dseq, dc);
                if verb == "+TERM" {
                    advisory::terminated(cx, d);
                } else if let Some(p) = self.pending.get(&seq) {
                    if advisory::sampled(&self.cfg.sample_freq) {
                        advisory::ack_metric(cx, d, now_nanos().saturating_sub(p.ts));
                    }
                }
                let mut done = Vec::new();
                if self.cfg.ack_policy == AckPolicy::All && verb != "+TERM" {
                    let upto: Vec<u64> = self.pending.range(..=seq).map(|(s, _)| *s).collect();
                    for s in upto {
                        self.pending.remove(&s);
                        self.rdc.remove(&s);
                        done.push(s);
                    }
                } else if self.pending.remove(&seq).is_some() {
                    self.rdc.remove(&seq);
                    done.push(seq);
                }
                if !done.is_empty() {
                    self.dirty = true;
                    self.acked_at = Some(now);
                }
                done
            }
            "-NAK" => {
                let delay = if rest.is_empty() {
                    0
                } else {
                    serde_json::from_str::<serde_json::Value>(rest)
                        .ok()
                        .and_then(|v| v.get("delay").and_then(serde_json::Value::as_i64))
                        .unwrap_or(0)
                };
                if self.pending.contains_key(&seq) {
                    advisory::nak(cx, self.delivery(seq, dseq, dc));
                }
                if let Some(p) = self.pending.get_mut(&seq) {
                    if delay > 0 {
                        p.deadline = later(now, nanos(delay));
                    } else {
                        p.deadline = now;
                        if self.in_redeliver.insert(seq) {
                            self.redeliver.push_back(seq);
                        }
                    }
                }
                Vec::new()
            }
            "+WPI" => {
                let dc = self.rdc.get(&seq).copied().unwrap_or(1);
                let wait = self.ack_wait_for(dc);
                if let Some(p) = self.pending.get_mut(&seq) {
                    p.deadline = later(now, wait);
                }
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    /// Progress another leader of the consumer's group committed, applied on this running
    /// copy. openraft applies an entry after it commits, so a member that comes to lead may
    /// start running from an older state than its predecessor's last committed one; what
    /// that predecessor acknowledged (a double ack it has already answered, too) must not
    /// come back. What either acknowledged stays acknowledged; what the predecessor
    /// delivered beyond this copy's cursor is pending here, redelivered after its ack wait.
    pub fn merge_committed(&mut self, st: &ConsumerState, store: &dyn MsgStore) {
        let theirs: HashSet<u64> = st.pending.iter().map(|p| p.0).collect();
        let acked: Vec<u64> = self
            .pending
            .range(..st.sseq)
            .map(|(s, _)| *s)
            .filter(|s| !theirs.contains(s))
            .collect();
        for s in acked {
            self.pending.remove(&s);
            self.rdc.remove(&s);
            self.dirty = true;
        }
        let last = store.state().last_seq;
        if st.sseq > self.sseq {
            let now = Instant::now();
            for &(s, d, ts, dc) in st.pending.iter().filter(|p| p.0 >= self.sseq) {
                if s > last {
                    continue;
                }
                let deadline = later(now, self.ack_wait_for(dc));
                self.pending.insert(
                    s,
                    Pending {
                        dseq: d,
                        ts,
                        deadline,
                    },
                );
                if dc > 1 {
                    self.rdc.insert(s, dc);
                }
            }
            self.sseq = st.sseq.min(last + 1);
            self.dirty = true;
        }
        self.dseq = self.dseq.max(st.dseq);
    }

    /// A push consumer's deliver subject changed (a client took it over): everything pending
    /// goes to the new subscriber now, as nats-server's `forceExpirePending`.
    pub fn redeliver_all_now(&mut self, now: Instant) {
        let seqs: Vec<u64> = self.pending.keys().copied().collect();
        for seq in seqs {
            if let Some(p) = self.pending.get_mut(&seq) {
                p.deadline = now;
            }
            if self.in_redeliver.insert(seq) {
                self.redeliver.push_back(seq);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jetstream::store::memory::MemStore;
    use crate::jetstream::store::StoreLimits;

    /// A consumer with explicit acks over a stream of `n` messages.
    fn setup(n: u64) -> (MemStore, Consumer) {
        let store = MemStore::new(StoreLimits::default());
        for i in 0..n {
            store.store("m", None, b"x", i as i64).expect("store");
        }
        let cfg = ConsumerConfig {
            ack_policy: AckPolicy::Explicit,
            ack_wait: 30_000_000_000,
            ..Default::default()
        };
        let c = Consumer::new("D".into(), "S".into(), cfg, 0, true, &store);
        (store, c)
    }

    /// Delivered up to `sseq - 1`, with `pending` unacknowledged (delivered once each).
    fn state(sseq: u64, pending: &[u64]) -> ConsumerState {
        ConsumerState {
            sseq,
            dseq: sseq,
            pending: pending.iter().map(|&s| (s, s, 0, 1)).collect(),
            redelivered: Vec::new(),
        }
    }

    #[test]
    fn a_new_leader_keeps_what_its_predecessor_acknowledged() {
        let (store, mut c) = setup(60);
        // It took over from progress where 45..=50 were delivered and unacknowledged; its
        // predecessor then committed the ack of all of them (the last entry it applied).
        c.restore(&state(51, &[45, 46, 47, 48, 49, 50]), &store);
        c.merge_committed(&state(51, &[]), &store);
        assert!(c.pending.is_empty(), "{:?}", c.pending.keys());
        assert_eq!(c.ack_floor(), (50, 50));
    }

    #[test]
    fn what_the_predecessor_delivered_beyond_this_copy_is_pending_here() {
        let (store, mut c) = setup(60);
        c.restore(&state(48, &[46, 47]), &store);
        // The predecessor went on: 46 and 48 acknowledged, 47, 49 and 50 not.
        c.merge_committed(&state(51, &[47, 49, 50]), &store);
        assert_eq!(
            c.pending.keys().copied().collect::<Vec<_>>(),
            vec![47, 49, 50]
        );
        assert_eq!(c.state().sseq, 51);
        assert_eq!(c.ack_floor().1, 46);
        // An older state than its own takes nothing back.
        c.merge_committed(&state(48, &[46, 47]), &store);
        assert_eq!(
            c.pending.keys().copied().collect::<Vec<_>>(),
            vec![47, 49, 50]
        );
        assert_eq!(c.state().sseq, 51);
    }
}
