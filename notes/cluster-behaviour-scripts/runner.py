"""Host-side driver for the findings runs (kept in notes/ as reference)."""
import json, sys, time, traceback
from pathlib import Path
from chaos.cluster import Cluster
from chaos.spec import ClusterSpec, NodeSpec

RES = Path("/tmp/rc/results")
import socket
from chaos import labels as _labels

class Ident(_labels.RunIdentity):
    """Owner host label that another PID namespace's sweep cannot judge (owner_alive -> None).
    Workaround: concurrent sessions on host 'vm' in different PID namespaces sweep each other's
    live clusters (owner pid not visible in their /proc)."""
    def labels(self, **extra):
        d = super().labels(**extra)
        d[_labels.OWNER_HOST] = "helper-" + socket.gethostname()
        return d


def outcome_json(run, timeout=None):
    o = run.outcome(timeout)
    if o.error is not None:
        e = o.error
        return {"error": {"type": e.type, "bases": list(e.bases), "message": e.message[:2000], "attrs": e.attrs,
                          "tb": e.traceback[-1500:]}}
    return {"value": o.value}

def run_steps(tag, spec, steps, version):
    """steps: list of (label, callable(c) -> json-able)."""
    out = {"tag": tag, "version": version, "spec": repr(spec), "steps": {}}
    t0 = time.time()
    try:
        with Cluster(spec, identity=Ident(), workload_paths=[Path("/work/main/experiments/workloads")]) as c:
            out["boot_s"] = round(time.time() - t0, 1)
            for label, fn in steps:
                s = time.time()
                try:
                    r = fn(c)
                except Exception as exc:
                    r = {"host_exception": repr(exc)[:3000], "tb": traceback.format_exc()[-2000:]}
                out["steps"][label] = {"result": r, "host_s": round(time.time() - s, 2)}
                print(f"== {tag} {version} {label} ({time.time()-s:.1f}s)", json.dumps(r, default=str)[:1500], flush=True)
    except Exception as exc:
        out["cluster_exception"] = repr(exc)[:4000]
        print("CLUSTER EXC", repr(exc)[:4000], flush=True)
    out["total_s"] = round(time.time() - t0, 1)
    n = 1
    while (RES / f"{tag}-{version}-{n}.json").exists():
        n += 1
    (RES / f"{tag}-{version}-{n}.json").write_text(json.dumps(out, indent=1, default=str))
    return out

def W(_target, timeout=300, **kw):
    return lambda c: outcome_json(c.run(_target, timeout=timeout, **kw))
