"""An OpenAI-compatible chat API under ``/v1/`` (models, chat completions), with Foundry's bearer tokens."""
