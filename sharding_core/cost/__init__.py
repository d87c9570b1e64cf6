"""Cost estimates on real hardware figures (:mod:`sharding_core.hardware`): every collective's time
(:mod:`.collectives`: the formulas of "How to Scale Your Model" on the device set's topology), a kernel's
roofline and HBM fit (:mod:`.roofline`), and two runs or snapshots side by side (:mod:`.compare`).

Everything here is an estimate with its formula and inputs; where the model has no figures (CPU
device sets, a figure no public source gave) it says why instead of inventing one. Pure data in and
out: no JAX import."""
