"""nats-py (the official Python client), unchanged, against natsd.

Every test gets a fresh server (see conftest.py) and is bounded by asyncio.wait_for, so a hang
shows up as a TimeoutError naming the test rather than a stuck CI job. Every connect is bounded
too: no reconnects, 1-2 s connect timeout.
"""
import asyncio
import functools

import nats
import pytest
from nats.errors import MaxPayloadError, NoRespondersError

MAX_PAYLOAD = 1048576  # nats-server's default, advertised in INFO


def bounded(seconds):
    """Fail the test with asyncio.TimeoutError if its body runs longer than `seconds`."""

    def deco(fn):
        @functools.wraps(fn)
        async def wrapper(*args, **kwargs):
            return await asyncio.wait_for(fn(*args, **kwargs), seconds)

        return wrapper

    return deco


async def connect(url, errors=None, **kw):
    """nats.connect with no reconnects and short timeouts; client-side errors go to `errors`."""

    async def error_cb(e):
        if errors is not None:
            errors.append(e)

    opts = dict(
        allow_reconnect=False,
        # Not 0: nats-py treats 0 as "no limit" for the initial TCP connect and would retry a
        # refused port forever. 1 = give up after 2 attempts (NoServersError).
        max_reconnect_attempts=1,
        connect_timeout=2,
        reconnect_time_wait=0.1,
        error_cb=error_cb,
    )
    opts.update(kw)
    return await nats.connect(url, **opts)


async def collect(sub, n, timeout=5.0):
    """Read exactly n messages from a (callback-less) subscription."""
    return [await sub.next_msg(timeout=timeout) for _ in range(n)]


async def assert_nothing_more(sub, wait=0.2):
    with pytest.raises(nats.errors.TimeoutError):
        msg = await sub.next_msg(timeout=wait)
        pytest.fail(f"unexpected message {msg.subject} {msg.data!r}")


# --------------------------------------------------------------------------- basics


@bounded(10)
async def test_connect_sees_server_info(server):
    nc = await connect(server.url)
    try:
        assert nc.is_connected
        assert nc.max_payload == MAX_PAYLOAD
        info = nc._server_info  # the INFO the client parsed
        assert info["headers"] is True
        assert info["max_payload"] == MAX_PAYLOAD
        assert info["port"] == server.port
        assert "auth_required" not in info
        assert isinstance(nc.client_id, int)
        await nc.flush(timeout=2)  # PING/PONG round trip
        rtt = await nc.rtt()
        assert rtt >= 0
    finally:
        await nc.close()
    assert nc.is_closed


@bounded(10)
async def test_publish_subscribe(server):
    sub_nc = await connect(server.url)
    pub_nc = await connect(server.url)
    try:
        sub = await sub_nc.subscribe("greet.joe")
        await sub_nc.flush()  # the SUB is registered on the server before we publish
        await pub_nc.publish("greet.joe", b"hello")
        await pub_nc.publish("greet.joe", b"")  # empty payload
        await pub_nc.publish("greet.joe", b"with reply", reply="my.reply")
        await pub_nc.publish("greet.sue", b"not for joe")
        await pub_nc.flush()
        m1, m2, m3 = await collect(sub, 3)
        assert (m1.subject, m1.data, m1.reply) == ("greet.joe", b"hello", "")
        assert (m2.subject, m2.data) == ("greet.joe", b"")
        assert (m3.subject, m3.data, m3.reply) == ("greet.joe", b"with reply", "my.reply")
        await assert_nothing_more(sub)
    finally:
        await sub_nc.close()
        await pub_nc.close()


@bounded(10)
async def test_callback_subscription_and_unsubscribe(server):
    nc = await connect(server.url)
    try:
        got = []
        done = asyncio.Event()

        async def cb(msg):
            got.append(msg.data)
            if len(got) == 3:
                done.set()

        sub = await nc.subscribe("cb.subject", cb=cb)
        for i in range(3):
            await nc.publish("cb.subject", str(i).encode())
        await asyncio.wait_for(done.wait(), 5)
        assert got == [b"0", b"1", b"2"]

        await sub.unsubscribe()
        await nc.publish("cb.subject", b"after unsub")
        await nc.flush()
        await asyncio.sleep(0.1)
        assert got == [b"0", b"1", b"2"]
    finally:
        await nc.close()


