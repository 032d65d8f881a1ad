/*
 * acl_rt.h — the subset of Ascend's runtime (ACL) that HCCL programs call
 * around their collectives, executed on CPUs by libascendcl (bridges/hccl):
 * devices are numbers, device memory is host memory, and a stream is an
 * ordered queue of work run by a host thread of its own.
 *
 * Names, signatures and values are CANN's (hicann/runtime's acl_rt.h).
 * What differs on CPUs:
 *   - aclrtMalloc & co. return ordinary host memory (64-byte aligned); any
 *     aclrtMemcpyKind is a memmove, so either side may be any host pointer.
 *   - aclrtGetDeviceCount is the number of devices in ASCEND_RT_VISIBLE_DEVICES
 *     when set, else 8 (or the launcher's ranks on this host, LOCAL_WORLD_SIZE
 *     or OMPI_COMM_WORLD_LOCAL_SIZE, when more); aclrtSetDevice only records
 *     this thread's device.
 *   - Work queued on a stream (collectives, aclrtMemcpyAsync, events) runs in
 *     the order queued on the stream's thread. aclrtSynchronizeStream waits
 *     for it and returns the first failure since the last synchronization
 *     (aclGetRecentErrMsg gives its text), then clears it.
 *   - A NULL stream is the current device's default stream.
 */
#ifndef INC_EXTERNAL_ACL_ACL_RT_H_
#define INC_EXTERNAL_ACL_ACL_RT_H_

#include <stddef.h>
#include <stdint.h>

#include "acl/acl_base.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ACL_EVENT_SYNC      0x00000001U
#define ACL_EVENT_TIME_LINE 0x00000008U

/* aclrtSetStreamFailureMode's modes */
#define ACL_CONTINUE_ON_FAILURE 0x00000000U
#define ACL_STOP_ON_FAILURE     0x00000001U

typedef enum aclrtRunMode {
    ACL_DEVICE,
    ACL_HOST,
} aclrtRunMode;

typedef enum aclrtEventRecordedStatus {
    ACL_EVENT_RECORDED_STATUS_NOT_READY = 0,
    ACL_EVENT_RECORDED_STATUS_COMPLETE = 1,
} aclrtEventRecordedStatus;

typedef enum aclrtMemcpyKind {
    ACL_MEMCPY_HOST_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_DEVICE_TO_DEVICE,
    ACL_MEMCPY_DEFAULT,
    ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE,
    ACL_MEMCPY_INNER_DEVICE_TO_DEVICE,
    ACL_MEMCPY_INTER_DEVICE_TO_DEVICE,
} aclrtMemcpyKind;

typedef enum aclrtMemMallocPolicy {
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEM_MALLOC_HUGE_ONLY,
    ACL_MEM_MALLOC_NORMAL_ONLY,
    ACL_MEM_MALLOC_HUGE_FIRST_P2P,
    ACL_MEM_MALLOC_HUGE_ONLY_P2P,
    ACL_MEM_MALLOC_NORMAL_ONLY_P2P,
    ACL_MEM_MALLOC_HUGE1G_ONLY,
    ACL_MEM_MALLOC_HUGE1G_ONLY_P2P,
    ACL_MEM_TYPE_LOW_BAND_WIDTH = 0x0100,
    ACL_MEM_TYPE_HIGH_BAND_WIDTH = 0x1000,
    ACL_MEM_ACCESS_USER_SPACE_READONLY = 0x100000,
} aclrtMemMallocPolicy;

/* A kind of device memory (aclrtGetMemInfo, aclrtPhysicalMemProp). On CPUs
 * every kind is the host's memory. */
typedef enum aclrtMemAttr {
    ACL_DDR_MEM,
    ACL_HBM_MEM,
    ACL_DDR_MEM_HUGE,
    ACL_DDR_MEM_NORMAL,
    ACL_HBM_MEM_HUGE,
    ACL_HBM_MEM_NORMAL,
    ACL_DDR_MEM_P2P_HUGE,
    ACL_DDR_MEM_P2P_NORMAL,
    ACL_HBM_MEM_P2P_HUGE,
    ACL_HBM_MEM_P2P_NORMAL,
    ACL_HBM_MEM_HUGE1G,
    ACL_HBM_MEM_P2P_HUGE1G,
    ACL_MEM_NORMAL,
    ACL_MEM_HUGE,
    ACL_MEM_HUGE1G,
    ACL_MEM_P2P_NORMAL,
    ACL_MEM_P2P_HUGE,
    ACL_MEM_P2P_HUGE1G,
} aclrtMemAttr;

