/* CPU kernels for the decoding step, on float32 data given as raw pointers (model_core/fused.py
 * wraps each one and holds the tensors):
 *
 * topk_logsumexp: for each row of a (rows, vocab) matrix of logits, the k largest values (best
 * first, the lower index first among equal values), their indices, and the row's logsumexp.
 * torch needs three passes for this (topk, then max-shifted exp and sum), each with its own
 * allocation; here it is one pass for the top-k and one vectorised pass for the sum.
 * attend_cached / attend_cross: the attention of one step (see the section below).
 * beam_select: beam search's choice of finished hypotheses and next beams.
 * linear: a packed linear layer's GEMM, with the LayerNorm before it, the bias, ReLU and the
 * residual add in the same call (see its section).
 *
 * Built as an optional extension (setup.py), with OpenMP where the compiler has it (rows or
 * weight panels are spread over threads): model_core/fused.py falls back to torch ops when it
 * is missing, and the tests check both give the same results. The top-k, attention and linear
 * kernels release the GIL while they compute, so the service's event loop keeps going
 * (beam_select is short and keeps it). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
/* the loop's function has an int `threads` in scope */
#define PARALLEL_FOR _Pragma("omp parallel for num_threads(threads) schedule(static)")
#define THREAD_NUM omp_get_thread_num()
#else
#define PARALLEL_FOR
#define THREAD_NUM 0
#endif

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define HAVE_X86 1
#endif

/* Insert (v, j) into the descending arrays of length k (v > vals[k - 1] or fewer than k held). */
static inline void insert(float *vals, int64_t *idx, int k, int held, float v, int64_t j) {
    int pos = held < k ? held : k - 1;
    while (pos > 0 && vals[pos - 1] < v) {
        vals[pos] = vals[pos - 1];
        idx[pos] = idx[pos - 1];
        --pos;
    }
    vals[pos] = v;
    idx[pos] = j;
}

static int row_topk_scalar(const float *x, int64_t n, int k, float *vals, int64_t *idx) {
    int held = 0;
    for (int64_t j = 0; j < n; ++j) {
        float v = x[j];
        if (held < k) {
            insert(vals, idx, k, held, v, j);
            ++held;
        } else if (v > vals[k - 1]) {
            insert(vals, idx, k, held, v, j);
        }
    }
    return held;
}

static double row_sum_exp_scalar(const float *x, int64_t n, float shift) {
    double sum = 0.0;
    for (int64_t j = 0; j < n; ++j) sum += expf(x[j] - shift);
    return sum;
}

#ifdef HAVE_X86
__attribute__((target("avx2,fma"))) static int row_topk_avx2(const float *x, int64_t n, int k,
                                                             float *vals, int64_t *idx) {
    int held = 0;
    int64_t j = 0;
    for (; j < n && held < k; ++j, ++held) insert(vals, idx, k, held, x[j], j);
    if (held < k) return held;
    __m256 th = _mm256_set1_ps(vals[k - 1]);
    for (; j + 8 <= n; j += 8) {
        __m256 v = _mm256_loadu_ps(x + j);
        int mask = _mm256_movemask_ps(_mm256_cmp_ps(v, th, _CMP_GT_OQ));
        if (mask) {
            for (int b = 0; b < 8; ++b) {
                if (((mask >> b) & 1) && x[j + b] > vals[k - 1]) insert(vals, idx, k, k, x[j + b], j + b);
            }
            th = _mm256_set1_ps(vals[k - 1]);
        }
    }
    for (; j < n; ++j)
        if (x[j] > vals[k - 1]) insert(vals, idx, k, k, x[j], j);
    return k;
}

/* exp(x) for x <= 0 (inputs are shifted by the row maximum): Cephes' range reduction and
 * polynomial, about 1 ulp; inputs below -87.3 give ~1e-38, negligible next to the maximum's 1. */
__attribute__((target("avx2,fma"))) static inline __m256 exp_nonpositive(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.3f);
    x = _mm256_max_ps(x, lo);
    __m256 fx = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f));
    fx = _mm256_floor_ps(fx);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(5.0000001201e-1f));
    __m256 xx = _mm256_mul_ps(x, x);
    p = _mm256_fmadd_ps(p, xx, _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_add_epi32(_mm256_cvttps_epi32(fx), _mm256_set1_epi32(127));
    return _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(e, 23)));
}

__attribute__((target("avx2,fma"))) static double row_sum_exp_avx2(const float *x, int64_t n,
                                                                    float shift) {
    __m256 s = _mm256_set1_ps(shift);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        acc0 = _mm256_add_ps(acc0, exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(x + j), s)));
        acc1 = _mm256_add_ps(acc1, exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(x + j + 8), s)));
    }
    for (; j + 8 <= n; j += 8)
        acc0 = _mm256_add_ps(acc0, exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(x + j), s)));
    float lanes[8];
    _mm256_storeu_ps(lanes, _mm256_add_ps(acc0, acc1));
    double sum = 0.0;
    for (int b = 0; b < 8; ++b) sum += lanes[b];
    for (; j < n; ++j) sum += expf(x[j] - shift);
    return sum;
}
#endif

static PyObject *topk_logsumexp(PyObject *self, PyObject *args) {
    unsigned long long src, out_vals, out_idx, out_lse;
    long long rows, vocab, row_stride;
    int k, threads = 1;
    if (!PyArg_ParseTuple(args, "KLLLiKKK|i", &src, &rows, &vocab, &row_stride, &k, &out_vals,
                          &out_idx, &out_lse, &threads))
        return NULL;
    if (rows < 0 || vocab < 1 || k < 1 || k > vocab || row_stride < vocab) {
        PyErr_SetString(PyExc_ValueError, "need rows >= 0, 1 <= k <= vocab <= row_stride");
        return NULL;
    }
    const float *x = (const float *)(uintptr_t)src;
    float *vals = (float *)(uintptr_t)out_vals;
    int64_t *idx = (int64_t *)(uintptr_t)out_idx;
    float *lse = (float *)(uintptr_t)out_lse;
    int avx2 = 0;
#ifdef HAVE_X86
    avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
#ifdef _OPENMP
    threads = threads < 1 ? 1 : threads;
#endif
    Py_BEGIN_ALLOW_THREADS;
    PARALLEL_FOR
    for (long long r = 0; r < rows; ++r) {
        const float *row = x + r * row_stride;
        float *v = vals + r * k;
        int64_t *i = idx + r * k;
        double sum;
#ifdef HAVE_X86
        if (avx2) {
            row_topk_avx2(row, vocab, k, v, i);
            sum = isfinite(v[0]) ? row_sum_exp_avx2(row, vocab, v[0]) : 0.0;
        } else
#endif
        {
            row_topk_scalar(row, vocab, k, v, i);
            sum = isfinite(v[0]) ? row_sum_exp_scalar(row, vocab, v[0]) : 0.0;
        }
        lse[r] = isfinite(v[0]) ? v[0] + (float)log(sum) : v[0];
    }
    Py_END_ALLOW_THREADS;
    (void)avx2;
    (void)threads;
    Py_RETURN_NONE;
}

/* ---- Attention for one decoding step -------------------------------------------------------
 *
 * The decoder's cache keeps each position's keys and values in a "slot" (a beam of a sentence)
 * and never moves them: when beam search reorders its hypotheses, only a small table of
 * back-pointers changes (history[slot, p] = the slot that holds the same hypothesis's entry at
 * position p - 1). A row's prefix is found by walking that chain, so no step copies the cache.
 * Layouts (float32, contiguous):
 *   kv      (layers, slots, capacity, 2, d): keys then values, d = heads * head_dim
 *   history (slots, capacity) int64
 *   qkv     (rows, 3d) with row stride qkv_stride: the fused q|k|v projection of this step
 * attend_cross: each row (a decoder beam, or an encoder token) attends over its sentence's keys
 * and values (any strides, unit stride within a head), with an additive bias (sentences, S)
 * that is -inf at padding. */

static inline float dot_scalar(const float *a, const float *b, int64_t n) {
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    int64_t j = 0;
    for (; j + 4 <= n; j += 4)
        for (int u = 0; u < 4; ++u) acc[u] += a[j + u] * b[j + u];
    for (; j < n; ++j) acc[0] += a[j] * b[j];
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

static inline void axpy_scalar(float *y, float w, const float *x, int64_t n) {
    for (int64_t j = 0; j < n; ++j) y[j] += w * x[j];
}

#ifdef HAVE_X86
/* The sum of v's lanes as ((v0 + v1) + (v2 + v3)) + ((v4 + v5) + (v6 + v7)): the order dot4_avx2
 * reduces each of its four products in, so that a product gets the same bits on either path. */
__attribute__((target("avx2,fma"))) static inline float hsum_pairs(__m256 v) {
    __m256 h = _mm256_hadd_ps(v, v);
    h = _mm256_hadd_ps(h, h);
    return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
}

/* n a multiple of 8; the same chain of multiply-adds and the same reduction as one product of
 * dot4_avx2 (attend_cross takes positions four at a time and the last few one by one, so which
 * path a position takes depends on the padded source length) */
__attribute__((target("avx2,fma"))) static inline float dot_avx2(const float *a, const float *b,
                                                                 int64_t n) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t j = 0; j < n; j += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), acc);
    return hsum_pairs(acc);
}

