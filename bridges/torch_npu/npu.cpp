/*
 * npu.cpp — the `npu` device of ddpc_torch_npu: torch's PrivateUse1 device
 * served by the host's memory and torch's own CPU kernels, so that programs
 * written for Ascend's torch_npu run on any Linux machine.
 *
 * A thin adapter to torch's out-of-tree device API, holding no algorithm of
 * its own (the collectives are libddpc's, through ddpc_torch):
 *   - an allocator: host memory (64-byte aligned, as torch's CPU allocator),
 *     counted for torch.npu.memory_allocated & co.;
 *   - a device guard and PrivateUse1 hooks: devices 0..n-1 are names, the
 *     current one is kept per thread; streams and events are synchronous;
 *   - a few operators registered for PrivateUse1 directly (empty, views,
 *     resize, copy between cpu and npu);
 *   - a boxed fallback for every other operator: each npu tensor argument
 *     is re-wrapped as a CPU tensor over the same memory (no copy), the CPU
 *     kernel runs, and what it returns is wrapped back as npu tensors, a
 *     view of an argument as a view of that argument. An operator without a
 *     CPU kernel is refused by name.
 * What it leaves to others: the Python side (ddpc_torch_npu/__init__.py)
 * renames PrivateUse1 to 'npu', registers torch.npu and the 'hccl' backend.
 */
#include <torch/extension.h>

#include <ATen/EmptyTensor.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/alloc_cpu.h>
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>
#include <torch/library.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr c10::DeviceType kNpu = c10::DeviceType::PrivateUse1;

/* ------------------------------------------------------------ devices */

std::atomic<int> g_count{ 1 };   /* set from Python: LOCAL_WORLD_SIZE or the env */
std::atomic<int> g_default{ 0 }; /* torch.npu.set_device's, for new threads */
thread_local int t_current = -1; /* this thread's, once set */

int current_device() { return t_current >= 0 ? t_current : g_default.load(); }

void check_index(int i) {
    TORCH_CHECK(
        i >= 0 && i < g_count.load(), "npu:", i, " does not exist: this process has ",
        g_count.load(),
        " npu device(s) (ddpc's CPU emulation: LOCAL_WORLD_SIZE, or DDPC_NPU_DEVICE_COUNT)");
}

void set_current(int i, bool everywhere) {
    check_index(i);
    t_current = i;
    if (everywhere) g_default = i;
}

c10::Device npu(int i) { return c10::Device(kNpu, static_cast<c10::DeviceIndex>(i)); }

/* ------------------------------------------------------------ memory */

/* Every npu allocation's bytes, for torch.npu.memory_allocated & co.
 * (per process: the devices share the host's memory). */
std::atomic<int64_t> g_allocated{ 0 }, g_peak{ 0 }, g_allocs{ 0 }, g_frees{ 0 };

void count_alloc(int64_t n) {
    int64_t now = g_allocated += n;
    int64_t peak = g_peak.load();
    while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {}
    g_allocs++;
}

void count_free(int64_t n) {
    g_allocated -= n;
    g_frees++;
}

/* A block is [64-byte header holding its size][data]: the data stays 64-byte
 * aligned as under torch's CPU allocator, and the size is there to count. */
constexpr size_t kHeader = 64;

void host_free(void *ctx) {
    auto *base = static_cast<char *>(ctx);
    count_free(static_cast<int64_t>(*reinterpret_cast<size_t *>(base)));
    c10::free_cpu(base);
}

struct HostAllocator final : c10::Allocator {
    c10::DataPtr allocate(size_t n) override {
        int dev = current_device();
        if (n == 0) return c10::DataPtr(nullptr, npu(dev));
        auto *base = static_cast<char *>(c10::alloc_cpu(n + kHeader));
        *reinterpret_cast<size_t *>(base) = n;
        count_alloc(static_cast<int64_t>(n));
        return { base + kHeader, base, &host_free, npu(dev) };
    }
    c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
    void copy_data(void *dst, const void *src, size_t n) const override {
        std::memcpy(dst, src, n);
    }
};

