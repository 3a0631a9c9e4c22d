"""nats-py's JetStream and KV APIs, unchanged, against a three-node natsd JetStream cluster
with three replicas: streams, pull consumers and KV buckets created with `num_replicas=3`,
used from clients of different nodes, and still working after the stream's leader is gone.

The same file passes against nats-server (NATSD_BIN=/tmp/natsd-py-venv/bin/nats-server).
"""
import asyncio
import socket
import time

import nats
import pytest
from nats.js.api import StreamConfig
from nats.js.errors import APIError

from conftest import Server
from test_nats_py import bounded


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def js_cluster(request, tmp_path):
    """Three natsd nodes in cluster C1, JetStream on each; stopped at teardown."""
    routes = [free_port() for _ in range(3)]
    servers = []
    request.node._natsd_servers = servers
    for i in range(3):
        peers = ", ".join(f'"nats-route://127.0.0.1:{p}"' for j, p in enumerate(routes) if j != i)
        conf = tmp_path / f"n{i}.conf"
        conf.write_text(
            f'server_name: n{i}\njetstream {{ store_dir: "{tmp_path / f"n{i}"}" }}\n'
            f"cluster {{ name: C1, listen: 127.0.0.1:{routes[i]}, routes: [{peers}] }}\n"
        )
        servers.append(Server(["-c", str(conf)]).start())
    yield servers
    for s in servers:
        s.stop()
        s.cleanup()


async def cluster_client(servers, **kw):
    return await nats.connect(
        servers=[s.url for s in servers],
        connect_timeout=2,
        reconnect_time_wait=0.2,
        max_reconnect_attempts=-1,
        **kw,
    )


async def until(what, f, seconds=20):
    """Retries `f` (an async callable) until it returns without an error; its result."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return await f()
        except (APIError, nats.errors.TimeoutError, nats.js.errors.NoStreamResponseError) as e:
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: {e!r}") from e
            await asyncio.sleep(0.2)


@bounded(90)
async def test_r3_stream_kv_and_a_lost_leader(js_cluster):
    nc = await cluster_client(js_cluster[:1])
    js = nc.jetstream(timeout=3)
    cfg = StreamConfig(name="PYC", subjects=["pyc.>"], num_replicas=3)
    info = await until("stream create", lambda: js.add_stream(cfg))
    assert info.config.num_replicas == 3
    for i in range(20):
        ack = await until("publish", lambda: js.publish("pyc.a", f"m{i}".encode()))
    assert ack.seq == 20

    # A client of another node pulls and acknowledges through its own node.
    far = await cluster_client(js_cluster[2:])
    fjs = far.jetstream(timeout=3)
    sub = await until("pull subscribe", lambda: fjs.pull_subscribe("pyc.a", "dur"))
    msgs = await sub.fetch(5, timeout=3)
    assert [m.data for m in msgs] == [f"m{i}".encode() for i in range(5)]
    for m in msgs:
        await m.ack_sync()

    # KV with three replicas.
    kv = await until("kv create", lambda: js.create_key_value(bucket="pyckv", replicas=3))
    await kv.put("k", b"v1")
    rev = await kv.put("k", b"v2")
    e = await fjs.key_value("pyckv")
    got = await e.get("k")
    assert (got.value, got.revision) == (b"v2", rev)

    # The stream's leader goes; the others elect one and nothing acknowledged is lost.
    deadline = time.monotonic() + 20
    while True:
        info = await js.stream_info("PYC")
        if info.cluster and info.cluster.leader and len(info.cluster.replicas or []) == 2:
            break
        assert time.monotonic() < deadline, info
        await asyncio.sleep(0.2)
    leader = next(s for i, s in enumerate(js_cluster) if f"n{i}" == info.cluster.leader)
    leader.stop()
    alive = [s for s in js_cluster if s is not leader]
    nc2 = await cluster_client(alive)
    js2 = nc2.jetstream(timeout=3)
    ack = await until("publish after the leader went", lambda: js2.publish("pyc.a", b"after"))
    assert ack.seq == 21
    info = await until("stream info", lambda: js2.stream_info("PYC"))
    assert info.state.messages == 21
    assert info.cluster.leader != f"n{js_cluster.index(leader)}"
    sub2 = await until("pull subscribe", lambda: js2.pull_subscribe("pyc.a", "dur"))
    rest = await until("fetch", lambda: sub2.fetch(16, timeout=3))
    assert len(rest) >= 1 and rest[0].data == b"m5"
    for c in (nc, far, nc2):
        await c.close()
