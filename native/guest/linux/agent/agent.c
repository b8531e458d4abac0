// unhalt-agent: the Linux guest's side of the ttyS1 line protocol (docs/guest-contract.md).
//
//   unhalt-agent [DEVICE]        (default /dev/ttyS1)
//   unhalt-agent --stdio         commands on stdin, events on stdout (host tests of the same
//                                command path); exits at the end of stdin
//
// On start it writes one readiness line with the kernel's view of its paravirt features:
//
//   @u1 ready nproc=N cpus_possible=N kvm=0|1 kvm_features=N kvm_hints=N pv_unhalt=0|1
//       pv_spinlocks=1|0|-1 pv_spinlocks_reason=N kvmclock=0|1 haltpoll=0|1 cpuidle=0|1
//       haltpoll_gov=0|1 guest_halt_poll_ns=N
//
// then serves commands, one per line, from the same device: `NAME key=value ...`.
// Every reply is a `@u1 EVENT ...` line (integers only, units in key names); an unknown
// command gets `@u1 error unknown_command=1`, a line over COMMAND_MAX_BYTES `@u1 error
// line_too_long=1`. Commands (the COMMANDS table below):
//
//   ping seq=N                  -> @u1 pong seq=N
//   info                        -> @u1 info ... (as ready)
//   uptime                      -> @u1 uptime ms=N
//   idle ms=N period_us=N       -> @u1 idle ms=N wakeups=N elapsed_ns=N
//   run pipe|messaging|ctx key=value ...
//                               -> the workload's event, then @u1 done workload=ID status=S
//                                  elapsed_ns=N (../workloads/workloads.h: IDs, keys, events)
//   run perf-pipe|perf-messaging|cyclictest|iperf3-tcp|stress-ng-switch|sockperf-tcp-rr key=value ...
//                               -> the same, from Debian's tool on the workloads disk (tools.c)
//   probe on [interval_ms=1000] [rounds=100]
//                               -> @u1 probe on=1 interval_ms=N rounds=N, then from a separate
//                                  process every interval: @u1 ctxprobe rounds=N p50_ns=N
//                                  p99_ns=N max_ns=N (it keeps running during workloads),
//                                  after one 0.9 s or more since the last such lines (or
//                                  `probe on`), one line per online CPU:
//                                  @u1 gidle cpu=N interval_ns=N cpuidle=0|1 poll_count=N
//                                  poll_ns=N halt_count=N halt_ns=N steal_ns=N, each the
//                                  difference since that CPU's previous line or `probe on`
//                                  (gidle.c)
//   probe off                   -> @u1 probe on=0
//   exec hex=ARGV [timeout_ms=N] -> the user's own command: @u1 exec_out ... lines, then
//                                  @u1 exec status=N ... (exec.c)
//   poweroff                    -> @u1 poweroff, then init powers the VM off (ACPI S5;
//                                  busybox, systemd or sysvinit: cmd_poweroff)
//
// Workloads run one at a time, in the agent's process (their children fork from it); commands
// that arrive meanwhile wait in the tty's buffer. Readable error messages go to stderr (the
// console in the guest).
//
// Built static (gcc -static -O2) with ../workloads/workloads.c, exec.c, gidle.c and tools.c by
// build-workloads.mjs (for
// native/guest/linux/build-kit.mjs); runs as the initramfs's only program besides busybox.
#define _GNU_SOURCE
#include <cpuid.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "../workloads/workloads.h"
#include "exec.h"
#include "gidle.h"
#include "tools.h"

#define LINE_MAX_BYTES 512
// A command line in may be longer than an event out: `exec` carries a whole argument vector
// (4 KiB of text at most, host-side) as hex.
#define COMMAND_MAX_BYTES 16384

static int chan = -1;    // events out (and commands in, unless --stdio)
static int chan_in = -1; // commands in
static int stdio_mode;   // --stdio: on the host, where poweroff must not touch init

// --- output ------------------------------------------------------------------------------

