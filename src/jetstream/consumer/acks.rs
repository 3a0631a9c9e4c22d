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
