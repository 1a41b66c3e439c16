"""The [security] section: parsed once into the plugins' settings, its mistakes refused
with a message naming them, and the secure-by-default rule for listeners."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dovecote.broker.connection import Peer, Principal
from dovecote.broker.security.authorization import Right
from dovecote.broker.security.plugins import AuthenticationPlugin, AuthorizationPlugin
from dovecote.broker.security.users import hash_password
from dovecote.config import ConfigError, exposure_problem, is_loopback, load_config
from dovecote.core.destinations import queue, topic

HASH = hash_password("secret")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "dovecote.toml"
    path.write_text(text)
    return path


def test_a_complete_section_becomes_users_groups_and_an_authorization_map(
    tmp_path: Path,
) -> None:
    (tmp_path / "users.toml").write_text(
        f'[[users]]\nname = "carol"\npassword = "{HASH}"\ngroups = ["readers"]\n'
        '[groups]\nadmins = ["carol"]\n'
    )
    config = load_config(
        write(
            tmp_path,
            f"""
[security]
users_file = "{tmp_path / "users.toml"}"
allow_anonymous = true
anonymous_user = "guest"
anonymous_groups = ["guests"]
certificate_user_from_cn = true

[security.groups]
writers = ["alice"]

[[security.users]]
name = "alice"
password = "{HASH}"
groups = ["admins"]

[[security.certificate_users]]
subject = "CN=Alice Smith, O=example"
user = "alice"

[[security.authorization]]
queue = ">"
read = ["admins"]
write = ["admins", "writers"]
admin = ["admins"]

[[security.authorization]]
topic = "ActiveMQ.Advisory.>"
read = ["*"]

