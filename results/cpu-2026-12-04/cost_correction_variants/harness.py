import pickle, sys, math, statistics
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3] / "scripts"))
import fit_cost_model as f
from cake.ir.cost_calibration import spearman, top_k_recall, Factors, FACTOR_NAMES
by = pickle.load(open("/tmp/cost_correction_samples.pkl", "rb"))
KEYS = {"graph": 'cuda/H200/nvcc-13.0.88+torch-2.11.0+codegen-4+graph',
        "evolve": 'cuda/H200/nvcc-13.0.88+torch-2.11.0+codegen-4+events',
        "cg1": 'cuda/H200/nvcc-13.0.88+torch-2.11.0+codegen-1+events',
        "triton": 'triton/H200/triton-3.6.0+torch-2.11.0+codegen-3+events'}

def baseline_fitter(train):
    fit = f.fit_on(train)
    return lambda s: s.prediction.retimed(fit.factors)

def held_out(samples, fitter):
    runs = sorted({s.run for s in samples})
    preds, tests = [], []
    for test_run in runs:
        train = [s for s in samples if s.run != test_run and not s.win]
        seen = {s.ident for s in samples if s.run != test_run}
        test = [s for s in samples if s.run == test_run and s.ident not in seen]
        if not test: continue
        p = fitter(train)
        preds += [p(s) for s in test]; tests += test
    shapes = {}
    for i, s in enumerate(tests):
        shapes.setdefault(f.shape_tag(s), []).append(i)
    out = {}
    for tag, idx in shapes.items():
        pr = [preds[i] for i in idx]; me = [tests[i].measured_ms for i in idx]
        out[tag] = (len(idx), round(spearman(pr, me), 3), top_k_recall(pr, me, 5), top_k_recall(pr, me, 10))
    return out

def run(fitter, keys=("graph", "evolve", "cg1", "triton")):
    for k in keys:
        print(k, held_out(by[KEYS[k]], fitter), flush=True)

if __name__ == "__main__":
    run(baseline_fitter)
