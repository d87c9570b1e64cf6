"""The notebook widget's front end: the dashboard's own ES modules, bundled into one module, and its
stylesheet scoped to the widget.

anywidget hands the browser one ES module as a string (``_esm``), which cannot ``import`` relative
paths: there is no URL for them to be relative to. The dashboard's modules (``frontend/js``) have no
build step, so this module builds the widget's module from them, in Python, at first use:

1. Start at the widget's entry module (``frontend/widget/notebook.js``) and follow its static
   ``import { a, b as c } from "./x.js"`` statements (relative paths only) through the dashboard's
   modules, depth first; a cycle is an error.
2. Emit the modules in dependency order. Each module's body becomes the body of an arrow function,
   called once, whose result is an object of the module's exports (``export function f`` /
   ``export class C`` / ``export const x`` / ``export { a, b as c }`` lose their ``export`` keyword
   and are collected by name). Its imports become ``const { a, b: c } = __ss_js_lib_dom;``: the
   exporting module's object, already built. Every module keeps its own scope, so two modules may
   use the same top-level names.
3. The entry module stays at the top level (its ``export default`` is what anywidget loads); only
   its imports are rewritten.

This is exact for what the dashboard's modules use: static named imports of functions, classes and
constants. Bindings are read once, after the exporting module ran (so ``export let`` reassigned later
would not be seen: it is refused, as are default exports and ``import * as``/``export *`` from
modules other than the ones written here, dynamic ``import()`` and ``import.meta``). Nothing is
fetched: only files under the frontend directory are read, and the result names no external URL
(``tests/test_notebook.py`` checks).

The stylesheet is the dashboard's ``css/app.css`` plus the widget's own ``widget/notebook.css``,
with every rule scoped to the widget's root element (``.shardscope-nb``): ``:root`` and ``body``
become the root, other selectors are prefixed (but for the widget's own ``:global`` ones: the hover
card lives in the page's ``<body>``), and ``@media (prefers-color-scheme: dark)`` blocks
apply under the root's ``ss-dark`` class, which the widget sets from the notebook's own theme
(JupyterLab, VS Code, Colab) rather than the operating system's.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from sharding_core.errors import ShardingError
from shardscope.assets import frontend_dir

ENTRY = "widget/notebook.js"
"""The widget's entry module, relative to the frontend directory."""
STYLESHEETS = ("css/app.css", "widget/notebook.css")
ROOT_CLASS = "shardscope-nb"
DARK_CLASS = "ss-dark"
BUNDLE_ERROR = "bundle_error"

# ---- modules -----------------------------------------------------------------------------------------

_IMPORT = re.compile(
    r"^import\s*(?P<what>\{[^}]*\}|\*\s*as\s+\w+|\w+(?:\s*,\s*\{[^}]*\})?)\s*from\s*(?P<q>[\"'])(?P<src>[^\"']+)(?P=q)\s*;?",
    re.M,
)
_BARE_IMPORT = re.compile(r"^import\s*(?P<q>[\"'])(?P<src>[^\"']+)(?P=q)\s*;?", re.M)
_EXPORT_DECL = re.compile(
    r"^export\s+(?P<kw>async\s+function\s*\*?|function\s*\*?|class|const)\s*(?P<name>[A-Za-z_$][\w$]*)", re.M
)
_EXPORT_LIST = re.compile(r"^export\s*\{(?P<names>[^}]*)\}\s*(?P<from>from\s*[\"'][^\"']+[\"'])?\s*;?", re.M)
_EXPORT_DEFAULT = re.compile(r"^export\s+default\b", re.M)
_EXPORT_OTHER = re.compile(r"^export\b", re.M)
_DYNAMIC = re.compile(r"(?<![\w$.])import\s*\(|\bimport\.meta\b")
_JS_COMMENTS = re.compile(r"/\*.*?\*/|(?:^|(?<=\s))//[^\n]*", re.S | re.M)


@dataclass(frozen=True)
class Module:
    path: str  # relative to the frontend directory, "js/lib/dom.js"
    body: str  # the source with its import statements removed and its export keywords stripped
    imports: tuple[tuple[str, str], ...]  # (module path, destructuring pattern "a, b: c" or "* ns")
    exports: tuple[str, ...]  # "name" or "local: exported"

    @property
    def var(self) -> str:
        return "__ss_" + re.sub(r"\W", "_", self.path.removesuffix(".js"))


def _fail(message: str, path: str) -> ShardingError:
    return ShardingError(BUNDLE_ERROR, f"{path}: {message}", hint="see shardscope/notebook/bundle.py")


