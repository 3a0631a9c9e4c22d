//! Tests of the compression modes (`mode.rs`): parsing `cluster { compression }` as nats-server
//! 2.15.1 accepts and refuses it, and the negotiation rules between two configured modes.

use super::CompressionMode::*;
use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn cfg(mode: &str, rtts: &[i64]) -> Result<CompressionOpts, String> {
    CompressionOpts::from_config(mode, rtts, S2Fast)
}

const MS: i64 = 1_000_000;

#[test]
fn strings_round_trip() {
    for m in CompressionMode::ALL {
        assert_eq!(CompressionMode::from_info(m.as_str()), Some(m));
        assert_eq!(m.to_string(), m.as_str());
    }
    assert_eq!(
        CompressionMode::from_info("S2_FAST"),
        None,
        "INFO carries canonical strings only"
    );
    assert_eq!(CompressionMode::from_info("fast"), None);
    assert_eq!(S2Best.level(), Some(Level::Best));
    assert_eq!(S2Uncompressed.level(), Some(Level::Uncompressed));
    assert_eq!(S2Auto.level(), None);
    assert!(!Off.needs_compression() && !NotSupported.needs_compression());
    assert!(Accept.needs_compression() && S2Auto.needs_compression());
}

#[test]
fn config_strings_and_aliases() {
    let table: &[(&str, CompressionMode)] = &[
        ("off", Off),
        ("OFF", Off),
        ("disabled", Off),
        ("false", Off),
        ("accept", Accept),
        ("Accept", Accept),
        ("not supported", NotSupported),
        ("not_supported", NotSupported),
        ("auto", S2Auto),
        ("s2_auto", S2Auto),
        ("fast", S2Fast),
        ("s2_fast", S2Fast),
        ("S2_Fast", S2Fast),
        ("better", S2Better),
        ("s2_better", S2Better),
        ("best", S2Best),
        ("s2_best", S2Best),
        ("on", S2Fast),
        ("enabled", S2Fast),
        ("TRUE", S2Fast),
    ];
    for (s, m) in table {
        assert_eq!(cfg(s, &[]).unwrap().mode, *m, "{s}");
    }
    // `on` on a leafnode means s2_auto, with the default thresholds.
    let leaf = CompressionOpts::from_config("on", &[], S2Auto).unwrap();
    assert_eq!(leaf, CompressionOpts::leaf_default());
    assert_eq!(leaf.rtt_thresholds, vec![ms(10), ms(50), ms(100)]);
    for bad in ["bogus", "s2_uncompressed", "uncompressed", "", "s2 fast"] {
        assert_eq!(
            cfg(bad, &[]).unwrap_err(),
            format!("unsupported compression mode {bad:?}")
        );
    }
    assert_eq!(
        cfg("Bogus", &[]).unwrap_err(),
        "unsupported compression mode \"Bogus\""
    );
}

#[test]
fn defaults() {
    assert_eq!(CompressionOpts::route_default().mode, Accept);
    assert!(CompressionOpts::route_default().rtt_thresholds.is_empty());
    assert_eq!(CompressionOpts::leaf_default().mode, S2Auto);
}

#[test]
fn thresholds_normalized_as_nats_server() {
    let auto = |r: &[i64]| cfg("s2_auto", r).map(|o| o.rtt_thresholds);
    assert_eq!(auto(&[]).unwrap(), DEFAULT_RTT_THRESHOLDS.to_vec());
    assert_eq!(auto(&[5 * MS]).unwrap(), vec![ms(5)]);
    assert_eq!(
        auto(&[0, 10 * MS, 20 * MS]).unwrap(),
        vec![ms(0), ms(10), ms(20)]
    );
    // Zeros may sit anywhere; trailing ones are trimmed; negatives count as zero.
    assert_eq!(
        auto(&[10 * MS, 0, 20 * MS, 0, 0]).unwrap(),
        vec![ms(10), ms(0), ms(20)]
    );
    assert_eq!(auto(&[-5 * MS, 20 * MS]).unwrap(), vec![ms(0), ms(20)]);
    assert_eq!(auto(&[MS, MS, MS, MS, 0, 0]).unwrap(), vec![ms(1); 4]);
    assert_eq!(
        auto(&[10 * MS, 5 * MS]).unwrap_err(),
        "RTT threshold values [10ms 5ms] should be in ascending order"
    );
    assert_eq!(
        auto(&[-5 * MS, 20 * MS, 10 * MS]).unwrap_err(),
        "RTT threshold values [-5ms 20ms 10ms] should be in ascending order"
    );
    assert_eq!(
        cfg("auto", &[MS, 2 * MS, 3 * MS, 4 * MS, 5 * MS]).unwrap_err(),
        "compression mode \"auto\" should have no more than 4 RTT thresholds: [1ms 2ms 3ms 4ms 5ms]"
    );
    assert_eq!(
        cfg("S2_Auto", &[0, 0]).unwrap_err(),
        "compression mode \"S2_Auto\" requires at least one RTT threshold"
    );
    assert_eq!(
        cfg("auto", &[1_500 * MS, 0]).unwrap().rtt_thresholds,
        vec![Duration::from_millis(1500)]
    );
    // Thresholds given with another mode are ignored, even out of order.
    assert_eq!(
        cfg("fast", &[10 * MS, 5 * MS]).unwrap(),
        CompressionOpts::new(S2Fast)
    );
}

