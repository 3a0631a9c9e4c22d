"""nats-py's JetStream and KV APIs, unchanged, against natsd started with `-js -sd <tmp>`.

The same file passes against nats-server 2.9 (NATSD_BIN=$(which nats-server)).
"""
import asyncio

import nats
import pytest
from nats.js.errors import KeyNotFoundError

from test_nats_py import bounded, connect


@pytest.fixture
def js_server(start_server, tmp_path):
    return start_server("-js", "-sd", str(tmp_path))


@bounded(20)
async def test_streams_pull_push_and_acks(js_server):
    nc = await connect(js_server.url)
    js = nc.jetstream()
    await js.add_stream(name="PY", subjects=["py.>"])
    for i in range(5):
        ack = await js.publish("py.a", f"m{i}".encode())
    assert (ack.stream, ack.seq) == ("PY", 5)
    ack = await js.publish("py.a", b"dup", headers={"Nats-Msg-Id": "x"})
    ack2 = await js.publish("py.a", b"dup", headers={"Nats-Msg-Id": "x"})
    assert ack2.duplicate and ack2.seq == ack.seq

    sub = await js.pull_subscribe("py.a", "dur")
    msgs = await sub.fetch(3, timeout=2)
    assert [m.data for m in msgs] == [b"m0", b"m1", b"m2"]
    assert msgs[0].metadata.num_pending == 5
    for m in msgs:
        await m.ack_sync()
    rest = await sub.fetch(10, timeout=1)
    assert len(rest) == 3

    got = []

    async def cb(m):
        got.append(m.data)
        await m.ack()

    await js.subscribe("py.a", cb=cb, durable="push", idle_heartbeat=1.0, flow_control=True)
    for _ in range(100):
        if len(got) >= 6:
            break
        await asyncio.sleep(0.05)
    assert len(got) == 6
    info = await js.stream_info("PY")
    assert info.state.messages == 6
    await js.delete_stream("PY")
    await nc.close()


@bounded(20)
async def test_key_value(js_server):
    nc = await connect(js_server.url)
    js = nc.jetstream()
    kv = await js.create_key_value(bucket="pyb", history=2)
    await kv.put("k", b"v1")
    rev = await kv.put("k", b"v2")
    e = await kv.get("k")
    assert (e.value, e.revision) == (b"v2", rev)
    await kv.delete("k")
    with pytest.raises(KeyNotFoundError):
        await kv.get("k")
    w = await kv.watchall()
    await kv.put("z", b"1")
    seen = None
    async for u in w:
        if u is None:
            continue
        if u.key == "z":
            seen = u.value
            break
    assert seen == b"1"
    assert await kv.keys() == ["z"]
    await nc.close()


@bounded(20)
async def test_account_limits(start_server, tmp_path):
    """As nats-py's upstream test_account_limits: an account's `jetstream { … }` limits are
    what js.account_info() reports, and streams/consumers beyond them are refused with
    nats-server 2.9.10's codes (10027, 10026)."""
    conf = tmp_path / "limits.conf"
    conf.write_text(
        f'jetstream {{ store_dir: "{tmp_path}" }}\n'
        "accounts { A { jetstream { max_mem: 64MB, max_file: 128MB, max_streams: 2,"
        " max_consumers: 1 }\n users [{user: a, password: a}] } }\n"
    )
    srv = start_server("-c", str(conf))
    nc = await connect(srv.url, user="a", password="a")
    try:
        js = nc.jetstream()
        info = await js.account_info()
        assert info.limits.max_memory == 64 * 1024 * 1024
        assert info.limits.max_storage == 128 * 1024 * 1024
        assert info.limits.max_streams == 2
        assert info.limits.max_consumers == 1
        assert info.limits.max_ack_pending == -1
        await js.add_stream(name="S1", subjects=["s1"])
        await js.add_stream(name="S2", subjects=["s2"])
        with pytest.raises(nats.js.errors.BadRequestError) as e:
            await js.add_stream(name="S3", subjects=["s3"])
        assert e.value.err_code == 10027
        assert e.value.description == "maximum number of streams reached"
        await js.add_consumer("S1", durable_name="d1", ack_policy="explicit")
        with pytest.raises(nats.js.errors.BadRequestError) as e:
            await js.add_consumer("S1", durable_name="d2", ack_policy="explicit")
        assert e.value.err_code == 10026
        info = await js.account_info()
        assert (info.streams, info.consumers) == (2, 1)
    finally:
        await nc.close()
