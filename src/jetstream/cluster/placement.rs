//! Which nodes hold a stream, and how a stream's group moves to a new set of nodes: pure
//! decisions (no I/O, no clock), fed what the node knows and tested over many seeds.
//!
//! - [`select`]: nats-server's `selectPeerGroup` — the nodes of the target cluster that are
//!   online, carry every tag the placement asks for and none it excludes (`!tag`, and never
//!   a node tagged `!jetstream`), one per value of the `unique_tag` prefix; existing peers
//!   kept first; the rest the least loaded (fewest assigned streams), ties broken by a hash
//!   of the stream's name so streams spread. Failures say why in nats-server's words.
//! - [`shrink`]: a scale-down keeps the current leader and the first peers.
//! - [`membership_step`]: the next change the stream's leader makes to its group so that
//!   its voters become the assigned peers — add before remove (the group never has fewer
//!   copies than the smaller of the two sets), itself last.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::raft::NodeId;

/// The tag a node carries to take no JetStream assets (nats-server's `jsExcludePlacement`).
pub const EXCLUDE_PLACEMENT: &str = "!jetstream";

/// A node that may hold a copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub id: NodeId,
    pub name: String,
    pub cluster: String,
    pub tags: Vec<String>,
    /// Heard from lately.
    pub online: bool,
    /// Streams already assigned to it.
    pub load: usize,
}

/// A stream's `placement` (`{ cluster, tags }`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Spec {
    pub cluster: Option<String>,
    pub tags: Vec<String>,
}

impl Spec {
    /// From a stream configuration's `placement` value (absent or `null`: no constraint).
    pub fn of(placement: Option<&serde_json::Value>) -> Spec {
        let Some(p) = placement.filter(|p| p.is_object()) else {
            return Spec::default();
        };
        Spec {
            cluster: p["cluster"]
                .as_str()
                .filter(|c| !c.is_empty())
                .map(str::to_string),
            tags: p["tags"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t.as_str())
                .map(|t| t.trim().to_lowercase())
                .filter(|t| !t.is_empty())
                .collect(),
        }
    }
}

/// Why no placement was found: nats-server's `selectPeerError`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlaceError {
    pub offline: bool,
    pub exclude_tag: bool,
    pub unique_tag: bool,
    pub no_js_cluster: bool,
    pub not_matched: BTreeSet<String>,
    pub excluded: BTreeSet<String>,
}