__attribute__((target("avx2,fma"))) static inline void axpy_avx2(float *y, float w, const float *x,
                                                                 int64_t n) {
    __m256 vw = _mm256_set1_ps(w);
    for (int64_t j = 0; j < n; j += 8)
        _mm256_storeu_ps(y + j, _mm256_fmadd_ps(vw, _mm256_loadu_ps(x + j), _mm256_loadu_ps(y + j)));
}
#endif

/* out[u] = a[u] . b[u] for u < 4 */
static inline void dot4_scalar(const float *const a[4], const float *const b[4], int64_t n,
                               float out[4]) {
    for (int u = 0; u < 4; ++u) out[u] = dot_scalar(a[u], b[u], n);
}

#ifdef HAVE_X86
/* n a multiple of 8 */
__attribute__((target("avx2,fma"))) static inline void dot4_avx2(const float *const a[4],
                                                                 const float *const b[4],
                                                                 int64_t n, float out[4]) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    for (int64_t j = 0; j < n; j += 8)
        for (int u = 0; u < 4; ++u)
            acc[u] = _mm256_fmadd_ps(_mm256_loadu_ps(a[u] + j), _mm256_loadu_ps(b[u] + j), acc[u]);
    __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(acc[0], acc[1]), _mm256_hadd_ps(acc[2], acc[3]));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
}
#endif

/* softmax(scores[0..n)) in place; returns 0 when every score is -inf (the row attends nothing). */
static int softmax_inplace(float *scores, int64_t n) {
    float m = -INFINITY;
    for (int64_t p = 0; p < n; ++p) m = scores[p] > m ? scores[p] : m;
    if (m == -INFINITY) return 0;
    double sum = 0.0;
    for (int64_t p = 0; p < n; ++p) {
        float e = expf(scores[p] - m);
        scores[p] = e;
        sum += e;
    }
    float inv = (float)(1.0 / sum);
    for (int64_t p = 0; p < n; ++p) scores[p] *= inv;
    return 1;
}

#ifdef HAVE_X86
/* softmax_inplace with the vectorised exp; exactly 0 where a score is -inf. Every position, the
 * last few included, goes through the same exp, and lane u sums positions u, u + 8, ... in order,
 * so padding a row with -inf scores (a sentence in a batch of longer ones) changes no bit of its
 * result. */
__attribute__((target("avx2,fma"))) static int softmax_avx2(float *scores, int64_t n) {
    const __m256 minus_inf = _mm256_set1_ps(-INFINITY);
    const int64_t full = n - n % 8;
    float tail[8];
    for (int u = 0; u < 8; ++u) tail[u] = full + u < n ? scores[full + u] : -INFINITY;
    __m256 vm = _mm256_loadu_ps(tail);
    for (int64_t p = 0; p < full; p += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(scores + p));
    float lanes[8], m = -INFINITY;
    _mm256_storeu_ps(lanes, vm);
    for (int u = 0; u < 8; ++u) m = lanes[u] > m ? lanes[u] : m;
    if (m == -INFINITY) return 0;
    const __m256 shift = _mm256_set1_ps(m);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t p = 0; p <= full; p += 8) {
        float *at = p < full ? scores + p : tail;
        __m256 x = _mm256_loadu_ps(at);
        __m256 e = _mm256_andnot_ps(_mm256_cmp_ps(x, minus_inf, _CMP_EQ_OQ),
                                    exp_nonpositive(_mm256_sub_ps(x, shift)));
        _mm256_storeu_ps(at, e);
        acc = _mm256_add_ps(acc, e);
    }
    _mm256_storeu_ps(lanes, acc);
    double sum = 0.0;
    for (int u = 0; u < 8; ++u) sum += lanes[u];
    const float inv = (float)(1.0 / sum);
    const __m256 vinv = _mm256_set1_ps(inv);
    for (int64_t p = 0; p < full; p += 8)
        _mm256_storeu_ps(scores + p, _mm256_mul_ps(_mm256_loadu_ps(scores + p), vinv));
    for (int64_t p = full; p < n; ++p) scores[p] = tail[p - full] * inv;
    return 1;
}
#endif

typedef struct {
    const float *qkv;
    int64_t qkv_stride, rows, heads, hd, slots_total, capacity, layer, t;
    float *kv; /* (layers, slots_total, capacity, 2, d) */
    const int64_t *slots, *history;
    const int64_t *row_t; /* NULL: every row at position t; else each row's own (<= t) */
    float scale;
    float *out;
    int64_t out_stride;
} cached_args;

typedef struct {
    const float *q;
    int64_t q_stride, rows, heads, hd, src_len;
    int64_t sent_stride, head_stride, pos_stride; /* of keys and values, in floats */
    float scale;
    const float *keys, *values, *bias;
    const int64_t *sentence;
    float *out;
    int64_t out_stride;
} cross_args;

/* One body for both instruction sets: DOT and AXPY pick the implementation. Rows are spread
 * over `threads` OpenMP threads (the runtime torch itself loaded, when the extension was built
 * with OpenMP); scores is a (threads, heads * positions) scratch buffer. */
#define DEFINE_ATTENTION(SUFFIX, TARGET, DOT, DOT4, SOFTMAX, AXPY)                                              \
    TARGET static void attend_cached_##SUFFIX(const cached_args *a, int64_t *chains,            \
                                              float *scores, int threads) {                     \
        const int64_t d = a->heads * a->hd, tmax = a->t, hd = a->hd;                             \
        const int64_t slot_size = a->capacity * 2 * d;                                           \
        float *layer_kv = a->kv + a->layer * a->slots_total * slot_size;                         \
        PARALLEL_FOR                                                                    \
        for (int64_t i = 0; i < a->rows; ++i) {                                                  \
            const int64_t t = a->row_t ? a->row_t[i] : tmax;                                     \
            int64_t *chain = chains + THREAD_NUM * (tmax + 1);                                   \
            float *sc = scores + THREAD_NUM * a->heads * (tmax + 1);                             \
            const float *q = a->qkv + i * a->qkv_stride;                                         \
            chain[t] = a->slots[i];                                                              \
            memcpy(layer_kv + chain[t] * slot_size + t * 2 * d, q + d, 2 * d * sizeof(float));   \
            for (int64_t p = t; p > 0; --p) chain[p - 1] = a->history[chain[p] * a->capacity + p]; \
            for (int64_t p = 0; p <= t; ++p) {                                                   \
                const float *k = layer_kv + chain[p] * slot_size + p * 2 * d;                    \
                int64_t h = 0;                                                                   \
                for (; h + 4 <= a->heads; h += 4) {                                              \
                    const float *qs[4], *ks[4];                                                  \
                    float dots[4];                                                               \
                    for (int u = 0; u < 4; ++u) qs[u] = q + (h + u) * hd, ks[u] = k + (h + u) * hd; \
                    DOT4(qs, ks, hd, dots);                                                      \
                    for (int u = 0; u < 4; ++u) sc[(h + u) * (t + 1) + p] = a->scale * dots[u];  \
                }                                                                                \
                for (; h < a->heads; ++h)                                                        \
                    sc[h * (t + 1) + p] = a->scale * DOT(q + h * hd, k + h * hd, hd);            \
            }                                                                                    \
            for (int64_t h = 0; h < a->heads; ++h) SOFTMAX(sc + h * (t + 1), t + 1);             \
            float *o = a->out + i * a->out_stride;                                               \
            memset(o, 0, d * sizeof(float));                                                     \
            for (int64_t p = 0; p <= t; ++p) {                                                   \
                const float *v = layer_kv + chain[p] * slot_size + p * 2 * d + d;                \
                for (int64_t h = 0; h < a->heads; ++h)                                           \
                    AXPY(o + h * hd, sc[h * (t + 1) + p], v + h * hd, hd);                       \
            }                                                                                    \
        }                                                                                        \
    }                                                                                            \
    TARGET static void attend_cross_##SUFFIX(const cross_args *a, float *scores, int threads) { \
        const int64_t s_len = a->src_len, hd = a->hd;                                            \
        PARALLEL_FOR                                                                    \
        for (int64_t i = 0; i < a->rows; ++i) {                                                  \
            float *sc = scores + THREAD_NUM * s_len;                                             \
            const int64_t s = a->sentence[i];                                                    \
            const float *bias = a->bias + s * s_len;                                             \
            for (int64_t h = 0; h < a->heads; ++h) {                                             \
                const float *qh = a->q + i * a->q_stride + h * hd;                               \
                const int64_t base = s * a->sent_stride + h * a->head_stride, ps = a->pos_stride; \
                const float *k = a->keys + base, *v = a->values + base;                          \
                int64_t j = 0;                                                                   \
                for (; j + 4 <= s_len; j += 4) {                                                 \
                    const float *qs[4] = {qh, qh, qh, qh};                                       \
                    const float *ks[4] = {k + j * ps, k + (j + 1) * ps, k + (j + 2) * ps,        \
                                          k + (j + 3) * ps};                                     \
                    DOT4(qs, ks, hd, sc + j);                                                    \
                }                                                                                \
                for (; j < s_len; ++j) sc[j] = DOT(qh, k + j * ps, hd);                          \
                for (j = 0; j < s_len; ++j) sc[j] = a->scale * sc[j] + bias[j];                  \
                float *o = a->out + i * a->out_stride + h * hd;                                  \
                memset(o, 0, hd * sizeof(float));                                                \
                if (!SOFTMAX(sc, s_len)) continue;                                               \
                for (int64_t j = 0; j < s_len; ++j)                                              \
                    if (sc[j] != 0.0f) AXPY(o, sc[j], v + j * ps, hd);                           \
            }                                                                                    \
        }                                                                                        \
    }

