//! Time formats nats-server uses: RFC 3339 with nanoseconds (JSON times), Go duration strings
//! (`1m21s`, `982µs`) and the log line stamp (`2026/11/29 09:05:04.123456`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// When a JWT expiring at `unix` seconds expires, on the monotonic clock (None: never).
/// Already past: now (the tick closes the connection at once).
pub fn expiry_instant(unix: i64) -> Option<tokio::time::Instant> {
    let at = u64::try_from(unix).ok().filter(|&s| s > 0)?;
    let at = std::time::UNIX_EPOCH + Duration::from_secs(at);
    let left = at
        .duration_since(std::time::SystemTime::now())
        .unwrap_or_default();
    Some(tokio::time::Instant::now() + left)
}

/// Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

struct Parts {
    y: i64,
    mo: u32,
    d: u32,
    h: u64,
    mi: u64,
    s: u64,
    nanos: u32,
}

fn parts(t: SystemTime) -> Parts {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (y, mo, d) = civil((secs / 86_400) as i64);
    let rem = secs % 86_400;
    Parts {
        y,
        mo,
        d,
        h: rem / 3600,
        mi: rem % 3600 / 60,
        s: rem % 60,
        nanos: since.subsec_nanos(),
    }
}

/// `2026-11-29T07:39:49.874184405Z` — Go's RFC3339Nano in UTC (trailing zeros trimmed).
pub fn rfc3339_nano(t: SystemTime) -> String {
    let p = parts(t);
    let mut s = format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        p.y, p.mo, p.d, p.h, p.mi, p.s
    );
    if p.nanos != 0 {
        let frac = format!("{:09}", p.nanos);
        s.push('.');
        s.push_str(frac.trim_end_matches('0'));
    }
    s.push('Z');
    s
}

/// `2026-11-29T13:00:53Z` — Go's RFC3339 in UTC, whole seconds (remote syslog lines).
pub fn rfc3339_secs(t: SystemTime) -> String {
    let p = parts(t);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        p.y, p.mo, p.d, p.h, p.mi, p.s
    )
}

/// `Nov 29 13:00:53` (`Jan _2 15:04:05`, Go's `time.Stamp`, UTC) — local syslog lines.
pub fn syslog_stamp(t: SystemTime) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let p = parts(t);
    let month = MONTHS[(p.mo.clamp(1, 12) - 1) as usize];
    format!("{month} {:>2} {:02}:{:02}:{:02}", p.d, p.h, p.mi, p.s)
}

/// `2026/11/29 09:05:04.123456` — the stamp of a nats-server log line (UTC here).
pub fn log_stamp(t: SystemTime) -> String {
    let p = parts(t);
    format!(
        "{:04}/{:02}/{:02} {:02}:{:02}:{:02}.{:06}",
        p.y,
        p.mo,
        p.d,
        p.h,
        p.mi,
        p.s,
        p.nanos / 1000
    )
}

/// A rotated log file's suffix, `YYYY.MM.DD.hh.mm.ss.nnnnnnnnn` (nats-server's backup name;
/// the same clock as [`log_stamp`]).
pub fn backup_stamp(t: SystemTime) -> String {
    let p = parts(t);
    format!(
        "{:04}.{:02}.{:02}.{:02}.{:02}.{:02}.{:09}",
        p.y, p.mo, p.d, p.h, p.mi, p.s, p.nanos
    )
}

/// Go's `time.Duration.String()`: `0s`, `982µs`, `1.5ms`, `2s`, `1m21.5s`, `2h0m0s`.
pub fn go_duration(d: Duration) -> String {
    let n = d.as_nanos();
    if n == 0 {
        return "0s".to_string();
    }
    if n < 1_000 {
        return format!("{n}ns");
    }
    if n < 1_000_000 {
        return frac(n, 1_000, "µs");
    }
    if n < 1_000_000_000 {
        return frac(n, 1_000_000, "ms");
    }
    let total_secs = n / 1_000_000_000;
    let sub = n % 1_000_000_000;
    let h = total_secs / 3600;
    let m = total_secs % 3600 / 60;
    let s = total_secs % 60;
    let secs = frac(
        u128::from(s as u64) * 1_000_000_000 + sub,
        1_000_000_000,
        "s",
    );
    if h > 0 {
        format!("{h}h{m}m{secs}")
    } else if m > 0 {
        format!("{m}m{secs}")
    } else {
        secs
    }
}

fn frac(n: u128, unit: u128, suffix: &str) -> String {
    let whole = n / unit;
    let rest = n % unit;
    if rest == 0 {
        return format!("{whole}{suffix}");
    }
    let width = unit.ilog10() as usize;
    let f = format!("{rest:0width$}");
    format!("{whole}.{}{suffix}", f.trim_end_matches('0'))
}

/// nats-server's `/connz` uptime style: `1m21s`, `2h3m4s`, `1d2h3m4s` (whole seconds).
pub fn uptime(d: Duration) -> String {
    let mut secs = d.as_secs();
    let days = secs / 86_400;
    secs %= 86_400;
    let h = secs / 3600;
    let m = secs % 3600 / 60;
    let s = secs % 60;
    if days > 0 {
        format!("{days}d{h}h{m}m{s}s")
    } else if h > 0 {
        format!("{h}h{m}m{s}s")
    } else if m > 0 {
        format!("{m}m{s}s")
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339() {
        let t = UNIX_EPOCH + Duration::new(1_795_678_789, 874_184_405);
        assert_eq!(rfc3339_nano(t), "2026-11-26T07:39:49.874184405Z");
        let t = UNIX_EPOCH + Duration::new(0, 500_000_000);
        assert_eq!(rfc3339_nano(t), "1970-01-01T00:00:00.5Z");
        assert_eq!(rfc3339_nano(UNIX_EPOCH), "1970-01-01T00:00:00Z");
    }

    #[test]
    fn go_durations() {
        assert_eq!(go_duration(Duration::ZERO), "0s");
        assert_eq!(go_duration(Duration::from_nanos(982_000)), "982µs");
        assert_eq!(go_duration(Duration::from_nanos(1_500_000)), "1.5ms");
        assert_eq!(go_duration(Duration::from_secs(2)), "2s");
        assert_eq!(go_duration(Duration::from_millis(81_500)), "1m21.5s");
        assert_eq!(go_duration(Duration::from_secs(7200)), "2h0m0s");
        assert_eq!(uptime(Duration::from_secs(81)), "1m21s");
        assert_eq!(uptime(Duration::from_secs(90_061)), "1d1h1m1s");
    }
}
