"""The query log as its readers see it: the browser pages, CSV export, dashboard, API and feedback.

Who may read which rows is decided once, in ``selectors``; every page and operation goes through it.
"""
