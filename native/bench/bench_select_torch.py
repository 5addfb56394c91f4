# torch (one thread) or kwker through its Python wrapper (arg "kwker") on the same shapes as bench_select.c
import torch, time, sys
torch.set_num_threads(1)
torch.manual_seed(1)
def t(f, reps):
    best=1e9
    for _ in range(reps):
        s=time.thread_time(); f(); e=time.thread_time()-s; best=min(best,e)
    return best
cases=[("topk 1x1M k=8",torch.float32,1,1000000,8,0),("topk 64x1000 k=8",torch.float32,64,1000,8,0),
 ("topk 4096x256 k=8",torch.float32,4096,256,8,0),("topk 4096x64 k=2",torch.float32,4096,64,2,0),
 ("topk 4096x8 k=1",torch.float32,4096,8,1,0),("topk 4096x128 k=8",torch.float32,4096,128,8,0),
 ("topk 8x128256 bf16 k=50",torch.bfloat16,8,128256,50,0),("topk 8x32000 bf16 k=100",torch.bfloat16,8,32000,100,0),
 ("topk 8x128256 bf16 k=1",torch.bfloat16,8,128256,1,0),
 ("median 64x1000",torch.float32,64,1000,0,1),("median 1x1M",torch.float32,1,1000000,0,1),("median_all 1M",torch.float32,1,1000000,0,2)]
use_k = len(sys.argv)>1 and sys.argv[1]=='kwker'
if use_k:
    from kwker.ops import selection
    from kwker._native import ORDER_TORCH
for name,dt,r,n,k,med in cases:
    x=torch.randn(r,n).to(dt)
    if med==1: f=(lambda: selection.median_dim(x,1,False,False)) if use_k else (lambda: torch.median(x,1))
    elif med==2: f=(lambda: selection.median_all(x,False)) if use_k else (lambda: torch.median(x))
    else: f=(lambda: selection.topk(x,k,1,True,True,ORDER_TORCH)) if use_k else (lambda: torch.topk(x,k,1))
    e=t(f, 30 if r*n<100000 else 12)
    print(f"{name:28s} {e*1e9/(r*n):8.3f} ns/elem")
