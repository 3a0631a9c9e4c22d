"""nats-py over TLS against natsd (`--tls*` flags): INFO in the clear, then the handshake.

Certificates are made with the openssl CLI in a temp directory (a CA, a server certificate for
localhost/127.0.0.1, a client certificate from the same CA).
"""
import asyncio
import ssl
import subprocess

import nats
import pytest

from test_nats_py import bounded, connect


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
            "ca.pem", "-days", "2", "-subj", "/CN=natsd-test-ca", cwd=d)
    (d / "server.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    (d / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for name in ("server", "client"):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
                f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile",
                f"{name}.ext", cwd=d)
    return d


def context(pki, cert=False):
    ctx = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    if cert:
        ctx.load_cert_chain(str(pki / "client.pem"), str(pki / "client.key"))
    return ctx


async def round_trip(nc):
    sub = await nc.subscribe("tls.py")
    await nc.publish("tls.py", b"hello")
    msg = await sub.next_msg(timeout=5)
    assert msg.data == b"hello"

    async def handler(m):
        await m.respond(b"pong")

    await nc.subscribe("tls.svc", cb=handler)
    await nc.flush()
    reply = await nc.request("tls.svc", b"ping", timeout=5)
    assert reply.data == b"pong"


@pytest.mark.asyncio
@bounded(20)
async def test_tls_pub_sub_and_request(start_server, pki):
    s = start_server("--tls", "--tlscert", str(pki / "server.pem"), "--tlskey",
                     str(pki / "server.key"))
    nc = await connect(s.url, tls=context(pki), tls_hostname="localhost")
    try:
        assert nc._server_info.get("tls_required") is True
        await round_trip(nc)
    finally:
        await nc.close()


@pytest.mark.asyncio
@bounded(20)
async def test_tlsverify_wants_a_client_certificate(start_server, pki):
    s = start_server("-tlsverify", f"-tlscert={pki / 'server.pem'}", "-tlskey",
                     str(pki / "server.key"), "-tlscacert", str(pki / "ca.pem"))
    with pytest.raises(Exception):
        nc = await connect(s.url, tls=context(pki), tls_hostname="localhost")
        await nc.close()
    nc = await connect(s.url, tls=context(pki, cert=True), tls_hostname="localhost")
    try:
        await round_trip(nc)
    finally:
        await nc.close()
