/*
 * ProcessGroupDDPC.h — torch.distributed's `ddpc` backend: a
 * c10d::Backend (torch 2.x) or c10d::ProcessGroup (torch 1.13) over
 * libddpc's public C API; compat.h holds what differs between the two.
 * Its files: ProcessGroupDDPC.cpp the group's life (the store, the
 * communicator, the completion thread) and the Python module;
 * collectives.cpp each torch call; work.h the Work and the threads that
 * complete it; convert.h torch's dtypes, ops and tensors as ddpc's.
 *
 * It holds no algorithm. Each torch call becomes one or more of ddpc's async
 * collectives, issued in call order on the group's communicator; the only
 * work done here is torch's bookkeeping around them:
 *   - views: a non-contiguous tensor goes through a contiguous copy (copied
 *     back when it is an output); complex tensors travel as their real pairs;
 *     list forms (all_gather into a list, scatter from a list, ...) go
 *     through one flat buffer that ddpc fills, then copied into the list;
 *   - dtypes: torch's scalar types map onto ddpc's; bool travels as uint8,
 *     with SUM/BOR as MAX and PRODUCT/BAND as MIN (logical or / and);
 *   - completion: a Work per call, driven by the group's completion thread
 *     (so that futures complete without anyone waiting, as DDP's reducer
 *     and comm hooks need) or by whoever calls wait() first; a call torch
 *     marks synchronous (asyncOp false: torch.distributed.all_reduce and
 *     broadcast without async_op) runs on the caller's thread through
 *     ddpc's blocking call (unless it has a timeout of its own), is
 *     finished there before it returns, and never reaches the completion
 *     thread or ddpc's progress thread; its future's
 *     callbacks run on a callback thread, never on the completion thread,
 *     so a callback may itself issue a collective and wait for it (DDP's
 *     PowerSGD hook does);
 *   - timeouts: a call's own timeout option, when set, bounds that call;
 *     past it the call fails ("Timed out") and the communicator is aborted,
 *     so every later call fails at once instead of running out of step.
 *
 * Bootstrap goes through the c10d Store torch hands the creator (a
 * PrefixStore over TCPStore for env://, over FileStore for file://), wrapped
 * as a ddpc_store_ops store: set, get with a timeout (a check() poll, which
 * never leaves a TCPStore connection waiting), add. C++ exceptions never
 * cross into C: every callback catches and returns a status.
 */
#ifndef DDPC_TORCH_PROCESSGROUPDDPC_H
#define DDPC_TORCH_PROCESSGROUPDDPC_H

#include "compat.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ddpc/ddpc.h"
#include "work.h"

namespace ddpc_torch {

/* The group: its life in ProcessGroupDDPC.cpp, its calls in collectives.cpp. */
class ProcessGroupDDPC : public BackendBase {
  public:
    ProcessGroupDDPC(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                     std::chrono::milliseconds timeout);

    /* Python's exit (an atexit handler of ddpc_torch): each live group's
   * completion thread finishes its queue and stops while threads may still
   * take the GIL. Once the interpreter finalizes, a thread that takes it
   * (to drop a tensor Python knows) is ended by pthread_exit, which unwinds
   * through noexcept frames: "terminate called without an active
   * exception". The communicators stay; the destructors close them. */
    static void stop_all_completion_threads();

    /* Without the GIL: the completion thread may be dropping the last
   * reference to a tensor Python also knows, which takes the GIL. */
    ~ProcessGroupDDPC() override;

    const std::string getBackendName() const override { return "ddpc"; }

#if DDPC_TORCH2
    /* destroy_process_group: finish what is queued and close (the
     * destructor then finds it closed). */
    void shutdown() override;
    /* torch's abort: every waiting and later call fails at once. */
    void abort() override;
#endif

    /* torch's calls, each as ddpc's async collectives (collectives.cpp). */
    c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &ts,
                                             const c10d::BroadcastOptions &o) override;
    c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &ts,
                                             const c10d::AllreduceOptions &o) override;
    c10::intrusive_ptr<c10d::Work>
    allreduce_coalesced(std::vector<at::Tensor> &ts,
                        const c10d::AllreduceCoalescedOptions &o) override;
    c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &ts,
                                          const c10d::ReduceOptions &o) override;
    c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outs,
                                             std::vector<at::Tensor> &ins,
                                             const c10d::AllgatherOptions &o) override;
    c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &out, at::Tensor &in,
                                                   const c10d::AllgatherOptions &o) override;
    c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>> &outs,
                                                       std::vector<at::Tensor> &ins,
                                                       const c10d::AllgatherOptions &o) override;
    c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outs,
                                          std::vector<at::Tensor> &ins,
                                          const c10d::GatherOptions &o) override;
    c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &outs,
                                           std::vector<std::vector<at::Tensor>> &ins,
                                           const c10d::ScatterOptions &o) override;
    c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &outs,
                                                  std::vector<std::vector<at::Tensor>> &ins,
                                                  const c10d::ReduceScatterOptions &o) override;
    c10::intrusive_ptr<c10d::Work>
    _reduce_scatter_base(at::Tensor &out, at::Tensor &in,
                         const c10d::ReduceScatterOptions &o) override;
