"""RDF files -> a graph's label catalog (pgmr.kg.graph), read streaming by pyoxigraph: Turtle, N-Triples,
N-Quads, TriG, N3, RDF/XML (by file extension, optionally .gz).

The whole input is read before anything is returned, so a file that breaks half way raises `CatalogError`
naming the file and the line, and no caller ever builds a memory from half a graph. The prefixes a file
declares (`@prefix` lines, RDF/XML namespaces) are kept; namespaces of entries that no file names get a
generated prefix (pgmr.kg.iris.generated_prefixes).
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from pgmr.kg.catalog import CatalogError
from pgmr.kg.graph import GraphCatalog, GraphCatalogBuilder, GraphSettings, GraphTerm
from pgmr.kg.iris import generated_prefixes, namespace_of

# progress(triples read so far, total or 0 when unknown)
TripleProgress = Callable[[int, int], None]
PROGRESS_EVERY = 10_000
FORMAT_NAMES = ("ttl", "nt", "nq", "trig", "n3", "rdf", "owl", "xml")


def rdf_format(path: Path) -> Any:
    """The pyoxigraph RdfFormat of a file, from its extension (`.gz` looked through), or None. Only the
    extensions of FORMAT_NAMES: pyoxigraph alone would read a `.txt` as N-Triples."""
    import pyoxigraph as ox

    name = path.name.lower().removesuffix(".gz")
    extension = name.rsplit(".", 1)[-1] if "." in name else ""
    if extension not in FORMAT_NAMES:
        return None
    return ox.RdfFormat.RDF_XML if extension == "owl" else ox.RdfFormat.from_extension(extension)


def add_quad(builder: GraphCatalogBuilder, quad: Any) -> None:
    """One pyoxigraph quad into the builder; triples about blank nodes name nothing a query can write."""
    import pyoxigraph as ox

    subject, obj = quad.subject, quad.object
    if not isinstance(subject, ox.NamedNode):
        return
    if isinstance(obj, ox.Literal):
        builder.add(subject.value, quad.predicate.value, GraphTerm(obj.value, True, obj.language or ""))
    elif isinstance(obj, ox.NamedNode):
        builder.add(subject.value, quad.predicate.value, GraphTerm(obj.value))


def read_rdf_files(
    paths: Sequence[Path | str],
    settings: GraphSettings | None = None,
    progress: TripleProgress | None = None,
) -> GraphCatalog:
    """Every file's triples into one catalog. Raises CatalogError for a missing, unknown or broken file."""
    if not paths:
        raise CatalogError("no RDF file given")
    builder = GraphCatalogBuilder(settings)
    declared: dict[str, str] = {}
    for raw in paths:
        path = Path(raw)
        for name, namespace in _read_file(path, builder, progress).items():
            # The first file to name a prefix or a namespace keeps it.
            if name not in declared and namespace not in declared.values():
                declared[name] = namespace
    if progress:
        progress(builder.triples, builder.triples)
    return finish(builder, declared, [str(Path(p)) for p in paths])


def finish(builder: GraphCatalogBuilder, declared: dict[str, str], sources: Iterable[str]) -> GraphCatalog:
    """The catalog with the declared prefixes plus generated ones for entry namespaces no prefix names."""
    catalog = builder.build(declared, sources)
    if not len(catalog):
        raise CatalogError(
            f"no IRI in {', '.join(catalog.sources)} has a label: pgmr looks for "
            f"{', '.join(builder.settings.label_predicates)} (add predicates with --label-predicate)"
        )
    catalog.prefixes.update(generated_prefixes({namespace_of(e.id) for e in catalog}, declared))
    return catalog


def _read_file(path: Path, builder: GraphCatalogBuilder, progress: TripleProgress | None) -> dict[str, str]:
    import pyoxigraph as ox

    if not path.is_file():
        raise CatalogError(f"{path}: no such file")
    fmt = rdf_format(path)
    if fmt is None:
        raise CatalogError(
            f"{path}: unknown RDF format; name the file by its format ({', '.join('.' + f for f in FORMAT_NAMES)}, "
            "optionally .gz)"
        )
    try:
        compressed = path.name.lower().endswith(".gz")
        with gzip.open(path, "rb") if compressed else path.open("rb") as handle:
            parser = ox.parse(handle, fmt)  # type: ignore[arg-type]  # a binary file object, as it asks
            for quad in parser:
                add_quad(builder, quad)
                if progress and builder.triples % PROGRESS_EVERY == 0:
                    progress(builder.triples, 0)
            return dict(parser.prefixes or {})
    except SyntaxError as exc:
        raise CatalogError(f"{path} is not valid {fmt.name}: {exc.msg}") from None
    except (OSError, EOFError, ValueError) as exc:
        raise CatalogError(f"cannot read {path}: {exc}") from None


__all__ = ["FORMAT_NAMES", "add_quad", "finish", "rdf_format", "read_rdf_files"]
