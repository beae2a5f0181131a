"""Runtimes other than the plain torch forward, and the choice of the fastest one for this machine.

onnx.py       the ONNX export cache (keyed by model content), ONNX Runtime float32 / int8; imports no torch
export.py     making the ONNX export and the attention graph from the module: the one part needing torch
digest.py     the content digest of a model folder, which names its exports and measurements in the cache
quantize.py   int8 for ONNX Runtime: the dynamic, fused and static schemes, and the calibration texts
int8_gate.py  int8 fitted on the caller's own texts measured once against float32, refused under 0.99
openvino.py   OpenVINO running bertscope's own exported graph: float32, bfloat16, int8, int8_static
runtimes.py   switching an Encoder to ONNX Runtime or OpenVINO, and one way of the mode table applied
modes.py      the one table of ways to run a model, the one measure loop, compare_modes
fast.py       mode="fast": measure the modes this machine can run, keep the fastest within a cosine bound
exact.py      the exact default: the fastest runtime equal to torch within 1e-5
light.py      whether load's options let a folder open without torch, and that opening on the runtime asked
recorded.py   the exact default's choice per folder, kept so `bertscope info` answers without torch
cache.py      what the cache holds per model (exports, OpenVINO models, measurements): listed and cleared

What this CPU can do natively (bfloat16, VNNI) and the key naming the machine are in core/cpu.py.
"""
