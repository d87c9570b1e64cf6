"""One process of a multi-process (``jax.distributed``) JAX job that publishes its shardings.

Run one per process, e.g. two on this machine with 4 CPU devices each::

    python examples/multihost.py --process-id 0 --num-processes 2 --coordinator 127.0.0.1:12355 &
    python examples/multihost.py --process-id 1 --num-processes 2 --coordinator 127.0.0.1:12355

Each builds global arrays (with ``jax.make_array_from_callback`` and with
``multihost_utils.host_local_array_to_global_array``), captures what it can address and publishes
it under the run id process 0 draws and broadcasts; the dashboard merges the processes' parts and
every process prints the same link. On CPU the cross-process collectives use gloo.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="one process of a multi-process JAX job that publishes its shardings")
    p.add_argument("--process-id", type=int, required=True)
    p.add_argument("--num-processes", type=int, required=True)
    p.add_argument("--coordinator", required=True, help="host:port of process 0's coordination service")
    p.add_argument("--devices-per-process", type=int, default=4, help="CPU devices per process")
    p.add_argument("--url", default=os.environ.get("SHARDSCOPE_URL", "http://127.0.0.1:8000"), help="the dashboard")
    p.add_argument("--name", default="multihost example")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax

    jax.config.update("jax_num_cpu_devices", args.devices_per_process)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=args.coordinator,
        num_processes=args.num_processes,
        process_id=args.process_id,
        initialization_timeout=60,
    )
    import numpy as np
    from jax.experimental import multihost_utils
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from sharding_core import PublishError, publish

    n = jax.device_count()
    mesh = jax.make_mesh((args.num_processes, n // args.num_processes), ("data", "model"))
    full = np.arange(8 * args.num_processes * 16, dtype=np.float32).reshape(8 * args.num_processes, 16)
    # A global array from a callback that serves each addressable device its block.
    activations = jax.make_array_from_callback(full.shape, NamedSharding(mesh, P("data", "model")), lambda i: full[i])
    # Each process contributes its own rows of the batch.
    local = np.full((8, 16), args.process_id, dtype=np.float32)
    batch = multihost_utils.host_local_array_to_global_array(local, mesh, P("data"))
    weights = jax.make_array_from_callback(
        (16, 32), NamedSharding(mesh, P(None, "model")), lambda i: np.ones((16, 32))[i]
    )
    tree = {"activations": activations, "batch": batch, "weights": weights}
    try:
        url = publish(tree, args.name, args.url)
    except PublishError as e:
        print(f"process {args.process_id}: error [{e.code}]: {e}", file=sys.stderr, flush=True)
        return 1
    print(f"process {args.process_id}: {url}", flush=True)
    jax.distributed.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
