//! Tests of [`super::window`]: nats-server's `validateTimesAt` cases (inside, outside,
//! across midnight, several ranges), Go's "15:04:05" parsing, and zones with offsets.

use super::*;
use crate::jwt::Kind;
use serde_json::json;

fn user(times: Value, location: &str) -> Claims {
    Claims::bare(
        Kind::User,
        json!({"times": times, "times_location": location}),
    )
}

fn range(start: &str, end: &str) -> Value {
    json!({"start": start, "end": end})
}

/// 2026-12-04T00:00:00Z (`date -u -d 2026-12-04 +%s`), in standard time in New York.
const DAY_2026_12_04: i64 = 1_796_342_400;

/// That day at `h:m:s` UTC, in unix seconds.
fn utc(h: i64, m: i64, s: i64) -> i64 {
    DAY_2026_12_04 + h * 3600 + m * 60 + s
}

/// The same, in nanoseconds (the clock [`window`] takes).
fn at(h: i64, m: i64, s: i64) -> i64 {
    utc(h, m, s) * NANOS
}

#[test]
fn no_times_is_always() {
    let u = user(Value::Null, "");
    assert_eq!(
        window(&u, &Zone::default(), at(3, 0, 0)),
        Ok(Window::Always)
    );
    let u = user(json!([]), "");
    assert!(!restricted(&u));
    assert_eq!(
        window(&u, &Zone::default(), at(3, 0, 0)),
        Ok(Window::Always)
    );
}

#[test]
fn inside_a_range_until_its_end() {
    let u = user(json!([range("09:00:00", "17:00:00")]), "");
    assert!(restricted(&u));
    let z = Zone::default();
    assert_eq!(
        window(&u, &z, at(12, 30, 0)),
        Ok(Window::Until(utc(17, 0, 0)))
    );
    assert_eq!(window(&u, &z, at(8, 59, 59)), Ok(Window::Outside));
    assert_eq!(window(&u, &z, at(17, 0, 1)), Ok(Window::Outside));
    // The bounds are strict, as Go's Before/After.
    assert_eq!(window(&u, &z, at(9, 0, 0)), Ok(Window::Outside));
    assert_eq!(window(&u, &z, at(17, 0, 0)), Ok(Window::Outside));
    assert_eq!(
        window(&u, &z, at(9, 0, 0) + 1),
        Ok(Window::Until(utc(17, 0, 0)))
    );
}

#[test]
fn a_range_across_midnight() {
    let u = user(json!([range("22:00:00", "06:00:00")]), "");
    let z = Zone::default();
    // After midnight: until this morning's end.
    assert_eq!(window(&u, &z, at(5, 0, 0)), Ok(Window::Until(utc(6, 0, 0))));
    // Before midnight: until tomorrow morning's.
    assert_eq!(
        window(&u, &z, at(23, 30, 0)),
        Ok(Window::Until(utc(6, 0, 0) + DAY))
    );
    assert_eq!(window(&u, &z, at(12, 0, 0)), Ok(Window::Outside));
}

#[test]
fn several_ranges_take_the_latest_end() {
    let u = user(
        json!([range("08:00:00", "10:00:00"), range("09:00:00", "11:00:00")]),
        "",
    );
    let z = Zone::default();
    assert_eq!(
        window(&u, &z, at(9, 30, 0)),
        Ok(Window::Until(utc(11, 0, 0)))
    );
    assert_eq!(
        window(&u, &z, at(8, 30, 0)),
        Ok(Window::Until(utc(10, 0, 0)))
    );
    assert_eq!(window(&u, &z, at(11, 30, 0)), Ok(Window::Outside));
    // An empty range (start == end) never holds.
    let u = user(json!([range("09:00:00", "09:00:00")]), "");
    assert_eq!(window(&u, &z, at(9, 0, 0) + 1), Ok(Window::Outside));
}

#[test]
fn a_zone_moves_the_range() {
    let Ok(ny) = Zone::load("America/New_York") else {
        return; // no zoneinfo on this machine (util::tz's own tests cover loading)
    };
    // 2026-12-04 is standard time in New York: UTC-5.
    let u = user(json!([range("09:00:00", "17:00:00")]), "America/New_York");
    assert_eq!(location(&u), "America/New_York");
    assert_eq!(window(&u, &ny, at(13, 0, 0)), Ok(Window::Outside)); // 08:00 local
    assert_eq!(
        window(&u, &ny, at(15, 0, 0)),
        Ok(Window::Until(utc(22, 0, 0)))
    );
    // 23:00 local on the 3rd is 04:00 UTC on the 4th: the local day is the 3rd.
    let u = user(json!([range("22:00:00", "06:00:00")]), "America/New_York");
    assert_eq!(
        window(&u, &ny, at(4, 0, 0)),
        Ok(Window::Until(utc(11, 0, 0)))
    );
}

#[test]
fn the_local_zone_by_default() {
    assert_eq!(location(&user(json!([]), "")), "Local");
}

#[test]
fn clock_readings_as_go_parses_them() {
    assert_eq!(parse_clock("09:00:00"), Some(9 * 3600));
    assert_eq!(parse_clock("9:00:00"), Some(9 * 3600));
    assert_eq!(parse_clock("23:59:59"), Some(DAY - 1));
    assert_eq!(parse_clock("10:00:00.5"), Some(10 * 3600));
    for bad in [
        "",
        "24:00:00",
        "09:60:00",
        "09:00:60",
        "09:0:00",
        "09:00",
        "09:00:00Z",
        "123:00:00",
        "09:00:00.",
        "a9:00:00",
        "09-00-00",
    ] {
        assert_eq!(parse_clock(bad), None, "{bad:?}");
    }
}

#[test]
fn malformed_ranges_make_the_jwt_invalid() {
    let z = Zone::default();
    let u = user(json!([range("", "10:00:00")]), "");
    assert!(window(&u, &z, at(9, 0, 0)).unwrap_err().contains("start"));
    let u = user(json!([range("09:00:00", "25:00:00")]), "");
    assert!(window(&u, &z, at(9, 0, 0)).unwrap_err().contains("end"));
    let u = user(json!("09:00:00"), "");
    assert!(window(&u, &z, at(9, 0, 0)).is_err());
}
