//! Cases from nats-server's `subject_transform_test.go`, plus error texts and runtime results
//! checked against a real nats-server 2.15.1.

use super::*;

#[track_caller]
fn ok(src: &str, dest: &str) -> Transform {
    match Transform::new(src, dest) {
        Ok(t) => t,
        Err(e) => panic!("{src:?} -> {dest:?}: unexpected error {e}"),
    }
}

#[track_caller]
fn err(src: &str, dest: &str) -> String {
    match Transform::new(src, dest) {
        Ok(t) => panic!("{src:?} -> {dest:?}: expected an error, got {t:?}"),
        Err(e) => e,
    }
}

#[track_caller]
fn err_is(src: &str, dest: &str, want: &str) {
    assert_eq!(err(src, dest), want, "{src:?} -> {dest:?}");
}

#[track_caller]
fn maps(src: &str, dest: &str, sample: &str, want: &str) {
    assert_eq!(
        ok(src, dest).apply(sample).as_deref(),
        Some(want),
        "{src:?} -> {dest:?} on {sample:?}"
    );
}

#[test]
fn placeholder_index() {
    use Placeholder as P;
    let p = |s| parse_placeholder(s).expect(s);
    assert_eq!(p("$1"), P::Wildcard(1));
    assert_eq!(
        p("{{partition(10,1,2,3)}}"),
        P::Partition(10, vec![1, 2, 3])
    );
    assert_eq!(
        p("{{ Partition (10,1,2,3) }}"),
        P::Partition(10, vec![1, 2, 3])
    );
    assert_eq!(p("{{wildcard(2)}}"), P::Wildcard(2));
    assert_eq!(
        p("{{SplitFromLeft(2,1)}}"),
        P::Cut(Cut::SplitFromLeft, 2, 1)
    );
    assert_eq!(
        p("{{SplitFromRight(3,2)}}"),
        P::Cut(Cut::SplitFromRight, 3, 2)
    );
    assert_eq!(
        p("{{SliceFromLeft(2,2)}}"),
        P::Cut(Cut::SliceFromLeft, 2, 2)
    );
    assert_eq!(
        p("{{SliceFromRight(2,2)}}"),
        P::Cut(Cut::SliceFromRight, 2, 2)
    );
    assert_eq!(p("{{Left(3,2)}}"), P::Cut(Cut::Left, 3, 2));
    assert_eq!(p("{{Right(3,2)}}"), P::Cut(Cut::Right, 3, 2));
    assert_eq!(p("{{split(1,-)}}"), P::Split(1, "-"));
    assert_eq!(p("{{random(5)}}"), P::Random(5));
    // Literals: `$` without a number, too-short or unclosed braces.
    assert_eq!(p("$foo"), P::Literal);
    assert_eq!(p("$"), P::Literal);
    assert_eq!(p("{{}}"), P::Literal);
    assert_eq!(p("{{wildcard(1)}}x"), P::Literal);
    // Go's regexes: `.*` is greedy, separators are `,\s*`, ints trimmed of spaces only.
    assert_eq!(p("{{ wildcard( 1 ) }}"), P::Wildcard(1));
    assert_eq!(p("{{partition(3,\t 1, 2)}}"), P::Partition(3, vec![1, 2]));
    assert_eq!(p("{{x{{wildcard(1)}}"), P::Wildcard(1));
    assert_eq!(p("{{wildcard(+1)}}"), P::Wildcard(1));
    assert_eq!(p("$+1"), P::Wildcard(1));
    assert!(parse_placeholder("{{wildcard(1)}}{{partition(2)}}").is_err());
    assert!(parse_placeholder("{{wildcard(1\t)}}").is_err());
    // Only camel-case word initials are case-insensitive.
    assert_eq!(
        p("{{splitFromleft(1,1)}}"),
        P::Cut(Cut::SplitFromLeft, 1, 1)
    );
    assert!(parse_placeholder("{{WILDCARD(1)}}").is_err());
    assert!(parse_placeholder("{{sPLIT(1,-)}}").is_err());
}

