"""``python -m projections``: the same as the ``ari-ledger`` command."""

from projections.adapters.cli import main

raise SystemExit(main())
