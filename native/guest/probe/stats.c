/*
 * Unhalt probe guest: latency samples and their percentiles.
 * Every value updates count/sum/min/max; at most cap values are kept for the
 * percentiles (every stride-th one; when the buffer fills, every other kept
 * value is dropped and the stride doubles), so memory is fixed and long runs
 * are sampled evenly.  Sorting is a byte-wise radix sort: a few linear passes,
 * far fewer instructions than a comparison sort (ring 0 is emulated on PVM).
 */
#include "probe.h"

#define SORT_MAX 8192
static u32 sort_tmp[SORT_MAX];

void samples_init(struct samples *s, u32 *buf, u32 cap)
{
	memset(s, 0, sizeof *s);
	s->buf = buf;
	s->cap = cap > SORT_MAX ? SORT_MAX : cap;
	s->stride = 1;
	s->min = ~0ull;
}

void samples_add(struct samples *s, u64 cycles)
{
	s->count++;
	s->sum += cycles;
	if (cycles < s->min)
		s->min = cycles;
	if (cycles > s->max)
		s->max = cycles;
	if (++s->skip < s->stride)
		return;
	s->skip = 0;
	if (s->n == s->cap) {
		for (u32 i = 0; i < s->n / 2; i++)
			s->buf[i] = s->buf[2 * i + 1];
		s->n /= 2;
		s->stride *= 2;
	}
	s->buf[s->n++] = cycles > 0xFFFFFFFFu ? 0xFFFFFFFFu : (u32)cycles;
}

static void radix_sort(u32 *a, u32 n)
{
	static u32 cnt[256];
	u32 *src = a, *dst = sort_tmp;
	for (u32 shift = 0; shift < 32; shift += 8) {
		memset(cnt, 0, sizeof cnt);
		for (u32 i = 0; i < n; i++)
			cnt[(src[i] >> shift) & 0xFF]++;
		if (cnt[(src[0] >> shift) & 0xFF] == n)
			continue;   /* one digit value: this pass would not move anything */
		u32 sum = 0;
		for (u32 b = 0; b < 256; b++) {
			u32 c = cnt[b];
			cnt[b] = sum;
			sum += c;
		}
		for (u32 i = 0; i < n; i++)
			dst[cnt[(src[i] >> shift) & 0xFF]++] = src[i];
		u32 *t = src;
		src = dst;
		dst = t;
	}
	if (src != a)
		memcpy(a, src, n * sizeof *a);
}

/* Nearest rank: the smallest kept value with at least p% of them at or below it. */
static u64 percentile(const struct samples *s, u32 p)
{
	u32 rank = (u32)(((u64)s->n * p + 99) / 100);
	return s->buf[rank ? rank - 1 : 0];
}

void samples_summarize(struct samples *s, struct summary *out)
{
	memset(out, 0, sizeof *out);
	out->count = s->count;
	if (!s->count)
		return;
	radix_sort(s->buf, s->n);
	out->p50_ns = tsc_to_ns(percentile(s, 50));
	out->p99_ns = tsc_to_ns(percentile(s, 99));
	out->max_ns = tsc_to_ns(s->max);
	out->min_ns = tsc_to_ns(s->min);
	out->mean_ns = tsc_to_ns(s->sum / s->count);
}
