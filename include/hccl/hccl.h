/*
 * hccl.h — HCCL's collectives, with CANN's names and signatures
 * (hicann/hccl), executed on CPUs by libhccl over ddpc. Include this one
 * header: it brings hccl_types.h, hccl_comm.h and acl/acl.h.
 *
 * Each call checks its arguments (HCCL_E_PTR, HCCL_E_PARA, HCCL_E_NOT_SUPPORT
 * at once), queues the operation on stream and returns HCCL_SUCCESS; the
 * stream runs it in its order, and aclrtSynchronizeStream(stream) waits for
 * it and reports a failure (HcclGetCommAsyncError names it as an HcclResult).
 * Every rank issues the same collectives on a communicator in the same order.
 * Counts are elements. Buffers stay the caller's and must stay valid until
 * the stream has run the operation.
 *
 * Data types: every HcclDataType from INT8 to BFP16 with every call; the
 * reductions SUM, PROD, MAX, MIN with each of them.
 */
#ifndef HCCL_H_
#define HCCL_H_

#include "acl/acl.h"
#include "hccl/hccl_comm.h"
#include "hccl/hccl_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* recvBuf = op over ranks of sendBuf (count elements; in place allowed). */
extern HcclResult HcclAllReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType,
                                HcclReduceOp op, HcclComm comm, aclrtStream stream);

/* root's buf to every rank's buf. */
extern HcclResult HcclBroadcast(void *buf, uint64_t count, HcclDataType dataType, uint32_t root,
                                HcclComm comm, aclrtStream stream);

/* sendBuf holds rankSize*recvCount; rank i gets op over ranks of block i. */
extern HcclResult HcclReduceScatter(void *sendBuf, void *recvBuf, uint64_t recvCount,
                                    HcclDataType dataType, HcclReduceOp op, HcclComm comm,
                                    aclrtStream stream);

/* Rank i gets op over ranks of sendCounts[i] elements at sendBuf + sendDispls[i]
 * (uint64_t arrays of rankSize entries, the same on every rank); recvCount
 * must equal sendCounts[i]. */
extern HcclResult HcclReduceScatterV(void *sendBuf, const void *sendCounts, const void *sendDispls,
                                     void *recvBuf, uint64_t recvCount, HcclDataType dataType,
                                     HcclReduceOp op, HcclComm comm, aclrtStream stream);

/* root's sendBuf holds rankSize*recvCount; rank i gets block i. */
extern HcclResult HcclScatter(void *sendBuf, void *recvBuf, uint64_t recvCount,
                              HcclDataType dataType, uint32_t root, HcclComm comm,
                              aclrtStream stream);

/* recvBuf holds rankSize*sendCount: rank i's sendBuf at block i. */
extern HcclResult HcclAllGather(void *sendBuf, void *recvBuf, uint64_t sendCount,
                                HcclDataType dataType, HcclComm comm, aclrtStream stream);

/* Rank i's sendCount elements land at recvBuf + recvDispls[i] on every rank
 * (recvCounts[i] == rank i's sendCount; uint64_t arrays of rankSize entries). */
extern HcclResult HcclAllGatherV(void *sendBuf, uint64_t sendCount, void *recvBuf,
                                 const void *recvCounts, const void *recvDispls,
                                 HcclDataType dataType, HcclComm comm, aclrtStream stream);

/* Point to point, matched in order per pair of ranks. A send waits for its
 * receive: order the calls of two ranks so that they pair up, or use
 * HcclBatchSendRecv. */
extern HcclResult HcclSend(void *sendBuf, uint64_t count, HcclDataType dataType, uint32_t destRank,
                           HcclComm comm, aclrtStream stream);
extern HcclResult HcclRecv(void *recvBuf, uint64_t count, HcclDataType dataType, uint32_t srcRank,
                           HcclComm comm, aclrtStream stream);

/* Uneven all-to-all: sendCounts[j] elements at sendBuf + sdispls[j] go to
 * rank j, which receives them at recvBuf + rdispls[i] (recvCounts[i] equal
 * to them). uint64_t arrays of rankSize entries; sendType == recvType. */
extern HcclResult HcclAlltoAllV(const void *sendBuf, const void *sendCounts, const void *sdispls,
                                HcclDataType sendType, const void *recvBuf, const void *recvCounts,
                                const void *rdispls, HcclDataType recvType, HcclComm comm,
                                aclrtStream stream);

/* All-to-all-v from one matrix that every rank passes alike:
 * sendCountMatrix[i * rankSize + j] (uint64_t) elements go from rank i to
 * rank j, packed in rank order at both ends. sendType == recvType. */
extern HcclResult HcclAlltoAllVC(const void *sendBuf, const void *sendCountMatrix,
                                 HcclDataType sendType, const void *recvBuf, HcclDataType recvType,
                                 HcclComm comm, aclrtStream stream);

/* Block j (sendCount elements) of sendBuf goes to rank j's block i.
 * sendCount == recvCount, sendType == recvType. */
extern HcclResult HcclAlltoAll(const void *sendBuf, uint64_t sendCount, HcclDataType sendType,
                               const void *recvBuf, uint64_t recvCount, HcclDataType recvType,
                               HcclComm comm, aclrtStream stream);

/* op over ranks of sendBuf lands in root's recvBuf. */
extern HcclResult HcclReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType,
                             HcclReduceOp op, uint32_t root, HcclComm comm, aclrtStream stream);

/* The sends and receives of sendRecvInfo[0..itemNum) progress together. */
extern HcclResult HcclBatchSendRecv(HcclSendRecvItem *sendRecvInfo, uint32_t itemNum, HcclComm comm,
                                    aclrtStream stream);

#ifdef __cplusplus
}
#endif
#endif /* HCCL_H_ */
