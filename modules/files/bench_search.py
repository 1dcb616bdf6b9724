#!/usr/bin/env python3
"""Benchmark: `files.search` through `modhost invoke` (spawn included) against ripgrep.

    python3 modules/files/bench_search.py MODHOST TREE NAME=FILES_BINARY[,NAME=...] [ROUNDS]

e.g. MODHOST=$CARGO_TARGET_DIR/release/modhost, TREE=~/.cargo/registry/src, and
`native=$CARGO_TARGET_DIR/release/files,wasm=$CARGO_TARGET_DIR/wasm32-wasip2/release/files.wasm`
(build with `cargo build --release -p modhost -p files` and `--target wasm32-wasip2`).
Each variant is installed and pinned in a home of its own; every round runs
`rg --no-heading -n 'fn main' .` and each variant's search for `fn main`
(max_results 10000), and prints wall-time p50s, the ratio to rg, and whether
the variants return the same matches in the same order and the same set as rg.
Figures are for reading: nothing fails on them.
"""
import json, os, shutil, statistics, subprocess, sys, tempfile, time
from pathlib import Path
MODHOST = sys.argv[1]
TREE = os.path.expanduser(sys.argv[2])
VARIANTS = [(a.split("=",1)[0], a.split("=",1)[1]) for a in sys.argv[3].split(",")]
ROUNDS = int(sys.argv[4]) if len(sys.argv) > 4 else 5
tmp = Path(tempfile.mkdtemp(prefix="speed-search-"))
homes = {}
for name, binary in VARIANTS:
    home = tmp / name
    folder = home / "modules" / "files"
    folder.mkdir(parents=True)
    dest = folder / ("files.wasm" if binary.endswith(".wasm") else "files")
    shutil.copy(binary, dest); dest.chmod(0o755)
    subprocess.run([MODHOST, "--home", str(home), "--workspace", TREE, "pin", "files"], check=True, stdout=subprocess.DEVNULL)
    homes[name] = home
def run_rg():
    out = subprocess.run(["rg", "--no-heading", "-n", "fn main", "."], cwd=TREE, capture_output=True, text=True).stdout
    return sorted(l.split(":", 2)[0] + ":" + l.split(":", 2)[1] for l in out.splitlines())
def run_mod(home):
    out = subprocess.run([MODHOST, "--home", str(home), "--workspace", TREE, "invoke", "files.search",
        "--input", json.dumps({"pattern": "fn main", "max_results": 10000}), "--json",
        "--max-output-bytes", "64000000", "--deadline-ms", "60000"], capture_output=True, text=True)
    v = json.loads(out.stdout)
    o = v.get("output") or v.get("result", {}).get("output")
    if o is None:
        raise SystemExit(out.stdout[:2000] + out.stderr[:2000])
    return [f"./{m['path']}:{m['line']}" for m in o["matches"]], o["truncated"]
times = {k: [] for k in ["rg"] + list(homes)}
results = {}
for r in range(ROUNDS):
    t = time.perf_counter(); results["rg"] = run_rg(); times["rg"].append(time.perf_counter() - t)
    for name, home in homes.items():
        t = time.perf_counter(); results[name] = run_mod(home); times[name].append(time.perf_counter() - t)
rg_p50 = statistics.median(times["rg"])
for k, v in times.items():
    p50 = statistics.median(v)
    n = len(results[k]) if k == "rg" else len(results[k][0])
    extra = "" if k == "rg" else f" truncated={results[k][1]}"
    print(f"{k:<14} p50 {p50*1000:8.1f} ms  {p50/rg_p50:5.2f}x rg  matches {n}{extra}  rounds {' '.join(f'{x*1000:.0f}' for x in v)}")
names = list(homes)
for a in names:
    for b in names:
        if a < b:
            print(f"{a} == {b} (same order): {results[a][0] == results[b][0]}")
    print(f"{a} vs rg (as sets): only-mod {len(set(results[a][0]) - set(results['rg']))}, only-rg {len(set(results['rg']) - set(results[a][0]))}")
shutil.rmtree(tmp)
