//! Compression modes and the rules that pick one, as nats-server 2.10+ has them
//! (server/server.go `validateAndNormalizeCompressionOption`, `selectCompressionMode`,
//! `selectS2AutoModeBasedOnRTT`, `compressionModeForInfoProtocol`): pure functions of the
//! configured options, the peer's INFO `compression` field and a measured RTT. Error texts are
//! nats-server's.

use super::stream::Level;
use crate::util::time::go_duration;
use std::fmt;
use std::time::Duration;

/// A compression mode: what `compression: ...` configures, what INFO carries and what a route
/// ends up using.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompressionMode {
    /// Behave as a server without compression (pre-2.10): no `compression` in INFO.
    NotSupported,
    Off,
    /// Do not initiate compression, but use the peer's mode when it does (route default).
    Accept,
    /// Pick the level from the RTT, re-checked after every PONG (leafnode default).
    S2Auto,
    S2Uncompressed,
    S2Fast,
    S2Better,
    S2Best,
}

impl CompressionMode {
    pub const ALL: [CompressionMode; 8] = [
        CompressionMode::NotSupported,
        CompressionMode::Off,
        CompressionMode::Accept,
        CompressionMode::S2Auto,
        CompressionMode::S2Uncompressed,
        CompressionMode::S2Fast,
        CompressionMode::S2Better,
        CompressionMode::S2Best,
    ];

    /// The canonical string, as nats-server writes it in INFO, `/varz` and `/routez`.
    pub fn as_str(self) -> &'static str {
        match self {
            CompressionMode::NotSupported => "not supported",
            CompressionMode::Off => "off",
            CompressionMode::Accept => "accept",
            CompressionMode::S2Auto => "s2_auto",
            CompressionMode::S2Uncompressed => "s2_uncompressed",
            CompressionMode::S2Fast => "s2_fast",
            CompressionMode::S2Better => "s2_better",
            CompressionMode::S2Best => "s2_best",
        }
    }

    /// A mode as a peer's INFO carries it: only the canonical strings.
    pub fn from_info(s: &str) -> Option<Self> {
        Some(match s {
            "not supported" => CompressionMode::NotSupported,
            "off" => CompressionMode::Off,
            "accept" => CompressionMode::Accept,
            "s2_auto" => CompressionMode::S2Auto,
            "s2_uncompressed" => CompressionMode::S2Uncompressed,
            "s2_fast" => CompressionMode::S2Fast,
            "s2_better" => CompressionMode::S2Better,
            "s2_best" => CompressionMode::S2Best,
            _ => return None,
        })
    }

    /// Whether this side negotiates compression at all (nats-server's `needsCompression`).
    pub fn needs_compression(self) -> bool {
        !matches!(self, CompressionMode::Off | CompressionMode::NotSupported)
    }

    /// The encoder level of a concrete `s2_*` mode; `None` for the others (and for `s2_auto`,
    /// which must be resolved by RTT first).
    pub fn level(self) -> Option<Level> {
        match self {
            CompressionMode::S2Uncompressed => Some(Level::Uncompressed),
            CompressionMode::S2Fast => Some(Level::Fast),
            CompressionMode::S2Better => Some(Level::Better),
            CompressionMode::S2Best => Some(Level::Best),
            _ => None,
        }
    }
}

impl fmt::Display for CompressionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// s2_auto's default thresholds: up to 10 ms uncompressed, up to 50 ms fast, up to 100 ms
/// better, above that best.
pub const DEFAULT_RTT_THRESHOLDS: [Duration; 3] = [
    Duration::from_millis(10),
    Duration::from_millis(50),
    Duration::from_millis(100),
];

/// A validated, normalized `compression` setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompressionOpts {
    pub mode: CompressionMode,
    /// Only for `S2Auto` (empty otherwise): at most 4, ascending except for 0 entries, which
    /// disable a level; trailing zeros trimmed.
    pub rtt_thresholds: Vec<Duration>,
}

