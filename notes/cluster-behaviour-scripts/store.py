import sys, time, json
sys.path.insert(0, "/tmp/rc")
from runner import *
ver = sys.argv[1]
which = sys.argv[2] if len(sys.argv) > 2 else "all"
S = "workloads.store:"
if which in ("all", "spill"):
    spec = ClusterSpec(ray_version=ver, head=NodeSpec(name="head", num_cpus=2, object_store="100m"), workers=(), driver=False)
    run_steps("store01", spec, [("STORE-01 fill 300 MiB into 100 MiB", W(S+"fill_store", total_mb=300, size_mb=10))], ver)
if which in ("all", "nospill"):
    spec = ClusterSpec(ray_version=ver, head=NodeSpec(name="head", num_cpus=2, object_store="100m", memory="3g"), workers=(), driver=False,
                       env={"RAY_automatic_object_spilling_enabled": "0"})
    run_steps("store02", spec, [("STORE-02 no spilling 300 MiB into 100 MiB", W(S+"fill_store", total_mb=300, size_mb=10, timeout=900))], ver)
if which in ("all", "nospill", "nospill-sc"):
    spec = ClusterSpec(ray_version=ver, head=NodeSpec(name="head", num_cpus=2, object_store="100m", memory="3g",
                       extra_args=('--system-config={"automatic_object_spilling_enabled": false}',)), workers=(), driver=False)
    run_steps("store02-sc", spec, [("STORE-02 system-config spilling off, 300 MiB into 100 MiB", W(S+"fill_store", total_mb=300, size_mb=10, timeout=900))], ver)
if which in ("all", "disk"):
    spill = '{"type":"filesystem","params":{"directory_path":"/dev/shm/spill"}}'
    spec = ClusterSpec(ray_version=ver, head=NodeSpec(name="head", num_cpus=2, object_store="100m"), workers=(), driver=False,
                       env={"RAY_object_spilling_config": spill})
    run_steps("store03-shm", spec, [("STORE-03 spill to /dev/shm (164 MiB tmpfs)", W(S+"fill_store", total_mb=300, size_mb=10, timeout=600))], ver)
    spec = ClusterSpec(ray_version=ver, head=NodeSpec(name="head", num_cpus=2, object_store="100m"), workers=(), driver=False,
                       env={"RAY_local_fs_capacity_threshold": "0.0"})
    run_steps("store03-thr0", spec, [("STORE-03 threshold 0", W(S+"fill_store", total_mb=300, size_mb=10, timeout=600))], ver)
if which in ("all", "oom"):
    spec = ClusterSpec(ray_version=ver, head=NodeSpec(name="head", num_cpus=1),
        workers=(NodeSpec(name="worker", num_cpus=1, memory="1g", object_store="100m",
                          env={"RAY_memory_usage_threshold": "0.7", "RAY_memory_monitor_refresh_ms": "100"}),), driver=False)
    run_steps("oom01", spec, [("OOM-01", W(S+"oom_task", node_name="worker", timeout=900))], ver)
if which in ("all", "mem"):
    spec = ClusterSpec(ray_version=ver, head=NodeSpec(name="head", num_cpus=4, ray_memory="300m", object_store="80m", resources={"headslot": 10}),
        workers=(NodeSpec(name="worker", count=2, num_cpus=4),), driver=False)
    run_steps("oom02", spec, [("OOM-02", W(S+"logical_memory", declared_mb=150, n=3))], ver)
