/* Fused per-row kernels for the decoder's search, on float32 CPU tensors.
 *
 * topk_logsumexp: for each row of a (rows, vocab) matrix of logits, the k largest values (best
 * first, the lower index first among equal values), their indices, and the row's logsumexp.
 * torch needs three passes for this (topk, then max-shifted exp and sum), each with its own
 * allocation; here it is one pass for the top-k and one vectorised pass for the sum.
 *
 * Built as an optional extension (setup.py): model_core/fused.py falls back to torch ops when
 * it is missing, and the tests check both give the same results. The GIL is released while a
 * call runs, so the service's event loop keeps going.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>

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
    int k;
    if (!PyArg_ParseTuple(args, "KLLLiKKK", &src, &rows, &vocab, &row_stride, &k, &out_vals,
                          &out_idx, &out_lse))
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
    Py_BEGIN_ALLOW_THREADS;
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
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"topk_logsumexp", topk_logsumexp, METH_VARARGS,
     "topk_logsumexp(src, rows, vocab, row_stride, k, vals, idx, lse): raw float32/int64 "
     "pointers; use model_core.fused.topk_logsumexp instead."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "model_core._kernels",
                                    "Fused CPU kernels for decoding (see _kernels.c).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&module); }
