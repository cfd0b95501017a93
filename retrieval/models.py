"""Query log and search proxies (see search.py)."""
