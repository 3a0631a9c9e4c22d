//! A consumer's configuration as nats-server 2.9 takes it: defaults, checks against its
//! stream, and what an update may change.

use super::*;

/// nats-server's `setConsumerConfigDefaults`.
pub fn apply_defaults(c: &mut ConsumerConfig, ephemeral: bool) {
    if c.max_deliver == 0 {
        c.max_deliver = -1;
    }
    if c.ack_policy != AckPolicy::None && c.ack_wait == 0 {
        c.ack_wait = DEFAULT_ACK_WAIT;
    }
    if c.deliver_subject.is_empty() && c.max_waiting == 0 {
        c.max_waiting = DEFAULT_MAX_WAITING;
    }
    if c.ack_policy != AckPolicy::None && c.max_ack_pending == 0 {
        c.max_ack_pending = DEFAULT_MAX_ACK_PENDING;
    }
    if ephemeral && c.inactive_threshold == 0 {
        c.inactive_threshold = DEFAULT_INACTIVE;
    }
}

/// The server's `jetstream { limits { max_request_batch } }` as a pull consumer's default
/// `max_batch` (nats-server's `setConsumerConfigDefaults`), before [`apply_defaults`].
pub fn apply_server_limits(c: &mut ConsumerConfig, l: &crate::config::JsServerLimits) {
    if c.deliver_subject.is_empty() && c.max_batch == 0 && l.max_request_batch > 0 {
        c.max_batch = l.max_request_batch;
    }
}

/// nats-server's checks of a consumer against the server's `jetstream { limits {} }`:
/// `max_batch` of a pull consumer (10125), `max_ack_pending` (10121), before the account's.
pub fn check_server_limits(
    c: &ConsumerConfig,
    l: &crate::config::JsServerLimits,
) -> Result<(), ApiError> {
    if c.deliver_subject.is_empty() && l.max_request_batch > 0 && c.max_batch > l.max_request_batch
    {
        return Err(ApiError::new(
            400,
            10125,
            format!(
                "consumer max request batch exceeds server limit of {}",
                l.max_request_batch
            ),
        ));
    }
    if l.max_ack_pending > 0 && c.max_ack_pending > l.max_ack_pending {
        return Err(ApiError::new(
            400,
            10121,
            format!(
                "consumer max ack pending exceeds system limit of {}",
                l.max_ack_pending
            ),
        ));
    }
    Ok(())
}

/// A replicated stream's consumer (clustered JetStream), as nats-server 2.15.1 checks it:
/// no more replicas than the stream, and an interest or work-queue stream's consumers as
/// many as the stream (0: the stream's).
pub fn check_replicated(c: &ConsumerConfig, s: &StreamConfig) -> Result<(), ApiError> {
    if c.num_replicas > 0 && c.num_replicas > s.num_replicas {
        return Err(ApiError::new(
            400,
            10126,
            "consumer config replica count exceeds parent stream",
        ));
    }
    if s.retention != Retention::Limits && c.num_replicas != 0 && c.num_replicas != s.num_replicas {
        return Err(ApiError::new(
            400,
            10134,
            "consumer config replicas must match interest retention stream's replicas",
        ));
    }
    Ok(())
}

