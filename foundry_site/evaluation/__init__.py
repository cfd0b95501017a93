"""``foundry eval``: Foundry measured on third-party data (BEIR and SQuAD loaders, eval indexes,
retrieval and answer runs, metrics, reports). It sits over every app: it builds indexes with
``sources``, searches with ``retrieval`` and answers with ``generation``.
"""
