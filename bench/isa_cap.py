"""Can capping oneDNN's instruction set stand in for a CPU without AVX-512 BF16/VNNI? Shows each kernel."""

import os

import numpy as np
import openvino as ov
from openvino import opset13 as op


def main() -> None:
    """Compile one 64x384 @ 384x384 matmul in float32 and bfloat16 and print the kernels OpenVINO picked."""
    x = op.parameter([64, 384], np.float32)
    w = op.constant(np.random.default_rng(0).random((384, 384), dtype=np.float32))
    model = ov.Model([op.matmul(x, w, False, False)], [x])
    core = ov.Core()
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "ALL")
    for precision in ["f32", "bf16"]:
        compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": precision})
        kinds = [
            n.get_rt_info()["primitiveType"].astype(str)
            for n in compiled.get_runtime_model().get_ordered_ops()
        ]
        print(cap, precision, [k for k in kinds if "gemm" in k])


if __name__ == "__main__":
    main()