static void emit(const char *fmt, ...) {
  char line[LINE_MAX_BYTES + 2];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, LINE_MAX_BYTES, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if (n > LINE_MAX_BYTES - 1) n = LINE_MAX_BYTES - 1;
  line[n++] = '\n';
  for (int off = 0; off < n;) {
    ssize_t w = write(chan, line + off, (size_t)(n - off));
    if (w < 0) {
      if (errno == EINTR) continue;
      return;
    }
    off += (int)w;
  }
}

// --- what the kernel sees ----------------------------------------------------------------

struct facts {
  long nproc, cpus_possible;
  int kvm;                       // the KVM signature at CPUID 0x40000000 (as user space sees it)
  unsigned kvm_features, kvm_hints;
  int pv_unhalt;                 // the kernel's view: its kvm-guest log line, else CPUID bit 7
  int pv_spinlocks;              // 1 enabled, 0 disabled, -1 no message seen
  int pv_spinlocks_reason;       // 0 enabled/unknown, 1 no host support, 2 realtime hint, 3 single CPU, 4 nopvspin
  int kvmclock, haltpoll;
  int cpuidle;                   // a cpuidle driver runs (current_driver exists, not "none")
  int haltpoll_gov;              // the cpuidle governor is haltpoll
  long long guest_halt_poll_ns;  // that governor's parameter; -1: the kernel has none
};

static int read_small(const char *path, char *buf, size_t size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, size - 1);
  close(fd);
  if (n < 0) return -1;
  buf[n] = 0;
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) buf[--n] = 0;
  return (int)n;
}

// "0-3,5" -> 5
static long count_cpu_list(const char *s) {
  long count = 0;
  while (*s) {
    char *end;
    long a = strtol(s, &end, 10), b = a;
    if (end == s) break;
    if (*end == '-') b = strtol(end + 1, &end, 10);
    if (b >= a) count += b - a + 1;
    s = *end == ',' ? end + 1 : end;
    if (*end != ',') break;
  }
  return count;
}

// The kernel log, read without blocking from /dev/kmsg (falls back to nothing: pv_spinlocks=-1).
static void scan_kernel_log(struct facts *f) {
  int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return;
  char rec[8192];
  for (;;) {
    ssize_t n = read(fd, rec, sizeof rec - 1);
    if (n < 0) {
      if (errno == EPIPE || errno == EINTR) continue; // overwritten records: keep reading
      break;                                          // EAGAIN: the end of the log
    }
    rec[n] = 0;
    const char *msg = strchr(rec, ';');
    if (!msg) continue;
    if (strstr(msg, "PV spinlocks enabled")) f->pv_spinlocks = 1, f->pv_spinlocks_reason = 0, f->pv_unhalt = 1;
    else if (strstr(msg, "PV spinlocks disabled, no host support")) f->pv_spinlocks = 0, f->pv_spinlocks_reason = 1, f->pv_unhalt = 0;
    else if (strstr(msg, "PV spinlocks disabled with KVM_HINTS_REALTIME")) f->pv_spinlocks = 0, f->pv_spinlocks_reason = 2, f->pv_unhalt = 1;
    else if (strstr(msg, "PV spinlocks disabled, single CPU")) f->pv_spinlocks = 0, f->pv_spinlocks_reason = 3, f->pv_unhalt = 1;
    else if (strstr(msg, "PV spinlocks disabled, forced by")) f->pv_spinlocks = 0, f->pv_spinlocks_reason = 4, f->pv_unhalt = 1;
  }
  close(fd);
}

