import json,glob,sys
pat = sys.argv[1]
for f in sorted(glob.glob(f'/tmp/rc/results/{pat}*.json')):
    d=json.load(open(f))
    print('#', f.split('/')[-1], 'boot', d.get('boot_s'), 'total', d.get('total_s'), d.get('cluster_exception','')[:200])
    for k,s in d['steps'].items():
        r=s['result']; v=r.get('value', r)
        def strip(x):
            if isinstance(x, dict): return {a: strip(b) for a,b in x.items() if a not in ('ray_status','tb','memory_stats','disk','knobs','message') }
            if isinstance(x, list): return [strip(i) for i in x]
            return x
        print(' ', k, f"({s['host_s']}s)", json.dumps(strip(v))[:int(sys.argv[2]) if len(sys.argv)>2 else 700])