DEFINE_ATTENTION(scalar, , dot_scalar, dot4_scalar, softmax_inplace, axpy_scalar)
#ifdef HAVE_X86
DEFINE_ATTENTION(avx2, __attribute__((target("avx2,fma"))), dot_avx2, dot4_avx2, softmax_avx2,
                 axpy_avx2)
#endif

static int use_avx2(int64_t hd) {
#ifdef HAVE_X86
    return hd % 8 == 0 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    (void)hd;
    return 0;
#endif
}

static int clamp_threads(int threads) {
#ifdef _OPENMP
    return threads < 1 ? 1 : threads;
#else
    (void)threads;
    return 1;
#endif
}

static PyObject *attend_cached(PyObject *self, PyObject *args) {
    unsigned long long qkv, kv, slots, history, out, row_t;
    cached_args a;
    long long v[9];
    int threads;
    if (!PyArg_ParseTuple(args, "KLLLLKLLLLLKKfKKi", &qkv, &v[0], &v[1], &v[2], &v[3], &kv,
                          &v[4], &v[5], &v[6], &v[7], &v[8], &slots, &history, &a.scale, &out,
                          &row_t, &threads))
        return NULL;
    long long layers = v[6];
    a.qkv_stride = v[0], a.rows = v[1], a.heads = v[2], a.hd = v[3], a.slots_total = v[4];
    a.capacity = v[5], a.layer = v[7], a.t = v[8];
    const int64_t d = a.heads * a.hd;
    if (a.rows < 0 || a.heads < 1 || a.hd < 1 || layers < 1 || a.layer < 0 ||
        a.layer >= layers || a.t < 0 || a.t >= a.capacity || a.qkv_stride < 3 * d) {
        PyErr_SetString(PyExc_ValueError, "attend_cached: inconsistent shapes");
        return NULL;
    }
    a.qkv = (const float *)(uintptr_t)qkv, a.kv = (float *)(uintptr_t)kv;
    a.slots = (const int64_t *)(uintptr_t)slots, a.history = (const int64_t *)(uintptr_t)history;
    a.row_t = (const int64_t *)(uintptr_t)row_t;
    for (int64_t i = 0; a.row_t && i < a.rows; ++i)
        if (a.row_t[i] < 0 || a.row_t[i] > a.t) {
            PyErr_SetString(PyExc_ValueError, "attend_cached: a row's position is past t");
            return NULL;
        }
    a.out = (float *)(uintptr_t)out, a.out_stride = d;
    threads = clamp_threads(threads);
    int64_t *chains = malloc(threads * (a.t + 1) * sizeof(int64_t));
    float *scores = malloc(threads * a.heads * (a.t + 1) * sizeof(float));
    if (!chains || !scores) {
        free(chains), free(scores);
        return PyErr_NoMemory();
    }
    int avx2 = use_avx2(a.hd);
    Py_BEGIN_ALLOW_THREADS;
#ifdef HAVE_X86
    if (avx2)
        attend_cached_avx2(&a, chains, scores, threads);
    else
#endif
        attend_cached_scalar(&a, chains, scores, threads);
    Py_END_ALLOW_THREADS;
    (void)avx2;
    free(chains), free(scores);
    Py_RETURN_NONE;
}

static PyObject *attend_cross(PyObject *self, PyObject *args) {
    unsigned long long q, keys, values, bias, sentence, out;
    cross_args a;
    long long v[8];
    int threads;
    if (!PyArg_ParseTuple(args, "KLLLLKKLLLfKLKKi", &q, &v[0], &v[1], &v[2], &v[3], &keys, &values,
                          &v[5], &v[6], &v[7], &a.scale, &bias, &v[4], &sentence, &out, &threads))
        return NULL;
    a.q_stride = v[0], a.rows = v[1], a.heads = v[2], a.hd = v[3], a.src_len = v[4];
    a.sent_stride = v[5], a.head_stride = v[6], a.pos_stride = v[7];
    a.out_stride = a.heads * a.hd;
    if (a.rows < 0 || a.heads < 1 || a.hd < 1 || a.src_len < 1 || a.q_stride < a.heads * a.hd ||
        a.sent_stride < 0 || a.head_stride < 0 || a.pos_stride < 0) {
        PyErr_SetString(PyExc_ValueError, "attend_cross: inconsistent shapes");
        return NULL;
    }
    a.q = (const float *)(uintptr_t)q, a.keys = (const float *)(uintptr_t)keys;
    a.values = (const float *)(uintptr_t)values, a.bias = (const float *)(uintptr_t)bias;
    a.sentence = (const int64_t *)(uintptr_t)sentence, a.out = (float *)(uintptr_t)out;
    threads = clamp_threads(threads);
    float *scores = malloc(threads * a.src_len * sizeof(float));
    if (!scores) return PyErr_NoMemory();
    int avx2 = use_avx2(a.hd);
    Py_BEGIN_ALLOW_THREADS;
#ifdef HAVE_X86
    if (avx2)
        attend_cross_avx2(&a, scores, threads);
    else
#endif
        attend_cross_scalar(&a, scores, threads);
    Py_END_ALLOW_THREADS;
    (void)avx2;
    free(scores);
    Py_RETURN_NONE;
}

/* ---- Beam search: choose each sentence's next beams -------------------------------------------
 *
 * Input per row (n sentences x g rows): its `per_row` best words and their logits (best first,
 * from topk_logsumexp), the row's logsumexp, and the row's cumulative log-prob. Per sentence:
 * the `width` = min(2K, g * per_row) best continuations (ties: the earlier row and word first),
 * of which those that end (EOS, or the sentence is at its length limit) and rank among the first
 * K are reported as finished, and the K best that do not end become the next beams (padded
 * with -inf scores when fewer remain). */
static PyObject *beam_select(PyObject *self, PyObject *args) {
    unsigned long long pv, pw, plse, pscores, plimit, pns, pnr, pnw, pfc, pfs, pfr, pfw;
    long long n, g, per_row, k, eos;
    if (!PyArg_ParseTuple(args, "KKKLLLKKLLKKKKKKK", &pv, &pw, &plse, &n, &g, &per_row, &pscores,
                          &plimit, &k, &eos, &pns, &pnr, &pnw, &pfc, &pfs, &pfr, &pfw))
        return NULL;
    if (n < 0 || g < 1 || per_row < 1 || k < 1 || k > (1 << 20)) {
        PyErr_SetString(PyExc_ValueError, "beam_select: inconsistent shapes");
        return NULL;
    }
    const float *vals = (const float *)(uintptr_t)pv, *lse = (const float *)(uintptr_t)plse;
    const float *scores = (const float *)(uintptr_t)pscores;
    const int64_t *words = (const int64_t *)(uintptr_t)pw;
    const uint8_t *at_limit = (const uint8_t *)(uintptr_t)plimit;
    float *next_s = (float *)(uintptr_t)pns, *fin_s = (float *)(uintptr_t)pfs;
    int64_t *next_r = (int64_t *)(uintptr_t)pnr, *next_w = (int64_t *)(uintptr_t)pnw;
    int64_t *fin_count = (int64_t *)(uintptr_t)pfc, *fin_r = (int64_t *)(uintptr_t)pfr;
    int64_t *fin_w = (int64_t *)(uintptr_t)pfw;
    const int64_t width = 2 * k < g * per_row ? 2 * k : g * per_row;
    const int64_t keep = k < width ? k : width;
    float *top_s = malloc(width * sizeof(float));
    int64_t *top_c = malloc(width * sizeof(int64_t));
    if (!top_s || !top_c) {
        free(top_s), free(top_c);
        return PyErr_NoMemory();
    }
    long long total_finished = 0;
    for (int64_t i = 0; i < n; ++i) {
        int held = 0;
        for (int64_t c = 0; c < g * per_row; ++c) {  /* c = row-in-sentence * per_row + rank */
            const int64_t row = i * g + c / per_row;
            const float v = scores[row] + (vals[row * per_row + c % per_row] - lse[row]);
            if (held < width || v > top_s[width - 1]) {
                insert(top_s, top_c, (int)width, held, v, c);
                if (held < width) ++held;
            }
        }
        int64_t n_next = 0, n_fin = 0;
        for (int64_t r = 0; r < held; ++r) {
            const int64_t c = top_c[r], row = i * g + c / per_row;
            const int64_t w = words[row * per_row + c % per_row];
            const int live = top_s[r] > -INFINITY;
            const int ending = live && (w == eos || at_limit[i]);
            if (ending) {
                if (r < k) {
                    fin_s[i * k + n_fin] = top_s[r], fin_r[i * k + n_fin] = row;
                    fin_w[i * k + n_fin] = w, ++n_fin;
                }
            } else if (live && n_next < keep) {
                next_s[i * keep + n_next] = top_s[r], next_r[i * keep + n_next] = row;
                next_w[i * keep + n_next] = w, ++n_next;
            }
        }
        for (int64_t r = 0; r < held && n_next < keep; ++r) {  /* fewer than K left: -inf fill */
            const int64_t c = top_c[r], row = i * g + c / per_row;
            const int64_t w = words[row * per_row + c % per_row];
            if (top_s[r] > -INFINITY && !(w == eos || at_limit[i])) continue; /* already taken */
            next_s[i * keep + n_next] = -INFINITY, next_r[i * keep + n_next] = row;
            next_w[i * keep + n_next] = w, ++n_next;
        }
        fin_count[i] = n_fin;
        total_finished += n_fin;
    }
    free(top_s), free(top_c);
    return PyLong_FromLongLong(total_finished);
}

