/*
 * kwker_gate.c - kwker._gate: the first check of every patched call, in C.
 *
 * CPython glue, not part of the C library (native/src): it sees no tensor
 * data, only Python objects.  install() puts a gate in front of each
 * dispatch entry (kwker/patching.py).  The gate does what the entry's first
 * lines do in Python (dispatch._size_rule_first): a plain torch.Tensor
 * input with fewer elements than the op's crossover goes straight to torch
 * with the caller's arguments, counted; so does a plain tensor on another
 * device (CUDA, meta: the entry would send it to torch after parsing the
 * arguments, ~2 us in Python); anything else goes to the entry's body.  It exists because that check is both the most frequent fallback
 * and, in Python, most of its cost: a Python frame for the entry, and the
 * caller's arguments unpacked and repacked into the original's call.
 * Measured (timeit, torch.median of 20 float32, one thread): torch alone
 * 2.34 us; the Python wrapper 3.30 us; the gate 2.40 us (method form,
 * x.median()) and 2.77 us (function form, inside wrapt's wrapper).
 *
 * Two types:
 * - FunctionGate: the wrapper function of a wrapt FunctionWrapper around
 *   torch.<op>; called as gate(wrapped, instance, args, kwargs).
 * - MethodGate: what torch.Tensor.<op> is while installed (the C version
 *   of patching.KwkerMethod): a method descriptor, so x.<op>(...) calls it
 *   with x first and no bound-method object; through the class it is
 *   itself, and it compares, hashes, copies and pickles as the original.
 *
 * The crossover is read on every call from namespace[name][op] (the
 * dispatch module's _MIN_NUMEL, which use_size_rules() rebinds and
 * calibration and tests update in place), so the gate never holds a stale
 * copy.  The calls it sends to torch are counted in the gate itself (a
 * dict update per call cost ~500 instructions, a quarter of the rest);
 * kwker.dispatch.Stats takes the counts when it reports or resets.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <structmember.h>

#include "../src/fp_env.h"

#if PY_VERSION_HEX < 0x030A0000 /* Python 3.9 */
static inline PyObject *Py_NewRef(PyObject *o)
{
    Py_INCREF(o);
    return o;
}
static int PyModule_AddObjectRef(PyObject *module, const char *name, PyObject *value)
{
    Py_INCREF(value);
    if (PyModule_AddObject(module, name, value) < 0) {
        Py_DECREF(value);
        return -1;
    }
    return 0;
}
#endif

enum { TO_ENTRY = 0, SMALL = 1, OFF_CPU = 2 };

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *op;          /* str: the op's name, the key of the two dicts */
    PyObject *body;        /* body(wrapped, instance, args, kwargs, decide_only) */
    PyObject *tensor_type; /* torch.Tensor: only exact instances are checked */
    PyObject *namespace;   /* dict holding the crossover dict under `name` */
    PyObject *name;
    Py_ssize_t counts[3];  /* calls sent to torch, by route (SMALL, OFF_CPU) */
    PyObject *original;    /* MethodGate: the unbound torch method */
    PyObject *owner;       /* MethodGate: torch.Tensor (pickling) */
    PyObject *bind_as;     /* MethodGate: what x.<op> binds (NULL: the gate) */
    PyObject *dict;        /* __wrapped__, __name__, __doc__, ... */
} Gate;

static PyObject *str_numel, *str_input, *str_is_cpu, *builtin_getattr;

static int gate_small(Gate *g, PyObject *x);

/* Where the call goes: SMALL, x a plain tensor below the op's crossover,
 * or OFF_CPU, x a plain tensor on another device (CUDA, meta, ...): to
 * torch; TO_ENTRY: the entry decides; -1: a Python error is set. */
static int gate_route(Gate *g, PyObject *x)
{
    if (x == NULL || Py_TYPE(x) != (PyTypeObject *)g->tensor_type) return TO_ENTRY;
    const int small = gate_small(g, x);
    if (small != 0) return small < 0 ? -1 : SMALL;
    /* asked only now: it costs ~400 instructions, a fifth of a fallback's
     * whole cost in the gate, and nothing beside a fast call's */
    PyObject *is_cpu = PyObject_GetAttr(x, str_is_cpu);
    if (is_cpu == NULL) return -1;
    const int cpu = PyObject_IsTrue(is_cpu);
    Py_DECREF(is_cpu);
    if (cpu < 0) return -1;
    return cpu ? TO_ENTRY : OFF_CPU;
}

