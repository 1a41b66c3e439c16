"""The README's Python examples run as written, against a dovecote broker (only the ports
are changed to the test broker's)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from brokers import running_broker

README = Path(__file__).parent.parent.parent / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


def test_readme_python_examples_run(tmp_path: Path) -> None:
    blocks = python_blocks()
    assert len(blocks) >= 2
    outputs = []
    with running_broker(workdir=tmp_path) as broker:
        for code in blocks:
            code = code.replace("127.0.0.1:61616", f"127.0.0.1:{broker.openwire_port}")
            code = code.replace('("127.0.0.1", 61613)', f'("127.0.0.1", {broker.stomp_port})')
            result = subprocess.run([sys.executable, "-c", code], capture_output=True,
                                    text=True, timeout=60, check=False)  # fmt: skip
            assert result.returncode == 0, f"{code}\n{result.stderr}"
            outputs.append(result.stdout)
    assert "order 1\n" in outputs  # the client example printed what it sent and received
