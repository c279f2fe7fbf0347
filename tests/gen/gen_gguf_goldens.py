#!/usr/bin/env python3
"""Generate the GGUF block dequantisation goldens: tests/fixtures/gguf/blocks.gguf holds one
tensor per block type (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, and F16 / BF16 / F32), written by gguf-py's
GGUFWriter: Q8_0, Q4_0 and the float types quantized from random data by gguf-py
(`gguf.quants.quantize`); the K types (which gguf-py cannot quantize) as random block bytes
with finite random float16 scales, so every code and six-bit scale pattern occurs;
tests/fixtures/gguf/blocks_<TYPE>.f32 is gguf-py's own dequantisation of that tensor
(`gguf.quants.dequantize`), float32 little-endian. tests/unit/test_gguf.c dequantises each
tensor with tern and requires the same bits.

Needs gguf (PyPI) and numpy. Run from the repository root:
    python3 tests/gen/gen_gguf_goldens.py
"""
import os

import gguf
import numpy as np
from gguf.constants import GGMLQuantizationType as T

OUT = os.path.join("tests", "fixtures", "gguf")
ROWS, COLS = 6, 512
TYPES = [T.Q8_0, T.Q4_0, T.Q4_K, T.Q5_K, T.Q6_K, T.F16, T.BF16, T.F32]


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(1234)
    w = gguf.GGUFWriter(os.path.join(OUT, "blocks.gguf"), "tern-blocks")
    for t in TYPES:
        # varied magnitudes per row, a few outliers, a zero row
        data = rng.standard_normal((ROWS, COLS)).astype(np.float32)
        data *= np.array([0.02, 1.0, 30.0, 0.001, 5.0, 0.0], dtype=np.float32)[:, None]
        data[1, ::37] *= 20.0
        if t in (T.Q4_K, T.Q5_K, T.Q6_K):
            bsz, tsz = gguf.constants.GGML_QUANT_SIZES[t]
            q = rng.integers(0, 256, size=(ROWS, COLS // bsz * tsz), dtype=np.uint8)
            blocks = q.reshape(-1, tsz)
            d = (rng.standard_normal((blocks.shape[0], 2)) * 0.01).astype(np.float16).view(np.uint8)
            if t == T.Q6_K:
                blocks[:, tsz - 2:] = d[:, :2]
            else:
                blocks[:, :4] = d
        else:
            q = gguf.quants.quantize(data, t)
        deq = gguf.quants.dequantize(q, t).astype(np.float32)
        w.add_tensor(t.name.lower(), q, raw_shape=q.shape, raw_dtype=t)
        deq.tofile(os.path.join(OUT, f"blocks_{t.name}.f32"))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print("wrote", OUT)


if __name__ == "__main__":
    main()