#[test]
fn go_should_err() {
    err("foo..", "bar");
    err("foo.*", "bar.*");
    err("foo.*", "bar.$2");
    err("foo.*", "bar.$1.>");
    err("foo.>", "bar.baz");
    err("foo.*", "foo.{{wildcard(2)}}");
    err("foo.*", "foo.{{unimplemented(1)}}");
    err("foo.*", "foo.{{partition()}}");
    err("foo.*", "foo.{{random()}}");
    err("foo.*", "foo.{{wildcard(foo)}}");
    err("foo.*", "foo.{{wildcard()}}");
    err("foo.*", "foo.{{wildcard(1,2)}}");
    err("foo.*", "foo.{{ wildcard5) }}");
    err("foo.*", "foo.{{splitLeft(2,2}}");
    err("foo", "bla.{{wildcard(1)}}");
    err(
        "foo.*",
        &format!("foo.{{{{partition({})}}}}", i64::from(i32::MAX) + 1),
    );
    err(
        "foo.*",
        &format!("foo.{{{{random({})}}}}", i64::from(i32::MAX) + 1),
    );
    // Strict-only failures in Go are fine for mappings.
    ok("foo.*.*", "bar.$2");
    ok("foo.*", "foo.$foo");
    ok("foo.*", "bar.{{Partition(2,1)}}");
}

#[test]
fn go_should_be_ok() {
    ok("foo.*", "bar.{{Wildcard(1)}}");
    ok("foo.*.*", "bar.$2");
    ok("foo.*.*", "bar.{{wildcard(1)}}");
    ok("foo.*.*", "bar.{{partition(1)}}");
    ok("foo.*.*", "bar.{{random(5)}}");
    ok("foo", "bar");
    ok("foo.*.bar.*.baz", "req.$2.$1");
    ok("baz.>", "mybaz.>");
    ok("*", "{{splitfromleft(1,1)}}");
    ok("", "prefix.>");
    ok("*.*", "{{partition(10,1,2)}}");
    ok(
        "foo.*.*",
        "foo.{{wildcard(1)}}.{{wildcard(2)}}.{{partition(5,1,2)}}",
    );
    ok("foo.*", &format!("foo.{{{{partition({})}}}}", i32::MAX));
    ok("foo.*", &format!("foo.{{{{random({})}}}}", i32::MAX));
    ok("foo.bar", &format!("foo.{{{{random({})}}}}", i32::MAX));
    ok("foo.bar", "baz.{{partition(10)}}");
}

#[test]
fn go_should_match() {
    maps("", "prefix.>", "foo", "prefix.foo");
    maps("foo", "", "foo", "foo");
    maps("foo", "bar", "foo", "bar");
    maps("foo.*.bar.*.baz", "req.$2.$1", "foo.A.bar.B.baz", "req.B.A");
    maps(
        "foo.*.bar.*.baz",
        "req.{{wildcard(2)}}.{{wildcard(1)}}",
        "foo.A.bar.B.baz",
        "req.B.A",
    );
    maps("baz.>", "my.pre.>", "baz.1.2.3", "my.pre.1.2.3");
    maps("baz.>", "foo.bar.>", "baz.1.2.3", "foo.bar.1.2.3");
    maps("*", "foo.bar.$1", "foo", "foo.bar.foo");
    maps("*", "{{splitfromleft(1,3)}}", "12345", "123.45");
    maps("*", "{{SplitFromRight(1,3)}}", "12345", "12.345");
    maps("*", "{{SliceFromLeft(1,3)}}", "1234567890", "123.456.789.0");
    maps(
        "*",
        "{{SliceFromRight(1,3)}}",
        "1234567890",
        "1.234.567.890",
    );
    maps("*", "{{split(1,-)}}", "-abc-def--ghi-", "abc.def.ghi");
    maps("*", "{{split(1,-)}}", "abc-def--ghi-", "abc.def.ghi");
    maps(
        "*.*",
        "{{split(2,-)}}.{{splitfromleft(1,2)}}",
        "foo.-abc-def--ghij-",
        "abc.def.ghij.fo.o",
    );
    maps("*", "{{right(1,1)}}", "1234", "4");
    maps("*", "{{right(1,3)}}", "1234", "234");
    maps("*", "{{right(1,6)}}", "1234", "1234");
    maps("*", "{{left(1,1)}}", "1234", "1");
    maps("*", "{{left(1,3)}}", "1234", "123");
    maps("*", "{{left(1,6)}}", "1234", "1234");
    maps("*", "bar.{{partition(0)}}", "baz", "bar.0");
    maps("*", "bar.{{partition(10, 0)}}", "foo", "bar.3");
    maps("*.*", "bar.{{partition(10)}}", "foo.bar", "bar.6");
    maps("*", "bar.{{partition(10)}}", "foo", "bar.3");
    maps("*", "bar.{{partition(10)}}", "baz", "bar.0");
    maps("*", "bar.{{partition(10)}}", "qux", "bar.9");
    maps("*", "bar.{{random(0)}}", "qux", "bar.0");
    maps("foo.bar", "baz.{{partition(10)}}", "foo.bar", "baz.6");
    maps("foo.baz", "qux.{{partition(10)}}", "foo.baz", "qux.4");
    maps(
        "test.subject",
        "result.{{partition(5)}}",
        "test.subject",
        "result.0",
    );
}

