"""The console's access rules in pieces: which Host names it answers to, which origins may
change state, HTTP Basic parsing and the CSRF tokens (the whole path over HTTP is in
tests/integration/test_admin_security.py)."""

from __future__ import annotations

import base64
import time
from pathlib import Path

import pytest

from dovecote.config import ConfigError, load_config
from dovecote.web import access
from dovecote.web.access import ConsoleAccess, CsrfTokens, basic_credentials


@pytest.mark.parametrize(
    ("host", "answers"),
    [
        ("127.0.0.1", True),
        ("::1", True),
        ("10.1.2.3", True),  # an address cannot be rebound
        ("localhost", True),
        ("broker1.example.com", True),  # in allowed_hosts
        ("BROKER1.example.com", False),  # the guard lowercases before asking
        ("evil.example", False),
        ("localhost.evil.example", False),
    ],
)
def test_host_names_the_console_answers_to(host: str, answers: bool) -> None:
    rules = ConsoleAccess(allowed_hosts=frozenset({"broker1.example.com"}))
    assert rules.host_allowed(host) is answers


def test_a_console_bound_to_a_name_answers_to_it() -> None:
    assert ConsoleAccess().serving("console.internal").host_allowed("console.internal")
    assert ConsoleAccess().serving("0.0.0.0") == ConsoleAccess()


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("http://127.0.0.1:8161", ("http", "127.0.0.1", 8161)),
        ("https://Console.Example.com", ("https", "console.example.com", 443)),
        ("http://[::1]:8161/api/x?y", ("http", "::1", 8161)),
        ("null", None),
        ("http://host:notaport", None),
        ("file:///etc/passwd", None),
    ],
)
def test_origins_as_browsers_compare_them(url: str, origin: object) -> None:
    assert access._origin(url) == origin


def test_allowed_origins_add_to_the_consoles_own() -> None:
    own = ("http", "127.0.0.1", 8161)
    rules = ConsoleAccess(allowed_origins=frozenset({"https://console.example.com"}))
    assert rules.origin_allowed(own, own)
    assert rules.origin_allowed(("https", "console.example.com", 443), own)
    assert not rules.origin_allowed(("http", "127.0.0.1", 8162), own)  # another port
    assert not rules.origin_allowed(("http", "localhost", 8161), own)  # another name
    assert not rules.origin_allowed(None, own)


def _basic(text: str) -> str:
    return "Basic " + base64.b64encode(text.encode()).decode()


def test_basic_credentials() -> None:
    assert basic_credentials(_basic("alice:wonder:land")) == ("alice", "wonder:land")
    assert basic_credentials(_basic("alice:")) == ("alice", "")
    assert basic_credentials(_basic("no colon")) is None
    assert basic_credentials("Bearer abc") is None
    assert basic_credentials("Basic !!!") is None


def test_csrf_tokens_are_the_users_and_expire(monkeypatch: pytest.MonkeyPatch) -> None:
    tokens = CsrfTokens(lifetime_s=60)
    token = tokens.issue("alice")
    assert tokens.valid("alice", token)
    assert not tokens.valid("mallory", token)
    assert not tokens.valid("alice", None)
    assert not tokens.valid("alice", "x." + token.partition(".")[2])
    assert not CsrfTokens().valid("alice", token)  # another process's key (a restart)
    now = time.time()
    monkeypatch.setattr(access.time, "time", lambda: now + 61)
    assert not tokens.valid("alice", token)


def test_an_allowed_origin_is_a_scheme_and_a_host(tmp_path: Path) -> None:
    path = tmp_path / "dovecote.toml"
    path.write_text('[console]\nallowed_origins = ["https://console.example.com:8443"]\n')
    assert load_config(path).console.allowed_origins == ("https://console.example.com:8443",)
    path.write_text('[console]\nallowed_origins = ["https://console.example.com/"]\n')
    with pytest.raises(ConfigError, match=r"console\.allowed_origins\.0"):
        load_config(path)