def _resolve(base: str, src: str, root: Path) -> str:
    if not src.startswith(("./", "../")):
        raise _fail(f"only relative imports can be bundled, got {src!r}", base)
    target = (root / base).parent / src
    resolved = target.resolve()
    if root.resolve() not in resolved.parents or not resolved.is_file():
        raise _fail(f"import {src!r} is not a file under the frontend directory", base)
    return resolved.relative_to(root.resolve()).as_posix()


def _pattern(what: str, path: str) -> str:
    """``{ a, b as c }`` → ``a, b: c`` (a destructuring pattern); ``* as ns`` → ``* ns``."""
    what = what.strip()
    if what.startswith("*"):
        return "* " + what.split()[-1]
    if not what.startswith("{"):
        raise _fail(f"default imports are not bundled (use named exports): import {what}", path)
    names = [n.strip() for n in what[1:-1].split(",") if n.strip()]
    return ", ".join(n if " as " not in n else "{}: {}".format(*(p.strip() for p in n.split(" as "))) for n in names)


def parse_module(path: str, source: str, root: Path, *, entry: bool = False) -> Module:
    """Reads one module's imports and exports, and its body without them."""
    if _DYNAMIC.search(_JS_COMMENTS.sub("", source)):  # JSDoc's {import("./x.js").T} is a comment
        raise _fail("dynamic import() and import.meta cannot be bundled", path)
    imports: list[tuple[str, str]] = []

    def take_import(m: re.Match[str]) -> str:
        imports.append((_resolve(path, m["src"], root), _pattern(m["what"], path)))
        return ""

    body = _IMPORT.sub(take_import, source)

    def take_bare(m: re.Match[str]) -> str:
        imports.append((_resolve(path, m["src"], root), ""))
        return ""

    body = _BARE_IMPORT.sub(take_bare, body)
    if entry:
        return Module(path, body, tuple(imports), ())
    if _EXPORT_DEFAULT.search(body):
        raise _fail("default exports are not bundled (use named exports)", path)
    exports: list[str] = []

    def take_decl(m: re.Match[str]) -> str:
        exports.append(m["name"])
        return m[0].removeprefix("export").lstrip()

    def take_list(m: re.Match[str]) -> str:
        if m["from"]:
            raise _fail("export ... from is not bundled: import the names, then export them", path)
        for n in (n.strip() for n in m["names"].split(",") if n.strip()):
            local, _, exported = (p.strip() for p in n.partition(" as "))
            exports.append(f"{exported}: {local}" if exported else local)
        return ""

    body = _EXPORT_DECL.sub(take_decl, body)
    body = _EXPORT_LIST.sub(take_list, body)
    left = _EXPORT_OTHER.search(body)
    if left:
        line = body[left.start() :].split("\n", 1)[0]
        raise _fail(f"unsupported export (export let/var/* would not stay live once bundled): {line[:80]!r}", path)
    return Module(path, body, tuple(imports), tuple(exports))


def _import_lines(module: Module, by_path: dict[str, Module]) -> str:
    lines = []
    for src, pattern in module.imports:
        var = by_path[src].var
        if not pattern:
            continue  # a side-effect import: the module ran already (it is in the bundle, in order)
        if pattern.startswith("* "):
            lines.append(f"const {pattern[2:]} = {var};")
        else:
            lines.append(f"const {{ {pattern} }} = {var};")
    return "\n".join(lines)


def bundle(root: Path, entry: str = ENTRY) -> str:
    """One ES module: ``entry`` and every module it imports, in dependency order (see the module doc)."""
    return bundle_with_files(root, entry)[0]