static void gather(struct facts *f) {
  char buf[256];
  memset(f, 0, sizeof *f);
  f->pv_unhalt = -1;
  f->pv_spinlocks = -1;
  f->nproc = sysconf(_SC_NPROCESSORS_ONLN);
  f->cpus_possible = read_small("/sys/devices/system/cpu/possible", buf, sizeof buf) > 0 ? count_cpu_list(buf) : f->nproc;

  unsigned a, b, c, d;
  __cpuid(0x40000000, a, b, c, d);
  char sig[13];
  memcpy(sig, &b, 4), memcpy(sig + 4, &c, 4), memcpy(sig + 8, &d, 4), sig[12] = 0;
  if (strcmp(sig, "KVMKVMKVM") == 0 && a >= 0x40000001) {
    f->kvm = 1;
    __cpuid(0x40000001, a, b, c, d);
    f->kvm_features = a;
    f->kvm_hints = d;
  }
  scan_kernel_log(f);
  if (f->pv_unhalt < 0) f->pv_unhalt = f->kvm ? (int)((f->kvm_features >> 7) & 1) : 0;
  if (read_small("/sys/devices/system/clocksource/clocksource0/current_clocksource", buf, sizeof buf) > 0) {
    f->kvmclock = strcmp(buf, "kvm-clock") == 0;
  }
  if (read_small("/sys/devices/system/cpu/cpuidle/current_driver", buf, sizeof buf) > 0) {
    f->haltpoll = strcmp(buf, "haltpoll") == 0;
    f->cpuidle = strcmp(buf, "none") != 0;
  }
  if (read_small("/sys/devices/system/cpu/cpuidle/current_governor_ro", buf, sizeof buf) > 0
      || read_small("/sys/devices/system/cpu/cpuidle/current_governor", buf, sizeof buf) > 0) {
    f->haltpoll_gov = strcmp(buf, "haltpoll") == 0;
  }
  f->guest_halt_poll_ns = -1;
  if (read_small("/sys/module/haltpoll/parameters/guest_halt_poll_ns", buf, sizeof buf) > 0) {
    f->guest_halt_poll_ns = strtoll(buf, NULL, 10);
  }
}

static void report_ready(const char *event) {
  struct facts f;
  gather(&f);
  emit("@u1 %s nproc=%ld cpus_possible=%ld kvm=%d kvm_features=%u kvm_hints=%u pv_unhalt=%d pv_spinlocks=%d "
       "pv_spinlocks_reason=%d kvmclock=%d haltpoll=%d cpuidle=%d haltpoll_gov=%d guest_halt_poll_ns=%lld",
       event, f.nproc, f.cpus_possible, f.kvm, f.kvm_features, f.kvm_hints, f.pv_unhalt, f.pv_spinlocks,
       f.pv_spinlocks_reason, f.kvmclock, f.haltpoll, f.cpuidle, f.haltpoll_gov, f.guest_halt_poll_ns);
}

// --- commands ----------------------------------------------------------------------------

// A command's arguments: `key=value` pairs, integers only.
struct args {
  int count;
  char *keys[16];
  long long values[16];
};

/** The tokens as key=value integer pairs; `@u1 error bad_args=1` and -1 when one is not. */
static int kv_args(int argc, char **argv, struct args *a) {
  a->count = 0;
  for (int i = 0; i < argc; i++) {
    char *eq = strchr(argv[i], '=');
    if (!eq || a->count == 16) {
      emit("@u1 error bad_args=1");
      return -1;
    }
    *eq = 0;
    a->keys[a->count] = argv[i];
    a->values[a->count++] = strtoll(eq + 1, NULL, 10);
  }
  return 0;
}

static long long arg(const struct args *a, const char *key, long long fallback) {
  for (int i = 0; i < a->count; i++)
    if (strcmp(a->keys[i], key) == 0) return a->values[i];
  return fallback;
}

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void cmd_ping(int argc, char **argv) {
  struct args a;
  if (kv_args(argc, argv, &a) != 0) return;
  emit("@u1 pong seq=%lld", arg(&a, "seq", 0));
}

static void cmd_info(int argc, char **argv) {
  (void)argc, (void)argv;
  report_ready("info");
}

