/*
 * Optional accelerator for pipelines.binlog.rows: decodes all row images of a
 * rows-event body for one table layout, with results identical to the
 * pure-Python decoders of columns.py (same types, values, tzinfo, str/bytes).
 *
 *   Plan(columns)                       one table layout + present columns, built
 *                                       once by accel.py from the ColumnDecodings:
 *                                       per column (kind, a, b, c, obj), see below
 *   decode_rows(buf, op, plan_a, plan_b) -> tuple of (before, after) pairs
 *                                       op 0 insert: (None, A); 1 delete: (A, None);
 *                                       2 update: (A, B)
 *   decode_cells(buf, op, plan_a, plan_b) -> (rows, before, after): the same images as
 *                                       canonical-text cells in Arrow-ready buffers
 *                                       (see "cells" below)
 *
 * Only the common column types are handled here. Anything else - a zero or
 * invalid date, an out-of-range ENUM/SET/DECIMAL digit group, bytes that are
 * not valid in the column's charset, a truncated or corrupt body - raises
 * Fallback: the caller re-decodes the event with the Python decoders, which
 * return MySQL's text for the odd values or raise the precise BinlogError.
 * Every read is bounds-checked against the end of the buffer.
 *
 * Column tuples (kind, a, b, c, obj):
 *   K_INT        a = size (1, 2, 3, 4, 8), b = unsigned
 *   K_FLOAT, K_DOUBLE, K_YEAR, K_DATE, K_NULL
 *   K_TIME, K_DATETIME, K_TIMESTAMP       the pre-5.6 formats without fractions
 *   K_TIME2, K_DATETIME2, K_TIMESTAMP2    a = fsp (0..6)
 *   K_NEWDECIMAL a = precision, b = scale
 *   K_BIT        a = bytes (1..8)
 *   K_ENUM       a = bytes (1, 2), obj = None or ("", name1, name2, ...)
 *   K_SET        a = bytes (1..8), obj = None or (name1, name2, ...)
 *   K_STR        a = length-prefix bytes (1..4), b = pad to (BINARY(n)) or 0,
 *                c = codec kind: C_BYTES, C_UTF8, C_CHARMAP (obj = the 256-char
 *                decoding table), C_CODEC (obj = a Python codec name)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <datetime.h>
#include <stdint.h>
#include <string.h>

#if PY_VERSION_HEX < 0x030B0000
#define PyFloat_Unpack4 _PyFloat_Unpack4
#define PyFloat_Unpack8 _PyFloat_Unpack8
#endif

enum {
    K_NULL = 0, K_INT = 1, K_FLOAT = 2, K_DOUBLE = 3, K_YEAR = 4, K_DATE = 5,
    K_TIME = 6, K_DATETIME = 7, K_TIMESTAMP = 8, K_TIME2 = 9, K_DATETIME2 = 10,
    K_TIMESTAMP2 = 11, K_NEWDECIMAL = 12, K_BIT = 13, K_ENUM = 14, K_SET = 15,
    K_STR = 16, K_COUNT
};
enum { C_BYTES = 0, C_UTF8 = 1, C_CHARMAP = 2, C_CODEC = 3 };

static const char *KIND_NAMES[K_COUNT] = {
    "NULL", "integer", "FLOAT", "DOUBLE", "YEAR", "DATE", "TIME", "DATETIME", "TIMESTAMP",
    "TIME2", "DATETIME2", "TIMESTAMP2", "NEWDECIMAL", "BIT", "ENUM", "SET", "string",
};

#define DIG_PER_DEC 9
#define MAX_GROUPS 16
static const int DIG2BYTES[10] = {0, 1, 1, 2, 2, 3, 3, 4, 4, 4};
static const int FRAC_BYTES[7] = {0, 1, 1, 2, 2, 3, 3};
static const int FRAC_MULT[7] = {1, 10000, 10000, 100, 100, 1, 1};
static const uint32_t POW10[10] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000,
                                   100000000, 1000000000};

typedef struct {
    int kind;
    int a, b, c;
    Py_ssize_t size;        /* fixed width in bytes; -1 for K_STR */
    PyObject *obj;          /* owned reference or NULL */
    const char *codec;      /* UTF-8 of obj for C_CODEC (kept alive by obj) */
    int ngroups;            /* NEWDECIMAL digit groups, most significant first */
    unsigned char gbytes[MAX_GROUPS];
    unsigned char gdigits[MAX_GROUPS];
} Column;

typedef struct {
    PyObject_HEAD
    Py_ssize_t ncols;
    Py_ssize_t null_bytes;
    Column *cols;
} PlanObject;

static PyObject *Fallback;      /* pipelines.binlog._speedups.Fallback */
static PyObject *DecimalType;   /* decimal.Decimal */
static PyObject *Comma;         /* "," */

/* -- Plan ------------------------------------------------------------------------------- */

