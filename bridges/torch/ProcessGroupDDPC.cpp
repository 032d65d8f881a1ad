/*
 * ProcessGroupDDPC.cpp — the group's life (ProcessGroupDDPC.h says what
 * the backend does): the store as callbacks, the communicator made through
 * it, the completion thread, shutdown; and the Python module.
 */
#include "ProcessGroupDDPC.h"

#include <torch/csrc/utils/pybind.h>

#include <pybind11/chrono.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "convert.h"
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

ProcessGroupDDPC::ProcessGroupDDPC(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
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

void ProcessGroupDDPC::stop_all_completion_threads() {
    std::lock_guard<std::mutex> g(live_mu());
    for (ProcessGroupDDPC *pg : live()) pg->stop_completion();
}

ProcessGroupDDPC::~ProcessGroupDDPC() {
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

#if DDPC_TORCH2
void ProcessGroupDDPC::shutdown() {
    if (Py_IsInitialized() && PyGILState_Check()) {
        pybind11::gil_scoped_release nogil;
        close();
    } else {
        close();
    }
}

void ProcessGroupDDPC::abort() {
    if (comm_) ddpc_comm_abort(comm_);
}
#endif

void ProcessGroupDDPC::close() {
    stop_completion();
    std::lock_guard<std::mutex> g(issue_mu_);
    ddpc_comm_destroy(comm_);
    comm_ = nullptr;
}

void ProcessGroupDDPC::stop_completion() {
    {
        std::lock_guard<std::mutex> g(completion_->mu);
        completion_->stop = true;
    }
    completion_->cv.notify_all();
    if (thread_.joinable()) thread_.join();
    completion_->callbacks.shutdown();
}

std::mutex &ProcessGroupDDPC::live_mu() {
    static std::mutex mu;
    return mu;
}

std::set<ProcessGroupDDPC *> &ProcessGroupDDPC::live() {
    static std::set<ProcessGroupDDPC *> *groups =
        new std::set<ProcessGroupDDPC *>; /* never freed: used at exit */
    return *groups;
}

c10::intrusive_ptr<WorkDDPC> ProcessGroupDDPC::work(c10d::OpType type, const char *title,
                                                    std::vector<at::Tensor> outs,
                                                    const std::vector<at::Tensor> &ins,
                                                    std::chrono::milliseconds limit) {
    if (!comm_) fail(std::string(title) + ": the process group was shut down");
    seq_++;
    const double limit_s = limit.count() > 0 ? limit.count() / 1000.0 : -1.0;
    ddpc_comm *comm = comm_;
    return c10::make_intrusive<WorkDDPC>(getRank(), type, title, std::move(outs), ins, completion_,
                                         limit_s, [comm] { ddpc_comm_abort(comm); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDDPC::submit(const c10::intrusive_ptr<WorkDDPC> &w,
                                                        const char *what, bool sync) {
    if (w->refused_outright()) fail(std::string(what) + ": " + w->error());
    if (sync) return w;
    std::lock_guard<std::mutex> g(completion_->mu);
    completion_->queue.push_back(w);
    return w;
}

void ProcessGroupDDPC::loop() {
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
