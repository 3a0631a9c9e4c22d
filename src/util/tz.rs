//! Named IANA time zones read from the system's zoneinfo (TZif, RFC 8536 versions 1 to 3)
//! files, for one question: the UTC offset at an instant. It follows Go's `time.LoadLocation`
//! and `Time.In`: the same files in the same order, the same checks on their data (and the same
//! error strings), the first standard local time type before the first transition, and the
//! footer's POSIX TZ string after the last one (Go's `tzset`). Unlike Go: $ZONEINFO must be a
//! directory (not a zip), a backslash anywhere in a name is refused, there is no fallback to
//! Go's own zoneinfo.zip or embedded tzdata, and `TZ` and $ZONEINFO are read at each `load`, not once per process.

use std::io::Read;
use std::path::Path;

/// Go's error for a file that is not valid TZif.
const BAD_DATA: &str = "malformed time zone information";
/// Go's error for a name with "..", or a leading '/' or '\'.
const BAD_NAME: &str = "time: invalid location name";
/// Go's `maxFileSize`: a larger zoneinfo file is refused.
const MAX_FILE: u64 = 10 << 20;
/// Go's `platformZoneSources` on Unix, tried in order.
const SOURCES: [&str; 4] = [
    "/usr/share/zoneinfo",
    "/usr/share/lib/zoneinfo",
    "/usr/lib/locale/TZ",
    "/etc/zoneinfo",
];
const DAY: i64 = 86_400;

/// One local time type of a TZif file: its offset east of UTC and whether it is DST.
#[derive(Clone, Copy, Debug)]
struct LocalType {
    offset: i32,
    dst: bool,
}

/// A time zone loaded from the system's zoneinfo (TZif) files.
#[derive(Clone, Debug, Default)]
pub struct Zone {
    /// Empty for UTC (the default).
    types: Vec<LocalType>,
    /// Transitions (instant, index into `types`, checked), as in the file. A file with none
    /// gets Go's single transition at the beginning of time to type 0.
    tx: Vec<(i64, usize)>,
    /// Offset before the first transition (Go's `lookupFirstZone`).
    before: i32,
    /// The footer's POSIX TZ string, empty when there is none.
    extend: Vec<u8>,
}

impl Zone {
    /// Go's `time.LoadLocation`: "" or "UTC" is UTC; "Local" is the zone of the `TZ`
    /// environment variable, else `/etc/localtime`, else UTC; any other name is read from
    /// `$ZONEINFO` (if set) or `/usr/share/zoneinfo/<name>` (also `/usr/share/lib/zoneinfo`,
    /// `/usr/lib/locale/TZ` and `/etc/zoneinfo` as Go tries). Names with "..", a leading '/'
    /// or a backslash are refused.
    /// Err: a message like Go's ("unknown time zone America/Nowhere").
    pub fn load(name: &str) -> Result<Zone, String> {
        if name == "Local" {
            return Ok(local(std::env::var_os("TZ").as_deref()));
        }
        let zoneinfo = std::env::var_os("ZONEINFO");
        load_in(name, zoneinfo.as_deref().map(Path::new))
    }

    /// Seconds east of UTC in effect at `unix_secs`.
    pub fn offset_at(&self, unix_secs: i64) -> i32 {
        match self.tx.first() {
            Some(&(first, _)) if unix_secs < first => return self.before,
            None => return 0,
            _ => {}
        }
        // Past the last transition the footer's rules apply, when they parse.
        let after = self.tx.partition_point(|&(when, _)| when <= unix_secs);
        if after == self.tx.len() && !self.extend.is_empty() {
            if let Some(offset) = posix_offset(&self.extend, unix_secs) {
                return offset;
            }
        }
        // The last transition at or before `unix_secs` (`after` is at least 1).
        let last = self.tx.get(after.wrapping_sub(1));
        last.and_then(|&(_, ty)| self.types.get(ty))
            .map_or(0, |t| t.offset)
    }
}

