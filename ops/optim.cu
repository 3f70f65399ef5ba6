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
