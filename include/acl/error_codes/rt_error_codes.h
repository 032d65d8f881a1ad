/*
 * rt_error_codes.h — the runtime's error codes (ACL_ERROR_RT_*) that the CPU
 * runtime of bridges/hccl returns, with CANN's names and values
 * (hicann/runtime, include/external/acl/error_codes/rt_error_codes.h).
 */
#ifndef __INC_EXTERNEL_RT_ERROR_CODES_H__
#define __INC_EXTERNEL_RT_ERROR_CODES_H__

#define ACL_RT_SUCCESS                       0
#define ACL_ERROR_RT_PARAM_INVALID           107000 /* an argument is invalid */
#define ACL_ERROR_RT_INVALID_DEVICEID        107001 /* no such device */
#define ACL_ERROR_RT_CONTEXT_NULL            107002 /* no device set on this thread */
#define ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID 107006 /* an event has no time yet */
#define ACL_ERROR_RT_INVALID_HANDLE          107017 /* not a stream / event of ours */
#define ACL_ERROR_RT_WAIT_TIMEOUT            107019 /* a wait ran out of time */
#define ACL_ERROR_RT_TASK_TIMEOUT            107020 /* a task (a collective) ran out of time */
#define ACL_ERROR_RT_STREAM_ABORT            107023 /* the stream's work was aborted */
#define ACL_ERROR_RT_FEATURE_NOT_SUPPORT     207000 /* not supported (here: on CPUs) */
#define ACL_ERROR_RT_MEMORY_ALLOCATION       207001 /* out of memory */
#define ACL_ERROR_RT_NO_DEVICE               207004 /* no device */
#define ACL_ERROR_RT_INTERNAL_ERROR          507000 /* a runtime bug */
#define ACL_ERROR_RT_STREAM_NOT_COMPLETE     507004 /* work still queued */
#define ACL_ERROR_RT_EVENT_NOT_COMPLETE      507006 /* an event not reached yet */
#define ACL_ERROR_RT_STREAM_SYNC_TIMEOUT     507046 /* a stream sync ran out of time */
#define ACL_ERROR_RT_EVENT_SYNC_TIMEOUT      507047 /* an event sync ran out of time */
#define ACL_ERROR_RT_LINK_ERROR              507056 /* a link to a peer failed */
#define ACL_ERROR_RT_SUSPECT_REMOTE_ERROR    507057 /* a peer failed */
#define ACL_ERROR_RT_COMM_OP_RETRY_FAIL      507904 /* an HCCL operation failed */

#endif /* __INC_EXTERNEL_RT_ERROR_CODES_H__ */
