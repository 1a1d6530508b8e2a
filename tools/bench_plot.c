/*
 * tern bench --plot: one SVG with three panels on a shared time axis: decode tokens/s (from the
 * KV position the runs report to the telemetry), the mean clock of the compute cores with their
 * maximum, and the hottest thermal zone. Load and prefill spans are shaded, so a drop in speed can
 * be read against the clock and the temperature at the same moment.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench.h"

#define WIDTH 960
#define LEFT 72
#define RIGHT 24
#define TOP 84
#define PANEL 170
#define GAP 46
#define N_PANELS 3
#define HEIGHT (TOP + N_PANELS * PANEL + (N_PANELS - 1) * GAP + 60)

typedef struct series {
    double *t, *v; /* seconds, value; NAN breaks the line */
    size_t n;
} series;

typedef struct panel {
    const char *title, *unit;
    int y0; /* top pixel */
    double lo, hi;
} panel;

typedef struct plot {
    FILE *f;
    double t0, t1; /* seconds shown */
} plot;

static double px_x(const plot *p, double t) {
    return LEFT + (t - p->t0) / (p->t1 - p->t0) * (WIDTH - LEFT - RIGHT);
}

static double px_y(const panel *pn, double v) {
    return pn->y0 + PANEL - (v - pn->lo) / (pn->hi - pn->lo) * PANEL;
}

/* A round tick step giving about `want` ticks over range. */
static double tick_step(double range, int want) {
    const double raw = range / want, mag = pow(10, floor(log10(raw))), r = raw / mag;
    return mag * (r < 1.5 ? 1 : r < 3.5 ? 2 : r < 7.5 ? 5 : 10);
}

/* Range from the data with 8 % headroom and a zero floor where the values allow it. */
static void fit_range(panel *pn, const series *s, size_t n_series, bool from_zero) {
    double lo = INFINITY, hi = -INFINITY;
    for (size_t k = 0; k < n_series; k++)
        for (size_t i = 0; i < s[k].n; i++)
            if (!isnan(s[k].v[i]))
                lo = fmin(lo, s[k].v[i]), hi = fmax(hi, s[k].v[i]);
    if (!isfinite(lo))
        lo = 0, hi = 1;
    if (from_zero)
        lo = 0;
    if (hi - lo < 1e-9) /* a flat line: centred */
        lo -= from_zero ? 0 : 0.5, hi += 0.5;
    const double pad = (hi - lo) * 0.08;
    pn->lo = from_zero ? 0 : lo - pad;
    pn->hi = hi + pad;
}

static void axes(const plot *p, const panel *pn) {
    FILE *f = p->f;
    fprintf(f, "<rect x='%d' y='%d' width='%d' height='%d' fill='none' stroke='#888'/>\n", LEFT, pn->y0,
            WIDTH - LEFT - RIGHT, PANEL);
    fprintf(f, "<text x='%d' y='%d' font-size='14' font-weight='bold'>%s</text>\n", LEFT, pn->y0 - 8, pn->title);
    const double step = tick_step(pn->hi - pn->lo, 5);
    for (double v = ceil(pn->lo / step) * step; v <= pn->hi + 1e-9; v += step) {
        const double y = px_y(pn, v);
        fprintf(f, "<line x1='%d' x2='%d' y1='%.1f' y2='%.1f' stroke='#ddd'/>\n", LEFT, WIDTH - RIGHT, y, y);
        fprintf(f, "<text x='%d' y='%.1f' font-size='11' text-anchor='end'>%g</text>\n", LEFT - 6, y + 4,
                fabs(v) < step * 1e-6 ? 0.0 : v);
    }
    fprintf(f, "<text x='16' y='%d' font-size='12' transform='rotate(-90 16 %d)' text-anchor='middle'>%s</text>\n",
            pn->y0 + PANEL / 2, pn->y0 + PANEL / 2, pn->unit);
    const double tstep = tick_step(p->t1 - p->t0, 10);
    for (double t = ceil(p->t0 / tstep) * tstep; t <= p->t1 + 1e-9; t += tstep)
        fprintf(f, "<text x='%.1f' y='%d' font-size='11' text-anchor='middle'>%g</text>\n", px_x(p, t),
                pn->y0 + PANEL + 14, t);
}

static void line(const plot *p, const panel *pn, const series *s, const char *color, const char *dash) {
    bool open = false, any = false;
    for (size_t i = 0; i < s->n && !any; i++)
        any = !isnan(s->v[i]);
    if (!any && !dash) {
        fprintf(p->f, "<text x='%d' y='%d' font-size='13' fill='#888' text-anchor='middle'>no readings on this "
                      "machine (nothing under sys/ for it)</text>\n",
                (LEFT + WIDTH - RIGHT) / 2, pn->y0 + PANEL / 2);
        return;
    }
    for (size_t i = 0; i < s->n; i++) {
        if (isnan(s->v[i])) {
            if (open)
                fputs("'/>\n", p->f);
            open = false;
            continue;
        }
        if (!open)
            fprintf(p->f, "<polyline fill='none' stroke='%s' stroke-width='1.8'%s%s%s points='", color,
                    dash ? " stroke-dasharray='" : "", dash ? dash : "", dash ? "'" : "");
        fprintf(p->f, "%.1f,%.1f ", px_x(p, s->t[i]), px_y(pn, fmax(pn->lo, fmin(pn->hi, s->v[i]))));
        open = true;
    }
    if (open)
        fputs("'/>\n", p->f);
}