/* 1: x (a plain tensor) is below the op's crossover; 0: not; -1: error */
static int gate_small(Gate *g, PyObject *x)
{
    PyObject *rules = PyDict_GetItemWithError(g->namespace, g->name);
    if (rules == NULL || !PyDict_Check(rules)) return PyErr_Occurred() ? -1 : 0;
    PyObject *limit_obj = PyDict_GetItemWithError(rules, g->op);
    if (limit_obj == NULL) return PyErr_Occurred() ? -1 : 0;
    const Py_ssize_t limit = PyLong_AsSsize_t(limit_obj);
    if (limit == -1 && PyErr_Occurred()) return -1;
    if (limit <= 0) return 0; /* no size rule: numel() is not even asked */
    PyObject *call_args[1] = {x};
    PyObject *numel_obj = PyObject_VectorcallMethod(
        str_numel, call_args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (numel_obj == NULL) return -1;
    const Py_ssize_t numel = PyLong_AsSsize_t(numel_obj);
    Py_DECREF(numel_obj);
    if (numel == -1 && PyErr_Occurred()) return -1;
    return numel < limit;
}

/* The counts of calls sent to torch, read and zeroed by take_counts()
 * (kwker.dispatch.Stats adds them to its own when it reports); plain
 * increments under the GIL, approximate without one, as the Python
 * counters are. */
static PyObject *gate_take_counts(PyObject *self, PyObject *ignored);
#define GATE_TAKE_COUNTS_METHOD                                               \
    {"take_counts", gate_take_counts, METH_NOARGS,                            \
     "(small, off_cpu): the calls sent to torch since the last take, zeroed"}

static PyObject *gate_take_counts(PyObject *self, PyObject *ignored)
{
    (void)ignored;
    Gate *g = (Gate *)self;
    PyObject *result = Py_BuildValue("nn", g->counts[SMALL], g->counts[OFF_CPU]);
    if (result != NULL) g->counts[SMALL] = g->counts[OFF_CPU] = 0;
    return result;
}

static PyObject *call_body(Gate *g, PyObject *wrapped, PyObject *instance, PyObject *args,
                           PyObject *kwargs)
{
    PyObject *call_args[5] = {wrapped, instance, args, kwargs, Py_False};
    return PyObject_Vectorcall(g->body, call_args, 5, NULL);
}

/* ---------------------------------------------------------- FunctionGate */

static PyObject *function_gate_call(PyObject *self, PyObject *const *args, size_t nargsf,
                                    PyObject *kwnames)
{
    Gate *g = (Gate *)self;
    if (PyVectorcall_NARGS(nargsf) != 4 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError,
                        "kwker gate: expected (wrapped, instance, args, kwargs)");
        return NULL;
    }
    PyObject *wrapped = args[0], *instance = args[1], *call_args = args[2], *kwargs = args[3];
    if (!PyTuple_Check(call_args)) {
        PyErr_SetString(PyExc_TypeError, "kwker gate: args must be a tuple");
        return NULL;
    }
    const int has_kwargs = kwargs != Py_None;
    if (has_kwargs && !PyDict_Check(kwargs)) {
        PyErr_SetString(PyExc_TypeError, "kwker gate: kwargs must be a dict or None");
        return NULL;
    }
    PyObject *x = NULL;
    if (instance != Py_None) {
        x = instance;
    } else if (PyTuple_GET_SIZE(call_args) > 0) {
        x = PyTuple_GET_ITEM(call_args, 0);
    } else if (has_kwargs) {
        x = PyDict_GetItemWithError(kwargs, str_input);
        if (x == NULL && PyErr_Occurred()) return NULL;
    }
    const int route = gate_route(g, x);
    if (route < 0) return NULL;
    if (route != TO_ENTRY) {
        g->counts[route]++;
        return PyObject_Call(wrapped, call_args,
                             has_kwargs && PyDict_GET_SIZE(kwargs) ? kwargs : NULL);
    }
    if (has_kwargs) return call_body(g, wrapped, instance, call_args, kwargs);
    PyObject *empty = PyDict_New(); /* the entries take a dict */
    if (empty == NULL) return NULL;
    PyObject *result = call_body(g, wrapped, instance, call_args, empty);
    Py_DECREF(empty);
    return result;
}

/* ------------------------------------------------------------ MethodGate */

/* x.<op>(...) or torch.Tensor.<op>(x, ...): args[0] is the tensor.  The
 * body gets the function form (unbound original, instance None, the
 * tensor first in args), as patching.KwkerMethod passes it. */