impl fmt::Display for PlaceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("no suitable peers for placement")?;
        for (set, why) in [
            (self.offline, "peer offline"),
            (self.exclude_tag, "exclude tag set"),
            (self.unique_tag, "server tag not unique"),
            (self.no_js_cluster, "jetstream not enabled in cluster"),
        ] {
            if set {
                write!(f, ", {why}")?;
            }
        }
        let list = |s: &BTreeSet<String>| {
            s.iter()
                .map(|t| format!("'{t}'"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if !self.not_matched.is_empty() {
            write!(f, ", tags not matched [{}]", list(&self.not_matched))?;
        }
        if !self.excluded.is_empty() {
            write!(f, ", tags excluded [{}]", list(&self.excluded))?;
        }
        Ok(())
    }
}

/// A stable rank of `id` for `stream`: equal loads spread by stream name.
fn rank(stream: &str, id: NodeId) -> u64 {
    super::node_id(&format!("{stream}/{id}"))
}

/// `n` peers for `stream` in cluster `home` (the placement's cluster when it names one):
/// `existing` first (all of them when they are `n` or more), then the best candidates.
pub fn select(
    stream: &str,
    n: usize,
    spec: &Spec,
    home: &str,
    unique_tag: Option<&str>,
    cands: &[Candidate],
    existing: &[(NodeId, String)],
) -> Result<Vec<(NodeId, String)>, PlaceError> {
    if existing.len() >= n {
        return Ok(existing[..n].to_vec());
    }
    let cluster = spec.cluster.as_deref().unwrap_or(home);
    // A unique-tag prefix the placement names itself is not enforced (as nats-server).
    let unique = unique_tag.filter(|u| !u.is_empty()).filter(|u| {
        !spec
            .tags
            .iter()
            .any(|t| t.trim_start_matches('!').starts_with(u))
    });
    let unique_of = |c: &Candidate| -> Option<String> {
        let u = unique?;
        c.tags.iter().find(|t| t.starts_with(u)).cloned()
    };
    let mut err = PlaceError::default();
    let mut taken: BTreeSet<String> = BTreeSet::new();
    if unique.is_some() {
        for (id, _) in existing {
            if let Some(t) = cands.iter().find(|c| c.id == *id).and_then(unique_of) {
                taken.insert(t);
            }
        }
    }
    let mut fit: Vec<&Candidate> = Vec::new();
    let mut in_cluster = 0;
    for c in cands {
        if c.cluster != cluster {
            continue;
        }
        in_cluster += 1;
        if existing.iter().any(|(id, _)| *id == c.id) {
            continue;
        }
        if !c.online {
            err.offline = true;
            continue;
        }
        if c.tags.iter().any(|t| t == EXCLUDE_PLACEMENT) {
            err.exclude_tag = true;
            continue;
        }
        let mut matched = true;
        for t in &spec.tags {
            let (tag, exclude) = match t.strip_prefix('!') {
                Some(x) => (x, true),
                None => (t.as_str(), false),
            };
            let has = c.tags.iter().any(|x| x == tag);
            if exclude && has {
                err.excluded.insert(tag.to_string());
                matched = false;
                break;
            }
            if !exclude && !has {
                err.not_matched.insert(tag.to_string());
                matched = false;
                break;
            }
        }
        if matched {
            fit.push(c);
        }
    }
    fit.sort_by_key(|c| (c.load, rank(stream, c.id)));
    let mut out = existing.to_vec();
    for c in fit {
        if out.len() == n {
            break;
        }
        if unique.is_some() {
            match unique_of(c) {
                Some(t) if !taken.contains(&t) => {
                    taken.insert(t);
                }
                _ => {
                    err.unique_tag = true;
                    continue;
                }
            }
        }
        out.push((c.id, c.name.clone()));
    }
    if out.len() < n {
        if in_cluster == 0 {
            err.no_js_cluster = cands.is_empty();
        }
        return Err(err);
    }
    Ok(out)
}

/// A scale-down to `n`: the leader (when it is a peer) and then the first peers.
pub fn shrink(
    peers: &[(NodeId, String)],
    n: usize,
    leader: Option<NodeId>,
) -> Vec<(NodeId, String)> {
    let mut out: Vec<(NodeId, String)> = peers
        .iter()
        .filter(|p| Some(p.0) == leader)
        .cloned()
        .collect();
    for p in peers {
        if out.len() >= n {
            break;
        }
        if !out.contains(p) {
            out.push(p.clone());
        }
    }
    out.truncate(n.max(1));
    out
}

/// One change to a group's membership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Bring this node in (as a learner until it is current, then a voter).
    Add(NodeId, String),
    Remove(NodeId),
}

/// The next change that moves the group's `voters` toward `assigned`, made by its leader
/// `me`: first every missing peer is added, then every extra one removed, the leader last
/// (it steps down once the group without it has committed).
pub fn membership_step(
    assigned: &[(NodeId, String)],
    voters: &[NodeId],
    me: NodeId,
) -> Option<Step> {
    if let Some((id, name)) = assigned.iter().find(|(id, _)| !voters.contains(id)) {
        return Some(Step::Add(*id, name.clone()));
    }
    let want: BTreeSet<NodeId> = assigned.iter().map(|p| p.0).collect();
    if let Some(id) = voters.iter().find(|v| !want.contains(v) && **v != me) {
        return Some(Step::Remove(*id));
    }
    (!want.contains(&me) && voters.contains(&me) && !want.is_empty()).then_some(Step::Remove(me))
}

