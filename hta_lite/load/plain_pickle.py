"""The restricted unpickler of memory snapshots: plain data only, bounded, nothing ever run.

A snapshot pickle (``torch.cuda.memory._dump_snapshot``, protocol 2 or later) holds dicts, lists,
tuples, strings, bytes, int64 integers, floats, booleans and None. This unpickler takes exactly
the opcodes that write those and refuses, with a :class:`~hta_lite.errors.SnapshotError` naming
the file, everything else and everything a pickler never writes:

- a Python global (named in the message, refused before it is looked up), a call, a persistent
  id, an object's state (BUILD), text-protocol opcodes;
- an APPEND / APPENDS on anything but a list, a SETITEM(S) on anything but a dict;
- an integer past int64 (``LONG1`` of more than 8 bytes, ``LONG4``): no snapshot value is one,
  and a 20,000-digit "size" would only break what reads it;
- a memo index past the next free one (a pickler numbers them in order; a crafted 2**28 makes
  the C unpickler allocate gigabytes);
- a FRAME, bytes or text longer than what is left of the file.

It is the pure-Python ``pickle._Unpickler`` (the C one cannot be bounded), about 15x slower:
the C reader (``_snapshot_pickle.c``) reads ordinary snapshots and takes exactly these rules;
this one decides on whatever the C reader declines, and reads everything where it is not built.
"""

from __future__ import annotations

import io
import pickle
import struct
from pathlib import Path

from ..errors import SnapshotError

_U = pickle._Unpickler
#: the opcodes of plain data (protocols 2-5), by their loader in ``pickle._Unpickler``
_PLAIN = {
    code[0]: _U.dispatch[code[0]]
    for code in {
        "PROTO": pickle.PROTO, "FRAME": pickle.FRAME, "STOP": pickle.STOP, "MARK": pickle.MARK,
        "POP": pickle.POP, "POP_MARK": pickle.POP_MARK, "DUP": pickle.DUP, "NONE": pickle.NONE,
        "NEWTRUE": pickle.NEWTRUE, "NEWFALSE": pickle.NEWFALSE, "BININT": pickle.BININT,
        "BININT1": pickle.BININT1, "BININT2": pickle.BININT2, "LONG1": pickle.LONG1,
        "BINFLOAT": pickle.BINFLOAT, "SHORT_BINUNICODE": pickle.SHORT_BINUNICODE,
        "BINUNICODE": pickle.BINUNICODE, "BINUNICODE8": pickle.BINUNICODE8,
        "SHORT_BINBYTES": pickle.SHORT_BINBYTES, "BINBYTES": pickle.BINBYTES,
        "BINBYTES8": pickle.BINBYTES8, "EMPTY_LIST": pickle.EMPTY_LIST,
        "EMPTY_DICT": pickle.EMPTY_DICT, "EMPTY_TUPLE": pickle.EMPTY_TUPLE,
        "TUPLE1": pickle.TUPLE1, "TUPLE2": pickle.TUPLE2, "TUPLE3": pickle.TUPLE3,
        "TUPLE": pickle.TUPLE, "APPEND": pickle.APPEND, "APPENDS": pickle.APPENDS,
        "SETITEM": pickle.SETITEM, "SETITEMS": pickle.SETITEMS, "MEMOIZE": pickle.MEMOIZE,
        "BINPUT": pickle.BINPUT, "LONG_BINPUT": pickle.LONG_BINPUT, "BINGET": pickle.BINGET,
        "LONG_BINGET": pickle.LONG_BINGET,
        # refused when met, by find_class / persistent_load, naming what the file asked for
        "GLOBAL": pickle.GLOBAL, "STACK_GLOBAL": pickle.STACK_GLOBAL, "INST": pickle.INST,
        "PERSID": pickle.PERSID, "BINPERSID": pickle.BINPERSID,
    }.values()
}  # fmt: skip
_NAME_OF = {code[0]: name for name, code in vars(pickle).items()
            if name.isupper() and isinstance(code, bytes) and len(code) == 1}  # fmt: skip


class _Dispatch(dict):
    def __missing__(self, code: int):
        def refuse(unpickler):
            unpickler.refuse(
                f"the pickle opcode {_NAME_OF.get(code, hex(code))}, which plain data (a memory"
                " snapshot) never holds"
            )

        return refuse


