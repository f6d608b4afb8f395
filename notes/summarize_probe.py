# ruff: noqa  -- a throw-away probe script kept as evidence, not part of the package
"""Condense notes/probe-results.jsonl (one line per workload run) into per-scenario rows."""
import json, collections
rows = [json.loads(l) for l in open(__import__('pathlib').Path(__file__).with_name('probe-results.jsonl'))]
def tk(d): return d.get('t_kill') or (d.get('t_kills') or [None])[0]
def rel(t, d):
    k = tk(d); return None if (t is None or k is None) else round(t - k, 2)
def et(e): 
    if not e: return None
    return e['type'] + (f"[{e['reason']}]" if e.get('reason') else '')
out = collections.defaultdict(list)
for d in rows:
    s, v = d['scenario'], d['version']
    if 'probe_error' in d: out[s].append((v, 'PROBE_ERROR ' + d['probe_error'][:200] + ' | during ' + str(d.get('during'))[:300])); continue
    if 'raised' in d: out[s].append((v, 'RAISED ' + d['raised']['type'] + ': ' + d['raised']['message'][-200:])); continue
    x = d['value']; m = {}
    if s.startswith(('TASK-01','TASK-02','TASK-03')):
        m = dict(err=et(x.get('error')), bases=(x.get('error') or {}).get('bases'), execs=x['executions'], isinst=x.get('isinstance_cause'), value=x.get('value'), secs=x.get('seconds'),
                 attempts=[(a.get('state'), a.get('error_type')) for a in x['attempts']])
    elif s.startswith(('TASK-04','TASK-05')):
        m = dict(err=et(x.get('error')), msg=(x.get('error') or {}).get('message','')[:120], ran_on=[e['node_id'][:6] for e in x['executions']], first=x.get('first_node_name'), value_on=x.get('value_node_name'),
                 outcome=rel(x['t_outcome'], d), dead_seen=rel(x.get('t_dead_seen'), d), attempts=[(a.get('state'), a.get('error_type')) for a in x['attempts']],
                 death=(x.get('node_record') or {}).get('DeathReason'), death_msg=(x.get('node_record') or {}).get('DeathReasonMessage'))
    elif s.startswith(('OBJ-01','OBJ-02','OBJ-03')):
        m = dict(task=et(x.get('task_error')) if 'task_error' in x else None, task_ok='task_value' in x and x.get('task_error') is None, driver=et(x.get('driver_error')), driver_ok=x.get('driver_error') is None,
                 execs=x['executions'], nodes=x['execution_nodes'], dead_seen=[rel(r.get('t_dead_seen'), d) for r in x['rounds']], t_driver=rel(x.get('t_driver_outcome'), d),
                 kills=[round(t - tk(d), 2) for t in d.get('t_kills', [])], attempts=[(a.get('state'), a.get('error_type')) for a in x['attempts']])
    elif s.startswith('OBJ-04'):
        m = dict(task=et(x.get('task_error')), driver=et(x.get('driver_error')), dead_seen=rel(x['t_dead_seen'], d))
    elif s.startswith('OBJ-05'):
        t0 = x.get('t_owner_killed') or x.get('t_owner_dead_seen')
        m = dict(owner_err=et(x.get('owner_error')), task=et(x.get('task_error')) or 'OK', driver=et(x.get('driver_error')) or 'OK',
                 task_after=round(x['t_task_outcome'] - t0, 2), driver_after=round(x['t_driver_outcome'] - t0, 2))
    elif s.startswith('OBJ-06'):
        m = dict(objs=collections.Counter(f"{(o.get('error') or {}).get('reason') or 'OK'} x{o['executions']}" for o in x['objects']), dead_seen=rel(x['t_dead_seen'], d))
    elif s.startswith('ACTOR-01'):
        m = dict(errors=[(e['type'], rel(e['t'], d)) for e in x['errors']], final=rel(x['t_final'], d), state=(x['state_api'] or {}).get('state'),
                 cause=((x['state_api'] or {}).get('death_cause') or {}).get('actor_died_error_context', {}).get('reason'),
                 node_death=((x['state_api'] or {}).get('death_cause') or {}).get('actor_died_error_context', {}).get('node_death_info'),
                 msg=[e['message'][-160:] for e in x['errors']][-1:])
    elif s.startswith('ACTOR-02'):
        m = dict(rounds=[{k: r.get(k) for k in ('round','node_name','restarted','after_node_name','state_reset','restart_s','errors_during')} for r in x['rounds']],
                 final=[ (r.get('final_errors') or [{}])[0].get('type') for r in x['rounds'] if not r.get('restarted')],
                 transitions=[(t['state'], t['num_restarts']) for t in x['state_transitions']], final_row={k: (x['state_api'] or {}).get(k) for k in ('state','num_restarts')},
                 cause=(((x['state_api'] or {}).get('death_cause') or {}).get('actor_died_error_context') or {}).get('reason'), kills=d.get('killed'))
    elif s.startswith('ACTOR-03'):
        m = dict(pids=x['pids'], ok=x['ok_count'], errors=x['error_counts'], order=x['order_kept'], die_call=x['results'][10].get('ok') or x['results'][10].get('error'))
    elif s.startswith('ACTOR-04'):
        cs = x.get('child_state_api') or {}
        m = dict(child_errors=[e['type'] for e in x['child_errors']], child_final_after=round(x['t_child_final'] - x['t_parent_strike'], 2), child_state=cs.get('state'),
                 child_cause=((cs.get('death_cause') or {}).get('actor_died_error_context') or {}).get('reason'), child_msg=[e['message'][-200:] for e in x['child_errors']][-1:],
                 detached_ok=x.get('detached_error') is None, detached_state=(x.get('detached_state_api') or {}).get('state'))
    elif s.startswith('ACTOR-05'):
        m = dict(err=et(x.get('error')), ok=x.get('value'), outcome=rel(x['t_outcome'], d), dead=rel(x['t_dead_seen'], d), actor_after=(x.get('actor_after') or {}).get('node_name') or x.get('actor_after_error'))
    elif s.startswith(('NODE-01','NODE-02','NODE-04')):
        rec = x.get('ray_nodes_record') or {}
        m = dict(dead_seen=rel(x['t_dead_seen'], d), task=et(x.get('task_error')), task_t=rel(x.get('t_task_outcome'), d), actor=[(e['type'], rel(e['t'], d)) for e in x.get('actor_errors', [])],
                 DeathReason=rec.get('DeathReason'), DeathMsg=rec.get('DeathReasonMessage'), state_api=(x.get('state_api_node') or {}).get('state_message'),
                 actor_cause=(((x.get('actor_state_api') or {}).get('death_cause') or {}).get('actor_died_error_context') or {}).get('reason'),
                 attempts=[(a.get('state'), a.get('error_type')) for a in x.get('task_attempts', [])])
        if 'ps_after' in d: m['raylet_procs_after'] = [l for l in d['ps_after'].splitlines() if 'ray' in l.lower()][:12]
        m['pushed'] = [l[-200:] for l in (d.get('driver_output') or '').splitlines() if 'dead' in l.lower() or 'died' in l.lower()][:4]
    elif s.startswith('NODE-03'):
        m = dict(same_id=x['same_id'], dead_seen=rel(x['t_dead_seen'], d), new_alive=rel(x['t_new_alive_seen'], d), restart=rel(d.get('t_restart'), d),
                 old_state=(x.get('state_api_old') or {}).get('state'), old_msg=(x.get('state_api_old') or {}).get('state_message'), task_on_new=x.get('task_on_new'), rc=d.get('ray_start_rc'))
    out[s].append((v, m))
for s in sorted(out):
    print('##', s)
    for v, m in out[s]:
        print('  ', v, json.dumps(m, default=str)[:1800])