static PyObject *method_gate_call(PyObject *self, PyObject *const *args, size_t nargsf,
                                  PyObject *kwnames)
{
    Gate *g = (Gate *)self;
    const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    const int route = gate_route(g, nargs > 0 ? args[0] : NULL);
    if (route < 0) return NULL;
    if (route != TO_ENTRY) {
        g->counts[route]++;
        return PyObject_Vectorcall(g->original, args, nargsf, kwnames);
    }
    PyObject *tuple = PyTuple_New(nargs);
    if (tuple == NULL) return NULL;
    for (Py_ssize_t i = 0; i < nargs; ++i) {
        Py_INCREF(args[i]);
        PyTuple_SET_ITEM(tuple, i, args[i]);
    }
    PyObject *kwargs = PyDict_New();
    if (kwargs == NULL) {
        Py_DECREF(tuple);
        return NULL;
    }
    const Py_ssize_t nkw = kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nkw; ++i) {
        if (PyDict_SetItem(kwargs, PyTuple_GET_ITEM(kwnames, i), args[nargs + i]) < 0) {
            Py_DECREF(tuple);
            Py_DECREF(kwargs);
            return NULL;
        }
    }
    PyObject *result = call_body(g, g->original, Py_None, tuple, kwargs);
    Py_DECREF(tuple);
    Py_DECREF(kwargs);
    return result;
}

/* x.<op> without a call (x.<op>(...) itself binds nothing: a method
 * descriptor is called with x first).  It binds `bind_as` where set:
 * patching.py sets a plain function, so that a bound x.<op> has what
 * KwkerMethod's has (the function's name and doc, no __wrapped__, which
 * would be the unbound original) and pickles as getattr(x, name). */
static PyObject *method_gate_get(PyObject *self, PyObject *obj, PyObject *type)
{
    (void)type;
    if (obj == NULL || obj == Py_None) return Py_NewRef(self);
    Gate *g = (Gate *)self;
    return PyMethod_New(g->bind_as != NULL ? g->bind_as : self, obj);
}

/* Equal to the original method and to any gate over it, as KwkerMethod. */
static PyTypeObject MethodGateType;

static PyObject *method_gate_richcompare(PyObject *self, PyObject *other, int op)
{
    if (op != Py_EQ && op != Py_NE) Py_RETURN_NOTIMPLEMENTED;
    if (PyObject_TypeCheck(other, &MethodGateType)) other = ((Gate *)other)->original;
    return PyObject_RichCompare(((Gate *)self)->original, other, op);
}

static Py_hash_t method_gate_hash(PyObject *self)
{
    return PyObject_Hash(((Gate *)self)->original);
}

static PyObject *method_gate_repr(PyObject *self)
{
    Gate *g = (Gate *)self;
    return PyUnicode_FromFormat("<kwker method %U wrapping %R>", g->op, g->original);
}

static PyObject *gate_self(PyObject *self, PyObject *ignored)
{
    (void)ignored;
    return Py_NewRef(self);
}

/* pickles as getattr(torch.Tensor, name): whatever it is when loaded */
static PyObject *method_gate_reduce_ex(PyObject *self, PyObject *protocol)
{
    (void)protocol;
    Gate *g = (Gate *)self;
    return Py_BuildValue("O(OO)", builtin_getattr, g->owner, g->op);
}

static PyMethodDef method_gate_methods[] = {
    GATE_TAKE_COUNTS_METHOD,
    {"__copy__", gate_self, METH_NOARGS, NULL},
    {"__deepcopy__", gate_self, METH_O, NULL},
    {"__reduce_ex__", method_gate_reduce_ex, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

/* ------------------------------------------------------------- common */

/* Every object a gate holds, for the GC's traverse and clear. */
#define GATE_OBJECTS(X)                                                       \
    X(op) X(body) X(tensor_type) X(namespace) X(name) X(original) X(owner)    \
    X(bind_as) X(dict)

static int gate_traverse(PyObject *self, visitproc visit, void *arg)
{
    Gate *g = (Gate *)self;
#define GATE_VISIT(field) Py_VISIT(g->field);
    GATE_OBJECTS(GATE_VISIT)
#undef GATE_VISIT
    return 0;
}

static int gate_clear(PyObject *self)
{
    Gate *g = (Gate *)self;
#define GATE_CLEAR(field) Py_CLEAR(g->field);
    GATE_OBJECTS(GATE_CLEAR)
#undef GATE_CLEAR
    return 0;
}

static void gate_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    gate_clear(self);
    Py_TYPE(self)->tp_free(self);
}

/* Gate(op, body, tensor_type, namespace, name[, original, owner]) */
static int gate_init_common(Gate *g, PyObject *args, PyObject *kwargs, int method)
{
    static char *keywords[] = {"op", "body", "tensor_type", "namespace", "name", "original",
                               "owner", NULL};
    PyObject *op, *body, *tensor_type, *namespace, *name;
    PyObject *original = Py_None, *owner = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "UOO!O!U|OO", keywords, &op, &body,
                                     &PyType_Type, &tensor_type, &PyDict_Type, &namespace,
                                     &name, &original, &owner))
        return -1;
    if (!PyCallable_Check(body) || (method && !PyCallable_Check(original))) {
        PyErr_SetString(PyExc_TypeError, "kwker gate: body and original must be callable");
        return -1;
    }
    Py_XSETREF(g->op, Py_NewRef(op));
    Py_XSETREF(g->body, Py_NewRef(body));
    Py_XSETREF(g->tensor_type, Py_NewRef(tensor_type));
    Py_XSETREF(g->namespace, Py_NewRef(namespace));
    Py_XSETREF(g->name, Py_NewRef(name));
    g->counts[SMALL] = g->counts[OFF_CPU] = 0;
    Py_XSETREF(g->original, Py_NewRef(original));
    Py_XSETREF(g->owner, Py_NewRef(owner));
    g->vectorcall = method ? method_gate_call : function_gate_call;
    return 0;
}