@bounded(10)
async def test_auto_unsubscribe_max_msgs(server):
    nc = await connect(server.url)
    try:
        sub = await nc.subscribe("auto", max_msgs=2)  # SUB + UNSUB <sid> 2
        for i in range(5):
            await nc.publish("auto", str(i).encode())
        await nc.flush()
        msgs = await collect(sub, 2)
        assert [m.data for m in msgs] == [b"0", b"1"]
        # The server stopped delivering after 2 (a flush round trip later, nothing pending).
        await nc.flush()
        await asyncio.sleep(0.1)
        assert sub.pending_msgs == 0
    finally:
        await nc.close()


@bounded(10)
async def test_no_echo(server):
    nc = await connect(server.url, no_echo=True)
    other = await connect(server.url)
    try:
        own = await nc.subscribe("echo.test")
        theirs = await other.subscribe("echo.test")
        await nc.flush()
        await other.flush()
        await nc.publish("echo.test", b"mine")
        await nc.flush()
        (m,) = await collect(theirs, 1)
        assert m.data == b"mine"
        await assert_nothing_more(own)
    finally:
        await nc.close()
        await other.close()


# --------------------------------------------------------------------------- wildcards


@bounded(10)
async def test_wildcards(server):
    sub_nc = await connect(server.url)
    pub_nc = await connect(server.url)
    try:
        star = await sub_nc.subscribe("foo.*")
        star_mid = await sub_nc.subscribe("a.*.c")
        gt = await sub_nc.subscribe("foo.>")
        full = await sub_nc.subscribe(">")
        await sub_nc.flush()

        for subject in ["foo", "foo.bar", "foo.bar.baz", "a.b.c", "a.b.c.d", "a.c"]:
            await pub_nc.publish(subject, subject.encode())
        await pub_nc.flush()

        # Subjects in MSG are the published ones, not the subscription's pattern.
        assert [m.subject for m in await collect(star, 1)] == ["foo.bar"]
        assert [m.subject for m in await collect(star_mid, 1)] == ["a.b.c"]
        assert [m.subject for m in await collect(gt, 2)] == ["foo.bar", "foo.bar.baz"]
        assert [m.subject for m in await collect(full, 6)] == [
            "foo", "foo.bar", "foo.bar.baz", "a.b.c", "a.b.c.d", "a.c",
        ]
        for s in (star, star_mid, gt):
            await assert_nothing_more(s, wait=0.1)
        await assert_nothing_more(full, wait=0.1)
    finally:
        await sub_nc.close()
        await pub_nc.close()


# --------------------------------------------------------------------------- queue groups


@bounded(15)
async def test_queue_group_each_message_once(server):
    n = 1000
    members = [await connect(server.url) for _ in range(3)]
    plain_nc = await connect(server.url)
    pub_nc = await connect(server.url)
    try:
        qsubs = [await m.subscribe("work", queue="workers") for m in members]
        plain = await plain_nc.subscribe("work")  # not in the group: gets everything
        other_group = await plain_nc.subscribe("work", queue="auditors")  # 1-member group
        for c in members + [plain_nc]:
            await c.flush()

        for i in range(n):
            await pub_nc.publish("work", str(i).encode())
        await pub_nc.flush()

        assert [m.data for m in await collect(plain, n)] == [str(i).encode() for i in range(n)]
        assert len(await collect(other_group, n)) == n

        # Drain the queue members until all n are accounted for.
        received = [[] for _ in qsubs]

        async def total():
            while sum(map(len, received)) < n:
                for i, s in enumerate(qsubs):
                    while s.pending_msgs:
                        received[i].append((await s.next_msg(timeout=1)).data)
                await asyncio.sleep(0.01)

        await asyncio.wait_for(total(), 10)
        await asyncio.sleep(0.2)  # any duplicate would have arrived by now
        for i, s in enumerate(qsubs):
            while s.pending_msgs:
                received[i].append((await s.next_msg(timeout=1)).data)

        everything = [d for r in received for d in r]
        assert len(everything) == n, "a queue message was delivered more than once"
        assert sorted(everything) == sorted(str(i).encode() for i in range(n))
        # Random distribution: with 1000 messages each member gets some.
        assert all(len(r) > 0 for r in received), [len(r) for r in received]
        # Per member, order is preserved.
        for r in received:
            nums = [int(d) for d in r]
            assert nums == sorted(nums)
    finally:
        for c in members + [plain_nc, pub_nc]:
            await c.close()


