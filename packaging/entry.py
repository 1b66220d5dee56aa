"""Entry point of the frozen binary: the same CLI as the installed package."""

import multiprocessing
import sys

from edge_infer.cli import main

if __name__ == "__main__":
    multiprocessing.freeze_support()
    sys.exit(main())
