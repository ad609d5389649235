/* The floor of a ptrace + seccomp tracer, for the launcher benchmark (issue 25).
 *
 *   cc -O2 -o ptrace-floor scripts/bench/ptrace-floor.c
 *   ./ptrace-floor [-u] PROGRAM ARGS...
 *
 * Runs PROGRAM with the same seccomp stops as strata's tracer with its default coverage
 * (src/launcher/trace/syscalls.rs: every path-taking file-system call but readlink;
 * newfstatat/statx only without AT_EMPTY_PATH; clone only with CLONE_UNTRACED; clone3)
 * across its whole process tree, and does nothing at a stop but PTRACE_CONT: no argument
 * read, no stat, no record. What it costs over running PROGRAM is what any tracer built on
 * these stops costs at least. By default the tracer and the tree run on the CPU the tracer
 * started on (as strata's tracer does); -u leaves them unpinned. With PTRACE_FLOOR_STOPS
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
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static const long stops_always[] = {
    SYS_openat, SYS_openat2, SYS_faccessat, SYS_faccessat2, SYS_execve, SYS_execveat,
    SYS_chdir, SYS_fchdir, SYS_getdents64, SYS_unlinkat, SYS_mkdirat, SYS_renameat2,
    SYS_linkat, SYS_symlinkat, SYS_truncate, SYS_fchmod, SYS_fchmodat, 452 /* fchmodat2 */,
    SYS_fchown, SYS_fchownat, SYS_utimensat, SYS_mknodat, SYS_statfs, SYS_getxattr,
    SYS_lgetxattr, SYS_listxattr, SYS_llistxattr, SYS_setxattr, SYS_lsetxattr,
    SYS_removexattr, SYS_lremovexattr, SYS_clone3, SYS_name_to_handle_at,
    SYS_open_by_handle_at, SYS_io_uring_setup, SYS_chroot, SYS_mount, SYS_umount2,
    SYS_pivot_root,
#ifdef SYS_open
    SYS_open, SYS_creat, SYS_stat, SYS_lstat, SYS_access, SYS_getdents, SYS_unlink,
    SYS_rmdir, SYS_mkdir, SYS_rename, SYS_link, SYS_symlink, SYS_chmod, SYS_chown,
    SYS_lchown, SYS_utime, SYS_utimes, SYS_futimesat, SYS_mknod, SYS_renameat,
#endif
};

int main(int argc, char **argv) {
  int pin = 1, first = 1;
  if (argc > 1 && strcmp(argv[1], "-u") == 0) pin = 0, first = 2;
  if (argc <= first) {
    fprintf(stderr, "usage: ptrace-floor [-u] PROGRAM ARGS...\n");
    return 2;
  }
  struct sock_filter f[256];
  int n = 0;
#define STMT(c, k) f[n++] = (struct sock_filter)BPF_STMT(c, k)
#define JUMP(c, k, t, e) f[n++] = (struct sock_filter)BPF_JUMP(c, k, t, e)
  STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
  for (size_t i = 0; i < sizeof stops_always / sizeof stops_always[0]; i++) {
    JUMP(BPF_JMP | BPF_JEQ | BPF_K, stops_always[i], 0, 1);
    STMT(BPF_RET | BPF_K, SECCOMP_RET_TRACE);
  }
  /* nr, index of the flags argument, the flag that lets it pass (or stop, for clone) */
  const long flagged[][3] = {{SYS_newfstatat, 3, 0x1000}, {SYS_statx, 2, 0x1000}};
  for (int i = 0; i < 2; i++) {
    JUMP(BPF_JMP | BPF_JEQ | BPF_K, flagged[i][0], 0, 4);
    STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0]) + 8 * flagged[i][1]);
    JUMP(BPF_JMP | BPF_JSET | BPF_K, flagged[i][2], 1, 0);
    STMT(BPF_RET | BPF_K, SECCOMP_RET_TRACE);
    STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  }
  JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 4);
  STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0]));
  JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x00800000 /* CLONE_UNTRACED */, 0, 1);
  STMT(BPF_RET | BPF_K, SECCOMP_RET_TRACE);
  STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW); /* every other call */
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
      if (status >> 8 == (SIGTRAP | (PTRACE_EVENT_SECCOMP << 8))) stops++;
      else if (s != SIGTRAP && s != SIGSTOP) sig = s; /* pass other signals on */
    }
    ptrace(PTRACE_CONT, pid, 0, sig);
  }
  if (getenv("PTRACE_FLOOR_STOPS")) fprintf(stderr, "ptrace-floor: %ld stops\n", stops);
  return code;
}
