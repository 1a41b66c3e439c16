"""Password hashes and the user store: salted scrypt, constant-time checks, the anonymous
rule and the login cache."""

from __future__ import annotations

import pytest

from dovecote.broker.connection import Principal
from dovecote.broker.security import users
from dovecote.broker.security.users import (
    AnonymousAccess,
    User,
    UserStore,
    hash_password,
    parse_hash,
    verify_password,
)

ALICE_HASH = hash_password("wonderland")


def _count_scrypt(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The passwords scrypt runs on from now on."""
    calls: list[str] = []
    real = users._derive

    def counting(password: str, *args: object) -> bytes:
        calls.append(password)
        return real(password, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(users, "_derive", counting)
    return calls


def test_a_hash_is_salted_self_describing_text_that_verifies_only_its_password() -> None:
    again = hash_password("wonderland")
    assert ALICE_HASH != again  # a random salt each time
    assert ALICE_HASH.startswith("scrypt$16384$8$1$")
    assert verify_password(ALICE_HASH, "wonderland")
    assert verify_password(again, "wonderland")
    assert not verify_password(ALICE_HASH, "Wonderland")
    assert not verify_password(ALICE_HASH, "")


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "wonderland",
        "bcrypt$16384$8$1$AAAA$AAAA",
        "scrypt$16384$8$1$AAAA",
        "scrypt$x$8$1$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "scrypt$1000$8$1$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "scrypt$16384$8$1$!!!!$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "scrypt$16384$8$1$AAAAAAAAAAAAAAAAAAAAAA$AAAA",
    ],
)
def test_a_malformed_hash_is_refused_and_never_matches(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_hash(bad)
    assert not verify_password(bad, "wonderland")


def test_the_store_authenticates_users_into_principals_with_their_groups() -> None:
    store = UserStore([User("alice", ALICE_HASH, frozenset({"admins", "users"}))])
    assert store.authenticate("alice", "wonderland") == Principal(
        "alice", frozenset({"admins", "users"})
    )
    assert store.authenticate("alice", "nope") is None
    assert store.authenticate("bob", "wonderland") is None
    assert store.authenticate(None, None) is None  # no anonymous access by default
    assert store.authenticate("alice", None) is None
    assert store.groups_of("alice") == frozenset({"admins", "users"})
    assert store.groups_of("bob") == frozenset()


def test_anonymous_access_names_the_anonymous_user_only_without_credentials() -> None:
    store = UserStore(
        [User("alice", ALICE_HASH, frozenset({"users"}))],
        anonymous=AnonymousAccess("guest", frozenset({"guests"})),
    )
    assert store.authenticate(None, None) == Principal("guest", frozenset({"guests"}))
    assert store.groups_of("guest") == frozenset({"guests"})
    # A user that is named must still prove it, as ActiveMQ's simple authentication does.
    assert store.authenticate("alice", None) is None
    assert store.authenticate("alice", "nope") is None
    assert store.authenticate("guest", None) is None


def test_a_repeated_good_login_skips_scrypt_and_a_wrong_password_never_hits_the_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = UserStore([User("alice", ALICE_HASH, frozenset({"users"}))])
    assert store.cached("alice", "wonderland") is None
    assert store.authenticate("alice", "wonderland") is not None
    calls = _count_scrypt(monkeypatch)
    assert store.cached("alice", "wonderland") == Principal("alice", frozenset({"users"}))
    assert store.authenticate("alice", "wonderland") is not None
    assert calls == []
    assert store.cached("alice", "wonderlandx") is None
    assert store.authenticate("alice", "wonderlandx") is None
    assert calls == ["wonderlandx"]  # a wrong password pays scrypt every time
    assert store.authenticate("alice", "wonderlandx") is None
    assert calls == ["wonderlandx", "wonderlandx"]


def test_an_unknown_user_costs_a_verification_too(monkeypatch: pytest.MonkeyPatch) -> None:
    store = UserStore([User("alice", ALICE_HASH)])
    calls = _count_scrypt(monkeypatch)
    assert store.authenticate("mallory", "guess") is None
    assert calls == ["guess"]