static void cmd_uptime(int argc, char **argv) {
  (void)argc, (void)argv;
  struct timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  emit("@u1 uptime ms=%lld", (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

// Sleeps `ms` (default 1000) in `period_us` steps: an idle guest with timer wake-ups.
static void cmd_idle(int argc, char **argv) {
  struct args a;
  if (kv_args(argc, argv, &a) != 0) return;
  long long ms = arg(&a, "ms", 1000), period_us = arg(&a, "period_us", 1000);
  if (ms < 0 || ms > 3600000 || period_us < 1) {
    emit("@u1 error bad_args=1");
    return;
  }
  long long start = now_ns(), end = start + ms * 1000000LL, wakeups = 0;
  while (now_ns() < end) {
    struct timespec ts = {period_us / 1000000, (period_us % 1000000) * 1000};
    nanosleep(&ts, NULL);
    wakeups++;
  }
  emit("@u1 idle ms=%lld wakeups=%lld elapsed_ns=%lld", ms, wakeups, now_ns() - start);
}

// `run NAME key=value ...`: a workload, in this process (workloads.c forks its children).
static void cmd_run(int argc, char **argv) {
  if (argc > 0 && tool_run(argv[0], argc - 1, argv + 1, emit)) return; // the workloads disk's tools (tools.c)
  wl_run(argc > 0 ? argv[0] : NULL, argc > 0 ? argc - 1 : 0, argv + (argc > 0), emit);
}

// The live probe: a child process of ours (so it keeps sampling while a workload runs).
static pid_t prober = -1;

// After a ctxprobe burst (so the file reading does not sit inside one), the per-CPU idle lines
// (gidle.c), once 0.9 s or more has passed since the last ones: the first burst runs at once,
// so the first lines come with a later burst and cover the time since `probe on`. `probe off`
// (SIGTERM) waits for the round to end: a round's lines come whole.
static void probe_after_burst(long long burst, wl_emit_fn out) {
  if (burst == 0) return;
  sigset_t term, old;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigprocmask(SIG_BLOCK, &term, &old);
  gidle_report(out);
  sigprocmask(SIG_SETMASK, &old, NULL);
}

static void stop_prober(void) {
  if (prober <= 0) return;
  kill(prober, SIGTERM);
  while (waitpid(prober, NULL, 0) < 0 && errno == EINTR) {}
  prober = -1;
}

// `probe on [interval_ms=N] [rounds=N]` / `probe off`.
static void cmd_probe(int argc, char **argv) {
  int on = argc > 0 && strcmp(argv[0], "on") == 0;
  if (!on && !(argc == 1 && strcmp(argv[0], "off") == 0)) {
    fprintf(stderr, "unhalt-agent: probe on [interval_ms=N] [rounds=N] | probe off\n");
    emit("@u1 error workload=%d bad_args=1", WL_ID_PROBE);
    return;
  }
  stop_prober();
  if (!on) {
    emit("@u1 probe on=0");
    return;
  }
  struct wl_probe_opts o;
  if (wl_probe_parse(argc - 1, argv + 1, &o) != WL_OK) {
    emit("@u1 error workload=%d bad_args=1", WL_ID_PROBE);
    return;
  }
  o.count = 0;
  pid_t self = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    emit("@u1 error workload=%d errno=%d", WL_ID_PROBE, errno);
    return;
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != self) _exit(0);
    signal(SIGTERM, SIG_DFL);
    gidle_begin(); // the baselines: the first gidle lines cover the time since now
    o.after_burst = probe_after_burst;
    _exit(wl_probe_loop(&o, emit) == WL_OK ? 0 : 1);
  }
  prober = pid;
  emit("@u1 probe on=1 interval_ms=%lld rounds=%lld", o.interval_ms, o.rounds);
}

// Whether PID 1 is busybox's init (the kit's, or a busybox distribution's).
static int init_is_busybox(void) {
  char exe[256];
  ssize_t n = readlink("/proc/1/exe", exe, sizeof exe - 1);
  if (n <= 0) return 1; // cannot tell: the kit's init, as before
  exe[n] = 0;
  return strstr(exe, "busybox") != NULL;
}

// Asks init to power off cleanly; the kernel then uses ACPI S5. Busybox init (the kit) on
// SIGUSR2; systemd (a distribution's guest, the agent started from the tools disk) on
// SIGRTMIN+4, where SIGUSR2 would only dump its state; any other init through its poweroff
// command (sysvinit: telinit 0). The last resort is the system call itself.
static void cmd_poweroff(int argc, char **argv) {
  (void)argc, (void)argv;
  stop_prober();
  emit("@u1 poweroff");
  if (stdio_mode) return; // a host test of the command path: never the host's init
  sync();
  if (access("/run/systemd/system", F_OK) == 0) {
    if (kill(1, SIGRTMIN + 4) == 0) return;
  } else if (init_is_busybox()) {
    if (kill(1, SIGUSR2) == 0) return;
  } else {
    pid_t pid = fork();
    if (pid == 0) {
      execl("/sbin/poweroff", "poweroff", (char *)NULL);
      _exit(127);
    }
    int st = 0;
    if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0) return;
  }
  reboot(RB_POWER_OFF);
}