impl CompressionOpts {
    /// A mode other than `S2Auto` (which needs thresholds).
    pub fn new(mode: CompressionMode) -> Self {
        let rtt_thresholds = if mode == CompressionMode::S2Auto {
            DEFAULT_RTT_THRESHOLDS.to_vec()
        } else {
            Vec::new()
        };
        CompressionOpts {
            mode,
            rtt_thresholds,
        }
    }

    /// Routes: `accept` (nats-server 2.10+).
    pub fn route_default() -> Self {
        Self::new(CompressionMode::Accept)
    }

    /// Leafnodes (hub side and remotes): `s2_auto` with the default thresholds.
    pub fn leaf_default() -> Self {
        Self::new(CompressionMode::S2Auto)
    }

    /// Validates and normalizes a configured mode (any case; `on`/`enabled`/`true` mean
    /// `on_mode`: `s2_fast` on routes, `s2_auto` on leafnodes; `fast` = `s2_fast`, …;
    /// `s2_uncompressed` is refused, as nats-server refuses it) and its
    /// RTT thresholds in nanoseconds as written (negative ones count as 0; they matter only
    /// for `s2_auto`, empty means the defaults).
    pub fn from_config(
        mode: &str,
        rtt_nanos: &[i64],
        on_mode: CompressionMode,
    ) -> Result<Self, String> {
        let lower = mode.to_ascii_lowercase();
        let lower = match lower.as_str() {
            "on" | "enabled" | "true" => on_mode.as_str().to_string(),
            _ => lower,
        };
        let mode_of = |m| Ok(Self::new(m));
        match lower.as_str() {
            "not supported" | "not_supported" => mode_of(CompressionMode::NotSupported),
            "disabled" | "off" | "false" => mode_of(CompressionMode::Off),
            "accept" => mode_of(CompressionMode::Accept),
            "auto" | "s2_auto" => Ok(CompressionOpts {
                mode: CompressionMode::S2Auto,
                rtt_thresholds: normalize_thresholds(mode, rtt_nanos)?,
            }),
            // No "s2_uncompressed": nats-server 2.15 refuses it in a config (only s2_auto
            // picks it, for a short RTT).
            "fast" | "s2_fast" => mode_of(CompressionMode::S2Fast),
            "better" | "s2_better" => mode_of(CompressionMode::S2Better),
            "best" | "s2_best" => mode_of(CompressionMode::S2Best),
            _ => Err(format!("unsupported compression mode {mode:?}")),
        }
    }

    /// The mode to advertise in INFO once `negotiated` is known: `s2_auto` when so
    /// configured (the level it picked stays local), else the negotiated mode.
    pub fn info_mode(&self, negotiated: CompressionMode) -> CompressionMode {
        if self.mode == CompressionMode::S2Auto {
            CompressionMode::S2Auto
        } else {
            negotiated
        }
    }

    /// The concrete mode for a route whose peer sent `remote` in its INFO, with `rtt`
    /// measured so far (used when the outcome is s2_auto): never `S2Auto`. An unknown remote
    /// mode is an error (nats-server sends it as -ERR and closes the route).
    pub fn negotiate(
        &self,
        remote: Option<&str>,
        rtt: Duration,
    ) -> Result<CompressionMode, String> {
        let mode = select(self.mode, remote)?;
        Ok(if mode == CompressionMode::S2Auto {
            select_by_rtt(rtt, &self.rtt_thresholds)
        } else {
            mode
        })
    }

    /// After a PONG: the level s2_auto wants now, if it differs from `current` (None when not
    /// configured for s2_auto or nothing changes).
    pub fn auto_update(&self, current: CompressionMode, rtt: Duration) -> Option<CompressionMode> {
        if self.mode != CompressionMode::S2Auto || !current.needs_compression() {
            return None;
        }
        let m = select_by_rtt(rtt, &self.rtt_thresholds);
        (m != current).then_some(m)
    }
}

