"""One module per command: its name, one-line summary, example, options and body.

Each module has ``NAME``, ``SUMMARY``, ``EXAMPLE``, ``add_arguments(parser)`` and
``run(args, output) -> exit code``; :mod:`jobs.cli` builds the parser from :data:`COMMANDS`.
"""

from __future__ import annotations

from jobs.commands import chargeback, demo, fetch_jars, iam_policy, ingest, restore, snapshot, vacuum

COMMANDS = (ingest, vacuum, restore, chargeback, snapshot, iam_policy, demo, fetch_jars)
