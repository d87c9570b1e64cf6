"""Shardscope for coding agents: a Model Context Protocol server (``shardscope mcp``, ``shardscope serve --mcp``).

:mod:`.server` defines the tools and resources on the official SDK, :mod:`.answers` the answers they share with
the CLI's ``--json``, :mod:`.jobs` and :mod:`.worker` the compiling calls' worker processes, :mod:`.http` the
streamable-HTTP transport mounted in the dashboard behind its token. Needs the ``mcp`` extra
(``pip install 'shardscope[mcp]'``); the rest of Shardscope does not import this package.
"""
