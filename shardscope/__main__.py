"""``python -m shardscope`` behaves as the ``shardscope`` command."""

from shardscope.cli import main

raise SystemExit(main())