/* ---- Linear layers: out = [LayerNorm](x) W^T (+ bias) (ReLU) (+ residual) ----------------------
 *
 * W (n, k) is packed once (model_core.fused.pack_linear) into panels of LIN_NR output features:
 * panel p holds W[LIN_NR * p + j][i] at [p][i][j], zeros past n. A tile of up to LIN_MR rows
 * by one panel keeps its sums in registers over the whole of k. Every output is one sequential
 * chain of fused multiply-adds over i = 0..k-1, whatever the number of rows, the row's place
 * among them or the thread count, so a sentence gets the same bits in any batch (the service
 * relies on it: docs/DESIGN.md). Threads take contiguous ranges of panels; rows go in blocks
 * whose slice of x stays in cache while a thread's panels pass over it.
 *
 * Optionally each row of x first goes through a LayerNorm (the pre-norm before a projection),
 * computed once per row into a buffer that every thread then reads. */
#define LIN_NR 16
#define LIN_MR 6

typedef struct {
    const float *x;
    int64_t x_stride, rows, k;
    const float *w; /* packed panels */
    int64_t n;
    const float *bias;     /* (n,) or NULL */
    const float *residual; /* rows with res_stride, or NULL */
    int64_t res_stride;
    int relu;
    float *out;
    int64_t out_stride;
    const float *gamma, *beta; /* LayerNorm of each x row first (gamma != NULL), or none */
    float eps;
} linear_args;

static inline float linear_finish(const linear_args *a, float v, int64_t r, int64_t j) {
    if (a->bias) v += a->bias[j];
    if (a->relu) v = v < 0.0f ? 0.0f : v; /* NaN stays NaN */
    if (a->residual) v = a->residual[r * a->res_stride + j] + v;
    return v;
}

/* Rows [r0, r0 + mr) times panel p, from a tile of sums laid out LIN_MR x LIN_NR. */
static inline void linear_store(const linear_args *a, const float *sums, int mr, int64_t r0,
                                int64_t p) {
    const int64_t j0 = p * LIN_NR, cols = a->n - j0 < LIN_NR ? a->n - j0 : LIN_NR;
    for (int r = 0; r < mr; ++r)
        for (int64_t j = 0; j < cols; ++j)
            a->out[(r0 + r) * a->out_stride + j0 + j] =
                linear_finish(a, sums[r * LIN_NR + j], r0 + r, j0 + j);
}

static void linear_tile_scalar(const linear_args *a, int mr, int64_t r0, int64_t p) {
    float sums[LIN_MR * LIN_NR] = {0};
    const float *b = a->w + p * a->k * LIN_NR;
    for (int r = 0; r < mr; ++r) {
        const float *x = a->x + (r0 + r) * a->x_stride;
        float *s = sums + r * LIN_NR;
        for (int64_t i = 0; i < a->k; ++i)
            for (int j = 0; j < LIN_NR; ++j) s[j] += x[i] * b[i * LIN_NR + j];
    }
    linear_store(a, sums, mr, r0, p);
}

