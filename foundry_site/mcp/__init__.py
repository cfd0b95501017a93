"""Foundry as an MCP server: tools and resources (``server``), their logic (``tools``), the /mcp bridge (``http``)."""
