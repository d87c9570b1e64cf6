"""Cost estimates on real hardware figures (:mod:`sharding_core.hardware`): every collective's time
(:mod:`.collectives`: the formulas of "How to Scale Your Model" on the device set's topology, as a bound and
an expected time), the efficiencies the expected time uses, fitted to published measurements on a declared
training split and scored on held-out ones (:mod:`.efficiency`, :mod:`.measurements`, :mod:`.accuracy`) or
measured on the user's own devices (:mod:`.calibrate`), one collective by name (:mod:`.estimate`), a program's
roofline and HBM fit (:mod:`.roofline`), and two runs or
snapshots side by side (:mod:`.compare`). :mod:`.annotate` adds them where a result is read: the HLO reader
(:mod:`sharding_core.hlo`) gives facts only.

Everything here is an estimate with its formula and inputs; where the model has no figures (CPU device sets,
a figure no public source gave) it says why instead of inventing one. Pure data in and out: no JAX import.
docs/cost-model.md explains every formula, its source and its measured error."""