#ifdef HAVE_X86
/* One row's two accumulators of a tile: declared, updated for column i, and finished. */
#define LIN_ROW_DECL(r) __m256 c##r##0 = _mm256_setzero_ps(), c##r##1 = _mm256_setzero_ps();
#define LIN_ROW_FMA(r)                                                                       \
    if (mr > r) {                                                                            \
        const __m256 t = _mm256_broadcast_ss(x##r + i);                                      \
        c##r##0 = _mm256_fmadd_ps(t, b0, c##r##0);                                           \
        c##r##1 = _mm256_fmadd_ps(t, b1, c##r##1);                                           \
    }
#define LIN_ROW_STORE(r)                                                                     \
    if (mr > r) {                                                                            \
        if (full) {                                                                          \
            float *o = a->out + (r0 + r) * a->out_stride + j0;                               \
            if (a->bias) {                                                                   \
                c##r##0 = _mm256_add_ps(c##r##0, _mm256_loadu_ps(a->bias + j0));             \
                c##r##1 = _mm256_add_ps(c##r##1, _mm256_loadu_ps(a->bias + j0 + 8));         \
            }                                                                                \
            if (a->relu) { /* max(0, v) returns v when v is NaN */                           \
                c##r##0 = _mm256_max_ps(_mm256_setzero_ps(), c##r##0);                       \
                c##r##1 = _mm256_max_ps(_mm256_setzero_ps(), c##r##1);                       \
            }                                                                                \
            if (a->residual) {                                                               \
                const float *res = a->residual + (r0 + r) * a->res_stride + j0;              \
                c##r##0 = _mm256_add_ps(_mm256_loadu_ps(res), c##r##0);                      \
                c##r##1 = _mm256_add_ps(_mm256_loadu_ps(res + 8), c##r##1);                  \
            }                                                                                \
            _mm256_storeu_ps(o, c##r##0);                                                    \
            _mm256_storeu_ps(o + 8, c##r##1);                                                \
        } else {                                                                             \
            _mm256_storeu_ps(sums + r * LIN_NR, c##r##0);                                    \
            _mm256_storeu_ps(sums + r * LIN_NR + 8, c##r##1);                                \
        }                                                                                    \
    }

/* mr is a constant at each call site below, so the unused rows compile away. */
__attribute__((target("avx2,fma"), always_inline)) static inline void linear_tile_avx2(
    const linear_args *a, const int mr, int64_t r0, int64_t p, const float *next, const int fetch) {
    const float *b = a->w + p * a->k * LIN_NR;
    const float *x0 = a->x + r0 * a->x_stride;
    const float *x1 = x0 + a->x_stride, *x2 = x1 + a->x_stride, *x3 = x2 + a->x_stride;
    const float *x4 = x3 + a->x_stride, *x5 = x4 + a->x_stride;
    LIN_ROW_DECL(0) LIN_ROW_DECL(1) LIN_ROW_DECL(2) LIN_ROW_DECL(3) LIN_ROW_DECL(4) LIN_ROW_DECL(5)
    for (int64_t i = 0; i < a->k; ++i) {
        const __m256 b0 = _mm256_loadu_ps(b + i * LIN_NR), b1 = _mm256_loadu_ps(b + i * LIN_NR + 8);
        if (fetch) _mm_prefetch((const char *)(next + i * LIN_NR), _MM_HINT_T0);
        LIN_ROW_FMA(0) LIN_ROW_FMA(1) LIN_ROW_FMA(2) LIN_ROW_FMA(3) LIN_ROW_FMA(4) LIN_ROW_FMA(5)
    }
    const int64_t j0 = p * LIN_NR;
    const int full = j0 + LIN_NR <= a->n;
    float sums[LIN_MR * LIN_NR];
    LIN_ROW_STORE(0) LIN_ROW_STORE(1) LIN_ROW_STORE(2) LIN_ROW_STORE(3) LIN_ROW_STORE(4)
    LIN_ROW_STORE(5)
    if (!full) linear_store(a, sums, mr, r0, p);
}

/* `next`: the panel this thread computes next, fetched into cache while this one computes
 * (one line per column of k), so that reading weights from memory overlaps the arithmetic. */
__attribute__((target("avx2,fma"))) static void linear_rows_avx2(const linear_args *a, int64_t r0,
                                                                 int64_t r1, int64_t p,
                                                                 const float *next) {
    int64_t r = r0;
    if (r + LIN_MR <= r1) { /* the first tile fetches the next panel, the others find it cached */
        linear_tile_avx2(a, 6, r, p, next, 1);
        for (r += LIN_MR; r + LIN_MR <= r1; r += LIN_MR) linear_tile_avx2(a, 6, r, p, next, 0);
    }
    const int fetch = r == r0;
    switch (r1 - r) {
    case 5: linear_tile_avx2(a, 5, r, p, next, fetch); break;
    case 4: linear_tile_avx2(a, 4, r, p, next, fetch); break;
    case 3: linear_tile_avx2(a, 3, r, p, next, fetch); break;
    case 2: linear_tile_avx2(a, 2, r, p, next, fetch); break;
    case 1: linear_tile_avx2(a, 1, r, p, next, fetch); break;
    default: break;
    }
}

/* One row times LIN_WIDE consecutive panels, for a product of one row (greedy search on one
 * sentence): a 1-row tile keeps only two sums in flight, and each multiply-add waits for the
 * previous one; across four panels, eight chains run side by side. Each output's chain is the
 * same as in any other tile. (A last row after full tiles stays in the panel loop, where its
 * panel is already in cache.) */
#define LIN_WIDE 4
__attribute__((target("avx2,fma"))) static void linear_row_wide_avx2(const linear_args *a,
                                                                     int64_t r, int64_t p) {
    const int64_t k = a->k, stride = k * LIN_NR;
    const float *b = a->w + p * stride, *x = a->x + r * a->x_stride;
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00;
    __m256 c20 = c00, c21 = c00, c30 = c00, c31 = c00;
    for (int64_t i = 0; i < k; ++i) {
        const __m256 t = _mm256_broadcast_ss(x + i);
        const float *bi = b + i * LIN_NR;
        c00 = _mm256_fmadd_ps(t, _mm256_loadu_ps(bi), c00);
        c01 = _mm256_fmadd_ps(t, _mm256_loadu_ps(bi + 8), c01);
        c10 = _mm256_fmadd_ps(t, _mm256_loadu_ps(bi + stride), c10);
        c11 = _mm256_fmadd_ps(t, _mm256_loadu_ps(bi + stride + 8), c11);
        c20 = _mm256_fmadd_ps(t, _mm256_loadu_ps(bi + 2 * stride), c20);
        c21 = _mm256_fmadd_ps(t, _mm256_loadu_ps(bi + 2 * stride + 8), c21);
        c30 = _mm256_fmadd_ps(t, _mm256_loadu_ps(bi + 3 * stride), c30);
        c31 = _mm256_fmadd_ps(t, _mm256_loadu_ps(bi + 3 * stride + 8), c31);
    }
    float sums[LIN_WIDE][LIN_MR * LIN_NR];
    _mm256_storeu_ps(sums[0], c00), _mm256_storeu_ps(sums[0] + 8, c01);
    _mm256_storeu_ps(sums[1], c10), _mm256_storeu_ps(sums[1] + 8, c11);
    _mm256_storeu_ps(sums[2], c20), _mm256_storeu_ps(sums[2] + 8, c21);
    _mm256_storeu_ps(sums[3], c30), _mm256_storeu_ps(sums[3] + 8, c31);
    for (int j = 0; j < LIN_WIDE; ++j) linear_store(a, sums[j], 1, r, p + j);
}

/* Row r times panels [p0, p1): four at a time, then one at a time. */
__attribute__((target("avx2,fma"))) static void linear_lone_row_avx2(const linear_args *a,
                                                                     int64_t r, int64_t p0,
                                                                     int64_t p1) {
    int64_t p = p0;
    for (; p + LIN_WIDE <= p1; p += LIN_WIDE) linear_row_wide_avx2(a, r, p);
    for (; p < p1; ++p) linear_tile_avx2(a, 1, r, p, a->w, 0);
}

/* AVX-512: a tile of 12 rows x one panel, one 16-float register per row, for twice the
 * AVX2 tile's multiply-adds per instruction. Each output is the same chain of fused
 * multiply-adds as in the AVX2 and 1-row tiles, finished with the same adds in the same order,
 * so the bits do not depend on which tile computed a row (rows left over after the 12-row
 * tiles go to the AVX2 tiles). */
#define LIN_MR512 12
#define LIN_ACC512(r) __m512 c##r = _mm512_setzero_ps();
#define LIN_FMA512(r) c##r = _mm512_fmadd_ps(_mm512_set1_ps(x0[(r) * s + i]), bv, c##r);
#define LIN_STORE512(r)                                                                      \
    if (full) {                                                                              \
        if (a->bias) c##r = _mm512_add_ps(c##r, _mm512_loadu_ps(a->bias + j0));              \
        if (a->relu) c##r = _mm512_max_ps(_mm512_setzero_ps(), c##r);                        \
        if (a->residual)                                                                     \
            c##r = _mm512_add_ps(                                                            \
                _mm512_loadu_ps(a->residual + (r0 + (r)) * a->res_stride + j0), c##r);       \
        _mm512_storeu_ps(a->out + (r0 + (r)) * a->out_stride + j0, c##r);                    \
    } else {                                                                                 \
        _mm512_storeu_ps(sums + (r) * LIN_NR, c##r);                                         \
    }

__attribute__((target("avx512f"))) static void linear_tile_avx512(const linear_args *a,
                                                                  int64_t r0, int64_t p,
                                                                  const float *next,
                                                                  const int fetch) {
    const float *b = a->w + p * a->k * LIN_NR;
    const float *x0 = a->x + r0 * a->x_stride;
    const int64_t s = a->x_stride;
    LIN_ACC512(0) LIN_ACC512(1) LIN_ACC512(2) LIN_ACC512(3) LIN_ACC512(4) LIN_ACC512(5)
    LIN_ACC512(6) LIN_ACC512(7) LIN_ACC512(8) LIN_ACC512(9) LIN_ACC512(10) LIN_ACC512(11)
    for (int64_t i = 0; i < a->k; ++i) {
        const __m512 bv = _mm512_loadu_ps(b + i * LIN_NR);
        if (fetch) _mm_prefetch((const char *)(next + i * LIN_NR), _MM_HINT_T0);
        LIN_FMA512(0) LIN_FMA512(1) LIN_FMA512(2) LIN_FMA512(3) LIN_FMA512(4) LIN_FMA512(5)
        LIN_FMA512(6) LIN_FMA512(7) LIN_FMA512(8) LIN_FMA512(9) LIN_FMA512(10) LIN_FMA512(11)
    }
    const int64_t j0 = p * LIN_NR;
    const int full = j0 + LIN_NR <= a->n;
    float sums[LIN_MR512 * LIN_NR];
    LIN_STORE512(0) LIN_STORE512(1) LIN_STORE512(2) LIN_STORE512(3) LIN_STORE512(4)
    LIN_STORE512(5) LIN_STORE512(6) LIN_STORE512(7) LIN_STORE512(8) LIN_STORE512(9)
    LIN_STORE512(10) LIN_STORE512(11)
    if (!full) linear_store(a, sums, LIN_MR512, r0, p);
}

__attribute__((target("avx512f,avx2,fma"))) static void linear_rows_avx512(const linear_args *a,
                                                                          int64_t r0, int64_t r1,
                                                                          int64_t p,
                                                                          const float *next) {
    int64_t r = r0;
    if (r + LIN_MR512 <= r1) {
        linear_tile_avx512(a, r, p, next, 1);
        for (r += LIN_MR512; r + LIN_MR512 <= r1; r += LIN_MR512)
            linear_tile_avx512(a, r, p, next, 0);
    }
    if (r < r1) linear_rows_avx2(a, r, r1, p, next);
}
#endif

static void linear_rows_scalar(const linear_args *a, int64_t r0, int64_t r1, int64_t p) {
    for (int64_t r = r0; r < r1; r += LIN_MR)
        linear_tile_scalar(a, (int)(r1 - r < LIN_MR ? r1 - r : LIN_MR), r, p);
}

/* One row's LayerNorm, (x - mean) / sqrt(var + eps) * gamma + beta, into y. */
static void layer_norm_row_scalar(const float *x, int64_t k, const float *gamma, const float *beta,
                                  float eps, float *y) {
    float sum = 0.0f, sq = 0.0f;
    for (int64_t i = 0; i < k; ++i) sum += x[i];
    const float mean = sum / (float)k;
    for (int64_t i = 0; i < k; ++i) sq += (x[i] - mean) * (x[i] - mean);
    const float rstd = 1.0f / sqrtf(sq / (float)k + eps);
    for (int64_t i = 0; i < k; ++i) y[i] = (x[i] - mean) * rstd * gamma[i] + beta[i];
}

#ifdef HAVE_X86
__attribute__((target("avx2,fma"))) static float hsum_avx2(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* k % 8 == 0 */
__attribute__((target("avx2,fma"))) static void layer_norm_row_avx2(const float *x, int64_t k,
                                                                    const float *gamma,
                                                                    const float *beta, float eps,
                                                                    float *y) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < k; i += 8) acc = _mm256_add_ps(acc, _mm256_loadu_ps(x + i));
    const float mean = hsum_avx2(acc) / (float)k;
    const __m256 m = _mm256_set1_ps(mean);
    acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < k; i += 8) {
        const __m256 c = _mm256_sub_ps(_mm256_loadu_ps(x + i), m);
        acc = _mm256_fmadd_ps(c, c, acc);
    }
    const __m256 r = _mm256_set1_ps(1.0f / sqrtf(hsum_avx2(acc) / (float)k + eps));
    for (int64_t i = 0; i < k; i += 8) {
        const __m256 c = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), m), r);
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(c, _mm256_loadu_ps(gamma + i),
                                                _mm256_loadu_ps(beta + i)));
    }
}
#endif

/* `normed`: room for rows x k floats where a->gamma is set (the normalised rows). */
/* isa: 0 scalar, 1 AVX2/FMA, 2 AVX-512 tiles as well (same bits as 1). */
static void linear_run(const linear_args *in, int isa, int threads, float *normed) {
    const int avx2 = isa >= 1;
    linear_args normed_args = *in;
    const linear_args *a = &normed_args;
    if (in->gamma) normed_args.x = normed, normed_args.x_stride = in->k;
    const int64_t panels = (a->n + LIN_NR - 1) / LIN_NR;
    /* rows per block: their slice of x within ~192 KB, a whole number of tiles */
    int64_t block = (192 * 1024 / 4) / a->k; /* k >= 1: checked by the caller */
    block = block < LIN_MR ? LIN_MR : block - block % LIN_MR;
    if (threads > panels && !in->gamma) threads = (int)panels;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
#endif
    {
#ifdef _OPENMP
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
#else
        const int t = 0, nt = 1;
#endif
        if (in->gamma) { /* every thread needs every row: normalise them all first */
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
            for (int64_t r = 0; r < in->rows; ++r) {
                const float *x = in->x + r * in->x_stride;
#ifdef HAVE_X86
                if (avx2 && in->k % 8 == 0)
                    layer_norm_row_avx2(x, in->k, in->gamma, in->beta, in->eps, normed + r * in->k);
                else
#endif
                    layer_norm_row_scalar(x, in->k, in->gamma, in->beta, in->eps,
                                          normed + r * in->k);
            }
        }
        const int64_t p0 = panels * t / nt, p1 = panels * (t + 1) / nt;
        for (int64_t m = 0; m < a->rows; m += block) {
            const int64_t m1 = m + block < a->rows ? m + block : a->rows;
#ifdef HAVE_X86
            if (avx2 && m1 - m == 1) { /* one row: four panels at a time */
                linear_lone_row_avx2(a, m, p0, p1);
                continue;
            }
#endif
            for (int64_t p = p0; p < p1; ++p) {
#ifdef HAVE_X86
                if (isa >= 2)
                    linear_rows_avx512(a, m, m1, p,
                                       a->w + (p + 1 < p1 ? p + 1 : p) * a->k * LIN_NR);
                else if (avx2)
                    linear_rows_avx2(a, m, m1, p, a->w + (p + 1 < p1 ? p + 1 : p) * a->k * LIN_NR);
                else
#endif
                    linear_rows_scalar(a, m, m1, p);
            }
        }
    }
}

/* The widest code linear_run may use here: the CPU's, capped at max_isa. */
static int linear_isa(int max_isa) {
    int isa = 0;
#ifdef HAVE_X86
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        isa = __builtin_cpu_supports("avx512f") ? 2 : 1;
#endif
    return isa > max_isa ? (max_isa < 0 ? 0 : max_isa) : isa;
}

static PyObject *linear(PyObject *self, PyObject *args) {
    unsigned long long x, w, bias, residual, out, gamma, beta;
    long long v[6];
    linear_args a;
    int threads, max_isa = 2;
    if (!PyArg_ParseTuple(args, "KLLLKLKKLiKLiKKf|i", &x, &v[0], &v[1], &v[2], &w, &v[3], &bias,
                          &residual, &v[4], &a.relu, &out, &v[5], &threads, &gamma, &beta,
                          &a.eps, &max_isa))
        return NULL;
    a.x_stride = v[0], a.rows = v[1], a.k = v[2], a.n = v[3], a.res_stride = v[4];
    a.out_stride = v[5];
    if (a.rows < 0 || a.k < 1 || a.n < 1 || a.x_stride < a.k || a.out_stride < a.n ||
        (residual && a.res_stride < a.n) || (gamma && !beta)) {
        PyErr_SetString(PyExc_ValueError, "linear: inconsistent shapes");
        return NULL;
    }
    a.x = (const float *)(uintptr_t)x, a.w = (const float *)(uintptr_t)w;
    a.bias = (const float *)(uintptr_t)bias, a.residual = (const float *)(uintptr_t)residual;
    a.out = (float *)(uintptr_t)out;
    a.gamma = (const float *)(uintptr_t)gamma, a.beta = (const float *)(uintptr_t)beta;
    threads = clamp_threads(threads);
    const int isa = linear_isa(max_isa);
    float *normed = NULL;
    if (a.gamma && a.rows) {
        normed = malloc(a.rows * a.k * sizeof(float));
        if (!normed) return PyErr_NoMemory();
    }
    if (a.rows) {
        Py_BEGIN_ALLOW_THREADS;
        linear_run(&a, isa, threads, normed);
        Py_END_ALLOW_THREADS;
    }
    free(normed);
    return PyLong_FromLong(isa);
}

/* ---- One whole decoder step ------------------------------------------------------------------
 *
 * A pre-norm decoder with ReLU feed-forward layers, every linear layer in packed panels, over
 * the slot cache: the embedding, each layer's three sub-layers and the generator in one call.
 * A step of one sentence is ~25 kernels of a few microseconds each; called one by one from
 * Python (model.DecoderLayer.step), the calls between them cost as much as the kernels. Each
 * part below is the same kernel, in the same order, as its separate call, so the step computes
 * the same bits (tests/test_fused_stack.py).
 *
 * plan: int64 addresses, STEP_PER_LAYER per layer (the enum below), then STEP_GLOBAL. */
enum {
    SP_QKV_W, SP_QKV_B, SP_SELF_G, SP_SELF_B, SP_OUT_W, SP_OUT_B,
    SP_CQ_W, SP_CQ_B, SP_CROSS_G, SP_CROSS_B, SP_COUT_W, SP_COUT_B,
    SP_FFN_G, SP_FFN_B, SP_W1, SP_B1, SP_W2, SP_B2, STEP_PER_LAYER
};
enum { SG_NORM_G, SG_NORM_B, SG_GEN_W, SG_GEN_B, SG_EMBED, SG_POSITIONS, STEP_GLOBAL };

#define PLAN_F(i) ((const float *)(uintptr_t)plan[i])

typedef struct {
    const int64_t *plan, *tokens, *row_t, *suppress;
    int64_t layers, d, heads, dff, vocab, rows, t, n_suppress;
    float eps, embed_scale;
    cached_args self_attn; /* per-call parts; layer and out filled in per layer */
    cross_args cross;      /* likewise: keys, values, q and out per layer */
    const int64_t *cross_kv; /* (layers, 2) addresses of each layer's keys and values */
    float *logits;
    int threads, isa, attn_avx2;
} step_args;

/* One embedded row: e * scale, rounded, plus the position, rounded (torch's mul, then add;
 * never contracted into one fused multiply-add, as GCC would where the target has one). */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("fp-contract=off")))
