/*
 * ProcessGroupDDPC.cpp — torch.distributed's `ddpc` backend: a
 * c10d::Backend (torch 2.x) or c10d::ProcessGroup (torch 1.13) over
 * libddpc's public C API; compat.h holds what differs between the two.
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
 *     broadcast without async_op) is finished on the caller's thread before
 *     it returns, and never reaches the completion thread; its future's
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
#include "compat.h"

#include <torch/csrc/utils/pybind.h>

#include <ATen/core/ivalue.h>
#include <pybind11/chrono.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ddpc/ddpc.h"
#include "ddpc/store.h"

namespace ddpc_torch {

/* ------------------------------------------------ the store, as callbacks */

struct StoreRef {
    c10::intrusive_ptr<c10d::Store> store;
};

static void say(char *err, size_t errlen, const char *what) {
    std::snprintf(err, errlen, "%s", what);
}

static ddpc_status kv_set(void *ctx, const char *key, const void *val, size_t len, char *err,
                          size_t errlen) {
    try {
        auto *p = static_cast<const uint8_t *>(val);
        static_cast<StoreRef *>(ctx)->store->set(key, std::vector<uint8_t>(p, p + len));
        return DDPC_OK;
    } catch (const std::exception &e) {
        say(err, errlen, e.what());
        return DDPC_ERR_PEER_LOST;
    }
}

/* Polls check() until the key exists or timeout_s passes: a TCPStore's own
 * wait that times out would leave its reply in the stream. */
static ddpc_status kv_get(void *ctx, const char *key, double timeout_s, void **val, size_t *len,
                          char *err, size_t errlen) {
    try {
        auto &st = static_cast<StoreRef *>(ctx)->store;
        auto until = std::chrono::steady_clock::now() +
                     std::chrono::duration<double>(timeout_s > 0 ? timeout_s : 0);
        auto nap = std::chrono::microseconds(500);
        while (!st->check({ key })) {
            if (std::chrono::steady_clock::now() >= until) return DDPC_ERR_TIMEOUT;
            std::this_thread::sleep_for(nap);
            if (nap < std::chrono::milliseconds(20)) nap *= 2;
        }
        std::vector<uint8_t> v = st->get(key);
        void *copy = std::malloc(v.size() ? v.size() : 1);
        if (!copy) {
            say(err, errlen, "out of memory");
            return DDPC_ERR_NOMEM;
        }
        if (!v.empty()) std::memcpy(copy, v.data(), v.size());
        *val = copy;
        *len = v.size();
        return DDPC_OK;
    } catch (const std::exception &e) {
        say(err, errlen, e.what());
        return DDPC_ERR_PEER_LOST;
    }
}

static ddpc_status kv_add(void *ctx, const char *key, int64_t delta, int64_t *result, char *err,
                          size_t errlen) {
    try {
        *result = static_cast<StoreRef *>(ctx)->store->add(key, delta);
        return DDPC_OK;
    } catch (const std::exception &e) {
        say(err, errlen, e.what());
        return DDPC_ERR_PEER_LOST;
    }
}

/* ------------------------------------------------------------ mapping */

[[noreturn]] static void fail(const std::string &what) {
    throw std::runtime_error("ddpc: " + what);
}

static ddpc_dtype dtype_of(at::ScalarType t, const char *what) {
    switch (t) {
    case at::kFloat: return DDPC_FLOAT32;
    case at::kDouble: return DDPC_FLOAT64;
    case at::kHalf: return DDPC_FLOAT16;
    case at::kBFloat16: return DDPC_BFLOAT16;
    case at::kChar: return DDPC_INT8;
    case at::kByte: return DDPC_UINT8;
    case at::kBool: return DDPC_UINT8;
    case at::kShort: return DDPC_INT16;
    case at::kInt: return DDPC_INT32;
    case at::kLong: return DDPC_INT64;
    default:
        fail(std::string(what) + ": tensors of dtype " + c10::toString(t) + " are not supported");
    }
}

static ddpc_op op_of(const c10d::ReduceOp &rop, at::ScalarType t, const char *what) {
    const bool b = t == at::kBool;
    switch (rop.op_) {
    case c10d::ReduceOp::SUM: return b ? DDPC_MAX : DDPC_SUM;
    case c10d::ReduceOp::AVG:
        if (b) fail(std::string(what) + ": AVG is not defined for bool tensors");
        return DDPC_AVG;
    case c10d::ReduceOp::PRODUCT: return b ? DDPC_MIN : DDPC_PROD;
    case c10d::ReduceOp::MIN: return DDPC_MIN;
    case c10d::ReduceOp::MAX: return DDPC_MAX;
    case c10d::ReduceOp::BAND: return b ? DDPC_MIN : DDPC_BAND;
    case c10d::ReduceOp::BOR: return b ? DDPC_MAX : DDPC_BOR;
    case c10d::ReduceOp::BXOR: return DDPC_BXOR;
    default: fail(std::string(what) + ": this reduce op is not supported (PREMUL_SUM is NCCL's)");
    }
}

/* A tensor as ddpc sees it: pointer, element count, dtype. */
struct Buf {
    void *ptr;
    size_t count;
    ddpc_dtype dt;
};

static bool dtype_known(at::ScalarType t) {
    switch (t) {
    case at::kFloat:
    case at::kDouble:
    case at::kHalf:
    case at::kBFloat16:
    case at::kChar:
    case at::kByte:
    case at::kBool:
    case at::kShort:
    case at::kInt:
    case at::kLong:
    case at::kComplexFloat:
    case at::kComplexDouble:
    case at::kComplexHalf: return true;
    default: return false;
    }
}

