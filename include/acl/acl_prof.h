/*
 * acl_prof.h — Ascend's profiling calls (aclprof*), with CANN's names,
 * signatures and values (hicann/runtime's acl_prof.h), as libmsprofiler
 * executes them on CPUs.
 *
 * There are no device counters on CPUs: what is recorded is the profiling
 * session itself. aclprofInit names a folder (made if missing); each
 * aclprofStart .. aclprofStop appends one line to
 * PATH/ddpc_prof_HOST_PID.txt: the devices, the AI Core metric, the data
 * type switches asked for, and the wall-clock start, stop and length of the
 * session. Nothing else is measured.
 */
#ifndef INC_EXTERNAL_ACL_PROF_H_
#define INC_EXTERNAL_ACL_PROF_H_

#include <stddef.h>
#include <stdint.h>

#include "acl/acl_base.h"

#if defined(__GNUC__)
#define MSVP_PROF_API __attribute__((visibility("default")))
#else
#define MSVP_PROF_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* aclprofCreateConfig's dataTypeConfig switches */
#define ACL_PROF_ACL_API        0x0001ULL
#define ACL_PROF_TASK_TIME      0x0002ULL
#define ACL_PROF_AICORE_METRICS 0x0004ULL
#define ACL_PROF_AICPU          0x0008ULL
#define ACL_PROF_HCCL_TRACE     0x0020ULL
#define ACL_PROF_TRAINING_TRACE 0x0040ULL
#define ACL_PROF_MSPROFTX       0x0080ULL
#define ACL_PROF_RUNTIME_API    0x0100ULL
#define ACL_PROF_TASK_MEMORY    0x1000ULL
#define ACL_PROF_OP_ATTR        0x4000ULL
#define ACL_PROF_API_STATS      0x400000000ULL
#define ACL_PROF_AICORE_SHAPE   0x800000000ULL

typedef enum {
    ACL_AICORE_ARITHMETIC_UTILIZATION = 0,
    ACL_AICORE_PIPE_UTILIZATION = 1,
    ACL_AICORE_MEMORY_BANDWIDTH = 2,
    ACL_AICORE_L0B_AND_WIDTH = 3,
    ACL_AICORE_RESOURCE_CONFLICT_RATIO = 4,
    ACL_AICORE_MEMORY_UB = 5,
    ACL_AICORE_L2_CACHE = 6,
    ACL_AICORE_PIPE_EXECUTE_UTILIZATION = 7,
    ACL_AICORE_MEMORY_ACCESS = 8,
    ACL_AICORE_NONE = 0xFF
} aclprofAicoreMetrics;

typedef struct aclprofConfig aclprofConfig;             /* opaque */
typedef struct aclprofAicoreEvents aclprofAicoreEvents; /* opaque; pass NULL */

/* profilerResultPath: the folder for the records, length its strlen. A
 * second aclprofInit before aclprofFinalize is ACL_ERROR_REPEAT_INITIALIZE;
 * a folder that cannot be made ACL_ERROR_INVALID_FILE. */
MSVP_PROF_API aclError aclprofInit(const char *profilerResultPath, size_t length);
/* Stops a running session (recording it) and forgets the folder. */
MSVP_PROF_API aclError aclprofFinalize(void);
/* deviceNums devices of deviceIdList, each a device of aclrtGetDeviceCount;
 * NULL (and aclGetRecentErrMsg says why) on a bad argument. */
MSVP_PROF_API aclprofConfig *aclprofCreateConfig(uint32_t *deviceIdList, uint32_t deviceNums,
                                                 aclprofAicoreMetrics aicoreMetrics,
                                                 const aclprofAicoreEvents *aicoreEvents,
                                                 uint64_t dataTypeConfig);
MSVP_PROF_API aclError aclprofDestroyConfig(const aclprofConfig *profilerConfig);
/* One session at a time, after aclprofInit (else ACL_ERROR_UNINITIALIZE). */
MSVP_PROF_API aclError aclprofStart(const aclprofConfig *profilerConfig);
/* Ends the session profilerConfig started and appends its line. */
MSVP_PROF_API aclError aclprofStop(const aclprofConfig *profilerConfig);

#ifdef __cplusplus
}
#endif
#endif /* INC_EXTERNAL_ACL_PROF_H_ */
