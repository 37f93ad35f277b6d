"""Mutation run over PertReasonQA's path code: does the test suite notice when B.2 is changed?

Run from the repository root (not collected by pytest)::

    python tests/pertreasonqa/mutation_run.py [--only named] [--limit N] [--out mutants.tsv] [--rerun mutants.tsv]

Each mutant is one change to a copy of ``pertreasonqa_lib`` in a temporary folder: the named
mutations remove or alter one step of appendix B.2 (gating in search, cost or PageRank; the
steepness; the penalty; the KS side; the tau_high shift; ...), the automatic ones swap one
comparison or arithmetic operator or perturb one numeric constant of the path modules. The path
tests run against the copy (pytest's ``pythonpath`` points at it instead of ``src/pertreasonqa``);
a mutant is *killed* when they fail, *survives* when they pass. The working tree is never edited.
Prints one line per mutant and the survivors at the end; exits 1 when a named mutant survives.
"""

from __future__ import annotations

import argparse
import ast
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIB = ROOT / "src" / "pertreasonqa" / "pertreasonqa_lib"
#: The modules of appendix B.2's path search.
PATH_MODULES = ("path_params.py", "cell_state.py", "pagerank.py", "path_search.py", "sign_filters.py", "reference_paths.py")
#: Fastest first: ``-x`` stops at the first failure.
TESTS = ["tests/pertreasonqa/test_pipeline_steps.py", "tests/pertreasonqa/test_path_params.py",
         "tests/pertreasonqa/test_cell_state.py", "tests/pertreasonqa/test_pagerank.py",
         "tests/pertreasonqa/test_sign_filters.py", "tests/pertreasonqa/test_path_search.py",
         "tests/pertreasonqa/test_reference_paths.py", "tests/pertreasonqa/test_signed_graph.py"]

#: (name, module, text, replacement): one step of B.2 removed or changed.
NAMED = [
    ("gating removed from the whole search", "reference_paths.py",
     "weights = gate_edge_weights(graph, node_basal, tau_low, params)",
     "weights = np.ones(graph.n_edges) + params.eps_w"),
    ("gating removed from the cost only", "reference_paths.py",
     "flow = edge_flow(graph, weights, col)", "flow = edge_flow(graph, np.ones(graph.n_edges), col)"),
    ("gating removed from the PageRank only", "reference_paths.py",
     "ppr = personalized_pagerank(graph, weights,", "ppr = personalized_pagerank(graph, np.ones(graph.n_edges),"),
    ("PageRank removed from the cost", "path_search.py",
     "return np.asarray(weights) * ppr[graph.src] * ppr[graph.dst]", "return np.asarray(weights) * 1.0"),
    ("steepness beta 10 -> 5", "path_params.py", "BETA = 10.0", "BETA = 5.0"),
    ("steepness ignored", "cell_state.py", "act = _sigmoid(params.beta * (", "act = _sigmoid(1.0 * ("),
    ("source floor removed", "cell_state.py", "g_src = np.maximum(act, params.delta_src)", "g_src = act"),
    ("target floor removed", "cell_state.py",
     "g_tgt = params.delta_tgt + (1.0 - params.delta_tgt) * act", "g_tgt = act"),
    ("penalty lambda 2 -> 1.5", "path_params.py", "PENALTY = 2.0", "PENALTY = 1.5"),
    ("penalty not cumulative", "path_search.py", "f_loc[None, :] / params.penalty ** uses",
     "f_loc[None, :] / params.penalty ** np.minimum(uses, 1)"),
    ("no diversification", "path_params.py", "N_PATHS = 4", "N_PATHS = 1"),
    ("D_max 4 -> 3", "path_params.py", "MAX_HOPS = 4", "MAX_HOPS = 3"),
    ("KS tau_low two-sided", "cell_state.py", "return float(grid[int(np.argmax(diff))])",
     "return float(grid[int(np.argmax(np.abs(diff)))])"),
    ("KS tau_low sides swapped", "cell_state.py", "diff = _ecdf(bg, grid) - _ecdf(sig, grid)",
     "diff = _ecdf(sig, grid) - _ecdf(bg, grid)"),
    ("tau_high without its shift", "cell_state.py", "return float(act[int(np.argmax(d))])",
     "return float(act[int(np.argmax(d))] - act[0])"),
    ("tau_high one side of the ECDF step", "cell_state.py", "d = np.maximum(np.abs(upper), np.abs(lower))",
     "d = np.abs(upper)"),
    ("PPR damping 0.85 -> 0.5", "path_params.py", "ALPHA = 0.85", "ALPHA = 0.5"),
    ("PPR dangling mass dropped", "pagerank.py",
     "new[rows, cols] += vals * (params.alpha * lost[cols] + (1.0 - params.alpha))",
     "new[rows, cols] += vals * (1.0 - params.alpha)"),
    ("cost constant 1e-4 -> 1", "path_params.py", "EPS_C = 1e-4", "EPS_C = 1.0"),
    ("superset pruning removed", "path_search.py", "if not any(other < ns for other in node_sets)", "if True"),
    ("ambiguity budget ignored", "sign_filters.py", "    if ambiguous > budget:\n        return False\n    return (1",
     "    return (1"),
    ("Algorithm 2 floor rule removed", "sign_filters.py", "    if target_state == STATE_LOW:\n        return 0 in states",
     "    if target_state == STATE_LOW:\n        return False"),
    ("Algorithm 2 ceiling rule removed", "sign_filters.py", "    if target_state == STATE_HIGH:\n        return 1 in states",
     "    if target_state == STATE_HIGH:\n        return False"),
]

