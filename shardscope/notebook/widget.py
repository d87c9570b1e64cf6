"""The notebook widget: an anywidget whose front end is the dashboard's own modules (bundled by
:mod:`shardscope.notebook.bundle`), fed a :class:`~shardscope.notebook.View`.

Imported only by :func:`shardscope.notebook.show` in a notebook (it imports anywidget, hence
ipywidgets and IPython). Everything crosses as synced traits, which every anywidget host carries
(JupyterLab, Notebook 7, Colab, VS Code, marimo):

* ``payload`` (bytes, kernel → page): the view's JSON (:meth:`View.payload`), a binary buffer;
* ``spec`` (page → kernel): the text in the PartitionSpec box; the kernel lays it out with the view's
  ``relayout`` (``Layout.from_named`` for a device set) and answers with a new ``payload``, or with
  ``error``: the error as ``/api/layout`` gives it (``{"code", "message", "hint", ...}``);
* ``dashboard`` (kernel → page): the dashboard URL, or "" (then the widget has no Publish button);
  ``publish_requests`` (page → kernel) counts its clicks; ``link`` / ``link_error`` answer.
"""

from __future__ import annotations

from typing import Any

import anywidget
import traitlets

from sharding_core.errors import ShardingError
from shardscope.notebook import View
from shardscope.notebook.bundle import widget_css, widget_esm


class ShardscopeWidget(anywidget.AnyWidget):
    """``shardscope.show(obj)`` in a notebook: the grid and tables of the dashboard, drawn inline."""

    _esm = widget_esm()
    _css = widget_css()

    payload = traitlets.Bytes(b"").tag(sync=True)
    spec = traitlets.Unicode("").tag(sync=True)
    error = traitlets.Dict().tag(sync=True)
    dashboard = traitlets.Unicode("").tag(sync=True)
    publish_requests = traitlets.Int(0).tag(sync=True)
    link = traitlets.Unicode("").tag(sync=True)
    link_error = traitlets.Dict().tag(sync=True)

    def __init__(self, view: View, *, dashboard: str = "", token: str | None = None, timeout: float = 60.0) -> None:
        super().__init__(
            payload=view.payload(),
            spec=view.spec_text or "",
            dashboard=dashboard if view.publish is not None else "",
        )
        self.view = view
        self._token = token
        self._timeout = timeout
        self.observe(self._on_spec, names="spec")
        self.observe(self._on_publish, names="publish_requests")

    def _on_spec(self, change: dict[str, Any]) -> None:
        relayout = self.view.relayout
        text = str(change["new"])
        if relayout is None:
            return
        if text == self.view.spec_text:  # back to the spec on show (after an error, say)
            self.error = {}
            return
        try:
            layout = relayout(text)
        except ShardingError as e:
            self.error = e.to_dict()
            return
        except Exception as e:  # noqa: BLE001 - a trait observer's exception only reaches the kernel's log
            self.error = {"code": "internal_error", "message": f"{type(e).__name__}: {e}"}
            return
        self.view.layout = layout
        self.view.spec_text = text
        self.payload = self.view.payload()
        self.error = {}

    def _on_publish(self, change: dict[str, Any]) -> None:
        if not self.dashboard or self.view.publish is None:
            return
        try:
            self.link = self.view.publish(self.view, self.dashboard, self._token, self._timeout)
            self.link_error = {}
        except ShardingError as e:  # PublishError: unreachable, refused, bad token or URL
            self.link_error = e.to_dict()

    def __repr__(self) -> str:
        return f"<shardscope widget: {self.view.name}>"
