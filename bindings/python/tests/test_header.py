"""The binding's table of C signatures matches include/zklock.h (they cannot drift apart)."""

import ctypes
import os
import re

import pytest

import zklock

HEADER = os.path.join(os.path.dirname(__file__), "..", "..", "..", "include", "zklock.h")

C_TYPES = {
    "zkl_status": "status",
    "int": ctypes.c_int,
    "uint32_t": ctypes.c_uint32,
    "uint8_t": ctypes.c_uint8,
    "int64_t": ctypes.c_int64,
    "uint64_t": ctypes.c_uint64,
    "size_t": ctypes.c_size_t,
    "void": None,
}


def _declarations():
    text = open(HEADER).read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = "\n".join(line for line in text.split("\n") if not line.lstrip().startswith("#"))
    text = re.sub(r'extern "C" \{|\}  // extern "C"', "", text)
    text = re.sub(r"\s+", " ", text)
    return {m.group(2): (m.group(1).strip(), m.group(3).strip())
            for m in re.finditer(r"([\w ]+?[\s*]+)(zkl_\w+)\(([^)]*)\);", text)}


def _ctype(decl):
    decl = decl.replace("const ", "").replace("struct ", "").replace("enum ", "").strip()
    if decl in ("void", ""):
        return None
    stars = decl.count("*")
    base = decl.replace("*", "").strip().split(" ")[0]
    if base == "char" and stars == 1:
        return ctypes.c_char_p
    if base == "char" and stars == 2:
        return ctypes.POINTER(ctypes.c_char_p)
    if base in ("zkl_client", "zkl_lock", "zkl_participants", "zkl_options", "zkl_cancel_scope",
                "void") and stars == 1:
        return ctypes.c_void_p
    if base in ("zkl_client", "zkl_lock", "zkl_participants", "zkl_options",
                "zkl_cancel_scope") and stars == 2:
        return ctypes.POINTER(ctypes.c_void_p)
    structs = {"zkl_participant": zklock._Participant, "zkl_stats": zklock._Stats,
               "zkl_session_event": zklock._SessionEvent, "zkl_op": zklock._ZklOp}
    if base in structs and stars == 1:
        return ctypes.POINTER(structs[base])
    if base == "zkl_log_callback":
        return "callback"
    t = C_TYPES[base]
    if stars == 1:
        return ctypes.POINTER(t)
    return t


def _params(params):
    if params.strip() == "void":
        return []
    out = []
    for p in params.split(","):
        p = p.strip()
        # drop the parameter name
        name = re.search(r"(\w+)$", p).group(1)
        out.append(p[: len(p) - len(name)].strip())
    return out


@pytest.mark.skipif(not os.path.exists(HEADER), reason="runs in the zklock checkout")
def test_signatures_match_the_header():
    declared = _declarations()
    for name, (restype, argtypes) in zklock._SIGNATURES.items():
        assert name in declared, "%s is not in zklock.h" % name
        ret, params = declared[name]
        want_ret = _ctype(ret)
        if want_ret == "status":
            want_ret = zklock._status
        assert restype == want_ret, "%s returns %s in the header" % (name, ret)
        decls = _params(params)
        assert len(decls) == len(argtypes), "%s takes %d arguments in the header" % (name, len(decls))
        for i, (decl, got) in enumerate(zip(decls, argtypes)):
            want = _ctype(decl)
            if want == "callback":
                assert got is zklock._LOG_CALLBACK, name
            else:
                assert got == want, "%s argument %d is %s in the header, %s here" % (name, i, decl, got)


@pytest.mark.skipif(not os.path.exists(HEADER), reason="runs in the zklock checkout")
def test_constants_match_the_header():
    text = open(HEADER).read()
    for py, c in [("OK", "ZKL_OK"), ("TIMEOUT", "ZKL_TIMEOUT"), ("INVALID_ARGUMENT", "ZKL_INVALID_ARGUMENT"),
                  ("NOT_HELD", "ZKL_NOT_HELD"), ("CONNECTION_LOSS", "ZKL_CONNECTION_LOSS"),
                  ("SESSION_EXPIRED", "ZKL_SESSION_EXPIRED"), ("ZOOKEEPER_ERROR", "ZKL_ZOOKEEPER_ERROR"),
                  ("INTERNAL_ERROR", "ZKL_INTERNAL_ERROR"), ("CANCELLED", "ZKL_CANCELLED"),
                  ("LOCK_LOST", "ZKL_LOCK_LOST"), ("CLOSED", "ZKL_CLOSED"),
                  ("WOULD_DEADLOCK", "ZKL_WOULD_DEADLOCK"), ("AUTH_FAILED", "ZKL_AUTH_FAILED"),
                  ("PROTOCOL_CURATOR", "ZKL_PROTOCOL_CURATOR"), ("PROTOCOL_KAZOO", "ZKL_PROTOCOL_KAZOO"),
                  ("ACL_OPEN", "ZKL_ACL_OPEN"), ("ACL_CREATOR_ALL", "ZKL_ACL_CREATOR_ALL"),
                  ("ACL_CREATOR_ALL_READ_ALL", "ZKL_ACL_CREATOR_ALL_READ_ALL")]:
        m = re.search(r"\b%s = (\d+)," % c, text)
        assert m, "%s not in the header" % c
        assert getattr(zklock, py) == int(m.group(1)), py
    # Every status has its exception class.
    for value in re.findall(r"\bZKL_[A-Z_]+ = (\d+),", text.split("zkl_status")[1].split("}")[0]):
        if int(value) != 0:
            assert int(value) in zklock._ERRORS
