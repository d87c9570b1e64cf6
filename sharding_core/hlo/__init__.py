"""The one reader of compiled HLO: collectives and their device groups in every spelling XLA prints
(:mod:`.text`), the mesh axes they run along (:mod:`.axes`), the JSON both the kernel lab and
``inspect_jit`` report (:mod:`.collectives`), and Shardy's sharding origins (:mod:`.origins`)."""