/* bytes_ok: the call only moves data (broadcast, gathers, scatters,
 * all-to-all, send/recv), so a dtype ddpc cannot reduce (float8, unsigned
 * 16-64 bit, ...) travels as its bytes. */
static Buf buf_of(const at::Tensor &contiguous, const char *what, bool bytes_ok = false) {
    if (bytes_ok && !dtype_known(contiguous.scalar_type()))
        return { contiguous.numel() ? contiguous.data_ptr() : nullptr,
                 static_cast<size_t>(contiguous.numel()) * contiguous.element_size(), DDPC_UINT8 };
    at::Tensor t = contiguous.is_complex() ? at::view_as_real(contiguous) : contiguous;
    return { t.numel() ? t.data_ptr() : nullptr, static_cast<size_t>(t.numel()),
             dtype_of(t.scalar_type(), what) };
}

/* Besides the CPU, the device of ddpc_torch_npu (bridges/torch_npu), whose
 * tensors live in host memory; off unless that package turns it on. */
static std::atomic<bool> serve_privateuse1{ false };

static void check_cpu(const at::Tensor &t, const char *what) {
    if (!t.device().is_cpu() &&
        !(serve_privateuse1 && t.device().type() == c10::DeviceType::PrivateUse1))
        fail(std::string(what) + ": tensors must be on the CPU (ddpc moves host memory), got " +
             t.device().str());
    if (t.is_sparse()) fail(std::string(what) + ": sparse tensors are not supported");
}

static void check_one(const std::vector<at::Tensor> &ts, const char *what) {
    if (ts.size() != 1)
        fail(std::string(what) + ": expects one tensor per process (one device), got " +
             std::to_string(ts.size()));
    check_cpu(ts[0], what);
}

/* ------------------------------------------------------------ work */

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

    void post(std::function<void()> job) {
        std::lock_guard<std::mutex> g(mu);
        jobs.push_back(std::move(job));
        if (idle == 0 && static_cast<int>(threads.size()) < kMaxThreads)
            threads.emplace_back([this] { run(); });
        else
            cv.notify_one();
    }
    /* Runs what is queued, then joins the threads. */
    void shutdown() {
        {
            std::lock_guard<std::mutex> g(mu);
            stop = true;
        }
        cv.notify_all();
        for (auto &t : threads)
            if (t.joinable()) t.join();
        threads.clear();
    }

  private:
    void run() {
        std::unique_lock<std::mutex> g(mu);
        for (;;) {
            idle++;
            cv.wait(g, [&] { return stop || !jobs.empty(); });
            idle--;
            if (jobs.empty()) return; /* stop, and nothing left */
            std::function<void()> job = std::move(jobs.front());
            jobs.pop_front();
            g.unlock();
            job();
            job = nullptr; /* drops the work (and its tensors) here */
            g.lock();
        }
    }
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

    ~WorkDDPC() override {
        for (ddpc_work *h : handles_) ddpc_work_destroy(h);
    }

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
        if (s == DDPC_OK) {
            handles_.push_back(h);
        } else if (error_.empty()) {
            error_ = ddpc_last_error();
            if (error_.empty()) error_ = ddpc_status_str(s);
        }
    }
    bool refused_outright() const { return !error_.empty() && handles_.empty(); }
    const std::string &error() const { return error_; }
    void set_source(int r) { source_ = r; }
    void source_from_receive() { any_source_ = true; }

    /* Waits for the ddpc calls; false if timeout_s passed first (then
     * nothing is recorded). timeout_s < 0: until they end, which the call's
     * own timeout, or else the group's (the communicator's per-operation
     * limit), bounds. The outcome is kept for complete(). */
    bool settle(double timeout_s) {
        std::string err = error_;
        const bool own = timeout_s < 0 && limit_s_ >= 0;
        for (ddpc_work *h : handles_) {
            double t = timeout_s >= 0 ? timeout_s : own ? limit_s_ : HUGE_VAL;
            ddpc_status s = ddpc_work_wait(h, t);
            int done = 1;
            if (s == DDPC_ERR_TIMEOUT && (timeout_s >= 0 || own)) ddpc_work_test(h, &done);
            if (!done && timeout_s >= 0) return false; /* only the caller's wait ran out */
            if (!done) { /* the call's own timeout: abort, so the work ends */
                timed_out_ = true;
                if (on_timeout_) on_timeout_();
                ddpc_work_wait(h, HUGE_VAL);
                continue;
            }
            if (s != DDPC_OK && err.empty()) {
                err = ddpc_last_error();
                /* torch's backends say "Timed out"; scripts look for it */
                if (s == DDPC_ERR_TIMEOUT) err = "Timed out (the process group's timeout): " + err;
            }
        }
        if (any_source_ && !handles_.empty()) source_ = ddpc_work_source(handles_[0]);
        if (timed_out_) /* whichever thread saw it, the timeout is the cause */
            err = "Timed out: " + std::string(title_) + " did not complete within its timeout (" +
                  std::to_string(static_cast<long long>(limit_s_ * 1000)) +
                  " ms); the group is aborted";
        std::lock_guard<std::mutex> g(settled_mu_);
        if (!settled_) settled_err_ = err, settled_ = true;
        return true;
    }

    /* The first caller finishes the work (copy-outs, then the future and
     * its callbacks); later ones find it finished. */
    void complete() {
        if (claimed_.exchange(true)) return;
        std::string msg;
        {
            std::lock_guard<std::mutex> g(settled_mu_);
            msg = settled_err_;
        }
        if (msg.empty()) {
            try {
                for (auto &f : after_) f();
            } catch (const std::exception &e) {
                msg = e.what();
            }
        }
        after_.clear();
        keep_.clear();
        std::exception_ptr ep;
        if (!msg.empty()) ep = std::make_exception_ptr(std::runtime_error("ddpc: " + msg));
        finish(ep);
        c10::intrusive_ptr<at::ivalue::Future> f;
        {
            std::lock_guard<std::mutex> g(future_mu_);
            done_ = true;
            error_ptr_ = ep;
            f = future_;
        }
        if (f) settle_future(f); /* outside the lock: its callbacks run here */
    }

    /* Whether the work is finished (complete() ran): the completion thread
     * then has nothing left to do for it. */
    bool claimed() const { return claimed_; }

    /* A synchronous call: finished on the caller's thread, before the work
     * is handed back (see ProcessGroupDDPC::submit). */
    void finish_now() {
        settle(-1);
        complete();
    }

    bool wait(std::chrono::milliseconds timeout) override {
        /* claimed: whoever claimed it calls finish(), which Work::wait waits for */
        if (!claimed_ && !settle(timeout == kNoTimeout ? -1.0 : timeout.count() / 1000.0))
            fail("Operation timed out after " + std::to_string(timeout.count()) +
                 " ms (still running)");
        complete();
        return Work::wait(kNoTimeout);
    }

    bool isCompleted() override {
        if (settle(0)) complete();
        if (!claimed_) completion_->wake(); /* a caller polling it: someone must run it */
        return Work::isCompleted();
    }

    /* The future is made on demand: a synchronous call (most of them) never
     * asks for one, and making it costs a type and a future per call. One
     * asked for after the work finished is completed at once (it has no
     * callbacks yet). */
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
        if (!claimed_) completion_->wake();
        std::lock_guard<std::mutex> g(future_mu_);
        if (!future_) {
            static const c10::TypePtr kTensors = c10::ListType::create(c10::TensorType::get());
            future_ = c10::make_intrusive<at::ivalue::Future>(kTensors);
            if (done_) settle_future(future_);
        }
        return future_;
    }
    std::vector<at::Tensor> result() override { return outputs_; }
    int sourceRank() const override { return source_; }

  private:
    std::shared_ptr<Completion> completion_;
    std::vector<ddpc_work *> handles_;
    std::vector<std::function<void()>> after_; /* copy-outs, once every call is done */
    std::vector<at::Tensor> keep_;             /* staging buffers kept alive */
    std::vector<at::Tensor> outputs_;
    void settle_future(const c10::intrusive_ptr<at::ivalue::Future> &f) {
        if (error_ptr_)
            f->setError(error_ptr_);
        else
            f->markCompleted(c10::IValue(outputs_));
    }

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
/* ------------------------------------------------------------ the group */

