"""Runtimes other than the plain torch forward, and the choice of the fastest one for this machine.

cpu.py        what this CPU can do natively (bfloat16, VNNI), and a key naming the machine
onnx.py       the ONNX export every runtime shares, and ONNX Runtime float32 / int8
openvino.py   OpenVINO running bertscope's own exported graph: float32, bfloat16, int8 (weights)
modes.py      the one table of ways to run a model, the one measure loop, compare_modes
fast.py       mode="fast": measure the modes this machine can run, keep the fastest within a cosine bound
exact.py      the exact default: the fastest runtime equal to torch within 1e-5
"""
