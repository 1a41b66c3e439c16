"""One security setup for the security tests, written out for both brokers: dovecote's
[security] section (passwords hashed as `dovecote passwd` hashes them) and ActiveMQ's
simpleAuthenticationPlugin and authorizationPlugin (tests/activemq.py puts it in
<plugins>), so that a differential test configures the two alike."""

from __future__ import annotations

from dataclasses import dataclass

from dovecote.broker.security.users import hash_password


@dataclass(frozen=True)
class Entry:
    kind: str
    """queue or topic"""
    pattern: str
    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    admin: tuple[str, ...] = ()


USERS = {
    # name: (password, groups)
    "admin": ("adminpw", ("admins",)),
    "writer": ("writerpw", ("writers", "observers")),
    "reader": ("readerpw", ("readers",)),
    # A writer that may not read the advisory topics: the Java client's connection (its
    # advisory consumer, watchTopicAdvisories) is refused.
    "blind": ("blindpw", ("writers",)),
}
ANONYMOUS_GROUP = "guests"

ENTRIES = (
    Entry("queue", ">", ("admins",), ("admins",), ("admins",)),
    Entry("queue", "orders.>", ("readers",), ("writers",)),
    Entry("topic", ">", ("admins",), ("admins",), ("admins",)),
    Entry("topic", "news.>", ("readers",), ("writers",)),
    Entry(
        "topic",
        "ActiveMQ.Advisory.>",
        ("admins", "readers", "observers"),
        ("admins", "readers", "writers"),
        ("admins", "readers", "observers"),
    ),
)
TEMP = Entry(
    "temp", "", ("admins", "readers"), ("admins", "readers", "writers"), ("admins", "readers")
)


def _list(groups: tuple[str, ...]) -> str:
    return "[" + ", ".join(f'"{g}"' for g in groups) + "]"


def dovecote_toml(allow_anonymous: bool = True) -> str:
    lines = ["[security]", f"allow_anonymous = {str(allow_anonymous).lower()}",
             f'anonymous_groups = ["{ANONYMOUS_GROUP}"]', ""]  # fmt: skip
    for name, (password, groups) in USERS.items():
        hashed = hash_password(password)
        lines += ["[[security.users]]", f'name = "{name}"', f'password = "{hashed}"',
                  f"groups = {_list(groups)}", ""]  # fmt: skip
    for e in ENTRIES:
        lines += ["[[security.authorization]]", f'{e.kind} = "{e.pattern}"',
                  f"read = {_list(e.read)}", f"write = {_list(e.write)}",
                  f"admin = {_list(e.admin)}", ""]  # fmt: skip
    lines += ["[security.temp_destinations]", f"read = {_list(TEMP.read)}",
              f"write = {_list(TEMP.write)}", f"admin = {_list(TEMP.admin)}", ""]  # fmt: skip
    return "\n".join(lines)


def activemq_plugins(allow_anonymous: bool = True) -> str:
    """The same setup as ActiveMQ's <plugins> children (passwords in the clear: its
    simpleAuthenticationPlugin has no hashes)."""
    users = "".join(
        f'<authenticationUser username="{name}" password="{password}" groups="{",".join(groups)}"/>'
        for name, (password, groups) in USERS.items()
    )
    entries = "".join(
        f'<authorizationEntry {e.kind}="{e.pattern}" read="{",".join(e.read)}" '
        f'write="{",".join(e.write)}" admin="{",".join(e.admin)}"/>'
        for e in ENTRIES
    )
    temp = (
        f'<tempDestinationAuthorizationEntry read="{",".join(TEMP.read)}" '
        f'write="{",".join(TEMP.write)}" admin="{",".join(TEMP.admin)}"/>'
    )
    return (
        f'<simpleAuthenticationPlugin anonymousAccessAllowed="{str(allow_anonymous).lower()}" '
        f'anonymousUser="anonymous" anonymousGroup="{ANONYMOUS_GROUP}"><users>{users}</users>'
        "</simpleAuthenticationPlugin>"
        "<authorizationPlugin><map><authorizationMap><authorizationEntries>"
        f"{entries}</authorizationEntries><tempDestinationAuthorizationEntry>{temp}"
        "</tempDestinationAuthorizationEntry></authorizationMap></map></authorizationPlugin>"
    )
