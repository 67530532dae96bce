"""A TCP round-robin balancer in front of the webhook replicas.

In a cluster the API server reaches the webhook through a Service, and
kube-proxy spreads connections over the ready endpoints. Endpoints may not be
loopback addresses and the test control plane runs no kube-proxy, so this
process stands in for that hop: each new connection goes to the next replica
that accepts it, bytes pass through untouched (TLS ends at the replica).

    python tools/controlplane/balancer.py --listen 127.0.0.1:PORT --backend 127.0.0.1:A --backend 127.0.0.1:B
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import signal


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        try:
            writer.close()
        except RuntimeError:
            pass


class Balancer:
    def __init__(self, backends: list[tuple[str, int]]) -> None:
        self.backends = backends
        self._next = itertools.cycle(range(len(backends)))

    async def handle(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        for _ in range(len(self.backends)):
            host, port = self.backends[next(self._next)]
            try:
                backend_reader, backend_writer = await asyncio.wait_for(asyncio.open_connection(host, port), 2)
                break
            except (OSError, asyncio.TimeoutError):
                continue
        else:  # no replica accepts: the API server sees a refused call (failurePolicy decides)
            client_writer.close()
            return
        await asyncio.gather(_pipe(client_reader, backend_writer), _pipe(backend_reader, client_writer))


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


async def _main(listen: tuple[str, int], backends: list[tuple[str, int]]) -> None:
    balancer = Balancer(backends)
    server = await asyncio.start_server(balancer.handle, *listen)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", required=True, type=_address)
    parser.add_argument("--backend", action="append", required=True, type=_address)
    args = parser.parse_args()
    asyncio.run(_main(args.listen, args.backend))


if __name__ == "__main__":
    main()
