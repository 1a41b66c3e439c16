"""The configuration file: what a valid file gives, what the defaults are, and an invalid
file refused with the dotted key a user wrote and what is wrong with it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dovecote.config import Config, ConfigError, _problem, load_config, with_ports


def loaded(tmp_path: Path, text: str) -> Config:
    path = tmp_path / "dovecote.toml"
    path.write_text(text)
    return load_config(path)


def test_no_file_gives_the_embedded_defaults() -> None:
    config = load_config(None)
    assert (config.stomp.port, config.openwire.port, config.console.port) == (61613, 61616, 8161)
    assert config.store.kind == "journal" and config.broker.data_dir == Path("data")
    assert config.stomp.heartbeat_ms == (10_000, 10_000)
    assert config.policy.entries == ()
    assert config == Config()


@pytest.fixture
def sample(tmp_path: Path) -> Config:
    return loaded(
        tmp_path,
        """
        [broker]
        name = "edge"
        data_dir = "/var/lib/dovecote"
        [store]
        kind = "sql"
        url = "sqlite:///x.db"
        [stomp]
        port = 1234
        heartbeat_ms = [0, 5000]
        heartbeat_grace = 2
        [[policy.entries]]
        pattern = "orders.>"
        dead_letter = "individual"
        maximum_redeliveries = 3
        [policy.entries.dead_letter_options]
        queue_prefix = "DEAD."
        """,
    )


def test_values_from_the_file_are_typed(sample: Config) -> None:
    assert sample.broker.name == "edge"
    assert sample.broker.data_dir == Path("/var/lib/dovecote")
    assert (sample.store.kind, sample.store.url) == ("sql", "sqlite:///x.db")
    assert sample.stomp.port == 1234
    assert sample.stomp.heartbeat_ms == (0, 5000)  # a TOML array, as a tuple
    assert sample.stomp.heartbeat_grace == 2.0 and isinstance(sample.stomp.heartbeat_grace, float)
    assert sample.openwire.port == 61616  # not named: the default
    (entry,) = sample.policy.entries
    policy = entry.to_policy()
    assert (policy.pattern, policy.maximum_redeliveries) == ("orders.>", 3)
    assert policy.dead_letter.queue_prefix == "DEAD."
    assert policy.dead_letter.shared_queue == "ActiveMQ.DLQ"


def test_the_tree_is_frozen(sample: Config) -> None:
    with pytest.raises(AttributeError):
        sample.stomp.port = 1  # type: ignore[misc]
    with pytest.raises(AttributeError):
        sample.stomp = sample.openwire  # type: ignore[misc, assignment]


def test_command_line_ports_replace_only_what_they_name(sample: Config) -> None:
    moved = with_ports(sample, stomp=0, console=9000)
    assert (moved.stomp.port, moved.openwire.port, moved.console.port) == (0, 61616, 9000)
    assert moved.stomp.heartbeat_ms == (0, 5000) and moved.broker == sample.broker
    assert sample.stomp.port == 1234  # the original is unchanged
    assert with_ports(sample) == sample


# (file text, the key the error names, words the error says about it)
INVALID = {
    "out of range": ("[stomp]\nport = 70000\n", "stomp.port", "<= 65535"),
    "below its bound": ("[usage]\nmemory_limit = -1\n", "usage.memory_limit", ">= 0"),
    "text for a number": ("[stomp]\nport = 'high'\n", "stomp.port", "Expected `int`"),
    "a boolean for a number": ("[openwire]\nport = true\n", "openwire.port", "Expected `int`"),
    "unknown key": ("[stomp]\nprot = 1\n", "stomp.prot", "unknown key"),
    "unknown table": ("[stmop]\nport = 1\n", "stmop", "unknown key"),
    "not one of the kinds": ("[store]\nkind = 'kaha'\n", "store.kind", "'kaha'"),
    "a number for a path": ("[broker]\ndata_dir = 5\n", "broker.data_dir", "a path"),
    "a list entry's key": (
        "[[policy.entries]]\npattern = 'a'\n[[policy.entries]]\nmaximum_redeliveries = -2\n",
        "policy.entries.1.maximum_redeliveries",
        ">= -1",
    ),
    "a value for a table": ("stomp = 5\n", "stomp", "Expected `object`"),
}


@pytest.mark.parametrize("case", INVALID)
def test_an_invalid_file_is_refused_naming_the_key(tmp_path: Path, case: str) -> None:
    text, key, says = INVALID[case]
    with pytest.raises(ConfigError) as raised:
        loaded(tmp_path, text)
    message = str(raised.value)
    assert message.startswith(f"config file {tmp_path / 'dovecote.toml'}: {key}: "), message
    assert says in message


def test_a_file_that_is_not_toml_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is not valid TOML"):
        loaded(tmp_path, "[stomp\n")


def test_a_missing_file_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"none\.toml"):
        load_config(tmp_path / "none.toml")


def test_a_problem_with_no_key_keeps_its_text() -> None:
    # A file is always a table, so this comes only from a direct call: still readable.
    assert _problem("Expected `object`, got `array`") == "Expected `object`, got `array`"
    assert _problem("Object contains unknown field `x`") == "x: unknown key"


def test_the_readme_configuration_example_loads(tmp_path: Path) -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    (example,) = re.findall(r"```toml\n(.*?)```", readme, flags=re.DOTALL)
    config = loaded(tmp_path, example)
    topics = [e for e in config.policy.entries if not e.queues]
    assert topics and topics[0].pending_message_limit == 1000