HostAllocator g_allocator;

/* Memory a CPU kernel allocated, adopted as an npu tensor's (counted). */
struct Adopted {
    c10::DataPtr cpu;
    size_t nbytes;
};

void adopted_free(void *ctx) {
    auto *a = static_cast<Adopted *>(ctx);
    count_free(static_cast<int64_t>(a->nbytes));
    delete a;
}

c10::DataPtr adopt(c10::DataPtr &&cpu, size_t nbytes, int dev) {
    if (!cpu.get()) return c10::DataPtr(nullptr, npu(dev));
    void *p = cpu.get();
    count_alloc(static_cast<int64_t>(nbytes));
    return { p, new Adopted{ std::move(cpu), nbytes }, &adopted_free, npu(dev) };
}

/* ------------------------------------------------------------ guard, hooks */

struct NpuGuard final : c10::impl::DeviceGuardImplInterface {
    c10::DeviceType type() const override { return kNpu; }
    c10::Device exchangeDevice(c10::Device d) const override {
        c10::Device old = getDevice();
        if (d.index() >= 0) set_current(d.index(), false);
        return old;
    }
    c10::Device getDevice() const override { return npu(current_device()); }
    void setDevice(c10::Device d) const override {
        if (d.index() >= 0) set_current(d.index(), false);
    }
    void uncheckedSetDevice(c10::Device d) const noexcept override {
        if (d.index() >= 0) t_current = d.index();
    }
    c10::Stream getStream(c10::Device d) const override {
        return c10::Stream(c10::Stream::DEFAULT, d);
    }
    c10::Stream getDefaultStream(c10::Device d) const override {
        return c10::Stream(c10::Stream::DEFAULT, d);
    }
    c10::Stream getNewStream(c10::Device d, int) const override {
        return c10::Stream(c10::Stream::DEFAULT, d);
    }
    c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override {
        return c10::Stream(c10::Stream::DEFAULT, d);
    }
    c10::Stream exchangeStream(c10::Stream s) const override {
        return c10::Stream(c10::Stream::DEFAULT, s.device());
    }
    c10::DeviceIndex deviceCount() const noexcept override {
        return static_cast<c10::DeviceIndex>(g_count.load());
    }
    /* Work is done when the call returns: an event is a mark, always reached. */
    void record(void **event, const c10::Stream &, const c10::DeviceIndex,
                const c10::EventFlag) const override {
        if (event) *event = reinterpret_cast<void *>(1);
    }
    void block(void *, const c10::Stream &) const override {}
    bool queryEvent(void *) const override { return true; }
    void destroyEvent(void *, const c10::DeviceIndex) const noexcept override {}
    bool queryStream(const c10::Stream &) const override { return true; }
    void synchronizeStream(const c10::Stream &) const override {}
    void synchronizeEvent(void *) const override {}
    void synchronizeDevice(const c10::DeviceIndex) const override {}
    void recordDataPtrOnStream(const c10::DataPtr &, const c10::Stream &) const override {}
    double elapsedTime(void *, void *, const c10::DeviceIndex) const override { return 0.0; }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, NpuGuard);

struct NpuHooks final : at::PrivateUse1HooksInterface {
    bool isBuilt() const override { return true; }
    bool isAvailable() const override { return true; }
    /* Random numbers on npu come from the CPU's generator: the kernels are CPU's */
    const at::Generator &getDefaultGenerator(c10::DeviceIndex) const override {
        return at::detail::getDefaultCPUGenerator();
    }
    at::Generator getNewGenerator(c10::DeviceIndex) const override {
        return at::detail::createCPUGenerator();
    }
    at::Device getDeviceFromPtr(void *) const override { return npu(current_device()); }
    bool isPinnedPtr(const void *) const override { return false; }
    c10::Allocator *getPinnedMemoryAllocator() const override { return c10::GetCPUAllocator(); }
    bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
    c10::DeviceIndex deviceCount() const override {
        return static_cast<c10::DeviceIndex>(g_count.load());
    }
    void setCurrentDevice(c10::DeviceIndex d) const override { set_current(d, false); }
    c10::DeviceIndex getCurrentDevice() const override {
        return static_cast<c10::DeviceIndex>(current_device());
    }
    c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
        auto old = getCurrentDevice();
        set_current(d, false);
        return old;
    }
    c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override {
        return exchangeDevice(d);
    }
    void resizePrivateUse1Bytes(const c10::Storage &s, size_t n) const override {
        c10::StorageImpl *impl = s.unsafeGetStorageImpl();
        c10::DataPtr fresh = g_allocator.allocate(n);
        size_t keep = std::min(n, impl->nbytes());
        if (keep) std::memcpy(fresh.get(), impl->data(), keep);
        impl->set_data_ptr_noswap(std::move(fresh));
        impl->set_nbytes(n);
    }
};