#endif
static void embed_row(const float *e, float scale, const float *p, int64_t d, float *o) {
    for (int64_t i = 0; i < d; ++i) {
        const float scaled = e[i] * scale;
        o[i] = scaled + p[i];
    }
}

static void step_embed(const step_args *s, float *x) {
    const int64_t *plan = s->plan + s->layers * STEP_PER_LAYER;
    const float *embed = PLAN_F(SG_EMBED), *pos = PLAN_F(SG_POSITIONS);
    for (int64_t r = 0; r < s->rows; ++r)
        embed_row(embed + s->tokens[r] * s->d, s->embed_scale,
                  pos + (s->row_t ? s->row_t[r] : s->t) * s->d, s->d, x + r * s->d);
}

/* out = [LayerNorm(gamma, beta)](x) W^T + b [ReLU] [+ residual], as PackedWeight.__call__. */
static void step_linear(const step_args *s, const float *x, int64_t k, const float *w,
                        const float *b, int64_t n, const float *gamma, const float *beta,
                        int relu, const float *residual, float *out, float *normed) {
    linear_args a = {0};
    a.x = x, a.x_stride = k, a.rows = s->rows, a.k = k, a.w = w, a.n = n, a.bias = b;
    a.residual = residual, a.res_stride = n, a.relu = relu, a.out = out, a.out_stride = n;
    a.gamma = gamma, a.beta = beta, a.eps = s->eps;
    linear_run(&a, s->isa, s->threads, normed);
}

static void step_run(step_args *s, float *work, int64_t *chains, float *scores) {
    const int64_t d = s->d, rows = s->rows;
    float *x = work, *qkv = x + rows * d, *att = qkv + rows * 3 * d, *h = att + rows * d;
    float *normed = h + rows * s->dff;
    step_embed(s, x);
    for (int64_t l = 0; l < s->layers; ++l) {
        const int64_t *plan = s->plan + l * STEP_PER_LAYER;
        step_linear(s, x, d, PLAN_F(SP_QKV_W), PLAN_F(SP_QKV_B), 3 * d, PLAN_F(SP_SELF_G),
                    PLAN_F(SP_SELF_B), 0, NULL, qkv, normed);
        s->self_attn.qkv = qkv, s->self_attn.layer = l, s->self_attn.out = att;
#ifdef HAVE_X86
        if (s->attn_avx2)
            attend_cached_avx2(&s->self_attn, chains, scores, s->threads);
        else
#endif
            attend_cached_scalar(&s->self_attn, chains, scores, s->threads);
        step_linear(s, att, d, PLAN_F(SP_OUT_W), PLAN_F(SP_OUT_B), d, NULL, NULL, 0, x, x,
                    normed);
        step_linear(s, x, d, PLAN_F(SP_CQ_W), PLAN_F(SP_CQ_B), d, PLAN_F(SP_CROSS_G),
                    PLAN_F(SP_CROSS_B), 0, NULL, qkv, normed);
        s->cross.q = qkv, s->cross.out = att;
        s->cross.keys = (const float *)(uintptr_t)s->cross_kv[2 * l];
        s->cross.values = (const float *)(uintptr_t)s->cross_kv[2 * l + 1];
#ifdef HAVE_X86
        if (s->attn_avx2)
            attend_cross_avx2(&s->cross, scores, s->threads);
        else
#endif
            attend_cross_scalar(&s->cross, scores, s->threads);
        step_linear(s, att, d, PLAN_F(SP_COUT_W), PLAN_F(SP_COUT_B), d, NULL, NULL, 0, x, x,
                    normed);
        step_linear(s, x, d, PLAN_F(SP_W1), PLAN_F(SP_B1), s->dff, PLAN_F(SP_FFN_G),
                    PLAN_F(SP_FFN_B), 1, NULL, h, normed);
        step_linear(s, h, s->dff, PLAN_F(SP_W2), PLAN_F(SP_B2), d, NULL, NULL, 0, x, x, normed);
    }
    const int64_t *plan = s->plan + s->layers * STEP_PER_LAYER;
    step_linear(s, x, d, PLAN_F(SG_GEN_W), PLAN_F(SG_GEN_B), s->vocab, PLAN_F(SG_NORM_G),
                PLAN_F(SG_NORM_B), 0, NULL, s->logits, normed);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < s->n_suppress; ++j)
            s->logits[r * s->vocab + s->suppress[j]] = -INFINITY;
}

