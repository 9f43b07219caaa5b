"""torch_npu's own tests on the simulated NPU: how much of what a simulator can pass it passes.

    python verification/conformance_torch_npu.py --checkout DIR [--files F ...] [--mode shim|alone|both]
        [--timeout S] [--test-timeout S] [--jobs N] [--group N] [--no-rerun] [--detail]
        [--out benchmarks/results/conformance_torch_npu.json]
    python verification/conformance_torch_npu.py --combine RUN.json|RUN.log ... [--note TEXT] [--out ...]
    python verification/conformance_torch_npu.py --write-docs [--out ...]

DIR is a checkout of Ascend/pytorch at the tag the simulator's wheel was built from (TAG below),
fetched, never copied into this repository; for example, from a bare mirror:
    git --git-dir=<mirror> archive v26.2.0-beta.1-pytorch2.13.0 test/ | tar -x -C DIR
Each test file runs in a fresh interpreter, in two modes: through the shim (`python -m cudashim run
--platform ascend --simulate -m pytest FILE`) and the simulated torch_npu alone (the wheel's package
over the simulated _C, no shim: site.alone_env). Every failure is classified:

  * needs CANN: torch_npu's own refusal for what needs CANN (the simulator's CannRequired, its
    `ERR00007 PTA feature not supported`, ATB/NNAL, torchair), or a private format/kernel;
  * environment: what the test needs from the host and not from torch_npu (a package not installed,
    a helper of torch's test suite the installed torch lacks, several processes or a network this
    machine refuses, a time limit);
  * transfer_to_npu: in shim mode, what torch_npu's transfer_to_npu (which the shim applies) does by
    design and does the same on an NPU: it turns torch.jit.script into a function that returns what it
    is given, so code that reads the scripted function's graph fails; it replaces Inductor's cached
    get_gpu_type with a plain function, whose cache torch_npu._inductor then fails to clear;
  * simulator: everything else — where the simulated NPU differs from torch_npu.

Tests torch_npu's CI disables on an NPU (test/unsupported_test_cases) are skipped, as torch_npu.testing
skips them there. The figure is passed / (passed + simulator failures), per mode. Results go to --out (JSON) and,
with --write-docs, to the generated block of docs/testing-an-ascend-port.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

TAG = "v26.2.0-beta.1-pytorch2.13.0"
OUT = ROOT / "benchmarks" / "results" / "conformance_torch_npu.json"
DOC = ROOT / "docs" / "testing-an-ascend-port.md"

#: the sample, by rule: every test file of these folders of torch_npu's test/ (runtime, memory, graph and
#: utility tests in npu/, allocator/ and utils/; contrib/; autograd/ and optim/; nn/ for the tensor ops of
#: modules), and these top-level tensor-op and runtime files; each file in EXCLUDED is left out with its reason
FOLDERS = ("test/npu", "test/allocator", "test/utils", "test/contrib", "test/autograd", "test/optim", "test/nn")
TOP_FILES = (
    "test/test_accelerator.py", "test/test_autocast.py", "test/test_cat.py", "test/test_chunk.py",
    "test/test_copy_.py", "test/test_bool_storage.py", "test/test_binary_ufuncs.py", "test/test_dispatch.py",
    "test/test_functional_optim.py", "test/test_flop_counter.py",
)
_SEVERAL = "distributed over several processes, mp.spawn and init_process_group: one host's many ranks"
EXCLUDED: dict[str, str] = {
    "test/npu/test_fault_mode.py": "starts torchrun and torch.distributed.launch jobs and a pool of 100 processes",
    "test/npu/test_c10d.py": _SEVERAL,
    "test/npu/test_uce.py": _SEVERAL,
    "test/optim/test_distributed_muon.py": _SEVERAL,
    "test/optim/test_fsdp2_muon.py": _SEVERAL,
}


def sample(checkout: Path) -> list[str]:
    """The files the rule above selects from a checkout, sorted."""
    files = set(TOP_FILES)
    for folder in FOLDERS:
        files.update(str(f.relative_to(checkout)) for f in (checkout / folder).rglob("test_*.py"))
    return sorted(f for f in files if f not in EXCLUDED)


_CANN = re.compile(r"ERR00007 PTA feature not supported|needs CANN|CannRequired|libatb|NNAL|torchair\.core|"
                   r"torch_npu\._C\.(mlir|dvm)|libhccl|libascendcl|"
                   # a C++ extension built against CANN's ACL (its stub libraries, third_party/acl) and
                   # torch_npu's native library, which the simulated NPU does not have
                   r"third_party/acl/libs/build_stub")
_ENV = re.compile(r"ModuleNotFoundError: No module named '(?!torch_npu)|Address already in use|"
                  r"Connection refused|TimeoutExpired|Failed: Timeout|timed out|Killed|(?<!OutOf)MemoryError|"
                  r"expecttest|hypothesis|"
                  # torch's own test helpers the test imports, absent from the installed torch's
                  r"cannot import name '\w+' from 'torch\.testing\._internal|"
                  # a binding the installed torch build lacks
                  r"module 'torch\._C' has no attribute|module 'numpy' has no attribute|"
                  # a plain class pytest collects and torch_npu's run_tests (unittest) never runs
                  r"object has no attribute 'assert\w*'")


#: transfer_to_npu's own replacements: torch.jit.script gives back the function itself, with none of a
#: ScriptFunction's members; torch._inductor.utils.get_gpu_type becomes a plain function, whose cache
#: torch_npu._inductor then clears
_JIT_OFF = re.compile(r"torch\.jit\.script\(.*\)\.\w+[\s\S]*AttributeError: 'function' object has no attribute|"
                      r"get_gpu_type\.cache_clear\(\)[\s\S]*'function' object has no attribute 'cache_clear'")


def classify(message: str) -> str:
    if _JIT_OFF.search(message):
        return "transfer_to_npu"
    if _CANN.search(message):
        return "needs CANN"
    if _ENV.search(message):
        return "environment"
    return "simulator"


def disabled_tests_file(checkout: Path) -> Path | None:
    """torch_npu's list of the tests its CI disables on an NPU (test/unsupported_test_cases, the file for
    the installed torch's release where there is one, as its get_failed_ut_from_log.py picks it), which
    torch_npu.testing skips when DISABLED_TESTS_FILE names it: what torch_npu does not pass on an NPU is
    not asked of the simulator."""
    import torch

    folder = checkout / "test" / "unsupported_test_cases"
    major, minor = torch.__version__.split(".")[:2]
    for name in (f".pytorch-disabled-tests-{major}.{minor}.json", ".pytorch-disabled-tests.json"):
        if (folder / name).is_file():
            return folder / name
    return None


def _run(files: list[Path], mode: str, checkout: Path, timeout: int, test_timeout: int,
         detail: bool = False) -> dict[Path, dict] | None:
    """Run FILES (of one folder) in one interpreter; their results by file, or None where the run left
    no report (a crash or the time limit), so that each is run again on its own."""
    from cudashim.emulated.npu.site import alone_env

    folder = files[0].parent
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "r.xml"
        # xunit1 names each case's file, so that a report of several files is split by file
        pytest_args = ["-m", "pytest", "-q", "-p", "no:cacheprovider", *(f.name for f in files),
                       f"--junitxml={xml}", "-o", "junit_family=xunit1", "--continue-on-collection-errors"]
        if test_timeout and importlib.util.find_spec("pytest_timeout"):
            # one test that hangs costs that test, not the rest of its file
            pytest_args.append(f"--timeout={test_timeout}")
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
        disabled = disabled_tests_file(checkout)
        if disabled is not None:
            env["DISABLED_TESTS_FILE"] = str(disabled)
        t0 = time.monotonic()
        limit = timeout * len(files)
        try:
            proc = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=limit)
            tail = (proc.stdout + proc.stderr)[-2000:]
        except subprocess.TimeoutExpired:
            if len(files) > 1:
                return None
            return {files[0]: {"passed": 0, "failures": [{"test": files[0].name, "class": "environment",
                                                          "reason": f"the file ran past {limit} s"}],
                               "seconds": limit}}
        seconds = round(time.monotonic() - t0, 1)
        outs = {f: {"passed": 0, "skipped": 0, "failures": [], "seconds": seconds} for f in files}
        if not xml.is_file():
            if len(files) > 1:
                return None
            outs[files[0]]["failures"].append({"test": files[0].name, "class": classify(tail),
                                               "reason": tail.strip().splitlines()[-1][:300]
                                               if tail.strip() else "no output"})
            return outs
        by_name = {f.name: f for f in files}
        for case in ET.parse(xml).getroot().iter("testcase"):
            where = by_name.get(Path(case.get("file") or "").name)
            for guess in ((case.get("classname") or "").split(".")[0], (case.get("classname") or "").split(".")[-1],
                          case.get("name") or ""):
                # a collection error names no file: its classname or name is the module
                where = where or by_name.get(guess + ".py")
            if where is None:
                if len(files) > 1:
                    return None
                where = files[0]
            out = outs[where]
            name = f"{case.get('classname')}.{case.get('name')}"
            bad = case.find("failure") if case.find("failure") is not None else case.find("error")
            if bad is not None:
                text = (bad.get("message") or "") + "\n" + (bad.text or "")
                first = (bad.get("message") or (bad.text or "").strip().splitlines()[-1:] or [""])
                reason = first if isinstance(first, str) else first[0]
                fail = {"test": name, "class": classify(text),
                        "reason": reason.splitlines()[0][:300] if reason else ""}
                if detail:
                    fail["detail"] = text[-1500:]
                out["failures"].append(fail)
            elif case.find("skipped") is not None:
                out["skipped"] += 1
            else:
                out["passed"] += 1
        return outs


def summarize(per_file: dict) -> dict:
    total = {"passed": 0, "simulator": 0, "needs CANN": 0, "environment": 0, "transfer_to_npu": 0, "skipped": 0}
    for res in per_file.values():
        total["passed"] += res["passed"]
        total["skipped"] += res.get("skipped", 0)
        for f in res["failures"]:
            total[f["class"]] = total.get(f["class"], 0) + 1
    denom = total["passed"] + total["simulator"]
    total["conformance"] = round(total["passed"] / denom, 4) if denom else None
    return total


def docs_block(data: dict) -> str:
    lines = [f"torch_npu's tests at `{data['tag']}`: every file of "
             + ", ".join(f"`{f[len('test/'):]}/`" for f in FOLDERS) + " and "
             + ", ".join(f"`{f[len('test/'):]}`" for f in TOP_FILES)
             + f" ({data.get('selected', len(data['sample']))} files)."]
    if any(len(res["files"]) < data.get("selected", 0) for res in data["modes"].values()):
        lines.append("The run was stopped before every file had run in each mode: the files column says how "
                     "many did, and the figures are theirs.")
    if data.get("excluded"):
        lines.append("Left out: " + "; ".join(f"`{f[len('test/'):]}` ({why})" for f, why in data["excluded"].items())
                     + ".")
    if data.get("disabled_tests_file"):
        lines.append(f"Skipped as torch_npu's CI skips them on an NPU: the tests `{data['disabled_tests_file']}` "
                     "lists (with the tests' own skips, in the skipped column).")
    if data.get("note"):
        lines.append(data["note"])
    if not data.get("rerun_alone", True):
        lines.append("The files of a folder ran in one interpreter; a failure is counted as it happened there.")
    lines += ["", "| mode | files | passed | simulator failures | need CANN | environment | transfer_to_npu | skipped | "
              "passed / (passed + simulator) |", "|---|---|---|---|---|---|---|---|---|"]
    for mode, res in data["modes"].items():
        t = res["total"]
        pct = f"{100 * t['conformance']:.1f} %" if t["conformance"] is not None else "n/a"
        lines.append(f"| {mode} | {len(res['files'])} | {t['passed']} | {t['simulator']} | {t['needs CANN']} | "
                     f"{t['environment']} | {t.get('transfer_to_npu', 0)} | "
                     f"{'not recorded' if t['skipped'] is None else t['skipped']} | {pct} |")
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


_LOG_FILE = re.compile(r"^(shim|alone)\s+(\S+): (\d+) passed, \d+ simulator, \d+ CANN, \d+ env"
                       r"(?:, (\d+) skipped)? \(([\d.]+|\?) s\)$")
_LOG_FAIL = re.compile(r"^    (simulator|needs CANN|environment|transfer_to_npu): (.*?): (.*)$")
_LOG_TOTAL = re.compile(r"^(shim|alone) (\{.*\})$")


def modes_from_log(text: str) -> dict:
    """A run's figures rebuilt from what it printed with --detail (a run stopped before it wrote --out):
    each file's passes and failures, and each finished mode's total as it printed it."""
    import ast

    modes: dict = {}
    current = None
    detail: list[str] = []
    for line in text.splitlines():
        if m := _LOG_FILE.match(line):
            mode, rel, passed, skipped, secs = m.groups()
            res = modes.setdefault(mode, {"files": {}})
            res["per_file_skips"] = res.get("per_file_skips", True) and skipped is not None
            current = res["files"][rel] = {"passed": int(passed), "skipped": int(skipped or 0), "failures": [],
                                           "seconds": float(secs) if secs != "?" else None}
        elif (m := _LOG_FAIL.match(line)) and current is not None:
            current["failures"].append({"test": m.group(2), "class": m.group(1), "reason": m.group(3)})
            detail = [m.group(3)]
        elif line.startswith("        ") and current is not None and current["failures"]:
            # the traceback's tail: a log written before a rule changed is read with today's rules (a
            # failure that needs CANN stays so: its mark may lie outside the tail the log kept)
            detail.append(line[8:])
            if current["failures"][-1]["class"] != "needs CANN" or _JIT_OFF.search("\n".join(detail)):
                current["failures"][-1]["class"] = classify("\n".join(detail))
        elif m := _LOG_TOTAL.match(line):
            modes.setdefault(m.group(1), {"files": {}})["printed_total"] = ast.literal_eval(m.group(2))
    for res in modes.values():
        res["total"] = summarize(res["files"])
        printed = res.pop("printed_total", None)
        if not res.pop("per_file_skips", False):
            # an older log counts skips only in a finished mode's total
            res["total"]["skipped"] = printed["skipped"] if printed is not None else None
    return modes


def combine(sources: list[Path], out: Path, checkout: Path | None = None, rerun_alone: bool = True,
            note: str | None = None) -> None:
    """--out from the modes of earlier runs: a .json the runner wrote or a --detail log it printed (the
    run's settings, which a log does not carry, from the arguments). They are taken file by file, in
    the order given: a file a later source ran again counts as it ran there (a run of a few files after
    a fix, over a whole run)."""
    disabled = disabled_tests_file(checkout) if checkout is not None else None
    data: dict = {"tag": TAG, "excluded": EXCLUDED, "rerun_alone": rerun_alone,
                  "disabled_tests_file": str(disabled.relative_to(checkout)) if disabled else None}
    for src in sources:
        if src.suffix == ".json":
            got = json.loads(src.read_text())
            modes = got.pop("modes")
            data = {**got, **data}
        else:
            modes = modes_from_log(src.read_text())
        for mode, res in modes.items():
            have = data.setdefault("modes", {}).setdefault(mode, {"files": {}, "skips_known": True})
            have["files"].update(res["files"])
            # a --detail log counts skips only for a mode it finished
            have["skips_known"] = have["skips_known"] and res["total"].get("skipped") is not None
    for mode, res in data.get("modes", {}).items():
        res["total"] = summarize(res["files"])
        if not res.pop("skips_known", True):
            res["total"]["skipped"] = None
    data["modes"] = {m: data["modes"][m] for m in ("shim", "alone") if m in data["modes"]}
    if "sample" not in data:
        data["sample"] = sorted({f for res in data["modes"].values() for f in res["files"]})
    if checkout is not None:
        data.setdefault("selected", len(sample(checkout)))
    if note:
        data["note"] = note
    out.write_text(json.dumps(data, indent=1) + "\n")


def main() -> int:
    sys.path.insert(0, str(ROOT))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkout", type=Path, help=f"Ascend/pytorch at {TAG} (its test/ folder at least)")
    ap.add_argument("--files", nargs="*", default=None, help="test files relative to the checkout (default: the sample the rule selects)")
    ap.add_argument("--mode", choices=("shim", "alone", "both"), default="both")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per file and mode")
    ap.add_argument("--test-timeout", type=int, default=120,
                    help="seconds per test (pytest-timeout; 0: none)")
    ap.add_argument("--jobs", type=int, default=1, help="interpreters run at once")
    ap.add_argument("--group", type=int, default=1,
                    help="files of one folder run in one interpreter; a file with a failure there (other than "
                         "needing CANN) runs again on its own, and that run counts")
    ap.add_argument("--no-rerun", action="store_true",
                    help="a file's failures in its group count as they are (a quick look, not the figure)")
    ap.add_argument("--detail", action="store_true", help="print each failure's traceback tail")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--write-docs", action="store_true", help="only regenerate the docs block from --out")
    ap.add_argument("--combine", nargs="+", type=Path, default=None,
                    help="write --out from earlier runs' modes: their .json, or the log a run printed with --detail")
    ap.add_argument("--note", default=None, help="with --combine: a sentence the docs block shows (where the runs were made)")
    args = ap.parse_args()
    if args.combine:
        combine(args.combine, args.out, args.checkout, not args.no_rerun, args.note)
        return 0
    if args.write_docs:
        write_docs(json.loads(args.out.read_text()))
        return 0
    if args.checkout is None or not (args.checkout / "test").is_dir():
        ap.error(f"--checkout must name a checkout of Ascend/pytorch at {TAG} with its test/ folder; e.g. "
                 f"`git --git-dir=<mirror> archive {TAG} test/ | tar -x -C DIR`")
    files = args.files or sample(args.checkout)
    modes = ("shim", "alone") if args.mode == "both" else (args.mode,)
    disabled = disabled_tests_file(args.checkout)
    data: dict = {"tag": TAG, "sample": files, "excluded": EXCLUDED, "modes": {},
                  "disabled_tests_file": str(disabled.relative_to(args.checkout)) if disabled else None,
                  "rerun_alone": not args.no_rerun, "selected": len(files)}
    for mode in modes:
        def report(rel: str, res: dict, mode: str = mode) -> None:
            t = summarize({rel: res})
            print(f"{mode:5} {rel}: {t['passed']} passed, {t['simulator']} simulator, {t['needs CANN']} CANN, "
                  f"{t['environment']} env, {t['skipped']} skipped ({res.get('seconds', '?')} s)", flush=True)
            if args.detail:
                for f in res["failures"]:
                    print(f"    {f['class']}: {f['test']}: {f['reason']}", flush=True)
                    for line in f.pop("detail", "").splitlines()[-12:]:
                        print(f"        {line}", flush=True)

        def group(rels: list[str], mode: str = mode) -> dict[str, dict]:
            got: dict[str, dict] = {}
            paths = [args.checkout / rel for rel in rels]
            res = _run(paths, mode, args.checkout, args.timeout, args.test_timeout, args.detail)
            # torch_npu's refusal of what needs CANN does not depend on the files beside it
            again = rels if res is None else [rel for rel, p in zip(rels, paths)
                                               if any(f["class"] != "needs CANN" for f in res[p]["failures"])
                                               and not args.no_rerun]
            for rel, p in zip(rels, paths):
                if rel not in again:
                    got[rel] = res[p]
            if len(rels) > 1:
                # a file that failed beside others counts as it does on its own
                for rel in again:
                    got[rel] = _run([args.checkout / rel], mode, args.checkout, args.timeout,
                                    args.test_timeout, args.detail)[args.checkout / rel]
            else:
                got.update({rel: res[args.checkout / rel] for rel in again})
            for rel in rels:
                report(rel, got[rel])
            return got

        missing = [rel for rel in files if not (args.checkout / rel).is_file()]
        per_file = {rel: {"passed": 0, "failures": [{"test": rel, "class": "environment",
                                                     "reason": "not in the checkout"}]} for rel in missing}
        groups: list[list[str]] = []
        for rel in files:
            if rel in missing:
                continue
            if groups and len(groups[-1]) < args.group and Path(groups[-1][0]).parent == Path(rel).parent:
                groups[-1].append(rel)
            else:
                groups.append([rel])
        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            for got in pool.map(group, groups):
                per_file.update(got)
        per_file = {rel: per_file[rel] for rel in files}
        data["modes"][mode] = {"files": per_file, "total": summarize(per_file)}
        print(mode, data["modes"][mode]["total"], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
