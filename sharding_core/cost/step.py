"""The expected step time: the compiled schedule replayed with each kind of work at a fitted efficiency.

The roofline (:mod:`sharding_core.cost.roofline`) is a lower bound: every term at the spec sheet's peak and
everything overlapped — the step "at 100 % MFU". This module gives the time a performance engineer can bet on,
from the compiled program's own schedule (:mod:`sharding_core.hlo.schedule`):

* **matmuls** (``dot``, ``convolution``, in fusions too) at ``matmul`` × the peak FLOP/s of their element
  type, each shape's contracted and output dimensions padded to the matrix unit's tile (128 on TPU v4, v5e and
  v5p; 256 on v6e and 7x; 64 on GPUs' tensor cores), and never faster than their own HBM traffic;
* **the rest** (elementwise fusions, reductions, copies, the optimizer's update) against HBM bandwidth at
  ``memory`` × the spec sheet's figure, plus ``launch`` seconds per instruction;
* **attention kernels** (Pallas flash and splash attention, forward and backward) at ``kernel`` × peak, their
  flops from their operands' shapes (causal: the blocks above the diagonal skipped); other custom kernels at
  their own ``cost_estimate`` or their HBM traffic;
* **collectives** at the cost model's expected time for each (:func:`sharding_core.cost.collectives.
  estimate_collective`'s ``expected_seconds``: fitted per operation and fabric), one at a time on the network;
* **overlap** as the schedule has it: an asynchronous collective runs from its start to its done while the
  instructions scheduled between them compute, and the program waits at the done only for what is left; a
  synchronous collective adds its whole time. A loop runs its body's timeline ``trips`` times (a collective
  started in one iteration and finished in the next overlaps both).

The four constants are fitted to published whole-step runs (:mod:`sharding_core.cost.runs`, training split
only; ``bench/bench_steps.py`` and :func:`sharding_core.cost.step_fit.fit`), per platform. A calibrate profile
(``profile["matmul"]["efficiency"]``: achieved / peak on large matmuls, measured on the user's devices) replaces
the fitted matmul efficiency, and the result says which it used.

Pure arithmetic on facts: no JAX import.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from sharding_core.hardware import DeviceFigures, hbm_bandwidth_per_device, peak_flops

__all__ = ["FITTED", "Efficiency", "collective_seconds", "expected_step"]


@dataclasses.dataclass(frozen=True)
class Efficiency:
    """Achieved / peak per kind of work, and seconds per instruction (see the module docstring)."""

    matmul: float
    memory: float
    kernel: float
    launch: float

    def json(self) -> dict[str, float]:
        return dataclasses.asdict(self)


# Fitted by sharding_core.cost.step_fit.fit_training on the training runs of sharding_core/cost/runs.py (the
# stored compile facts of bench/run_facts.json.gz); tests/test_cost_step.py refits and compares. ``kernel`` sits
# at the grid's top and ``launch`` at its bottom: the training runs ask for faster attention kernels and no
# per-instruction cost (docs/cost-model.md, "Whole steps", says what that means).
FITTED: dict[str, Efficiency] = {
    "tpu": Efficiency(matmul=0.81, memory=0.64, kernel=1.0, launch=0.0),
}
FITTED_ON = {"tpu": "20 published TPU training runs (the training split of sharding_core/cost/runs.py)"}
"""What each platform's constants were fitted to (a platform without its own borrows the TPU's and says so)."""

_TILE = {"v4": 128, "v5e": 128, "v5p": 128, "v6e": 256, "7x": 256}
_HLO_DTYPES = {"bf16": "bfloat16", "f32": "float32", "f16": "float16", "s8": "int8", "u8": "int8",
               "f8e4m3fn": "fp8", "f8e5m2": "fp8"}  # fmt: skip
_ATTENTION = re.compile(r"(flash|splash|mha)", re.I)
_BACKWARD_DKV = re.compile(r"(dkv|bwd_dkv)", re.I)
_BACKWARD_DQ = re.compile(r"(_dq|bwd_dq)", re.I)
_BACKWARD = re.compile(r"(bwd|backward|dkv|_dq|no_residuals)", re.I)
_BLOCK = re.compile(r"block_q(?:_major)?_(\d+)")


def tile(hw: DeviceFigures) -> int:
    """The matrix unit's side: TPU MXUs are 128 × 128 up to v5p, 256 × 256 from v6e (Trillium); 64 for a GPU's
    tensor-core tile."""
    return _TILE.get(hw.name, 128) if hw.kind == "tpu" else 64


def _pad(d: int, t: int) -> float:
    return d / (math.ceil(d / t) * t) if d > 0 else 1.0


def attention_flops(name: str, dims: Sequence[Sequence[int]], fused_backward: bool = False) -> float | None:
    """The flops a Pallas attention kernel does, from its operands ([b, h, s, d] on TPU, [b, s, h, d] from the
    Triton kernel), or None for another kernel: a forward pass is two matmuls over the causal part of the
    S × S scores, the dK/dV pass four (five when it computes dQ too: ``fused_backward``, splash attention's fused
    backward kernel), the dQ pass three, Triton's backward five. Causal: of ``n × n`` blocks the ``n (n + 1) / 2``
    on or below the diagonal run, ``n`` the kernel's block grid (a splash kernel's block-mask operand is
    ``[heads, q blocks, kv blocks]``; a flash kernel names its blocks; else blocks of 512)."""
    if not _ATTENTION.search(name) or len(dims) < 2 or len(dims[0]) != 4 or len(dims[1]) != 4:
        return None
    q, k = dims[0], dims[1]
    triton = "mha_" in name and "splash" not in name and "flash" not in name
    if triton:  # [b, s, h, d]
        b, sq, h, d = q
        skv = k[1]
    else:
        b, h, sq, d = q
        skv = k[2]
    if _BACKWARD_DKV.search(name):
        matmuls = 5 if fused_backward else 4
    elif _BACKWARD_DQ.search(name):
        matmuls = 3
    elif _BACKWARD.search(name) or (triton and "bwd" in name):
        matmuls = 5
    else:
        matmuls = 2
    blocks = next((int(t[2]) for t in dims[2:] if len(t) == 3 and t[1] > 0 and t[2] > 0 and sq % t[1] == 0
                   and skv % t[2] == 0 and t[1] == t[2]), 0)  # fmt: skip
    if not blocks:
        m = _BLOCK.search(name)
        blocks = max(1, skv // min(int(m.group(1)) if m else 512, max(skv, 1)))
    causal = (blocks + 1) / (2 * blocks)
    return 2.0 * matmuls * b * h * sq * skv * d * causal


@dataclasses.dataclass
class _Hw:
    peaks: dict[str, float]
    bandwidth: float
    tile: int
    fused_backward: bool = False  # the program's splash backward has no separate dQ kernel


def hw_for(hw: DeviceFigures, schedule: Mapping[str, Any]) -> _Hw:
    """The figures a replay of ``schedule`` reads: ``hw``'s, and whether its splash backward is fused (a ``dkv``
    kernel and no ``dq`` kernel anywhere in the program)."""
    names = {k[0] for seq in (schedule.get("sequences") or {}).values() for e in seq if e[0] == "work"
             for k in e[1].get("kernels") or []}  # fmt: skip
    splash = [n for n in names if "splash" in n]
    fused = any("_dkv" in n for n in splash) and not any("_dq" in n for n in splash)
    return dataclasses.replace(_hw(hw), fused_backward=fused)


def _hw(hw: DeviceFigures) -> _Hw:
    peaks = {}
    for hlo, name in _HLO_DTYPES.items():
        fig, _ = peak_flops(hw, name)
        if fig is not None and fig.value:
            peaks[hlo] = float(fig.value)
    bf16 = peaks.get("bf16") or max(peaks.values(), default=0.0)
    for hlo in _HLO_DTYPES:
        peaks.setdefault(hlo, bf16)
    bw = hbm_bandwidth_per_device(hw).value or 0.0
    return _Hw(peaks, float(bw), tile(hw))


@dataclasses.dataclass
class _Tally:
    """Where the expected time went (seconds, per step)."""

    matmul: float = 0.0
    memory: float = 0.0
    kernel: float = 0.0
    launch: float = 0.0
    communication: float = 0.0  # collectives' expected time, all of it
    waited: float = 0.0  # of which the program waited for (not hidden under compute)
    missing: int = 0  # collectives on the schedule without an estimate


def work_seconds(work: Mapping[str, Any], hw: _Hw, eff: Efficiency, tally: _Tally | None, times: float) -> float:
    """Seconds one ``work`` event of the schedule takes."""
    total = 0.0
    for dtype, m, n, k, nbytes, count in work.get("mm") or []:
        peak = hw.peaks.get(dtype) or hw.peaks["bf16"]
        flops = 2.0 * m * n * k
        compute = flops / (peak * eff.matmul * _pad(n, hw.tile) * _pad(k, hw.tile))
        memory = nbytes / (hw.bandwidth * eff.memory) if hw.bandwidth else 0.0
        t = count * max(compute, memory)
        total += t
        if tally is not None:
            tally.matmul += times * t
    for name, flops, nbytes, dims in work.get("kernels") or []:
        f = attention_flops(name, dims, hw.fused_backward)
        f = f if f is not None else flops
        compute = f / (hw.peaks["bf16"] * eff.kernel) if f else 0.0
        t = max(compute, nbytes / (hw.bandwidth * eff.memory) if hw.bandwidth else 0.0)
        total += t
        if tally is not None:
            tally.kernel += times * t
    mem = (work.get("hbm") or 0) / (hw.bandwidth * eff.memory) if hw.bandwidth else 0.0
    launch = (work.get("ops") or 0) * eff.launch
    if tally is not None:
        tally.memory += times * mem
        tally.launch += times * launch
    return total + mem + launch


def collective_seconds(
    schedule: Mapping[str, Any], collectives: Sequence[Mapping[str, Any]], key: str = "expected_seconds"
) -> tuple[dict[str, float], int]:
    """Each chain's time (the estimate of the collective it is made of), and how many chains have none."""
    by_name = {c.get("name"): c for c in collectives}
    out: dict[str, float] = {}
    missing = 0
    for chain, names in (schedule.get("chains") or {}).items():
        est = next((by_name[n].get("estimate") for n in names if n in by_name), None) or {}
        value = est.get(key, est.get("seconds"))
        if value is None:
            missing += 1
            value = 0.0
        out[chain] = float(value)
    return out, missing


