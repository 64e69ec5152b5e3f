/* A llama.cpp CPU variant library that misbehaves the way a real one can.
 *
 * It wraps a real variant (REAL_VARIANT, the path of a libggml-cpu-*.so, set when compiling)
 * and scores above every real one (SCORE), so llama.cpp's loader would pick it. Its backend is the
 * real one with the compute entry point (ggml_backend_i.graph_compute) replaced:
 *   -DCRASH  raises SIGILL there, at the first matrix product: what the AMX variant did on a
 *            Sapphire Rapids VM (it died on `tilezero` in ggml_backend_amx_mul_mat);
 *   -DHANG   never returns from it;
 *   -DWRONG  computes, then zeroes the logits: a wrong result, no crash;
 *   neither  passes through, and must answer like the real variant (which checks that these
 *            struct layouts still match the llama.cpp they are loaded into).
 *
 * The structs are ggml/src/ggml-backend-impl.h's, from the llama.cpp that llama-cpp-python
 * 0.3.36 vendors (GGML_BACKEND_API_VERSION 2).
 */
#include <dlfcn.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef void *fn;
struct wrap_backend;
struct wrap_device;
struct wrap_reg;

struct wrap_backend_i {
    fn get_name, free, set_tensor_async, get_tensor_async, set_tensor_2d_async, get_tensor_2d_async,
        cpy_tensor_async, synchronize, graph_plan_create, graph_plan_free, graph_plan_update, graph_plan_compute;
    int (*graph_compute)(struct wrap_backend *backend, void *cgraph);
    fn event_record, event_wait, graph_optimize;
};
struct wrap_backend {
    void *guid;
    struct wrap_backend_i iface;
    struct wrap_device *device;
    void *context;
};
struct wrap_device_i {
    fn get_name, get_description, get_memory, get_type, get_props;
    struct wrap_backend *(*init_backend)(struct wrap_device *dev, const char *params);
    fn get_buffer_type, get_host_buffer_type, buffer_from_host_ptr, supports_op, supports_buft, offload_op,
        event_new, event_free, event_synchronize;
};
struct wrap_device {
    struct wrap_device_i iface;
    struct wrap_reg *reg;
    void *context;
};
struct wrap_reg_i {
    fn get_name;
    size_t (*get_device_count)(struct wrap_reg *reg);
    struct wrap_device *(*get_device)(struct wrap_reg *reg, size_t index);
    fn get_proc_address;
};
struct wrap_reg {
    int api_version;
    struct wrap_reg_i iface;
    void *context;
};

static void *real_lib;
static struct wrap_reg *real_reg;
static struct wrap_reg reg;
static struct wrap_device device;
static int (*real_compute)(struct wrap_backend *, void *);

static int compute(struct wrap_backend *backend, void *cgraph) {
#ifdef CRASH
    raise(SIGILL);
#endif
#ifdef HANG
    for (;;) pause();
#endif
    int status = real_compute(backend, cgraph);
#ifdef WRONG
    /* ggml's public API, from libggml-base (found through the real variant, which links it): the logits
     * (llama.cpp names them "result_output") are zeroed, so every token ties. */
    int (*n_nodes)(void *) = (int (*)(void *))dlsym(real_lib, "ggml_graph_n_nodes");
    void *(*node)(void *, int) = (void *(*)(void *, int))dlsym(real_lib, "ggml_graph_node");
    const char *(*name)(const void *) = (const char *(*)(const void *))dlsym(real_lib, "ggml_get_name");
    void *(*data)(const void *) = (void *(*)(const void *))dlsym(real_lib, "ggml_get_data");
    size_t (*nbytes)(const void *) = (size_t (*)(const void *))dlsym(real_lib, "ggml_nbytes");
    if (n_nodes && node && name && data && nbytes) {
        for (int i = 0; i < n_nodes(cgraph); i++) {
            void *t = node(cgraph, i);
            if (strcmp(name(t), "result_output") == 0 && data(t)) memset(data(t), 0, nbytes(t));
        }
    }
#endif
    return status;
}

static struct wrap_backend *init_backend(struct wrap_device *dev, const char *params) {
    struct wrap_device *real = real_reg->iface.get_device(real_reg, 0);
    struct wrap_backend *backend = real->iface.init_backend(real, params);
    if (backend != NULL) {
        real_compute = backend->iface.graph_compute;
        backend->iface.graph_compute = compute;
    }
    (void)dev;
    return backend;
}

static struct wrap_device *get_device(struct wrap_reg *r, size_t index) {
    (void)r;
    return index == 0 ? &device : NULL;
}

#ifndef SCORE
#define SCORE (1 << 20)
#endif

/* Above every real variant's score (theirs add up a few powers of two per feature). */
int ggml_backend_score(void) { return SCORE; }

struct wrap_reg *ggml_backend_init(void) {
    if (real_reg != NULL) return &reg;
    void *lib = real_lib = dlopen(REAL_VARIANT, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "fake variant: %s\n", dlerror());
        return NULL;
    }
    struct wrap_reg *(*init)(void) = (struct wrap_reg * (*)(void)) dlsym(lib, "ggml_backend_init");
    real_reg = init();
    reg = *real_reg;
    reg.iface.get_device = get_device;
    device = *real_reg->iface.get_device(real_reg, 0);
    device.iface.init_backend = init_backend;
    device.reg = &reg;
    return &reg;
}
