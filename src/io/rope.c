/* Rotary-embedding frequencies for the rope types of config.json, following
 * the definitions used by Hugging Face transformers:
 *   default: inv_freq[i] = theta^(-2i/d)
 *   linear:  inv_freq / factor
 *   llama3:  long wavelengths divided by factor, short kept, a smooth blend
 *            between the two wavelength bounds
 *   yarn:    a ramp between interpolated (/factor) and extrapolated
 *            frequencies over the correction range of dims, and an attention
 *            factor that scales cos and sin. */
#include <math.h>
#include <stdlib.h>

#include "io/config.h"
#include "tern/dtype.h"

static double yarn_mscale(double scale, double m)
{
    return scale <= 1.0 ? 1.0 : 0.1 * m * log(scale) + 1.0;
}

static double yarn_correction_dim(double rotations, int dim, double base, int max_pos)
{
    return (dim * log(max_pos / (rotations * 2.0 * M_PI))) / (2.0 * log(base));
}

tern_status tern_rope_init(tern_model_config *cfg)
{
    const tern_rope_config *r = &cfg->rope;
    int dim = (int)(cfg->head_dim * r->partial_rotary_factor);
    dim -= dim % 2;
    if (dim <= 0 || dim > cfg->head_dim)
        return tern_error(TERN_E_FORMAT, "config.json: partial_rotary_factor %.3f gives %d rotary dims",
                          r->partial_rotary_factor, dim);
    int half = dim / 2;
    float *inv = malloc((size_t)half * sizeof *inv);
    if (!inv) return tern_error(TERN_E_NOMEM, "out of memory");
    cfg->rope_dim = dim;
    cfg->rope_attn_factor = 1.0f;
    for (int i = 0; i < half; i++) {
        /* The exponent is formed in float32, as transformers does. */
        float e = (float)(2 * i) / (float)dim;
        inv[i] = (float)(1.0 / pow(r->theta, (double)e));
    }
    switch (r->type) {
    case TERN_ROPE_DEFAULT:
        break;
    case TERN_ROPE_LINEAR:
        for (int i = 0; i < half; i++) inv[i] = (float)(inv[i] / r->factor);
        break;
    case TERN_ROPE_LLAMA3: {
        double low_wl = r->original_max_pos / r->low_freq_factor;
        double high_wl = r->original_max_pos / r->high_freq_factor;
        for (int i = 0; i < half; i++) {
            double wl = 2.0 * M_PI / inv[i];
            if (wl > low_wl) {
                inv[i] = (float)(inv[i] / r->factor);
            } else if (wl >= high_wl) {
                double smooth = (r->original_max_pos / wl - r->low_freq_factor) /
                                (r->high_freq_factor - r->low_freq_factor);
                inv[i] = (float)((1.0 - smooth) * inv[i] / r->factor + smooth * inv[i]);
            }
        }
        break;
    }
    case TERN_ROPE_YARN: {
        double factor = r->factor;
        double af = r->attention_factor;
        if (af < 0) {
            if (r->mscale != 0 && r->mscale_all_dim != 0)
                af = yarn_mscale(factor, r->mscale) / yarn_mscale(factor, r->mscale_all_dim);
            else
                af = yarn_mscale(factor, 1.0);
        }
        double lo = yarn_correction_dim(r->beta_fast, dim, r->theta, r->original_max_pos);
        double hi = yarn_correction_dim(r->beta_slow, dim, r->theta, r->original_max_pos);
        if (r->truncate) { lo = floor(lo); hi = ceil(hi); }
        if (lo < 0) lo = 0;
        if (hi > dim - 1) hi = dim - 1;
        if (lo == hi) hi += 0.001;
        for (int i = 0; i < half; i++) {
            float ramp = (float)((i - lo) / (hi - lo));
            ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
            float extra_w = 1.0f - ramp;
            float extrap = inv[i], interp = (float)(inv[i] / factor);
            inv[i] = interp * (1.0f - extra_w) + extrap * extra_w;
        }
        cfg->rope_attn_factor = (float)af;
        break;
    }
    }
    for (int i = 0; i < half; i++) {
        if (r->freq_round == 1) inv[i] = tern_bf16_to_f32(tern_f32_to_bf16(inv[i]));
        else if (r->freq_round == 2) inv[i] = tern_f16_to_f32(tern_f32_to_f16(inv[i]));
    }
    cfg->inv_freq = inv;
    return TERN_OK;
}