/// nats-server's consumer config checks (after defaults) against its stream and the
/// account's `max_ack_pending` (-1: none).
pub fn check(c: &ConsumerConfig, s: &StreamConfig, max_ack_pending: i64) -> Result<(), ApiError> {
    // nats-server's JSMaxDescriptionLen, counted in bytes.
    if c.description.len() > 4096 {
        let d = "consumer description is too long, maximum allowed is 4096";
        return Err(ApiError::new(400, 10107, d));
    }
    // A replicated stream's consumers (clustered JetStream) run on its leader.
    if c.num_replicas > 1 && s.num_replicas <= 1 {
        return Err(ApiError::replicas());
    }
    if c.num_replicas < 0 {
        return Err(ApiError::new(
            400,
            10133,
            "replicas count cannot be negative",
        ));
    }
    let push = !c.deliver_subject.is_empty();
    if push {
        if c.max_waiting != 0 {
            return Err(ApiError::new(
                400,
                10080,
                "consumer in push mode can not set max waiting",
            ));
        }
        // nats-server 2.9.10 accepts max_batch, max_expires and max_bytes on push consumers.
        if crate::subject::has_wildcard(c.deliver_subject.as_bytes())
            || !crate::subject::is_valid_subject(c.deliver_subject.as_bytes())
        {
            return Err(ApiError::new(
                400,
                10079,
                "consumer deliver subject has wildcards",
            ));
        }
        if s.subjects
            .iter()
            .any(|x| crate::subject::overlaps(x.as_bytes(), c.deliver_subject.as_bytes()))
        {
            // Deliveries would be stored again, and delivered again, forever.
            return Err(ApiError::new(
                400,
                10081,
                "consumer deliver subject forms a cycle",
            ));
        }
        if c.flow_control && c.idle_heartbeat <= 0 {
            return Err(ApiError::new(
                400,
                10108,
                "consumer with flow control also needs heartbeats",
            ));
        }
    } else {
        if c.flow_control {
            return Err(ApiError::new(
                400,
                10089,
                "consumer flow control requires a push based consumer",
            ));
        }
        if c.idle_heartbeat != 0 {
            return Err(ApiError::new(
                400,
                10088,
                "consumer idle heartbeat requires a push based consumer",
            ));
        }
        if c.max_waiting < 0 {
            return Err(ApiError::new(
                400,
                10087,
                "consumer max waiting needs to be positive",
            ));
        }
    }
    if c.ack_wait < 0 || c.idle_heartbeat < 0 || c.inactive_threshold < 0 {
        return Err(ApiError::consumer_create("durations can not be negative"));
    }
    if c.idle_heartbeat > 0 && c.idle_heartbeat < 100_000_000 {
        return Err(ApiError::new(
            400,
            10083,
            "consumer idle heartbeat needs to be >= 100ms",
        ));
    }
    if max_ack_pending > 0 && c.max_ack_pending > max_ack_pending {
        return Err(ApiError::new(
            400,
            10121,
            format!("consumer max ack pending exceeds system limit of {max_ack_pending}"),
        ));
    }
    let policy_err = |what: &str, need: &str| {
        Err(ApiError::new(
            400,
            10094,
            format!("consumer delivery policy is deliver {what}, but optional {need} is not set"),
        ))
    };
    match c.deliver_policy {
        DeliverPolicy::ByStartSequence if c.opt_start_seq == 0 => {
            return policy_err("by start sequence", "start sequence")
        }
        DeliverPolicy::ByStartTime if c.opt_start_time.is_none() => {
            return policy_err("by start time", "start time")
        }
        DeliverPolicy::LastPerSubject if c.filter_subject.is_empty() => {
            return policy_err("last per subject", "filter subject")
        }
        _ => {}
    }
    let policy = match c.deliver_policy {
        DeliverPolicy::All => "all",
        DeliverPolicy::Last => "last",
        DeliverPolicy::New => "new",
        DeliverPolicy::ByStartSequence => "by start sequence",
        DeliverPolicy::ByStartTime => "by start time",
        DeliverPolicy::LastPerSubject => "last per subject",
    };
    let also_set = |what: &str| {
        Err(ApiError::new(
            400,
            10094,
            format!(
                "consumer delivery policy is deliver {policy}, but optional {what} is also set"
            ),
        ))
    };
    if c.deliver_policy != DeliverPolicy::ByStartSequence && c.opt_start_seq != 0 {
        return also_set("start sequence");
    }
    if let Some(t) = &c.opt_start_time {
        if c.deliver_policy != DeliverPolicy::ByStartTime {
            return also_set("start time");
        }
        if parse_time(t).is_none() {
            return Err(ApiError::invalid_json());
        }
    }
    if let Err(e) = super::super::advisory::sample_frequency(&c.sample_freq) {
        return Err(ApiError::new(
            400,
            10095,
            format!("failed to parse consumer sampling configuration: {e}"),
        ));
    }
    if !c.backoff.is_empty() {
        if c.max_deliver != -1 && c.max_deliver <= c.backoff.len() as i64 {
            return Err(ApiError::new(
                400,
                10116,
                "max deliver is required to be > length of backoff values",
            ));
        }
        if c.backoff.iter().any(|b| *b <= 0) {
            return Err(ApiError::consumer_create("backoff values must be positive"));
        }
    }
    if c.max_ack_pending < -1 || c.max_deliver < -1 {
        return Err(ApiError::consumer_create("limits can not be less than -1"));
    }
    if !c.filter_subject.is_empty() {
        let f = c.filter_subject.as_bytes();
        // As nats-server 2.9: the filter lies within one of the stream's subjects, or
        // covers one of them (`>` or `foo.*` on a stream of `foo.A`, `foo.B`).
        if !crate::subject::is_valid_subject(f)
            || !s.subjects.iter().any(|x| {
                crate::subject::subset_match(f, x.as_bytes())
                    || crate::subject::subset_match(x.as_bytes(), f)
            })
        {
            return Err(ApiError::new(
                400,
                10093,
                "consumer filter subject is not a valid subset of the interest subjects",
            ));
        }
    }
    // nats-server 2.9.10 takes ack none on a pull consumer except on a work-queue stream.
    if !push && c.ack_policy == AckPolicy::None && s.retention == Retention::Workqueue {
        return Err(ApiError::new(
            400,
            10084,
            "consumer in pull mode requires ack policy",
        ));
    }
    if s.retention == Retention::Workqueue && c.ack_policy != AckPolicy::Explicit {
        return Err(ApiError::new(
            400,
            10098,
            "workqueue stream requires explicit ack",
        ));
    }
    for n in [&c.durable_name, &c.name] {
        if !n.is_empty() && !valid_name(n) {
            return Err(ApiError::new(
                400,
                10127,
                "consumer name can not contain path separators",
            ));
        }
    }
    Ok(())
}

/// What may change in a consumer update (nats-server 2.9's `acceptableUpdate`).
pub fn check_update(old: &ConsumerConfig, new: &ConsumerConfig) -> Result<(), ApiError> {
    let e = |w: &str| Err(ApiError::consumer_create(format!("{w} can not be updated")));
    if old.ack_policy != new.ack_policy {
        return e("ack policy");
    }
    if old.deliver_policy != new.deliver_policy {
        return e("deliver policy");
    }
    if old.opt_start_seq != new.opt_start_seq {
        return e("start sequence");
    }
    if old.opt_start_time != new.opt_start_time {
        return e("start time");
    }
    if old.filter_subject != new.filter_subject {
        return e("filter subject");
    }
    if old.replay_policy != new.replay_policy {
        return e("replay policy");
    }
    if old.deliver_subject.is_empty() != new.deliver_subject.is_empty() {
        return Err(ApiError::consumer_create(
            if old.deliver_subject.is_empty() {
                "can not update pull consumer to push based"
            } else {
                "can not update push consumer to pull based"
            },
        ));
    }
    if old.flow_control != new.flow_control {
        return e("flow control");
    }
    if old.headers_only != new.headers_only {
        return e("headers only");
    }
    if old.max_waiting != new.max_waiting {
        return e("max waiting");
    }
    Ok(())
}
