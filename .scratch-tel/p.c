#include <stdio.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <time.h>
#include <linux/kvm.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
int main(){int kvm=open("/dev/kvm",O_RDWR);int vm=ioctl(kvm,KVM_CREATE_VM,0);int v=ioctl(vm,KVM_CREATE_VCPU,0);int fd=ioctl(v,KVM_GET_STATS_FD,0);
char b[1120];for(int r=0;r<3;r++){double t0=now();int N=200000;for(int i=0;i<N;i++)pread(fd,b,1120,3080);double t1=now();printf("C pread 1120: %.0f ns\n",(t1-t0)/N);
t0=now();for(int i=0;i<N;i++)getppid();t1=now();printf("C getppid: %.0f ns\n",(t1-t0)/N);}}
