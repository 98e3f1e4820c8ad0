"""Thin entry points: the ``inventory-vacuum`` command line and the ``spark-submit`` jobs."""