static void cmd_exec(int argc, char **argv) {
  exec_command(argc, argv, emit);
}

static const struct command {
  const char *name;
  void (*run)(int argc, char **argv);
} COMMANDS[] = {
    {"ping", cmd_ping},
    {"info", cmd_info},
    {"uptime", cmd_uptime},
    {"idle", cmd_idle},
    {"run", cmd_run},
    {"probe", cmd_probe},
    {"poweroff", cmd_poweroff},
    {"exec", cmd_exec},
};

static void dispatch(char *line) {
  char *save = NULL;
  char *name = strtok_r(line, " \t\r", &save);
  if (!name) return;
  char *argv[17];
  int argc = 0;
  for (char *tok; (tok = strtok_r(NULL, " \t\r", &save)) != NULL;) {
    if (argc == 16) {
      emit("@u1 error bad_args=1");
      return;
    }
    argv[argc++] = tok;
  }
  argv[argc] = NULL;
  for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++) {
    if (strcmp(COMMANDS[i].name, name) == 0) {
      COMMANDS[i].run(argc, argv);
      return;
    }
  }
  emit("@u1 error unknown_command=1");
}

// --- main --------------------------------------------------------------------------------

static void raw_mode(int fd) {
  struct termios t;
  if (tcgetattr(fd, &t) != 0) return; // not a tty (tests may use a pipe or a file)
  cfmakeraw(&t);
  cfsetispeed(&t, B115200);
  cfsetospeed(&t, B115200);
  t.c_cflag |= CLOCAL | CREAD;
  tcsetattr(fd, TCSANOW, &t);
}

int main(int argc, char **argv) {
  int stdio = argc > 1 && strcmp(argv[1], "--stdio") == 0;
  stdio_mode = stdio;
  const char *dev = argc > 1 ? argv[1] : "/dev/ttyS1";
  signal(SIGHUP, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  if (stdio) {
    chan_in = 0;
    chan = 1;
  } else {
    for (int tries = 0; (chan = open(dev, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0; tries++) {
      if (tries == 50) {
        // Never exit: init respawns us, and a loop of failures would flood the console.
        fprintf(stderr, "unhalt-agent: cannot open %s: %s\n", dev, strerror(errno));
        for (;;) pause();
      }
      usleep(100000); // devtmpfs may not have the node yet
    }
    chan_in = chan;
    raw_mode(chan);
  }
  report_ready("ready");

  static char buf[COMMAND_MAX_BYTES + 1];
  size_t len = 0;
  int skipping = 0;
  for (;;) {
    char c;
    ssize_t n = read(chan_in, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (stdio) {
        stop_prober();
        return 0;
      }
      // A closed channel (a file or pipe in tests): stay alive as a quiet daemon would.
      if (n == 0) pause();
      continue;
    }
    if (c == '\n') {
      buf[len] = 0;
      if (!skipping) dispatch(buf);
      len = 0;
      skipping = 0;
    } else if (len < COMMAND_MAX_BYTES) {
      buf[len++] = c;
    } else if (!skipping) {
      skipping = 1;
      emit("@u1 error line_too_long=1");
    }
  }
}
