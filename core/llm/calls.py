"""How each model call is made: the ``llm`` settings (time limit, API base), local or remote."""

from __future__ import annotations

from typing import Any


def _settings_llm() -> Any:
    from django.conf import settings

    return settings.FOUNDRY.llm


def _call_kwargs(model: str) -> dict[str, Any]:
    conf = _settings_llm()
    # max_retries=0: the provider SDK (openai's client retries twice by default, sleeping
    # on its own) must not retry inside our loop; ``_with_retries`` is the only one, so
    # llm.retries bounds the requests sent and every wait is chosen, and logged, there.
    kwargs: dict[str, Any] = {"timeout": conf.timeout_s, "max_retries": 0}
    if conf.api_base and not model.startswith("local/"):
        kwargs["api_base"] = conf.api_base
    return kwargs


def _remote(model: str) -> bool:
    """Whether ``model`` is reached over the network (not an in-process provider such as ``local/``)."""
    from core.llm.provider import litellm

    provider = model.partition("/")[0]
    return provider not in {e.get("provider") for e in litellm.custom_provider_map}