#[test]
fn random_stays_in_range() {
    let t = ok("*", "bar.{{random(6)}}");
    let n = ok("*", "bar.{{random(-3)}}");
    for _ in 0..200 {
        let s = t.apply("qux").expect("match");
        assert!(
            ["bar.0", "bar.1", "bar.2", "bar.3", "bar.4", "bar.5"].contains(&s.as_str()),
            "{s}"
        );
        let s = n.apply("qux").expect("match");
        assert!(["bar.0", "bar.1", "bar.2"].contains(&s.as_str()), "{s}");
    }
}

#[test]
fn missing_token_renders_empty() {
    // Go's TestSubjectTransformDoesntPanicTransformingMissingToken.
    let t = ok("foo.*", "one.two.{{wildcard(1)}}");
    assert_eq!(t.render(&["foo"], "foo"), "one.two.");
    let t = ok(
        "foo.*",
        "{{left(1,1)}}.{{split(1,-)}}.{{partition(3,1)}}.{{slicefromright(1,2)}}",
    );
    assert_eq!(t.render(&["foo"], "foo"), "..1.");
}

#[test]
fn fnv1a_matches_go() {
    // Standard FNV-1a 32 vectors, and values nats-server's partitions depend on.
    assert_eq!(fnv1a32(b"", FNV_OFFSET), 0x811c_9dc5);
    assert_eq!(fnv1a32(b"a", FNV_OFFSET), 0xe40c_292c);
    assert_eq!(fnv1a32(b"foobar", FNV_OFFSET), 0xbf9c_f968);
    assert_eq!(fnv1a32(b"foo", FNV_OFFSET), 2_851_307_223);
    assert_eq!(
        fnv1a32(b"bar", fnv1a32(b"foo", FNV_OFFSET)),
        fnv1a32(b"foobar", FNV_OFFSET)
    );
}

