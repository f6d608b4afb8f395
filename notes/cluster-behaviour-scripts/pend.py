import sys, time, json
sys.path.insert(0, "/tmp/rc")
from runner import *
ver = sys.argv[1]
quick = len(sys.argv) > 2 and sys.argv[2] == "quick"
AT = 60 if quick else 180
FT = 60 if quick else 300
P = "workloads.pending:"
def boot_start_log(c):
    r = c.exec("late", ["sh", "-c", "cat /raychaos/state/ray-start.rc; stat -c %Y /raychaos/state/ray-start.rc; tail -n 8 /raychaos/state/ray-start.log"])
    c.node("late").container.reload()
    return {"output": r.output, "container_started": c.node("late").container.attrs["State"]["StartedAt"]}
def join_late(c):
    run = c.run(P+"infeasible", request={"resources": {"fancy": 1}}, kind="task", wait_s=6, join_wait_s=120, timeout=200)
    run.wait_for("pending_confirmed", timeout=60)
    t = time.time()
    late = c.node("late")
    r = c.exec("late", ["sh", "-c", f"ray stop --force >/dev/null 2>&1; unset RAY_ADDRESS; ray start --address={c.head_ip}:6379 --node-ip-address={late.ip} --num-cpus=1 --resources='{{\"fancy\": 1}}' --disable-usage-stats 2>&1 | tail -3"], timeout=120)
    res = outcome_json(run)
    return {"ray_start_rc": r.exit_code, "ray_start_out": r.output[-500:], "ray_start_s": round(time.time()-t, 2), "workload": res}
spec = ClusterSpec(ray_version=ver, head=NodeSpec(name="head", num_cpus=2),
    workers=(NodeSpec(name="gplain", num_cpus=2, num_gpus=1),
             NodeSpec(name="ga100", num_cpus=2, num_gpus=1, resources={"A100": 1, "accelerator_type:A100": 1}),
             NodeSpec(name="late", num_cpus=1, head_address="127.0.0.1:6379", expect_join=False)),
    driver=False)
run_steps("pend", spec, [
    ("PEND-03 membership", W(P+"membership", absent=["late"])),
    ("PEND-05 loopback at boot", boot_start_log),
    ("PEND-05 loopback attempt", W(P+"start_attempt", node="late", address="127.0.0.1:6379", timeout_s=AT, timeout=400)),
    ("PEND-05 firewall DROP to head", lambda c: outcome_json(c.run(P+"start_attempt", node="late", address=f"{c.head_ip}:6379", drop_to="head", timeout_s=FT, timeout=400))),
    ("PEND-04 gpu and type", W(P+"gpu_and_type")),
    ("PEND-02 strict spread", W(P+"strict_pg", strategy="STRICT_SPREAD")),
    ("PEND-02 strict pack", W(P+"strict_pg", strategy="STRICT_PACK", bundles=[{"CPU": 2}, {"CPU": 1}])),
    ("PEND-01 gpu task", W(P+"infeasible", request={"num_gpus": 2}, kind="task", wait_s=8)),
    ("PEND-01 custom actor", W(P+"infeasible", request={"resources": {"nobody": 1}}, kind="actor", wait_s=8)),
    ("PEND-01 cpu task", W(P+"infeasible", request={"num_cpus": 64}, kind="task", wait_s=8)),
    ("PEND-06 app errors", W(P+"app_errors", timeout_s=60, timeout=900)),
    ("PEND-05 loopback at boot, later", boot_start_log),
    ("PEND-01 runs once node joins", join_late),
    ("PEND-03 membership after join", W(P+"membership")),
], ver)