class ProcessGroupDDPC : public BackendBase {
  public:
    ProcessGroupDDPC(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                     std::chrono::milliseconds timeout)
        : BackendBase(rank, size), timeout_(timeout), completion_(std::make_shared<Completion>()) {
        StoreRef ref{ store };
        ddpc_store_ops ops{ kv_set, kv_get, kv_add };
        ddpc_store *st = nullptr;
        if (ddpc_store_create_ops(&ops, &ref, "torch's c10d store", &st) != DDPC_OK)
            fail(std::string("cannot wrap the store: ") + ddpc_last_error());
        ddpc_comm_options opt = ddpc_comm_options_default();
        opt.connect_timeout_s = timeout.count() / 1000.0;
        opt.exec_timeout_s = timeout.count() / 1000.0;
        opt.progress_thread = 0; /* the waiting caller, or the completion thread, runs each call */
        ddpc_status s = ddpc_comm_create_store(st, rank, size, &opt, &comm_);
        ddpc_store_destroy(st);
        if (s != DDPC_OK) fail(std::string("init_process_group: ") + ddpc_last_error());
        thread_ = std::thread([this] { loop(); });
        std::lock_guard<std::mutex> g(live_mu());
        live().insert(this);
    }

    /* Python's exit (an atexit handler of ddpc_torch): each live group's
   * completion thread finishes its queue and stops while threads may still
   * take the GIL. Once the interpreter finalizes, a thread that takes it
   * (to drop a tensor Python knows) is ended by pthread_exit, which unwinds
   * through noexcept frames: "terminate called without an active
   * exception". The communicators stay; the destructors close them. */
    static void stop_all_completion_threads() {
        std::lock_guard<std::mutex> g(live_mu());
        for (ProcessGroupDDPC *pg : live()) pg->stop_completion();
    }

    /* Without the GIL: the completion thread may be dropping the last
   * reference to a tensor Python also knows, which takes the GIL. */
    ~ProcessGroupDDPC() override {
        {
            std::lock_guard<std::mutex> g(live_mu());
            live().erase(this);
        }
        if (Py_IsInitialized() && PyGILState_Check()) {
            pybind11::gil_scoped_release nogil;
            close();
        } else {
            close();
        }
    }

    const std::string getBackendName() const override { return "ddpc"; }

#if DDPC_TORCH2
    /* destroy_process_group: finish what is queued and close (the
     * destructor then finds it closed). */
    void shutdown() override {
        if (Py_IsInitialized() && PyGILState_Check()) {
            pybind11::gil_scoped_release nogil;
            close();
        } else {
            close();
        }
    }
    /* torch's abort: every waiting and later call fails at once. */
    void abort() override {
        if (comm_) ddpc_comm_abort(comm_);
    }
#endif

