import math, sys
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3] / "scripts"))
import fit_cost_model as f
from harness import by, KEYS, spearman
from cake.ir.cost_calibration import top_k_recall
ev = by[KEYS["evolve"]]; gr = [s for s in by[KEYS["graph"]] if not s.win]
# graph factors fitted once (the search's factors); correction fitted on graph + the other evolve runs
factors = f.fit_on(gr).factors
preds, tests = [], []
for r in sorted({s.run for s in ev}):
    train_ev = [s for s in ev if s.run != r and not s.win]
    seen = {s.ident for s in ev if s.run != r} | {s.ident for s in gr}
    test = [s for s in ev if s.run == r and s.ident not in seen]
    if not test: continue
    corr = f.correct_on(gr + train_ev)
    preds += [f.predicted_s(s, factors, corr) for s in test]; tests += test
me = [s.measured_ms for s in tests]
print("joint (graph + other evolve runs)", len(tests), round(spearman(preds, me), 3), top_k_recall(preds, me, 5), top_k_recall(preds, me, 10))
corr = f.correct_on(gr)
p2 = [f.predicted_s(s, factors, corr) for s in tests]
print("graph only, same tests", len(tests), round(spearman(p2, me), 3), top_k_recall(p2, me, 5), top_k_recall(p2, me, 10))
