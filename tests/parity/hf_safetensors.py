"""Safetensors checkpoints in the Hugging Face layouts, read and written in Python.

Independent of dscale's C++ loader and writer (src/io/safetensors*.cc) and of the training
writer (training/safetensors_io.py): it follows the format description only
(https://huggingface.co/docs/safetensors): an 8-byte little-endian header length, a JSON header
{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}} padded with
spaces to a multiple of 8 bytes, then the data region, offsets relative to its start.
A checkpoint folder holds either `model.safetensors` or `model.safetensors.index.json`
({"metadata": {"total_size": N}, "weight_map": {tensor: shard file}}) and its shards.

Only the dtypes dscale accepts are handled: BF16, F16, F32. Values are returned as float64
tensors; BF16, F16 and F32 are all exactly representable there.
"""
import json
import os
import struct
import sys

import torch

INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"
DTYPE_BYTES = {"BF16": 2, "F16": 2, "F32": 4}

assert sys.byteorder == "little", "the raw views below assume a little-endian host"


# ------------------------------------------------------------------------------------------
# Reading


def _decode(raw, dtype, shape):
    """Bytes of one tensor -> float64 tensor of `shape`."""
    count = 1
    for d in shape:
        count *= d
    if len(raw) != count * DTYPE_BYTES[dtype]:
        raise ValueError(f"{len(raw)} bytes for shape {shape} of {dtype}")
    if count == 0:
        return torch.zeros(shape, dtype=torch.float64)
    buf = bytearray(raw)  # writable copy: torch.frombuffer warns on read-only buffers
    if dtype == "BF16":
        # A bfloat16 is the upper half of a float32: widen the 16 bits into the top of 32.
        bits = torch.frombuffer(buf, dtype=torch.int16).to(torch.int32) & 0xFFFF
        values = (bits << 16).view(torch.float32)
    elif dtype == "F16":
        values = torch.frombuffer(buf, dtype=torch.float16)
    else:
        values = torch.frombuffer(buf, dtype=torch.float32)
    return values.to(torch.float64).reshape(shape)


def read_file(path):
    """One .safetensors file -> ({name: float64 tensor}, {name: dtype}, metadata)."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        raise ValueError(f"{path}: header length {n} beyond the file")
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = blob[8 + n:]
    tensors, dtypes, metadata = {}, {}, header.pop("__metadata__", {})
    for name, info in header.items():
        begin, end = info["data_offsets"]
        if not 0 <= begin <= end <= len(data):
            raise ValueError(f"{path}: tensor {name}: offsets {begin}..{end} outside the data")
        tensors[name] = _decode(data[begin:end], info["dtype"], list(info["shape"]))
        dtypes[name] = info["dtype"]
    return tensors, dtypes, metadata


def read_checkpoint(folder):
    """A checkpoint folder (single file or sharded index) -> ({name: float64 tensor}, {name: dtype})."""
    index_path = os.path.join(folder, INDEX_NAME)
    if not os.path.exists(index_path):
        tensors, dtypes, _ = read_file(os.path.join(folder, SINGLE_NAME))
        return tensors, dtypes
    with open(index_path) as f:
        weight_map = json.load(f)["weight_map"]
    tensors, dtypes = {}, {}
    for shard in sorted(set(weight_map.values())):
        shard_tensors, shard_dtypes, _ = read_file(os.path.join(folder, shard))
        for name, t in shard_tensors.items():
            if weight_map.get(name) == shard:
                tensors[name], dtypes[name] = t, shard_dtypes[name]
    missing = sorted(set(weight_map) - set(tensors))
    if missing:
        raise ValueError(f"{folder}: index names tensors its shards lack: {missing[:5]}")
    return tensors, dtypes


# ------------------------------------------------------------------------------------------
# Writing


def round_to(t, dtype):
    """float64 values rounded (to nearest even) to `dtype`, returned as float64."""
    torch_dtype = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32}[dtype]
    return t.to(torch_dtype).to(torch.float64)


def _encode(t, dtype):
    if dtype == "BF16":
        return t.to(torch.bfloat16).contiguous().view(torch.int16).numpy().tobytes()
    if dtype == "F16":
        return t.to(torch.float16).contiguous().numpy().tobytes()
    return t.to(torch.float32).contiguous().numpy().tobytes()


def write_file(path, tensors, metadata=None, header_override=None):
    """Writes [(name, tensor, dtype)] in the given order (the data region follows that order).

    header_override, if given, maps a name to header fields replacing the computed ones (to
    write deliberately inconsistent files).
    """
    header = {"__metadata__": dict(metadata or {"format": "pt"})}
    blobs, offset = [], 0
    for name, t, dtype in tensors:
        raw = _encode(t, dtype)
        header[name] = {"dtype": dtype, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        header[name].update((header_override or {}).get(name, {}))
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


def write_checkpoint(folder, tensors, shards=1, header_override=None):
    """Writes [(name, tensor, dtype)] as `model.safetensors` or as `shards` shard files.

    Shards are cut as transformers' save_pretrained cuts them: tensors in state-dict order,
    a new shard once the current one holds its share of the bytes; the index lists every
    tensor with the shard holding it and the total byte count.
    """
    os.makedirs(folder, exist_ok=True)
    if shards == 1:
        write_file(os.path.join(folder, SINGLE_NAME), tensors, header_override=header_override)
        return
    nbytes = [t.numel() * DTYPE_BYTES[dtype] for _, t, dtype in tensors]
    total = sum(nbytes)
    groups, current, size = [], [], 0
    for entry, n in zip(tensors, nbytes):
        if current and size + n > total / shards and len(groups) < shards - 1:
            groups.append(current)
            current, size = [], 0
        current.append(entry)
        size += n
    groups.append(current)
    assert len(groups) == shards, "too few tensors to fill every shard"
    weight_map = {}
    for i, group in enumerate(groups):
        name = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        write_file(os.path.join(folder, name), group, header_override=header_override)
        for tensor_name, _, _ in group:
            weight_map[tensor_name] = name
    with open(os.path.join(folder, INDEX_NAME), "w") as f:
        json.dump({"metadata": {"total_size": total},
                   "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