    c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &ts,
                                             const c10d::BroadcastOptions &o) override {
        const char *what = "broadcast";
        check_one(ts, what);
        auto w = work(c10d::OpType::BROADCAST, "ddpc:broadcast", ts, ts, o.timeout);
        {
            std::lock_guard<std::mutex> g(issue_mu_);
            Buf b = buf_of(w->inout(ts[0]), what, true);
            ddpc_work *h = nullptr;
            w->issued(ddpc_broadcast_async(comm_, b.ptr, b.ptr, b.count, b.dt,
                                           root(o.rootRank, what), &h),
                      h);
            submit(w, what, is_sync(o));
        }
        if (is_sync(o)) w->finish_now();
        return w;
    }

    c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &ts,
                                             const c10d::AllreduceOptions &o) override {
        const char *what = "all_reduce";
        check_one(ts, what);
        ddpc_op op = op_of(o.reduceOp, ts[0].scalar_type(), what);
        auto w = work(c10d::OpType::ALLREDUCE, "ddpc:all_reduce", ts, ts, o.timeout);
        {
            std::lock_guard<std::mutex> g(issue_mu_);
            Buf b = buf_of(w->inout(ts[0]), what);
            ddpc_work *h = nullptr;
            w->issued(ddpc_allreduce_async(comm_, b.ptr, b.ptr, b.count, b.dt, op, &h), h);
            submit(w, what, is_sync(o));
        }
        if (is_sync(o)) w->finish_now(); /* outside the issue lock: others may issue meanwhile */
        return w;
    }

    /* One allreduce of the tensors packed end to end. */
    c10::intrusive_ptr<c10d::Work>
    allreduce_coalesced(std::vector<at::Tensor> &ts,
                        const c10d::AllreduceCoalescedOptions &o) override {
        const char *what = "all_reduce_coalesced";
        if (ts.empty()) fail(std::string(what) + ": no tensors given");
        for (auto &t : ts) {
            check_cpu(t, what);
            if (t.scalar_type() != ts[0].scalar_type())
                fail(std::string(what) + ": tensors must all have one dtype");
        }
        ddpc_op op = op_of(o.reduceOp, ts[0].scalar_type(), what);
        auto w = work(c10d::OpType::ALLREDUCE_COALESCED, "ddpc:all_reduce", ts, ts, o.timeout);
        std::lock_guard<std::mutex> g(issue_mu_);
        std::vector<at::Tensor> flat;
        for (auto &t : ts) flat.push_back(t.reshape({ -1 }));
        at::Tensor packed = at::cat(flat);
        w->keep(packed);
        w->then([ts, packed]() mutable {
            int64_t at = 0;
            for (auto &t : ts) {
                t.copy_(packed.narrow(0, at, t.numel()).view(t.sizes()));
                at += t.numel();
            }
        });
        Buf b = buf_of(packed, what);
        ddpc_work *h = nullptr;
        w->issued(ddpc_allreduce_async(comm_, b.ptr, b.ptr, b.count, b.dt, op, &h), h);
        return submit(w, what);
    }

    c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &ts,
                                          const c10d::ReduceOptions &o) override {
        const char *what = "reduce";
        check_one(ts, what);
        ddpc_op op = op_of(o.reduceOp, ts[0].scalar_type(), what);
        auto w = work(c10d::OpType::REDUCE, "ddpc:reduce", ts, ts, o.timeout);
        std::lock_guard<std::mutex> g(issue_mu_);
        Buf b = buf_of(w->inout(ts[0]), what);
        ddpc_work *h = nullptr;
        w->issued(
            ddpc_reduce_async(comm_, b.ptr, b.ptr, b.count, b.dt, op, root(o.rootRank, what), &h),
            h);
        return submit(w, what);
    }

    c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outs,
                                             std::vector<at::Tensor> &ins,
                                             const c10d::AllgatherOptions &o) override {
        const char *what = "all_gather";
        check_one(ins, what);
        if (outs.size() != 1) fail(std::string(what) + ": expects one output list");
        check_list(outs[0], ins[0], what);
        auto w = work(c10d::OpType::ALLGATHER, "ddpc:all_gather", outs[0], ins, o.timeout);
        std::lock_guard<std::mutex> g(issue_mu_);
        gather_into(*w, outs[0], ins[0], what);
        return submit(w, what);
    }

    c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &out, at::Tensor &in,
                                                   const c10d::AllgatherOptions &o) override {
        const char *what = "_allgather_base";
        check_cpu(in, what);
        check_cpu(out, what);
        if (out.numel() != in.numel() * getSize() || out.scalar_type() != in.scalar_type())
            fail(std::string(what) +
                 ": the output must hold world_size times the input's elements, same dtype");
        auto w = work(c10d::OpType::_ALLGATHER_BASE, "ddpc:all_gather_into_tensor", { out }, { in },
                      o.timeout);
        std::lock_guard<std::mutex> g(issue_mu_);
        Buf bi = buf_of(w->in(in), what, true), bo = buf_of(w->out(out), what, true);
        ddpc_work *h = nullptr;
        w->issued(ddpc_allgather_async(comm_, bi.ptr, bo.ptr, bi.count, bi.dt, &h), h);
        return submit(w, what);
    }

    c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>> &outs,
                                                       std::vector<at::Tensor> &ins,
                                                       const c10d::AllgatherOptions &o) override {
        const char *what = "all_gather_coalesced";
        if (outs.size() != static_cast<size_t>(getSize()))
            fail(std::string(what) + ": expects world_size output lists");
        for (auto &l : outs)
            if (l.size() != ins.size())
                fail(std::string(what) + ": each output list must match the inputs");
        std::vector<at::Tensor> all;
        for (auto &l : outs) all.insert(all.end(), l.begin(), l.end());
        auto w = work(c10d::OpType::ALLGATHER_COALESCED, "ddpc:all_gather", all, ins, o.timeout);
        std::lock_guard<std::mutex> g(issue_mu_);
        for (size_t i = 0; i < ins.size(); i++) {
            std::vector<at::Tensor> col;
            for (auto &l : outs) col.push_back(l[i]);
            check_cpu(ins[i], what);
            check_list(col, ins[i], what);
            gather_into(*w, col, ins[i], what);
        }
        return submit(w, what);
    }

    c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outs,
                                          std::vector<at::Tensor> &ins,
                                          const c10d::GatherOptions &o) override {
        const char *what = "gather";
        check_one(ins, what);
        int r = root(o.rootRank, what);
        std::vector<at::Tensor> list;
        if (getRank() == r) {
            if (outs.size() != 1) fail(std::string(what) + ": the root expects one output list");
            check_list(outs[0], ins[0], what);
            list = outs[0];
        } else if (!outs.empty() && !outs[0].empty()) {
            fail(std::string(what) + ": only the root gives an output list");
        }
        auto w = work(c10d::OpType::GATHER, "ddpc:gather", list, ins, o.timeout);
        std::lock_guard<std::mutex> g(issue_mu_);
        Buf bi = buf_of(w->in(ins[0]), what, true);
        void *dst = nullptr;
        if (getRank() == r) {
            at::Tensor flat = at::empty({ getSize() * ins[0].numel() }, ins[0].options());
            w->keep(flat);
            w->then([list, flat]() mutable { unpack(list, flat); });
            dst = buf_of(flat, what, true).ptr;
        }
        ddpc_work *h = nullptr;
        w->issued(ddpc_gather_async(comm_, bi.ptr, dst, bi.count, bi.dt, r, &h), h);
        return submit(w, what);
    }

    c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &outs,
                                           std::vector<std::vector<at::Tensor>> &ins,
                                           const c10d::ScatterOptions &o) override {
        const char *what = "scatter";
        check_one(outs, what);
        int r = root(o.rootRank, what);
        auto w = work(c10d::OpType::SCATTER, "ddpc:scatter", outs,
                      getRank() == r && !ins.empty() ? ins[0] : outs, o.timeout);
        std::lock_guard<std::mutex> g(issue_mu_);
        void *src = nullptr;
        if (getRank() == r) {
            if (ins.size() != 1) fail(std::string(what) + ": the root expects one input list");
            check_list(ins[0], outs[0], what);
            at::Tensor flat = pack(ins[0]);
            w->keep(flat);
            src = buf_of(flat, what, true).ptr;
        } else if (!ins.empty() && !ins[0].empty()) {
            fail(std::string(what) + ": only the root gives an input list");
        }
        Buf bo = buf_of(w->out(outs[0]), what, true);
        ddpc_work *h = nullptr;
        w->issued(ddpc_scatter_async(comm_, src, bo.ptr, bo.count, bo.dt, r, &h), h);
        return submit(w, what);
    }

    c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &outs,
                                                  std::vector<std::vector<at::Tensor>> &ins,
                                                  const c10d::ReduceScatterOptions &o) override {
        const char *what = "reduce_scatter";
        check_one(outs, what);
        if (ins.size() != 1) fail(std::string(what) + ": expects one input list");
        check_list(ins[0], outs[0], what);
        ddpc_op op = op_of(o.reduceOp, outs[0].scalar_type(), what);
        auto w = work(c10d::OpType::REDUCE_SCATTER, "ddpc:reduce_scatter", outs, ins[0], o.timeout);
        std::lock_guard<std::mutex> g(issue_mu_);
        at::Tensor flat = pack(ins[0]);
        w->keep(flat);
        Buf bi = buf_of(flat, what), bo = buf_of(w->out(outs[0]), what);
        ddpc_work *h = nullptr;
        w->issued(ddpc_reduce_scatter_async(comm_, bi.ptr, bo.ptr, bo.count, bo.dt, op, &h), h);
        return submit(w, what);
    }

    c10::intrusive_ptr<c10d::Work>
    _reduce_scatter_base(at::Tensor &out, at::Tensor &in,
                         const c10d::ReduceScatterOptions &o) override {
        const char *what = "_reduce_scatter_base";
        check_cpu(in, what);
        check_cpu(out, what);
        if (in.numel() != out.numel() * getSize() || out.scalar_type() != in.scalar_type())
            fail(std::string(what) +
                 ": the input must hold world_size times the output's elements, same dtype");
        ddpc_op op = op_of(o.reduceOp, out.scalar_type(), what);
        auto w = work(c10d::OpType::_REDUCE_SCATTER_BASE, "ddpc:reduce_scatter_tensor", { out },
                      { in }, o.timeout);
        std::lock_guard<std::mutex> g(issue_mu_);
        Buf bi = buf_of(w->in(in), what), bo = buf_of(w->out(out), what);
        ddpc_work *h = nullptr;
        w->issued(ddpc_reduce_scatter_async(comm_, bi.ptr, bo.ptr, bo.count, bo.dt, op, &h), h);
        return submit(w, what);
    }

