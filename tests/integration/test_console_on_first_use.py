"""The console port listens from start-up but loads the admin API (uvicorn, Starlette,
prometheus-client: about 7 MiB) only when its first connection arrives. Each case runs a
broker in a fresh interpreter, so that what is imported is the broker's doing alone, and
talks to it over real sockets."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

ADMIN_MODULES = ["prometheus_client", "starlette", "uvicorn"]

PRELUDE = textwrap.dedent(
    """
    import asyncio, json, socket, sys
    from dovecote.app import BrokerApp
    from dovecote.config import BrokerSection, Config, with_ports

    ADMIN_MODULES = ["prometheus_client", "starlette", "uvicorn"]

    def loaded():
        return [m for m in ADMIN_MODULES if m in sys.modules]

    async def exchange(port, data):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(data)
            answer = await asyncio.wait_for(reader.read(), 30)
        except ConnectionResetError:  # closed unanswered, the socket's backlog reset
            answer = b""
        writer.close()
        return answer.decode("latin-1")

    async def http_get(port, path):
        request = f"GET {path} HTTP/1.1\\r\\nHost: localhost\\r\\nConnection: close\\r\\n\\r\\n"
        return await exchange(port, request.encode())

    def new_app():
        config = Config(broker=BrokerSection(persistent=False))
        return BrokerApp(with_ports(config, stomp=0, openwire=0, console=0))
    """
)


def run_case(body: str) -> dict[str, object]:
    """Run PRELUDE + ``body`` (which defines ``async def case()`` returning a dict)."""
    script = PRELUDE + textwrap.dedent(body) + "\nprint(json.dumps(asyncio.run(case())))\n"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    result["log"] = done.stderr
    return result


def test_the_admin_api_loads_at_the_first_request_and_then_answers() -> None:
    result = run_case(
        """
        async def case():
            app = new_app()
            await app.start()
            try:
                before = loaded()
                first = await http_get(app.console.port, "/api/broker")
                second = await http_get(app.console.port, "/metrics")
                return {"before": before, "after": loaded(),
                        "first": first, "second": second}
            finally:
                await app.stop()
        """
    )
    assert result["before"] == []
    assert result["after"] == ADMIN_MODULES
    first, second = str(result["first"]), str(result["second"])
    assert first.startswith("HTTP/1.1 200")
    assert json.loads(first.split("\r\n\r\n", 1)[1])["brokerName"] == "localhost"
    assert second.startswith("HTTP/1.1 200") and "dovecote_" in second


def test_an_unused_console_stops_with_the_broker_and_its_port_closes() -> None:
    result = run_case(
        """
        async def case():
            app = new_app()
            await app.start()
            port = app.console.port
            await app.stop()
            try:
                await asyncio.open_connection("127.0.0.1", port)
                refused = False
            except ConnectionRefusedError:
                refused = True
            return {"refused": refused, "after": loaded()}
        """
    )
    assert result == {"refused": True, "after": [], "log": result["log"]}


def test_without_its_modules_the_console_fails_alone_and_messaging_goes_on() -> None:
    result = run_case(
        """
        async def case():
            sys.modules["uvicorn"] = None  # as if it were not installed
            app = new_app()
            await app.start()
            try:
                console = await http_get(app.console.port, "/api/broker")
                stomp = await exchange(
                    app.stomp.port, b"CONNECT\\naccept-version:1.2\\nhost:x\\n\\n\\x00"
                    b"DISCONNECT\\nreceipt:bye\\n\\n\\x00"
                )
                return {"console": console, "stomp": stomp}
            finally:
                await app.stop()
        """
    )
    assert result["console"] == ""  # the connection closed unanswered
    assert str(result["stomp"]).startswith("CONNECTED\n")
    assert "receipt-id:bye" in str(result["stomp"])
    assert "the console on port" in str(result["log"]) and "cannot start" in str(result["log"])
