"""Which mesh and rules to use: ``sharding_core.search(fn, devices, **options)`` and ``shardscope search``.

Named ``searching`` (not ``search``) so that ``sharding_core.search`` stays the function, as ``capturing`` keeps
``sharding_core.capture``.

* :mod:`.space` — the model read through its logical axes (a probe), meshes of named axes, rule sets, knobs;
* :mod:`.estimate` — the analytic estimate that orders the compiles (the scaling book's formulas, the cost model);
* :mod:`.compiling` — one candidate compiled through the one pipeline and read as a plan's figures;
* :mod:`.worker` and :mod:`.pool` — candidates compiled in bounded worker processes;
* :mod:`.remote` — or by a team's server, whose replicas share them (``server.services.searches``);
* :mod:`.rank` — the order, the pick, the Pareto front, what each candidate lost on, the rules to paste;
* :mod:`.run` — a search start to end. The pick's full plan is :func:`sharding_core.capturing.search`'s.

Every ranked figure is the compiled program's (XLA's memory, its collectives, the cost model's step time);
the estimate only decides what is compiled first.
"""
