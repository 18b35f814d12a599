#!/usr/bin/python3
"""Write a dscale checkpoint (Hugging Face layout, safetensors) as a llama.cpp GGUF, so that both
engines run the same weights side by side. Needs numpy and llama.cpp's own `gguf` package
(PYTHONPATH=LLAMA_CPP/gguf-py); no torch, no transformers.

  to_gguf.py CHECKPOINT OUT.gguf [--tokenizer DIR] [--target DIR]

Families and the GGUF architecture each becomes:
  Qwen3ForCausalLM                          -> qwen3
  Qwen3MoeForCausalLM                       -> qwen3moe   (per-expert tensors stacked)
  Qwen3_5ForCausalLM / ...ConditionalGen.   -> qwen35     (Gated DeltaNet layers)
  Qwen3_5MoeForCausalLM / ...ConditionalGen.-> qwen35moe  (fused experts split into gate and up)
  DFlashDraftModel                          -> dflash     (--target: the target it drafts for)

What llama.cpp expects and a straight copy would not give (its loaders in src/models/*.cpp):
  - 2-D weights stay BF16, byte for byte; 1-D tensors, norms, routers and the conv kernel are F32
    (BF16 sources upcast exactly).
  - Qwen3.5: the zero-centred RMSNorms are stored as 1 + w (computed in f32); the gated norm inside
    a linear layer is a plain RMSNorm and is copied. A_log is stored as -exp(A_log), dt_bias as the
    `ssm_dt` bias, the conv kernel [C, 1, K] as [C, K].
  - Qwen3.5 with more value heads than key heads: Hugging Face groups the value heads by the key
    head they share (v = k * r + i); ggml broadcasts the key heads tiled (v = i * n_k + k), so every
    tensor indexed by value head (the qkv projection's v rows, z, a, b, A_log, dt_bias, the conv's v
    channels, out_proj's inputs) is permuted to the tiled order. The function is unchanged.
  - DFlash drafters: target_layer_ids are written + 1 (llama.cpp taps the input of the next layer),
    the mask token is set, and the embedding and head are left to the target's file.
The tokenizer is the checkpoint's own byte-level BPE (vocab.json, merges.txt), or --tokenizer's
(default: the bundled models/tiny-target) for random checkpoints that carry none; the token list
is padded to vocab_size with unused tokens. Prompts given as token ids never touch it.
"""
import argparse
import json
import struct
import sys
from pathlib import Path

import numpy as np

try:
    import gguf
except ImportError:
    sys.exit("to_gguf.py: the gguf package is missing: set PYTHONPATH=LLAMA_CPP_SOURCE/gguf-py")

REPO = Path(__file__).resolve().parents[2]

ARCHITECTURES = {
    "Qwen3ForCausalLM": gguf.MODEL_ARCH.QWEN3,
    "Qwen3MoeForCausalLM": gguf.MODEL_ARCH.QWEN3MOE,
    "Qwen3_5ForCausalLM": gguf.MODEL_ARCH.QWEN35,
    "Qwen3_5ForConditionalGeneration": gguf.MODEL_ARCH.QWEN35,
    "Qwen3_5MoeForCausalLM": gguf.MODEL_ARCH.QWEN35MOE,
    "Qwen3_5MoeForConditionalGeneration": gguf.MODEL_ARCH.QWEN35MOE,
    "DFlashDraftModel": gguf.MODEL_ARCH.DFLASH,
}
HYBRID = (gguf.MODEL_ARCH.QWEN35, gguf.MODEL_ARCH.QWEN35MOE)
BF16 = gguf.GGMLQuantizationType.BF16
F32 = gguf.GGMLQuantizationType.F32