/* aclrtSetDeviceSatMode's float overflow modes. */
typedef enum aclrtFloatOverflowMode {
    ACL_RT_OVERFLOW_MODE_SATURATION = 0,
    ACL_RT_OVERFLOW_MODE_INFNAN,
    ACL_RT_OVERFLOW_MODE_UNDEF,
} aclrtFloatOverflowMode;

typedef enum aclrtMemLocationType {
    ACL_MEM_LOCATION_TYPE_HOST = 0,
    ACL_MEM_LOCATION_TYPE_DEVICE,
    ACL_MEM_LOCATION_TYPE_UNREGISTERED,
    ACL_MEM_LOCATION_TYPE_MANAGED,
    ACL_MEM_LOCATION_TYPE_HOST_NUMA = 4,
} aclrtMemLocationType;

typedef struct aclrtMemLocation {
    uint32_t id; /* the device (ACL_MEM_LOCATION_TYPE_DEVICE) */
    aclrtMemLocationType type;
} aclrtMemLocation;

typedef enum aclrtMemAllocationType {
    ACL_MEM_ALLOCATION_TYPE_PINNED = 0,
} aclrtMemAllocationType;

typedef enum aclrtMemHandleType {
    ACL_MEM_HANDLE_TYPE_NONE = 0,
    ACL_MEM_HANDLE_TYPE_POSIX = 2,
} aclrtMemHandleType;

/* What aclrtMallocPhysical allocates. */
typedef struct aclrtPhysicalMemProp {
    aclrtMemHandleType handleType;
    aclrtMemAllocationType allocationType;
    aclrtMemAttr memAttr;
    aclrtMemLocation location;
    uint64_t reserve; /* 0 */
} aclrtPhysicalMemProp;

typedef enum aclrtMemGranularityOptions {
    ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM,
    ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED,
    ACL_RT_MEM_ALLOC_GRANULARITY_UNDEF = 0xFFFF,
} aclrtMemGranularityOptions;

/* Physical memory made by aclrtMallocPhysical (opaque). */
typedef void *aclrtDrvMemHandle;

/* Process set-up. configPath may be NULL (nothing to read on CPUs). A second
 * aclInit is ACL_ERROR_REPEAT_INITIALIZE, a second aclFinalize
 * ACL_ERROR_REPEAT_FINALIZE. */
ACL_FUNC_VISIBILITY aclError aclInit(const char *configPath);
ACL_FUNC_VISIBILITY aclError aclFinalize(void);
/* The text of the last failure on this thread (a stream's, when
 * aclrtSynchronizeStream reported it); "" when none. */
ACL_FUNC_VISIBILITY const char *aclGetRecentErrMsg(void);

/* Devices: 0 .. aclrtGetDeviceCount()-1. */
ACL_FUNC_VISIBILITY aclError aclrtSetDevice(int32_t deviceId);
ACL_FUNC_VISIBILITY aclError aclrtResetDevice(int32_t deviceId);
ACL_FUNC_VISIBILITY aclError aclrtGetDevice(int32_t *deviceId);
ACL_FUNC_VISIBILITY aclError aclrtGetDeviceCount(uint32_t *count);
ACL_FUNC_VISIBILITY aclError aclrtGetRunMode(aclrtRunMode *runMode); /* ACL_HOST */
/* CPUs compute floats as IEEE 754 does: ACL_RT_OVERFLOW_MODE_INFNAN is
 * accepted, ACL_RT_OVERFLOW_MODE_SATURATION is ACL_ERROR_FEATURE_UNSUPPORTED. */
ACL_FUNC_VISIBILITY aclError aclrtSetDeviceSatMode(aclrtFloatOverflowMode mode);
/* Waits for every stream of the process. */
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeDevice(void);

/* Streams. Destroying a stream waits for its queued work first. */
ACL_FUNC_VISIBILITY aclError aclrtCreateStream(aclrtStream *stream);
ACL_FUNC_VISIBILITY aclError aclrtDestroyStream(aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeStream(aclrtStream stream);
/* Later work on stream waits until event's latest record is reached. */
ACL_FUNC_VISIBILITY aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event);
/* ACL_CONTINUE_ON_FAILURE or ACL_STOP_ON_FAILURE. Either way a stream runs
 * every task it was given and aclrtSynchronizeStream reports the first
 * failure; under ACL_STOP_ON_FAILURE, work queued after a failure (up to
 * the synchronization that reports it) is refused when it is queued. */
ACL_FUNC_VISIBILITY aclError aclrtSetStreamFailureMode(aclrtStream stream, uint64_t mode);

