"""Fuzz the C reader of SQLite pages (hta_lite/load/_sqlite_scan.c) built with AddressSanitizer
and UndefinedBehaviorSanitizer, against SQLite itself as the reference.

    python tests/fuzz/fuzz_sqlite.py --seconds 60               # CI (.ci/run)
    python tests/fuzz/fuzz_sqlite.py --seconds 1800 --coverage  # a long run

Seeds: small databases with the integer tables of an Nsight Systems export, written with page
sizes of 512 to 65536 bytes (trees several pages deep), an INTEGER PRIMARY KEY, NULLs, integers
of every stored width, a column added after rows were written, a text column, reserved bytes per
page. Mutations: bit flips, bytes overwritten with small or large values (cell counts, cell
offsets, child page numbers: loops and pages outside the file), pages copied over others, the
file cut short. Oracle: no sanitizer report; and when the mutated file still passes SQLite's
``PRAGMA integrity_check`` and the C reader takes a table, SQLite reads the same integers.

Exit status 0 when every input passed; 1 with the failing input in --out.
"""

from __future__ import annotations

import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]
from fuzz_decoder import ROOT, fuzz_main  # noqa: E402 - the same sanitized build, another source

SOURCE = ROOT / "hta_lite" / "load" / "_sqlite_scan.c"
READS = [  # (table, columns read); the last one's text is not the C reader's to read
    ("K", ["start", "end", "streamId", "correlationId", "gridX", "added"]),
    ("S", ["id", "n"]),
    ("T", ["start", "rowid"]),
    ("T", ["start", "label"]),
]


def seed(page_size: int, rows: int, reserved: int = 0) -> bytes:
    """A database of the three tables, as bytes."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "seed.sqlite"
        con = sqlite3.connect(path)
        con.execute(f"PRAGMA page_size = {page_size}")
        con.execute("CREATE TABLE K (start INTEGER NOT NULL, end INTEGER, streamId INTEGER,"
                    " correlationId INTEGER, gridX INTEGER)")  # fmt: skip
        values = [0, 1, -1, 127, -128, 32767, 40000, 2**23, 2**31, -(2**40), 2**47, 2**62, -(2**63)]
        con.executemany("INSERT INTO K VALUES (?, ?, ?, ?, ?)",
                        [(i * 1000, None if i % 7 == 0 else i * 1000 + values[i % len(values)],
                          i % 3, values[(i * 5) % len(values)], 0 if i % 2 else 1)
                         for i in range(rows)])  # fmt: skip
        con.execute("ALTER TABLE K ADD COLUMN added INTEGER")
        con.executemany("INSERT INTO K (start, added) VALUES (?, ?)", [(i, i) for i in range(9)])
        con.execute("CREATE TABLE S (id INTEGER NOT NULL PRIMARY KEY, n INTEGER)")
        con.executemany("INSERT INTO S VALUES (?, ?)", [(i * 3, i) for i in range(rows // 2)])
        con.execute("CREATE TABLE T (start INTEGER, label TEXT)")
        con.executemany("INSERT INTO T VALUES (?, ?)", [(i, f"r{i}" * (i % 5)) for i in range(50)])
        con.commit()
        con.close()
        data = bytearray(path.read_bytes())
    if reserved:  # rewritten by SQLite with that many reserved bytes per page
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "seed.sqlite"
            path.write_bytes(data)
            con = sqlite3.connect(path)
            try:
                con.execute(f"PRAGMA reserve_bytes = {reserved}")  # SQLite 3.37+ builds with it
                con.execute("VACUUM")
            except sqlite3.DatabaseError:
                pass
            con.close()
            data = bytearray(path.read_bytes())
    return bytes(data)


def layout(data: bytes) -> list:
    """(root page, fields, rowid field) of each read, found as hta_lite finds them."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "db.sqlite"
        path.write_bytes(data)
        con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
        try:
            return layout_of(con)
        finally:
            con.close()


def layout_of(con: sqlite3.Connection) -> list:
    """:func:`layout` of an open database: a mutated schema moves the fields (a flipped byte
    turns ``correlationId INTEGER`` into ``correlationId INTE,ER``: a column ``ER`` more), and
    hta_lite reads the fields the file's own schema gives."""
    out = []
    for table, columns in READS:
        row = con.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)
                          ).fetchone()  # fmt: skip
        if row is None:  # the mutation renamed the table
            raise sqlite3.DatabaseError(f"no table {table}")
        (root,) = row
        info = con.execute(f"PRAGMA table_xinfo({table})").fetchall()
        field = {r[1]: r[0] for r in info}
        keys = [r for r in info if r[5]]
        alias = keys[0][0] if len(keys) == 1 and keys[0][2].upper() == "INTEGER" else -1
        out.append((root, tuple(field.get(c, -2 if c == "rowid" else -1) for c in columns),
                    alias))  # fmt: skip
    return out


VALUES = [b"\x00", b"\xff", b"\x00\x00\x00\x02", b"\xff\xff\xff\xff", b"\x7f\xff", b"\x0d",
          b"\x05", b"\x0a", b"\x02"]  # fmt: skip


