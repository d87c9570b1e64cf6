"""The services under the routers: what the routes share and the state that outlives a request.

A router parses a request, calls a service (or the domain) and answers; routers import services, never
each other. Each service is made once per app by :func:`server.app.create_app` and kept on
``app.state`` (the routes get it through the dependencies in :mod:`server.api.deps`):

* :class:`~server.services.snapshots.SnapshotRepository` (``app.state.snapshots``) — published snapshots
  and runs in the store: publishing, reading, merging, and the parsed and merged caches;
* :class:`~server.services.kernels.KernelRuns` (``app.state.runs``) — kernel runs and reshards: plans
  checked on the simulated devices, the worker pool they run in, and their refusals as errors;
* :mod:`server.services.links` — share links' payloads in the store.
"""