class PlainData(_U):
    """See the module. ``load()`` returns the data or raises :class:`SnapshotError`."""

    dispatch = _Dispatch()

    def __init__(self, data: bytes | bytearray | memoryview, path: str | Path | None):
        self._source = io.BytesIO(data)
        self._size = len(data)
        super().__init__(self._source)
        self.path = path

    def refuse(self, problem: str):
        raise SnapshotError(self.path, problem)

    def load(self):
        try:
            return super().load()
        except SnapshotError:
            raise
        except RecursionError:
            self.refuse("a pickle nested too deeply to be a snapshot")
        except MemoryError:
            self.refuse("a pickle too large for memory")
        except Exception as exc:  # EOF, a bad opcode argument, an operation on the wrong type
            self.refuse(f"not a readable pickle, or cut short ({type(exc).__name__}: {exc})")

    def find_class(self, module: str, name: str):
        self.refuse(
            f"the pickle names the Python global {module}.{name}, which a memory snapshot never"
            " does: refused, and nothing from the file was run"
        )

    def persistent_load(self, pid):
        self.refuse("the pickle refers to persistent objects: not a snapshot")

    # ---- the checked opcodes ------------------------------------------------------------

    def _left(self) -> int:
        return self._size - self._source.tell()

    def _length(self, width: int) -> int:
        """A length argument of ``width`` bytes, no more than what is left of the file."""
        (n,) = struct.unpack("<Q" if width == 8 else "<I", self.read(width))
        frame = self._unframer.current_frame
        left = frame.getbuffer().nbytes - frame.tell() if frame is not None else self._left()
        if n > left:
            self.refuse(
                f"a length of {n:,} bytes, past the end of the {'frame' if frame else 'file'}"
            )
        return n

    def load_frame(self):
        (n,) = struct.unpack("<Q", self.read(8))
        if n > self._left():
            self.refuse(f"a FRAME of {n:,} bytes, past the end of the file (cut short, or corrupt)")
        self._unframer.load_frame(n)

    def load_binunicode(self):
        self.append(str(self.read(self._length(4)), "utf-8", "surrogatepass"))

    def load_binunicode8(self):
        self.append(str(self.read(self._length(8)), "utf-8", "surrogatepass"))

    def load_binbytes(self):
        self.append(self.read(self._length(4)))

    def load_binbytes8(self):
        self.append(self.read(self._length(8)))

    def load_long1(self):
        n = self.read(1)[0]
        if n > 8:
            self.refuse(f"an integer of {n} bytes, past int64 (no snapshot value is)")
        self.append(pickle.decode_long(self.read(n)))

    def _put(self, index: int):
        if index > len(self.memo):
            self.refuse(f"a memo index of {index:,} past the next free one ({len(self.memo)})")
        if not self.stack:
            self.refuse("a memo put with nothing on the stack")
        self.memo[index] = self.stack[-1]

    def load_binput(self):
        self._put(self.read(1)[0])

    def load_long_binput(self):
        self._put(struct.unpack("<I", self.read(4))[0])

    def load_memoize(self):
        self._put(len(self.memo))

    def _list(self):
        target = self.stack[-1] if self.stack else None
        if type(target) is not list:
            self.refuse(f"an APPEND to a {type(target).__name__}, not a list")
        return target

    def load_append(self):
        value = self.stack.pop()
        self._list().append(value)

    def load_appends(self):
        items = self.pop_mark()
        self._list().extend(items)

    def _dict(self):
        target = self.stack[-1] if self.stack else None
        if type(target) is not dict:
            self.refuse(f"a SETITEM on a {type(target).__name__}, not a dict")
        return target

    def load_setitem(self):
        value, key = self.stack.pop(), self.stack.pop()
        self._dict()[key] = value

    def load_setitems(self):
        items = self.pop_mark()
        target = self._dict()
        for k in range(0, len(items) - 1, 2):
            target[items[k]] = items[k + 1]
        if len(items) % 2:
            self.refuse("a SETITEMS with a key and no value")


PlainData.dispatch.update(_PLAIN)
for _name in ("FRAME", "BINUNICODE", "BINUNICODE8", "BINBYTES", "BINBYTES8", "LONG1", "BINPUT",
              "LONG_BINPUT", "MEMOIZE", "APPEND", "APPENDS", "SETITEM", "SETITEMS"):  # fmt: skip
    PlainData.dispatch[getattr(pickle, _name)[0]] = getattr(PlainData, f"load_{_name.lower()}")
