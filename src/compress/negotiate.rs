//! One route connection's compression handshake as nats-server 2.15 runs it (route.go
//! `createRoute`, `processRouteInfo`, `negotiateRouteCompression`), sans-io: the route session
//! asks it what to put in INFO, whether to hold its INFO and its PINGs, and what to do with
//! each INFO from the peer; it answers with steps, the session carries them out (the encoder
//! and decoder are `stream::{Encoder, Decoder}`). docs/nats-server-behaviour.md §16 has the
//! observed exchange this encodes. A leaf connection runs the same steps (`leaf/conn.rs`;
//! nats-server's `negotiateLeafCompression`): the leaf is the dialler, whose INFO goes out in
//! clear only when it compresses, and the hub never holds its INFO.

use super::mode::{CompressionMode, CompressionOpts};
use super::stream::Level;
use std::time::Duration;

/// What the session does with an INFO from the peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InfoStep {
    /// The first INFO, and the route stays uncompressed (`mode` is `Off` or `NotSupported`).
    /// Process the INFO as usual; start PINGs; a dialler now sends its held INFO with
    /// `compression: info_mode`.
    Plain {
        mode: CompressionMode,
        info_mode: CompressionMode,
    },
    /// The first INFO, and the route compresses at `level`. Do not process this INFO any
    /// further (the peer sends another). A dialler sends an INFO with `compression:
    /// info_mode` *in clear*, flushes it, then switches its writer to `level`; an acceptor
    /// switches its writer first and sends that INFO compressed. Either way the reader
    /// switches to the S2 decoder after the current read batch, and PINGs may start.
    Switch {
        mode: CompressionMode,
        level: Level,
        info_mode: CompressionMode,
        /// True for the dialler: the INFO goes out before the writer switches.
        info_in_clear: bool,
    },
    /// The peer's INFO right after a switch: process it as the route's first INFO; a dialler
    /// now sends its held INFO (compressed) with `compression: info_mode`.
    AfterSwitch { info_mode: CompressionMode },
    /// Any later INFO (gossip, updates): nothing about compression.
    Later,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// No INFO from the peer yet.
    Start,
    /// Switched; waiting for the peer's next INFO.
    Switched,
    Done,
}

/// What a config reload does to an established route's compression.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReloadStep {
    Keep,
    /// Close it (it is dialled again and negotiates anew).
    Close,
    /// Compress at this level from now on.
    Level(Level),
}

/// Compression state of one route connection.
#[derive(Clone, Debug)]
pub struct RouteCompression {
    opts: CompressionOpts,
    dialler: bool,
    state: State,
    /// The negotiated mode (what /routez shows); `NotSupported` until the first INFO.
    mode: CompressionMode,
}

impl RouteCompression {
    /// `dialler`: this side opened the connection (solicited the route).
    pub fn new(opts: CompressionOpts, dialler: bool) -> Self {
        RouteCompression {
            opts,
            dialler,
            state: State::Start,
            mode: CompressionMode::NotSupported,
        }
    }

    /// `compression` for the INFO sent when the connection opens (the acceptor's, or a
    /// dialler's that does not hold it): the configured mode as nats-server writes it
    /// (`"not supported"` included).
    pub fn initial_info_mode(&self) -> CompressionMode {
        self.opts.mode
    }

    /// A dialler configured for compression (`accept` included) holds its INFO until the
    /// peer's INFO has arrived.
    pub fn hold_info(&self) -> bool {
        self.dialler && self.opts.mode.needs_compression()
    }

    /// PINGs wait until negotiation ends when compression is configured (nats-server watches
    /// for a stale connection meanwhile, without sending any).
    pub fn hold_pings(&self) -> bool {
        self.opts.mode.needs_compression() && self.state == State::Start
    }

    /// The negotiated mode; `NotSupported` before the first INFO.
    pub fn mode(&self) -> CompressionMode {
        self.mode
    }

    /// The encoder level in force, if the route compresses.
    pub fn level(&self) -> Option<Level> {
        self.mode.level()
    }

    /// The peer sent an INFO whose `compression` field is `remote` (`None` when absent);
    /// `since_start` is the RTT known so far (nats-server uses the time since the connection
    /// started when no PING has been answered yet), for s2_auto. An error is the -ERR text to
    /// send before closing the route.
    pub fn on_info(
        &mut self,
        remote: Option<&str>,
        since_start: Duration,
    ) -> Result<InfoStep, String> {
        match self.state {
            State::Done => return Ok(InfoStep::Later),
            State::Switched => {
                self.state = State::Done;
                return Ok(InfoStep::AfterSwitch {
                    info_mode: self.opts.info_mode(self.mode),
                });
            }
            State::Start => {}
        }
        let mode = self.opts.negotiate(remote, since_start)?;
        self.mode = mode;
        let info_mode = self.opts.info_mode(mode);
        match mode.level() {
            Some(level) => {
                self.state = State::Switched;
                Ok(InfoStep::Switch {
                    mode,
                    level,
                    info_mode,
                    info_in_clear: self.dialler,
                })
            }
            None => {
                self.state = State::Done;
                Ok(InfoStep::Plain { mode, info_mode })
            }
        }
    }