/// Go's formatting of a `[]time.Duration` as `%v`: `[10ms -5ms 0s]`.
fn go_durations(nanos: &[i64]) -> String {
    let each: Vec<String> = nanos
        .iter()
        .map(|&n| {
            let d = go_duration(Duration::from_nanos(n.unsigned_abs()));
            if n < 0 {
                format!("-{d}")
            } else {
                d
            }
        })
        .collect();
    format!("[{}]", each.join(" "))
}

fn normalize_thresholds(mode: &str, rtt_nanos: &[i64]) -> Result<Vec<Duration>, String> {
    if rtt_nanos.is_empty() {
        return Ok(DEFAULT_RTT_THRESHOLDS.to_vec());
    }
    let mut rtts: Vec<Duration> = Vec::with_capacity(rtt_nanos.len());
    for &n in rtt_nanos {
        let n = Duration::from_nanos(n.max(0) as u64);
        // Ascending, except that a 0 anywhere disables that level.
        if !n.is_zero() && rtts.iter().any(|&v| n < v) {
            return Err(format!(
                "RTT threshold values {} should be in ascending order",
                go_durations(rtt_nanos)
            ));
        }
        rtts.push(n);
    }
    while rtts.last().is_some_and(|d| d.is_zero()) {
        rtts.pop();
    }
    if rtts.len() > 4 {
        return Err(format!(
            "compression mode {mode:?} should have no more than 4 RTT thresholds: {}",
            go_durations(rtt_nanos)
        ));
    }
    if rtts.is_empty() {
        return Err(format!(
            "compression mode {mode:?} requires at least one RTT threshold"
        ));
    }
    Ok(rtts)
}

/// nats-server's `selectCompressionMode`: this side's configured mode and the mode the peer
/// put in its INFO (`None` or empty: an old server). The result may be `S2Auto` (resolve it
/// by RTT); `NotSupported` or `Off` mean the route stays uncompressed. When this side does not
/// negotiate (off / not supported) the result says which of the two the route is.
pub fn select(local: CompressionMode, remote: Option<&str>) -> Result<CompressionMode, String> {
    use CompressionMode::*;
    let remote = remote.unwrap_or("");
    if !local.needs_compression() {
        return Ok(if remote.is_empty() || local == NotSupported {
            NotSupported
        } else {
            Off
        });
    }
    if remote.is_empty() {
        return Ok(NotSupported);
    }
    match CompressionMode::from_info(remote) {
        Some(NotSupported) => Ok(NotSupported),
        Some(Off) => Ok(Off),
        Some(Accept) if local == Accept => Ok(Off),
        Some(Accept) => Ok(local),
        Some(S2Auto) if local == Accept => Ok(S2Fast),
        Some(r @ (S2Uncompressed | S2Fast | S2Better | S2Best)) if local == Accept => Ok(r),
        Some(_) => Ok(local),
        None => Err(format!("unsupported route compression mode {remote:?}")),
    }
}

/// nats-server's `selectS2AutoModeBasedOnRTT`: the first threshold the RTT is at or under picks
/// uncompressed / fast / better / best by its position; above them all, best when there are 3
/// or more thresholds, else the last one's level.
pub fn select_by_rtt(rtt: Duration, thresholds: &[Duration]) -> CompressionMode {
    let idx = match thresholds.iter().position(|&d| rtt <= d) {
        Some(i) => i,
        None if thresholds.len() >= 3 => 3,
        None => thresholds.len().wrapping_sub(1),
    };
    match idx {
        0 => CompressionMode::S2Uncompressed,
        1 => CompressionMode::S2Fast,
        2 => CompressionMode::S2Better,
        _ => CompressionMode::S2Best,
    }
}

#[cfg(test)]
#[path = "mode_tests.rs"]
mod tests;
