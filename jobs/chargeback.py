"""spark-submit entry point: ``spark-submit jobs/chargeback.py --inventory-table ... --tables ...``.

Same arguments as ``inventory-vacuum chargeback``.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from jobs.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["chargeback", *sys.argv[1:]]))