static PyObject *decoder_step(PyObject *self, PyObject *args) {
    unsigned long long plan, tokens, row_t, kv, slots, history, cross_kv, bias, sentence;
    unsigned long long suppress, logits;
    long long layers, d, heads, dff, vocab, positions, rows, t, slots_total, capacity, src_len;
    long long sent_stride, head_stride, pos_stride, n_suppress, sentences;
    float eps, embed_scale, self_scale;
    int threads, max_isa;
    if (!PyArg_ParseTuple(args, "KLLLLLLfffKLLKKLLKKKLLLLLKKKLKii", &plan, &layers, &d, &heads,
                          &dff, &vocab, &positions, &eps, &embed_scale, &self_scale, &tokens,
                          &rows, &t, &row_t, &kv, &slots_total, &capacity, &slots, &history,
                          &cross_kv, &sentences, &src_len, &sent_stride, &head_stride,
                          &pos_stride, &bias, &sentence, &suppress, &n_suppress, &logits,
                          &threads, &max_isa))
        return NULL;
    if (layers < 1 || heads < 1 || d < 1 || d % heads || dff < 1 || vocab < 1 || rows < 0 ||
        t < 0 || t >= capacity || slots_total < 1 || src_len < 1 || n_suppress < 0 ||
        sentences < 0) {
        PyErr_SetString(PyExc_ValueError, "decoder_step: inconsistent shapes");
        return NULL;
    }
    step_args s = {0};
    s.plan = (const int64_t *)(uintptr_t)plan, s.tokens = (const int64_t *)(uintptr_t)tokens;
    s.row_t = (const int64_t *)(uintptr_t)row_t;
    s.suppress = (const int64_t *)(uintptr_t)suppress;
    s.layers = layers, s.d = d, s.heads = heads, s.dff = dff, s.vocab = vocab, s.rows = rows;
    s.t = t, s.n_suppress = n_suppress, s.eps = eps, s.embed_scale = embed_scale;
    s.cross_kv = (const int64_t *)(uintptr_t)cross_kv;
    s.logits = (float *)(uintptr_t)logits;
    const int64_t *slot = (const int64_t *)(uintptr_t)slots;
    const int64_t *sent = (const int64_t *)(uintptr_t)sentence;
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t p = s.row_t ? s.row_t[r] : t;
        if (s.tokens[r] < 0 || s.tokens[r] >= vocab || p < 0 || p > t || p >= positions) {
            PyErr_SetString(PyExc_IndexError, "decoder_step: a token id or position is out of range");
            return NULL;
        }
        if (slot[r] < 0 || slot[r] >= slots_total || sent[r] < 0 || sent[r] >= sentences) {
            PyErr_SetString(PyExc_IndexError, "decoder_step: a row's slot or sentence is out of range");
            return NULL;
        }
    }
    for (int64_t j = 0; j < n_suppress; ++j)
        if (s.suppress[j] < 0 || s.suppress[j] >= vocab) {
            PyErr_SetString(PyExc_IndexError, "decoder_step: a suppressed id is out of range");
            return NULL;
        }
    const int64_t hd = d / heads;
    cached_args *c = &s.self_attn;
    c->qkv_stride = 3 * d, c->rows = rows, c->heads = heads, c->hd = hd;
    c->slots_total = slots_total, c->capacity = capacity, c->t = t;
    c->kv = (float *)(uintptr_t)kv, c->slots = (const int64_t *)(uintptr_t)slots;
    c->history = (const int64_t *)(uintptr_t)history, c->row_t = s.row_t;
    c->scale = self_scale, c->out_stride = d;
    cross_args *x = &s.cross;
    x->q_stride = d, x->rows = rows, x->heads = heads, x->hd = hd, x->src_len = src_len;
    x->sent_stride = sent_stride, x->head_stride = head_stride, x->pos_stride = pos_stride;
    x->scale = 1.0f, x->bias = (const float *)(uintptr_t)bias;
    x->sentence = (const int64_t *)(uintptr_t)sentence, x->out_stride = d;
    threads = clamp_threads(threads);
    s.threads = threads, s.attn_avx2 = use_avx2(hd);
    s.isa = linear_isa(max_isa);
    if (!rows) Py_RETURN_NONE;
    const int64_t per_row = 6 * d + dff; /* x, q|k|v, attention, hidden, normalised */
    const int64_t score_len = heads * (t + 1) > src_len ? heads * (t + 1) : src_len;
    float *work = malloc(rows * per_row * sizeof(float));
    int64_t *chains = malloc(threads * (t + 1) * sizeof(int64_t));
    float *scores = malloc(threads * score_len * sizeof(float));
    if (!work || !chains || !scores) {
        free(work), free(chains), free(scores);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS;
    step_run(&s, work, chains, scores);
    Py_END_ALLOW_THREADS;
    free(work), free(chains), free(scores);
    Py_RETURN_NONE;
}

/* ---- The whole encoder, and the decoder's cross-attention keys/values ------------------------
 *
 * encoder_stack: a pre-norm ReLU encoder with packed panels, on the real tokens of a padded
 * (B, S) batch only, as model.EncoderLayer.forward_tokens computes it with the kernels (the same
 * kernels in the same order, so the same bits), then the final LayerNorm (this file's, where
 * the per-layer path uses torch's) into memory (B, S, d), which the caller zero-fills.
 * plan: ENC_PER_LAYER addresses per layer, then ENC_GLOBAL. */
enum {
    EP_QKV_W, EP_QKV_B, EP_ATT_G, EP_ATT_B, EP_OUT_W, EP_OUT_B,
    EP_FFN_G, EP_FFN_B, EP_W1, EP_B1, EP_W2, EP_B2, ENC_PER_LAYER
};
enum { EG_NORM_G, EG_NORM_B, EG_EMBED, EG_POSITIONS, ENC_GLOBAL };

static void layer_norm_rows(const step_args *s, const float *x, const float *gamma,
                            const float *beta, float *y, const int64_t *dest, int64_t d) {
    for (int64_t r = 0; r < s->rows; ++r) {
        float *out = y + (dest ? dest[r] : r) * d;
#ifdef HAVE_X86
        if (s->isa >= 1 && d % 8 == 0)
            layer_norm_row_avx2(x + r * d, d, gamma, beta, s->eps, out);
        else
#endif
            layer_norm_row_scalar(x + r * d, d, gamma, beta, s->eps, out);
    }
}

