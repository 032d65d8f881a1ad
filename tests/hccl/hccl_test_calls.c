/*
 * hccl_test_calls.c — the calls Huawei's HCCL Test (hicann/oam-tools,
 * src/hccl_test) makes beyond the collectives, made the way it makes them,
 * each result checked, and their wrong uses refused. Written against
 * hccl/hccl.h and acl/acl_prof.h only and linked as HCCL Test links
 * (-lhccl -lacl_rt -lmsprofiler). Prints one line per rank and exits 0 when
 * everything held:
 *
 *   ddpc-run --nproc-per-node=3 hccl_test_calls ROOT_INFO_FILE PROF_DIR
 *
 * What it goes through, in HCCL Test's order:
 *   1. device set-up: the SoC name, the saturation mode, a stream that
 *      stops on failure, memory info (what its -z checks sizes against);
 *   2. profiling (its HCCL_TEST_PROFILING=1): init, config, start ... stop,
 *      finalize, and the session's line in PROF_DIR;
 *   3. -t: a stream held by an ACL_EVENT_SYNC event that another stream
 *      records, reset each round;
 *   4. -z: reserved virtual memory set as the communicator's range, grown by
 *      physical memory mapped and activated chunk by chunk, collectives in
 *      it, then everything undone;
 *   5. -m: a communicator made with hcclSymWinMaxMemSizePerRank, memory
 *      reserved, backed and mapped at the recommended granularity and
 *      registered as a symmetric window, collectives in it.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep, with -std=c11 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../examples/hccl/hccl_values.h"
#include "acl/acl_prof.h"
#include "hccl/hccl.h"

static uint32_t g_rank, g_size;
static int g_failures;

/* A check that goes on: prints what failed and counts it. */
#define CHECK(cond, ...)                                                                \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "rank %u: %s:%d: %s: ", g_rank, __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                               \
            fprintf(stderr, " (%s)\n", aclGetRecentErrMsg());                           \
            g_failures++;                                                               \
        }                                                                               \
    } while (0)
/* A call that must fail with code (an aclError or HcclResult). */
#define REFUSED(call, code) CHECK((int)(call) == (int)(code), "%s is not %s", #call, #code)

static void sleep_ms(long ms) {
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* n floats at buf: allreduce (sum) of rank-dependent values, checked. */
static void allreduce_in(HcclComm comm, aclrtStream stream, float *send, float *recv, uint64_t n,
                         const char *what) {
    for (uint64_t i = 0; i < n; i++) send[i] = (float)(g_rank + 1 + i % 5);
    HCCL_OK(HcclAllReduce(send, recv, n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream));
    ACL_OK(aclrtSynchronizeStream(stream));
    double ranks = (double)g_size * (g_size + 1) / 2;
    int bad = 0;
    for (uint64_t i = 0; i < n && !bad; i++)
        bad = recv[i] != (float)(ranks + (double)g_size * (double)(i % 5));
    CHECK(!bad, "%s: allreduce of %llu floats gave wrong values", what, (unsigned long long)n);
}

/* ------------------------------------------------------------ 1. device set-up */

static void check_device(aclrtStream *stream) {
    const char *soc = aclrtGetSocName();
    CHECK(soc && strncmp(soc, "CPU host (", 10) == 0 && !strstr(soc, "Ascend"),
          "aclrtGetSocName = \"%s\"", soc ? soc : "(null)");
    ACL_OK(aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_INFNAN));
    REFUSED(aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_SATURATION), ACL_ERROR_FEATURE_UNSUPPORTED);
    REFUSED(aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_UNDEF), ACL_ERROR_INVALID_PARAM);

    ACL_OK(aclrtCreateStream(stream));
    ACL_OK(aclrtSetStreamFailureMode(*stream, ACL_STOP_ON_FAILURE));
    REFUSED(aclrtSetStreamFailureMode(*stream, 7), ACL_ERROR_INVALID_PARAM);
    REFUSED(aclrtSetStreamFailureMode((aclrtStream)&g_rank, 1), ACL_ERROR_RT_INVALID_HANDLE);

    size_t free_b = 0, total_b = 0;
    ACL_OK(aclrtGetMemInfo(ACL_HBM_MEM_HUGE, &free_b, &total_b));
    CHECK(free_b > 0 && free_b <= total_b && total_b >= ((size_t)64 << 20),
          "aclrtGetMemInfo: free %zu, total %zu", free_b, total_b);
    ACL_OK(aclrtGetMemInfo(ACL_DDR_MEM_HUGE, &free_b, &total_b));
    REFUSED(aclrtGetMemInfo((aclrtMemAttr)99, &free_b, &total_b), ACL_ERROR_INVALID_PARAM);
    REFUSED(aclrtGetMemInfo(ACL_DDR_MEM, NULL, &total_b), ACL_ERROR_INVALID_PARAM);
}