static void legend(const plot *p, const panel *pn, int slot, const char *color, const char *text) {
    const int x = WIDTH - RIGHT - 330 + slot * 170;
    fprintf(p->f, "<line x1='%d' x2='%d' y1='%d' y2='%d' stroke='%s' stroke-width='2'/>\n", x, x + 18, pn->y0 - 12,
            pn->y0 - 12, color);
    fprintf(p->f, "<text x='%d' y='%d' font-size='11'>%s</text>\n", x + 22, pn->y0 - 8, text);
}

static bool series_alloc(series *s, size_t n) {
    s->t = malloc((n + 2) * sizeof *s->t); /* + the two ends of a constant line */
    s->v = malloc((n + 2) * sizeof *s->v);
    s->n = 0;
    return s->t && s->v;
}

static void series_push(series *s, double t, double v) {
    s->t[s->n] = t;
    s->v[s->n++] = v;
}

static void series_free(series *s) {
    free(s->t);
    free(s->v);
}

/* Shaded load and prefill spans of every run, in every panel. */
static void phases(const plot *p, const tern_bench_result *res, const panel *pn) {
    for (int i = 0; i < res->n_configs * res->reps; i++) {
        const tern_bench_run *r = &res->runs[i];
        const double a = r->t_start / 1e3, b = r->t_loaded / 1e3, c = (r->t_loaded + r->ttft_ms) / 1e3;
        fprintf(p->f, "<rect x='%.1f' y='%d' width='%.1f' height='%d' fill='#ececec'/>\n", px_x(p, a), pn->y0,
                px_x(p, b) - px_x(p, a), PANEL);
        if (!r->failed)
            fprintf(p->f, "<rect x='%.1f' y='%d' width='%.1f' height='%d' fill='#e1ecfb'/>\n", px_x(p, b), pn->y0,
                    px_x(p, c) - px_x(p, b), PANEL);
    }
}

#define RATE_WINDOW_MS 500.0
#define RATE_WINDOW_TOKENS 10