class Checkpoint:
    """The tensors of one safetensors checkpoint, single file or sharded, memory-mapped."""

    def __init__(self, folder: Path):
        index = folder / "model.safetensors.index.json"
        files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.exists() \
            else ["model.safetensors"]
        self.entries = {}
        for file in files:
            path = folder / file
            with open(path, "rb") as f:
                header_len = struct.unpack("<Q", f.read(8))[0]
                header = json.loads(f.read(header_len))
            header.pop("__metadata__", None)
            data = np.memmap(path, dtype=np.uint8, mode="r")
            for name, entry in header.items():
                self.entries[name] = (data, 8 + header_len, entry)

    def names(self):
        return sorted(self.entries)

    def dtype(self, name):
        return self.entries[name][2]["dtype"]

    def shape(self, name):
        return tuple(self.entries[name][2]["shape"])

    def raw(self, name):
        """The stored array: uint16 for BF16 (raw bits), float32 / float16 otherwise."""
        data, base, entry = self.entries[name]
        begin, end = entry["data_offsets"]
        view = {"BF16": np.uint16, "F32": np.float32, "F16": np.float16}.get(entry["dtype"])
        if view is None:
            sys.exit(f"to_gguf.py: {name}: dtype {entry['dtype']} is not BF16, F16 or F32")
        return data[base + begin: base + end].view(view).reshape(entry["shape"])

    def f32(self, name):
        a = self.raw(name)
        if a.dtype == np.uint16:
            return (a.astype(np.uint32) << 16).view(np.float32)  # exact
        return a.astype(np.float32)


def text_config(config):
    """A ConditionalGeneration config keeps the language model's fields under text_config."""
    return {**config, **config.get("text_config", {})}


def rope_theta(cfg):
    theta = cfg.get("rope_theta") or cfg.get("rope_parameters", {}).get("rope_theta")
    if theta is None:
        sys.exit("to_gguf.py: config.json: no rope_theta (nor rope_parameters.rope_theta)")
    return float(theta)


def partial_rotary(cfg):
    return cfg.get("partial_rotary_factor", cfg.get("rope_parameters", {}).get("partial_rotary_factor", 1.0))


def tiled_value_heads(n_k, n_v, head_dim):
    """Index map from the tiled value-head order ggml wants to Hugging Face's grouped order."""
    r = n_v // n_k
    grouped = np.arange(n_v * head_dim).reshape(n_k, r, head_dim)
    return grouped.transpose(1, 0, 2).reshape(-1)


class Tensor:
    """One GGUF tensor: its name, type, numpy shape and a function producing its data."""

    def __init__(self, name, qtype, shape, make):
        self.name, self.qtype, self.shape, self.make = name, qtype, tuple(shape), make

    @property
    def nbytes(self):
        return int(np.prod(self.shape)) * (2 if self.qtype == BF16 else 4)


def weight(name, ck, src, transform=None):
    """A 2-D (or stacked 3-D) weight: BF16 kept as its bits, other dtypes as F32."""
    qtype = BF16 if ck.dtype(src) == "BF16" else F32
    shape = ck.shape(src)

    def make():
        a = ck.raw(src) if qtype == BF16 else ck.f32(src)
        return np.ascontiguousarray(transform(a) if transform else a)
    return Tensor(name, qtype, shape, make)


def vector(name, ck, src, transform=None, shape=None):
    """A norm, bias or other small tensor: always F32."""
    out_shape = shape or ck.shape(src)

    def make():
        a = ck.f32(src)
        a = transform(a) if transform else a
        return np.ascontiguousarray(a.reshape(out_shape), dtype=np.float32)
    return Tensor(name, F32, out_shape, make)


def stacked(name, ck, sources):
    """Per-expert [rows, cols] weights stacked into one [experts, rows, cols] tensor."""
    qtype = BF16 if ck.dtype(sources[0]) == "BF16" else F32
    shape = (len(sources),) + ck.shape(sources[0])

    def make():
        return np.stack([ck.raw(s) if qtype == BF16 else ck.f32(s) for s in sources])
    return Tensor(name, qtype, shape, make)