#[test]
fn error_texts_match_nats_server() {
    const IDX: &str = "invalid mapping destination: wildcard index out of range in ";
    const BAD_ARG: &str =
        "invalid mapping destination: function argument is invalid or in the wrong format in ";
    err_is(
        "foo.*",
        "bar.{{wildcard(2)}}",
        &format!("{IDX}{{{{wildcard(2)}}}}: [2]"),
    );
    err_is("foo.*", "bar.$2", &format!("{IDX}$2: [2]"));
    err_is("foo.>", "$1.>", &format!("{IDX}$1: [1]"));
    err_is(
        "foo.*",
        "{{partition(3,2)}}",
        &format!("{IDX}{{{{partition(3,2)}}}}: [2]"),
    );
    err_is(
        "foo",
        "bar.{{wildcard(1)}}",
        &format!("{IDX}{{{{wildcard(1)}}}}"),
    );
    err_is(
        "foo",
        "bar.{{split(1,-)}}",
        &format!("{IDX}{{{{split(1,-)}}}}"),
    );
    err_is(
        "foo.*",
        "bar.{{unimplemented(1)}}",
        "invalid mapping destination: unknown function in {{unimplemented(1)}}",
    );
    err_is(
        "foo.*",
        "bar.{{WILDCARD(1)}}",
        "invalid mapping destination: unknown function in {{WILDCARD(1)}}",
    );
    err_is(
        "foo.*",
        "bar.{{LEFT(1,2)}}",
        "invalid mapping destination: unknown function in {{LEFT(1,2)}}",
    );
    err_is(
        "foo.*",
        "bar.{{xwildcard(1)}}",
        "invalid mapping destination: unknown function in {{xwildcard(1)}}",
    );
    err_is(
        "foo.*",
        "bar.{{bad(1)}}.a b",
        "invalid mapping destination: unknown function in {{bad(1)}}",
    );
    err_is(
        "foo.*",
        "bar.{{partition()}}",
        &format!("{BAD_ARG}{{{{partition()}}}}"),
    );
    err_is(
        "foo.*",
        "bar.{{left(1, x)}}",
        &format!("{BAD_ARG}{{{{left(1, x)}}}}"),
    );
    err_is(
        "foo.*",
        "bar.{{split(1,x y)}}",
        &format!("{BAD_ARG}{{{{split(1,x y)}}}}"),
    );
    err_is(
        "foo.*",
        "{{left(1,99999999999)}}",
        &format!("{BAD_ARG}{{{{left(1,99999999999)}}}}"),
    );
    err_is(
        "foo.*",
        "bar.{{wildcard(1,2)}}",
        "invalid mapping destination: too many arguments passed to the function in {{wildcard(1,2)}}",
    );
    err_is(
        "foo.*",
        "bar.{{left(1,2,3)}}",
        "invalid mapping destination: too many arguments passed to the function in {{left(1,2,3)}}",
    );
    err_is(
        "foo.*",
        "bar.{{random(1,2)}}",
        "invalid mapping destination: not enough arguments passed to the function in {{random(1,2)}}",
    );
    err_is(
        "foo.*",
        "bar.{{wildcard()}}",
        "invalid mapping destination: not enough arguments passed to the function in {{wildcard()}}",
    );
    err_is("foo.*", "bar.*", "invalid subject");
    err_is("foo.>", "bar.baz", "invalid subject");
    err_is("foo..", "bar", "invalid subject");
    err_is("fo o", "bar", "invalid subject");
    err_is(
        "foo.*",
        "bar. x",
        "invalid mapping destination: invalid transform",
    );
    err_is(
        "foo.*",
        "bar..x",
        "invalid mapping destination: invalid transform",
    );
    err_is(
        "foo.>",
        "bar.>.x",
        "invalid mapping destination: invalid transform in x",
    );
    // Accepted by nats-server 2.15.1.
    for dest in [
        "bar.{{left(1,2)}}",
        "bar.{{right(1,2)}}",
        "bar.{{ wildcard(1)  }}",
        "bar.{{wildcard( 1)}}",
        "bar.{{wildcard(1)}}x",
        "{{split(1, )}}",
        "{{partition(-3,1)}}",
        "{{partition(-99999999999,1)}}",
        "{{wildcard(+1)}}",
        "$+1",
        "$x.$1",
        "$0",
        "$-1",
        "{{wildcard(1)}}.{{",
        "bar.{{ wildcard(1)}}.{{ Wildcard  (1) }}",
    ] {
        ok("foo.*", dest);
    }
    ok("foo", "bar.{{partition(3,2)}}");
    ok("foo", "");
}

#[test]
fn runtime_results_match_nats_server() {
    // Published through a real nats-server 2.15.1 with these mappings.
    maps("p.*", "pp.{{partition(10)}}", "p.foo", "pp.5");
    maps("p.*", "pp.{{partition(10)}}", "p.baz", "pp.0");
    maps(
        "pn.*",
        "pn2.{{partition(-3,1)}}",
        "pn.foo",
        "pn2.2851307223",
    );
    maps("q.*.*", "qq.{{partition(7,2,1)}}", "q.a.b", "qq.6");
    maps("q.*.*", "qq.{{partition(7,2,1)}}", "q.b.a", "qq.2");
    maps("s.*", "ss.{{split(1,-)}}", "s.a--b-", "ss.a.b");
    maps("s.*", "ss.{{split(1,-)}}", "s.-a", "ss.a");
    maps("se.*", "sse.{{split(1,)}}", "se.héllo", "sse.h.é.l.l.o");
    maps("l.*", "ll.{{left(1,2)}}", "l.ab", "ll.ab");
    maps("z.*", "zz.$0.$-1", "z.x", "zz.z.z");
    maps(
        "w.*",
        "ww.{{ Wildcard (1) }}.{{wildcard(1)}}x",
        "w.x",
        "ww.x.{{wildcard(1)}}x",
    );
    maps("t.*.>", "tt.$1.>", "t.a.b.c", "tt.a.b.c");
    maps(
        "sl.*",
        "sl2.{{slicefromleft(1,2)}}.{{slicefromright(1,2)}}",
        "sl.abcde",
        "sl2.ab.cd.e.a.bc.de",
    );
    // Go's split joining leaves an empty token after two leading separators.
    maps("s.*", "ss.{{split(1,-)}}", "s.--abc", "ss..abc");
}

