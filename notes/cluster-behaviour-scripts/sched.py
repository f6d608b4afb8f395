import sys, time
sys.path.insert(0, "/tmp/rc")
from runner import *
ver = sys.argv[1]
S = "workloads.scheduling:"
def kill_w2(c):
    c.node("worker-2").container.kill()
    return {"killed_at": time.time()}
specA = ClusterSpec(ray_version=ver, head=NodeSpec(name="head", num_cpus=4, resources={"special": 1}),
                    workers=(NodeSpec(name="worker", count=2, num_cpus=4),), driver=False)
run_steps("sched-A", specA, [
    ("SCHED-01 spread actors 12", W(S+"place", n=12, strategy="SPREAD")),
    ("SCHED-01 spread actors 7", W(S+"place", n=7, strategy="SPREAD")),
    ("SCHED-01 spread tasks 7", W(S+"place", n=7, strategy="SPREAD", kind="task")),
    ("SCHED-02 default actors", W(S+"place_series", ns=[2,4,6,12], strategy="DEFAULT")),
    ("SCHED-02 default tasks", W(S+"place_series", ns=[2,4,6,12], strategy="DEFAULT", kind="task")),
    ("SCHED-04 special actors", W(S+"only_head_resource", resource="special", n=3)),
    ("SCHED-04 node ip actors", W(S+"only_head_resource", use_node_ip=True, n=3)),
    ("SCHED-04 special tasks", W(S+"tasks_on_head_resource", n=4)),
    ("SCHED-05 fake id", W(S+"affinity_to_dead", use_fake_id=True)),
    ("kill worker-2", kill_w2),
    ("SCHED-05 dead node", W(S+"affinity_to_dead", node_name="worker-2")),
], ver)
specB = ClusterSpec(ray_version=ver, head=NodeSpec(name="head", num_cpus=0),
                    workers=(NodeSpec(name="worker", count=2, num_cpus=4),), driver=False)
run_steps("sched-B", specB, [
    ("SCHED-03 default actors 8", W(S+"place", n=8)),
    ("SCHED-03 spread actors 8", W(S+"place", n=8, strategy="SPREAD")),
    ("SCHED-03 default tasks 4", W(S+"place", n=4, kind="task")),
    ("SCHED-03 default tasks 8", W(S+"place", n=8, kind="task")),
], ver)
