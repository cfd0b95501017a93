"""The floor under every app: no models, no views. The model gateway, background jobs, configuration,
free text and units, prompts, rate limits, pagination, API schema bases and Markdown rendering."""