static int function_gate_init(PyObject *self, PyObject *args, PyObject *kwargs)
{
    return gate_init_common((Gate *)self, args, kwargs, 0);
}

static int method_gate_init(PyObject *self, PyObject *args, PyObject *kwargs)
{
    return gate_init_common((Gate *)self, args, kwargs, 1);
}

static PyMemberDef gate_members[] = {
    {"op", T_OBJECT, offsetof(Gate, op), READONLY, NULL},
    {"body", T_OBJECT, offsetof(Gate, body), READONLY, NULL},
    {"original", T_OBJECT, offsetof(Gate, original), READONLY, NULL},
    {"bind_as", T_OBJECT, offsetof(Gate, bind_as), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef gate_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef function_gate_methods[] = {
    GATE_TAKE_COUNTS_METHOD,
    {NULL, NULL, 0, NULL},
};

/* the slots both types share */
#define GATE_TYPE_SLOTS                                                       \
    .tp_basicsize = sizeof(Gate), .tp_new = PyType_GenericNew,               \
    .tp_dealloc = gate_dealloc, .tp_traverse = gate_traverse,                 \
    .tp_clear = gate_clear, .tp_call = PyVectorcall_Call,                     \
    .tp_vectorcall_offset = offsetof(Gate, vectorcall),                       \
    .tp_dictoffset = offsetof(Gate, dict), .tp_members = gate_members,        \
    .tp_getset = gate_getset

static PyTypeObject FunctionGateType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kwker._gate.FunctionGate",
    .tp_doc = "The size rule's check in front of a dispatch entry (wrapt wrapper form).",
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_init = function_gate_init,
    .tp_methods = function_gate_methods,
    GATE_TYPE_SLOTS,
};

static PyTypeObject MethodGateType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kwker._gate.MethodGate",
    .tp_doc = "torch.Tensor.<op> while installed: the size rule's check, then the entry.",
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
                Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_init = method_gate_init,
    .tp_descr_get = method_gate_get,
    .tp_richcompare = method_gate_richcompare,
    .tp_hash = method_gate_hash,
    .tp_repr = method_gate_repr,
    .tp_methods = method_gate_methods,
    GATE_TYPE_SLOTS,
};

/* kwker.support reads this on every call of a floating-point input: a
 * function of this module costs ~40 ns where the cffi call of the
 * library's kwk_denormals_flushed costs ~200 (the same test, fp_env.h). */
static PyObject *gate_denormals_flushed(PyObject *self, PyObject *ignored)
{
    (void)self;
    (void)ignored;
    return PyBool_FromLong(kwk_fp_flushes_denormals());
}

static PyMethodDef gate_module_methods[] = {
    {"denormals_flushed", gate_denormals_flushed, METH_NOARGS,
     "Whether this thread reads or writes subnormal floats as zero (x86 DAZ/FTZ, AArch64 FZ)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef gate_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kwker._gate",
    .m_doc = "The size rule's check of install()'s wrappers, in C (kwker/patching.py).",
    .m_size = -1,
    .m_methods = gate_module_methods,
};

PyMODINIT_FUNC PyInit__gate(void)
{
    str_numel = PyUnicode_InternFromString("numel");
    str_input = PyUnicode_InternFromString("input");
    str_is_cpu = PyUnicode_InternFromString("is_cpu");
    if (str_numel == NULL || str_input == NULL || str_is_cpu == NULL) return NULL;
    PyObject *builtins = PyImport_ImportModule("builtins");
    if (builtins == NULL) return NULL;
    builtin_getattr = PyObject_GetAttrString(builtins, "getattr");
    Py_DECREF(builtins);
    if (builtin_getattr == NULL) return NULL;
    if (PyType_Ready(&FunctionGateType) < 0 || PyType_Ready(&MethodGateType) < 0) return NULL;
    PyObject *module = PyModule_Create(&gate_module);
    if (module == NULL) return NULL;
    if (PyModule_AddObjectRef(module, "FunctionGate", (PyObject *)&FunctionGateType) < 0 ||
        PyModule_AddObjectRef(module, "MethodGate", (PyObject *)&MethodGateType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