def mutate(data: bytes, pool: list[bytes], rng: random.Random) -> bytes:
    out = bytearray(data)
    page = 1 << rng.randrange(9, 17)
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(out))
        if rng.random() < 0.5:  # a page or cell header: counts, offsets, child pages
            at = min(len(out) - 1, at - at % page + rng.choice([0, 1, 3, 5, 8, 9, 10, 11, 12, 100,
                                                               103, 108, 112]))  # fmt: skip
        kind = rng.randrange(5)
        if kind == 0:
            out[at] ^= 1 << rng.randrange(8)
        elif kind == 1:
            out[at : at + 4] = rng.choice(VALUES)
        elif kind == 2:
            n = len(out) // page
            if n > 2:
                a, b = rng.randrange(1, n), rng.randrange(1, n)
                out[a * page : (a + 1) * page] = out[b * page : (b + 1) * page]
        elif kind == 3:
            del out[rng.randrange(len(out)) :]
            if not out:
                out += rng.choice(pool)[:512]
        else:
            out[at : at + 1] = bytes([rng.randrange(256)])
    return bytes(out)


def check(data: bytes, layouts: list, fast, scratch: Path) -> tuple[str | None, int, bool]:
    """(problem or None, reads the C reader took, whether they were compared with SQLite's)."""
    results = [fast.ints(data, root, fields, alias) for root, fields, alias in layouts]
    taken = sum(r is not None for r in results)
    if not taken:
        return None, 0, False
    scratch.write_bytes(data)
    con = sqlite3.connect(f"file:{scratch}?mode=ro&immutable=1", uri=True)
    try:
        if con.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
            return None, taken, False
        own = layout_of(con)  # the fields the mutated file's schema gives, as hta_lite reads
        if own != layouts:
            results = [fast.ints(data, root, fields, alias) for root, fields, alias in own]
        return _compare(con, own, results), taken, True
    except (sqlite3.DatabaseError, MemoryError, UnicodeDecodeError):
        return None, taken, False  # SQLite refuses the file (or its integrity report is not text)
    finally:
        con.close()


def _compare(con: sqlite3.Connection, layouts: list, results: list) -> str | None:
    """What differs between the C reader's tables and SQLite's in a sound file (None: nothing)."""
    import numpy as np

    for (table, names), (_, fields, _), raw in zip(READS, layouts, results):
        if raw is None:
            continue
        columns = [c if fields[i] != -1 else "NULL" for i, c in enumerate(names)]
        sql = ", ".join(f"coalesce({c}, -1)" for c in columns)
        theirs = np.array(con.execute(f"SELECT {sql} FROM {table}").fetchall(), np.int64)
        mine = np.frombuffer(raw, np.int64).reshape(-1, len(columns))
        if len(theirs) != len(mine):
            return f"{table}: {len(mine)} rows, SQLite {len(theirs)}"
        if len(mine) and not (theirs == mine).all():
            return f"{table}: values differ from SQLite's"
    return None


def run(args) -> int:
    sys.path.insert(0, args.build_dir)
    import _sqlite_scan as fast  # the sanitized build

    rng = random.Random(args.seed)
    pool = [seed(512, 400), seed(1024, 900), seed(4096, 3000), seed(65536, 2000), seed(512, 5),
            seed(1024, 600, reserved=32)]  # fmt: skip
    layouts = [layout(s) for s in pool]
    scratch = Path(args.build_dir) / "scratch.sqlite"
    for data, lay in zip(pool, layouts):  # unmutated: every read but the text's taken, equal
        problem, taken, compared = check(data, lay, fast, scratch)
        if problem or taken != 3 or not compared:
            print(f"FAIL on a seed: {problem or f'{taken} reads taken, 3 expected'}")
            return 1
    executions = accepted = compared = 0
    problem, data = None, b""
    last = Path(args.out + ".last")
    deadline = time.monotonic() + args.seconds
    while problem is None and time.monotonic() < deadline:
        k = rng.randrange(len(pool))
        data = mutate(pool[k], pool, rng)
        last.write_bytes(data)
        problem, taken, equal = check(data, layouts[k], fast, scratch)
        executions += 1
        accepted += taken
        compared += taken if equal else 0
    last.unlink(missing_ok=True)
    if problem:
        Path(args.out).write_bytes(data)
        print(f"FAIL after {executions} inputs: {problem}; input saved to {args.out}")
        return 1
    print(f"{executions} inputs in {args.seconds:.0f} s, {accepted} reads taken by the C reader"
          f" ({compared} of them in files that pass SQLite's integrity check: equal to SQLite's),"
          " none crashed under ASan/UBSan")  # fmt: skip
    return 0


def main() -> int:
    return fuzz_main(
        __doc__,
        SOURCE,
        __file__,
        "SQLite page reader",
        run,
        seconds=60,
        out="fuzz-sqlite-failure.sqlite",
    )


if __name__ == "__main__":
    sys.exit(main())
