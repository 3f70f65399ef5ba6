// The CUDA sanitizer's delay: one thread spins for `ns` nanoseconds of the GPU's global
// timer, holding back everything after it on its stream. Random delays before each
// instruction let instructions that no edge orders meet in orders the plain run never shows.
extern "C" __global__ void sanitizer_delay(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        __nanosleep(1000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}
