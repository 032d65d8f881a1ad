/*
 * acl_base.h — the base types and error codes of Ascend's runtime (ACL), the
 * host-side subset that HCCL programs use, for running them on CPUs over
 * ddpc (libascendcl, built from bridges/hccl/).
 *
 * Names and values are CANN's (acl_base.h / acl_base_rt.h in hicann/runtime);
 * the error codes are `static const int` there too, so they compare with an
 * aclError in C and C++ alike.
 */
#ifndef INC_EXTERNAL_ACL_ACL_BASE_H_
#define INC_EXTERNAL_ACL_ACL_BASE_H_

#include <stddef.h>
#include <stdint.h>

#include "acl/error_codes/rt_error_codes.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define ACL_FUNC_VISIBILITY __attribute__((visibility("default")))
#define ACL_DEPRECATED      __attribute__((deprecated))
#else
#define ACL_FUNC_VISIBILITY
#define ACL_DEPRECATED
#endif

typedef void *aclrtStream; /* an ordered queue of work (here: one host thread) */
typedef void *aclrtEvent;  /* a point in a stream, with its time */
typedef void *aclrtContext;
typedef int aclError; /* ACL_SUCCESS or one of the codes below */
typedef uint16_t aclFloat16;

static const int ACL_ERROR_NONE = 0;
static const int ACL_SUCCESS = 0;

static const int ACL_ERROR_INVALID_PARAM = 100000;
static const int ACL_ERROR_UNINITIALIZE = 100001;
static const int ACL_ERROR_REPEAT_INITIALIZE = 100002;
static const int ACL_ERROR_INVALID_FILE = 100003;
static const int ACL_ERROR_WRITE_FILE = 100004;
static const int ACL_ERROR_INVALID_FILE_SIZE = 100005;
static const int ACL_ERROR_PARSE_FILE = 100006;
static const int ACL_ERROR_FILE_MISSING_ATTR = 100007;
static const int ACL_ERROR_FILE_ATTR_INVALID = 100008;
static const int ACL_ERROR_UNSUPPORTED_DATA_TYPE = 100026;
static const int ACL_ERROR_WAIT_CALLBACK_TIMEOUT = 100036;
static const int ACL_ERROR_REPEAT_FINALIZE = 100037;

static const int ACL_ERROR_BAD_ALLOC = 200000;
static const int ACL_ERROR_API_NOT_SUPPORT = 200001;
static const int ACL_ERROR_INVALID_DEVICE = 200002;
static const int ACL_ERROR_MEMORY_ADDRESS_UNALIGNED = 200003;
static const int ACL_ERROR_RESOURCE_NOT_MATCH = 200004;
static const int ACL_ERROR_INVALID_RESOURCE_HANDLE = 200005;
static const int ACL_ERROR_FEATURE_UNSUPPORTED = 200006;

static const int ACL_ERROR_STORAGE_OVER_LIMIT = 300000;

static const int ACL_ERROR_INTERNAL_ERROR = 500000;
static const int ACL_ERROR_FAILURE = 500001;
static const int ACL_ERROR_GE_FAILURE = 500002;
static const int ACL_ERROR_RT_FAILURE = 500003;
static const int ACL_ERROR_DRV_FAILURE = 500004;
static const int ACL_ERROR_PROFILING_FAILURE = 500005;

/* What runs the program's "devices": on CPUs "CPU host (ARCH, ddpc)", ARCH
 * being uname's machine, e.g. "CPU host (x86_64, ddpc)". Never NULL. */
ACL_FUNC_VISIBILITY const char *aclrtGetSocName(void);

#ifdef __cplusplus
}
#endif
#endif /* INC_EXTERNAL_ACL_ACL_BASE_H_ */