static void
plan_dealloc(PlanObject *self)
{
    if (self->cols != NULL) {
        for (Py_ssize_t i = 0; i < self->ncols; i++)
            Py_XDECREF(self->cols[i].obj);
        PyMem_Free(self->cols);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
bad_column(Py_ssize_t k, const char *why)
{
    PyErr_Format(PyExc_ValueError, "plan column %zd: %s", k, why);
    return -1;
}

static int
decimal_groups(Column *col, Py_ssize_t k)
{
    int p = col->a, s = col->b;
    if (!(0 < p && p <= 65 && 0 <= s && s <= 38 && s <= p))
        return bad_column(k, "impossible DECIMAL precision/scale");
    int intg = p - s, n = 0, size = 0;
    if (intg % DIG_PER_DEC) {
        col->gbytes[n] = (unsigned char)DIG2BYTES[intg % DIG_PER_DEC];
        col->gdigits[n++] = (unsigned char)(intg % DIG_PER_DEC);
    }
    for (int i = 0; i < intg / DIG_PER_DEC; i++) {
        col->gbytes[n] = 4;
        col->gdigits[n++] = DIG_PER_DEC;
    }
    for (int i = 0; i < s / DIG_PER_DEC; i++) {
        col->gbytes[n] = 4;
        col->gdigits[n++] = DIG_PER_DEC;
    }
    if (s % DIG_PER_DEC) {
        col->gbytes[n] = (unsigned char)DIG2BYTES[s % DIG_PER_DEC];
        col->gdigits[n++] = (unsigned char)(s % DIG_PER_DEC);
    }
    for (int i = 0; i < n; i++)
        size += col->gbytes[i];
    col->ngroups = n;
    col->size = size;
    return 0;
}

static int
parse_column(Column *col, PyObject *item, Py_ssize_t k)
{
    PyObject *obj;
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 5)
        return bad_column(k, "expected a (kind, a, b, c, obj) tuple");
    if (!PyArg_ParseTuple(item, "iiiiO", &col->kind, &col->a, &col->b, &col->c, &obj))
        return -1;
    col->size = 0;
    switch (col->kind) {
    case K_NULL:
        break;
    case K_INT:
        if (!(col->a == 1 || col->a == 2 || col->a == 3 || col->a == 4 || col->a == 8))
            return bad_column(k, "integer size not 1, 2, 3, 4 or 8");
        col->size = col->a;
        break;
    case K_FLOAT: col->size = 4; break;
    case K_DOUBLE: col->size = 8; break;
    case K_YEAR: col->size = 1; break;
    case K_DATE: col->size = 3; break;
    case K_TIME: col->size = 3; break;
    case K_DATETIME: col->size = 8; break;
    case K_TIMESTAMP: col->size = 4; break;
    case K_TIME2:
    case K_DATETIME2:
    case K_TIMESTAMP2:
        if (col->a < 0 || col->a > 6)
            return bad_column(k, "fsp not in 0..6");
        col->size = (col->kind == K_TIME2 ? 3 : col->kind == K_DATETIME2 ? 5 : 4) + FRAC_BYTES[col->a];
        break;
    case K_NEWDECIMAL:
        if (decimal_groups(col, k) < 0)
            return -1;
        break;
    case K_BIT:
        if (col->a < 1 || col->a > 8)
            return bad_column(k, "BIT size not in 1..8");
        col->size = col->a;
        break;
    case K_ENUM:
        if (col->a != 1 && col->a != 2)
            return bad_column(k, "ENUM size not 1 or 2");
        if (obj != Py_None && !PyTuple_Check(obj))
            return bad_column(k, "ENUM names must be a tuple or None");
        col->size = col->a;
        break;
    case K_SET:
        if (col->a < 1 || col->a > 8)
            return bad_column(k, "SET size not in 1..8");
        if (obj != Py_None && !PyTuple_Check(obj))
            return bad_column(k, "SET names must be a tuple or None");
        col->size = col->a;
        break;
    case K_STR:
        if (col->a < 1 || col->a > 4)
            return bad_column(k, "length prefix not in 1..4");
        if (col->b < 0)
            return bad_column(k, "negative pad length");
        col->size = -1;
        if (col->c == C_BYTES || col->c == C_UTF8) {
            if (obj != Py_None)
                return bad_column(k, "bytes/utf-8 columns take no codec argument");
        }
        else if (col->c == C_CHARMAP) {
            if (!PyUnicode_Check(obj) || PyUnicode_GET_LENGTH(obj) != 256)
                return bad_column(k, "charmap codec needs a 256-character decoding table");
        }
        else if (col->c == C_CODEC) {
            if (!PyUnicode_Check(obj))
                return bad_column(k, "codec name must be a str");
            col->codec = PyUnicode_AsUTF8(obj);
            if (col->codec == NULL)
                return -1;
        }
        else
            return bad_column(k, "unknown codec kind");
        if (col->c != C_BYTES && col->b)
            return bad_column(k, "only bytes columns are padded");
        break;
    default:
        return bad_column(k, "unknown kind");
    }
    if (obj != Py_None) {
        Py_INCREF(obj);
        col->obj = obj;
    }
    return 0;
}

static PyObject *
plan_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *columns, *seq;
    static char *kwlist[] = {"columns", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O:Plan", kwlist, &columns))
        return NULL;
    seq = PySequence_Fast(columns, "Plan() needs a sequence of column tuples");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PlanObject *self = (PlanObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    self->ncols = 0;
    self->null_bytes = (n + 7) / 8;
    self->cols = PyMem_Calloc(n ? (size_t)n : 1, sizeof(Column));
    if (self->cols == NULL) {
        Py_DECREF(seq);
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        self->ncols = i + 1;  /* dealloc releases cols[0..i] (zeroed when unset) */
        if (parse_column(&self->cols[i], PySequence_Fast_GET_ITEM(seq, i), i) < 0) {
            Py_DECREF(seq);
            Py_DECREF(self);
            return NULL;
        }
    }
    self->ncols = n;
    Py_DECREF(seq);
    return (PyObject *)self;
}

static PyObject *
plan_get_ncols(PlanObject *self, void *closure)
{
    return PyLong_FromSsize_t(self->ncols);
}

static PyGetSetDef plan_getset[] = {
    {"ncols", (getter)plan_get_ncols, NULL, "number of columns in the image", NULL},
    {NULL},
};

static PyTypeObject PlanType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pipelines.binlog._speedups.Plan",
    .tp_doc = "Plan(columns): how to decode one row image (see accel.py)",
    .tp_basicsize = sizeof(PlanObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = plan_new,
    .tp_dealloc = (destructor)plan_dealloc,
    .tp_getset = plan_getset,
};

/* -- helpers ---------------------------------------------------------------------------- */

static const char *
kind_name(int kind)
{
    return kind >= 0 && kind < K_COUNT ? KIND_NAMES[kind] : "?";
}

/* Raise Fallback for column k, keeping the reason. */
static PyObject *
fallback(const Column *col, Py_ssize_t k, Py_ssize_t off, const char *why)
{
    PyErr_Format(Fallback, "column %zd (%s) at body offset %zd: %s",
                 k + 1, kind_name(col->kind), off, why);
    return NULL;
}

/* Turn the pending exception (a str that does not decode, ...) into Fallback, unless
   it is not an ordinary error (MemoryError, KeyboardInterrupt, ...): that propagates. */
static PyObject *
fallback_from_error(const Column *col, Py_ssize_t k, Py_ssize_t off)
{
    PyObject *type, *value, *tb;
    if (!PyErr_ExceptionMatches(PyExc_Exception) || PyErr_ExceptionMatches(PyExc_MemoryError))
        return NULL;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyErr_Format(Fallback, "column %zd (%s) at body offset %zd: %R",
                 k + 1, kind_name(col->kind), off, value ? value : type);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return NULL;
}

static inline uint64_t
le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static inline uint64_t
be(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

static inline int
is_leap(long y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int
valid_date(long y, long m, long d)
{
    static const int mdays[13] = {0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (y < 1 || y > 9999 || m < 1 || m > 12 || d < 1)
        return 0;
    return d <= mdays[m] + (m == 2 && is_leap(y));
}

static int
valid_datetime(long y, long mo, long d, long h, long mi, long s, long us)
{
    return valid_date(y, mo, d) && 0 <= h && h < 24 && 0 <= mi && mi < 60 && 0 <= s && s < 60
           && 0 <= us && us <= 999999;
}

/* days since 1970-01-01 -> civil date (H. Hinnant's algorithm) */
static void
civil_from_days(int64_t z, long *y, long *m, long *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t yy = yoe + era * 400;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (long)(doy - (153 * mp + 2) / 5 + 1);
    *m = (long)(mp < 10 ? mp + 3 : mp - 9);
    *y = (long)(yy + (*m <= 2));
}

/* datetime in UTC of epoch seconds + usec, as 1970-01-01 UTC + timedelta (seconds > 0) */
static PyObject *
utc_datetime(uint64_t seconds, long usec)
{
    long y, m, d;
    civil_from_days((int64_t)(seconds / 86400), &y, &m, &d);
    long rem = (long)(seconds % 86400);
    return PyDateTimeAPI->DateTime_FromDateAndTime(
        (int)y, (int)m, (int)d, (int)(rem / 3600), (int)(rem / 60 % 60), (int)(rem % 60), (int)usec,
        PyDateTime_TimeZone_UTC, PyDateTimeAPI->DateTimeType);
}

/* timedelta of a signed number of microseconds */
static PyObject *
delta_us(int64_t total)
{
    const int64_t day = 86400LL * 1000000LL;
    int64_t days = total / day, rem = total % day;
    if (rem < 0) {
        rem += day;
        days -= 1;
    }
    return PyDateTimeAPI->Delta_FromDelta((int)days, (int)(rem / 1000000), (int)(rem % 1000000), 1,
                                          PyDateTimeAPI->DeltaType);
}

static char *
put_uint(char *out, uint32_t v, int width)  /* width 0: no padding */
{
    char tmp[10];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n < width)
        tmp[n++] = '0';
    while (n)
        *out++ = tmp[--n];
    return out;
}

/* NEWDECIMAL's unscaled digits, without leading zeros (none for zero), into digits[] (room for
   81); *positive its sign. Returns how many, or -1 for a digit group out of range. */
static int
decimal_digits(const Column *col, const unsigned char *p, char *digits, int *positive)
{
    unsigned char d[80];
    char *out = digits;
    int size = (int)col->size, started = 0;
    *positive = p[0] >> 7;
    unsigned char flip = *positive ? 0 : 0xFF;
    for (int i = 0; i < size; i++)
        d[i] = p[i] ^ flip;
    d[0] ^= 0x80;
    const unsigned char *q = d;
    for (int g = 0; g < col->ngroups; g++) {
        int nd = col->gdigits[g];
        uint32_t v = (uint32_t)be(q, col->gbytes[g]);
        q += col->gbytes[g];
        if (v > POW10[nd] - 1)
            return -1;
        if (started)
            out = put_uint(out, v, nd);
        else if (v) {
            out = put_uint(out, v, 0);
            started = 1;
        }
    }
    return (int)(out - digits);
}

/* One value's fields as read from the wire, before any Python object or text is made of them. */
typedef struct {
    uint64_t u;         /* unsigned integers, BIT, ENUM/SET numbers, YEAR, TIMESTAMP seconds */
    int64_t i;          /* signed integers; TIME's signed microseconds */
    double d;           /* FLOAT, DOUBLE */
    long y, mo, day, h, mi, s, us;  /* DATE, DATETIME; TIMESTAMP's microseconds */
    const unsigned char *str;       /* a string's bytes */
    Py_ssize_t n;
    char digits[96];    /* NEWDECIMAL: its unscaled digits (decimal_digits) */
    int ndigits, positive;
} Raw;

/* Read the non-null value of column k at buf[*poff] into *v and advance *poff. Returns NULL, or
   why the Python decoders must read it (a zero or invalid date, bad bytes, ...). */
static const char *
read_value(const Column *col, const unsigned char *buf, Py_ssize_t *poff, Py_ssize_t end, Raw *v)
{
    Py_ssize_t off = *poff;
    const unsigned char *p = buf + off;
    uint64_t u;

    if (col->size >= 0) {
        if (col->size > end - off)
            return "truncated";
        *poff = off + col->size;
    }
    switch (col->kind) {
    case K_NULL:
        return NULL;
    case K_INT:
        v->u = le(p, col->a);
        if (col->a < 8) {  /* sign-extend */
            uint64_t sign = (uint64_t)1 << (8 * col->a - 1);
            v->i = (int64_t)((v->u ^ sign) - sign);
        }
        else
            v->i = (int64_t)v->u;
        return NULL;
    case K_FLOAT:
        v->d = PyFloat_Unpack4((const char *)p, 1);
        return NULL;
    case K_DOUBLE:
        v->d = PyFloat_Unpack8((const char *)p, 1);
        return NULL;
    case K_YEAR:
        v->u = p[0] ? (uint64_t)p[0] + 1900 : 0;
        return NULL;
    case K_DATE:
        u = le(p, 3);
        v->y = (long)(u >> 9);
        v->mo = (long)(u >> 5 & 15);
        v->day = (long)(u & 31);
        return valid_date(v->y, v->mo, v->day) ? NULL : "zero or invalid date";
    case K_TIME: {  /* signed [-]HHMMSS */
        int64_t t = (int64_t)((le(p, 3) ^ 0x800000) - 0x800000);
        int neg = t < 0;
        if (neg)
            t = -t;
        int64_t total = (t / 10000 * 3600 + t / 100 % 100 * 60 + t % 100) * 1000000;
        v->i = neg ? -total : total;
        return NULL;
    }
    case K_DATETIME: {  /* YYYYMMDDhhmmss */
        u = le(p, 8);
        uint64_t dd = u / 1000000, t = u % 1000000;
        if (u == 0 || dd / 10000 > 9999)
            return "zero or invalid datetime";
        v->y = (long)(dd / 10000);
        v->mo = (long)(dd / 100 % 100);
        v->day = (long)(dd % 100);
        v->h = (long)(t / 10000);
        v->mi = (long)(t / 100 % 100);
        v->s = (long)(t % 100);
        v->us = 0;
        return valid_datetime(v->y, v->mo, v->day, v->h, v->mi, v->s, 0) ? NULL : "zero or invalid datetime";
    }
    case K_TIMESTAMP:
        v->u = le(p, 4);
        v->us = 0;
        return v->u == 0 ? "zero timestamp" : NULL;
    case K_TIME2: {  /* my_time_packed_from_binary + TIME_from_longlong_time_packed */
        int fsp = col->a;
        int64_t intpart = (int64_t)be(p, 3) - 0x800000, packed, frac;
        if (fsp == 0)
            packed = intpart * ((int64_t)1 << 24);
        else if (fsp <= 2) {
            frac = p[3];
            if (intpart < 0 && frac) {
                intpart += 1;
                frac -= 0x100;
            }
            packed = intpart * ((int64_t)1 << 24) + frac * 10000;
        }
        else if (fsp <= 4) {
            frac = (int64_t)be(p + 3, 2);
            if (intpart < 0 && frac) {
                intpart += 1;
                frac -= 0x10000;
            }
            packed = intpart * ((int64_t)1 << 24) + frac * 100;
        }
        else
            packed = (int64_t)be(p, 6) - 0x800000000000LL;
        int neg = packed < 0;
        if (neg)
            packed = -packed;
        int64_t hms = packed >> 24, usec = packed & 0xFFFFFF;
        if (usec > 999999)
            return "TIME with too many microseconds";
        int64_t total = ((((hms >> 12) & 0x3FF) * 60 + ((hms >> 6) & 0x3F)) * 60 + (hms & 0x3F)) * 1000000 + usec;
        v->i = neg ? -total : total;
        return NULL;
    }
    case K_DATETIME2: {
        int fb = FRAC_BYTES[col->a];
        int64_t ip = (int64_t)be(p, 5) - 0x8000000000LL;
        v->us = fb ? (long)be(p + 5, fb) * FRAC_MULT[col->a] : 0;
        if (ip < 0 || v->us > 999999)
            return "negative datetime or too many microseconds";
        int64_t ymd = ip >> 17, ym = ymd >> 5;
        v->y = (long)(ym / 13);
        v->mo = (long)(ym % 13);
        v->day = (long)(ymd & 31);
        v->h = (long)(ip >> 12 & 31);
        v->mi = (long)(ip >> 6 & 63);
        v->s = (long)(ip & 63);
        return valid_datetime(v->y, v->mo, v->day, v->h, v->mi, v->s, v->us) ? NULL : "zero or invalid datetime";
    }
    case K_TIMESTAMP2: {
        int fb = FRAC_BYTES[col->a];
        v->u = be(p, 4);
        v->us = fb ? (long)be(p + 4, fb) * FRAC_MULT[col->a] : 0;
        return v->u == 0 || v->us > 999999 ? "zero timestamp or too many microseconds" : NULL;
    }
    case K_NEWDECIMAL:
        v->ndigits = decimal_digits(col, p, v->digits, &v->positive);
        return v->ndigits < 0 ? "NEWDECIMAL digit group out of range" : NULL;
    case K_BIT:
        v->u = be(p, col->a);
        return NULL;
    case K_ENUM:
        v->u = le(p, col->a);
        return col->obj != NULL && v->u >= (uint64_t)PyTuple_GET_SIZE(col->obj) ? "ENUM index beyond its members" : NULL;
    case K_SET:
        v->u = le(p, col->a);
        return NULL;
    case K_STR:
        if (col->a > end - off)
            return "truncated length";
        v->n = (Py_ssize_t)le(p, col->a);
        off += col->a;
        if (v->n > end - off)
            return "truncated string";
        v->str = buf + off;
        *poff = off + v->n;
        return NULL;
    }
    return "unknown kind";
}

/* NEWDECIMAL as a Decimal: the same string the Python decoder builds, f"{sign}{unscaled}E-{scale}",
   given to Decimal once, so the scale and a negative zero come out the same. */
static PyObject *
newdecimal(const Column *col, const Raw *v)
{
    char text[128], *out = text;
    if (!v->positive)
        *out++ = '-';
    memcpy(out, v->digits, (size_t)v->ndigits);
    out += v->ndigits;
    if (!v->ndigits)
        *out++ = '0';
    if (col->b) {
        *out++ = 'E';
        *out++ = '-';
        out = put_uint(out, (uint32_t)col->b, 0);
    }
    PyObject *s = PyUnicode_FromStringAndSize(text, out - text);
    if (s == NULL)
        return NULL;
    PyObject *d = PyObject_CallOneArg(DecimalType, s);
    Py_DECREF(s);
    return d;
}

static PyObject *
set_value(const Column *col, uint64_t bits, Py_ssize_t k, Py_ssize_t off)
{
    PyObject *names = col->obj;
    if (names == NULL)
        return PyLong_FromUnsignedLongLong(bits);
    Py_ssize_t n = PyTuple_GET_SIZE(names);
    if (n < 64 && bits >> n)
        return fallback(col, k, off, "SET bits beyond its members");
    PyObject *parts = PyList_New(0);
    if (parts == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n && i < 64; i++) {
        if (bits >> i & 1) {
            if (PyList_Append(parts, PyTuple_GET_ITEM(names, i)) < 0) {
                Py_DECREF(parts);
                return NULL;
            }
        }
    }
    PyObject *v = PyUnicode_Join(Comma, parts);
    Py_DECREF(parts);
    return v;
}

static PyObject *
string_value(const Column *col, const unsigned char *p, Py_ssize_t n)
{
    PyObject *v;
    switch (col->c) {
    case C_BYTES:
        if (n < col->b) {  /* BINARY(n): raw.ljust(length, b"\0") */
            v = PyBytes_FromStringAndSize(NULL, col->b);
            if (v != NULL) {
                memcpy(PyBytes_AS_STRING(v), p, (size_t)n);
                memset(PyBytes_AS_STRING(v) + n, 0, (size_t)(col->b - n));
            }
            return v;
        }
        return PyBytes_FromStringAndSize((const char *)p, n);
    case C_UTF8:
        return PyUnicode_DecodeUTF8((const char *)p, n, NULL);
    case C_CHARMAP:
        return PyUnicode_DecodeCharmap((const char *)p, n, col->obj, NULL);
    default:
        return PyUnicode_Decode((const char *)p, n, col->codec, NULL);
    }
}

/* One non-null value at buf[*off]; advances *off. */
static PyObject *
decode_value(const Column *col, Py_ssize_t k, const unsigned char *buf, Py_ssize_t *poff, Py_ssize_t end)
{
    Py_ssize_t off = *poff;
    Raw v;
    const char *why = read_value(col, buf, poff, end, &v);
    if (why != NULL)
        return fallback(col, k, off, why);
    switch (col->kind) {
    case K_NULL:
        Py_RETURN_NONE;
    case K_INT:
        return col->b ? PyLong_FromUnsignedLongLong(v.u) : PyLong_FromLongLong((long long)v.i);
    case K_FLOAT:
    case K_DOUBLE:
        return PyFloat_FromDouble(v.d);
    case K_YEAR:
    case K_BIT:
        return PyLong_FromUnsignedLongLong(v.u);
    case K_DATE:
        return PyDateTimeAPI->Date_FromDate((int)v.y, (int)v.mo, (int)v.day, PyDateTimeAPI->DateType);
    case K_TIME:
    case K_TIME2:
        return delta_us(v.i);
    case K_DATETIME:
    case K_DATETIME2:
        return PyDateTimeAPI->DateTime_FromDateAndTime((int)v.y, (int)v.mo, (int)v.day, (int)v.h, (int)v.mi,
                                                       (int)v.s, (int)v.us, Py_None, PyDateTimeAPI->DateTimeType);
    case K_TIMESTAMP:
    case K_TIMESTAMP2:
        return utc_datetime(v.u, v.us);
    case K_NEWDECIMAL:
        return newdecimal(col, &v);
    case K_ENUM:
        if (col->obj == NULL)
            return PyLong_FromUnsignedLongLong(v.u);
        return Py_NewRef(PyTuple_GET_ITEM(col->obj, (Py_ssize_t)v.u));
    case K_SET:
        return set_value(col, v.u, k, off);
    case K_STR:
        return string_value(col, v.str, v.n);
    }
    return fallback(col, k, off, "unknown kind");
}

/* One image: the null bitmap over the plan's columns, then the non-null values. */
static PyObject *
decode_image(const PlanObject *plan, const unsigned char *buf, Py_ssize_t *poff, Py_ssize_t end)
{
    Py_ssize_t off = *poff, nb = plan->null_bytes;
    if (nb > end - off) {
        PyErr_Format(Fallback, "null bitmap at body offset %zd: truncated", off);
        return NULL;
    }
    const unsigned char *nulls = buf + off;
    off += nb;
    PyObject *tup = PyTuple_New(plan->ncols);
    if (tup == NULL)
        return NULL;
    for (Py_ssize_t k = 0; k < plan->ncols; k++) {
        PyObject *v;
        if (nulls[k >> 3] >> (k & 7) & 1)
            v = Py_NewRef(Py_None);
        else {
            Py_ssize_t start = off;
            v = decode_value(&plan->cols[k], k, buf, &off, end);
            if (v == NULL) {
                if (!PyErr_ExceptionMatches(Fallback))
                    fallback_from_error(&plan->cols[k], k, start);
                Py_DECREF(tup);
                return NULL;
            }
        }
        PyTuple_SET_ITEM(tup, k, v);
    }
    *poff = off;
    return tup;
}

/* The checks decode_rows and decode_cells make of their op and plans; *b: the update's second
   plan (NULL for an insert or a delete). -1 with an exception set when they fail. */
static int
second_plan(int op, const PlanObject *a, PyObject *pb, const PlanObject **b)
{
    *b = NULL;
    if (op < 0 || op > 2) {
        PyErr_SetString(PyExc_ValueError, "op must be 0 (insert), 1 (delete) or 2 (update)");
        return -1;
    }
    if (op == 2) {
        if (!PyObject_TypeCheck(pb, &PlanType)) {
            PyErr_SetString(PyExc_TypeError, "an update needs two plans");
            return -1;
        }
        *b = (const PlanObject *)pb;
    }
    if (a->null_bytes == 0 && (*b == NULL || (*b)->null_bytes == 0)) {
        PyErr_SetString(Fallback, "row images with no columns");
        return -1;
    }
    return 0;
}

static PyObject *
decode_rows(PyObject *module, PyObject *args)
{
    Py_buffer view;
    int op;
    PyObject *pa, *pb = Py_None;
    if (!PyArg_ParseTuple(args, "y*iO!|O:decode_rows", &view, &op, &PlanType, &pa, &pb))
        return NULL;
    PyObject *rows = NULL, *result = NULL;
    const PlanObject *a = (const PlanObject *)pa, *b = NULL;
    if (second_plan(op, a, pb, &b) < 0)
        goto done;
    rows = PyList_New(0);
    if (rows == NULL)
        goto done;
    const unsigned char *buf = view.buf;
    Py_ssize_t off = 0, end = view.len;
    while (off < end) {
        PyObject *first = decode_image(a, buf, &off, end), *pair;
        if (first == NULL)
            goto done;
        if (op == 2) {
            PyObject *second = decode_image(b, buf, &off, end);
            if (second == NULL) {
                Py_DECREF(first);
                goto done;
            }
            pair = PyTuple_Pack(2, first, second);
            Py_DECREF(second);
        }
        else
            pair = op == 0 ? PyTuple_Pack(2, Py_None, first) : PyTuple_Pack(2, first, Py_None);
        Py_DECREF(first);
        if (pair == NULL)
            goto done;
        int rc = PyList_Append(rows, pair);
        Py_DECREF(pair);
        if (rc < 0)
            goto done;
    }
    result = PyList_AsTuple(rows);
done:
    Py_XDECREF(rows);
    PyBuffer_Release(&view);
    return result;
}

/* -- cells: row images as canonical text, ready for Arrow ------------------------------- */

/*
 * decode_cells(buf, op, plan_a, plan_b=None) -> (rows, before, after)
 *
 * The same images as decode_rows, each value written as its canonical text
 * (pipelines.binlog.values.canonical_text with the column's fractional digits)
 * or, for bytes, as its bytes: one cell per (row, column), row-major. An image
 * is (text_lens, text, bin_lens, bin): int32 lengths per cell (-1: no text, or
 * no bytes) and the concatenated UTF-8 texts and bytes; an absent image is None.
 * Besides what decode_rows refuses, Fallback is raised for text not valid in its
 * charset and YEAR 0, whose cells the Python path writes (InvalidText, zero dates).
 */

typedef struct {
    char *p;
    Py_ssize_t n, cap;
} Buf;

static int
buf_grow(Buf *b, Py_ssize_t extra)
{
    if (b->n + extra <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + extra)
        cap *= 2;
    char *p = PyMem_Realloc(b->p, (size_t)cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

static inline int
buf_put(Buf *b, const void *src, Py_ssize_t n)
{
    if (buf_grow(b, n) < 0)
        return -1;
    if (n)
        memcpy(b->p + b->n, src, (size_t)n);
    b->n += n;
    return 0;
}

static inline int
buf_len(Buf *b, int32_t v)
{
    return buf_put(b, &v, sizeof v);
}

typedef struct {
    Buf text_lens, text, bin_lens, bin;
} Cells;

static void
cells_free(Cells *c)
{
    PyMem_Free(c->text_lens.p);
    PyMem_Free(c->text.p);
    PyMem_Free(c->bin_lens.p);
    PyMem_Free(c->bin.p);
}

static int
put_text(Cells *c, const char *s, Py_ssize_t n)
{
    if (buf_len(&c->text_lens, (int32_t)n) < 0 || buf_put(&c->text, s, n) < 0)
        return -1;
    return buf_len(&c->bin_lens, -1);
}

static PyObject *
put_text_or_fallback(Cells *c, const Column *col, Py_ssize_t k, Py_ssize_t off, const char *s, Py_ssize_t n)
{
    if (n > INT32_MAX)
        return fallback(col, k, off, "value of 2 GiB or more");
    return put_text(c, s, n) < 0 ? NULL : Py_None;
}

static char *
put_u64(char *out, uint64_t v)
{
    char tmp[20];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *out++ = tmp[--n];
    return out;
}

static char *
put_i64(char *out, int64_t v)
{
    if (v < 0) {
        *out++ = '-';
        return put_u64(out, (uint64_t)0 - (uint64_t)v);
    }
    return put_u64(out, (uint64_t)v);
}

/* ".ffffff" cut to fsp digits (nothing for fsp 0), as values.datetime_text/time_text */
static char *
put_fraction(char *out, long us, int fsp)
{
    if (fsp <= 0)
        return out;
    char six[6];
    put_uint(six, (uint32_t)us, 6);
    *out++ = '.';
    memcpy(out, six, (size_t)fsp);
    return out + fsp;
}

static char *
put_date(char *out, long y, long mo, long d)
{
    out = put_uint(out, (uint32_t)y, 4);
    *out++ = '-';
    out = put_uint(out, (uint32_t)mo, 2);
    *out++ = '-';
    return put_uint(out, (uint32_t)d, 2);
}

static char *
put_datetime(char *out, long y, long mo, long d, long h, long mi, long s, long us, int fsp)
{
    out = put_date(out, y, mo, d);
    *out++ = ' ';
    out = put_uint(out, (uint32_t)h, 2);
    *out++ = ':';
    out = put_uint(out, (uint32_t)mi, 2);
    *out++ = ':';
    out = put_uint(out, (uint32_t)s, 2);
    return put_fraction(out, us, fsp);
}

static char *
put_utc(char *out, uint64_t seconds, long us, int fsp)
{
    long y, m, d;
    civil_from_days((int64_t)(seconds / 86400), &y, &m, &d);
    long rem = (long)(seconds % 86400);
    return put_datetime(out, y, m, d, rem / 3600, rem / 60 % 60, rem % 60, us, fsp);
}

/* MySQL TIME text of signed microseconds: [-]HH:MM:SS[.f] (hours at least two digits) */
static char *
put_time(char *out, int64_t total, int fsp)
{
    if (total < 0) {
        *out++ = '-';
        total = -total;
    }
    int64_t secs = total / 1000000;
    out = put_uint(out, (uint32_t)(secs / 3600), 2);
    *out++ = ':';
    out = put_uint(out, (uint32_t)(secs / 60 % 60), 2);
    *out++ = ':';
    out = put_uint(out, (uint32_t)(secs % 60), 2);
    return put_fraction(out, (long)(total % 1000000), fsp);
}

/* NEWDECIMAL as values.decimal_text gives it: [-]int.frac with exactly `scale` digits */
static char *
put_decimal(const Column *col, const Raw *v, char *out)
{
    int n = v->ndigits, scale = col->b;
    if (!v->positive)
        *out++ = '-';
    if (n <= scale) {  /* 0.00ddd */
        *out++ = '0';
        if (scale) {
            *out++ = '.';
            memset(out, '0', (size_t)(scale - n));
            out += scale - n;
            memcpy(out, v->digits, (size_t)n);
            out += n;
        }
        return out;
    }
    memcpy(out, v->digits, (size_t)(n - scale));
    out += n - scale;
    if (scale) {
        *out++ = '.';
        memcpy(out, v->digits + n - scale, (size_t)scale);
        out += scale;
    }
    return out;
}

/* Well-formed UTF-8 (Unicode table 3-7), what Python's strict utf-8 decoder accepts. */
static int
valid_utf8(const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int len;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF)
            len = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            if (c == 0xE0)
                lo = 0xA0;
            else if (c == 0xED)
                hi = 0x9F;
        }
        else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            if (c == 0xF0)
                lo = 0x90;
            else if (c == 0xF4)
                hi = 0x8F;
        }
        else
            return 0;
        if (n - i < len || s[i + 1] < lo || s[i + 1] > hi)
            return 0;
        for (int j = 2; j < len; j++)
            if (s[i + j] < 0x80 || s[i + j] > 0xBF)
                return 0;
        i += len;
    }
    return 1;
}

/* A str object's UTF-8 as a text cell (steals the reference). */
static PyObject *
put_str(Cells *c, const Column *col, Py_ssize_t k, Py_ssize_t off, PyObject *s)
{
    if (s == NULL)
        return NULL;
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(s, &n);
    PyObject *r = u == NULL ? NULL : put_text_or_fallback(c, col, k, off, u, n);
    Py_DECREF(s);
    return r;
}

/* One non-null value at buf[*off] as a cell; advances *off. Returns Py_None (borrowed) or NULL. */
static PyObject *
encode_value(Cells *c, const Column *col, Py_ssize_t k, const unsigned char *buf, Py_ssize_t *poff, Py_ssize_t end)
{
    Py_ssize_t off = *poff;
    char text[160], *out = text;
    Raw v;
    const char *why = read_value(col, buf, poff, end, &v);
    if (why != NULL)
        return fallback(col, k, off, why);
    switch (col->kind) {
    case K_NULL:
        if (buf_len(&c->text_lens, -1) < 0 || buf_len(&c->bin_lens, -1) < 0)
            return NULL;
        return Py_None;
    case K_INT:
        out = col->b ? put_u64(out, v.u) : put_i64(out, v.i);
        break;
    case K_FLOAT:
    case K_DOUBLE: {
        char *r = PyOS_double_to_string(v.d, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);  /* repr(float) */
        if (r == NULL)
            return NULL;
        PyObject *done = put_text_or_fallback(c, col, k, off, r, (Py_ssize_t)strlen(r));
        PyMem_Free(r);
        return done;
    }
    case K_YEAR:
        if (!v.u)
            return fallback(col, k, off, "YEAR 0");
        out = put_u64(out, v.u);
        break;
    case K_BIT:
        out = put_u64(out, v.u);
        break;
    case K_DATE:
        out = put_date(out, v.y, v.mo, v.day);
        break;
    case K_TIME:
    case K_TIME2:
        out = put_time(out, v.i, col->kind == K_TIME2 ? col->a : 0);
        break;
    case K_DATETIME:
    case K_DATETIME2:
        out = put_datetime(out, v.y, v.mo, v.day, v.h, v.mi, v.s, v.us, col->kind == K_DATETIME2 ? col->a : 0);
        break;
    case K_TIMESTAMP:
    case K_TIMESTAMP2:
        out = put_utc(out, v.u, v.us, col->kind == K_TIMESTAMP2 ? col->a : 0);
        break;
    case K_NEWDECIMAL:
        out = put_decimal(col, &v, out);
        break;
    case K_ENUM:
        if (col->obj == NULL) {
            out = put_u64(out, v.u);
            break;
        }
        return put_str(c, col, k, off, Py_NewRef(PyTuple_GET_ITEM(col->obj, (Py_ssize_t)v.u)));
    case K_SET:
        if (col->obj == NULL) {
            out = put_u64(out, v.u);
            break;
        }
        return put_str(c, col, k, off, set_value(col, v.u, k, off));
    case K_STR: {
        Py_ssize_t n = v.n;
        if (n > INT32_MAX || col->b > INT32_MAX)
            return fallback(col, k, off, "value of 2 GiB or more");
        switch (col->c) {
        case C_BYTES: {
            Py_ssize_t width = n < col->b ? col->b : n;  /* BINARY(n): right-padded with \0 */
            if (buf_len(&c->text_lens, -1) < 0 || buf_len(&c->bin_lens, (int32_t)width) < 0
                || buf_put(&c->bin, v.str, n) < 0 || buf_grow(&c->bin, width - n) < 0)
                return NULL;
            memset(c->bin.p + c->bin.n, 0, (size_t)(width - n));
            c->bin.n += width - n;
            return Py_None;
        }
        case C_UTF8:
            if (!valid_utf8(v.str, n))
                return fallback(col, k, off, "text not valid UTF-8");
            return put_text_or_fallback(c, col, k, off, (const char *)v.str, n);
        default:
            return put_str(c, col, k, off, string_value(col, v.str, n));
        }
    }
    default:
        return fallback(col, k, off, "unknown kind");
    }
    return put_text_or_fallback(c, col, k, off, text, out - text);
}

static int
encode_image(const PlanObject *plan, const unsigned char *buf, Py_ssize_t *poff, Py_ssize_t end, Cells *c)
{
    Py_ssize_t off = *poff, nb = plan->null_bytes;
    if (nb > end - off) {
        PyErr_Format(Fallback, "null bitmap at body offset %zd: truncated", off);
        return -1;
    }
    const unsigned char *nulls = buf + off;
    off += nb;
    for (Py_ssize_t k = 0; k < plan->ncols; k++) {
        if (nulls[k >> 3] >> (k & 7) & 1) {
            if (buf_len(&c->text_lens, -1) < 0 || buf_len(&c->bin_lens, -1) < 0)
                return -1;
            continue;
        }
        Py_ssize_t start = off;
        if (encode_value(c, &plan->cols[k], k, buf, &off, end) == NULL) {
            if (!PyErr_ExceptionMatches(Fallback))
                fallback_from_error(&plan->cols[k], k, start);
            return -1;
        }
    }
    *poff = off;
    return 0;
}

static PyObject *
cells_result(Cells *c)
{
    return Py_BuildValue("(y#y#y#y#)", c->text_lens.p ? c->text_lens.p : "", c->text_lens.n,
                         c->text.p ? c->text.p : "", c->text.n, c->bin_lens.p ? c->bin_lens.p : "", c->bin_lens.n,
                         c->bin.p ? c->bin.p : "", c->bin.n);
}

static PyObject *
decode_cells(PyObject *module, PyObject *args)
{
    Py_buffer view;
    int op;
    PyObject *pa, *pb = Py_None, *result = NULL, *first = NULL, *second = NULL;
    if (!PyArg_ParseTuple(args, "y*iO!|O:decode_cells", &view, &op, &PlanType, &pa, &pb))
        return NULL;
    const PlanObject *a = (const PlanObject *)pa, *b = NULL;
    Cells ca, cb;
    memset(&ca, 0, sizeof ca);
    memset(&cb, 0, sizeof cb);
    Py_ssize_t rows = 0;
    if (second_plan(op, a, pb, &b) < 0)
        goto done;
    const unsigned char *buf = view.buf;
    Py_ssize_t off = 0, end = view.len;
    while (off < end) {
        if (encode_image(a, buf, &off, end, &ca) < 0)
            goto done;
        if (b != NULL && encode_image(b, buf, &off, end, &cb) < 0)
            goto done;
        rows++;
    }
    first = cells_result(&ca);
    if (first == NULL)
        goto done;
    if (op == 2) {
        second = cells_result(&cb);
        if (second == NULL)
            goto done;
        result = Py_BuildValue("(nOO)", rows, first, second);
    }
    else
        result = op == 0 ? Py_BuildValue("(nOO)", rows, Py_None, first) : Py_BuildValue("(nOO)", rows, first, Py_None);
done:
    Py_XDECREF(first);
    Py_XDECREF(second);
    cells_free(&ca);
    cells_free(&cb);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"decode_rows", decode_rows, METH_VARARGS,
     "decode_rows(buf, op, plan_a, plan_b=None) -> tuple of (before, after) pairs.\n\n"
     "op 0 (insert): (None, A); 1 (delete): (A, None); 2 (update): (A, B), where A and B\n"
     "are images decoded with plan_a and plan_b. Raises Fallback when the Python\n"
     "decoder has to decode the body instead (odd values, truncated or corrupt bytes)."},
    {"decode_cells", decode_cells, METH_VARARGS,
     "decode_cells(buf, op, plan_a, plan_b=None) -> (rows, before, after).\n\n"
     "The images of decode_rows as canonical-text cells, row-major: each image is\n"
     "(text_lens, text, bin_lens, bin) with int32 lengths per cell (-1: none), or None.\n"
     "Raises Fallback where decode_rows does, and for invalid text and YEAR 0."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT,
    .m_name = "pipelines.binlog._speedups",
    .m_doc = "Compiled row-image decoder (optional; see pipelines/binlog/accel.py).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    PyObject *m = NULL, *decimal = NULL;
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == NULL)
        return NULL;
    if (PyType_Ready(&PlanType) < 0)
        return NULL;
    decimal = PyImport_ImportModule("decimal");
    if (decimal == NULL)
        goto error;
    DecimalType = PyObject_GetAttrString(decimal, "Decimal");
    Py_CLEAR(decimal);
    if (DecimalType == NULL)
        goto error;
    Comma = PyUnicode_InternFromString(",");
    if (Comma == NULL)
        goto error;
    Fallback = PyErr_NewException("pipelines.binlog._speedups.Fallback", NULL, NULL);
    if (Fallback == NULL)
        goto error;
    m = PyModule_Create(&moduledef);
    if (m == NULL)
        goto error;
    if (PyModule_AddObjectRef(m, "Fallback", Fallback) < 0
        || PyModule_AddObjectRef(m, "Plan", (PyObject *)&PlanType) < 0)
        goto error;
    if (PyModule_AddIntConstant(m, "K_NULL", K_NULL) < 0
        || PyModule_AddIntConstant(m, "K_INT", K_INT) < 0
        || PyModule_AddIntConstant(m, "K_FLOAT", K_FLOAT) < 0
        || PyModule_AddIntConstant(m, "K_DOUBLE", K_DOUBLE) < 0
        || PyModule_AddIntConstant(m, "K_YEAR", K_YEAR) < 0
        || PyModule_AddIntConstant(m, "K_DATE", K_DATE) < 0
        || PyModule_AddIntConstant(m, "K_TIME", K_TIME) < 0
        || PyModule_AddIntConstant(m, "K_DATETIME", K_DATETIME) < 0
        || PyModule_AddIntConstant(m, "K_TIMESTAMP", K_TIMESTAMP) < 0
        || PyModule_AddIntConstant(m, "K_TIME2", K_TIME2) < 0
        || PyModule_AddIntConstant(m, "K_DATETIME2", K_DATETIME2) < 0
        || PyModule_AddIntConstant(m, "K_TIMESTAMP2", K_TIMESTAMP2) < 0
        || PyModule_AddIntConstant(m, "K_NEWDECIMAL", K_NEWDECIMAL) < 0
        || PyModule_AddIntConstant(m, "K_BIT", K_BIT) < 0
        || PyModule_AddIntConstant(m, "K_ENUM", K_ENUM) < 0
        || PyModule_AddIntConstant(m, "K_SET", K_SET) < 0
        || PyModule_AddIntConstant(m, "K_STR", K_STR) < 0
        || PyModule_AddIntConstant(m, "C_BYTES", C_BYTES) < 0
        || PyModule_AddIntConstant(m, "C_UTF8", C_UTF8) < 0
        || PyModule_AddIntConstant(m, "C_CHARMAP", C_CHARMAP) < 0
        || PyModule_AddIntConstant(m, "C_CODEC", C_CODEC) < 0)
        goto error;
    return m;
error:
    Py_XDECREF(m);
    Py_CLEAR(DecimalType);
    Py_CLEAR(Comma);
    Py_CLEAR(Fallback);
    return NULL;
}
