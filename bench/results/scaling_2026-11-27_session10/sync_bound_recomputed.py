import re,sys,collections,statistics
# Recompute the synchronous bound from a run_scaling.sh output whose independent_run lines are kept.
for path in sys.argv[1:]:
    runs=collections.defaultdict(list); val={}
    for l in open(path):
        m=re.match(r'(\S+) round=(\d+) model=(\S+) ranks=(\d+) .*?samples_per_s=([0-9.]+)',l)
        if not m: continue
        kind,r,model,n,sps=m.group(1),int(m.group(2)),m.group(3),int(m.group(4)),float(m.group(5))
        if kind=='independent_run': runs[(r,model)].append(sps)
        else: val[(kind,r,model,n)]=sps
    out=collections.defaultdict(list)
    for (r,model),v in sorted(runs.items()):
        base=val[('baseline_t1',r,model,1)]
        if ('baseline_after_t1',r,model,1) in val: base=(base+val[('baseline_after_t1',r,model,1)])/2
        slow=min(v)
        out[f'sync_bound {model}'].append(slow/base)
        out[f'strata/sync_bound {model}'].append(val[('scaling',r,model,2)]/(2*slow))
        out[f'host_shared/sync_bound {model}'].append(val[('scaling_host',r,model,2)]/(2*slow))
    print(path)
    for k,v in out.items(): print(f'  {k:32s} median {statistics.median(v):.2f}  rounds', ' '.join(f'{x:.2f}' for x in v))