class _Replay:
    """Replays the schedule's sequences (module docstring): one compute stream, one network."""

    def __init__(self, schedule: Mapping[str, Any], durations: Mapping[str, float], hw: _Hw, eff: Efficiency) -> None:
        self.seqs: Mapping[str, list[Any]] = schedule.get("sequences") or {}
        self.durations = durations
        self.hw = hw
        self.eff = eff
        self.tally = _Tally()
        self.net = 0.0  # when the network is next free

    def run(self, name: str, t: float, times: float, depth: int = 0) -> float:
        """Runs one sequence from time ``t`` (``times``: how often per step it runs, for the tally); the time
        it ends. A collective whose done comes before its start in the sequence was started by the previous
        iteration: :meth:`loop` carries it."""
        return self.sequence(self.seqs.get(name) or [], t, times, {}, depth)[0]

    def sequence(self, events: list[Any], t: float, times: float, inflight: dict[str, float], depth: int
                 ) -> tuple[float, dict[str, float]]:  # fmt: skip
        inflight = dict(inflight)
        for ev in events:
            kind = ev[0]
            if kind == "work":
                t += work_seconds(ev[1], self.hw, self.eff, self.tally, times)
            elif kind in ("start", "sync"):
                d = self.durations.get(ev[1], 0.0)
                begin = max(t, self.net)
                self.net = begin + d
                self.tally.communication += times * d
                if kind == "sync":
                    self.tally.waited += times * (self.net - t)
                    t = self.net
                else:
                    inflight[ev[1]] = self.net
            elif kind == "done":
                end = inflight.pop(ev[1], t)
                if end > t:
                    self.tally.waited += times * (end - t)
                    t = end
            elif depth < 16:
                t = self.nested(ev, t, times, depth)
        return t, inflight

    def nested(self, ev: list[Any], t: float, times: float, depth: int) -> float:
        if ev[0] == "loop":
            return self.loop(str(ev[1]), int(ev[2]) if ev[2] is not None else 1, t, times, depth)
        if ev[0] == "call":
            return self.run(str(ev[1]), t, times, depth + 1)
        # branches: the slowest, replayed without tallying the others
        ends = []
        for name in ev[1]:
            saved = (dataclasses.replace(self.tally), self.net)
            ends.append((self.run(str(name), t, times, depth + 1), name, saved))
        _, name, saved = max(ends)
        self.tally, self.net = saved
        return self.run(str(name), t, times, depth + 1)

    def loop(self, body: str, trips: int, t: float, times: float, depth: int) -> float:
        """``trips`` iterations: the first, then the second (with what the first left in flight) times the rest."""
        if trips <= 0:
            return t
        events = self.seqs.get(body) or []
        end1, inflight = self.sequence(events, t, times, {}, depth + 1)
        if trips == 1:
            return end1
        end2, _ = self.sequence(events, end1, times * (trips - 1), inflight, depth + 1)
        if trips > 2:  # the network's last transfer moves with the iterations left
            self.net += (trips - 2) * (end2 - end1)
        return end1 + (trips - 1) * (end2 - end1)