# --------------------------------------------------------------------------- request/reply


@bounded(10)
async def test_request_reply(server):
    responder = await connect(server.url)
    requester = await connect(server.url)
    try:

        async def handler(msg):
            await msg.respond(b"pong:" + msg.data)

        await responder.subscribe("svc.echo", cb=handler)
        await responder.flush()

        resp = await requester.request("svc.echo", b"ping", timeout=2)
        assert resp.data == b"pong:ping"
        # Several concurrent requests over the client's shared response inbox.
        resps = await asyncio.gather(
            *(requester.request("svc.echo", str(i).encode(), timeout=2) for i in range(20))
        )
        assert [r.data for r in resps] == [b"pong:" + str(i).encode() for i in range(20)]
        # Old-style request (one inbox subscription per request).
        resp = await requester.request("svc.echo", b"old", timeout=2, old_style=True)
        assert resp.data == b"pong:old"
    finally:
        await responder.close()
        await requester.close()


@bounded(10)
async def test_request_reply_queue_responders(server):
    a = await connect(server.url)
    b = await connect(server.url)
    requester = await connect(server.url)
    try:
        async def answer_a(msg):
            await msg.respond(b"a")

        async def answer_b(msg):
            await msg.respond(b"b")

        await a.subscribe("svc.q", queue="q", cb=answer_a)
        await b.subscribe("svc.q", queue="q", cb=answer_b)
        await a.flush()
        await b.flush()
        answers = [(await requester.request("svc.q", b"", timeout=2)).data for _ in range(50)]
        assert set(answers) <= {b"a", b"b"}
        assert len(answers) == 50
    finally:
        for c in (a, b, requester):
            await c.close()


@bounded(10)
async def test_request_no_responders(server):
    nc = await connect(server.url)
    try:
        # nats-py sends CONNECT with headers:true, no_responders:true; the server answers a
        # request nobody listens to with an HMSG carrying status 503.
        with pytest.raises(NoRespondersError):
            await nc.request("nobody.home", b"hi", timeout=2)
        with pytest.raises(NoRespondersError):
            await nc.request("nobody.home", b"hi", timeout=2, old_style=True)
        # The connection is still fine afterwards.
        assert nc.is_connected
        await nc.flush()
    finally:
        await nc.close()


@bounded(10)
async def test_request_timeout_with_silent_responder(server):
    nc = await connect(server.url)
    try:
        await nc.subscribe("silent")  # a subscriber that never answers: no 503, just a timeout
        await nc.flush()
        with pytest.raises(nats.errors.TimeoutError):
            await nc.request("silent", b"hi", timeout=0.3)
    finally:
        await nc.close()


# --------------------------------------------------------------------------- headers


@bounded(10)
async def test_headers_round_trip(server):
    nc = await connect(server.url)
    try:
        sub = await nc.subscribe("hdr")
        await nc.flush()
        headers = {"X-Trace": "abc-123", "Content-Type": "application/json", "Empty-Payload": "yes"}
        await nc.publish("hdr", b'{"k":1}', headers=headers)
        await nc.publish("hdr", b"", headers={"Only": "header"})
        await nc.publish("hdr", b"no headers")
        await nc.flush()
        m1, m2, m3 = await collect(sub, 3)
        assert m1.data == b'{"k":1}'
        assert m1.headers == headers
        assert m2.data == b"" and m2.headers == {"Only": "header"}
        assert m3.data == b"no headers" and not m3.headers
    finally:
        await nc.close()


