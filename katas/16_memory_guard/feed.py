"""The feed's client: GET /feed, whose body is a stream of records, each read straight into a buffer of its own."""
from __future__ import annotations

import asyncio
import socket
import struct

HEADER = struct.Struct("!I")  # each record: its length (4 bytes, big-endian), then its bytes


async def read_records(host: str, port: int):
    """Every record of the feed, as it arrives (a bytearray each), until the feed ends."""
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        await loop.sock_connect(sock, (host, port))
        await loop.sock_sendall(sock, b"GET /feed HTTP/1.0\r\nHost: feed\r\n\r\n")
        head = b""
        while b"\r\n\r\n" not in head:  # the status line and the headers
            got = await loop.sock_recv(sock, 1)
            if not got:
                raise ConnectionError("the feed closed before its headers ended")
            head += got
        if b" 200 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError(f"the feed answered {head.splitlines()[0]!r}")
        while True:
            size = await _fill(loop, sock, bytearray(HEADER.size))
            record = None if size is None else await _fill(loop, sock, bytearray(HEADER.unpack(size)[0]))
            if record is None:
                return  # the feed ended
            yield record
    finally:
        sock.close()


async def _fill(loop: asyncio.AbstractEventLoop, sock: socket.socket, buffer: bytearray) -> bytearray | None:
    """`buffer`, filled from the socket; None if the stream ends first."""
    view, got = memoryview(buffer), 0
    while got < len(buffer):
        n = await loop.sock_recv_into(sock, view[got:])
        if n == 0:
            return None
        got += n
    return buffer
