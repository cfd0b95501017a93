"""What a cold `foundry` process imports: a question embedded by a local model loads no LLM client.

litellm, scipy and the MCP SDK take seconds of CPU to import; a `foundry query` answered by the local
models needs none of them (bench/cold_query.py measures the whole start). Each check runs in a new
interpreter, since this test process has imported them all long ago.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

HEAVY = ["litellm", "openai", "scipy", "mcp"]

# The CLI with every sub-command's parser, then one local embedding (a stub embedder: the real one
# would load torch, which this test is not about), then the modules that got imported.
CODE = f"""
import json, sys
import django
django.setup()
import foundry_site.management.commands.foundry
from core import llm
from core.llm import local

class Stub:
    def encode(self, texts, batch_size=64):
        import numpy as np
        return np.ones((len(texts), 3))

local._local.embedders["all-minilm-l6-v2"] = Stub()
with llm.record_calls() as calls:
    vectors = llm.embed(["a question"], model="local/all-minilm-l6-v2", kind="query")
loaded = [name for name in {HEAVY!r} if name in sys.modules]
print(json.dumps({{"vectors": vectors, "embedding_calls": calls.embedding_calls, "loaded": loaded}}))
"""


def test_a_local_embedding_from_the_cli_imports_no_llm_client(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "foundry_site.settings",
        "FOUNDRY_HOME": str(tmp_path),
        "PYTHONPATH": str(settings.BASE_DIR),
    }
    done = subprocess.run(
        [sys.executable, "-c", CODE], env=env, cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["loaded"] == []
    assert found["embedding_calls"] == 1
    assert [round(v, 6) for v in found["vectors"][0]] == [round(3**-0.5, 6)] * 3


def test_names_that_need_litellm_load_it_on_first_use() -> None:
    from core import llm

    assert issubclass(llm.CustomLLM, object) and llm.register_provider.__module__ == "core.llm.provider"
    assert any(error.__module__.startswith("litellm") for error in llm.TRANSIENT_ERRORS)
