"""The console in a real browser (issue 31): Debian's Chromium driven by Playwright's
Python package, against a real broker process with users. Each test logs in (HTTP Basic,
as the browser's prompt would), works the pages as a user does, with the mouse or the
keyboard, and checks what the page shows and what the broker then holds; no page logs an
error to its console. One test takes screenshots of the main pages: into docs/console/ with
DOVECOTE_SCREENSHOTS=1 (to refresh the documentation), otherwise into its temporary directory."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from brokers import BrokerProcess, running_broker
from consolekit import CONSOLE_TOML, PASSWORDS, api
from networks import wait_for
from stompclient import Client

CHROMIUM = os.environ.get("DOVECOTE_CHROMIUM", "/usr/bin/chromium")
# Without these Chromium reaches for the network at start, which stalls on a closed one.
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
DOCS_SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "console"

sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright's package is missing")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if shutil.which(CHROMIUM) is None:
        pytest.skip(f"no Chromium at {CHROMIUM} (make system-deps installs Debian's chromium)")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(CONSOLE_TOML, workdir=tmp_path_factory.mktemp("browser")) as process:
        yield process


class Console:
    """A logged-in page on the console, and the errors its pages log."""

    def __init__(self, broker: BrokerProcess, page: Any) -> None:
        self.broker = broker
        self.page = page
        self.errors: list[str] = []
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))

    def open(self, path: str) -> Any:
        response = self.page.goto(f"http://127.0.0.1:{self.broker.console_port}{path}")
        assert response is not None and response.status == 200, path
        return self.page

    def confirm(self, text_part: str) -> None:
        dialog = self.page.locator("dialog#confirm")
        sync_api.expect(dialog).to_be_visible()
        sync_api.expect(dialog).to_contain_text(text_part)
        dialog.get_by_role("button", name="Confirm").click()

    def shows(self, result: str) -> None:
        """The result of the last action, once the page shows it (after a reload)."""
        sync_api.expect(self.page.locator("#result")).to_contain_text(result)


def _context(browser: Any, user: str | None) -> Any:
    credentials = None if user is None else {"username": user, "password": PASSWORDS[user]}
    return browser.new_context(
        http_credentials=credentials, viewport={"width": 1280, "height": 860}
    )


def log_in(broker: BrokerProcess, context: Any) -> Console:
    """The browser's login: /login asks, the context answers with its user's password,
    and the browser then sends it with every request to the console."""
    session = Console(broker, context.new_page())
    page = session.open("/login")
    sync_api.expect(page.locator("header a.login")).to_have_count(0)
    return session


@pytest.fixture
def console(browser: Any, broker: BrokerProcess) -> Iterator[Console]:
    context = _context(browser, "alice")
    session = log_in(broker, context)
    yield session
    context.close()
    assert session.errors == [], f"the pages logged errors: {session.errors}"


def fresh(prefix: str) -> str:
    return f"{prefix}.{uuid.uuid4().hex[:8]}"


def size(broker: BrokerProcess, name: str) -> int:
    status, row = api(broker, f"/api/queues/{quote(name)}")
    return int(row["size"]) if status == 200 else -1


def send_from_the_form(console: Console, name: str, body: str, **fields: str) -> None:
    page = console.open("/send")
    page.get_by_label("Destination").fill(name)
    page.get_by_label("Body").fill(body)
    for label, value in fields.items():
        page.get_by_label(label).fill(value)
    page.get_by_role("button", name="Send").click()
    console.confirm(f"queue {name}")
    console.shows("Sent ID:")


def test_log_in_as_an_admin_or_read_as_the_anonymous_user(
    browser: Any, broker: BrokerProcess
) -> None:
    context = _context(browser, None)
    page = context.new_page()
    page.goto(f"http://127.0.0.1:{broker.console_port}/")
    # allow_anonymous: the pages answer without a login, read-only, with a way to log in.
    sync_api.expect(page.locator("header .user")).to_have_text("anonymous (read-only)")
    assert page.locator("header a.login").inner_text() == "Log in"
    page.locator("header a.login").click()  # a browser without a password to give stops here
    response = context.request.get(f"http://127.0.0.1:{broker.console_port}/login")
    assert response.status == 401
    assert response.headers["www-authenticate"].startswith("Basic")
    context.close()
    wrong = browser.new_context(http_credentials={"username": "alice", "password": "nope"})
    response = wrong.new_page().goto(f"http://127.0.0.1:{broker.console_port}/login")
    assert response is not None and response.status == 401  # a wrong password: asked again
    wrong.close()


def test_send_see_the_count_browse_and_open_the_message(console: Console) -> None:
    name = fresh("orders")
    send_from_the_form(console, name, '{"order": 42}', Priority="7",
                       **{"Properties (JSON object)": '{"region": "eu"}'})  # fmt: skip
    page = console.open("/queues")
    page.get_by_label("Filter").fill(name)
    row = page.locator("#destinations tbody tr", has_text=name)
    sync_api.expect(row).to_be_visible()
    pending = row.locator('td[data-field="size"]')
    assert pending.inner_text() == "1"
    # The counts follow the broker without a reload.
    api(console.broker, f"/api/queues/{name}/messages", "POST", raw=b"another")
    sync_api.expect(pending).to_have_text("2", timeout=15_000)
    row.get_by_role("link", name=name).click()
    sync_api.expect(page.locator("table.messages")).to_contain_text('{"order": 42}')
    page.locator("table.messages tr", has_text='{"order": 42}').get_by_role("link").click()
    sync_api.expect(page.locator("h1")).to_contain_text("Message")
    sync_api.expect(page.locator("table.headers")).to_contain_text("7")
    sync_api.expect(page.locator("table.properties")).to_contain_text("eu")
    page.get_by_label("JSON").check()
    sync_api.expect(page.locator('pre[data-view="json"]')).to_have_text('{\n  "order": 42\n}')
    page.get_by_label("Hex").check()
    sync_api.expect(page.locator('pre[data-view="hex"]')).to_contain_text("7b 22 6f 72")
    assert size(console.broker, name) == 2


def test_move_chosen_messages_to_another_queue(console: Console) -> None:
    source, target = fresh("from"), fresh("to")
    for text in ("first", "second"):
        api(console.broker, f"/api/queues/{source}/messages", "POST", raw=text.encode())
    page = console.open(f"/queues/{source}")
    page.locator("table.messages tr", has_text="second").locator('input[name="message"]').check()
    page.get_by_label("To queue").fill(target)
    page.get_by_role("button", name="Move").click()
    console.confirm(f"Move 1 message(s) to queue {target}")
    console.shows("moved: 1")
    sync_api.expect(page.locator("table.messages")).not_to_contain_text("second")
    assert (size(console.broker, source), size(console.broker, target)) == (1, 1)


def test_an_expired_message_goes_to_the_dlq_and_is_retried(console: Console) -> None:
    name = fresh("late")
    send_from_the_form(console, name, "retry me", **{"Time to live (ms)": "1"})
    dlq = "ActiveMQ.DLQ"

    def in_dlq() -> bool:
        status, browsed = api(console.broker, f"/api/queues/{dlq}/messages?limit=1000")
        return status == 200 and any(m["text"] == "retry me" for m in browsed)

    wait_for(in_dlq, "the expired message in the DLQ")
    page = console.open(f"/queues/{dlq}")
    page.locator("table.messages tr", has_text="retry me").locator('input[name="message"]').check()
    page.get_by_role("button", name="Retry", exact=True).click()
    console.confirm("back to their original destinations")
    console.shows("retried: 1")
    assert size(console.broker, name) == 1 and not in_dlq()


def test_purge_then_delete_a_queue(console: Console) -> None:
    name = fresh("purged")
    for _ in range(3):
        api(console.broker, f"/api/queues/{name}/messages", "POST", raw=b"x")
    page = console.open(f"/queues/{name}")
    page.get_by_role("button", name="Purge").click()
    console.confirm(f"queue {name}")
    console.shows("purged: 3")
    sync_api.expect(page.locator('[data-counter="Pending"]')).to_have_text("0")
    page.get_by_role("button", name="Delete").click()
    console.confirm(f"Delete queue {name}")
    console.shows("deleted")
    assert page.url.endswith("/queues")
    assert api(console.broker, f"/api/queues/{name}")[0] == 404


def test_close_a_connection(console: Console) -> None:
    client_id = fresh("client")
    client = Client(console.broker.stomp_address, client_id=client_id)
    try:
        page = console.open("/connections")
        row = page.locator("#connections tbody tr", has_text=client_id)
        sync_api.expect(row).to_contain_text("stomp")
        sync_api.expect(row).to_contain_text("127.0.0.1:")
        row.get_by_role("button", name="Close").click()
        console.confirm("Close connection")
        console.shows("closed")
        wait_for(lambda: not client.conn.is_connected(), "the client to see its socket closed")
        sync_api.expect(page.locator("#connections")).not_to_contain_text(client_id)
    finally:
        if client.conn.is_connected():
            client.close()


def test_keyboard_only_purge(console: Console) -> None:
    name = fresh("keys")
    api(console.broker, f"/api/queues/{name}/messages", "POST", raw=b"x")
    page = console.open(f"/queues/{name}")
    for _ in range(30):  # Tab through the page to the Purge button
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.textContent.trim()") == "Purge":
            break
    else:
        pytest.fail("Tab never reached the Purge button")
    page.keyboard.press("Enter")
    sync_api.expect(page.locator("dialog#confirm")).to_be_visible()
    assert page.evaluate("document.activeElement.textContent.trim()") == "Cancel"
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    console.shows("purged: 1")
    assert size(console.broker, name) == 0


def test_a_reader_sees_no_change_buttons(browser: Any, broker: BrokerProcess) -> None:
    name = fresh("readonly")
    api(broker, f"/api/queues/{name}/messages", "POST", raw=b"x")
    context = _context(browser, "bob")
    reader = log_in(broker, context)
    pages = (f"/queues/{name}", "/connections", "/subscriptions", "/network", "/scheduled", "/")
    for path in pages:
        page = reader.open(path)
        assert page.locator("button[data-method], button[data-chosen]").count() == 0, path
    sync_api.expect(reader.open("/send").locator("main")).to_contain_text("You may read only")
    sync_api.expect(page.locator("header .user")).to_contain_text("bob (read-only)")
    context.close()
    assert reader.errors == []


def test_dashboard_chart_and_screenshots_of_the_main_pages(browser: Any, tmp_path: Path) -> None:
    """On a broker of its own, with a few tidy destinations, for docs/console/."""
    refresh_docs = os.environ.get("DOVECOTE_SCREENSHOTS") == "1"
    shots = DOCS_SCREENSHOTS if refresh_docs else tmp_path / "screenshots"
    with running_broker(CONSOLE_TOML, workdir=tmp_path) as broker:
        order = b'{"order": 42, "lines": [{"sku": "A-1", "qty": 2}]}'
        for name, count in [("orders.eu", 3), ("orders.us", 12), ("invoices", 1)]:
            for _ in range(count):
                api(broker, f"/api/queues/{name}/messages?priority=6&correlationId=web-1"
                    '&properties={"region":"eu"}', "POST", raw=order)  # fmt: skip
        api(broker, "/api/topics/prices/messages", "POST", raw=b"1.25")
        client = Client(broker.stomp_address, client_id="billing-service")
        context = _context(browser, "alice")
        try:
            client.subscribe("/queue/invoices", ack="client-individual")
            client.receive()

            def some_rates() -> bool:  # sends go on until the chart has a few points
                api(broker, "/api/queues/orders.us/messages", "POST", raw=order)
                return len(api(broker, "/api/rates")[1]["samples"]) >= 3

            wait_for(some_rates, "three rate samples", timeout=30)
            console = log_in(broker, context)
            page = console.open("/")
            sync_api.expect(page.locator('[data-field="connectionCount"]')).to_have_text("1")
            sync_api.expect(page.locator("svg#rates polyline")).to_have_count(2)
            shots.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=shots / "dashboard.png", full_page=True)
            _, browsed = api(broker, "/api/queues/orders.eu/messages")
            message_id = quote(browsed[0]["message_id"], safe="")
            for shot, path in [
                ("queues", "/queues"), ("queue", "/queues/orders.eu"),
                ("send", "/send?kind=queues&name=orders.eu"),
                ("message", f"/queues/orders.eu/messages/{message_id}"),
                ("connections", "/connections"),
            ]:  # fmt: skip
                console.open(path).screenshot(path=shots / f"{shot}.png", full_page=True)
            assert console.errors == []
            for shot in ("dashboard", "queues", "queue", "send", "message", "connections"):
                assert (shots / f"{shot}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", shot
        finally:
            context.close()
            client.close()