/* ------------------------------------------------------------ 2. profiling */

#define PROF_TYPES                                                                      \
    (ACL_PROF_ACL_API | ACL_PROF_TASK_TIME | ACL_PROF_AICORE_METRICS | ACL_PROF_AICPU | \
     ACL_PROF_HCCL_TRACE | ACL_PROF_MSPROFTX | ACL_PROF_RUNTIME_API)

static aclprofConfig *prof_start(const char *dir) {
    uint32_t dev = 0;
    aclprofConfig *c = aclprofCreateConfig(&dev, 1, ACL_AICORE_PIPE_UTILIZATION, NULL, PROF_TYPES);
    CHECK(c != NULL, "aclprofCreateConfig");
    REFUSED(aclprofStart(c), ACL_ERROR_UNINITIALIZE);
    ACL_OK(aclprofInit(dir, strlen(dir)));
    REFUSED(aclprofInit(dir, strlen(dir)), ACL_ERROR_REPEAT_INITIALIZE);
    uint32_t nodev = 100000;
    CHECK(aclprofCreateConfig(&nodev, 1, ACL_AICORE_PIPE_UTILIZATION, NULL, 0) == NULL,
          "a config of device 100000");
    REFUSED(aclprofStop(c), ACL_ERROR_INVALID_PARAM); /* not started */
    ACL_OK(aclprofStart(c));
    REFUSED(aclprofStart(c), ACL_ERROR_INVALID_PARAM); /* one session at a time */
    return c;
}

static void prof_stop(aclprofConfig *c, const char *dir) {
    REFUSED(aclprofDestroyConfig(c), ACL_ERROR_INVALID_PARAM); /* running */
    ACL_OK(aclprofStop(c));
    ACL_OK(aclprofFinalize());
    REFUSED(aclprofFinalize(), ACL_ERROR_REPEAT_FINALIZE);
    ACL_OK(aclprofDestroyConfig(c));
    char path[4096], host[64] = "host", line[512] = "";
    gethostname(host, sizeof host - 1);
    snprintf(path, sizeof path, "%s/ddpc_prof_%s_%ld.txt", dir, host, (long)getpid());
    FILE *f = fopen(path, "r");
    CHECK(f && fgets(line, sizeof line, f), "no profiling record in %s", path);
    if (f) fclose(f);
    char want[128];
    snprintf(want, sizeof want,
             "devices=0 aicore_metrics=1 data_types=0x%llx start=", (unsigned long long)PROF_TYPES);
    CHECK(strstr(line, "ddpc profiling session: ") && strstr(line, want) &&
              strstr(line, "no device counters recorded"),
          "the profiling record is \"%s\"", line);
    unlink(path);
}

/* ------------------------------------------------------------ 3. -t */

/* HCCL Test's -t, twice: the work waits on an ACL_EVENT_SYNC event that a
 * second stream records only after the host has queued it all; the wait is
 * reset each round, so the second round is held too. */