NpuHooks g_hooks;

/* DDP's reducer times its iterations with a device's Timer: host clocks. */
struct HostTimer final : c10d::Timer {
    explicit HostTimer(c10::Device) {}
    std::optional<int64_t> measureDifference(Event start, Event end) override {
        int64_t a = getTimeRef(start), b = getTimeRef(end);
        if (a == c10d::kUnsetTime || b == c10d::kUnsetTime || b < a) return std::nullopt;
        return b - a;
    }
};

} // namespace

namespace c10d {
C10_REGISTER_TYPED_CLASS(TimerRegistry, c10::kPrivateUse1, HostTimer);
}

namespace {

/* ------------------------------------------------------------ operators */

/* Makes a factory's tensor on the device it names (else the current one):
 * the allocator labels memory with the thread's current device. */
template <class Make>
at::Tensor on_device(std::optional<at::Layout> layout, std::optional<at::Device> device,
                     Make make) {
    TORCH_CHECK(!layout || *layout == at::kStrided,
                "npu (ddpc's CPU emulation): only strided tensors");
    int dev = device && device->has_index() ? device->index() : current_device();
    check_index(dev);
    int saved = t_current;
    t_current = dev;
    at::Tensor t = make();
    t_current = saved;
    return t;
}

at::Tensor npu_empty(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                     std::optional<at::Layout> layout, std::optional<at::Device> device,
                     std::optional<bool> pin, std::optional<at::MemoryFormat> fmt) {
    return on_device(layout, device, [&] {
        return at::detail::empty_generic(size, &g_allocator,
                                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                         c10::dtype_or_default(dtype), fmt);
    });
}

at::Tensor npu_empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                             std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                             std::optional<at::Device> device, std::optional<bool> pin) {
    return on_device(layout, device, [&] {
        return at::detail::empty_strided_generic(size, stride, &g_allocator,
                                                 c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                 c10::dtype_or_default(dtype));
    });
}

/* A CPU tensor over t's memory (no copy; t must outlive it). Its storage is
 * resizable, so a CPU kernel may resize an out= argument; the caller then
 * moves the new memory back (sync_back). */
at::Tensor cpu_view_of(const at::Tensor &t,
                       std::vector<std::pair<c10::StorageImpl *, c10::Storage>> &seen) {
    c10::StorageImpl *s = t.storage().unsafeGetStorageImpl();
    c10::Storage alias;
    for (auto &p : seen)
        if (p.first == s) alias = p.second;
    if (!alias) {
        alias = c10::Storage(c10::Storage::use_byte_size_t(), s->nbytes(),
                             c10::DataPtr(s->mutable_data(), c10::Device(c10::kCPU)),
                             c10::GetCPUAllocator(), true);
        seen.emplace_back(s, alias);
    }
    auto impl = c10::make_intrusive<c10::TensorImpl>(
        std::move(alias), c10::DispatchKeySet(c10::DispatchKey::CPU), t.dtype());
    impl->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
    return at::Tensor(std::move(impl));
}

