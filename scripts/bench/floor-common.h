/* What ptrace-floor.c and notif-floor.c share (issue 28): the system calls that stop
 * (strata's default coverage, src/launcher/trace/syscalls.rs) and the look at a stopped
 * call's path that their observing mode (-o) makes. Included by both; not built alone. */
#ifndef STRATA_FLOOR_COMMON_H
#define STRATA_FLOOR_COMMON_H

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* Stopped whatever their arguments (newfstatat and statx stop only without AT_EMPTY_PATH,
 * clone only with CLONE_UNTRACED: each program adds those). */
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

/* Paths observed (-o), and how many of them existed. */
static long observed, observed_present;

/* Working directories by process, read once per process (-o). */
static struct {
  pid_t pid;
  char dir[4096];
} cwds[64];

static const char *cwd_of(pid_t pid) {
  size_t slot = (size_t)pid % 64;
  if (cwds[slot].pid != pid) {
    char link[64];
    snprintf(link, sizeof link, "/proc/%d/cwd", pid);
    ssize_t n = readlink(link, cwds[slot].dir, sizeof cwds[slot].dir - 1);
    cwds[slot].dir[n > 0 ? n : 0] = 0;
    cwds[slot].pid = pid;
  }
  return cwds[slot].dir;
}

/* The look -o makes at call nr of pid with first arguments a0 and a1: the path argument
 * (256 bytes with process_vm_readv), made absolute against the working directory, and one
 * fstatat of it. Nothing is kept but the two counters. */
static void observe_path(pid_t pid, long nr, unsigned long a0, unsigned long a1) {
  /* The *at calls name a directory descriptor first, the path second. */
  int at = nr == SYS_openat || nr == SYS_newfstatat || nr == SYS_statx ||
           nr == SYS_faccessat || nr == SYS_faccessat2 || nr == SYS_execveat ||
           nr == SYS_openat2 || nr == SYS_unlinkat || nr == SYS_mkdirat;
  unsigned long address = at ? a1 : a0;
  char given[257], joined[4096 + 258];
  struct iovec local = {given, 256}, remote = {(void *)address, 256};
  ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
  if (got <= 0) return;
  given[got] = 0;
  const char *path = given;
  if (given[0] != '/') {
    snprintf(joined, sizeof joined, "%s/%s", cwd_of(pid), given);
    path = joined;
  }
  struct stat st;
  if (fstatat(AT_FDCWD, path, &st, 0) == 0) observed_present++;
  observed++;
}

/* Reads [-u] [-o] before PROGRAM: *pin is cleared by -u, *look set by -o or when the
 * program was started under the name `observer` (a copy or link, for scripts that take a
 * list of wrapper programs). Returns the index of PROGRAM in argv. */
static int floor_args(int argc, char **argv, const char *observer, int *pin, int *look) {
  const char *self = strrchr(argv[0], '/');
  *pin = 1;
  *look = strcmp(self ? self + 1 : argv[0], observer) == 0;
  int first = 1;
  for (; first < argc && argv[first][0] == '-'; first++) {
    if (strcmp(argv[first], "-u") == 0) *pin = 0;
    else if (strcmp(argv[first], "-o") == 0) *look = 1;
    else break;
  }
  return first;
}

/* Writes the seccomp program into f (room for 256 instructions): `stop` for the calls of
 * stops_always, for newfstatat and statx without AT_EMPTY_PATH, and with `untraced_clone`
 * for clone with CLONE_UNTRACED (a ptrace tracer must see it); every other call is
 * allowed. Returns the number of instructions. */
static int floor_filter(struct sock_filter *f, unsigned stop, int untraced_clone) {
  int n = 0;
#define STMT(c, k) f[n++] = (struct sock_filter)BPF_STMT(c, k)
#define JUMP(c, k, t, e) f[n++] = (struct sock_filter)BPF_JUMP(c, k, t, e)
  STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
  for (size_t i = 0; i < sizeof stops_always / sizeof stops_always[0]; i++) {
    JUMP(BPF_JMP | BPF_JEQ | BPF_K, stops_always[i], 0, 1);
    STMT(BPF_RET | BPF_K, stop);
  }
  /* nr, index of the flags argument, the flag that lets it pass */
  const long flagged[][3] = {{SYS_newfstatat, 3, 0x1000}, {SYS_statx, 2, 0x1000}};
  for (int i = 0; i < 2; i++) {
    JUMP(BPF_JMP | BPF_JEQ | BPF_K, flagged[i][0], 0, 4);
    STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0]) + 8 * flagged[i][1]);
    JUMP(BPF_JMP | BPF_JSET | BPF_K, flagged[i][2], 1, 0);
    STMT(BPF_RET | BPF_K, stop);
    STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  }
  if (untraced_clone) {
    JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 4);
    STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0]));
    JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x00800000 /* CLONE_UNTRACED */, 0, 1);
    STMT(BPF_RET | BPF_K, stop);
    STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  }
  STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW); /* every other call */
#undef STMT
#undef JUMP
  return n;
}

#endif
