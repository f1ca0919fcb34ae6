"""Tests for the generators' guarantees: order-free bytes, hash seeds, golden files, hash."""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import sdkgen
from tests.sdkgen import regen_golden
from tests.sdkgen.manifests import representative

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = representative()
EXPECTED_TEXTS = (
    sdkgen.python_sdk(EXPECTED),
    sdkgen.typescript_sdk(EXPECTED),
    sdkgen.python_names(EXPECTED),
)


def _shuffle_keys(value: Any, rng: random.Random) -> Any:
    """Return value with every mapping's key order shuffled (arrays keep their order)."""
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {key: _shuffle_keys(value[key], rng) for key in keys}
    if isinstance(value, list):
        return [_shuffle_keys(item, rng) for item in value]
    return value


@settings(max_examples=40, deadline=None)
@given(st.permutations(EXPECTED), st.randoms(use_true_random=False))
def test_output_is_independent_of_order(tools: list[Any], rng: random.Random) -> None:
    manifest = _shuffle_keys(tools, rng)
    assert sdkgen.python_sdk(manifest) == EXPECTED_TEXTS[0]
    assert sdkgen.typescript_sdk(manifest) == EXPECTED_TEXTS[1]
    assert sdkgen.python_names(manifest) == EXPECTED_TEXTS[2]


def test_golden_files_are_current() -> None:
    assert regen_golden.main(["--check"]) == 0


def test_golden_check_fails_on_a_changed_byte(tmp_path: Path) -> None:
    shutil.copytree(regen_golden.GOLDEN, tmp_path, dirs_exist_ok=True)
    path = tmp_path / "representative.pyi.golden"
    path.write_bytes(path.read_bytes().replace(b"read_file", b"read_fil", 1))
    assert regen_golden.main(["--check", "--dir", str(tmp_path)]) == 1
    assert regen_golden.main(["--dir", str(tmp_path)]) == 0
    assert regen_golden.main(["--check", "--dir", str(tmp_path)]) == 0


def test_other_processes_and_hash_seeds_give_the_same_bytes() -> None:
    runs = []
    for seed in ("0", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        command = [sys.executable, "-m", "tests.sdkgen.regen_golden", "--check"]
        runs.append(subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.PIPE))
    for run in runs:
        assert run.wait(timeout=60) == 0, run.stderr.read() if run.stderr else ""
        if run.stderr:
            run.stderr.close()


def test_sdk_hash_is_sha256_of_utf8() -> None:
    text = EXPECTED_TEXTS[0]
    assert sdkgen.sdk_hash(text) == hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert sdkgen.sdk_hash("é") == hashlib.sha256("é".encode()).hexdigest()
    assert sdkgen.sdk_hash(EXPECTED_TEXTS[0]) != sdkgen.sdk_hash(EXPECTED_TEXTS[1])
