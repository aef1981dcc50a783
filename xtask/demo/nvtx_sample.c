/* The C twin of nvtx_sample.py for the node images (no Python in them): a training-loop-shaped
 * program annotating its phases with NVTX v3 ranges in the domain "demo". It needs no GPU.
 *
 * Usage: nvtx-sample [SECONDS]   (default: forever; one line per epoch on stdout)
 * Ranges per epoch: epoch > 5 x (train_step > forward 4 ms, backward 8 ms) + evaluate 10 ms.
 * Built by `cargo xtask image all` (gcc -O2 against the NVTX headers from the venv). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <nvtx3/nvToolsExt.h>

static nvtxDomainHandle_t domain;

static void push(const char *name) {
    nvtxEventAttributes_t a = {0};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = name;
    nvtxDomainRangePushEx(domain, &a);
}

static void pop(void) { nvtxDomainRangePop(domain); }

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 0.0;
    double deadline = now() + seconds;
    domain = nvtxDomainCreateA("demo");
    for (long epoch = 1; seconds <= 0.0 || now() < deadline; epoch++) {
        push("epoch");
        for (int step = 0; step < 5; step++) {
            push("train_step");
            push("forward");
            usleep(4000);
            pop();
            push("backward");
            usleep(8000);
            pop();
            pop();
        }
        push("evaluate");
        usleep(10000);
        pop();
        pop();
        printf("epoch %ld\n", epoch);
        fflush(stdout);
    }
    return 0;
}