at::Tensor npu_copy_from(const at::Tensor &self, const at::Tensor &dst, bool non_blocking) {
    std::vector<std::pair<c10::StorageImpl *, c10::Storage>> seen;
    at::Tensor s = self.device().type() == kNpu ? cpu_view_of(self, seen) : self;
    at::Tensor d = dst.device().type() == kNpu ? cpu_view_of(dst, seen) : dst;
    TORCH_CHECK(s.device().is_cpu() && d.device().is_cpu(),
                "npu (ddpc's CPU emulation): copy from ", self.device(), " to ", dst.device(),
                " is not served (cpu and npu only)");
    d.copy_(s, non_blocking);
    return dst;
}

at::Tensor npu_copy_from_and_resize(const at::Tensor &self, const at::Tensor &dst) {
    at::native::resize_(dst, self.sizes(), std::nullopt);
    return npu_copy_from(self, dst, false);
}

/* The boxed fallback: every operator not registered above. */
struct Call {
    std::vector<std::pair<c10::StorageImpl *, c10::Storage>> seen; /* npu storage -> CPU alias */
    std::vector<std::pair<at::Tensor, at::Tensor>> args;           /* (npu, CPU alias) */
    int dev = -1;

    at::Tensor in(const at::Tensor &t) {
        if (!t.defined() || t.device().type() != kNpu) return t;
        TORCH_CHECK(t.layout() == at::kStrided, "npu (ddpc's CPU emulation): only strided tensors");
        if (dev < 0) dev = t.device().index();
        at::Tensor c = cpu_view_of(t, seen);
        args.emplace_back(t, c);
        return c;
    }

    at::Tensor out(const at::Tensor &c,
                   std::vector<std::pair<c10::StorageImpl *, c10::Storage>> &fresh) {
        if (!c.defined() || !c.device().is_cpu()) return c;
        for (auto &a : args) /* an argument itself (in place, out=) */
            if (a.second.unsafeGetTensorImpl() == c.unsafeGetTensorImpl()) return a.first;
        c10::StorageImpl *cs = c.storage().unsafeGetStorageImpl();
        c10::Storage home;
        for (size_t i = 0; i < seen.size() && !home; i++) /* a view of an argument */
            if (seen[i].second.unsafeGetStorageImpl() == cs)
                home =
                    c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(seen[i].first));
        for (auto &f : fresh)
            if (!home && f.first == cs) home = f.second;
        if (!home) { /* fresh memory: adopt it */
            size_t n = cs->nbytes();
            c10::DataPtr data = cs->set_data_ptr(c10::DataPtr());
            home = c10::Storage(c10::Storage::use_byte_size_t(), n, adopt(std::move(data), n, dev),
                                &g_allocator, true);
            fresh.emplace_back(cs, home);
        }
        auto impl = c10::make_intrusive<c10::TensorImpl>(
            c10::Storage(home), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), c.dtype());
        impl->set_sizes_and_strides(c.sizes(), c.strides(), c.storage_offset());
        return at::Tensor(std::move(impl));
    }

    /* A CPU kernel that resized or restrided an argument (out=, resize_):
     * the npu tensor takes the alias's memory and shape. */
    void sync_back() {
        for (auto &a : args) {
            c10::TensorImpl *n = a.first.unsafeGetTensorImpl();
            c10::TensorImpl *c = a.second.unsafeGetTensorImpl();
            c10::StorageImpl *cs = c->storage().unsafeGetStorageImpl();
            c10::StorageImpl *ns = n->storage().unsafeGetStorageImpl();
            if (cs->data() != ns->data()) {
                size_t nb = cs->nbytes();
                ns->set_data_ptr_noswap(adopt(cs->set_data_ptr(c10::DataPtr()), nb, dev));
                ns->set_nbytes(nb);
                cs->set_data_ptr_noswap(c10::DataPtr(ns->mutable_data(), c10::Device(c10::kCPU)));
            }
            if (c->sizes() != n->sizes() || c->strides() != n->strides() ||
                c->storage_offset() != n->storage_offset())
                n->set_sizes_and_strides(c->sizes(), c->strides(), c->storage_offset());
        }
    }
};

