"""A TCP proxy that delays every reply: a slow Redis, for the tests that show no event
loop waits on the cluster tier. Bytes from the client go to the server at once; each
chunk the server sends back is held for the delay (in order) before the client gets it.
Run as a script, it listens on a free port of 127.0.0.1, prints the port, and serves until
stdin closes::

    $ python tests/delay_proxy.py 6379 50
    41234
"""

from __future__ import annotations

import asyncio
import os
import sys


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def deliver() -> None:
        loop = asyncio.get_running_loop()
        while True:
            due, data = await queue.get()
            if not data:
                break
            await asyncio.sleep(max(0.0, due - loop.time()))
            writer.write(data)
            await writer.drain()
        writer.close()

    task = asyncio.create_task(deliver())
    loop = asyncio.get_running_loop()
    try:
        while data := await reader.read(65536):
            queue.put_nowait((loop.time() + delay, data))
    finally:
        queue.put_nowait((0.0, b""))
        await task


async def serve(target: int, delay: float) -> None:
    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(
            _pipe(client_r, server_w, 0.0), _pipe(server_r, client_w, delay), return_exceptions=True
        )

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    # Done: the connections still open end with the process.
    os._exit(0)


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1]), float(sys.argv[2]) / 1000))
