/*
 * collectives.cpp — each torch.distributed call of ProcessGroupDDPC as
 * ddpc's async collectives (a synchronous all_reduce or broadcast: its
 * blocking one, see here()): the checks on its tensors, the staging buffers,
 * the calls issued under the issue lock, the work handed on (submit).
 */
#include "ProcessGroupDDPC.h"

#include <algorithm>

#include "convert.h"

namespace ddpc_torch {

c10::intrusive_ptr<c10d::Work> ProcessGroupDDPC::broadcast(std::vector<at::Tensor> &ts,
                                                           const c10d::BroadcastOptions &o) {
    const char *what = "broadcast";
    check_one(ts, what);
    auto w = work(c10d::OpType::BROADCAST, "ddpc:broadcast", ts, ts, o.timeout);
    {
        std::lock_guard<std::mutex> g(issue_mu_);
        Buf b = buf_of(w->inout(ts[0]), what, true);
        if (here(o, *w)) {
            w->ran(ddpc_broadcast(comm_, b.ptr, b.ptr, b.count, b.dt, root(o.rootRank, what)));
        } else {
            ddpc_work *h = nullptr;
            w->issued(ddpc_broadcast_async(comm_, b.ptr, b.ptr, b.count, b.dt,
                                           root(o.rootRank, what), &h),
                      h);
            submit(w, what, is_sync(o));
        }
    }
    if (is_sync(o)) w->finish_now();
    return w;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDDPC::allreduce(std::vector<at::Tensor> &ts,
                                                           const c10d::AllreduceOptions &o) {
    const char *what = "all_reduce";
    check_one(ts, what);
    ddpc_op op = op_of(o.reduceOp, ts[0].scalar_type(), what);
    auto w = work(c10d::OpType::ALLREDUCE, "ddpc:all_reduce", ts, ts, o.timeout);
    {
        std::lock_guard<std::mutex> g(issue_mu_);
        Buf b = buf_of(w->inout(ts[0]), what);
        if (here(o, *w)) {
            w->ran(ddpc_allreduce(comm_, b.ptr, b.ptr, b.count, b.dt, op));
        } else {
            ddpc_work *h = nullptr;
            w->issued(ddpc_allreduce_async(comm_, b.ptr, b.ptr, b.count, b.dt, op, &h), h);
            submit(w, what, is_sync(o));
        }
    }
    if (is_sync(o)) w->finish_now(); /* outside the issue lock: others may issue meanwhile */
    return w;
}

/* One allreduce of the tensors packed end to end. */
c10::intrusive_ptr<c10d::Work>
ProcessGroupDDPC::allreduce_coalesced(std::vector<at::Tensor> &ts,
                                      const c10d::AllreduceCoalescedOptions &o) {
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

c10::intrusive_ptr<c10d::Work> ProcessGroupDDPC::reduce(std::vector<at::Tensor> &ts,
                                                        const c10d::ReduceOptions &o) {
    const char *what = "reduce";
    check_one(ts, what);
    ddpc_op op = op_of(o.reduceOp, ts[0].scalar_type(), what);
    auto w = work(c10d::OpType::REDUCE, "ddpc:reduce", ts, ts, o.timeout);
    std::lock_guard<std::mutex> g(issue_mu_);
    Buf b = buf_of(w->inout(ts[0]), what);
    ddpc_work *h = nullptr;
    w->issued(ddpc_reduce_async(comm_, b.ptr, b.ptr, b.count, b.dt, op, root(o.rootRank, what), &h),
              h);
    return submit(w, what);
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupDDPC::allgather(std::vector<std::vector<at::Tensor>> &outs,
                            std::vector<at::Tensor> &ins, const c10d::AllgatherOptions &o) {
    const char *what = "all_gather";
    check_one(ins, what);
    if (outs.size() != 1) fail(std::string(what) + ": expects one output list");
    check_list(outs[0], ins[0], what);
    auto w = work(c10d::OpType::ALLGATHER, "ddpc:all_gather", outs[0], ins, o.timeout);
    std::lock_guard<std::mutex> g(issue_mu_);
    gather_into(*w, outs[0], ins[0], what);
    return submit(w, what);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDDPC::_allgather_base(at::Tensor &out, at::Tensor &in,
                                                                 const c10d::AllgatherOptions &o) {
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

c10::intrusive_ptr<c10d::Work>
ProcessGroupDDPC::allgather_coalesced(std::vector<std::vector<at::Tensor>> &outs,
                                      std::vector<at::Tensor> &ins,
                                      const c10d::AllgatherOptions &o) {
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

c10::intrusive_ptr<c10d::Work> ProcessGroupDDPC::gather(std::vector<std::vector<at::Tensor>> &outs,
                                                        std::vector<at::Tensor> &ins,
                                                        const c10d::GatherOptions &o) {
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

c10::intrusive_ptr<c10d::Work> ProcessGroupDDPC::scatter(std::vector<at::Tensor> &outs,
                                                         std::vector<std::vector<at::Tensor>> &ins,
                                                         const c10d::ScatterOptions &o) {
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

c10::intrusive_ptr<c10d::Work>
ProcessGroupDDPC::reduce_scatter(std::vector<at::Tensor> &outs,
                                 std::vector<std::vector<at::Tensor>> &ins,
                                 const c10d::ReduceScatterOptions &o) {
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
ProcessGroupDDPC::_reduce_scatter_base(at::Tensor &out, at::Tensor &in,
                                       const c10d::ReduceScatterOptions &o) {
    const char *what = "_reduce_scatter_base";
    check_cpu(in, what);
    check_cpu(out, what);
    if (in.numel() != out.numel() * getSize() || out.scalar_type() != in.scalar_type())
        fail(std::string(what) +
             ": the input must hold world_size times the output's elements, same dtype");
    ddpc_op op = op_of(o.reduceOp, out.scalar_type(), what);
    auto w = work(c10d::OpType::_REDUCE_SCATTER_BASE, "ddpc:reduce_scatter_tensor", { out }, { in },
                  o.timeout);
    std::lock_guard<std::mutex> g(issue_mu_);
    Buf bi = buf_of(w->in(in), what), bo = buf_of(w->out(out), what);
    ddpc_work *h = nullptr;
    w->issued(ddpc_reduce_scatter_async(comm_, bi.ptr, bo.ptr, bo.count, bo.dt, op, &h), h);
    return submit(w, what);
}

#if DDPC_TORCH2
/* The tensor forms, coalesced (torch 2.x's _coalescing_manager): one
 * all-gather per pair, issued back to back, completed as one work. */
c10::intrusive_ptr<c10d::Work> ProcessGroupDDPC::allgather_into_tensor_coalesced(
    std::vector<at::Tensor> &outs, std::vector<at::Tensor> &ins, const c10d::AllgatherOptions &o) {
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
ProcessGroupDDPC::reduce_scatter_tensor_coalesced(std::vector<at::Tensor> &outs,
                                                  std::vector<at::Tensor> &ins,
                                                  const c10d::ReduceScatterOptions &o) {
    const char *what = "reduce_scatter_tensor_coalesced";
    pairs_check(outs, ins, 1, getSize(), what);
    auto w =
        work(c10d::OpType::COALESCED, "ddpc:reduce_scatter_tensor_coalesced", outs, ins, o.timeout);
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

c10::intrusive_ptr<c10d::Work> ProcessGroupDDPC::alltoall_base(at::Tensor &out, at::Tensor &in,
                                                               std::vector<int64_t> &outSplits,
                                                               std::vector<int64_t> &inSplits,
                                                               const c10d::AllToAllOptions &o) {
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

c10::intrusive_ptr<c10d::Work> ProcessGroupDDPC::alltoall(std::vector<at::Tensor> &outs,
                                                          std::vector<at::Tensor> &ins,
                                                          const c10d::AllToAllOptions &o) {
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

c10::intrusive_ptr<c10d::Work> ProcessGroupDDPC::send(std::vector<at::Tensor> &ts, int dst,
                                                      int tag) {
    const char *what = "send";
    check_one(ts, what);
    auto w = work(c10d::OpType::SEND, "ddpc:send", ts, ts);
    std::lock_guard<std::mutex> g(issue_mu_);
    Buf b = buf_of(w->in(ts[0]), what, true);
    ddpc_work *h = nullptr;
    w->issued(ddpc_send_tagged_async(comm_, b.ptr, b.count, b.dt, peer(dst, what), tag, &h), h);
    return submit(w, what);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDDPC::recv(std::vector<at::Tensor> &ts, int src,
                                                      int tag) {
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

c10::intrusive_ptr<c10d::Work> ProcessGroupDDPC::recvAnysource(std::vector<at::Tensor> &ts,
                                                               int tag) {
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

c10::intrusive_ptr<c10d::Work> ProcessGroupDDPC::barrier(const c10d::BarrierOptions &o) {
    auto w = work(c10d::OpType::BARRIER, "ddpc:barrier", {}, {}, o.timeout);
    std::lock_guard<std::mutex> g(issue_mu_);
    ddpc_work *h = nullptr;
    w->issued(ddpc_barrier_async(comm_, &h), h);
    return submit(w, "barrier");
}

int ProcessGroupDDPC::root(int64_t r, const char *what) const {
    if (r < 0 || r >= getSize())
        fail(std::string(what) + ": root " + std::to_string(r) +
             " is not a rank of this group (size " + std::to_string(getSize()) + ")");
    return static_cast<int>(r);
}

int ProcessGroupDDPC::peer(int r, const char *what) const {
    if (r < 0 || r >= getSize() || r == getRank())
        fail(std::string(what) + ": peer " + std::to_string(r) +
             " is not another rank of this group (size " + std::to_string(getSize()) + ")");
    return r;
}

/* Pairs (outs[i], ins[i]) of CPU tensors of one dtype each, where
 * outs[i] holds out_k/in_k times ins[i]'s elements. */
void ProcessGroupDDPC::pairs_check(const std::vector<at::Tensor> &outs,
                                   const std::vector<at::Tensor> &ins, int out_k, int in_k,
                                   const char *what) {
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
void ProcessGroupDDPC::check_list(const std::vector<at::Tensor> &list, const at::Tensor &t,
                                  const char *what) const {
    if (static_cast<int>(list.size()) != getSize())
        fail(std::string(what) + ": the list must hold world_size (" + std::to_string(getSize()) +
             ") tensors, got " + std::to_string(list.size()));
    for (auto &x : list) {
        check_cpu(x, what);
        if (x.numel() != t.numel() || x.scalar_type() != t.scalar_type())
            fail(std::string(what) +
                 ": every tensor in the list must match the input's size and dtype");
    }
}

/* all_gather of in into list: through one flat buffer. */
void ProcessGroupDDPC::gather_into(WorkDDPC &w, const std::vector<at::Tensor> &list,
                                   const at::Tensor &in, const char *what) {
    Buf bi = buf_of(w.in(in), what, true);
    at::Tensor flat = at::empty({ getSize() * in.numel() }, in.options());
    w.keep(flat);
    w.then([list, flat]() mutable { unpack(list, flat); });
    ddpc_work *h = nullptr;
    w.issued(ddpc_allgather_async(comm_, bi.ptr, buf_of(flat, what, true).ptr, bi.count, bi.dt, &h),
             h);
}

/* Counts and offsets, in elements, from torch's split sizes (rows). */
void ProcessGroupDDPC::splits(const std::vector<int64_t> &s, int64_t rows, int64_t row,
                              std::vector<size_t> &count, std::vector<size_t> &disp,
                              const char *what) const {
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
    if (sum != rows) fail(std::string(what) + ": split sizes do not add up to the first dimension");
}

} // namespace ddpc_torch