@bounded(10)
async def test_headers_in_request_reply(server):
    nc = await connect(server.url)
    try:

        async def handler(msg):
            await msg.respond(msg.data[::-1])  # reply without headers

        async def handler_with_headers(msg):
            await nc.publish(msg.reply, b"ok", headers={"Echo": msg.headers["Q"]})

        await nc.subscribe("rev", cb=handler)
        await nc.subscribe("hdr.req", cb=handler_with_headers)
        await nc.flush()
        resp = await nc.request("rev", b"abc", timeout=2)
        assert resp.data == b"cba"
        resp = await nc.request("hdr.req", b"", timeout=2, headers={"Q": "question"})
        assert resp.data == b"ok"
        assert resp.headers == {"Echo": "question"}
    finally:
        await nc.close()


# --------------------------------------------------------------------------- flush / drain


@bounded(10)
async def test_flush(server):
    nc = await connect(server.url)
    try:
        sub = await nc.subscribe("fl")
        for i in range(100):
            await nc.publish("fl", b"x")
        await nc.flush(timeout=2)
        # After flush returned (PONG received), the server has processed all PUBs; since the
        # server writes our MSGs before the PONG, they have all arrived too.
        await asyncio.sleep(0)  # let the read loop dispatch
        assert len(await collect(sub, 100, timeout=1)) == 100
        for _ in range(10):
            await nc.flush(timeout=2)
    finally:
        await nc.close()


@bounded(15)
async def test_drain_connection(server):
    n = 200
    sub_nc = await connect(server.url, drain_timeout=5)
    pub_nc = await connect(server.url)
    try:
        got = []

        async def slow_cb(msg):
            await asyncio.sleep(0.001)
            got.append(int(msg.data))

        await sub_nc.subscribe("drain.me", cb=slow_cb)
        await sub_nc.flush()
        for i in range(n):
            await pub_nc.publish("drain.me", str(i).encode())
        await pub_nc.flush()
        await sub_nc.flush()  # all n MSGs have reached the client
        await sub_nc.drain()  # UNSUB, process what is pending, then close
        assert sub_nc.is_closed
        assert got == list(range(n))
        # After the drain the subscription is gone on the server: nobody receives this.
        with pytest.raises(NoRespondersError):
            await pub_nc.request("drain.me", b"x", timeout=2)
    finally:
        await sub_nc.close()
        await pub_nc.close()


@bounded(15)
async def test_drain_subscription(server):
    nc = await connect(server.url)
    try:
        got = []

        async def cb(msg):
            got.append(msg.data)

        sub = await nc.subscribe("drain.sub", cb=cb)
        keep = await nc.subscribe("drain.sub")
        await nc.flush()
        for i in range(50):
            await nc.publish("drain.sub", str(i).encode())
        await nc.flush()
        await asyncio.wait_for(sub.drain(), 5)
        await nc.publish("drain.sub", b"after")
        await nc.flush()
        assert len(await collect(keep, 51)) == 51
        assert len(got) == 50  # nothing after the drained subscription's UNSUB
        assert nc.is_connected
    finally:
        await nc.close()


# --------------------------------------------------------------------------- auth


@bounded(15)
async def test_user_password_auth(start_server):
    server = start_server("--user", "alice", "--pass", "s3cret")
    nc = await connect(server.url, user="alice", password="s3cret")
    try:
        assert nc._server_info.get("auth_required") is True
        sub = await nc.subscribe("auth.ok")
        await nc.publish("auth.ok", b"in")
        assert (await sub.next_msg(timeout=2)).data == b"in"
    finally:
        await nc.close()
    # Credentials in the URL work the same.
    nc = await connect(f"nats://alice:s3cret@127.0.0.1:{server.port}")
    await nc.flush()
    await nc.close()


async def assert_auth_rejected(url, **kw):
    errors = []
    # nats.errors.Error("nats: 'Authorization Violation'") (NoServersError is a subclass too).
    with pytest.raises(nats.errors.Error) as raised:
        nc = await connect(url, errors=errors, connect_timeout=1, **kw)
        await nc.close()
    # The server's -ERR 'Authorization Violation' reached the client, via the exception or
    # error_cb — not a timeout or a bare disconnect.
    seen = [raised.value] + errors
    assert any("authorization violation" in str(e).lower() for e in seen), seen


