/* SPDX-License-Identifier: MIT */
/* See fs_util.h. */
#define _XOPEN_SOURCE 700
#include "fs_util.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *esmt_write_errno_hint(int err) {
  switch (err) {
    case EFBIG: return " (the file size limit was reached: see `ulimit -f`)";
    case ENOSPC: return " (the disk is full)";
#ifdef EDQUOT
    case EDQUOT: return " (the disk quota is used up)";
#endif
    default: return "";
  }
}

esmt_status esmt_write_all(int fd, const void *data, size_t n, const char *path) {
  const char *p = data;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0)
      return esmt_fail(ESMT_ERR_IO, "%s: write failed: %s%s", path, strerror(errno),
                       esmt_write_errno_hint(errno));
    if (w == 0)
      return esmt_fail(ESMT_ERR_IO, "%s: write made no progress (disk full?)", path);
    p += w;
    n -= (size_t)w;
  }
  return ESMT_OK;
}

esmt_status esmt_pwrite_all(int fd, const void *data, size_t n, uint64_t offset,
                            const char *path) {
  const char *p = data;
  while (n > 0) {
    ssize_t w = pwrite(fd, p, n, (off_t)offset);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0)
      return esmt_fail(ESMT_ERR_IO, "%s: write failed: %s%s", path, strerror(errno),
                       esmt_write_errno_hint(errno));
    if (w == 0)
      return esmt_fail(ESMT_ERR_IO, "%s: write made no progress (disk full?)", path);
    p += w;
    n -= (size_t)w;
    offset += (uint64_t)w;
  }
  return ESMT_OK;
}

esmt_status esmt_fsync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return esmt_fail(ESMT_ERR_IO, "%s: cannot open directory: %s", dir, strerror(errno));
  int rc = fsync(fd);
  int err = errno;
  close(fd);
  if (rc != 0 && err != EINVAL) /* some file systems cannot sync directories */
    return esmt_fail(ESMT_ERR_IO, "%s: fsync of directory failed: %s", dir, strerror(err));
  return ESMT_OK;
}

void esmt_fsync_dir_published(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int rc = fd < 0 ? -1 : fsync(fd);
  int err = errno;
  if (fd >= 0) close(fd);
  if (rc != 0 && err != EINVAL)
    esmt_log(ESMT_LOG_WARN, "%s: fsync of directory failed (%s): the rename done in it may not "
             "survive a crash; the files themselves were synced", dir, strerror(err));
}

esmt_status esmt_mkdir_p(const char *dir) { return esmt_mkdir_p_created(dir, NULL, 0); }

esmt_status esmt_mkdir_p_created(const char *dir, char *created, size_t cap) {
  char buf[4096];
  size_t n = strlen(dir);
  if (created && cap) created[0] = '\0';
  if (n == 0 || n >= sizeof buf)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "mkdir: bad path '%s'", dir);
  memcpy(buf, dir, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (buf[i] != '/' && buf[i] != '\0') continue;
    char c = buf[i];
    buf[i] = '\0';
    if (mkdir(buf, 0755) == 0) {
      if (created && cap && !created[0]) snprintf(created, cap, "%s", buf);
    } else if (errno != EEXIST) {
      return esmt_fail(ESMT_ERR_IO, "%s: cannot create directory: %s", buf, strerror(errno));
    }
    struct stat sb;
    if (stat(buf, &sb) != 0 || !S_ISDIR(sb.st_mode))
      return esmt_fail(ESMT_ERR_IO, "%s: exists and is not a directory", buf);
    buf[i] = c;
  }
  return ESMT_OK;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb; (void)flag; (void)ftw;
  return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

esmt_status esmt_remove_tree(const char *dir) {
  if (nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT &&
      errno != ENOTDIR)
    return esmt_fail(ESMT_ERR_IO, "%s: cannot remove: %s", dir, strerror(errno));
  return ESMT_OK;
}

void esmt_cleanup_tree(const char *dir) {
  char saved[1024];
  snprintf(saved, sizeof saved, "%s", esmt_last_error());
  esmt_remove_tree(dir);
  esmt_fail(ESMT_ERR_IO, "%s", saved); /* the error that caused the cleanup stays */
}

void esmt_dirname(const char *path, char *out, size_t cap) {
  const char *slash = strrchr(path, '/');
  if (!slash) { snprintf(out, cap, "."); return; }
  if (slash == path) { snprintf(out, cap, "/"); return; }
  snprintf(out, cap, "%.*s", (int)(slash - path), path);
}
