/*
 * work.h — a torch Work over ddpc's async works, and the threads that
 * complete them: the group's completion thread (Completion) and the
 * threads where futures complete and their callbacks run (Callbacks).
 * ProcessGroupDDPC.cpp runs the completion thread; collectives.cpp builds
 * one WorkDDPC per torch call.
 */
#ifndef DDPC_TORCH_WORK_H
#define DDPC_TORCH_WORK_H

#include "compat.h"

#include <ATen/core/ivalue.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ddpc/ddpc.h"

namespace ddpc_torch {

/* What a ddpc call that returned s (not DDPC_OK) on this thread says: its
 * last error, else the status's name; a timeout is worded as torch's
 * backends word it ("Timed out"), which scripts look for. */
std::string call_error(ddpc_status s);

class WorkDDPC;

/* Where a finished work's future is completed, and so where its callbacks
 * run: never on the completion thread, which must stay free to drive the
 * works those callbacks may issue and wait for (a collective inside a
 * future's callback, as DDP's PowerSGD hook has, would otherwise wait for
 * the very thread it blocks). One thread takes the jobs in order; when every
 * thread is inside a callback that waits, another is started (up to
 * kMaxThreads), as gloo's worker threads let one callback wait on another
 * collective. */
struct Callbacks {
    static constexpr int kMaxThreads = 16;
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::function<void()>> jobs;
    std::vector<std::thread> threads;
    int idle = 0;
    bool stop = false;

    /* Queues job; starts a thread when none is idle (up to kMaxThreads). */
    void post(std::function<void()> job);
    /* Runs what is queued, then joins the threads. */
    void shutdown();

  private:
    void run();
};

/* The completion thread's queue. The communicator has no progress thread
 * of its own: each call runs on the thread that waits for it. The caller
 * that waits at once, as every synchronous torch.distributed call does, runs
 * it itself, without a thread hand-off. The completion thread runs the
 * others: it is woken when someone depends on it (a future was asked for,
 * is_completed is polled), and else every 20 ms for works nobody waits for
 * (an isend never waited on). */
struct Completion {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<c10::intrusive_ptr<WorkDDPC>> queue;
    bool stop = false;
    bool urgent = false;
    Callbacks callbacks;
    void wake() {
        {
            std::lock_guard<std::mutex> g(mu);
            urgent = true;
        }
        cv.notify_one();
    }
};

/* One torch call: the ddpc works it issued, the copies back into its
 * non-contiguous outputs, its future. Built under the group's issue lock
 * (the builders below), then finished once, by its first waiter or by the
 * completion thread (settle, then complete). */
class WorkDDPC : public c10d::Work {
  public:
    /* limit_s: the call's own timeout (< 0: the group's); on_timeout is
     * called when it passes with the call still running. */
    WorkDDPC(int rank, c10d::OpType type, const char *title, std::vector<at::Tensor> outputs,
             const std::vector<at::Tensor> &inputs, std::shared_ptr<Completion> completion,
             double limit_s, std::function<void()> on_timeout)
        : Work(rank, type, title, c10::optional<std::vector<at::Tensor>>(inputs)),
          completion_(std::move(completion)), outputs_(std::move(outputs)), title_(title),
          limit_s_(limit_s), on_timeout_(std::move(on_timeout)) {}

    ~WorkDDPC() override;

    /* Builders, used while the group's issue lock is held. */
    at::Tensor inout(const at::Tensor &t) { /* read and written in place */
        if (t.is_contiguous()) return t;
        at::Tensor c = t.contiguous();
        after_.push_back([t, c]() mutable { t.copy_(c); });
        return c;
    }
    at::Tensor in(const at::Tensor &t) { /* only read */
        at::Tensor c = t.contiguous();
        keep_.push_back(c);
        return c;
    }
    at::Tensor out(const at::Tensor &t) { /* only written */
        if (t.is_contiguous()) return t;
        at::Tensor c = at::empty_like(t, at::MemoryFormat::Contiguous);
        after_.push_back([t, c]() mutable { t.copy_(c); });
        return c;
    }
    void keep(const at::Tensor &t) { keep_.push_back(t); }
    void then(std::function<void()> f) { after_.push_back(std::move(f)); }
    /* Records one issued ddpc call (or its refusal). */
    void issued(ddpc_status s, ddpc_work *const &h) { /* h by reference: read after the call */
        if (s == DDPC_OK)
            handles_.push_back(h);
        else
            ran(s);
    }
    /* Records a synchronous call run on the caller's thread (ddpc's
     * blocking form; see ProcessGroupDDPC::here), or a refused one. */
    void ran(ddpc_status s) {
        if (s != DDPC_OK && error_.empty()) error_ = call_error(s);
    }
    bool own_timeout() const { return limit_s_ >= 0; }
    bool refused_outright() const { return !error_.empty() && handles_.empty(); }
    const std::string &error() const { return error_; }
    void set_source(int r) { source_ = r; }
    void source_from_receive() { any_source_ = true; }

    /* Waits for the ddpc calls; false if timeout_s passed first (then
     * nothing is recorded). timeout_s < 0: until they end, which the call's
     * own timeout, or else the group's (the communicator's per-operation
     * limit), bounds. The outcome is kept for complete(). */
    bool settle(double timeout_s);

    /* The first caller finishes the work (copy-outs, then the future and
     * its callbacks); later ones find it finished. */
    void complete();

    /* Whether the work is finished (complete() ran): the completion thread
     * then has nothing left to do for it. */
    bool claimed() const { return claimed_; }

    /* A synchronous call: finished on the caller's thread, before the work
     * is handed back (see ProcessGroupDDPC::submit). */
    void finish_now() {
        settle(-1);
        complete();
    }

    bool wait(std::chrono::milliseconds timeout) override;

    bool isCompleted() override;

    /* The future is made on demand: a synchronous call (most of them) never
     * asks for one, and making it costs a type and a future per call. One
     * asked for after the work finished is completed at once (it has no
     * callbacks yet). */
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
    std::vector<at::Tensor> result() override { return outputs_; }
    int sourceRank() const override { return source_; }

  private:
    std::shared_ptr<Completion> completion_;
    std::vector<ddpc_work *> handles_;
    std::vector<std::function<void()>> after_; /* copy-outs, once every call is done */
    std::vector<at::Tensor> keep_;             /* staging buffers kept alive */
    std::vector<at::Tensor> outputs_;
    void settle_future(const c10::intrusive_ptr<at::ivalue::Future> &f);

    std::mutex future_mu_;                          /* guards future_, done_, error_ptr_ */
    c10::intrusive_ptr<at::ivalue::Future> future_; /* made by getFuture */
    bool done_ = false;                             /* complete() ran */
    std::exception_ptr error_ptr_;                  /* its outcome, when it failed */
    std::string error_;
    std::mutex settled_mu_;
    bool settled_ = false;
    std::string settled_err_;
    std::atomic<bool> claimed_{ false };
    std::atomic<bool> timed_out_{ false }; /* the call's own timeout passed */
    const char *title_;                    /* "ddpc:all_reduce": static storage */
    double limit_s_;
    std::function<void()> on_timeout_;
    int source_ = -1;
    bool any_source_ = false;
};

} // namespace ddpc_torch

#endif /* DDPC_TORCH_WORK_H */