[security.temp_destinations]
read = ["readers"]
""",
        )
    )
    settings = config.security.to_settings()
    users = settings.users
    assert users is not None
    assert users.authenticate("alice", "secret") == Principal(
        "alice", frozenset({"admins", "writers"})
    )
    assert users.authenticate("carol", "secret") == Principal(
        "carol", frozenset({"readers", "admins"})
    )
    assert users.authenticate(None, None) == Principal("guest", frozenset({"guests"}))
    peer = Peer("1.2.3.4:5", "openwire", True, "cn=Alice Smith,o=example")
    assert settings.certificates.user_of(peer, users) == "alice"
    by_cn = Peer("1.2.3.4:5", "openwire", True, "CN=carol,O=elsewhere")
    assert settings.certificates.user_of(by_cn, users) == "carol"
    stranger = Peer("1.2.3.4:5", "openwire", True, "CN=mallory,O=example")
    assert settings.certificates.user_of(stranger, users) is None
    authorization = settings.authorization
    assert authorization is not None
    alice = Principal("alice", frozenset({"writers"}))
    assert authorization.allows(alice, Right.WRITE, queue("Q"))
    assert not authorization.allows(alice, Right.READ, queue("Q"))
    assert authorization.allows(alice, Right.READ, topic("ActiveMQ.Advisory.TempQueue"))
    kinds = [type(p) for p in settings.plugins()]
    assert kinds == [AuthenticationPlugin, AuthorizationPlugin]


def test_no_section_means_no_security_plugins() -> None:
    config = load_config(None)
    assert not config.security.authenticates
    assert config.security.to_settings().plugins() == []


@pytest.mark.parametrize(
    ("section", "message"),
    [
        (
            '[[security.users]]\nname = "bob"\npassword = "hunter2"\n',
            "user 'bob': not a password hash",
        ),
        (
            '[[security.users]]\nname = "bob"\npassword = "scrypt$3$8$1$AAAAAAAA$AAAA"\n',
            "user 'bob': password hash has unusable scrypt parameters",
        ),
        (
            f'[[security.users]]\nname = "bob"\npassword = "{HASH}"\n'
            '[[security.authorization]]\nqueue = ">"\ntopic = ">"\n',
            "security.authorization.0: an authorization entry names a queue or a topic",
        ),
        (
            f'[[security.users]]\nname = "bob"\npassword = "{HASH}"\n'
            '[[security.authorization]]\nread = ["x"]\n',
            "security.authorization.0: an authorization entry names a queue or a topic",
        ),
        ('[[security.users]]\nname = "bob"\npasword = "x"\n', "security.users.0.pasword"),
        ("[security]\nallow_anonymus = true\n", "security.allow_anonymus: unknown key"),
    ],
)
def test_mistakes_are_refused_naming_them(tmp_path: Path, section: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, section))
    assert message in str(caught.value)


def test_an_unknown_group_in_an_entry_is_fine_as_in_activemq(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            f'[[security.users]]\nname = "bob"\npassword = "{HASH}"\n'
            '[[security.authorization]]\nqueue = ">"\nread = ["nobody-has-this"]\n',
        )
    )
    assert config.security.to_settings().authorization is not None


def test_a_users_file_that_is_missing_or_wrong_is_a_config_error(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, f'[security]\nusers_file = "{tmp_path / "none"}"\n'))
    with pytest.raises(ConfigError, match=r"cannot read security\.users_file"):
        config.security.to_settings()
    (tmp_path / "users.toml").write_text('[[users]]\nname = "x"\npassword = "plain"\n')
    config = load_config(write(tmp_path, f'[security]\nusers_file = "{tmp_path / "users.toml"}"\n'))
    with pytest.raises(ConfigError, match=r"users\.0: user .x.: not a password hash"):
        config.security.to_settings()


def test_an_authorization_map_nobody_could_use_is_refused(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, '[[security.authorization]]\nqueue = ">"\n'))
    with pytest.raises(ConfigError, match="nobody could connect"):
        config.security.to_settings()


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("", False),
        ("10.0.0.5", False),
        ("broker.example.com", False),
    ],
)
def test_what_counts_as_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_a_listener_beyond_loopback_needs_authentication_or_allow_anonymous(
    tmp_path: Path,
) -> None:
    assert exposure_problem(load_config(None)) is None
    open_stomp = '[stomp]\nhost = "0.0.0.0"\n'
    problem = exposure_problem(load_config(write(tmp_path, open_stomp)))
    assert problem is not None
    assert "stomp.host = '0.0.0.0'" in problem
    assert "allow_anonymous = true" in problem
    console = '[console]\nhost = "10.1.2.3"\n[openwire]\nhost = "::"\n'
    problem = exposure_problem(load_config(write(tmp_path, console)))
    assert problem is not None
    assert "openwire.host = '::'" in problem
    assert "console.host = '10.1.2.3'" in problem
    # A disabled listener listens nowhere.
    disabled = '[stomp]\nhost = "0.0.0.0"\nenabled = false\n'
    assert exposure_problem(load_config(write(tmp_path, disabled))) is None
    on_purpose = open_stomp + "[security]\nallow_anonymous = true\n"
    assert exposure_problem(load_config(write(tmp_path, on_purpose))) is None
    with_users = open_stomp + f'[[security.users]]\nname = "bob"\npassword = "{HASH}"\n'
    assert exposure_problem(load_config(write(tmp_path, with_users))) is None


def test_the_readme_security_example_loads_and_means_what_it_says(tmp_path: Path) -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    (example,) = re.findall(r"```toml security\n(.*?)```", readme, flags=re.DOTALL)
    settings = load_config(write(tmp_path, example)).security.to_settings()
    users, authorization = settings.users, settings.authorization
    assert users is not None and authorization is not None
    alice = users.authenticate("alice", "alice-secret")
    bob = users.authenticate("bob", "bob-secret")
    assert alice == Principal("alice", frozenset({"admins"}))
    assert bob == Principal("bob", frozenset({"orders-app", "auditors"}))
    assert users.authenticate(None, None) is None
    assert authorization.allows(bob, Right.WRITE, queue("orders.eu"))
    assert not authorization.allows(bob, Right.WRITE, queue("billing"))
    assert authorization.allows(bob, Right.READ, topic("ActiveMQ.Advisory.TempQueue"))
    peer = Peer("10.0.0.2:5000", "openwire", True, "CN=billing, O=example")
    assert settings.certificates.user_of(peer, users) == "bob"
