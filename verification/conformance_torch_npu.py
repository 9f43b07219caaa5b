"""torch_npu's own tests on the simulated NPU: how much of what a simulator can pass it passes.

    python verification/conformance_torch_npu.py --checkout DIR [--files F ...] [--mode shim|alone|both]
        [--timeout S] [--out benchmarks/results/conformance_torch_npu.json]

DIR is a checkout of Ascend/pytorch at the tag the simulator's wheel was built from (TAG below),
fetched, never copied into this repository; for example, from a bare mirror:
    git --git-dir=<mirror> archive v26.2.0-beta.1-pytorch2.13.0 test/ | tar -x -C DIR
Each test file runs in a fresh interpreter, in two modes: through the shim (`python -m cudashim run
--platform ascend --simulate -m pytest FILE`) and the simulated torch_npu alone (the wheel's package
over the simulated _C, no shim: site.alone_env). Every failure is classified:

  * needs CANN: torch_npu's own refusal for what needs CANN (the simulator's CannRequired, its
    `ERR00007 PTA feature not supported`, ATB/NNAL, torchair), or a private format/kernel;
  * environment: what the test needs from the host and not from torch_npu (a package not installed,
    several processes or a network this machine refuses, a time limit);
  * simulator: everything else — where the simulated NPU differs from torch_npu.

The figure is passed / (passed + simulator failures), per mode. Results go to --out (JSON) and,
with --write-docs, to the generated block of docs/testing-an-ascend-port.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TAG = "v26.2.0-beta.1-pytorch2.13.0"
OUT = ROOT / "benchmarks" / "results" / "conformance_torch_npu.json"
DOC = ROOT / "docs" / "testing-an-ascend-port.md"

#: the sample: torch_npu's runtime, memory, graph, tensor-op, autograd/optim, contrib and utility tests
SAMPLE = (
    "test/npu/test_device.py", "test/npu/test_generators.py", "test/npu/test_cann_version.py",
    "test/npu/test_deterministic_level.py", "test/npu/test_empty_strided_npu.py", "test/npu/test_amp.py",
    "test/npu/test_copy.py", "test/npu/test_errcode.py", "test/npu/test_inf_nan_mode.py",
    "test/npu/test_expandable_segments.py", "test/npu/test_allocator_envs.py", "test/npu/test_graph_tree.py",
    "test/test_accelerator.py", "test/test_autocast.py", "test/test_cat.py", "test/test_chunk.py",
    "test/test_copy_.py", "test/test_bool_storage.py", "test/test_binary_ufuncs.py", "test/test_dispatch.py",
    "test/test_functional_optim.py", "test/test_flop_counter.py",
)

_CANN = re.compile(r"ERR00007 PTA feature not supported|needs CANN|CannRequired|libatb|NNAL|torchair\.core|"
                   r"torch_npu\._C\.(mlir|dvm)|libhccl|libascendcl")
_ENV = re.compile(r"ModuleNotFoundError: No module named '(?!torch_npu)|Address already in use|"
                  r"Connection refused|Timeout|timed out|Killed|MemoryError|expecttest|hypothesis", re.I)


def classify(message: str) -> str:
    if _CANN.search(message):
        return "needs CANN"
    if _ENV.search(message):
        return "environment"
    return "simulator"


def _run(file: Path, mode: str, checkout: Path, timeout: int) -> dict:
    from cudashim.emulated.npu.site import alone_env

    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "r.xml"
        pytest_args = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-x" if False else "-q", str(file),
                       f"--junitxml={xml}", "-o", "junit_family=xunit2"]
        if mode == "shim":
            env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDASHIM_", "ASCEND_RT_"))}
            env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(checkout / "test")])
            # torch's CUDA test helpers compare torch.cuda.get_device_capability() with a tuple at import;
            # under transfer_to_npu that is torch_npu's, None unless this is set (as on an NPU host)
            env.setdefault("TORCH_NPU_DEVICE_CAPABILITY", "8.0")
            cmd = [sys.executable, "-m", "cudashim", "run", "--platform", "ascend", "--simulate", *pytest_args]
        else:
            env = alone_env(ROOT)
            env["PYTHONPATH"] += os.pathsep + str(checkout / "test")
            cmd = [sys.executable, *pytest_args]
        env["OMP_NUM_THREADS"] = "1"
        t0 = time.monotonic()
        try:
            proc = subprocess.run(cmd, cwd=file.parent, env=env, capture_output=True, text=True, timeout=timeout)
            tail = (proc.stdout + proc.stderr)[-2000:]
        except subprocess.TimeoutExpired:
            return {"passed": 0, "failures": [{"test": str(file.name), "class": "environment",
                                               "reason": f"the file ran past {timeout} s"}], "seconds": timeout}
        out: dict = {"passed": 0, "skipped": 0, "failures": [], "seconds": round(time.monotonic() - t0, 1)}
        if not xml.is_file():
            out["failures"].append({"test": file.name, "class": classify(tail), "reason": tail.strip().splitlines()[-1][:300]
                                    if tail.strip() else "no output"})
            return out
        for case in ET.parse(xml).getroot().iter("testcase"):
            name = f"{case.get('classname')}.{case.get('name')}"
            bad = case.find("failure") if case.find("failure") is not None else case.find("error")
            if bad is not None:
                text = (bad.get("message") or "") + "\n" + (bad.text or "")
                first = (bad.get("message") or (bad.text or "").strip().splitlines()[-1:] or [""])
                reason = first if isinstance(first, str) else first[0]
                out["failures"].append({"test": name, "class": classify(text), "reason": reason.splitlines()[0][:300]
                                        if reason else ""})
            elif case.find("skipped") is not None:
                out["skipped"] += 1
            else:
                out["passed"] += 1
        return out


def summarize(per_file: dict) -> dict:
    total = {"passed": 0, "simulator": 0, "needs CANN": 0, "environment": 0, "skipped": 0}
    for res in per_file.values():
        total["passed"] += res["passed"]
        total["skipped"] += res.get("skipped", 0)
        for f in res["failures"]:
            total[f["class"]] += 1
    denom = total["passed"] + total["simulator"]
    total["conformance"] = round(total["passed"] / denom, 4) if denom else None
    return total


def docs_block(data: dict) -> str:
    lines = ["| mode | files | passed | simulator failures | need CANN | environment | passed / (passed + simulator) |",
             "|---|---|---|---|---|---|---|"]
    for mode, res in data["modes"].items():
        t = res["total"]
        pct = f"{100 * t['conformance']:.0f} %" if t["conformance"] is not None else "n/a"
        lines.append(f"| {mode} | {len(res['files'])} | {t['passed']} | {t['simulator']} | {t['needs CANN']} | "
                     f"{t['environment']} | {pct} |")
    lines.append("")
    lines.append("Remaining failures (class: reason, test):")
    lines.append("")
    for mode, res in data["modes"].items():
        for file, r in res["files"].items():
            for f in r["failures"]:
                lines.append(f"- {mode}, {f['class']}: {f['reason']} ({file}: {f['test']})")
    return "\n".join(lines)


def write_docs(data: dict) -> None:
    begin, end = "<!-- conformance_torch_npu:begin -->", "<!-- conformance_torch_npu:end -->"
    text = DOC.read_text()
    block = (f"{begin}\n<!-- generated by python verification/conformance_torch_npu.py --write-docs "
             f"(from {OUT.relative_to(ROOT)}); do not edit -->\n{docs_block(data)}\n{end}")
    if begin in text:
        text = text[:text.index(begin)] + block + text[text.index(end) + len(end):]
    else:
        text = text.rstrip("\n") + "\n\n## torch_npu's own tests on the simulated NPU\n\n" + block + "\n"
    DOC.write_text(text)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkout", type=Path, help=f"Ascend/pytorch at {TAG} (its test/ folder at least)")
    ap.add_argument("--files", nargs="*", default=None, help="test files relative to the checkout (default: SAMPLE)")
    ap.add_argument("--mode", choices=("shim", "alone", "both"), default="both")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per file and mode")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--write-docs", action="store_true", help="only regenerate the docs block from --out")
    args = ap.parse_args()
    if args.write_docs:
        write_docs(json.loads(args.out.read_text()))
        return 0
    if args.checkout is None or not (args.checkout / "test").is_dir():
        ap.error(f"--checkout must name a checkout of Ascend/pytorch at {TAG} with its test/ folder; e.g. "
                 f"`git --git-dir=<mirror> archive {TAG} test/ | tar -x -C DIR`")
    files = args.files or list(SAMPLE)
    modes = ("shim", "alone") if args.mode == "both" else (args.mode,)
    data: dict = {"tag": TAG, "sample": files, "modes": {}}
    for mode in modes:
        per_file = {}
        for rel in files:
            path = args.checkout / rel
            if not path.is_file():
                per_file[rel] = {"passed": 0, "failures": [{"test": rel, "class": "environment",
                                                            "reason": "not in the checkout"}]}
                continue
            per_file[rel] = _run(path, mode, args.checkout, args.timeout)
            t = summarize({rel: per_file[rel]})
            print(f"{mode:5} {rel}: {t['passed']} passed, {t['simulator']} simulator, {t['needs CANN']} CANN, "
                  f"{t['environment']} env ({per_file[rel].get('seconds', '?')} s)", flush=True)
        data["modes"][mode] = {"files": per_file, "total": summarize(per_file)}
        print(mode, data["modes"][mode]["total"], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
