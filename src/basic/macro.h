/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Small macros every file uses: scope cleanup, ownership transfer, array
 * sizes and symbol visibility. Nothing here allocates or fails.
 *
 * Cleanup attributes run the named function on the variable's address when
 * it leaves scope. TAKE_PTR()/TAKE_FD() hand ownership out of a scope by
 * returning the value and resetting the variable, so the cleanup becomes a
 * no-op. */

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#define _public_ __attribute__((visibility("default")))
#define _unused_ __attribute__((unused))
#define _noreturn_ __attribute__((noreturn))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _cleanup_(f) __attribute__((cleanup(f)))
#define _likely_(x) (__builtin_expect(!!(x), 1))
#define _unlikely_(x) (__builtin_expect(!!(x), 0))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

#define TAKE_PTR(p)                                                                                \
        ({                                                                                         \
                __typeof__(p) _p_ = (p);                                                           \
                (p) = NULL;                                                                        \
                _p_;                                                                               \
        })

#define TAKE_FD(fd)                                                                                \
        ({                                                                                         \
                int _fd_ = (fd);                                                                   \
                (fd) = -EBADF;                                                                     \
                _fd_;                                                                              \
        })

#define MIN(a, b)                                                                                  \
        ({                                                                                         \
                __typeof__(a) _a_ = (a);                                                           \
                __typeof__(b) _b_ = (b);                                                           \
                _a_ < _b_ ? _a_ : _b_;                                                             \
        })

#define MAX(a, b)                                                                                  \
        ({                                                                                         \
                __typeof__(a) _a_ = (a);                                                           \
                __typeof__(b) _b_ = (b);                                                           \
                _a_ > _b_ ? _a_ : _b_;                                                             \
        })

/* Returns -errno of the last libc call, never 0 (a libc call that failed
 * without setting errno is reported as EIO rather than as success). */
static inline int negative_errno(void) {
        return errno > 0 ? -errno : -EIO;
}

/* free() that returns NULL, for `p = mfree(p);`. */
static inline void *mfree(void *p) {
        free(p);
        return NULL;
}

static inline void freep(void *p) {
        free(*(void **)p);
}
#define _cleanup_free_ _cleanup_(freep)

static inline int safe_close(int fd) {
        if (fd >= 0) {
                int saved = errno;
                (void)close(fd);
                errno = saved;
        }
        return -EBADF;
}

static inline void closep(int *fd) {
        *fd = safe_close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

/* Defines a cleanup helper `name##p` that calls `func` on a pointer to a
 * pointer-typed variable when it is non-NULL. */
#define DEFINE_POINTER_CLEANUP(type, func)                                                         \
        static inline void func##p(type **p) {                                                     \
                if (*p)                                                                            \
                        *p = func(*p);                                                             \
        }

/* Same, for destructors that return void. */
#define DEFINE_VOID_CLEANUP(type, func)                                                            \
        static inline void func##p(type **p) {                                                     \
                if (*p) {                                                                          \
                        func(*p);                                                                  \
                        *p = NULL;                                                                 \
                }                                                                                  \
        }

#define STRV_FOREACH(s, l) for (char **s = (l); s && *s; s++)