void npu_fallback(const c10::OperatorHandle &op, c10::DispatchKeySet, torch::jit::Stack *stack) {
    const auto &schema = op.schema();
    TORCH_CHECK(op.hasKernelForDispatchKey(c10::DispatchKey::CPU) ||
                    op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd),
                "npu (ddpc's CPU emulation): operator ", schema.operator_name(),
                " is not served: it has no CPU kernel to run on the host's memory");
    size_t nargs = schema.arguments().size();
    auto first = stack->end() - static_cast<std::ptrdiff_t>(nargs);
    Call call;
    for (auto it = first; it != stack->end(); ++it) {
        c10::IValue &v = *it;
        if (v.isTensor()) {
            v = call.in(v.toTensor());
        } else if (v.isTensorList()) {
            auto list = v.toTensorList();
            c10::List<at::Tensor> cpu;
            cpu.reserve(list.size());
            for (const at::Tensor &t : list) cpu.push_back(call.in(t));
            v = cpu;
        } else if (v.isList() && !v.toListRef().empty() &&
                   (v.toListRef()[0].isNone() || v.toListRef()[0].isTensor())) {
            c10::List<std::optional<at::Tensor>> cpu;
            for (const c10::IValue &e : v.toListRef())
                cpu.push_back(e.isTensor() ? std::optional<at::Tensor>(call.in(e.toTensor()))
                                           : std::nullopt);
            v = cpu;
        } else if (v.isDevice() && v.toDevice().type() == kNpu) {
            if (call.dev < 0)
                call.dev = v.toDevice().has_index() ? v.toDevice().index() : current_device();
            v = c10::Device(c10::kCPU);
        }
    }
    if (call.dev < 0) call.dev = current_device();
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
    call.sync_back();
    size_t nret = schema.returns().size();
    std::vector<std::pair<c10::StorageImpl *, c10::Storage>> fresh;
    for (auto it = stack->end() - static_cast<std::ptrdiff_t>(nret); it != stack->end(); ++it) {
        c10::IValue &v = *it;
        if (v.isTensor()) {
            v = call.out(v.toTensor(), fresh);
        } else if (v.isTensorList()) {
            auto list = v.toTensorList();
            c10::List<at::Tensor> back;
            back.reserve(list.size());
            for (const at::Tensor &t : list) back.push_back(call.out(t, fresh));
            v = back;
        }
    }
}

} // namespace

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
    m.fallback(torch::CppFunction::makeFromBoxedFunction<&npu_fallback>());
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
    m.impl("empty.memory_format", npu_empty);
    m.impl("empty_strided", npu_empty_strided);
    m.impl("as_strided", at::native::as_strided_tensorimpl);
    m.impl("view", at::native::view);
    m.impl("_reshape_alias", at::native::_reshape_alias);
    m.impl("resize_", at::native::resize_);
    m.impl("set_.source_Storage", at::native::set_);
    m.impl("set_.source_Storage_storage_offset", at::native::set_storage_cpu_);
    m.impl("_copy_from", npu_copy_from);
    m.impl("_copy_from_and_resize", npu_copy_from_and_resize);
}

/* ------------------------------------------------------------ Python */

static void npu_setup(int count) {
    TORCH_CHECK(count >= 1, "npu: the device count must be at least 1, got ", count);
    g_count = count;
    c10::SetAllocator(kNpu, &g_allocator);
    at::RegisterPrivateUse1HooksInterface(&g_hooks);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.doc() = "ddpc_torch_npu._C: torch's PrivateUse1 device on host memory (see npu.cpp)";
    m.def("_setup", &npu_setup, "allocator and hooks; the number of devices");
    m.def("_set_device", [](int i) { set_current(i, true); });
    m.def("_current_device", [] { return current_device(); });
    m.def("_device_count", [] { return g_count.load(); });
    m.def("_memory", [] {
        return std::vector<int64_t>{ g_allocated.load(), g_peak.load(), g_allocs.load(),
                                     g_frees.load() };
    });
    m.def("_reset_peak", [] { g_peak = g_allocated.load(); });
    m.def("built_torch_version", [] { return std::string(TORCH_VERSION); });
}