#if DDPC_TORCH2
    c10::intrusive_ptr<c10d::Work>
    allgather_into_tensor_coalesced(std::vector<at::Tensor> &outs, std::vector<at::Tensor> &ins,
                                    const c10d::AllgatherOptions &o) override;
    c10::intrusive_ptr<c10d::Work>
    reduce_scatter_tensor_coalesced(std::vector<at::Tensor> &outs, std::vector<at::Tensor> &ins,
                                    const c10d::ReduceScatterOptions &o) override;
#endif
    c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &out, at::Tensor &in,
                                                 std::vector<int64_t> &outSplits,
                                                 std::vector<int64_t> &inSplits,
                                                 const c10d::AllToAllOptions &o) override;
    c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outs,
                                            std::vector<at::Tensor> &ins,
                                            const c10d::AllToAllOptions &o) override;
    c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &ts, int dst, int tag) override;
    c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &ts, int src, int tag) override;
    c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &ts, int tag) override;
    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &o) override;

    /* ddpc numbers every collective itself; torch's group-wide sequence
   * number (used by its debug wrapper) starts at 0 on every rank. */
    void setSequenceNumberForGroup() override { seq_ = 0; }
    uint64_t getSequenceNumberForGroup() override { return seq_; }

  private:
    /* Finishes the works still queued, stops the completion thread, then
   * destroys the communicator (which says goodbye to the peers). Once. */
    void close();
    void stop_completion();
    static std::mutex &live_mu();
    static std::set<ProcessGroupDDPC *> &live();

    /* A work for a call: outs are its result(), ins what the profiler shows
   * (under the names gloo uses, which torch's tests look for). */
    c10::intrusive_ptr<WorkDDPC> work(c10d::OpType type, const char *title,
                                      std::vector<at::Tensor> outs,
                                      const std::vector<at::Tensor> &ins,
                                      std::chrono::milliseconds limit = c10d::kUnsetTimeout);

    /* Whether a call runs on the caller's thread through ddpc's blocking
     * form, under the issue lock: torch waits for it at once (sync), and it
     * has no timeout of its own to enforce. It skips the hand-off to ddpc's
     * progress thread and back (torch 2.13, 8 B all_reduce: 13.6 -> 5.7 us). */
    template <typename O> static bool here(const O &o, const WorkDDPC &w) {
        return is_sync(o) && !w.own_timeout();
    }

    /* Hands an issued work to the completion thread, unless sync: the
     * caller then finishes it itself (finish_now) before returning it, and
     * the completion thread would only find it claimed. */
    c10::intrusive_ptr<c10d::Work> submit(const c10::intrusive_ptr<WorkDDPC> &w, const char *what,
                                          bool sync = false);

    /* The completion thread: completes works in issue order (see Completion). */
    void loop();

    /* The collectives' checks and staging (collectives.cpp). */
    int root(int64_t r, const char *what) const;
    int peer(int r, const char *what) const;

    static void pairs_check(const std::vector<at::Tensor> &outs, const std::vector<at::Tensor> &ins,
                            int out_k, int in_k, const char *what);
    void check_list(const std::vector<at::Tensor> &list, const at::Tensor &t,
                    const char *what) const;
    void gather_into(WorkDDPC &w, const std::vector<at::Tensor> &list, const at::Tensor &in,
                     const char *what);
    void splits(const std::vector<int64_t> &s, int64_t rows, int64_t row,
                std::vector<size_t> &count, std::vector<size_t> &disp, const char *what) const;

    ddpc_comm *comm_ = nullptr;
    std::chrono::milliseconds timeout_;
    std::mutex issue_mu_;            /* one caller at a time issues, so calls keep their order */
    std::atomic<uint64_t> seq_{ 0 }; /* calls issued, torch's sequence number */
    std::shared_ptr<Completion> completion_;
    std::thread thread_;
};

} // namespace ddpc_torch

#endif /* DDPC_TORCH_PROCESSGROUPDDPC_H */
