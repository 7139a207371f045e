import torch, time
torch.set_num_threads(1)
torch.manual_seed(0)
W=1536; L=4; rows=16
layers=[]
for i in range(L):
    layers += [torch.nn.Linear(W,W), torch.nn.ReLU()]
params=[p for l in layers for p in l.parameters()]
x=torch.randn(rows,W)
g=torch.randn(rows,W)
def full():
    xi=x.clone().requires_grad_()
    y=xi
    for l in layers: y=l(y)
    t=time.perf_counter(); torch.autograd.backward([y],[g]); return time.perf_counter()-t, 0
def split():
    xi=x.clone().requires_grad_()
    ins=[];outs=[];y=xi
    for k,l in enumerate(layers):
        if k>0:
            y=y.detach().requires_grad_()
        ins.append(y); y=l(y); outs.append(y)
    t=time.perf_counter()
    grads=[None]*len(layers); grads[-1]=g
    for k in range(len(layers)-1,-1,-1):
        gi=torch.autograd.grad([outs[k]],[ins[k]],[grads[k]],retain_graph=True,allow_unused=True)[0]
        if k>0: grads[k-1]=gi
    tb=time.perf_counter()-t
    t=time.perf_counter()
    torch.autograd.backward(outs,grads,inputs=params)
    return tb, time.perf_counter()-t
for fn in (full,split,full,split):
    res=[fn() for _ in range(30)]
    b=sorted(r[0] for r in res)[15]; w=sorted(r[1] for r in res)[15]
    print(fn.__name__, "B/backward ms %.2f  W ms %.2f  total %.2f"%(b*1e3,w*1e3,(b+w)*1e3))