/// nats-server's selectCompressionMode, the whole table: every local mode against every
/// remote INFO value.
#[test]
fn selection_table() {
    let remotes: [Option<&str>; 10] = [
        None,
        Some(""),
        Some("not supported"),
        Some("off"),
        Some("accept"),
        Some("s2_auto"),
        Some("s2_uncompressed"),
        Some("s2_fast"),
        Some("s2_better"),
        Some("s2_best"),
    ];
    for local in CompressionMode::ALL {
        for remote in remotes {
            let got = select(local, remote).unwrap();
            let r = remote.unwrap_or("");
            let want = if !local.needs_compression() {
                // This side does not negotiate: "not supported" toward an old peer or when
                // configured so, "off" otherwise.
                if r.is_empty() || local == NotSupported {
                    NotSupported
                } else {
                    Off
                }
            } else {
                match r {
                    "" | "not supported" => NotSupported,
                    "off" => Off,
                    "accept" if local == Accept => Off,
                    "accept" => local,
                    "s2_auto" if local == Accept => S2Fast,
                    _ if local == Accept => CompressionMode::from_info(r).unwrap(),
                    _ => local,
                }
            };
            assert_eq!(got, want, "local {local} remote {remote:?}");
        }
    }
    // Spot checks spelled out.
    assert_eq!(
        select(Accept, Some("accept")),
        Ok(Off),
        "both accept: nobody compresses"
    );
    assert_eq!(
        select(Accept, Some("s2_best")),
        Ok(S2Best),
        "accept takes the peer's level"
    );
    assert_eq!(
        select(Accept, Some("s2_auto")),
        Ok(S2Fast),
        "accept + auto = fast"
    );
    assert_eq!(
        select(S2Better, Some("s2_fast")),
        Ok(S2Better),
        "asymmetric: each its own"
    );
    assert_eq!(
        select(S2Auto, Some("accept")),
        Ok(S2Auto),
        "resolved by RTT after"
    );
    assert_eq!(
        select(S2Best, None),
        Ok(NotSupported),
        "2.9 peer: no compression"
    );
    assert_eq!(select(S2Best, Some("off")), Ok(Off));
    assert_eq!(select(Off, Some("s2_fast")), Ok(Off));
    assert_eq!(
        select(S2Fast, Some("lz4")),
        Err("unsupported route compression mode \"lz4\"".to_string())
    );
    assert!(
        select(Accept, Some("S2_FAST")).is_err(),
        "INFO values are case-sensitive"
    );
    // A peer that does not negotiate never makes us fail on its value.
    assert_eq!(select(Off, Some("lz4")), Ok(Off));
}

#[test]
fn rtt_levels() {
    let d = DEFAULT_RTT_THRESHOLDS;
    assert_eq!(select_by_rtt(ms(0), &d), S2Uncompressed);
    assert_eq!(
        select_by_rtt(ms(10), &d),
        S2Uncompressed,
        "thresholds are inclusive"
    );
    assert_eq!(select_by_rtt(ms(11), &d), S2Fast);
    assert_eq!(select_by_rtt(ms(50), &d), S2Fast);
    assert_eq!(select_by_rtt(ms(51), &d), S2Better);
    assert_eq!(select_by_rtt(ms(100), &d), S2Better);
    assert_eq!(select_by_rtt(ms(101), &d), S2Best);
    // Zeros disable levels: [0, 0, 20ms] is better up to 20 ms, then best.
    let t = [ms(0), ms(0), ms(20)];
    assert_eq!(select_by_rtt(ms(5), &t), S2Better);
    assert_eq!(select_by_rtt(ms(30), &t), S2Best);
    assert_eq!(
        select_by_rtt(ms(0), &t),
        S2Uncompressed,
        "a zero RTT matches the 0 slot"
    );
    // Fewer than 3 thresholds: above them, the last one's level.
    assert_eq!(select_by_rtt(ms(30), &[ms(10)]), S2Uncompressed);
    assert_eq!(select_by_rtt(ms(30), &[ms(10), ms(20)]), S2Fast);
    assert_eq!(select_by_rtt(ms(30), &[ms(1), ms(2), ms(3), ms(4)]), S2Best);
    assert_eq!(
        select_by_rtt(ms(3), &[ms(1), ms(2), ms(3), ms(4)]),
        S2Better
    );
    assert_eq!(select_by_rtt(ms(3), &[]), S2Best);
}

#[test]
fn negotiate_resolves_auto_and_info_keeps_it() {
    let auto = CompressionOpts::new(S2Auto);
    assert_eq!(auto.negotiate(Some("accept"), ms(1)), Ok(S2Uncompressed));
    assert_eq!(auto.negotiate(Some("s2_best"), ms(20)), Ok(S2Fast));
    assert_eq!(auto.negotiate(Some("off"), ms(20)), Ok(Off));
    assert_eq!(auto.negotiate(None, ms(20)), Ok(NotSupported));
    assert_eq!(
        auto.info_mode(S2Fast),
        S2Auto,
        "INFO says s2_auto, not the level"
    );
    let accept = CompressionOpts::route_default();
    assert_eq!(accept.negotiate(Some("s2_auto"), ms(500)), Ok(S2Fast));
    assert_eq!(accept.negotiate(Some("s2_better"), ms(0)), Ok(S2Better));
    assert_eq!(accept.info_mode(S2Better), S2Better);
    let fast = CompressionOpts::new(S2Fast);
    assert!(fast.negotiate(Some("zstd"), ms(0)).is_err());
}

#[test]
fn auto_update_after_pong() {
    let auto = CompressionOpts::new(S2Auto);
    assert_eq!(auto.auto_update(S2Uncompressed, ms(30)), Some(S2Fast));
    assert_eq!(auto.auto_update(S2Fast, ms(30)), None);
    assert_eq!(
        auto.auto_update(Off, ms(300)),
        None,
        "an uncompressed route stays so"
    );
    assert_eq!(
        CompressionOpts::new(S2Fast).auto_update(S2Fast, ms(300)),
        None
    );
}
