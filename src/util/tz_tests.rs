//! Tests of the zoneinfo reader: offsets compared with the system's `date` for real zones
//! and footer rules, and bad, truncated or mis-named files refused without a panic.

use super::*;
use std::path::PathBuf;
use std::process::{Command, Stdio};

const ZONES: [&str; 6] = [
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",
    "Asia/Kolkata",
    "Pacific/Chatham",
    "America/Sao_Paulo",
];
/// 2040-01-01 and 2100-01-01 UTC.
const Y2040: i64 = 2_208_988_800;
const Y2100: i64 = 4_102_444_800;

fn zoneinfo(name: &str) -> PathBuf {
    let p = Path::new("/usr/share/zoneinfo").join(name);
    assert!(p.exists(), "{} is missing: install tzdata", p.display());
    p
}

/// `date` for the zone `tz`; None: `TZ` unset.
fn date(tz: Option<&str>) -> Command {
    let mut cmd = Command::new("date");
    match tz {
        Some(tz) => cmd.env("TZ", tz),
        None => cmd.env_remove("TZ"),
    };
    cmd
}

/// The system's offsets: GNU `date` reading the instants from stdin, one process for all.
fn system(mut cmd: Command, instants: &[i64]) -> Vec<i32> {
    let mut child = cmd
        .args(["-f", "-", "+%::z"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run date");
    let lines: String = instants.iter().map(|t| format!("@{t}\n")).collect();
    let mut stdin = child.stdin.take().expect("stdin");
    let writer =
        std::thread::spawn(move || std::io::Write::write_all(&mut stdin, lines.as_bytes()));
    let out = child.wait_with_output().expect("date output");
    writer.join().expect("writer").expect("write to date");
    assert!(out.status.success(), "{cmd:?} failed");
    let out = String::from_utf8(out.stdout).expect("utf-8");
    let offsets: Vec<i32> = out
        .lines()
        .map(|l| {
            let sign = if l.starts_with('-') { -1 } else { 1 };
            let f: Vec<i32> = l[1..].split(':').map(|n| n.parse().expect(l)).collect();
            sign * (f[0] * 3600 + f[1] * 60 + f[2])
        })
        .collect();
    assert_eq!(offsets.len(), instants.len());
    offsets
}

/// Every 6 hours over the year from `from`, and the second before and at each switch between.
fn year_with_switches(zone: &Zone, from: i64) -> Vec<i64> {
    let step = 6 * 3600;
    let mut v = Vec::new();
    let mut t = from;
    while t < from + 366 * DAY {
        let (a, b) = (t, t + step);
        if zone.offset_at(a) != zone.offset_at(b) {
            let (mut lo, mut hi) = (a, b);
            while hi - lo > 1 {
                let m = lo + (hi - lo) / 2;
                if zone.offset_at(m) == zone.offset_at(a) {
                    lo = m;
                } else {
                    hi = m;
                }
            }
            v.extend([lo, hi]);
        }
        v.push(a);
        t = b;
    }
    v
}

fn assert_matches_system(zone: &Zone, cmd: Command, instants: &[i64]) {
    let what = format!("{cmd:?}");
    let want = system(cmd, instants);
    let bad: Vec<String> = instants
        .iter()
        .zip(&want)
        .filter(|&(&t, &w)| zone.offset_at(t) != w)
        .map(|(&t, &w)| format!("@{t}: {} want {w}", zone.offset_at(t)))
        .collect();
    assert!(
        bad.is_empty(),
        "{what} differs at {} instants: {:?}",
        bad.len(),
        &bad[..bad.len().min(10)]
    );
}

fn now() -> i64 {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    d.expect("clock after 1970").as_secs() as i64
}

#[test]
fn real_zones_match_the_system() {
    for name in ZONES {
        zoneinfo(name);
        let zone = Zone::load(name).expect(name);
        let mut instants = vec![now(), -5_364_662_400, -2_208_988_800, -1, 0];
        // Around every transition in the file (from 1883 to 2037 for New York).
        for &(t, _) in zone.tx.iter().filter(|x| x.0 != i64::MIN) {
            instants.extend([t - 1, t, t + 1]);
        }
        // Weekly, at varying hours, from 1890 to 1970.
        instants.extend((-2_524_521_600..0).step_by(7 * 86_400 + 3_601));
        // Footer years: after the last transition.
        instants.extend(year_with_switches(&zone, Y2040));
        instants.extend(year_with_switches(&zone, Y2100));
        assert_matches_system(&zone, date(Some(name)), &instants);
    }
}

#[test]
fn known_offsets() {
    let at = |name: &str, t: i64| Zone::load(name).expect(name).offset_at(t);
    assert_eq!(at("Asia/Kolkata", now()), 19_800);
    // 2040-07-01: New York EDT, Lord Howe standard +10:30; 2040-01-01: Lord Howe DST +11.
    assert_eq!(at("America/New_York", Y2040 + 182 * DAY), -4 * 3600);
    assert_eq!(at("Australia/Lord_Howe", Y2040 + 182 * DAY), 37_800);
    assert_eq!(at("Australia/Lord_Howe", Y2040), 39_600);
    assert_eq!(at("Pacific/Chatham", Y2040), 49_500);
    assert_eq!(at("America/Sao_Paulo", Y2100), -3 * 3600);
    // No transitions at all: Go's transition at the beginning of time, then the footer.
    assert_eq!(at("Etc/GMT+5", i64::MIN), -5 * 3600);
    assert_eq!(at("Etc/GMT-14", i64::MAX), 14 * 3600);
    assert_eq!(at("", now()), 0);
    assert_eq!(at("UTC", now()), 0);
}

/// A TZif file: `version` 0 (v1, 32-bit data only), b'2', b'3' or any other byte (then with
/// a 32-bit block of one type of offset 1 that must be skipped, a 64-bit block and the footer).
fn tzif(
    version: u8,
    tx: &[(i64, u8)],
    types: &[(i32, bool)],
    chars: &[u8],
    footer: &str,
) -> Vec<u8> {
    let header = |v: &mut Vec<u8>, times: usize, types: usize| {
        v.extend(b"TZif");
        v.push(version);
        v.extend([0; 15]);
        for n in [0, 0, 0, times, types, chars.len()] {
            v.extend((n as u32).to_be_bytes());
        }
    };
    let block = |v: &mut Vec<u8>, wide: bool, types: &[(i32, bool)]| {
        for &(t, _) in tx {
            if wide {
                v.extend(t.to_be_bytes());
            } else {
                v.extend((t as i32).to_be_bytes());
            }
        }
        v.extend(tx.iter().map(|x| x.1));
        for &(off, dst) in types {
            v.extend(off.to_be_bytes());
            v.extend([u8::from(dst), 0]);
        }
        v.extend(chars);
    };
    let mut v = Vec::new();
    if version == 0 {
        header(&mut v, tx.len(), types.len());
        block(&mut v, false, types);
        return v;
    }
    header(&mut v, tx.len(), 1);
    block(&mut v, false, &[(1, false)]);
    header(&mut v, tx.len(), types.len());
    block(&mut v, true, types);
    v.extend(format!("\n{footer}\n").bytes());
    v
}

const EST_EDT: [(i32, bool); 2] = [(-18_000, false), (-14_400, true)];

#[test]
fn versions_1_2_and_3() {
    let tx = [(-3_000_000_000, 1), (1_000, 1), (2_000, 0)];
    // v1: 32-bit times, no footer.
    let v1 = parse(&tzif(0, &tx[1..], &EST_EDT, b"X\0", "")).expect("v1");
    assert_eq!(v1.offset_at(999), -18_000);
    assert_eq!(
        (v1.offset_at(1_999), v1.offset_at(2_000)),
        (-14_400, -18_000)
    );
    assert_eq!(v1.offset_at(Y2040 + 182 * DAY), -18_000);
    for version in [b'2', b'3'] {
        let z = parse(&tzif(
            version,
            &tx,
            &EST_EDT,
            b"X\0",
            "EST5EDT,M3.2.0,M11.1.0",
        ))
        .expect("v2+");
        assert_eq!(z.tx[0].0, -3_000_000_000, "64-bit block read");
        assert_eq!(z.offset_at(-3_000_000_001), -18_000);
        assert_eq!(z.offset_at(-3_000_000_000), -14_400);
        assert_eq!(z.offset_at(2_000), -18_000);
        assert_eq!(z.offset_at(Y2040 + 182 * DAY), -14_400, "footer");
    }
    // A real file relabelled as version 3 reads the same; Go knows no version 4.
    let mut data = std::fs::read(zoneinfo("Europe/London")).expect("read");
    let london = parse(&data).expect("london");
    data[4] = b'3';
    let v3 = parse(&data).expect("v3");
    for t in [-4_000_000_000, 0, now(), Y2040 + 100 * DAY] {
        assert_eq!(v3.offset_at(t), london.offset_at(t));
    }
    data[4] = b'4';
    assert_eq!(parse(&data).err().as_deref(), Some(BAD_DATA));
}

#[test]
fn before_the_first_transition_as_go() {
    let before = |tx: &[(i64, u8)], types: &[(i32, bool)]| {
        parse(&tzif(b'2', tx, types, b"X\0", ""))
            .expect("parse")
            .offset_at(-10)
    };
    // Type 0 used by no transition: type 0, even DST.
    assert_eq!(before(&[(0, 1)], &[(3_600, true), (0, false)]), 3_600);
    // First transition to DST: the standard type before it.
    assert_eq!(
        before(
            &[(0, 2), (10, 0)],
            &[(100, false), (200, false), (3_600, true)]
        ),
        200
    );
    // Else the first standard type.
    assert_eq!(before(&[(0, 0)], &[(3_600, true), (7_200, false)]), 7_200);
    // All DST: type 0.
    assert_eq!(
        before(&[(0, 0), (5, 1)], &[(3_600, true), (7_200, true)]),
        3_600
    );
}

#[test]
fn footer_rules_match_the_system() {
    let footers = [
        "<+0330>-3:30<+0430>,J79/24,J263/24",   // Jn, 24:00
        "<-03>3<-02>,M3.5.0/-2,M10.5.0/-1",     // negative times
        "IST-2IDT,M3.4.4/26,M10.5.0",           // beyond 24 hours
        "<+00>0<+02>-2,59/2,300/3",             // zero-based day, leap day counted
        "<+1030>-10:30<+11>-11,M10.1.0,M4.1.0", // southern, 30-minute DST
        "<+1245>-12:45<+1345>,M9.5.0/2:45,M4.1.0/3:45",
        "AAA3BBB,M3.2.0,M11.1.0", // DST offset by default one hour more
        "XXX-1:00:30YYY-2:00:15,M3.5.0/1:30:45,M10.5.0/-0:30",
        "<-05>5<-04>,M3.2.0/-23,J300/100",
        "<+0545>-5:45", // no DST
    ];
    for footer in footers {
        let zone = parse(&tzif(b'2', &[(0, 0)], &[(12_345, false)], b"X\0", footer)).expect(footer);
        let mut instants = year_with_switches(&zone, Y2040);
        instants.extend(year_with_switches(&zone, Y2100));
        instants.push(now());
        assert_matches_system(&zone, date(Some(footer)), &instants);
    }
}

#[test]
fn footers_go_accepts_or_ignores() {
    let zone = |footer: &str| {
        parse(&tzif(b'2', &[(0, 0)], &[(12_345, false)], b"X\0", footer)).expect(footer)
    };
    let (winter, summer) = (Y2040 + 10 * DAY, Y2040 + 182 * DAY);
    // No rules: tzcode's default, US rules since 2007.
    let z = zone("EST5EDT");
    assert_eq!(
        (z.offset_at(winter), z.offset_at(summer)),
        (-18_000, -14_400)
    );
    // ";" before the rules, as tzcode (Go only after an explicit DST offset).
    let z = zone("EST5EDT4;M3.2.0,M11.1.0");
    assert_eq!(z.offset_at(summer), -14_400);
    // Footers Go cannot read: the last transition's type.
    for bad in [
        "EST5EDT,M13.1.0,M11.1.0",
        "EST",
        "ES5",
        "<EST5",
        "EST5EDT,M3.2.0",
        "EST5EDT,M3.2.0,M11.1.0x",
        "EST169",
    ] {
        assert_eq!(zone(bad).offset_at(summer), 12_345, "{bad}");
    }
    // Go counts a name's length in bytes: two 2-byte letters are long enough.
    assert_eq!(zone("\u{e9}\u{e9}5").offset_at(summer), -18_000);
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "natsd-tz-{name}-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("Test")).expect("temp dir");
    d
}

#[test]
fn zoneinfo_dir_bad_and_truncated_files() {
    let dir = temp_dir("zoneinfo");
    let ny = std::fs::read(zoneinfo("America/New_York")).expect("read");
    let write = |name: &str, data: &[u8]| {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, data).expect("write");
    };
    write("Test/Corrupt", b"TZif2 but not really a zoneinfo file");
    write("Test/Truncated", &ny[..ny.len() / 2]);
    write(
        "Test/Good",
        &std::fs::read(zoneinfo("Asia/Kolkata")).expect("read"),
    );
    write("America/New_York", b"garbage");
    let load = |name: &str| load_in(name, Some(&dir));
    assert_eq!(load("Test/Corrupt").err().as_deref(), Some(BAD_DATA));
    assert_eq!(load("Test/Truncated").err().as_deref(), Some(BAD_DATA));
    assert_eq!(load("Test/Good").expect("good").offset_at(now()), 19_800);
    assert_eq!(
        load("Test/Missing").err().as_deref(),
        Some("unknown time zone Test/Missing")
    );
    // As Go: a bad file in $ZONEINFO does not hide the system's.
    let t = Y2040 + 182 * DAY;
    assert_eq!(
        load("America/New_York").expect("system").offset_at(t),
        -14_400
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_truncation_fails_and_no_corruption_panics() {
    let data = std::fs::read(zoneinfo("America/New_York")).expect("read");
    // The footer is the last "\n...\n".
    let footer = data[..data.len() - 1]
        .iter()
        .rposition(|&c| c == b'\n')
        .expect("footer");
    for len in 0..footer {
        assert_eq!(
            parse(&data[..len]).err().as_deref(),
            Some(BAD_DATA),
            "truncated at {len}"
        );
    }
    // A cut footer is ignored, as Go: the last transition's type (EST) holds.
    for len in footer..data.len() {
        let z = parse(&data[..len]).expect("data complete");
        assert_eq!(z.offset_at(Y2040 + 182 * DAY), -18_000);
    }
    let instants = [i64::MIN, -1 << 40, -1, 0, now(), Y2100, 1 << 40, i64::MAX];
    for i in 0..data.len() {
        for b in [0, 1, 0x7f, 0x80, 0xff] {
            let mut bad = data.clone();
            bad[i] = b;
            if let Ok(z) = parse(&bad) {
                instants.iter().for_each(|&t| {
                    z.offset_at(t);
                });
            }
        }
    }
    let parsed = parse(&data).expect("parse");
    instants.iter().for_each(|&t| {
        parsed.offset_at(t);
    });
}

#[test]
fn malformed_headers_and_indices() {
    let bad = |data: Vec<u8>| parse(&data).err();
    let want = Some(BAD_DATA.to_string());
    assert_eq!(bad(b"TZjf2".to_vec()), want);
    assert_eq!(
        bad(tzif(b'5', &[], &EST_EDT, b"X\0", "")),
        want,
        "unknown version"
    );
    assert_eq!(
        bad(tzif(b'2', &[], &[], b"X\0", "")),
        want,
        "no local time types"
    );
    assert_eq!(
        bad(tzif(b'2', &[(0, 2)], &EST_EDT, b"X\0", "")),
        want,
        "type index"
    );
    assert_eq!(
        bad(tzif(0, &[(0, 2)], &EST_EDT, b"X\0", "")),
        want,
        "v1 type index"
    );
    assert_eq!(
        bad(tzif(b'2', &[(0, 1)], &EST_EDT, b"", "")),
        want,
        "abbreviation index"
    );
    // Counts near u32::MAX must not overflow or allocate.
    let mut huge = tzif(b'2', &[(0, 1)], &EST_EDT, b"X\0", "");
    huge[20..44].copy_from_slice(&[0xff; 24]);
    assert_eq!(bad(huge), want);
}

#[test]
fn names_go_refuses_or_cannot_find() {
    let err = |name: &str| Zone::load(name).err();
    assert_eq!(
        err("America/Nowhere").as_deref(),
        Some("unknown time zone America/Nowhere")
    );
    for name in [
        "../etc/passwd",
        "America/../Europe/London",
        "..",
        "/etc/localtime",
        "\\x",
        "Europe\\London",
    ] {
        assert_eq!(err(name).as_deref(), Some(BAD_NAME), "{name}");
    }
    // A directory: Go's error is the read's, "is a directory".
    assert_eq!(err("America").as_deref(), Some("is a directory"));
}

#[test]
fn local_as_go() {
    let t = Y2040 + 182 * DAY;
    let with_tz = |tz: &str| local(Some(std::ffi::OsStr::new(tz))).offset_at(t);
    assert_eq!(with_tz(":America/New_York"), -14_400);
    assert_eq!(with_tz("America/New_York"), -14_400);
    assert_eq!(with_tz("/usr/share/zoneinfo/Asia/Kolkata"), 19_800);
    // Empty, UTC or not found: UTC, never an error.
    for utc in ["", ":", "UTC", "Nowhere/Zone", "/nonexistent"] {
        assert_eq!(with_tz(utc), 0, "{utc}");
    }
    // TZ unset: /etc/localtime, as the system reads it.
    let instants = [now(), t, Y2100];
    assert_matches_system(&local(None), date(None), &instants);
    // "Local": this process's TZ, as `date` inherits it.
    let zone = Zone::load("Local").expect("local");
    assert_matches_system(&zone, Command::new("date"), &instants);
}