@bounded(15)
async def test_user_password_auth_rejected(start_server):
    server = start_server("--user", "alice", "--pass", "s3cret")
    await assert_auth_rejected(server.url, user="alice", password="wrong")
    await assert_auth_rejected(server.url, user="bob", password="s3cret")
    await assert_auth_rejected(server.url)  # no credentials at all
    await assert_auth_rejected(server.url, token="s3cret")
    # The server is still healthy for good clients.
    nc = await connect(server.url, user="alice", password="s3cret")
    await nc.flush()
    await nc.close()


@bounded(15)
async def test_token_auth(start_server):
    server = start_server("--auth", "t0ken-xyz")
    nc = await connect(server.url, token="t0ken-xyz")
    try:
        assert nc._server_info.get("auth_required") is True
        sub = await nc.subscribe("tok")
        await nc.publish("tok", b"in")
        assert (await sub.next_msg(timeout=2)).data == b"in"
    finally:
        await nc.close()
    nc = await connect(f"nats://t0ken-xyz@127.0.0.1:{server.port}")  # token in the URL
    await nc.flush()
    await nc.close()


@bounded(15)
async def test_token_auth_rejected(start_server):
    server = start_server("--auth", "t0ken-xyz")
    await assert_auth_rejected(server.url, token="wrong")
    await assert_auth_rejected(server.url)
    await assert_auth_rejected(server.url, user="t0ken-xyz", password="x")


# --------------------------------------------------------------------------- payload limits


@bounded(20)
async def test_payload_at_max_payload(server):
    nc = await connect(server.url)
    try:
        assert nc.max_payload == MAX_PAYLOAD
        sub = await nc.subscribe("big")
        await nc.flush()
        exact = bytes(i % 251 for i in range(MAX_PAYLOAD))  # exactly max_payload: allowed
        near = exact[: MAX_PAYLOAD - 1000]
        await nc.publish("big", exact)
        await nc.publish("big", near, headers={"H": "v"})  # HPUB total < max_payload
        await nc.flush(timeout=5)
        m1, m2 = await collect(sub, 2)
        assert len(m1.data) == MAX_PAYLOAD and m1.data == exact
        assert m2.data == near and m2.headers == {"H": "v"}
        assert nc.is_connected
    finally:
        await nc.close()


@bounded(15)
async def test_payload_over_max_payload_client_side(server):
    nc = await connect(server.url)
    try:
        # The limit nats-py enforces is the one the server advertised in INFO.
        assert nc._server_info["max_payload"] == MAX_PAYLOAD
        sub = await nc.subscribe("big")
        with pytest.raises(MaxPayloadError):
            await nc.publish("big", b"x" * (MAX_PAYLOAD + 1))
        # Nothing was sent; the connection is unaffected.
        await nc.publish("big", b"small")
        await nc.flush()
        (m,) = await collect(sub, 1)
        assert m.data == b"small"
        assert nc.is_connected
    finally:
        await nc.close()


@bounded(15)
async def test_payload_over_max_payload_server_enforces(server):
    """Bypass nats-py's client-side check to see the server's own enforcement:
    nats-server answers `-ERR 'Maximum Payload Violation'` and closes the connection."""
    errors = []
    closed = asyncio.Event()

    async def closed_cb():
        closed.set()

    nc = await connect(server.url, errors=errors, closed_cb=closed_cb)
    witness = await connect(server.url)
    try:
        wsub = await witness.subscribe("big")
        await witness.flush()
        nc._max_payload = 4 * MAX_PAYLOAD  # private attribute: disable the client-side check
        await nc.publish("big", b"x" * (MAX_PAYLOAD + 1))
        await asyncio.wait_for(closed.wait(), 5)
        assert nc.is_closed
        # nats-py stores a non-permission -ERR in last_error (error_cb is not called for it).
        # error_cb may additionally see ConnectionResetError: nats-server closes with the rest
        # of our payload unread, so the kernel answers with RST.
        assert "maximum payload violation" in str(nc.last_error).lower(), (nc.last_error, errors)
        await assert_nothing_more(wsub)  # the oversized message was not delivered
        await witness.flush()  # the server is fine
    finally:
        await nc.close()
        await witness.close()