#if DDPC_TORCH2
    /* The tensor forms, coalesced (torch 2.x's _coalescing_manager): one
     * all-gather per pair, issued back to back, completed as one work. */
    c10::intrusive_ptr<c10d::Work>
    allgather_into_tensor_coalesced(std::vector<at::Tensor> &outs, std::vector<at::Tensor> &ins,
                                    const c10d::AllgatherOptions &o) override {
        const char *what = "all_gather_into_tensor_coalesced";
        pairs_check(outs, ins, getSize(), 1, what);
        auto w = work(c10d::OpType::COALESCED, "ddpc:all_gather_into_tensor_coalesced", outs, ins,
                      o.timeout);
        std::lock_guard<std::mutex> g(issue_mu_);
        for (size_t i = 0; i < ins.size(); i++) {
            Buf bi = buf_of(w->in(ins[i]), what, true), bo = buf_of(w->out(outs[i]), what, true);
            ddpc_work *h = nullptr;
            w->issued(ddpc_allgather_async(comm_, bi.ptr, bo.ptr, bi.count, bi.dt, &h), h);
        }
        return submit(w, what);
    }

    c10::intrusive_ptr<c10d::Work>
    reduce_scatter_tensor_coalesced(std::vector<at::Tensor> &outs, std::vector<at::Tensor> &ins,
                                    const c10d::ReduceScatterOptions &o) override {
        const char *what = "reduce_scatter_tensor_coalesced";
        pairs_check(outs, ins, 1, getSize(), what);
        auto w = work(c10d::OpType::COALESCED, "ddpc:reduce_scatter_tensor_coalesced", outs, ins,
                      o.timeout);
        std::lock_guard<std::mutex> g(issue_mu_);
        for (size_t i = 0; i < ins.size(); i++) {
            ddpc_op op = op_of(o.reduceOp, outs[i].scalar_type(), what);
            Buf bi = buf_of(w->in(ins[i]), what), bo = buf_of(w->out(outs[i]), what);
            ddpc_work *h = nullptr;
            w->issued(ddpc_reduce_scatter_async(comm_, bi.ptr, bo.ptr, bo.count, bo.dt, op, &h), h);
        }
        return submit(w, what);
    }
