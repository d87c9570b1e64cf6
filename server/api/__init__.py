"""The JSON API, one router per feature (``meta``, ``layout``, ``topology``, ``links``, ``snapshots``,
``kernels``, and the cost estimates' ``reshard``, ``compare`` and ``cost``), each with its own request and response
models; the shapes several features share are in :mod:`.schema` and the dependencies in :mod:`.deps`.
Routes validate, call ``sharding_core`` and let its errors translate; they compute nothing themselves."""

from server.api import compare, cost, kernels, layout, links, meta, reshard, snapshots, topology

ROUTERS = (
    meta.router,
    layout.router,
    topology.router,
    links.router,
    snapshots.router,
    kernels.router,
    reshard.router,
    compare.router,
    cost.router,
)
"""Every feature's router, in the order the app includes them."""