# --------------------------------------------------------------------------- volume / order


@bounded(30)
async def test_many_messages_in_order(server):
    n = 10_000
    sub_nc = await connect(server.url)
    pub_nc = await connect(server.url)
    try:
        sub = await sub_nc.subscribe("seq")
        await sub_nc.flush()
        for i in range(n):
            await pub_nc.publish("seq", i.to_bytes(4, "big") + b"." * (i % 64))
        await pub_nc.flush(timeout=10)
        got = []
        while len(got) < n:
            m = await sub.next_msg(timeout=5)
            got.append(int.from_bytes(m.data[:4], "big"))
            assert len(m.data) == 4 + got[-1] % 64
        assert got == list(range(n))
        await assert_nothing_more(sub)
    finally:
        await sub_nc.close()
        await pub_nc.close()


@bounded(30)
async def test_many_messages_two_publishers_each_in_order(server):
    n = 5_000
    sub_nc = await connect(server.url)
    pubs = [await connect(server.url) for _ in range(2)]
    try:
        seen = {0: [], 1: []}
        done = asyncio.Event()

        async def cb(msg):
            p, i = msg.data.split(b":")
            seen[int(p)].append(int(i))
            if len(seen[0]) + len(seen[1]) == 2 * n:
                done.set()

        await sub_nc.subscribe("multi", cb=cb)
        await sub_nc.flush()

        async def produce(k):
            for i in range(n):
                await pubs[k].publish("multi", f"{k}:{i}".encode())
            await pubs[k].flush(timeout=10)

        await asyncio.gather(produce(0), produce(1))
        await asyncio.wait_for(done.wait(), 15)
        assert seen[0] == list(range(n))
        assert seen[1] == list(range(n))
    finally:
        await sub_nc.close()
        for p in pubs:
            await p.close()


# --------------------------------------------------------------------------- keepalive / monitoring


@bounded(15)
async def test_ping_pong_keepalive(server):
    # Client PINGs every second and gives up after 1 unanswered one; the server also PINGs the
    # client ~2 s after CONNECT (nats-py must answer). The connection must survive both.
    nc = await connect(server.url, ping_interval=1, max_outstanding_pings=1)
    try:
        sub = await nc.subscribe("alive")
        await asyncio.sleep(3.5)
        assert nc.is_connected
        assert nc.last_error is None
        await nc.publish("alive", b"still")
        assert (await sub.next_msg(timeout=2)).data == b"still"
    finally:
        await nc.close()


@bounded(15)
async def test_monitoring_sees_nats_py_client(start_server):
    import json
    import urllib.request

    server = start_server("-m", "-1")
    assert server.http_port, "no 'Starting http monitor on' line in the log"
    nc = await connect(server.url, name="py-interop")
    try:
        await nc.subscribe("mon.a")
        await nc.subscribe("mon.b", queue="q")
        await nc.publish("mon.a", b"hello")
        await nc.flush()

        def get(path):
            url = f"http://127.0.0.1:{server.http_port}{path}"
            with urllib.request.urlopen(url, timeout=2) as r:
                return json.loads(r.read())

        connz = await asyncio.to_thread(get, "/connz?subs=1")
        (conn,) = connz["connections"]
        assert conn["cid"] == nc.client_id
        assert conn["name"] == "py-interop"
        assert conn["lang"] == "python3"
        assert conn["version"] == nats.aio.client.__version__  # as sent in CONNECT
        assert conn["subscriptions"] == 2
        assert sorted(conn["subscriptions_list"]) == ["mon.a", "mon.b"]
        varz = await asyncio.to_thread(get, "/varz")
        assert varz["max_payload"] == MAX_PAYLOAD
        assert varz["connections"] == 1
    finally:
        await nc.close()