#endif

    c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &out, at::Tensor &in,
                                                 std::vector<int64_t> &outSplits,
                                                 std::vector<int64_t> &inSplits,
                                                 const c10d::AllToAllOptions &o) override {
        const char *what = "all_to_all_single";
        check_cpu(in, what);
        check_cpu(out, what);
        if (out.scalar_type() != in.scalar_type())
            fail(std::string(what) + ": input and output dtypes differ");
        const int n = getSize();
        auto w = work(c10d::OpType::ALLTOALL_BASE, "ddpc:all_to_all", { out }, { in }, o.timeout);
        std::lock_guard<std::mutex> g(issue_mu_);
        Buf bi = buf_of(w->in(in), what, true), bo = buf_of(w->out(out), what, true);
        const int64_t in_row = in.numel() / std::max<int64_t>(in.size(0), 1);
        const int64_t out_row = out.numel() / std::max<int64_t>(out.size(0), 1);
        if (outSplits.empty() && inSplits.empty()) {
            if (in.numel() != out.numel() || in.size(0) % n)
                fail(std::string(what) + ": equal splits need the same numel and a first dimension "
                                         "divisible by world_size");
            ddpc_work *h = nullptr;
            w->issued(ddpc_alltoall_async(comm_, bi.ptr, bo.ptr, bi.count / n, bi.dt, &h), h);
            return submit(w, what);
        }
        std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
        const int64_t k = bi.count / std::max<int64_t>(in.numel(), 1); /* 2 for complex, else 1 */
        splits(inSplits, in.size(0), in_row * (in.numel() ? k : 1), sc, sd, what);
        splits(outSplits, out.size(0), out_row * (in.numel() ? k : 1), rc, rd, what);
        ddpc_work *h = nullptr;
        w->issued(ddpc_alltoallv_async(comm_, bi.ptr, sc.data(), sd.data(), bo.ptr, rc.data(),
                                       rd.data(), bi.dt, &h),
                  h);
        return submit(w, what);
    }

    c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outs,
                                            std::vector<at::Tensor> &ins,
                                            const c10d::AllToAllOptions &o) override {
        const char *what = "all_to_all";
        const int n = getSize();
        if (static_cast<int>(outs.size()) != n || static_cast<int>(ins.size()) != n)
            fail(std::string(what) + ": expects world_size input and output tensors");
        for (int i = 0; i < n; i++) {
            check_cpu(ins[i], what);
            check_cpu(outs[i], what);
            if (ins[i].scalar_type() != ins[0].scalar_type() ||
                outs[i].scalar_type() != ins[0].scalar_type())
                fail(std::string(what) + ": all tensors must have one dtype");
        }
        auto w = work(c10d::OpType::ALLTOALL, "ddpc:all_to_all", outs, ins, o.timeout);
        std::lock_guard<std::mutex> g(issue_mu_);
        at::Tensor src = pack(ins);
        std::vector<at::Tensor> flat_out;
        for (auto &t : outs) flat_out.push_back(t.reshape({ -1 }));
        at::Tensor dst = at::empty({ at::cat(flat_out).numel() }, outs[0].options());
        w->keep(src);
        w->keep(dst);
        w->then([outs, dst]() mutable { unpack(outs, dst); });
        const size_t k = ins[0].is_complex() ? 2 : 1;
        std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
        size_t sa = 0, ra = 0;
        for (int i = 0; i < n; i++) {
            sc[i] = ins[i].numel() * k, sd[i] = sa, sa += sc[i];
            rc[i] = outs[i].numel() * k, rd[i] = ra, ra += rc[i];
        }
        Buf bi = buf_of(src, what, true), bo = buf_of(dst, what, true);
        ddpc_work *h = nullptr;
        w->issued(ddpc_alltoallv_async(comm_, bi.ptr, sc.data(), sd.data(), bo.ptr, rc.data(),
                                       rd.data(), bi.dt, &h),
                  h);
        return submit(w, what);
    }

    c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &ts, int dst, int tag) override {
        const char *what = "send";
        check_one(ts, what);
        auto w = work(c10d::OpType::SEND, "ddpc:send", ts, ts);
        std::lock_guard<std::mutex> g(issue_mu_);
        Buf b = buf_of(w->in(ts[0]), what, true);
        ddpc_work *h = nullptr;
        w->issued(ddpc_send_tagged_async(comm_, b.ptr, b.count, b.dt, peer(dst, what), tag, &h), h);
        return submit(w, what);
    }

    c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &ts, int src, int tag) override {
        const char *what = "recv";
        check_one(ts, what);
        auto w = work(c10d::OpType::RECV, "ddpc:recv", ts, ts);
        std::lock_guard<std::mutex> g(issue_mu_);
        Buf b = buf_of(w->out(ts[0]), what, true);
        w->set_source(peer(src, what));
        ddpc_work *h = nullptr;
        w->issued(ddpc_recv_tagged_async(comm_, b.ptr, b.count, b.dt, src, tag, &h), h);
        return submit(w, what);
    }

    c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &ts, int tag) override {
        const char *what = "recv (any source)";
        check_one(ts, what);
        auto w = work(c10d::OpType::RECVANYSOURCE, "ddpc:recvAnySource", ts, ts);
        std::lock_guard<std::mutex> g(issue_mu_);
        Buf b = buf_of(w->out(ts[0]), what, true);
        w->source_from_receive();
        ddpc_work *h = nullptr;
        w->issued(ddpc_recv_tagged_async(comm_, b.ptr, b.count, b.dt, DDPC_ANY_SOURCE, tag, &h), h);
        return submit(w, what);
    }

    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &o) override {
        auto w = work(c10d::OpType::BARRIER, "ddpc:barrier", {}, {}, o.timeout);
        std::lock_guard<std::mutex> g(issue_mu_);
        ddpc_work *h = nullptr;
        w->issued(ddpc_barrier_async(comm_, &h), h);
        return submit(w, "barrier");
    }

    /* ddpc numbers every collective itself; torch's group-wide sequence
   * number (used by its debug wrapper) starts at 0 on every rank. */
    void setSequenceNumberForGroup() override { seq_ = 0; }
    uint64_t getSequenceNumberForGroup() override { return seq_; }

  private:
    /* Finishes the works still queued, stops the completion thread, then
   * destroys the communicator (which says goodbye to the peers). Once. */
    void close() {
        stop_completion();
        std::lock_guard<std::mutex> g(issue_mu_);
        ddpc_comm_destroy(comm_);
        comm_ = nullptr;
    }
    void stop_completion() {
        {
            std::lock_guard<std::mutex> g(completion_->mu);
            completion_->stop = true;
        }
        completion_->cv.notify_all();
        if (thread_.joinable()) thread_.join();
        completion_->callbacks.shutdown();
    }
    static std::mutex &live_mu() {
        static std::mutex mu;
        return mu;
    }
    static std::set<ProcessGroupDDPC *> &live() {
        static std::set<ProcessGroupDDPC *> *groups =
            new std::set<ProcessGroupDDPC *>; /* never freed: used at exit */
        return *groups;
    }

    /* A work for a call: outs are its result(), ins what the profiler shows
   * (under the names gloo uses, which torch's tests look for). */
    c10::intrusive_ptr<WorkDDPC> work(c10d::OpType type, const char *title,
                                      std::vector<at::Tensor> outs,
                                      const std::vector<at::Tensor> &ins,
                                      std::chrono::milliseconds limit = c10d::kUnsetTimeout) {
        if (!comm_) fail(std::string(title) + ": the process group was shut down");
        seq_++;
        const double limit_s = limit.count() > 0 ? limit.count() / 1000.0 : -1.0;
        ddpc_comm *comm = comm_;
        return c10::make_intrusive<WorkDDPC>(getRank(), type, title, std::move(outs), ins,
                                             completion_, limit_s,
                                             [comm] { ddpc_comm_abort(comm); });
    }

    /* Hands an issued work to the completion thread, unless sync: the
     * caller then finishes it itself (finish_now) before returning it, and
     * the completion thread would only find it claimed. */
    c10::intrusive_ptr<c10d::Work> submit(const c10::intrusive_ptr<WorkDDPC> &w, const char *what,
                                          bool sync = false) {
        if (w->refused_outright()) fail(std::string(what) + ": " + w->error());
        if (sync) return w;
        std::lock_guard<std::mutex> g(completion_->mu);
        completion_->queue.push_back(w);
        return w;
    }

    /* The completion thread: completes works in issue order (see Completion). */
    void loop() {
        Completion &c = *completion_;
        std::unique_lock<std::mutex> g(c.mu);
        for (;;) {
            c.cv.wait_for(g, std::chrono::milliseconds(20), [&] { return c.stop || c.urgent; });
            c.urgent = false;
            while (!c.queue.empty()) {
                c10::intrusive_ptr<WorkDDPC> w = c.queue.front();
                c.queue.pop_front();
                g.unlock();
                if (!w->claimed()) { /* its waiter finished it (a synchronous call): nothing to do */
                    w->settle(-1);
                    c.callbacks.post([w] { w->complete(); });
                }
                w.reset();
                g.lock();
            }
            if (c.stop) return;
        }
    }

    int root(int64_t r, const char *what) const {
        if (r < 0 || r >= getSize())
            fail(std::string(what) + ": root " + std::to_string(r) +
                 " is not a rank of this group (size " + std::to_string(getSize()) + ")");
        return static_cast<int>(r);
    }
    int peer(int r, const char *what) const {
        if (r < 0 || r >= getSize() || r == getRank())
            fail(std::string(what) + ": peer " + std::to_string(r) +
                 " is not another rank of this group (size " + std::to_string(getSize()) + ")");
        return r;
    }

    /* Pairs (outs[i], ins[i]) of CPU tensors of one dtype each, where
     * outs[i] holds out_k/in_k times ins[i]'s elements. */
    static void pairs_check(const std::vector<at::Tensor> &outs, const std::vector<at::Tensor> &ins,
                            int out_k, int in_k, const char *what) {
        if (outs.size() != ins.size())
            fail(std::string(what) + ": " + std::to_string(outs.size()) + " outputs for " +
                 std::to_string(ins.size()) + " inputs");
        for (size_t i = 0; i < ins.size(); i++) {
            check_cpu(ins[i], what);
            check_cpu(outs[i], what);
            if (outs[i].numel() * in_k != ins[i].numel() * out_k ||
                outs[i].scalar_type() != ins[i].scalar_type())
                fail(std::string(what) + ": pair " + std::to_string(i) +
                     ": sizes or dtypes do not match (the gathered side holds world_size times "
                     "the other's elements)");
        }
    }

    /* A list of world_size tensors shaped and typed like t. */
    void check_list(const std::vector<at::Tensor> &list, const at::Tensor &t,
                    const char *what) const {
        if (static_cast<int>(list.size()) != getSize())
            fail(std::string(what) + ": the list must hold world_size (" +
                 std::to_string(getSize()) + ") tensors, got " + std::to_string(list.size()));
        for (auto &x : list) {
            check_cpu(x, what);
            if (x.numel() != t.numel() || x.scalar_type() != t.scalar_type())
                fail(std::string(what) +
                     ": every tensor in the list must match the input's size and dtype");
        }
    }

    /* all_gather of in into list: through one flat buffer. */
    void gather_into(WorkDDPC &w, const std::vector<at::Tensor> &list, const at::Tensor &in,
                     const char *what) {
        Buf bi = buf_of(w.in(in), what, true);
        at::Tensor flat = at::empty({ getSize() * in.numel() }, in.options());
        w.keep(flat);
        w.then([list, flat]() mutable { unpack(list, flat); });
        ddpc_work *h = nullptr;
        w.issued(
            ddpc_allgather_async(comm_, bi.ptr, buf_of(flat, what, true).ptr, bi.count, bi.dt, &h),
            h);
    }

    static at::Tensor pack(const std::vector<at::Tensor> &list) {
        std::vector<at::Tensor> flat;
        for (auto &t : list) flat.push_back(t.reshape({ -1 }));
        return at::cat(flat);
    }
    static void unpack(const std::vector<at::Tensor> &list, const at::Tensor &flat) {
        int64_t at = 0;
        for (auto &t : list) {
            t.copy_(flat.narrow(0, at, t.numel()).view(t.sizes()));
            at += t.numel();
        }
    }

    /* Counts and offsets, in elements, from torch's split sizes (rows). */
    void splits(const std::vector<int64_t> &s, int64_t rows, int64_t row,
                std::vector<size_t> &count, std::vector<size_t> &disp, const char *what) const {
        const int n = getSize();
        if (!s.empty() && static_cast<int>(s.size()) != n)
            fail(std::string(what) + ": split sizes must have world_size entries");
        if (s.empty() && rows % n)
            fail(std::string(what) + ": the first dimension is not divisible by world_size");
        int64_t sum = 0;
        for (int i = 0; i < n; i++) {
            int64_t k = s.empty() ? rows / n : s[i];
            if (k < 0) fail(std::string(what) + ": a split size is negative");
            count[i] = static_cast<size_t>(k * row);
            disp[i] = static_cast<size_t>(sum * row);
            sum += k;
        }
        if (sum != rows)
            fail(std::string(what) + ": split sizes do not add up to the first dimension");
    }

    ddpc_comm *comm_ = nullptr;
    std::chrono::milliseconds timeout_;
    std::mutex issue_mu_;            /* one caller at a time issues, so calls keep their order */
    std::atomic<uint64_t> seq_{ 0 }; /* calls issued, torch's sequence number */
    std::shared_ptr<Completion> completion_;
    std::thread thread_;
};

