"""A GPT-3-shaped decoder's training step for planning (shapes only): ``examples/llama.py``'s decoder with
LayerNorm, a GeLU MLP, learned position embeddings and the token embedding reused for the logits — the
shapes of MaxText's ``gpt3-175b`` model (``src/MaxText/configs/models/gpt3-175b.yml``: d 12288, 96 heads of
128, MLP 49152, 96 layers, vocabulary 50304, 16384 learned positions). Dense biases are left out (0.01 % of
the parameters and of the work).

    shardscope plan examples/gpt3.py:gpt3_175b_fsdp --devices tpu:v6e:16x16 --mesh 256 --axes fsdp

Plan functions take ``fn(mesh, rules=None, **knobs)`` with the knobs of :data:`examples.llama.KNOBS`.
"""

from __future__ import annotations

try:  # run as examples.gpt3 (tests, python -m) or as a script next to llama.py (shardscope plan)
    from examples import llama
except ImportError:  # pragma: no cover - shardscope plan puts this file's directory on sys.path
    import llama  # type: ignore[no-redef]

GPT3 = {"norm": "layer", "mlp": "gelu", "position": "learned", "tied": True, "rope_theta": 0.0}

CONFIGS: dict[str, llama.Config] = {
    "gpt3-175b": llama.Config(vocab=50304, d_model=12288, n_layers=96, n_heads=96, n_kv_heads=96, head_dim=128,
                              d_ff=49152, max_position=16384, **GPT3),  # type: ignore[arg-type]
    "tiny": llama.Config(vocab=1024, d_model=256, n_layers=2, n_heads=8, n_kv_heads=8, head_dim=32, d_ff=1024,
                         max_position=512, **GPT3),  # type: ignore[arg-type]
}  # fmt: skip

plan_fn = llama.plan_fn
# MaxText's v6e-256 recipe (gpt-3-175b-bf16): 3 × 2048 tokens a chip, full remat, flash attention
gpt3_175b_fsdp = llama.plan_fn(CONFIGS["gpt3-175b"], "fsdp", 768, 2048, name="gpt3_175b_fsdp", attention="splash",
                               attention_block=1024)  # fmt: skip
tiny_fsdp = llama.plan_fn(CONFIGS["tiny"], "fsdp", 16, 128, name="gpt3_tiny_fsdp")