/// `Zone::load` for any name but "Local", with $ZONEINFO given.
fn load_in(name: &str, zoneinfo: Option<&Path>) -> Result<Zone, String> {
    if name.is_empty() || name == "UTC" {
        return Ok(Zone::default());
    }
    if name.contains("..") || name.starts_with('/') || name.contains('\\') {
        return Err(BAD_NAME.to_string());
    }
    let zoneinfo = zoneinfo.filter(|d| !d.as_os_str().is_empty());
    load_from(name, zoneinfo.into_iter().chain(SOURCES.map(Path::new)))
}

/// Go's `loadLocation`: the first directory whose file parses, else the first error that was
/// not a missing file, else "unknown time zone".
fn load_from<'a>(name: &str, dirs: impl IntoIterator<Item = &'a Path>) -> Result<Zone, String> {
    let mut first_err = None;
    for dir in dirs {
        match read_file(&dir.join(name)).and_then(|data| parse(&data).map_err(Some)) {
            Ok(zone) => return Ok(zone),
            Err(e) => first_err = first_err.or(e),
        }
    }
    Err(first_err.unwrap_or_else(|| format!("unknown time zone {name}")))
}

/// Go's `initLocal`: `tz` is the value of `TZ`, `None` when unset. Never fails: UTC instead.
fn local(tz: Option<&std::ffi::OsStr>) -> Zone {
    let zone = match tz.map(|t| t.to_string_lossy()) {
        None => load_from("localtime", [Path::new("/etc")]),
        Some(tz) => {
            let tz = tz.strip_prefix(':').unwrap_or(&tz);
            if tz.starts_with('/') {
                load_from(tz, [Path::new("")])
            } else if !tz.is_empty() && tz != "UTC" {
                load_from(tz, SOURCES.map(Path::new))
            } else {
                Ok(Zone::default())
            }
        }
    };
    zone.unwrap_or_else(|_| Zone::default())
}

/// The file's bytes; `Err(None)` when it does not exist, else Go's message.
fn read_file(path: &Path) -> Result<Vec<u8>, Option<String>> {
    let io_err = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::NotFound => None,
        kind => Some(kind.to_string()),
    };
    let file = std::fs::File::open(path).map_err(io_err)?;
    let mut data = Vec::new();
    file.take(MAX_FILE + 1)
        .read_to_end(&mut data)
        .map_err(io_err)?;
    if data.len() as u64 > MAX_FILE {
        return Err(Some(format!("time: file {} is too large", path.display())));
    }
    Ok(data)
}

/// Reads a TZif file front to back; every read is checked against what is left.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: u64) -> Result<&'a [u8], String> {
        let n = usize::try_from(n).ok().filter(|&n| n <= self.0.len());
        let (head, rest) = self.0.split_at(n.ok_or_else(|| BAD_DATA.to_string())?);
        self.0 = rest;
        Ok(head)
    }

    /// The six counts of a header: isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt
    /// (each below 2^32, so sizes computed from them cannot overflow a u64).
    fn counts(&mut self) -> Result<[u64; 6], String> {
        let mut n = [0; 6];
        for c in &mut n {
            *c = be(self.take(4)?);
        }
        Ok(n)
    }
}

/// A big-endian unsigned number of up to 8 bytes.
fn be(b: &[u8]) -> u64 {
    b.iter().fold(0, |n, &b| n << 8 | u64::from(b))
}

