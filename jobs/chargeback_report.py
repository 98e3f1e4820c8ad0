"""spark-submit entry point: ``spark-submit jobs/chargeback_report.py --inventory-table ... --tables ...``.

Same arguments as ``inventory-vacuum chargeback``. (Not named ``chargeback.py``: spark-submit puts
this folder first on ``sys.path``, where such a script would hide the ``chargeback`` package.)
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from jobs.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["chargeback", *sys.argv[1:]]))