static c10::intrusive_ptr<BackendBase> create(const c10::intrusive_ptr<c10d::Store> &store,
                                              int rank, int size,
                                              std::chrono::milliseconds timeout) {
    return c10::make_intrusive<ProcessGroupDDPC>(store, rank, size, timeout);
}

} // namespace ddpc_torch

PYBIND11_MODULE(_C, m) {
    namespace py = pybind11;
    py::module::import("torch.distributed");
    py::class_<ddpc_torch::ProcessGroupDDPC, ddpc_torch::BackendBase,
               c10::intrusive_ptr<ddpc_torch::ProcessGroupDDPC>>(m, "ProcessGroupDDPC");
    m.def(
        "create_process_group",
        [](const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
           std::chrono::milliseconds timeout) {
            return ddpc_torch::create(store, rank, size, timeout);
        },
        py::arg("store"), py::arg("rank"), py::arg("world_size"), py::arg("timeout"),
        py::call_guard<py::gil_scoped_release>(),
        "A ddpc process group of world_size ranks meeting through store (torch's c10d Store).");
    m.def("built_torch_version", &ddpc_torch::built_torch_version,
          "The torch version this module was compiled against.");
    m.def(
        "_serve_host_device",
        [](const std::string &name) {
            if (name != "privateuseone")
                throw std::invalid_argument(
                    "_serve_host_device: only 'privateuseone' is known, got '" + name + "'");
            ddpc_torch::serve_privateuse1 = true;
        },
        "Serve PrivateUse1 tensors as host memory (ddpc_torch_npu calls this).");
    m.def("_stop_completion_threads", &ddpc_torch::ProcessGroupDDPC::stop_all_completion_threads,
          py::call_guard<py::gil_scoped_release>(),
          "At exit: every live group's completion thread finishes its queue and stops.");
}