/// Carries out `step` on `group` (its leader), logged as a `kind` ("stream", "consumer")
/// group's; `busy` is cleared after, so the next tick may take the next step.
pub async fn run_step(
    group: crate::raft::Group,
    step: Step,
    busy: std::sync::Arc<std::sync::atomic::AtomicBool>,
    kind: &str,
) {
    let res = match &step {
        Step::Add(id, name) => group.add_member(*id, name).await,
        Step::Remove(id) => group.remove_member(*id).await,
    };
    match res {
        Ok(()) => tracing::info!("JetStream: {kind} group {}: {step:?}", group.name()),
        Err(e) => tracing::debug!("JetStream: {kind} group {}: {step:?}: {e}", group.name()),
    }
    busy.store(false, std::sync::atomic::Ordering::Relaxed);
}

/// How many streams each node holds, from the assignments' peers.
pub fn loads<'a>(
    peer_sets: impl Iterator<Item = &'a [(NodeId, String)]>,
) -> BTreeMap<NodeId, usize> {
    let mut m = BTreeMap::new();
    for set in peer_sets {
        for (id, _) in set {
            *m.entry(*id).or_insert(0) += 1;
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{rngs::StdRng, Rng, SeedableRng};

    fn cand(id: NodeId, tags: &[&str]) -> Candidate {
        Candidate {
            id,
            name: format!("n{id}"),
            cluster: "C".into(),
            tags: tags.iter().map(|t| t.to_string()).collect(),
            online: true,
            load: 0,
        }
    }

    #[test]
    fn tags_cluster_and_exclusion_as_nats_server_reports_them() {
        let cands = vec![
            cand(1, &["az:1", "ssd"]),
            cand(2, &["az:2", "ssd"]),
            cand(3, &["az:2"]),
            cand(4, &[EXCLUDE_PLACEMENT]),
        ];
        let spec = |tags: &[&str]| Spec {
            cluster: None,
            tags: tags.iter().map(|t| t.to_string()).collect(),
        };
        let two = select("S", 2, &spec(&["ssd"]), "C", None, &cands, &[]).expect("two ssd");
        let ids: BTreeSet<NodeId> = two.iter().map(|p| p.0).collect();
        assert_eq!(ids, BTreeSet::from([1, 2]));
        let e = select("S", 3, &spec(&["ssd"]), "C", None, &cands, &[]).expect_err("3 ssd");
        assert_eq!(
            e.to_string(),
            "no suitable peers for placement, exclude tag set, tags not matched ['ssd']"
        );
        let e = select("S", 2, &spec(&["!az:2"]), "C", None, &cands, &[]).expect_err("!az:2");
        assert_eq!(
            e.to_string(),
            "no suitable peers for placement, exclude tag set, tags excluded ['az:2']"
        );
        let other = Spec {
            cluster: Some("ELSEWHERE".into()),
            tags: vec![],
        };
        let e = select("S", 1, &other, "C", None, &cands, &[]).expect_err("no such cluster");
        assert_eq!(e.to_string(), "no suitable peers for placement");
        // One copy per availability zone.
        let e = select("S", 3, &spec(&[]), "C", Some("az:"), &cands, &[]).expect_err("2 zones");
        assert!(e.unique_tag, "{e}");
        let two = select("S", 2, &spec(&[]), "C", Some("az:"), &cands, &[]).expect("two zones");
        assert!(two.iter().any(|p| p.0 == 1), "{two:?}");
    }

    #[test]
    fn existing_peers_stay_and_an_offline_node_is_not_chosen() {
        let mut cands: Vec<Candidate> = (1..=5).map(|i| cand(i, &[])).collect();
        cands[4].online = false;
        let existing = vec![(3, "n3".to_string())];
        let out = select("S", 3, &Spec::default(), "C", None, &cands, &existing).expect("3");
        assert_eq!(out[0].0, 3);
        assert!(!out.iter().any(|p| p.0 == 5), "{out:?}");
        let e = select("S", 5, &Spec::default(), "C", None, &cands, &existing).expect_err("5");
        assert!(e.offline, "{e}");
        assert_eq!(
            select("S", 1, &Spec::default(), "C", None, &cands, &existing),
            Ok(existing)
        );
    }

    #[test]
    fn placements_spread_over_the_least_loaded_nodes() {
        let mut cands: Vec<Candidate> = (1..=5).map(|i| cand(i, &[])).collect();
        let mut held: Vec<Vec<(NodeId, String)>> = Vec::new();
        for s in 0..50 {
            let l = loads(held.iter().map(Vec::as_slice));
            for c in &mut cands {
                c.load = l.get(&c.id).copied().unwrap_or(0);
            }
            let p = select(
                &format!("S{s}"),
                3,
                &Spec::default(),
                "C",
                None,
                &cands,
                &[],
            )
            .expect("placed");
            held.push(p);
        }
        let l = loads(held.iter().map(Vec::as_slice));
        let (min, max) = (l.values().min(), l.values().max());
        assert!(max.zip(min).is_some_and(|(a, b)| a - b <= 1), "{l:?}");
    }

    /// Over many seeds: from any voter set to any assigned set, the leader's steps end with
    /// the voters equal to the assignment, never below the smaller set's size, never
    /// removing itself while other changes are left.
    #[test]
    fn membership_steps_converge_over_many_seeds() {
        for seed in 0..2000u64 {
            let mut rng = StdRng::seed_from_u64(seed);
            let pick = |rng: &mut StdRng| -> Vec<NodeId> {
                let n = rng.random_range(1..=5);
                let mut v: Vec<NodeId> = (1..=7).collect();
                for i in (1..v.len()).rev() {
                    v.swap(i, rng.random_range(0..=i));
                }
                v.truncate(n);
                v
            };
            let mut voters = pick(&mut rng);
            let assigned: Vec<(NodeId, String)> = pick(&mut rng)
                .into_iter()
                .map(|i| (i, format!("n{i}")))
                .collect();
            let me = voters[rng.random_range(0..voters.len())];
            let floor = voters.len().min(assigned.len());
            let mut steps = 0;
            while let Some(s) = membership_step(&assigned, &voters, me) {
                steps += 1;
                assert!(steps <= 12, "seed {seed}: no end");
                match s {
                    Step::Add(id, _) => voters.push(id),
                    Step::Remove(id) => {
                        if id == me {
                            assert!(
                                assigned.iter().all(|a| voters.contains(&a.0))
                                    && voters.len() == assigned.len() + 1,
                                "seed {seed}: the leader left first"
                            );
                        }
                        voters.retain(|v| *v != id);
                    }
                }
                assert!(voters.len() >= floor, "seed {seed}: {voters:?}");
            }
            let mut got = voters.clone();
            got.sort_unstable();
            let mut want: Vec<NodeId> = assigned.iter().map(|p| p.0).collect();
            want.sort_unstable();
            assert_eq!(got, want, "seed {seed}");
        }
    }

    #[test]
    fn a_scale_down_keeps_the_leader() {
        let peers: Vec<(NodeId, String)> = (1..=3).map(|i| (i, format!("n{i}"))).collect();
        assert_eq!(shrink(&peers, 1, Some(3)), vec![(3, "n3".to_string())]);
        assert_eq!(shrink(&peers, 1, None), vec![(1, "n1".to_string())]);
        assert_eq!(shrink(&peers, 2, Some(2)).len(), 2);
        assert_eq!(shrink(&peers, 2, Some(9))[0].0, 1);
    }

    #[test]
    fn a_placement_value_parses_as_nats_server_reads_it() {
        let v = serde_json::json!({"cluster": "east", "tags": ["SSD", " az:1 "]});
        assert_eq!(
            Spec::of(Some(&v)),
            Spec {
                cluster: Some("east".into()),
                tags: vec!["ssd".into(), "az:1".into()]
            }
        );
        assert_eq!(Spec::of(Some(&serde_json::Value::Null)), Spec::default());
        assert_eq!(Spec::of(None), Spec::default());
    }
}
