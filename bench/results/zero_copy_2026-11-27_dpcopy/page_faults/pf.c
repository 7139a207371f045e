#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  size_t mb = argc>1?atoi(argv[1]):64; size_t bytes=mb<<20;
  for(int r=0;r<5;++r){
    double t0=now();
    char*p=mmap(0,bytes,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
    memset(p,1,bytes);
    double t1=now();
    memset(p,2,bytes);
    double t2=now();
    munmap(p,bytes);
    printf("%zu MiB: first touch %.1f ms (%.2f GB/s), second %.1f ms (%.2f GB/s)\n",mb,(t1-t0)*1e3,bytes/(t1-t0)/1e9,(t2-t1)*1e3,bytes/(t2-t1)/1e9);
  }
}
