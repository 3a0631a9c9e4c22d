//! A user JWT's connect windows: `times` (a list of `{"start":"HH:MM:SS","end":"HH:MM:SS"}`
//! ranges in local time) and `times_location` (the IANA zone they are in; empty: the
//! server's own local zone), as nats-server's `validateTimesAt` and the jwt library's
//! `TimeRange.Validate` read them. A user may connect while the current time is inside one
//! of its ranges (a range whose start is after its end crosses midnight), and is
//! disconnected when that range ends. Pure: the caller loads the zone and passes the clock.

use super::Claims;
use crate::util::tz::Zone;
use serde_json::Value;

const NANOS: i64 = 1_000_000_000;
const DAY: i64 = 86_400;

/// Whether a user may connect now, and until when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Window {
    /// The user has no `times`: any time.
    Always,
    /// Inside a range that ends at this unix second (the latest end, when several hold).
    Until(i64),
    /// Outside every range (nats-server: "Outside connect times").
    Outside,
}

/// The user's `times` as (start, end) strings; `None` when it has none.
fn ranges(u: &Claims) -> Result<Option<Vec<(String, String)>>, String> {
    let list = match &u.nats["times"] {
        Value::Null => return Ok(None),
        Value::Array(a) if a.is_empty() => return Ok(None),
        Value::Array(a) => a,
        _ => return Err("times is not a list".into()),
    };
    list.iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or("").to_string();
            Ok((s("start"), s("end")))
        })
        .collect::<Result<Vec<_>, String>>()
        .map(Some)
}

/// Whether the user's connect is restricted to windows (the caller then loads the zone).
pub fn restricted(u: &Claims) -> bool {
    u.nats["times"].as_array().is_some_and(|a| !a.is_empty())
}

/// The zone the windows are in: `times_location`, else the server's local zone ("Local").
pub fn location(u: &Claims) -> &str {
    match u.str("times_location") {
        "" => "Local",
        l => l,
    }
}

/// A clock reading as Go's layout "15:04:05" parses it: an hour of one or two digits
/// (0–23), minutes and seconds of exactly two (0–59), an optional fraction after the
/// seconds (dropped: the server keeps whole seconds), nothing else.
fn parse_clock(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let digit = |i: usize| {
        b.get(i)
            .filter(|c| c.is_ascii_digit())
            .map(|c| i64::from(c - b'0'))
    };
    let (hour, mut i) = match (digit(0)?, digit(1)) {
        (h, Some(l)) => (h * 10 + l, 2),
        (h, None) => (h, 1),
    };
    let two = |i: &mut usize| -> Option<i64> {
        if b.get(*i) != Some(&b':') {
            return None;
        }
        let v = digit(*i + 1)? * 10 + digit(*i + 2)?;
        *i += 3;
        Some(v)
    };
    let minute = two(&mut i)?;
    let second = two(&mut i)?;
    // Go reads a fraction after the seconds even when the layout has none.
    if matches!(b.get(i), Some(b'.' | b',')) && digit(i + 1).is_some() {
        i += 1;
        while digit(i).is_some() {
            i += 1;
        }
    }
    (i == b.len() && hour < 24 && minute < 60 && second < 60)
        .then_some(hour * 3600 + minute * 60 + second)
}

/// The jwt library's check of the ranges: each needs a start and an end in "15:04:05".
fn parsed(list: &[(String, String)]) -> Result<Vec<(i64, i64)>, String> {
    list.iter()
        .map(|(start, end)| {
            let one = |v: &str, what: &str| {
                if v.is_empty() {
                    return Err(format!("time ranges {what} must contain a {what}"));
                }
                parse_clock(v)
                    .ok_or_else(|| format!("time ranges {what} is not in the range format"))
            };
            Ok((one(start, "start")?, one(end, "end")?))
        })
        .collect()
}

/// The instant (unix seconds) of local wall-clock second `wall` in `zone`, as Go's
/// `time.Date` resolves it (a wall time in a gap or overlap takes the offset in effect at
/// the first guess, corrected once).
fn instant(zone: &Zone, wall: i64) -> i64 {
    let guess = zone.offset_at(wall);
    let utc = wall - i64::from(guess);
    let offset = zone.offset_at(utc);
    wall - i64::from(offset)
}

/// nats-server's `validateTimesAt`: whether `now_ns` (unix nanoseconds) is inside one of
/// the user's ranges in `zone`, and the latest end among those that hold.
/// Err: the ranges are malformed (the user JWT is not valid).
pub fn window(u: &Claims, zone: &Zone, now_ns: i64) -> Result<Window, String> {
    let Some(list) = ranges(u)? else {
        return Ok(Window::Always);
    };
    let list = parsed(&list)?;
    let now_secs = now_ns.div_euclid(NANOS);
    let local = now_secs + i64::from(zone.offset_at(now_secs));
    let midnight = local.div_euclid(DAY) * DAY;
    let after = |t: i64| t * NANOS > now_ns; // t.After(now)
    let before = |t: i64| t * NANOS < now_ns; // t.Before(now)
    let mut best: Option<i64> = None;
    for (s, e) in list {
        let start = instant(zone, midnight + s);
        let end = instant(zone, midnight + e);
        let until = if before(start) && after(end) {
            Some(end)
        } else if start > end {
            // Crosses midnight: after it (22:00–06:00 at 05:00), or before it, against
            // tomorrow's end (at 23:30).
            let tomorrow = instant(zone, midnight + DAY + e);
            if after(end) {
                Some(end)
            } else if before(start) && after(tomorrow) {
                Some(tomorrow)
            } else {
                None
            }
        } else {
            None
        };
        if let Some(t) = until {
            best = Some(best.map_or(t, |b| b.max(t)));
        }
    }
    Ok(best.map_or(Window::Outside, Window::Until))
}

#[cfg(test)]
#[path = "times_tests.rs"]
mod tests;