static PyObject *encoder_stack(PyObject *self, PyObject *args) {
    unsigned long long plan_p, src_p, mask_p, memory_p;
    long long layers, d, heads, dff, vocab, positions, b, sl;
    float eps, embed_scale, scale;
    int threads, max_isa;
    if (!PyArg_ParseTuple(args, "KLLLLLLfffKKLLKii", &plan_p, &layers, &d, &heads, &dff,
                          &vocab, &positions, &eps, &embed_scale, &scale, &src_p, &mask_p, &b,
                          &sl, &memory_p, &threads, &max_isa))
        return NULL;
    if (layers < 1 || heads < 1 || d < 1 || d % heads || dff < 1 || vocab < 1 || b < 0 ||
        sl < 0 || sl > positions) {
        PyErr_SetString(PyExc_ValueError, "encoder_stack: inconsistent shapes");
        return NULL;
    }
    const int64_t *plan = (const int64_t *)(uintptr_t)plan_p;
    const int64_t *src = (const int64_t *)(uintptr_t)src_p;
    const uint8_t *mask = (const uint8_t *)(uintptr_t)mask_p;
    float *memory = (float *)(uintptr_t)memory_p;
    int64_t t_count = 0;
    for (int64_t i = 0; i < b * sl; ++i) {
        if (mask[i] && (src[i] < 0 || src[i] >= vocab)) {
            PyErr_SetString(PyExc_IndexError, "encoder_stack: a token id is out of range");
            return NULL;
        }
        t_count += mask[i] != 0;
    }
    if (!t_count) Py_RETURN_NONE;
    step_args s = {0};
    s.rows = t_count, s.eps = eps, s.threads = clamp_threads(threads);
    s.isa = linear_isa(max_isa);
    const int64_t hd = d / heads, t = t_count;
    /* x, q|k|v, attention, hidden, normalised; k|v padded to (B, S); bias (B, S); indices */
    const int64_t floats = t * (6 * d + dff) + b * sl * (2 * d + 1);
    float *work = malloc(floats * sizeof(float));
    int64_t *index = malloc(2 * t * sizeof(int64_t));
    float *scores = malloc(s.threads * sl * sizeof(float));
    if (!work || !index || !scores) {
        free(work), free(index), free(scores);
        return PyErr_NoMemory();
    }
    float *x = work, *qkv = x + t * d, *att = qkv + t * 3 * d, *h = att + t * d;
    float *normed = h + t * dff, *kv = normed + t * d, *bias = kv + b * sl * 2 * d;
    int64_t *flat = index, *sentence = index + t;
    Py_BEGIN_ALLOW_THREADS;
    const int64_t *g = plan + layers * ENC_PER_LAYER;
    const float *embed = (const float *)(uintptr_t)g[EG_EMBED];
    const float *pos = (const float *)(uintptr_t)g[EG_POSITIONS];
    int64_t r = 0;
    for (int64_t i = 0; i < b * sl; ++i) {
        bias[i] = mask[i] ? 0.0f : -INFINITY;
        if (!mask[i]) continue;
        flat[r] = i, sentence[r] = i / sl;
        embed_row(embed + src[i] * d, embed_scale, pos + (i % sl) * d, d, x + r * d);
        ++r;
    }
    memset(kv, 0, b * sl * 2 * d * sizeof(float));
    cross_args c = {0};
    c.q = qkv, c.q_stride = 3 * d, c.rows = t, c.heads = heads, c.hd = hd, c.src_len = sl;
    c.sent_stride = sl * 2 * d, c.head_stride = hd, c.pos_stride = 2 * d;
    c.scale = scale, c.keys = kv, c.values = kv + d, c.bias = bias;
    c.sentence = sentence, c.out = att, c.out_stride = d;
    const int attn_avx2 = use_avx2(hd);
    for (int64_t l = 0; l < layers; ++l) {
        const int64_t *plan = (const int64_t *)(uintptr_t)plan_p + l * ENC_PER_LAYER;
        step_linear(&s, x, d, PLAN_F(EP_QKV_W), PLAN_F(EP_QKV_B), 3 * d, PLAN_F(EP_ATT_G),
                    PLAN_F(EP_ATT_B), 0, NULL, qkv, normed);
        for (int64_t i = 0; i < t; ++i)
            memcpy(kv + flat[i] * 2 * d, qkv + i * 3 * d + d, 2 * d * sizeof(float));
#ifdef HAVE_X86
        if (attn_avx2)
            attend_cross_avx2(&c, scores, s.threads);
        else
#endif
            attend_cross_scalar(&c, scores, s.threads);
        (void)attn_avx2;
        step_linear(&s, att, d, PLAN_F(EP_OUT_W), PLAN_F(EP_OUT_B), d, NULL, NULL, 0, x, x,
                    normed);
        step_linear(&s, x, d, PLAN_F(EP_W1), PLAN_F(EP_B1), dff, PLAN_F(EP_FFN_G),
                    PLAN_F(EP_FFN_B), 1, NULL, h, normed);
        step_linear(&s, h, dff, PLAN_F(EP_W2), PLAN_F(EP_B2), d, NULL, NULL, 0, x, x, normed);
    }
    layer_norm_rows(&s, x, (const float *)(uintptr_t)g[EG_NORM_G],
                    (const float *)(uintptr_t)g[EG_NORM_B], memory, flat, d);
    Py_END_ALLOW_THREADS;
    free(work), free(index), free(scores);
    Py_RETURN_NONE;
}

/* cross_kv: every decoder layer's cross-attention keys (times `scale`) and values from the
 * encoder memory's real positions, with one packed weight holding each layer's key then value
 * projection (2 * layers * d outputs): out_k and out_v (layers, B, heads, S, head_dim), which
 * the caller zero-fills (padding stays 0; the bias masks it). */
static PyObject *cross_kv(PyObject *self, PyObject *args) {
    unsigned long long w_p, bias_p, memory_p, mask_p, k_p, v_p;
    long long layers, d, heads, b, sl;
    float scale;
    int threads, max_isa;
    if (!PyArg_ParseTuple(args, "KKLLLKKLLfKKii", &w_p, &bias_p, &layers, &d, &heads, &memory_p,
                          &mask_p, &b, &sl, &scale, &k_p, &v_p, &threads, &max_isa))
        return NULL;
    if (layers < 1 || heads < 1 || d < 1 || d % heads || b < 0 || sl < 0) {
        PyErr_SetString(PyExc_ValueError, "cross_kv: inconsistent shapes");
        return NULL;
    }
    const uint8_t *mask = (const uint8_t *)(uintptr_t)mask_p;
    const float *memory = (const float *)(uintptr_t)memory_p;
    float *out_k = (float *)(uintptr_t)k_p, *out_v = (float *)(uintptr_t)v_p;
    int64_t t = 0;
    for (int64_t i = 0; i < b * sl; ++i) t += mask[i] != 0;
    if (!t) Py_RETURN_NONE;
    const int64_t n = 2 * layers * d, hd = d / heads;
    float *rows = malloc(t * (d + n) * sizeof(float));
    int64_t *flat = malloc(t * sizeof(int64_t));
    if (!rows || !flat) {
        free(rows), free(flat);
        return PyErr_NoMemory();
    }
    float *kv = rows + t * d;
    step_args s = {0};
    s.rows = t, s.threads = clamp_threads(threads);
    s.isa = linear_isa(max_isa);
    Py_BEGIN_ALLOW_THREADS;
    for (int64_t i = 0, r = 0; i < b * sl; ++i)
        if (mask[i]) flat[r] = i, memcpy(rows + r * d, memory + i * d, d * sizeof(float)), ++r;
    step_linear(&s, rows, d, (const float *)(uintptr_t)w_p, (const float *)(uintptr_t)bias_p, n,
                NULL, NULL, 0, NULL, kv, NULL);
    const int64_t per_layer = b * heads * sl * hd;
    for (int64_t r = 0; r < t; ++r) {
        const int64_t sentence = flat[r] / sl, p = flat[r] % sl;
        for (int64_t l = 0; l < layers; ++l) {
            const float *k = kv + r * n + l * 2 * d, *v = k + d;
            for (int64_t hh = 0; hh < heads; ++hh) {
                const int64_t at = l * per_layer + ((sentence * heads + hh) * sl + p) * hd;
                for (int64_t j = 0; j < hd; ++j) out_k[at + j] = k[hh * hd + j] * scale;
                memcpy(out_v + at, v + hh * hd, hd * sizeof(float));
            }
        }
    }
    Py_END_ALLOW_THREADS;
    free(rows), free(flat);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"topk_logsumexp", topk_logsumexp, METH_VARARGS,
     "topk_logsumexp(src, rows, vocab, row_stride, k, vals, idx, lse, threads=1): raw "
     "float32/int64 "
     "pointers; use model_core.fused.topk_logsumexp instead."},
    {"beam_select", beam_select, METH_VARARGS,
     "beam_select(...): raw pointers; use model_core.fused.beam_select instead."},
    {"linear", linear, METH_VARARGS,
     "linear(x, x_stride, rows, k, packed_w, n, bias, residual, residual_stride, relu, out, "
     "out_stride, threads, gamma, beta, eps, max_isa=2): out = LayerNorm?(x) W^T (+ bias) "
     "(relu) (+ residual) on raw pointers (0 = none); use model_core.fused.PackedWeight "
     "instead. max_isa: 0 scalar, 1 AVX2, 2 AVX-512 where the CPU has them. Returns the "
     "level that ran."},
    {"decoder_step", decoder_step, METH_VARARGS,
     "decoder_step(plan, layers, d, heads, d_ff, vocab, positions, eps, embed_scale, scale, "
     "tokens, rows, t, row_t, kv, slots, capacity, row_slots, history, cross_kv, sentences, "
     "src_len, sentence_stride, head_stride, position_stride, bias, sentence, suppress, "
     "n_suppress, logits, threads, max_isa): a whole pre-norm decoder step (raw pointers); "
     "use model_core.fused_stack.DecoderStep instead."},
    {"encoder_stack", encoder_stack, METH_VARARGS,
     "encoder_stack(plan, layers, d, heads, d_ff, vocab, positions, eps, embed_scale, scale, src, "
     "mask, batch, src_len, memory, threads, max_isa): a whole pre-norm encoder (raw "
     "pointers); use model_core.fused_stack.EncoderStack instead."},
    {"cross_kv", cross_kv, METH_VARARGS,
     "cross_kv(weight, bias, layers, d, heads, memory, mask, batch, src_len, scale, keys, "
     "values, threads, max_isa): the decoder's cross-attention keys and values (raw pointers); "
     "use model_core.fused_stack.DecoderStep instead."},
    {"attend_cached", attend_cached, METH_VARARGS,
     "attend_cached(qkv, qkv_stride, rows, heads, head_dim, kv, slots, capacity, layers, layer, "
     "t, row_slots, history, scale, out, threads): self-attention of one decoding step over "
     "the slot cache (raw pointers); use "
     "model_core.fused.attend_cached instead."},
    {"attend_cross", attend_cross, METH_VARARGS,
     "attend_cross(q, q_stride, rows, heads, head_dim, keys, values, sentence_stride, "
     "head_stride, position_stride, scale, bias, src_len, sentence, out, threads): each row's "
     "attention over its sentence's keys/values (raw pointers); use "
     "model_core.fused.attend_cross "
     "instead."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "model_core._kernels",
                                    "Fused CPU kernels for decoding (see _kernels.c).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__kernels(void) {
    PyObject *m = PyModule_Create(&module);
#ifdef _OPENMP
    const int openmp = 1;
#else
    const int openmp = 0;
#endif
    if (m && PyModule_AddIntConstant(m, "OPENMP", openmp) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