def expected_step(
    schedule: Mapping[str, Any],
    collectives: Sequence[Mapping[str, Any]],
    hw: DeviceFigures,
    efficiency: Efficiency | None = None,
    profile: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The expected seconds of one step of a compiled program (module docstring), with where they went:
    ``{"expected_seconds", "compute_seconds", "matmul_seconds", "memory_seconds", "kernel_seconds",
    "launch_seconds", "communication_seconds", "exposed_communication_seconds", "hidden_communication_seconds",
    "collectives_without_estimate", "efficiency", "efficiency_from"}``."""
    eff, source = efficiency_for(hw, efficiency, profile)
    durations, missing = collective_seconds(schedule, collectives)
    replay = _Replay(schedule, durations, hw_for(hw, schedule), eff)
    seconds = replay.run(str(schedule.get("entry")), 0.0, 1.0)
    tl = replay.tally
    compute = tl.matmul + tl.memory + tl.kernel + tl.launch
    return {
        "expected_seconds": seconds,
        "compute_seconds": compute,
        "matmul_seconds": tl.matmul,
        "memory_seconds": tl.memory,
        "kernel_seconds": tl.kernel,
        "launch_seconds": tl.launch,
        "communication_seconds": tl.communication,
        "exposed_communication_seconds": tl.waited,
        "hidden_communication_seconds": max(0.0, tl.communication - tl.waited),
        "collectives_without_estimate": missing,
        "efficiency": eff.json(),
        "efficiency_from": source,
    }


def efficiency_for(
    hw: DeviceFigures, efficiency: Efficiency | None = None, profile: Mapping[str, Any] | None = None
) -> tuple[Efficiency, str]:
    """The constants a plan on ``hw`` uses and where they came from: given, the fit for its platform (or the
    TPU's, said so), with a calibrate profile's matmul efficiency in place of the fitted one."""
    if efficiency is not None:
        eff, source = efficiency, "given"
    elif hw.kind in FITTED:
        eff, source = FITTED[hw.kind], f"fitted: {FITTED_ON[hw.kind]}"
    else:
        eff, source = FITTED["tpu"], f"fitted on TPU runs (no {hw.kind} runs published with a reproducible config)"
    measured = ((profile or {}).get("matmul") or {}).get("efficiency")
    if isinstance(measured, (int, float)) and 0 < float(measured) <= 1.5:
        eff = dataclasses.replace(eff, matmul=float(measured))
        name = (profile or {}).get("name") or (profile or {}).get("source") or "the calibrate profile"
        source = f"matmul efficiency {float(measured):.3f} measured ({name}); the rest {source}"
    return eff, source


LOWER_WORDS = "at 100 % MFU"
"""What every surface calls the lower bound: the roofline, every term at the spec sheet's peak, all overlapped."""

NOTE = (
    "lower bound: the roofline at 100 % MFU (compute, HBM traffic and the collectives' bounds at the spec sheet's "
    "figures, everything overlapped); expected: the compiled schedule replayed with matmuls, memory-bound work and "
    "attention kernels at efficiencies fitted to published training runs and each collective at the cost model's "
    "expected time, overlapped where the schedule overlaps it; upper bound: the same work and collectives one after "
    "the other (nothing overlapped)"
)
NOTE_NO_SCHEDULE = (
    "lower bound: the roofline at 100 % MFU (everything at the spec sheet's figures, overlapped); expected: the "
    "same with each collective at the cost model's expected time (this plan has no schedule: stored before "
    "schedules were read, or without hardware figures); upper bound: the serial sum, nothing overlapped"
)


def step_band(
    line: Mapping[str, Any],
    schedule: Mapping[str, Any] | None,
    collectives: Sequence[Mapping[str, Any]],
    hw: DeviceFigures | None,
    profile: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A plan's ``step_time`` from its roofline ``line``, its schedule and its estimated collectives:
    ``lower_bound_seconds`` (the roofline: at 100 % MFU) <= ``expected_seconds`` <= ``upper_bound_seconds``,
    with ``expected`` saying where the expected time went and which efficiencies it used."""
    comm = line.get("communication_expected_seconds")
    comm = comm if comm is not None else line.get("communication_seconds")
    terms = [line.get("compute_seconds"), line.get("memory_seconds"), comm]
    known = [v for v in terms if v is not None]
    lower = line.get("lower_bound_seconds")
    upper = sum(known) if line.get("bound") else None
    expected = max(known, default=None) if line.get("bound") else None
    detail = None
    if line.get("bound") and hw is not None and schedule and schedule.get("sequences"):
        detail = expected_step(schedule, collectives, hw, profile=profile)
        expected = max(detail["expected_seconds"], float(lower or 0.0))
        upper = max(float(upper or 0.0), detail["compute_seconds"] + detail["communication_seconds"], expected)
    return {
        "lower_bound_seconds": lower,
        "expected_seconds": expected,
        "upper_bound_seconds": upper,
        "bound": line.get("bound"),
        "compute_seconds": line.get("compute_seconds"),
        "memory_seconds": line.get("memory_seconds"),
        "communication_seconds": line.get("communication_seconds"),
        "communication_expected_seconds": line.get("communication_expected_seconds"),
        "lower_bound_is": LOWER_WORDS,
        "expected": detail,
        "note": NOTE if detail is not None else NOTE_NO_SCHEDULE,
    }
