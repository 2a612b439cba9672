"""Split `with tlx.async_tasks():` regions of a kernel into partition functions.

The result is backend-neutral Python source: the kernel's own text with each region replaced by
one call ``<tlx>.warp_specialize([(task_fn, (captured...)), ...], [warps...], [regs...], default_num_regs=R)``
and one generated function per task (and per replica). Every generated text keeps the user's
line numbers (padding with blank lines), so errors and MLIR locations point at the kernel file.
Splitting happens per specialization: task options and `if`s around tasks are evaluated with
the kernel's constexpr values.
"""
from __future__ import annotations

import ast
import hashlib
import inspect
import linecache
import textwrap
import types
from dataclasses import dataclass, field

from ..errors import TlxCompileError, check
from ..language.tasks import TaskSpec, check_task_spec
from ..version import SOURCE_HASH

HASH_LINE = f"    # tlx {SOURCE_HASH}"   # in the JIT cache key: a new tlx never reuses an old binary
TASK_OPS = ("async_tasks", "async_task", "async_task_replica_id")


@dataclass(frozen=True)
class GeneratedFunction:
    name: str
    text: str          # full text of the pseudo file, the `def` at its original line
    filename: str      # pseudo file name, registered in linecache
    params: tuple[str, ...]


@dataclass
class SplitKernel:
    """The kernel and its partitions as source; `instantiate` turns them into Python functions."""
    kernel: GeneratedFunction
    tasks: list[GeneratedFunction] = field(default_factory=list)
    source_file: str = ""
    global_names: frozenset[str] = frozenset()   # user globals the texts reference

    def instantiate(self, scope: dict) -> types.FunctionType:
        """Exec every generated text in `scope` (a backend's globals) and return the kernel function."""
        for gen in [*self.tasks, self.kernel]:
            register_source(gen.filename, gen.text)
            exec(compile(gen.text, gen.filename, "exec"), scope)
        return scope[self.kernel.name]


def register_source(filename: str, text: str) -> None:
    """Make `inspect.getsource` find generated text (Triton reads jit sources through it)."""
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)


@dataclass
class _Source:
    fn: types.FunctionType
    lines: list[str]     # dedented lines of the function, index 0 = first line of `def` block (decorators incl.)
    first_line: int      # file line number of lines[0]
    tree: ast.FunctionDef
    filename: str

    def file_line(self, node_lineno: int) -> int:
        return self.first_line + node_lineno - 1


def _read_source(fn) -> _Source:
    lines, first = inspect.getsourcelines(fn)
    text = textwrap.dedent("".join(lines))
    tree = ast.parse(text).body[0]
    assert isinstance(tree, ast.FunctionDef)
    return _Source(fn, text.splitlines(), first, tree, inspect.getsourcefile(fn) or "<unknown>")


def _tlx_aliases(fn) -> set[str]:
    """Names under which the kernel's globals hold the tlx module."""
    import tlx
    return {name for name, val in fn.__globals__.items() if val is tlx}


