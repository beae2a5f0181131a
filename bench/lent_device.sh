#!/usr/bin/env bash
# Issue 38's checks on a lent GPU machine, in two calls of the device tool (bench/bench_gpu.py says why
# two steps for the GPU; the CPU part needs OpenVINO's wheels, which with the model are over the 64 MiB a
# call may carry). Prepare here first:
#   HF_HUB_OFFLINE=1 bench/.venv/bin/python bench/bench_gpu.py --prepare bench/gpu
#   echo /.whl/ >> .git/info/exclude; python3 -m pip download --no-deps --only-binary=:all: \
#       --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
#       -d .whl openvino==2026.4.1 nncf==3.4.0 openvino-telemetry pydot     # 60 MB; the image has the rest
# then, on the device:
#   bash bench/lent_device.sh "$OUT" gpu    carrying bench/gpu: facts.txt (GPU, CPU, versions), checks.txt
#       (bench/gpu_checks.py: exact on CUDA, pooling on the device equal to the host's), gpu.txt/gpu.json
#       (bench_gpu on CUDA); it leaves a copy of bench/gpu in /tmp/gpu for the next call
#   bash bench/lent_device.sh "$OUT" cpu    carrying .whl, at once (a machine left idle 30 s is given back,
#       and /tmp/gpu with it): cpu.txt/cpu.json (bench_peers on the machine's CPU, OpenVINO's ways too,
#       against its measured peaks), roofline.txt (bench/roofline.py: where each CPU way's time goes) and
#       exact_rank.txt (bench/exact_rank.py: what the exact default chooses there, and why)
# Each step runs even when one before it failed, so a failure costs only its own figures; each stage's
# timeouts add up to under the device tool's 10 minutes a call (the cpu stage took about 3 minutes there).
out=${1:?give the folder to write into}
stage=${2:?give the stage: gpu or cpu}
case "$stage" in gpu|cpu) ;; *) echo "unknown stage $stage: give gpu or cpu"; exit 2;; esac
export PYTHONPATH=src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 BERTSCOPE_CACHE=/tmp/bertscope-cache
quiet() { grep -vE 'Loading|━'; }
if [ "$stage" = gpu ]; then
    mkdir -p /tmp/gpu && cp -r bench/gpu/. /tmp/gpu/
    {
        date -u; nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv
        lscpu; python3 -m pip list 2>/dev/null | grep -iE '^(torch|transformers|sentence-transformers|onnxruntime|onnx|tokenizers|numpy) '
    } >"$out/facts.txt" 2>&1
    timeout 120 python3 bench/gpu_checks.py bench/gpu 2>&1 | quiet | tee "$out/checks.txt"
    timeout 240 python3 bench/bench_gpu.py --run bench/gpu --rounds 5 --out "$out/gpu.json" 2>&1 | quiet | tee "$out/gpu.txt"
    exit 0
fi
[ -d /tmp/gpu/model ] || { echo "no /tmp/gpu: run the gpu stage first, and this one within 30 s of it"; exit 3; }
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site:src
fi
timeout 240 python3 bench/bench_peers.py --models /tmp/gpu/model --corpora /tmp/gpu/texts.txt --limit 600 --rounds 3 \
    --only "ST torch,bertscope default,bertscope bfloat16,bertscope openvino,bertscope int8,bertscope fast" \
    --out "$out/cpu.json" 2>&1 | quiet | tee "$out/cpu.txt"
timeout 150 python3 bench/roofline.py --model /tmp/gpu/model --texts-file /tmp/gpu/texts.txt --texts 600 --rounds 3 \
    --ways "onnxruntime float32,openvino float32,openvino bfloat16,openvino int8 static" 2>&1 | quiet | tee "$out/roofline.txt"
timeout 150 python3 bench/exact_rank.py --model /tmp/gpu/model --texts-file /tmp/gpu/texts.txt --rows 28,200 \
    2>&1 | quiet | tee "$out/exact_rank.txt"
