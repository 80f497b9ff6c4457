"""``python -m actionspace.bench``: the same as ``actionspace bench``."""

from actionspace.bench.cli import main

main()