def bundle_with_files(root: Path, entry: str = ENTRY) -> tuple[str, list[str]]:
    """:func:`bundle`, and the modules it read (paths relative to ``root``, the entry last): the bundle is
    current while none of them changes."""
    modules: dict[str, Module] = {}
    order: list[str] = []
    visiting: list[str] = []

    def visit(path: str) -> None:
        if path in modules:
            return
        if path in visiting:
            cycle = " → ".join([*visiting[visiting.index(path) :], path])
            raise _fail(f"import cycle: {cycle}", path)
        visiting.append(path)
        source = (root / path).read_text(encoding="utf-8")
        module = parse_module(path, source, root, entry=path == entry)
        for src, _ in module.imports:
            visit(src)
        visiting.pop()
        modules[path] = module
        order.append(path)

    visit(entry)
    for module in modules.values():
        for src, pattern in module.imports:
            names = [p.split(":")[0].strip() for p in pattern.split(",")] if pattern and pattern[0] != "*" else []
            exported = {e.split(":")[0].strip() for e in modules[src].exports}
            missing = [n for n in names if n not in exported]
            if missing:
                raise _fail(f"imports {', '.join(missing)} which {src} does not export", module.path)
    parts = [
        f"// Shardscope's {entry}: the dashboard's ES modules, bundled by shardscope/notebook/bundle.py.",
        "// Generated; edit the modules under frontend/ instead (each begins at its '// ---- path' line).",
    ]
    for path in order[:-1]:
        m = modules[path]
        exports = ", ".join(m.exports)
        parts.append(
            f"// ---- {path}\nconst {m.var} = (() => {{\n{_import_lines(m, modules)}\n{m.body.strip()}\n"
            f"return Object.freeze({{ {exports} }});\n}})();"
        )
    top = modules[order[-1]]
    parts.append(f"// ---- {top.path} (entry)\n{_import_lines(top, modules)}\n{top.body.strip()}\n")
    return "\n".join(parts), order


# ---- stylesheet ---------------------------------------------------------------------------------------

_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_DARK_MEDIA = re.compile(r"^@media\s*\(\s*prefers-color-scheme\s*:\s*dark\s*\)$")


def _blocks(css: str) -> list[tuple[str, str]]:
    """Top-level ``(prelude, body)`` pairs; body is the text inside the braces (nested blocks kept)."""
    out: list[tuple[str, str]] = []
    i = 0
    n = len(css)
    while i < n:
        start = css.find("{", i)
        if start < 0:
            break
        depth = 0
        j = start
        while j < n:
            if css[j] == "{":
                depth += 1
            elif css[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        prelude = css[i:start].strip()
        if ";" in prelude:  # @import / @charset statements before the block: dropped (nothing is fetched)
            prelude = prelude.rsplit(";", 1)[1].strip()
        out.append((prelude, css[start + 1 : j]))
        i = j + 1
    return out


def _scope_selector(selector: str, scope: str) -> str:
    out = []
    for sel in (s.strip() for s in selector.split(",")):
        if sel.startswith(":global "):
            out.append(sel.removeprefix(":global ").strip())  # the widget's own rules for what lives in <body>
        elif sel in (":root", "body", "html"):
            out.append(scope)
        elif sel.startswith((":root ", "body ", "html ")):
            out.append(scope + " " + sel.split(" ", 1)[1])
        elif sel.startswith(("body[", "body.")):
            out.append(scope + " " + sel)  # a page's body state (kernel lab): never matches in a widget
        else:
            out.append(f"{scope} {sel}")
    return ", ".join(out)


def scope_css(css: str, root: str = "." + ROOT_CLASS, dark: str = DARK_CLASS) -> str:
    """``css`` with every rule applying only inside ``root``; dark-scheme media blocks under ``root.dark``."""

    def rules(text: str, scope: str) -> list[str]:
        out = []
        for prelude, body in _blocks(_COMMENT.sub("", text)):
            if _DARK_MEDIA.match(prelude):
                out.extend(rules(body, f"{scope}.{dark}"))
            elif prelude.startswith(("@media", "@supports", "@container", "@layer")):
                out.append(f"{prelude} {{\n" + "\n".join(rules(body, scope)) + "\n}")
            elif prelude.startswith("@"):
                out.append(f"{prelude} {{{body}}}")  # @keyframes, @font-face: not selectors
            else:
                out.append(f"{_scope_selector(prelude, scope)} {{ {body.strip()} }}")
        return out

    return "\n".join(rules(css, root)) + "\n"


# ---- what the widget loads ----------------------------------------------------------------------------


@functools.cache
def widget_esm() -> str:
    """The widget's front end as one ES module (built once per process)."""
    return bundle(frontend_dir())


@functools.cache
def widget_css() -> str:
    """The dashboard's stylesheet and the widget's own, scoped to the widget's root element."""
    root = frontend_dir()
    text = "\n".join(scope_css((root / name).read_text(encoding="utf-8")) for name in STYLESHEETS)
    names = ", ".join(STYLESHEETS)
    return f"/* Shardscope's notebook widget: {names} scoped by shardscope/notebook/bundle.py */\n{text}"


def fingerprint() -> str:
    """A short hash of the bundle and stylesheet (changes whenever a frontend module does)."""
    return hashlib.sha256((widget_esm() + widget_css()).encode()).hexdigest()[:12]
