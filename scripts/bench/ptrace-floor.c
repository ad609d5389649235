/* The floor of a ptrace + seccomp tracer, for the launcher benchmark (issue 25).
 *
 *   cc -O2 -o ptrace-floor scripts/bench/ptrace-floor.c
 *   ./ptrace-floor [-u] [-o] PROGRAM ARGS...
 *
 * Runs PROGRAM with the same seccomp stops as strata's tracer with its default coverage
 * (src/launcher/trace/syscalls.rs: every path-taking file-system call but readlink;
 * newfstatat/statx only without AT_EMPTY_PATH; clone only with CLONE_UNTRACED; clone3)
 * across its whole process tree, and does nothing at a stop but PTRACE_CONT: no argument
 * read, no stat, no record. What it costs over running PROGRAM is what any tracer built on
 * these stops costs at least. By default the tracer and the tree run on the CPU the tracer
 * started on (as strata's tracer does); -u leaves them unpinned. With -o it also does at
 * each stop the least a tracer that records what a call found must do (strata's record,
 * docs/launcher.md "Observed, not guessed"): it reads which call stopped
 * (PTRACE_GETEVENTMSG) and its registers (PTRACE_GETREGS / GETREGSET), reads the path
 * argument from the tracee (process_vm_readv, 256 bytes), joins a relative one to the
 * process's working directory (/proc/<pid>/cwd, read once per process) and stats it
 * (fstatat), and records nothing. Started under the name ptrace-observe it does so without
 * -o (for scripts that take a list of wrapper programs). With PTRACE_FLOOR_STOPS
 * set, prints the number of stops to stderr. Exit status: PROGRAM's (128+N if killed by
 * signal N). x86_64 and aarch64 Linux. */
#define _GNU_SOURCE
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <elf.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "floor-common.h"

/* What -o does at a seccomp stop of pid: which call, its path argument, a stat of it. */
static void observe(pid_t pid) {
  unsigned long data;
  ptrace(PTRACE_GETEVENTMSG, pid, 0, &data);
#if defined(__x86_64__)
  struct user_regs_struct r;
  if (ptrace(PTRACE_GETREGS, pid, 0, &r)) return;
  long nr = (long)r.orig_rax;
  unsigned long a0 = r.rdi, a1 = r.rsi;
#elif defined(__aarch64__)
  struct user_regs_struct r;
  struct iovec io = {&r, sizeof r};
  if (ptrace(PTRACE_GETREGSET, pid, (void *)NT_PRSTATUS, &io)) return;
  long nr = (long)r.regs[8];
  unsigned long a0 = r.regs[0], a1 = r.regs[1];
#endif
  observe_path(pid, nr, a0, a1);
}

int main(int argc, char **argv) {
  int pin, look, first = floor_args(argc, argv, "ptrace-observe", &pin, &look);
  if (argc <= first) {
    fprintf(stderr, "usage: ptrace-floor [-u] [-o] PROGRAM ARGS...\n");
    return 2;
  }
  struct sock_filter f[256];
  int n = floor_filter(f, SECCOMP_RET_TRACE, 1);
  struct sock_fprog prog = {.len = (unsigned short)n, .filter = f};

  if (pin) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    sched_setaffinity(0, sizeof one, &one); /* the child inherits it */
  }
  pid_t child = fork();
  if (child < 0) return perror("fork"), 127;
  if (child == 0) {
    if (ptrace(PTRACE_TRACEME, 0, 0, 0) || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
      perror("ptrace-floor: tracing refused");
      _exit(127);
    }
    raise(SIGSTOP);
    execvp(argv[first], argv + first);
    perror(argv[first]);
    _exit(127);
  }
  int status, code = 127;
  waitpid(child, &status, 0);
  ptrace(PTRACE_SETOPTIONS, child, 0,
         PTRACE_O_TRACESECCOMP | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK |
             PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL);
  ptrace(PTRACE_CONT, child, 0, 0);
  long stops = 0;
  for (;;) {
    pid_t pid = waitpid(-1, &status, __WALL);
    if (pid < 0) break;
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
      if (pid == child) code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      continue;
    }
    int sig = 0;
    if (WIFSTOPPED(status)) {
      int s = WSTOPSIG(status);
      if (status >> 8 == (SIGTRAP | (PTRACE_EVENT_SECCOMP << 8))) {
        stops++;
        if (look) observe(pid);
      }
      else if (s != SIGTRAP && s != SIGSTOP) sig = s; /* pass other signals on */
    }
    ptrace(PTRACE_CONT, pid, 0, sig);
  }
  if (getenv("PTRACE_FLOOR_STOPS")) fprintf(stderr, "ptrace-floor: %ld stops, %ld paths stat'ed (%ld present)\n", stops, observed, observed_present);
  return code;
}
