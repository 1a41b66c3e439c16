"""Users, their password hashes and groups, and the authentication against them (ActiveMQ's
simpleAuthenticationPlugin, with salted hashes instead of passwords in the clear).

A hash is self-describing text, ``scrypt$<n>$<r>$<p>$<salt>$<key>`` (salt and key in
base64), made by ``hash_password`` (``dovecote passwd`` prints one). scrypt costs tens of
milliseconds on purpose: callers on the event loop run ``authenticate`` in a thread, and a
login that succeeded once is remembered (``cached``) so a reconnecting client pays it once.
"""

from __future__ import annotations

import base64
import binascii
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from dovecote.broker.connection import Principal

SCHEME = "scrypt"
SCRYPT_N = 2**14
SCRYPT_R = 8
SCRYPT_P = 1
SALT_BYTES = 16
KEY_BYTES = 32
_MAX_N = 2**20
"""The largest cost a hash may ask for (1 GiB of memory at r=8): a typo cannot hang a login."""

DEFAULT_ANONYMOUS_USER = "anonymous"
DEFAULT_ANONYMOUS_GROUPS: frozenset[str] = frozenset({"anonymous"})
"""ActiveMQ's anonymousUser and anonymousGroup defaults."""

_CACHE_LIMIT = 10_000


@dataclass(frozen=True, slots=True)
class ScryptHash:
    n: int
    r: int
    p: int
    salt: bytes
    key: bytes


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)


# hashlib and hmac are imported where a password is checked or made: a broker whose
# clients never log in does not carry them (about 0.7 MiB idle, docs/performance.md).


def _derive(password: str, n: int, r: int, p: int, salt: bytes, length: int) -> bytes:
    import hashlib

    return hashlib.scrypt(
        password.encode("utf-8"), salt=salt, n=n, r=r, p=p, maxmem=256 * r * n, dklen=length
    )


def hash_password(password: str) -> str:
    """A new salted scrypt hash of ``password``, as text for the configuration."""
    salt = os.urandom(SALT_BYTES)  # (what secrets.token_bytes returns)
    key = _derive(password, SCRYPT_N, SCRYPT_R, SCRYPT_P, salt, KEY_BYTES)
    return f"{SCHEME}${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${_b64(salt)}${_b64(key)}"


def parse_hash(stored: str) -> ScryptHash:
    """The parts of a hash ``hash_password`` made; ValueError saying what is wrong."""
    parts = stored.split("$")
    if len(parts) != 6 or parts[0] != SCHEME:
        raise ValueError(
            "not a password hash (expected scrypt$n$r$p$salt$key: see dovecote passwd)"
        )
    try:
        n, r, p = int(parts[1]), int(parts[2]), int(parts[3])
        salt, key = _unb64(parts[4]), _unb64(parts[5])
    except (ValueError, binascii.Error):
        raise ValueError("password hash has a malformed number or base64 part") from None
    if n < 2 or n > _MAX_N or n & (n - 1) or not 1 <= r <= 64 or not 1 <= p <= 16:
        raise ValueError(f"password hash has unusable scrypt parameters n={n} r={r} p={p}")
    if not salt or len(key) < 16:
        raise ValueError("password hash has an empty salt or a short key")
    return ScryptHash(n, r, p, salt, key)


def verify_password(stored: str, password: str) -> bool:
    """True when ``password`` is the one ``stored`` was made from (a constant-time compare;
    a malformed hash never matches)."""
    try:
        parsed = parse_hash(stored)
    except ValueError:
        return False
    return _matches(parsed, password)


def _matches(parsed: ScryptHash, password: str) -> bool:
    import hmac

    derived = _derive(password, parsed.n, parsed.r, parsed.p, parsed.salt, len(parsed.key))
    return hmac.compare_digest(derived, parsed.key)


@dataclass(frozen=True, slots=True)
class User:
    name: str
    password_hash: str | None
    """None: the user cannot log in with a password (a client certificate names it)."""
    groups: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class AnonymousAccess:
    """Connections that give neither user nor password act as this user (ActiveMQ's
    anonymousAccessAllowed with anonymousUser and anonymousGroup)."""

    user: str = DEFAULT_ANONYMOUS_USER
    groups: frozenset[str] = DEFAULT_ANONYMOUS_GROUPS


# Unknown users pay a verification too, so timing does not tell which names exist.
_DUMMY = ScryptHash(SCRYPT_N, SCRYPT_R, SCRYPT_P, b"\0" * SALT_BYTES, b"\0" * KEY_BYTES)


class UserStore:
    """The configured users; ``authenticate`` says who a connection is, or None (refused)."""

    def __init__(
        self, users: Iterable[User] = (), anonymous: AnonymousAccess | None = None
    ) -> None:
        self._users: dict[str, User] = {}
        self._hashes: dict[str, ScryptHash] = {}
        for user in users:
            self._users[user.name] = user
            if user.password_hash is not None:
                self._hashes[user.name] = parse_hash(user.password_hash)
        self.anonymous = anonymous
        # Keyed by an HMAC of user and password under a key of this process: a wrong
        # password has another key, so it never hits, and no password is kept.
        self._cache_key = os.urandom(32)
        self._cache: dict[bytes, Principal] = {}
        self._lock = threading.Lock()

    @property
    def users(self) -> tuple[User, ...]:
        return tuple(self._users.values())

    def __contains__(self, user: str) -> bool:
        return user in self._users

    def principal(self, user: str) -> Principal:
        """``user`` with its groups, without a password (a client certificate named it)."""
        return Principal(user, self.groups_of(user))

    def groups_of(self, user: str) -> frozenset[str]:
        """The groups ``user`` is in (the anonymous user's groups for it; none if unknown)."""
        found = self._users.get(user)
        if found is not None:
            return found.groups
        if self.anonymous is not None and user == self.anonymous.user:
            return self.anonymous.groups
        return frozenset()

    def _cache_slot(self, user: str, password: str) -> bytes:
        import hashlib
        import hmac

        text = f"{len(user)}:{user}{password}".encode()
        return hmac.new(self._cache_key, text, hashlib.sha256).digest()

    def cached(self, user: str | None, password: str | None) -> Principal | None:
        """The principal without scrypt when this answer is known at once: anonymous
        access, or a user and password that verified before. None: ``authenticate``."""
        if user is None and password is None and self.anonymous is not None:
            return Principal(self.anonymous.user, self.anonymous.groups)
        if user is None or password is None:
            return None
        return self._cache.get(self._cache_slot(user, password))

    def authenticate(self, user: str | None, password: str | None) -> Principal | None:
        """Who a connection giving ``user`` and ``password`` is, or None (refused). Neither
        given is the anonymous user when anonymous access is allowed. Runs scrypt unless
        the answer is cached: call it in a thread from the event loop."""
        known = self.cached(user, password)
        if known is not None:
            return known
        if user is None or password is None:
            return None
        parsed = self._hashes.get(user)
        if parsed is None:
            _matches(_DUMMY, password)
            return None
        if not _matches(parsed, password):
            return None
        principal = Principal(user, self._users[user].groups)
        with self._lock:
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[self._cache_slot(user, password)] = principal
        return principal
