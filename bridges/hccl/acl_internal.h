/*
 * acl_internal.h — what libhccl and libmsprofiler need of libascendcl
 * beyond ACL's API: to queue a task on a stream, to keep an error's text,
 * the device count, and what the virtual memory calls reserved and mapped.
 * Exported by libascendcl under the ddpc__acl_ prefix (internal, as libuv's
 * uv__ names); not for programs.
 */
#ifndef DDPC_BRIDGES_HCCL_ACL_INTERNAL_H
#define DDPC_BRIDGES_HCCL_ACL_INTERNAL_H

#include <stddef.h>

#include "acl/acl_rt.h"

/* A task run by a stream's thread, in queue order, exactly once (a stream
 * is destroyed only after its queue has run). It returns ACL_SUCCESS or an
 * aclError, writing a one-line reason into err (errlen bytes); the stream
 * keeps its first failure for aclrtSynchronizeStream. The task owns arg
 * (transferred by ddpc__acl_enqueue) and frees it. */
typedef aclError (*ddpc__acl_task_fn)(void *arg, char *err, size_t errlen);

/* Queues {fn, arg} on stream (NULL: the calling thread's device's default
 * stream). On failure nothing is queued and arg stays the caller's. */
__attribute__((visibility("default"))) aclError ddpc__acl_enqueue(aclrtStream stream,
                                                                  ddpc__acl_task_fn fn, void *arg);

/* Records msg as this thread's last ACL error text (aclGetRecentErrMsg). */
__attribute__((visibility("default"))) void ddpc__acl_set_error(const char *msg);
/* Records a formatted text as ddpc__acl_set_error does and returns code. */
__attribute__((visibility("default"), format(printf, 2, 3))) aclError
ddpc__acl_fail(aclError code, const char *fmt, ...);

/* The devices a process sees (aclrtGetDeviceCount's). */
__attribute__((visibility("default"))) uint32_t ddpc__acl_device_count(void);

/* 1 when [va, va + size) lies inside one aclrtReserveMemAddress range. */
__attribute__((visibility("default"))) int ddpc__acl_reserved(const void *va, size_t size);
/* 1 when [va, va + size) is mapped (aclrtMapMem) from handle's bytes at
 * offset, in one mapping. */
__attribute__((visibility("default"))) int
ddpc__acl_mapped(const void *va, size_t size, aclrtDrvMemHandle handle, size_t offset);

#endif
