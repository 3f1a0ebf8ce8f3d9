"""`/metrics`, `/healthz` and `/readyz` of the GPU node (aiohttp, on the background loop)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest


@dataclass
class Health:
    # The Kafka loop stamps `beat` every iteration; a loop stuck longer than
    # `stuck_after_s` (a hung model call, a deadlock) makes /healthz fail so the
    # orchestrator restarts the node before Kafka evicts it from the group.
    stuck_after_s: float
    beat: float = 0.0
    ready: bool = False
    reason: str = "starting"

    def alive(self) -> bool:
        return self.beat == 0.0 or time.monotonic() - self.beat < self.stuck_after_s


async def start_http(
    host: str, port: int, registry: CollectorRegistry, health: Health
) -> tuple[web.AppRunner, int]:
    async def metrics(_: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    async def healthz(_: web.Request) -> web.Response:
        if health.alive():
            return web.json_response({"status": "ok"})
        return web.json_response({"status": "stuck"}, status=503)

    async def readyz(_: web.Request) -> web.Response:
        if health.ready and health.alive():
            return web.json_response({"status": "ready"})
        return web.json_response({"status": "not ready", "reason": health.reason}, status=503)

    app = web.Application()
    app.add_routes(
        [web.get("/metrics", metrics), web.get("/healthz", healthz), web.get("/readyz", readyz)]
    )
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    # Port 0 asks the OS for a free port; report the one actually bound.
    addresses = runner.addresses
    return runner, int(addresses[0][1]) if addresses else port
