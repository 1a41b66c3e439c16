"""[security]: users, groups, anonymous access, certificate users and the authorization
map, parsed into the settings the security plugins take."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import msgspec
from msgspec import Meta, field

from dovecote.broker.security.authorization import AuthorizationEntry, AuthorizationMap, Rights
from dovecote.broker.security.plugins import CertificateUsers, SecuritySettings, normal_subject
from dovecote.broker.security.users import (
    DEFAULT_ANONYMOUS_GROUPS,
    DEFAULT_ANONYMOUS_USER,
    AnonymousAccess,
    User,
    UserStore,
    parse_hash,
)
from dovecote.config.base import ConfigError, Section, problem, read_toml

GroupNames = tuple[Annotated[str, Meta(min_length=1)], ...]


class UserEntry(Section, frozen=True):
    """A user: its password's hash (``dovecote passwd`` prints one) and its groups."""

    name: Annotated[str, Meta(min_length=1)]
    password: str | None = None
    """The hash (scrypt$...); unset: the user can only be named by a client certificate."""
    groups: GroupNames = ()

    def __post_init__(self) -> None:
        if self.password is not None:
            try:
                parse_hash(self.password)
            except ValueError as exc:
                raise ValueError(f"user {self.name!r}: {exc}") from None


class UsersFile(Section, frozen=True):
    """The file ``security.users_file`` names: ``[[users]]`` tables and a ``[groups]`` table."""

    users: tuple[UserEntry, ...] = ()
    groups: dict[str, GroupNames] = field(default_factory=dict)


class RightsSection(Section, frozen=True):
    """Groups (``*``: everyone) that may read (consume, browse), write (send) and admin
    (create a destination that does not exist yet)."""

    read: GroupNames = ()
    write: GroupNames = ()
    admin: GroupNames = ()

    def to_rights(self) -> Rights:
        return Rights(frozenset(self.read), frozenset(self.write), frozenset(self.admin))


class AuthorizationEntrySection(RightsSection, frozen=True):
    """ActiveMQ's authorizationEntry: the rights on queues or topics matching a pattern."""

    queue: str | None = None
    topic: str | None = None

    def __post_init__(self) -> None:
        if (self.queue is None) == (self.topic is None):
            raise ValueError("an authorization entry names a queue or a topic pattern (one)")


class CertificateUserEntry(Section, frozen=True):
    subject: Annotated[str, Meta(min_length=1)]
    """A verified client certificate's subject, e.g. "CN=alice,O=example"."""
    user: Annotated[str, Meta(min_length=1)]


class SecuritySection(Section, frozen=True):
    """Authentication and authorization (ActiveMQ's simpleAuthenticationPlugin and
    authorizationPlugin). With no users, every connection is let in and may do anything,
    and every listener must be on loopback unless allow_anonymous says otherwise."""

    users: tuple[UserEntry, ...] = ()
    users_file: Path | None = None
    """A TOML file with more [[users]] and a [groups] table (relative to the working dir)."""
    groups: dict[str, GroupNames] = field(default_factory=dict)
    """group -> its users, beside each user's own groups."""
    allow_anonymous: bool = False
    """With users: a connection giving no user and no password is anonymous_user. Without
    users: the listeners may listen beyond loopback with nobody authenticated."""
    anonymous_user: str = DEFAULT_ANONYMOUS_USER
    anonymous_groups: GroupNames = tuple(sorted(DEFAULT_ANONYMOUS_GROUPS))
    certificate_users: tuple[CertificateUserEntry, ...] = ()
    """Users named by a verified client certificate's subject."""
    certificate_user_from_cn: bool = False
    """A verified client certificate whose CN is a configured user's name is that user."""
    authorization: tuple[AuthorizationEntrySection, ...] = ()
    temp_destinations: RightsSection | None = None
    """Rights on every temporary destination (tempDestinationAuthorizationEntry); unset:
    every authenticated connection has them all."""

    @property
    def authenticates(self) -> bool:
        """Whether connections must say who they are."""
        return bool(
            self.users
            or self.users_file is not None
            or self.certificate_users
            or self.certificate_user_from_cn
            or self.authorization
            or self.temp_destinations is not None
        )

    def to_settings(self) -> SecuritySettings:
        """The section as the security plugins take it (reads users_file)."""
        if not self.authenticates:
            return SecuritySettings(allow_anonymous=self.allow_anonymous)
        entries, groups = list(self.users), dict(self.groups)
        if self.users_file is not None:
            extra = _read_users_file(self.users_file)
            entries += extra.users
            for group, members in extra.groups.items():
                groups[group] = groups.get(group, ()) + members
        users = []
        for entry in entries:
            joined = {g for g, members in groups.items() if entry.name in members}
            users.append(User(entry.name, entry.password, frozenset(entry.groups) | joined))
        anonymous = None
        if self.allow_anonymous:
            anonymous = AnonymousAccess(self.anonymous_user, frozenset(self.anonymous_groups))
        elif not any(u.password_hash for u in users) and not (
            self.certificate_users or self.certificate_user_from_cn
        ):
            raise ConfigError(
                "security: nobody could connect: give users passwords, certificate_users "
                "or allow_anonymous = true"
            )
        authorization = None
        if self.authorization or self.temp_destinations is not None:
            authorization = AuthorizationMap(
                tuple(
                    AuthorizationEntry(e.queue or e.topic or "", e.queue is not None, e.to_rights())
                    for e in self.authorization
                ),
                None if self.temp_destinations is None else self.temp_destinations.to_rights(),
            )
        return SecuritySettings(
            users=UserStore(users, anonymous),
            certificates=CertificateUsers(
                {normal_subject(c.subject): c.user for c in self.certificate_users},
                self.certificate_user_from_cn,
            ),
            authorization=authorization,
            allow_anonymous=self.allow_anonymous,
        )


def _read_users_file(path: Path) -> UsersFile:
    data = read_toml(path, "security.users_file")
    try:
        return msgspec.convert(data, UsersFile)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"security.users_file {path}: {problem(str(exc))}") from None
