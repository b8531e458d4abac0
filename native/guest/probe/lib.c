/* Unhalt probe guest: the few libc pieces it needs, and a tiny formatter. */
#include "probe.h"

/* One string instruction each: far fewer emulated instructions than a loop. */
void *memset(void *d, int c, size_t n)
{
	void *p = d;
	__asm__ volatile("rep stosb" : "+D"(p), "+c"(n) : "a"(c) : "memory");
	return d;
}

void *memcpy(void *d, const void *s, size_t n)
{
	void *p = d;
	__asm__ volatile("rep movsb" : "+D"(p), "+S"(s), "+c"(n) : : "memory");
	return d;
}

int memcmp(const void *a, const void *b, size_t n)
{
	const u8 *p = a, *q = b;
	for (; n; n--, p++, q++)
		if (*p != *q)
			return *p < *q ? -1 : 1;
	return 0;
}

size_t strlen(const char *s)
{
	size_t n = 0;
	while (s[n])
		n++;
	return n;
}

struct out {
	char *buf;
	size_t size, len;
};

static void put(struct out *o, char c)
{
	if (o->len + 1 < o->size)
		o->buf[o->len] = c;
	o->len++;
}

static void put_num(struct out *o, u64 v, unsigned base, int width, char pad)
{
	char tmp[24];
	int n = 0;
	do {
		unsigned d = (unsigned)(v % base);
		tmp[n++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
		v /= base;
	} while (v);
	while (width-- > n)
		put(o, pad);
	while (n)
		put(o, tmp[--n]);
}

/*
 * %d %u %x %s %c %% with optional '0', width and 'l'/'ll'/'z' length.
 * Always NUL-terminates; returns the untruncated length.
 */
int vfmt(char *buf, size_t size, const char *f, va_list ap)
{
	struct out o = { buf, size, 0 };
	for (; *f; f++) {
		if (*f != '%') {
			put(&o, *f);
			continue;
		}
		f++;
		char pad = ' ';
		int width = 0, lng = 0;
		if (*f == '0') {
			pad = '0';
			f++;
		}
		while (*f >= '0' && *f <= '9')
			width = width * 10 + (*f++ - '0');
		while (*f == 'l' || *f == 'z') {
			lng = 1;
			f++;
		}
		switch (*f) {
		case 'd': {
			i64 v = lng ? va_arg(ap, i64) : va_arg(ap, int);
			if (v < 0) {
				put(&o, '-');
				v = -v;
			}
			put_num(&o, (u64)v, 10, width, pad);
			break;
		}
		case 'u':
			put_num(&o, lng ? va_arg(ap, u64) : va_arg(ap, unsigned), 10, width, pad);
			break;
		case 'x':
			put_num(&o, lng ? va_arg(ap, u64) : va_arg(ap, unsigned), 16, width, pad);
			break;
		case 's': {
			const char *s = va_arg(ap, const char *);
			for (s = s ? s : "(null)"; *s; s++)
				put(&o, *s);
			break;
		}
		case 'c':
			put(&o, (char)va_arg(ap, int));
			break;
		case '%':
			put(&o, '%');
			break;
		case 0:
			f--;
			break;
		default:
			put(&o, '%');
			put(&o, *f);
		}
	}
	if (size)
		buf[o.len < size ? o.len : size - 1] = 0;
	return (int)o.len;
}

int fmt(char *buf, size_t size, const char *f, ...)
{
	va_list ap;
	va_start(ap, f);
	int n = vfmt(buf, size, f, ap);
	va_end(ap);
	return n;
}
