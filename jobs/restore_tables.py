"""spark-submit entry point: ``spark-submit jobs/restore_tables.py --inventory-table ... --table ...``.

Same arguments as ``inventory-vacuum restore``.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from jobs.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["restore", *sys.argv[1:]]))
