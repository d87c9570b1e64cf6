"""Snapshots as data: the versioned format :func:`sharding_core.capture` makes (:mod:`.format`) and what
the dashboard computes from it — Flax rules (:mod:`.rules`), per-device memory (:mod:`.memory`), the merge
of a multi-process run (:mod:`.merge`), the diff of two snapshots (:mod:`.diff`) and the what-if of other
rules (:mod:`.whatif`)."""