    /// A config reload changed the configured compression (nats-server 2.10+ `reload.go`
    /// `clusterOption.Apply`): a route that does not compress because it cannot, or already
    /// at the new mode, stays as is; one that was `off`, or any when the new mode is `off` or
    /// `accept`, must close (a new negotiation); otherwise the writer changes level in place
    /// (s2_auto: the level `rtt` picks).
    pub fn reload(&mut self, opts: CompressionOpts, rtt: Duration) -> ReloadStep {
        use CompressionMode::*;
        let (cur, new) = (self.mode, opts.mode);
        if self.state != State::Done || cur == NotSupported || cur == new {
            self.opts = opts;
            return ReloadStep::Keep;
        }
        if cur == Off || new == Off || new == Accept {
            return ReloadStep::Close;
        }
        let m = if new == S2Auto {
            crate::compress::mode::select_by_rtt(rtt, &opts.rtt_thresholds)
        } else {
            new
        };
        self.opts = opts;
        if m == cur {
            return ReloadStep::Keep;
        }
        self.mode = m;
        match m.level() {
            Some(l) => ReloadStep::Level(l),
            None => ReloadStep::Keep,
        }
    }

    /// A PONG measured `rtt`: under s2_auto, the new level when it changes (the writer then
    /// uses it from the next batch on).
    pub fn on_pong(&mut self, rtt: Duration) -> Option<Level> {
        let m = self.opts.auto_update(self.mode, rtt)?;
        self.mode = m;
        m.level()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use CompressionMode::*;

    fn opts(m: CompressionMode) -> CompressionOpts {
        CompressionOpts::new(m)
    }

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn s2_fast_both_sides() {
        let mut d = RouteCompression::new(opts(S2Fast), true);
        let mut a = RouteCompression::new(opts(S2Fast), false);
        assert!(d.hold_info() && !a.hold_info());
        assert!(d.hold_pings() && a.hold_pings());
        assert_eq!(a.initial_info_mode(), S2Fast);
        // Dialler gets the acceptor's INFO: clear INFO, then switch.
        assert_eq!(
            d.on_info(Some("s2_fast"), MS),
            Ok(InfoStep::Switch {
                mode: S2Fast,
                level: Level::Fast,
                info_mode: S2Fast,
                info_in_clear: true
            })
        );
        assert!(!d.hold_pings());
        // Acceptor gets that INFO: switch first, INFO compressed.
        assert_eq!(
            a.on_info(Some("s2_fast"), MS),
            Ok(InfoStep::Switch {
                mode: S2Fast,
                level: Level::Fast,
                info_mode: S2Fast,
                info_in_clear: false
            })
        );
        // Dialler gets the compressed second INFO: now it sends its held INFO.
        assert_eq!(
            d.on_info(Some("s2_fast"), MS),
            Ok(InfoStep::AfterSwitch { info_mode: S2Fast })
        );
        // Acceptor gets the dialler's real INFO: processed as the first.
        assert_eq!(
            a.on_info(Some("s2_fast"), MS),
            Ok(InfoStep::AfterSwitch { info_mode: S2Fast })
        );
        assert_eq!(d.on_info(Some("s2_fast"), MS), Ok(InfoStep::Later));
        assert_eq!(d.mode(), S2Fast);
        assert_eq!(d.level(), Some(Level::Fast));
    }

    #[test]
    fn plain_outcomes() {
        // Both accept: the dialler's held INFO says "off".
        let mut d = RouteCompression::new(opts(Accept), true);
        assert!(d.hold_info());
        assert_eq!(
            d.on_info(Some("accept"), MS),
            Ok(InfoStep::Plain {
                mode: Off,
                info_mode: Off
            })
        );
        assert!(!d.hold_pings());
        assert_eq!(d.on_info(Some("accept"), MS), Ok(InfoStep::Later));
        // A 2.9 peer (no field): not supported, plain.
        let mut a = RouteCompression::new(opts(S2Best), false);
        assert_eq!(
            a.on_info(None, MS),
            Ok(InfoStep::Plain {
                mode: NotSupported,
                info_mode: NotSupported
            })
        );
        // Configured off: never holds anything; off toward a peer that has the field.
        let mut d = RouteCompression::new(opts(Off), true);
        assert!(!d.hold_info() && !d.hold_pings());
        assert_eq!(
            d.on_info(Some("s2_fast"), MS),
            Ok(InfoStep::Plain {
                mode: Off,
                info_mode: Off
            })
        );
        let mut d = RouteCompression::new(opts(NotSupported), true);
        assert_eq!(d.initial_info_mode().as_str(), "not supported");
        assert_eq!(
            d.on_info(Some("s2_fast"), MS).map(|s| matches!(
                s,
                InfoStep::Plain {
                    mode: NotSupported,
                    ..
                }
            )),
            Ok(true)
        );
    }

    #[test]
    fn accept_takes_the_peers_level() {
        let mut a = RouteCompression::new(opts(Accept), false);
        assert_eq!(
            a.on_info(Some("s2_best"), MS),
            Ok(InfoStep::Switch {
                mode: S2Best,
                level: Level::Best,
                info_mode: S2Best,
                info_in_clear: false
            })
        );
    }

    #[test]
    fn auto_advertises_auto_and_follows_the_rtt() {
        let mut d = RouteCompression::new(opts(S2Auto), true);
        assert_eq!(d.initial_info_mode(), S2Auto);
        assert_eq!(
            d.on_info(Some("s2_auto"), MS),
            Ok(InfoStep::Switch {
                mode: S2Uncompressed,
                level: Level::Uncompressed,
                info_mode: S2Auto,
                info_in_clear: true
            })
        );
        assert_eq!(
            d.on_info(Some("s2_auto"), MS),
            Ok(InfoStep::AfterSwitch { info_mode: S2Auto })
        );
        assert_eq!(d.on_pong(Duration::from_millis(30)), Some(Level::Fast));
        assert_eq!(d.on_pong(Duration::from_millis(40)), None);
        assert_eq!(d.on_pong(Duration::from_millis(200)), Some(Level::Best));
        assert_eq!(d.mode(), S2Best);
        // Not auto: PONGs change nothing.
        let mut f = RouteCompression::new(opts(S2Fast), true);
        f.on_info(Some("accept"), MS).expect("negotiates");
        assert_eq!(f.on_pong(Duration::from_millis(200)), None);
    }

    #[test]
    fn unknown_peer_mode_is_an_error() {
        let mut a = RouteCompression::new(opts(S2Fast), false);
        assert_eq!(
            a.on_info(Some("zstd"), MS),
            Err("unsupported route compression mode \"zstd\"".to_string())
        );
    }

    #[test]
    fn reload_closes_or_changes_level_as_nats_server() {
        let done = |local: CompressionMode, remote: &str| {
            let mut c = RouteCompression::new(opts(local), true);
            let step = c.on_info(Some(remote), MS).expect("negotiated");
            if matches!(step, InfoStep::Switch { .. }) {
                c.on_info(Some(remote), MS).expect("after switch");
            }
            c
        };
        // off -> anything: a new negotiation.
        let mut c = done(Off, "s2_fast");
        assert_eq!(c.reload(opts(S2Fast), MS), ReloadStep::Close);
        // to off or accept: closed too.
        let mut c = done(S2Fast, "s2_fast");
        assert_eq!(c.reload(opts(Off), MS), ReloadStep::Close);
        let mut c = done(S2Fast, "s2_fast");
        assert_eq!(c.reload(opts(Accept), MS), ReloadStep::Close);
        // between levels: in place.
        let mut c = done(S2Fast, "s2_fast");
        assert_eq!(c.reload(opts(S2Best), MS), ReloadStep::Level(Level::Best));
        assert_eq!(c.mode(), S2Best);
        // s2_auto: the level the RTT picks (1 ms: uncompressed); same again: kept.
        let mut c = done(S2Fast, "s2_fast");
        let step = c.reload(opts(S2Auto), MS);
        assert_eq!(c.mode(), S2Uncompressed);
        assert!(matches!(step, ReloadStep::Level(_)), "{step:?}");
        assert_eq!(c.reload(opts(S2Uncompressed), MS), ReloadStep::Keep);
        // the same mode, or a peer without compression: nothing.
        let mut c = done(S2Fast, "s2_fast");
        assert_eq!(c.reload(opts(S2Fast), MS), ReloadStep::Keep);
        let mut c = done(S2Fast, "not supported");
        assert_eq!(c.mode(), NotSupported);
        assert_eq!(c.reload(opts(Off), MS), ReloadStep::Keep);
    }
}
