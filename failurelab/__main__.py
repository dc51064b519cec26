"""`python -m failurelab`: the same as the `failurelab` command."""

from .cli import main

raise SystemExit(main())