/* Events: a record is reached when the work queued before it on its
 * stream has run; its time is then taken (CLOCK_MONOTONIC).
 *
 * A stream waiting on an event (aclrtStreamWaitEvent) waits for the last
 * record made before the call; none: no wait. An event made with
 * ACL_EVENT_SYNC is a flag, as on NPUs: a wait on it lasts until a record of
 * it is reached that no aclrtResetEvent has undone since, however late that
 * record is made, so one host thread can hold a stream back (HCCL Test's
 * -t). */
ACL_FUNC_VISIBILITY aclError aclrtCreateEvent(aclrtEvent *event);
ACL_FUNC_VISIBILITY aclError aclrtCreateEventWithFlag(aclrtEvent *event, uint32_t flag);
ACL_FUNC_VISIBILITY aclError aclrtDestroyEvent(aclrtEvent event);
ACL_FUNC_VISIBILITY aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeEvent(aclrtEvent event);
/* Queued on stream: when the stream reaches it, the event counts as never
 * recorded again (its waits block, aclrtEventElapsedTime has no time for
 * it) until its next record is reached. */
ACL_FUNC_VISIBILITY aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtQueryEventStatus(aclrtEvent event,
                                                   aclrtEventRecordedStatus *status);
/* Milliseconds from startEvent's record to endEvent's; both reached. */
ACL_FUNC_VISIBILITY aclError aclrtEventElapsedTime(float *ms, aclrtEvent startEvent,
                                                   aclrtEvent endEvent);

/* Memory: host memory on CPUs. size 0 is ACL_ERROR_INVALID_PARAM, as on NPUs. */
ACL_FUNC_VISIBILITY aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy);
ACL_FUNC_VISIBILITY aclError aclrtFree(void *devPtr);
ACL_FUNC_VISIBILITY aclError aclrtMallocHost(void **hostPtr, size_t size);
ACL_FUNC_VISIBILITY aclError aclrtFreeHost(void *hostPtr);
/* count bytes; count > destMax is ACL_ERROR_INVALID_PARAM. */
ACL_FUNC_VISIBILITY aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
                                         aclrtMemcpyKind kind);
ACL_FUNC_VISIBILITY aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value,
                                         size_t count);
ACL_FUNC_VISIBILITY aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src,
                                              size_t count, aclrtMemcpyKind kind,
                                              aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value,
                                              size_t count, aclrtStream stream);

/* The host's memory, whatever attr: total is MemTotal and free is
 * MemAvailable of /proc/meminfo (sysinfo(2) where that cannot be read). */
ACL_FUNC_VISIBILITY aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *free, size_t *total);

/* Virtual memory, as on NPUs: reserve an address range, allocate physical
 * memory, map the one into the other, then unmap, free and release (in that
 * order: freeing a mapped handle or releasing a range with a mapping is
 * ACL_ERROR_INVALID_PARAM). On CPUs a reservation is an inaccessible mmap
 * of the range, physical memory is a memfd of its size, and a map puts the
 * memfd's pages at the address (MAP_SHARED, MAP_FIXED); an unmap makes the
 * range inaccessible again. Sizes, offsets and addresses are multiples of
 * the minimum granularity (the page size); the recommended one is 2 MiB. */
ACL_FUNC_VISIBILITY aclError aclrtMemGetAllocationGranularity(aclrtPhysicalMemProp *prop,
                                                              aclrtMemGranularityOptions option,
                                                              size_t *granularity);
/* expectPtr must be NULL; alignment 0 or a power of two; flags is the
 * page type (0 normal, 1 huge) and is advice here. */
ACL_FUNC_VISIBILITY aclError aclrtReserveMemAddress(void **virPtr, size_t size, size_t alignment,
                                                    void *expectPtr, uint64_t flags);
ACL_FUNC_VISIBILITY aclError aclrtReleaseMemAddress(void *virPtr);
/* prop: PINNED memory of a device (its location.id) or of the host. flags 0. */
ACL_FUNC_VISIBILITY aclError aclrtMallocPhysical(aclrtDrvMemHandle *handle, size_t size,
                                                 const aclrtPhysicalMemProp *prop, uint64_t flags);
ACL_FUNC_VISIBILITY aclError aclrtFreePhysical(aclrtDrvMemHandle handle);
/* Maps size bytes of handle from offset at virPtr, inside one reservation
 * and over no other mapping. flags 0. */
ACL_FUNC_VISIBILITY aclError aclrtMapMem(void *virPtr, size_t size, size_t offset,
                                         aclrtDrvMemHandle handle, uint64_t flags);
/* virPtr: the address a mapping starts at. */
ACL_FUNC_VISIBILITY aclError aclrtUnmapMem(void *virPtr);

#ifdef __cplusplus
}
#endif
#endif /* INC_EXTERNAL_ACL_ACL_RT_H_ */
