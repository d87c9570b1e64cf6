"""The notebook widget: an anywidget whose front end is the dashboard's own panels (bundled by
:mod:`shardscope.notebook.bundle`, mounted by ``frontend/widget/host.js``), fed a
:class:`~shardscope.notebook.View`.

Imported only by :func:`shardscope.notebook.show` in a notebook (it imports anywidget, hence
ipywidgets and IPython). Everything crosses as synced traits, which every anywidget host carries
(JupyterLab, Notebook 7, Colab, VS Code, marimo):

* ``payload`` (bytes, kernel → page): the view's JSON (:meth:`View.payload`), a binary buffer;
* ``request`` (page → kernel): ``{"id", "method", "params"}`` — what the panel asks its host:
  ``layout`` (``{"spec", "shape", "dtype"}``: the array laid out again with the view's ``relayout``,
  with the checks and errors of ``/api/layout``) or ``whatif`` (``{"rules"}``: the snapshot under other
  Flax logical → mesh rules, as ``/api/snapshots/whatif`` answers);
* ``answer`` (bytes, kernel → page): ``{"id", "result"}``, or ``{"id", "error": {"code", "message",
  "hint", ...}}`` as the API gives errors;
* ``dashboard`` (kernel → page): the dashboard URL, or "" (then the widget has no Publish button);
  ``publish_requests`` (page → kernel) counts its clicks; ``link`` / ``link_error`` answer.
"""

from __future__ import annotations

import json
from typing import Any

import anywidget
import traitlets

from sharding_core.errors import BAD_SHAPE, ShardingError
from shardscope.notebook import View
from shardscope.notebook.bundle import widget_css, widget_esm

BAD_REQUEST = "bad_request"


class ShardscopeWidget(anywidget.AnyWidget):
    """``shardscope.show(obj)`` in a notebook: the dashboard's panels, drawn inline."""

    _esm = widget_esm()
    _css = widget_css()

    payload = traitlets.Bytes(b"").tag(sync=True)
    request = traitlets.Dict().tag(sync=True)
    answer = traitlets.Bytes(b"").tag(sync=True)
    dashboard = traitlets.Unicode("").tag(sync=True)
    publish_requests = traitlets.Int(0).tag(sync=True)
    link = traitlets.Unicode("").tag(sync=True)
    link_error = traitlets.Dict().tag(sync=True)

    def __init__(self, view: View, *, dashboard: str = "", token: str | None = None, timeout: float = 60.0) -> None:
        super().__init__(payload=view.payload(), dashboard=dashboard if view.publish is not None else "")
        self.view = view
        self._token = token
        self._timeout = timeout
        self.observe(self._on_request, names="request")
        self.observe(self._on_publish, names="publish_requests")

    def _on_request(self, change: dict[str, Any]) -> None:
        req = change["new"] or {}
        ident = req.get("id")
        try:
            result = self._answer(str(req.get("method", "")), req.get("params") or {})
        except ShardingError as e:
            self.answer = json.dumps({"id": ident, "error": e.to_dict()}).encode()
            return
        except Exception as e:  # noqa: BLE001 - a trait observer's exception only reaches the kernel's log
            error = {"code": "internal_error", "message": f"{type(e).__name__}: {e}"}
            self.answer = json.dumps({"id": ident, "error": error}).encode()
            return
        self.answer = b'{"id":' + json.dumps(ident).encode() + b',"result":' + result + b"}"

    def _answer(self, method: str, params: dict[str, Any]) -> bytes:
        """The JSON result of a request (UTF-8), or a :class:`ShardingError` saying what was wrong."""
        view = self.view
        if method == "layout" and view.kind == "layout" and view.relayout is not None:
            spec, shape, dtype = params.get("spec"), params.get("shape"), params.get("dtype")
            if not isinstance(spec, str) or not isinstance(dtype, str) or not isinstance(shape, list):
                raise ShardingError(BAD_SHAPE, "a layout request names a spec (text), a shape (a list) and a dtype")
            if not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
                raise ShardingError(BAD_SHAPE, f"an array shape is a list of integers, got {shape!r}"[:200])
            layout = view.relayout(spec, tuple(shape), dtype)
            view.layout = layout
            view.spec_text = spec
            return str(layout.json_text).encode()
        if method == "whatif" and view.kind == "snapshot" and view.snapshot is not None:
            from sharding_core.snapshot.whatif import whatif

            return json.dumps(whatif(view.snapshot, params.get("rules")), separators=(",", ":")).encode()
        raise ShardingError(BAD_REQUEST, f"this widget cannot answer {method[:40]!r}", hint="layout or whatif")

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