bool tern_bench_plot_svg(const tern_bench_result *res, const char *path) {
    const tern_telemetry *tel = res->env->tel;
    FILE *f = fopen(path, "w");
    if (!f)
        return false;
    const size_t n = tel ? tern_telemetry_count(tel) : 0;
    series tps = {0}, clock = {0}, clock_max = {0}, temp = {0}, roof = {0};
    bool ok = series_alloc(&tps, n) && series_alloc(&clock, n) && series_alloc(&clock_max, n) &&
              series_alloc(&temp, n) && series_alloc(&roof, 2 * (size_t)(res->n_configs * res->reps) + 1);
    plot p = {f, 0, 1};
    int hottest = -1;
    if (ok && n > 0) {
        tern_telemetry_sample prev, s, from;
        const tern_cpu_topology *topo = res->env->sys->topo;
        double possible = NAN;
        size_t run_from = 0; /* the sample the tokens/s window starts at, in the current decode run */
        for (size_t i = 0; i < n; i++, prev = s) {
            tern_telemetry_get(tel, i, &s);
            const double t = s.t_ms / 1e3;
            /* Tokens/s over a window of the run (progress restarts at 0 each run). A sample knows
             * how many tokens were done, not when the last one ended, so one sample interval
             * against the next alternates between k and k + 1 tokens: the window is at least
             * RATE_WINDOW_MS and RATE_WINDOW_TOKENS long, which keeps that error a few percent. */
            const bool decoding = i > 0 && s.phase == TERN_BENCH_DECODE && prev.phase == TERN_BENCH_DECODE &&
                                  s.progress >= prev.progress && s.t_ms > prev.t_ms;
            if (!decoding) {
                run_from = i;
                if (tps.n && !isnan(tps.v[tps.n - 1]))
                    series_push(&tps, t, NAN);
            } else {
                tern_telemetry_get(tel, run_from, &from);
                for (tern_telemetry_sample next; run_from + 1 < i; run_from++) {
                    tern_telemetry_get(tel, run_from + 1, &next);
                    if (s.t_ms - next.t_ms < RATE_WINDOW_MS || s.progress - next.progress < RATE_WINDOW_TOKENS)
                        break;
                    from = next;
                }
                if (s.t_ms - from.t_ms >= RATE_WINDOW_MS && s.progress - from.progress >= RATE_WINDOW_TOKENS)
                    series_push(&tps, (from.t_ms + s.t_ms) / 2e3,
                                (double)(s.progress - from.progress) / (s.t_ms - from.t_ms) * 1e3);
            }
            double sum = 0;
            int k = 0;
            for (int c = 0; c < tern_telemetry_n_cpus(tel); c++)
                for (int j = 0; j < topo->n_compute; j++)
                    if (tern_telemetry_cpu_id(tel, c) == topo->compute_cpus[j] && s.cpu_khz[c] > 0) {
                        sum += (double)s.cpu_khz[c] / 1e3, k++;
                        if (!(tern_telemetry_cpu_max_khz(tel, c) / 1e3 <= possible))
                            possible = (double)tern_telemetry_cpu_max_khz(tel, c) / 1e3;
                    }
            series_push(&clock, t, k ? sum / k : NAN);
            double hot = NAN;
            for (int z = 0; z < tern_telemetry_n_zones(tel); z++)
                if (s.temp_mc[z] != INT64_MIN && !(s.temp_mc[z] / 1e3 <= hot))
                    hot = (double)s.temp_mc[z] / 1e3, hottest = z;
            series_push(&temp, t, hot);
        }
        tern_telemetry_sample first, last;
        tern_telemetry_get(tel, 0, &first);
        tern_telemetry_get(tel, n - 1, &last);
        p.t0 = first.t_ms / 1e3;
        p.t1 = fmax(last.t_ms / 1e3, p.t0 + 0.1);
        if (!isnan(possible)) {
            series_push(&clock_max, p.t0, possible);
            series_push(&clock_max, p.t1, possible);
        }
        for (int i = 0; i < res->n_configs * res->reps; i++) {
            const tern_bench_run *r = &res->runs[i];
            if (r->roofline_tps > 0) {
                series_push(&roof, (r->t_loaded + r->ttft_ms) / 1e3, r->roofline_tps);
                series_push(&roof, r->t_end / 1e3, r->roofline_tps);
                series_push(&roof, r->t_end / 1e3, NAN);
            }
        }
    }
    if (ok) {
        panel pn[N_PANELS] = {{"decode tokens/s", "tokens/s", TOP, 0, 1},
                              {"clock of the compute cores (mean)", "MHz", TOP + PANEL + GAP, 0, 1},
                              {"hottest thermal zone", "°C", TOP + 2 * (PANEL + GAP), 0, 1}};
        const series both_speed[2] = {tps, roof}, both_clock[2] = {clock, clock_max};
        fit_range(&pn[0], both_speed, 2, true);
        fit_range(&pn[1], both_clock, 2, true);
        fit_range(&pn[2], &temp, 1, false);
        fprintf(f, "<?xml version='1.0' encoding='UTF-8'?>\n<svg xmlns='http://www.w3.org/2000/svg' width='%d' "
                   "height='%d' font-family='sans-serif'>\n<rect width='100%%' height='100%%' fill='white'/>\n",
                WIDTH, HEIGHT);
        char label[128];
        tern_bench_config_label(&res->configs[0], label, sizeof label);
        fprintf(f, "<text x='%d' y='26' font-size='16' font-weight='bold'>tern bench: %s, %s%s</text>\n", LEFT,
                res->model->name, label, res->n_configs > 1 ? " and more" : "");
        fprintf(f, "<text x='%d' y='46' font-size='11' fill='#555'>shaded grey: load, blue: prefill (to the first "
                   "token), white: decode; gaps between runs: freeing, the bandwidth probe. %zu samples.</text>\n",
                LEFT, n);
        for (int k = 0; k < N_PANELS; k++) {
            phases(&p, res, &pn[k]);
            axes(&p, &pn[k]);
        }
        line(&p, &pn[0], &tps, "#1f77b4", NULL);
        line(&p, &pn[0], &roof, "#d62728", "6 4");
        legend(&p, &pn[0], 0, "#1f77b4", "decode tokens/s");
        legend(&p, &pn[0], 1, "#d62728", "roofline");
        line(&p, &pn[1], &clock, "#2ca02c", NULL);
        line(&p, &pn[1], &clock_max, "#555", "6 4");
        legend(&p, &pn[1], 0, "#2ca02c", "mean clock");
        legend(&p, &pn[1], 1, "#555", "maximum clock");
        line(&p, &pn[2], &temp, "#ff7f0e", NULL);
        legend(&p, &pn[2], 1, "#ff7f0e", hottest >= 0 ? tern_telemetry_zone_type(tel, hottest) : "no zones");
        fprintf(f, "<text x='%d' y='%d' font-size='12' text-anchor='middle'>seconds since the bench started</text>\n",
                (LEFT + WIDTH - RIGHT) / 2, HEIGHT - 16);
        fputs("</svg>\n", f);
    }
    series_free(&tps);
    series_free(&clock);
    series_free(&clock_max);
    series_free(&temp);
    series_free(&roof);
    return fclose(f) == 0 && ok;
}
