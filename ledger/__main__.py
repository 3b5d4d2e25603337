"""``python -m ledger``: the same as the ``ari-ledger`` command."""
from ledger.cli import main

raise SystemExit(main())