def fused_half(name, ck, src, half):
    """Half `half` (0 gate, 1 up) of a fused [experts, 2 * ffn, hidden] gate_up_proj."""
    e, two_ffn, hidden = ck.shape(src)
    ffn = two_ffn // 2
    qtype = BF16 if ck.dtype(src) == "BF16" else F32

    def make():
        a = ck.raw(src) if qtype == BF16 else ck.f32(src)
        return np.ascontiguousarray(a[:, half * ffn:(half + 1) * ffn, :])
    return Tensor(name, qtype, (e, ffn, hidden), make)


def linear_attention_tensor(gname, ck, src, cfg):
    """A Gated DeltaNet tensor in llama.cpp's layout (see the module docstring)."""
    n_k, n_v = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    d_k, d_v = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]
    per_head = tiled_value_heads(n_k, n_v, 1)
    v_rows = tiled_value_heads(n_k, n_v, d_v)
    qk = 2 * n_k * d_k
    leaf = src.rsplit(".", 2)[-2] if src.endswith(".weight") else src.rsplit(".", 1)[-1]
    if leaf == "in_proj_qkv":
        return weight(gname, ck, src, lambda a: np.concatenate([a[:qk], a[qk:][v_rows]]))
    if leaf == "in_proj_z":
        return weight(gname, ck, src, lambda a: a[v_rows])
    if leaf in ("in_proj_a", "in_proj_b"):
        return weight(gname, ck, src, lambda a: a[per_head])
    if leaf == "out_proj":
        return weight(gname, ck, src, lambda a: a[:, v_rows])
    if leaf == "A_log":
        return vector(gname, ck, src, lambda a: -np.exp(a[per_head].astype(np.float64)).astype(np.float32))
    if leaf == "dt_bias":
        return vector(gname, ck, src, lambda a: a[per_head])
    if leaf == "conv1d":
        c, _, k = ck.shape(src)
        channels = np.concatenate([np.arange(qk), qk + v_rows])
        return vector(gname, ck, src, lambda a: a.reshape(c, k)[channels], shape=(c, k))
    if leaf == "norm":
        return vector(gname, ck, src)
    sys.exit(f"to_gguf.py: {src}: an unknown Gated DeltaNet tensor")


def plan_tensors(arch, ck, cfg):
    """Every tensor of the GGUF, in checkpoint order, with the transform llama.cpp needs."""
    n_layer = cfg["num_hidden_layers"]
    names = gguf.get_tensor_name_map(arch, n_layer)
    zero_centred = arch in HYBRID
    experts = {}  # (layer, projection) -> {expert: source}
    plan = []
    for src in ck.names():
        hf = src.replace("model.language_model.", "model.")
        if arch == gguf.MODEL_ARCH.DFLASH and not hf.startswith("model."):
            hf = "model." + hf
        if hf.startswith(("model.visual.", "mtp.", "model.mtp.")):
            continue  # vision tower and multi-token prediction head: not part of the text model
        parts = hf.split(".")
        if ".mlp.experts." in hf and parts[5].isdecimal():  # Qwen3-MoE: one tensor per expert
            experts.setdefault((int(parts[2]), parts[6]), {})[int(parts[5])] = src
            continue
        base = hf.removesuffix(".weight")
        if ".linear_attn." in hf:
            if base.endswith(".dt_bias"):
                gname = names.get_name(base.replace(".dt_bias", ".dt_proj")) + ".bias"
            else:
                gname = names.get_name(base) + ("" if base.endswith(".A_log") else ".weight")
            plan.append(linear_attention_tensor(gname, ck, src, cfg))
            continue
        if hf.endswith(".mlp.experts.gate_up_proj"):
            for half, proj in enumerate(("gate_proj", "up_proj")):
                gname = names.get_name(hf.replace("gate_up_proj", proj)) + ".weight"
                plan.append(fused_half(gname, ck, src, half))
            continue
        if hf.endswith(".mlp.experts.down_proj"):
            plan.append(weight(names.get_name(hf) + ".weight", ck, src))
            continue
        gname = names.get_name(base)
        if gname is None:
            sys.exit(f"to_gguf.py: {src}: no llama.cpp tensor for it in architecture "
                     f"{gguf.MODEL_ARCH_NAMES[arch]}")
        gname += ".weight"
        if base.endswith("norm"):
            shift = zero_centred and not base.endswith("linear_attn.norm")
            plan.append(vector(gname, ck, src, (lambda a: a + np.float32(1)) if shift else None))
        elif base.endswith(".mlp.gate") or base.endswith(".shared_expert_gate"):
            shape = (ck.shape(src)[-1],) if base.endswith(".shared_expert_gate") else None
            plan.append(vector(gname, ck, src, shape=shape))
        elif len(ck.shape(src)) == 1:
            plan.append(vector(gname, ck, src))
        else:
            plan.append(weight(gname, ck, src))
    for (layer, proj), by_expert in sorted(experts.items()):
        if sorted(by_expert) != list(range(len(by_expert))):
            sys.exit(f"to_gguf.py: layer {layer} {proj}: experts are not numbered 0..n-1")
        gname = names.get_name(f"model.layers.{layer}.mlp.experts.{proj}") + ".weight"
        plan.append(stacked(gname, ck, [by_expert[i] for i in range(len(by_expert))]))
    return plan


