"""The JSON API, one router per feature (``meta``, ``layout``, ``topology``, ``links``, ``snapshots``,
``kernels``, and the cost estimates' ``reshard``, ``compare`` and ``cost``), each with its own request and response
models; the shapes several features share are in :mod:`.schema` and the dependencies in :mod:`.deps`.
Routes validate, call a service (:mod:`server.services`) or ``sharding_core`` and let its errors translate;
they compute nothing themselves, and no router imports another (the app lists them: ``server.app.ROUTERS``)."""
