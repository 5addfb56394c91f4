"""Kwker's benchmark: real ML inputs (the corpus) timed through torch and Kwker.

`python -m kwker bench --help` (or `kwker.bench.runner.main`) runs it.
"""
