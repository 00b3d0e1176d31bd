// Positive case: pybind11 functions that release the GIL around native waits.
#include <pybind11/pybind11.h>
#include <cuda_runtime.h>
namespace py = pybind11;

static void wait_stream(std::uintptr_t stream) {
    py::gil_scoped_release release;
    cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(stream));
}

static void copy_blocking(std::uintptr_t stream) {
    cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(stream));
}

static int outer(int x) { wait_stream(0); return x; }

PYBIND11_MODULE(fix_release, m) {
    m.def("wait_stream", &wait_stream);
    m.def("copy_blocking", &copy_blocking, py::call_guard<py::gil_scoped_release>());
    m.def("outer", &outer);
}
