"""[store] kind = "replicated-leveldb" (issue 35): ActiveMQ's options in snake_case, their
defaults, a wrong value refused naming it, and the store the app builds from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from dovecote.app import make_store
from dovecote.config import Config, ConfigError, load_config
from dovecote.store.replicated.adapter import ReplicatedLevelDBStore
from dovecote.store.replicated.zookeeper import ZooKeeperCoordinator


def loaded(tmp_path: Path, store: str) -> Config:
    path = tmp_path / "dovecote.toml"
    path.write_text(f'[broker]\ndata_dir = "{tmp_path}"\n[store]\n{store}\n')
    return load_config(path)


def test_the_defaults_are_activemqs_but_loopback() -> None:
    store = Config().store
    assert (store.replicas, store.zk_address, store.zk_path) == (3, "127.0.0.1:2181", "/default")
    assert (store.zk_session_timeout_ms, store.sync) == (2000, "quorum_mem")
    assert store.bind == "tcp://127.0.0.1:61619" and store.hostname == ""


def test_the_app_builds_the_replicated_store_with_the_zookeeper_coordinator(
    tmp_path: Path,
) -> None:
    config = loaded(tmp_path, """kind = "replicated-leveldb"
replicas = 5
zk_address = "zk1:2181,zk2:2181"
zk_path = "/dovecote/orders"
zk_session_timeout_ms = 4000
hostname = "broker1.example.com"
bind = "tcp://127.0.0.1:61620"
sync = "quorum_disk"
""")  # fmt: skip
    store = make_store(config)
    assert isinstance(store, ReplicatedLevelDBStore)
    settings = store.settings
    assert settings.node_id == "broker1.example.com:61620"
    assert (settings.replicas, settings.sync, settings.bind) == (
        5,
        "quorum_disk",
        config.store.bind,
    )
    assert settings.directory == tmp_path / "leveldb"
    coordinator = store.coordinator
    assert isinstance(coordinator, ZooKeeperCoordinator)
    zk = coordinator.settings
    assert (zk.address, zk.path, zk.session_timeout_s, zk.replicas) == (
        "zk1:2181,zk2:2181", "/dovecote/orders", 4.0, 5,
    )  # fmt: skip


def test_an_ephemeral_bind_port_names_the_node_by_its_store(tmp_path: Path) -> None:
    config = loaded(tmp_path, 'kind = "replicated-leveldb"\nbind = "tcp://0.0.0.0:0"\n'
                    f'directory = "{tmp_path / "copy"}"')  # fmt: skip
    store = make_store(config)
    assert isinstance(store, ReplicatedLevelDBStore)
    assert store.settings.node_id == f"0.0.0.0:{tmp_path / 'copy'}"
    assert store.settings.directory == tmp_path / "copy"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('sync = "quorum_mme"', "store: sync 'quorum_mme' is not one of local_mem, local_disk"),
        ('bind = "61619"', "store: bind '61619' is not tcp://host:port"),
        ("replicas = 0", "store.replicas: Expected `int` >= 1"),
        ('zk_path = "orders"', "store.zk_path: Expected `str` matching regex"),
        ("zk_session_timeout_ms = 10", "store.zk_session_timeout_ms: Expected `int` >= 100"),
        ('kind = "replicated"', "store.kind: Invalid enum value 'replicated'"),
        ("zk_adress = 'x'", "store.zk_adress: unknown key"),
    ],
)
def test_a_wrong_value_is_refused_naming_it(tmp_path: Path, line: str, message: str) -> None:
    with pytest.raises(ConfigError, match=r"^config file ") as refused:
        loaded(tmp_path, line)
    assert message in str(refused.value)