_SWAPS = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
          ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.And: ast.Or, ast.Or: ast.And}


def automatic_mutants(module: str) -> list[tuple[str, str, str]]:
    """(name, module, mutated source) for every operator swap and numeric constant of a module's code."""
    source = (LIB / module).read_text()
    tree = ast.parse(source)
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
                  and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    sites = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sites += [(node, "ops", i) for i, op in enumerate(node.ops) if type(op) in _SWAPS]
        elif isinstance(node, (ast.BinOp, ast.BoolOp)) and type(node.op) in _SWAPS:
            sites.append((node, "op", None))
        elif (isinstance(node, ast.Constant) and type(node.value) in (int, float) and not isinstance(node.value, bool)
              and id(node) not in docstrings):
            sites.append((node, "value", None))
    out = []
    for k, (node, field, index) in enumerate(sites):
        if field == "ops":
            old = node.ops[index]
            node.ops[index] = _SWAPS[type(old)]()
            what = f"{type(old).__name__} -> {type(node.ops[index]).__name__}"
        elif field == "op":
            old = node.op
            node.op = _SWAPS[type(old)]()
            what = f"{type(old).__name__} -> {type(node.op).__name__}"
        else:
            old = node.value
            node.value = old + 1 if isinstance(old, int) else (old * 2 if old else 1e-3)
            what = f"{old!r} -> {node.value!r}"
        out.append((f"line {node.lineno}: {what}", module, ast.unparse(tree)))
        if field == "ops":
            node.ops[index] = old
        elif field == "op":
            node.op = old
        else:
            node.value = old
        del k
    return out


def run_mutant(module: str, source: str, work: Path) -> bool:
    """True when the path tests fail on the mutant (killed)."""
    lib = work / "pertreasonqa_lib"
    if lib.exists():
        shutil.rmtree(lib)
    shutil.copytree(LIB, lib, ignore=shutil.ignore_patterns("__pycache__"))
    (lib / module).write_text(source)
    cmd = [sys.executable, "-m", "pytest", *TESTS, "-x", "-q", "-p", "no:cacheprovider",
           "-o", f"pythonpath={work} tests tests/pertreasonqa", "-W", "ignore"]
    try:
        result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return True  # a mutant that hangs the suite is noticed
    return result.returncode != 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["named", "automatic", "all"], default="all")
    parser.add_argument("--limit", type=int, default=0, help="automatic mutants per module (0: all)")
    parser.add_argument("--out", type=Path, help="write every mutant and its fate as TSV")
    parser.add_argument("--rerun", type=Path, help="a previous run's output (TSV or log): run only its survivors")
    args = parser.parse_args()
    mutants = []
    if args.only in ("named", "all"):
        for name, module, text, replacement in NAMED:
            source = (LIB / module).read_text()
            if source.count(text) != 1:
                raise SystemExit(f"named mutant {name!r}: its text occurs {source.count(text)} times in {module}")
            mutants.append(("named", name, module, source.replace(text, replacement)))
    if args.only in ("automatic", "all"):
        for module in PATH_MODULES:
            auto = automatic_mutants(module)
            mutants += [("automatic", n, m, s) for n, m, s in (auto[:args.limit] if args.limit else auto)]
    if args.rerun:
        lines = [line.split("\t") for line in args.rerun.read_text().splitlines()]
        wanted = {(f[1], f[2]) for f in lines if len(f) == 4 and f[3] == "SURVIVED"}
        mutants = [m for m in mutants if (m[2], m[1]) in wanted]
    rows, survivors = [], []
    with tempfile.TemporaryDirectory(prefix="pertreasonqa_mutants_") as tmp:
        # The unmutated copy must pass, or every mutant would count as killed.
        if run_mutant(PATH_MODULES[0], (LIB / PATH_MODULES[0]).read_text(), Path(tmp)):
            raise SystemExit("the path tests fail on the unmutated library: fix them before a mutation run")
        for kind, name, module, source in mutants:
            killed = run_mutant(module, source, Path(tmp))
            rows.append((kind, module, name, "killed" if killed else "SURVIVED"))
            print("\t".join(rows[-1]), flush=True)
            if not killed:
                survivors.append((kind, module, name))
    if args.out:
        args.out.write_text("kind\tmodule\tmutant\tfate\n" + "".join("\t".join(r) + "\n" for r in rows))
    print(f"\n{len(rows) - len(survivors)} of {len(rows)} mutants killed; surviving:")
    for kind, module, name in survivors:
        print(f"  [{kind}] {module}: {name}")
    return 1 if any(kind == "named" for kind, _, _ in survivors) else 0


if __name__ == "__main__":
    sys.exit(main())