static void check_device_time(HcclComm comm, aclrtStream stream) {
    aclrtStream sync_stream;
    aclrtEvent sync_event, start, end;
    ACL_OK(aclrtCreateStream(&sync_stream));
    ACL_OK(aclrtCreateEventWithFlag(&sync_event, ACL_EVENT_SYNC));
    ACL_OK(aclrtCreateEvent(&start));
    ACL_OK(aclrtCreateEvent(&end));
    float *buf = NULL;
    ACL_OK(aclrtMalloc((void **)&buf, 1024 * sizeof *buf, ACL_MEM_MALLOC_HUGE_ONLY));
    for (int round = 0; round < 2; round++) {
        ACL_OK(aclrtStreamWaitEvent(stream, sync_event));
        ACL_OK(aclrtResetEvent(sync_event, stream));
        ACL_OK(aclrtRecordEvent(start, stream));
        for (int i = 0; i < 3; i++)
            HCCL_OK(
                HcclAllReduce(buf, buf, 1024, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_MAX, comm, stream));
        ACL_OK(aclrtRecordEvent(end, stream));
        sleep_ms(150);
        aclrtEventRecordedStatus st = ACL_EVENT_RECORDED_STATUS_COMPLETE;
        ACL_OK(aclrtQueryEventStatus(end, &st));
        CHECK(st == ACL_EVENT_RECORDED_STATUS_NOT_READY,
              "round %d: the stream ran before the sync event was recorded", round);
        ACL_OK(aclrtRecordEvent(sync_event, sync_stream));
        ACL_OK(aclrtSynchronizeStream(stream));
        float ms = -1;
        ACL_OK(aclrtEventElapsedTime(&ms, start, end));
        CHECK(ms >= 0, "round %d: %.3f ms between start and end", round, ms);
    }
    /* a reset event has no time; a stream blocked on a destroyed event
     * fails, and a stopped stream refuses work until synchronized */
    ACL_OK(aclrtResetEvent(end, stream));
    ACL_OK(aclrtSynchronizeStream(stream));
    float ms;
    REFUSED(aclrtEventElapsedTime(&ms, start, end), ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID);
    ACL_OK(aclrtStreamWaitEvent(stream, sync_event));
    ACL_OK(aclrtResetEvent(sync_event, sync_stream));
    ACL_OK(aclrtSynchronizeStream(sync_stream));
    ACL_OK(aclrtDestroyEvent(sync_event)); /* the stream is blocked on it */
    sleep_ms(200);                         /* for the stream to note its failure */
    REFUSED(aclrtRecordEvent(start, stream), ACL_ERROR_RT_STREAM_ABORT);
    REFUSED(aclrtSynchronizeStream(stream), ACL_ERROR_RT_INVALID_HANDLE);
    ACL_OK(aclrtRecordEvent(start, stream));
    ACL_OK(aclrtSynchronizeStream(stream));
    REFUSED(aclrtResetEvent(sync_event, stream), ACL_ERROR_RT_INVALID_HANDLE);
    ACL_OK(aclrtFree(buf));
    ACL_OK(aclrtDestroyEvent(start));
    ACL_OK(aclrtDestroyEvent(end));
    ACL_OK(aclrtDestroyStream(sync_stream));
}

/* ------------------------------------------------------------ 4. -z */

static aclrtPhysicalMemProp device_prop(void) {
    aclrtPhysicalMemProp prop = { ACL_MEM_HANDLE_TYPE_NONE,
                                  ACL_MEM_ALLOCATION_TYPE_PINNED,
                                  ACL_HBM_MEM_HUGE,
                                  { 0, ACL_MEM_LOCATION_TYPE_DEVICE },
                                  0 };
    return prop;
}