def write_hparams(w, arch, cfg):
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    if "intermediate_size" in cfg:
        w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_freq_base(rope_theta(cfg))
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)
    if "num_experts" in cfg:
        w.add_expert_count(cfg["num_experts"])
        w.add_expert_used_count(cfg["num_experts_per_tok"])
        w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    if "shared_expert_intermediate_size" in cfg:
        w.add_expert_shared_feed_forward_length(cfg["shared_expert_intermediate_size"])
    if arch in HYBRID:
        write_hybrid_hparams(w, cfg, head_dim)
    if arch == gguf.MODEL_ARCH.DFLASH:
        w.add_block_size(cfg.get("block_size", 16))
        w.add_target_layers([i + 1 for i in cfg["dflash_config"]["target_layer_ids"]])
        w.add_mask_token_id(cfg["dflash_config"]["mask_token_id"])
    if arch == gguf.MODEL_ARCH.QWEN3MOE and not cfg.get("norm_topk_prob", True):
        print("to_gguf.py: warning: norm_topk_prob is false, but llama.cpp's qwen3moe always "
              "renormalises the top-k weights: its logits will differ", file=sys.stderr)
    if arch == gguf.MODEL_ARCH.QWEN3MOE and (cfg.get("mlp_only_layers") or cfg.get("decoder_sparse_step", 1) != 1):
        sys.exit("to_gguf.py: llama.cpp's qwen3moe has no dense layers (mlp_only_layers, decoder_sparse_step)")


