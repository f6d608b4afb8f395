import sys, time, json
sys.path.insert(0, "/tmp/rc")
from runner import *
ver = sys.argv[1]
A = "workloads.advice:"
spec = ClusterSpec(ray_version=ver, head=NodeSpec(name="head", num_cpus=4),
    workers=(NodeSpec(name="worker", count=2, num_cpus=4),), driver=False,
    env={"RAY_SCHEDULER_TASKS_USE_THROUGHPUT_SCHEDULER": "1"})
def bad_args_at_boot(c):
    return {"note": "see adv-bootargs"}
run_steps("adv", spec, [
    ("ADVICE-01 ray start options", W(A+"ray_start_options", node="worker-2")),
    ("ADVICE-02 init strategy", W(A+"init_with_strategy")),
    ("ADVICE-03 max_resources", W(A+"submit_with_max_resources")),
    ("ADVICE-04 knob scan", W(A+"knob_known")),
    ("ADVICE-04 placement with knob", W("workloads.scheduling:place_series", ns=[2, 4, 6, 12], strategy="DEFAULT")),
], ver)
# ADVICE-01 as a node's boot args
spec2 = ClusterSpec(ray_version=ver, head=NodeSpec(name="head", num_cpus=1),
    workers=(NodeSpec(name="adv", num_cpus=1, extra_args=("--memory-monitor-interval-ms=100", "--raylet-death-on-oom=false"), expect_join=False),), driver=False)
def boot_log(c):
    time.sleep(3)
    r = c.exec("adv", ["sh", "-c", "cat /raychaos/state/ray-start.rc; tail -n 6 /raychaos/state/ray-start.log"])
    return {"output": r.output}
run_steps("adv-bootargs", spec2, [("ADVICE-01 boot", boot_log), ("membership", W("workloads.pending:membership", absent=["adv"]))], ver)