/* The virtual memory calls' wrong uses, on a reservation of 4 grains. */
static void check_vm_errors(size_t g) {
    aclrtPhysicalMemProp prop = device_prop(), bad = prop;
    size_t x;
    bad.location.id = 100000;
    REFUSED(aclrtMemGetAllocationGranularity(&bad, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &x),
            ACL_ERROR_RT_INVALID_DEVICEID);
    REFUSED(aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_UNDEF, &x),
            ACL_ERROR_INVALID_PARAM);
    void *va = NULL, *va2 = NULL;
    REFUSED(aclrtReserveMemAddress(&va, g + 1, 0, NULL, 1), ACL_ERROR_INVALID_PARAM);
    REFUSED(aclrtReserveMemAddress(&va, g, 0, &x, 1), ACL_ERROR_INVALID_PARAM);
    REFUSED(aclrtReserveMemAddress(&va, g, 3, NULL, 1), ACL_ERROR_INVALID_PARAM);
    ACL_OK(aclrtReserveMemAddress(&va, 4 * g, 0, NULL, 1));
    ACL_OK(aclrtReserveMemAddress(&va2, 2 * g, (size_t)1 << 21, NULL, 0));
    CHECK(((uintptr_t)va2 & (((uintptr_t)1 << 21) - 1)) == 0, "a 2 MiB alignment gave %p", va2);
    aclrtDrvMemHandle h = NULL;
    REFUSED(aclrtMallocPhysical(&h, 0, &prop, 0), ACL_ERROR_INVALID_PARAM);
    REFUSED(aclrtMallocPhysical(&h, g, NULL, 0), ACL_ERROR_INVALID_PARAM);
    ACL_OK(aclrtMallocPhysical(&h, 2 * g, &prop, 0));
    char *c = va;
    REFUSED(aclrtMapMem(c + 3 * g, 2 * g, 0, h, 0), ACL_ERROR_INVALID_PARAM); /* past the range */
    REFUSED(aclrtMapMem(c, 2 * g, g, h, 0), ACL_ERROR_INVALID_PARAM);         /* past the handle */
    REFUSED(aclrtMapMem(c, g, 0, &x, 0), ACL_ERROR_RT_INVALID_HANDLE);
    REFUSED(aclrtMapMem(&x, g, 0, h, 0), ACL_ERROR_INVALID_PARAM); /* not reserved */
    ACL_OK(aclrtMapMem(c, 2 * g, 0, h, 0));
    REFUSED(aclrtMapMem(c + g, g, 0, h, 0), ACL_ERROR_INVALID_PARAM); /* overlaps */
    /* the same physical memory at a second address: one memory, two views */
    ACL_OK(aclrtMapMem(va2, g, g, h, 0));
    c[g + 5] = 42;
    CHECK(((char *)va2)[5] == 42, "a write through one mapping is not seen through the other");
    REFUSED(aclrtFreePhysical(h), ACL_ERROR_INVALID_PARAM);       /* mapped */
    REFUSED(aclrtReleaseMemAddress(va), ACL_ERROR_INVALID_PARAM); /* mapped in */
    REFUSED(aclrtUnmapMem(c + g), ACL_ERROR_INVALID_PARAM);       /* no mapping starts there */
    ACL_OK(aclrtUnmapMem(va2));
    ACL_OK(aclrtUnmapMem(va));
    REFUSED(aclrtUnmapMem(va), ACL_ERROR_INVALID_PARAM);
    ACL_OK(aclrtFreePhysical(h));
    REFUSED(aclrtFreePhysical(h), ACL_ERROR_RT_INVALID_HANDLE);
    ACL_OK(aclrtReleaseMemAddress(va2));
    ACL_OK(aclrtReleaseMemAddress(va));
    REFUSED(aclrtReleaseMemAddress(va), ACL_ERROR_INVALID_PARAM);
}

/* HCCL Test's -z: a reservation for send and receive buffers, set as the
 * communicator's range before the loop; physical memory mapped and
 * activated as the sizes grow (two steps here); undone in its order. */
