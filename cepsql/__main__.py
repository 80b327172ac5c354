"""``python -m cepsql``: the same command line as the ``cepsql`` script."""
from cepsql.api.cli import main

raise SystemExit(main())
