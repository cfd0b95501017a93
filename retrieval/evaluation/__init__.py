"""Evaluation of Foundry on third-party data: metrics, BEIR and SQuAD loaders, eval indexes, reports.

The answer-level runner needs generation and so lives in ``generation/evaluation.py``;
everything here depends only on ``sources`` and ``retrieval``.
"""
