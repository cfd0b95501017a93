"""The spec quick start of docs/specs.md (the README links it) runs as written: fresh clone files, a new home."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.reliability.test_db_faults import CLI, REPO, foundry_env

PAGE = REPO / "docs" / "specs.md"
SECTION = "## Quick start"


def quick_start() -> list[str]:
    """The first bash block of the spec page's quick start, line by line."""
    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index(SECTION) :]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert block, "the spec quick start has no bash block"
    return [line for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]


def test_quick_start_block_uses_the_shipped_example() -> None:
    lines = quick_start()
    assert any("specs import examples/wiring-guide.md --as alice" in line for line in lines)
    assert (REPO / "examples" / "wiring-guide.md").is_file()


def test_readme_quick_start_runs_as_written(tmp_path: Path) -> None:
    env = foundry_env(tmp_path / "home", tmp_path / "home" / "foundry.sqlite3")
    outputs = []
    for line in quick_start():
        words = shlex.split(line)
        if words[0] == "export":
            name, _, value = words[1].partition("=")
            env[name] = value
            continue
        assert words[0] == ".venv/bin/foundry", line
        done = subprocess.run(
            [sys.executable, "-c", CLI, *words[1:]], env=env, cwd=REPO, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, (line, done.stdout, done.stderr)
        outputs.append(done.stdout)
    joined = "\n".join(outputs)
    assert "wiring-guide: created (v1, draft)" in joined and "wiring-guide v1: approved" in joined
    assert "Wiring the AX-200 sensor bus" in joined