static void check_zero_copy(HcclComm comm, aclrtStream stream) {
    aclrtPhysicalMemProp prop = device_prop();
    size_t g = 0, rec = 0;
    ACL_OK(aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g));
    ACL_OK(aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED, &rec));
    CHECK(g >= 4096 && rec >= g && rec % g == 0, "granularities %zu, %zu", g, rec);
    check_vm_errors(g);

    size_t half = 8 * g; /* the largest send (and receive) buffer, rounded to g */
    void *vir = NULL;
    ACL_OK(aclrtReserveMemAddress(&vir, 2 * half, 0, NULL, 1));
    char *base = vir;
    HCCL_OK(HcclCommSetMemoryRange(comm, vir, 2 * half, 0, 0));
    REFUSED(HcclCommSetMemoryRange(comm, base + g, g, 0, 0), HCCL_E_PARA);  /* overlaps */
    REFUSED(HcclCommSetMemoryRange(comm, &g, sizeof g, 0, 0), HCCL_E_PARA); /* not reserved */
    REFUSED(HcclCommSetMemoryRange(comm, vir, 2 * half, 4096, 0), HCCL_E_PARA);
    REFUSED(HcclCommSetMemoryRange(NULL, vir, 2 * half, 0, 0), HCCL_E_PTR);

    /* two steps, as the loop's sizes grow: [0, half) then [half, 2 half) */
    aclrtDrvMemHandle h[2];
    for (int step = 0; step < 2; step++) {
        char *at = base + (size_t)step * half;
        ACL_OK(aclrtMallocPhysical(&h[step], half, &prop, 0));
        REFUSED(HcclCommActivateCommMemory(comm, at, half, 0, h[step], 0),
                HCCL_E_PARA); /* unmapped */
        ACL_OK(aclrtMapMem(at, half, 0, h[step], 0));
        REFUSED(HcclCommActivateCommMemory(comm, at, half, g, h[step], 0), HCCL_E_PARA);
        HCCL_OK(HcclCommActivateCommMemory(comm, at, half, 0, h[step], 0));
        REFUSED(HcclCommActivateCommMemory(comm, at, g, 0, h[step], 0), HCCL_E_PARA); /* active */
        uint64_t n = (uint64_t)(step + 1) * half / 2 / sizeof(float);
        /* send at the start of the range, receive at half: in step 0 both
         * lie in mapped memory only when each fits half / 2 */
        allreduce_in(comm, stream, (float *)base, (float *)(base + half / 2 * (step + 1)),
                     step ? n : n / 2, step ? "-z, two chunks" : "-z, one chunk");
    }
    REFUSED(HcclCommUnsetMemoryRange(comm, vir), HCCL_E_PARA); /* active memory in it */
    for (int step = 0; step < 2; step++) {
        char *at = base + (size_t)step * half;
        HCCL_OK(HcclCommDeactivateCommMemory(comm, at));
        REFUSED(HcclCommDeactivateCommMemory(comm, at), HCCL_E_PARA);
        ACL_OK(aclrtUnmapMem(at));
        ACL_OK(aclrtFreePhysical(h[step]));
    }
    HCCL_OK(HcclCommUnsetMemoryRange(comm, vir));
    REFUSED(HcclCommUnsetMemoryRange(comm, vir), HCCL_E_PARA);
    ACL_OK(aclrtReleaseMemAddress(vir));
}

/* ------------------------------------------------------------ 5. -m */

