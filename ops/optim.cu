// SGD with momentum and weight decay (ops/optim.py), vectorised, in numpy's order with no
// FMA contraction, so it gives numpy's bits:
//   m' = (m * momentum + grad) + weight_decay * w;   w' = w - lr * m'
// w' may alias w and m' may alias m: every element is read before it is written, by
// the thread that writes it.
#include "common.cuh"

template <typename T>
__device__ __forceinline__ void sgd_one(T& w_next, T& m_next, T w, T g, T m, T lr, T mom, T wd) {
    const T mn = add_rn(add_rn(mul_rn(m, mom), g), mul_rn(wd, w));
    m_next = mn;
    w_next = sub_rn(w, mul_rn(lr, mn));
}

template <typename T>
__device__ __forceinline__ void sgd_t(T* w_next, T* m_next, const T* w, const T* grad, const T* m,
                                      T lr, T mom, T wd, i64 n) {
    typedef typename Vec16<T>::type V;
    constexpr int L = Vec16<T>::lanes;
    const i64 tid = global_thread(), stride = global_stride();
    i64 done = 0;
    if (aligned16(w_next) && aligned16(m_next) && aligned16(w) && aligned16(grad) && aligned16(m)) {
        const i64 nv = n / L;
        for (i64 i = tid; i < nv; i += stride) {
            V vw = reinterpret_cast<const V*>(w)[i], vg = reinterpret_cast<const V*>(grad)[i];
            V vm = reinterpret_cast<const V*>(m)[i];
            V ow, om;
            const T *pw = reinterpret_cast<const T*>(&vw), *pg = reinterpret_cast<const T*>(&vg);
            const T* pm = reinterpret_cast<const T*>(&vm);
            T *qw = reinterpret_cast<T*>(&ow), *qm = reinterpret_cast<T*>(&om);
#pragma unroll
            for (int l = 0; l < L; ++l) sgd_one(qw[l], qm[l], pw[l], pg[l], pm[l], lr, mom, wd);
            reinterpret_cast<V*>(w_next)[i] = ow;
            reinterpret_cast<V*>(m_next)[i] = om;
        }
        done = nv * L;
    }
    for (i64 i = done + tid; i < n; i += stride) {
        T a, b;
        sgd_one(a, b, w[i], grad[i], m[i], lr, mom, wd);
        w_next[i] = a;
        m_next[i] = b;
    }
}

KERNEL void sgd_momentum_update(float* w_next, float* m_next, const float* w, const float* grad, const float* m,
                                float lr, float momentum, float weight_decay, i64 n) {
    sgd_t(w_next, m_next, w, grad, m, lr, momentum, weight_decay, n);
}
KERNEL void sgd_momentum_update_f64(double* w_next, double* m_next, const double* w, const double* grad,
                                    const double* m, double lr, double momentum, double weight_decay, i64 n) {
    sgd_t(w_next, m_next, w, grad, m, lr, momentum, weight_decay, n);
}

// Adam / AdamW (ops/optim.py's AdamUpdate), element-wise in the same order as numpy, no FMA:
//   t = step + 1; g = grad (+ wd * w unless decoupled)
//   m' = b1*m + (1-b1)*g;  v' = b2*v + ((1-b2)*g)*g
//   w' = w*(decoupled ? 1 - lr*wd : 1) - (lr/(1 - b1^t)) * (m' / (sqrt(v')/sqrt(1 - b2^t) + eps))
// Outputs may alias their inputs (each element read, then written, by one thread); the step
// count is advanced by adam_step, launched after, so every thread reads the old count.

template <typename T>
__device__ __forceinline__ void adam_t(T* w_next, T* m_next, T* v_next, const T* w, const T* grad, const T* m,
                                       const T* v, const T* step, T lr, T b1, T b2, T eps, T wd, int decoupled,
                                       i64 n) {
    const T count = add_rn(step[0], T(1));
    const T bc1 = sub_rn(T(1), pow_t(b1, count)), bc2 = sub_rn(T(1), pow_t(b2, count));
    const T step_size = lr / bc1, root_bc2 = sqrt_t(bc2);
    const T decay = decoupled ? sub_rn(T(1), mul_rn(lr, wd)) : T(1);
    const T keep1 = sub_rn(T(1), b1), keep2 = sub_rn(T(1), b2);
    for (i64 i = global_thread(); i < n; i += global_stride()) {
        const T wi = w[i];
        const T g = decoupled ? grad[i] : add_rn(grad[i], mul_rn(wd, wi));
        const T mn = add_rn(mul_rn(b1, m[i]), mul_rn(keep1, g));
        const T vn = add_rn(mul_rn(b2, v[i]), mul_rn(mul_rn(keep2, g), g));
        const T denom = add_rn(sqrt_t(vn) / root_bc2, eps);
        w_next[i] = sub_rn(mul_rn(wi, decay), mul_rn(step_size, mn / denom));
        m_next[i] = mn;
        v_next[i] = vn;
    }
}

template <typename T>
__device__ __forceinline__ void adam_step_t(T* step_next, const T* step) {
    if (blockIdx.x == 0 && threadIdx.x == 0) step_next[0] = add_rn(step[0], T(1));
}

KERNEL void adam_update(float* w_next, float* m_next, float* v_next, const float* w, const float* grad,
                        const float* m, const float* v, const float* step, float lr, float beta1, float beta2,
                        float eps, float weight_decay, int decoupled, i64 n) {
    adam_t(w_next, m_next, v_next, w, grad, m, v, step, lr, beta1, beta2, eps, weight_decay, decoupled, n);
}
KERNEL void adam_update_f64(double* w_next, double* m_next, double* v_next, const double* w, const double* grad,
                            const double* m, const double* v, const double* step, double lr, double beta1,
                            double beta2, double eps, double weight_decay, int decoupled, i64 n) {
    adam_t(w_next, m_next, v_next, w, grad, m, v, step, lr, beta1, beta2, eps, weight_decay, decoupled, n);
}
KERNEL void adam_step(float* step_next, const float* step) { adam_step_t(step_next, step); }
KERNEL void adam_step_f64(double* step_next, const double* step) { adam_step_t(step_next, step); }