/// Go's `LoadLocationFromTZData`, keeping only what the offset needs.
fn parse(data: &[u8]) -> Result<Zone, String> {
    let bad = || BAD_DATA.to_string();
    let mut r = Reader(data);
    if r.take(4)? != b"TZif" {
        return Err(bad());
    }
    let v2 = match r.take(16)?.first() {
        Some(0) => false,
        Some(b'2' | b'3') => true,
        _ => return Err(bad()),
    };
    let mut n = r.counts()?;
    let mut size = 4;
    if v2 {
        // Skip the 32-bit block and the second header's magic and version: the 64-bit block
        // follows with its own counts.
        let [isut, isstd, leap, time, types, chars] = n;
        r.take(time * 5 + types * 6 + chars + leap * 8 + isstd + isut + 20)?;
        n = r.counts()?;
        size = 8;
    }
    let [isut, isstd, leap, time, types, chars] = n;
    let times = r.take(time * size)?;
    let indices = r.take(time)?;
    let typedata = r.take(types * 6)?;
    let abbrev = r.take(chars)?;
    r.take(leap * (size + 4) + isstd + isut)?;
    let extend = match r.0 {
        [b'\n', tz @ .., b'\n'] if !tz.is_empty() => tz.to_vec(),
        _ => Vec::new(),
    };

    if types == 0 {
        return Err(bad());
    }
    let types = typedata
        .chunks_exact(6)
        .map(|t| match *t {
            [a, b, c, d, dst, name] if usize::from(name) < abbrev.len() => Ok(LocalType {
                offset: i32::from_be_bytes([a, b, c, d]),
                dst: dst != 0,
            }),
            _ => Err(bad()),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut tx = times
        .chunks_exact(size as usize)
        .zip(indices)
        .map(|(when, &ty)| {
            let when = match size {
                4 => i64::from(be(when) as u32 as i32),
                _ => be(when) as i64,
            };
            match usize::from(ty) {
                ty if ty < types.len() => Ok((when, ty)),
                _ => Err(bad()),
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    if tx.is_empty() {
        tx.push((i64::MIN, 0));
    }
    let before = types.get(first_type(&types, &tx)).map_or(0, |t| t.offset);
    Ok(Zone {
        types,
        tx,
        before,
        extend,
    })
}

/// Go's `lookupFirstZone`: type 0 if no transition uses it; else if the first transition is to
/// DST, the last standard type before that one; else the first standard type; else type 0.
fn first_type(types: &[LocalType], tx: &[(i64, usize)]) -> usize {
    let is_dst = |i: usize| types.get(i).is_some_and(|t| t.dst);
    if !tx.iter().any(|&(_, ty)| ty == 0) {
        return 0;
    }
    let first_dst = tx.first().map(|&(_, ty)| ty).filter(|&ty| is_dst(ty));
    let before_it = first_dst.and_then(|ty| (0..ty).rev().find(|&i| !is_dst(i)));
    before_it
        .or_else(|| (0..types.len()).find(|&i| !is_dst(i)))
        .unwrap_or(0)
}

/// A DST rule of a POSIX TZ string: the day, and the local time of day (seconds) it switches.
#[derive(Clone, Copy)]
enum Day {
    /// `Jn`: 1..=365, February 29 never counted.
    Julian(i64),
    /// `n`: 0..=365, February 29 counted.
    Zero(i64),
    /// `Mm.w.d`: month, week 1..=5 (5 is the last), weekday 0 (Sunday)..=6.
    Month(i64, i64, i64),
}

/// Go's `tzset`: the offset at `t` by a POSIX TZ string, or None if it does not parse.
fn posix_offset(s: &[u8], t: i64) -> Option<i32> {
    let ends = |s: &[u8]| matches!(s.first(), None | Some(b','));
    let (std, s) = offset(tz_name(s)?)?;
    // POSIX offsets are west of UTC.
    let std = -std;
    if ends(s) {
        return i32::try_from(std).ok();
    }
    let s = tz_name(s)?;
    let (dst, s) = if ends(s) {
        (std + 3600, s)
    } else {
        let (o, s) = offset(s)?;
        (-o, s)
    };
    // tzcode's default rules; tzcode also accepts ';' before them.
    let s = if s.is_empty() { b",M3.2.0,M11.1.0" } else { s };
    let s = s.strip_prefix(b",").or_else(|| s.strip_prefix(b";"))?;
    let (start, s) = rule(s)?;
    let (end, s) = rule(s.strip_prefix(b",")?)?;
    if !s.is_empty() {
        return None;
    }
    // As Go: the rules of the UTC year of `t`, seconds since that year began.
    let days = t.div_euclid(DAY);
    let year = year_of(days);
    let ysec = (days - days_from_civil(year, 1, 1)) * DAY + t.rem_euclid(DAY);
    let start = rule_time(year, start, std);
    let end = rule_time(year, end, dst);
    // Southern hemisphere: DST spans the new year.
    let (lo, hi, inside, outside) = match end < start {
        true => (end, start, std, dst),
        false => (start, end, dst, std),
    };
    let offset = if ysec < lo || ysec >= hi {
        outside
    } else {
        inside
    };
    i32::try_from(offset).ok()
}

/// Skips a zone name: `<...>`, or at least 3 characters up to a digit, ',', '-' or '+'.
fn tz_name(s: &[u8]) -> Option<&[u8]> {
    if let Some(quoted) = s.strip_prefix(b"<") {
        let close = quoted.iter().position(|&c| c == b'>')?;
        return quoted.get(close + 1..);
    }
    match s.iter().position(|c| b"0123456789,-+".contains(c)) {
        Some(i) if i >= 3 => s.get(i..),
        None if s.len() >= 3 => Some(&[]),
        _ => None,
    }
}

/// Go's `tzsetNum`: a decimal number in min..=max.
fn num(s: &[u8], min: i64, max: i64) -> Option<(i64, &[u8])> {
    let len = s.iter().take_while(|c| c.is_ascii_digit()).count();
    let (digits, rest) = s.split_at(len);
    let mut n = 0;
    for &d in digits {
        n = n * 10 + i64::from(d - b'0');
        if n > max {
            return None;
        }
    }
    (len > 0 && n >= min).then_some((n, rest))
}

/// Go's `tzsetOffset`: `[+-]hh[:mm[:ss]]`, hours up to 168, in seconds.
fn offset(s: &[u8]) -> Option<(i64, &[u8])> {
    let (sign, s) = match s.split_first() {
        Some((b'-', rest)) => (-1, rest),
        Some((b'+', rest)) => (1, rest),
        _ => (1, s),
    };
    let (h, mut s) = num(s, 0, 24 * 7)?;
    let mut secs = h * 3600;
    for unit in [60, 1] {
        let Some(rest) = s.strip_prefix(b":") else {
            break;
        };
        let (n, rest) = num(rest, 0, 59)?;
        secs += n * unit;
        s = rest;
    }
    Some((sign * secs, s))
}

/// Go's `tzsetRule`: `Jn`, `n` or `Mm.w.d`, then `/time` (default 02:00, may be signed or
/// beyond 24 hours).
fn rule(s: &[u8]) -> Option<((Day, i64), &[u8])> {
    let (day, s) = if let Some(s) = s.strip_prefix(b"J") {
        let (n, s) = num(s, 1, 365)?;
        (Day::Julian(n), s)
    } else if let Some(s) = s.strip_prefix(b"M") {
        let (m, s) = num(s, 1, 12)?;
        let (w, s) = num(s.strip_prefix(b".")?, 1, 5)?;
        let (d, s) = num(s.strip_prefix(b".")?, 0, 6)?;
        (Day::Month(m, w, d), s)
    } else {
        let (n, s) = num(s, 0, 365)?;
        (Day::Zero(n), s)
    };
    match s.strip_prefix(b"/") {
        None => Some(((day, 2 * 3600), s)),
        Some(s) => offset(s).map(|(time, s)| ((day, time), s)),
    }
}

/// Go's `tzruleTime`: the switch in seconds since the start of `year` UTC, the rule's local
/// time read at offset `off`.
fn rule_time(year: i64, (day, time): (Day, i64), off: i64) -> i64 {
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let yday = match day {
        Day::Julian(n) => n - 1 + i64::from(leap && n >= 60),
        Day::Zero(n) => n,
        Day::Month(m, w, d) => {
            let first = days_from_civil(year, m, 1);
            let month_len = days_from_civil(year + m / 12, m % 12 + 1, 1) - first;
            // 1970-01-01 was a Thursday.
            let mut mday = (d - (first + 4)).rem_euclid(7);
            for _ in 1..w {
                if mday + 7 >= month_len {
                    break;
                }
                mday += 7;
            }
            first - days_from_civil(year, 1, 1) + mday
        }
    };
    yday * DAY + time - off
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468
}

/// The proleptic Gregorian year of a day since 1970-01-01 (`civil_from_days`).
fn year_of(days: i64) -> i64 {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    // March-based: January and February (doy >= 306) belong to the next civil year.
    yoe + era * 400 + i64::from(doy >= 306)
}

#[cfg(test)]
#[path = "tz_tests.rs"]
mod tests;
