"""spark-submit entry point: ``spark-submit jobs/vacuum_tables.py --inventory-table ... ``.

Same arguments as ``inventory-vacuum vacuum``.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from jobs.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["vacuum", *sys.argv[1:]]))