def write_hybrid_hparams(w, cfg, head_dim):
    n_layer = cfg["num_hidden_layers"]
    interval = cfg.get("full_attention_interval", 4)
    types = cfg.get("layer_types") or [
        "full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(n_layer)]
    expected = ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(n_layer)]
    if types != expected:
        sys.exit(f"to_gguf.py: layer_types is not every {interval}th layer full attention, "
                 "which is all llama.cpp's qwen35 reads")
    w.add_full_attention_interval(interval)
    w.add_ssm_conv_kernel(cfg["linear_conv_kernel_dim"])
    w.add_ssm_state_size(cfg["linear_key_head_dim"])
    w.add_ssm_group_count(cfg["linear_num_key_heads"])
    w.add_ssm_time_step_rank(cfg["linear_num_value_heads"])
    w.add_ssm_inner_size(cfg["linear_value_head_dim"] * cfg["linear_num_value_heads"])
    rope_dims = int(head_dim * partial_rotary(cfg))
    w.add_rope_dimension_count(rope_dims)
    # Text positions are equal in all three M-RoPE sections, so any split gives plain rotary
    # embedding on the first rope_dims; keep the published [11, 11, 10] where it fits.
    pairs = rope_dims // 2
    sections = [11, 11, 10, 0] if pairs == 32 else [pairs - 2 * (pairs // 3), pairs // 3, pairs // 3, 0]
    w.add_rope_dimension_sections(sections)


def write_tokenizer(w, tokdir: Path, n_vocab, bos):
    vocab = json.loads((tokdir / "vocab.json").read_text(encoding="utf-8"))
    tcfg = json.loads((tokdir / "tokenizer_config.json").read_text(encoding="utf-8"))
    added = {int(k): v for k, v in tcfg.get("added_tokens_decoder", {}).items()}
    by_id = {i: t for t, i in vocab.items()}
    by_id.update({i: a["content"] for i, a in added.items()})
    if max(by_id) >= n_vocab:
        sys.exit(f"to_gguf.py: the tokenizer in {tokdir} has ids up to {max(by_id)}, past the "
                 f"model's vocab_size {n_vocab}: give --tokenizer a smaller one")
    tokens, types = [], []
    for i in range(n_vocab):
        if i not in by_id:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
        elif i in added:
            tokens.append(by_id[i])
            types.append(gguf.TokenType.CONTROL if added[i].get("special") else gguf.TokenType.USER_DEFINED)
        else:
            tokens.append(by_id[i])
            types.append(gguf.TokenType.NORMAL)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    merges = [line for line in (tokdir / "merges.txt").read_text(encoding="utf-8").splitlines()
              if line and not line.startswith("#version")]
    w.add_token_merges(merges)
    ids = {a["content"]: i for i, a in added.items()}
    if bos is not None:
        w.add_bos_token_id(bos)
    if tcfg.get("eos_token") in ids:
        w.add_eos_token_id(ids[tcfg["eos_token"]])
    if tcfg.get("pad_token") in ids:
        w.add_pad_token_id(ids[tcfg["pad_token"]])
    w.add_add_bos_token(bool(tcfg.get("add_bos_token", False)))
    if tcfg.get("chat_template"):
        w.add_chat_template(tcfg["chat_template"])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("checkpoint", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--tokenizer", type=Path, help="folder with vocab.json, merges.txt, tokenizer_config.json")
    p.add_argument("--target", type=Path, help="a DFlash drafter's target checkpoint (its tokenizer)")
    args = p.parse_args()

    config = json.loads((args.checkpoint / "config.json").read_text())
    arch_name = (config.get("architectures") or ["?"])[0]
    if arch_name not in ARCHITECTURES:
        sys.exit(f"to_gguf.py: {args.checkpoint}/config.json: architectures {arch_name} is not one of "
                 + ", ".join(ARCHITECTURES))
    arch = ARCHITECTURES[arch_name]
    cfg = text_config(config)
    if arch == gguf.MODEL_ARCH.DFLASH and args.target is None:
        sys.exit("to_gguf.py: a DFlash drafter needs --target (the checkpoint it drafts for)")
    tokdir = args.tokenizer or next(
        (d for d in (args.target, args.checkpoint) if d and (d / "vocab.json").exists()),
        REPO / "models" / "tiny-target")

    ck = Checkpoint(args.checkpoint)
    plan = plan_tensors(arch, ck, cfg)
    w = gguf.GGUFWriter(args.out, gguf.MODEL_ARCH_NAMES[arch])
    w.add_name(f"{args.checkpoint.name} ({arch_name})")
    w.add_type("model")
    write_hparams(w, arch, cfg)
    write_tokenizer(w, tokdir, cfg["vocab_size"], cfg.get("bos_token_id"))
    for t in plan:
        dtype = np.uint16 if t.qtype == BF16 else np.float32
        w.add_tensor_info(t.name, t.shape, np.dtype(dtype), t.nbytes, raw_dtype=t.qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    total = 0
    for t in plan:
        data = t.make()
        assert data.shape == t.shape and data.nbytes == t.nbytes, (t.name, data.shape, t.shape)
        w.write_tensor_data(data)
        total += data.nbytes
    w.close()
    print(f"wrote {args.out}: {gguf.MODEL_ARCH_NAMES[arch]}, {len(plan)} tensors, {total / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
