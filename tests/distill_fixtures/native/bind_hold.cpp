// Negative case for the GIL: a binding that waits on the device while holding the GIL.
#include <pybind11/pybind11.h>
#include <cuda_runtime.h>
#include <thread>
namespace py = pybind11;

static void wait_stream(std::uintptr_t stream) {
    cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(stream));
}

PYBIND11_MODULE(fix_hold, m) {
    m.def("wait_stream", &wait_stream);
    m.def("nap", [](int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); });
    m.def("version", []() { return 1; });
}
