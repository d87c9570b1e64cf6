"""Where the dashboard's static files are: one answer for the server and the notebook widget.

The front end (``frontend/``: ES modules, stylesheets, the widget's entry module) has no build step.
In a checkout it is the repository's ``frontend/``; a wheel carries it as ``shardscope/frontend``
(pyproject's ``force-include``), beside the notebook host that bundles it (:mod:`shardscope.notebook`).
Standard library only: the server and a training script's ``show`` both import this.
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent

PACKAGED_FRONTEND = _HERE / "frontend"
"""The front end inside an installed wheel."""
CHECKOUT_FRONTEND = _HERE.parent / "frontend"
"""The front end of a source checkout (an editable install)."""


def frontend_dir() -> Path:
    """The dashboard's static files: the wheel's copy when installed, else the checkout's ``frontend/``."""
    return PACKAGED_FRONTEND if PACKAGED_FRONTEND.is_dir() else CHECKOUT_FRONTEND
