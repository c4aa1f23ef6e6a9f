#!/usr/bin/env python3
"""A DNS-over-HTTP/3 client on aioquic's HTTP/3 stack (PyPI), for tests/integration/transport/doh3.rs.

Usage: doh3_client.py HOST PORT CA_FILE SERVER_NAME REQUEST...
where each REQUEST is METHOD:PATH[:NAME[:CONTENT_TYPE]]: with a NAME, a query for NAME A with
message ID 0 is sent (POST: as the body; GET: as ?dns=BASE64URL appended to PATH). All requests
go on one connection, one stream each. Prints one JSON object per request:
{"status": 200, "headers": {...}, "body_hex": "..."}.
"""
import asyncio
import base64
import json
import ssl
import struct
import sys

from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration


def query(name):
    msg = struct.pack(">HHHHHH", 0, 0x0100, 1, 0, 0, 0)
    for label in name.rstrip(".").split("."):
        msg += bytes([len(label)]) + label.encode()
    return msg + b"\x00" + struct.pack(">HH", 1, 1)


class Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.responses = {}
        self.waiters = {}

    def quic_event_received(self, event):
        for e in self.h3.handle_event(event):
            if not isinstance(e, (HeadersReceived, DataReceived)):
                continue
            r = self.responses.setdefault(e.stream_id, {"headers": {}, "body": b""})
            if isinstance(e, HeadersReceived):
                r["headers"] = {k.decode(): v.decode() for k, v in e.headers}
            else:
                r["body"] += e.data
            if e.stream_ended and e.stream_id in self.waiters:
                self.waiters.pop(e.stream_id).set_result(r)

    async def request(self, method, path, body, content_type, authority):
        sid = self._quic.get_next_available_stream_id()
        headers = [(b":method", method.encode()), (b":scheme", b"https"),
                   (b":authority", authority.encode()), (b":path", path.encode())]
        if content_type:
            headers.append((b"content-type", content_type.encode()))
        self.h3.send_headers(sid, headers, end_stream=body is None)
        if body is not None:
            self.h3.send_data(sid, body, end_stream=True)
        fut = asyncio.get_running_loop().create_future()
        self.waiters[sid] = fut
        self.transmit()
        return await asyncio.wait_for(fut, 5)


async def main():
    host, port, ca, server_name = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name=server_name)
    config.load_verify_locations(ca)
    config.verify_mode = ssl.CERT_REQUIRED
    async with connect(host, port, configuration=config, create_protocol=Client) as client:
        for spec in sys.argv[5:]:
            parts = spec.split(":")
            method, path = parts[0], parts[1]
            name = parts[2] if len(parts) > 2 and parts[2] else None
            content_type = parts[3] if len(parts) > 3 else ("application/dns-message" if method == "POST" else None)
            body = None
            if name and method == "POST":
                body = query(name)
            elif name:
                dns = base64.urlsafe_b64encode(query(name)).decode().rstrip("=")
                path += ("&" if "?" in path else "?") + "dns=" + dns
            elif method == "POST":
                body = b"not dns"
            r = await client.request(method, path, body, content_type, server_name)
            print(json.dumps({"status": int(r["headers"].get(":status", "0")), "headers": r["headers"],
                              "body_hex": r["body"].hex()}), flush=True)


asyncio.run(main())
