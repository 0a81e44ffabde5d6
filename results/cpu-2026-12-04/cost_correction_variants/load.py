import pickle, sys
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3] / "scripts"))
import fit_cost_model as f
loaded = f.load_sources(f.default_sources())
by = {}
for s in loaded.samples:
    by.setdefault(str(s.key), []).append(s)
pickle.dump(by, open("/tmp/cost_correction_samples.pkl", "wb"))
print({k: len(v) for k, v in by.items()})
