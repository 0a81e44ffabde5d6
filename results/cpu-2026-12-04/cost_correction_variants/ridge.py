import math, sys
import numpy as np, os
EXTRA = bool(os.environ.get('EXTRA'))
from harness import by, KEYS, held_out, f
TERMS = ("tensor", "cuda", "smem", "l2", "hbm", "latency", "sync", "spill", "chain")

def feats(s):
    p = s.prediction
    lp = max(p.launches, key=lambda l: l.time_s)
    t = lp.terms; o = lp.occupancy; w = lp.work
    tot = p.time_s
    x = [math.log(tot)]
    for name in TERMS:
        x.append(math.log(getattr(t, f"{name}_s") / tot + 1e-3))
    x += [math.log(o.resident_ctas * o.threads_per_cta / 32), float(lp.pingpong), math.log(o.regs_per_thread),
          float(o.spilled_regs > 0), math.log(max(1, w.stages)), len(p.launches),
          math.log(sum(l.time_s for l in p.launches) / lp.time_s)]
    if EXTRA:
        it = max(1.0, w.iterations)
        x += [math.log(w.tensor_flops / it + 1.0), math.log(w.stage_bytes + 1.0), math.log(o.smem_bytes_per_cta + 1.0),
              math.log(w.syncs / it + 1e-3)]
    return x

def ridge_fitter(lam):
    def fitter(train):
        X = np.array([feats(s) for s in train]); y = np.log([s.measured_ms for s in train])
        mu, sd = X.mean(0), X.std(0) + 1e-9
        Z = (X - mu) / sd
        A = Z.T @ Z + lam * len(y) * np.eye(Z.shape[1])
        wts = np.linalg.solve(A, Z.T @ (y - y.mean()))
        return lambda s: float(((np.array(feats(s)) - mu) / sd) @ wts + y.mean())
    return fitter

if __name__ == "__main__":
  for lam in map(float, sys.argv[1:]):
      print("lam", lam)
      for k in KEYS:
          print(" ", k, held_out(by[KEYS[k]], ridge_fitter(lam)))
