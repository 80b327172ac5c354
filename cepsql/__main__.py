"""``python -m cepsql``: the same command line as the ``cepsql`` script."""
from .cli import main

raise SystemExit(main())
