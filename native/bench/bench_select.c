/* bench_select.c - ns/element (thread CPU time, best of reps per 64K-element chunk) of
 * kwk_topk / kwk_median_dim / kwk_median_all on the shapes of the selection brief.
 *   gcc -D_GNU_SOURCE -O3 -std=c11 -Inative/include -o /tmp/bench_select \
 *       native/bench/bench_select.c native/src/dispatch.c native/src/targets/portable.c \
 *       native/src/targets/avx2.c native/src/targets/avx512.c -lm && /tmp/bench_select [NAME-FILTER [REPS]] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "kwker.h"
static double now(){struct timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static uint16_t f2bf(float f){uint32_t u;memcpy(&u,&f,4);return (uint16_t)((u+0x7FFF+((u>>16)&1))>>16);}
static double gauss(){double u=(rand()+1.0)/(RAND_MAX+2.0),v=(rand()+1.0)/(RAND_MAX+2.0);return __builtin_sqrt(-2*__builtin_log(u))*__builtin_cos(6.283185307*v);}
typedef struct{const char*name;int dt;long rows,n,k;int med;int order;} cfg;
int main(int argc,char**argv){
 cfg C[]={{"topk 1x1M k=8",KWK_FLOAT32,1,1000000,8,0,1},{"topk 64x1000 k=8",KWK_FLOAT32,64,1000,8,0,1},
  {"topk 4096x256 k=8",KWK_FLOAT32,4096,256,8,0,1},{"topk 4096x64 k=2",KWK_FLOAT32,4096,64,2,0,1},
  {"topk 4096x8 k=1",KWK_FLOAT32,4096,8,1,0,1},{"topk 4096x128 k=8",KWK_FLOAT32,4096,128,8,0,1},
  {"topk 8x128256 bf16 k=50",KWK_BFLOAT16,8,128256,50,0,1},{"topk 8x32000 bf16 k=100",KWK_BFLOAT16,8,32000,100,0,1},
  {"topk 8x128256 bf16 k=1",KWK_BFLOAT16,8,128256,1,0,1},
  {"median 64x1000",KWK_FLOAT32,64,1000,0,1,0},{"median 1x1M",KWK_FLOAT32,1,1000000,0,1,0},{"median_all 1M",KWK_FLOAT32,1,1000000,0,2,0}};
 int nc=sizeof C/sizeof C[0];
 for(int c=0;c<nc;c++){ if(argc>1 && !strstr(C[c].name,argv[1])) continue;
  long N=C[c].rows*C[c].n; srand(1);
  void*x=malloc(4*N); void*v=malloc(4*N); int64_t*ix=malloc(8*N);
  for(long i=0;i<N;i++){float f=(float)gauss(); if(C[c].dt==KWK_BFLOAT16) ((uint16_t*)x)[i]=f2bf(f); else ((float*)x)[i]=f;}
  int reps = argc>2 ? atoi(argv[2]) : 40;
  long chunk = C[c].rows; while (chunk > 1 && chunk*C[c].n > 65536) chunk /= 2;
  double total = 0; int es = C[c].dt==KWK_BFLOAT16 ? 2 : 4;
  for (long r0 = 0; r0 < C[c].rows; r0 += chunk) {
   long nr = C[c].rows - r0 < chunk ? C[c].rows - r0 : chunk; double best=1e9;
   const char *xs = (const char*)x + r0*C[c].n*es;
   for(int r=0;r<reps;r++){ double t=now(); int st;
    if(C[c].med==1) st=kwk_median_dim(C[c].dt,xs,nr,C[c].n,1,C[c].n,1,1,v,ix,1,1,0);
    else if(C[c].med==2) st=kwk_median_all(C[c].dt,x,N,1,v,0);
    else st=kwk_topk(C[c].dt,xs,nr,C[c].n,1,C[c].n,1,1,C[c].k,v,ix,C[c].k,1,1,1,1,C[c].order);
    double e=now()-t; if(st) printf("st=%d\n",st); if(e<best)best=e;}
   total += best; }
  double best = total;
  printf("%-28s %8.3f ns/elem\n",C[c].name,best*1e9/N);
  free(x);free(v);free(ix);}
}
