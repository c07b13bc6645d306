/*
 * Which bytes of a buffer lie on huge pages: Linux's PAGEMAP_SCAN ioctl
 * on /proc/self/pagemap (Linux 6.7 and later), one call for a whole range.
 * Used to decide whether a send is worth staging (Note [Staging sends] in
 * pycoll/_mpicall.pyx). The structures are declared here, as the kernel's
 * uapi <linux/fs.h> defines them, so that older headers still build.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include "kernels.h"

struct pycoll_page_region {
    uint64_t start, end, categories;
};

struct pycoll_pm_scan_arg {
    uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
    uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};

#define PYCOLL_PAGEMAP_SCAN _IOWR('f', 16, struct pycoll_pm_scan_arg)
#define PYCOLL_PAGE_IS_HUGE (1u << 6)
#define PYCOLL_REGIONS 16

/* The descriptor and the process it was opened in: a child of fork() must
 * scan its own memory, not its parent's. -1: the kernel cannot tell. */
static int pagemap_fd = -2;
static pid_t pagemap_pid = 0;

/* Open (or, after a fork, reopen) /proc/self/pagemap: 1 if ranges can be
 * scanned. Call it with the GIL held, before pycoll_huge_bytes. */
int pycoll_pages_ready(void)
{
    pid_t pid = getpid();
    if (pagemap_fd == -2 || pagemap_pid != pid) {
        if (pagemap_fd >= 0)
            close(pagemap_fd);
        pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
        if (pagemap_fd < 0)
            pagemap_fd = -1;
        pagemap_pid = pid;
    }
    return pagemap_fd >= 0;
}

/* Bytes of [buf, buf + n) on huge pages, or -1 where the kernel cannot
 * tell (before Linux 6.7, or pycoll_pages_ready not called). */
long long pycoll_huge_bytes(const void *buf, size_t n)
{
    uintptr_t first = (uintptr_t)buf, last = first + n;
    uint64_t page = 4096, start = first & ~(page - 1), end = (last + page - 1) & ~(page - 1);
    long long huge = 0;
    int fd = pagemap_fd;
    if (fd < 0)
        return -1;
    if (n == 0)
        return 0;
    while (start < end) {
        struct pycoll_page_region regions[PYCOLL_REGIONS];
        struct pycoll_pm_scan_arg arg = {
            .size = sizeof arg, .start = start, .end = end,
            .vec = (uintptr_t)regions, .vec_len = PYCOLL_REGIONS,
            .category_mask = PYCOLL_PAGE_IS_HUGE, .return_mask = PYCOLL_PAGE_IS_HUGE,
        };
        int found = ioctl(fd, PYCOLL_PAGEMAP_SCAN, &arg);
        if (found < 0) {
            if (errno == EINTR)
                continue;
            pagemap_fd = -1;            /* ENOTTY before Linux 6.7: never ask again */
            return -1;
        }
        for (int i = 0; i < found; i++) {
            uint64_t lo = regions[i].start > first ? regions[i].start : first;
            uint64_t hi = regions[i].end < last ? regions[i].end : last;
            if (hi > lo)
                huge += (long long)(hi - lo);
        }
        if (arg.walk_end <= start)
            break;
        start = arg.walk_end;
    }
    return huge;
}