def _task_call(node: ast.AST, aliases: set[str]) -> str | None:
    """'async_tasks' / 'async_task' / 'async_task_replica_id' if `node` calls one through a tlx alias."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in TASK_OPS:
        base = node.func.value
        if isinstance(base, ast.Name) and base.id in aliases:
            return node.func.attr
    return None


def _with_call(stmt: ast.stmt, aliases: set[str]) -> tuple[str, ast.Call] | None:
    if isinstance(stmt, ast.With) and len(stmt.items) == 1:
        call = stmt.items[0].context_expr
        kind = _task_call(call, aliases)
        if kind in ("async_tasks", "async_task"):
            return kind, call
    return None


def _stored_names(nodes) -> set[str]:
    out = set()
    for n in nodes:
        for sub in ast.walk(n):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                out.add(sub.id)
    return out


def _loaded_names(nodes) -> list[str]:
    seen: dict[str, None] = {}
    for n in nodes:
        for sub in ast.walk(n):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
                seen.setdefault(sub.id)
    return list(seen)


class _Splitter:
    def __init__(self, src: _Source, env: dict, aliases: set[str], tag: str):
        self.src, self.env, self.aliases, self.tag = src, env, aliases, tag
        self.edits: dict[int, str | None] = {}   # 0-based line index -> replacement (None: blank)
        self.tasks: list[GeneratedFunction] = []
        args = src.tree.args
        self.params = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
        self.annotations = {a.arg: ast.get_source_segment("\n".join(src.lines), a.annotation)
                            for a in args.posonlyargs + args.args + args.kwonlyargs if a.annotation is not None}
        self.kernel_locals = set(self.params) | _stored_names(src.tree.body)
        self.outer_locals = set(self.params) | self.stored_outside_regions(src.tree.body)

    def stored_outside_regions(self, stmts) -> set[str]:
        out: set[str] = set()
        for stmt in stmts:
            w = _with_call(stmt, self.aliases)
            if w and w[0] == "async_tasks":
                continue
            taken = self.constant_branch(stmt)
            if taken is not None:                 # a compile-time `if`: the dead branch stores nothing
                out |= self.stored_outside_regions(taken)
                continue
            nested = [getattr(stmt, b) for b in ("body", "orelse", "finalbody", "handlers")
                      if isinstance(getattr(stmt, b, None), list)]
            if nested:
                shallow = [c for c in ast.iter_child_nodes(stmt) if not any(c in body for body in nested)]
                out |= _stored_names(shallow)
                for body in nested:
                    out |= self.stored_outside_regions(body)
            else:
                out |= _stored_names([stmt])
        return out

    def constant_branch(self, stmt: ast.stmt):
        """The branch an `if` on a compile-time value takes (None: not such an `if`). A name stored only
        in the untaken branch is then no kernel local a task could capture."""
        if not isinstance(stmt, ast.If):
            return None
        names = {n.id for n in ast.walk(stmt.test) if isinstance(n, ast.Name)}
        if names & (self.kernel_locals - set(self.env)):
            return None                           # reads a runtime value: both branches may run
        try:
            value = self._evaluate(stmt.test)
        except Exception:
            return None
        if not isinstance(value, (bool, int, str, type(None))):
            return None
        return stmt.body if value else stmt.orelse

    def error(self, node: ast.AST, msg: str) -> TlxCompileError:
        line = self.src.file_line(node.lineno)
        return TlxCompileError(f"{msg}\n  at {self.src.filename}:{line}: {self.src.lines[node.lineno - 1].strip()}")

    def _evaluate(self, node: ast.AST):
        """The value of expression `node` from globals and constexprs (tl.constexpr unwrapped); raises
        whatever evaluating it raises."""
        code = ast.get_source_segment("\n".join(self.src.lines), node)
        value = eval(code, dict(self.src.fn.__globals__), dict(self.env))
        return getattr(value, "value", value)

    def const_eval(self, node: ast.AST, what: str):
        try:
            return self._evaluate(node)
        except Exception as e:
            code = ast.get_source_segment("\n".join(self.src.lines), node)
            raise self.error(node, f"tlx.async_task: {what} must be a compile-time value (a literal, a global "
                                   f"or a constexpr argument), got `{code}` ({type(e).__name__}: {e})") from None

    def run(self, stmts=None) -> None:
        for stmt in self.src.tree.body if stmts is None else stmts:
            w = _with_call(stmt, self.aliases)
            if w and w[0] == "async_tasks":
                self.check_region_options(w[1])
                self.split_region(stmt)
                continue
            if w:
                raise self.error(stmt, "tlx.async_task: must be directly inside `with tlx.async_tasks():`")
            for body in ("body", "orelse", "finalbody"):
                if isinstance(getattr(stmt, body, None), list):
                    self.run(getattr(stmt, body))

    def collect_tasks(self, stmts, out: list) -> None:
        """The `async_task` blocks of a region body, resolving compile-time `if`s."""
        for stmt in stmts:
            w = _with_call(stmt, self.aliases)
            if w and w[0] == "async_task":
                out.append((stmt, w[1]))
            elif isinstance(stmt, ast.If):
                cond = self.const_eval(stmt.test, "the condition of an `if` around tasks")
                self.collect_tasks(stmt.body if cond else stmt.orelse, out)
            elif isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
                continue
            else:
                raise self.error(stmt, "tlx.async_tasks: the region may hold only `with tlx.async_task(...)` blocks "
                                       "(and compile-time `if`s around them)")

    def check_region_options(self, call: ast.Call) -> None:
        """`async_tasks()` takes Meta TLX's `exclusive=` and nothing else. That option asks TLX's compiler for
        a cheaper start of the worker warps (no shared-memory dispatch state); Gluon 3.6 has one way to start
        them, so the kernel runs the same with it or without. Other options are refused by name."""
        if call.args:
            raise self.error(call, "tlx.async_tasks: takes no positional arguments")
        for kw in call.keywords:
            if kw.arg != "exclusive":
                raise self.error(call, f"tlx.async_tasks: '{kw.arg}' is not supported (only exclusive=, which "
                                       "changes nothing on Gluon 3.6: it has one way to start worker warps)")
            value = self.const_eval(kw.value, "'exclusive'")
            if not isinstance(value, bool):
                raise self.error(call, f"tlx.async_tasks: 'exclusive' must be a compile-time bool, got {value!r}")

    def task_spec(self, call: ast.Call) -> TaskSpec:
        kw = {k.arg: k.value for k in call.keywords}
        unknown = set(kw) - {"num_warps", "num_regs", "registers", "replicate"}
        if unknown:
            raise self.error(call, f"tlx.async_task: unknown argument(s) {sorted(unknown)}; expected num_warps=, "
                                   "num_regs= (or registers=), replicate=")
        is_default = bool(call.args) and isinstance(call.args[0], ast.Constant) and call.args[0].value == "default"
        if call.args and not is_default:
            raise self.error(call, "tlx.async_task: the only positional argument is \"default\"")
        if is_default and "num_warps" in kw:
            raise self.error(call, "tlx.async_task: the default task runs on the kernel's num_warps; "
                                   "'num_warps' must not be given for it")
        if not is_default and "num_warps" not in kw:
            raise self.error(call, "tlx.async_task: a non-default task needs num_warps= (or pass \"default\")")
        regs = kw.get("num_regs", kw.get("registers"))
        spec = TaskSpec(
            num_warps=None if is_default else self.const_eval(kw["num_warps"], "'num_warps'"),
            num_regs=None if regs is None else self.const_eval(regs, "'num_regs'"),
            replicate=1 if "replicate" not in kw else self.const_eval(kw["replicate"], "'replicate'"),
            line=self.src.file_line(call.lineno))
        check_task_spec(spec)
        return spec

    def split_region(self, region: ast.With) -> None:
        found: list = []
        self.collect_tasks(region.body, found)
        specs = [(stmt, self.task_spec(call)) for stmt, call in found]
        defaults = [s for s in specs if s[1].is_default]
        if len(defaults) != 1:
            where = ", ".join(f"line {s.line}" for _, s in defaults) or "none found"
            raise self.error(region, f"tlx.async_tasks: exactly one `tlx.async_task(\"default\")` is required, "
                                     f"got {len(defaults)} ({where})")
        if defaults[0][1].replicate != 1:
            raise self.error(defaults[0][0], "tlx.async_task: the default task cannot be replicated")
        indent = " " * region.col_offset
        first, last = region.lineno - 1, region.end_lineno - 1
        if len(specs) == 1:          # only the default task: emit its body inline
            self.inline_body(region, specs[0][0])
            return
        order = [defaults[0]] + [s for s in specs if not s[1].is_default]
        entries, warps, regs = [], [], []
        for stmt, spec in order:
            for rep in range(spec.replicate):
                gen = self.make_task(stmt, rep, len(self.tasks))
                self.tasks.append(gen)
                args = "".join(f"{p}, " for p in gen.params)
                entries.append(f"({gen.name}, ({args}))")
                if not spec.is_default:
                    warps.append(str(spec.num_warps))
                    regs.append(str(spec.num_regs or 0))   # 0: not requested (a list literal cannot hold None)
        alias = sorted(self.aliases)[0]
        call = (f"{indent}{alias}.warp_specialize([{', '.join(entries)}], [{', '.join(warps)}], "
                f"[{', '.join(regs)}], default_num_regs={defaults[0][1].num_regs})")
        self.edits[first] = call
        for i in range(first + 1, last + 1):
            self.edits[i] = None

    def inline_body(self, region: ast.With, task: ast.With) -> None:
        """Only the default task: its body replaces the whole region (compile-time ifs resolved)."""
        lines = self.src.lines
        shift = task.body[0].col_offset - region.col_offset
        for i in range(region.lineno - 1, region.end_lineno):
            self.edits[i] = None
        for i in range(task.body[0].lineno - 1, task.end_lineno):
            self.edits[i] = _dedent_line(lines[i], shift)

    def make_task(self, stmt: ast.With, rep: int, index: int) -> GeneratedFunction:
        lines = self.src.lines
        body_first, body_last = stmt.body[0].lineno - 1, stmt.end_lineno - 1
        inner = stmt.body[0].col_offset
        captured = [n for n in _loaded_names(stmt.body) if n in self.outer_locals]
        params = ", ".join(f"{n}: {self.annotations[n]}" if n in self.annotations and "constexpr" in
                           self.annotations[n] else n for n in captured)
        name = f"{self.src.fn.__name__}__task{index}_{self.tag}"
        body = [_dedent_line(lines[i], inner - 4) for i in range(body_first, body_last + 1)]
        body = _replace_replica_calls(body, stmt, self.aliases, rep, inner - 4, body_first)
        file_line = self.src.file_line(stmt.lineno)
        pad = ["" for _ in range(file_line - 1)]
        text = "\n".join(pad + [f"def {name}({params}):"] + body + [HASH_LINE]) + "\n"
        filename = f"<tlx {self.src.filename}:{self.src.fn.__name__} task {index}:{self.tag}>"
        return GeneratedFunction(name, text, filename, tuple(captured))


def _dedent_line(line: str, n: int) -> str:
    strip = min(n, len(line) - len(line.lstrip(" ")))
    return line[strip:]


def _replace_replica_calls(body: list[str], stmt: ast.With, aliases, rep: int, shift: int, first: int) -> list[str]:
    """Substitute the replica index. `x = tlx.async_task_replica_id()` becomes `x: tlx.constexpr = r`, so `x`
    stays a compile-time value (a plain assignment would turn it into a runtime scalar)."""
    module = ast.Module(body=stmt.body, type_ignores=[])
    edits = []   # (line index, start col, end col, text)
    assigned = set()
    alias = sorted(aliases)[0]
    for n in ast.walk(module):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) \
                and _task_call(n.value, aliases) == "async_task_replica_id":
            edits.append((n.lineno, n.col_offset, n.end_col_offset, f"{n.targets[0].id}: {alias}.constexpr = {rep}"))
            assigned.add(id(n.value))
    for n in ast.walk(module):
        if _task_call(n, aliases) == "async_task_replica_id" and id(n) not in assigned:
            if n.lineno != n.end_lineno:
                raise TlxCompileError("tlx.async_task_replica_id: write the call on one line")
            edits.append((n.lineno, n.col_offset, n.end_col_offset, str(rep)))
    for lineno, a, b, text in sorted(edits, reverse=True):   # right-to-left keeps offsets valid
        i = lineno - 1 - first
        body[i] = body[i][:a - shift] + text + body[i][b - shift:]
    return body


def split_kernel(fn: types.FunctionType, constexprs: dict) -> SplitKernel:
    """Split `fn` for one specialization (`constexprs`: name -> value of its constexpr arguments)."""
    src = _read_source(fn)
    aliases = _tlx_aliases(fn)
    tag = hashlib.sha1(repr(sorted((k, repr(v)) for k, v in constexprs.items())).encode()).hexdigest()[:10]
    splitter = _Splitter(src, constexprs, aliases, tag)
    if aliases:
        splitter.run()
    lines = list(src.lines)
    for i, new in splitter.edits.items():
        lines[i] = "" if new is None else new
    # drop decorators: the def line keeps its file line number
    def_index = src.tree.lineno - 1
    for i in range(def_index):
        lines[i] = ""
    name = f"{fn.__name__}__{tag}"
    def_line = lines[def_index]
    check(f"def {fn.__name__}" in def_line, lambda: f"tlx.jit: cannot find `def {fn.__name__}` in its source")
    lines[def_index] = def_line.replace(f"def {fn.__name__}", f"def {name}", 1)
    pad = ["" for _ in range(src.first_line - 1)]
    text = "\n".join(pad + lines + [HASH_LINE]) + "\n"
    filename = f"<tlx {src.filename}:{fn.__name__}:{tag}>"
    kernel = GeneratedFunction(name, text, filename, tuple(splitter.params))
    names = set(_loaded_names([src.tree])) - splitter.kernel_locals
    return SplitKernel(kernel, splitter.tasks, src.filename, frozenset(names))
