//! The route kind on the connection driver: timers, op dispatch, parser switches.

use super::*;

/// The route kind on the connection driver.
impl Session for Route {
    /// A reload changed compression or pinned accounts (false: no more reloads).
    type Event = bool;

    async fn event(&mut self) -> bool {
        match self.reconf.as_mut() {
            Some(r) => r.changed().await.is_ok(),
            None => std::future::pending().await,
        }
    }

    fn on_event(&mut self, changed: bool, _parser: &mut Parser) -> Result<(), CloseReason> {
        if !changed {
            self.reconf = None;
            return Ok(());
        }
        self.on_reconfigure()
    }

    fn conn(&self) -> &Arc<Conn> {
        &self.conn
    }

    fn start(&mut self) -> bool {
        self.send_opening();
        true
    }

    fn parser(&self) -> Parser {
        Parser::new(Kind::Route, Limits::route())
    }

    /// With cluster auth, the handshake must finish within its `authorization { timeout }`
    /// (nats-server's auth timer). Without, nats-server sets no timer at all; natsd still
    /// bounds it, but loosely: in a storm (a hundred nodes starting at once on two cores) a
    /// 2 s bound closed one handshake in ten that would have finished.
    fn handshake_deadline(&self) -> Instant {
        let auth_timeout = crate::auth::peer_auth_timeout(self.cl.opts.auth_timeout);
        Instant::now()
            + if self.route_auth_required() {
                auth_timeout
            } else {
                auth_timeout.max(NO_AUTH_HANDSHAKE)
            }
    }

    fn handshake_pending(&self) -> bool {
        self.entry.is_none()
    }

    fn on_handshake_timeout(&mut self) -> CloseReason {
        tracing::error!("{} - Route handshake timeout", self.conn.log_prefix());
        if !self.connect_seen && self.solicit.is_none() && self.route_auth_required() {
            self.send_err("Authentication Timeout");
            CloseReason::AuthenticationTimeout
        } else {
            CloseReason::ProtocolViolation
        }
    }

    fn next_tick(&self) -> Instant {
        self.next_ping
    }

    fn on_tick(&mut self, now: Instant) -> Result<(), CloseReason> {
        let (interval, max) = self.cl.ping_settings(&self.srv);
        self.next_ping = now + interval;
        driver::peer_ping(
            &self.conn,
            &mut self.pings_out,
            &mut self.rtt_start,
            max,
            now,
        )?;
        self.send(b"PING\r\n");
        Ok(())
    }

    /// Registration may switch the parser to a pinned route's account-less forms (and to
    /// `LS- <origin>`) for the very next op; an INFO may switch the peer to compression.
    fn on_op(&mut self, op: Op<'_>, parser: &mut Parser) -> Result<AfterOp, CloseReason> {
        self.handle(op)?;
        if self.parser_no_account {
            parser.set_no_account(true);
        }
        if self.parser_lnocu {
            parser.set_lnocu(true);
        }
        Ok(if std::mem::take(&mut self.switch_reader) {
            AfterOp::Compressed
        } else {
            AfterOp::Continue
        })
    }

    fn on_parse_error(&mut self, e: ParseError, rest: &[u8]) -> CloseReason {
        tracing::error!(
            "{} - Route parser ERROR: {e}: proto: {:?}",
            self.conn.log_prefix(),
            driver::snippet(rest)
        );
        CloseReason::ProtocolViolation
    }

    async fn end_batch(&mut self) {
        self.fan.end_batch(&self.conn).await;
    }
}
