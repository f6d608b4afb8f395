import sys, time, json
sys.path.insert(0, "/tmp/rc")
from runner import *
ver = sys.argv[1]
T = "workloads.tenancy:"
def t01(c):
    a = c.run(T+"named_actor_hold", name="shared", namespace="team-a", hold_s=25, timeout=120)
    a.wait_for("created", timeout=60)
    other = outcome_json(c.run(T+"named_actor_probe", name="shared", namespace="team-b", timeout=120))
    same = outcome_json(c.run(T+"named_actor_probe", name="shared", namespace="team-a", timeout=120))
    return {"team-b probe": other, "team-a probe": same, "holder": outcome_json(a)}
def t02(c):
    first = outcome_json(c.run(T+"leave_actors", timeout=120))
    t = time.time()
    second = outcome_json(c.run(T+"after_driver_exit", timeout=120))
    return {"driver1": first, "driver2": second}
def t04(c):
    b = c.run(T+"store_tenant_b", n_objs=3, size_mb=10, duration_s=45, timeout=240)
    b.wait_for("b_ready", timeout=90)
    a = outcome_json(c.run(T+"store_tenant_a", total_mb=300, size_mb=20, timeout=240))
    return {"tenant_a": a, "tenant_b": outcome_json(b)}
spec = ClusterSpec(ray_version=ver, head=NodeSpec(name="head", num_cpus=4, resources={"special": 1}),
    workers=(NodeSpec(name="worker", num_cpus=4, resources={"only_worker": 1}),), driver=False)
run_steps("ten", spec, [
    ("TENANT-01 namespaces", t01),
    ("TENANT-02 driver exit", t02),
    ("TENANT-03 pg reservation", W(T+"pg_reservation")),
    ("TENANT-04 store fill", t04),
    ("TENANT-05 jobs api", W(T+"jobs_api", timeout=600)),
], ver)
