#!/usr/bin/env bash
# Issue 38's checks on a lent GPU machine, in one call of the device tool (bench/bench_gpu.py says why
# two steps). Prepare here first: HF_HUB_OFFLINE=1 bench/.venv/bin/python bench/bench_gpu.py --prepare bench/gpu
# then, carrying bench/gpu:  bash bench/lent_device.sh "$OUT"
# It writes facts.txt (GPU, CPU and versions), checks.txt (bench/gpu_checks.py: exact on CUDA, pooling on
# the device equal to the host's), gpu.txt/gpu.json (bench_gpu on CUDA) and cpu.txt/cpu.json
# (bench_peers on the machine's CPU: its int8 and bf16 against its measured peaks) and roofline.txt
# (bench/roofline.py: where each CPU way's time goes against those peaks). Each step runs even
# when one before it failed, so a failure costs only its own figures.
out=${1:?give the folder to write into}
export PYTHONPATH=src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 BERTSCOPE_CACHE=/tmp/bertscope-cache
{
    date -u; nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv
    lscpu; python3 -m pip list 2>/dev/null | grep -iE '^(torch|transformers|sentence-transformers|onnxruntime|onnx|tokenizers|numpy) '
} >"$out/facts.txt" 2>&1
timeout 120 python3 bench/gpu_checks.py bench/gpu 2>&1 | grep -v Loading | tee "$out/checks.txt"
timeout 240 python3 bench/bench_gpu.py --run bench/gpu --rounds 5 --out "$out/gpu.json" 2>&1 | tee "$out/gpu.txt"
timeout 300 python3 bench/bench_peers.py --models bench/gpu/model --corpora bench/gpu/texts.txt --limit 600 \
    --rounds 3 --only "ST torch,bertscope default,bertscope bfloat16,bertscope onnxruntime,bertscope int8,bertscope fast" \
    --out "$out/cpu.json" 2>&1 | tee "$out/cpu.txt"
timeout 180 python3 bench/roofline.py --model bench/gpu/model --texts-file bench/gpu/texts.txt --texts 600 \
    --rounds 3 2>&1 | tee "$out/roofline.txt"
