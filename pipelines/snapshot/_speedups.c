/*
 * Optional accelerator for pipelines.snapshot.values: the rows of one INSERT's VALUES list, read
 * in one pass in C with results identical to values._fast_rows (the pure-Python fast path).
 *
 *   values_rows(buf, start, stop, other, binary, no) -> list of tuples, or None
 *
 * buf[start:stop] is the list after its first '(' up to and including the ';' that ends the
 * statement. Each value is what _fast_rows makes of it:
 *   'text'            bytes, MySQL's escapes applied as values.unescape applies them
 *   123               str (the digits)
 *   -1.5e3            str (a number literal)
 *   NULL              None
 *   0x1F              binary(bytes)  (an odd number of digits takes a leading 0)
 *   anything else     other(token)   ("text", X'..', B'..', 0b.., _charset '...', TRUE, null)
 * `other` returns `no` for a token it does not read. Whenever the text is not a list that
 * _fast_rows would read the same way (an unexpected byte, a value it would not take, anything
 * after the ';'), the result is None and the caller reads the statement again with the exact
 * parser, which gives the precise error.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

static inline int is_ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
/* Python's bytes \s: [ \t\n\r\f\v] */
static inline int is_space(unsigned char c) { return is_ws(c) || c == '\f' || c == '\v'; }
static inline int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static inline int is_hex(unsigned char c) {
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
static inline int is_alnum(unsigned char c) {
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static inline int hex_value(unsigned char c) {
    if (c <= '9') return c - '0';
    if (c >= 'a') return c - 'a' + 10;
    return c - 'A' + 10;
}

/* the end of a quoted body starting after its opening quote at p (the index of the closing
   quote), or -1; *escaped tells whether it holds a backslash or a doubled quote */
static Py_ssize_t quoted_end(const unsigned char *s, Py_ssize_t p, Py_ssize_t stop, unsigned char q, int *escaped) {
    *escaped = 0;
    while (p < stop) {
        unsigned char c = s[p];
        if (c == '\\') {
            if (p + 1 >= stop) return -1;
            *escaped = 1;
            p += 2;
        } else if (c == q) {
            if (p + 1 < stop && s[p + 1] == q) {
                *escaped = 1;
                p += 2;
            } else {
                return p;
            }
        } else {
            p++;
        }
    }
    return -1;
}

/* [-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?  over all of s[a:b] */
static int is_number(const unsigned char *s, Py_ssize_t a, Py_ssize_t b) {
    Py_ssize_t p = a;
    if (p < b && (s[p] == '-' || s[p] == '+')) p++;
    Py_ssize_t int_start = p;
    while (p < b && is_digit(s[p])) p++;
    int int_digits = p > int_start;
    if (p < b && s[p] == '.') {
        p++;
        Py_ssize_t frac_start = p;
        while (p < b && is_digit(s[p])) p++;
        if (!int_digits && p == frac_start) return 0;
    } else if (!int_digits) {
        return 0;
    }
    if (p < b && (s[p] == 'e' || s[p] == 'E')) {
        p++;
        if (p < b && (s[p] == '-' || s[p] == '+')) p++;
        Py_ssize_t exp_start = p;
        while (p < b && is_digit(s[p])) p++;
        if (p == exp_start) return 0;
    }
    return p == b;
}

/* bytes.fromhex of s[a:b] with a leading 0 when the count is odd; NULL with no error set when a
   byte is not a hex digit */
static PyObject *hex_bytes(const unsigned char *s, Py_ssize_t a, Py_ssize_t b) {
    Py_ssize_t n = b - a;
    for (Py_ssize_t i = a; i < b; i++)
        if (!is_hex(s[i])) return NULL;
    Py_ssize_t size = (n + 1) / 2;
    PyObject *out = PyBytes_FromStringAndSize(NULL, size);
    if (out == NULL) return NULL;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    Py_ssize_t i = a, k = 0;
    if (n % 2) o[k++] = (unsigned char)hex_value(s[i++]);
    for (; i < b; i += 2) o[k++] = (unsigned char)(hex_value(s[i]) << 4 | hex_value(s[i + 1]));
    return out;
}

/* the end of a token that starts at p and is not an unquoted run (a quoted string, X'', B'',
   or an introducer), or -1 when it does not match that form */
static Py_ssize_t special_end(const unsigned char *s, Py_ssize_t p, Py_ssize_t stop) {
    unsigned char c = s[p];
    int escaped;
    if (c == '"') {
        Py_ssize_t e = quoted_end(s, p + 1, stop, '"', &escaped);
        return e < 0 ? -1 : e + 1;
    }
    if ((c == 'X' || c == 'x' || c == 'B' || c == 'b') && p + 1 < stop && s[p + 1] == '\'') {
        int hex = c == 'X' || c == 'x';
        Py_ssize_t q = p + 2;
        while (q < stop && (hex ? is_hex(s[q]) : (s[q] == '0' || s[q] == '1'))) q++;
        return (q < stop && s[q] == '\'') ? q + 1 : -1;
    }
    if (c == '_' && p + 1 < stop && is_alnum(s[p + 1])) {
        Py_ssize_t q = p + 1;
        while (q < stop && is_alnum(s[q])) q++;
        while (q < stop && is_ws(s[q])) q++;
        if (q >= stop) return -1;
        if (s[q] == '\'') {
            Py_ssize_t e = quoted_end(s, q + 1, stop, '\'', &escaped);
            return e < 0 ? -1 : e + 1;
        }
        if (s[q] == '0' && q + 1 < stop && s[q + 1] == 'x') {
            q += 2;
            while (q < stop && is_hex(s[q])) q++;
            return q;
        }
        if ((s[q] == 'X' || s[q] == 'x') && q + 1 < stop && s[q + 1] == '\'') {
            q += 2;
            while (q < stop && is_hex(s[q])) q++;
            return (q < stop && s[q] == '\'') ? q + 1 : -1;
        }
        return -1;
    }
    return 0; /* not a special form: an unquoted run */
}

/* MySQL's escapes in a quoted body s[a:b], as values.unescape applies them: \0 \' \" \b \n \r
   \t \Z \\ to their byte, \% and \_ kept as two bytes, any other \x to x; a doubled quote q to one */
static PyObject *unescaped(const unsigned char *s, Py_ssize_t a, Py_ssize_t b, unsigned char q) {
    PyObject *out = PyBytes_FromStringAndSize(NULL, b - a);
    if (out == NULL) return NULL;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    Py_ssize_t k = 0;
    for (Py_ssize_t i = a; i < b; i++) {
        unsigned char c = s[i];
        if (c == '\\' && i + 1 < b) {
            unsigned char e = s[++i];
            switch (e) {
            case '0': o[k++] = 0; break;
            case 'b': o[k++] = 8; break;
            case 'n': o[k++] = 10; break;
            case 'r': o[k++] = 13; break;
            case 't': o[k++] = 9; break;
            case 'Z': o[k++] = 26; break;
            case '%': case '_': o[k++] = '\\'; o[k++] = e; break;
            default: o[k++] = e;
            }
        } else if (c == q && i + 1 < b && s[i + 1] == q) {
            o[k++] = q;
            i++;
        } else {
            o[k++] = c;
        }
    }
    if (_PyBytes_Resize(&out, k) < 0) return NULL;
    return out;
}

/* one value at s[a:b] (a token); a new reference, Py_None for a token _fast_rows would not read
   (returned as `fallback` = 1), NULL on a Python error */
static PyObject *token_value(const unsigned char *s, Py_ssize_t a, Py_ssize_t b, int quoted_escaped,
                             PyObject *other, PyObject *binary, PyObject *no, int *fallback) {
    unsigned char c = s[a];
    Py_ssize_t n = b - a;
    if (c == '\'') {
        if (quoted_escaped) return unescaped(s, a + 1, b - 1, '\'');
        return PyBytes_FromStringAndSize((const char *)s + a + 1, n - 2);
    }
    int digits = 1;
    for (Py_ssize_t i = a; i < b; i++)
        if (!is_digit(s[i])) { digits = 0; break; }
    if (digits) return PyUnicode_DecodeASCII((const char *)s + a, n, NULL);
    if (c == 'N') {
        if (n == 4 && memcmp(s + a, "NULL", 4) == 0) Py_RETURN_NONE;
        *fallback = 1;
        Py_RETURN_NONE;
    }
    if (c == '0' && n > 2 && s[a + 1] == 'x') {
        PyObject *raw = hex_bytes(s, a + 2, b);
        if (raw == NULL) {
            if (PyErr_Occurred()) return NULL;
            *fallback = 1;
            Py_RETURN_NONE;
        }
        PyObject *v = PyObject_CallOneArg(binary, raw);
        Py_DECREF(raw);
        return v;
    }
    if (is_number(s, a, b)) return PyUnicode_DecodeASCII((const char *)s + a, n, NULL);
    PyObject *tok = PyBytes_FromStringAndSize((const char *)s + a, n);
    if (tok == NULL) return NULL;
    PyObject *v = PyObject_CallOneArg(other, tok);
    Py_DECREF(tok);
    if (v == no) {
        Py_DECREF(v);
        *fallback = 1;
        Py_RETURN_NONE;
    }
    return v;
}

static PyObject *values_rows(PyObject *self, PyObject *args) {
    PyObject *bufobj, *other, *binary, *no;
    Py_ssize_t start, stop;
    if (!PyArg_ParseTuple(args, "OnnOOO", &bufobj, &start, &stop, &other, &binary, &no)) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(bufobj, &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *s = (const unsigned char *)view.buf;
    if (start < 0 || stop > view.len || start > stop) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "values_rows: start and stop must lie within the buffer");
        return NULL;
    }
    PyObject *rows = PyList_New(0), *row = PyList_New(0);
    if (rows == NULL || row == NULL) goto error;
    Py_ssize_t p = start;
    for (;;) {
        while (p < stop && is_ws(s[p])) p++;
        if (p >= stop) goto fallback;
        Py_ssize_t a = p, b;
        int escaped = 0;
        unsigned char c = s[p];
        if (c == '\'') {
            Py_ssize_t e = quoted_end(s, p + 1, stop, '\'', &escaped);
            if (e < 0) goto fallback;
            b = e + 1;
        } else {
            b = special_end(s, p, stop);
            if (b < 0) goto fallback;
            if (b == 0) { /* an unquoted run: [^,)'"\s]+ */
                b = p;
                while (b < stop) {
                    unsigned char d = s[b];
                    if (d == ',' || d == ')' || d == '\'' || d == '"' || is_space(d)) break;
                    b++;
                }
                if (b == p) goto fallback;
            }
        }
        int fb = 0;
        PyObject *v = token_value(s, a, b, escaped, other, binary, no, &fb);
        if (v == NULL) goto error;
        if (fb) {
            Py_DECREF(v);
            goto fallback;
        }
        int added = PyList_Append(row, v);
        Py_DECREF(v);
        if (added < 0) goto error;
        /* the separator: ',' | ')' ws (',' ws '(' | ';') */
        p = b;
        while (p < stop && is_ws(s[p])) p++;
        if (p >= stop) goto fallback;
        if (s[p] == ',') {
            p++;
            continue;
        }
        if (s[p] != ')') goto fallback;
        p++;
        while (p < stop && is_ws(s[p])) p++;
        if (p >= stop) goto fallback;
        PyObject *tuple = PyList_AsTuple(row);
        if (tuple == NULL) goto error;
        added = PyList_Append(rows, tuple);
        Py_DECREF(tuple);
        if (added < 0) goto error;
        Py_SETREF(row, PyList_New(0));
        if (row == NULL) goto error;
        if (s[p] == ';') {
            if (p + 1 != stop) goto fallback;
            break;
        }
        if (s[p] != ',') goto fallback;
        p++;
        while (p < stop && is_ws(s[p])) p++;
        if (p >= stop || s[p] != '(') goto fallback;
        p++;
    }
    Py_DECREF(row);
    PyBuffer_Release(&view);
    return rows;
fallback:
    Py_XDECREF(rows);
    Py_XDECREF(row);
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
error:
    Py_XDECREF(rows);
    Py_XDECREF(row);
    PyBuffer_Release(&view);
    return NULL;
}

static PyMethodDef methods[] = {
    {"values_rows", values_rows, METH_VARARGS,
     "values_rows(buf, start, stop, other, binary, no) -> rows of one VALUES list, or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_speedups", NULL, -1, methods};

PyMODINIT_FUNC PyInit__speedups(void) { return PyModule_Create(&module); }
