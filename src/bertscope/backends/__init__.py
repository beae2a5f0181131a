"""Runtimes other than the plain torch forward, and the choice of the fastest one for this machine.

    cpu.py        what this CPU can do natively (bfloat16, VNNI), and a key naming the machine
    openvino.py   OpenVINO running bertscope's own exported graph: float32, bfloat16, int8 (NNCF)
    fast.py       mode="fast": measure the modes this machine can run, keep the fastest within a cosine bound

The ONNX Runtime backend and the export they share live in `bertscope.onnx_backend`.
"""
