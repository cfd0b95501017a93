"""scripts/import_cycles.py (run by `make lint`): which imports make a circle, on small made-up projects."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_cycles", ROOT / "scripts" / "import_cycles.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def project(tmp_path: Path, files: dict[str, str], packages: str = '["app"]') -> Path:
    (tmp_path / "pyproject.toml").write_text(f"[tool.importlinter]\nroot_packages = {packages}\n")
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return tmp_path


def test_an_import_inside_a_function_closes_a_circle(checker: ModuleType, tmp_path: Path, capsys) -> None:
    root = project(
        tmp_path,
        {
            "app/__init__.py": "",
            "app/services.py": "def run():\n    from app.tasks import job\n    job()\n",
            "app/tasks.py": "from app import services\n",
        },
    )
    assert checker.main(root) == 1
    err = capsys.readouterr().err
    assert "1 import circle(s)" in err
    assert "app.services -> app.tasks  (app/services.py:2)" in err
    assert "app.tasks -> app.services  (app/tasks.py:1)" in err


def test_a_type_checking_import_counts(checker: ModuleType, tmp_path: Path) -> None:
    root = project(
        tmp_path,
        {
            "app/__init__.py": "",
            "app/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from app.b import B\n",
            "app/b.py": "from . import a\n",
        },
    )
    graph = checker.import_graph(root, ["app"])
    assert checker.circles(graph) == [["app.a", "app.b"]]


def test_a_package_init_and_its_submodule(checker: ModuleType, tmp_path: Path) -> None:
    """The submodule names the package's own code: a circle. Naming a sibling submodule is none."""
    files = {
        "pkg/__init__.py": "from pkg.pdf import read\nHELPER = 1\n",
        "pkg/blocks.py": "",
        "pkg/pdf.py": "from pkg.blocks import Block\n",
    }
    root = project(tmp_path, files, '["pkg"]')
    assert checker.circles(checker.import_graph(root, ["pkg"])) == []
    (root / "pkg/pdf.py").write_text("from pkg import HELPER\n")
    assert checker.circles(checker.import_graph(root, ["pkg"])) == [["pkg", "pkg.pdf"]]


def test_relative_imports_and_modules_outside_the_project(checker: ModuleType, tmp_path: Path, capsys) -> None:
    root = project(
        tmp_path,
        {
            "app/__init__.py": "",
            "app/sub/__init__.py": "",
            "app/sub/x.py": "import json\nfrom ..y import thing\n",
            "app/y.py": "import app.sub.x as x\nfrom django.db import models\n",
            "lib/__init__.py": "from app import y\n",
        },
    )
    graph = checker.import_graph(root, ["app"])
    assert {e.target for e in graph["app.sub.x"]} == {"app.y"}
    assert checker.circles(graph) == [["app.sub.x", "app.y"]]
    (root / "app/y.py").write_text("thing = 1\n")
    assert checker.main(root) == 0
    assert "no import circle: 4 modules, 1 imports" in capsys.readouterr().out
