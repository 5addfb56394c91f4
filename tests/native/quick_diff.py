import torch, sys
from kwker._native import ORDER_TORCH, ORDER_STABLE
from kwker.ops import sorting, selection
torch.manual_seed(int(sys.argv[1]) if len(sys.argv)>1 else 0)
bad=0
def same(a,b): return a.dtype==b.dtype and a.shape==b.shape and torch.equal(a.flatten().view(torch.uint8), b.flatten().view(torch.uint8))
for trial in range(int(sys.argv[2]) if len(sys.argv)>2 else 100):
    n = int(torch.randint(1, 300, ()).item())
    for dt in [torch.float32, torch.float64, torch.int32, torch.int64, torch.bfloat16, torch.float16, torch.int8, torch.uint8, torch.int16]:
        if dt.is_floating_point:
            x = (torch.randn(4, n)*3).round().to(dt)
            x[0, ::7] = float('nan'); x[1, ::5] = -0.0
        else:
            x = torch.randint(-5 if dt!=torch.uint8 else 0, 5, (4, n)).to(dt)
        for desc in (False, True):
            for stable in (False, True):
                v,i = torch.sort(x, dim=1, descending=desc, stable=stable)
                v2,i2 = sorting.sort(x, 1, desc, ORDER_STABLE if stable else ORDER_TORCH)
                if not (torch.equal(i,i2) and same(v,v2)):
                    bad+=1
                    if bad<5: print('sort mismatch', dt, n, desc, stable)
        for k in {0, 1, min(3,n), n//2, n}:
            for largest in (True, False):
                for srt in (True, False):
                    v,i = torch.topk(x, k, dim=1, largest=largest, sorted=srt)
                    v2,i2 = selection.topk(x, k, 1, largest, srt, ORDER_TORCH)
                    if not (torch.equal(i,i2) and same(v,v2)):
                        bad+=1
                        if bad<10: print('topk mismatch', dt, n, k, largest, srt)
        for nan in (False, True):
            f = torch.nanmedian if nan else torch.median
            v,i = f(x, 1)
            v2,i2 = selection.median_dim(x, 1, False, nan)
            if not (torch.equal(i,i2) and same(v,v2)):
                bad+=1
                if bad<15: print('median mismatch', dt, n, nan)
            v = f(x); v2 = selection.median_all(x, nan)
            if not same(v,v2):
                bad+=1
                if bad<20: print('median all mismatch', dt, n, nan, v, v2)
print('bad', bad)