/* HCCL Test's hccl_mem_alloc / register_symmetric_memory and back. */
static void check_symmetric(HcclRootInfo *id, aclrtStream stream) {
    HcclCommConfig config;
    HcclCommConfigInit(&config);
    config.hcclWorldRankID = g_rank;
    config.hcclSymWinMaxMemSizePerRank = 1; /* GiB */
    HcclComm comm;
    HCCL_OK(HcclCommInitRootInfoConfig(g_size, id, g_rank, &config, &comm));

    int32_t dev = -1;
    ACL_OK(aclrtGetDevice(&dev));
    aclrtPhysicalMemProp prop = device_prop();
    prop.location.id = (uint32_t)dev;
    size_t rec = 0, send_bytes = 6000 * sizeof(float), size;
    ACL_OK(aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED, &rec));
    size = (send_bytes * (g_size + 1) + rec - 1) / rec * rec;
    void *vir = NULL;
    aclrtDrvMemHandle h;
    ACL_OK(aclrtReserveMemAddress(&vir, size, 0, NULL, 1));
    ACL_OK(aclrtMallocPhysical(&h, size, &prop, 0));
    ACL_OK(aclrtMapMem(vir, size, 0, h, 0));

    HcclCommSymWindow win = NULL, other = NULL, leftover = NULL;
    REFUSED(HcclCommSymWinRegister(comm, vir, size, &win, HCCL_WIN_DEFAULT), HCCL_E_NOT_SUPPORT);
    REFUSED(HcclCommSymWinRegister(comm, vir, size, &win, 2), HCCL_E_PARA);
    REFUSED(HcclCommSymWinRegister(comm, vir, ((uint64_t)1 << 30) + 1, &win, 1), HCCL_E_PARA);
    REFUSED(HcclCommSymWinRegister(comm, NULL, size, &win, 1), HCCL_E_PTR);
    HCCL_OK(HcclCommSymWinRegister(comm, vir, size, &win, 1));
    REFUSED(HcclCommSymWinRegister(comm, (char *)vir + 64, 64, &other, 1),
            HCCL_E_PARA); /* overlaps */
    static char spare[256];
    HCCL_OK(HcclCommSymWinRegister(comm, spare, sizeof spare, &leftover, 1)); /* left to destroy */

    /* -m's buffers: send at the window's start, receive right after it */
    float *send = vir, *recv = (float *)((char *)vir + send_bytes);
    uint64_t n = send_bytes / sizeof(float);
    for (uint64_t i = 0; i < n; i++) send[i] = (float)(g_rank * 7 + i % 11);
    HCCL_OK(HcclAllGather(send, recv, n, HCCL_DATA_TYPE_FP32, comm, stream));
    ACL_OK(aclrtSynchronizeStream(stream));
    int bad = 0;
    for (uint32_t r = 0; r < g_size && !bad; r++)
        for (uint64_t i = 0; i < n && !bad; i++) bad = recv[r * n + i] != (float)(r * 7 + i % 11);
    CHECK(!bad, "-m: allgather in the symmetric window gave wrong values");
    allreduce_in(comm, stream, send, recv, n, "-m");

    HCCL_OK(HcclCommSymWinDeregister(win));
    REFUSED(HcclCommSymWinDeregister(win), HCCL_E_PARA);
    HCCL_OK(HcclCommDestroy(comm));
    REFUSED(HcclCommSymWinDeregister(leftover), HCCL_E_PARA); /* forgotten with its comm */
    ACL_OK(aclrtUnmapMem(vir));
    ACL_OK(aclrtFreePhysical(h));
    ACL_OK(aclrtReleaseMemAddress(vir));
}

int main(int argc, char **argv) {
    const char *rk = getenv("RANK"), *ws = getenv("WORLD_SIZE");
    if (argc < 3 || !rk || !ws) {
        fprintf(stderr, "usage: ddpc-run --nproc-per-node=N %s ROOT_INFO_FILE PROF_DIR\n", argv[0]);
        return 2;
    }
    g_rank = (uint32_t)atoi(rk), g_size = (uint32_t)atoi(ws);
    ACL_OK(aclInit(NULL));
    ACL_OK(aclrtSetDevice(0));
    aclrtStream stream;
    check_device(&stream);
    aclprofConfig *prof = prof_start(argv[2]);

    HcclRootInfo id, id2;
    if (g_rank == 0) HCCL_OK(HcclGetRootInfo(&id));
    hccl_share_root_info(g_rank, argv[1], &id);
    HcclComm comm;
    HCCL_OK(HcclCommInitRootInfo(g_size, &id, g_rank, &comm));
    check_device_time(comm, stream);
    check_zero_copy(comm, stream);
    HCCL_OK(HcclCommDestroy(comm));

    char path2[4096];
    snprintf(path2, sizeof path2, "%s.2", argv[1]);
    if (g_rank == 0) HCCL_OK(HcclGetRootInfo(&id2));
    hccl_share_root_info(g_rank, path2, &id2);
    check_symmetric(&id2, stream);

    prof_stop(prof, argv[2]);
    ACL_OK(aclrtDestroyStream(stream));
    ACL_OK(aclrtResetDevice(0));
    ACL_OK(aclFinalize());
    printf("hccl_test_calls rank %u/%u: %s (%d failures)\n", g_rank, g_size,
           g_failures ? "FAILED" : "OK", g_failures);
    return g_failures ? 1 : 0;
}
