"""Every code block of the README runs, or is checked, as written: the Python examples and the
command lines against a dovecote broker (only the ports are changed to the test broker's),
every TOML block loads as a configuration, `make` lines name targets that exist, `pip` lines
extras that exist. A block of another kind fails the test until this file knows it."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

from brokers import BrokerProcess, running_broker
from dovecote.client import Connection, ConnectionFactory
from dovecote.config import load_config

ROOT = Path(__file__).parent.parent.parent
README = ROOT / "README.md"
VENV_BIN = Path(sys.executable).parent
BLOCK = re.compile(r"^```([^\n]*)\n(.*?)^```$", flags=re.DOTALL | re.MULTILINE)
TOOLS_WITH_URL = {"produce", "consume", "browse", "purge", "dstat"}
RESULTS = ROOT / "bench" / "RESULTS.md"
SUMMARY_ROW = re.compile(
    r"^\| (.*: msg/s|idle RSS MiB|peak RSS MiB|start time s.*|restart to .*) \|"
)


def blocks(kind: str) -> list[str]:
    """The blocks whose info string starts with ``kind`` (```toml tls is a toml block)."""
    return [
        body for info, body in BLOCK.findall(README.read_text()) if info.split(" ")[:1] == [kind]
    ]


def commands(script: str) -> list[str]:
    """A sh block's command lines: continuations joined, comments and blank lines left out."""
    joined = script.replace("\\\n", " ")
    lines = [line.split(" #", 1)[0].strip() for line in joined.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def test_every_block_is_of_a_kind_this_file_checks() -> None:
    kinds = {info.split(" ")[0] for info, _ in BLOCK.findall(README.read_text())}
    # A block with no info string is a picture (the Layout), not code.
    assert kinds <= {"python", "sh", "toml", ""}, kinds
    assert blocks("python") and blocks("sh") and blocks("toml")


def test_readme_python_examples_run(tmp_path: Path) -> None:
    outputs = []
    with running_broker(workdir=tmp_path) as broker:
        for code in blocks("python"):
            code = code.replace("127.0.0.1:61616", f"127.0.0.1:{broker.openwire_port}")
            code = code.replace('("127.0.0.1", 61613)', f'("127.0.0.1", {broker.stomp_port})')
            result = subprocess.run([sys.executable, "-c", code], capture_output=True,
                                    text=True, timeout=60, check=False)  # fmt: skip
            assert result.returncode == 0, f"{code}\n{result.stderr}"
            outputs.append(result.stdout)
    assert "hello\n" in outputs  # the STOMP example received what it sent
    assert "order 1\n" in outputs  # the client example printed what it sent and received


def test_readme_toml_blocks_load(tmp_path: Path) -> None:
    for i, text in enumerate(blocks("toml")):
        path = tmp_path / f"block{i}.toml"
        path.write_text(text)
        load_config(path)  # raises ConfigError naming the key at fault


def run_tool_line(line: str, tmp_path: Path, openwire: int, console: int) -> str:
    """A dovecote command line (possibly fed by a pipe) against the test broker."""
    words = shlex.split(line)
    tool = words[words.index(".venv/bin/dovecote") + 1]
    if tool in TOOLS_WITH_URL and "--url" not in words:
        line = line.replace(f"dovecote {tool}", f"dovecote {tool} --url tcp://127.0.0.1:{openwire}")
    line = line.replace("127.0.0.1:8161", f"127.0.0.1:{console}")
    line = line.replace(".venv/bin/", f"{VENV_BIN}/")
    result = subprocess.run(["bash", "-o", "pipefail", "-c", line], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert result.returncode == 0, f"{line}\n{result.stdout}\n{result.stderr}"
    return result.stdout + result.stderr


def check_make(words: list[str]) -> None:
    """make's dry run: the target exists and its variables parse (nothing is installed)."""
    # Not make test's MAKEFLAGS/MAKELEVEL, under which this test may run.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    command = ["make", "--no-print-directory", "-n", *words[1:]]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=60, check=False)  # fmt: skip
    assert result.returncode == 0, f"{words}\n{result.stderr}"
    if any(w.startswith("CONFIG=") for w in words):
        assert "--config" in result.stdout


def check_pip(words: list[str]) -> None:
    """pip install dist/<wheel>[extras]: the wheel's name is the one make dist gives (the
    project's name and version), the extras are the project's."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wheel, _, extras = words[-1].partition("[")
    name, version = Path(wheel).name.split("-")[:2]
    assert (wheel.startswith("dist/"), name, version) == (True, project["name"], project["version"])
    assert wheel.endswith(".whl"), wheel
    for extra in filter(None, extras.rstrip("]").split(",")):
        assert extra in project["optional-dependencies"], extra


def check_pipeline(words: list[str]) -> None:
    """The Spark example takes minutes: tests/spark/test_example_pipeline.py runs it
    (with a test broker); here its options must be ones the script has."""
    source = (ROOT / words[1]).read_text()
    for option in (w for w in words[2:] if w.startswith("--")):
        assert f'"{option}"' in source, option


def test_readme_command_lines_run(tmp_path: Path) -> None:
    outputs = []
    with running_broker(workdir=tmp_path) as broker:
        for script in blocks("sh"):
            for line in commands(script):
                words = shlex.split(line)
                if words[0] == "make":
                    check_make(words)
                elif words[:2] == ["pip", "install"]:
                    check_pip(words)
                elif words[:2] == [".venv/bin/python", "examples/pipeline.py"]:
                    check_pipeline(words)
                elif ".venv/bin/dovecote" in words:
                    outputs.append(run_tool_line(line, tmp_path, broker.openwire_port,
                                                 broker.console_port))  # fmt: skip
                elif words[0] == "curl":
                    line = line.replace("127.0.0.1:8161", f"127.0.0.1:{broker.console_port}")
                    line = line.replace("curl ", "curl --fail --silent --show-error ", 1)
                    result = subprocess.run(["bash", "-c", line], capture_output=True,
                                            text=True, timeout=30, check=False)  # fmt: skip
                    assert result.returncode == 0, f"{line}\n{result.stderr}"
                    outputs.append(result.stdout)
                else:
                    raise AssertionError(f"no rule in test_readme.py for: {line}")
    text = "\n".join(outputs)
    assert "Produced: 100 messages" in text and "Consumed: 100 messages" in text
    assert "Browsed: 5 messages" in text
    assert "scrypt$" in text  # dovecote passwd printed a hash
    assert (tmp_path / "dovecote.toml").exists()  # import-config wrote the file


def connect(broker: BrokerProcess) -> Connection:
    return ConnectionFactory(f"tcp://127.0.0.1:{broker.openwire_port}").create_connection()


def test_readme_three_broker_line_carries_messages_both_ways() -> None:
    """The Networks section's a - b - c example, as written (b's address made the test's):
    a producer on one end reaches a consumer on the other, both ways."""
    (line,) = [b for b in blocks("toml") if 'name = "a-to-b"' in b]
    with running_broker('[broker]\nname = "b"\n') as b:
        a_toml = line.replace("b.example:61616", f"127.0.0.1:{b.openwire_port}")
        c_toml = a_toml.replace('name = "a"', 'name = "c"').replace('"a-to-b"', '"c-to-b"')
        with running_broker(a_toml) as a, running_broker(c_toml) as c:
            for sender, receiver in ((a, c), (c, a)):
                name = f"orders.from{sender.openwire_port}"
                with connect(receiver) as there, connect(sender) as here:
                    there.start()
                    session = there.create_session()
                    consumer = session.create_consumer(session.queue(name))
                    session = here.create_session()
                    session.create_producer(session.queue(name)).send("across")
                    # The message waits on the sender's broker until the demand arrives.
                    message = consumer.receive(30)
                    assert message is not None and message.body == "across"


BEGIN_TABLE = (
    "<!-- from bench/RESULTS.md; after make bench:"
    " PYTHONPATH=tests .venv/bin/python tests/integration/test_readme.py --refresh -->"
)
END_TABLE = "<!-- end of the rows from bench/RESULTS.md -->"


def performance_summary(results: str) -> str:
    """The README's performance table: the harness's caveat (a quoted line, when the machine
    was busy), its header and its throughput, memory and start rows, as bench/harness.py
    wrote them in bench/RESULTS.md, with the footnotes those rows cite."""
    lines = results.splitlines()
    caveat = [line for line in lines if line.startswith("> ")]
    header = next(i for i, line in enumerate(lines) if line.startswith("| Workload"))
    rows = [line for line in lines[header + 2 :] if SUMMARY_ROW.match(line)]
    notes = [line for line in lines if re.match(r"- \[\d+\] ", line)]
    notes = [n for n in notes if any(n[2 : n.index("]") + 1] in row for row in rows)]
    parts = [*caveat, *([""] if caveat else []), *lines[header : header + 2], *rows]
    return "\n".join(parts + (["", *notes] if notes else []))


def table_span(readme: str) -> tuple[int, int]:
    """Where the rows from bench/RESULTS.md sit in the README, between its two markers."""
    start = readme.index(BEGIN_TABLE + "\n") + len(BEGIN_TABLE) + 1
    return start, readme.index("\n" + END_TABLE, start)


def test_readme_performance_table_is_the_harness_table() -> None:
    readme = README.read_text()
    start, end = table_span(readme)
    assert readme[start:end] == performance_summary(RESULTS.read_text())


if __name__ == "__main__" and sys.argv[1:] == ["--refresh"]:
    text = README.read_text()
    start, end = table_span(text)
    README.write_text(text[:start] + performance_summary(RESULTS.read_text()) + text[end:])
