# SPDX-License-Identifier: LGPL-2.1-or-later
"""Helpers for hutch-proxy's credential brokering tests: HTTPS upstreams
on loopback with a test CA (python3-trustme), a proxy started with
secrets over --config-fd and its CA read from --ca-out-fd, and TLS clients
that go through a CONNECT. Every socket is bound to 127.0.0.1."""

import http.client
import http.server
import json
import os
import socket
import ssl
import threading

import proxyutil
import trustme


class _TlsServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class SecretEchoHandler(http.server.BaseHTTPRequestHandler):
    """/leak and /leak-cl echo the Authorization value (what the upstream
    received, so the real value) back in a header and in the body, the
    first chunked with the value split across chunk boundaries; /leak-big
    echoes it once per MiB of a 16 MiB body; everything else answers with
    a JSON echo of the request."""

    protocol_version = "HTTP/1.1"
    server_version = "upstream"

    def log_message(self, *args):
        pass

    def _respond(self):
        body = proxyutil.read_request_body(self)
        record = {
            "method": self.command,
            "path": self.path,
            "headers": [[k, v] for k, v in self.headers.items()],
            "body": body.decode("latin-1"),
        }
        with self.server.lock:
            self.server.requests.append(record)
        value = self.headers.get("Authorization", "").removeprefix("Bearer ").encode()
        if self.path.startswith("/leak-cl"):
            out = b"start " + value + b" middle " + value + b" end"
            self.wfile.write(
                b"HTTP/1.1 200 OK\r\nX-Leak: " + value + b"\r\nContent-Length: "
                + str(len(out)).encode() + b"\r\n\r\n" + out
            )
            return
        if self.path.startswith("/leak-big"):
            # 16 MiB, Content-Length framed, the value at an odd offset
            # in every MiB: the proxy's flow control and the masking's
            # boundaries at once (test_proxy_exchange.py).
            mib = 1 << 20
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (16 * mib))
            for i in range(16):
                filler = bytes([97 + i]) * (mib - len(value))
                at = 4093 * (i + 1)
                self.wfile.write(filler[:at] + value + filler[at:])
            return
        if self.path.startswith("/leak"):
            half = len(value) // 2
            chunks = [b"start " + value[:3], value[3:half], value[half:] + b" middle " + value[:1],
                      value[1:], b" end"]
            self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Leak: " + value
                             + b"\r\nTransfer-Encoding: chunked\r\n\r\n")
            self.wfile.flush()
            for c in chunks:
                if c:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(c), c))
                    self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            return
        out = json.dumps(record).encode()
        self.wfile.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
            + str(len(out)).encode() + b"\r\n\r\n" + (b"" if self.command == "HEAD" else out)
        )

    do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = _respond


class TlsUpstream:
    """An HTTPS echo server on 127.0.0.1 with a certificate from @ca for
    @names."""

    def __init__(self, ca, names):
        self.server = _TlsServer(("127.0.0.1", 0), SecretEchoHandler)
        self.server.lock = threading.Lock()
        self.server.requests = []
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert(*names).configure_cert(ctx)
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def requests(self):
        with self.server.lock:
            return list(self.server.requests)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class SecretProxy(proxyutil.Proxy):
    """hutch-proxy with a JSON document on --config-fd and the CA read
    from --ca-out-fd (which it writes before "ready")."""

    def __init__(self, args, config, tmp_path):
        cfg_r, cfg_w = os.pipe()
        ca_r, ca_w = os.pipe()
        data = json.dumps(config).encode()
        assert len(data) < 60000
        os.write(cfg_w, data)
        os.close(cfg_w)
        try:
            super().__init__(
                [*args, "--config-fd", str(cfg_r), "--ca-out-fd", str(ca_w)],
                extra_fds=(cfg_r, ca_w),
            )
        finally:
            os.close(cfg_r)
            os.close(ca_w)
        with os.fdopen(ca_r, "rb") as f:
            self.ca_pem = f.read()
        self.ca_path = tmp_path / "proxy-ca.pem"
        self.ca_path.write_bytes(self.ca_pem)


def client_context(cafile, alpn=("http/1.1",)):
    ctx = ssl.create_default_context(cafile=str(cafile))
    if alpn:
        ctx.set_alpn_protocols(list(alpn))
    return ctx


def tunnel(proxy, host, port, ctx):
    """An HTTPSConnection through @proxy's CONNECT to host:port."""
    conn = http.client.HTTPSConnection("127.0.0.1", proxy.port, context=ctx,
                                       timeout=proxyutil.TIMEOUT)
    conn.set_tunnel(host, port)
    return conn


def tls_through(proxy, host, port, ctx):
    """A raw TLS socket through a CONNECT (for certificates and ALPN)."""
    s = socket.create_connection(("127.0.0.1", proxy.port), timeout=proxyutil.TIMEOUT)
    s.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        data = s.recv(4096)
        assert data, "the proxy closed the connection"
        buf += data
    assert buf.split()[1] == b"200", buf
    return ctx.wrap_socket(s, server_hostname=host)


def make_ca():
    return trustme.CA()
