/*
 * work.cpp — completing a torch call's ddpc works: waiting with the
 * call's timeout, the copy-outs, the future (work.h says who runs what).
 */
#include "work.h"

#include <cmath>
#include <exception>
#include <stdexcept>

#include "convert.h"

namespace ddpc_torch {

std::string call_error(ddpc_status s) {
    std::string err = ddpc_last_error();
    if (err.empty()) err = ddpc_status_str(s);
    if (s == DDPC_ERR_TIMEOUT) err = "Timed out (the process group's timeout): " + err;
    return err;
}

void Callbacks::post(std::function<void()> job) {
    std::lock_guard<std::mutex> g(mu);
    jobs.push_back(std::move(job));
    if (idle == 0 && static_cast<int>(threads.size()) < kMaxThreads)
        threads.emplace_back([this] { run(); });
    else
        cv.notify_one();
}

void Callbacks::shutdown() {
    {
        std::lock_guard<std::mutex> g(mu);
        stop = true;
    }
    cv.notify_all();
    for (auto &t : threads)
        if (t.joinable()) t.join();
    threads.clear();
}

void Callbacks::run() {
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

WorkDDPC::~WorkDDPC() {
    for (ddpc_work *h : handles_) ddpc_work_destroy(h);
}

bool WorkDDPC::settle(double timeout_s) {
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
        if (s != DDPC_OK && err.empty()) err = call_error(s);
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

void WorkDDPC::complete() {
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

bool WorkDDPC::wait(std::chrono::milliseconds timeout) {
    /* claimed: whoever claimed it calls finish(), which Work::wait waits for */
    if (!claimed_ && !settle(timeout == kNoTimeout ? -1.0 : timeout.count() / 1000.0))
        fail("Operation timed out after " + std::to_string(timeout.count()) +
             " ms (still running)");
    complete();
    return Work::wait(kNoTimeout);
}

bool WorkDDPC::isCompleted() {
    if (settle(0)) complete();
    if (!claimed_) completion_->wake(); /* a caller polling it: someone must run it */
    return Work::isCompleted();
}

c10::intrusive_ptr<c10::ivalue::Future> WorkDDPC::getFuture() {
    if (!claimed_) completion_->wake();
    std::lock_guard<std::mutex> g(future_mu_);
    if (!future_) {
        static const c10::TypePtr kTensors = c10::ListType::create(c10::TensorType::get());
        future_ = c10::make_intrusive<at::ivalue::Future>(kTensors);
        if (done_) settle_future(future_);
    }
    return future_;
}

void WorkDDPC::settle_future(const c10::intrusive_ptr<at::ivalue::Future> &f) {
    if (error_ptr_)
        f->setError(error_ptr_);
    else
        f->markCompleted(c10::IValue(outputs_));
}

} // namespace ddpc_torch