#[test]
fn matching_and_accessors() {
    let t = ok("foo.*.>", "x.$1.>");
    assert_eq!((t.src(), t.dest()), ("foo.*.>", "x.$1.>"));
    assert_eq!(t.apply("foo.a.b.c").as_deref(), Some("x.a.b.c"));
    assert_eq!(t.apply("foo.a"), None);
    assert_eq!(t.apply("bar.a.b"), None);
    assert_eq!(t.apply("foo.*.b"), None);
    assert_eq!(t.apply("foo.a.>"), None);
    assert_eq!(t.apply("foo..b"), None);
    let e = ok("", "");
    assert_eq!(e.src(), "");
    assert_eq!(e.apply("any.thing").as_deref(), Some("any.thing"));
    let id = ok("a.*", "");
    assert_eq!(id.apply("a.b").as_deref(), Some("a.b"));
    assert_eq!(id.apply("b.b"), None);
    // Literal source tokens that merely contain wildcard characters.
    maps("a*.b>", "c", "a*.b>", "c");
    // Long subjects (more than the 32-token stack buffer).
    let long: Vec<String> = (0..100).map(|i| i.to_string()).collect();
    let long = long.join(".");
    maps(">", "pre.>", &long, &format!("pre.{long}"));
    maps("0.*.>", "$1.>", &long, &long["0.".len()..]);
    assert_eq!(ok("*", "x").apply(&long), None);
    // Bucket count that wraps through int32 like Go's conversion.
    ok("foo.*", "{{partition(-99999999999,1)}}")
        .apply("foo.x")
        .expect("match");
    assert_eq!(
        ok("foo.*", &format!("${}", i64::MIN))
            .apply("foo.x")
            .as_deref(),
        Some("foo")
    );
}

#[test]
fn multibyte_cuts_never_panic() {
    // Go cuts bytes; a cut through a character comes out as U+FFFD here.
    maps("*", "{{left(1,2)}}", "é", "é");
    maps("*", "{{left(1,1)}}", "é", "\u{FFFD}");
    maps("*", "{{left(1,1)}}", "éa", "\u{FFFD}");
    maps("*", "{{splitfromleft(1,1)}}", "é", "\u{FFFD}.\u{FFFD}");
    maps("*", "{{slicefromright(1,2)}}", "aéb", "a\u{FFFD}.\u{FFFD}b");
    maps("*", "{{right(1,3)}}", "日本", "本");
}

#[test]
fn apply_never_panics() {
    let dests = [
        (
            "*.*",
            "{{split(2,-)}}.{{splitfromleft(1,2)}}.{{splitfromright(2,1)}}",
        ),
        (
            "*.*",
            "{{slicefromleft(1,2)}}.{{slicefromright(2,3)}}.{{left(1,1)}}.{{right(2,2)}}",
        ),
        (
            "*.*",
            "{{partition(3,1,2)}}.{{partition(5)}}.{{random(4)}}.$0.$2",
        ),
        ("*.>", "{{split(1,)}}.$1.>"),
        (">", ">"),
        (">", "x.>"),
        ("a.>", ""),
        ("*", "{{partition(0)}}.{{random(0)}}.{{partition(-1,1)}}"),
    ];
    let mut samples: Vec<String> = [
        "",
        ".",
        "..",
        ">",
        "*",
        "a.>",
        "a.*",
        " ",
        "a b",
        "a.b",
        "a.b.",
        ".a.b",
        "é.日本",
        "a.-é-",
        "--.--",
        "\u{0}",
        "a.\u{FFFF}",
        "x.y.z.w",
        "a..b",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    samples.push("a.".repeat(5000));
    samples.push(format!("{}b", "a.".repeat(5000)));
    samples.push("é".repeat(3000));
    let alphabet = ['a', '.', '*', '>', '-', 'é', '日', ' '];
    let mut x: u32 = 0x1234_5678;
    for _ in 0..2000 {
        let mut s = String::new();
        for _ in 0..(x % 12) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            s.push(alphabet[(x % alphabet.len() as u32) as usize]);
        }
        samples.push(s);
    }
    for (src, dest) in dests {
        let t = ok(src, dest);
        for s in &samples {
            let _ = t.apply(s);
        }
    }
}
